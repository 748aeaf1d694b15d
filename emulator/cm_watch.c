// SPDX-License-Identifier: MIT
/*
 * The CM's watch on its peers' lives: see cm_watch.h.
 *
 * A pid can be reused once its process has gone, so the descriptor is
 * opened first and the peer's liveness (node_proc_alive: its lock in the
 * node file, held for as long as it lives) checked after: if the peer
 * still lives then, the pid was still its own when the descriptor was
 * opened.
 */
#include "config.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cm_watch.h"
#include "node.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* Linux 5.3, the same number on every arch */
#endif

void cm_watch_init(struct cm_watch *w)
{
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		w->peer[i].fd = -1;
		w->peer[i].token = 0;
	}
	w->nr_open = 0;
}

void cm_watch_drop(struct cm_watch *w, int32_t slot)
{
	if (slot < 0 || slot >= IBEMU_MAX_PROCS)
		return;
	if (w->peer[slot].fd >= 0) {
		close(w->peer[slot].fd);
		w->nr_open--;
	}
	w->peer[slot].fd = -1;
	w->peer[slot].token = 0;
}

void cm_watch_fini(struct cm_watch *w)
{
	int32_t i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		cm_watch_drop(w, i);
}

bool cm_watch_peer(struct cm_watch *w, struct node *node, int32_t slot,
		   uint64_t token)
{
	struct node_proc_id id;
	long fd;

	if (slot < 0 || slot >= IBEMU_MAX_PROCS || !token ||
	    slot == node->proc_slot)
		return false;
	if (w->peer[slot].token == token)
		return w->peer[slot].fd >= 0;
	cm_watch_drop(w, slot); /* a process gone from the slot */
	w->peer[slot].token = token;
	w->peer[slot].fd = -2;
	if (node_proc_id(node, slot, &id) || id.token != token ||
	    !id.same_pidns || id.pid <= 0)
		return false;
	fd = syscall(SYS_pidfd_open, (long)id.pid, 0L);
	if (fd < 0)
		return false;
	if (!node_proc_alive(node, slot) ||
	    atomic_load_explicit(&node->seg->procs[slot].token,
				 memory_order_acquire) != token) {
		/* gone already: looked at, and found gone, at once */
		close((int)fd);
		return false;
	}
	w->peer[slot].fd = (int)fd;
	w->nr_open++;
	return true;
}

unsigned int cm_watch_fill(const struct cm_watch *w, struct pollfd *pfd,
			   int32_t *slots, unsigned int max)
{
	unsigned int n = 0;
	int32_t i;

	for (i = 0; i < IBEMU_MAX_PROCS && n < max && n < w->nr_open; i++) {
		if (w->peer[i].fd < 0)
			continue;
		pfd[n].fd = w->peer[i].fd;
		pfd[n].events = POLLIN;
		pfd[n].revents = 0;
		slots[n++] = i;
	}
	return n;
}
