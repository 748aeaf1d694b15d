// SPDX-License-Identifier: MIT
/*
 * The responder's straight line for the common message (doc/design.md
 * §10, "The two-sided fast path"): an RC SEND that fits in one packet
 * (SEND_ONLY, with or without immediate data), in sequence, from the
 * connected peer, into the next receive WQE of the QP's own receive
 * queue or its SRQ, one scatter entry that holds it.  resp_recv_locked's
 * checks and steps for it, less what cannot apply: no open message, no
 * pull, no checking mode (its records), not the first packet in RTR
 * (COMM_EST, manual 6.1.5), no invalidation, no XRC.  Anything else,
 * and any check that fails, goes the general way, which reports it;
 * nothing here fails a packet.
 *
 * Lock rule: qp.lock held, as for resp_recv_locked; an SRQ's ring under
 * its rq.lock, taken here.
 */
#include "config.h"

#include <string.h>

#include "check.h"
#include "engine.h"
#include "hca.h"
#include "route.h"

/* The opcodes taken here: RC SEND_ONLY and SEND_ONLY_WITH_IMMEDIATE
 * (IBA 9.2, table 35). */
static bool resp_fast_opcode(uint8_t opcode)
{
	return opcode == (IB_OPCODE_RC | IB_OP_SEND_ONLY) ||
	       opcode == (IB_OPCODE_RC | IB_OP_SEND_ONLY_IMM);
}

/* The payload into the next receive WQE of rq, taken; its wr_id in
 * *wr_id.  false: nothing was taken (none, or not one this line takes).
 * An SRQ's ring is under its own lock (rq.c), the QP's own under qp.lock,
 * held; *limit: the SRQ's limit was reached and is disarmed (IBA
 * 10.2.9.4). */
static bool resp_fast_take(struct emu_qp *qp, struct emu_rq *rq,
			   const struct pkt *p, uint64_t *wr_id, bool *limit)
{
	struct wqe *w = wqe_ring_head(&rq->ring);
	uint8_t *dst;

	/* No receive WQE is an RNR NAK, the general path's (IBA 9.7.5.2.8). */
	if (!w || w->num_sge > 1)
		return false;
	if (p->paylen) {
		/* Length and protection as resp_send checks them (IBA
		 * 10.6.3.2, 9.7.5.2.3); a failure is the general path's to
		 * report. */
		if (!w->num_sge || w->sge[0].length < p->paylen)
			return false;
		dst = sge_local_addr(qp, &w->sge[0], true);
		if (!dst)
			return false;
		memcpy(dst, p->payload, p->paylen);
	}
	*wr_id = w->wr_id;
	rq->ring.head++;
	*limit = resp_srq_limit_reached(qp, rq);
	return true;
}

/* A state whose responder executes requests (IBA 10.3.1), past the
 * first packet of RTR, which establishes communication (COMM_EST, manual
 * 6.1.5: the general path raises it). */
static bool resp_fast_state(const struct emu_qp *qp)
{
	switch (qp->state) {
	case IBV_QPS_RTR:
		return qp->resp.comm_est;
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
	case IBV_QPS_SQE:
		return true;
	default:
		return false;
	}
}

bool resp_fast_send_locked(struct emu_qp *qp, const struct pkt *p)
{
	struct emu_rq *rq = qp_rq(qp);
	bool limit = false, taken;
	uint64_t wr_id;

	if (!engine_fast_on() || !resp_fast_opcode(p->opcode) ||
	    qp->type != IBV_QPT_RC || qp->dc_type != EMU_DC_NONE ||
	    !resp_fast_state(qp) || qp->resp.op ||
	    qp->resp.has_wqe || p->psn != qp->resp.epsn ||
	    (p->hdr->flags & PKT_F_PULL) ||
	    p->hdr->src_qpn != qp->attr.dest_qp_num || check_on() ||
	    !route_from_peer_locked(qp, p->hdr->src_proc))
		return false;
	if (qp->srq)
		emu_lock(&rq->lock);
	taken = resp_fast_take(qp, rq, p, &wr_id, &limit);
	if (qp->srq)
		emu_unlock(&rq->lock);
	if (limit)
		emu_event(&qp->srq->owner, IBV_EVENT_SRQ_LIMIT_REACHED);
	if (!taken)
		return false;
	qp->resp.nak_sent = false;
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	qp->resp.msn++;
	resp_push_recv_locked(qp, wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, p->paylen,
			      p);
	resp_ack_later_locked(qp);
	return true;
}
