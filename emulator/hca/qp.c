// SPDX-License-Identifier: MIT
/*
 * Queue pairs: create, modify (the state machine of qp_state.c plus the
 * value checks of each attribute), query, destroy, and the transitions the
 * HCA makes on its own: the error state and the send queue error state
 * (IBA 10.3.1, 11.2.5; manual 3.5).  Each transition has one copy here,
 * used by the verbs and by the engines alike.
 *
 * Lock rule: see struct emu_qp.  Every function here that ends in _locked
 * runs under qp.lock, which also guards the QP's own receive queue (rq.c);
 * flushing takes the CQ locks inside it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check_mem.h"
#include "check_proto.h"
#include "engine.h"
#include "hca.h"
#include "hca_trace.h"
#include "log.h"
#include "qp_state.h"
#include "qp_stats.h"

/* A QP's rights are the remote ones (IBA 11.2.4.2); LOCAL_WRITE, and
 * ON_DEMAND, a region's attribute, are accepted and mean nothing for a
 * QP, as on mlx5 and rxe (rdma-core's ODP tests give a QP the flags of
 * their regions). */
#define QP_ACCESS_SUPPORTED                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_ON_DEMAND)

static int qp_check_type(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return 0;
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		ibemu_log_dbg("create_qp: QP type %d not offered", type);
		return EOPNOTSUPP;
	default:
		return EINVAL;
	}
}

static int qp_check_cap(const struct ibv_qp_cap *cap, bool srq)
{
	if (cap->max_send_wr > IBEMU_MAX_QP_WR ||
	    (!srq && cap->max_recv_wr > IBEMU_MAX_QP_WR)) {
		ibemu_log_dbg("create_qp: max_send_wr %u / max_recv_wr %u > %d",
			      cap->max_send_wr, cap->max_recv_wr,
			      IBEMU_MAX_QP_WR);
		return EINVAL;
	}
	if (cap->max_send_sge > IBEMU_MAX_SGE ||
	    (!srq && cap->max_recv_sge > IBEMU_MAX_SGE)) {
		ibemu_log_dbg("create_qp: max_send_sge %u / max_recv_sge %u > %d",
			      cap->max_send_sge, cap->max_recv_sge,
			      IBEMU_MAX_SGE);
		return EINVAL;
	}
	if (cap->max_inline_data > IBEMU_MAX_INLINE_DATA) {
		ibemu_log_dbg("create_qp: max_inline_data %u > %d",
			      cap->max_inline_data, IBEMU_MAX_INLINE_DATA);
		return EINVAL;
	}
	return 0;
}

/* Grant at least one of each, so a zero request still works; an XRC
 * target has no send queue (IBA A14), an XRC initiator no receive
 * queue.  Inline data may take the room of the send WQE's gather list,
 * as on an HCA whose inline segment replaces the data segments
 * (ibv_create_qp(3): the granted caps may exceed the request): a QP of
 * one SGE sends 16 bytes inline, as rdma_xclient and others count on. */
static void qp_grant_cap(struct ibv_qp_cap *cap, enum ibv_qp_type type,
			 bool srq)
{
	if (type == IBV_QPT_XRC_RECV) {
		memset(cap, 0, sizeof(*cap));
		return;
	}
	if (type == IBV_QPT_XRC_SEND)
		srq = true;
	if (!cap->max_send_wr)
		cap->max_send_wr = 1;
	if (!cap->max_send_sge)
		cap->max_send_sge = 1;
	if (cap->max_inline_data < cap->max_send_sge * sizeof(struct ibv_sge))
		cap->max_inline_data =
			cap->max_send_sge * (uint32_t)sizeof(struct ibv_sge);
	if (srq) {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
		return;
	}
	if (!cap->max_recv_wr)
		cap->max_recv_wr = 1;
	if (!cap->max_recv_sge)
		cap->max_recv_sge = 1;
}

/* The attributes a QP has in RESET (IBA 11.2.5.2). */
static void qp_attr_defaults(struct emu_qp *qp)
{
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.path_mig_state = IBV_MIG_MIGRATED;
	qp->attr.port_num = 1;
}

