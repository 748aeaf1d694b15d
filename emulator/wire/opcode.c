// SPDX-License-Identifier: MIT
/*
 * The opcode table (IBA 9.2, table 35, and 9.3: which extended headers
 * each packet carries, in the order BTH, DETH, RETH, AtomicETH, AETH,
 * AtomicAckETH, ImmDt, IETH; IBA A14: an XRC request has the XRCETH
 * right after the BTH; ibemu's DC requests have the DCETH there).
 * Built once from the per-operation rules below.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>

#include "opcode.h"
#include "wire.h"

#define B sizeof(struct bth)

/* One row: name, mask; offsets follow from the mask (see layout()). */
#define OP(code, nm, m) [code] = { .name = nm, .mask = (m) }

#define RC_SEND (OPM_RC | OPM_REQ | OPM_SEND | OPM_PAYLOAD)
#define RC_WRITE (OPM_RC | OPM_REQ | OPM_WRITE | OPM_PAYLOAD)
#define RC_RRESP (OPM_RC | OPM_RESP | OPM_READ | OPM_PAYLOAD)
#define UC_SEND (OPM_UC | OPM_REQ | OPM_SEND | OPM_PAYLOAD)
#define UC_WRITE (OPM_UC | OPM_REQ | OPM_WRITE | OPM_PAYLOAD)
/* XRC (IBA A14): the RC operations under prefix 101b; requests carry
 * the XRCETH, responses do not. */
#define XRC_REQ (OPM_XRC | OPM_REQ | OPM_XRCETH)
#define XRC_SEND (XRC_REQ | OPM_SEND | OPM_PAYLOAD)
#define XRC_WRITE (XRC_REQ | OPM_WRITE | OPM_PAYLOAD)
#define XRC_RRESP (OPM_XRC | OPM_RESP | OPM_READ | OPM_PAYLOAD)
#define UD_SEND (OPM_UD | OPM_REQ | OPM_SEND | OPM_PAYLOAD | OPM_DETH | OPM_ONLY)

