/* SPDX-License-Identifier: MIT */
/* A fuzzer's input, consumed front to back; zeros once it runs out. */
#ifndef IBEMU_FUZZ_INPUT_H
#define IBEMU_FUZZ_INPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct input {
	const uint8_t *p;
	size_t n;
};

static inline void take(struct input *in, void *dst, size_t len)
{
	size_t k = in->n < len ? in->n : len;

	memcpy(dst, in->p, k);
	memset((uint8_t *)dst + k, 0, len - k);
	in->p += k;
	in->n -= k;
}

static inline uint32_t take32(struct input *in)
{
	uint32_t v;

	take(in, &v, sizeof(v));
	return v;
}

static inline uint64_t take64(struct input *in)
{
	uint64_t v;

	take(in, &v, sizeof(v));
	return v;
}

/* The next record of a harness that reads its input as records: a
 * selector byte, a 16-bit little-endian length, then that many bytes
 * (fewer at the end).  false when fewer than 3 bytes are left. */
static inline bool take_record(struct input *in, uint8_t *sel_p,
			       const uint8_t **rec_p, uint16_t *len_p)
{
	uint16_t n;

	if (in->n < 3)
		return false;
	*sel_p = in->p[0];
	n = (uint16_t)(in->p[1] | in->p[2] << 8);
	in->p += 3;
	in->n -= 3;
	if (n > in->n)
		n = (uint16_t)in->n;
	*rec_p = in->p;
	*len_p = n;
	in->p += n;
	in->n -= n;
	return true;
}

#endif /* IBEMU_FUZZ_INPUT_H */