static int qp_alloc_queues(struct emu_qp *qp)
{
	int ret;

	/* An XRC target's send queue stays empty: one entry. */
	ret = -wqe_ring_init(&qp->sq,
			     qp->cap.max_send_wr ? qp->cap.max_send_wr : 1,
			     qp->cap.max_send_sge ? qp->cap.max_send_sge : 1,
			     qp->cap.max_inline_data, qp->buf_alloc);
	if (ret)
		return ret;
	if (qp_has_own_rq(qp)) {
		ret = rq_init(&qp->rq, qp->cap.max_recv_wr,
			      qp->cap.max_recv_sge, qp->buf_alloc);
		if (ret)
			goto err_sq;
	}
	qp->resp.wqe = calloc(1, sizeof(struct wqe) +
				      IBEMU_MAX_SGE * sizeof(struct ibv_sge));
	if (!qp->resp.wqe) {
		ret = ENOMEM;
		goto err_rq;
	}
	return 0;

err_rq:
	if (qp_has_own_rq(qp))
		rq_fini(&qp->rq);
err_sq:
	wqe_ring_fini(&qp->sq);
	return ret;
}

/* The QP's completions not yet polled taken out of its CQs (other QPs'
 * stay, in order), as mlx4 and mlx5 do at reset and destroy.  An XRC
 * target has no CQ, an XRC initiator no receive CQ. */
static void qp_forget_completions(struct emu_qp *qp)
{
	if (qp->scq)
		cq_forget_qp(qp->scq, qp->qpn);
	if (qp->rcq && qp->rcq != qp->scq)
		cq_forget_qp(qp->rcq, qp->qpn);
}

/* The QP is connected to nothing (reset, destroy): the placement lets
 * go of what it held of the peer (cma.c). */
static void qp_drop_peer_locked(struct emu_qp *qp)
{
	qp->peer = NULL;
	qp->peer_proc = -1;
	if (engine_place(qp->hca->engine))
		engine_place(qp->hca->engine)->peer_bind(qp);
}

static void qp_free_queues(struct emu_qp *qp)
{
	if (qp_has_own_rq(qp))
		rq_fini(&qp->rq);
	wqe_ring_fini(&qp->sq);
	free(qp->check_rd);
	free(qp->resp.wqe);
	free(qp->resp.replies);
	free(qp->resp.res);
	free(qp->mcast);
}

/* Which queues and domain each type needs (IBA A14: an XRC initiator
 * has a send CQ only, a target nothing but its domain). */
static int qp_check_queues(const struct emu_qp_init *init)
{
	if (init->dc_type != EMU_DC_NONE)
		return dc_check_init(init);
	switch (init->qp_type) {
	case IBV_QPT_XRC_RECV:
		if (!init->xrcd || init->srq || init->send_cq ||
		    init->recv_cq)
			return EINVAL;
		return 0;
	case IBV_QPT_XRC_SEND:
		if (!init->send_cq || init->srq || init->xrcd)
			return EINVAL;
		return 0;
	default:
		if (!init->send_cq || !init->recv_cq || init->xrcd)
			return EINVAL;
		return 0;
	}
}

/* The objects a QP holds while it exists (n: 1 at create, -1 at
 * destroy); an XRC target holds its domain only, not the SRQ and CQ
 * its requests bind it to. */
static void qp_use(struct emu_qp *qp, int n)
{
	if (qp->type == IBV_QPT_XRC_RECV) {
		xrcd_use(qp->xrcd, n);
		return;
	}
	/* A DCT may have no send CQ (dc.c). */
	if (qp->scq)
		atomic_fetch_add(&qp->scq->usecnt, n);
	if (qp->rcq)
		atomic_fetch_add(&qp->rcq->usecnt, n);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->usecnt, n);
}

int emu_qp_create(struct emu_hca *hca, struct emu_qp_init *init,
		  struct emu_qp **qp_p, uint32_t *qpn_p)
{
	struct emu_qp *qp;
	int ret;