static const struct opcode_info opcode_rows[256] = {
	OP(0x00, "RC_SEND_FIRST", RC_SEND | OPM_FIRST),
	OP(0x01, "RC_SEND_MIDDLE", RC_SEND | OPM_MIDDLE),
	OP(0x02, "RC_SEND_LAST", RC_SEND | OPM_LAST),
	OP(0x03, "RC_SEND_LAST_WITH_IMMEDIATE", RC_SEND | OPM_LAST | OPM_IMMDT),
	OP(0x04, "RC_SEND_ONLY", RC_SEND | OPM_ONLY),
	OP(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", RC_SEND | OPM_ONLY | OPM_IMMDT),
	OP(0x06, "RC_RDMA_WRITE_FIRST", RC_WRITE | OPM_FIRST | OPM_RETH),
	OP(0x07, "RC_RDMA_WRITE_MIDDLE", RC_WRITE | OPM_MIDDLE),
	OP(0x08, "RC_RDMA_WRITE_LAST", RC_WRITE | OPM_LAST),
	OP(0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	   RC_WRITE | OPM_LAST | OPM_IMMDT),
	OP(0x0a, "RC_RDMA_WRITE_ONLY", RC_WRITE | OPM_ONLY | OPM_RETH),
	OP(0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	   RC_WRITE | OPM_ONLY | OPM_RETH | OPM_IMMDT),
	OP(0x0c, "RC_RDMA_READ_REQUEST",
	   OPM_RC | OPM_REQ | OPM_READ | OPM_ONLY | OPM_RETH),
	OP(0x0d, "RC_RDMA_READ_RESPONSE_FIRST", RC_RRESP | OPM_FIRST | OPM_AETH),
	OP(0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", RC_RRESP | OPM_MIDDLE),
	OP(0x0f, "RC_RDMA_READ_RESPONSE_LAST", RC_RRESP | OPM_LAST | OPM_AETH),
	OP(0x10, "RC_RDMA_READ_RESPONSE_ONLY", RC_RRESP | OPM_ONLY | OPM_AETH),
	OP(0x11, "RC_ACKNOWLEDGE", OPM_RC | OPM_RESP | OPM_ONLY | OPM_AETH),
	OP(0x12, "RC_ATOMIC_ACKNOWLEDGE",
	   OPM_RC | OPM_RESP | OPM_ATOMIC | OPM_ONLY | OPM_AETH | OPM_ATMACK),
	OP(0x13, "RC_COMPARE_SWAP",
	   OPM_RC | OPM_REQ | OPM_ATOMIC | OPM_ONLY | OPM_ATMETH),
	OP(0x14, "RC_FETCH_ADD",
	   OPM_RC | OPM_REQ | OPM_ATOMIC | OPM_ONLY | OPM_ATMETH),
	OP(0x16, "RC_SEND_LAST_WITH_INVALIDATE", RC_SEND | OPM_LAST | OPM_IETH),
	OP(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", RC_SEND | OPM_ONLY | OPM_IETH),
	/* RETH and an 8-byte payload, answered by an RC ACKNOWLEDGE (IBA
	 * 1.5 RDMA ATOMIC WRITE). */
	OP(0x1d, "RC_ATOMIC_WRITE",
	   RC_WRITE | OPM_ONLY | OPM_RETH | OPM_ATOMIC_WRITE),

	OP(0x20, "UC_SEND_FIRST", UC_SEND | OPM_FIRST),
	OP(0x21, "UC_SEND_MIDDLE", UC_SEND | OPM_MIDDLE),
	OP(0x22, "UC_SEND_LAST", UC_SEND | OPM_LAST),
	OP(0x23, "UC_SEND_LAST_WITH_IMMEDIATE", UC_SEND | OPM_LAST | OPM_IMMDT),
	OP(0x24, "UC_SEND_ONLY", UC_SEND | OPM_ONLY),
	OP(0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", UC_SEND | OPM_ONLY | OPM_IMMDT),
	OP(0x26, "UC_RDMA_WRITE_FIRST", UC_WRITE | OPM_FIRST | OPM_RETH),
	OP(0x27, "UC_RDMA_WRITE_MIDDLE", UC_WRITE | OPM_MIDDLE),
	OP(0x28, "UC_RDMA_WRITE_LAST", UC_WRITE | OPM_LAST),
	OP(0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	   UC_WRITE | OPM_LAST | OPM_IMMDT),
	OP(0x2a, "UC_RDMA_WRITE_ONLY", UC_WRITE | OPM_ONLY | OPM_RETH),
	OP(0x2b, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	   UC_WRITE | OPM_ONLY | OPM_RETH | OPM_IMMDT),

	OP(0x64, "UD_SEND_ONLY", UD_SEND),
	OP(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", UD_SEND | OPM_IMMDT),

	OP(0xa0, "XRC_SEND_FIRST", XRC_SEND | OPM_FIRST),
	OP(0xa1, "XRC_SEND_MIDDLE", XRC_SEND | OPM_MIDDLE),
	OP(0xa2, "XRC_SEND_LAST", XRC_SEND | OPM_LAST),
	OP(0xa3, "XRC_SEND_LAST_WITH_IMMEDIATE",
	   XRC_SEND | OPM_LAST | OPM_IMMDT),
	OP(0xa4, "XRC_SEND_ONLY", XRC_SEND | OPM_ONLY),
	OP(0xa5, "XRC_SEND_ONLY_WITH_IMMEDIATE",
	   XRC_SEND | OPM_ONLY | OPM_IMMDT),
	OP(0xa6, "XRC_RDMA_WRITE_FIRST", XRC_WRITE | OPM_FIRST | OPM_RETH),
	OP(0xa7, "XRC_RDMA_WRITE_MIDDLE", XRC_WRITE | OPM_MIDDLE),
	OP(0xa8, "XRC_RDMA_WRITE_LAST", XRC_WRITE | OPM_LAST),
	OP(0xa9, "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE",
	   XRC_WRITE | OPM_LAST | OPM_IMMDT),
	OP(0xaa, "XRC_RDMA_WRITE_ONLY", XRC_WRITE | OPM_ONLY | OPM_RETH),
	OP(0xab, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
	   XRC_WRITE | OPM_ONLY | OPM_RETH | OPM_IMMDT),
	OP(0xac, "XRC_RDMA_READ_REQUEST",
	   XRC_REQ | OPM_READ | OPM_ONLY | OPM_RETH),
	OP(0xad, "XRC_RDMA_READ_RESPONSE_FIRST",
	   XRC_RRESP | OPM_FIRST | OPM_AETH),
	OP(0xae, "XRC_RDMA_READ_RESPONSE_MIDDLE", XRC_RRESP | OPM_MIDDLE),
	OP(0xaf, "XRC_RDMA_READ_RESPONSE_LAST",
	   XRC_RRESP | OPM_LAST | OPM_AETH),
	OP(0xb0, "XRC_RDMA_READ_RESPONSE_ONLY",
	   XRC_RRESP | OPM_ONLY | OPM_AETH),
	OP(0xb1, "XRC_ACKNOWLEDGE", OPM_XRC | OPM_RESP | OPM_ONLY | OPM_AETH),
	OP(0xb2, "XRC_ATOMIC_ACKNOWLEDGE",
	   OPM_XRC | OPM_RESP | OPM_ATOMIC | OPM_ONLY | OPM_AETH | OPM_ATMACK),
	OP(0xb3, "XRC_COMPARE_SWAP",
	   XRC_REQ | OPM_ATOMIC | OPM_ONLY | OPM_ATMETH),
	OP(0xb4, "XRC_FETCH_ADD", XRC_REQ | OPM_ATOMIC | OPM_ONLY | OPM_ATMETH),
	OP(0xb6, "XRC_SEND_LAST_WITH_INVALIDATE",
	   XRC_SEND | OPM_LAST | OPM_IETH),
	OP(0xb7, "XRC_SEND_ONLY_WITH_INVALIDATE",
	   XRC_SEND | OPM_ONLY | OPM_IETH),
	OP(0xbd, "XRC_ATOMIC_WRITE",
	   XRC_WRITE | OPM_ONLY | OPM_RETH | OPM_ATOMIC_WRITE),

};

/* Header order after the BTH, IBA 9.2 and A14: XRCETH (or our DCETH),
 * DETH, RETH, AtomicETH, AETH, AtomicAckETH, ImmDt, IETH (never with
 * ImmDt). */
static struct opcode_info layout(struct opcode_info in)
{
	uint8_t off = B;

	if (!in.mask)
		return in;
	if (in.mask & OPM_XRCETH) {
		in.xrceth = off;
		off += sizeof(struct xrceth);
	}
	if (in.mask & OPM_DCETH) {
		in.dceth = off;
		off += sizeof(struct dceth);
	}
	if (in.mask & OPM_DETH) {
		in.deth = off;
		off += sizeof(struct deth);
	}
	if (in.mask & OPM_RETH) {
		in.reth = off;
		off += sizeof(struct reth);
	}
	if (in.mask & OPM_ATMETH) {
		in.atmeth = off;
		off += sizeof(struct atmeth);
	}
	if (in.mask & OPM_AETH) {
		in.aeth = off;
		off += sizeof(struct aeth);
	}
	if (in.mask & OPM_ATMACK) {
		in.atmack = off;
		off += sizeof(struct atmack);
	}
	if (in.mask & OPM_IMMDT) {
		in.immdt = off;
		off += sizeof(struct immdt);
	}
	if (in.mask & OPM_IETH) {
		in.ieth = off;
		off += sizeof(struct ieth);
	}
	in.hdr_len = off;
	return in;
}

struct opcode_info opcode_table[256];

/*
 * DC (prefix 110b, ours; doc/design.md, "The Dynamically Connected
 * transport"): each RC request again, named DC_..., with a DCETH after
 * the BTH.  There are no DC responses: they are RC's.
 */
static char dc_names[32][48];

static struct opcode_info dc_row(unsigned int low)
{
	struct opcode_info rc = opcode_rows[IB_OPCODE_RC + low], dc = { 0 };

	if (!(rc.mask & OPM_REQ))
		return dc;
	snprintf(dc_names[low], sizeof(dc_names[low]), "DC_%s",
		 rc.name + sizeof("RC_") - 1);
	dc.name = dc_names[low];
	dc.mask = (rc.mask & ~OPM_RC) | OPM_DC | OPM_DCETH;
	return dc;
}

static void __attribute__((constructor)) opcode_table_init(void)
{
	unsigned int i;

	for (i = 0; i < 256; i++)
		opcode_table[i] = layout(opcode_rows[i]);
	for (i = 0; i < 32; i++)
		opcode_table[IB_OPCODE_DC + i] = layout(dc_row(i));
}
