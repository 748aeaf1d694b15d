// SPDX-License-Identifier: MIT
/*
 * Address handles as libibverbs sees them (manual 3.6.11-3.6.12): the
 * HCA keeps the address vector (emulator/hca/ah.c); ibv_ah.handle names it.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "ibemu.h"

struct ibv_ah *ibemu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr)
{
	struct ibemu_context *ctx = to_ectx(pd->context);
	struct ibemu_ah *ah;
	int ret;

	ret = ibemu_ctx_stale(pd->context) ? EIO : attr ? 0 : EINVAL;
	if (ret)
		goto err;
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_ahs, 1) >= IBEMU_MAX_AH)
		goto err_count;
	ah = calloc(1, sizeof(*ah));
	if (!ah)
		goto err_count;
	ret = emu_ah_create(ctx->hca, attr, &ah->ibv_ah.handle);
	if (ret) {
		free(ah);
		goto err_count;
	}
	ah->ibv_ah.context = pd->context;
	ah->ibv_ah.pd = pd;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	check_obj(CHECK_OBJ_AH, 1);
	return &ah->ibv_ah;

err_count:
	atomic_fetch_sub(&ctx->nr_ahs, 1);
err:
	errno = ret;
	return NULL;
}

int ibemu_destroy_ah(struct ibv_ah *ibah)
{
	struct ibemu_ah *ah = to_eah(ibah);

	if (ibemu_ctx_stale(ibah->context))
		return EIO;
	emu_ah_destroy(to_ectx(ibah->context)->hca, ibah->handle);
	atomic_fetch_sub(&to_epd(ibah->pd)->usecnt, 1);
	check_obj(CHECK_OBJ_AH, -1);
	atomic_fetch_sub(&to_ectx(ibah->context)->nr_ahs, 1);
	free(ah);
	return 0;
}
