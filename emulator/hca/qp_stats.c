// SPDX-License-Identifier: MIT
/*
 * The figures a QP's owner publishes for `ibemu top` (node.h, struct
 * node_qp_stats, for the lock rule; qp_stats.h for the calls).  Each
 * call writes only an entry whose QPN the node gives to this process,
 * so every entry has one writer, and costs a few relaxed atomics: the
 * data path is not slowed for a view nobody may be looking at.  A QP
 * finds its entry once, when its QPN becomes ours (qp_stats_bind); a
 * packet carries its QP's (pkt_out.stats).
 */
#include "config.h"

#include <stdatomic.h>

#include "hca.h"
#include "qp_stats.h"

/* Our entry for qpn, or NULL if the QPN is not one of ours. */
static struct node_qp_stats *qp_stats_of(struct emu_hca *hca, uint32_t qpn)
{
	struct node_seg *seg = hca->node.seg;
	uint32_t idx = qpn - IBEMU_QPN_FIRST;

	if (!seg || qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return NULL;
	if (atomic_load_explicit(&seg->qps[idx].owner, memory_order_relaxed) !=
	    hca->node.proc_slot + 1)
		return NULL;
	return &seg->qp_stats[idx];
}

static void qp_stats_set(_Atomic uint32_t *f, uint32_t v)
{
	atomic_store_explicit(f, v, memory_order_relaxed);
}

/* One writer: a load and a store, no locked read-modify-write on the
 * data path. */
static void qp_stats_inc32(_Atomic uint32_t *f)
{
	atomic_store_explicit(f,
			      atomic_load_explicit(f, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

static void qp_stats_inc64(_Atomic uint64_t *f)
{
	atomic_store_explicit(f,
			      atomic_load_explicit(f, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/* Whether an AETH's syndrome is a NAK or an RNR NAK (IBA 9.3.5, table
 * 44), not an ACK. */
static bool qp_stats_is_nak(uint8_t syndrome)
{
	return (syndrome & AETH_TYPE_MASK) != AETH_ACK;
}

void qp_stats_bind(struct emu_qp *qp)
{
	qp->stats = qp_stats_of(qp->hca, qp->qpn);
}

/* Completions waiting in a CQ: its ring's indexes are atomic, so the
 * count can be read without the CQ's lock (a hint). */
static uint32_t qp_stats_cq_count(const struct emu_cq *cq)
{
	return cq ? wc_ring_count(&cq->ring) : 0;
}

void qp_stats_sync_locked(struct emu_qp *qp)
{
	struct node_qp_stats *st = qp->stats;
	uint32_t depth;

	if (!st)
		return;
	qp_stats_set(&st->sq_psn, qp->req.psn);
	qp_stats_set(&st->rq_psn, qp->resp.epsn);
	qp_stats_set(&st->sq_wrs, wqe_ring_count(&qp->sq));
	/* An SRQ's ring is under its own lock, not ours. */
	if (qp_has_own_rq(qp))
		qp_stats_set(&st->rq_wrs, wqe_ring_count(&qp->rq.ring));
	else
		qp_stats_set(&st->rq_wrs, qp->type == IBV_QPT_XRC_SEND
						  ? 0
						  : NODE_QP_STATS_SRQ);
	depth = qp_stats_cq_count(qp->scq);
	if (qp->rcq != qp->scq)
		depth += qp_stats_cq_count(qp->rcq);
	qp_stats_set(&st->cq_depth, depth);
}

void qp_stats_tx(struct emu_hca *hca, const struct pkt_out *out)
{
	struct node_qp_stats *st = out->stats;
	const struct aeth *aeth;

	if (!st)
		st = qp_stats_of(hca, out->pkt.hdr->src_qpn);
	if (!st)
		return;
	qp_stats_inc64(&st->tx_pkts);
	if ((out->op->mask & OPM_REQ) || !(out->op->mask & OPM_AETH))
		return;
	aeth = (const struct aeth *)(out->base + out->op->aeth);
	if (qp_stats_is_nak((uint8_t)(be32toh(aeth->smsn) >> 24)))
		qp_stats_inc32(&st->naks_sent);
}

void qp_stats_tx_ack(struct node_qp_stats *st)
{
	qp_stats_inc64(&st->tx_pkts);
}

void qp_stats_nak_rcvd(struct node_qp_stats *st)
{
	qp_stats_inc32(&st->naks_rcvd);
}

void qp_stats_cqe(struct emu_hca *hca, const struct ibv_wc *wc)
{
	struct node_qp_stats *st;

	if (wc->status == IBV_WC_SUCCESS)
		return;
	st = qp_stats_of(hca, wc->qp_num);
	if (st)
		qp_stats_inc32(&st->err_cqes);
}

void qp_stats_retry_locked(struct emu_qp *qp)
{
	struct node_qp_stats *st = qp->stats;

	if (st)
		qp_stats_inc32(&st->retries);
}
