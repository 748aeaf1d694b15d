// SPDX-License-Identifier: MIT
/*
 * The responder: executes request packets (IBA 9.7.3-9.7.4) and answers
 * them.  Its checks run in the order the IBA gives them, each failing
 * with its own answer:
 *
 *   state      RESET/INIT/ERR drop the packet (IBA 10.3.1)
 *   source     not the connected QP: dropped
 *   PSN        duplicate -> answered again from what was saved, else
 *              dropped (9.7.4.1.2, 9.7.5.2); ahead -> one sequence NAK
 *              per gap (9.7.5.2.1)
 *   sequence   MIDDLE/LAST without FIRST, or FIRST inside a message ->
 *              NAK invalid request, QP_REQ_ERR (manual 6.1.3)
 *   QP access  the QP does not allow the operation -> NAK invalid request
 *   resources  no receive WQE -> RNR NAK (9.7.5.2.8)
 *   R_Key      bad key, range or access -> NAK remote access error,
 *              QP_ACCESS_ERR (manual 6.1.4, 6.2.11)
 *   length     message longer than the receive WQE -> LOC_LEN_ERR on the
 *              receive, NAK invalid request (manual 6.2.2, 6.2.10)
 *   local key  bad receive WQE -> LOC_PROT_ERR on the receive, NAK remote
 *              operational error (manual 6.2.12)
 *
 * A failed RC responder enters the error state.  UC (IBA 9.8) answers
 * nothing and drops what it cannot take.  Called with qp.lock held and
 * engine.lock held.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "check_proto.h"
#include "check_recv.h"
#include "engine.h"
#include "log.h"
#include "route.h"

/* Pulled SENDs (doc/design.md §14 "Large SENDs pulled by the responder")
 * are acknowledged as soon as this many of their bytes have been copied,
 * without waiting for the drain's end. */
#define RESP_PULL_ACK_BYTES (256u * 1024)

/* RC, or an XRC target: acknowledged, its errors NAKed (IBA A14). */
static bool qp_is_rc(const struct emu_qp *qp)
{
	return qp_is_reliable(qp);
}

/* A response opcode under the QP's transport prefix (IBA 9.2, A14). */
static uint8_t resp_opcode(const struct emu_qp *qp, uint8_t op)
{
	return qp_opcode_prefix(qp) + op;
}

static struct tp_peer *resp_peer(struct emu_qp *qp)
{
	if (!qp->peer)
		req_resolve_peer_locked(qp);
	return qp->peer;
}

/* An ACK or NAK (RC_ACKNOWLEDGE with an AETH).  false if not sent. */
static bool resp_send_aeth(struct emu_qp *qp, uint32_t psn, uint8_t syn)
{
	struct tp_peer *dst = resp_peer(qp);
	struct pkt_out out;

	if (!dst)
		return true; /* the requester is gone: nothing to answer */
	if (!pkt_begin(&out, dst, qp, resp_opcode(qp, IB_OP_ACKNOWLEDGE),
		       qp->attr.dest_qp_num,
		       psn, false, 0))
		return false;
	out_set_aeth(&out, syn, qp->resp.msn);
	pkt_send(&out);
	return true;
}

static bool resp_replies_empty(const struct emu_qp *qp);

/*
 * Acknowledge everything before the expected PSN.  Owed READ responses
 * and atomic acknowledgements go first (IBA 9.7.5.1.3: an ACK past them
 * would tell the requester they were lost); so does a full inbox: the
 * pending pass sends the ACK later.
 */
static void resp_ack(struct emu_qp *qp)
{
	if (!qp_is_rc(qp))
		return;
	if (!resp_replies_empty(qp)) {
		qp->resp.ack_pending = true;
		return;
	}
	fault_point(FAULT_AT_ACK);
	if (!resp_send_aeth(qp, psn_add(qp->resp.epsn, BTH_PSN_MASK),
			    AETH_ACK | AETH_ACK_UNLIMITED)) {
		qp->resp.ack_pending = true;
		engine_pending_add_locked(qp);
	} else {
		qp->resp.ack_pending = false;
		qp->resp.pulled_unacked = 0;
		/* It covers whatever was owed or held (ack_bundle.c). */
		qp->resp.ack_owed = false;
		qp->resp.ack_held = false;
	}
}

/* A receive WQE taken for a message that will not finish is flushed
 * with the rest of the receive queue (IBA 10.3.1). */
void resp_flush_open_locked(struct emu_qp *qp)
{
	if (!qp->resp.has_wqe)
		return;
	qp->resp.has_wqe = false;
	flush_wqe(qp->rcq, qp, qp->resp.wqe, IBV_WC_RECV);
}

/*
 * Coalesced acknowledgement (IBA 9.7.5.1.1: one ACK may cover many
 * requests): the message is acknowledged when the engine has drained its
 * inbox, so a burst of messages costs one ACK per QP.  Caller holds
 * engine.lock (the responder always runs under it).
 */
void resp_ack_later_locked(struct emu_qp *qp)
{
	struct engine *e = qp->hca->engine;

	if (!qp_is_rc(qp))
		return;
	qp->resp.ack_owed = true;
	if (qp->ack_queued)
		return;
	qp->ack_queued = true;
	qp->ack_next = e->ack_list;
	e->ack_list = qp;
}

/* The coalesced ACK of one QP, unless a SEND carried it meanwhile
 * (ack_bundle.c); qp.lock held. */
void resp_ack_flush_locked(struct emu_qp *qp)
{
	enum ibv_qp_state st = qp->state;

	qp->ack_queued = false;
	ack_bundle_let_go_locked(qp);
	if (qp->resp.ack_owed &&
	    (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD))
		resp_ack(qp);
}

/*
 * The consumer takes the QP out of service (to Error or Reset) while its
 * coalesced ACK waits for the end of the engine's drain: the ACK goes now.
 * The receive completions of those messages are visible already, and an
 * application that saw them may disconnect at once (the CM moves the QP to
 * Error); the ACK was only put off (IBA 9.7.5.1.1), the requester must not
 * retry messages that were executed until its retries run out.  The
 * drain's flush then finds the QP out of service and sends nothing.
 * qp.lock held (every writer of ack_queued holds it as well).
 */
void resp_ack_owed_locked(struct emu_qp *qp)
{
	enum ibv_qp_state st = qp->state;

	if (qp->ack_queued && qp->resp.ack_owed &&
	    (st == IBV_QPS_RTR || st == IBV_QPS_RTS || st == IBV_QPS_SQD))
		resp_ack(qp);
}

void resp_reset_locked(struct emu_qp *qp)
{
	qp->resp.op = 0;
	qp->resp.has_wqe = false;
	qp->resp.offset = 0;
	qp->resp.remaining = 0;
	qp->resp.ack_pending = false;
	qp->resp.ack_owed = false;
	qp->resp.ack_held = false;
	qp->resp.ack_misses = 0;
	qp->resp.nak_sent = false;
	qp->resp.replies_head = qp->resp.replies_tail = 0;
	qp->resp.replies_dups = 0;
}

