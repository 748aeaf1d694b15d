// SPDX-License-Identifier: MIT
/*
 * The extended send API (ibv_create_qp_ex with send_ops_flags, and
 * ibv_wr_start ... ibv_wr_complete, man ibv_wr_post(3)).
 *
 * The builders stage plain work requests in the provider (inline data
 * copied at once, as the buffers may be reused when the call returns);
 * ibv_wr_complete posts the batch whole or not at all, and ibv_wr_abort
 * drops it.  An error in any builder call is remembered and returned by
 * complete.  Nothing of the HCA is locked in between: the application may
 * poll its CQs while it builds.
 *
 * Lock rule: stage.lock is held from ibv_wr_start to ibv_wr_complete or
 * ibv_wr_abort and protects the stage.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"
#include "log.h"

/*
 * RDMA ATOMIC WRITE came with rdma-core 44 (IBV_WR_ATOMIC_WRITE, and
 * wr_atomic_write at the end of struct ibv_qp_ex): built against older
 * headers ibemu does not offer it, and built against newer ones it offers
 * it only where the process's libibverbs has that member (pabi_qp_ex_has).
 */
#if HAVE_DECL_IBV_WR_ATOMIC_WRITE
#define QP_EX_WITH_ATOMIC_WRITE IBV_QP_EX_WITH_ATOMIC_WRITE
#else
#define QP_EX_WITH_ATOMIC_WRITE 0
#endif

#define QP_EX_OPS_SUPPORTED                                                    \
	(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |      \
	 IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                  \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |       \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |       \
	 IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |              \
	 QP_EX_WITH_ATOMIC_WRITE)

/* The word an ATOMIC WRITE stores, copied at once, as inline data. */
struct wr_word {
	struct ibv_sge sge;
	uint64_t value;
};

struct ibemu_wr_stage {
	pthread_mutex_t lock;
	uint64_t send_ops_flags;
	uint32_t max; /* WRs a batch may hold: the send queue's size */
	uint32_t n; /* WRs staged */
	int err; /* first builder error of the batch */
	struct ibv_send_wr *wrs; /* max entries */
	struct ibv_sge *sges; /* max_send_sge per WR */
	uint8_t *inline_buf; /* max_inline_data per WR */
	struct wr_word *words; /* one per WR, for ATOMIC WRITE */
	/* one per WR: what other faces' setters add (emu.h) */
	struct emu_wr_ext *exts;
	bool has_ext; /* some WR of the batch has one */
	struct ibv_send_wr *cur; /* the WR the setters fill */
};

static struct ibemu_qp *to_eqp_ex(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct ibemu_qp, vqp.qp_ex);
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct ibemu_wr_stage *st = qp->stage;

	pthread_mutex_lock(&st->lock);
	st->n = 0;
	st->err = ibemu_ctx_stale(qp->vqp.qp.context) ? EIO : 0;
	st->cur = NULL;
	st->has_ext = false;
}

/* A new staged WR for opcode, or NULL (error recorded). */
static struct ibv_send_wr *wr_new(struct ibv_qp_ex *qpx,
				  enum ibv_wr_opcode opcode, uint64_t flag)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct ibemu_wr_stage *st = qp->stage;
	struct ibv_send_wr *wr;

	st->cur = NULL;
	if (st->err)
		return NULL;
	if (flag && !(st->send_ops_flags & flag)) {
		st->err = EINVAL;
		return NULL;
	}
	if (st->n >= st->max) {
		st->err = ENOMEM;
		return NULL;
	}
	wr = &st->wrs[st->n];
	memset(wr, 0, sizeof(*wr));
	memset(&st->exts[st->n], 0, sizeof(st->exts[st->n]));
	if (st->n)
		st->wrs[st->n - 1].next = wr;
	st->n++;
	wr->wr_id = qpx->wr_id;
	wr->opcode = opcode;
	wr->send_flags = qpx->wr_flags;
	st->cur = wr;
	return wr;
}

