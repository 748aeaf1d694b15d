// SPDX-License-Identifier: MIT
/*
 * Queue pairs: create, modify (the state machine of qp_state.c plus the
 * value checks of each attribute), query, destroy, multicast attach.
 *
 * Lock rule: see struct ibemu_qp.  modify_qp and query_qp hold qp.lock;
 * flushing on the move to ERR takes rq.lock and the CQ locks inside it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"
#include "log.h"
#include "engine.h"
#include "qp_state.h"

#define QP_ACCESS_SUPPORTED                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static int qp_check_cap(const struct ibv_qp_init_attr_ex *a)
{
	const struct ibv_qp_cap *cap = &a->cap;

	if (cap->max_send_wr > IBEMU_MAX_QP_WR ||
	    (!a->srq && cap->max_recv_wr > IBEMU_MAX_QP_WR)) {
		ibemu_log_dbg("create_qp: max_send_wr %u / max_recv_wr %u > %d",
			      cap->max_send_wr, cap->max_recv_wr,
			      IBEMU_MAX_QP_WR);
		return EINVAL;
	}
	if (cap->max_send_sge > IBEMU_MAX_SGE ||
	    (!a->srq && cap->max_recv_sge > IBEMU_MAX_SGE)) {
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

static int qp_check_init_attr(struct ibv_context *context,
			      const struct ibv_qp_init_attr_ex *a)
{
	switch (a->qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_UD:
		break;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
	case IBV_QPT_RAW_PACKET:
	case IBV_QPT_DRIVER:
		ibemu_log_dbg("create_qp: QP type %d not offered", a->qp_type);
		return EOPNOTSUPP;
	default:
		return EINVAL;
	}
	/* Both CQs are required (manual 3.4.3). */
	if (!a->send_cq || !a->recv_cq) {
		ibemu_log_dbg("create_qp: send_cq and recv_cq are required");
		return EINVAL;
	}
	if (a->send_cq->context != context || a->recv_cq->context != context ||
	    (a->srq && a->srq->context != context))
		return EINVAL;
	return qp_check_cap(a);
}

static struct ibv_qp *qp_create(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_qp *qp;
	uint32_t qpn;
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO : qp_check_init_attr(context, a);
	if (ret)
		goto err;
	if (atomic_fetch_add(&ctx->nr_qps, 1) >= IBEMU_MAX_QP) {
		ret = ENOMEM;
		goto err_count;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		ret = ENOMEM;
		goto err_count;
	}
	pthread_mutex_init(&qp->lock, NULL);
	/* Grant at least one of each, so a zero request still works. */
	qp->cap.max_send_wr = a->cap.max_send_wr ? a->cap.max_send_wr : 1;
	qp->cap.max_send_sge = a->cap.max_send_sge ? a->cap.max_send_sge : 1;
	qp->cap.max_inline_data = a->cap.max_inline_data;
	if (a->srq) {
		qp->cap.max_recv_wr = 0;
		qp->cap.max_recv_sge = 0;
	} else {
		qp->cap.max_recv_wr = a->cap.max_recv_wr ? a->cap.max_recv_wr
							 : 1;
		qp->cap.max_recv_sge =
			a->cap.max_recv_sge ? a->cap.max_recv_sge : 1;
	}
	ret = -wqe_ring_init(&qp->sq, qp->cap.max_send_wr, qp->cap.max_send_sge,
			     qp->cap.max_inline_data);
	if (ret)
		goto err_free;
	if (!a->srq) {
		ret = -ibemu_rq_init(&qp->rq, qp->cap.max_recv_wr,
				     qp->cap.max_recv_sge);
		if (ret)
			goto err_sq;
	}
	qp->resp_wqe = calloc(1, sizeof(struct wqe) +
				 IBEMU_MAX_SGE * sizeof(struct ibv_sge));
	if (!qp->resp_wqe) {
		ret = ENOMEM;
		goto err_rq;
	}
	ret = -node_qpn_alloc(ctx->node, a->qp_type, &qpn);
	if (ret)
		goto err_resp;

	qp->sq_sig_all = a->sq_sig_all;
	qp->scq = to_ecq(a->send_cq);
	qp->rcq = to_ecq(a->recv_cq);
	qp->srq = a->srq ? to_esrq(a->srq) : NULL;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cur_qp_state = IBV_QPS_RESET;
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.path_mig_state = IBV_MIG_MIGRATED;
	qp->attr.port_num = 1;

	qp->vqp.qp.context = context;
	qp->vqp.qp.qp_context = a->qp_context;
	qp->vqp.qp.pd = a->pd;
	qp->vqp.qp.send_cq = a->send_cq;
	qp->vqp.qp.recv_cq = a->recv_cq;
	qp->vqp.qp.srq = a->srq;
	qp->vqp.qp.handle = qpn;
	qp->vqp.qp.qp_num = qpn;
	qp->vqp.qp.state = IBV_QPS_RESET;
	qp->vqp.qp.qp_type = a->qp_type;
	qp->vqp.qp.events_completed = 0;
	pthread_mutex_init(&qp->vqp.qp.mutex, NULL);
	pthread_cond_init(&qp->vqp.qp.cond, NULL);

	atomic_fetch_add(&to_epd(a->pd)->usecnt, 1);
	atomic_fetch_add(&qp->scq->usecnt, 1);
	atomic_fetch_add(&qp->rcq->usecnt, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->usecnt, 1);
	/* UD datagrams are bounded by the port's active MTU (IBA 9.8.2). */
	qp->mtu = a->qp_type == IBV_QPT_UD ? 128u << IBEMU_MAX_MTU : 1024;
	qp->peer_proc = -1;
	engine_qp_add(qp);

	/* Report what was granted (manual 3.4.3: cap is in/out). */
	a->cap = qp->cap;
	if (qp->srq) {
		a->cap.max_recv_wr = 0;
		a->cap.max_recv_sge = 0;
	}
	return &qp->vqp.qp;

err_resp:
	free(qp->resp_wqe);
err_rq:
	if (!a->srq)
		ibemu_rq_fini(&qp->rq);
err_sq:
	wqe_ring_fini(&qp->sq);
err_free:
	pthread_mutex_destroy(&qp->lock);
	free(qp);
err_count:
	atomic_fetch_sub(&ctx->nr_qps, 1);
err:
	errno = ret;
	return NULL;
}

