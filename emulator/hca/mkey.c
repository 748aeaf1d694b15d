// SPDX-License-Identifier: MIT
/*
 * Indirect memory keys and the UMR work requests that lay them out
 * (mlx5dv_create_mkey(3), mlx5dv_wr_mr_interleaved(3)).
 */
#include "config.h"

#include <errno.h>

#include "hca.h"

int emu_mkey_create(struct emu_hca *hca, uint64_t pd_id,
		    uint16_t max_entries, bool remote_inv,
		    struct emu_mkey **mkey_p, uint32_t *key_p)
{
	(void)hca;
	(void)pd_id;
	(void)max_entries;
	(void)remote_inv;
	(void)mkey_p;
	(void)key_p;
	return EOPNOTSUPP;
}

int emu_mkey_destroy(struct emu_mkey *mkey)
{
	(void)mkey;
	return EOPNOTSUPP;
}

int umr_check_wr(struct emu_qp *qp, const struct ibv_send_wr *wr,
		 const struct emu_wr_ext *ext)
{
	(void)qp;
	(void)wr;
	(void)ext;
	return EOPNOTSUPP;
}

int umr_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		  const struct emu_wr_ext *ext)
{
	(void)qp;
	(void)wqe;
	(void)ext;
	return EOPNOTSUPP;
}