/* The setters need a WR to set; without one the batch fails. */
static struct ibv_send_wr *wr_cur(struct ibemu_wr_stage *st)
{
	if (!st->cur && !st->err)
		st->err = EINVAL;
	return st->cur;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	wr_new(qpx, IBV_WR_SEND, IBV_QP_EX_WITH_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_SEND_WITH_IMM,
					IBV_QP_EX_WITH_SEND_WITH_IMM);

	if (wr)
		wr->imm_data = imm_data;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_SEND_WITH_INV,
					IBV_QP_EX_WITH_SEND_WITH_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_LOCAL_INV,
					IBV_QP_EX_WITH_LOCAL_INV);

	if (wr)
		wr->invalidate_rkey = invalidate_rkey;
}

/* Bind mw with the R_Key rkey (type 2: the consumer chooses its low 8
 * bits, ibv_wr_bind_mw(3)); the window is checked when it executes. */
static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw, uint32_t rkey,
		       const struct ibv_mw_bind_info *bind_info)
{
	struct ibemu_wr_stage *st = to_eqp_ex(qpx)->stage;
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_BIND_MW,
					IBV_QP_EX_WITH_BIND_MW);

	if (!wr)
		return;
	if (!mw || !bind_info) {
		st->err = EINVAL;
		return;
	}
	wr->bind_mw.mw = mw;
	wr->bind_mw.rkey = rkey;
	wr->bind_mw.bind_info = *bind_info;
}

static void wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode op,
		    uint64_t flag, uint32_t rkey, uint64_t remote_addr,
		    __be32 imm)
{
	struct ibv_send_wr *wr = wr_new(qpx, op, flag);

	if (!wr)
		return;
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
	wr->imm_data = imm;
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
	struct ibv_send_wr *wr = wr_new(qpx, op, flag);

	if (!wr)
		return;
	wr->wr.atomic.rkey = rkey;
	wr->wr.atomic.remote_addr = remote_addr;
	wr->wr.atomic.compare_add = compare_add;
	wr->wr.atomic.swap = swap;
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
	struct ibemu_wr_stage *st = qp->stage;
	struct ibv_send_wr *wr = wr_cur(st);
	uint32_t idx;

	if (!wr)
		return;
	if (num_sge > qp->cap.max_send_sge) {
		st->err = EINVAL;
		return;
	}
	idx = (uint32_t)(wr - st->wrs);
	wr->sg_list = &st->sges[(size_t)idx * qp->cap.max_send_sge];
	if (num_sge)
		memcpy(wr->sg_list, sg_list, num_sge * sizeof(*sg_list));
	wr->num_sge = (int)num_sge;
	wr->send_flags &= ~IBV_SEND_INLINE;
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
	struct ibemu_wr_stage *st = qp->stage;
	struct ibv_send_wr *wr = wr_cur(st);
	uint8_t *buf, *dst;
	size_t i, len = 0;
	uint32_t idx;

	if (!wr)
		return;
	for (i = 0; i < num_buf; i++)
		len += buf_list[i].length;
	if (len > qp->cap.max_inline_data) {
		st->err = EINVAL;
		return;
	}
	/* Copied now: the buffers may be reused at once (ibv_wr_post(3)). */
	idx = (uint32_t)(wr - st->wrs);
	buf = st->inline_buf + (size_t)idx * qp->cap.max_inline_data;
	for (dst = buf, i = 0; i < num_buf; i++) {
		memcpy(dst, buf_list[i].addr, buf_list[i].length);
		dst += buf_list[i].length;
	}
	wr->sg_list = &st->sges[(size_t)idx * qp->cap.max_send_sge];
	wr->sg_list[0].addr = (uintptr_t)buf;
	wr->sg_list[0].length = (uint32_t)len;
	wr->sg_list[0].lkey = 0;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_INLINE;
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
			       size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	wr_set_inline_data_list(qpx, 1, &buf);
}

/* The XRC SRQ the current WR is for (ibv_wr_set_xrc_srqn(3)). */
static void wr_set_xrc_srqn(struct ibv_qp_ex *qpx, uint32_t remote_srqn)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct ibv_send_wr *wr = wr_cur(qp->stage);

	if (!wr)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_XRC_SEND) {
		qp->stage->err = EINVAL;
		return;
	}
	wr->qp_type.xrc.remote_srqn = remote_srqn;
}

