/* SPDX-License-Identifier: MIT */
/*
 * The wire format: InfiniBand transport headers exactly as IBA chapter 9
 * lays them out, in network byte order, so that any packet can be written
 * to a capture as RoCEv2 and dissected.
 *
 * A packet on an ibemu transport is a struct pkt_hdr (the link: who sent
 * it, to which process) followed by BTH, the extended headers its opcode
 * calls for (opcode.c), and the payload.
 */
#ifndef IBEMU_WIRE_H
#define IBEMU_WIRE_H

#include <endian.h>
#include <linux/types.h>
#include <stdbool.h>
#include <stdint.h>

/* Base Transport Header, IBA 9.2 (12 bytes). */
struct bth {
	uint8_t opcode;
	uint8_t flags; /* SE:1 M:1 PadCnt:2 TVer:4 */
	__be16 pkey;
	__be32 qpn; /* FECN:1 BECN:1 resv:6 DestQP:24 */
	__be32 apsn; /* AckReq:1 resv:7 PSN:24 */
};

#define BTH_SE 0x80
#define BTH_MIG 0x40
#define BTH_PAD_SHIFT 4
#define BTH_ACKREQ 0x80000000u
#define BTH_QPN_MASK 0x00ffffffu
/* The DestQP of a multicast datagram; the group is the packet's MLID and
 * MGID (IBA 10.5). */
#define BTH_QPN_MULTICAST 0x00ffffffu

/* Multicast LIDs are 0xc000..0xfffe (IBA 4.1.3); 0xffff is permissive. */
static inline bool lid_is_multicast(uint16_t lid)
{
	return lid >= 0xc000 && lid != 0xffff;
}
#define BTH_PSN_MASK 0x00ffffffu

/* RDMA Extended Transport Header, IBA 9.3.3 (16 bytes). */
struct reth {
	__be64 va;
	__be32 rkey;
	__be32 len;
} __attribute__((packed));

/* ACK Extended Transport Header, IBA 9.3.5 (4 bytes). */
struct aeth {
	__be32 smsn; /* Syndrome:8 MSN:24 */
};

/* AETH syndromes, IBA 9.7.5.2.x (table 44). */
#define AETH_TYPE_MASK 0xe0
#define AETH_ACK 0x00 /* low 5 bits: credit count */
#define AETH_RNR_NAK 0x20 /* low 5 bits: RNR timer */
#define AETH_NAK 0x60 /* low 5 bits: NAK code */
#define AETH_NAK_PSN_SEQ_ERR 0
#define AETH_NAK_INVALID_REQ 1
#define AETH_NAK_REM_ACC_ERR 2
#define AETH_NAK_REM_OP_ERR 3
#define AETH_NAK_INV_RD_REQ 4
#define AETH_ACK_UNLIMITED 0x1f /* credit count: unlimited (IBA 9.7.7.2) */

/* Atomic Extended Transport Header, IBA 9.3.4 (28 bytes). */
struct atmeth {
	__be64 va;
	__be32 rkey;
	__be64 swap_add;
	__be64 compare;
} __attribute__((packed));

/* Atomic Acknowledge Extended Transport Header, IBA 9.3.6 (8 bytes). */
struct atmack {
	__be64 orig;
} __attribute__((packed));

/* Immediate data, IBA 9.3.7 (4 bytes). */
struct immdt {
	__be32 imm;
};

/* Invalidate Extended Transport Header, IBA 9.3.8 (4 bytes): the R_Key a
 * SEND with Invalidate invalidates at the responder. */
struct ieth {
	__be32 rkey;
};

/* Datagram Extended Transport Header, IBA 9.3.2 (8 bytes). */
struct deth {
	__be32 qkey;
	__be32 sqp; /* resv:8 SrcQP:24 */
};

/* XRC Extended Transport Header, IBA A14 (4 bytes): the XRC SRQ the
 * request is for. */
struct xrceth {
	__be32 srqn; /* resv:8 XRCSRQ:24 */
};

/* DC Extended Transport Header, ibemu's own (doc/design.md, "The
 * Dynamically Connected transport"; prefix 110b is manufacturer specific,
 * IBA 9.2 table 35): right after the BTH of every DC request, the DC
 * access key the target DCT must have and the PSN at which the
 * initiator's stream to it began, so that any packet of a new stream
 * starts the target's responder context for it (12 bytes). */
struct dceth {
	__be64 key;
	__be32 stream_psn; /* resv:8 PSN:24 */
} __attribute__((packed));

_Static_assert(sizeof(struct dceth) == 12, "DCETH is 12 bytes");
_Static_assert(sizeof(struct xrceth) == 4, "XRCETH is 4 bytes");
_Static_assert(sizeof(struct bth) == 12, "BTH is 12 bytes");
_Static_assert(sizeof(struct reth) == 16, "RETH is 16 bytes");
_Static_assert(sizeof(struct aeth) == 4, "AETH is 4 bytes");
_Static_assert(sizeof(struct atmeth) == 28, "AtomicETH is 28 bytes");
_Static_assert(sizeof(struct atmack) == 8, "AtomicAckETH is 8 bytes");
_Static_assert(sizeof(struct deth) == 8, "DETH is 8 bytes");

