// SPDX-License-Identifier: MIT
/*
 * Acknowledgements that ride with the next SEND (doc/design.md §9, "An
 * ACK rides with the answer").
 *
 * In a ping-pong between two processes of one node, the responder's ACK
 * and its application's answer go to the same QP one after the other:
 * two inbox slots, two cache lines to move between the cores, and a
 * fenced publish on the answer's critical path.  IBA 9.7.5.1.1 lets a
 * responder put an ACK off and coalesce it; here, at the end of a drain
 * that the application's poll drove, an owed ACK of an RC QP whose peer
 * is on the node is held, and the QP's next SEND carries it in its own
 * slot, as a second packet behind the first (PKT_F_ACK_BUNDLED, wire.h).
 * The receiver parses and checks that packet as if it had come alone.
 *
 * It is off unless IBEMU_ACK_BUNDLE=1: measured, a ping-pong that waits
 * for each send completion (ib_send_lat) then waits for its ACK behind
 * the answer, and loses more than the slot saves, at either placement
 * of the two CPUs (doc/design.md §9).  A held ACK never waits long: it
 * goes alone at the start of the application's next poll of an empty
 * CQ, at the progress thread's next drain (within a nap once the
 * application stops polling), when the QP leaves service
 * (resp_ack_owed_locked), at exit, and whenever any other ACK of the QP
 * is sent.  A QP that holds ACKs no SEND takes (a receiver
 * of a stream) stops holding after two, until its application posts a
 * SEND again.  Nothing is held while packets are captured or traced
 * (each packet is written as it is sent), with IBEMU_FAST=0, or toward
 * a transport that does not carry bundles (TCP).
 *
 * An engine that holds none (the application never drove a drain, or
 * the fast paths are off) costs nothing here.
 *
 * Lock rule: the resp fields (ack_owed, ack_held, ack_misses) are under
 * qp.lock; the QPs holding an ACK stay on engine.ack_list, under
 * engine.lock, with ack_queued set.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fault.h"
#include "hca.h"
#include "pcap.h"
#include "qp_stats.h"
#include "trace_rec.h"

/* IBEMU_FAST=0 turns the two-sided fast paths off (ibemu(7));
 * IBEMU_ACK_BUNDLE=1 holds ACKs for the next SEND, which by default go
 * at the end of the drain (measured: doc/design.md §9).  Read once. */
atomic_int engine_fast_state, ack_bundle_state;

bool engine_fast_read(void)
{
	const char *v = getenv("IBEMU_FAST");
	int s = v && !strcmp(v, "0") ? 2 : 1;

	atomic_store_explicit(&engine_fast_state, s, memory_order_relaxed);
	return s == 1;
}

bool ack_bundle_read(void)
{
	const char *v = getenv("IBEMU_ACK_BUNDLE");
	int s = v && !strcmp(v, "1") ? 1 : 2;

	atomic_store_explicit(&ack_bundle_state, s, memory_order_relaxed);
	return s == 1;
}

/* Held ACKs that had to go alone before a SEND came; more and the QP
 * stops holding. */
#define ACK_BUNDLE_MAX_MISSES 2

bool ack_bundle_hold_locked(struct emu_qp *qp)
{
	struct tp_peer *peer = qp->peer;

	return ack_bundle_on() && engine_fast_on() &&
	       qp->hca->engine->acks_flushed_at_exit && qp->resp.ack_owed &&
	       qp->type == IBV_QPT_RC && qp->dc_type == EMU_DC_NONE &&
	       qp->state == IBV_QPS_RTS && peer &&
	       peer->tp->bundles && !qp->resp.ack_pending &&
	       qp->resp.replies_head == qp->resp.replies_tail &&
	       qp->resp.ack_misses < ACK_BUNDLE_MAX_MISSES &&
	       !pcap_enabled() && !trace_rec_on();
}

void ack_bundle_let_go_locked(struct emu_qp *qp)
{
	if (!qp->resp.ack_held)
		return;
	qp->resp.ack_held = false;
	if (qp->resp.ack_owed && qp->resp.ack_misses < ACK_BUNDLE_MAX_MISSES)
		qp->resp.ack_misses++;
}

void ack_bundle_sent_locked(struct emu_qp *qp)
{
	qp->resp.ack_misses = 0;
}

/*
 * Put the ACK this QP holds behind the request packet out, which goes to
 * the same peer and destination QP: RC ACKNOWLEDGE of everything before
 * the expected PSN, unlimited credits, as resp_ack sends it (IBA
 * 9.7.5.1).  Owed READ responses or atomic acknowledgements would have
 * to go first (IBA 9.7.5.1.3): then nothing is held (the check above),
 * nor carried here.  qp.lock held.
 */
