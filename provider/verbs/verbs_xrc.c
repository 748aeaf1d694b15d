// SPDX-License-Identifier: MIT
/*
 * XRC as libibverbs sees it (IBA Annex A14; ibv_open_xrcd(3),
 * ibv_create_srq_ex(3), ibv_get_srq_num(3), ibv_open_qp(3)): argument
 * checks and translation to the HCA's domains and SRQs (emulator/hca/xrc.c).
 * XRC send and receive QPs are created by ibv_create_qp_ex (verbs_qp.c).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "check.h"
#include "ibemu.h"
#include "log.h"

struct ibv_xrcd *ibemu_open_xrcd(struct ibv_context *context,
				 struct ibv_xrcd_init_attr *attr)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_xrcd *xrcd;
	struct stat st = { 0 };
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO : attr ? 0 : EINVAL;
	if (ret)
		goto err;
	/* Both fields are required, nothing else is known (as
	 * ibv_cmd_open_xrcd checks). */
	if (attr->comp_mask >= IBV_XRCD_INIT_ATTR_RESERVED) {
		ret = EOPNOTSUPP;
		goto err;
	}
	if (!(attr->comp_mask & IBV_XRCD_INIT_ATTR_FD) ||
	    !(attr->comp_mask & IBV_XRCD_INIT_ATTR_OFLAGS)) {
		ret = EINVAL;
		goto err;
	}
	/* fd -1: a domain tied to no file, created with O_CREAT. */
	if (attr->fd != -1 && fstat(attr->fd, &st)) {
		ret = errno;
		goto err;
	}
	xrcd = calloc(1, sizeof(*xrcd));
	if (!xrcd) {
		ret = ENOMEM;
		goto err;
	}
	ret = emu_xrcd_open(ctx->hca, st.st_dev, attr->fd == -1 ? 0 : st.st_ino,
			    attr->oflags, &xrcd->exrcd);
	if (ret) {
		ibemu_log_dbg("open_xrcd: fd %d oflags %#x: %d", attr->fd,
			      attr->oflags, ret);
		free(xrcd);
		goto err;
	}
	xrcd->vxrcd.xrcd.context = context;
	return &xrcd->vxrcd.xrcd;

err:
	errno = ret;
	return NULL;
}

int ibemu_close_xrcd(struct ibv_xrcd *ibxrcd)
{
	struct ibemu_xrcd *xrcd = to_exrcd(ibxrcd);
	int ret;

	if (ibemu_ctx_stale(ibxrcd->context))
		return EIO;
	ret = emu_xrcd_close(xrcd->exrcd);
	if (ret)
		return ret;
	free(xrcd);
	return 0;
}

/* What libibverbs' ibv_create_srq() sets for a basic SRQ, for an SRQ
 * made here. */
static void srq_init_verbs(struct ibv_srq *srq, struct ibv_context *context,
			   const struct ibv_srq_init_attr_ex *a)
{
	srq->context = context;
	srq->srq_context = a->srq_context;
	srq->pd = a->pd;
	srq->events_completed = 0;
	pthread_mutex_init(&srq->mutex, NULL);
	pthread_cond_init(&srq->cond, NULL);
}

static int srq_check_ex(struct ibv_context *context,
			const struct ibv_srq_init_attr_ex *a)
{
	uint32_t known = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD |
			 IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
	enum ibv_srq_type type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)
					 ? a->srq_type
					 : IBV_SRQT_BASIC;

	if (a->comp_mask & ~known) {
		ibemu_log_dbg("create_srq_ex: comp_mask %#x not offered",
			      a->comp_mask);
		return EOPNOTSUPP;
	}
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd ||
	    a->pd->context != context)
		return EINVAL;
	if (type == IBV_SRQT_BASIC)
		return 0;
	if (type != IBV_SRQT_XRC) {
		ibemu_log_dbg("create_srq_ex: SRQ type %d not offered", type);
		return EOPNOTSUPP;
	}
	/* An XRC SRQ has a domain and a CQ of its own (IBA A14). */
	if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd ||
	    !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq ||
	    a->xrcd->context != context || a->cq->context != context)
		return EINVAL;
	return 0;
}

