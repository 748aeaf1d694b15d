// SPDX-License-Identifier: MIT
/*
 * The checking mode's registration check (check_reg.h).
 *
 * Two regions of one process over the same bytes with different remote
 * rights (IBA 10.6.3.1: access rights belong to the region, not to the
 * pages) give the peers two keys to one buffer, one of them granting what
 * the other refuses: a program that registered a buffer read-only for one
 * peer finds it written through the key it handed another.  Local write
 * and window binding are the program's own business and not compared;
 * zero-based and on-demand regions are compared by their addresses in
 * this process all the same, but an implicit on-demand region (all of
 * the address space, ibv_reg_mr(3)) overlaps everything by design.
 * Reported once per new region, naming the first older region it
 * conflicts with.
 *
 * Lock rule: hca.mrs is walked under hca.lock, which keeps its regions
 * from being freed meanwhile (hca.h); the report is made after it.
 */
#include "config.h"

#include <pthread.h>

#include <infiniband/verbs.h>

#include "check_reg.h"
#include "hca.h"

#define KEY_RIGHTS                                                       \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |              \
	 IBV_ACCESS_REMOTE_ATOMIC)

static bool implicit(const struct emu_mr *mr)
{
	return !mr->addr && mr->length == UINT64_MAX;
}

static bool overlap(const struct emu_mr *a, const struct emu_mr *b)
{
	uintptr_t a0 = (uintptr_t)a->addr, b0 = (uintptr_t)b->addr;

	return a->length && b->length && !implicit(a) && !implicit(b) &&
	       a0 < b0 + b->length && b0 < a0 + a->length;
}

void check_reg_slow(const struct emu_mr *mr)
{
	struct emu_hca *hca = mr->hca;
	const struct key_table *t = &hca->mrs;
	const struct emu_mr *o;
	struct emu_mr other;
	bool found = false;
	uint32_t i;

	/* Under hca.lock a region in the table is not freed (deregistration
	 * and re-registration change the table under it): copied out, and
	 * reported without it. */
	pthread_mutex_lock(&hca->lock);
	for (i = 0; !found && i < t->size; i++) {
		o = key_table_get(t, i);
		if (!o || o == mr || o->key == mr->key || !overlap(o, mr) ||
		    !((o->access ^ mr->access) & KEY_RIGHTS))
			continue;
		other = *o;
		found = true;
	}
	pthread_mutex_unlock(&hca->lock);
	if (found)
		check_report(CHECK_REG_CONFLICT, mr->key, NULL,
			     "MR lkey %#x (addr %p, length %llu, access %#x) "
			     "registers bytes of MR lkey %#x (addr %p, length "
			     "%llu, access %#x) with other rights",
			     mr->key, (void *)mr->addr,
			     (unsigned long long)mr->length,
			     mr->access & KEY_RIGHTS, other.key,
			     (void *)other.addr,
			     (unsigned long long)other.length,
			     other.access & KEY_RIGHTS);
}
