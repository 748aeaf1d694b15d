// SPDX-License-Identifier: MIT
/*
 * Receive queues: a QP's own and shared receive queues (manual 3.4.5-3.4.7,
 * 3.6.2; IBA 10.2.9).  Lock rule: rq.lock protects the ring and, for an
 * SRQ, srq_limit.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"
#include "log.h"

int ibemu_rq_init(struct ibemu_rq *rq, uint32_t max_wr, uint32_t max_sge)
{
	int ret = wqe_ring_init(&rq->ring, max_wr, max_sge, 0);

	if (ret)
		return ret;
	rq->max_sge = max_sge;
	pthread_mutex_init(&rq->lock, NULL);
	return 0;
}

void ibemu_rq_fini(struct ibemu_rq *rq)
{
	wqe_ring_fini(&rq->ring);
	pthread_mutex_destroy(&rq->lock);
}

/* Caller holds rq.lock.  Returns 0, EINVAL or ENOMEM. */
static int rq_put_locked(struct ibemu_rq *rq, const struct ibv_recv_wr *wr)
{
	struct wqe *wqe;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge) {
		ibemu_log_dbg("post_recv: num_sge %d > max_recv_sge %u",
			      wr->num_sge, rq->max_sge);
		return EINVAL;
	}
	if (wqe_ring_full(&rq->ring))
		return ENOMEM;
	wqe = wqe_ring_tail(&rq->ring);
	wqe->wr_id = wr->wr_id;
	wqe->opcode = IBV_WC_RECV;
	wqe->send_flags = 0;
	wqe->num_sge = (uint32_t)wr->num_sge;
	if (wr->num_sge)
		memcpy(wqe->sge, wr->sg_list, wr->num_sge * sizeof(*wqe->sge));
	rq->ring.tail++;
	return 0;
}

int ibemu_rq_post(struct ibemu_rq *rq, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr)
{
	int ret = 0;

	pthread_mutex_lock(&rq->lock);
	for (; wr; wr = wr->next) {
		ret = rq_put_locked(rq, wr);
		if (ret)
			break;
	}
	pthread_mutex_unlock(&rq->lock);
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}

struct ibv_srq *ibemu_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *init)
{
	struct ibemu_context *ctx = to_ectx(pd->context);
	struct ibv_srq_attr *a = &init->attr;
	struct ibemu_srq *srq;
	int ret = EINVAL;

	if (a->max_wr < 1 || a->max_wr > IBEMU_MAX_SRQ_WR ||
	    a->max_sge > IBEMU_MAX_SRQ_SGE || a->srq_limit > a->max_wr) {
		ibemu_log_dbg("create_srq: max_wr %u max_sge %u srq_limit %u",
			      a->max_wr, a->max_sge, a->srq_limit);
		goto err;
	}
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_srqs, 1) >= IBEMU_MAX_SRQ)
		goto err_count;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto err_count;
	if (!a->max_sge)
		a->max_sge = 1;
	if (ibemu_rq_init(&srq->rq, a->max_wr, a->max_sge)) {
		free(srq);
		goto err_count;
	}
	srq->srq_limit = a->srq_limit;
	atomic_init(&srq->usecnt, 0);
	srq->vsrq.srq_type = IBV_SRQT_BASIC;
	srq->vsrq.srq.context = pd->context;
	srq->vsrq.srq.pd = pd;
	srq->vsrq.srq.handle = 0;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	return &srq->vsrq.srq;

err_count:
	atomic_fetch_sub(&ctx->nr_srqs, 1);
err:
	errno = ret;
	return NULL;
}

int ibemu_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
		     int mask)
{
	struct ibemu_srq *srq = to_esrq(ibsrq);
	struct ibemu_rq *rq = &srq->rq;
	uint32_t max_wr;
	int ret = 0;

	if (!attr || (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)))
		return EINVAL;
	pthread_mutex_lock(&rq->lock);
	max_wr = rq->ring.size;
	if (mask & IBV_SRQ_MAX_WR) {
		/* Resizing may not drop posted WQEs (manual 3.4.6). */
		if (attr->max_wr < 1 || attr->max_wr > IBEMU_MAX_SRQ_WR ||
		    attr->max_wr < wqe_ring_count(&rq->ring)) {
			ret = EINVAL;
			goto out;
		}
		max_wr = attr->max_wr;
	}
	/* The limit must lie within the queue (manual 3.4.6). */
	if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > max_wr) {
		ret = EINVAL;
		goto out;
	}
	if ((mask & IBV_SRQ_MAX_WR) && max_wr != rq->ring.size) {
		struct wqe_ring bigger;
		uint32_t i, n = wqe_ring_count(&rq->ring);

		ret = -wqe_ring_init(&bigger, max_wr, rq->max_sge, 0);
		if (ret)
			goto out;
		for (i = 0; i < n; i++)
			memcpy(wqe_ring_at(&bigger, i),
			       wqe_ring_at(&rq->ring, rq->ring.head + i),
			       rq->ring.stride);
		bigger.tail = n;
		wqe_ring_fini(&rq->ring);
		rq->ring = bigger;
	}
	if (mask & IBV_SRQ_LIMIT)
		srq->srq_limit = attr->srq_limit;
out:
	pthread_mutex_unlock(&rq->lock);
	return ret;
}

int ibemu_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibemu_srq *srq = to_esrq(ibsrq);

	if (!attr)
		return EINVAL;
	pthread_mutex_lock(&srq->rq.lock);
	attr->max_wr = srq->rq.ring.size;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->srq_limit;
	pthread_mutex_unlock(&srq->rq.lock);
	return 0;
}

int ibemu_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ibemu_srq *srq = to_esrq(ibsrq);

	/* Destroying an SRQ that QPs still use fails (manual 3.4.7). */
	if (atomic_load(&srq->usecnt))
		return EBUSY;
	atomic_fetch_sub(&to_epd(ibsrq->pd)->usecnt, 1);
	atomic_fetch_sub(&to_ectx(ibsrq->context)->nr_srqs, 1);
	ibemu_rq_fini(&srq->rq);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

int ibemu_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	return ibemu_rq_post(&to_esrq(ibsrq)->rq, wr, bad_wr);
}
