// SPDX-License-Identifier: MIT
/*
 * Memory windows as libibverbs sees them (ibv_alloc_mw(3), ibv_bind_mw(3)):
 * the HCA's window table (emulator/hca/mw.c) does the work; here are the verbs
 * objects, the PD's use count and the type 1 Bind Memory Window verb,
 * which is a BIND_MW work request posted on the QP.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ibemu.h"
#include "key_table.h"
#include "log.h"

struct ibv_mw *ibemu_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type)
{
	struct ibemu_mw *mw;
	uint32_t key;
	int ret;

	if (ibemu_ctx_stale(pd->context)) {
		errno = EIO;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	ret = emu_mw_alloc(to_ectx(pd->context)->hca, to_epd(pd)->id, type,
			   &mw->emw, &key);
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	mw->ibv_mw.context = pd->context;
	mw->ibv_mw.pd = pd;
	mw->ibv_mw.rkey = key;
	mw->ibv_mw.handle = key_num(key) - 1;
	mw->ibv_mw.type = type;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	check_obj(CHECK_OBJ_MW, 1);
	return &mw->ibv_mw;
}

/* Unbinds the window if it is bound, then frees it (ibv_alloc_mw(3)). */
int ibemu_dealloc_mw(struct ibv_mw *ibmw)
{
	struct ibemu_mw *mw = to_emw(ibmw);

	if (ibemu_ctx_stale(ibmw->context))
		return EIO;
	emu_mw_dealloc(mw->emw);
	atomic_fetch_sub(&to_epd(ibmw->pd)->usecnt, 1);
	check_obj(CHECK_OBJ_MW, -1);
	free(mw);
	return 0;
}

/*
 * Bind a type 1 window (IBA 10.6.7.2, ibv_bind_mw(3)):
 * a BIND_MW work request on qp giving the window the next R_Key, which
 * mw->rkey holds once the request is posted (the consumer restores the
 * old one if it completes in error).  libibverbs has checked the type and
 * the PDs.
 */
int ibemu_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *mw_bind)
{
	struct ibv_send_wr wr, *bad;
	int ret;

	if (ibemu_ctx_stale(qp->context))
		return errno = EIO;
	if (mw->type != IBV_MW_TYPE_1 || mw->context != qp->context)
		return errno = EINVAL;
	/* No zero-based windows (o10-36.2.2 forbids them for type 1). */
	if (mw_bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return errno = EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = mw_bind->bind_info;
	ret = emu_post_send(to_eqp(qp)->eqp, &wr, &bad, false);
	if (ret)
		return errno = ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}