/*
 * What the link layer would carry (LRH/GRH): the sender's LID, process and
 * QPN, so the receiving node can route the answer without a lookup.
 */
struct pkt_hdr {
	uint32_t len; /* bytes after this header: BTH..payload */
	uint16_t slid, dlid;
	uint32_t src_qpn;
	int32_t src_proc; /* sender's slot in the node segment */
	uint32_t flags; /* PKT_F_* */
};

/* GRH fields a UD receiver gets in its first 40 bytes (IBA 8.3), carried
 * beside the packet when PKT_F_GRH is set. */
struct pkt_grh {
	uint32_t flow; /* version:4 tclass:8 flow:20 */
	uint8_t hop_limit;
	uint8_t sgid[16], dgid[16];
};

#define PKT_F_GRH 1u /* the packet carries a global route header */
/* A SEND whose payload stays in the sender: the packet carries a struct
 * pull_desc and the responder copies the data itself (cma.c). */
#define PKT_F_PULL 2u
/* From another node (mcast_ip.c): a multicast datagram whose DLID is
 * the sender's node's MLID for the group, which need not be ours; its
 * GRH's MGID names the group. */
#define PKT_F_FOREIGN 4u
/* Sent out of a port that is down (progress.c): the link never carried
 * it, the receiver drops it. */
#define PKT_F_LOST 8u
/* A second packet follows this one in the same room: the acknowledgement
 * the sender's responder owed to the destination QP (ack_bundle.c), as
 * struct bundled_ack at pkt_bundle_off.  Only the node's shared-memory
 * transport carries it; the receiver rebuilds the ACK's BTH from the
 * first packet's and parses and checks each packet as if it had come
 * alone. */
#define PKT_F_ACK_BUNDLED 16u

/* Where a pulled SEND's data is: the sender's process and segments. */
struct pull_seg {
	uint64_t addr, len;
	/* The sender's memfd window holding the segment (mr_memfd.h): file
	 * offset, the sender's address of its start, length; 0: none */
	uint64_t win_off, win_lo, win_len;
};

struct pull_desc {
	int32_t pid; /* informative: the responder pulls from the QP's peer */
	uint32_t nr;
	uint64_t length;
	int32_t map_fd; /* the sender's memfd, -1: none */
	uint32_t reserved;
	uint64_t map_id; /* the id in its name (mr_memfd.h) */
	struct pull_seg seg[];
};

/* A pull descriptor as the responder keeps it: copied once out of the
 * shared slot, with nr checked, before anything uses it.  A requester
 * describes at most one segment per SGE. */
#define PULL_MAX_SEGS 32
struct pull_desc_copy {
	uint32_t nr; /* <= PULL_MAX_SEGS */
	uint64_t length;
	int32_t map_fd;
	uint64_t map_id;
	struct pull_seg seg[PULL_MAX_SEGS];
};

/* The largest packet: headers plus one path MTU of payload. */
#define PKT_MAX_HDRS 64
#define PKT_MAX_PAYLOAD 4096
#define PKT_MAX_LEN (PKT_MAX_HDRS + PKT_MAX_PAYLOAD)

/* A bundled acknowledgement, 4-byte aligned behind a packet of len
 * bytes: of an RC ACKNOWLEDGE (IBA 9.2, table 35) to the same QP, what
 * differs from the first packet's BTH (its PSN) and its AETH; 8 bytes,
 * so that behind a small SEND it shares the slot's first cache line. */
struct bundled_ack {
	__be32 psn;
	__be32 aeth;
};
#define PKT_BUNDLE_ACK_LEN ((uint32_t)sizeof(struct bundled_ack))
static inline uint32_t pkt_bundle_off(uint32_t len)
{
	return (len + 3u) & ~3u;
}

/* Whether room of PKT_MAX_LEN bytes holds a bundled acknowledgement
 * behind a packet of len bytes. */
static inline bool pkt_bundle_fits(uint32_t len)
{
	return len <= PKT_MAX_LEN &&
	       pkt_bundle_off(len) + PKT_BUNDLE_ACK_LEN <= PKT_MAX_LEN;
}

static inline uint32_t bth_psn(const struct bth *b)
{
	return be32toh(b->apsn) & BTH_PSN_MASK;
}
static inline uint32_t bth_qpn(const struct bth *b)
{
	return be32toh(b->qpn) & BTH_QPN_MASK;
}
static inline unsigned int bth_pad(const struct bth *b)
{
	return (b->flags >> BTH_PAD_SHIFT) & 3;
}

/* 24-bit PSN arithmetic, IBA 9.7.1: differences taken modulo 2^24. */
static inline int32_t psn_cmp(uint32_t a, uint32_t b)
{
	return (int32_t)((a - b) << 8) >> 8;
}
static inline uint32_t psn_add(uint32_t psn, uint32_t n)
{
	return (psn + n) & BTH_PSN_MASK;
}

/* PSNs a message of len bytes takes at this MTU: one per packet, one for
 * an empty message (IBA 9.7.1; a READ counts its response packets). */
static inline uint32_t psn_span(uint32_t len, uint32_t mtu)
{
	return len ? (len + mtu - 1) / mtu : 1;
}

#endif /* IBEMU_WIRE_H */
