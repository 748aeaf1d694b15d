// SPDX-License-Identifier: MIT
/*
 * The completer's straight line for the common acknowledgement
 * (doc/design.md §10, "The two-sided fast path"): an RC ACK, from the
 * connected peer, of exactly the oldest request in flight, a SEND or an
 * RDMA WRITE, with nothing sent after it.  comp_recv_locked's steps for
 * it, less what cannot apply: no resend under way (no NAK told, no
 * implied NAK), no READ or atomic to answer, no SQ drain to report (the
 * QP is in RTS), no checking mode.  Anything else goes the general way.
 *
 * Lock rule: qp.lock held, as for comp_recv_locked.
 */
#include "config.h"

#include "check.h"
#include "engine.h"
#include "hca.h"
#include "route.h"

bool comp_fast_ack_locked(struct emu_qp *qp, const struct pkt *p)
{
	struct wqe *w;

	if (!engine_fast_on() ||
	    p->opcode != (IB_OPCODE_RC | IB_OP_ACKNOWLEDGE) ||
	    qp->type != IBV_QPT_RC || qp->dc_type != EMU_DC_NONE ||
	    qp->state != IBV_QPS_RTS ||
	    (pkt_aeth_syndrome(p) & AETH_TYPE_MASK) != AETH_ACK ||
	    qp->comp.told.on || qp->comp.implied.on ||
	    qp->sq.head + 1 != qp->req.next ||
	    psn_add(p->psn, 1) != qp->req.psn ||
	    p->hdr->src_qpn != qp->attr.dest_qp_num || check_on() ||
	    !route_from_peer_locked(qp, p->hdr->src_proc))
		return false;
	w = wqe_ring_at(&qp->sq, qp->sq.head);
	/* The one request in flight, whole: its last PSN is the ACK's
	 * (IBA 9.7.5.1); a READ or an atomic completes with its response
	 * only (IBA 9.7.5.1.3). */
	if (w->state != WQE_SENT || w->last_psn != p->psn ||
	    wr_is(w->opcode, WR_RD_ATOMIC))
		return false;
	/* Forward progress (IBA 9.7.6.1): the budgets are whole again, and
	 * nothing is left in flight to time. */
	qp->comp.acked_psn = p->psn;
	w->state = WQE_DONE;
	qp->sq.head++;
	comp_forward_locked(qp);
	/* A completion whose CQ overflows fails the QP (comp.c), and the
	 * requester then sends nothing more. */
	if (comp_wanted(qp, w->send_flags))
		comp_unqueued_wc_locked(qp, w->wr_id, w->opcode,
					wr_is(w->opcode, WR_ATOMIC_WRITE)
						? 8
						: w->length);
	/* What the application posted meanwhile, blocked behind nothing
	 * now, goes (comp_recv_locked's last step). */
	if (qp->req.next != qp->sq.tail)
		req_run_locked(qp);
	return true;
}
