// SPDX-License-Identifier: MIT
/*
 * Posting work requests (manual 3.6.4, 3.6.5) and flushing them when a QP
 * enters the error state (IBA 10.3.1: outstanding and newly posted WRs
 * complete with IBV_WC_WR_FLUSH_ERR).
 *
 * Lock rule: post_send holds qp.lock; post_recv holds rq.lock; a flush
 * holds qp.lock, then rq.lock, then the CQ locks.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine.h"
#include "ibemu.h"
#include "log.h"

/* Which opcodes each transport carries (IBA 9.2 opcode table, manual 2.2). */
static bool post_opcode_valid(enum ibv_qp_type type, enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return true;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return type == IBV_QPT_RC || type == IBV_QPT_UC;
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return type == IBV_QPT_RC;
	default:
		return false;
	}
}

static size_t sge_total(const struct ibv_sge *sge, int n)
{
	size_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sge[i].length;
	return len;
}

/* Checks that fail the post itself; the rest fail as completions. */
static int post_send_check(struct ibemu_qp *qp, const struct ibv_send_wr *wr)
{
	enum ibv_qp_type type = qp->vqp.qp.qp_type;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
		ibemu_log_dbg("post_send: num_sge %d > max_send_sge %u",
			      wr->num_sge, qp->cap.max_send_sge);
		return EINVAL;
	}
	if (!post_opcode_valid(type, wr->opcode)) {
		ibemu_log_dbg("post_send: opcode %d on QP type %d",
			      wr->opcode, type);
		return EINVAL;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (wr->opcode == IBV_WR_RDMA_READ ||
		    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			return EINVAL;
		if (sge_total(wr->sg_list, wr->num_sge) >
		    qp->cap.max_inline_data) {
			ibemu_log_dbg("post_send: inline %zu > max_inline %u",
				      sge_total(wr->sg_list, wr->num_sge),
				      qp->cap.max_inline_data);
			return EINVAL;
		}
	}
	if (type == IBV_QPT_UD && !wr->wr.ud.ah) {
		ibemu_log_dbg("post_send: UD send without an address handle");
		return EINVAL;
	}
	return 0;
}

static void post_send_store(struct ibemu_qp *qp, const struct ibv_send_wr *wr)
{
	struct wqe *wqe = wqe_ring_tail(&qp->sq);
	int i;

	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->send_flags = wr->send_flags;
	wqe->num_sge = (uint32_t)wr->num_sge;
	wqe->imm_data = wr->imm_data;
	if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wqe->remote_addr = wr->wr.atomic.remote_addr;
		wqe->rkey = wr->wr.atomic.rkey;
		wqe->compare_add = wr->wr.atomic.compare_add;
		wqe->swap = wr->wr.atomic.swap;
	} else {
		wqe->remote_addr = wr->wr.rdma.remote_addr;
		wqe->rkey = wr->wr.rdma.rkey;
	}
	if (qp->vqp.qp.qp_type == IBV_QPT_UD) {
		wqe->ah = to_eah(wr->wr.ud.ah);
		wqe->remote_qpn = wr->wr.ud.remote_qpn;
		wqe->remote_qkey = wr->wr.ud.remote_qkey;
	}
	wqe->state = WQE_PENDING;
	wqe->status = IBV_WC_SUCCESS;
	wqe->length = (uint32_t)sge_total(wr->sg_list, wr->num_sge);
	wqe->inline_len = 0;
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* Inline data is copied at post time: the buffer may be reused
		 * as soon as ibv_post_send returns (manual 3.6.5). */
		unsigned char *dst = (unsigned char *)&wqe->sge[qp->cap.max_send_sge];

		for (i = 0; i < wr->num_sge; i++) {
			memcpy(dst + wqe->inline_len,
			       (void *)(uintptr_t)wr->sg_list[i].addr,
			       wr->sg_list[i].length);
			wqe->inline_len += wr->sg_list[i].length;
		}
	} else if (wr->num_sge) {
		memcpy(wqe->sge, wr->sg_list, wr->num_sge * sizeof(*wqe->sge));
	}
	qp->sq.tail++;
}

