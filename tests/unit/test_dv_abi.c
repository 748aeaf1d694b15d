// SPDX-License-Identifier: MIT
/*
 * provider/mlx5dv/dv_abi.h against the installed rdma-core's mlx5dv.h:
 * every member the face reads or writes is where libmlx5's is, and the
 * setters table has room for every setter the header has.  A mismatch
 * fails the build of this test; the run prints what was compared.
 */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <infiniband/mlx5dv.h>

#include "dv_abi.h"

#define SAME(ours, theirs, m)                                                  \
	_Static_assert(offsetof(struct ours, m) == offsetof(struct theirs, m), \
		       #theirs "." #m " moved")
#define SAME_SIZE(ours, theirs)                                                \
	_Static_assert(sizeof(struct ours) == sizeof(struct theirs),           \
		       #theirs " changed size")

SAME(dv_context, mlx5dv_context, version);
SAME(dv_context, mlx5dv_context, flags);
SAME(dv_context, mlx5dv_context, comp_mask);
SAME(dv_context, mlx5dv_context, tunnel_offloads_caps);
SAME(dv_context, mlx5dv_context, max_clock_info_update_nsec);
SAME(dv_context, mlx5dv_context, dc_odp_caps);
SAME_SIZE(dv_context_attr, mlx5dv_context_attr);
SAME(dv_qp_init_attr, mlx5dv_qp_init_attr, comp_mask);
SAME(dv_qp_init_attr, mlx5dv_qp_init_attr, create_flags);
SAME(dv_qp_init_attr, mlx5dv_qp_init_attr, dc_init_attr);
SAME(dv_qp_init_attr, mlx5dv_qp_init_attr, send_ops_flags);
SAME_SIZE(dv_qp_init_attr, mlx5dv_qp_init_attr);
SAME(dv_dc_init_attr, mlx5dv_dc_init_attr, dct_access_key);
SAME_SIZE(dv_mkey_init_attr, mlx5dv_mkey_init_attr);
SAME(dv_mkey_init_attr, mlx5dv_mkey_init_attr, max_entries);
SAME_SIZE(dv_mkey, mlx5dv_mkey);
SAME_SIZE(dv_mr_interleaved, mlx5dv_mr_interleaved);
SAME(dv_mr_interleaved, mlx5dv_mr_interleaved, lkey);
SAME_SIZE(dv_mkey_conf_attr, mlx5dv_mkey_conf_attr);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_set_dc_addr);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_mr_interleaved);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_mr_list);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_mkey_configure);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_set_mkey_access_flags);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_set_mkey_layout_list);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_set_mkey_layout_interleaved);
SAME(dv_qp_ex, mlx5dv_qp_ex, wr_set_dc_addr_stream);
_Static_assert(sizeof(struct dv_qp_ex) >= sizeof(struct mlx5dv_qp_ex),
	       "the setters table is smaller than libmlx5's");
_Static_assert((int)MLX5DV_DCTYPE_DCT == (int)DV_DCTYPE_DCT &&
		       (int)MLX5DV_DCTYPE_DCI == (int)DV_DCTYPE_DCI,
	       "DC types");
_Static_assert(MLX5DV_QP_INIT_ATTR_MASK_DC == DV_QP_INIT_ATTR_MASK_DC &&
		       MLX5DV_QP_EX_WITH_MKEY_CONFIGURE ==
			       DV_QP_EX_WITH_MKEY_CONFIGURE &&
		       MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE ==
			       DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE &&
		       (int)MLX5DV_WC_UMR == (int)DV_WC_UMR,
	       "flags");

int main(void)
{
	printf("ok: dv_abi.h matches this rdma-core's mlx5dv.h (%zu of %zu "
	       "bytes of setters)\n",
	       sizeof(struct mlx5dv_qp_ex), sizeof(struct dv_qp_ex));
	return 0;
}
