// SPDX-License-Identifier: MIT
/*
 * The checking mode's queue checks (check_queue.h): what a post, the
 * responder's take from an SRQ and a completion find, reported through
 * emulator/base/check.c.  Called only while checking is on.
 *
 * Lock rule: a QP's check_qp is under its qp.lock (every post holds it);
 * a CQ's creation stack is written before the CQ is published and read
 * only after.
 */
#include "config.h"

#include "check_queue.h"
#include "hca.h"
#include "wr_opcode.h"

static uint64_t wr_bytes(const struct ibv_send_wr *wr)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < wr->num_sge && wr->sg_list; i++)
		len += wr->sg_list[i].length;
	return len;
}

/* Unsignaled WRs need a signaled one among every send queue's worth:
 * only its completion says that the slots before it are free
 * (ibv_post_send(3), IBV_SEND_SIGNALED; IBA 10.8.6). */
static void check_unsignaled(struct emu_qp *qp, const struct ibv_send_wr *wr)
{
	struct check_qp *c = &qp->chk;

	if (qp->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED)) {
		c->unsig = 0;
		return;
	}
	if (!c->unsig++)
		check_stack_here(&c->first_unsig);
	if (c->unsig == qp->sq.size)
		check_report(CHECK_UNSIGNALED_FULL, qp->qpn, &c->first_unsig,
			     "QP %#x: %u unsignaled work requests in a row, "
			     "its max_send_wr, and none signaled", qp->qpn,
			     c->unsig);
}

void check_queue_send_slow(struct emu_qp *qp, const struct ibv_send_wr *wr,
			   int ret)
{
	uint64_t len;

	if (ret == ENOMEM)
		check_report(CHECK_SQ_OVERFLOW, qp->qpn, NULL,
			     "QP %#x: ibv_post_send found its send queue full "
			     "(%u work requests outstanding, max_send_wr %u): "
			     "ENOMEM", qp->qpn, qp->sq.tail - qp->sq.head,
			     qp->sq.size);
	/* IBA 9.4.5: an atomic names one aligned 8-byte word. */
	if (wr_is(wr->opcode, WR_ATOMIC) && (wr->wr.atomic.remote_addr & 7))
		check_report(CHECK_ATOMIC_ALIGN, qp->qpn, NULL,
			     "QP %#x: %s at remote_addr %#llx, not 8-byte "
			     "aligned", qp->qpn,
			     wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP
				     ? "ATOMIC_CMP_AND_SWP"
				     : "ATOMIC_FETCH_AND_ADD",
			     (unsigned long long)wr->wr.atomic.remote_addr);
	if (wr->send_flags & IBV_SEND_INLINE) {
		len = wr_bytes(wr);
		if (len > qp->cap.max_inline_data)
			check_report(CHECK_INLINE_SIZE, qp->qpn, NULL,
				     "QP %#x: IBV_SEND_INLINE of %llu bytes, "
				     "max_inline_data %u", qp->qpn,
				     (unsigned long long)len,
				     qp->cap.max_inline_data);
	}
	if (!ret)
		check_unsignaled(qp, wr);
}

void check_queue_recv_slow(struct emu_qp *qp, struct emu_srq *srq, int ret)
{
	(void)ret;
	if (qp)
		check_report(CHECK_RQ_OVERFLOW, qp->qpn, NULL,
			     "QP %#x: ibv_post_recv found its receive queue "
			     "full (max_recv_wr %u): ENOMEM", qp->qpn,
			     qp->rq.ring.size);
	else
		check_report(CHECK_RQ_OVERFLOW, srq->owner.handle, NULL,
			     "SRQ %#llx: ibv_post_srq_recv found it full "
			     "(max_wr %u): ENOMEM",
			     (unsigned long long)srq->owner.handle,
			     srq->rq.ring.size);
}

void check_queue_cq_created_slow(struct emu_cq *cq)
{
	check_stack_here(&cq->chk_created);
}

void check_queue_cq_overrun_slow(struct emu_cq *cq)
{
	/* The ring holds exactly the cqe asked for (cq.c): its overrun is
	 * the one a device with a CQ of that size has (manual 6.1.1). */
	check_report(CHECK_CQ_OVERFLOW, cq->owner.handle, &cq->chk_created,
		     "CQ %#llx: a completion came with its %u entries "
		     "waiting, the cqe it was created or resized with: lost, "
		     "IBV_EVENT_CQ_ERR", (unsigned long long)cq->owner.handle,
		     cq->ring.size);
}

/* IBA 10.2.9.4: the limit event is the SRQ's only warning.  It fires once
 * and disarms the limit (IBA 10.2.9.5, ibv_modify_srq(3)): a program that
 * armed it was told, whether or not it armed it again.  Under the SRQ's
 * rq.lock. */
void check_queue_srq_taken_slow(struct emu_qp *qp, bool found, uint32_t left)
{
	struct emu_srq *srq = qp->srq;

	if (!srq || left || srq->limit || srq->limit_armed)
		return;
	check_report(CHECK_SRQ_EMPTY, srq->owner.handle, NULL,
		     found ? "SRQ %#llx: QP %#x took its last receive, no "
			     "srq_limit armed"
			   : "SRQ %#llx: a message for QP %#x found it empty, "
			     "no srq_limit armed",
		     (unsigned long long)srq->owner.handle, qp->qpn);
}
