// SPDX-License-Identifier: MIT
/*
 * Completion queues (manual 3.3.7-3.3.9, 3.6.7-3.6.10), channels and the
 * extended poll API (ibv_create_cq_ex, ibv_start_poll).
 *
 * Lock rule: cq.lock protects the ring, armed, overflow and cur.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "ibemu.h"
#include "log.h"

#define CQ_WC_FLAGS_SUPPORTED                                                  \
	(IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | \
	 IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |     \
	 IBV_WC_EX_WITH_DLID_PATH_BITS)

static int cq_check_attr(struct ibv_context *context, int cqe,
			 struct ibv_comp_channel *channel, int comp_vector)
{
	if (cqe < 1 || cqe > IBEMU_MAX_CQE) {
		ibemu_log_dbg("create_cq: cqe %d not in [1, %d]", cqe,
			      IBEMU_MAX_CQE);
		return EINVAL;
	}
	if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		ibemu_log_dbg("create_cq: comp_vector %d >= %d", comp_vector,
			      context->num_comp_vectors);
		return EINVAL;
	}
	if (channel && channel->context != context)
		return EINVAL;
	return 0;
}

static struct ibemu_cq *cq_alloc(struct ibv_context *context, int cqe)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_cq *cq;

	if (atomic_fetch_add(&ctx->nr_cqs, 1) >= IBEMU_MAX_CQ)
		goto err_count;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto err_count;
	if (wc_ring_init(&cq->ring, (uint32_t)cqe)) {
		free(cq);
		goto err_count;
	}
	pthread_mutex_init(&cq->lock, NULL);
	atomic_init(&cq->usecnt, 0);
	cq->vcq.cq.context = context;
	cq->vcq.cq.cqe = cqe;
	return cq;

err_count:
	atomic_fetch_sub(&ctx->nr_cqs, 1);
	errno = ENOMEM;
	return NULL;
}

struct ibv_cq *ibemu_create_cq(struct ibv_context *context, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	struct ibemu_cq *cq;
	int ret;

	ret = cq_check_attr(context, cqe, channel, comp_vector);
	if (ret) {
		errno = ret;
		return NULL;
	}
	cq = cq_alloc(context, cqe);
	if (!cq)
		return NULL;
	cq->wc_flags = IBV_WC_STANDARD_FLAGS;
	return &cq->vcq.cq;
}

int ibemu_destroy_cq(struct ibv_cq *ibcq)
{
	struct ibemu_cq *cq = to_ecq(ibcq);

	/* Destroying a CQ that a QP still uses fails (manual 3.3.9). */
	if (atomic_load(&cq->usecnt))
		return EBUSY;
	atomic_fetch_sub(&to_ectx(ibcq->context)->nr_cqs, 1);
	wc_ring_fini(&cq->ring);
	pthread_mutex_destroy(&cq->lock);
	free(cq);
	return 0;
}

int ibemu_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct ibemu_cq *cq = to_ecq(ibcq);
	int ret;

	if (cqe < 1 || cqe > IBEMU_MAX_CQE)
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	/* The new size must hold what is already queued (manual 3.3.8). */
	if ((uint32_t)cqe < wc_ring_count(&cq->ring)) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	ret = -wc_ring_resize(&cq->ring, (uint32_t)cqe);
	if (!ret)
		ibcq->cqe = cqe;
	pthread_mutex_unlock(&cq->lock);
	return ret;
}

int ibemu_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	struct ibemu_cq *cq = to_ecq(ibcq);
	int n = 0;

	if (num_entries < 0)
		return -EINVAL;
	/* An empty CQ is seen without its lock: tail is only ever advanced
	 * (under the lock) after the entry is written. */
	if (wc_ring_peek_empty(&cq->ring)) {
		/* The application's poll drives the engine (DESIGN.md 3);
		 * polling an armed CQ is the check before blocking on its
		 * channel. */
		engine_poll(&ibemu_process,
			    !__atomic_load_n(&cq->armed, __ATOMIC_RELAXED));
		if (wc_ring_peek_empty(&cq->ring))
			return 0;
	}
	pthread_mutex_lock(&cq->lock);
	while (n < num_entries && wc_ring_get(&cq->ring, &wc[n]))
		n++;
	pthread_mutex_unlock(&cq->lock);
	return n;
}

int ibemu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct ibemu_cq *cq = to_ecq(ibcq);

	pthread_mutex_lock(&cq->lock);
	/* A pending "next" request is not weakened by a "solicited" one
	 * (manual 3.6.7). */
	if (!solicited_only)
		__atomic_store_n(&cq->armed, IBEMU_CQ_ARM_NEXT, __ATOMIC_RELAXED);
	else if (cq->armed != IBEMU_CQ_ARM_NEXT)
		__atomic_store_n(&cq->armed, IBEMU_CQ_ARM_SOLICITED,
				 __ATOMIC_RELAXED);
	pthread_mutex_unlock(&cq->lock);
	if (cq->vcq.cq.channel)
		engine_app_blocks(&ibemu_process);
	return 0;
}

void ibemu_cq_event(struct ibv_cq *cq)
{
	/* Nothing to do: the arm was consumed when the event was sent. */
}

static void cq_notify_locked(struct ibemu_cq *cq)
{
	struct ibv_comp_channel *channel = cq->vcq.cq.channel;
	struct pabi_comp_event_desc ev = {
		.cq_handle = (uintptr_t)&cq->vcq.cq,
	};

	__atomic_store_n(&cq->armed, 0, __ATOMIC_RELAXED);
	if (!channel)
		return;
	if (write(channel->fd, &ev, sizeof(ev)) != sizeof(ev))
		ibemu_log_warn("completion event lost: %s", strerror(errno));
}

