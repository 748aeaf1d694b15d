// SPDX-License-Identifier: MIT
/*
 * The checking mode's record of the regions registered, and the question
 * libibemu-check.so asks at each munmap and free (check_unmap.h): memory
 * unmapped or freed while a work request that a region registered on it
 * names is in flight, which a real HCA goes on reading and writing
 * (ibv_reg_mr(3): the pages stay pinned to the region, not to the
 * program's mapping).  A region alone over freed memory is not reported:
 * registration caches (UCX's rcache, Open MPI's) keep regions over memory
 * the program freed and deregister them when their memory hooks say so,
 * and the pinned pages make that safe while no work uses them.
 *
 * The record is a table of (start, length, region), open addressing on
 * the start, read without a lock: free asks only whether its pointer is
 * the start of a region, in a few loads and no allocation (it runs for
 * every free of the process, also inside the C library and the dynamic
 * linker); munmap asks whether its range meets one, a walk of the table.
 * A region the table has no room for is not checked.
 *
 * Lock rule: table_lock serialises the writers (registration,
 * deregistration) and a report's reading of the region, released before
 * the report is made; readers load the slots' atomics without it.  A
 * report looks for work in flight with try-locks only (hca.lock, then
 * engine.lock, then each qp.lock): free may be called with any lock of
 * the provider held.  A thread inside the hook is not asked about its
 * own frees.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "check_mem.h"
#include "check_unmap.h"
#include "engine.h"

#define TABLE_SLOTS 1024u
#define TABLE_PROBES 32u
#define SLOT_FREE 0 /* start of a slot never used */
#define SLOT_GONE 1 /* start of a slot whose region went */

static struct table_slot {
	_Atomic uintptr_t start; /* or SLOT_FREE, SLOT_GONE */
	_Atomic uintptr_t end;
	const struct emu_mr *mr; /* under table_lock */
} table[TABLE_SLOTS];
static atomic_uint nregions;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned int table_hash(uintptr_t start)
{
	return (unsigned int)(((uint64_t)start * 0x9e3779b97f4a7c15ull) >>
			      54) & (TABLE_SLOTS - 1);
}

/* A child of fork holds none of the parent's regions (ibv_fork_init(3)),
 * and the lock may have been held by a thread it does not have. */
static void table_child(void)
{
	pthread_mutex_init(&table_lock, NULL);
	memset(table, 0, sizeof(table));
	atomic_store(&nregions, 0);
}

static void table_atfork(void)
{
	pthread_atfork(NULL, NULL, table_child);
}

void check_unmap_reg_slow(const struct emu_mr *mr)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	uintptr_t start = (uintptr_t)mr->addr, s;
	unsigned int i, h = table_hash(start);
	struct table_slot *t;

	/* An implicit on-demand region (addr NULL) covers everything. */
	if (start <= SLOT_GONE || !mr->length)
		return;
	pthread_once(&once, table_atfork);
	pthread_mutex_lock(&table_lock);
	for (i = 0; i < TABLE_PROBES; i++) {
		t = &table[(h + i) & (TABLE_SLOTS - 1)];
		s = atomic_load_explicit(&t->start, memory_order_relaxed);
		if (s != SLOT_FREE && s != SLOT_GONE)
			continue;
		t->mr = mr;
		atomic_store_explicit(&t->end, start + mr->length,
				      memory_order_relaxed);
		atomic_store_explicit(&t->start, start, memory_order_release);
		atomic_fetch_add(&nregions, 1);
		break;
	}
	pthread_mutex_unlock(&table_lock);
}

void check_unmap_dereg_slow(const struct emu_mr *mr)
{
	unsigned int i, h = table_hash((uintptr_t)mr->addr);
	struct table_slot *t;

	pthread_mutex_lock(&table_lock);
	for (i = 0; i < TABLE_PROBES; i++) {
		t = &table[(h + i) & (TABLE_SLOTS - 1)];
		if (t->mr != mr ||
		    atomic_load_explicit(&t->start, memory_order_relaxed) <=
			    SLOT_GONE)
			continue;
		atomic_store_explicit(&t->start, SLOT_GONE,
				      memory_order_release);
		t->mr = NULL;
		atomic_fetch_sub(&nregions, 1);
		break;
	}
	pthread_mutex_unlock(&table_lock);
}

/* The slot of the region starting at p, or NULL. */
static struct table_slot *table_find_start(uintptr_t p)
{
	unsigned int i, h = table_hash(p);
	struct table_slot *t;
	uintptr_t s;

	for (i = 0; i < TABLE_PROBES; i++) {
		t = &table[(h + i) & (TABLE_SLOTS - 1)];
		s = atomic_load_explicit(&t->start, memory_order_acquire);
		if (s == p)
			return t;
		if (s == SLOT_FREE)
			return NULL;
	}
	return NULL;
}

