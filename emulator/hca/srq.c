// SPDX-License-Identifier: MIT
/*
 * Shared receive queues (manual 3.4.5-3.4.7, 3.6.2; IBA 10.2.9).
 * Lock rule: the SRQ's rq.lock protects its ring and its limit.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "check_recv.h"
#include "hca.h"
#include "hca_trace.h"
#include "log.h"

int emu_srq_create(struct emu_hca *hca, uint64_t pd_id,
		   struct ibv_srq_attr *a, const struct emu_owner *owner,
		   const struct emu_buf_alloc *alloc, struct emu_srq **srq_p)
{
	struct emu_srq *srq;
	int ret;

	if (a->max_wr < 1 || a->max_wr > IBEMU_MAX_SRQ_WR ||
	    a->max_sge > IBEMU_MAX_SRQ_SGE || a->srq_limit > a->max_wr) {
		ibemu_log_dbg("create_srq: max_wr %u max_sge %u srq_limit %u",
			      a->max_wr, a->max_sge, a->srq_limit);
		return EINVAL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return ENOMEM;
	/* Grant at least one SGE, and say so (manual 3.4.5: attr is in/out). */
	if (!a->max_sge)
		a->max_sge = 1;
	ret = rq_init(&srq->rq, a->max_wr, a->max_sge, alloc);
	if (ret) {
		free(srq);
		return ret;
	}
	srq->hca = hca;
	srq->pd_id = pd_id;
	srq->limit = a->srq_limit;
	srq->limit_armed = a->srq_limit > 0;
	srq->owner = *owner;
	atomic_init(&srq->usecnt, 0);
	*srq_p = srq;
	return 0;
}

/* Move the posted WQEs to a ring of max_wr entries; caller holds rq.lock. */
static int srq_resize_locked(struct emu_rq *rq, uint32_t max_wr)
{
	uint32_t i, n = wqe_ring_count(&rq->ring);
	struct wqe_ring bigger;
	int ret;

	ret = -wqe_ring_init(&bigger, max_wr, rq->max_sge, 0, rq->ring.alloc);
	if (ret)
		return ret;
	for (i = 0; i < n; i++)
		memcpy(wqe_ring_at(&bigger, i),
		       wqe_ring_at(&rq->ring, rq->ring.head + i),
		       rq->ring.stride);
	bigger.tail = n;
	wqe_ring_fini(&rq->ring);
	rq->ring = bigger;
	/* The checking mode's sums were by the old slots: begun again. */
	free(rq->check_rq);
	rq->check_rq = NULL;
	return 0;
}

int emu_srq_modify(struct emu_srq *srq, const struct ibv_srq_attr *attr,
		   int mask)
{
	struct emu_rq *rq = &srq->rq;
	uint32_t max_wr;
	int ret = 0;

	if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT))
		return EINVAL;
	emu_lock(&rq->lock);
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
	if (max_wr != rq->ring.size)
		ret = srq_resize_locked(rq, max_wr);
	if (!ret && (mask & IBV_SRQ_LIMIT)) {
		srq->limit = attr->srq_limit;
		srq->limit_armed |= attr->srq_limit > 0;
	}
out:
	emu_unlock(&rq->lock);
	return ret;
}

void emu_srq_query(struct emu_srq *srq, struct ibv_srq_attr *attr)
{
	emu_lock(&srq->rq.lock);
	attr->max_wr = srq->rq.ring.size;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	emu_unlock(&srq->rq.lock);
}

int emu_srq_destroy(struct emu_srq *srq)
{
	/* Destroying an SRQ that QPs still use fails (manual 3.4.7). */
	if (atomic_load(&srq->usecnt)) {
		check_report(CHECK_DESTROY_BUSY, (uintptr_t)srq, NULL,
			     "ibv_destroy_srq with %d QPs still using it: "
			     "fails with EBUSY", atomic_load(&srq->usecnt));
		return EBUSY;
	}
	if (srq->xrcd)
		xrc_srq_withdraw(srq);
	rq_fini(&srq->rq);
	free(srq);
	return 0;
}

int emu_srq_post_recv(struct emu_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	struct ibv_recv_wr *bad = NULL;
	uint32_t from;
	int ret;

	emu_lock(&srq->rq.lock);
	from = srq->rq.ring.tail;
	ret = rq_post_locked(&srq->rq, wr, &bad);
	check_recv_post(srq->hca, &srq->rq, from, NULL);
	emu_unlock(&srq->rq.lock);
	check_queue_recv(NULL, srq, ret);
	hca_trace_post_recv(0, srq->owner.handle, wr, ret ? bad : NULL);
	if (ret && bad_wr)
		*bad_wr = bad;
	return ret;
}