/*
 * Add a completion.  An armed CQ raises one completion event: for any
 * completion when armed for "next", for a solicited or an unsuccessful
 * completion when armed for "solicited" (manual 3.6.7).  A full CQ is an
 * overrun: the entry is lost and IBV_EVENT_CQ_ERR raised (manual 6.1.1).
 */
bool ibemu_cq_push_wc(struct ibemu_cq *cq, const struct ibv_wc *wc,
		      bool solicited)
{
	bool overrun = false;

	/* An overrun CQ takes no more entries (manual 6.1.1). */
	pthread_mutex_lock(&cq->lock);
	if (cq->overflow || !wc_ring_put(&cq->ring, wc)) {
		overrun = !cq->overflow;
		cq->overflow = true;
	} else if (cq->armed == IBEMU_CQ_ARM_NEXT ||
		   (cq->armed == IBEMU_CQ_ARM_SOLICITED &&
		    (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq_notify_locked(cq);
	}
	pthread_mutex_unlock(&cq->lock);
	if (overrun) {
		ibemu_log_dbg("CQ %p overrun", (void *)&cq->vcq.cq);
		ibemu_async_event(to_ectx(cq->vcq.cq.context), IBV_EVENT_CQ_ERR,
				  (uintptr_t)&cq->vcq.cq);
	}
	return !cq->overflow;
}

bool ibemu_cq_push(struct ibemu_cq *cq, const struct ibv_wc *wc)
{
	return ibemu_cq_push_wc(cq, wc, false);
}

/* ---- extended CQ: ibv_start_poll / ibv_next_poll / ibv_end_poll ---- */

static int cq_ex_next_locked(struct ibemu_cq *cq)
{
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;

	cq->cur = wc_ring_count(&cq->ring) ?
			  &cq->ring.buf[cq->ring.head % cq->ring.size] :
			  NULL;
	if (!cq->cur)
		return ENOENT;
	cqx->wr_id = cq->cur->wr_id;
	cqx->status = cq->cur->status;
	return 0;
}

static int cq_ex_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);
	int ret;

	if (attr && attr->comp_mask)
		return EINVAL;
	engine_poll(&ibemu_process, !cq->armed);
	pthread_mutex_lock(&cq->lock);
	ret = cq_ex_next_locked(cq);
	/* On ENOENT the lock is released: no end_poll follows. */
	if (ret)
		pthread_mutex_unlock(&cq->lock);
	return ret;
}

static int cq_ex_next_poll(struct ibv_cq_ex *cqx)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);

	cq->ring.head++;
	return cq_ex_next_locked(cq);
}

static void cq_ex_end_poll(struct ibv_cq_ex *cqx)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);

	if (cq->cur)
		cq->ring.head++;
	cq->cur = NULL;
	pthread_mutex_unlock(&cq->lock);
}

static enum ibv_wc_opcode cq_ex_read_opcode(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->opcode;
}
static uint32_t cq_ex_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->vendor_err;
}
static uint32_t cq_ex_read_byte_len(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->byte_len;
}
static __be32 cq_ex_read_imm_data(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->imm_data;
}
static uint32_t cq_ex_read_qp_num(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->qp_num;
}
static uint32_t cq_ex_read_src_qp(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->src_qp;
}
static unsigned int cq_ex_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->wc_flags;
}
static uint32_t cq_ex_read_slid(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->slid;
}
static uint8_t cq_ex_read_sl(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->sl;
}
static uint8_t cq_ex_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->dlid_path_bits;
}

struct ibv_cq_ex *ibemu_create_cq_ex(struct ibv_context *context,
				     struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq_ex *cqx;
	struct ibemu_cq *cq;
	int ret;

	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS)) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && attr->flags) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->wc_flags & ~(uint64_t)CQ_WC_FLAGS_SUPPORTED) {
		ibemu_log_dbg("create_cq_ex: wc_flags %#llx not offered",
			      (unsigned long long)(attr->wc_flags &
						   ~(uint64_t)CQ_WC_FLAGS_SUPPORTED));
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (attr->cqe > INT32_MAX) {
		errno = EINVAL;
		return NULL;
	}
	ret = cq_check_attr(context, (int)attr->cqe, attr->channel,
			    (int)attr->comp_vector);
	if (ret) {
		errno = ret;
		return NULL;
	}
	cq = cq_alloc(context, (int)attr->cqe);
	if (!cq)
		return NULL;
	cq->wc_flags = attr->wc_flags;
	cqx = &cq->vcq.cq_ex;
	cqx->start_poll = cq_ex_start_poll;
	cqx->next_poll = cq_ex_next_poll;
	cqx->end_poll = cq_ex_end_poll;
	cqx->read_opcode = cq_ex_read_opcode;
	cqx->read_vendor_err = cq_ex_read_vendor_err;
	cqx->read_wc_flags = cq_ex_read_wc_flags;
	if (attr->wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = cq_ex_read_byte_len;
	if (attr->wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = cq_ex_read_imm_data;
	if (attr->wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = cq_ex_read_qp_num;
	if (attr->wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = cq_ex_read_src_qp;
	if (attr->wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = cq_ex_read_slid;
	if (attr->wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = cq_ex_read_sl;
	if (attr->wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = cq_ex_read_dlid_path_bits;
	return cqx;
}
