// SPDX-License-Identifier: MIT
/*
 * Progress: draining the inbox into the responder and completer, retrying
 * blocked work and running timers, from the application's calls and from
 * one background thread per process (see engine.h for the lock rule).
 *
 * The thread sleeps on the inbox futex.  While the application polls its
 * CQs it naps 1 ms at a time without asking to be woken, so a busy-polled
 * ping-pong costs no system call and no wake-up; when the application has
 * not polled for a nap, it sleeps until a producer wakes it or its next
 * timer, so an idle process uses no CPU.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cpu.h"
#include "engine.h"
#include "log.h"
#include "pcap.h"
#include "pkt_trace.h"
#include "qp_stats.h"
#include "trace_rec.h"

#define ENGINE_NAP_NS (1000ull * 1000)
#define ENGINE_BLOCKED_NS (20ull * 1000)
#define ENGINE_DRAIN_BATCH 64
#define ENGINE_SPIN_NS (50ull * 1000)

/* ---- peers ---- */

struct tp_peer *engine_peer(struct engine *e, int32_t slot)
{
	if (tp_slot_is_remote(slot))
		return e->net ? e->net->peer_get(e, slot) : NULL;
	return e->tp->peer_get(e, slot);
}

bool engine_peer_runs(struct engine *e, int32_t slot)
{
	const struct transport_ops *tp = tp_slot_is_remote(slot) ? e->net
								  : e->tp;

	return tp && tp->peer_runs && tp->peer_runs(e, slot);
}

/* ---- packets ---- */

void pkt_layout_qp(struct pkt_out *out, struct emu_qp *qp, uint8_t opcode,
		   uint32_t dst_qpn, uint32_t psn, bool ackreq,
		   uint32_t paylen)
{
	const struct node_seg *seg = qp->hca->node.seg;
	unsigned int port = node_port_num(seg, qp->attr.port_num);
	const struct pkt_hdr link = {
		.slid = node_port_at(seg, port)->lid,
		.dlid = qp->attr.ah_attr.dlid,
		.src_qpn = qp->qpn,
		.src_proc = qp->hca->node.proc_slot,
	};

	pkt_layout(out, &link, opcode, dst_qpn, psn, ackreq, paylen);
	out->stats = qp->stats;
	/* MigReq while MIGRATED (IBA 9.2, 17.2.8; apm.c). */
	if (qp->attr.path_mig_state == IBV_MIG_MIGRATED)
		((struct bth *)out->base)->flags |= BTH_MIG;
	/* Out of a port that is down, nothing reaches the wire: the
	 * receiver drops it (engine_dispatch), TCP does not send it. */
	if (node_port_state(seg, port) != IBV_PORT_ACTIVE)
		out->pkt.hdr->flags |= PKT_F_LOST;
}

/* The tx event of a packet (doc/trace.md), naming the work request a
 * request packet carries. */
static void engine_trace_tx(const struct pkt_out *out)
{
	char wr[32] = "";

	if (out->has_wr)
		snprintf(wr, sizeof(wr), " wr=0x%llx",
			 (unsigned long long)out->wr_id);
	pkt_trace_out("tx", out, wr);
}

void pkt_send_watched(struct pkt_out *out)
{
	/* Captured before publishing: the receiver may reuse the slot. */
	if (pcap_enabled())
		pcap_write(out->pkt.hdr, out->base);
	if (trace_rec_on())
		engine_trace_tx(out);
	fault_point(FAULT_AT_PUBLISH);
	qp_stats_tx(out->e->hca, out);
	out->dst->tp->pkt_send(out->dst, &out->pkt);
}

/* ---- the QP table and the pending list (engine.lock) ---- */

static struct emu_qp *engine_qp_lookup(struct engine *e, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return NULL;
	return e->qps[idx];
}

void engine_qp_link_locked(struct engine *e, struct emu_qp *qp)
{
	qp->all_next = e->all_qps;
	if (qp->all_next)
		qp->all_next->all_pprev = &qp->all_next;
	e->all_qps = qp;
	qp->all_pprev = &e->all_qps;
}

void engine_qp_add(struct engine *e, struct emu_qp *qp)
{
	emu_lock(&e->lock);
	e->qps[qp->qpn - IBEMU_QPN_FIRST] = qp;
	engine_qp_link_locked(e, qp);
	emu_unlock(&e->lock);
}

