// SPDX-License-Identifier: MIT
/*
 * The machine's floor for moving bytes: copy bandwidth between two
 * buffers at each message size, the median of several runs, with the
 * copy ibemu places data with (cpu_copy, emulator/base/cpu.h: the C library's
 * memcpy, or REP MOVSB for a large copy where the CPU has ERMS).  A copy
 * is what any software transport pays at least once per byte.
 *
 *   memcpy_bw [-r RUNS] [-t MS] [-q] [SIZE...]   (default 8 4096 65536 1048576)
 *     -t  time each run takes, about (default 50 ms)
 *     -q  print "SIZE GB/s" lines only (GB = 10^9 bytes)
 */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "median.h"

#define MAX_RUNS 101

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Copy @iters times; the barrier keeps the compiler from eliding copies. */
static double copy_loop(char *dst, const char *src, size_t size, long iters)
{
	double t0 = now_s();
	long i;

	for (i = 0; i < iters; i++) {
		/* The copy ibemu places with (emulator/base/cpu.h). */
		cpu_copy(dst, src, size);
		__asm__ volatile("" : : "r"(dst), "r"(src) : "memory");
	}
	return now_s() - t0;
}

/* GB/s for @size: calibrate an iteration count to @ms, then run @runs. */
static int measure(size_t size, int runs, double ms, int quiet, double *gbs)
{
	double bw[MAX_RUNS], t;
	char *src, *dst;
	long iters = 1;
	int i;

	if (posix_memalign((void **)&src, 4096, size) ||
	    posix_memalign((void **)&dst, 4096, size)) {
		fprintf(stderr, "memcpy_bw: cannot allocate 2 x %zu bytes\n",
			size);
		return -1;
	}
	memset(src, 0x5a, size);
	memset(dst, 0xa5, size);

	/* Double until one loop takes a tenth of a run; also warms up. */
	while ((t = copy_loop(dst, src, size, iters)) < ms / 1e4)
		iters *= 2;
	iters = (long)((double)iters * (ms / 1e3) / t) + 1;

	for (i = 0; i < runs; i++) {
		t = copy_loop(dst, src, size, iters);
		bw[i] = (double)size * (double)iters / t / 1e9;
		if (!quiet)
			printf("size %zu run %d: %.2f GB/s\n", size, i + 1,
			       bw[i]);
	}
	*gbs = median(bw, runs);
	free(src);
	free(dst);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: memcpy_bw [-r RUNS] [-t MS] [-q] [SIZE...]\n");
}

int main(int argc, char *argv[])
{
	static const size_t default_sizes[] = { 8, 4096, 65536, 1048576 };
	int runs = 5, quiet = 0, c, i, n;
	double ms = 50, gbs;

	while ((c = getopt(argc, argv, "r:t:qh")) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 't':
			ms = atof(optarg);
			break;
		case 'q':
			quiet = 1;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || ms <= 0) {
		usage();
		return 2;
	}

	n = optind < argc ? argc - optind : 4;
	for (i = 0; i < n; i++) {
		size_t size = optind < argc ?
			(size_t)strtoull(argv[optind + i], NULL, 0) :
			default_sizes[i];

		if (!size) {
			fprintf(stderr, "memcpy_bw: bad size '%s'\n",
				argv[optind + i]);
			return 2;
		}
		if (measure(size, runs, ms, quiet, &gbs))
			return 1;
		if (quiet)
			printf("%zu %.3f\n", size, gbs);
		else
			printf("size %zu: median of %d runs %.2f GB/s\n", size,
			       runs, gbs);
	}
	return 0;
}