bool ack_bundle_add_locked(struct emu_qp *qp, struct pkt_out *out)
{
	struct pkt_hdr *hdr = out->pkt.hdr;
	struct bundled_ack *b;
	uint32_t len = hdr->len;

	if (!qp->resp.ack_held || !qp->resp.ack_owed ||
	    qp->resp.replies_head != qp->resp.replies_tail ||
	    !out->dst->tp->bundles || !pkt_bundle_fits(len))
		return false;
	fault_point(FAULT_AT_ACK);
	b = (struct bundled_ack *)(out->pkt.data + pkt_bundle_off(len));
	b->psn = htobe32(psn_add(qp->resp.epsn, BTH_PSN_MASK));
	b->aeth = htobe32((uint32_t)(AETH_ACK | AETH_ACK_UNLIMITED) << 24 |
			  (qp->resp.msn & 0xffffff));
	hdr->flags |= PKT_F_ACK_BUNDLED;
	if (out->stats)
		qp_stats_tx_ack(out->stats);
	qp->resp.ack_owed = false;
	qp->resp.ack_held = false;
	qp->resp.ack_misses = 0;
	qp->resp.pulled_unacked = 0;
	return true;
}

/*
 * The acknowledgement behind the packet first, rebuilt as a packet of
 * its own in buf: its link header and BTH are the first one's (same
 * sender, path and QP) but for the opcode, ACKNOWLEDGE under the same
 * transport, and the PSN.  The room is the sender's to write: first's
 * length is the one pkt_parse copied and checked, and the 8 bytes are
 * read once, here; the caller parses and checks the result as any
 * packet (an ACK for a QP that sent nothing is ignored, comp.c).
 */
bool ack_bundle_view(const struct pkt *first, const struct tp_pkt *in,
		     struct pkt_hdr *hdr, uint8_t buf[ACK_BUNDLE_VIEW_LEN],
		     struct tp_pkt *view)
{
	uint32_t len = first->link.len;
	struct bundled_ack b;
	struct bth *bth = (struct bth *)buf;

	if (!pkt_bundle_fits(len))
		return false;
	memcpy(&b, in->data + pkt_bundle_off(len), sizeof(b));
	*hdr = first->link;
	hdr->len = sizeof(struct bth) + sizeof(struct aeth);
	hdr->flags = first->link.flags & PKT_F_LOST;
	*bth = *first->bth;
	bth->opcode = (uint8_t)((first->opcode & IB_OPCODE_MASK_PREFIX) |
				IB_OP_ACKNOWLEDGE);
	bth->flags = 0;
	bth->apsn = b.psn & htobe32(BTH_PSN_MASK);
	memcpy(buf + sizeof(struct bth), &b.aeth, sizeof(b.aeth));
	memset(view, 0, sizeof(*view));
	view->hdr = hdr;
	view->data = buf;
	return true;
}

/*
 * At exit, the ACKs still held go: a responder that exits right after
 * its last receive completion has acknowledged what it received, as an
 * HCA would have.  The engines of the process are listed in
 * bundle_engines, each entry set and cleared with one atomic operation
 * (no lock: a forked child inherits the list as it is, and clears its
 * parent's engine the same way); an engine whose lock stays taken (its
 * thread or another of the application's is at it) is left after a
 * bounded wait, never waited for: exit must not hang.
 */
#define BUNDLE_ENGINES 8
static struct engine *_Atomic bundle_engines[BUNDLE_ENGINES];
static pthread_once_t bundle_exit_once = PTHREAD_ONCE_INIT;

static void ack_bundle_at_exit(void)
{
	unsigned int i, tries;
	struct engine *e;

	for (i = 0; i < BUNDLE_ENGINES; i++) {
		e = atomic_load(&bundle_engines[i]);
		if (!e || !atomic_load_explicit(&e->acks_held,
						memory_order_relaxed))
			continue;
		for (tries = 0; tries < 1000 && !emu_lock_try(&e->lock);
		     tries++)
			sched_yield();
		if (tries == 1000)
			continue;
		engine_flush_acks_locked(e);
		emu_unlock(&e->lock);
	}
}

static void ack_bundle_register_exit(void)
{
	atexit(ack_bundle_at_exit);
}

void ack_bundle_engine_add(struct engine *e)
{
	struct engine *none;
	unsigned int i;

	pthread_once(&bundle_exit_once, ack_bundle_register_exit);
	for (i = 0; i < BUNDLE_ENGINES; i++) {
		none = NULL;
		if (atomic_compare_exchange_strong(&bundle_engines[i], &none,
						   e)) {
			e->acks_flushed_at_exit = true;
			return;
		}
	}
	/* More engines than entries: this one holds no ACK (nothing would
	 * send it at exit). */
}

void ack_bundle_engine_remove(struct engine *e)
{
	struct engine *mine;
	unsigned int i;

	for (i = 0; i < BUNDLE_ENGINES; i++) {
		mine = e;
		atomic_compare_exchange_strong(&bundle_engines[i], &mine, NULL);
	}
}
