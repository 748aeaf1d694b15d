/* SPDX-License-Identifier: MIT */
/*
 * The CM's watch on its peers' lives (cm_watch.c), so the CM thread
 * learns of a peer's end by sleeping in poll, with no periodic look:
 * a process descriptor (pidfd) per peer process of this node, readable
 * once that process has exited; for a peer process of another node
 * (a remote slot, transport.h), a descriptor of the TCP connection to
 * it (the network transport's peer_watch_fd), which reports a hang-up
 * once that process has exited or its connection broke.  A peer whose pid means nothing
 * in our pid namespace, a kernel without pidfds, or more remote peers
 * than CM_WATCH_REMOTE, is looked at every CM_LIVENESS_MS instead
 * (cm_timer.c).
 *
 * Lock rule: the table is the CM thread's and is used under cm.lock.
 */
#ifndef IBEMU_CM_WATCH_H
#define IBEMU_CM_WATCH_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>

#include "params.h"

struct engine;
struct node;

#define CM_WATCH_REMOTE 64 /* remote peers watched by a descriptor */
#define CM_WATCH_MAX (IBEMU_MAX_PROCS + CM_WATCH_REMOTE)

struct cm_watch_ent {
	int fd; /* -1: none yet; -2: cannot be watched this way */
	uint64_t token;
	int32_t slot; /* remote entries: the slot, -1: free */
	bool used; /* remote entries: asked for since the last sweep */
};

struct cm_watch {
	/* by node process slot: the pidfd of the process holding token */
	struct cm_watch_ent peer[IBEMU_MAX_PROCS];
	/* remote slots: the connection's descriptor */
	struct cm_watch_ent remote[CM_WATCH_REMOTE];
	unsigned int nr_open;
};

void cm_watch_init(struct cm_watch *w);
void cm_watch_fini(struct cm_watch *w);
/* Watch the process in slot (of this node, or a remote slot reached
 * through e's network transport) holding token: true if its end will
 * make a descriptor of cm_watch_fill report an event, false if it must
 * be looked at. */
bool cm_watch_peer(struct cm_watch *w, struct node *node, struct engine *e,
		   int32_t slot, uint64_t token);
/* The open descriptors into pfd (at most max); how many, and slots[i]
 * the slot of pfd[i]. */
unsigned int cm_watch_fill(const struct cm_watch *w, struct pollfd *pfd,
			   int32_t *slots, unsigned int max);
/* slot's process ended: its descriptor is closed. */
void cm_watch_drop(struct cm_watch *w, int32_t slot);
/* Close the descriptors of remote peers not asked for (cm_watch_peer)
 * since the last sweep: no id talks to them any more. */
void cm_watch_sweep(struct cm_watch *w);

#endif /* IBEMU_CM_WATCH_H */
