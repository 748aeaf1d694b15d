/* SPDX-License-Identifier: MIT */
/*
 * What each work request opcode is, said once (IBA 10.8.2 / manual
 * 3.6.4, table of operations per transport): which QP types carry it,
 * whether it reads, is an atomic, moves data from the requester, needs a
 * response, and its completion opcode (manual 3.6.10).  Callers test the
 * bits; nobody repeats the list of opcodes.
 */
#ifndef IBEMU_WR_OPCODE_H
#define IBEMU_WR_OPCODE_H

#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/*
 * RDMA ATOMIC WRITE (IBA 1.5) came to libibverbs with rdma-core 44
 * (IBV_WR_ATOMIC_WRITE, IBV_WC_ATOMIC_WRITE).  The HCA serves it whatever
 * headers it is built with, under rdma-core's values: its enums are ABI
 * and never renumbered.  Whether it is offered to a program is the
 * provider's decision (provider/verbs/qp_ex.c).
 */
#if HAVE_DECL_IBV_WR_ATOMIC_WRITE
#define EMU_WR_ATOMIC_WRITE IBV_WR_ATOMIC_WRITE
#define EMU_WC_ATOMIC_WRITE IBV_WC_ATOMIC_WRITE
_Static_assert(IBV_WR_ATOMIC_WRITE == 15 && IBV_WC_ATOMIC_WRITE == 9,
	       "rdma-core's atomic write opcodes");
#else
#define EMU_WR_ATOMIC_WRITE ((enum ibv_wr_opcode)15)
#define EMU_WC_ATOMIC_WRITE ((enum ibv_wc_opcode)9)
#endif

enum wr_mask {
	WR_SEND = 1 << 0,
	WR_WRITE = 1 << 1,
	WR_READ = 1 << 2,
	WR_ATOMIC = 1 << 3,
	WR_IMM = 1 << 4,
	WR_PAYLOAD = 1 << 5, /* carries data from the requester */
	WR_RC = 1 << 6, /* allowed on RC, UC, UD QPs */
	WR_UC = 1 << 7,
	WR_UD = 1 << 8,
	WR_LOCAL = 1 << 9, /* executed by the HCA itself: no packet */
	WR_INV = 1 << 10, /* carries an R_Key to invalidate */
	WR_ATOMIC_WRITE = 1 << 11, /* an 8-byte WRITE stored at once */
	WR_RD_ATOMIC = WR_READ | WR_ATOMIC, /* needs a responder resource */
};

struct wr_opcode_info {
	const char *name;
	uint32_t mask; /* 0: not an opcode this HCA offers */
	enum ibv_wc_opcode wc_opcode;
};

/* The table runs to EMU_WR_UMR (emu.h), the last opcode it holds. */
#define WR_OPCODE_MAX 0x41
extern const struct wr_opcode_info wr_opcode_table[WR_OPCODE_MAX];

/* The entry of opcode, or one with mask 0 for anything unknown. */
static inline const struct wr_opcode_info *wr_opcode_get(uint32_t opcode)
{
	static const struct wr_opcode_info none = { "INVALID", 0, 0 };

	return opcode < WR_OPCODE_MAX ? &wr_opcode_table[opcode] : &none;
}

static inline bool wr_is(uint32_t opcode, uint32_t mask)
{
	return (wr_opcode_get(opcode)->mask & mask) != 0;
}

/* Whether a QP of type may post opcode (IBA 9.2 opcode table). */
static inline bool wr_opcode_valid(enum ibv_qp_type type, uint32_t opcode)
{
	uint32_t m = wr_opcode_get(opcode)->mask;

	switch (type) {
	case IBV_QPT_RC:
	case IBV_QPT_XRC_SEND: /* the RC operations (IBA A14) */
		return m & WR_RC;
	case IBV_QPT_UC:
		return m & WR_UC;
	case IBV_QPT_UD:
		return m & WR_UD;
	default:
		return false;
	}
}

#endif /* IBEMU_WR_OPCODE_H */
