// SPDX-License-Identifier: MIT
/*
 * The RDMA communication manager (cm.h): CM ids, listeners, the
 * connection state machine of IBA 12.9 and its messages (cm_wire.h),
 * their retransmission and timeouts, and the event channels the
 * librdmacm face reads.
 *
 * This file: the CM's start (emu_cm_open), the lifecycle of its ids and
 * what its multicast joins (cm_mcast.c) call; cm_int.h says where the
 * other parts are and what they share.
 *
 * Messages: each is one 256-byte MAD sent as a UD SEND to QP1 of the
 * peer process's port (IBA 12.6.1), through the engine's transport;
 * the receiving engine hands every packet for QP1 to cm_recv_locked(),
 * registered as its QP1 handler when the CM starts.
 * A request is addressed through the node's table of bound addresses
 * (node_cm.c), or, for an address of another node, through that node's
 * door (the network transport's resolve_cm, transport.h); every later
 * message goes to the process the connection is with, named by its slot
 * (a node slot, or a remote slot of the network transport) and checked
 * by its token; the route to its QP is the transport's from then on
 * (seed_qpn), so that the QP's move to RTR asks no door.
 *
 * Across nodes (doc/design.md §21, "Across nodes"): an address the fabric
 * locates on another node (fabric_locate) resolves when the network is up,
 * with the source address the host's routing picks toward it; the path is
 * the two ports' LIDs and the GIDs of the two addresses (::ffff:a.b.c.d
 * for IPv4, GIDs 1.. of each port), which the REQ carries (IBA 12.6.5)
 * and the QP's address vector uses with a GRH, so route.c reaches the
 * peer's node.
 *
 * Lock rule: cm_int.h.
 *
 * Robustness: a MAD is copied once out of the transport's slot, then
 * every field is checked before use; a message that names no id of
 * ours, or comes from a process other than the one the id talks to,
 * is dropped (or answered with REJ as IBA 12.6.7 says).  A peer that
 * stops answering makes the id time out (IBA 12.4); one that dies is
 * seen at once through its process descriptor or, on another node, the
 * end of its TCP connection (cm_watch.h), or, where there is neither,
 * by the node's liveness (node_proc_alive) or the connection's state
 * within CM_LIVENESS_MS.  An idle process with connections sleeps: the CM
 * thread wakes for a timer, a peer's exit, or cm_wake.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

#include "cm.h"
#include "cm_int.h"
#include "cm_mcast.h"
#include "cm_watch.h"
#include "cm_wire.h"
#include "engine.h"
#include "hca.h"
#include "log.h"
#include "node.h"

static pthread_mutex_t cm_open_lock = PTHREAD_MUTEX_INITIALIZER;

uint32_t cm_random(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v;
}

/* Make the CM thread look again at its ids (a new timer or peer). */
void cm_wake(struct emu_cm *cm)
{
	uint64_t one = 1;

	if (write(cm->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is set already, the thread will run */
	}
}

/* What a call finding id in a state it cannot act in returns: ENOENT
 * for an id emu_cm_id_close ended (as the kernel's ucma answers for an
 * id it no longer has), else EINVAL; with cm.lock. */
int cm_wrong_state_locked(const struct emu_cm_id *id)
{
	return id->state == CM_CLOSED ? ENOENT : EINVAL;
}

/* ---- ids ---- */

struct emu_cm_id *cm_id_alloc_locked(struct emu_cm *cm,
				     struct emu_cm_chan *chan, uint64_t handle,
				     uint16_t ps, enum ibv_qp_type qp_type)
{
	struct emu_cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->cm = cm;
	id->chan = chan;
	id->handle = handle;
	id->ps = ps;
	id->qp_type = qp_type;
	id->port_idx = -1;
	id->peer_slot = -1;
	do {
		id->local_id = cm->next_id++;
	} while (!id->local_id);
	id->qkey = cm_mc_ps_qkey(ps);
	chan->nr_ids++;
	id->next = cm->ids;
	cm->ids = id;
	return id;
}

int emu_cm_id_create(struct emu_hca *hca, struct emu_cm_chan *chan,
		     uint64_t handle, int ps, enum ibv_qp_type qp_type,
		     struct emu_cm_id **id_p)
{
	struct emu_cm *cm = hca->cm;
	struct emu_cm_id *id;

	if (!cm || !chan)
		return EINVAL;
	switch (ps) {
	case EMU_CM_PS_TCP:
	case EMU_CM_PS_IB:
		/* XRC: an initiator connects to a target (IBA A14.6) */
		if (qp_type != IBV_QPT_RC && qp_type != IBV_QPT_UC &&
		    qp_type != IBV_QPT_UD && qp_type != IBV_QPT_XRC_SEND &&
		    qp_type != IBV_QPT_XRC_RECV)
			return EINVAL;
		break;
	case EMU_CM_PS_UDP:
	case EMU_CM_PS_IPOIB:
		if (qp_type != IBV_QPT_UD)
			return EINVAL;
		break;
	default:
		return EPROTONOSUPPORT;
	}
	pthread_mutex_lock(&cm->lock);
	id = cm_id_alloc_locked(cm, chan, handle, (uint16_t)ps, qp_type);
	pthread_mutex_unlock(&cm->lock);
	if (!id)
		return ENOMEM;
	*id_p = id;
	return 0;
}

void emu_cm_id_set_handle(struct emu_cm_id *id, uint64_t handle)
{
	pthread_mutex_lock(&id->cm->lock);
	id->handle = handle;
	pthread_mutex_unlock(&id->cm->lock);
}

int emu_cm_id_migrate(struct emu_cm_id *id, struct emu_cm_chan *chan,
		      unsigned int *delivered_p)
{
	struct emu_cm *cm = id->cm;
	struct emu_cm_chan *old = id->chan;
	struct cm_ev_node **pp, *n;
	uint64_t one = 1;

	if (chan->cm != cm)
		return EINVAL;
	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_CLOSED) {
		pthread_mutex_unlock(&cm->lock);
		return ENOENT;
	}
	if (old != chan) {
		for (pp = &old->head; (n = *pp);) {
			if (n->ev.id != id) {
				pp = &n->next;
				continue;
			}
			*pp = n->next;
			n->next = NULL;
			*chan->tail = n;
			chan->tail = &n->next;
			if (write(chan->fd, &one, sizeof(one)) != sizeof(one))
				ibemu_log_err("rdma_cm: event channel: %s",
					      strerror(errno));
		}
		old->tail = &old->head;
		for (n = old->head; n; n = n->next)
			old->tail = &n->next;
		old->nr_ids--;
		chan->nr_ids++;
		id->chan = chan;
	}
	*delivered_p = id->delivered;
	pthread_mutex_unlock(&cm->lock);
	return 0;
}