void resp_push_recv_locked(struct emu_qp *qp, uint64_t wr_id,
			   enum ibv_wc_status st, enum ibv_wc_opcode opcode,
			   uint32_t byte_len, const struct pkt *p)
{
	struct ibv_wc wc = {
		.wr_id = wr_id,
		.status = st,
		.opcode = opcode,
		.byte_len = byte_len,
		.qp_num = qp->qpn,
		.src_qp = qp->attr.dest_qp_num,
		.slid = p ? p->hdr->slid : 0,
		.pkey_index = qp->attr.pkey_index,
	};

	if (p && st == IBV_WC_SUCCESS && (p->op->mask & OPM_IMMDT)) {
		wc.wc_flags |= IBV_WC_WITH_IMM;
		wc.imm_data = pkt_immdt(p);
	}
	if (p && st == IBV_WC_SUCCESS && (p->op->mask & OPM_IETH)) {
		wc.wc_flags |= IBV_WC_WITH_INV;
		wc.invalidated_rkey = pkt_ieth_rkey(p);
	}
	if (!cq_push(qp->rcq, &wc, p && pkt_se(p)))
		qp_fatal_locked(qp);
}

static void resp_complete_recv(struct emu_qp *qp, enum ibv_wc_status st,
			       enum ibv_wc_opcode opcode, uint32_t byte_len,
			       const struct pkt *p)
{
	qp->resp.has_wqe = false;
	resp_push_recv_locked(qp, qp->resp.wqe->wr_id, st, opcode, byte_len, p);
}

/*
 * Fail the request: complete the open receive with recv_status (if any),
 * NAK the requester, enter the error state and raise event (0: none).
 */
static void resp_fail(struct emu_qp *qp, const struct pkt *p, uint8_t nak,
		      enum ibv_event_type event, enum ibv_wc_status recv_status)
{
	check_proto_nak(qp, p, nak);
	if (qp->resp.has_wqe && recv_status != IBV_WC_SUCCESS)
		resp_complete_recv(qp, recv_status, IBV_WC_RECV, 0, NULL);
	if (!qp_is_rc(qp)) {
		/* UC drops the message; only a receive error ends the QP. */
		qp->resp.op = 0;
		if (recv_status != IBV_WC_SUCCESS)
			qp_error_locked(qp);
		return;
	}
	resp_send_aeth(qp, p->psn, AETH_NAK | nak);
	qp_error_locked(qp);
	if (event)
		emu_event(&qp->owner, event);
}

/* Take the next receive WQE of the QP or its SRQ into resp_wqe; placed:
 * the message's data goes into it (a SEND, a datagram; not a WRITE with
 * immediate). */
static bool resp_take_wqe(struct emu_qp *qp, bool placed)
{
	struct emu_rq *rq = qp_rq(qp);
	struct wqe *w;
	bool limit = false;

	/* The QP's own ring is under qp.lock, held; an SRQ's under its
	 * own lock (rq.c). */
	if (qp->srq)
		emu_lock(&rq->lock);
	w = wqe_ring_head(&rq->ring);
	if (w) {
		memcpy(qp->resp.wqe, w,
		       sizeof(*w) + w->num_sge * sizeof(w->sge[0]));
		if (placed)
			check_recv_take(qp, rq, rq->ring.head);
		rq->ring.head++;
		check_queue_srq_taken(qp, true, wqe_ring_count(&rq->ring));
		limit = resp_srq_limit_reached(qp, rq);
	} else {
		check_queue_srq_taken(qp, false, 0);
	}
	if (qp->srq)
		emu_unlock(&rq->lock);
	if (limit)
		emu_event(&qp->srq->owner, IBV_EVENT_SRQ_LIMIT_REACHED);
	if (!w)
		return false;
	qp->resp.has_wqe = true;
	check_proto_rnr_end(qp, NULL);
	return true;
}

static void resp_rnr(struct emu_qp *qp, const struct pkt *p)
{
	check_proto_rnr(qp, p);
	if (qp_is_rc(qp)) {
		resp_send_aeth(qp, p->psn,
			       AETH_RNR_NAK | (qp->attr.min_rnr_timer & 0x1f));
		/* The requester resends from this PSN: the packets already
		 * behind it need no sequence NAK of their own. */
		qp->resp.nak_sent = true;
	} else {
		qp->resp.op = 0; /* UC: the message is dropped */
	}
}

static uint32_t wqe_capacity(const struct wqe *w)
{
	uint64_t n = 0;
	uint32_t i;

	for (i = 0; i < w->num_sge; i++)
		n += w->sge[i].length;
	return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

/* A pulled SEND (cma.c): the same checks, then one copy from the sender
 * into the receive WQE.  A sender that cannot be read is a remote
 * operational error (manual 6.2.12). */
/*
 * Copy a pulled SEND's descriptor out of the packet, once, into private
 * memory; false if it is malformed (the slot is shared memory a peer may
 * still be writing: nothing of it is read twice).
 */
bool resp_pull_desc_copy(const uint8_t *payload, uint32_t paylen,
			 struct pull_desc_copy *d)
{
	struct pull_desc in;
	size_t segs;

	/* The payload follows the headers at any 4-byte offset: copied by
	 * bytes, never read through a pointer to the 8-byte aligned
	 * struct. */
	if (paylen < sizeof(in))
		return false;
	memcpy(&in, payload, sizeof(in));
	d->nr = in.nr;
	d->length = in.length;
	d->map_fd = in.map_fd;
	d->map_id = in.map_id;
	segs = (size_t)d->nr * sizeof(d->seg[0]);
	if (d->nr > PULL_MAX_SEGS || segs > paylen - sizeof(in))
		return false;
	memcpy(d->seg, payload + sizeof(in), segs);
	return true;
}

static void resp_send_pull(struct emu_qp *qp, const struct pkt *p)
{
	const struct tp_place_ops *place = engine_place(qp->hca->engine);
	struct pull_desc_copy desc, *d = &desc;
	int ret;

	/* A transport without placement has no pulled SENDs. */
	if (!place || !(p->op->mask & OPM_ONLY) ||
	    !resp_pull_desc_copy(p->payload, p->paylen, d)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_REQ_ERR,
			  IBV_WC_LOC_QP_OP_ERR);
		return;
	}
	if (d->length > wqe_capacity(qp->resp.wqe)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, 0, IBV_WC_LOC_LEN_ERR);
		return;
	}
	ret = place->pull(qp, qp->resp.wqe, d);
	if (ret == ESRCH) {
		/* The sender died after sending: its message never fully
		 * arrived, as a packet lost on the wire (IBA 9.7.5); the
		 * receive WQE stays ours for the next SEND, the QP as it
		 * was. */
		qp->resp.op = 0;
		return;
	}
	if (ret) {
		resp_fail(qp, p, AETH_NAK_REM_OP_ERR, 0, IBV_WC_LOC_PROT_ERR);
		return;
	}
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	qp->resp.msn++;
	qp->resp.op = 0;
	resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)d->length,
			   p);
	/* A pull is long: once RESP_PULL_ACK_BYTES have been copied, the
	 * ACK goes now rather than after the whole drain, so that the
	 * requester's send queue moves on while we copy the rest; below
	 * that, with the drain's other requests (IBA 9.7.5.1.1). */
	qp->resp.pulled_unacked += d->length;
	if (qp->resp.pulled_unacked >= RESP_PULL_ACK_BYTES)
		resp_ack(qp);
	else
		resp_ack_later_locked(qp);
}

