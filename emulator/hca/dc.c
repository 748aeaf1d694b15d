// SPDX-License-Identifier: MIT
/*
 * The Dynamically Connected transport, as mlx5 devices offer it
 * (mlx5dv_create_qp(3), mlx5dv_wr_set_dc_addr(3)).
 */
#include "config.h"

#include <errno.h>

#include "hca.h"

int dc_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		 const struct emu_wr_ext *ext)
{
	(void)qp;
	(void)wqe;
	(void)ext;
	return EOPNOTSUPP;
}
