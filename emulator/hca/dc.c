// SPDX-License-Identifier: MIT
/*
 * The Dynamically Connected transport, as mlx5 devices offer it
 * (mlx5dv_create_qp(3), mlx5dv_wr_set_dc_addr(3); doc/design.md, "The
 * Dynamically Connected transport").
 *
 * A DC initiator (DCI) is an RC requester whose peer changes with its
 * work requests: each names a target (an AV, a DCT number, a DC key).
 * The DCI sends a work request only once bound to its target; one that
 * names another target waits until every earlier one has completed,
 * then the DCI binds to the new target and begins a new stream there,
 * as a DCI disconnects and connects again.  Every request carries a
 * DCETH (wire.h): the key, and the PSN its stream began at.
 *
 * A DC target (DCT) checks the key of every request before anything
 * else: a request with another key is answered with the NAK Remote
 * Access Error (IBA 9.7.5.2, table 44 NAK code 2, as for an R_Key
 * violation) and creates nothing.  A request with the right key goes to
 * the DC responder (DCR)
 * of its stream: an RC responder context of its own, keyed by the
 * sender's process as the transport gives it (never a field of the
 * packet) and the DCI's QPN, delivering into the DCT's SRQ and CQ under
 * the DCT's number.  A DCR is a struct emu_qp the RC responder (resp.c)
 * runs as it runs any RC QP: PSNs, ACK/NAK, RNR NAK, READ and atomic
 * responses and their duplicates are RC's.  A DCT keeps at most
 * IBEMU_MAX_DCR_PER_DCT of them, made at the first packet of a stream;
 * when all are taken, an idle one (no open message, nothing owed) is
 * given to the new stream, else the packet is dropped and the DCI sends
 * it again, as on an HCA whose DC resources are exhausted.
 *
 * Lock rule: a DCI's state is under its qp.lock.  A DCT's list of DCRs
 * and each DCR's identity (initiator, stream, generation) change under
 * engine.lock and the DCT's qp.lock, which the receive path holds; a
 * DCR's responder state is under its own qp.lock, taken after the
 * DCT's.  DCRs are on the engine's list of QPs (engine_qp_link_locked),
 * so the pending pass, the ACK flush and emu_mr_dereg's quiesce reach
 * them as any QP; they are never in the QP table: packets find them
 * through their DCT only.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hca.h"
#include "log.h"

struct dc_qp {
	/* DCI: its target now (bound: it has one); the AV is the QP's
	 * attr.ah_attr, the DCT number its attr.dest_qp_num */
	bool bound;
	uint64_t key;
	uint32_t stream_psn;
	/* DCT: its responders; gen counts its lives (Reset) */
	struct emu_qp *dcrs[IBEMU_MAX_DCR_PER_DCT];
	uint32_t nr_dcrs;
	uint32_t gen;
	/* DCR: the stream it serves */
	int32_t src_proc;
	uint32_t src_qpn;
	uint32_t dcr_gen;
};

int dc_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		 const struct emu_wr_ext *ext)
{
	/* Every WR of a DCI names its target (mlx5dv_wr_set_dc_addr(3)). */
	if (!ext || !ext->has_dc || ext->dc.dctn > IBEMU_QPN_MASK) {
		ibemu_log_dbg("post_send: a DCI work request without a DC "
			      "address");
		return EINVAL;
	}
	if (!ah_copy(qp->hca, ext->dc.ah_handle, &wqe->av)) {
		ibemu_log_dbg("post_send: DC address names no AH %u",
			      ext->dc.ah_handle);
		return EINVAL;
	}
	wqe->remote_qpn = ext->dc.dctn;
	wqe->dc_key = ext->dc.dc_key;
	return 0;
}

/* What each DC QP needs at create: a DCI sends and has no receive
 * queue; a DCT receives into an SRQ and has no send queue. */
