// SPDX-License-Identifier: MIT
/*
 * QPs made by mlx5dv_create_qp(3): RC QPs with mlx5's extra send
 * operations (UMR, dv_mkey.c), and the Dynamically Connected transport,
 * DCI initiators and DCT targets (IBV_QPT_DRIVER), which the HCA
 * carries (emulator/hca/dc.c).  The QP is the verbs face's, with the
 * setters table of struct mlx5dv_qp_ex beside it: the inline
 * mlx5dv_wr_*() functions call through it, between ibv_wr_start and
 * ibv_wr_complete, and each setter adds to the WR the verbs face stages.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dv.h"
#include "log.h"

#define DV_UMR_MIN_INLINE 124
#define DV_QP_CREATE_FLAGS_OFFERED DV_QP_CREATE_DISABLE_SCATTER_TO_CQE
#define DV_QP_SEND_OPS_OFFERED                                                 \
	(DV_QP_EX_WITH_MR_INTERLEAVED | DV_QP_EX_WITH_MR_LIST |               \
	 DV_QP_EX_WITH_MKEY_CONFIGURE)
#define DV_QP_INIT_ATTR_OFFERED                                                \
	(DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS | DV_QP_INIT_ATTR_MASK_DC |     \
	 DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS)

/* A setter the QP was not created for, or one ibemu does not offer:
 * the batch fails at ibv_wr_complete, as libmlx5's does. */
static void dv_unoffered(struct dv_qp_ex *mqp)
{
	ibemu_wr_stage_fail(to_dv_qp(mqp)->qp, EOPNOTSUPP);
}

/* mlx5dv_wr_set_dc_addr(3): the DCT the current WR goes to, at the
 * address ah names, with the DC key it must have. */
static void dv_set_dc_addr(struct dv_qp_ex *mqp, struct ibv_ah *ah,
			   uint32_t remote_dctn, uint64_t remote_dc_key)
{
	struct ibemu_qp *qp = to_dv_qp(mqp)->qp;
	struct emu_wr_ext *ext = ibemu_wr_stage_ext(qp);

	if (!ext)
		return;
	if (!ah || ah->context != qp->vqp.qp.context) {
		ibemu_wr_stage_fail(qp, EINVAL);
		return;
	}
	ext->has_dc = true;
	ext->dc.ah_handle = ah->handle;
	ext->dc.dctn = remote_dctn & 0xffffff;
	ext->dc.dc_key = remote_dc_key;
}

static void dv_qp_ex_fill(struct ibemu_dv_qp *dq)
{
	void (**slot)(struct dv_qp_ex *) = (void (**)(struct dv_qp_ex *))(
		(char *)&dq->mqp + offsetof(struct dv_qp_ex, wr_set_dc_addr));
	size_t i;

	/* Every setter, known or appended by a later release, starts as
	 * the stub; a stub takes the QP as its first argument and ignores
	 * the others, which the C calling conventions allow. */
	for (i = 0; i < DV_QP_EX_SLOTS; i++)
		slot[i] = dv_unoffered;
	if (dq->qp->dc_type == EMU_DC_DCI)
		dq->mqp.wr_set_dc_addr = dv_set_dc_addr;
	ibemu_dv_set_umr_ops(dq);
}

static int dv_check_attr(const struct ibv_qp_init_attr_ex *attr,
			 const struct dv_qp_init_attr *dv)
{
	if (dv->comp_mask & ~(uint64_t)DV_QP_INIT_ATTR_OFFERED)
		return EOPNOTSUPP; /* DCI streams among them */
	if ((dv->comp_mask & DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS) &&
	    (dv->create_flags & ~DV_QP_CREATE_FLAGS_OFFERED))
		return EOPNOTSUPP;
	if ((dv->comp_mask & DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) &&
	    (dv->send_ops_flags & ~(uint64_t)DV_QP_SEND_OPS_OFFERED))
		return EOPNOTSUPP;
	if (dv->comp_mask & DV_QP_INIT_ATTR_MASK_DC) {
		/* A DC QP is of the driver's type (mlx5dv_create_qp(3)). */
		if (attr->qp_type != IBV_QPT_DRIVER)
			return EINVAL;
		if (dv->dc_init_attr.dc_type != DV_DCTYPE_DCI &&
		    dv->dc_init_attr.dc_type != DV_DCTYPE_DCT)
			return EINVAL;
		/* A DCT takes no send operations. */
		if (dv->dc_init_attr.dc_type == DV_DCTYPE_DCT &&
		    (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) &&
		    attr->send_ops_flags)
			return EINVAL;
		return 0;
	}
	if (attr->qp_type == IBV_QPT_DRIVER)
		return EINVAL;
	/* mlx5's own send operations are for RC QPs (mlx5dv_wr_post(3)). */
	if ((dv->comp_mask & DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS) &&
	    dv->send_ops_flags && attr->qp_type != IBV_QPT_RC)
		return EOPNOTSUPP;
	return 0;
}

