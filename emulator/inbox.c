// SPDX-License-Identifier: MIT
/* The shared-memory transport's inbox (see inbox.h for the protocol). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "inbox.h"
#include "log.h"
#include "node.h"
#include "shmfile.h"

static void inbox_name(char *buf, size_t len, const char *node_name,
		       pid_t pid, uint64_t start_time)
{
	snprintf(buf, len, "%s-p%d-%" PRIu64, node_name, (int)pid, start_time);
}

int inbox_create(const char *node_name, struct inbox **ib_p, char *name,
		 size_t name_len)
{
	pid_t pid = getpid();
	struct inbox *ib;
	uint64_t start;
	uint32_t i;
	void *map;
	int ret;

	/* The start time names the inbox, as in the node segment. */
	start = node_proc_start_time(pid);
	inbox_name(name, name_len, node_name, pid, start);
	shmfile_unlink(name); /* a leftover of a process with our pid */
	ret = shmfile_create(name, sizeof(*ib), "process inbox", &map);
	if (ret)
		return ret;
	ib = map;
	ib->pid = pid;
	ib->start_time = start;
	ib->self_addr = (uintptr_t)ib;
	atomic_init(&ib->head, 0);
	atomic_init(&ib->tail, 0);
	for (i = 0; i < INBOX_SLOTS; i++)
		atomic_init(&ib->slots[i].seq, i);
	atomic_thread_fence(memory_order_release);
	ib->magic = INBOX_MAGIC;
	*ib_p = ib;
	return 0;
}

int inbox_map(const char *node_name, pid_t pid, uint64_t start_time,
	      struct inbox **ib_p)
{
	char name[160];
	struct inbox *ib;
	void *map;
	int fd, ret;

	inbox_name(name, sizeof(name), node_name, pid, start_time);
	fd = shmfile_open(name, "process inbox");
	if (fd < 0)
		return fd;
	/* Shorter than an inbox: not one of this layout; never map past
	 * its end. */
	ret = shmfile_map(fd, sizeof(*ib), &map);
	close(fd);
	if (ret)
		return ret == -EAGAIN ? -EPERM : ret;
	ib = map;
	if (ib->magic != INBOX_MAGIC) {
		munmap(ib, sizeof(*ib));
		return -EAGAIN;
	}
	*ib_p = ib;
	return 0;
}

void inbox_unmap(struct inbox *ib)
{
	munmap(ib, sizeof(*ib));
}

void inbox_unlink(const char *node_name, pid_t pid, uint64_t start_time)
{
	char name[160];

	inbox_name(name, sizeof(name), node_name, pid, start_time);
	shmfile_unlink(name);
}

/* Times a claim finds a slot ahead of a tail that does not move before it
 * gives up (see inbox_claim). */
#define INBOX_CLAIM_STALLS 1024

struct inbox_slot *inbox_claim(struct inbox *ib, uint64_t *pos_p)
{
	uint64_t pos = atomic_load_explicit(&ib->tail, memory_order_relaxed);
	unsigned int stalls = 0;
	struct inbox_slot *s;
	uint64_t tail;
	int64_t dif;

	for (;;) {
		s = &ib->slots[pos & (INBOX_SLOTS - 1)];
		dif = (int64_t)(atomic_load_explicit(&s->seq,
						     memory_order_acquire) -
				pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(
				    &ib->tail, &pos, pos + 1,
				    memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (dif < 0) {
			return NULL; /* full */
		} else {
			/* Another producer took pos: look again.  A slot
			 * ahead of a tail that stays put was written by no
			 * producer (a peer wrote garbage): give up, as if
			 * full, rather than spin for good. */
			tail = atomic_load_explicit(&ib->tail,
						    memory_order_relaxed);
			if (tail == pos && ++stalls > INBOX_CLAIM_STALLS)
				return NULL;
			pos = tail;
		}
	}
	*pos_p = pos;
	return s;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

void inbox_wake(struct inbox *ib)
{
	atomic_store(&ib->sleeping, 0);
	atomic_fetch_add(&ib->wake, 1);
	futex(&ib->wake, FUTEX_WAKE, 1, NULL);
}

void inbox_publish(struct inbox *ib, struct inbox_slot *s, uint64_t pos)
{
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	/* Store-load order against the sleeper's flag-then-check. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&ib->sleeping, memory_order_relaxed))
		inbox_wake(ib);
}

static void ns_to_timespec(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

void inbox_nap(struct inbox *ib, uint64_t timeout_ns)
{
	uint32_t v = atomic_load(&ib->wake);
	struct timespec ts;

	ns_to_timespec(timeout_ns, &ts);
	futex(&ib->wake, FUTEX_WAIT, v, &ts);
}

void inbox_sleep(struct inbox *ib, uint64_t timeout_ns, atomic_bool *more)
{
	uint32_t v = atomic_load(&ib->wake);
	struct timespec ts, *tsp = NULL;

	atomic_store(&ib->sleeping, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (inbox_peek(ib) || (more && atomic_load(more))) {
		atomic_store(&ib->sleeping, 0);
		return;
	}
	if (timeout_ns) {
		ns_to_timespec(timeout_ns, &ts);
		tsp = &ts;
	}
	futex(&ib->wake, FUTEX_WAIT, v, tsp);
	atomic_store(&ib->sleeping, 0);
}