	ret = qp_check_type(init->qp_type);
	if (!ret)
		ret = qp_check_cap(&init->cap,
				   init->srq != NULL ||
					   init->qp_type == IBV_QPT_XRC_SEND ||
					   init->dc_type == EMU_DC_DCI);
	if (!ret)
		ret = qp_check_queues(init);
	if (ret)
		return ret;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return ENOMEM;
	emu_lock_init(&qp->lock);
	qp->hca = hca;
	qp->type = init->qp_type;
	qp->pd_id = init->pd_id;
	qp->owner = init->owner;
	qp->scq = init->send_cq;
	qp->rcq = init->recv_cq;
	qp->srq = init->srq;
	qp->xrcd = init->xrcd;
	qp->sq_sig_all = init->sq_sig_all;
	qp->cap = init->cap;
	qp->buf_alloc = init->alloc;
	ret = dc_qp_init(qp, init);
	if (ret)
		goto err_free;
	/* A DCI has no receive queue, a DCT no send queue (dc.c). */
	qp_grant_cap(&qp->cap, qp->type,
		     qp->srq != NULL || qp->dc_type == EMU_DC_DCI);
	if (qp->dc_type == EMU_DC_DCT)
		memset(&qp->cap, 0, sizeof(qp->cap));
	ret = qp_alloc_queues(qp);
	if (ret)
		goto err_free;
	ret = -node_qpn_alloc(&hca->node, qp->type, &qp->qpn);
	if (ret)
		goto err_queues;
	qp_stats_bind(qp);
	qp->state = IBV_QPS_RESET;
	qp_attr_defaults(qp);
	/* UD datagrams are bounded by the port's active MTU (IBA 9.8.2). */
	qp->mtu = qp->type == IBV_QPT_UD ? 128u << IBEMU_MAX_MTU : 1024;
	qp->peer_proc = -1;
	qp->handles = 1;
	qp_use(qp, 1);
	engine_qp_add(hca->engine, qp);
	hca_trace_qp_create(qp);
	/* Report what was granted (manual 3.4.3: cap is in/out). */
	init->cap = qp->cap;
	*qp_p = qp;
	*qpn_p = qp->qpn;
	return 0;

err_queues:
	qp_free_queues(qp);
err_free:
	free(qp->dc);
	free(qp);
	return ret;
}

/*
 * Another handle on an XRC target QP of this process's domain xrcd
 * (ibv_open_qp(3)); the QP lives until its last handle is destroyed.  A
 * target QP of another process cannot be opened: ibemu keeps an XRC
 * domain within one process (xrc.c).
 */
int emu_qp_open(struct emu_hca *hca, struct emu_xrcd *xrcd, uint32_t qpn,
		struct emu_qp **qp_p)
{
	struct engine *e = hca->engine;
	struct emu_qp *qp;
	int32_t slot;

	emu_lock(&e->lock);
	for (qp = e->all_qps; qp; qp = qp->all_next)
		if (qp->qpn == qpn)
			break;
	if (qp && qp->type == IBV_QPT_XRC_RECV && qp->xrcd == xrcd &&
	    qp->handles) {
		qp->handles++;
		emu_unlock(&e->lock);
		*qp_p = qp;
		return 0;
	}
	emu_unlock(&e->lock);
	slot = node_qpn_owner_slot(&hca->node, qpn);
	if (!qp && slot >= 0 && slot != hca->node.proc_slot) {
		ibemu_log_err("open_qp: QP %#x belongs to another process; "
			      "ibemu does not share XRC domains between "
			      "processes", qpn);
		return EOPNOTSUPP;
	}
	ibemu_log_dbg("open_qp: no XRC target QP %#x in this domain", qpn);
	return EINVAL;
}

/* The last handle of an XRC target QP destroys it; false if others
 * remain. */
static bool qp_last_handle(struct emu_qp *qp)
{
	struct engine *e = qp->hca->engine;
	bool last;

	emu_lock(&e->lock);
	last = --qp->handles == 0;
	emu_unlock(&e->lock);
	return last;
}