static void engine_qp_unlink_locked(struct engine *e, struct emu_qp *qp)
{
	struct emu_qp *_Atomic *pp;
	struct emu_qp **ap;

	if (qp->all_pprev) {
		*qp->all_pprev = qp->all_next;
		if (qp->all_next)
			qp->all_next->all_pprev = qp->all_pprev;
		qp->all_pprev = NULL;
	}
	for (ap = &e->ack_list; *ap; ap = &(*ap)->ack_next) {
		if (*ap == qp) {
			*ap = qp->ack_next;
			break;
		}
	}
	emu_lock(&e->pending_lock);
	for (pp = &e->pending; *pp; pp = &(*pp)->pending_next) {
		if (*pp == qp) {
			atomic_store_explicit(pp, qp->pending_next,
					      memory_order_relaxed);
			break;
		}
	}
	atomic_store_explicit(&qp->on_pending, false, memory_order_relaxed);
	emu_unlock(&e->pending_lock);
}

void engine_qp_unlink(struct engine *e, struct emu_qp *qp)
{
	emu_lock(&e->lock);
	engine_qp_unlink_locked(e, qp);
	emu_unlock(&e->lock);
}

void engine_qp_remove(struct engine *e, struct emu_qp *qp)
{
	emu_lock(&e->lock);
	e->qps[qp->qpn - IBEMU_QPN_FIRST] = NULL;
	engine_qp_unlink_locked(e, qp);
	emu_unlock(&e->lock);
}

void engine_qp_quiesce(struct engine *e)
{
	struct emu_qp *qp;

	if (!e)
		return;
	emu_lock(&e->lock);
	for (qp = e->all_qps; qp; qp = qp->all_next) {
		emu_lock(&qp->lock);
		emu_unlock(&qp->lock);
	}
	emu_unlock(&e->lock);
}

/*
 * Ask the engine to revisit qp (blocked sends, timers, responses still to
 * send).  Caller holds qp.lock; the list has its own lock (pending_lock,
 * taken after qp.lock, never before).
 */
static void engine_pending_requeue(struct engine *e, struct emu_qp *qp)
{
	emu_lock(&e->pending_lock);
	if (!qp->on_pending) {
		atomic_store_explicit(&qp->on_pending, true, memory_order_relaxed);
		qp->pending_next = e->pending;
		/* Read unlocked by engine_has_pending(). */
		atomic_store_explicit(&e->pending, qp, memory_order_relaxed);
	}
	emu_unlock(&e->pending_lock);
}

void engine_pending_add_locked(struct emu_qp *qp)
{
	struct engine *e = qp->hca->engine;

	engine_pending_requeue(e, qp);
	/* New timed or blocked work: a thread asleep on an older deadline
	 * must look again (the application may not call a verb soon).
	 * Sequentially consistent against the sleeper's flag-then-check. */
	atomic_store(&e->pending_new, true);
	if (e->tp->is_sleeping(e))
		e->tp->wake(e);
}

/*
 * A multicast datagram: every UD QP of this process attached to its group
 * gets a copy (IBA 10.5), the sender's own QP too when it is attached;
 * the group is the MGID of the GRH, or without one the MLID alone.  The
 * sender sent one packet to each process with a member (req.c), and one
 * to the other nodes (mcast_ip.c), whose MLID for the group is theirs:
 * from another node the MGID alone names it.
 */
static void engine_dispatch_mcast(struct engine *e, const struct pkt *p)
{
	const uint8_t *dgid = p->grh ? p->grh->dgid : NULL;
	uint16_t dlid = p->hdr->dlid;
	struct emu_qp *qp;

	if (!(p->op->mask & OPM_UD))
		return;
	if (dgid && (p->hdr->flags & PKT_F_FOREIGN))
		dlid = 0;
	for (qp = e->all_qps; qp; qp = qp->all_next) {
		if (qp->type != IBV_QPT_UD)
			continue;
		emu_lock(&qp->lock);
		if (mcast_member_locked(qp, dgid, dlid))
			resp_recv_locked(qp, p);
		emu_unlock(&qp->lock);
	}
}

/* The QP1 handler (engine_set_qp1_handler): one per process, set once
 * and read by every engine's dispatch. */
static engine_qp1_fn *_Atomic engine_qp1;

