// SPDX-License-Identifier: MIT
/*
 * The requester: turns send WQEs into request packets (IBA 9.4, 9.7.2).
 *
 * A WQE is checked when the requester first reaches it (local errors
 * complete it in error, in order); it then gets its PSN range: one PSN per
 * packet of a SEND or RDMA WRITE, one per expected response packet of an
 * RDMA READ (IBA 9.7.4.1.3), one for an atomic.  Packets are built in
 * place in the destination inbox.  A full inbox stops the requester until
 * the engine's pending pass resumes it; retransmission rewinds to the
 * oldest unacknowledged WQE and resends it with the same PSNs.
 *
 * Called with qp.lock held.
 */
#include "config.h"

#include <string.h>

#include "check_recv.h"
#include "clock.h"
#include "engine.h"
#include "log.h"
#include "qp_stats.h"
#include "route.h"

static uint32_t wqe_npkts(const struct emu_qp *qp, const struct wqe *w)
{
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD || !w->length ||
	    w->pulled)
		return 1;
	return psn_span(w->length, qp->mtu);
}

int req_route_peer(struct emu_hca *hca, const struct ibv_ah_attr *av,
		   uint32_t dest_qpn, struct req_route *r)
{
	r->err = route_qpn(hca, av, dest_qpn, &r->slot);
	r->done = true;
	return r->err;
}

int req_bind_peer_locked(struct emu_qp *qp, const struct req_route *r)
{
	const struct tp_place_ops *place;
	int32_t slot = r->slot;

	if (r->err)
		return -r->err;
	place = engine_place(qp->hca->engine);
	qp->peer = engine_peer(qp->hca->engine, slot);
	qp->peer_proc = slot;
	/* A DC responder's peer is its stream's, not the DCT's (dc.c). */
	if (qp->type != IBV_QPT_UD && !qp->dcr_of)
		route_publish_peer_locked(qp);
	if (place)
		place->peer_bind(qp);
	return qp->peer ? 0 : -ENOENT;
}

int req_resolve_peer_locked(struct emu_qp *qp)
{
	struct req_route r;

	req_route_peer(qp->hca, &qp->attr.ah_attr, qp->attr.dest_qp_num, &r);
	return req_bind_peer_locked(qp, &r);
}

/* The SEND opcode of a packet's place in its message (IBA 9.2 table 35);
 * inv: a Send with Invalidate (RC only, IBA 9.4.1.1). */
static uint8_t req_send_opcode(bool imm, bool inv, bool first, bool last)
{
	if (first && last)
		return imm   ? IB_OP_SEND_ONLY_IMM
		       : inv ? IB_OP_SEND_ONLY_INV
			     : IB_OP_SEND_ONLY;
	if (first)
		return IB_OP_SEND_FIRST;
	if (last)
		return imm   ? IB_OP_SEND_LAST_IMM
		       : inv ? IB_OP_SEND_LAST_INV
			     : IB_OP_SEND_LAST;
	return IB_OP_SEND_MIDDLE;
}

/* The opcode of a request packet (IBA 9.2 table 35). */
static uint8_t req_opcode(const struct emu_qp *qp, const struct wqe *w,
			  bool first, bool last)
{
	uint8_t base = qp_opcode_prefix(qp);
	bool imm;

	switch (w->opcode) {
	case IBV_WR_RDMA_READ:
		return base + IB_OP_READ_REQUEST;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return base + IB_OP_COMPARE_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return base + IB_OP_FETCH_ADD;
	case EMU_WR_ATOMIC_WRITE:
		return base + IB_OP_ATOMIC_WRITE;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		imm = w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
		/* RDMA WRITE opcodes sit 6 after their SEND twins. */
		return base + (IB_OP_WRITE_FIRST - IB_OP_SEND_FIRST) +
		       req_send_opcode(imm, false, first, last);
	default:
		imm = w->opcode == IBV_WR_SEND_WITH_IMM;
		return base + req_send_opcode(imm,
					      w->opcode == IBV_WR_SEND_WITH_INV,
					      first, last);
	}
}

/* Local checks of a WQE before anything is sent; an IBV_WC_* status.
 * The local iovecs of its SGEs in local, their count in *nl (left as it
 * is for inline data). */
static enum ibv_wc_status req_check_wqe(struct emu_qp *qp, struct wqe *w,
					struct iovec *local, int *nl)
{
	bool atomic = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
		      w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;