static struct ibv_srq *srq_create_xrc(struct ibv_context *context,
				      struct ibv_srq_init_attr_ex *a)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct emu_owner owner;
	struct ibemu_srq *srq;
	int ret = ENOMEM;

	if (atomic_fetch_add(&ctx->nr_srqs, 1) >= IBEMU_MAX_SRQ)
		goto err_count;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto err_count;
	owner = ibemu_owner(context, &srq->vsrq.srq);
	ret = emu_srq_create_xrc(ctx->hca, to_epd(a->pd)->id,
				 to_exrcd(a->xrcd)->exrcd, to_ecq(a->cq)->ecq,
				 &a->attr, &owner,
				 ibemu_pd_buf_alloc(a->pd, IBEMU_RES_TYPE_SRQ,
						    &srq->buf_alloc),
				 &srq->esrq,
				 &srq->vsrq.srq_num);
	if (ret) {
		free(srq);
		goto err_count;
	}
	srq->vsrq.srq_type = IBV_SRQT_XRC;
	srq->vsrq.xrcd = &to_exrcd(a->xrcd)->vxrcd;
	srq->vsrq.cq = a->cq;
	srq_init_verbs(&srq->vsrq.srq, context, a);
	atomic_fetch_add(&to_epd(a->pd)->usecnt, 1);
	check_obj(CHECK_OBJ_SRQ, 1);
	return &srq->vsrq.srq;

err_count:
	atomic_fetch_sub(&ctx->nr_srqs, 1);
	errno = ret;
	return NULL;
}

struct ibv_srq *ibemu_create_srq_ex(struct ibv_context *context,
				    struct ibv_srq_init_attr_ex *a)
{
	struct ibv_srq_init_attr basic;
	struct ibv_srq *srq;
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO : a ? srq_check_ex(context, a)
						 : EINVAL;
	if (ret) {
		errno = ret;
		return NULL;
	}
	if ((a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    a->srq_type == IBV_SRQT_XRC)
		return srq_create_xrc(context, a);
	basic = (struct ibv_srq_init_attr){ .srq_context = a->srq_context,
					    .attr = a->attr };
	srq = ibemu_create_srq(a->pd, &basic);
	if (!srq)
		return NULL;
	a->attr = basic.attr;
	srq_init_verbs(srq, context, a);
	return srq;
}

int ibemu_get_srq_num(struct ibv_srq *ibsrq, uint32_t *srq_num)
{
	struct ibemu_srq *srq = to_esrq(ibsrq);

	if (!srq_num)
		return EINVAL;
	/* Only an XRC SRQ has a number requests can name (IBA A14). */
	if (srq->vsrq.srq_type != IBV_SRQT_XRC)
		return EOPNOTSUPP;
	*srq_num = srq->vsrq.srq_num;
	return 0;
}

/* Another handle on an XRC target QP (ibv_open_qp(3)). */
struct ibv_qp *ibemu_open_qp(struct ibv_context *context,
			     struct ibv_qp_open_attr *a)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_qp *qp;
	struct ibv_qp *ibqp;
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO : a ? 0 : EINVAL;
	if (!ret && (a->comp_mask & ~(uint32_t)(IBV_QP_OPEN_ATTR_NUM |
						IBV_QP_OPEN_ATTR_XRCD |
						IBV_QP_OPEN_ATTR_CONTEXT |
						IBV_QP_OPEN_ATTR_TYPE)))
		ret = EOPNOTSUPP;
	if (!ret && (!(a->comp_mask & IBV_QP_OPEN_ATTR_NUM) ||
		     !(a->comp_mask & IBV_QP_OPEN_ATTR_XRCD) || !a->xrcd ||
		     !(a->comp_mask & IBV_QP_OPEN_ATTR_TYPE) ||
		     a->qp_type != IBV_QPT_XRC_RECV ||
		     a->xrcd->context != context))
		ret = EINVAL;
	if (ret)
		goto err;
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_qps, 1) >= IBEMU_MAX_QP)
		goto err_count;
	qp = calloc(1, sizeof(*qp));
	if (!qp)
		goto err_count;
	ret = emu_qp_open(ctx->hca, to_exrcd(a->xrcd)->exrcd, a->qp_num,
			  &qp->eqp);
	if (ret) {
		free(qp);
		goto err_count;
	}
	ibqp = &qp->vqp.qp;
	ibqp->context = context;
	ibqp->qp_context = (a->comp_mask & IBV_QP_OPEN_ATTR_CONTEXT)
				   ? a->qp_context
				   : NULL;
	ibqp->handle = a->qp_num;
	ibqp->qp_num = a->qp_num;
	ibqp->qp_type = IBV_QPT_XRC_RECV;
	ibqp->state = IBV_QPS_UNKNOWN;
	pthread_mutex_init(&ibqp->mutex, NULL);
	pthread_cond_init(&ibqp->cond, NULL);
	pabi_qp_tail(&qp->vqp)->comp_mask = PABI_VERBS_QP_XRCD;
	pabi_qp_tail(&qp->vqp)->xrcd = &to_exrcd(a->xrcd)->vxrcd;
	return ibqp;

err_count:
	atomic_fetch_sub(&ctx->nr_qps, 1);
err:
	errno = ret;
	return NULL;
}
