// SPDX-License-Identifier: MIT
/*
 * Advice on on-demand paging regions (ibv_advise_mr(3)): prefetch.
 *
 * The checks and their errno are the Linux stack's, which the manual
 * page follows only in part (the page was found wrong and the kernel's
 * codes kept, linux-rdma 2021, "IB/mlx5: Flow through a more detailed
 * return code from get_prefetchable_mr()"):
 *   - flags other than IBV_ADVISE_MR_FLAG_FLUSH: EINVAL (the uverbs
 *     core's flag check, ib_uverbs_advise_mr);
 *   - an advice other than PREFETCH, PREFETCH_WRITE, PREFETCH_NO_FAULT:
 *     EOPNOTSUPP (mlx5_ib_advise_mr);
 *   - no SGE: nothing to do, 0 (the core returns before the driver);
 *   - an lkey that names no on-demand paging region: ENOENT; one that
 *     names a memory window: EINVAL; a region of another PD: EPERM;
 *     PREFETCH_WRITE to a region that cannot be written (ib_access_
 *     writable: local or remote write, remote atomic, MW bind): EPERM
 *     (get_prefetchable_mr);
 *   - a range outside the region: EFAULT; with IBV_ADVISE_MR_FLAG_FLUSH
 *     (done before the call returns), pages that cannot be faulted in:
 *     EFAULT (pagefault_mr).
 * Every SGE is checked before any is prefetched, so a refused call does
 * nothing.  PREFETCH faults the pages in for reading, PREFETCH_WRITE for
 * writing (mr_pages_fault).  PREFETCH_NO_FAULT makes pages the CPU has
 * present to the device without faulting: ibemu translates through the
 * process's own page table at each access, so there is nothing to make
 * present and it is checked and done.  Without IBV_ADVISE_MR_FLAG_FLUSH
 * the prefetch is still done before the call returns (the manual lets
 * the driver postpone it, not require that it does), and a page that
 * cannot be faulted in is not reported, as the kernel's deferred work
 * reports none.
 *
 * Lock rule: the regions' attributes are copied under hca.lock, which
 * keeps the table entries (and so the regions) as they are (mr.c); the
 * pages are faulted in after it is released.  A region deregistered
 * meanwhile has its former pages faulted in: the process's own memory,
 * which no peer reaches through it any more.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "hca.h"
#include "log.h"

#define MR_ACCESS_WRITABLE                                                     \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND)

/* Where one SGE's bytes are, checked against its region under
 * hca.lock: 0 and *addr_p, or the errno above. */
static int mr_advise_sge_locked(struct emu_hca *hca, uint64_t pd_id,
				int advice, const struct ibv_sge *sge,
				uintptr_t *addr_p)
{
	const struct emu_mr *mr;
	uint64_t end;

	if (mw_key_is_window(sge->lkey))
		return EINVAL;
	mr = mr_lookup(hca, sge->lkey);
	if (!mr || !(mr->access & IBV_ACCESS_ON_DEMAND))
		return ENOENT;
	if (mr->pd_id != pd_id)
		return EPERM;
	if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    !(mr->access & MR_ACCESS_WRITABLE))
		return EPERM;
	end = mr->iova + mr->length;
	if (sge->addr < mr->iova || sge->addr > end ||
	    sge->length > end - sge->addr)
		return EFAULT;
	*addr_p = (uintptr_t)mr->addr + (uintptr_t)(sge->addr - mr->iova);
	return 0;
}

int emu_mr_advise(struct emu_hca *hca, uint64_t pd_id, int advice,
		  uint32_t flags, const struct ibv_sge *sg_list,
		  uint32_t num_sge)
{
	bool flush = flags & IBV_ADVISE_MR_FLAG_FLUSH;
	uintptr_t *addr;
	uint32_t i;
	int ret = 0;

	if (flags & ~(uint32_t)IBV_ADVISE_MR_FLAG_FLUSH)
		return EINVAL;
	if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
	    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
		return EOPNOTSUPP;
	if (!num_sge)
		return 0;
	if (!sg_list)
		return EFAULT;
	addr = calloc(num_sge, sizeof(*addr));
	if (!addr)
		return ENOMEM;
	pthread_mutex_lock(&hca->lock);
	for (i = 0; i < num_sge && !ret; i++)
		ret = mr_advise_sge_locked(hca, pd_id, advice, &sg_list[i],
					   &addr[i]);
	pthread_mutex_unlock(&hca->lock);
	if (ret)
		ibemu_log_dbg("advise_mr: SGE %u (lkey %#x) refused: errno %d",
			      i - 1, sg_list[i - 1].lkey, ret);
	for (i = 0; i < num_sge && !ret &&
		    advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT;
	     i++)
		if (mr_pages_fault((const void *)addr[i], sg_list[i].length,
				   advice ==
					   IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE) &&
		    flush)
			ret = EFAULT;
	free(addr);
	return ret;
}