int emu_qp_destroy(struct emu_qp *qp)
{
	unsigned int groups;

	/* A QP still attached to multicast groups is not destroyed: the
	 * application detaches first, as the kernel's uverbs requires. */
	emu_lock(&qp->lock);
	groups = qp->nr_mcast;
	emu_unlock(&qp->lock);
	if (groups) {
		ibemu_log_dbg("destroy_qp %#x: still attached to %u multicast "
			      "group(s)", qp->qpn, groups);
		return EBUSY;
	}
	if (!qp_last_handle(qp))
		return 0;
	hca_trace_qp_destroy(qp);
	/* An ACK held for the next SEND goes now: the messages it covers
	 * were executed and completed (ack_bundle.c). */
	emu_lock(&qp->lock);
	resp_ack_owed_locked(qp);
	emu_unlock(&qp->lock);
	/* Out of the engine first: no packet reaches it from now on, nor
	 * its DC responders (dc.c). */
	engine_qp_remove(qp->hca->engine, qp);
	dc_qp_fini(qp);
	/* Nor does a completion of its reach the application: the work
	 * requests they name are gone with it (libfabric's verbs provider
	 * counts on this, as mlx5 gives it). */
	qp_forget_completions(qp);
	emu_lock(&qp->lock);
	check_proto_rnr_end(qp, "destroyed");
	qp_drop_peer_locked(qp);
	emu_unlock(&qp->lock);
	/* Before its number can name another QP (mw.c). */
	mw_qp_destroyed(qp->hca, qp->qpn);
	node_qpn_free(&qp->hca->node, qp->qpn);
	qp_use(qp, -1);
	check_mem_qp_destroy(qp);
	qp_free_queues(qp);
	free(qp);
	return 0;
}

/* The column of the state machine the QP follows (qp_state.c). */
static enum ibv_qp_type qp_state_type(const struct emu_qp *qp)
{
	if (qp->dc_type == EMU_DC_DCI)
		return QP_STATE_TYPE_DCI;
	if (qp->dc_type == EMU_DC_DCT)
		return QP_STATE_TYPE_DCT;
	return qp->type;
}

/* The value checks of each attribute present in mask (IBA 11.2.5.2). */
static int qp_check_values(const struct ibv_qp_attr *a, int mask,
			   const char **why_p)
{
	if ((mask & IBV_QP_PORT) && !emu_port_valid(a->port_num)) {
		*why_p = "port_num";
		return EINVAL;
	}
	if ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index >= IBEMU_PKEY_TBL_LEN) {
		*why_p = "pkey_index";
		return EINVAL;
	}
	if ((mask & IBV_QP_ACCESS_FLAGS) &&
	    (a->qp_access_flags & ~QP_ACCESS_SUPPORTED)) {
		*why_p = "qp_access_flags";
		return EINVAL;
	}
	if ((mask & IBV_QP_PATH_MTU) &&
	    (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBEMU_MAX_MTU)) {
		*why_p = "path_mtu";
		return EINVAL;
	}
	if ((mask & IBV_QP_AV) && emu_av_check(&a->ah_attr)) {
		*why_p = "ah_attr";
		return EINVAL;
	}
	/* 24-bit QPN and PSN fields (IBA 9.2 BTH). */
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > IBEMU_QPN_MASK) {
		*why_p = "dest_qp_num";
		return EINVAL;
	}
	/* A PSN of 2^24 or more is not refused: it is taken modulo 2^24
	 * (qp_apply), as every kernel provider does (doc/conformance.md,
	 * "What ibemu does where the Linux stack and the spec differ"). */
	if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) &&
	    a->max_rd_atomic > IBEMU_MAX_QP_RD_ATOM) {
		*why_p = "max_rd_atomic";
		return EINVAL;
	}
	if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) &&
	    a->max_dest_rd_atomic > IBEMU_MAX_QP_INIT_RD_ATOM) {
		*why_p = "max_dest_rd_atomic";
		return EINVAL;
	}
	/* 5-bit timer fields and 3-bit retry counts (IBA 9.7.5.2.8 RNR NAK
	 * timer encoding, 11.2.5.2 local ACK timeout, retry counts). */
	if ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) {
		*why_p = "timeout";
		return EINVAL;
	}
	if ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) {
		*why_p = "min_rnr_timer";
		return EINVAL;
	}
	if ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) {
		*why_p = "retry_cnt";
		return EINVAL;
	}
	if ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) {
		*why_p = "rnr_retry";
		return EINVAL;
	}
	if (mask & IBV_QP_CAP) {
		*why_p = "cap cannot be modified";
		return EINVAL;
	}
	return 0;
}