static void resp_send(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t mask = p->op->mask;
	struct iovec iov[IBEMU_MAX_SGE];
	int nr = -1; /* the receive WQE's iovecs, once checked here */

	if (mask & OPM_FIRST) {
		/* A receive WQE still held takes this one: UC's, of a
		 * message dropped on the way (IBA 9.8.3: a dropped message
		 * consumes no receive WQE), or one whose pulled data could
		 * not be read from a sender that died. */
		if (!qp->resp.has_wqe && !resp_take_wqe(qp, true)) {
			resp_rnr(qp, p);
			return;
		}
		qp->resp.op = OPM_SEND;
		qp->resp.offset = 0;
		if (qp->resp.wqe->num_sge > IBEMU_MAX_SGE ||
		    sge_check_iov(qp, qp->resp.wqe->sge, qp->resp.wqe->num_sge,
				  true, iov, &nr) != IBV_WC_SUCCESS) {
			resp_fail(qp, p, AETH_NAK_REM_OP_ERR, 0,
				  IBV_WC_LOC_PROT_ERR);
			return;
		}
	}
	if (p->hdr->flags & PKT_F_PULL) {
		resp_send_pull(qp, p);
		return;
	}
	if (qp->resp.offset + (uint64_t)p->paylen >
	    wqe_capacity(qp->resp.wqe)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, 0, IBV_WC_LOC_LEN_ERR);
		return;
	}
	/* The first packet goes where the check just found the buffers;
	 * later ones look them up again (the regions may have changed in
	 * between). */
	if (p->paylen && nr >= 0)
		iov_scatter(iov, nr, p->payload, p->paylen);
	else if (p->paylen &&
		 sge_copy(qp, qp->resp.wqe->sge, qp->resp.wqe->num_sge,
			  qp->resp.offset, (void *)p->payload, p->paylen,
			  true)) {
		resp_fail(qp, p, AETH_NAK_REM_OP_ERR, 0, IBV_WC_LOC_PROT_ERR);
		return;
	}
	/* Send with Invalidate (IBA 9.4.1.1, 10.6.7.3): the message is
	 * placed, then the window (or mkey, mkey.c) its IETH names is
	 * invalidated.  One that cannot be (a region, a type 1 window,
	 * another QP's type 2B window, an mkey created without remote
	 * invalidation, nothing) fails the receive with REM_INV_REQ_ERR and the
	 * QP, as rxe does (class J), and the requester is NAKed with an
	 * invalid request. */
	if ((mask & OPM_IETH) &&
	    key_invalidate_locked(qp, pkt_ieth_rkey(p), true)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, 0,
			  IBV_WC_REM_INV_REQ_ERR);
		return;
	}
	qp->resp.offset += p->paylen;
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	if (mask & OPM_LAST) {
		qp->resp.msn++;
		qp->resp.op = 0;
		resp_complete_recv(qp, IBV_WC_SUCCESS, IBV_WC_RECV,
				   qp->resp.offset, p);
		resp_ack_later_locked(qp);
	}
}

/*
 * The local address of [va, va+len) under rkey with access, or NULL (IBA
 * 10.6.3.2 / C9-88: key valid, same PD, access right, in range).  Every
 * packet is checked again and copied under qp.lock, which deregistration
 * waits for (mr.c), so once ibv_dereg_mr returns no packet of an open
 * message touches the region.  An R_Key of a memory window (IBA 10.6.7)
 * is checked by mw.c, which holds the windows' lock until
 * resp_rkey_end(), so no access runs across an invalidation; an mkey's
 * range that lies in one piece likewise by mkey_access.c, which holds
 * the mkey's lock (a range across pieces: NULL, resp_rkey_copy and
 * resp_rkey_ok walk it).
 */
static uint8_t *resp_rkey_begin(struct emu_qp *qp, uint32_t rkey,
				uint64_t va, uint64_t len, int access)
{
	struct emu_mr *mr;
	uint8_t *addr;

	if (mw_key_is_window(rkey))
		return mw_access_begin(qp, rkey, va, len, access);
	mr = mr_lookup(qp->hca, rkey);
	/* An mkey's range in one of its pieces (mkey_access.c), held. */
	if (mr && mr->mkey) {
		addr = mkey_access_begin(qp, mr->mkey, va, len, access);
		qp->resp.mkey_held = addr ? mr->mkey : NULL;
		return addr;
	}
	if (!mr || mr->pd_id != qp->pd_id || !(mr->access & access))
		return NULL;
	return sge_mr_addr(mr, va, len, access != IBV_ACCESS_REMOTE_READ);
}

/* The access of resp_rkey_begin() that returned an address has ended. */
static void resp_rkey_end(struct emu_qp *qp, uint32_t rkey)
{
	if (mw_key_is_window(rkey))
		mw_access_end(qp);
	if (qp->resp.mkey_held) {
		mkey_access_end(qp->resp.mkey_held);
		qp->resp.mkey_held = NULL;
	}
}

/* Whether rkey grants access to [va, va+len) now; an mkey's range may
 * span several pieces. */
static bool resp_rkey_ok(struct emu_qp *qp, uint32_t rkey, uint64_t va,
			 uint64_t len, int access)
{
	struct emu_mkey *mk;

	if (!resp_rkey_begin(qp, rkey, va, len, access)) {
		mk = mkey_lookup(qp->hca, rkey);
		return mk && mkey_check(qp, mk, va, len, access);
	}
	resp_rkey_end(qp, rkey);
	return true;
}

/* Copy len bytes between buf and [va, va+len) under rkey; false if the
 * region no longer allows it. */
static bool resp_rkey_copy(struct emu_qp *qp, uint32_t rkey, uint64_t va,
			   void *buf, uint32_t len, bool to_region)
{
	int access = to_region ? IBV_ACCESS_REMOTE_WRITE
			       : IBV_ACCESS_REMOTE_READ;
	uint8_t *addr = resp_rkey_begin(qp, rkey, va, len, access);
	struct emu_mkey *mk;

	if (!addr) {
		/* Across pieces of an mkey: piece by piece. */
		mk = mkey_lookup(qp->hca, rkey);
		return mk && !mkey_copy(qp, mk, va, buf, len, access,
					to_region);
	}
	if (to_region)
		memcpy(addr, buf, len);
	else
		memcpy(buf, addr, len);
	resp_rkey_end(qp, rkey);
	return true;
}