static void cm_unlink_locked(struct emu_cm_id *id)
{
	struct emu_cm_id **pp;

	for (pp = &id->cm->ids; *pp; pp = &(*pp)->next) {
		if (*pp == id) {
			*pp = id->next;
			return;
		}
	}
}

/* The listener no longer counts id among its unanswered requests. */
void cm_unqueue_locked(struct emu_cm_id *id)
{
	if (id->listener) {
		id->listener->queued--;
		id->listener = NULL;
	}
}

static void cm_id_destroy_locked(struct emu_cm_id *id);

/* Drop id's queued events; the requests a listener had not handed out
 * yet are refused (their ids destroyed).  Caller holds cm.lock. */
static void cm_purge_locked(struct emu_cm_id *id)
{
	struct emu_cm_chan *chan = id->chan;
	struct cm_ev_node **pp = &chan->head, *n;

	while ((n = *pp)) {
		if (n->ev.id != id) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		if (n->ev.new_id)
			cm_id_destroy_locked(n->ev.new_id);
		free(n);
	}
	chan->tail = &chan->head;
	for (n = chan->head; n; n = n->next)
		chan->tail = &n->next;
}

/* End id: the peer told, the id off the list, its events dropped and
 * its address released; its memory stays (state CM_CLOSED). */
static void cm_id_end_locked(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	struct emu_cm_id *o;

	/* What the connection's peer is told (IBA 12.9.6 and 12.9.7:
	 * leaving a connection sends DREQ, refusing one REJ). */
	switch (id->state) {
	case CM_REQ_SENT:
		cm_send_rej_locked(id, REJ_MSG_OTHER, REJ_TIMEOUT, NULL, 0);
		break;
	case CM_REQ_RCVD:
	case CM_REP_SENT:
		cm_send_rej_locked(id, id->state == CM_REQ_RCVD ? REJ_MSG_REQ
								: REJ_MSG_OTHER,
				   REJ_CONSUMER, NULL, 0);
		break;
	case CM_SIDR_REQ_RCVD:
		cm_send_sidr_rep_locked(id, SIDR_STATUS_REJECTED, NULL, 0);
		break;
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
		if (id->qp_type != IBV_QPT_UD)
			cm_send_dreq_locked(id, false);
		break;
	default:
		break;
	}
	cm_unlink_locked(id);
	cm_unqueue_locked(id);
	for (o = cm->ids; o; o = o->next)
		if (o->listener == id)
			o->listener = NULL;
	cm_purge_locked(id);
	id->chan->nr_ids--;
	if (id->port_idx >= 0)
		node_cm_release(&cm->hca->node, id->port_idx);
	id->port_idx = -1;
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_CLOSED;
}

