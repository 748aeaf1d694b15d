// SPDX-License-Identifier: MIT
/*
 * Memory regions as libibverbs sees them (manual 3.3.10-3.3.12): the
 * HCA's translation and protection table (emulator/hca/mr.c) does the work;
 * here are the verbs objects and the PD's use count.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "check.h"
#include "ibemu.h"
#include "key_table.h"
#include "log.h"

struct ibv_mr *ibemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access)
{
	struct ibemu_mr *mr;
	uint32_t key;
	int ret;

	if (ibemu_ctx_stale(pd->context)) {
		errno = EIO;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	ret = emu_mr_reg(to_ectx(pd->context)->hca, to_epd(pd)->id, addr,
			 length, hca_va, access, &mr->emr, &key);
	if (ret) {
		free(mr);
		errno = ret;
		return NULL;
	}
	mr->vmr.mr_type = PABI_MR_TYPE_MR;
	mr->vmr.access = access;
	mr->vmr.ibv_mr.context = pd->context;
	mr->vmr.ibv_mr.pd = pd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->vmr.ibv_mr.lkey = key;
	mr->vmr.ibv_mr.rkey = key;
	mr->vmr.ibv_mr.handle = key_num(key) - 1;
	if (ibemu_mr_share_new(mr)) {
		emu_mr_dereg(mr->emr);
		free(mr);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	check_obj(CHECK_OBJ_MR, 1);
	return &mr->vmr.ibv_mr;
}

int ibemu_dereg_mr(struct verbs_mr *vmr)
{
	struct ibemu_mr *mr = container_of(vmr, struct ibemu_mr, vmr);

	if (ibemu_ctx_stale(vmr->ibv_mr.context))
		return EIO;
	/* The region goes with its last handle (it may have imports). */
	ibemu_mr_share_put(mr->share);
	atomic_fetch_sub(&to_epd(vmr->ibv_mr.pd)->usecnt, 1);
	check_obj(CHECK_OBJ_MR, -1);
	free(mr);
	return 0;
}

/* Advice on on-demand paging regions (ibv_advise_mr(3); mr_advise.c). */
int ibemu_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		    uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge)
{
	if (ibemu_ctx_stale(pd->context))
		return EIO;
	return emu_mr_advise(to_ectx(pd->context)->hca, to_epd(pd)->id,
			     (int)advice, flags, sg_list, num_sge);
}

/* Reregister a memory region (IBA 10.6.3.6, ibv_rereg_mr(3)). */
int ibemu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		   void *addr, size_t length, int access)
{
	struct ibemu_mr *mr = container_of(vmr, struct ibemu_mr, vmr);
	bool new_pd = flags & IBV_REREG_MR_CHANGE_PD;
	int ret;

	if (ibemu_ctx_stale(vmr->ibv_mr.context))
		return EIO;
	if (new_pd && (!pd || pd->context != vmr->ibv_mr.context))
		return EINVAL;
	ret = emu_mr_rereg(mr->emr, flags, new_pd ? to_epd(pd)->id : 0, addr,
			   length, access);
	if (ret)
		return ret;
	if (new_pd) {
		atomic_fetch_sub(&to_epd(vmr->ibv_mr.pd)->usecnt, 1);
		atomic_fetch_add(&to_epd(pd)->usecnt, 1);
		vmr->ibv_mr.pd = pd;
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		vmr->access = access;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		vmr->ibv_mr.addr = addr;
		vmr->ibv_mr.length = length;
	}
	return 0;
}
