// SPDX-License-Identifier: MIT
/* The work request opcode table (see wr_opcode.h). */
#include "config.h"

#include "emu.h"
#include "wr_opcode.h"

#define ALL_QPT (WR_RC | WR_UC | WR_UD)

const struct wr_opcode_info wr_opcode_table[WR_OPCODE_MAX] = {
	[IBV_WR_RDMA_WRITE] = { "RDMA_WRITE",
				WR_WRITE | WR_PAYLOAD | WR_RC | WR_UC,
				IBV_WC_RDMA_WRITE },
	[IBV_WR_RDMA_WRITE_WITH_IMM] = { "RDMA_WRITE_WITH_IMM",
					 WR_WRITE | WR_IMM | WR_PAYLOAD |
						 WR_RC | WR_UC,
					 IBV_WC_RDMA_WRITE },
	[IBV_WR_SEND] = { "SEND", WR_SEND | WR_PAYLOAD | ALL_QPT,
			  IBV_WC_SEND },
	[IBV_WR_SEND_WITH_IMM] = { "SEND_WITH_IMM",
				   WR_SEND | WR_IMM | WR_PAYLOAD | ALL_QPT,
				   IBV_WC_SEND },
	[IBV_WR_RDMA_READ] = { "RDMA_READ", WR_READ | WR_RC,
			       IBV_WC_RDMA_READ },
	[IBV_WR_ATOMIC_CMP_AND_SWP] = { "ATOMIC_CMP_AND_SWP",
					WR_ATOMIC | WR_RC, IBV_WC_COMP_SWAP },
	[IBV_WR_ATOMIC_FETCH_AND_ADD] = { "ATOMIC_FETCH_AND_ADD",
					  WR_ATOMIC | WR_RC,
					  IBV_WC_FETCH_ADD },
	/* Memory window operations (IBA 10.6.7) and Send with Invalidate
	 * (IBA 9.4.1.1, RC only): binding and invalidating run in the
	 * requester's HCA, in send queue order (IBA 10.8.2). */
	[IBV_WR_LOCAL_INV] = { "LOCAL_INV", WR_LOCAL | WR_INV | WR_RC | WR_UC,
			       IBV_WC_LOCAL_INV },
	[IBV_WR_BIND_MW] = { "BIND_MW", WR_LOCAL | WR_RC | WR_UC,
			     IBV_WC_BIND_MW },
	[IBV_WR_SEND_WITH_INV] = { "SEND_WITH_INV",
				   WR_SEND | WR_INV | WR_PAYLOAD | WR_RC,
				   IBV_WC_SEND },
	/* The 8 bytes to store are its payload (IBA 1.5 RDMA ATOMIC
	 * WRITE); no responder resource, acknowledged as a WRITE. */
	[EMU_WR_ATOMIC_WRITE] = { "ATOMIC_WRITE",
				  WR_WRITE | WR_ATOMIC_WRITE | WR_PAYLOAD |
					  WR_RC,
				  EMU_WC_ATOMIC_WRITE },
	/* A UMR lays an indirect mkey out, in send queue order like a bind
	 * (mlx5dv_wr_post(3)); it completes as MLX5DV_WC_UMR, which is
	 * IBV_WC_DRIVER1.  Which QPs may post it is umr.c's to say. */
	[EMU_WR_UMR] = { "UMR", WR_LOCAL, IBV_WC_DRIVER1 },
};
_Static_assert(EMU_WR_UMR < WR_OPCODE_MAX, "the UMR is in the table");
