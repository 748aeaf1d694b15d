// SPDX-License-Identifier: MIT
/*
 * Device, port, GID and P_Key attributes.  Every value comes from
 * params.h or from the node segment's identity.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"

/*
 * The HCA a query reads.  A forked child's inherited context (stale,
 * ibemu.h) is its parent's, whose attachment the child does not have;
 * queries only read the node's attributes, which are the child's node
 * too, so the child answers them from an attachment of its own, taken
 * for the query (emu_hca_get: the first makes the child a process of
 * the node; a child with a context of its own has it already).  A real
 * HCA answers queries on an inherited command fd as well: rdma-core's
 * test_multi_process_alloc_dm queries and allocates device memory in
 * forked children.  Verbs that create or use objects stay EIO there.
 */
static int query_hca_get(struct ibv_context *context, struct emu_hca **hca)
{
	if (!ibemu_ctx_stale(context)) {
		*hca = to_ectx(context)->hca;
		return 0;
	}
	return emu_hca_get(hca) ? EIO : 0;
}

static void query_hca_put(struct ibv_context *context, struct emu_hca *hca)
{
	if (ibemu_ctx_stale(context))
		emu_hca_put(hca);
}

/* Whether ibemu0 says it is a ConnectX-5 (IBEMU_MLX5_IDENTITY=1):
 * read once a process. */
static bool query_mlx5_identity(void)
{
	static atomic_int on = -1;
	const char *v;
	int o = atomic_load_explicit(&on, memory_order_relaxed);

	if (o < 0) {
		v = getenv("IBEMU_MLX5_IDENTITY");
		o = v && strcmp(v, "1") == 0;
		atomic_store_explicit(&on, o, memory_order_relaxed);
	}
	return o;
}

static void ibemu_fill_device_attr(struct emu_hca *hca,
				   struct ibv_device_attr *a)
{
	struct emu_port_info info;

	emu_hca_port_info(hca, 1, &info);
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "%s", IBEMU_FW_VER);
	a->node_guid = htobe64(info.node_guid);
	a->sys_image_guid = htobe64(info.node_guid);
	a->max_mr_size = IBEMU_MAX_MR_SIZE;
	a->page_size_cap = IBEMU_PAGE_SIZE_CAP;
	a->vendor_id = query_mlx5_identity() ? IBEMU_MLX5_VENDOR_ID
					      : IBEMU_VENDOR_ID;
	a->vendor_part_id = query_mlx5_identity() ? IBEMU_MLX5_VENDOR_PART_ID
						  : IBEMU_VENDOR_PART_ID;
	a->hw_ver = IBEMU_HW_VER;
	a->max_qp = IBEMU_MAX_QP;
	a->max_qp_wr = IBEMU_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR |
			      IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_CHANGE_PHY_PORT |
			      IBV_DEVICE_RC_RNR_NAK_GEN |
			      IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_PORT_ACTIVE_EVENT |
			      IBV_DEVICE_N_NOTIFY_CQ |
			      /* memory windows of type 1 and 2B (mw.c) */
			      IBV_DEVICE_MEM_WINDOW |
			      IBV_DEVICE_MEM_WINDOW_TYPE_2B |
			      IBV_DEVICE_XRC; /* within a process: xrc.c */
	/* Alternate paths need a second port to lead through (IBA
	 * 17.2.8): claimed with two (IBEMU_PORTS=2). */
	if (emu_nr_ports() > 1)
		a->device_cap_flags |= IBV_DEVICE_AUTO_PATH_MIG;
	a->max_sge = IBEMU_MAX_SGE;
	a->max_sge_rd = IBEMU_MAX_SGE_RD;
	a->max_cq = IBEMU_MAX_CQ;
	a->max_cqe = IBEMU_MAX_CQE;
	a->max_mr = IBEMU_MAX_MR;
	a->max_pd = IBEMU_MAX_PD;
	a->max_qp_rd_atom = IBEMU_MAX_QP_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = IBEMU_MAX_RES_RD_ATOM;
	a->max_qp_init_rd_atom = IBEMU_MAX_QP_INIT_RD_ATOM;
	a->max_ee_init_rd_atom = 0;
	/* Atomics are atomic with respect to other atomics through this
	 * HCA, not to the CPU (IBA 11.2.1.1 Query HCA, atomic capability). */
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_ee = 0;
	a->max_rdd = 0;
	a->max_mw = IBEMU_MAX_MW;
	a->max_raw_ipv6_qp = 0;
	a->max_raw_ethy_qp = 0;
	a->max_mcast_grp = IBEMU_MAX_MCAST_GRP;
	a->max_mcast_qp_attach = IBEMU_MAX_MCAST_QP_ATTACH;
	a->max_total_mcast_qp_attach = IBEMU_MAX_TOTAL_MCAST_QP_ATTACH;
	a->max_ah = IBEMU_MAX_AH;
	a->max_fmr = 0;
	a->max_map_per_fmr = 0;
	a->max_srq = IBEMU_MAX_SRQ;
	a->max_srq_wr = IBEMU_MAX_SRQ_WR;
	a->max_srq_sge = IBEMU_MAX_SRQ_SGE;
	a->max_pkeys = IBEMU_PKEY_TBL_LEN;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = (uint8_t)emu_nr_ports();
}