int dc_check_init(const struct emu_qp_init *init)
{
	switch (init->dc_type) {
	case EMU_DC_DCI:
		if (init->qp_type != IBV_QPT_RC || !init->send_cq ||
		    init->srq || init->xrcd)
			return EINVAL;
		return 0;
	case EMU_DC_DCT:
		if (init->qp_type != IBV_QPT_RC || !init->srq ||
		    !init->recv_cq || init->xrcd)
			return EINVAL;
		return 0;
	default:
		return EINVAL;
	}
}

int dc_qp_init(struct emu_qp *qp, const struct emu_qp_init *init)
{
	qp->dc_type = init->dc_type;
	qp->dct_key = init->dct_key;
	if (qp->dc_type == EMU_DC_NONE)
		return 0;
	qp->dc = calloc(1, sizeof(*qp->dc));
	return qp->dc ? 0 : ENOMEM;
}

/* ---- the initiator ---- */

/* Whether an address vector names the port the QP's current one does. */
static bool dc_av_same(const struct ibv_ah_attr *a, const struct ibv_ah_attr *b)
{
	return a->dlid == b->dlid && a->is_global == b->is_global &&
	       a->port_num == b->port_num &&
	       (!a->is_global || !memcmp(a->grh.dgid.raw, b->grh.dgid.raw, 16));
}

bool dc_req_bind_locked(struct emu_qp *qp, const struct wqe *w)
{
	struct dc_qp *d = qp->dc;

	if (d->bound && qp->attr.dest_qp_num == w->remote_qpn &&
	    d->key == w->dc_key && dc_av_same(&qp->attr.ah_attr, &w->av))
		return true;
	/* Another target: the stream to the current one ends once every
	 * earlier WR has completed (w is then the send queue's head). */
	if (qp->req.next != qp->sq.head)
		return false;
	d->bound = true;
	d->key = w->dc_key;
	d->stream_psn = qp->req.psn;
	qp->attr.ah_attr = w->av;
	qp->attr.dest_qp_num = w->remote_qpn;
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.rnr_left = qp->attr.rnr_retry;
	qp->comp.told.on = false;
	qp->comp.implied.on = false;
	/* A target that cannot be found gets RC's answer: the requests
	 * are lost, retried, and end in IBV_WC_RETRY_EXC_ERR (req.c). */
	qp->peer = NULL;
	qp->peer_proc = -1;
	req_resolve_peer_locked(qp);
	ibemu_trace("dci %#x: stream to dct %#x from psn %#x", qp->qpn,
		    w->remote_qpn, d->stream_psn);
	return true;
}

void dc_fill_eth(const struct emu_qp *qp, struct pkt_out *out)
{
	out_set_dceth(out, qp->dc->key, qp->dc->stream_psn);
}

/* ---- the target ---- */

/* The NAK of a request whose key is not the DCT's, from the DCT itself:
 * nothing of the DCT's is touched or made for it (IBA 9.7.5.2
 * table 44, Remote Access Error). */
static void dc_nak_key(struct emu_qp *dct, const struct pkt *p)
{
	struct tp_peer *dst = engine_peer(dct->hca->engine, p->hdr->src_proc);
	struct pkt_out out;

	ibemu_log_dbg("dct %#x: request of qp %#x with another DC key: NAK",
		      dct->qpn, p->hdr->src_qpn);
	if (!dst || !pkt_begin(&out, dst, dct, IB_OPCODE_RC | IB_OP_ACKNOWLEDGE,
			       p->hdr->src_qpn, p->psn, false, 0))
		return; /* the DCI asks again */
	out.pkt.hdr->dlid = p->hdr->slid;
	out_set_aeth(&out, AETH_NAK | AETH_NAK_REM_ACC_ERR, 0);
	pkt_send(&out);
}

