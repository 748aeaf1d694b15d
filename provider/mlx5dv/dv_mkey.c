// SPDX-License-Identifier: MIT
/*
 * Indirect mkeys (mlx5dv_create_mkey(3)) and the UMR work requests that
 * lay them out (mlx5dv_wr_mr_interleaved(3), mlx5dv_wr_mr_list(3), and
 * mlx5dv_wr_mkey_configure(3) with its access and layout setters).  The
 * checks are libmlx5's, made where libmlx5 makes them: a UMR must be
 * posted inline, its entries must fit the QP's max_inline_data as mlx5's
 * 16-byte segments do (and the mkey's max_entries), else ENOMEM; every
 * failure is the batch's, returned by ibv_wr_complete.  The HCA keeps
 * the mkey and executes the UMR in send queue order (emulator/hca/mkey.c).
 *
 * Lock rule: mkeys_lock protects the list of the process's mkeys, by
 * which mlx5dv_destroy_mkey() tells ibemu's from the stock libmlx5's.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dv.h"
#include "log.h"

/* mlx5's segment sizes: a UMR's inline KLM or data segment, the
 * interleaved layout's header, the inline data header. */
#define DV_UMR_SEG 16u
#define DV_INL_HDR 4u

#define DV_MKEY_ACCESS                                                         \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                   \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static pthread_mutex_t mkeys_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibemu_mkey *mkeys;

struct dv_mkey *ibemu_dv_create_mkey(struct dv_mkey_init_attr *attr)
{
	struct ibemu_mkey *mk;
	uint32_t key;
	int ret;

	/* Only indirect mkeys, and of their options remote invalidation;
	 * signature and crypto offloads are not emulated (ibemu(7)). */
	if (!(attr->create_flags & DV_MKEY_INIT_ATTR_FLAGS_INDIRECT) ||
	    (attr->create_flags & ~(DV_MKEY_INIT_ATTR_FLAGS_INDIRECT |
				    DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE))) {
		ibemu_log_dbg("mlx5dv_create_mkey: create_flags %#x not offered",
			      attr->create_flags);
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (ibemu_ctx_stale(attr->pd->context)) {
		errno = EIO;
		return NULL;
	}
	mk = calloc(1, sizeof(*mk));
	if (!mk) {
		errno = ENOMEM;
		return NULL;
	}
	ret = emu_mkey_create(to_ectx(attr->pd->context)->hca,
			      to_epd(attr->pd)->id, attr->max_entries,
			      attr->create_flags &
				      DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE,
			      &mk->emk, &key);
	if (ret) {
		free(mk);
		errno = ret;
		return NULL;
	}
	mk->dv.lkey = mk->dv.rkey = key;
	mk->pd = attr->pd;
	mk->max_entries = attr->max_entries;
	atomic_fetch_add(&to_epd(attr->pd)->usecnt, 1);
	pthread_mutex_lock(&mkeys_lock);
	mk->next = mkeys;
	mkeys = mk;
	pthread_mutex_unlock(&mkeys_lock);
	return &mk->dv;
}

/* Take mkey off the list if it is ours; NULL if it is not. */
static struct ibemu_mkey *dv_mkey_take(const struct dv_mkey *mkey)
{
	struct ibemu_mkey **pp, *mk = NULL;