	/* No initiator depth: the QP may not issue reads or atomics
	 * (manual 6.2.3). */
	if (wr_is(w->opcode, WR_RD_ATOMIC) && qp->attr.max_rd_atomic == 0)
		return IBV_WC_LOC_QP_OP_ERR;
	/* An atomic returns exactly 8 bytes into one segment (IBA 9.4.5). */
	if (atomic && (w->num_sge != 1 || w->sge[0].length != 8))
		return IBV_WC_LOC_QP_OP_ERR;
	if (w->length > IBEMU_MAX_MSG_SZ)
		return IBV_WC_LOC_LEN_ERR;
	/* A datagram longer than the MTU is no error either (req_send_ud). */
	if (w->send_flags & IBV_SEND_INLINE)
		return IBV_WC_SUCCESS;
	return sge_check_iov(qp, w->sge, w->num_sge,
			     wr_is(w->opcode, WR_RD_ATOMIC), local, nl);
}

/* What the requester did with a WQE (traced with IBEMU_DEBUG). */
enum req_step {
	REQ_NEXT, /* nothing more to do with it now: the next one */
	REQ_WAIT_FENCE, /* fenced behind reads and atomics (IBA 10.8.3.3) */
	REQ_WAIT_RD_ATOMIC, /* max_rd_atomic outstanding (IBA 11.2.5.2) */
	REQ_WAIT_DC, /* a DCI: earlier WRs to another target (dc.c) */
	REQ_STOPPED, /* behind a failed WQE: nothing more is sent */
	REQ_LOCAL_ERROR, /* failed its local checks: completes in error */
	REQ_PLACED, /* executed by the requester itself (transport.h) */
	REQ_EXECUTED, /* a bind or invalidate, done here (mw.c) */
	REQ_SENT, /* every packet out; RC waits for the answer */
	REQ_COMPLETE, /* UC and UD: complete once sent (IBA 9.8) */
	REQ_BLOCKED, /* the peer takes no more packets now */
	REQ_DROPPED, /* UD: the destination stayed full; lost */
};

static const char *const req_step_name[] = {
	[REQ_NEXT] = "next",
	[REQ_WAIT_FENCE] = "wait: fence",
	[REQ_WAIT_RD_ATOMIC] = "wait: max_rd_atomic",
	[REQ_WAIT_DC] = "wait: DC stream to another target",
	[REQ_STOPPED] = "stopped behind an error",
	[REQ_LOCAL_ERROR] = "local error",
	[REQ_PLACED] = "placed",
	[REQ_EXECUTED] = "executed",
	[REQ_SENT] = "sent",
	[REQ_COMPLETE] = "complete",
	[REQ_BLOCKED] = "blocked",
	[REQ_DROPPED] = "dropped: destination full",
};

/*
 * The local memory of a packet's payload, bytes [off, off+len) of w's
 * message, resolved before a packet is claimed for it: a region
 * deregistered since the post fails the WQE with a local protection
 * error (IBA 10.6.3.5, 10.8.3.1) instead of sending what is not there.
 */
static bool req_payload_span(struct emu_qp *qp, struct wqe *w, uint32_t off,
			     uint32_t len, struct iovec *iov, int *nr)
{
	if ((w->send_flags & IBV_SEND_INLINE) || !len) {
		*nr = 0;
		return true;
	}
	*nr = sge_span(qp, w->sge, w->num_sge, off, len, false, iov);
	if (*nr >= 0 || *nr == SGE_SPAN_INDIRECT)
		return true;
	w->status = IBV_WC_LOC_PROT_ERR;
	return false;
}

/* Fill a packet's payload from inline data or the resolved iovecs. */
static void req_payload_fill(struct emu_qp *qp, struct wqe *w,
			     uint32_t off, uint32_t len, void *dst,
			     const struct iovec *iov, int nr)
{
	if ((w->send_flags & IBV_SEND_INLINE) &&
	    wr_is(w->opcode, WR_ATOMIC_WRITE))
		memcpy(dst, &w->compare_add, len);
	else if (w->send_flags & IBV_SEND_INLINE)
		memcpy(dst, wqe_inline_data(qp, w) + off, len);
	else if (nr != SGE_SPAN_INDIRECT)
		iov_gather(dst, iov, nr);
	else if (sge_copy(qp, w->sge, w->num_sge, off, dst, len, false))
		/* Through an mkey another QP laid out anew since the
		 * check: nothing of the claimed packet's past shows. */
		memset(dst, 0, len);
}

static uint8_t req_ud_opcode(const struct wqe *w)
{
	return w->opcode == IBV_WR_SEND_WITH_IMM
		       ? IB_OPCODE_UD + IB_OP_SEND_ONLY_IMM
		       : IB_OPCODE_UD + IB_OP_SEND_ONLY;
}

/* The headers after the BTH, the GRH and the payload of a datagram of w
 * laid out in out (pkt_begin, pkt_layout_qp). */
