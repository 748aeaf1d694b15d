// SPDX-License-Identifier: MIT
/*
 * Flushing: in the error state every outstanding and newly posted WR
 * completes with IBV_WC_WR_FLUSH_ERR, in order, send queue first; an
 * unsignaled send WR completes too, since a completion in error is always
 * reported (IBA 10.3.1; manual 6.2 IBV_WC_WR_FLUSH_ERR).
 *
 * Lock rule: callers hold qp.lock; the receive queue's lock is taken
 * here, then the CQ locks.
 */
#include "config.h"

#include "hca.h"
#include "wr_opcode.h"

void flush_wqe(struct emu_cq *cq, struct emu_qp *qp, const struct wqe *wqe,
	       enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc = {
		.wr_id = wqe->wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = opcode,
		.qp_num = qp->qpn,
	};

	cq_push(cq, &wc, false);
}

void flush_sq_locked(struct emu_qp *qp)
{
	struct wqe *wqe;

	while ((wqe = wqe_ring_head(&qp->sq))) {
		flush_wqe(qp->scq, qp, wqe,
			  wr_opcode_get(wqe->opcode)->wc_opcode);
		qp->sq.head++;
	}
	qp->req.next = qp->sq.head;
	qp->req.mcast.on = false;
}

void flush_all_locked(struct emu_qp *qp)
{
	struct wqe *wqe;

	flush_sq_locked(qp);
	if (!qp_has_own_rq(qp))
		return;
	/* The QP's own ring: under qp.lock, held (rq.c). */
	while ((wqe = wqe_ring_head(&qp->rq.ring))) {
		flush_wqe(qp->rcq, qp, wqe, IBV_WC_RECV);
		qp->rq.ring.head++;
	}
}
