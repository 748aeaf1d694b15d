// SPDX-License-Identifier: MIT
/*
 * The CM's watch on its peers' lives: see cm_watch.h.
 *
 * A pid can be reused once its process has gone, so the descriptor is
 * opened first and the peer's liveness (node_proc_alive: its lock in the
 * node file, held for as long as it lives) checked after: if the peer
 * still lives then, the pid was still its own when the descriptor was
 * opened.  A remote slot's descriptor is taken only while its
 * connection is up and to the process holding token (the transport's
 * peer_watch_fd checks both), so it watches that process's connection
 * and no other.
 */
#include "config.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cm_watch.h"
#include "node.h"
#include "engine.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434 /* Linux 5.3, the same number on every arch */
#endif

static void ent_reset(struct cm_watch_ent *p)
{
	p->fd = -1;
	p->token = 0;
	p->slot = -1;
	p->used = false;
}

static void ent_close(struct cm_watch *w, struct cm_watch_ent *p)
{
	if (p->fd >= 0) {
		close(p->fd);
		w->nr_open--;
	}
	ent_reset(p);
}

void cm_watch_init(struct cm_watch *w)
{
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		ent_reset(&w->peer[i]);
	for (i = 0; i < CM_WATCH_REMOTE; i++)
		ent_reset(&w->remote[i]);
	w->nr_open = 0;
}

static struct cm_watch_ent *remote_find(struct cm_watch *w, int32_t slot)
{
	unsigned int i;

	for (i = 0; i < CM_WATCH_REMOTE; i++)
		if (w->remote[i].slot == slot)
			return &w->remote[i];
	return NULL;
}

void cm_watch_drop(struct cm_watch *w, int32_t slot)
{
	struct cm_watch_ent *p;

	if (tp_slot_is_remote(slot)) {
		p = remote_find(w, slot);
		if (p)
			ent_close(w, p);
		return;
	}
	if (slot < 0)
		return;
	ent_close(w, &w->peer[slot]);
}

void cm_watch_fini(struct cm_watch *w)
{
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		ent_close(w, &w->peer[i]);
	for (i = 0; i < CM_WATCH_REMOTE; i++)
		ent_close(w, &w->remote[i]);
}

void cm_watch_sweep(struct cm_watch *w)
{
	unsigned int i;

	for (i = 0; i < CM_WATCH_REMOTE; i++) {
		if (w->remote[i].slot >= 0 && !w->remote[i].used)
			ent_close(w, &w->remote[i]);
		w->remote[i].used = false;
	}
}

static bool watch_remote(struct cm_watch *w, struct engine *e, int32_t slot,
			 uint64_t token)
{
	const struct tp_net_ops *net = engine_net(e);
	struct cm_watch_ent *p = remote_find(w, slot);

	if (p && p->token != token) {
		ent_close(w, p); /* another process behind the slot now */
		p = NULL;
	}
	if (!p) {
		p = remote_find(w, -1);
		if (!p)
			return false; /* full: looked at instead */
		p->slot = slot;
		p->token = token;
		p->fd = net ? net->peer_watch_fd(e, slot, token) : -1;
		if (p->fd >= 0)
			w->nr_open++;
		else
			p->fd = -2;
	}
	p->used = true;
	return p->fd >= 0;
}

bool cm_watch_peer(struct cm_watch *w, struct node *node, struct engine *e,
		   int32_t slot, uint64_t token)
{
	struct node_proc_id id;
	long fd;

	if (!token)
		return false;
	if (tp_slot_is_remote(slot))
		return watch_remote(w, e, slot, token);
	if (slot < 0 || slot == node->proc_slot)
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
	unsigned int n = 0, i;

	for (i = 0; i < IBEMU_MAX_PROCS && n < max && n < w->nr_open; i++) {
		if (w->peer[i].fd < 0)
			continue;
		pfd[n].fd = w->peer[i].fd;
		pfd[n].events = POLLIN;
		pfd[n].revents = 0;
		slots[n++] = (int32_t)i;
	}
	for (i = 0; i < CM_WATCH_REMOTE && n < max && n < w->nr_open; i++) {
		if (w->remote[i].fd < 0)
			continue;
		/* the hang-up only: what the connection carries is the
		 * network thread's to read */
		pfd[n].fd = w->remote[i].fd;
		pfd[n].events = POLLRDHUP;
		pfd[n].revents = 0;
		slots[n++] = w->remote[i].slot;
	}
	return n;
}
