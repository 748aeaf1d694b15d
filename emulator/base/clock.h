/* SPDX-License-Identifier: MIT */
/*
 * The clocks, in nanoseconds: CLOCK_MONOTONIC for deadlines and
 * timeouts, its coarse variant for millisecond timers on the fast path
 * (one tick, about 4 ms, costs no system call), and any clock by id.
 */
#ifndef IBEMU_CLOCK_H
#define IBEMU_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t clock_now_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC);
}

static inline uint64_t clock_coarse_ns(void)
{
	return clock_ns(CLOCK_MONOTONIC_COARSE);
}

#endif /* IBEMU_CLOCK_H */
