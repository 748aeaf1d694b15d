/* SPDX-License-Identifier: MIT */
/* A fuzzer's input, consumed front to back; zeros once it runs out. */
#ifndef IBEMU_FUZZ_INPUT_H
#define IBEMU_FUZZ_INPUT_H

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

#endif /* IBEMU_FUZZ_INPUT_H */
