// SPDX-License-Identifier: MIT
/*
 * The checking mode's memory and lifetime checks of the HCA's queues
 * (check_mem.h).
 *
 * A send source: at post, the sum of each SGE's bytes and the post's
 * stack go to a record beside the send queue, one entry per ring slot,
 * allocated at the QP's first post in checking mode; when the WQE
 * completes successfully its buffers have been read for the last time
 * (the responder's pull, the placement of a WRITE, or a packet's copy all
 * come before the acknowledgement that retires it), so the sums are taken
 * again there and a difference is reported (ibv_post_send(3): the buffers
 * may be reused once the completion is polled).  WQEs completed in error
 * or flushed are not compared: what the peer got is unknown to the program
 * anyway, which must post them again.  A lone WRITE that the shared
 * memory transport places at post time completes there too, with no
 * moment between for the program to change its source.
 *
 * Lock rule: emu_qp.check_sq is under qp.lock; dereg walks the engine's
 * QPs under engine.lock, then each qp.lock, then an SRQ's rq.lock, then
 * hca.mw_lock, the order of hca.h.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "check_mem.h"
#include "engine.h"
#include "wr_opcode.h"

/* One post: its stack and the sums of its SGEs. */
struct check_post {
	struct check_stack stack;
	bool summed; /* the sums below were taken */
	uint64_t sum[];
};

struct check_sq {
	uint32_t slots; /* the send ring's */
	uint32_t nsge; /* sums per entry: max_send_sge */
	size_t stride;
	unsigned char entry[];
};

static struct check_post *check_sq_at(const struct check_sq *c, uint32_t pos)
{
	return (struct check_post *)(void *)(c->entry +
					     (size_t)(pos % c->slots) *
						     c->stride);
}

/* Where an SGE's bytes are in this process, or NULL if its key names no
 * region of ours that holds it (the WQE then fails on its own). */
static const uint8_t *check_sge_bytes(struct emu_qp *qp,
				      const struct ibv_sge *sge)
{
	struct emu_mr *mr = mr_lookup(qp->hca, sge->lkey);
	uint64_t off;

	if (!mr || (mr->access & IBV_ACCESS_ON_DEMAND) ||
	    sge->addr < mr->iova)
		return NULL;
	off = sge->addr - mr->iova;
	if (off > mr->length || sge->length > mr->length - off)
		return NULL;
	return mr->addr + off;
}

/* Whether the WQE's data comes from its SGEs, read after the post. */
static bool check_wqe_reads_sges(const struct wqe *w)
{
	return w->num_sge && !(w->send_flags & IBV_SEND_INLINE) &&
	       wr_is((enum ibv_wr_opcode)w->opcode,
		     WR_PAYLOAD | WR_ATOMIC_WRITE);
}

static struct check_sq *check_sq_get(struct emu_qp *qp)
{
	struct check_sq *c = qp->check_sq;
	uint32_t nsge = qp->cap.max_send_sge;
	size_t stride;

	if (c)
		return c;
	stride = sizeof(struct check_post) + nsge * sizeof(uint64_t);
	stride = (stride + 7) & ~(size_t)7;
	c = calloc(1, sizeof(*c) + (size_t)(qp->sq.mask + 1) * stride);
	if (!c)
		return NULL;
	c->slots = qp->sq.mask + 1;
	c->nsge = nsge;
	c->stride = stride;
	qp->check_sq = c;
	return c;
}

void check_mem_post_slow(struct emu_qp *qp, uint32_t pos)
{
	const struct wqe *w = wqe_ring_at(&qp->sq, pos);
	struct check_sq *c = check_sq_get(qp);
	struct check_post *p;
	const uint8_t *bytes;
	uint32_t i;

	check_flush();
	if (!c)
		return;
	p = check_sq_at(c, pos);
	check_stack_here(&p->stack);
	p->summed = check_wqe_reads_sges(w) && w->num_sge <= c->nsge;
	for (i = 0; p->summed && i < w->num_sge; i++) {
		bytes = check_sge_bytes(qp, &w->sge[i]);
		p->sum[i] = bytes ? check_sum_buffer(bytes, w->sge[i].length) : 0;
	}
}

void check_mem_retire_slow(struct emu_qp *qp, uint32_t pos)
{
	const struct wqe *w = wqe_ring_at(&qp->sq, pos);
	const struct check_post *p = check_sq_at(qp->check_sq, pos);
	const struct ibv_sge *sge;
	const uint8_t *bytes;
	uint32_t i;

	if (!p->summed)
		return;
	for (i = 0; i < w->num_sge; i++) {
		sge = &w->sge[i];
		bytes = check_sge_bytes(qp, sge);
		if (!bytes || !p->sum[i] ||
		    check_sum_buffer(bytes, sge->length) == p->sum[i])
			continue;
		check_report(CHECK_SEND_BUF_CHANGED, qp->qpn, &p->stack,
			     "QP %#x wr_id %#llx: SGE %u (addr %#llx, length "
			     "%u, lkey %#x) changed between ibv_post_send and "
			     "its completion",
			     qp->qpn, (unsigned long long)w->wr_id, i,
			     (unsigned long long)sge->addr, sge->length,
			     sge->lkey);
		return;
	}
}

