// SPDX-License-Identifier: MIT
/*
 * Memory regions (IBA 10.6).
 *
 * Keys: a key is (index + 1) << 8 | variant.  The index names a slot of
 * the process's MR table; the 8-bit variant is the "key" part of IBA
 * 10.6.3.1 and changes every time the slot is reused, and slots are handed
 * out round robin, so a deregistered MR's keys stop working and are not
 * handed out again until the whole table and all 256 variants wrapped.
 * lkey == rkey, as on rxe.
 *
 * Lock rule: ibemu_process.lock serialises changes to mr_table,
 * mr_variant, mr_cursor and nr_mrs; the data path reads mr_table entries
 * without it (acquire loads of entries published with release).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cma.h"
#include "ibemu.h"
#include "log.h"

#define MR_ACCESS_SUPPORTED                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING)
#define MR_ACCESS_KNOWN                                                        \
	(MR_ACCESS_SUPPORTED | IBV_ACCESS_ZERO_BASED |                         \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

int ibemu_mr_table_init(struct ibemu_process *proc)
{
	proc->mr_table = calloc(IBEMU_MAX_MR, sizeof(*proc->mr_table));
	proc->mr_variant = calloc(IBEMU_MAX_MR, sizeof(*proc->mr_variant));
	if (!proc->mr_table || !proc->mr_variant) {
		ibemu_mr_table_fini(proc);
		return -ENOMEM;
	}
	proc->mr_cursor = 0;
	proc->nr_mrs = 0;
	return 0;
}

void ibemu_mr_table_fini(struct ibemu_process *proc)
{
	free(proc->mr_table);
	free(proc->mr_variant);
	proc->mr_table = NULL;
	proc->mr_variant = NULL;
}

static int mr_key_alloc(struct ibemu_mr *mr)
{
	struct ibemu_process *proc = &ibemu_process;
	uint32_t n, idx;

	pthread_mutex_lock(&proc->lock);
	if (proc->nr_mrs >= IBEMU_MAX_MR)
		goto full;
	for (n = 0; n < IBEMU_MAX_MR; n++) {
		idx = (proc->mr_cursor + n) % IBEMU_MAX_MR;
		if (proc->mr_table[idx])
			continue;
		proc->mr_cursor = (idx + 1) % IBEMU_MAX_MR;
		proc->nr_mrs++;
		mr->index = idx;
		mr->vmr.ibv_mr.lkey = (idx + 1) << 8 | proc->mr_variant[idx];
		mr->vmr.ibv_mr.rkey = mr->vmr.ibv_mr.lkey;
		/* Published last: lookups run without the lock. */
		__atomic_store_n(&proc->mr_table[idx], mr, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&proc->lock);
		return 0;
	}
full:
	pthread_mutex_unlock(&proc->lock);
	ibemu_log_dbg("reg_mr: all %d memory regions in use", IBEMU_MAX_MR);
	return -ENOMEM;
}

static void mr_key_free(struct ibemu_mr *mr)
{
	struct ibemu_process *proc = &ibemu_process;

	pthread_mutex_lock(&proc->lock);
	__atomic_store_n(&proc->mr_table[mr->index], NULL, __ATOMIC_RELEASE);
	proc->mr_variant[mr->index]++;
	proc->nr_mrs--;
	pthread_mutex_unlock(&proc->lock);
}

/*
 * The MR a key names, or NULL.  Lock-free on the data path: an entry is
 * published with release order once complete.  As on an HCA, an MR
 * deregistered while a request uses it is the application's error.
 */
struct ibemu_mr *ibemu_mr_lookup(uint32_t key, bool remote)
{
	struct ibemu_process *proc = &ibemu_process;
	uint32_t idx = (key >> 8) - 1;
	struct ibemu_mr **table, *mr;

	if ((key >> 8) == 0 || idx >= IBEMU_MAX_MR)
		return NULL;
	table = __atomic_load_n(&proc->mr_table, __ATOMIC_ACQUIRE);
	if (!table)
		return NULL;
	mr = __atomic_load_n(&table[idx], __ATOMIC_ACQUIRE);
	if (!mr || (remote ? mr->vmr.ibv_mr.rkey : mr->vmr.ibv_mr.lkey) != key)
		return NULL;
	return mr;
}

/*
 * A real HCA pins the pages and fails with EFAULT when the range is not
 * mapped; mincore() tells the same without touching the memory.
 */