static void req_ud_fill(struct emu_qp *qp, struct wqe *w,
			struct pkt_out *out, const struct iovec *iov, int nr)
{
	const struct ibv_ah_attr *av = &w->av;
	struct node_seg *seg = qp->hca->node.seg;
	uint64_t prefix, guid;

	out->pkt.hdr->dlid = av->dlid;
	/* A Q_Key with the high bit set means "use the QP's own" (IBA
	 * 10.2.5). */
	out_set_deth(out,
		     (w->remote_qkey & 0x80000000u) ? qp->attr.qkey
						    : w->remote_qkey,
		     qp->qpn);
	if (out->op->mask & OPM_IMMDT)
		out_set_immdt(out, w->imm_data);
	if (av->is_global) {
		out->pkt.hdr->flags |= PKT_F_GRH;
		out->pkt.grh->flow = 6u << 28 |
					  (uint32_t)av->grh.traffic_class
						  << 20 |
					  (av->grh.flow_label & 0xfffff);
		out->pkt.grh->hop_limit = av->grh.hop_limit;
		/* The SGID is the port's GID at the AV's index (IBA 8.3.1),
		 * GID 0 where that entry is empty. */
		if (emu_hca_gid(qp->hca, av->port_num, av->grh.sgid_index,
				out->pkt.grh->sgid)) {
			prefix = htobe64(seg->gid_prefix);
			guid = htobe64(node_port_at(seg, av->port_num)->guid);
			memcpy(out->pkt.grh->sgid, &prefix, 8);
			memcpy(out->pkt.grh->sgid + 8, &guid, 8);
		}
		memcpy(out->pkt.grh->dgid, av->grh.dgid.raw, 16);
	}
	req_payload_fill(qp, w, 0, w->length, out_payload(out), iov, nr);
	if (w->send_flags & IBV_SEND_SOLICITED)
		out_set_se(out);
}

/* Send a request packet of w, named by its wr_id in the run trace. */
static void req_pkt_send(struct pkt_out *out, const struct wqe *w)
{
	out->has_wr = true;
	out->wr_id = w->wr_id;
	pkt_send(out);
}

/* One datagram of w to the process dst, for its QP dqpn (or every QP of
 * it attached to the group: BTH_QPN_MULTICAST); false if dst's inbox is
 * full. */
static bool req_ud_packet(struct emu_qp *qp, struct wqe *w,
			  struct tp_peer *dst, uint32_t dqpn,
			  const struct iovec *iov, int nr)
{
	struct pkt_out out;

	if (!pkt_begin(&out, dst, qp, req_ud_opcode(w), dqpn, qp->req.psn,
		       false, w->length))
		return false;
	req_ud_fill(qp, w, &out, iov, nr);
	req_pkt_send(&out, w);
	return true;
}

/*
 * The copy of a multicast datagram for the other nodes of the fabric:
 * one IP multicast datagram to the group (mcast_ip.c), as a switch
 * forwards a multicast packet towards every port with a member (IBA
 * 10.5).  The group is the GRH's MGID; a datagram without a GRH names
 * its group by the MLID alone, which leaves the node only when a group
 * of this node has that MLID (its MGID picks the IP group).
 */
static void req_mcast_remote(struct emu_qp *qp, struct wqe *w,
			     const struct iovec *iov, int nr)
{
	struct engine *e = qp->hca->engine;
	_Alignas(8) uint8_t data[PKT_MAX_LEN];
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	struct pkt_out out;
	uint8_t mgid[16];

	if (!e->mcast->active(e))
		return;
	if (w->av.is_global)
		memcpy(mgid, w->av.grh.dgid.raw, 16);
	else if (!node_mcast_mgid(&qp->hca->node, w->av.dlid, mgid))
		return;
	memset(&out, 0, sizeof(out));
	out.e = e;
	out.pkt.hdr = &hdr;
	out.pkt.grh = &grh;
	out.pkt.data = data;
	pkt_layout_qp(&out, qp, req_ud_opcode(w), BTH_QPN_MULTICAST,
		      qp->req.psn, false, w->length);
	req_ud_fill(qp, w, &out, iov, nr);
	e->mcast->send(e, mgid, &out.pkt);
}

/*
 * A datagram to a multicast group: DestQP 0xFFFFFF and the group's MLID,
 * with its MGID in the GRH (IBA 10.5).  As a switch replicates it to
 * each port with a member, one copy goes to each process of the node
 * with a QP attached, whose engine hands it to those QPs (progress.c),
 * and one datagram to the other nodes (req_mcast_remote).
 * The processes are taken once, when the send begins; a full inbox holds
 * the rest of the fan-out (REQ_BLOCKED) and the copies already sent are
 * not sent again.
 */
