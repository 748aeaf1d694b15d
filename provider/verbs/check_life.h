/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's lifetime checks at the verbs (check_life.c):
 * completion events not acknowledged at ibv_destroy_cq, and objects
 * still open at ibv_dealloc_pd and ibv_close_device.  Each hook is one
 * relaxed load while IBEMU_CHECK is off (check.h).
 */
#ifndef IBEMU_CHECK_LIFE_H
#define IBEMU_CHECK_LIFE_H

#include "check.h"
#include "ibemu.h"

void check_life_cq_destroy_slow(struct ibemu_cq *cq);
void check_life_pd_busy(struct ibv_pd *pd, int users);
void check_life_close_slow(struct ibemu_context *ctx);

/* ibv_get_cq_event returned an event of cq to the program. */
static inline void check_life_cq_event(struct ibemu_cq *cq)
{
	if (check_on())
		atomic_fetch_add_explicit(&cq->check_events, 1,
					  memory_order_relaxed);
}

/* ibv_destroy_cq, before the CQ goes. */
static inline void check_life_cq_destroy(struct ibemu_cq *cq)
{
	if (check_on())
		check_life_cq_destroy_slow(cq);
}

/* ibv_close_device, before the context goes. */
static inline void check_life_close(struct ibemu_context *ctx)
{
	if (check_on())
		check_life_close_slow(ctx);
}

#endif /* IBEMU_CHECK_LIFE_H */