const struct wqe *check_ring_uses(const struct wqe_ring *r, uint32_t key,
				  uint32_t *pos_p)
{
	const struct wqe *w;
	uint32_t pos, i;

	for (pos = r->head; pos != r->tail; pos++) {
		w = wqe_ring_at(r, pos);
		for (i = 0; i < w->num_sge; i++)
			if (w->sge[i].lkey == key) {
				*pos_p = pos;
				return w;
			}
	}
	return NULL;
}

static void check_dereg_report(const struct emu_mr *mr,
			       const struct emu_qp *qp, const char *queue,
			       const struct wqe *w,
			       const struct check_stack *setup)
{
	check_report(CHECK_DEREG_BUSY, mr->key, setup,
		     "MR lkey %#x (addr %p, length %llu) deregistered while "
		     "wr_id %#llx on the %s queue of QP %#x uses it",
		     mr->key, (void *)mr->addr,
		     (unsigned long long)mr->length,
		     (unsigned long long)w->wr_id, queue, qp->qpn);
}

/* The QP's queues that use mr; qp.lock held. */
static void check_dereg_qp_locked(const struct emu_mr *mr,
				  struct emu_qp *qp)
{
	const struct wqe *w;
	uint32_t pos;

	w = check_ring_uses(&qp->sq, mr->key, &pos);
	if (w) {
		check_dereg_report(mr, qp, "send", w,
				   qp->check_sq ? &check_sq_at(qp->check_sq,
							       pos)->stack
						: NULL);
		return;
	}
	if (qp_has_own_rq(qp)) {
		w = check_ring_uses(&qp->rq.ring, mr->key, &pos);
		if (w)
			check_dereg_report(mr, qp, "receive", w, NULL);
		return;
	}
	if (qp->srq) {
		emu_lock(&qp->srq->rq.lock);
		w = check_ring_uses(&qp->srq->rq.ring, mr->key, &pos);
		if (w)
			check_dereg_report(mr, qp, "shared receive", w, NULL);
		emu_unlock(&qp->srq->rq.lock);
	}
}

/* A window bound to mr (IBA 10.6.7: the region cannot go first). */
static void check_dereg_bound(const struct emu_mr *mr)
{
	struct emu_hca *hca = mr->hca;
	const struct emu_mw *mw;
	uint32_t i, rkey = 0;

	pthread_mutex_lock(&hca->mw_lock);
	for (i = 0; !rkey && i < hca->mws.size; i++) {
		mw = key_table_get(&hca->mws, i);
		if (mw && mw->bound && mw->mr_key == mr->key)
			rkey = mw->key;
	}
	pthread_mutex_unlock(&hca->mw_lock);
	if (rkey)
		check_report(CHECK_DEREG_BOUND, mr->key, NULL,
			     "MR lkey %#x (addr %p, length %llu) deregistered "
			     "with memory window rkey %#x bound to it",
			     mr->key, (void *)mr->addr,
			     (unsigned long long)mr->length, rkey);
}

void check_mem_dereg_slow(struct emu_mr *mr)
{
	struct engine *e = mr->hca->engine;
	struct emu_qp *qp;

	check_dereg_bound(mr);
	if (!e)
		return;
	emu_lock(&e->lock);
	for (qp = e->all_qps; qp; qp = qp->all_next) {
		emu_lock(&qp->lock);
		check_dereg_qp_locked(mr, qp);
		emu_unlock(&qp->lock);
	}
	emu_unlock(&e->lock);
}

void check_mem_qp_destroy_slow(struct emu_qp *qp)
{
	const struct wqe *w;
	uint32_t n;

	emu_lock(&qp->lock);
	n = qp->sq.tail - qp->sq.head;
	if (n) {
		w = wqe_ring_at(&qp->sq, qp->sq.head);
		check_report(CHECK_DESTROY_QP_BUSY, qp->qpn,
			     qp->check_sq ? &check_sq_at(qp->check_sq,
							 qp->sq.head)->stack
					  : NULL,
			     "QP %#x destroyed with %u send work request%s "
			     "outstanding, the first wr_id %#llx",
			     qp->qpn, n, n == 1 ? "" : "s",
			     (unsigned long long)w->wr_id);
	}
	free(qp->check_sq);
	qp->check_sq = NULL;
	emu_unlock(&qp->lock);
}
