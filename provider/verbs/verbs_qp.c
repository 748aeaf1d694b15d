// SPDX-License-Identifier: MIT
/*
 * Queue pairs as libibverbs sees them (manual 3.4.3, 3.5, 3.6): the
 * argument checks of the verbs man pages, translation to the HCA's QP
 * (emulator/hca/qp.c), which owns the state machine and every attribute.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_life.h"
#include "check_verbs.h"
#include "ibemu.h"
#include "log.h"

static int qp_check_init_attr(struct ibv_context *context,
			      const struct ibv_qp_init_attr_ex *a,
			      enum emu_dc_type dc_type)
{
	/* A DCI sends only; a DCT receives only, into its SRQ
	 * (mlx5dv_create_qp(3)). */
	if (dc_type == EMU_DC_DCI)
		return a->send_cq && a->send_cq->context == context ? 0
								    : EINVAL;
	if (dc_type == EMU_DC_DCT)
		return a->recv_cq && a->recv_cq->context == context &&
				       a->srq && a->srq->context == context
			       ? 0
			       : EINVAL;
	/* An XRC target has its domain and no CQ, SRQ or PD; an XRC
	 * initiator a send CQ and no receive side (IBA A14). */
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		if (!a->xrcd || a->xrcd->context != context)
			return EINVAL;
		return 0;
	}
	if (a->qp_type == IBV_QPT_XRC_SEND) {
		if (!a->send_cq || a->send_cq->context != context || a->srq)
			return EINVAL;
		return 0;
	}
	/* Both CQs are required (manual 3.4.3). */
	if (!a->send_cq || !a->recv_cq) {
		ibemu_log_dbg("create_qp: send_cq and recv_cq are required");
		return EINVAL;
	}
	if (a->send_cq->context != context || a->recv_cq->context != context ||
	    (a->srq && a->srq->context != context))
		return EINVAL;
	return 0;
}

/* Every QP type but the XRC target has a PD (IBA A14). */
static bool ibqp_has_pd(enum ibv_qp_type type)
{
	return type != IBV_QPT_XRC_RECV;
}

static void qp_init_verbs(struct ibemu_qp *qp, struct ibv_context *context,
			  const struct ibv_qp_init_attr_ex *a, uint32_t qpn)
{
	struct ibv_qp *ibqp = &qp->vqp.qp;

	ibqp->context = context;
	ibqp->qp_context = a->qp_context;
	ibqp->pd = ibqp_has_pd(a->qp_type) ? a->pd : NULL;
	if (a->qp_type != IBV_QPT_XRC_RECV) {
		ibqp->send_cq = qp->dc_type == EMU_DC_DCT ? NULL : a->send_cq;
		ibqp->recv_cq = a->qp_type == IBV_QPT_XRC_SEND ||
					qp->dc_type == EMU_DC_DCI
				? NULL
				: a->recv_cq;
		ibqp->srq = qp->dc_type == EMU_DC_DCI ? NULL : a->srq;
	}
	if (a->qp_type == IBV_QPT_XRC_RECV) {
		pabi_qp_tail(&qp->vqp)->comp_mask |= PABI_VERBS_QP_XRCD;
		pabi_qp_tail(&qp->vqp)->xrcd = &to_exrcd(a->xrcd)->vxrcd;
	}
	ibqp->handle = qpn;
	ibqp->qp_num = qpn;
	ibqp->state = IBV_QPS_RESET;
	ibqp->qp_type = a->qp_type;
	ibqp->events_completed = 0;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
}

/* What the HCA is asked for: the objects each QP type has. */
static struct emu_qp_init qp_emu_init(struct ibv_context *context,
				      const struct ibv_qp_init_attr_ex *a,
				      struct ibemu_qp *qp)
{
	struct emu_qp_init init = {
		.qp_type = qp->dc_type ? IBV_QPT_RC : a->qp_type,
		.cap = a->cap,
		.sq_sig_all = a->sq_sig_all != 0,
		.owner = ibemu_owner(context, &qp->vqp.qp),
		.dc_type = qp->dc_type,
	};

	/* A DCI has no receive side, a DCT no send queue. */
	if (qp->dc_type == EMU_DC_DCI) {
		init.cap.max_recv_wr = init.cap.max_recv_sge = 0;
	} else if (qp->dc_type == EMU_DC_DCT) {
		init.cap.max_send_wr = init.cap.max_send_sge = 0;
		init.cap.max_inline_data = 0;
	}

	if (a->qp_type == IBV_QPT_XRC_RECV) {
		init.xrcd = to_exrcd(a->xrcd)->exrcd;
		return init;
	}
	init.pd_id = to_epd(a->pd)->id;
	init.alloc =
		ibemu_pd_buf_alloc(a->pd, IBEMU_RES_TYPE_QP, &qp->buf_alloc);
	if (qp->dc_type == EMU_DC_DCT) {
		init.recv_cq = to_ecq(a->recv_cq)->ecq;
		init.srq = to_esrq(a->srq)->esrq;
		return init;
	}
	init.send_cq = to_ecq(a->send_cq)->ecq;
	if (a->qp_type != IBV_QPT_XRC_SEND && qp->dc_type != EMU_DC_DCI) {
		init.recv_cq = to_ecq(a->recv_cq)->ecq;
		init.srq = a->srq ? to_esrq(a->srq)->esrq : NULL;
	}
	return init;
}