static void qp_apply(struct emu_qp *qp, const struct ibv_qp_attr *a,
		     int mask)
{
	struct ibv_qp_attr *s = &qp->attr;

	if (mask & IBV_QP_PKEY_INDEX)
		s->pkey_index = a->pkey_index;
	if (mask & IBV_QP_PORT)
		s->port_num = a->port_num;
	if (mask & IBV_QP_QKEY)
		s->qkey = a->qkey;
	if (mask & IBV_QP_ACCESS_FLAGS)
		s->qp_access_flags = a->qp_access_flags;
	if (mask & IBV_QP_AV)
		s->ah_attr = a->ah_attr;
	if (mask & IBV_QP_PATH_MTU)
		s->path_mtu = a->path_mtu;
	if (mask & IBV_QP_DEST_QPN)
		s->dest_qp_num = a->dest_qp_num;
	/* IBA 9.2: the PSN is the 24-bit field of the BTH. */
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = a->rq_psn & BTH_PSN_MASK;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = a->sq_psn & BTH_PSN_MASK;
	if (mask & IBV_QP_MAX_DEST_RD_ATOMIC)
		s->max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		s->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		s->min_rnr_timer = a->min_rnr_timer;
	if (mask & IBV_QP_TIMEOUT)
		s->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		s->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		s->rnr_retry = a->rnr_retry;
	if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY)
		s->en_sqd_async_notify = a->en_sqd_async_notify;
}

/* The engines' state as it is after reset or an error: nothing in
 * flight, no timer, nothing owed, nothing blocked. */
static void qp_engine_idle_locked(struct emu_qp *qp)
{
	qp->req.next = qp->sq.head;
	qp->req.rd_atomic = 0;
	qp->req.blocked = false;
	qp->req.ud_full_since = 0;
	qp->req.mcast.on = false;
	qp->comp.deadline = 0;
	qp->comp.timer_at = 0;
	qp->comp.rnr_resume = 0;
	resp_reset_locked(qp);
}

/* Leaving for RESET: every outstanding WR is discarded (IBA 10.3.1). */
/*
 * To Reset (IBA 10.3.1): the work queues are emptied, and the CQs keep
 * none of the QP's completions not yet polled; a QP brought back from
 * Error then polls no stale flush completions of its previous life.
 */
static void qp_reset_locked(struct emu_qp *qp)
{
	check_proto_rnr_end(qp, "reset");
	qp_forget_completions(qp);
	qp->sq.head = qp->sq.tail;
	/* The QP's own ring: under qp.lock, held (rq.c). */
	if (qp_has_own_rq(qp))
		qp->rq.ring.head = qp->rq.ring.tail;
	qp_engine_idle_locked(qp);
	qp->resp.comm_est = false;
	if (qp->resp.res)
		memset(qp->resp.res, 0,
		       IBEMU_MAX_QP_INIT_RD_ATOM * sizeof(*qp->resp.res));
	qp->resp.res_next = 0;
	qp_drop_peer_locked(qp);
	qp_attr_defaults(qp);
	memset(&qp->apm, 0, sizeof(qp->apm));
	dc_qp_reset_locked(qp);
}

/*
 * Publish the QP's state for requesters that place RDMA data themselves
 * (cma.c).  Leaving the states that execute requests (RTR, RTS, SQD) waits
 * for placements already under way, so none lands after the QP has left
 * them (IBA 10.3.1).
 */