/* The slot of a region that [p, p + len) meets, or NULL. */
static struct table_slot *table_find_range(uintptr_t p, size_t len)
{
	struct table_slot *t;
	unsigned int i;
	uintptr_t s;

	for (i = 0; i < TABLE_SLOTS; i++) {
		t = &table[i];
		s = atomic_load_explicit(&t->start, memory_order_acquire);
		if (s > SLOT_GONE && s < p + len &&
		    p < atomic_load_explicit(&t->end, memory_order_relaxed))
			return t;
	}
	return NULL;
}

/* A work request of the HCA's QPs that uses key, said into buf; "" if
 * none was found.  Try-locks only (see the top); hca.lock keeps the
 * engine from going meanwhile (emu_hca_put stops it under it). */
static void unmap_in_flight(struct emu_hca *hca, uint32_t key, char *buf,
			    size_t len)
{
	const struct wqe *w = NULL;
	struct engine *e;
	struct emu_qp *qp;
	uint32_t pos;

	buf[0] = '\0';
	if (pthread_mutex_trylock(&hca->lock))
		return;
	e = hca->engine;
	if (e && emu_lock_try(&e->lock)) {
		for (qp = e->all_qps; qp && !w; qp = qp->all_next) {
			if (!emu_lock_try(&qp->lock))
				continue;
			w = check_ring_uses(&qp->sq, key, &pos);
			if (!w && qp_has_own_rq(qp))
				w = check_ring_uses(&qp->rq.ring, key, &pos);
			if (w)
				snprintf(buf, len,
					 ", and wr_id %#llx on QP %#x uses it",
					 (unsigned long long)w->wr_id,
					 qp->qpn);
			emu_unlock(&qp->lock);
		}
		emu_unlock(&e->lock);
	}
	pthread_mutex_unlock(&hca->lock);
}

/* What a report says of its region, copied out under table_lock. */
struct unmap_seen {
	uint32_t key;
	const void *addr;
	unsigned long long length;
	char busy[96];
};

/* The region of slot t, if it is still the one the lock-free lookup
 * found (its start at addr for free, meeting [addr, addr + len) for
 * munmap), with the work in flight on it; false if it went. */
static bool unmap_seen_locked(struct table_slot *t, const void *addr,
			      size_t len, bool is_free,
			      struct unmap_seen *seen)
{
	uintptr_t s = atomic_load(&t->start), p = (uintptr_t)addr;
	const struct emu_mr *mr = s > SLOT_GONE ? t->mr : NULL;

	if (!mr || (is_free ? s != p : !(s < p + len && p < atomic_load(&t->end))))
		return false;
	seen->key = mr->key;
	seen->addr = mr->addr;
	seen->length = mr->length;
	unmap_in_flight(mr->hca, mr->key, seen->busy, sizeof(seen->busy));
	return true;
}

static _Thread_local bool in_hook; /* this thread is in ibemu_check_unmap */

static void unmap_report(struct table_slot *t, const void *addr,
			 size_t len, bool is_free)
{
	struct unmap_seen seen;
	char call[64];
	bool found;

	/* A report may free (the stack's first unwinding, its cache):
	 * that free is not asked about, and no lock is held over it. */
	pthread_mutex_lock(&table_lock);
	found = unmap_seen_locked(t, addr, len, is_free, &seen);
	pthread_mutex_unlock(&table_lock);
	if (!found || !seen.busy[0])
		return;
	if (is_free)
		snprintf(call, sizeof(call), "free(%p)", addr);
	else
		snprintf(call, sizeof(call), "munmap(%p, %zu)", addr, len);
	check_report(CHECK_UNMAP_REGISTERED, seen.key, NULL,
		     "%s of memory still registered as MR lkey %#x (addr %p, "
		     "length %llu)%s",
		     call, seen.key, seen.addr, seen.length, seen.busy);
}

/*
 * Asked by libibemu-check.so before munmap(addr, len) (is_free 0) and
 * free(addr) (is_free 1): reports if a region is registered there.
 * Exported (libibemu.map); nothing to do while no region is recorded,
 * which is before the checking mode was read, too.
 */
__attribute__((visibility("default"))) void
ibemu_check_unmap(const void *addr, size_t len, int is_free);
__attribute__((visibility("default"))) void
ibemu_check_unmap(const void *addr, size_t len, int is_free)
{
	struct table_slot *t;

	if (!atomic_load_explicit(&nregions, memory_order_relaxed) || !addr)
		return;
	if (is_free)
		t = table_find_start((uintptr_t)addr);
	else
		t = len ? table_find_range((uintptr_t)addr, len) : NULL;
	if (t && !in_hook) {
		in_hook = true;
		unmap_report(t, addr, len, is_free != 0);
		in_hook = false;
	}
}