static void resp_write(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t mask = p->op->mask;

	if (mask & OPM_FIRST) {
		uint64_t va = pkt_reth_va(p);
		uint32_t len = pkt_reth_len(p);

		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
			resp_fail(qp, p, AETH_NAK_INVALID_REQ,
				  IBV_EVENT_QP_REQ_ERR, IBV_WC_SUCCESS);
			return;
		}
		/* An immediate needs a receive WQE before anything lands. */
		if ((mask & OPM_LAST) && (mask & OPM_IMMDT) &&
		    !qp->resp.has_wqe && !resp_take_wqe(qp, false)) {
			resp_rnr(qp, p);
			return;
		}
		/* A zero-length write names no memory (IBA 9.7.4.1.4). */
		if (len && !resp_rkey_ok(qp, pkt_reth_rkey(p), va, len,
					 IBV_ACCESS_REMOTE_WRITE)) {
			resp_fail(qp, p, AETH_NAK_REM_ACC_ERR,
				  IBV_EVENT_QP_ACCESS_ERR, IBV_WC_SUCCESS);
			return;
		}
		qp->resp.op = OPM_WRITE;
		qp->resp.wrkey = pkt_reth_rkey(p);
		qp->resp.wva = va;
		qp->resp.remaining = len;
		qp->resp.wlen = len;
	}
	if (p->paylen > qp->resp.remaining) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	if ((mask & OPM_LAST) && (mask & OPM_IMMDT) && !qp->resp.has_wqe &&
	    !resp_take_wqe(qp, false)) {
		resp_rnr(qp, p);
		return;
	}
	if (p->paylen) {
		/* Deregistered since the first packet (IBA 10.6.3.5). */
		if (!resp_rkey_copy(qp, qp->resp.wrkey, qp->resp.wva,
				    (void *)p->payload, p->paylen, true)) {
			resp_fail(qp, p, AETH_NAK_REM_ACC_ERR,
				  IBV_EVENT_QP_ACCESS_ERR, IBV_WC_SUCCESS);
			return;
		}
		qp->resp.wva += p->paylen;
		qp->resp.remaining -= p->paylen;
		fault_point(FAULT_AT_WRITE);
	}
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	if (mask & OPM_LAST) {
		if (qp->resp.remaining) {
			/* Fewer bytes than the RETH said (IBA 9.7.4.1.4). */
			resp_fail(qp, p, AETH_NAK_INVALID_REQ,
				  IBV_EVENT_QP_ACCESS_ERR, IBV_WC_SUCCESS);
			return;
		}
		qp->resp.msn++;
		qp->resp.op = 0;
		if (mask & OPM_IMMDT)
			resp_complete_recv(qp, IBV_WC_SUCCESS,
					   IBV_WC_RECV_RDMA_WITH_IMM,
					   qp->resp.wlen, p);
		resp_ack_later_locked(qp);
	}
}

/*
 * RDMA ATOMIC WRITE (IBA 1.5): one naturally aligned 8-byte word under
 * an R_Key with remote write access, stored at once, so that no reader,
 * CPU or HCA, sees part of it.  Acknowledged as an RDMA WRITE; a
 * duplicate is acknowledged again, not executed again (resp_duplicate).
 * The errors are those of RDMA WRITE and of the atomics: the QP does not
 * allow remote writes, or the request is not one aligned word: NAK
 * Invalid Request (IBA 9.7.4.1.4, 9.4.5); the R_Key does not allow it:
 * NAK Remote Access Error (IBA 9.7.4.1.5, C9-88).
 */