/*
 * On-demand paging (ibv_query_device_ex(3) odp_caps, ibv_reg_mr(3)
 * IBV_ACCESS_ON_DEMAND): explicit and implicit regions, whose pages the
 * engines fault in at each access of any kind (emulator/hca/mr_pages.c),
 * so every operation a transport has is served on them: RC all of SEND,
 * RECV, WRITE, READ, ATOMIC and SRQ_RECV; UC SEND, RECV, WRITE and
 * SRQ_RECV (no READ or atomics on UC, IBA 9.8); UD SEND, RECV and
 * SRQ_RECV; XRC, whose receives are an SRQ's (IBA Annex A14), SEND,
 * WRITE, READ, ATOMIC and SRQ_RECV.
 */
static void ibemu_fill_odp_caps(struct ibv_device_attr_ex *a)
{
	const uint32_t recv = IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_SRQ_RECV;

	a->odp_caps.general_caps = IBV_ODP_SUPPORT | IBV_ODP_SUPPORT_IMPLICIT;
	a->odp_caps.per_transport_caps.rc_odp_caps =
		IBV_ODP_SUPPORT_SEND | recv | IBV_ODP_SUPPORT_WRITE |
		IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC;
	a->odp_caps.per_transport_caps.uc_odp_caps =
		IBV_ODP_SUPPORT_SEND | recv | IBV_ODP_SUPPORT_WRITE;
	a->odp_caps.per_transport_caps.ud_odp_caps =
		IBV_ODP_SUPPORT_SEND | recv;
	a->xrc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_SRQ_RECV |
			  IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
			  IBV_ODP_SUPPORT_ATOMIC;
}

int ibemu_query_device_ex(struct ibv_context *context,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex full;
	struct emu_hca *hca;

	if (input && input->comp_mask)
		return EINVAL;
	if (!attr || attr_size < sizeof(attr->orig_attr))
		return EINVAL;
	if (query_hca_get(context, &hca))
		return EIO;
	memset(&full, 0, sizeof(full));
	ibemu_fill_device_attr(hca, &full.orig_attr);
	query_hca_put(context, hca);
	full.device_cap_flags_ex = full.orig_attr.device_cap_flags;
	full.phys_port_cnt_ex = emu_nr_ports();
	/* Completion timestamps (ibv_create_cq_ex) count a 64-bit clock
	 * of hca_core_clock kHz, the one ibv_query_rt_values_ex reads. */
	full.completion_timestamp_mask = UINT64_MAX;
	full.hca_core_clock = IBEMU_CORE_CLOCK_KHZ;
	full.max_dm_size = IBEMU_MAX_DM_SIZE; /* verbs_dm.c */
	ibemu_fill_odp_caps(&full);
	if (attr_size > sizeof(full))
		attr_size = sizeof(full);
	memcpy(attr, &full, attr_size);
	return 0;
}

/* The HCA's clock now (ibv_query_rt_values_ex(3)): raw_clock holds its
 * ticks in tv_nsec (tv_sec 0), as providers with a raw clock do.
 * comp_mask is in/out: on return, the values filled. */
int ibemu_query_rt_values(struct ibv_context *context,
			  struct ibv_values_ex *values)
{
	if (!values)
		return EINVAL;
	if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
		values->raw_clock.tv_sec = 0;
		values->raw_clock.tv_nsec = (long)emu_clock_raw();
	}
	values->comp_mask &= IBV_VALUES_MASK_RAW_CLOCK;
	return 0;
}

