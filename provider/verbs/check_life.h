/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's lifetime checks at the verbs (check_life.c):
 * completion and asynchronous events not acknowledged at the destroy of
 * their object, and objects
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
void check_life_async_destroy_slow(const char *what, uint64_t id,
				   const void *obj,
				   const unsigned int *acked);

/* A QP (id: its number), CQ or SRQ (id: its handle) obj about to go:
 * the async events ibv_get_async_event returned of it against acked,
 * libibverbs' count of those acknowledged (read only when checking). */
static inline void check_life_async_destroy(const char *what, uint64_t id,
					    const void *obj,
					    const unsigned int *acked)
{
	if (check_on())
		check_life_async_destroy_slow(what, id, obj, acked);
}

/* ibv_get_cq_event returned an event of cq to the program. */
static inline void check_life_cq_event(struct ibemu_cq *cq)
{
	if (check_on()) {
		check_flush();
		atomic_fetch_add_explicit(&cq->check_events, 1,
					  memory_order_relaxed);
	}
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
