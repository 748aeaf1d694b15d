// SPDX-License-Identifier: MIT
/*
 * The checking mode's watch over completion channels (check_arm.h).
 *
 * A CQ gives one completion event per ibv_req_notify_cq (ibv_get_cq_event(3):
 * "the CQ must be re-armed"; IBA 11.4.2.2): a program that takes an event,
 * polls, and waits again without re-arming waits for ever while
 * completions pile up.  Every CQ whose event the program took is watched:
 * twice a second a thread of the checking mode looks for one with
 * completions waiting and no arm, and for a thread of the process blocked
 * in read(2) on that CQ's channel (its /proc/self/task/TID/syscall), where
 * ibv_get_cq_event blocks, the CQ not polled since the look before.  Seen
 * so at two looks in a row it is reported,
 * with the stack of the ibv_get_cq_event that took the CQ's last event.
 *
 * Lock rule: watch_lock protects the watched list and each watched CQ's
 * check_next, check_stuck and check_last_event; destroy takes the CQ out
 * under it before the CQ goes.
 */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check_arm.h"
#include "emu.h"

static pthread_mutex_t watch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibemu_cq *watched;
static bool watcher_started;

/* Whether a thread of ours is in read(2) on fd (Linux proc(5)). */
static bool reader_blocked(int fd)
{
	char path[64], line[256];
	struct dirent *d;
	unsigned long long arg0;
	long nr;
	DIR *dir;
	FILE *f;
	bool found = false;

	dir = opendir("/proc/self/task");
	if (!dir)
		return false;
	while (!found && (d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%.20s/syscall",
			 d->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fgets(line, sizeof(line), f) &&
		    sscanf(line, "%ld %llx", &nr, &arg0) == 2 &&
		    nr == SYS_read && arg0 == (unsigned long long)fd)
			found = true;
		fclose(f);
	}
	closedir(dir);
	return found;
}

static void watch_one_locked(struct ibemu_cq *cq)
{
	struct ibv_cq *ibcq = &cq->vcq.cq;
	unsigned int polls = atomic_load(&cq->check_polls);
	bool polled = polls != cq->check_polls_seen;

	cq->check_polls_seen = polls;
	/* A CQ polled since the last look is being drained: its program
	 * may re-arm it when done. */
	if (cq->check_said || polled || !ibcq->channel ||
	    !emu_cq_waits_unarmed(cq->ecq) ||
	    !reader_blocked(ibcq->channel->fd)) {
		cq->check_stuck = 0;
		return;
	}
	if (++cq->check_stuck < 2)
		return;
	cq->check_said = true;
	check_report_at(CHECK_CQ_NOT_ARMED, (uintptr_t)ibcq,
			&cq->check_last_event,
			"CQ %p has completions waiting and was not re-armed by "
			"ibv_req_notify_cq after its last event, while a thread "
			"blocks in ibv_get_cq_event on its channel (fd %d)",
			(void *)ibcq, ibcq->channel->fd);
}

static void *watcher(void *arg)
{
	struct timespec half = {0, 500000000};
	struct ibemu_cq *cq;

	(void)arg;
	for (;;) {
		nanosleep(&half, NULL);
		pthread_mutex_lock(&watch_lock);
		for (cq = watched; cq; cq = cq->check_next)
			watch_one_locked(cq);
		pthread_mutex_unlock(&watch_lock);
	}
	return NULL;
}

/* A child of fork has no watcher, and watches its own CQs. */
static void watch_child(void)
{
	pthread_mutex_init(&watch_lock, NULL);
	watched = NULL;
	watcher_started = false;
}

static void register_child(void)
{
	pthread_atfork(NULL, NULL, watch_child);
}

void check_arm_event_slow(struct ibemu_cq *cq)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_t t;
	sigset_t all, old;

	pthread_once(&once, register_child);
	pthread_mutex_lock(&watch_lock);
	check_stack_here(&cq->check_last_event);
	cq->check_stuck = 0;
	if (!cq->check_watched) {
		cq->check_watched = true;
		cq->check_next = watched;
		watched = cq;
	}
	if (!watcher_started) {
		/* The watcher takes no signal of the program's. */
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		if (!pthread_create(&t, NULL, watcher, NULL)) {
			pthread_detach(t);
			watcher_started = true;
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	pthread_mutex_unlock(&watch_lock);
}

void check_arm_forget_slow(struct ibemu_cq *cq)
{
	struct ibemu_cq **p;

	pthread_mutex_lock(&watch_lock);
	for (p = &watched; *p; p = &(*p)->check_next)
		if (*p == cq) {
			*p = cq->check_next;
			cq->check_watched = false; /* a failed destroy: again */
			break;
		}
	pthread_mutex_unlock(&watch_lock);
}