void engine_set_qp1_handler(engine_qp1_fn *fn)
{
	atomic_store_explicit(&engine_qp1, fn, memory_order_release);
}

/*
 * The link: a packet sent out of a port that was down never left it
 * (PKT_F_LOST), and one whose DLID names a port of ours that is down
 * never arrives (a port not ACTIVE takes no packets, IBA 7.2, 14.2.5.6
 * PortState).  A DLID naming none of our ports (GRH-routed) is port 1's.
 */
static bool engine_link_takes(struct engine *e, const struct pkt *p)
{
	const struct node_seg *seg = e->hca->node.seg;
	unsigned int port;

	if (p->hdr->flags & PKT_F_LOST)
		return false;
	port = node_port_of_lid(seg, p->hdr->dlid);
	return node_port_state(seg, port ? port : 1) == IBV_PORT_ACTIVE;
}

static void engine_dispatch(struct engine *e, const struct pkt *p)
{
	struct emu_qp *qp;

	if (!engine_link_takes(e, p)) {
		if (trace_rec_on())
			pkt_trace("drop", p, " why=port_down");
		return;
	}
	if (trace_rec_on())
		pkt_trace("rx", p, "");

	if (p->qpn == BTH_QPN_MULTICAST) {
		engine_dispatch_mcast(e, p);
		return;
	}
	qp = engine_qp_lookup(e, p->qpn);

	/* No such QP here (destroyed, or never was): the packet is
	 * silently dropped, as an HCA drops a packet for an invalid
	 * destination QP (IBA 9.6.1.1); the sender times out. */
	if (!qp) {
		/* QP1 is the CM's (IBA 12.6.1): off the lookup's fast
		 * path, as QPN 1 is never in the table. */
		engine_qp1_fn *qp1 = atomic_load_explicit(
			&engine_qp1, memory_order_acquire);

		if (p->qpn == 1 && qp1)
			qp1(e, p);
		return;
	}
	emu_lock(&qp->lock);
	/* A DCT's packets go to the responder of their stream (dc.c). */
	if (qp->dc_type == EMU_DC_NONE || !dc_recv_locked(qp, p)) {
		apm_recv_locked(qp, p);
		if (p->op->mask & OPM_REQ)
			resp_recv_locked(qp, p);
		else
			comp_recv_locked(qp, p);
	}
	qp_stats_rx_locked(qp, p);
	emu_unlock(&qp->lock);
}

/* Send the coalesced ACKs of a drain, one per QP, but those that may
 * wait for their QP's next SEND if hold (ack_bundle.c): they stay on
 * the list.  Caller holds engine.lock. */
static void engine_acks_locked(struct engine *e, bool hold)
{
	struct emu_qp *qp, *held = NULL;

	while ((qp = e->ack_list)) {
		e->ack_list = qp->ack_next;
		emu_lock(&qp->lock);
		if (hold && ack_bundle_hold_locked(qp)) {
			qp->resp.ack_held = true;
			emu_unlock(&qp->lock);
			qp->ack_next = held;
			held = qp;
			continue;
		}
		resp_ack_flush_locked(qp);
		emu_unlock(&qp->lock);
	}
	e->ack_list = held;
	if (atomic_load_explicit(&e->acks_held, memory_order_relaxed) !=
	    (held != NULL))
		atomic_store_explicit(&e->acks_held, held != NULL,
				      memory_order_relaxed);
}

void engine_flush_acks_locked(struct engine *e)
{
	engine_acks_locked(e, false);
}

/* What a poll's drain left (engine_drain, later): its room in the
 * inbox.  Caller holds engine.lock. */
static void engine_flush_owed_locked(struct engine *e)
{
	if (e->tp->pkt_flush)
		e->tp->pkt_flush(e);
	if (atomic_load_explicit(&e->owed, memory_order_relaxed))
		atomic_store_explicit(&e->owed, false, memory_order_relaxed);
}

/* A packet, and the acknowledgement bundled behind it (ack_bundle.c),
 * each parsed and checked on its own.  Only a transport whose room holds
 * PKT_MAX_LEN bytes carries a bundle (transport_ops.bundles): from any
 * other the flag is the sender's word alone, and no byte past the packet
 * is read. */