/* UMR staging room: one UMR per WR the batch may hold, each with the
 * entries mlx5 fits in max_inline_data (dv_mkey.c). */
static int dv_qp_alloc_umr(struct ibemu_dv_qp *dq, const struct ibv_qp_cap *cap)
{
	size_t n = cap->max_send_wr;

	dq->entries_per_wr = (uint16_t)((cap->max_inline_data + 4) / 16);
	if (!n || !dq->entries_per_wr)
		return 0;
	dq->umrs = calloc(n, sizeof(*dq->umrs));
	dq->entries = calloc(n * dq->entries_per_wr, sizeof(*dq->entries));
	return dq->umrs && dq->entries ? 0 : ENOMEM;
}

struct ibv_qp *ibemu_dv_create_qp(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr,
				  struct dv_qp_init_attr *dv_attr)
{
	struct dv_qp_init_attr none = { 0 };
	enum emu_dc_type dc = EMU_DC_NONE;
	uint64_t ops_mask, ops;
	struct ibemu_dv_qp *dq;
	struct ibv_qp *ibqp;
	uint64_t key = 0;
	int ret;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	if (!dv_attr)
		dv_attr = &none;
	ret = dv_check_attr(attr, dv_attr);
	if (ret) {
		ibemu_log_dbg("mlx5dv_create_qp: comp_mask %#llx create_flags "
			      "%#x send_ops_flags %#llx: %s",
			      (unsigned long long)dv_attr->comp_mask,
			      dv_attr->create_flags,
			      (unsigned long long)dv_attr->send_ops_flags,
			      strerror(ret));
		errno = ret;
		return NULL;
	}
	if (dv_attr->comp_mask & DV_QP_INIT_ATTR_MASK_DC) {
		dc = dv_attr->dc_init_attr.dc_type == DV_DCTYPE_DCI ? EMU_DC_DCI
								     : EMU_DC_DCT;
		if (dc == EMU_DC_DCT)
			key = dv_attr->dc_init_attr.dct_access_key;
	}
	dq = calloc(1, sizeof(*dq));
	if (!dq) {
		errno = ENOMEM;
		return NULL;
	}
	if (dv_attr->comp_mask & DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS)
		dq->send_ops_flags = dv_attr->send_ops_flags;
	/* mlx5's UMRs are posted through the extended send API: a QP
	 * asking for them has it, whatever its send_ops_flags. */
	/* mlx5 sizes a UMR-capable QP's WQEs for a UMR, which leaves room
	 * for inline entries whatever max_inline_data asked: ibemu grants
	 * DV_UMR_MIN_INLINE at least, 8 list entries (ibemu(7)). */
	if (dq->send_ops_flags && attr->cap.max_inline_data < DV_UMR_MIN_INLINE)
		attr->cap.max_inline_data = DV_UMR_MIN_INLINE;
	ops_mask = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	ops = attr->send_ops_flags;
	if (dq->send_ops_flags && !ops_mask) {
		attr->comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		attr->send_ops_flags = 0;
	}
	ibqp = ibemu_create_qp_dc(context, attr, dc, key);
	if (!ops_mask) {
		attr->comp_mask &= ~(uint32_t)IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		attr->send_ops_flags = ops;
	}
	if (!ibqp) {
		ret = errno;
		free(dq);
		errno = ret;
		return NULL;
	}
	dq->qp = to_eqp(ibqp);
	dq->qp->dv = dq;
	ret = dq->send_ops_flags ? dv_qp_alloc_umr(dq, &dq->qp->cap) : 0;
	if (ret) {
		ibemu_destroy_qp(ibqp);
		errno = ret;
		return NULL;
	}
	dv_qp_ex_fill(dq);
	return ibqp;
}

struct dv_qp_ex *ibemu_dv_qp_ex(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = container_of(qpx, struct ibemu_qp, vqp.qp_ex);

	/* A QP of ibv_create_qp_ex(3) has no mlx5 setters to offer. */
	if (!qp->dv)
		errno = EOPNOTSUPP;
	return qp->dv ? &qp->dv->mqp : NULL;
}

void ibemu_dv_qp_fini(struct ibemu_qp *qp)
{
	struct ibemu_dv_qp *dq = qp->dv;

	if (!dq)
		return;
	free(dq->umrs);
	free(dq->entries);
	free(dq);
	qp->dv = NULL;
}
