// SPDX-License-Identifier: MIT
/*
 * The checking mode's checks at the verbs face (check_verbs.h).
 *
 * Threads: each CQ and QP has an owner marker, the address of a
 * thread-local byte of the thread inside ibv_poll_cq (a CQ) or
 * ibv_post_send (a QP), 0 when none is.  An entrant sets it with a
 * compare-and-swap and clears it on the way out; one that finds another
 * thread's marker reports.  Real providers take no lock there unless
 * the object was made without a thread domain, and then serialise only
 * the one call: two pollers still split the completions in no order
 * (ibv_create_td(3)).  Objects of a parent domain with a thread domain
 * promised to be used by one thread at a time: they are not checked.
 *
 * Lock rule: the markers are atomics, nothing else is shared.
 */
#include "config.h"

#include <stdatomic.h>
#include <stdint.h>

#include "check.h"
#include "check_verbs.h"
#include "emu.h"
#include "ibemu.h"

static _Thread_local char thread_mark;

/* Enter: true if this call set the marker (and must clear it).  The
 * report is worded only when there is one: this runs at every call. */
static bool mark_enter(atomic_uintptr_t *mark, enum check_kind kind,
		       const char *obj_name, uint64_t obj, const char *verb)
{
	uintptr_t me = (uintptr_t)&thread_mark, prev = 0;

	if (atomic_compare_exchange_strong(mark, &prev, me))
		return true;
	if (prev != me)
		check_report(kind, obj, NULL,
			     "%s %#llx: a second thread entered %s while "
			     "another was in it", obj_name,
			     (unsigned long long)obj, verb);
	return false;
}

int check_verbs_poll_cq(struct ibv_cq *ibcq, int num_entries,
			struct ibv_wc *wc)
{
	struct ibemu_cq *cq = to_ecq(ibcq);
	bool mine;
	int n;

	check_flush();
	atomic_fetch_add_explicit(&cq->check_polls, 1, memory_order_relaxed);
	if (cq->parent && cq->parent->td)
		return emu_cq_poll(cq->ecq, num_entries, wc);
	mine = mark_enter(&cq->chk_thread, CHECK_THREADS_CQ, "CQ",
			  (uintptr_t)ibcq, "ibv_poll_cq");
	n = emu_cq_poll(cq->ecq, num_entries, wc);
	if (mine)
		atomic_store(&cq->chk_thread, 0);
	return n;
}

/* A UD send's AH must be of the QP's PD (IBA 10.2.3; ibv_post_send(3)):
 * the HCA checks that the PDs match. */
static void check_ud_ah_pd(struct ibv_qp *ibqp, const struct ibv_send_wr *wr)
{
	uint64_t qp_pd = to_epd(ibqp->pd)->id;

	for (; wr; wr = wr->next) {
		if (!wr->wr.ud.ah || !wr->wr.ud.ah->pd ||
		    to_epd(wr->wr.ud.ah->pd)->id == qp_pd)
			continue;
		check_report(CHECK_UD_AH_PD, ibqp->qp_num, NULL,
			     "QP %#x: a UD send through AH %p of PD %p; the "
			     "QP's PD is %p", ibqp->qp_num,
			     (void *)wr->wr.ud.ah, (void *)wr->wr.ud.ah->pd,
			     (void *)ibqp->pd);
		return;
	}
}

int check_verbs_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr)
{
	struct ibemu_qp *qp = to_eqp(ibqp);
	struct ibemu_pd *pd = to_epd(ibqp->pd);
	bool mine = false;
	int ret;

	if (ibqp->qp_type == IBV_QPT_UD)
		check_ud_ah_pd(ibqp, wr);
	if (!pd->td)
		mine = mark_enter(&qp->chk_thread, CHECK_THREADS_QP, "QP",
				  ibqp->qp_num, "ibv_post_send");
	ret = emu_post_send(qp->eqp, wr, bad_wr, false);
	if (mine)
		atomic_store(&qp->chk_thread, 0);
	return ret;
}
