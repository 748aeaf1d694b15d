// SPDX-License-Identifier: MIT
/*
 * Device memory (ibv_alloc_dm(3), ibv_reg_dm_mr, ibv_import_dm(3)).
 *
 * An HCA's device memory is memory on the adapter that the host reaches
 * by copies (mlx5's MEMIC) and the HCA by memory regions.  ibemu's
 * adapter is the process, so a DM is pages of the process's own: copies
 * are memcpy, and a region on a DM is an ordinary region over those
 * pages, reached by peers as any other.
 *
 * Rules, as the kernel and rdma-core apply them:
 *  - alloc: comp_mask must be 0 (no attribute bits are defined), length
 *    1..max_dm_size (ENOMEM above it: mlx5 reports no room); the pages
 *    are page aligned, so an alignment up to the page size is given and
 *    a larger one refused (EINVAL).  Each process has max_dm_size
 *    (IBEMU_MAX_DM_SIZE) of its own.
 *  - copies: offset and length multiples of IBEMU_DM_ALIGN (mlx5's
 *    4-byte granularity) and within the DM, else EINVAL.
 *  - registration: zero based (IBV_ACCESS_ZERO_BASED required, as the
 *    kernel's UVERBS_METHOD_DM_MR_REG requires it), offset + length
 *    within the DM (EINVAL); the region's addr is NULL and its
 *    requesters name 0..length-1.  A region keeps its DM: freeing a DM
 *    with regions on it is EBUSY (the kernel's DM use count).
 *    ibemu's regions keep an address's page offset in the IOVA
 *    (emulator/hca/mr.c), so the offset must be a multiple of the page
 *    size (EINVAL otherwise).
 *  - import: a duplicated command fd of this process names the same DM
 *    (one more handle; the memory goes with the last).  Another
 *    process's DM is its memory, which this process cannot reach:
 *    EOPNOTSUPP, as for its MRs (import.c).
 *
 * Lock rule: dm_lock protects the list of DMs, every DM's refs,
 * regions and next, and dm_bytes; it is a leaf.  The pages and length
 * never change while the DM lives.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ibemu.h"
#include "log.h"

struct ibemu_dm_mem {
	struct ibemu_dm_mem *next;
	void *buf;
	size_t length, mapped;
	uint32_t handle;
	int refs; /* handles: the allocation and its imports */
	int regions; /* memory regions on it */
};

/* One handle of a DM: what libibverbs and the application hold. */
struct ibemu_dm {
	struct ibv_dm dm;
	struct ibemu_dm_mem *mem;
};

static pthread_mutex_t dm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibemu_dm_mem *dm_list;
static size_t dm_bytes; /* allocated in this process */
static uint32_t dm_next_handle;

static inline struct ibemu_dm *to_edm(struct ibv_dm *dm)
{
	return container_of(dm, struct ibemu_dm, dm);
}

static int dm_check_copy(struct ibemu_dm *edm, uint64_t offset,
			 size_t length)
{
	if (offset % IBEMU_DM_ALIGN || length % IBEMU_DM_ALIGN ||
	    offset > edm->mem->length || length > edm->mem->length - offset)
		return EINVAL;
	return 0;
}

static int dm_memcpy_to(struct ibv_dm *dm, uint64_t dm_offset,
			const void *host_addr, size_t length)
{
	struct ibemu_dm *edm = to_edm(dm);
	int ret = dm_check_copy(edm, dm_offset, length);

	if (!ret && length)
		memcpy((char *)edm->mem->buf + dm_offset, host_addr, length);
	return ret;
}

static int dm_memcpy_from(void *host_addr, struct ibv_dm *dm,
			  uint64_t dm_offset, size_t length)
{
	struct ibemu_dm *edm = to_edm(dm);
	int ret = dm_check_copy(edm, dm_offset, length);

	if (!ret && length)
		memcpy(host_addr, (char *)edm->mem->buf + dm_offset, length);
	return ret;
}

static struct ibv_dm *dm_handle_new(struct ibv_context *context,
				    struct ibemu_dm_mem *mem)
{
	struct ibemu_dm *edm = calloc(1, sizeof(*edm));

	if (!edm)
		return NULL;
	edm->mem = mem;
	edm->dm.context = context;
	edm->dm.memcpy_to_dm = dm_memcpy_to;
	edm->dm.memcpy_from_dm = dm_memcpy_from;
	edm->dm.comp_mask = IBV_DM_MASK_HANDLE;
	edm->dm.handle = mem->handle;
	return &edm->dm;
}

/* Takes one handle off mem; unmaps it with the last.  dm_lock held. */
static void dm_mem_put_locked(struct ibemu_dm_mem *mem)
{
	struct ibemu_dm_mem **p;

	if (--mem->refs)
		return;
	for (p = &dm_list; *p != mem; p = &(*p)->next)
		;
	*p = mem->next;
	dm_bytes -= mem->length;
	munmap(mem->buf, mem->mapped);
	free(mem);
}

