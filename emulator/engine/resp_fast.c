// SPDX-License-Identifier: MIT
/*
 * The responder's straight line for the common message (doc/design.md
 * §10, "The two-sided fast path"): an RC SEND that fits in one packet
 * (SEND_ONLY, with or without immediate data), in sequence, from the
 * connected peer, into the next receive WQE of the QP's own receive
 * queue, one scatter entry that holds it.  resp_recv_locked's checks
 * and steps for it, less what cannot apply: no open message, no pull,
 * no SRQ (its lock and limit event), no checking mode (its records), no
 * RTR (COMM_EST, manual 6.1.5), no invalidation.  Anything else, and
 * any check that fails, goes the general way, which reports it; nothing
 * here fails a packet.
 *
 * Lock rule: qp.lock held, as for resp_recv_locked; the receive ring is
 * the QP's own, under it.
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

bool resp_fast_send_locked(struct emu_qp *qp, const struct pkt *p)
{
	struct emu_rq *rq = &qp->rq;
	struct wqe *w;
	uint8_t *dst = NULL;
	struct ibv_wc wc;

	if (!resp_fast_opcode(p->opcode) || qp->type != IBV_QPT_RC ||
	    qp->state != IBV_QPS_RTS || qp->srq || qp->resp.op ||
	    qp->resp.has_wqe || p->psn != qp->resp.epsn ||
	    (p->hdr->flags & PKT_F_PULL) ||
	    p->hdr->src_qpn != qp->attr.dest_qp_num ||
	    !route_from_peer_locked(qp, p->hdr->src_proc) ||
	    !engine_fast_on() || check_on())
		return false;
	w = wqe_ring_head(&rq->ring);
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
	rq->ring.head++;
	qp->resp.nak_sent = false;
	qp->resp.epsn = psn_add(qp->resp.epsn, 1);
	qp->resp.msn++;
	wc = (struct ibv_wc){
		.wr_id = w->wr_id,
		.status = IBV_WC_SUCCESS,
		.opcode = IBV_WC_RECV,
		.byte_len = p->paylen,
		.qp_num = qp->qpn,
		.src_qp = qp->attr.dest_qp_num,
		.slid = p->hdr->slid,
		.pkey_index = qp->attr.pkey_index,
	};
	if (p->op->mask & OPM_IMMDT) {
		wc.wc_flags = IBV_WC_WITH_IMM;
		wc.imm_data = pkt_immdt(p);
	}
	if (!cq_push(qp->rcq, &wc, pkt_se(p)))
		qp_fatal_locked(qp);
	resp_ack_later_locked(qp);
	return true;
}
