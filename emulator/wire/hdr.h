/* SPDX-License-Identifier: MIT */
/*
 * Header accessors: every field of a packet's transport headers is read
 * and written through these, in host order, so the engines never cast
 * into a packet or pack a field by hand.  The layouts are in wire.h; which
 * headers a packet has, and where, is its opcode's entry (opcode.h).
 *
 * struct pkt is a received packet, parsed; struct pkt_out a packet being
 * built in room its transport gave.  An accessor for an extended header
 * may be used only when the opcode has it (op->mask has the OPM_ bit).
 */
#ifndef IBEMU_HDR_H
#define IBEMU_HDR_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>

#include "opcode.h"
#include "params.h"
#include "wire.h"

struct engine;
struct node_qp_stats;
struct tp_peer;

/* One packet in a transport's buffer, being built or being received. */
struct tp_pkt {
	struct pkt_hdr *hdr; /* the link: who sent it, to which process */
	uint8_t *data; /* BTH, extended headers, payload */
	struct pkt_grh *grh; /* valid when hdr->flags has PKT_F_GRH */
	void *slot; /* the transport's own */
	uint64_t pos;
	/* Set before pkt_claim: the sender's node process slot, so that a
	 * receiver can tell who holds room it claimed (inbox.h). */
	int32_t src_proc;
};

/*
 * A received packet, parsed (pkt.c pkt_parse).  The slot it came in
 * is shared memory its sender may still be writing: the link header, the
 * GRH and the transport headers are copied out of it once, here, before
 * anything is checked, and every accessor reads the copies.  The payload
 * stays in the slot; whoever takes it copies it once (sge_copy, the pull
 * descriptor's copy).  A struct pkt points into itself: never copy one.
 */
struct pkt {
	const struct pkt_hdr *hdr; /* &link */
	const struct pkt_grh *grh; /* &grh_copy when hdr->flags has PKT_F_GRH */
	const uint8_t *bth_base; /* hdrs */
	const struct bth *bth;
	const struct opcode_info *op;
	uint8_t opcode;
	uint32_t psn;
	uint32_t qpn;
	const uint8_t *payload; /* in the slot */
	uint32_t paylen;
	struct pkt_hdr link;
	struct pkt_grh grh_copy;
	_Alignas(8) uint8_t hdrs[PKT_MAX_HDRS]; /* BTH and extended headers */
};

/* Copy a received packet's headers out of its slot and check them
 * (pkt.c); false if it is malformed and must be dropped. */
bool pkt_parse(const struct tp_pkt *in, struct pkt *p);

/* A packet being built (the engine's pkt_begin .. pkt_send). */
struct pkt_out {
	struct engine *e;
	struct tp_peer *dst;
	struct tp_pkt pkt;
	uint8_t *base; /* BTH */
	const struct opcode_info *op;
	/* For the run trace (doc/trace.md): the work request a request
	 * packet belongs to; pkt_layout clears has_wr. */
	bool has_wr;
	uint64_t wr_id;
	/* The sending QP's entry for `ibemu top` (qp_stats.h), NULL: none
	 * (pkt_layout clears it, pkt_layout_qp sets it). */
	struct node_qp_stats *stats;
};

static inline const void *pkt_hdr_at(const struct pkt *p, uint8_t off)
{
	return p->bth_base + off;
}

static inline void *out_hdr_at(struct pkt_out *out, uint8_t off)
{
	return out->base + off;
}

static inline uint8_t *out_payload(struct pkt_out *out)
{
	return out->base + out->op->hdr_len;
}

/* ---- BTH, IBA 9.2 ---- */

static inline bool pkt_se(const struct pkt *p)
{
	return (p->bth->flags & BTH_SE) != 0;
}

/* BTH MigReq (IBA 9.2): set while the sender's path migration state is
 * MIGRATED (apm.c). */
static inline bool pkt_migreq(const struct pkt *p)
{
	return (p->bth->flags & BTH_MIG) != 0;
}

static inline bool pkt_ackreq(const struct pkt *p)
{
	return (be32toh(p->bth->apsn) & BTH_ACKREQ) != 0;
}

static inline void out_set_se(struct pkt_out *out)
{
	((struct bth *)out->base)->flags |= BTH_SE;
}