int ibemu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	enum ibv_qp_state state;
	int ret = 0;

	if (ibemu_ctx_stale(ibqp->context)) {
		if (bad_wr)
			*bad_wr = wr;
		return EIO;
	}
	pthread_mutex_lock(&qp->lock);
	state = qp->attr.qp_state;
	/* Send WRs may be posted from RTS on, including SQD, SQE and ERR
	 * (where they are flushed); not before (IBA 10.3.1 / rxe). */
	if (state == IBV_QPS_RESET || state == IBV_QPS_INIT ||
	    state == IBV_QPS_RTR) {
		ibemu_log_dbg("post_send: QP %#x in %d", ibqp->qp_num, state);
		ret = EINVAL;
		goto out;
	}
	for (; wr; wr = wr->next) {
		ret = post_send_check(qp, wr);
		if (ret)
			break;
		if (wqe_ring_full(&qp->sq)) {
			ret = ENOMEM;
			break;
		}
		post_send_store(qp, wr);
	}
	/* In SQE and ERR new send WRs complete flushed (IBA 10.3.1). */
	if (state == IBV_QPS_ERR || state == IBV_QPS_SQE)
		ibemu_qp_flush_sq_locked(qp);
	else if (state == IBV_QPS_RTS)
		req_run_locked(qp);
out:
	pthread_mutex_unlock(&qp->lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

int ibemu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	enum ibv_qp_state state;
	int ret;

	/* A QP on an SRQ takes receives from the SRQ only (manual 3.6.4). */
	if (qp->srq) {
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&qp->lock);
	state = qp->attr.qp_state;
	/* Receive WRs may be posted from INIT on (IBA 10.3.1). */
	if (state == IBV_QPS_RESET) {
		pthread_mutex_unlock(&qp->lock);
		ibemu_log_dbg("post_recv: QP %#x in RESET", ibqp->qp_num);
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
	ret = ibemu_rq_post(&qp->rq, wr, bad_wr);
	if (state == IBV_QPS_ERR)
		ibemu_qp_flush_locked(qp);
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

/* Complete one WQE with IBV_WC_WR_FLUSH_ERR on cq. */
void ibemu_flush_wqe(struct ibemu_cq *cq, struct ibemu_qp *qp,
		     const struct wqe *wqe, enum ibv_wc_opcode opcode)
{
	struct ibv_wc wc = {
		.wr_id = wqe->wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = opcode,
		.qp_num = qp->vqp.qp.qp_num,
	};

	ibemu_cq_push(cq, &wc);
}

/*
 * Complete every outstanding WR of the QP with IBV_WC_WR_FLUSH_ERR, in
 * order, send queue first; an unsignaled send WR completes too, since a
 * completion in error is always reported (manual 6.2 IBV_WC_WR_FLUSH_ERR).
 * Caller holds qp.lock.
 */
void ibemu_qp_flush_sq_locked(struct ibemu_qp *qp)
{
	struct wqe *wqe;

	while ((wqe = wqe_ring_head(&qp->sq))) {
		ibemu_flush_wqe(qp->scq, qp, wqe, wqe_wc_opcode(wqe->opcode));
		qp->sq.head++;
	}
	qp->req_next = qp->sq.head;
}

void ibemu_qp_flush_locked(struct ibemu_qp *qp)
{
	struct wqe *wqe;

	ibemu_qp_flush_sq_locked(qp);
	if (qp->srq)
		return;
	pthread_mutex_lock(&qp->rq.lock);
	while ((wqe = wqe_ring_head(&qp->rq.ring))) {
		ibemu_flush_wqe(qp->rcq, qp, wqe, IBV_WC_RECV);
		qp->rq.ring.head++;
	}
	pthread_mutex_unlock(&qp->rq.lock);
}