	pthread_mutex_lock(&mkeys_lock);
	for (pp = &mkeys; *pp; pp = &(*pp)->next) {
		if (&(*pp)->dv == mkey) {
			mk = *pp;
			*pp = mk->next;
			break;
		}
	}
	pthread_mutex_unlock(&mkeys_lock);
	return mk;
}

/* How many entries mkey holds if it is ours, else 0. */
static uint16_t dv_mkey_entries(const struct dv_mkey *mkey)
{
	const struct ibemu_mkey *mk;
	uint16_t n = 0;

	pthread_mutex_lock(&mkeys_lock);
	for (mk = mkeys; mk && !n; mk = mk->next)
		if (&mk->dv == mkey)
			n = mk->max_entries;
	pthread_mutex_unlock(&mkeys_lock);
	return n;
}

int ibemu_dv_destroy_mkey(struct dv_mkey *mkey)
{
	struct ibemu_mkey *mk = mkey ? dv_mkey_take(mkey) : NULL;
	int ret;

	if (!mk)
		return ENOENT;
	ret = emu_mkey_destroy(mk->emk);
	if (ret) {
		pthread_mutex_lock(&mkeys_lock);
		mk->next = mkeys;
		mkeys = mk;
		pthread_mutex_unlock(&mkeys_lock);
		return ret;
	}
	atomic_fetch_sub(&to_epd(mk->pd)->usecnt, 1);
	free(mk);
	return 0;
}

/* The UMR of the WR being staged, if it is one still taking setters. */
static struct emu_umr *dv_umr_cur(struct ibemu_dv_qp *dq)
{
	struct emu_wr_ext *ext;

	if (!dq->conf.left) {
		ibemu_wr_stage_fail(dq->qp, EINVAL);
		return NULL;
	}
	ext = ibemu_wr_stage_ext(dq->qp);
	return ext ? (struct emu_umr *)ext->umr : NULL;
}

/* A setter done: the WR is whole once all it announced are. */
static void dv_umr_setter_done(struct ibemu_dv_qp *dq)
{
	dq->conf.left--;
}

/* mlx5dv_wr_mkey_configure(3): a new UMR WR for mkey, whose layout and
 * access num_setters setters give. */
static void dv_mkey_configure(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
			      uint8_t num_setters,
			      struct dv_mkey_conf_attr *attr)
{
	struct ibemu_dv_qp *dq = to_dv_qp(mqp);
	struct ibemu_qp *qp = dq->qp;
	struct ibv_send_wr *wr;
	struct emu_wr_ext *ext;
	struct emu_umr *umr;
	uint32_t i;