struct ibv_qp *ibemu_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex a = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp = qp_create(pd->context, &a);

	if (qp)
		attr->cap = a.cap;
	return qp;
}

struct ibv_qp *ibemu_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int ret;

	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    attr->pd->context != context) {
		errno = EINVAL;
		return NULL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD |
					  IBV_QP_INIT_ATTR_CREATE_FLAGS |
					  IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		ibemu_log_dbg("create_qp_ex: comp_mask %#x not offered",
			      attr->comp_mask);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	qp = qp_create(context, attr);
	if (qp && (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		ret = ibemu_qp_ex_init(to_eqp(qp), attr->send_ops_flags);
		if (ret) {
			ibemu_destroy_qp(qp);
			errno = ret;
			return NULL;
		}
	}
	return qp;
}

/* The value checks of each attribute present in mask (IBA 11.2.5.2). */
static int qp_check_values(struct ibemu_qp *qp, const struct ibv_qp_attr *a,
			   int mask, const char **why_p)
{
	struct ibv_context *context = qp->vqp.qp.context;

	if ((mask & IBV_QP_PORT) && !ibemu_port_valid(context, a->port_num)) {
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
	if ((mask & IBV_QP_AV) && ibemu_check_ah_attr(context, &a->ah_attr)) {
		*why_p = "ah_attr";
		return EINVAL;
	}
	/* Alternate paths need automatic path migration, not offered. */
	if (mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) {
		*why_p = "alternate path (no automatic path migration)";
		return EINVAL;
	}
	/* 24-bit QPN and PSN fields (IBA 9.2 BTH). */
	if ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > IBEMU_QPN_MASK) {
		*why_p = "dest_qp_num";
		return EINVAL;
	}
	if ((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffff) {
		*why_p = "rq_psn";
		return EINVAL;
	}
	if ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff) {
		*why_p = "sq_psn";
		return EINVAL;
	}
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
	if ((mask & IBV_QP_CAP)) {
		*why_p = "cap cannot be modified";
		return EINVAL;
	}
	return 0;
}

static void qp_apply(struct ibemu_qp *qp, const struct ibv_qp_attr *a,
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
	if (mask & IBV_QP_RQ_PSN)
		s->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		s->sq_psn = a->sq_psn;
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

/* Leaving for RESET: every outstanding WR is discarded (IBA 10.3.1). */
static void qp_reset_locked(struct ibemu_qp *qp)
{
	qp->sq.head = qp->sq.tail;
	if (!qp->srq) {
		pthread_mutex_lock(&qp->rq.lock);
		qp->rq.ring.head = qp->rq.ring.tail;
		pthread_mutex_unlock(&qp->rq.lock);
	}
	qp->req_next = qp->sq.head;
	qp->req_rd_atomic = 0;
	qp->req_blocked = false;
	qp->comp_deadline = 0;
	qp->rnr_resume = 0;
	qp->resp_comm_est = false;
	qp->atomic_valid = false;
	resp_reset_locked(qp);
	qp->peer = NULL;
	qp->peer_proc = -1;
	memset(&qp->attr, 0, sizeof(qp->attr));
	qp->attr.path_mtu = IBV_MTU_1024;
	qp->attr.path_mig_state = IBV_MIG_MIGRATED;
	qp->attr.port_num = 1;
}

/* What the engine needs from a transition: path MTU and expected PSN at
 * RTR, the send PSN and retry budgets at RTS (manual 3.5.3, 3.5.4). */
static void qp_engine_transition_locked(struct ibemu_qp *qp,
					enum ibv_qp_state cur,
					enum ibv_qp_state next, int mask)
{
	if ((mask & IBV_QP_PATH_MTU) && qp->vqp.qp.qp_type != IBV_QPT_UD)
		qp->mtu = 128u << qp->attr.path_mtu;
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT) {
		qp->resp_epsn = qp->attr.rq_psn;
		qp->resp_msn = 0;
		if (qp->vqp.qp.qp_type != IBV_QPT_UD)
			req_resolve_peer_locked(qp);
	}
	if (mask & IBV_QP_SQ_PSN)
		qp->req_psn = qp->attr.sq_psn;
	if (next == IBV_QPS_RTS && cur != IBV_QPS_RTS) {
		qp->retry_left = qp->attr.retry_cnt;
		qp->rnr_left = qp->attr.rnr_retry;
		/* Resume what SQD held back. */
		req_run_locked(qp);
	}
}

int ibemu_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	enum ibv_qp_state cur, next;
	const char *why = NULL;
	bool sqd_notify;
	int ret;

	if (!attr)
		return EINVAL;
	if (ibemu_ctx_stale(ibqp->context))
		return EIO;
	pthread_mutex_lock(&qp->lock);
	cur = qp->attr.qp_state;
	next = (mask & IBV_QP_STATE) ? attr->qp_state : cur;
	/* The consumer may assert the current state; it must be right. */
	if ((mask & IBV_QP_CUR_STATE) && attr->cur_qp_state != cur) {
		why = "cur_qp_state differs from the QP's state";
		ret = EINVAL;
		goto out;
	}
	ret = -qp_state_check(ibqp->qp_type, cur, next, mask, &why);
	if (!ret)
		ret = qp_check_values(qp, attr, mask, &why);
	if (ret)
		goto out;

	if (next == IBV_QPS_RESET) {
		qp_reset_locked(qp);
	} else {
		qp_apply(qp, attr, mask);
	}
	qp->attr.qp_state = next;
	qp->attr.cur_qp_state = next;
	qp_engine_transition_locked(qp, cur, next, mask);
	node_qp_publish(to_ectx(ibqp->context)->node, ibqp->qp_num, next,
			qp->attr.qp_access_flags, (uintptr_t)ibqp->pd);
	sqd_notify = next == IBV_QPS_SQD && cur != IBV_QPS_SQD &&
		     (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) &&
		     attr->en_sqd_async_notify;
	if (sqd_notify && qp->sq.head != qp->req_next) {
		qp->sqd_notify = true; /* the completer raises it */
		sqd_notify = false;
	}
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR) {
		qp->comp_deadline = 0;
		qp->rnr_resume = 0;
		resp_flush_open_locked(qp);
		resp_reset_locked(qp);
		ibemu_qp_flush_locked(qp);
		qp->req_next = qp->sq.head;
		qp->req_rd_atomic = 0;
	}
	pthread_mutex_unlock(&qp->lock);

	/* SQ_DRAINED once every outstanding message is acknowledged: now if
	 * nothing is in flight, else from the completer (manual 6.1.6). */
	if (sqd_notify)
		ibemu_async_event(to_ectx(ibqp->context), IBV_EVENT_SQ_DRAINED,
				  (uintptr_t)ibqp);
	/* An SRQ-attached QP in ERR will take no more WQEs from the SRQ
	 * (manual 6.1, IBV_EVENT_QP_LAST_WQE_REACHED). */
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR && qp->srq)
		ibemu_async_event(to_ectx(ibqp->context),
				  IBV_EVENT_QP_LAST_WQE_REACHED,
				  (uintptr_t)ibqp);
	return 0;
