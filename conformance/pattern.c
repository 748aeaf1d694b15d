// SPDX-License-Identifier: MIT
/*
 * Data patterns of the conformance suite: deterministic payloads that a
 * receiver can check byte for byte without a copy of what was sent.
 */
#include "conformance.h"

/* The next value of Marsaglia's xorshift64 generator. */
static uint64_t cf_xorshift_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* Byte i of the pattern of seed, drawn from the generator state *s. */
static uint8_t cf_pattern_byte(size_t i, uint64_t *s, uint64_t *v)
{
	if (!(i & 7))
		*v = cf_xorshift_next(s);
	return (uint8_t)(*v >> ((i & 7) * 8));
}

static uint64_t cf_pattern_seed(uint64_t seed)
{
	return seed * 0x9e3779b97f4a7c15ull + 1;
}

void cf_pattern_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t s = cf_pattern_seed(seed), v = 0;
	uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		b[i] = cf_pattern_byte(i, &s, &v);
}

long cf_pattern_check(const void *buf, size_t len, uint64_t seed)
{
	uint64_t s = cf_pattern_seed(seed), v = 0;
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != cf_pattern_byte(i, &s, &v))
			return (long)i;
	return -1;
}

long cf_bytes_check(const void *buf, size_t len, uint8_t c)
{
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != c)
			return (long)i;
	return -1;
}