static enum req_step req_send_mcast(struct emu_qp *qp, struct wqe *w,
				    const struct iovec *iov, int nr)
{
	const struct ibv_ah_attr *av = &w->av;
	struct tp_peer *dst;

	if (!qp->req.mcast.on) {
		qp->req.psn = psn_add(qp->req.psn, 1);
		req_mcast_remote(qp, w, iov, nr);
		qp->req.mcast.nr = (uint8_t)node_mcast_procs(
			&qp->hca->node, av->is_global ? av->grh.dgid.raw : NULL,
			av->dlid, qp->req.mcast.procs,
			IBEMU_MAX_MCAST_QP_ATTACH);
		qp->req.mcast.next = 0;
		qp->req.mcast.on = true;
	}
	while (qp->req.mcast.next < qp->req.mcast.nr) {
		dst = engine_peer(qp->hca->engine,
				  qp->req.mcast.procs[qp->req.mcast.next]);
		if (dst && !req_ud_packet(qp, w, dst, BTH_QPN_MULTICAST, iov,
					  nr)) {
			qp->req.ud_full_proc =
				qp->req.mcast.procs[qp->req.mcast.next];
			return REQ_BLOCKED;
		}
		qp->req.mcast.next++;
	}
	qp->req.mcast.on = false;
	return REQ_COMPLETE;
}

/*
 * UD: one packet to (AH, remote QPN, Q_Key) (IBA 9.8, 10.2.5).  A
 * destination that does not exist on this node is a lost datagram; the
 * send still completes.  REQ_BLOCKED if the destination inbox is full.
 */
static enum req_step req_send_ud(struct emu_qp *qp, struct wqe *w,
				 const struct iovec *checked, int nchecked)
{
	const struct ibv_ah_attr *av = &w->av;
	struct iovec span[IBEMU_MAX_SGE];
	const struct iovec *iov = checked;
	struct tp_peer *dst;
	int32_t slot;
	int nr = nchecked;

	if (nchecked < 0) {
		if (!req_payload_span(qp, w, 0, w->length, span, &nr))
			return REQ_LOCAL_ERROR;
		iov = span;
	}
	/* IBA C10-93.1.1: a UD message longer than the port's MTU emits no
	 * packet, and the CI generates no error for it: it completes
	 * successfully, as rxe does (doc/conformance.md, "What ibemu does
	 * where the Linux stack and the spec differ"). */
	if (w->length > qp->mtu)
		return REQ_COMPLETE;
	/* A multicast LID with DestQP 0xFFFFFF is a group; either without
	 * the other reaches nobody (IBA 10.5). */
	if (lid_is_multicast(av->dlid) || w->remote_qpn == BTH_QPN_MULTICAST) {
		if (lid_is_multicast(av->dlid) &&
		    w->remote_qpn == BTH_QPN_MULTICAST)
			return req_send_mcast(qp, w, iov, nr);
		qp->req.psn = psn_add(qp->req.psn, 1);
		return REQ_COMPLETE;
	}
	qp->req.psn = psn_add(qp->req.psn, 1);
	/* No such node or QP: the datagram is lost (IBA 9.8.3). */
	if (route_qpn(qp->hca, av, w->remote_qpn, &slot))
		return REQ_COMPLETE;
	dst = engine_peer(qp->hca->engine, slot);
	if (!dst)
		return REQ_COMPLETE;
	if (!req_ud_packet(qp, w, dst, w->remote_qpn, iov, nr)) {
		qp->req.psn = psn_add(qp->req.psn, BTH_PSN_MASK);
		qp->req.ud_full_proc = slot;
		return REQ_BLOCKED;
	}
	return REQ_COMPLETE;
}

/* The RDMA extended header of a WRITE's first packet or a READ request. */
static void req_fill_reth(struct pkt_out *out, const struct wqe *w)
{
	out_set_reth(out, w->remote_addr, w->rkey, w->length);
}

/* Every XRC request names the SRQ it is for (IBA A14 XRCETH); every
 * DC request carries its key and stream (dc.c DCETH). */
static void req_fill_xrceth(struct pkt_out *out, const struct emu_qp *qp,
			    const struct wqe *w)
{
	if (out->op->mask & OPM_XRCETH)
		out_set_xrceth(out, w->xrc_srqn);
	if (out->op->mask & OPM_DCETH)
		dc_fill_eth(qp, out);
}

/* Bytes of a READ already in place: the responses before read_next. */
static uint32_t req_read_done(const struct emu_qp *qp, const struct wqe *w)
{
	return (uint32_t)psn_cmp(w->read_next, w->first_psn) * qp->mtu;
}

/* Send the (remaining) packets of w: REQ_SENT, or REQ_BLOCKED if the
 * peer's inbox is full, or REQ_LOCAL_ERROR. */
