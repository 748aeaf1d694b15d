/* SPDX-License-Identifier: MIT */
/*
 * Frames between nodes (tp_tcp.c over TCP, mcast_ip.c over UDP): a link
 * header in network byte order, then the GRH in its IBA 8.3 layout when
 * the packet has one, then the packet exactly as the shared-memory
 * transport carries it (BTH, extended headers, payload: the bytes a
 * RoCEv2 capture shows after the UDP header).
 *
 * Everything in a frame comes from another host: a receiver copies the
 * link header and GRH out once and checks them (tp_frame_check) before
 * anything else is read.
 */
#ifndef IBEMU_TP_FRAME_H
#define IBEMU_TP_FRAME_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "wire.h"

#define TP_FRAME_MAGIC 0x69626d66u /* "ibmf" */
#define TP_FRAME_VERSION 2 /* 2: HELLO and LOOKUP carry the key's challenges */

enum tp_frame_type {
	TP_FRAME_DATA = 1, /* one packet */
	TP_FRAME_HELLO = 2, /* first frame of a connection, each way */
	TP_FRAME_LOOKUP = 3, /* ask a node's door who owns a QPN */
	TP_FRAME_LOOKUP_REPLY = 4,
};

#define TP_FRAME_F_GRH 1u /* a GRH follows the link header */
/* A multicast datagram ends in TP_FRAME_MAC_LEN bytes of its MAC under
 * the fabric key (mcast_ip.c), not counted in len. */
#define TP_FRAME_F_MAC 2u
#define TP_FRAME_MAC_LEN 16

struct tp_frame_hdr {
	__be32 magic;
	uint8_t version;
	uint8_t type; /* enum tp_frame_type */
	uint8_t flags; /* TP_FRAME_F_* */
	uint8_t resv;
	__be32 len; /* bytes after this header (GRH and packet) */
	__be16 slid, dlid; /* the LRH's (IBA 7.7) */
	__be32 src_qpn; /* informative: the BTH/DETH carry it */
	__be64 src_guid; /* the sending node's port GUID */
	__be32 src_slot; /* the sending process's slot on its node */
	__be32 dst_slot; /* the receiving process's, -1: by QPN */
	__be64 src_token; /* the sending process's node token */
};

_Static_assert(sizeof(struct tp_frame_hdr) == 48, "frame header size");

/* The global route header as IBA 8.3 lays it out (40 bytes). */
struct tp_frame_grh {
	__be32 ver_tclass_flow; /* IPVer:4 TClass:8 FlowLabel:20 */
	__be16 paylen;
	uint8_t next_hdr; /* 0x1B: BTH follows */
	uint8_t hop_limit;
	uint8_t sgid[16], dgid[16];
};

_Static_assert(sizeof(struct tp_frame_grh) == 40, "GRH is 40 bytes");

#define TP_FRAME_GRH_NEXT_BTH 0x1b
#define TP_FRAME_MAX_LEN                                                       \
	(sizeof(struct tp_frame_grh) + PKT_MAX_LEN)

static inline void tp_frame_grh_put(struct tp_frame_grh *g,
				    const struct pkt_grh *h, uint32_t paylen)
{
	g->ver_tclass_flow = htobe32((6u << 28) | (h->flow & 0x0fffffffu));
	g->paylen = htobe16((uint16_t)paylen);
	g->next_hdr = TP_FRAME_GRH_NEXT_BTH;
	g->hop_limit = h->hop_limit;
	memcpy(g->sgid, h->sgid, 16);
	memcpy(g->dgid, h->dgid, 16);
}

static inline void tp_frame_grh_get(struct pkt_grh *h,
				    const struct tp_frame_grh *g)
{
	/* IPVer is 6 in every GRH (IBA 8.3.1): kept as the sender's
	 * engine set it, so a receive buffer's GRH reads as one */
	h->flow = (6u << 28) | (be32toh(g->ver_tclass_flow) & 0x0fffffffu);
	h->hop_limit = g->hop_limit;
	memcpy(h->sgid, g->sgid, 16);
	memcpy(h->dgid, g->dgid, 16);
}

/* A packet's link header into a DATA frame's header (LIDs as the LRH
 * has them, IBA 7.7; the source QP), and back: len, src_proc and flags
 * are the receiver's to say (what follows, who sent it as it names the
 * sender, PKT_F_*). */
static inline void tp_frame_link_put(struct tp_frame_hdr *f,
				     const struct pkt_hdr *h)
{
	f->slid = htobe16(h->slid);
	f->dlid = htobe16(h->dlid);
	f->src_qpn = htobe32(h->src_qpn);
}

static inline void tp_frame_link_get(struct pkt_hdr *h,
				     const struct tp_frame_hdr *f,
				     uint32_t len, int32_t src_proc,
				     uint32_t flags)
{
	h->len = len;
	h->slid = be16toh(f->slid);
	h->dlid = be16toh(f->dlid);
	h->src_qpn = be32toh(f->src_qpn) & BTH_QPN_MASK;
	h->src_proc = src_proc;
	h->flags = flags;
}

/* Whether a received link header (already copied out) may be used:
 * magic, version, and a length that fits a packet of its type. */
static inline bool tp_frame_check(const struct tp_frame_hdr *f)
{
	uint32_t len = be32toh(f->len);

	if (be32toh(f->magic) != TP_FRAME_MAGIC ||
	    f->version != TP_FRAME_VERSION)
		return false;
	if (f->type == TP_FRAME_DATA) {
		uint32_t grh = f->flags & TP_FRAME_F_GRH
				       ? sizeof(struct tp_frame_grh)
				       : 0;

		return len >= grh + sizeof(struct bth) &&
		       len <= grh + PKT_MAX_LEN;
	}
	return f->type >= TP_FRAME_HELLO &&
	       f->type <= TP_FRAME_LOOKUP_REPLY && len <= 4096;
}

#endif /* IBEMU_TP_FRAME_H */
