/* SPDX-License-Identifier: MIT */
/* The median of a run of measurements (the machines are noisy). */
#ifndef IBEMU_BENCH_MEDIAN_H
#define IBEMU_BENCH_MEDIAN_H

#include <stdlib.h>

static int median_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Sorts v in place. */
static inline double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), median_cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif /* IBEMU_BENCH_MEDIAN_H */