/* UD destination of the current WR (ibv_wr_set_ud_addr(3)). */
static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct ibv_send_wr *wr = wr_cur(qp->stage);

	if (!wr)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_UD || !ah) {
		qp->stage->err = EINVAL;
		return;
	}
	wr->wr.ud.ah = ah;
	wr->wr.ud.remote_qpn = remote_qpn;
	wr->wr.ud.remote_qkey = remote_qkey;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct ibemu_qp *qp = to_eqp_ex(qpx);
	struct ibemu_wr_stage *st = qp->stage;
	struct ibv_send_wr *bad;
	int ret = st->err;

	/* As ibv_post_send, but the whole batch or none of it. */
	if (!ret)
		ret = emu_post_send_ext(qp->eqp, st->n ? st->wrs : NULL,
					st->has_ext ? st->exts : NULL, &bad,
					true);
	st->n = 0;
	st->cur = NULL;
	pthread_mutex_unlock(&st->lock);
	return ret;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct ibemu_wr_stage *st = to_eqp_ex(qpx)->stage;

	st->n = 0;
	st->cur = NULL;
	pthread_mutex_unlock(&st->lock);
}

#if HAVE_DECL_IBV_WR_ATOMIC_WRITE
/*
 * RDMA ATOMIC WRITE (IBA 1.5, ibv_wr_atomic_write(3)): the 8 bytes at
 * atomic_wr are stored at once at remote_addr, which must be aligned to
 * 8.  rdma-core 44 has no capability bit for it: a device without it
 * refuses IBV_QP_EX_WITH_ATOMIC_WRITE or the post with EOPNOTSUPP.
 */
static void wr_atomic_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			    uint64_t remote_addr, const void *atomic_wr)
{
	struct ibemu_wr_stage *st = to_eqp_ex(qpx)->stage;
	struct ibv_send_wr *wr = wr_new(qpx, IBV_WR_ATOMIC_WRITE,
					IBV_QP_EX_WITH_ATOMIC_WRITE);
	struct wr_word *w;

	if (!wr)
		return;
	if (!atomic_wr) {
		st->err = EINVAL;
		return;
	}
	w = &st->words[st->n - 1];
	memcpy(&w->value, atomic_wr, sizeof(w->value));
	w->sge = (struct ibv_sge){ .addr = (uintptr_t)&w->value,
				   .length = sizeof(w->value) };
	wr->wr.rdma.rkey = rkey;
	wr->wr.rdma.remote_addr = remote_addr;
	wr->sg_list = &w->sge;
	wr->num_sge = 1;
	wr->send_flags |= IBV_SEND_INLINE;
}
#endif

struct ibv_send_wr *ibemu_wr_stage_new(struct ibemu_qp *qp,
				       enum ibv_wr_opcode opcode,
				       uint64_t flag)
{
	return wr_new(&qp->vqp.qp_ex, opcode, flag);
}

struct emu_wr_ext *ibemu_wr_stage_ext(struct ibemu_qp *qp)
{
	struct ibemu_wr_stage *st = qp->stage;

	if (!wr_cur(st))
		return NULL;
	st->has_ext = true;
	return &st->exts[st->n - 1];
}

uint32_t ibemu_wr_stage_index(const struct ibemu_qp *qp)
{
	return qp->stage->n ? qp->stage->n - 1 : 0;
}

void ibemu_wr_stage_fail(struct ibemu_qp *qp, int err)
{
	if (!qp->stage->err)
		qp->stage->err = err;
	qp->stage->cur = NULL;
}

/* The send_ops_flags ibemu offers in this process. */
static uint64_t qp_ex_ops_offered(void)
{
	uint64_t ops = QP_EX_OPS_SUPPORTED;

#if HAVE_DECL_IBV_WR_ATOMIC_WRITE
	if (!pabi_qp_ex_has(offsetof(struct ibv_qp_ex, wr_atomic_write)))
		ops &= ~(uint64_t)IBV_QP_EX_WITH_ATOMIC_WRITE;
#endif
	return ops;
}

