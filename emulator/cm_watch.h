/* SPDX-License-Identifier: MIT */
/*
 * The CM's watch on its peers' lives (cm_watch.c): a process descriptor
 * (pidfd) per peer process, readable once that process has exited, so
 * the CM thread learns of a peer's death by sleeping in poll, with no
 * periodic look.  A peer whose pid means nothing in our pid namespace,
 * or a kernel without pidfds, is looked at every CM_LIVENESS_MS instead
 * (cm.c).
 *
 * Lock rule: the table is the CM thread's and is used under cm.lock.
 */
#ifndef IBEMU_CM_WATCH_H
#define IBEMU_CM_WATCH_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "params.h"

struct node;

struct cm_watch {
	/* by node process slot: the pidfd (-1: none yet; -2: cannot be
	 * watched this way) of the process holding token */
	struct {
		int fd;
		uint64_t token;
	} peer[IBEMU_MAX_PROCS];
	unsigned int nr_open;
};

void cm_watch_init(struct cm_watch *w);
void cm_watch_fini(struct cm_watch *w);
/* Watch the process in slot holding token: true if its exit will make a
 * descriptor of cm_watch_fill readable, false if it must be looked at. */
bool cm_watch_peer(struct cm_watch *w, struct node *node, int32_t slot,
		   uint64_t token);
/* The open descriptors into pfd (at most max); how many, and slots[i]
 * the slot of pfd[i]. */
unsigned int cm_watch_fill(const struct cm_watch *w, struct pollfd *pfd,
			   int32_t *slots, unsigned int max);
/* slot's process exited: its descriptor is closed. */
void cm_watch_drop(struct cm_watch *w, int32_t slot);

#endif /* IBEMU_CM_WATCH_H */