static int dm_check_attr(const struct ibv_alloc_dm_attr *attr)
{
	long page = sysconf(_SC_PAGESIZE);

	if (!attr || attr->comp_mask || !attr->length ||
	    attr->log_align_req >= 8 * sizeof(long) ||
	    (1ul << attr->log_align_req) > (unsigned long)page)
		return EINVAL;
	if (attr->length > IBEMU_MAX_DM_SIZE)
		return ENOMEM;
	return 0;
}

struct ibv_dm *ibemu_alloc_dm(struct ibv_context *context,
			      struct ibv_alloc_dm_attr *attr)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ibemu_dm_mem *mem;
	struct ibv_dm *dm;
	int ret = dm_check_attr(attr);

	if (ret) {
		errno = ret;
		return NULL;
	}
	mem = calloc(1, sizeof(*mem));
	if (!mem) {
		errno = ENOMEM;
		return NULL;
	}
	mem->length = attr->length;
	mem->mapped = (attr->length + page - 1) & ~(page - 1);
	mem->buf = mmap(NULL, mem->mapped, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem->buf == MAP_FAILED) {
		free(mem);
		errno = ENOMEM;
		return NULL;
	}
	mem->refs = 1;
	pthread_mutex_lock(&dm_lock);
	if (attr->length > IBEMU_MAX_DM_SIZE - dm_bytes) {
		pthread_mutex_unlock(&dm_lock);
		munmap(mem->buf, mem->mapped);
		free(mem);
		errno = ENOMEM;
		return NULL;
	}
	dm_bytes += mem->length;
	mem->handle = dm_next_handle++;
	mem->next = dm_list;
	dm_list = mem;
	dm = dm_handle_new(context, mem);
	if (!dm)
		dm_mem_put_locked(mem);
	pthread_mutex_unlock(&dm_lock);
	if (!dm)
		errno = ENOMEM;
	return dm;
}

int ibemu_free_dm(struct ibv_dm *dm)
{
	struct ibemu_dm *edm = to_edm(dm);

	pthread_mutex_lock(&dm_lock);
	/* The last handle of a DM that regions are on stays (the kernel's
	 * DM use count, ib_destroy_usecnt). */
	if (edm->mem->refs == 1 && edm->mem->regions) {
		pthread_mutex_unlock(&dm_lock);
		return EBUSY;
	}
	dm_mem_put_locked(edm->mem);
	pthread_mutex_unlock(&dm_lock);
	free(edm);
	return 0;
}

struct ibv_dm *ibemu_import_dm(struct ibv_context *context,
			       uint32_t dm_handle)
{
	struct ibemu_dm_mem *mem;
	struct ibv_dm *dm = NULL;

	if (ibemu_ctx_stale(context)) {
		errno = EIO;
		return NULL;
	}
	if (to_ectx(context)->foreign) {
		errno = EOPNOTSUPP; /* another process's memory */
		return NULL;
	}
	pthread_mutex_lock(&dm_lock);
	for (mem = dm_list; mem && mem->handle != dm_handle; mem = mem->next)
		;
	if (mem) {
		dm = dm_handle_new(context, mem);
		if (dm)
			mem->refs++;
	}
	pthread_mutex_unlock(&dm_lock);
	if (!dm)
		errno = mem ? ENOMEM : EINVAL;
	return dm;
}

void ibemu_unimport_dm(struct ibv_dm *dm)
{
	struct ibemu_dm *edm = to_edm(dm);

	pthread_mutex_lock(&dm_lock);
	dm_mem_put_locked(edm->mem);
	pthread_mutex_unlock(&dm_lock);
	free(edm);
}

struct ibv_mr *ibemu_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
			       uint64_t dm_offset, size_t length,
			       unsigned int access)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct ibemu_dm_mem *mem = dm ? to_edm(dm)->mem : NULL;
	struct ibv_mr *mr;

	if (!mem || !(access & IBV_ACCESS_ZERO_BASED) ||
	    dm_offset > mem->length || length > mem->length - dm_offset ||
	    dm_offset % page) {
		errno = EINVAL;
		return NULL;
	}
	mr = ibemu_reg_mr(pd, (char *)mem->buf + dm_offset, length, 0,
			  (int)(access & ~(unsigned int)IBV_ACCESS_ZERO_BASED));
	if (!mr)
		return NULL;
	/* Zero based: requesters name 0..length-1 (the kernel's DM regions
	 * report no address). */
	mr->addr = NULL;
	pthread_mutex_lock(&dm_lock);
	ibemu_mr_share_set_dm(to_emr(mr)->share, mem);
	mem->regions++;
	pthread_mutex_unlock(&dm_lock);
	return mr;
}

void ibemu_dm_region_gone(struct ibemu_dm_mem *mem)
{
	pthread_mutex_lock(&dm_lock);
	mem->regions--;
	pthread_mutex_unlock(&dm_lock);
}