	dq->conf.left = 0;
	wr = ibemu_wr_stage_new(qp, EMU_WR_UMR, 0);
	if (!wr)
		return;
	/* A UMR's translation travels inline in the WQE. */
	if (!(wr->send_flags & IBV_SEND_INLINE) || !attr || attr->conf_flags ||
	    attr->comp_mask) {
		ibemu_wr_stage_fail(qp, EOPNOTSUPP);
		return;
	}
	dq->conf.max_entries = mkey ? dv_mkey_entries(mkey) : 0;
	if (!dq->conf.max_entries || !num_setters || !dq->umrs) {
		ibemu_wr_stage_fail(qp, EINVAL);
		return;
	}
	i = ibemu_wr_stage_index(qp);
	umr = &dq->umrs[i];
	memset(umr, 0, sizeof(*umr));
	umr->mkey = mkey->lkey;
	umr->entries = &dq->entries[(size_t)i * dq->entries_per_wr];
	umr->num_entries = 0;
	ext = ibemu_wr_stage_ext(qp);
	if (!ext)
		return;
	ext->umr = umr;
	dq->conf.left = num_setters;
	dq->conf.access_set = dq->conf.layout_set = false;
}

static void dv_set_mkey_access(struct dv_qp_ex *mqp, uint32_t access_flags)
{
	struct ibemu_dv_qp *dq = to_dv_qp(mqp);
	struct emu_umr *umr = dv_umr_cur(dq);

	if (!umr)
		return;
	if ((access_flags & ~DV_MKEY_ACCESS) || dq->conf.access_set) {
		ibemu_wr_stage_fail(dq->qp, EINVAL);
		return;
	}
	umr->access = access_flags;
	dq->conf.access_set = true;
	dv_umr_setter_done(dq);
}

/* Fill the current UMR's layout: n entries of an interleaved layout
 * repeated repeat_count times (il), or of a list (sge). */
static void dv_set_layout(struct ibemu_dv_qp *dq, uint32_t repeat_count,
			  uint16_t n, const struct dv_mr_interleaved *il,
			  const struct ibv_sge *sge)
{
	struct emu_umr *umr = dv_umr_cur(dq);
	struct emu_umr_entry *e;
	uint32_t room;
	uint16_t i;

	if (!umr)
		return;
	if (dq->conf.layout_set || !n || (il && !repeat_count) ||
	    (il ? !il : !sge)) {
		ibemu_wr_stage_fail(dq->qp, EINVAL);
		return;
	}
	/* As libmlx5 counts them: inline segments of 16 bytes, one of
	 * them the interleaved layout's header. */
	room = (dq->qp->cap.max_inline_data + DV_INL_HDR) / DV_UMR_SEG;
	if (il)
		room = room ? room - 1 : 0;
	if (n > room || n > dq->entries_per_wr || n > dq->conf.max_entries) {
		ibemu_wr_stage_fail(dq->qp, ENOMEM);
		return;
	}
	e = (struct emu_umr_entry *)umr->entries;
	for (i = 0; i < n; i++) {
		if (il) {
			e[i] = (struct emu_umr_entry){
				.addr = il[i].addr,
				.bytes_count = il[i].bytes_count,
				.bytes_skip = il[i].bytes_skip,
				.lkey = il[i].lkey,
			};
		} else {
			e[i] = (struct emu_umr_entry){
				.addr = sge[i].addr,
				.bytes_count = sge[i].length,
				.lkey = sge[i].lkey,
			};
		}
	}
	umr->num_entries = n;
	umr->interleaved = il != NULL;
	umr->repeat_count = il ? repeat_count : 1;
	dq->conf.layout_set = true;
	dv_umr_setter_done(dq);
}

static void dv_set_layout_list(struct dv_qp_ex *mqp, uint16_t num_sges,
			       const struct ibv_sge *sge)
{
	dv_set_layout(to_dv_qp(mqp), 1, num_sges, NULL, sge);
}

static void dv_set_layout_interleaved(struct dv_qp_ex *mqp,
				      uint32_t repeat_count,
				      uint16_t num_interleaved,
				      const struct dv_mr_interleaved *data)
{
	dv_set_layout(to_dv_qp(mqp), repeat_count, num_interleaved, data,
		      NULL);
}

/* mlx5dv_wr_mr_interleaved(3) and mlx5dv_wr_mr_list(3): a configure
 * with its two setters, in one call. */
static void dv_mr_interleaved(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
			      uint32_t access_flags, uint32_t repeat_count,
			      uint16_t num_interleaved,
			      struct dv_mr_interleaved *data)
{
	struct dv_mkey_conf_attr attr = { 0 };

	dv_mkey_configure(mqp, mkey, 2, &attr);
	dv_set_mkey_access(mqp, access_flags);
	dv_set_layout_interleaved(mqp, repeat_count, num_interleaved, data);
}

static void dv_mr_list(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
		       uint32_t access_flags, uint16_t num_sges,
		       struct ibv_sge *sge)
{
	struct dv_mkey_conf_attr attr = { 0 };

	dv_mkey_configure(mqp, mkey, 2, &attr);
	dv_set_mkey_access(mqp, access_flags);
	dv_set_layout_list(mqp, num_sges, sge);
}

void ibemu_dv_set_umr_ops(struct ibemu_dv_qp *dq)
{
	uint64_t ops = dq->send_ops_flags;

	if (ops & DV_QP_EX_WITH_MR_INTERLEAVED)
		dq->mqp.wr_mr_interleaved = dv_mr_interleaved;
	if (ops & DV_QP_EX_WITH_MR_LIST)
		dq->mqp.wr_mr_list = dv_mr_list;
	if (ops & DV_QP_EX_WITH_MKEY_CONFIGURE) {
		dq->mqp.wr_mkey_configure = dv_mkey_configure;
		dq->mqp.wr_set_mkey_access_flags = dv_set_mkey_access;
		dq->mqp.wr_set_mkey_layout_list = dv_set_layout_list;
		dq->mqp.wr_set_mkey_layout_interleaved =
			dv_set_layout_interleaved;
	}
}
