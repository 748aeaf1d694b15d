// SPDX-License-Identifier: MIT
/*
 * Receive queues: a QP's own or an SRQ's (manual 3.6.2, 3.6.4; IBA
 * 10.2.9).  Lock rule: a QP's own ring is under its qp.lock (every user
 * holds it: post_recv, the responder, flush, reset); an SRQ's ring is
 * under its rq.lock, as QPs share it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hca.h"
#include "log.h"

int rq_init(struct emu_rq *rq, uint32_t max_wr, uint32_t max_sge,
	    const struct emu_buf_alloc *alloc)
{
	int ret = wqe_ring_init(&rq->ring, max_wr, max_sge, 0, alloc);

	if (ret)
		return -ret;
	rq->max_sge = max_sge;
	emu_lock_init(&rq->lock);
	return 0;
}

void rq_fini(struct emu_rq *rq)
{
	wqe_ring_fini(&rq->ring);
	free(rq->check_rq);
	rq->check_rq = NULL;
}

/* Caller holds the ring's lock.  Returns 0, EINVAL or ENOMEM. */
static int rq_put_locked(struct emu_rq *rq, const struct ibv_recv_wr *wr)
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

int rq_post_locked(struct emu_rq *rq, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad_wr)
{
	int ret = 0;

	for (; wr; wr = wr->next) {
		ret = rq_put_locked(rq, wr);
		if (ret)
			break;
	}
	if (ret && bad_wr)
		*bad_wr = wr;
	return ret;
}
