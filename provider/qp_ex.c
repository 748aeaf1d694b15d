// SPDX-License-Identifier: MIT
/*
 * The extended send API (ibv_create_qp_ex with send_ops_flags, and
 * ibv_wr_start ... ibv_wr_complete, man ibv_wr_post(3)).
 *
 * ibv_wr_start takes qp.lock and ibv_wr_complete/ibv_wr_abort release it:
 * WRs are built in the send queue past its tail (at wr_tail) and become
 * visible to the requester all at once on complete; abort drops them.
 * An error in any builder call is remembered and returned by complete,
 * which then posts none of the batch (as ibv_post_send would stop at the
 * bad WR, ibv_wr_complete fails the batch).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "engine.h"
#include "ibemu.h"
#include "log.h"

#define QP_EX_OPS_SUPPORTED                                                    \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |      \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                  \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |       \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)

static struct ibemu_qp *to_eqp_ex(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct ibemu_qp, vqp.qp_ex);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);

	pthread_mutex_lock(&qp->lock);
	qp->wr_tail = qp->sq.tail;
	qp->wr_err = 0;
	qp->wr_cur = NULL;
	if (ibemu_ctx_stale(qp->vqp.qp.context))
		qp->wr_err = EIO;
	/* Send WRs may be posted from RTS on (IBA 10.3.1). */
	if (qp->attr.qp_state == IBV_QPS_RESET ||
	    qp->attr.qp_state == IBV_QPS_INIT ||
	    qp->attr.qp_state == IBV_QPS_RTR)
		qp->wr_err = EINVAL;
}

/* A new WQE at wr_tail for opcode, or NULL (error recorded). */
static struct wqe *wr_new(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
			  uint64_t flag)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct wqe *w;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!(qp->send_ops_flags & flag)) {
		qp->wr_err = EINVAL;
		return NULL;
	}
	if (qp->wr_tail - qp->sq.head >= qp->sq.size) {
		qp->wr_err = ENOMEM;
		return NULL;
	}
	w = wqe_ring_at(&qp->sq, qp->wr_tail++);
	memset(w, 0, sizeof(*w));
	w->wr_id = qpx->wr_id;
	w->opcode = opcode;
	w->send_flags = qpx->wr_flags;
	w->state = WQE_PENDING;
	qp->wr_cur = w;
	return w;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	wr_new(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct wqe *w = wr_new(qpx, IBV_WR_SEND_WITH_IMM,
			       IBV_QP_EX_WITH_SEND_WITH_IMM);

	if (w)
		w->imm_data = imm_data;
}

static void wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		    uint64_t flag, uint32_t rkey, uint64_t remote_addr,
		    __be32 imm)
{
	struct wqe *w = wr_new(qpx, op, flag);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	w->imm_data = imm;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE, rkey,
		remote_addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm_data)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM,
		IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, rkey, remote_addr,
		imm_data);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_READ, IBV_QP_EX_WITH_RDMA_READ, rkey,
		remote_addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		      uint64_t flag, uint32_t rkey, uint64_t remote_addr,
		      uint64_t compare_add, uint64_t swap)
{
	struct wqe *w = wr_new(qpx, op, flag);

	if (!w)
		return;
	w->rkey = rkey;
	w->remote_addr = remote_addr;
	w->compare_add = compare_add;
	w->swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP,
		  IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP, rkey, remote_addr,
		  compare, swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD,
		  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add,
		  0);
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct wqe *w = qp->wr_cur;
	size_t i;

	if (!w) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return;
	}
	if (num_sge > qp->cap.max_send_sge) {
		qp->wr_err = EINVAL;
		return;
	}
	w->num_sge = (uint32_t)num_sge;
	w->length = 0;
	for (i = 0; i < num_sge; i++) {
		w->sge[i] = sg_list[i];
		w->length += sg_list[i].length;
	}
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	wr_set_sge_list(qpx, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct wqe *w = qp->wr_cur;
	uint8_t *dst;
	size_t i, len = 0;

	if (!w) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return;
	}
	for (i = 0; i < num_buf; i++)
		len += buf_list[i].length;
	if (len > qp->cap.max_inline_data ||
	    w->opcode == IBV_WR_RDMA_READ ||
	    w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		qp->wr_err = EINVAL;
		return;
	}
	/* Copied now: the buffers may be reused at once (ibv_wr_post(3)). */
	dst = (uint8_t *)&w->sge[qp->cap.max_send_sge];
	for (i = 0; i < num_buf; i++) {
		memcpy(dst, buf_list[i].addr, buf_list[i].length);
		dst += buf_list[i].length;
	}
	w->send_flags |= IBV_SEND_INLINE;
	w->inline_len = (uint32_t)len;
	w->length = (uint32_t)len;
	w->num_sge = 0;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
			       size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

/* UD destination of the current WR (ibv_wr_set_ud_addr(3)). */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct wqe *w = qp->wr_cur;

	if (!w || qp->vqp.qp.qp_type != IBV_QPT_UD || !ah) {
		if (!qp->wr_err)
			qp->wr_err = EINVAL;
		return;
	}
	w->ah = to_eah(ah);
	w->remote_qpn = remote_qpn;
	w->remote_qkey = remote_qkey;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	int ret = qp->wr_err;
	uint32_t i;

	/* A UD WR without a destination cannot be posted. */
	for (i = qp->sq.tail; !ret && qp->vqp.qp.qp_type == IBV_QPT_UD &&
			      i != qp->wr_tail;
	     i++)
		if (!wqe_ring_at(&qp->sq, i)->ah)
			ret = EINVAL;
	if (!ret) {
		qp->sq.tail = qp->wr_tail;
		/* As ibv_post_send: flushed in SQE and ERR (IBA 10.3.1). */
		if (qp->attr.qp_state == IBV_QPS_ERR ||
		    qp->attr.qp_state == IBV_QPS_SQE)
			ibemu_qp_flush_sq_locked(qp);
		else
			req_run_locked(qp);
	}
	qp->wr_cur = NULL;
	pthread_mutex_unlock(&qp->lock);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);

	qp->wr_tail = qp->sq.tail;
	qp->wr_cur = NULL;
	pthread_mutex_unlock(&qp->lock);
}

/* Install the builders the QP was created for; 0 or an errno. */
int ibemu_qp_ex_init(struct ibemu_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	if (send_ops_flags & ~(uint64_t)QP_EX_OPS_SUPPORTED) {
		ibemu_log_dbg("create_qp_ex: send_ops_flags %#llx not offered",
			      (unsigned long long)send_ops_flags);
		return EOPNOTSUPP;
	}
	if (qp->vqp.qp.qp_type != IBV_QPT_RC &&
	    (send_ops_flags & (IBV_QP_EX_WITH_RDMA_READ |
			       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)))
		return EINVAL;
	if (qp->vqp.qp.qp_type == IBV_QPT_UD &&
	    (send_ops_flags & (IBV_QP_EX_WITH_RDMA_WRITE |
			       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)))
		return EINVAL;
	qp->send_ops_flags = send_ops_flags;
	qp->vqp.comp_mask |= PABI_VERBS_QP_EX;
	qpx->comp_mask = 0;
	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;
	qpx->wr_send = wr_send;
	qpx->wr_send_imm = wr_send_imm;
	qpx->wr_rdma_write = wr_rdma_write;
	qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	qpx->wr_rdma_read = wr_rdma_read;
	qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	return 0;
}
