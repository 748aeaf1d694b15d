/* SPDX-License-Identifier: MIT */
/*
 * What a QP's owner publishes of each of its QPs for `ibemu top`
 * (struct node_qp_stats in node.h holds the lock rule): one call at each
 * place of the engine and the objects where a figure changes.  Nothing
 * here decides anything; a QPN that is not ours, or out of range, is
 * left alone.
 */
#ifndef IBEMU_QP_STATS_H
#define IBEMU_QP_STATS_H

#include <infiniband/verbs.h>

#include "hca.h"
#include "hdr.h"
#include "node.h"

/* The QP's entry, found once its QPN is ours (qp.c). */
void qp_stats_bind(struct emu_qp *qp);
/* The QP's PSNs, queue fills and CQ depth, as they are now; caller
 * holds qp.lock. */
void qp_stats_sync_locked(struct emu_qp *qp);
/* A packet out of one of our QPs, before it is handed to the
 * transport: counted, and a NAK counted as sent. */
void qp_stats_tx(struct emu_hca *hca, const struct pkt_out *out);
/* A packet taken by qp (engine_dispatch), after the responder or the
 * completer saw it: counted, a NAK counted as received, its PSNs
 * published, and the queue fills and CQ depth synced every
 * QP_STATS_RX_SYNC packets (and at every post); caller holds qp.lock.
 * Inline: every packet passes here. */
#define QP_STATS_RX_SYNC 16u
void qp_stats_nak_rcvd(struct node_qp_stats *st);
static inline void qp_stats_rx_locked(struct emu_qp *qp, const struct pkt *p)
{
	struct node_qp_stats *st = qp->stats;
	uint64_t n;

	if (!st)
		return;
	n = atomic_load_explicit(&st->rx_pkts, memory_order_relaxed) + 1;
	atomic_store_explicit(&st->rx_pkts, n, memory_order_relaxed);
	/* A NAK or RNR NAK (IBA 9.3.5, table 44), not an ACK. */
	if (!(p->op->mask & OPM_REQ) && (p->op->mask & OPM_AETH) &&
	    (pkt_aeth_syndrome(p) & AETH_TYPE_MASK) != AETH_ACK)
		qp_stats_nak_rcvd(st);
	atomic_store_explicit(&st->sq_psn, qp->req.psn, memory_order_relaxed);
	atomic_store_explicit(&st->rq_psn, qp->resp.epsn, memory_order_relaxed);
	if (!(n % QP_STATS_RX_SYNC))
		qp_stats_sync_locked(qp);
}
/* An acknowledgement carried behind a request (ack_bundle.c). */
void qp_stats_tx_ack(struct node_qp_stats *st);
/* A completion added to a CQ (cq_push): one in error is counted. */
void qp_stats_cqe(struct emu_hca *hca, const struct ibv_wc *wc);
/* The requester resends (req_rewind_from_locked). */
void qp_stats_retry_locked(struct emu_qp *qp);

#endif /* IBEMU_QP_STATS_H */