/* Lay out a BTH: opcode, pad count, P_Key, destination QP, PSN. */
static inline void out_bth_init(struct pkt_out *out, uint8_t opcode,
				unsigned int pad, uint16_t pkey,
				uint32_t dst_qpn, uint32_t psn, bool ackreq)
{
	struct bth *bth = (struct bth *)out->base;

	bth->opcode = opcode;
	/* TVer 0 (IBA 9.2.5). */
	bth->flags = (uint8_t)((pad & 3) << BTH_PAD_SHIFT);
	bth->pkey = htobe16(pkey);
	bth->qpn = htobe32(dst_qpn & BTH_QPN_MASK);
	bth->apsn = htobe32((psn & BTH_PSN_MASK) | (ackreq ? BTH_ACKREQ : 0));
}

/* Lay out the link header (link's addresses; its len and flags are set
 * here) and BTH of a packet in the room out->pkt names.  Nothing here
 * knows QPs or transports: the engine says where a packet comes from and
 * goes to (pkt_layout_qp), the CM lays out its MADs with it too. */
static inline void pkt_layout(struct pkt_out *out,
			      const struct pkt_hdr *link, uint8_t opcode,
			      uint32_t dst_qpn, uint32_t psn, bool ackreq,
			      uint32_t paylen)
{
	const struct opcode_info *op = opcode_get(opcode);
	struct pkt_hdr *hdr;
	uint32_t pad = (4 - (paylen & 3)) & 3;

	out->op = op;
	out->base = out->pkt.data;
	out->has_wr = false;
	out->stats = NULL;
	hdr = out->pkt.hdr;
	hdr->len = op->hdr_len + paylen;
	hdr->slid = link->slid;
	hdr->dlid = link->dlid;
	hdr->src_qpn = link->src_qpn;
	hdr->src_proc = link->src_proc;
	hdr->flags = 0;
	/* Pad to 4 bytes as the wire does (IBA 9.2.3). */
	out_bth_init(out, opcode, pad, IBEMU_DEFAULT_PKEY, dst_qpn, psn,
		     ackreq);
}

/* ---- RETH, IBA 9.3.3 ---- */

static inline uint64_t pkt_reth_va(const struct pkt *p)
{
	return be64toh(((const struct reth *)pkt_hdr_at(p, p->op->reth))->va);
}

static inline uint32_t pkt_reth_rkey(const struct pkt *p)
{
	return be32toh(((const struct reth *)pkt_hdr_at(p, p->op->reth))->rkey);
}

static inline uint32_t pkt_reth_len(const struct pkt *p)
{
	return be32toh(((const struct reth *)pkt_hdr_at(p, p->op->reth))->len);
}

static inline void out_set_reth(struct pkt_out *out, uint64_t va,
				uint32_t rkey, uint32_t len)
{
	struct reth *reth = out_hdr_at(out, out->op->reth);

	reth->va = htobe64(va);
	reth->rkey = htobe32(rkey);
	reth->len = htobe32(len);
}

/* ---- AETH, IBA 9.3.5: syndrome (table 44) and MSN ---- */

static inline uint8_t pkt_aeth_syndrome(const struct pkt *p)
{
	return (uint8_t)(be32toh(((const struct aeth *)pkt_hdr_at(
					  p, p->op->aeth))->smsn) >> 24);
}

static inline uint32_t pkt_aeth_msn(const struct pkt *p)
{
	return be32toh(((const struct aeth *)pkt_hdr_at(p, p->op->aeth))
			       ->smsn) &
	       0xffffff;
}

static inline void out_set_aeth(struct pkt_out *out, uint8_t syndrome,
				uint32_t msn)
{
	struct aeth *aeth = out_hdr_at(out, out->op->aeth);

	aeth->smsn = htobe32((uint32_t)syndrome << 24 | (msn & 0xffffff));
}

/* ---- AtomicETH, IBA 9.3.4; AtomicAckETH, IBA 9.3.6 ---- */

static inline const struct atmeth *pkt_atmeth(const struct pkt *p)
{
	return pkt_hdr_at(p, p->op->atmeth);
}

static inline uint64_t pkt_atmeth_va(const struct pkt *p)
{
	return be64toh(pkt_atmeth(p)->va);
}

static inline uint32_t pkt_atmeth_rkey(const struct pkt *p)
{
	return be32toh(pkt_atmeth(p)->rkey);
}