/* An id none of whose events were handed out (a request's new id). */
static void cm_id_destroy_locked(struct emu_cm_id *id)
{
	cm_id_end_locked(id);
	free(id);
}

unsigned int emu_cm_id_close(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	unsigned int delivered;

	/* The kernel's rdma_destroy_id leaves the id's groups. */
	cm_mc_id_gone(id);
	pthread_mutex_lock(&cm->lock);
	/* another thread's rdma_connect is asking the peer's node (at
	 * most its resolution time): it goes on with the id after */
	while (id->connecting)
		pthread_cond_wait(&cm->connected, &cm->lock);
	delivered = id->delivered;
	if (id->state != CM_CLOSED)
		cm_id_end_locked(id);
	pthread_mutex_unlock(&cm->lock);
	return delivered;
}

void emu_cm_id_free(struct emu_cm_id *id)
{
	free(id);
}

unsigned int emu_cm_id_destroy(struct emu_cm_id *id)
{
	unsigned int delivered = emu_cm_id_close(id);

	emu_cm_id_free(id);
	return delivered;
}

/* ---- for the multicast joins (cm_mcast.c) ---- */

int cm_mc_id_check(struct emu_cm_id *id, uint16_t *ps_p, uint32_t *qkey_p,
		   struct node **node_p)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	/* The kernel's rdma_join_multicast: a UD id with a device (bound
	 * to one of the node's addresses, or resolved), else EINVAL. */
	if (id->qp_type != IBV_QPT_UD ||
	    (id->state != CM_ADDR_RESOLVED &&
	     (id->state != CM_ADDR_BOUND ||
	      cm_addr_any((struct sockaddr *)&id->src))))
		ret = cm_wrong_state_locked(id);
	*ps_p = id->ps;
	*qkey_p = id->qkey;
	*node_p = &id->cm->hca->node;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

void cm_mc_queue(struct emu_cm_id *id, struct emu_cm_event *ev)
{
	pthread_mutex_lock(&id->cm->lock);
	cm_queue_locked(id, ev);
	pthread_mutex_unlock(&id->cm->lock);
}

void cm_mc_purge(struct emu_cm_id *id, uint64_t cookie)
{
	struct emu_cm_chan *chan;
	struct cm_ev_node **pp, *n;

	pthread_mutex_lock(&id->cm->lock);
	chan = id->chan;
	for (pp = &chan->head; (n = *pp);) {
		if (n->ev.id != id || n->ev.mc_cookie != cookie) {
			pp = &n->next;
			continue;
		}
		/* its count on the descriptor stays: a read that finds no
		 * event behind it reads on (emu_cm_get_event) */
		*pp = n->next;
		free(n);
	}
	chan->tail = &chan->head;
	for (n = chan->head; n; n = n->next)
		chan->tail = &n->next;
	pthread_mutex_unlock(&id->cm->lock);
}

/* ---- opening ---- */

int emu_cm_open(struct emu_hca *hca)
{
	struct emu_cm *cm;
	int ret = 0;

	pthread_mutex_lock(&cm_open_lock);
	if (hca->cm)
		goto out;
	cm = calloc(1, sizeof(*cm));
	if (!cm) {
		ret = ENOMEM;
		goto out;
	}
	cm->hca = hca;
	cm->next_id = cm_random();
	cm->next_tid = (uint64_t)cm_random() << 32;
	pthread_mutex_init(&cm->lock, NULL);
	pthread_cond_init(&cm->connected, NULL);
	cm_watch_init(&cm->watch);
	cm->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cm->wake_fd < 0) {
		ret = errno;
		free(cm);
		goto out;
	}
	ret = pthread_create(&cm->thread, NULL, cm_thread, cm);
	if (ret) {
		close(cm->wake_fd);
		free(cm);
		goto out;
	}
	pthread_detach(cm->thread);
	/* QP1 is the CM's (IBA 12.6.1): the engine hands its packets here
	 * from now on (cm_recv_locked finds the CM through hca->cm). */
	engine_set_qp1_handler(cm_recv_locked);
	atomic_store_explicit(&hca->cm, cm, memory_order_release);
out:
	pthread_mutex_unlock(&cm_open_lock);
	return ret;
}