static void resp_atomic_write(struct emu_qp *qp, const struct pkt *p)
{
	uint64_t va = pkt_reth_va(p), value;
	uint8_t *target;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_REQ_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	if (pkt_reth_len(p) != 8 || p->paylen != 8 || (va & 7)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	target = resp_rkey_begin(qp, pkt_reth_rkey(p), va, 8,
				 IBV_ACCESS_REMOTE_WRITE);
	if (!target) {
		resp_fail(qp, p, AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	/* The payload is copied once out of the packet, then stored whole:
	 * the application's word, as for the atomics (resp_atomic). */
	memcpy(&value, p->payload, sizeof(value));
	__atomic_store_n((uint64_t *)target, value, __ATOMIC_SEQ_CST);
	resp_rkey_end(qp, pkt_reth_rkey(p));
	fault_point(FAULT_AT_WRITE);
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	qp->resp.msn++;
	resp_ack_later_locked(qp);
}

/* Responses owed: none is waiting for room in the requester's inbox. */
static bool resp_replies_empty(const struct emu_qp *qp)
{
	return qp->resp.replies_head == qp->resp.replies_tail;
}

/* The ring index after i. */
static uint32_t resp_replies_next(const struct emu_qp *qp, uint32_t i)
{
	return (i + 1) % qp->resp.replies_size;
}

static void resp_replies_pop(struct emu_qp *qp)
{
	if (qp->resp.replies[qp->resp.replies_head].dup)
		qp->resp.replies_dups--;
	qp->resp.replies_head = resp_replies_next(qp, qp->resp.replies_head);
}

static uint32_t resp_replies_owed(const struct emu_qp *qp)
{
	return qp->resp.replies_size
		       ? (qp->resp.replies_tail + qp->resp.replies_size -
			  qp->resp.replies_head) %
				 qp->resp.replies_size
		       : 0;
}

/*
 * Whether one more response may be owed.  To new requests, no more at
 * once than the responder resources granted (max_dest_rd_atomic, IBA
 * 9.7.4.1.5), READs and atomics alike: the requester has no more
 * outstanding.  The answers to duplicates are not counted there: the
 * requester may have completed the request since, with a response of the
 * first stream that came late, and answers it no longer waits for must
 * not make the responder refuse a new READ (NAK invalid request, the QP
 * in error).  They have room of their own; a duplicate that finds none
 * goes unanswered and the requester asks again.
 */
static bool resp_reply_room(const struct emu_qp *qp, bool dup)
{
	if (dup)
		return qp->resp.replies_dups < qp->attr.max_dest_rd_atomic;
	return resp_replies_owed(qp) - qp->resp.replies_dups <
	       qp->attr.max_dest_rd_atomic;
}

/* Owe a response; NULL if there is no room. */
static struct resp_reply *resp_reply_push(struct emu_qp *qp, uint32_t psn,
					  bool dup)
{
	uint32_t size = 2 * IBEMU_MAX_QP_INIT_RD_ATOM + 1;
	struct resp_reply *r;

	if (!qp->resp.replies) {
		qp->resp.replies = calloc(size, sizeof(*qp->resp.replies));
		if (!qp->resp.replies)
			return NULL;
		qp->resp.replies_size = size;
	}
	if (!resp_reply_room(qp, dup))
		return NULL;
	r = &qp->resp.replies[qp->resp.replies_tail];
	memset(r, 0, sizeof(*r));
	r->psn = psn;
	r->dup = dup;
	qp->resp.replies_dups += dup;
	qp->resp.replies_tail = resp_replies_next(qp, qp->resp.replies_tail);
	return r;
}

/* Queue the responses to a READ request; their AETHs carry msn. */
static bool resp_read_queue(struct emu_qp *qp, const struct pkt *p,
			    uint64_t va, uint32_t len, uint32_t msn, bool dup)
{
	struct resp_reply *r = resp_reply_push(qp, p->psn, dup);

	if (!r)
		return false;
	r->msn = msn;
	r->rkey = pkt_reth_rkey(p);
	r->va = va;
	r->left = len;
	r->first = true;
	return true;
}

/*
 * The region of a READ being answered was deregistered (IBA 10.6.3.5):
 * the packet built for it carries a NAK remote access error instead, and
 * the responder enters the error state (manual 6.1.4 QP_ACCESS_ERR).
 */
static void resp_read_abort(struct emu_qp *qp, struct pkt_out *out,
			    const struct resp_reply *r)
{
	/* The claimed room is used for the NAK: rebuild it as an ACK. */
	out->op = opcode_get(resp_opcode(qp, IB_OP_ACKNOWLEDGE));
	out->pkt.hdr->len = out->op->hdr_len;
	out_bth_init(out, resp_opcode(qp, IB_OP_ACKNOWLEDGE), 0,
		     IBEMU_DEFAULT_PKEY,
		     qp->attr.dest_qp_num, r->psn, false);
	out_set_aeth(out, AETH_NAK | AETH_NAK_REM_ACC_ERR, qp->resp.msn);
	pkt_send(out);
	emu_event(&qp->owner, IBV_EVENT_QP_ACCESS_ERR);
	qp_error_locked(qp);
}

/*
 * The region a duplicate READ is answered from went away since it was
 * accepted (a window rebound meanwhile): a duplicate never fails the QP
 * (IBA 9.7.5.2), so the rest of its answer is given up and the packet
 * built for it carries the ACK of what was executed instead, which the
 * requester may take again at no cost (IBA 9.7.5.1.1).
 */
static void resp_read_dup_lost(struct emu_qp *qp, struct pkt_out *out)
{
	uint32_t psn = psn_add(qp->resp.epsn, BTH_PSN_MASK);

	out->op = opcode_get(resp_opcode(qp, IB_OP_ACKNOWLEDGE));
	out->pkt.hdr->len = out->op->hdr_len;
	out_bth_init(out, resp_opcode(qp, IB_OP_ACKNOWLEDGE), 0,
		     IBEMU_DEFAULT_PKEY, qp->attr.dest_qp_num, psn, false);
	out_set_aeth(out, AETH_ACK | AETH_ACK_UNLIMITED, qp->resp.msn);
	pkt_send(out);
}

/* An atomic's acknowledgement (IBA 9.7.5.1.4); false if the inbox is full. */
static bool resp_atomic_ack_send(struct emu_qp *qp, struct tp_peer *dst,
				 const struct resp_reply *r)
{
	struct pkt_out out;

	if (!pkt_begin(&out, dst, qp, resp_opcode(qp, IB_OP_ATOMIC_ACKNOWLEDGE),
		       qp->attr.dest_qp_num, r->psn, false, 0))
		return false;
	out_set_aeth(&out, AETH_ACK | AETH_ACK_UNLIMITED, r->msn);
	out_set_atmack(&out, r->orig);
	pkt_send(&out);
	return true;
}

/* The next READ response packet of r; false if the inbox is full or the
 * region went away (then the QP is in error). */
static bool resp_read_packet(struct emu_qp *qp, struct tp_peer *dst,
			     struct resp_reply *r)
{
	uint32_t paylen = r->left < qp->mtu ? r->left : qp->mtu;
	bool last = paylen == r->left;
	struct pkt_out out;
	uint8_t opcode;

	if (r->first && last)
		opcode = IB_OP_READ_RESPONSE_ONLY;
	else if (r->first)
		opcode = IB_OP_READ_RESPONSE_FIRST;
	else if (last)
		opcode = IB_OP_READ_RESPONSE_LAST;
	else
		opcode = IB_OP_READ_RESPONSE_MIDDLE;
	opcode = resp_opcode(qp, opcode);
	if (!pkt_begin(&out, dst, qp, opcode, qp->attr.dest_qp_num, r->psn,
		       false, paylen))
		return false;
	if (out.op->mask & OPM_AETH)
		out_set_aeth(&out, AETH_ACK | AETH_ACK_UNLIMITED, r->msn);
	if (paylen && !resp_rkey_copy(qp, r->rkey, r->va, out_payload(&out),
				      paylen, false)) {
		if (r->dup) {
			resp_read_dup_lost(qp, &out);
			r->left = 0;
			return true;
		}
		resp_read_abort(qp, &out, r);
		return false;
	}
	pkt_send(&out);
	r->va += paylen;
	r->left -= paylen;
	r->psn = psn_add(r->psn, 1);
	r->first = false;
	return true;
}

/* Send owed responses, in order, until done or the inbox is full; then
 * the ACK they held back. */
static void resp_replies_send(struct emu_qp *qp)
{
	struct tp_peer *dst = resp_peer(qp);
	struct resp_reply *r;

	while (!resp_replies_empty(qp)) {
		r = &qp->resp.replies[qp->resp.replies_head];
		if (!dst) {
			resp_replies_pop(qp);
			continue;
		}
		if (r->atomic) {
			if (!resp_atomic_ack_send(qp, dst, r))
				goto full;
		} else {
			do {
				if (!resp_read_packet(qp, dst, r)) {
					if (qp->state == IBV_QPS_ERR)
						return; /* aborted */
					goto full;
				}
			} while (r->left);
		}
		resp_replies_pop(qp);
	}
	if (qp->resp.ack_pending)
		resp_ack(qp);
	return;
full:
	engine_pending_add_locked(qp);
}

/*
 * A duplicate READ or atomic request at psn: the requester has given up
 * the responses from psn on, and resends every request after it.  The
 * responses still owed from there are dropped, the duplicate taking
 * their place (IBA 9.7.4.1.2: a duplicate READ is answered anew from what
 * its saved READ covers, a duplicate atomic with its saved result), so
 * that re-issued requests
 * never hold more responder resources than max_dest_rd_atomic and a new
 * READ is not refused for want of them.  The ring is in PSN order: every
 * reply is pushed after the cancelling of those from its PSN on.
 */
static void resp_replies_cancel_from(struct emu_qp *qp, uint32_t psn)
{
	const struct resp_reply *r;
	uint32_t i, j, last;

	if (!qp->resp.replies)
		return;
	for (i = qp->resp.replies_head; i != qp->resp.replies_tail;
	     i = resp_replies_next(qp, i)) {
		r = &qp->resp.replies[i];
		last = r->atomic ? r->psn
				 : psn_add(r->psn,
					   psn_span(r->left, qp->mtu) - 1);
		if (psn_cmp(last, psn) >= 0)
			break;
	}
	/* The entries from i on are given up. */
	for (j = i; j != qp->resp.replies_tail; j = resp_replies_next(qp, j))
		qp->resp.replies_dups -= qp->resp.replies[j].dup;
	qp->resp.replies_tail = i;
}

/*
 * The slot the READ or atomic being executed is saved in, for its
 * duplicates: as many as the responder resources granted
 * (max_dest_rd_atomic, IBA 9.7.4.1.5), the oldest replaced first.  The
 * requester has no more outstanding, so no request it may still resend
 * is forgotten.  NULL without memory: a duplicate of it then goes
 * unanswered and the requester gives up in time.
 */
static struct resp_res *resp_res_take(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t n = qp->attr.max_dest_rd_atomic ? qp->attr.max_dest_rd_atomic
						 : 1;
	struct resp_res *r;

	if (!qp->resp.res)
		qp->resp.res = calloc(IBEMU_MAX_QP_INIT_RD_ATOM,
				      sizeof(*qp->resp.res));
	if (!qp->resp.res)
		return NULL;
	r = &qp->resp.res[qp->resp.res_next++ % n];
	memset(r, 0, sizeof(*r));
	r->valid = true;
	r->psn = p->psn;
	r->npkts = 1;
	return r;
}

/*
 * Whether the duplicate READ p asks for what r, a saved READ, covered:
 * the same R_Key, a first PSN within r's, the range within r's and its
 * responses within r's PSNs.  A resent READ may start inside the saved
 * one (IBA 9.7.5.2: the requester resends from the first response it
 * lacks), so a subset is accepted.
 */
static bool resp_res_covers_read(const struct emu_qp *qp,
				 const struct resp_res *r, const struct pkt *p)
{
	uint32_t len = pkt_reth_len(p), k = psn_add(p->psn, -r->psn);
	uint64_t va = pkt_reth_va(p);

	if (!r->valid || r->atomic || pkt_reth_rkey(p) != r->rkey ||
	    k >= r->npkts)
		return false;
	if (va < r->va || va - r->va > r->len || len > r->len - (va - r->va))
		return false;
	return k + psn_span(len, qp->mtu) <= r->npkts;
}

/* Whether the duplicate atomic p is the one r saved: its PSN, R_Key and
 * address (IBA 9.7.4.1.6). */
static bool resp_res_is_atomic(const struct resp_res *r, const struct pkt *p)
{
	return r->valid && r->atomic && r->psn == p->psn &&
	       r->rkey == pkt_atmeth_rkey(p) && r->va == pkt_atmeth_va(p);
}

/* The saved READ or atomic the duplicate p asks again, or NULL. */
static const struct resp_res *resp_res_find(const struct emu_qp *qp,
					    const struct pkt *p)
{
	bool read = p->op->mask & OPM_READ;
	const struct resp_res *r;
	uint32_t i;

	for (i = 0; qp->resp.res && i < IBEMU_MAX_QP_INIT_RD_ATOM; i++) {
		r = &qp->resp.res[i];
		if (read ? resp_res_covers_read(qp, r, p)
			 : resp_res_is_atomic(r, p))
			return r;
	}
	return NULL;
}

/* Execute a READ request: check it, save it for its duplicates and queue
 * its responses. */
static bool resp_read_exec(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t len = pkt_reth_len(p);
	uint64_t va = pkt_reth_va(p);
	struct resp_res *r;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_REQ_ERR,
			  IBV_WC_SUCCESS);
		return false;
	}
	if (len) {
		if (!resp_rkey_ok(qp, pkt_reth_rkey(p), va, len,
				  IBV_ACCESS_REMOTE_READ)) {
			resp_fail(qp, p, AETH_NAK_REM_ACC_ERR,
				  IBV_EVENT_QP_ACCESS_ERR, IBV_WC_SUCCESS);
			return false;
		}
	}
	/* More outstanding reads than the responder resources granted
	 * (max_dest_rd_atomic, manual 6.1.4) are refused.  The READ's
	 * AETHs carry the MSN it completes (IBA 9.7.5.1.3). */
	if (!qp->attr.max_dest_rd_atomic ||
	    !resp_read_queue(qp, p, va, len, qp->resp.msn + 1, false)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return false;
	}
	r = resp_res_take(qp, p);
	if (r) {
		r->npkts = psn_span(len, qp->mtu);
		r->rkey = pkt_reth_rkey(p);
		r->va = va;
		r->len = len;
	}
	return true;
}

static void resp_read(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t len = pkt_reth_len(p);
	uint32_t npkts = psn_span(len, qp->mtu);

	if (!resp_read_exec(qp, p))
		return;
	qp->resp.epsn = psn_add(qp->resp.epsn, npkts);
	qp->resp.msn++;
	resp_replies_send(qp);
}

/* Owe an atomic's acknowledgement and send what can be sent.  With no
 * room (a duplicate beyond the responder resources) it is not sent: the
 * requester times out and asks again. */
static void resp_atomic_reply(struct emu_qp *qp, uint32_t psn, uint32_t msn,
			      uint64_t orig, bool dup)
{
	struct resp_reply *r = resp_reply_push(qp, psn, dup);

	if (r) {
		r->atomic = true;
		r->msn = msn;
		r->orig = orig;
	}
	resp_replies_send(qp);
}

/* Save an executed atomic for its duplicates (IBA 9.7.4.1.6: they are
 * answered with its result, never executed again). */
static void resp_atomic_save(struct emu_qp *qp, const struct pkt *p,
			     uint64_t orig)
{
	struct resp_res *r = resp_res_take(qp, p);

	if (!r)
		return;
	r->atomic = true;
	r->msn = qp->resp.msn;
	r->rkey = pkt_atmeth_rkey(p);
	r->va = pkt_atmeth_va(p);
	r->orig = orig;
}

static void resp_atomic(struct emu_qp *qp, const struct pkt *p)
{
	uint64_t va = pkt_atmeth_va(p), orig, expected;
	uint8_t *target;

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_REQ_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	/* Atomics address an aligned 8-byte word (IBA 9.4.5, manual
	 * 6.1.4 misaligned atomic). */
	if (va & 7) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	/* More outstanding than the responder resources granted (IBA
	 * 9.7.4.1.5): refused before anything is executed. */
	if (!resp_reply_room(qp, false)) {
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	target = resp_rkey_begin(qp, pkt_atmeth_rkey(p), va, 8,
				 IBV_ACCESS_REMOTE_ATOMIC);
	if (!target) {
		resp_fail(qp, p, AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR,
			  IBV_WC_SUCCESS);
		return;
	}
	/* Atomic with respect to every other atomic of this HCA, and to
	 * the CPU as well (IBV_ATOMIC_HCA asks only the former).  The
	 * word is the application's, not an _Atomic object of ours: the
	 * one place the compiler's __atomic builtins are used. */
	if ((p->opcode & ~IB_OPCODE_MASK_PREFIX) == IB_OP_COMPARE_SWAP) {
		expected = pkt_atmeth_compare(p);
		__atomic_compare_exchange_n((uint64_t *)target, &expected,
					    pkt_atmeth_swap_add(p), false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
		orig = expected;
	} else {
		orig = __atomic_fetch_add((uint64_t *)target,
					  pkt_atmeth_swap_add(p),
					  __ATOMIC_SEQ_CST);
	}
	resp_rkey_end(qp, pkt_atmeth_rkey(p));
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	qp->resp.msn++;
	fault_point(FAULT_AT_ATOMIC);
	resp_atomic_save(qp, p, orig);
	resp_atomic_reply(qp, p->psn, qp->resp.msn, orig, false);
}

/*
 * A duplicate READ asking what a saved READ covered: answered again, from
 * the memory that READ named, if its R_Key still grants it (IBA 9.7.4.1.2).
 * The responses owed from its PSN on give way to it (see
 * resp_replies_cancel_from); its AETHs carry the current MSN.  With no
 * room for it, or no right to the memory any more, nothing is answered
 * and the QP stays as it is: the requester resends or gives up.
 */
static void resp_dup_read(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t len = pkt_reth_len(p);
	uint64_t va = pkt_reth_va(p);

	if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) ||
	    !qp->attr.max_dest_rd_atomic ||
	    (len && !resp_rkey_ok(qp, pkt_reth_rkey(p), va, len,
				  IBV_ACCESS_REMOTE_READ)))
		return;
	resp_replies_cancel_from(qp, p->psn);
	if (resp_read_queue(qp, p, va, len, qp->resp.msn, true))
		resp_replies_send(qp);
}

/*
 * A request behind the expected PSN (IBA 9.7.4.1.2, 9.7.5.2): executed
 * already, so it is answered again from what the responder saved and
 * never executed twice.  A READ or atomic that asks anything but what a
 * saved one asked is not ours to answer (a stale or forged packet) and is
 * dropped without a word: a duplicate never NAKs, never moves the QP to
 * the error state, and touches no memory but what its saved READ read.
 * A SEND or WRITE is acknowledged again.
 */
static void resp_duplicate(struct emu_qp *qp, const struct pkt *p)
{
	const struct resp_res *r;

	if (!qp_is_rc(qp))
		return;
	if (p->op->mask & (OPM_READ | OPM_ATOMIC)) {
		r = resp_res_find(qp, p);
		if (!r) {
			ibemu_trace("resp qp %#x psn %#x: duplicate %s matches "
				    "nothing saved: dropped",
				    qp->qpn, p->psn, p->op->name);
		} else if (!r->atomic) {
			resp_dup_read(qp, p);
		} else {
			/* As a duplicate READ: the replies owed from this
			 * PSN on give way to the saved answer, and the owed
			 * ring stays in PSN order, which
			 * resp_replies_cancel_from relies on. */
			resp_replies_cancel_from(qp, p->psn);
			resp_atomic_reply(qp, r->psn, r->msn, r->orig, true);
		}
	} else if (pkt_ackreq(p)) {
		resp_ack(qp);
	}
}

/*
 * UD receive (IBA 9.8, 10.2.5): a Q_Key mismatch or no receive WQE drops
 * the datagram silently (no RNR on UD); the first 40 bytes of the receive
 * buffer hold the GRH when the packet had one (IBV_WC_GRH).
 */
static void resp_ud(struct emu_qp *qp, const struct pkt *p)
{
	struct ibv_grh grh;
	struct ibv_wc wc;

	if (!(p->op->mask & OPM_UD))
		return;
	if (pkt_deth_qkey(p) != qp->attr.qkey) {
		check_proto_qkey(qp, p);
		return;
	}
	if (!resp_take_wqe(qp, true))
		return;
	memset(&wc, 0, sizeof(wc));
	wc.wr_id = qp->resp.wqe->wr_id;
	wc.opcode = IBV_WC_RECV;
	wc.qp_num = qp->qpn;
	wc.src_qp = pkt_deth_sqp(p);
	wc.slid = p->hdr->slid;
	wc.pkey_index = qp->attr.pkey_index;
	wc.byte_len = p->paylen + sizeof(grh);
	qp->resp.has_wqe = false;
	if (sge_check(qp, qp->resp.wqe->sge, qp->resp.wqe->num_sge, true) !=
	    IBV_WC_SUCCESS) {
		wc.status = IBV_WC_LOC_PROT_ERR;
	} else if (wc.byte_len > wqe_capacity(qp->resp.wqe)) {
		wc.status = IBV_WC_LOC_LEN_ERR;
	} else {
		if (p->hdr->flags & PKT_F_GRH) {
			memset(&grh, 0, sizeof(grh));
			grh.version_tclass_flow = htobe32(p->grh->flow);
			grh.paylen = htobe16((uint16_t)(p->paylen + 8 +
							p->op->hdr_len));
			grh.next_hdr = 0x1b; /* IBA 8.3.1: BTH follows */
			grh.hop_limit = p->grh->hop_limit;
			memcpy(grh.sgid.raw, p->grh->sgid, 16);
			memcpy(grh.dgid.raw, p->grh->dgid, 16);
			sge_copy(qp, qp->resp.wqe->sge, qp->resp.wqe->num_sge,
				 0, &grh, sizeof(grh), true);
			wc.wc_flags |= IBV_WC_GRH;
		}
		if (p->paylen)
			sge_copy(qp, qp->resp.wqe->sge, qp->resp.wqe->num_sge,
				 sizeof(grh), (void *)p->payload, p->paylen,
				 true);
		if (p->op->mask & OPM_IMMDT) {
			wc.wc_flags |= IBV_WC_WITH_IMM;
			wc.imm_data = pkt_immdt(p);
		}
		wc.status = IBV_WC_SUCCESS;
	}
	if (!cq_push(qp->rcq, &wc, pkt_se(p)))
		qp_fatal_locked(qp);
}

/* The responder's first decision on a request (traced with IBEMU_DEBUG),
 * in the order of the checks listed at the top of this file. */
enum resp_check {
	RESP_DROP_STATE, /* RESET, INIT, ERR take nothing (IBA 10.3.1) */
	RESP_DATAGRAM, /* UD: its own path (IBA 9.8) */
	RESP_DROP_FOREIGN, /* another transport, or not the connected QP */
	RESP_DUPLICATE, /* PSN behind: answer again (IBA 9.7.4.1.2) */
	RESP_NAK_SEQUENCE, /* PSN ahead, RC: one NAK per gap (9.7.5.2.1) */
	RESP_DROP_GAP, /* PSN ahead, RC, the gap was NAKed already */
	RESP_DROP_UC_GAP, /* PSN ahead, UC, not a first packet (9.8.3) */
	RESP_UC_RESYNC, /* PSN ahead, UC, a first packet: start over */
	RESP_NAK_OPCODE_SEQ, /* opcode out of sequence (IBA 9.7.4.1.1) */
	RESP_DROP_UC_OPCODE, /* the same on UC: the message is dropped */
	RESP_EXECUTE,
};

static const char *const resp_check_name[] = {
	[RESP_DROP_STATE] = "drop: QP state",
	[RESP_DATAGRAM] = "datagram",
	[RESP_DROP_FOREIGN] = "drop: not our connection",
	[RESP_DUPLICATE] = "duplicate",
	[RESP_NAK_SEQUENCE] = "NAK: PSN sequence error",
	[RESP_DROP_GAP] = "drop: gap already NAKed",
	[RESP_DROP_UC_GAP] = "drop: UC gap",
	[RESP_UC_RESYNC] = "UC resynchronise",
	[RESP_NAK_OPCODE_SEQ] = "NAK: opcode sequence",
	[RESP_DROP_UC_OPCODE] = "drop: UC opcode sequence",
	[RESP_EXECUTE] = "execute",
};

/* The message kind of a request: OPM_SEND, OPM_WRITE, OPM_READ or
 * OPM_ATOMIC. */
static uint32_t resp_kind(const struct pkt *p)
{
	return p->op->mask & (OPM_SEND | OPM_WRITE | OPM_READ | OPM_ATOMIC);
}

static enum resp_check resp_check_psn(struct emu_qp *qp, const struct pkt *p)
{
	int32_t d = psn_cmp(p->psn, qp->resp.epsn);

	if (d < 0)
		return RESP_DUPLICATE;
	if (d == 0)
		return RESP_EXECUTE;
	if (qp_is_rc(qp))
		return qp->resp.nak_sent ? RESP_DROP_GAP : RESP_NAK_SEQUENCE;
	return (p->op->mask & OPM_FIRST) ? RESP_UC_RESYNC : RESP_DROP_UC_GAP;
}

static enum resp_check resp_check(struct emu_qp *qp, const struct pkt *p)
{
	enum ibv_qp_state st = qp->state;
	uint32_t mask = p->op->mask, kind = resp_kind(p);
	enum resp_check c;

	if (st != IBV_QPS_RTR && st != IBV_QPS_RTS && st != IBV_QPS_SQD &&
	    st != IBV_QPS_SQE)
		return RESP_DROP_STATE;
	if (qp->type == IBV_QPT_UD)
		return RESP_DATAGRAM;
	/* An XRC initiator has no responder (IBA A14). */
	if (qp->type == IBV_QPT_XRC_SEND || !(mask & qp_opm_transport(qp)) ||
	    p->hdr->src_qpn != qp->attr.dest_qp_num ||
	    !route_from_peer_locked(qp, p->hdr->src_proc))
		return RESP_DROP_FOREIGN;
	c = resp_check_psn(qp, p);
	if (c != RESP_EXECUTE && c != RESP_UC_RESYNC)
		return c;
	/* Inside a message only its MIDDLE/LAST may come; outside, only
	 * FIRST/ONLY (IBA 9.7.4.1.1).  A UC resync starts afresh. */
	if (c == RESP_UC_RESYNC)
		return c;
	if (qp->resp.op ? (kind != qp->resp.op || (mask & OPM_FIRST))
			: !(mask & OPM_FIRST))
		return qp_is_rc(qp) ? RESP_NAK_OPCODE_SEQ : RESP_DROP_UC_OPCODE;
	return RESP_EXECUTE;
}

/* Execute an in-sequence request of the connected QP. */
static void resp_execute(struct emu_qp *qp, const struct pkt *p)
{
	uint32_t kind = resp_kind(p);

	qp->resp.nak_sent = false;
	if (kind == OPM_SEND)
		resp_send(qp, p);
	else if (p->op->mask & OPM_ATOMIC_WRITE)
		resp_atomic_write(qp, p);
	else if (kind == OPM_WRITE)
		resp_write(qp, p);
	else if (kind == OPM_READ && qp_is_rc(qp))
		resp_read(qp, p);
	else if (kind == OPM_ATOMIC && qp_is_rc(qp))
		resp_atomic(qp, p);
	else
		return;
	/* The first packet processed in RTR establishes communication
	 * (manual 6.1.5). */
	if (qp->state == IBV_QPS_RTR && !qp->resp.comm_est) {
		qp->resp.comm_est = true;
		emu_event(&qp->owner, IBV_EVENT_COMM_EST);
	}
}

/*
 * An XRC target QP receives into the XRC SRQ the request names, of its
 * own domain (IBA A14); a request naming another is an invalid request
 * (NAK, the QP enters the error state).  false if it was refused.
 */
static bool resp_xrc_bind(struct emu_qp *qp, const struct pkt *p)
{
	int nak = xrc_bind_locked(qp, pkt_xrceth_srqn(p), qp->resp.op != 0);

	if (nak < 0)
		return true;
	resp_fail(qp, p, (uint8_t)nak, IBV_EVENT_QP_REQ_ERR, IBV_WC_SUCCESS);
	return false;
}

void resp_recv_locked(struct emu_qp *qp, const struct pkt *p)
{
	enum resp_check c;

	if (resp_fast_send_locked(qp, p))
		return;
	c = resp_check(qp, p);

	ibemu_trace("resp qp %#x psn %#x (expected %#x) %s: %s", qp->qpn,
		    p->psn, qp->resp.epsn, p->op->name, resp_check_name[c]);
	switch (c) {
	case RESP_DATAGRAM:
		resp_ud(qp, p);
		break;
	case RESP_DUPLICATE:
		resp_duplicate(qp, p);
		break;
	case RESP_NAK_SEQUENCE:
		qp->resp.nak_sent = true;
		resp_send_aeth(qp, qp->resp.epsn,
			       AETH_NAK | AETH_NAK_PSN_SEQ_ERR);
		break;
	case RESP_DROP_UC_GAP:
	case RESP_DROP_UC_OPCODE:
		/* UC: packets were lost; drop the open message and
		 * resynchronise on the next first packet (IBA 9.8.3). */
		qp->resp.op = 0;
		break;
	case RESP_UC_RESYNC:
		qp->resp.op = 0;
		qp->resp.epsn = p->psn;
		resp_execute(qp, p);
		break;
	case RESP_NAK_OPCODE_SEQ:
		qp->resp.nak_sent = false;
		resp_fail(qp, p, AETH_NAK_INVALID_REQ, IBV_EVENT_QP_REQ_ERR,
			  IBV_WC_SUCCESS);
		break;
	case RESP_EXECUTE:
		if (qp->type == IBV_QPT_XRC_RECV && !resp_xrc_bind(qp, p))
			break;
		resp_execute(qp, p);
		break;
	case RESP_DROP_STATE:
	case RESP_DROP_FOREIGN:
	case RESP_DROP_GAP:
		break;
	}
}

/* Work owed to the requester: a delayed ACK, READ responses. */
void resp_pending_locked(struct emu_qp *qp)
{
	if (!resp_replies_empty(qp))
		resp_replies_send(qp);
	else if (qp->resp.ack_pending)
		resp_ack(qp);
}