out:
	pthread_mutex_unlock(&qp->lock);
	ibemu_log_dbg("modify_qp %#x %s -> %s mask %#x: %s", ibqp->qp_num,
		      qp_state_name(cur), qp_state_name(next), mask, why);
	return ret;
}

int ibemu_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init_attr)
{
	struct ibemu_qp *qp = to_eqp(ibqp);

	if (!attr || !init_attr)
		return EINVAL;
	pthread_mutex_lock(&qp->lock);
	*attr = qp->attr;
	attr->cap = qp->cap;
	attr->sq_draining = 0;
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

int ibemu_destroy_qp(struct ibv_qp *ibqp)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	struct ibemu_context *ctx = to_ectx(ibqp->context);

	if (ibemu_ctx_stale(ibqp->context))
		return EIO;
	/* Out of the engine first: no packet reaches it from now on. */
	engine_qp_remove(qp);
	node_qpn_free(ctx->node, ibqp->qp_num);
	atomic_fetch_sub(&to_epd(ibqp->pd)->usecnt, 1);
	atomic_fetch_sub(&qp->scq->usecnt, 1);
	atomic_fetch_sub(&qp->rcq->usecnt, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->usecnt, 1);
	else
		ibemu_rq_fini(&qp->rq);
	wqe_ring_fini(&qp->sq);
	free(qp->mcast);
	free(qp->resp_wqe);
	free(qp->reads);
	pthread_mutex_destroy(&qp->lock);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	atomic_fetch_sub(&ctx->nr_qps, 1);
	free(qp);
	return 0;
}
