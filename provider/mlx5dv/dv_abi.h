/* SPDX-License-Identifier: MIT */
/*
 * The public ABI of libmlx5's direct verbs (rdma-core's mlx5dv.h) as far
 * as ibemu answers it, written out here so that ibemu builds against any
 * rdma-core's headers, and against none.  libmlx5's structures only grow
 * at their end and say which members a caller has by comp_mask bits, so
 * these prefixes stay valid for every release from rdma-core 36 on
 * (tests/unit/test_dv_abi.c checks them against the installed header).
 */
#ifndef IBEMU_DV_ABI_H
#define IBEMU_DV_ABI_H

#include <stdint.h>
#include <infiniband/verbs.h>

/* enum mlx5dv_context_attr_flags */
#define DV_CONTEXT_FLAGS_DEVX (1u << 0)

/* struct mlx5dv_context_attr */
struct dv_context_attr {
	uint32_t flags;
	uint64_t comp_mask;
};

/* enum mlx5dv_context_comp_mask: the one member ibemu answers */
#define DV_CONTEXT_MASK_DC_ODP_CAPS (1u << 7)

/* struct mlx5dv_context, up to the members ibemu answers */
struct dv_context {
	uint8_t version;
	uint64_t flags;
	uint64_t comp_mask;
	uint32_t cqe_comp_caps[2];
	uint32_t sw_parsing_caps[2];
	uint32_t striding_rq_caps[5];
	uint32_t tunnel_offloads_caps;
	uint32_t max_dynamic_bfregs;
	uint64_t max_clock_info_update_nsec;
	uint32_t flow_action_flags;
	uint32_t dc_odp_caps;
};

/* enum mlx5dv_qp_init_attr_mask */
#define DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS (1u << 0)
#define DV_QP_INIT_ATTR_MASK_DC (1u << 1)
#define DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS (1u << 2)
#define DV_QP_INIT_ATTR_MASK_DCI_STREAMS (1u << 3)

/* enum mlx5dv_qp_create_flags: the one ibemu accepts, a CQE layout
 * choice that means nothing without direct CQE access */
#define DV_QP_CREATE_DISABLE_SCATTER_TO_CQE (1u << 3)

/* enum mlx5dv_dc_type */
enum dv_dc_type {
	DV_DCTYPE_DCT = 1,
	DV_DCTYPE_DCI = 2,
};

/* struct mlx5dv_dc_init_attr */
struct dv_dc_init_attr {
	enum dv_dc_type dc_type;
	union {
		uint64_t dct_access_key;
		struct {
			uint8_t log_num_concurent, log_num_errored;
		} dci_streams;
	};
};

/* enum mlx5dv_qp_create_send_ops_flags */
#define DV_QP_EX_WITH_MR_INTERLEAVED (1u << 0)
#define DV_QP_EX_WITH_MR_LIST (1u << 1)
#define DV_QP_EX_WITH_MKEY_CONFIGURE (1u << 2)

/* struct mlx5dv_qp_init_attr */
struct dv_qp_init_attr {
	uint64_t comp_mask;
	uint32_t create_flags;
	struct dv_dc_init_attr dc_init_attr;
	uint64_t send_ops_flags;
};

/* enum mlx5dv_mkey_init_attr_flags */
#define DV_MKEY_INIT_ATTR_FLAGS_INDIRECT (1u << 0)
#define DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE (1u << 4)

/* struct mlx5dv_mkey_init_attr */
struct dv_mkey_init_attr {
	struct ibv_pd *pd;
	uint32_t create_flags;
	uint16_t max_entries;
};

/* struct mlx5dv_mkey */
struct dv_mkey {
	uint32_t lkey;
	uint32_t rkey;
};

/* struct mlx5dv_mr_interleaved */
struct dv_mr_interleaved {
	uint64_t addr;
	uint32_t bytes_count;
	uint32_t bytes_skip;
	uint32_t lkey;
};

/* struct mlx5dv_mkey_conf_attr */
struct dv_mkey_conf_attr {
	uint32_t conf_flags;
	uint64_t comp_mask;
};

/*
 * struct mlx5dv_qp_ex: comp_mask, then the setters the inline
 * mlx5dv_wr_*() functions call, twelve at rdma-core 39 to 64.  ibemu's
 * has room for more: a setter a later release appends finds a stub that
 * fails the batch with EOPNOTSUPP instead of a null pointer.
 */
#define DV_QP_EX_SLOTS 32
struct dv_qp_ex {
	uint64_t comp_mask;
	void (*wr_set_dc_addr)(struct dv_qp_ex *mqp, struct ibv_ah *ah,
			       uint32_t remote_dctn, uint64_t remote_dc_key);
	void (*wr_mr_interleaved)(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
				  uint32_t access_flags, uint32_t repeat_count,
				  uint16_t num_interleaved,
				  struct dv_mr_interleaved *data);
	void (*wr_mr_list)(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
			   uint32_t access_flags, uint16_t num_sges,
			   struct ibv_sge *sge);
	void (*wr_mkey_configure)(struct dv_qp_ex *mqp, struct dv_mkey *mkey,
				  uint8_t num_setters,
				  struct dv_mkey_conf_attr *attr);
	void (*wr_set_mkey_access_flags)(struct dv_qp_ex *mqp,
					 uint32_t access_flags);
	void (*wr_set_mkey_layout_list)(struct dv_qp_ex *mqp,
					uint16_t num_sges,
					const struct ibv_sge *sge);
	void (*wr_set_mkey_layout_interleaved)(
		struct dv_qp_ex *mqp, uint32_t repeat_count,
		uint16_t num_interleaved, const struct dv_mr_interleaved *data);
	void (*wr_set_mkey_sig_block)(struct dv_qp_ex *mqp, const void *attr);
	void (*wr_raw_wqe)(struct dv_qp_ex *mqp, const void *wqe);
	void (*wr_set_dc_addr_stream)(struct dv_qp_ex *mqp, struct ibv_ah *ah,
				      uint32_t remote_dctn,
				      uint64_t remote_dc_key,
				      uint16_t stream_id);
	void (*wr_memcpy)(struct dv_qp_ex *mqp, uint32_t dest_lkey,
			  uint64_t dest_addr, uint32_t src_lkey,
			  uint64_t src_addr, size_t length);
	void (*wr_set_mkey_crypto)(struct dv_qp_ex *mqp, const void *attr);
	/* room for setters of later releases */
	void (*later[DV_QP_EX_SLOTS - 12])(struct dv_qp_ex *mqp);
};

/* MLX5DV_WC_UMR */
#define DV_WC_UMR IBV_WC_DRIVER1

#endif /* IBEMU_DV_ABI_H */
