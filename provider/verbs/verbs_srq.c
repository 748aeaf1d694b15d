// SPDX-License-Identifier: MIT
/* Shared receive queues as libibverbs sees them (manual 3.4.5-3.4.7). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "check_life.h"
#include "ibemu.h"
#include "log.h"

struct ibv_srq *ibemu_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *init)
{
	struct ibemu_context *ctx = to_ectx(pd->context);
	struct emu_owner owner;
	struct ibemu_srq *srq;
	int ret;

	ret = ibemu_ctx_stale(pd->context) ? EIO : init ? 0 : EINVAL;
	if (ret)
		goto err;
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_srqs, 1) >= IBEMU_MAX_SRQ)
		goto err_count;
	srq = calloc(1, sizeof(*srq));
	if (!srq)
		goto err_count;
	owner = ibemu_owner(pd->context, &srq->vsrq.srq);
	ret = emu_srq_create(ctx->hca, to_epd(pd)->id, &init->attr, &owner,
			     ibemu_pd_buf_alloc(pd, IBEMU_RES_TYPE_SRQ,
						&srq->buf_alloc),
			     &srq->esrq);
	if (ret) {
		free(srq);
		goto err_count;
	}
	srq->vsrq.srq_type = IBV_SRQT_BASIC;
	srq->vsrq.srq.context = pd->context;
	srq->vsrq.srq.pd = pd;
	srq->vsrq.srq.handle = 0;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	check_obj(CHECK_OBJ_SRQ, 1);
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
	if (!attr)
		return EINVAL;
	return emu_srq_modify(to_esrq(ibsrq)->esrq, attr, mask);
}

int ibemu_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	if (!attr)
		return EINVAL;
	emu_srq_query(to_esrq(ibsrq)->esrq, attr);
	return 0;
}

int ibemu_destroy_srq(struct ibv_srq *ibsrq)
{
	struct ibemu_srq *srq = to_esrq(ibsrq);
	int ret;

	if (ibemu_ctx_stale(ibsrq->context))
		return EIO;
	check_life_async_destroy("SRQ", (uintptr_t)ibsrq, ibsrq,
				 &ibsrq->events_completed);
	ret = emu_srq_destroy(srq->esrq);
	if (ret)
		return ret;
	atomic_fetch_sub(&to_epd(ibsrq->pd)->usecnt, 1);
	check_obj(CHECK_OBJ_SRQ, -1);
	atomic_fetch_sub(&to_ectx(ibsrq->context)->nr_srqs, 1);
	pthread_mutex_destroy(&ibsrq->mutex);
	pthread_cond_destroy(&ibsrq->cond);
	free(srq);
	return 0;
}

int ibemu_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr)
{
	return emu_srq_post_recv(to_esrq(ibsrq)->esrq, wr, bad_wr);
}
