// SPDX-License-Identifier: MIT
/*
 * The checking mode's lifetime checks at the verbs (check_life.h).
 *
 * Completion events: libibverbs counts the acknowledged ones in the CQ's
 * comp_events_completed (ibv_ack_cq_events) and calls the provider's
 * cq_event for each one ibv_get_cq_event returns; a kernel provider's
 * ibv_destroy_cq waits until the two agree, so a program that forgets
 * to acknowledge hangs there on hardware.  Events written to the channel
 * and never read are not the program's to acknowledge.
 *
 * Asynchronous events likewise: ibv_get_async_event calls the provider's
 * async_event for each event it returns, ibv_ack_async_event counts the
 * acknowledged ones in the QP's, CQ's or SRQ's events_completed, and a
 * kernel provider's destroy waits until they agree (ibv_get_async_event(3):
 * "every event must be acknowledged").
 *
 * Lock rule: the check_events counts are atomics, the async counts are
 * under async_lock (below); the completed counts are libibverbs', read
 * once, the program destroying the object it owns.
 */
#include "config.h"

#include <pthread.h>

#include "check_life.h"

void check_life_cq_destroy_slow(struct ibemu_cq *cq)
{
	struct ibv_cq *ibcq = &cq->vcq.cq;
	unsigned int got = atomic_load(&cq->check_events);
	unsigned int acked = ibcq->comp_events_completed;

	if (got > acked)
		check_report(CHECK_DESTROY_CQ_EVENTS, (uintptr_t)ibcq, NULL,
			     "CQ %p destroyed with %u of its %u completion "
			     "events not acknowledged",
			     (void *)ibcq, got - acked, got);
}

/*
 * The async events returned per object, by its handle: a record of an
 * object destroyed since it was raised may still be read from the async
 * descriptor, and its handle then names freed memory, so the counts are
 * kept here, never in the object.  Lock rule: async_lock, a leaf.
 */
#define ASYNC_SLOTS 1024u
static pthread_mutex_t async_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t handle; /* 0: free */
	unsigned int got;
} async_seen[ASYNC_SLOTS];

static void async_count(uintptr_t handle)
{
	unsigned int i, free_slot = ASYNC_SLOTS;

	pthread_mutex_lock(&async_lock);
	for (i = 0; i < ASYNC_SLOTS; i++) {
		if (async_seen[i].handle == handle)
			break;
		if (!async_seen[i].handle && free_slot == ASYNC_SLOTS)
			free_slot = i;
	}
	if (i == ASYNC_SLOTS && free_slot < ASYNC_SLOTS) {
		i = free_slot;
		async_seen[i].handle = handle;
		async_seen[i].got = 0;
	}
	if (i < ASYNC_SLOTS)
		async_seen[i].got++;
	pthread_mutex_unlock(&async_lock);
}

/* The count of handle's object, which goes: forgotten. */
static unsigned int async_take(uintptr_t handle)
{
	unsigned int i, got = 0;

	pthread_mutex_lock(&async_lock);
	for (i = 0; i < ASYNC_SLOTS; i++)
		if (async_seen[i].handle == handle) {
			got = async_seen[i].got;
			async_seen[i].handle = 0;
			break;
		}
	pthread_mutex_unlock(&async_lock);
	return got;
}

/* The event's object, by its kind (ibv_get_async_event(3)). */
void ibemu_async_event(struct ibv_context *context,
		       struct ibv_async_event *event)
{
	uintptr_t handle = 0;

	(void)context;
	if (!check_on())
		return;
	check_flush(); /* what the HCA found before it raised this */
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		handle = (uintptr_t)event->element.cq;
		break;
	case IBV_EVENT_QP_FATAL:
	case IBV_EVENT_QP_REQ_ERR:
	case IBV_EVENT_QP_ACCESS_ERR:
	case IBV_EVENT_COMM_EST:
	case IBV_EVENT_SQ_DRAINED:
	case IBV_EVENT_PATH_MIG:
	case IBV_EVENT_PATH_MIG_ERR:
	case IBV_EVENT_QP_LAST_WQE_REACHED:
		handle = (uintptr_t)event->element.qp;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		handle = (uintptr_t)event->element.srq;
		break;
	default:
		break;
	}
	if (handle)
		async_count(handle);
}

void check_life_async_destroy_slow(const char *what, uint64_t id,
				   const void *obj,
				   const unsigned int *acked)
{
	unsigned int got = async_take((uintptr_t)obj);

	check_flush();
	if (got > *acked)
		check_report(CHECK_DESTROY_ASYNC_EVENTS, id, NULL,
			     "%s %#llx destroyed with %u of its %u asynchronous "
			     "events not acknowledged",
			     what, (unsigned long long)id, got - *acked, got);
}

void check_life_pd_busy(struct ibv_pd *pd, int users)
{
	check_report(CHECK_DESTROY_BUSY, (uintptr_t)pd, NULL,
		     "ibv_dealloc_pd of PD %p with %d MRs, MWs, QPs, SRQs, "
		     "AHs or parent domains still on it: fails with EBUSY",
		     (void *)pd, users);
}

void check_life_close_slow(struct ibemu_context *ctx)
{
	int pds = atomic_load(&ctx->nr_pds), cqs = atomic_load(&ctx->nr_cqs),
	    qps = atomic_load(&ctx->nr_qps), srqs = atomic_load(&ctx->nr_srqs),
	    ahs = atomic_load(&ctx->nr_ahs);

	if (pds || cqs || qps || srqs || ahs)
		check_report(CHECK_DESTROY_BUSY,
			     (uintptr_t)&ctx->pctx.vctx.context, NULL,
			     "ibv_close_device of context %p with %d PDs, %d "
			     "CQs, %d QPs, %d SRQs and %d AHs still open",
			     (void *)&ctx->pctx.vctx.context, pds, cqs, qps,
			     srqs, ahs);
}