void engine_recv_locked(struct engine *e, const struct tp_pkt *in)
{
	struct pkt p, ack;
	struct pkt_hdr ack_hdr;
	struct tp_pkt view;
	uint8_t buf[ACK_BUNDLE_VIEW_LEN];

	if (!pkt_parse(in, &p))
		return;
	engine_dispatch(e, &p);
	if (!(p.link.flags & PKT_F_ACK_BUNDLED) || !e->tp->bundles ||
	    !ack_bundle_view(&p, in, &ack_hdr, buf, &view) ||
	    !pkt_parse(&view, &ack))
		return;
	engine_dispatch(e, &ack);
}

/*
 * Drain up to max packets; caller holds engine.lock.  Returns count.
 * With IBEMU_FAULTS every packet passes the injector (fault.c), which
 * may also hand over packets it held back.  later: the inbox room of
 * the last packets read (the transport gives it back in batches) waits
 * for the caller's next drain (engine_poll), instead of going at its end.
 */
static unsigned int engine_drain(struct engine *e, unsigned int max,
				 bool later)
{
	struct tp_pkt in;
	unsigned int n = 0;

	if (__builtin_expect(e->faults != NULL, 0))
		fault_flush(e);
	while (n < max && e->tp->pkt_peek(e, &in)) {
		if (__builtin_expect(e->faults != NULL, 0))
			fault_recv(e, &in);
		else
			engine_recv_locked(e, &in);
		e->tp->pkt_release(e, &in);
		n++;
	}
	/* The ACKs the burst earned, one per QP, before anything else can
	 * happen to their QPs (destroy, exit): an HCA has sent them.  Held
	 * back for long, an ACK would race what the application does next:
	 * a peer that processes its disconnect before its last completions
	 * (as libfabric's RxM does) loses the completion the ACK gives.  An
	 * application's poll may hold one for the QP's next SEND only
	 * (ack_bundle.c): its next poll, verb or exit sends it. */
	engine_acks_locked(e, later);
	/* A slot held stays visible to the progress thread's sleep as a
	 * packet waiting (transport.h): it never sleeps over it. */
	if (!later)
		engine_flush_owed_locked(e);
	else if (e->tp->pkt_held && e->tp->pkt_held(e) &&
		 !atomic_load_explicit(&e->owed, memory_order_relaxed))
		atomic_store_explicit(&e->owed, true, memory_order_relaxed);
	if (n && atomic_load_explicit(&e->net_room, memory_order_relaxed) &&
	    atomic_exchange(&e->net_room, false))
		e->net->room(e);
	return n;
}

/*
 * Revisit every QP on the pending list: resend what was blocked, send the
 * responses and ACKs still owed, run the timers.  Caller holds
 * engine.lock, so no QP on the list can be destroyed meanwhile.  Returns
 * the earliest timer deadline (0: none) and sets *busy when some work is
 * still blocked on a full inbox.
 */
static uint64_t engine_run_pending(struct engine *e, bool *busy)
{
	struct emu_qp *list, *qp, *next_qp;
	uint64_t now = clock_now_ns(), next = 0, t;
	bool blocked;

	*busy = false;
	emu_lock(&e->pending_lock);
	atomic_store_explicit(&e->pending_new, false, memory_order_relaxed);
	list = e->pending;
	atomic_store_explicit(&e->pending, NULL, memory_order_relaxed);
	/* The pass walks its own links: pending_next may be reused at once
	 * by a QP that is queued again while the pass runs. */
	for (qp = list; qp; qp = qp->pending_next) {
		atomic_store_explicit(&qp->on_pending, false, memory_order_relaxed);
		qp->pass_next = qp->pending_next;
	}
	emu_unlock(&e->pending_lock);

	for (qp = list; qp; qp = next_qp) {
		next_qp = qp->pass_next;
		emu_lock(&qp->lock);
		resp_pending_locked(qp);
		t = comp_timers_locked(qp, now);
		req_run_locked(qp);
		blocked = qp->req.blocked || qp->resp.ack_pending ||
			  qp->resp.replies_head != qp->resp.replies_tail;
		if (blocked)
			*busy = true;
		if (t && (!next || t < next))
			next = t;
		if (t || blocked)
			engine_pending_requeue(e, qp);
		emu_unlock(&qp->lock);
	}
	if (e->faults) /* packets held back are due too */
		next = fault_next_due(e, next);
	atomic_store_explicit(&e->next_deadline, next, memory_order_relaxed);
	atomic_store_explicit(&e->busy, *busy, memory_order_relaxed);
	return next;
}