int ibemu_query_port(struct ibv_context *context, uint8_t port_num,
		     struct ibv_port_attr *pa)
{
	struct emu_port_info info;
	struct emu_hca *hca;

	if (!emu_port_valid(port_num) || !pa)
		return EINVAL;
	if (query_hca_get(context, &hca))
		return EIO;
	emu_hca_port_info(hca, port_num, &info);
	query_hca_put(context, hca);
	/* Only the members every release has: libibverbs hands the provider
	 * its own struct ibv_port_attr, zeroed, and from rdma-core 49 on it
	 * has active_speed_ex after these (4 bytes more than before), which
	 * headers newer than the process's libibverbs would overrun. */
	memset(pa, 0, PABI_PORT_ATTR_SIZE_36);
	pa->state = info.state;
	pa->max_mtu = IBEMU_MAX_MTU;
	pa->active_mtu = IBEMU_MAX_MTU;
	pa->gid_tbl_len = IBEMU_GID_TBL_LEN;
	pa->port_cap_flags = IBV_PORT_SM | IBV_PORT_SYS_IMAGE_GUID_SUP;
	pa->max_msg_sz = IBEMU_MAX_MSG_SZ;
	pa->bad_pkey_cntr = 0;
	pa->qkey_viol_cntr = 0;
	pa->pkey_tbl_len = IBEMU_PKEY_TBL_LEN;
	pa->lid = info.lid;
	pa->sm_lid = info.sm_lid;
	pa->lmc = 0;
	pa->max_vl_num = IBEMU_MAX_VL_NUM;
	pa->sm_sl = 0;
	pa->subnet_timeout = IBEMU_SUBNET_TIMEOUT;
	pa->init_type_reply = 0;
	pa->active_width = IBEMU_ACTIVE_WIDTH;
	pa->active_speed = IBEMU_ACTIVE_SPEED;
	/* PortPhysicalState (IBA 14.2.5.6): LinkUp, or Disabled once
	 * `ibemu port down` took it down. */
	pa->phys_state = info.state == IBV_PORT_ACTIVE
		? IBEMU_PHYS_STATE_LINK_UP : IBEMU_PHYS_STATE_DISABLED;
	pa->link_layer = IBV_LINK_LAYER_INFINIBAND;
	pa->flags = 0;
	pa->port_cap_flags2 = 0;
	return 0;
}

/* 0, ENODATA for an empty entry, EINVAL for a bad port or index. */
int ibemu_query_gid_entry(struct ibv_context *context, uint32_t port_num,
			  uint32_t index, struct ibv_gid_entry *entry)
{
	struct emu_port_info info;
	struct emu_hca *hca;
	uint64_t prefix, guid;
	int ret = 0;

	if (!emu_port_valid(port_num) || index >= IBEMU_GID_TBL_LEN)
		return EINVAL;
	if (query_hca_get(context, &hca))
		return EIO;
	memset(entry, 0, sizeof(*entry));
	if (index == 0) {
		/* GID 0 is the port's default GID: the link-local subnet
		 * prefix followed by the port GUID (IBA 4.1.1). */
		emu_hca_port_info(hca, port_num, &info);
		prefix = htobe64(info.gid_prefix);
		guid = htobe64(info.port_guid);
		memcpy(&entry->gid.raw[0], &prefix, 8);
		memcpy(&entry->gid.raw[8], &guid, 8);
	} else {
		/* Then the node's IP addresses (emulator/node/fabric.h), still
		 * GIDs of an InfiniBand port: the link layer is IB. */
		ret = emu_hca_gid(hca, port_num, index, entry->gid.raw);
	}
	query_hca_put(context, hca);
	if (ret)
		return ret;
	entry->gid_index = index;
	entry->port_num = port_num;
	entry->gid_type = IBV_GID_TYPE_IB;
	entry->ndev_ifindex = 0;
	return 0;
}

int ibemu_query_pkey_value(struct ibv_context *context, uint8_t port_num,
			   int index, uint16_t *pkey_p)
{
	struct emu_hca *hca;

	if (!emu_port_valid(port_num) || index < 0 ||
	    index >= IBEMU_PKEY_TBL_LEN || !pkey_p)
		return EINVAL;
	if (query_hca_get(context, &hca))
		return EIO;
	*pkey_p = emu_hca_pkey(hca, (unsigned int)index);
	query_hca_put(context, hca);
	return 0;
}
