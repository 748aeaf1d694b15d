// SPDX-License-Identifier: MIT
/*
 * The memory translation and protection table (IBA 10.6).
 *
 * Keys: a key's number is index + 1 (key_table.h); the index names a slot
 * of the process's table.  The rest is the "key" part of IBA 10.6.3.1: an
 * 8-bit variant that changes every time the slot is reused, and a tag
 * drawn at random for each registration.  Slots are handed out round
 * robin from a random start, so a deregistered region's keys stop working
 * and are not handed out again until the whole table and all 256 variants
 * wrapped and the tag came out the same, and no region's key can be told
 * in advance.  A lookup compares the whole key.  lkey == rkey, as on rxe.
 *
 * Lock rule: hca.lock serialises changes to the table (mr_table,
 * mr_variant, mr_cursor, nr_mrs).  The engines look keys up without it,
 * and always under the lock of the QP they work for, from the lookup to
 * the end of the copy.  Deregistration clears the entry, then takes and
 * releases every QP lock of the HCA (engine_qp_quiesce): a lookup either
 * saw the entry gone or has finished its copy.  So once emu_mr_dereg()
 * returns no operation of this process's HCA touches the region (IBA
 * 10.6.3.5, 11.2.8.4: after deregistration the keys are invalid and the
 * memory is not accessed), and the data path pays nothing for it.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_mem.h"
#include "check_reg.h"
#include "check_unmap.h"
#include "engine.h"
#include "hca.h"
#include "log.h"

#define MR_ACCESS_SUPPORTED                                                    \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |                   \
	 IBV_ACCESS_MW_BIND | IBV_ACCESS_RELAXED_ORDERING)
#define MR_ACCESS_KNOWN                                                        \
	(MR_ACCESS_SUPPORTED | IBV_ACCESS_ZERO_BASED |                         \
	 IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB)

int mr_table_init(struct emu_hca *hca)
{
	return key_table_init(&hca->mrs, IBEMU_MAX_MR);
}

void mr_table_fini(struct emu_hca *hca)
{
	key_table_fini(&hca->mrs);
}

static int mr_key_alloc(struct emu_hca *hca, struct emu_mr *mr)
{
	uint32_t idx, part;

	pthread_mutex_lock(&hca->lock);
	if (key_table_find(&hca->mrs, &idx, &part)) {
		pthread_mutex_unlock(&hca->lock);
		ibemu_log_dbg("reg_mr: all %d memory regions in use",
			      IBEMU_MAX_MR);
		return ENOMEM;
	}
	mr->index = idx;
	mr->key = key_table_key(idx + 1, part);
	/* Published last: lookups run without the lock. */
	key_table_take(&hca->mrs, idx, mr);
	pthread_mutex_unlock(&hca->lock);
	return 0;
}

static void mr_key_free(struct emu_hca *hca, struct emu_mr *mr)
{
	pthread_mutex_lock(&hca->lock);
	key_table_free(&hca->mrs, mr->index);
	pthread_mutex_unlock(&hca->lock);
	/* Either a lookup sees the entry gone, or it is waited for. */
	engine_qp_quiesce(hca->engine);
}

static int mr_check_access(int access)
{
	if (access & ~MR_ACCESS_KNOWN) {
		ibemu_log_dbg("reg_mr: unknown access bits %#x",
			      access & ~MR_ACCESS_KNOWN);
		return EINVAL;
	}
	/* IBV_ACCESS_HUGETLB is a hint valid only with on-demand paging
	 * (ibv_reg_mr(3)); ibemu needs none. */
	if ((access & IBV_ACCESS_ON_DEMAND) && (access & IBV_ACCESS_HUGETLB))
		access &= ~IBV_ACCESS_HUGETLB;
	if (access & ~(MR_ACCESS_SUPPORTED | IBV_ACCESS_ON_DEMAND)) {
		ibemu_log_dbg("reg_mr: access %#x not offered (no zero based "
			      "regions, huge pages only with on-demand paging)",
			      access & ~MR_ACCESS_SUPPORTED);
		return EOPNOTSUPP;
	}
	/* Remote write and remote atomic access require local write
	 * (IBA 10.6.3.1 memory access rights; the kernel enforces it for
	 * every HCA in ib_check_mr_access). */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE)) {
		ibemu_log_dbg("reg_mr: remote write/atomic needs local write");
		return EINVAL;
	}
	return 0;
}