static enum req_step req_send_wqe(struct emu_qp *qp, struct wqe *w,
				  const struct iovec *checked, int nchecked)
{
	uint32_t dqpn = qp->attr.dest_qp_num, off, paylen, psn;
	struct iovec span[IBEMU_MAX_SGE];
	const struct iovec *iov;
	struct tp_peer *dst = qp->peer;
	struct pkt_out out;
	bool first, last;
	uint8_t opcode;
	int nr;

	if (!dst && req_resolve_peer_locked(qp) == 0)
		dst = qp->peer;

	if (wr_is(w->opcode, WR_RD_ATOMIC)) {
		/* A READ re-issued asks for what is still missing, from the
		 * first response not received, its address and length
		 * moved on as far (IBA 9.7.4.1.5, 9.7.5.2.1); the
		 * responder answers from that PSN. */
		off = w->opcode == IBV_WR_RDMA_READ ? req_read_done(qp, w) : 0;
		opcode = req_opcode(qp, w, true, true);
		if (!dst)
			return REQ_SENT; /* no such peer: lost, the timer fires */
		if (!pkt_begin(&out, dst, qp, opcode, dqpn,
			       psn_add(w->first_psn, off / qp->mtu), true, 0))
			return REQ_BLOCKED;
		req_fill_xrceth(&out, qp, w);
		if (out.op->mask & OPM_RETH) {
			out_set_reth(&out, w->remote_addr + off, w->rkey,
				     w->length - off);
		} else {
			bool cas = w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP;

			out_set_atmeth(&out, w->remote_addr, w->rkey,
				       cas ? w->swap : w->compare_add,
				       cas ? w->compare_add : 0);
		}
		req_pkt_send(&out, w);
		return REQ_SENT;
	}

	if (w->pulled) {
		/* One SEND_ONLY that tells the responder where the data is;
		 * the regions must still be there (req_payload_span). */
		opcode = req_opcode(qp, w, true, true);
		if (sge_check(qp, w->sge, w->num_sge, false) !=
		    IBV_WC_SUCCESS) {
			w->status = IBV_WC_LOC_PROT_ERR;
			return REQ_LOCAL_ERROR;
		}
		if (!dst)
			return REQ_SENT;
		if (!pkt_begin(&out, dst, qp, opcode, dqpn, w->first_psn, true,
			       0))
			return REQ_BLOCKED;
		req_fill_xrceth(&out, qp, w);
		out.pkt.hdr->flags |= PKT_F_PULL;
		out.pkt.hdr->len += engine_place(qp->hca->engine)
						->pull_desc(qp, w, out_payload(&out));
		if (out.op->mask & OPM_IMMDT)
			out_set_immdt(&out, w->imm_data);
		if (w->send_flags & IBV_SEND_SOLICITED)
			out_set_se(&out);
		req_pkt_send(&out, w);
		w->sent = w->length;
		return REQ_SENT;
	}

	do {
		off = w->sent;
		paylen = w->length - off;
		if (paylen > qp->mtu)
			paylen = qp->mtu;
		first = off == 0;
		last = off + paylen >= w->length;
		psn = psn_add(w->first_psn, off / qp->mtu);
		opcode = req_opcode(qp, w, first, last);
		if (dst) {
			/* A message in one packet, just checked: its
			 * buffers are known; else they are looked up. */
			iov = span;
			if (first && last && nchecked >= 0) {
				iov = checked;
				nr = nchecked;
			} else if (!req_payload_span(qp, w, off, paylen, span,
						     &nr)) {
				return REQ_LOCAL_ERROR;
			}
			if (!pkt_begin(&out, dst, qp, opcode, dqpn, psn, last,
				       paylen))
				return REQ_BLOCKED;
			req_fill_xrceth(&out, qp, w);
			if (out.op->mask & OPM_RETH)
				req_fill_reth(&out, w);
			if (out.op->mask & OPM_IMMDT)
				out_set_immdt(&out, w->imm_data);
			if (out.op->mask & OPM_IETH)
				out_set_ieth(&out, w->imm_data);
			/* Solicited event on the last packet (IBA 9.2.2). */
			if (last && (w->send_flags & IBV_SEND_SOLICITED))
				out_set_se(&out);
			req_payload_fill(qp, w, off, paylen, out_payload(&out),
					 iov, nr);
			req_pkt_send(&out, w);
		}
		w->sent += paylen;
	} while (!last);
	return REQ_SENT;
}