bool engine_deliver_begin(struct engine *e)
{
	if (e->faults || !emu_lock_try(&e->lock))
		return false;
	if (engine_has_packet(e)) {
		/* They came first: the transport queues behind them. */
		emu_unlock(&e->lock);
		return false;
	}
	return true;
}

void engine_deliver_end(struct engine *e)
{
	engine_flush_acks_locked(e);
	emu_unlock(&e->lock);
}

/* Whether a packet is waiting (a peek: nothing is consumed). */
bool engine_has_packet(struct engine *e)
{
	struct tp_pkt in;

	return e->tp->pkt_peek(e, &in);
}

static bool engine_has_pending(struct engine *e)
{
	return atomic_load_explicit(&e->pending, memory_order_relaxed) != NULL;
}

/*
 * The application is about to block (it armed a CQ for an event): from
 * now on the thread must be woken by producers, not nap unannounced.
 */
void engine_app_blocks(struct engine *e)
{
	if (!e)
		return;
	atomic_store(&e->app_polled, 0);
	if (e->net)
		e->net->flush(e);
	e->tp->wake(e);
}

/* Every 64th poll of the engine: when a poller reads the clock.  Polls
 * of several threads may lose counts (a load and a store, no locked
 * instruction on the polling path): the clock is then read a little
 * later. */
static bool engine_poll_count(struct engine *e)
{
	unsigned int n = atomic_load_explicit(&e->polls, memory_order_relaxed);

	atomic_store_explicit(&e->polls, n + 1, memory_order_relaxed);
	return ((n + 1) & 63) == 0;
}

void engine_poll(struct engine *e, bool active)
{
	bool busy, run, owed, held;
	uint64_t due;

	if (!e)
		return;

	if (active &&
	    !atomic_load_explicit(&e->app_polled, memory_order_relaxed))
		atomic_store_explicit(&e->app_polled, 1, memory_order_relaxed);
	due = atomic_load_explicit(&e->next_deadline, memory_order_relaxed);
	/* Timers are milliseconds: read the clock on every 64th poll only. */
	run = atomic_load_explicit(&e->pending_new, memory_order_relaxed) ||
	      atomic_load_explicit(&e->busy, memory_order_relaxed) ||
	      (due && engine_poll_count(e) && clock_now_ns() >= due);
	/* A busy poller reads the network itself: no thread wake-up on
	 * its critical path (doc/design.md §22 "Several nodes: the TCP
	 * transport"). */
	if (active && e->net)
		e->net->poll(e);
	owed = atomic_load_explicit(&e->owed, memory_order_relaxed);
	held = atomic_load_explicit(&e->acks_held, memory_order_relaxed);
	if (!run && !owed && !held && !engine_has_packet(e))
		goto done;
	if (!emu_lock_try(&e->lock))
		goto done; /* the thread is at it */
	/*
	 * The inbox room the last poll's drain held goes back now, while
	 * the application waits for what comes next, rather than on its
	 * way to its completion.  The progress thread gives it back once
	 * the application stops polling (engine_thread).
	 */
	if (owed)
		engine_flush_owed_locked(e);
	/* ACKs the last poll held for a SEND that has not come. */
	if (held)
		engine_flush_acks_locked(e);
	engine_drain(e, ENGINE_DRAIN_BATCH, active);
	if (run)
		engine_run_pending(e, &busy);
	emu_unlock(&e->lock);
	/* A long drain (pulled SENDs) is polling too: the thread, which
	 * took the flag meanwhile, sees it again and stays out. */
	if (active)
		atomic_store_explicit(&e->app_polled, 1, memory_order_relaxed);
done:
	if (active && e->net)
		e->net->poll_done(e);
}

/*
 * After serving packets, watch the inbox a little before sleeping: a
 * request that follows soon (the next atomic, the next message of a
 * stream to a target that runs no verb) then costs no futex wake-up.
 * Only recent traffic buys the spin, so an idle process still sleeps.
 */
