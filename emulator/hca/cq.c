// SPDX-License-Identifier: MIT
/*
 * Completion queues (manual 3.3.7-3.3.9, 3.6.7-3.6.10): the ring the
 * engines complete into, arming and completion events, overrun.
 *
 * Lock rule: cq.lock protects the ring, armed, overflow and polling (see
 * struct emu_cq).  A completion event is written to a non-blocking
 * descriptor, so holding cq.lock across it cannot stall.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "engine.h"
#include "hca.h"
#include "hca_trace.h"
#include "log.h"
#include "qp_stats.h"

/* A clock no one steps or slews, as an HCA's oscillator: one tick per
 * nanosecond (IBEMU_CORE_CLOCK_KHZ). */
uint64_t emu_clock_raw(void)
{
	return clock_ns(CLOCK_MONOTONIC_RAW);
}

int emu_cq_create(struct emu_hca *hca, uint32_t cqe, int comp_fd,
		  const struct emu_owner *owner, bool stamped,
		  const struct emu_buf_alloc *alloc, struct emu_cq **cq_p)
{
	struct emu_cq *cq;

	if (cqe < 1 || cqe > IBEMU_MAX_CQE) {
		ibemu_log_dbg("create_cq: cqe %u not in [1, %d]", cqe,
			      IBEMU_MAX_CQE);
		return EINVAL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return ENOMEM;
	if (wc_ring_init(&cq->ring, cqe, stamped, alloc)) {
		free(cq);
		return ENOMEM;
	}
	emu_lock_init(&cq->lock);
	atomic_init(&cq->usecnt, 0);
	cq->hca = hca;
	cq->comp_fd = comp_fd;
	cq->owner = *owner;
	check_queue_cq_created(cq);
	*cq_p = cq;
	return 0;
}

int emu_cq_destroy(struct emu_cq *cq)
{
	/* Destroying a CQ that a QP still uses fails (manual 3.3.9). */
	if (atomic_load(&cq->usecnt)) {
		check_report(CHECK_DESTROY_BUSY, (uintptr_t)cq, NULL,
			     "ibv_destroy_cq with %d QPs still using it: fails "
			     "with EBUSY", atomic_load(&cq->usecnt));
		return EBUSY;
	}
	wc_ring_fini(&cq->ring);
	free(cq);
	return 0;
}

void cq_forget_qp(struct emu_cq *cq, uint32_t qpn)
{
	emu_lock(&cq->lock);
	wc_ring_remove_qp(&cq->ring, qpn);
	emu_unlock(&cq->lock);
}

int emu_cq_resize(struct emu_cq *cq, uint32_t cqe)
{
	int ret;

	if (cqe < 1 || cqe > IBEMU_MAX_CQE)
		return EINVAL;
	emu_lock(&cq->lock);
	/* The new size must hold what is already queued (manual 3.3.8). */
	if (cqe < wc_ring_count(&cq->ring))
		ret = EINVAL;
	else
		ret = -wc_ring_resize(&cq->ring, cqe);
	emu_unlock(&cq->lock);
	return ret;
}

/* The application's poll drives the engine (doc/design.md §9 "The
 * progress model"); polling an armed CQ is the check before blocking on
 * its channel. */
static void cq_drive(struct emu_cq *cq)
{
	engine_poll(cq->hca->engine,
		    !atomic_load_explicit(&cq->armed, memory_order_relaxed));
}

int emu_cq_poll(struct emu_cq *cq, int num_entries, struct ibv_wc *wc)
{
	int n = 0;

	if (num_entries < 0)
		return -EINVAL;
	/* An empty CQ is seen without its lock: tail is only ever advanced
	 * (under the lock) after the entry is written. */
	if (wc_ring_peek_empty(&cq->ring)) {
		cq_drive(cq);
		if (wc_ring_peek_empty(&cq->ring))
			return 0;
	}
	emu_lock(&cq->lock);
	while (n < num_entries && wc_ring_get(&cq->ring, &wc[n]))
		n++;
	emu_unlock(&cq->lock);
	return n;
}

bool emu_cq_waits_unarmed(struct emu_cq *cq)
{
	bool waits;

	emu_lock(&cq->lock);
	waits = !atomic_load_explicit(&cq->armed, memory_order_relaxed) &&
		wc_ring_count(&cq->ring);
	emu_unlock(&cq->lock);
	return waits;
}

void emu_cq_arm(struct emu_cq *cq, bool solicited_only)
{
	emu_lock(&cq->lock);
	/* A pending "next" request is not weakened by a "solicited" one
	 * (manual 3.6.7). */
	if (!solicited_only)
		atomic_store_explicit(&cq->armed, CQ_ARM_NEXT,
				      memory_order_relaxed);
	else if (cq->armed != CQ_ARM_NEXT)
		atomic_store_explicit(&cq->armed, CQ_ARM_SOLICITED,
				      memory_order_relaxed);
	emu_unlock(&cq->lock);
	if (cq->comp_fd >= 0)
		engine_app_blocks(cq->hca->engine);
}

/* One completion event: the arm is consumed (manual 3.6.7). */
static void cq_notify_locked(struct emu_cq *cq)
{
	uint64_t handle = cq->owner.handle;

	atomic_store_explicit(&cq->armed, 0, memory_order_relaxed);
	if (cq->comp_fd < 0)
		return;
	if (write(cq->comp_fd, &handle, sizeof(handle)) != sizeof(handle))
		ibemu_log_warn("completion event lost: %s", strerror(errno));
}

/* When the completion being added was generated.  Taken under cq.lock,
 * so stamps follow the CQ's order; real time may be stepped back, and is
 * held at the CQ's last value until it passes it again. */
static void cq_stamp_locked(struct emu_cq *cq, struct emu_wc_stamp *st)
{
	st->raw = emu_clock_raw();
	st->wall_ns = clock_ns(CLOCK_REALTIME);
	if (st->wall_ns < cq->last_wall_ns)
		st->wall_ns = cq->last_wall_ns;
	cq->last_wall_ns = st->wall_ns;
}

/*
 * Add a completion.  An armed CQ raises one completion event: for any
 * completion when armed for "next", for a solicited or an unsuccessful
 * completion when armed for "solicited" (manual 3.6.7).  A full CQ is an
 * overrun: the entry is lost, IBV_EVENT_CQ_ERR is raised, and the CQ
 * takes no more entries (manual 6.1.1).
 */
bool cq_push(struct emu_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	struct emu_wc_stamp stamp;
	bool overrun = false, ok;

	hca_trace_cqe(cq, wc);
	emu_lock(&cq->lock);
	if (cq->ring.stamp)
		cq_stamp_locked(cq, &stamp);
	if (cq->overflow ||
	    !wc_ring_put(&cq->ring, wc, cq->ring.stamp ? &stamp : NULL)) {
		overrun = !cq->overflow;
		cq->overflow = true;
	} else if (cq->armed == CQ_ARM_NEXT ||
		   (cq->armed == CQ_ARM_SOLICITED &&
		    (solicited || wc->status != IBV_WC_SUCCESS))) {
		cq_notify_locked(cq);
	}
	ok = !cq->overflow;
	emu_unlock(&cq->lock);
	if (wc->status != IBV_WC_SUCCESS)
		qp_stats_cqe(cq->hca, wc);
	if (overrun) {
		ibemu_log_dbg("CQ %#llx overrun",
			      (unsigned long long)cq->owner.handle);
		check_queue_cq_overrun(cq);
		emu_event(&cq->owner, IBV_EVENT_CQ_ERR);
	}
	return ok;
}

/* ---- extended poll (ibv_start_poll / ibv_next_poll / ibv_end_poll) ---- */

static const struct ibv_wc *cq_current_locked(struct emu_cq *cq)
{
	const struct ibv_wc *wc = wc_ring_oldest(&cq->ring);

	cq->polling = wc != NULL;
	return wc;
}

const struct ibv_wc *emu_cq_poll_start(struct emu_cq *cq)
{
	const struct ibv_wc *wc;

	cq_drive(cq);
	emu_lock(&cq->lock);
	wc = cq_current_locked(cq);
	/* Empty: no end_poll follows (ibv_start_poll(3) returns ENOENT). */
	if (!wc)
		emu_unlock(&cq->lock);
	return wc;
}

const struct ibv_wc *emu_cq_poll_next(struct emu_cq *cq)
{
	if (cq->polling)
		wc_ring_drop(&cq->ring);
	return cq_current_locked(cq);
}

void emu_cq_poll_end(struct emu_cq *cq)
{
	if (cq->polling)
		wc_ring_drop(&cq->ring);
	cq->polling = false;
	emu_unlock(&cq->lock);
}

const struct emu_wc_stamp *emu_cq_poll_stamp(struct emu_cq *cq)
{
	return wc_ring_oldest_stamp(&cq->ring);
}