void qp_publish_locked(struct emu_qp *qp)
{
	unsigned int access = qp->attr.qp_access_flags;

	/* A DC responder publishes nothing: its number is its DCT's. */
	if (qp->dcr_of)
		return;
	/* A DCT executes nothing a requester places itself: the key of
	 * each request is checked by the DCT (dc.c). */
	if (qp->dc_type == EMU_DC_DCT)
		access = 0;
	/* What it executes: with no responder resources a READ or an
	 * atomic is refused (IBA 9.7.4.1.5), by the responder itself. */
	if (!qp->attr.max_dest_rd_atomic)
		access &= ~(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	node_qp_publish(&qp->hca->node, qp->qpn, qp->state, access,
			qp->pd_id);
	if (qp->state != IBV_QPS_RTR && qp->state != IBV_QPS_RTS &&
	    qp->state != IBV_QPS_SQD)
		engine_qp_fence(qp->hca->engine, qp->qpn);
}

/*
 * Enter the error state (IBA 10.3.1): every outstanding WR is flushed,
 * timers stop, nothing stays blocked; an SRQ-attached QP will take no
 * more WQEs from the SRQ (manual 6.1 IBV_EVENT_QP_LAST_WQE_REACHED).
 */
static void qp_enter_error_locked(struct emu_qp *qp, const char *why)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	hca_trace_qp_state(qp, qp->state, IBV_QPS_ERR, why);
	check_proto_rnr_end(qp, "moved to the error state");
	qp->state = IBV_QPS_ERR;
	qp_publish_locked(qp);
	resp_flush_open_locked(qp);
	qp_engine_idle_locked(qp);
	flush_all_locked(qp);
	if (qp->srq)
		emu_event(&qp->owner, IBV_EVENT_QP_LAST_WQE_REACHED);
}

void qp_error_locked(struct emu_qp *qp)
{
	qp_enter_error_locked(qp, "error");
}

/*
 * A UC or UD send error stops the send queue only: Send Queue Error, the
 * receive queue keeps working (IBA 10.3.1, 11.6.2).  The remaining send
 * WRs are flushed.
 */
void qp_sq_error_locked(struct emu_qp *qp)
{
	hca_trace_qp_state(qp, qp->state, IBV_QPS_SQE, "send_error");
	qp->state = IBV_QPS_SQE;
	qp_publish_locked(qp);
	qp->req.blocked = false;
	flush_sq_locked(qp);
}

/*
 * A completion was lost to a CQ overrun: the QP cannot report its work any
 * more (manual 6.1.1, 6.1.2): IBV_EVENT_QP_FATAL and the error state.
 */
void qp_fatal_locked(struct emu_qp *qp)
{
	if (qp->state == IBV_QPS_ERR)
		return;
	emu_event(&qp->owner, IBV_EVENT_QP_FATAL);
	qp_error_locked(qp);
}

/* What the engines need from a transition: path MTU and expected PSN at
 * RTR, the send PSN and retry budgets at RTS (manual 3.5.3, 3.5.4). */
static void qp_engine_transition_locked(struct emu_qp *qp,
					enum ibv_qp_state cur,
					enum ibv_qp_state next, int mask,
					const struct req_route *route)
{
	/* A DC QP has no fixed peer (dc.c). */
	bool fixed = qp->type != IBV_QPT_UD && qp->dc_type == EMU_DC_NONE;

	if ((mask & IBV_QP_PATH_MTU) && qp->type != IBV_QPT_UD)
		qp->mtu = 128u << qp->attr.path_mtu;
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->resp.epsn = qp->attr.rq_psn;
		qp->resp.msn = 0;
		if (fixed && route->done)
			req_bind_peer_locked(qp, route);
		else if (fixed)
			req_resolve_peer_locked(qp);
	}
	if (mask & IBV_QP_SQ_PSN) {
		/* A new PSN space: no resend of the old one is under way. */
		qp->req.psn = qp->attr.sq_psn;
		qp->comp.acked_psn = psn_add(qp->attr.sq_psn, BTH_PSN_MASK);
		qp->comp.told.on = false;
		qp->comp.implied.on = false;
	}
	if (next == IBV_QPS_RTS && cur != IBV_QPS_RTS) {
		qp->comp.retry_left = qp->attr.retry_cnt;
		qp->comp.rnr_left = qp->attr.rnr_retry;
		/* Resume what SQD held back. */
		req_run_locked(qp);
	}
}

