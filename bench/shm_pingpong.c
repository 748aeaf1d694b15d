// SPDX-License-Identifier: MIT
/*
 * The machine's floor for a same-host message: two processes bounce a
 * counter through two cache lines of one MAP_SHARED mapping, each busy
 * polling for the other's store.  Half a round trip is the one-way latency
 * no shared-memory transport can beat.  Reports the median of several runs.
 *
 *   shm_pingpong [-r RUNS] [-n ITERS] [-a] [-t] [-q]
 *     -a  pin the two processes to CPUs 0 and 1
 *     -t  poll in a tight loop, as perftest's latency tests poll their
 *         buffer, instead of with a pause hint between two looks
 *     -q  print only the median one-way latency in ns
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cpu.h"
#include "median.h"

#define CACHE_LINE 64
#define MAX_RUNS 101

struct shared {
	alignas(CACHE_LINE) _Atomic uint64_t ping;	/* written by the parent */
	alignas(CACHE_LINE) _Atomic uint64_t pong;	/* written by the child */
	alignas(CACHE_LINE) _Atomic int stop;
};

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* -t: no pause hint between two looks at the other's line. */
static bool tight;

static void spin_pause(void)
{
	if (!tight)
		cpu_relax();
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set))
		fprintf(stderr, "shm_pingpong: cannot pin to CPU %d: %s\n",
			cpu, strerror(errno));
}

/* The child answers every ping with the same value until told to stop. */
static void responder(struct shared *sh)
{
	uint64_t seen = 0, v;

	while (!atomic_load_explicit(&sh->stop, memory_order_relaxed)) {
		v = atomic_load_explicit(&sh->ping, memory_order_acquire);
		if (v != seen) {
			seen = v;
			atomic_store_explicit(&sh->pong, v,
					      memory_order_release);
		} else {
			spin_pause();
		}
	}
}

/* One run of @iters round trips; returns the one-way latency in ns. */
static double run_once(struct shared *sh, uint64_t *seq, long iters)
{
	double t0, t1;
	long i;

	t0 = now_ns();
	for (i = 0; i < iters; i++) {
		uint64_t v = ++*seq;

		atomic_store_explicit(&sh->ping, v, memory_order_release);
		while (atomic_load_explicit(&sh->pong, memory_order_acquire) !=
		       v)
			spin_pause();
	}
	t1 = now_ns();
	return (t1 - t0) / (double)iters / 2;
}

static void usage(void)
{
	fprintf(stderr, "usage: shm_pingpong [-r RUNS] [-n ITERS] [-a] [-t] [-q]\n");
}

int main(int argc, char *argv[])
{
	double lat[MAX_RUNS];
	long iters = 200000;
	int runs = 5, c, i, status;
	bool affinity = false, quiet = false;
	struct shared *sh;
	uint64_t seq = 0;
	pid_t child;

	while ((c = getopt(argc, argv, "r:n:atqh")) != -1) {
		switch (c) {
		case 'r':
			runs = atoi(optarg);
			break;
		case 'n':
			iters = atol(optarg);
			break;
		case 'a':
			affinity = true;
			break;
		case 't':
			tight = true;
			break;
		case 'q':
			quiet = true;
			break;
		default:
			usage();
			return c == 'h' ? 0 : 2;
		}
	}
	if (runs < 1 || runs > MAX_RUNS || iters < 1) {
		usage();
		return 2;
	}

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("shm_pingpong: mmap");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));

	child = fork();
	if (child < 0) {
		perror("shm_pingpong: fork");
		return 1;
	}
	if (child == 0) {
		if (affinity)
			pin(1);
		responder(sh);
		_exit(0);
	}
	if (affinity)
		pin(0);

	/* Warm up: both processes running and the lines bouncing. */
	run_once(sh, &seq, iters / 10 + 1);
	for (i = 0; i < runs; i++) {
		lat[i] = run_once(sh, &seq, iters);
		if (!quiet)
			printf("run %d: %.1f ns one-way\n", i + 1, lat[i]);
	}

	atomic_store(&sh->stop, 1);
	if (waitpid(child, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		fprintf(stderr, "shm_pingpong: the responder failed\n");
		return 1;
	}

	if (quiet)
		printf("%.1f\n", median(lat, runs));
	else
		printf("one-way latency median of %d runs of %ld round trips: %.1f ns\n",
		       runs, iters, median(lat, runs));
	return 0;
}