static struct ibv_qp *qp_create(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *a,
				enum emu_dc_type dc_type, uint64_t dct_key)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct emu_qp_init init;
	struct ibemu_qp *qp;
	uint32_t qpn;
	int ret;

	ret = ibemu_ctx_stale(context)
		      ? EIO
		      : qp_check_init_attr(context, a, dc_type);
	if (ret)
		goto err;
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_qps, 1) >= IBEMU_MAX_QP)
		goto err_count;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto err_count;
	qp->dc_type = dc_type;
	init = qp_emu_init(context, a, qp);
	init.dct_key = dct_key;
	ret = emu_qp_create(ctx->hca, &init, &qp->eqp, &qpn);
	if (ret)
		goto err_free;
	qp_init_verbs(qp, context, a, qpn);
	qp->sq_sig_all = init.sq_sig_all;
	qp->cap = init.cap;
	if (ibqp_has_pd(a->qp_type))
		atomic_fetch_add(&to_epd(a->pd)->usecnt, 1);
	/* Report what was granted (manual 3.4.3: cap is in/out). */
	a->cap = init.cap;
	check_obj(CHECK_OBJ_QP, 1);
	return &qp->vqp.qp;

err_free:
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
	struct ibv_qp *qp = qp_create(pd->context, &a, EMU_DC_NONE, 0);

	if (qp)
		attr->cap = a.cap;
	return qp;
}

static int qp_check_init_attr_ex(struct ibv_context *context,
				 const struct ibv_qp_init_attr_ex *attr)
{
	/* An XRC target QP is created on its domain, not a PD (IBA A14). */
	if (attr->qp_type == IBV_QPT_XRC_RECV) {
		if (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)
			return EINVAL;
	} else if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
		   attr->pd->context != context) {
		return EINVAL;
	}
	if (attr->comp_mask & ~(uint32_t)(IBV_QP_INIT_ATTR_PD |
					  IBV_QP_INIT_ATTR_XRCD |
					  IBV_QP_INIT_ATTR_CREATE_FLAGS |
					  IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)) {
		ibemu_log_dbg("create_qp_ex: comp_mask %#x not offered",
			      attr->comp_mask);
		return EOPNOTSUPP;
	}
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags)
		return EOPNOTSUPP;
	return 0;
}

struct ibv_qp *ibemu_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr)
{
	return ibemu_create_qp_dc(context, attr, EMU_DC_NONE, 0);
}

struct ibv_qp *ibemu_create_qp_dc(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr,
				  enum emu_dc_type dc_type, uint64_t dct_key)
{
	struct ibv_qp *qp;
	int ret;

	ret = qp_check_init_attr_ex(context, attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	qp = qp_create(context, attr, dc_type, dct_key);
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

int ibemu_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask)
{
	int ret;

	if (!attr)
		return EINVAL;
	if (ibemu_ctx_stale(ibqp->context))
		return EIO;
	ret = emu_qp_modify(to_eqp(ibqp)->eqp, attr, mask);
	/* ibqp->state is libibverbs' copy of the HCA's state. */
	if (!ret && (mask & IBV_QP_STATE))
		ibqp->state = attr->qp_state;
	return ret;
}

int ibemu_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init_attr)
{
	struct ibemu_qp *qp = to_eqp(ibqp);

	if (!attr || !init_attr)
		return EINVAL;
	emu_qp_query(qp->eqp, attr);
	memset(init_attr, 0, sizeof(*init_attr));
	init_attr->qp_context = ibqp->qp_context;
	init_attr->send_cq = ibqp->send_cq;
	init_attr->recv_cq = ibqp->recv_cq;
	init_attr->srq = ibqp->srq;
	init_attr->cap = qp->cap;
	init_attr->qp_type = ibqp->qp_type;
	init_attr->sq_sig_all = qp->sq_sig_all;
	return 0;
}

int ibemu_destroy_qp(struct ibv_qp *ibqp)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	int ret;

	if (ibemu_ctx_stale(ibqp->context))
		return EIO;
	check_life_async_destroy("QP", ibqp->qp_num, ibqp,
				 &ibqp->events_completed);
	ret = emu_qp_destroy(qp->eqp);
	if (ret)
		return ret;
	ibemu_qp_ex_fini(qp);
	ibemu_dv_qp_fini(qp);
	if (ibqp->pd)
		atomic_fetch_sub(&to_epd(ibqp->pd)->usecnt, 1);
	atomic_fetch_sub(&to_ectx(ibqp->context)->nr_qps, 1);
	check_obj(CHECK_OBJ_QP, -1);
	pthread_mutex_destroy(&ibqp->mutex);
	pthread_cond_destroy(&ibqp->cond);
	free(qp);
	return 0;
}

int ibemu_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr)
{
	if (ibemu_ctx_stale(ibqp->context)) {
		if (bad_wr)
			*bad_wr = wr;
		return EIO;
	}
	if (check_on())
		return check_verbs_post_send(ibqp, wr, bad_wr);
	return emu_post_send(to_eqp(ibqp)->eqp, wr, bad_wr, false);
}

int ibemu_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr)
{
	return emu_post_recv(to_eqp(ibqp)->eqp, wr, bad_wr);
}

/* Multicast attachment of UD QPs (manual 3.6.13, 3.6.14; IBA 10.5). */
int ibemu_attach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
		       uint16_t lid)
{
	return emu_mcast_attach(to_eqp(ibqp)->eqp, gid, lid);
}

int ibemu_detach_mcast(struct ibv_qp *ibqp, const union ibv_gid *gid,
		       uint16_t lid)
{
	return emu_mcast_detach(to_eqp(ibqp)->eqp, gid, lid);
}
