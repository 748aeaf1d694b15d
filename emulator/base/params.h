/* SPDX-License-Identifier: MIT */
/*
 * Every limit of the emulated HCA, in one place.  query_device, query_port
 * and every verb's argument check read these; nothing else hard-codes a
 * device limit.  The values are at least those of the kernel's rxe.
 */
#ifndef IBEMU_PARAMS_H
#define IBEMU_PARAMS_H

#include <stdint.h>

#define IBEMU_DEVICE_NAME "ibemu0"
#define IBEMU_FW_VER "0.1.0"
#define IBEMU_VENDOR_ID 0x1de5 /* not an assigned IEEE OUI vendor */
#define IBEMU_VENDOR_PART_ID 0x0001
/* With IBEMU_MLX5_IDENTITY=1, a ConnectX-5's, for test suites that pick
 * their mlx5 tests by them (rdma-core's tests/mlx5_base.py); ibemu(7). */
#define IBEMU_MLX5_VENDOR_ID 0x02c9
#define IBEMU_MLX5_VENDOR_PART_ID 4119
#define IBEMU_HW_VER 1
/* Ports of the node's HCA: 1 unless IBEMU_PORTS=2 asks for two when the
 * node is made (node_port.c); never more. */
#define IBEMU_MAX_PORTS 2
#define IBEMU_NUM_COMP_VECTORS 1

/* Queue pairs: QPN 0 and 1 are the SMI and GSI QPs (IBA 3.5.5). */
#define IBEMU_MAX_QP 65536
/* Bytes of a QP held for its transport's placement state (hca.h). */
#define IBEMU_QP_PLACE_SIZE 128
#define IBEMU_QPN_FIRST 0x11
#define IBEMU_QPN_MASK 0xffffffu /* QPNs are 24 bits (IBA 9.2 BTH) */
#define IBEMU_MAX_QP_WR 16384
#define IBEMU_MAX_SGE 32
#define IBEMU_MAX_SGE_RD 32
#define IBEMU_MAX_INLINE_DATA 1024
#define IBEMU_MAX_QP_RD_ATOM 128
#define IBEMU_MAX_QP_INIT_RD_ATOM 128
#define IBEMU_MAX_RES_RD_ATOM (IBEMU_MAX_QP_RD_ATOM * IBEMU_MAX_QP)
/* The Dynamically Connected transport (dc.c): the responder contexts a
 * DCT keeps, one per initiator stream, and the READs and atomics each
 * has in flight (its responder resources, IBA 9.7.4.1.5; a DCT is given
 * none by modify). */
#define IBEMU_MAX_DCR_PER_DCT 64
#define IBEMU_DCR_RD_ATOM 16

/* Completion queues. */
#define IBEMU_MAX_CQ 16384
/* CQ entries: as many as libfabric's RxM asks for by default (tx and rx
 * sizes times FI_UNIVERSE_SIZE 256: 262144); HCAs offer up to 4M; the
 * largest CQ's ring is 48 MiB of private memory. */
#define IBEMU_MAX_CQE (1 << 20)
/* The free-running clock completions are stamped with: 1 GHz, so one
 * tick is one nanosecond (hca_core_clock is in kHz). */
#define IBEMU_CORE_CLOCK_KHZ 1000000ull

/* Memory. */
#define IBEMU_MAX_PD 65536
#define IBEMU_MAX_MR 65536
/* Memory windows: keys follow the MR keys (mw.c). */
#define IBEMU_MAX_MW 65536
#define IBEMU_MAX_MR_SIZE (1ull << 40)
/* Indirect mkeys (mlx5dv_create_mkey(3)): entries an mkey may be
 * created with room for.  A UMR fills at most what fits in its QP's
 * max_inline_data (umr.c), 64 at IBEMU_MAX_INLINE_DATA. */
#define IBEMU_MAX_MKEY_ENTRIES 256
#define IBEMU_PAGE_SIZE_CAP 0xfffff000ull
/* Device memory (ibv_alloc_dm): the process's own pages, at most this
 * much in each process at once (as mlx5's on-chip MEMIC, 256 KiB). */
#define IBEMU_MAX_DM_SIZE (256u << 10)
/* Its access granularity: offsets and lengths of ibv_memcpy_to_dm and
 * ibv_memcpy_from_dm are multiples of it (mlx5's, 4 bytes). */
#define IBEMU_DM_ALIGN 4u

/* Shared receive queues. */
#define IBEMU_MAX_SRQ 65536
#define IBEMU_MAX_SRQ_WR 16384
#define IBEMU_MAX_SRQ_SGE 32

/* Address handles and multicast. */
#define IBEMU_MAX_AH 65536
/* The node's group table (node.h) holds every group: 1024 groups of 56
 * members cost 244 KiB of the node segment. */
#define IBEMU_MAX_MCAST_GRP 1024
#define IBEMU_MAX_MCAST_QP_ATTACH 56
#define IBEMU_MAX_TOTAL_MCAST_QP_ATTACH                                        \
	(IBEMU_MAX_MCAST_GRP * IBEMU_MAX_MCAST_QP_ATTACH)
#define IBEMU_MAX_PKEYS 64

/* Port. */
#define IBEMU_GID_TBL_LEN 16
#define IBEMU_PKEY_TBL_LEN 64
#define IBEMU_DEFAULT_PKEY 0xffff /* full member, default partition (IBA 10.9.1.2) */
#define IBEMU_MAX_MSG_SZ 0x80000000u /* 2^31, IBA 9.4 */
#define IBEMU_MAX_MTU IBV_MTU_4096
#define IBEMU_ACTIVE_WIDTH 2 /* 4X */
#define IBEMU_ACTIVE_SPEED 32 /* EDR: 25.78125 Gb/s per lane */
#define IBEMU_PHYS_STATE_LINK_UP 5
#define IBEMU_PHYS_STATE_DISABLED 3
#define IBEMU_SUBNET_TIMEOUT 18
#define IBEMU_MAX_VL_NUM 1 /* VL0 only */
/* Unicast LIDs are 0x0001..0xbfff (IBA 4.1.3). */
#define IBEMU_LID_UNICAST_MAX 0xbfff

/* The TCP port of a node's door (tcp_door.c, fabric.h) unless IBEMU_TCP_PORT
 * names another; the same number as RoCEv2's UDP port. */
#define IBEMU_DEFAULT_DOOR_PORT 4791
/* TCP connections to other nodes' processes a node shows (node.h). */
#define IBEMU_MAX_NET_PEERS 256

/* Node segment: processes attached at once. */
#define IBEMU_MAX_PROCS 1024
/* Bound RDMA CM addresses of a node (node_cm.c): listeners and the
 * ports of connecting ids (40 bytes each in the node segment; a 3.5 MiB
 * /dev/shm must still hold the segment and one inbox,
 * tests/local/small-shm.sh). */
#define IBEMU_MAX_CM_PORTS 1024
/* Multicast memberships made through the RDMA CM (node_mcast.c), one per
 * join of an id: 32 bytes each in the node segment. */
#define IBEMU_MAX_CM_MCAST 512

#endif /* IBEMU_PARAMS_H */
