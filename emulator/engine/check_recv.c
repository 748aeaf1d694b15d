// SPDX-License-Identifier: MIT
/*
 * The checking mode's check of the buffers the HCA writes into
 * (check_recv.h): receive buffers, and the local buffers of RDMA READs
 * and atomics.
 *
 * The program may not touch them from the post until the completion
 * (ibv_post_recv(3): the buffers "must not be accessed" meanwhile;
 * ibv_post_send(3) for a READ's destination).  A read cannot be seen;
 * a write can: at post, the sum of each SGE's bytes and the post's stack
 * go to a record beside the queue, one entry per ring slot, allocated at
 * the queue's first such post in checking mode; just before the HCA
 * places data there (the responder taking the receive WQE for a SEND or
 * a datagram, the completer placing a READ's first response or an
 * atomic's original value, the requester placing a READ itself), the
 * sums are taken again and a difference is reported.
 *
 * The cost, with checking on only: every byte of a receive buffer, READ
 * destination or atomic result is read twice, once at post and once
 * before placement, and each post takes a stack.
 *
 * A WQE whose buffers share bytes with one outstanding before it on the
 * same queue (or, for a QP's own receive queue, with the receive being
 * placed) is not checked: the HCA's placement into the earlier one
 * changes them too.  Programs that post many receives or READs into one
 * buffer (ibv_rc_pingpong, perftest) do that; their first is checked.
 * Sharing across queues is not seen: a receive buffer that is also a
 * READ's destination, another queue's, or the target of an RDMA WRITE
 * that lands while the receive is posted, is reported as changed.
 *
 * Lock rule: see check_recv.h.  mr_lookup wants a QP lock; at an SRQ's
 * post there is none, and the region the SGE names is the program's to
 * keep registered during its own post.
 */
#include "config.h"

#include <stdlib.h>

#include "check_recv.h"
#include "engine.h"
#include "wr_opcode.h"

/* One post: its stack, and the sums of its SGEs (0: not summed). */
struct check_dest {
	struct check_stack stack;
	bool armed; /* the sums below are to be compared */
	uint64_t sum[];
};

struct check_ring {
	uint32_t slots; /* the ring's */
	uint32_t nsge; /* sums per entry: the queue's max SGEs */
	size_t stride;
	unsigned char entry[];
};

static struct check_dest *check_dest_at(const struct check_ring *c,
					uint32_t pos)
{
	return (struct check_dest *)(void *)(c->entry +
					     (size_t)(pos % c->slots) *
						     c->stride);
}

static struct check_ring *check_ring_new(uint32_t slots, uint32_t nsge)
{
	struct check_ring *c;
	size_t stride;

	stride = sizeof(struct check_dest) + nsge * sizeof(uint64_t);
	stride = (stride + 7) & ~(size_t)7;
	c = calloc(1, sizeof(*c) + (size_t)slots * stride);
	if (!c)
		return NULL;
	c->slots = slots;
	c->nsge = nsge;
	c->stride = stride;
	return c;
}

/* Where an SGE's bytes are here, or NULL: no region of ours holds them
 * (the WQE fails on its own), one paged on demand, whose pages a sum
 * would fault in, or one the peers may write (remote write or atomic
 * access): their RDMA WRITEs land without this process seeing them, so a
 * change is not the program's for sure. */
static const uint8_t *check_dest_bytes(struct emu_hca *hca,
				       const struct ibv_sge *sge)
{
	struct emu_mr *mr = mr_lookup(hca, sge->lkey);

	if (!mr || !sge->length ||
	    (mr->access & (IBV_ACCESS_ON_DEMAND | IBV_ACCESS_REMOTE_WRITE |
			   IBV_ACCESS_REMOTE_ATOMIC)))
		return NULL;
	return sge_mr_addr(mr, sge->addr, sge->length, false);
}

/* Whether two WQEs' SGEs share a byte. */
static bool check_wqes_overlap(const struct wqe *a, const struct wqe *b)
{
	const struct ibv_sge *x, *y;
	uint32_t i, j;

	for (i = 0; i < a->num_sge; i++) {
		x = &a->sge[i];
		for (j = 0; j < b->num_sge; j++) {
			y = &b->sge[j];
			if (x->length && y->length &&
			    x->addr < y->addr + y->length &&
			    y->addr < x->addr + x->length)
				return true;
		}
	}
	return false;
}

/* Whether w shares bytes with a WQE of [head, pos) of r that mask says
 * the HCA writes into (0: every one). */
static bool check_ring_overlaps(const struct wqe_ring *r, uint32_t head,
				uint32_t pos, const struct wqe *w,
				uint32_t mask)
{
	const struct wqe *o;

	for (; head != pos; head++) {
		o = wqe_ring_at(r, head);
		if ((!mask || wr_is(o->opcode, mask)) &&
		    check_wqes_overlap(o, w))
			return true;
	}
	return false;
}

/* Whether an SGE of w is one to sum: checked at all, before the walk
 * for sharing and the stack, which a WQE only into regions the peers may
 * write (perftest's, UCX's) would pay for nothing. */
