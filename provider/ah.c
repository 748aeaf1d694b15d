// SPDX-License-Identifier: MIT
/* Address handles (manual 3.6.11-3.6.12; IBA 10.2.2.1 address vectors). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "ibemu.h"
#include "log.h"

/* Shared by create_ah and modify_qp(IBV_QP_AV); returns 0 or EINVAL. */
int ibemu_check_ah_attr(struct ibv_context *context,
			const struct ibv_ah_attr *attr)
{
	if (!ibemu_port_valid(context, attr->port_num)) {
		ibemu_log_dbg("ah_attr: port_num %u", attr->port_num);
		return EINVAL;
	}
	if (attr->is_global && attr->grh.sgid_index >= IBEMU_GID_TBL_LEN) {
		ibemu_log_dbg("ah_attr: sgid_index %u", attr->grh.sgid_index);
		return EINVAL;
	}
	/* 4-bit service level (IBA 7.6.5). */
	if (attr->sl > 15) {
		ibemu_log_dbg("ah_attr: sl %u", attr->sl);
		return EINVAL;
	}
	return 0;
}

struct ibv_ah *ibemu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibemu_context *ctx = to_ectx(pd->context);
	struct ibemu_ah *ah;
	int ret;

	if (!attr) {
		errno = EINVAL;
		return NULL;
	}
	ret = ibemu_check_ah_attr(pd->context, attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	if (atomic_fetch_add(&ctx->nr_ahs, 1) >= IBEMU_MAX_AH) {
		atomic_fetch_sub(&ctx->nr_ahs, 1);
		errno = ENOMEM;
		return NULL;
	}
	ah = calloc(1, sizeof(*ah));
	if (!ah) {
		atomic_fetch_sub(&ctx->nr_ahs, 1);
		errno = ENOMEM;
		return NULL;
	}
	ah->attr = *attr;
	ah->ibv_ah.context = pd->context;
	ah->ibv_ah.pd = pd;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	return &ah->ibv_ah;
}

int ibemu_destroy_ah(struct ibv_ah *ibah)
{
	struct ibemu_ah *ah = to_eah(ibah);

	atomic_fetch_sub(&to_epd(ibah->pd)->usecnt, 1);
	atomic_fetch_sub(&to_ectx(ibah->context)->nr_ahs, 1);
	free(ah);
	return 0;
}