/*
 * How long a datagram waits for a full destination before it is dropped,
 * as a fabric drops what it cannot deliver (UD is unreliable, IBA 9.8):
 * the wait counts from the last time the destination took a packet in
 * (peer_taken), so a destination that drains, however slowly and
 * however many senders it has, is waited for.  One that takes nothing
 * is waited for REQ_UD_WAIT_NS if it is stopped (SIGSTOP, a debugger) or
 * gone, so that it does not hold up the send queue, and the datagrams
 * behind, to other destinations; REQ_UD_WAIT_LIVE_NS if it still runs,
 * as a process descheduled on a loaded machine takes nothing for many
 * time slices (as long as a claimed inbox slot is waited for, inbox.h).
 * Once the wait has run out, datagrams that find a destination full are
 * dropped at once, until one is sent again.
 */
#define REQ_UD_WAIT_NS (10ull * 1000 * 1000)
#define REQ_UD_WAIT_LIVE_NS INBOX_CLAIM_GRACE_LIVE_NS

static enum req_step req_send_datagram(struct emu_qp *qp, struct wqe *w,
					const struct iovec *checked,
					int nchecked)
{
	enum req_step step = req_send_ud(qp, w, checked, nchecked);
	struct tp_peer *dst;
	uint64_t now, taken = 0;

	if (step != REQ_BLOCKED) {
		qp->req.ud_full_since = 0;
		return step;
	}
	now = clock_coarse_ns();
	dst = engine_peer(qp->hca->engine, qp->req.ud_full_proc);
	if (dst)
		taken = engine_peer_taken(dst);
	if (!qp->req.ud_full_since || taken != qp->req.ud_full_taken) {
		/* a new wait, or the destination took packets in since */
		qp->req.ud_full_since = now;
		qp->req.ud_full_taken = taken;
		qp->req.ud_wait_ns = REQ_UD_WAIT_NS;
	}
	if (now - qp->req.ud_full_since < qp->req.ud_wait_ns)
		return REQ_BLOCKED;
	/* Asked once per wait: whether the destination still runs. */
	if (qp->req.ud_wait_ns == REQ_UD_WAIT_NS &&
	    engine_peer_runs(qp->hca->engine, qp->req.ud_full_proc)) {
		qp->req.ud_wait_ns = REQ_UD_WAIT_LIVE_NS;
		return REQ_BLOCKED;
	}
	qp->req.mcast.on = false; /* the copies not sent are lost */
	return REQ_DROPPED;
}

/*
 * A memory window bind, a UMR or a Local Invalidate: executed by the HCA
 * in send queue order, with no packet (IBA 10.6.7.2, 10.6.7.3,
 * mlx5dv_wr_post(3)).  A bind that breaks a rule completes with
 * IBV_WC_MW_BIND_ERR, a UMR with IBV_WC_LOC_PROT_ERR; an invalidation of
 * what cannot be invalidated with IBV_WC_LOC_QP_OP_ERR, as rxe does
 * (o10-37.2.26).  Any of these errors puts the QP in the error state.
 */
static enum req_step req_local_op(struct emu_qp *qp, struct wqe *w)
{
	if (w->opcode == IBV_WR_BIND_MW)
		w->status = mw_bind_locked(qp, &w->bind);
	else if (w->opcode == EMU_WR_UMR) /* an mkey's layout (umr.c) */
		w->status = umr_execute_locked(qp, w);
	else if (key_invalidate_locked(qp, w->imm_data, false))
		w->status = IBV_WC_LOC_QP_OP_ERR;
	return w->status == IBV_WC_SUCCESS ? REQ_EXECUTED : REQ_LOCAL_ERROR;
}

/* Give w its n PSNs, from the next one (one per packet, IBA 9.7.2);
 * nothing of it sent yet. */
static void req_give_psns(struct emu_qp *qp, struct wqe *w, uint32_t n)
{
	w->first_psn = qp->req.psn;
	w->last_psn = psn_add(w->first_psn, n - 1);
	qp->req.psn = psn_add(w->first_psn, n);
	w->sent = 0;
	w->read_next = w->first_psn;
	w->read_reissued = false;
}

/* A new WQE: check it, try to place it, else give it its PSNs.  The
 * local iovecs of its checked SGEs in local, their count in *nl (left
 * as it is when they were not resolved: inline data, a local op). */
static enum req_step req_start_wqe(struct emu_qp *qp, struct wqe *w,
				   struct iovec *local, int *nl)
{
	const struct tp_place_ops *place = engine_place(qp->hca->engine);
	bool rd_atomic = wr_is(w->opcode, WR_RD_ATOMIC);

