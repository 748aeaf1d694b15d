/* SPDX-License-Identifier: MIT */
/*
 * The transport opcodes, IBA 9.2 table 35: one entry per opcode saying
 * which extended headers follow the BTH and what kind of packet it is.
 * The engines test these bits; they do not switch on opcodes.
 */
#ifndef IBEMU_OPCODE_H
#define IBEMU_OPCODE_H

#include <stdint.h>

enum ib_opcode {
	/* transport prefixes, IBA 9.2.1 */
	IB_OPCODE_RC = 0x00,
	IB_OPCODE_UC = 0x20,
	IB_OPCODE_RD = 0x40,
	IB_OPCODE_UD = 0x60,
	IB_OPCODE_XRC = 0xa0, /* IBA A14: the XRC transport prefix */
	/* IBA 9.2 table 35 leaves prefixes 110b and 111b to the
	 * manufacturer: 110b carries the requests of the Dynamically
	 * Connected transport (doc/design.md, "The Dynamically Connected
	 * transport"), with RC's low five bits. */
	IB_OPCODE_DC = 0xc0,
	IB_OPCODE_MASK_PREFIX = 0xe0, /* the prefix bits of an opcode */

	IB_OP_SEND_FIRST = 0x00,
	IB_OP_SEND_MIDDLE = 0x01,
	IB_OP_SEND_LAST = 0x02,
	IB_OP_SEND_LAST_IMM = 0x03,
	IB_OP_SEND_ONLY = 0x04,
	IB_OP_SEND_ONLY_IMM = 0x05,
	IB_OP_WRITE_FIRST = 0x06,
	IB_OP_WRITE_MIDDLE = 0x07,
	IB_OP_WRITE_LAST = 0x08,
	IB_OP_WRITE_LAST_IMM = 0x09,
	IB_OP_WRITE_ONLY = 0x0a,
	IB_OP_WRITE_ONLY_IMM = 0x0b,
	IB_OP_READ_REQUEST = 0x0c,
	IB_OP_READ_RESPONSE_FIRST = 0x0d,
	IB_OP_READ_RESPONSE_MIDDLE = 0x0e,
	IB_OP_READ_RESPONSE_LAST = 0x0f,
	IB_OP_READ_RESPONSE_ONLY = 0x10,
	IB_OP_ACKNOWLEDGE = 0x11,
	IB_OP_ATOMIC_ACKNOWLEDGE = 0x12,
	IB_OP_COMPARE_SWAP = 0x13,
	IB_OP_FETCH_ADD = 0x14,
	IB_OP_SEND_LAST_INV = 0x16,
	IB_OP_SEND_ONLY_INV = 0x17,
	IB_OP_ATOMIC_WRITE = 0x1d, /* IBA 1.5 RDMA ATOMIC WRITE, RC only */
};

enum opcode_mask {
	OPM_RETH = 1 << 0,
	OPM_AETH = 1 << 1,
	OPM_ATMETH = 1 << 2,
	OPM_ATMACK = 1 << 3,
	OPM_IMMDT = 1 << 4,
	OPM_DETH = 1 << 5,
	OPM_PAYLOAD = 1 << 6,
	OPM_REQ = 1 << 7, /* requester to responder */
	OPM_RESP = 1 << 8, /* responder to requester */
	OPM_SEND = 1 << 9,
	OPM_WRITE = 1 << 10,
	OPM_READ = 1 << 11,
	OPM_ATOMIC = 1 << 12,
	OPM_FIRST = 1 << 13,
	OPM_MIDDLE = 1 << 14,
	OPM_LAST = 1 << 15,
	OPM_RC = 1 << 16,
	OPM_UC = 1 << 17,
	OPM_UD = 1 << 18,
	OPM_IETH = 1 << 19,
	/* an RDMA WRITE of one aligned 8-byte word, stored at once */
	OPM_ATOMIC_WRITE = 1 << 20,
	OPM_XRC = 1 << 21,
	OPM_XRCETH = 1 << 22, /* every XRC request (IBA A14) */
	OPM_DC = 1 << 23, /* a DC request (prefix 110b, ours) */
	OPM_DCETH = 1 << 24, /* every DC request: struct dceth */
	OPM_ONLY = OPM_FIRST | OPM_LAST,
};

struct opcode_info {
	const char *name;
	uint32_t mask; /* 0: reserved opcode */
	uint8_t hdr_len; /* BTH plus extended headers */
	/* offsets from the start of the BTH; 0 if absent */
	uint8_t reth, aeth, atmeth, atmack, immdt, deth, ieth, xrceth, dceth;
};

/* Filled by a constructor when the library loads; read-only afterwards. */
extern struct opcode_info opcode_table[256];

static inline const struct opcode_info *opcode_get(uint8_t op)
{
	return &opcode_table[op];
}

#endif /* IBEMU_OPCODE_H */