/* Entering SQD with en_sqd_async_notify: SQ_DRAINED once every
 * outstanding message is acknowledged, now if nothing is in flight, else
 * from the completer (manual 6.1.6). */
static void qp_sqd_locked(struct emu_qp *qp, const struct ibv_qp_attr *a,
			  int mask)
{
	if (!(mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) || !a->en_sqd_async_notify)
		return;
	if (qp->sq.head != qp->req.next)
		qp->comp.sqd_notify = true;
	else
		emu_event(&qp->owner, IBV_EVENT_SQ_DRAINED);
}

/*
 * The peer of a connected QP going to RTR is looked up before its lock is
 * taken: the lookup may be a round trip to another node's door, and the
 * engine, which dispatches a packet holding the QP's lock and its own,
 * would receive nothing for any QP meanwhile: a peer already in RTS
 * sends at once (gloo does), and its packets, which a QP in INIT drops
 * (IBA 10.3.1), held up every connection of the process, whose
 * requesters then timed out.  A transition the QP refuses looked it up
 * for nothing; one that needs no AV or QPN (UD), or whose AV is bad,
 * looks up nothing.
 */
static void qp_route_peer(const struct emu_qp *qp,
			  const struct ibv_qp_attr *attr, int mask,
			  struct req_route *route)
{
	const int need = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN;

	route->done = false;
	if (qp->type == IBV_QPT_UD || qp->dc_type != EMU_DC_NONE ||
	    (mask & need) != need ||
	    attr->qp_state != IBV_QPS_RTR || emu_av_check(&attr->ah_attr))
		return;
	req_route_peer(qp->hca, &attr->ah_attr, attr->dest_qp_num, route);
}

int emu_qp_modify(struct emu_qp *qp, const struct ibv_qp_attr *attr,
		  int mask)
{
	enum ibv_qp_state cur, next;
	struct req_route route, alt;
	const char *why = NULL;
	int ret;

	qp_route_peer(qp, attr, mask, &route);
	apm_route_alt(qp, attr, mask, &alt);
	emu_lock(&qp->lock);
	cur = qp->state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	/* The consumer may assert the current state; it must be right. */
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		why = "cur_qp_state differs from the QP's state";
		ret = EINVAL;
		goto out;
	}
	ret = -qp_state_check(qp_state_type(qp), cur, next, mask, &why);
	if (!ret)
		ret = qp_check_values(attr, mask, &why);
	if (!ret)
		ret = apm_check(qp, attr, mask, &why);
	if (ret)
		goto out;

	if (next == IBV_QPS_ERR || next == IBV_QPS_RESET)
		resp_ack_owed_locked(qp);
	if (next == IBV_QPS_ERR) {
		qp_apply(qp, attr, mask);
		qp_enter_error_locked(qp, NULL);
		goto out;
	}
	if (next == IBV_QPS_RESET)
		qp_reset_locked(qp);
	else
		qp_apply(qp, attr, mask);
	hca_trace_qp_state(qp, cur, next, NULL);
	qp->state = next;
	qp_engine_transition_locked(qp, cur, next, mask, &route);
	if (next != IBV_QPS_RESET)
		apm_apply_locked(qp, attr, mask, &alt);
	qp_publish_locked(qp);
	if (next == IBV_QPS_SQD && cur != IBV_QPS_SQD)
		qp_sqd_locked(qp, attr, mask);
out:
	emu_unlock(&qp->lock);
	if (ret)
		ibemu_log_dbg("modify_qp %#x %s -> %s mask %#x: %s", qp->qpn,
			      qp_state_name(cur), qp_state_name(next), mask,
			      why);
	return ret;
}

void emu_qp_query(struct emu_qp *qp, struct ibv_qp_attr *attr)
{
	emu_lock(&qp->lock);
	*attr = qp->attr;
	attr->qp_state = qp->state;
	attr->cur_qp_state = qp->state;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	emu_unlock(&qp->lock);
}
