// SPDX-License-Identifier: MIT
/*
 * Posting work requests (manual 3.6.4, 3.6.5): the checks that fail the
 * post itself, and the WQE as the HCA keeps it.  Everything else a WR can
 * get wrong fails later, in order, as a completion (req.c).
 *
 * Lock rule: post_send holds qp.lock and runs the requester under it;
 * post_recv holds qp.lock, which guards the state and the QP's own
 * receive queue (rq.c).
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "check_mem.h"
#include "check_recv.h"
#include "engine.h"
#include "hca.h"
#include "hca_trace.h"
#include "log.h"
#include "qp_state.h"
#include "qp_stats.h"
#include "wr_opcode.h"

/* A message's length; anything past 32 bits stays past the largest
 * message, so the requester fails it (LOC_LEN_ERR) instead of sending a
 * truncated length. */
static uint32_t sge_total(const struct ibv_sge *sge, int n)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < n; i++)
		len += sge[i].length;
	return len > UINT32_MAX ? UINT32_MAX : (uint32_t)len;
}

/* Checks that fail the post itself; the rest fail as completions. */
static int post_send_check(struct emu_qp *qp, const struct ibv_send_wr *wr,
			   const struct emu_wr_ext *ext)
{
	/* A DCT has no send queue (dc.c). */
	if (qp->dc_type == EMU_DC_DCT)
		return EINVAL;
	/* A UMR carries its layout beside the WR (mkey.c). */
	if (wr->opcode == EMU_WR_UMR)
		return umr_check_wr(qp, wr, ext);
	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge) {
		ibemu_log_dbg("post_send: num_sge %d > max_send_sge %u",
			      wr->num_sge, qp->cap.max_send_sge);
		return EINVAL;
	}
	/* Which opcodes each transport carries (IBA 9.2, manual 2.2). */
	if (!wr_opcode_valid(qp->type, wr->opcode)) {
		ibemu_log_dbg("post_send: opcode %d on QP type %d",
			      wr->opcode, qp->type);
		return EINVAL;
	}
	/* An ATOMIC WRITE stores exactly one 8-byte word (IBA 1.5 RDMA
	 * ATOMIC WRITE); inline, it is kept in the WQE itself. */
	if (wr_is(wr->opcode, WR_ATOMIC_WRITE)) {
		if (sge_total(wr->sg_list, wr->num_sge) != 8) {
			ibemu_log_dbg("post_send: ATOMIC_WRITE of %u bytes",
				      sge_total(wr->sg_list, wr->num_sge));
			return EINVAL;
		}
		return 0;
	}
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (!wr_is(wr->opcode, WR_PAYLOAD))
			return EINVAL;
		if (sge_total(wr->sg_list, wr->num_sge) >
		    qp->cap.max_inline_data) {
			ibemu_log_dbg("post_send: inline %u > max_inline %u",
				      sge_total(wr->sg_list, wr->num_sge),
				      qp->cap.max_inline_data);
			return EINVAL;
		}
	}
	/* A bind names its window (ibv_post_send(3)). */
	if (wr->opcode == IBV_WR_BIND_MW && !wr->bind_mw.mw) {
		ibemu_log_dbg("post_send: BIND_MW without a window");
		return EINVAL;
	}
	if (qp->type == IBV_QPT_UD && !wr->wr.ud.ah) {
		ibemu_log_dbg("post_send: UD send without an address handle");
		return EINVAL;
	}
	return 0;
}

/* A bind's window and region are named by their keys, looked up when it
 * executes (mw.c): the objects may be gone by then. */
static void post_store_bind(struct wqe *wqe, const struct ibv_send_wr *wr)
{
	const struct ibv_mw_bind_info *info = &wr->bind_mw.bind_info;

	wqe->bind.mw_key = wr->bind_mw.mw->rkey;
	wqe->bind.new_key = wr->bind_mw.rkey;
	wqe->bind.mr_lkey = info->mr ? info->mr->lkey : 0;
	wqe->bind.addr = info->addr;
	wqe->bind.length = info->length;
	wqe->bind.access = info->mw_access_flags;
}