/*
 * Whether (addr, length, iova, access) can be a region.  An implicit
 * on-demand paging region (IBV_ODP_SUPPORT_IMPLICIT, ibv_reg_mr(3)) is
 * addr NULL, length SIZE_MAX: the whole address space, at IOVA 0 as
 * mlx5 requires (mlx5_ib_reg_user_mr: start 0, length U64_MAX, iova 0,
 * else EINVAL).  Any other region is at most max_mr_size and does not
 * wrap.  pin: the pages are checked now, as a real HCA pins them (the
 * kernel's ib_umem_get, asking for write access when the region may be
 * written: local write, hence remote write and atomics too): an
 * unmapped page, a PROT_NONE page, or a read-only page of a writable
 * region fails registration with EFAULT.  An on-demand paging region
 * pins nothing: its pages are faulted in at each access (mr_pages.c).
 */
static bool mr_is_implicit(const void *addr, size_t length, int access)
{
	return !addr && length == SIZE_MAX && (access & IBV_ACCESS_ON_DEMAND);
}

static int mr_check(void *addr, size_t length, uint64_t iova, int access,
		    bool pin)
{
	bool write = access & IBV_ACCESS_LOCAL_WRITE;
	int ret = mr_check_access(access);

	if (ret)
		return ret;
	if (mr_is_implicit(addr, length, access)) {
		if (iova) {
			ibemu_log_dbg("reg_mr: an implicit region's iova is 0");
			return EINVAL;
		}
		return 0;
	}
	if (length > IBEMU_MAX_MR_SIZE) {
		ibemu_log_dbg("reg_mr: length %zu > max_mr_size", length);
		return EINVAL;
	}
	if ((uintptr_t)addr + length < (uintptr_t)addr)
		return EINVAL;
	if (pin && !(access & IBV_ACCESS_ON_DEMAND) && length &&
	    mr_pages_mapped(addr, length, write)) {
		ibemu_log_dbg("reg_mr: [%p, +%zu) is not mapped with %s access",
			      addr, length, write ? "read-write" : "read");
		return EFAULT;
	}
	/* The IOVA keeps the address's offset within its page: the Linux
	 * core maps a region page by page and refuses any other IOVA for
	 * every device (ib_uverbs_reg_mr); ibemu follows it (doc/conformance.md,
	 * "What ibemu does where the Linux stack and the spec differ"). */
	if (((uintptr_t)addr ^ iova) & ((uint64_t)sysconf(_SC_PAGESIZE) - 1)) {
		ibemu_log_dbg("reg_mr: iova 0x%llx and address %p differ in "
			      "their page offset",
			      (unsigned long long)iova, addr);
		return EINVAL;
	}
	return 0;
}

int emu_mr_reg(struct emu_hca *hca, uint64_t pd_id, void *addr,
	       size_t length, uint64_t iova, int access, struct emu_mr **mr_p,
	       uint32_t *key_p)
{
	struct emu_mr *mr;
	int ret;

	ret = mr_check(addr, length, iova, access, true);
	if (ret)
		return ret;
	mr = calloc(1, sizeof(*mr));
	if (!mr)
		return ENOMEM;
	mr->hca = hca;
	mr->pd_id = pd_id;
	mr->addr = addr;
	mr->length = length;
	mr->iova = iova;
	mr->access = access;
	/* Peers may map what they may reach (transport.h, mr_share);
	 * before the region is in the table, so that nothing writes it
	 * meanwhile.  Not an on-demand paging region: moving its pages
	 * would fault every one of them in, and some need not exist;
	 * peers reach it by cross-memory attach, which faults in what a
	 * placement touches, or by packets. */
	if (!(access & IBV_ACCESS_ON_DEMAND))
		engine_mr_share(hca, addr, length, access, &mr->win);
	ret = mr_key_alloc(hca, mr);
	if (ret) {
		engine_mr_release(hca, &mr->win);
		free(mr);
		return ret;
	}
	engine_mr_publish(hca->engine, mr);
	check_reg(mr);
	check_unmap_reg(mr);
	*mr_p = mr;
	*key_p = mr->key;
	return 0;
}