	if ((w->send_flags & IBV_SEND_FENCE) && qp->req.rd_atomic)
		return REQ_WAIT_FENCE;
	if (wr_is(w->opcode, WR_LOCAL))
		return req_local_op(qp, w);
	if (rd_atomic && qp->attr.max_rd_atomic &&
	    qp->req.rd_atomic >= qp->attr.max_rd_atomic)
		return REQ_WAIT_RD_ATOMIC;
	w->status = req_check_wqe(qp, w, local, nl);
	if (w->status != IBV_WC_SUCCESS)
		return REQ_LOCAL_ERROR;
	/* The requester may place a READ itself, now. */
	if (place && rd_atomic)
		check_read_place(qp, w, false);
	if (place && place->rdma(qp, w, local, *nl))
		return REQ_PLACED;
	w->pulled = qp->type != IBV_QPT_UD && place && place->pull_ok(qp, w);
	req_give_psns(qp, w, wqe_npkts(qp, w));
	w->state = WQE_SENDING;
	if (rd_atomic)
		qp->req.rd_atomic++;
	return REQ_NEXT;
}

/* Send what is left of w (checked, nchecked: its local iovecs, if
 * req_start_wqe has just resolved them; nchecked < 0: not). */
static enum req_step req_send(struct emu_qp *qp, struct wqe *w,
			      const struct iovec *checked, int nchecked)
{
	enum req_step step;

	if (qp->type == IBV_QPT_UD)
		return req_send_datagram(qp, w, checked, nchecked);
	step = req_send_wqe(qp, w, checked, nchecked);
	if (step == REQ_SENT && qp->type == IBV_QPT_UC)
		return REQ_COMPLETE;
	return step;
}

/*
 * The common case of a message, a SEND (or with immediate) that fits in
 * one packet, taken in a straight line: req_start_wqe and req_send_wqe
 * for it, less what cannot apply (it is placed by no one, pulled by no
 * one: a packet is at most the path MTU, 4096 bytes, and a pull starts
 * at CMA_PULL_MIN; fenced behind no read, and has no XRC or RDMA
 * header).  An RC or UC QP with a resolved peer; one segment, or inline
 * data.  false: nothing was done, and the general steps take it, with
 * what they check and report (a failed local key, a full inbox).
 */
static bool req_send_small(struct emu_qp *qp, struct wqe *w)
{
	bool imm = w->opcode == IBV_WR_SEND_WITH_IMM;
	uint32_t psn = qp->req.psn, len = w->length;
	const uint8_t *src = NULL;
	struct pkt_out out;

	if ((w->opcode != IBV_WR_SEND && !imm) ||
	    (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) ||
	    qp->dc_type != EMU_DC_NONE ||
	    !qp->peer || len > qp->mtu ||
	    ((w->send_flags & IBV_SEND_FENCE) && qp->req.rd_atomic))
		return false;
	if (w->send_flags & IBV_SEND_INLINE) {
		src = wqe_inline_data(qp, w);
	} else if (len) {
		/* One segment of it: IBA 10.6.3.2 as req_check_wqe. */
		if (w->num_sge != 1)
			return false;
		src = sge_local_addr(qp, &w->sge[0], false);
		if (!src)
			return false;
	}
	/* One packet, first and last: the ACK is asked for (IBA 9.7.5). */
	if (!pkt_begin(&out, qp->peer, qp,
		       qp_opcode_prefix(qp) +
			       req_send_opcode(imm, false, true, true),
		       qp->attr.dest_qp_num, psn, true, len))
		return false;
	if (imm)
		out_set_immdt(&out, w->imm_data);
	/* Solicited event on the last packet (IBA 9.2.2). */
	if (w->send_flags & IBV_SEND_SOLICITED)
		out_set_se(&out);
	if (len)
		memcpy(out_payload(&out), src, len);
	/* The ACK this QP's responder holds rides in the same room
	 * (ack_bundle.c); a SEND posted gives holding a new chance. */
	if (qp->resp.ack_held)
		ack_bundle_add_locked(qp, &out);
	ack_bundle_sent_locked(qp);
	req_pkt_send(&out, w);
	w->pulled = false;
	req_give_psns(qp, w, 1);
	w->sent = len;
	return true;
}

static enum req_step req_step(struct emu_qp *qp, struct wqe *w)
{
	struct iovec local[IBEMU_MAX_SGE];
	enum req_step step;
	int nl = -1;

	switch (w->state) {
	case WQE_ERROR:
		return REQ_STOPPED;
	case WQE_PENDING:
		if (qp->dc_type == EMU_DC_DCI && !dc_req_bind_locked(qp, w))
			return REQ_WAIT_DC;
		if (req_send_small(qp, w))
			return qp->type == IBV_QPT_UC ? REQ_COMPLETE : REQ_SENT;
		step = req_start_wqe(qp, w, local, &nl);
		if (step != REQ_NEXT)
			return step;
		/* fall through */
	case WQE_SENDING:
		return req_send(qp, w, local, nl);
	default: /* WQE_SENT, WQE_DONE */
		return REQ_NEXT;
	}
}