/* Fill the WQE at the tail of the send queue; EINVAL if a UD WR names
 * an address handle the HCA does not have. */
static int post_send_store(struct emu_qp *qp, uint32_t pos,
			   const struct ibv_send_wr *wr,
			   const struct emu_wr_ext *ext)
{
	struct wqe *wqe = wqe_ring_at(&qp->sq, pos);
	uint8_t *dst;
	int i, ret;

	if (qp->type == IBV_QPT_UD) {
		if (!ah_copy(qp->hca, wr->wr.ud.ah->handle, &wqe->av))
			return EINVAL;
		wqe->remote_qpn = wr->wr.ud.remote_qpn;
		wqe->remote_qkey = wr->wr.ud.remote_qkey;
	}
	/* The XRC SRQ the target is to receive into (IBA A14 XRCETH). */
	if (qp->type == IBV_QPT_XRC_SEND)
		wqe->xrc_srqn = wr->qp_type.xrc.remote_srqn & BTH_QPN_MASK;
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	wqe->send_flags = wr->send_flags;
	wqe->num_sge = (uint32_t)wr->num_sge;
	/* or invalidate_rkey: one union in struct ibv_send_wr */
	wqe->imm_data = wr->imm_data;
	if (wr_is(wr->opcode, WR_ATOMIC)) {
		wqe->remote_addr = wr->wr.atomic.remote_addr;
		wqe->rkey = wr->wr.atomic.rkey;
		wqe->compare_add = wr->wr.atomic.compare_add;
		wqe->swap = wr->wr.atomic.swap;
	} else {
		wqe->remote_addr = wr->wr.rdma.remote_addr;
		wqe->rkey = wr->wr.rdma.rkey;
	}
	wqe->state = WQE_PENDING;
	wqe->status = IBV_WC_SUCCESS;
	wqe->inline_len = 0;
	/* A DCI's target, named by each WR (dc.c). */
	if (qp->dc_type == EMU_DC_DCI) {
		ret = dc_store_wqe(qp, wqe, ext);
		if (ret)
			return ret;
	}
	if (wr->opcode == EMU_WR_UMR) {
		wqe->num_sge = 0;
		wqe->length = 0;
		return umr_store_wqe(qp, wqe, ext);
	}
	if (wr_is(wr->opcode, WR_LOCAL)) {
		/* No data: the SGEs of a bind or invalidate mean nothing. */
		wqe->num_sge = 0;
		wqe->length = 0;
		if (wr->opcode == IBV_WR_BIND_MW)
			post_store_bind(wqe, wr);
		return 0;
	}
	wqe->length = sge_total(wr->sg_list, wr->num_sge);
	if (!(wr->send_flags & IBV_SEND_INLINE)) {
		if (wr->num_sge)
			memcpy(wqe->sge, wr->sg_list,
			       wr->num_sge * sizeof(*wqe->sge));
		return 0;
	}
	/* Inline data is copied at post time: the buffer may be reused as
	 * soon as ibv_post_send returns (manual 3.6.5). */
	dst = wr_is(wr->opcode, WR_ATOMIC_WRITE) ? (uint8_t *)&wqe->compare_add
						 : wqe_inline_data(qp, wqe);
	for (i = 0; i < wr->num_sge; i++) {
		memcpy(dst + wqe->inline_len,
		       (void *)(uintptr_t)wr->sg_list[i].addr,
		       wr->sg_list[i].length);
		wqe->inline_len += wr->sg_list[i].length;
	}
	return 0;
}

/* Store the chain from wr; the first WR that cannot be posted, or NULL. */
static struct ibv_send_wr *post_send_chain(struct emu_qp *qp,
					   struct ibv_send_wr *wr,
					   const struct emu_wr_ext *ext,
					   bool whole, int *ret_p)
{
	uint32_t tail = qp->sq.tail;
	struct ibv_send_wr *bad = NULL;
	int ret = 0;

	for (; wr; wr = wr->next, ext = ext ? ext + 1 : NULL) {
		ret = post_send_check(qp, wr, ext);
		if (!ret && tail - qp->sq.head >= qp->sq.size)
			ret = ENOMEM;
		check_queue_send(qp, wr, ret);
		if (!ret)
			ret = post_send_store(qp, tail, wr, ext);
		if (ret) {
			bad = wr;
			break;
		}
		hca_trace_post_send(qp, wqe_ring_at(&qp->sq, tail));
		check_mem_post(qp, tail);
		check_read_post(qp, tail);
		tail++;
		/* One at a time unless the batch is posted whole. */
		if (!whole)
			qp->sq.tail = tail;
	}
	if (!ret)
		qp->sq.tail = tail;
	*ret_p = ret;
	return bad;
}