static bool check_dest_wanted(struct emu_hca *hca, const struct wqe *w)
{
	uint32_t i;

	for (i = 0; i < w->num_sge; i++)
		if (check_dest_bytes(hca, &w->sge[i]))
			return true;
	return false;
}

/* Sum w's SGEs into d, with the stack of the post; shared: not to be
 * checked (see the top). */
static void check_dest_arm(struct emu_hca *hca, const struct check_ring *c,
			   struct check_dest *d, const struct wqe *w,
			   bool shared)
{
	const uint8_t *bytes;
	uint32_t i;

	d->armed = !shared && w->num_sge && w->num_sge <= c->nsge;
	if (!d->armed)
		return;
	check_stack_here(&d->stack);
	for (i = 0; i < w->num_sge; i++) {
		bytes = check_dest_bytes(hca, &w->sge[i]);
		d->sum[i] = bytes ? check_sum_buffer(bytes, w->sge[i].length) : 0;
	}
}

/* The first SGE of w whose bytes differ from d's sums, or -1. */
static int check_dest_changed(struct emu_hca *hca,
			      const struct check_dest *d, const struct wqe *w)
{
	const uint8_t *bytes;
	uint32_t i;

	for (i = 0; i < w->num_sge; i++) {
		bytes = check_dest_bytes(hca, &w->sge[i]);
		if (bytes && d->sum[i] &&
		    check_sum_buffer(bytes, w->sge[i].length) != d->sum[i])
			return (int)i;
	}
	return -1;
}

void check_recv_post_slow(struct emu_hca *hca, struct emu_rq *rq,
			  uint32_t from, const struct emu_qp *qp)
{
	const struct wqe_ring *r = &rq->ring;
	const struct wqe *w;
	bool shared;

	check_flush();
	if (!rq->check_rq)
		rq->check_rq = check_ring_new(r->mask + 1, rq->max_sge);
	if (!rq->check_rq)
		return;
	for (; from != r->tail; from++) {
		w = wqe_ring_at(r, from);
		shared = !check_dest_wanted(hca, w) ||
			 check_ring_overlaps(r, r->head, from, w, 0) ||
			 (qp && qp->resp.has_wqe &&
			  check_wqes_overlap(qp->resp.wqe, w));
		check_dest_arm(hca, rq->check_rq,
			       check_dest_at(rq->check_rq, from), w, shared);
	}
}

void check_recv_take_slow(struct emu_qp *qp, struct emu_rq *rq,
			  uint32_t pos)
{
	const struct wqe *w = wqe_ring_at(&rq->ring, pos);
	struct check_dest *d = check_dest_at(rq->check_rq, pos);
	int i;

	if (!d->armed)
		return;
	d->armed = false;
	i = check_dest_changed(qp->hca, d, w);
	if (i < 0)
		return;
	check_report(CHECK_RECV_BUF_WRITTEN, qp->qpn, &d->stack,
		     "QP %#x wr_id %#llx: SGE %d (addr %#llx, length %u, lkey "
		     "%#x) of a receive changed between ibv_post_recv and the "
		     "placement of the message in it",
		     qp->qpn, (unsigned long long)w->wr_id, i,
		     (unsigned long long)w->sge[i].addr, w->sge[i].length,
		     w->sge[i].lkey);
}

void check_read_post_slow(struct emu_qp *qp, uint32_t pos)
{
	const struct wqe *w = wqe_ring_at(&qp->sq, pos);
	bool rd = wr_is(w->opcode, WR_RD_ATOMIC);
	struct check_ring *c = qp->check_rd;

	if (!c && !rd)
		return;
	if (!c)
		c = qp->check_rd =
			check_ring_new(qp->sq.mask + 1, qp->cap.max_send_sge);
	if (!c)
		return;
	if (!rd) {
		check_dest_at(c, pos)->armed = false;
		return;
	}
	check_dest_arm(qp->hca, c, check_dest_at(c, pos), w,
		       !check_dest_wanted(qp->hca, w) ||
			       check_ring_overlaps(&qp->sq, qp->sq.head, pos,
						   w, WR_RD_ATOMIC));
}

void check_read_place_slow(struct emu_qp *qp, const struct wqe *w,
			   bool placing)
{
	uint32_t slot = (uint32_t)(((const unsigned char *)w - qp->sq.buf) /
				   qp->sq.stride);
	struct check_dest *d = check_dest_at(qp->check_rd, slot);
	int i;

	if (!d->armed)
		return;
	if (placing)
		d->armed = false;
	i = check_dest_changed(qp->hca, d, w);
	if (i < 0)
		return;
	d->armed = false;
	check_report(CHECK_RECV_BUF_WRITTEN, (uint64_t)1 << 32 | qp->qpn,
		     &d->stack,
		     "QP %#x wr_id %#llx: SGE %d (addr %#llx, length %u, lkey "
		     "%#x), the local buffer of an %s, changed between "
		     "ibv_post_send and the placement of its response",
		     qp->qpn, (unsigned long long)w->wr_id, i,
		     (unsigned long long)w->sge[i].addr, w->sge[i].length,
		     w->sge[i].lkey,
		     w->opcode == IBV_WR_RDMA_READ ? "RDMA READ" : "atomic");
}