static int qp_ex_check_ops(enum ibv_qp_type type, uint64_t send_ops_flags)
{
	if (send_ops_flags & ~qp_ex_ops_offered()) {
		ibemu_log_dbg("create_qp_ex: send_ops_flags %#llx not offered",
			      (unsigned long long)send_ops_flags);
		return EOPNOTSUPP;
	}
	if (type != IBV_QPT_RC &&
	    (send_ops_flags & (IBV_QP_EX_WITH_RDMA_READ |
			       IBV_QP_EX_WITH_SEND_WITH_INV |
			       IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			       IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			       QP_EX_WITH_ATOMIC_WRITE)))
		return EINVAL;
	if (type == IBV_QPT_UD &&
	    (send_ops_flags & (IBV_QP_EX_WITH_RDMA_WRITE |
			       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			       IBV_QP_EX_WITH_BIND_MW |
			       IBV_QP_EX_WITH_LOCAL_INV)))
		return EINVAL;
	return 0;
}

static struct ibemu_wr_stage *qp_ex_stage_alloc(const struct ibv_qp_cap *cap)
{
	struct ibemu_wr_stage *st = calloc(1, sizeof(*st));

	if (!st)
		return NULL;
	st->max = cap->max_send_wr;
	st->wrs = calloc(st->max, sizeof(*st->wrs));
	st->sges = calloc((size_t)st->max * cap->max_send_sge,
			  sizeof(*st->sges));
	st->inline_buf = calloc((size_t)st->max * cap->max_inline_data + 1, 1);
	st->words = calloc(st->max, sizeof(*st->words));
	st->exts = calloc(st->max, sizeof(*st->exts));
	if (!st->wrs || !st->sges || !st->inline_buf || !st->words ||
	    !st->exts) {
		free(st->wrs);
		free(st->sges);
		free(st->inline_buf);
		free(st->words);
		free(st->exts);
		free(st);
		return NULL;
	}
	pthread_mutex_init(&st->lock, NULL);
	return st;
}

void ibemu_qp_ex_fini(struct ibemu_qp *qp)
{
	struct ibemu_wr_stage *st = qp->stage;

	if (!st)
		return;
	pthread_mutex_destroy(&st->lock);
	free(st->wrs);
	free(st->sges);
	free(st->inline_buf);
	free(st->words);
	free(st->exts);
	free(st);
	qp->stage = NULL;
}

/* Install the builders the QP was created for; 0 or an errno. */
int ibemu_qp_ex_init(struct ibemu_qp *qp, uint64_t send_ops_flags)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	int ret;

	/* A DC QP (IBV_QPT_DRIVER) sends as RC does. */
	ret = qp_ex_check_ops(qp->dc_type ? IBV_QPT_RC : qp->vqp.qp.qp_type,
			      send_ops_flags);
	if (ret)
		return ret;
	qp->stage = qp_ex_stage_alloc(&qp->cap);
	if (!qp->stage)
		return ENOMEM;
	qp->stage->send_ops_flags = send_ops_flags;
	qpx->comp_mask = 0;
	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;
	qpx->wr_send = wr_send;
	qpx->wr_send_imm = wr_send_imm;
	qpx->wr_send_inv = wr_send_inv;
	qpx->wr_local_inv = wr_local_inv;
	qpx->wr_bind_mw = wr_bind_mw;
	qpx->wr_rdma_write = wr_rdma_write;
	qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	qpx->wr_rdma_read = wr_rdma_read;
	qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
#if HAVE_DECL_IBV_WR_ATOMIC_WRITE
	if (pabi_qp_ex_has(offsetof(struct ibv_qp_ex, wr_atomic_write)))
		qpx->wr_atomic_write = wr_atomic_write;
#endif
	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	qpx->wr_set_xrc_srqn = wr_set_xrc_srqn;
	/* After the members: where libibverbs' ibv_qp_ex is shorter than
	 * the headers', its comp_mask is where their last members are. */
	pabi_qp_tail(&qp->vqp)->comp_mask |= PABI_VERBS_QP_EX;
	return 0;
}