/* Nothing of the DCR's stream is under way: it may serve another. */
static bool dc_dcr_idle_locked(const struct emu_qp *r)
{
	return !r->ack_queued &&
	       !atomic_load_explicit(&r->on_pending, memory_order_relaxed) &&
	       !r->resp.op && !r->resp.has_wqe && !r->resp.ack_pending &&
	       r->resp.replies_head == r->resp.replies_tail;
}

static void dc_dcr_free(struct emu_qp *r)
{
	wqe_ring_fini(&r->sq);
	free(r->resp.wqe);
	free(r->resp.replies);
	free(r->resp.res);
	free(r->dc);
	free(r);
}

/* A new responder of dct, linked to the engine; NULL without memory. */
static struct emu_qp *dc_dcr_new(struct emu_qp *dct)
{
	struct emu_qp *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->dc = calloc(1, sizeof(*r->dc));
	r->resp.wqe = calloc(1, sizeof(struct wqe) +
					IBEMU_MAX_SGE * sizeof(struct ibv_sge));
	if (!r->dc || !r->resp.wqe || wqe_ring_init(&r->sq, 1, 1, 0, NULL)) {
		free(r->resp.wqe);
		free(r->dc);
		free(r);
		return NULL;
	}
	emu_lock_init(&r->lock);
	r->hca = dct->hca;
	r->qpn = dct->qpn;
	r->type = IBV_QPT_RC;
	r->pd_id = dct->pd_id;
	/* Its events are nobody's: a stream's error is the DCI's. */
	r->owner.handle = dct->owner.handle;
	r->owner.async_fd = -1;
	r->srq = dct->srq;
	r->rcq = dct->rcq;
	r->dc_type = EMU_DC_DCT;
	r->dcr_of = dct;
	r->state = IBV_QPS_RESET;
	r->peer_proc = -1;
	engine_qp_link_locked(dct->hca->engine, r);
	return r;
}

/* Give r to the stream p begins (or belongs to after a loss): a fresh
 * RC responder expecting the stream's first PSN.  r.lock held. */
static void dc_dcr_start_locked(struct emu_qp *dct, struct emu_qp *r,
				const struct pkt *p)
{
	resp_flush_open_locked(r);
	resp_reset_locked(r);
	if (r->resp.res)
		memset(r->resp.res, 0,
		       IBEMU_MAX_QP_INIT_RD_ATOM * sizeof(*r->resp.res));
	r->resp.res_next = 0;
	r->attr = dct->attr;
	r->attr.dest_qp_num = p->hdr->src_qpn;
	r->attr.ah_attr.dlid = p->hdr->slid;
	r->attr.max_dest_rd_atomic = IBEMU_DCR_RD_ATOM;
	r->mtu = dct->mtu;
	r->state = IBV_QPS_RTR;
	r->resp.epsn = pkt_dceth_stream_psn(p);
	r->resp.msn = 0;
	r->resp.comm_est = true; /* no COMM_EST for a DCT */
	r->peer_proc = p->hdr->src_proc;
	r->peer = engine_peer(dct->hca->engine, p->hdr->src_proc);
	r->dc->src_proc = p->hdr->src_proc;
	r->dc->src_qpn = p->hdr->src_qpn;
	r->dc->stream_psn = pkt_dceth_stream_psn(p);
	r->dc->dcr_gen = dct->dc->gen;
}

/* The DCR p's initiator has, or NULL; its identity is read under
 * engine.lock and the DCT's qp.lock, held. */
static struct emu_qp *dc_dcr_find(const struct dc_qp *d, const struct pkt *p)
{
	uint32_t i;

	for (i = 0; i < d->nr_dcrs; i++)
		if (d->dcrs[i]->dc->src_proc == p->hdr->src_proc &&
		    d->dcrs[i]->dc->src_qpn == p->hdr->src_qpn)
			return d->dcrs[i];
	return NULL;
}

/* A DCR for a new initiator, locked: a new one while there are fewer
 * than the bound, else an idle one; NULL if none is free. */
