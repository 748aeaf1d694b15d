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
 * Lock rule: ibemu_cq.check_events is atomic; comp_events_completed is
 * libibverbs', read once, the program destroying the CQ it owns.
 */
#include "config.h"

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