static inline uint64_t pkt_atmeth_swap_add(const struct pkt *p)
{
	return be64toh(pkt_atmeth(p)->swap_add);
}

static inline uint64_t pkt_atmeth_compare(const struct pkt *p)
{
	return be64toh(pkt_atmeth(p)->compare);
}

static inline void out_set_atmeth(struct pkt_out *out, uint64_t va,
				  uint32_t rkey, uint64_t swap_add,
				  uint64_t compare)
{
	struct atmeth *a = out_hdr_at(out, out->op->atmeth);

	a->va = htobe64(va);
	a->rkey = htobe32(rkey);
	a->swap_add = htobe64(swap_add);
	a->compare = htobe64(compare);
}

static inline uint64_t pkt_atmack_orig(const struct pkt *p)
{
	return be64toh(((const struct atmack *)pkt_hdr_at(p, p->op->atmack))
			       ->orig);
}

static inline void out_set_atmack(struct pkt_out *out, uint64_t orig)
{
	((struct atmack *)out_hdr_at(out, out->op->atmack))->orig =
		htobe64(orig);
}

/* ---- ImmDt, IBA 9.3.7: kept in network order, as verbs report it ---- */

static inline uint32_t pkt_immdt(const struct pkt *p)
{
	return ((const struct immdt *)pkt_hdr_at(p, p->op->immdt))->imm;
}

static inline void out_set_immdt(struct pkt_out *out, uint32_t imm_be)
{
	((struct immdt *)out_hdr_at(out, out->op->immdt))->imm = imm_be;
}

/* ---- IETH, IBA 9.3.8 ---- */

static inline uint32_t pkt_ieth_rkey(const struct pkt *p)
{
	return be32toh(((const struct ieth *)pkt_hdr_at(p, p->op->ieth))->rkey);
}

static inline void out_set_ieth(struct pkt_out *out, uint32_t rkey)
{
	((struct ieth *)out_hdr_at(out, out->op->ieth))->rkey = htobe32(rkey);
}

/* ---- DETH, IBA 9.3.2 ---- */

static inline uint32_t pkt_deth_qkey(const struct pkt *p)
{
	return be32toh(((const struct deth *)pkt_hdr_at(p, p->op->deth))
			       ->qkey);
}

static inline uint32_t pkt_deth_sqp(const struct pkt *p)
{
	return be32toh(((const struct deth *)pkt_hdr_at(p, p->op->deth))
			       ->sqp) &
	       BTH_QPN_MASK;
}

static inline void out_set_deth(struct pkt_out *out, uint32_t qkey,
				uint32_t src_qpn)
{
	struct deth *deth = out_hdr_at(out, out->op->deth);

	deth->qkey = htobe32(qkey);
	deth->sqp = htobe32(src_qpn & BTH_QPN_MASK);
}

/* ---- XRCETH, IBA A14 ---- */

static inline uint32_t pkt_xrceth_srqn(const struct pkt *p)
{
	return be32toh(((const struct xrceth *)pkt_hdr_at(p, p->op->xrceth))
			       ->srqn) &
	       BTH_QPN_MASK;
}

static inline void out_set_xrceth(struct pkt_out *out, uint32_t srqn)
{
	((struct xrceth *)out_hdr_at(out, out->op->xrceth))->srqn =
		htobe32(srqn & BTH_QPN_MASK);
}

static inline uint64_t pkt_dceth_key(const struct pkt *p)
{
	const struct dceth *h =
		(const struct dceth *)pkt_hdr_at(p, p->op->dceth);

	return be64toh(h->key);
}

static inline uint32_t pkt_dceth_stream_psn(const struct pkt *p)
{
	const struct dceth *h =
		(const struct dceth *)pkt_hdr_at(p, p->op->dceth);

	return be32toh(h->stream_psn) & BTH_PSN_MASK;
}

static inline void out_set_dceth(struct pkt_out *out, uint64_t key,
				 uint32_t stream_psn)
{
	struct dceth *h = (struct dceth *)out_hdr_at(out, out->op->dceth);

	h->key = htobe64(key);
	h->stream_psn = htobe32(stream_psn & BTH_PSN_MASK);
}

#endif /* IBEMU_HDR_H */
