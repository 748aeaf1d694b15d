// SPDX-License-Identifier: MIT
/* Protection domains (manual 3.3.5, 3.3.6; IBA 10.2.3). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "ibemu.h"
#include "log.h"

struct ibv_pd *ibemu_alloc_pd(struct ibv_context *context)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_pd *pd;

	if (atomic_fetch_add(&ctx->nr_pds, 1) >= IBEMU_MAX_PD) {
		atomic_fetch_sub(&ctx->nr_pds, 1);
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		atomic_fetch_sub(&ctx->nr_pds, 1);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv_pd.context = context;
	atomic_init(&pd->usecnt, 0);
	if (ibemu_pd_share_new(pd)) {
		atomic_fetch_sub(&ctx->nr_pds, 1);
		free(pd);
		errno = ENOMEM;
		return NULL;
	}
	return &pd->ibv_pd;
}

int ibemu_dealloc_pd(struct ibv_pd *ibpd)
{
	struct ibemu_pd *pd = to_epd(ibpd);

	/* A PD cannot be deallocated while MRs, QPs, SRQs or AHs still use
	 * it (manual 3.3.6: fails if any other resource is still associated). */
	if (atomic_load(&pd->usecnt)) {
		ibemu_log_dbg("dealloc_pd: %d objects still use it",
			      atomic_load(&pd->usecnt));
		return EBUSY;
	}
	/* The PD goes with its last handle (it may have imports). */
	if (!ibemu_ctx_stale(ibpd->context))
		ibemu_share_put(pd->share, NULL);
	atomic_fetch_sub(&to_ectx(ibpd->context)->nr_pds, 1);
	free(pd);
	return 0;
}