/* emu_post_send but for a WRITE placed at once; qp.lock held, released
 * here. */
static __attribute__((noinline)) int
post_send_locked(struct emu_qp *qp, struct ibv_send_wr *wr,
		 const struct emu_wr_ext *ext, struct ibv_send_wr **bad_wr,
		 bool whole)
{
	enum ibv_qp_state state = qp->state;
	struct ibv_send_wr *bad = wr;
	int ret = 0;

	/* Send WRs may be posted from RTS on, including SQD, SQE and ERR
	 * (where they are flushed); not before (IBA 10.3.1 / rxe). */
	if (state == IBV_QPS_RESET || state == IBV_QPS_INIT ||
	    state == IBV_QPS_RTR) {
		ibemu_log_dbg("post_send: QP %#x in %s", qp->qpn,
			      qp_state_name(state));
		ret = EINVAL;
		goto out;
	}
	bad = post_send_chain(qp, wr, ext, whole, &ret);
	/* In SQE and ERR new send WRs complete flushed (IBA 10.3.1). */
	if (state == IBV_QPS_ERR || state == IBV_QPS_SQE)
		flush_sq_locked(qp);
	else if (state == IBV_QPS_RTS)
		req_run_locked(qp);
out:
	qp_stats_sync_locked(qp);
	emu_unlock(&qp->lock);
	if (ret && bad_wr)
		*bad_wr = bad;
	return ret;
}

int emu_post_send(struct emu_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr, bool whole)
{
	emu_lock(&qp->lock);
	/* The common case of a stream of RDMA WRITEs, placed at once. */
	if (qp->state == IBV_QPS_RTS && qp->post_write && !wr->next &&
	    wr->opcode == IBV_WR_RDMA_WRITE && qp->post_write(qp, wr)) {
		check_queue_send(qp, wr, 0);
		emu_unlock(&qp->lock);
		return 0;
	}
	return post_send_locked(qp, wr, NULL, bad_wr, whole);
}

int emu_post_send_ext(struct emu_qp *qp, struct ibv_send_wr *wr,
		      const struct emu_wr_ext *ext,
		      struct ibv_send_wr **bad_wr, bool whole)
{
	emu_lock(&qp->lock);
	return post_send_locked(qp, wr, ext, bad_wr, whole);
}

int emu_post_recv(struct emu_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	struct ibv_recv_wr *bad = NULL;
	uint32_t from;
	int ret;

	/* A QP on an SRQ takes receives from the SRQ only (manual 3.6.4);
	 * XRC QPs have no receive queue (IBA A14). */
	if (!qp_has_own_rq(qp)) {
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
	emu_lock(&qp->lock);
	/* Receive WRs may be posted from INIT on (IBA 10.3.1). */
	if (qp->state == IBV_QPS_RESET) {
		emu_unlock(&qp->lock);
		ibemu_log_dbg("post_recv: QP %#x in RESET", qp->qpn);
		if (bad_wr)
			*bad_wr = wr;
		return EINVAL;
	}
	from = qp->rq.ring.tail;
	ret = rq_post_locked(&qp->rq, wr, &bad);
	check_recv_post(qp->hca, &qp->rq, from, qp);
	check_queue_recv(qp, NULL, ret);
	hca_trace_post_recv(qp->qpn, 0, wr, ret ? bad : NULL);
	if (ret && bad_wr)
		*bad_wr = bad;
	if (qp->state == IBV_QPS_ERR)
		flush_all_locked(qp);
	qp_stats_sync_locked(qp);
	emu_unlock(&qp->lock);
	return ret;
}