static struct emu_qp *dc_dcr_claim(struct emu_qp *dct)
{
	struct dc_qp *d = dct->dc;
	struct emu_qp *r;
	uint32_t i;

	if (d->nr_dcrs < IBEMU_MAX_DCR_PER_DCT) {
		r = dc_dcr_new(dct);
		if (!r)
			return NULL;
		d->dcrs[d->nr_dcrs++] = r;
		emu_lock(&r->lock);
		return r;
	}
	for (i = 0; i < d->nr_dcrs; i++) {
		r = d->dcrs[i];
		emu_lock(&r->lock);
		if (dc_dcr_idle_locked(r))
			return r;
		emu_unlock(&r->lock);
	}
	return NULL;
}

/* The DCR of p's stream, locked, made or reset if p begins one; NULL
 * if p is of a stream that has ended, or no DCR is free. */
static struct emu_qp *dc_dcr_get_locked(struct emu_qp *dct, const struct pkt *p)
{
	struct dc_qp *d = dct->dc;
	uint32_t sp = pkt_dceth_stream_psn(p);
	struct emu_qp *r = dc_dcr_find(d, p);

	if (r) {
		emu_lock(&r->lock);
		if (r->dc->dcr_gen == d->gen && sp == r->dc->stream_psn)
			return r;
		/* A stream's PSNs follow the earlier streams' (a DCI's
		 * PSNs grow): a packet of an older stream is stale while
		 * the newer one is under way.  Once that is idle, an
		 * older PSN is a DCI that was reset and starts over. */
		if (r->dc->dcr_gen == d->gen &&
		    psn_cmp(sp, r->dc->stream_psn) < 0 &&
		    !dc_dcr_idle_locked(r)) {
			emu_unlock(&r->lock);
			return NULL;
		}
	} else {
		r = dc_dcr_claim(dct);
		if (!r) {
			ibemu_log_dbg("dct %#x: all %u responders busy: "
				      "request of qp %#x dropped",
				      dct->qpn, d->nr_dcrs, p->hdr->src_qpn);
			return NULL;
		}
	}
	dc_dcr_start_locked(dct, r, p);
	return r;
}

bool dc_recv_locked(struct emu_qp *qp, const struct pkt *p)
{
	struct emu_qp *r;

	if (qp->dc_type != EMU_DC_DCT)
		return false;
	/* A DCT takes DC requests in RTR only; nothing else is for it. */
	if (!(p->op->mask & OPM_DCETH) || qp->state != IBV_QPS_RTR)
		return true;
	if (pkt_dceth_key(p) != qp->dct_key) {
		dc_nak_key(qp, p);
		return true;
	}
	r = dc_dcr_get_locked(qp, p);
	if (!r)
		return true;
	resp_recv_locked(r, p);
	emu_unlock(&r->lock);
	return true;
}

uint32_t dc_dct_responders(struct emu_qp *qp)
{
	struct engine *e = qp->hca->engine;
	uint32_t n;

	emu_lock(&e->lock);
	n = qp->dc_type == EMU_DC_DCT && qp->dc ? qp->dc->nr_dcrs : 0;
	emu_unlock(&e->lock);
	return n;
}

void dc_qp_reset_locked(struct emu_qp *qp)
{
	if (qp->dc_type == EMU_DC_DCT && qp->dc)
		qp->dc->gen++;
	if (qp->dc_type == EMU_DC_DCI && qp->dc)
		qp->dc->bound = false;
}

void dc_qp_fini(struct emu_qp *qp)
{
	struct dc_qp *d = qp->dc;
	struct engine *e = qp->hca->engine;
	uint32_t i;

	if (!d)
		return;
	for (i = 0; i < d->nr_dcrs; i++) {
		engine_qp_unlink(e, d->dcrs[i]);
		dc_dcr_free(d->dcrs[i]);
	}
	free(d);
	qp->dc = NULL;
}