int emu_mr_dereg(struct emu_mr *mr)
{
	check_mem_dereg(mr);
	check_unmap_dereg(mr);
	engine_mr_withdraw(mr->hca->engine, mr);
	mr_key_free(mr->hca, mr);
	engine_mr_release(mr->hca, &mr->win);
	free(mr);
	return 0;
}

void emu_mr_attr(struct emu_mr *mr, struct emu_mr_attr *attr)
{
	pthread_mutex_lock(&mr->hca->lock);
	attr->addr = mr->addr;
	attr->length = mr->length;
	attr->access = mr->access;
	attr->key = mr->key;
	pthread_mutex_unlock(&mr->hca->lock);
}

/* Put r in mr's table entry; then no lookup holds the entry's previous
 * region (engine_qp_quiesce, see the head of this file). */
static void mr_table_swap(struct emu_hca *hca, uint32_t index,
			  struct emu_mr *r)
{
	pthread_mutex_lock(&hca->lock);
	key_table_put(&hca->mrs, index, r);
	pthread_mutex_unlock(&hca->lock);
	engine_qp_quiesce(hca->engine);
}

/*
 * Reregister a memory region (IBA 10.6.3.6, 11.2.8.x): change PD, access,
 * translation, keeping the keys.  Every check is made first, so a refused
 * call leaves the region as it was (ibv_rereg_mr(3) only promises that
 * for IBV_REREG_MR_ERR_INPUT).  The key never stops naming a region:
 * lookups see the old one until a copy with the new attributes replaces
 * it in the table, and once the call returns nothing reaches the old
 * range or uses the old rights or PD.  A requester placing data directly
 * finds the region withdrawn meanwhile and sends packets instead, which
 * the table serves; the withdrawal waits for its placements in flight
 * (cma.c), as deregistration does.
 */
int emu_mr_rereg(struct emu_mr *mr, int flags, uint64_t pd_id, void *addr,
		 size_t length, int access)
{
	bool moved = flags & IBV_REREG_MR_CHANGE_TRANSLATION;
	int to_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access
							     : mr->access;
	struct emu_hca *hca = mr->hca;
	struct emu_mr *next;
	bool pin;
	int ret = 0;

	/* The region as it will be must be one ibv_reg_mr would make; its
	 * pages are checked if they are new, or no longer paged on demand. */
	pin = moved || ((mr->access & ~to_access) & IBV_ACCESS_ON_DEMAND);
	if (moved || (flags & IBV_REREG_MR_CHANGE_ACCESS))
		ret = mr_check(moved ? addr : mr->addr,
			       moved ? length : mr->length,
			       moved ? (uintptr_t)addr : mr->iova, to_access,
			       pin);
	if (ret)
		return ret;
	next = malloc(sizeof(*next));
	if (!next)
		return ENOMEM;
	*next = *mr;
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		next->access = access;
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		next->iova = (uintptr_t)addr;
		next->addr = addr;
		next->length = length;
		/* The new range is reached by cross-memory attach. */
		memset(&next->win, 0, sizeof(next->win));
	}
	if (flags & IBV_REREG_MR_CHANGE_PD)
		next->pd_id = pd_id;
	if (moved)
		check_unmap_dereg(mr);
	engine_mr_withdraw(hca->engine, mr);
	mr_table_swap(hca, mr->index, next);
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION)
		engine_mr_release(hca, &mr->win);
	/* Nothing looks at mr now: it takes the new attributes. */
	pthread_mutex_lock(&hca->lock);
	*mr = *next;
	pthread_mutex_unlock(&hca->lock);
	mr_table_swap(hca, mr->index, mr);
	free(next);
	engine_mr_publish(hca->engine, mr);
	check_reg(mr);
	if (moved)
		check_unmap_reg(mr);
	return 0;
}
