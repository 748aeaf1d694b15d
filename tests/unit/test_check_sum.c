// SPDX-License-Identifier: MIT
/*
 * The checking mode's buffer sums (check.c): a buffer up to 16 KiB is
 * summed whole, so any one byte changed changes its sum; a larger one is
 * sampled, so a change in its first or last 4 KiB, or in the first 64
 * bytes of any 4 KiB step between, changes it, and a change past those
 * 64 bytes inside a step does not (what ibemu(1) CHECKS says it misses).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "check.h"

#define SMALL 16384u
#define LARGE (64u * 1024u + 100u)

static unsigned char *filled(size_t len)
{
	unsigned char *b = malloc(len);
	size_t i;

	for (i = 0; b && i < len; i++)
		b[i] = (unsigned char)(i * 7 + 3);
	return b;
}

/* Whether changing byte at of buf[len] changes its buffer sum. */
static int seen(unsigned char *buf, size_t len, size_t at)
{
	uint64_t before = check_sum_buffer(buf, len), after;

	buf[at] ^= 0x40;
	after = check_sum_buffer(buf, len);
	buf[at] ^= 0x40;
	return before != after;
}

static void test_small_whole(void)
{
	unsigned char *b = filled(SMALL);
	size_t i, missed = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	for (i = 0; i < SMALL; i++)
		missed += !seen(b, SMALL, i);
	CU_ASSERT_EQUAL(missed, 0);
	free(b);
}

static void test_large_sampled(void)
{
	unsigned char *b = filled(LARGE);
	size_t off;

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT(seen(b, LARGE, 0));
	CU_ASSERT(seen(b, LARGE, 4095));
	CU_ASSERT(seen(b, LARGE, LARGE - 1));
	CU_ASSERT(seen(b, LARGE, LARGE - 4096));
	for (off = 4096; off + 64 <= LARGE - 4096; off += 4096) {
		CU_ASSERT(seen(b, LARGE, off));
		CU_ASSERT(seen(b, LARGE, off + 63));
	}
	/* Past the probe of a step: not read, not seen. */
	CU_ASSERT(!seen(b, LARGE, 4096 + 64));
	CU_ASSERT(!seen(b, LARGE, 8192 + 1000));
	free(b);
}

/* The same bytes give the same sum; the length is part of it. */
static void test_stable(void)
{
	unsigned char *b = filled(LARGE);

	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT_EQUAL(check_sum_buffer(b, LARGE), check_sum_buffer(b, LARGE));
	CU_ASSERT_NOT_EQUAL(check_sum_buffer(b, 100), check_sum_buffer(b, 101));
	free(b);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "16 KiB summed whole", test_small_whole },
		{ "a large buffer sampled", test_large_sampled },
		{ "stable, and bound to the length", test_stable },
		{ NULL, NULL },
	};

	return unit_run("check_sum", tests);
}