static bool engine_spin(struct engine *e)
{
	uint64_t end = clock_now_ns() + ENGINE_SPIN_NS;
	unsigned int i;

	do {
		for (i = 0; i < 64; i++) {
			if (engine_has_packet(e) || atomic_load(&e->stop) ||
			    atomic_load_explicit(&e->pending_new,
						 memory_order_relaxed) ||
			    atomic_load_explicit(&e->app_polled,
						 memory_order_relaxed))
				return true;
			cpu_relax();
		}
	} while (clock_now_ns() < end);
	return false;
}

/*
 * A timer of the last pass is a nap or more past due: the application
 * polls, but too seldom for its polls to run timers (they look at the
 * clock every 64th poll only, engine_poll), so the thread runs them,
 * or an RNR wait or a retransmission would last as long as 64 polls.
 */
static bool engine_timer_overdue(struct engine *e)
{
	uint64_t due = atomic_load_explicit(&e->next_deadline,
					    memory_order_relaxed);

	return due && clock_now_ns() >= due + ENGINE_NAP_NS;
}

static void *engine_thread(void *arg)
{
	struct engine *e = arg;
	uint64_t next, now, timeout;
	unsigned int served;
	bool busy;
	check_thread_internal();

	while (!atomic_load(&e->stop)) {
		/* A port changed (`ibemu port`, which wakes us): told
		 * whatever the application is doing. */
		if (engine_ports_changed(e) && emu_lock_try(&e->lock)) {
			engine_ports_watch_locked(e);
			emu_unlock(&e->lock);
		}
		/* What the network held back for the application's next
		 * call goes now, at the latest a nap after (tcp_send.c). */
		if (e->net)
			e->net->flush(e);
		if (atomic_exchange(&e->app_polled, 0) &&
		    !engine_timer_overdue(e)) {
			/* The application drives progress: stay out of its
			 * way (never hold engine.lock while it spins) and nap
			 * unannounced, so producers make no system call. */
			e->tp->nap(e, ENGINE_NAP_NS);
			continue;
		}
		/* Held: a verb or the application's poll is at it (a drain
		 * that pulls large SENDs holds the lock for milliseconds).
		 * Waiting on the lock would take the next drain from a
		 * poller that shares our CPU, and leave it spinning. */
		if (!emu_lock_try(&e->lock)) {
			e->tp->nap(e, ENGINE_NAP_NS);
			continue;
		}
		/* Bounded, so owed ACKs and responses (the pending pass) are
		 * never starved by a peer that keeps sending. */
		served = engine_drain(e, INBOX_SLOTS, false);
		busy = false;
		next = 0;
		/* The flag is taken before the list is looked at, in one
		 * exchange: an adder queues its QP, then sets the flag, so
		 * either its QP is seen here or its flag stays set for the
		 * sleep.  Cleared after an empty look instead, it could be
		 * cleared over a QP queued meanwhile, whose timer then ran
		 * only at the next packet. */
		if (atomic_exchange(&e->pending_new, false) ||
		    engine_has_pending(e))
			next = engine_run_pending(e, &busy);
		if (e->faults)
			next = fault_next_due(e, next);
		emu_unlock(&e->lock);
		if (atomic_load(&e->stop))
			break;
		if (busy) {
			/* A peer's inbox was full: retry soon. */
			struct timespec ts = { 0, ENGINE_BLOCKED_NS };

			nanosleep(&ts, NULL);
			continue;
		}
		if (atomic_load(&e->app_polled) || engine_has_packet(e))
			continue;
		if (served && engine_spin(e))
			continue;
		now = clock_now_ns();
		timeout = next ? (next > now ? next - now : 1) : 0;
		e->tp->sleep(e, timeout, &e->pending_new);
	}
	return NULL;
}

/* The transport new engines use (engine_use_transport). */
static const struct transport_ops *engine_transport = &tp_shm_ops;

void engine_use_transport(const struct transport_ops *tp)
{
	engine_transport = tp;
}

/* The transport of the HCA's engine, or the one engines start with. */
static const struct tp_place_ops *engine_hca_place(const struct emu_hca *hca)
{
	return (hca->engine ? hca->engine->tp : engine_transport)->place;
}

void engine_mr_share(struct emu_hca *hca, void *addr, size_t length,
		     int access, struct mr_window *w)
{
	const struct tp_place_ops *pl = engine_hca_place(hca);

	if (pl && pl->mr_share)
		pl->mr_share(hca, addr, length, access, w);
}