void req_run_locked(struct emu_qp *qp)
{
	enum req_step step;
	struct wqe *w;

	if (qp->state != IBV_QPS_RTS || qp->comp.rnr_resume)
		return;
	qp->req.blocked = false;
	while (qp->req.next != qp->sq.tail) {
		w = wqe_ring_at(&qp->sq, qp->req.next);
		step = req_step(qp, w);
		if (step != REQ_NEXT)
			ibemu_trace("req qp %#x wqe %u %s: %s", qp->qpn,
				    qp->req.next,
				    wr_opcode_get(w->opcode)->name,
				    req_step_name[step]);
		switch (step) {
		case REQ_NEXT:
			qp->req.next++;
			break;
		case REQ_LOCAL_ERROR:
			w->state = WQE_ERROR;
			comp_retire_locked(qp);
			return;
		case REQ_PLACED:
		case REQ_EXECUTED:
		case REQ_COMPLETE:
		case REQ_DROPPED:
			w->state = WQE_DONE;
			qp->req.next++;
			comp_retire_locked(qp);
			break;
		case REQ_SENT:
			w->state = WQE_SENT;
			comp_arm_timer_locked(qp);
			qp->req.next++;
			break;
		case REQ_BLOCKED:
			qp->req.blocked = true;
			comp_blocked_locked(qp);
			/* The transport timer runs for a request that cannot
			 * leave as for one lost (IBA 9.7.6.1.3): a responder
			 * that takes nothing ends in RETRY_EXC_ERR. */
			if (qp_is_reliable(qp))
				comp_arm_timer_locked(qp);
			engine_pending_add_locked(qp);
			return;
		case REQ_WAIT_FENCE:
		case REQ_WAIT_RD_ATOMIC:
		case REQ_WAIT_DC:
		case REQ_STOPPED:
			return;
		}
	}
}

/*
 * The SQ position past the last WQE sent whole at least once: req.next,
 * unless a rewind moved it back over WQEs sent before (their packets may
 * still be answered, IBA 9.7.5.1).  Every WQE before req.next has been
 * sent whole or is done: req.next passes a WQE only once it is.
 */
uint32_t req_sent_end(const struct emu_qp *qp)
{
	uint32_t head = qp->sq.head, far = qp->req.sent_end - head,
		 next = qp->req.next - head;

	return far <= qp->sq.tail - head && far > next ? qp->req.sent_end
						       : qp->req.next;
}

/*
 * Resend from psn, with the same PSNs: a sequence-error or RNR NAK names
 * the first request to resend (IBA 9.7.5.2.1, 9.7.5.2.8).  The WQE that
 * holds psn resumes at that packet, the responder being inside its
 * message; a READ resumes at its first response missing; an atomic and
 * a pulled SEND start again whole.
 * The WQEs before psn are left alone: a READ among them still takes the
 * responses the responder queued before the NAK.
 */
void req_rewind_from_locked(struct emu_qp *qp, uint32_t psn)
{
	uint32_t i, first = qp->sq.tail;
	struct wqe *w;

	for (i = qp->sq.head; i != qp->req.next; i++) {
		w = wqe_ring_at(&qp->sq, i);
		if (w->state != WQE_SENT && w->state != WQE_SENDING)
			continue;
		if (psn_cmp(w->last_psn, psn) < 0)
			continue;
		if (first == qp->sq.tail)
			first = i;
		w->state = WQE_SENDING;
		w->sent = 0;
		w->read_reissued = w->opcode == IBV_WR_RDMA_READ;
		if (!wr_is(w->opcode, WR_RD_ATOMIC) && !w->pulled &&
		    psn_cmp(psn, w->first_psn) > 0)
			w->sent = (uint32_t)psn_cmp(psn, w->first_psn) * qp->mtu;
	}
	if (first != qp->sq.tail) {
		/* What was sent before the rewind stays acknowledgeable
		 * (comp.c, comp_ack_upto). */
		qp->req.sent_end = req_sent_end(qp);
		qp->req.next = first;
		qp_stats_retry_locked(qp);
	}
}

/* Resend from the oldest WQE not yet answered, with the same PSNs, from
 * its start. */
void req_rewind_locked(struct emu_qp *qp)
{
	struct wqe *w;
	uint32_t i;

	for (i = qp->sq.head; i != qp->req.next; i++) {
		w = wqe_ring_at(&qp->sq, i);
		if (w->state == WQE_SENT || w->state == WQE_SENDING) {
			req_rewind_from_locked(qp, w->first_psn);
			return;
		}
	}
}
