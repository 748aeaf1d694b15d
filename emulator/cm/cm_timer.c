// SPDX-License-Identifier: MIT
/*
 * The CM's timers and its thread: retransmission and timeouts
 * (IBA 12.4), the time wait, the liveness of the peers (cm_watch.h, or a
 * look every CM_LIVENESS_MS), and the CM thread, which sleeps in poll
 * until one of them is due or cm_wake.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cm_int.h"
#include "cm_watch.h"
#include "cm_wire.h"
#include "hca.h"
#include "node.h"
#include "engine.h"

/* ---- timers ---- */

/* Whether the peer process in slot holding token lives: on this node,
 * by its lock in the node file; on another, by its connection being up
 * (what can be known across nodes). */
bool cm_peer_alive(struct emu_cm *cm, int32_t slot, uint64_t token)
{
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	struct tp_peer_info info;

	if (tp_slot_is_remote(slot))
		return net && net->peer_info(e, slot, &info) && info.up &&
		       info.token == token;
	return node_proc_holds(&cm->hca->node, slot, token);
}

/* id's peer is gone: the connection ends as the real CM ends it. */
static void cm_peer_gone_locked(struct emu_cm_id *id)
{
	id->deadline = 0;
	id->has_last = false;
	switch (id->state) {
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		if (id->qp_type == IBV_QPT_UD)
			return;
		cm_disconnected_locked(id, NULL);
		break;
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
		cm_unqueue_locked(id);
		id->state = CM_FAILED;
		cm_event_locked(id, EMU_CM_UNREACHABLE, -ETIMEDOUT);
		break;
	default:
		break;
	}
}

static void cm_timeout_locked(struct emu_cm_id *id, uint64_t now)
{
	id->deadline = 0;
	switch (id->state) {
	case CM_ADDR_QUERY:
		id->state = CM_ADDR_BOUND;
		cm_event_locked(id, EMU_CM_ADDR_ERROR, -ETIMEDOUT);
		return;
	case CM_DISCONNECTED:
		/* the time wait is over */
		if (id->qp_type != IBV_QPT_UD)
			cm_event_locked(id, EMU_CM_TIMEWAIT_EXIT, 0);
		return;
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
	case CM_DREQ_SENT:
		break;
	default:
		return;
	}
	if (id->has_last && id->retries < CM_MAX_RETRIES) {
		/* IBA 12.4: no answer within the timeout, send again */
		id->retries++;
		id->deadline = now + CM_RETRY_MS * 1000000ull;
		cm_send_locked(id->cm, id->peer_slot, id->last);
		return;
	}
	if (id->state == CM_DREQ_SENT) {
		/* IBA 12.9.6: the DREQ timed out; the connection is over */
		cm_disconnected_locked(id, NULL);
		return;
	}
	if (id->state == CM_REQ_SENT)
		cm_send_rej_locked(id, REJ_MSG_OTHER, REJ_TIMEOUT, NULL, 0);
	cm_unqueue_locked(id);
	id->state = CM_FAILED;
	cm_event_locked(id, EMU_CM_UNREACHABLE, -ETIMEDOUT);
}

static bool cm_has_peer(const struct emu_cm_id *id)
{
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
	case CM_SIDR_REQ_SENT:
		return id->qp_type != IBV_QPT_UD ||
		       id->state == CM_SIDR_REQ_SENT;
	default:
		return false;
	}
}

/* Look at ids whose peer is not watched by a descriptor, or whose
 * watched peer has exited; fire the timers due.  The earliest time the
 * thread must look again, 0: none.  Caller holds cm.lock. */
static uint64_t cm_run_timers_locked(struct emu_cm *cm, uint64_t now)
{
	struct emu_cm_id *id;
	uint64_t next = 0;
	bool watched;

	for (id = cm->ids; id; id = id->next) {
		watched = cm_has_peer(id) &&
			  cm_watch_peer(&cm->watch, &cm->hca->node,
					cm->hca->engine, id->peer_slot,
					id->peer_token);
		if (cm_has_peer(id) && (!watched || id->peer_exited) &&
		    now >= id->live_check) {
			id->live_check = now + CM_LIVENESS_MS * 1000000ull;
			/* A remote peer's connection ended (its watch
			 * fired): that process exited or is cut off, even
			 * before the network thread has seen it. */
			if ((id->peer_exited &&
			     tp_slot_is_remote(id->peer_slot)) ||
			    !cm_peer_alive(cm, id->peer_slot, id->peer_token))
				cm_peer_gone_locked(id);
		}
		id->peer_exited = false;
		if (id->deadline && now >= id->deadline)
			cm_timeout_locked(id, now);
		if (id->deadline && (!next || id->deadline < next))
			next = id->deadline;
		if (cm_has_peer(id) && !watched &&
		    (!next || id->live_check < next))
			next = id->live_check;
	}
	cm_watch_sweep(&cm->watch);
	return next;
}

/* The ids of a peer whose descriptor says it exited are looked at now. */
static void cm_peer_exited_locked(struct emu_cm *cm, int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next) {
		if (id->peer_slot == slot) {
			id->peer_exited = true;
			id->live_check = 0;
		}
	}
	cm_watch_drop(&cm->watch, slot);
}

void *cm_thread(void *arg)
{
	struct emu_cm *cm = arg;
	struct pollfd *pfd = cm->pfd;
	int32_t *slots = cm->pfd_slot;
	uint64_t now, next, count;
	unsigned int i, n;
	int timeout, r;
	check_thread_internal();

	pthread_mutex_lock(&cm->lock);
	for (;;) {
		now = clock_now_ns();
		next = cm_run_timers_locked(cm, now);
		n = cm_watch_fill(&cm->watch, pfd + 1, slots, CM_WATCH_MAX);
		pthread_mutex_unlock(&cm->lock);
		pfd[0].fd = cm->wake_fd;
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		if (!next)
			timeout = -1;
		else if (next <= now)
			timeout = 0;
		else /* rounded up: a timer is never early */
			timeout = (int)((next - now + 999999) / 1000000);
		r = poll(pfd, n + 1, timeout);
		if (r > 0 && (pfd[0].revents & POLLIN) &&
		    read(cm->wake_fd, &count, sizeof(count)) < 0) {
			/* EAGAIN: another read took it */
		}
		pthread_mutex_lock(&cm->lock);
		for (i = 0; r > 0 && i < n; i++)
			if (pfd[i + 1].revents)
				cm_peer_exited_locked(cm, slots[i]);
	}
	return NULL;
}