static int mr_range_mapped(const void *addr, size_t length)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)addr & ~((uintptr_t)page - 1);
	uintptr_t end = (uintptr_t)addr + length;
	unsigned char vec[4096];
	size_t chunk = sizeof(vec) * (size_t)page;

	while (start < end) {
		size_t len = end - start < chunk ? end - start : chunk;

		if (mincore((void *)start, len, vec))
			return -EFAULT;
		start += len;
	}
	return 0;
}

static int mr_check_access(int access)
{
	if (access & ~MR_ACCESS_KNOWN) {
		ibemu_log_dbg("reg_mr: unknown access bits %#x",
			      access & ~MR_ACCESS_KNOWN);
		return -EINVAL;
	}
	if (access & ~MR_ACCESS_SUPPORTED) {
		ibemu_log_dbg("reg_mr: access %#x not offered (no ODP, zero "
			      "based or huge page MRs)",
			      access & ~MR_ACCESS_SUPPORTED);
		return -EOPNOTSUPP;
	}
	/* Remote write and remote atomic access require local write
	 * (IBA 10.6.3.1 memory access rights; the kernel enforces it for
	 * every HCA in ib_check_mr_access). */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		ibemu_log_dbg("reg_mr: remote write/atomic needs local write");
		return -EINVAL;
	}
	return 0;
}

static int mr_check_range(void *addr, size_t length)
{
	if (length > IBEMU_MAX_MR_SIZE) {
		ibemu_log_dbg("reg_mr: length %zu > max_mr_size", length);
		return -EINVAL;
	}
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return -EINVAL;
	if (length && mr_range_mapped(addr, length)) {
		ibemu_log_dbg("reg_mr: [%p, +%zu) is not mapped", addr, length);
		return -EFAULT;
	}
	return 0;
}

struct ibv_mr *ibemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access)
{
	struct ibemu_mr *mr;
	int ret;

	if (ibemu_ctx_stale(pd->context)) {
		errno = EIO;
		return NULL;
	}
	ret = mr_check_access(access);
	if (!ret)
		ret = mr_check_range(addr, length);
	if (ret)
		goto err;
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		ret = -ENOMEM;
		goto err;
	}
	mr->vmr.mr_type = PABI_MR_TYPE_MR;
	mr->vmr.access = access;
	mr->vmr.ibv_mr.context = pd->context;
	mr->vmr.ibv_mr.pd = pd;
	mr->vmr.ibv_mr.addr = addr;
	mr->vmr.ibv_mr.length = length;
	mr->iova = hca_va;
	ret = mr_key_alloc(mr);
	if (ret) {
		free(mr);
		goto err;
	}
	mr->vmr.ibv_mr.handle = mr->index;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	cma_publish_mr(mr);
	return &mr->vmr.ibv_mr;
err:
	errno = -ret;
	return NULL;
}

int ibemu_dereg_mr(struct verbs_mr *vmr)
{
	struct ibemu_mr *mr = container_of(vmr, struct ibemu_mr, vmr);

	if (ibemu_ctx_stale(vmr->ibv_mr.context))
		return EIO;
	cma_withdraw_mr(mr);
	mr_key_free(mr);
	atomic_fetch_sub(&to_epd(vmr->ibv_mr.pd)->usecnt, 1);
	free(mr);
	return 0;
}

/* Reregister a memory region (IBA 10.6.3): change PD, access, translation. */
int ibemu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		   void *addr, size_t length, int access)
{
	struct ibemu_mr *mr = container_of(vmr, struct ibemu_mr, vmr);
	int ret = 0;

	if (ibemu_ctx_stale(vmr->ibv_mr.context))
		return EIO;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		ret = mr_check_access(access);
	if (!ret && (flags & IBV_REREG_MR_CHANGE_TRANSLATION))
		ret = mr_check_range(addr, length);
	if (!ret && (flags & IBV_REREG_MR_CHANGE_PD) &&
	    (!pd || pd->context != vmr->ibv_mr.context))
		ret = -EINVAL;
	if (ret)
		return -ret;
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_sub(&to_epd(vmr->ibv_mr.pd)->usecnt, 1);
		atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		vmr->access = access;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		mr->iova = (uintptr_t)addr;
		vmr->ibv_mr.addr = addr;
		vmr->ibv_mr.length = length;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		vmr->ibv_mr.pd = pd;
	cma_publish_mr(mr);
	return 0;
}