void engine_mr_release(struct emu_hca *hca, const struct mr_window *w)
{
	const struct tp_place_ops *pl = engine_hca_place(hca);

	if (pl && pl->mr_release)
		pl->mr_release(hca, w);
}

void engine_fork_child(void)
{
	if (engine_transport->fork_child)
		engine_transport->fork_child();
}

/* The run trace names a node by its name and port 1's LID: the network
 * namespaces and containers of one host may share a name, never a LID
 * on one fabric (doc/trace.md). */
static void engine_trace_open(struct emu_hca *hca)
{
	const struct node_seg *seg = hca->node.seg;
	char name[96];

	if (!getenv("IBEMU_TRACE"))
		return;
	snprintf(name, sizeof(name), "%.63s:%u", seg->node_name,
		 (unsigned int)seg->ports[0].lid);
	trace_rec_open(name);
}

int engine_start(struct emu_hca *hca)
{
	struct engine *e;
	int ret;

	e = calloc(1, sizeof(*e));
	if (!e)
		return ENOMEM;
	e->hca = hca;
	e->tp = engine_transport;
	e->qps = calloc(IBEMU_MAX_QP, sizeof(*e->qps));
	if (!e->qps) {
		ret = ENOMEM;
		goto err_free;
	}
	emu_lock_init(&e->lock);
	emu_lock_init(&e->pending_lock);
	/* A malformed IBEMU_FAULTS refuses the device rather than run
	 * without the faults asked for. */
	ret = fault_open(e);
	if (ret)
		goto err_qps;
	e->mcast = &tp_mcast_ip_ops;
	ret = e->mcast->open(e);
	if (ret)
		goto err_faults;
	ret = e->tp->open(e);
	if (ret)
		goto err_mcast;
	/* The network, where the node has one (tp_tcp.c says when). */
	if (e->tp == &tp_shm_ops && !tp_tcp_ops.open(e) && e->net_priv)
		e->net = &tp_tcp_ops;
	hca->engine = e;
	ack_bundle_engine_add(e);
	engine_ports_init(e);
	pcap_open();
	engine_trace_open(hca);
	ret = pthread_create(&e->thread, NULL, engine_thread, e);
	if (ret) {
		hca->engine = NULL;
		ack_bundle_engine_remove(e);
		goto err_net;
	}
	return 0;

err_net:
	if (e->net)
		e->net->close(e);
	e->tp->close(e);
err_mcast:
	e->mcast->close(e);
err_faults:
	fault_forget(e);
err_qps:
	free(e->qps);
err_free:
	free(e);
	return ret;
}

/* In a forked child: drop the copy of the parent's engine (its thread
 * does not exist here; its mappings are the parent's). */
void engine_forget(struct emu_hca *hca)
{
	struct engine *e = hca->engine;

	hca->engine = NULL;
	if (!e)
		return;
	ack_bundle_engine_remove(e);
	if (e->net)
		e->net->forget(e);
	e->tp->forget(e);
	e->mcast->forget(e);
	fault_forget(e);
	free(e->qps);
	free(e);
}

void engine_stop(struct emu_hca *hca)
{
	struct engine *e = hca->engine;

	if (!e)
		return;
	ack_bundle_engine_remove(e);
	atomic_store(&e->stop, true);
	/* Also through the sleeper's `more`: a wake counts only once the
	 * sleep has begun (transport.h), and the thread may have looked at
	 * stop just before this store and be on its way to sleep with no
	 * timeout.  Sequentially consistent, after stop, as for
	 * engine_pending_add_locked. */
	atomic_store(&e->pending_new, true);
	e->tp->wake(e);
	pthread_join(e->thread, NULL);
	/* ACKs still held for a SEND (ack_bundle.c) go before the
	 * transport closes. */
	emu_lock(&e->lock);
	engine_flush_acks_locked(e);
	emu_unlock(&e->lock);
	/* The network thread delivers into the inbox and drives the
	 * engine (tcp_thread.c): stopped before anything of the engine goes. */
	if (e->net)
		e->net->close(e);
	/* After the engine's thread, which may send to the groups; before
	 * the engine goes, as its own thread delivers under engine.lock. */
	e->mcast->close(e);
	hca->engine = NULL;
	fault_close(e);
	e->tp->close(e);
	free(e->qps);
	free(e);
	pcap_close();
	trace_rec_close();
}
