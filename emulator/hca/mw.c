// SPDX-License-Identifier: MIT
/*
 * Memory windows (IBA 10.6.7): remote access to part of a memory region,
 * granted and revoked by the consumer without reregistering the region.
 *
 * Types offered: 1 (bound by the Bind Memory Window verb, ibv_bind_mw;
 * always valid, rebinding and unbinding change its R_Key) and 2B (bound by
 * a BIND_MW work request; valid from the bind until a Local Invalidate or
 * a Send with Invalidate, and only through the QP that bound it).  No
 * zero-based windows (IBA 10.6.7.2.1 makes them optional).
 *
 * Keys: a window's R_Key has the number IBEMU_MAX_MR + index + 1
 * (key_table.h), past every region's, so the two never meet (mr_lookup()
 * finds no region for a window's key).  The low 8 bits are the "key" of
 * IBA 10.6.7.2.3: the HCA chooses them at allocation (a variant that
 * changes each time the slot is reused), a type 1 bind takes the next one
 * (ibv_inc_rkey), a type 2 bind takes the consumer's.  The tag above the
 * number is drawn at random at allocation and kept by every bind, so no
 * window's key can be told in advance; every check compares the whole
 * key.
 *
 * Windows are never published for requester-placed RDMA (cma.c): no
 * region of the inbox's table carries a window's key, so a WRITE or READ
 * through a window always goes as packets to the responder, which checks
 * it here.  Binding and invalidation therefore need no fence of the
 * placement path.
 *
 * Lock rule: hca.mw_lock protects the window table (mws, nr_mw_bound2)
 * and every field of every window that a bind or an invalidation
 * changes.  It is a leaf: taken under a QP lock, no other
 * lock is taken under it.  The responder holds it from its check of a
 * window to the end of the copy (mw_access_begin/end), so once a bind,
 * an invalidation or a deallocation has returned, no access through the
 * old key touches memory (IBA 10.6.7.2.4, 10.6.7.3).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "engine.h"
#include "hca.h"
#include "log.h"

/* The remote access rights a window may grant (IBA 10.6.7.2.2). */
#define MW_ACCESS_REMOTE                                                       \
	(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_ATOMIC)

int mw_table_init(struct emu_hca *hca)
{
	int ret = key_table_init(&hca->mws, IBEMU_MAX_MW);

	if (ret)
		return ret;
	pthread_mutex_init(&hca->mw_lock, NULL);
	hca->nr_mw_bound2 = 0;
	return 0;
}

void mw_table_fini(struct emu_hca *hca)
{
	key_table_fini(&hca->mws);
}

_Static_assert(IBEMU_MAX_MR + IBEMU_MAX_MW < 1u << KEY_NUM_BITS,
	       "region and window numbers fit a key");

bool mw_key_is_window(uint32_t key)
{
	uint32_t n = key_num(key);

	return n > IBEMU_MAX_MR && n <= IBEMU_MAX_MR + IBEMU_MAX_MW;
}

/* The window whose index key names, or NULL; caller holds mw_lock. */
static struct emu_mw *mw_by_index_locked(struct emu_hca *hca, uint32_t key)
{
	if (!mw_key_is_window(key))
		return NULL;
	return key_table_get(&hca->mws, key_num(key) - IBEMU_MAX_MR - 1);
}

int emu_mw_alloc(struct emu_hca *hca, uint64_t pd_id, enum ibv_mw_type type,
		 struct emu_mw **mw_p, uint32_t *key_p)
{
	struct emu_mw *mw;
	uint32_t idx, part;

	if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
		ibemu_log_dbg("alloc_mw: no window type %d", (int)type);
		return EINVAL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return ENOMEM;
	mw->hca = hca;
	mw->pd_id = pd_id;
	mw->type = type;
	pthread_mutex_lock(&hca->mw_lock);
	if (!key_table_find(&hca->mws, &idx, &part)) {
		mw->index = idx;
		mw->key = key_table_key(IBEMU_MAX_MR + idx + 1, part);
		key_table_take(&hca->mws, idx, mw);
		pthread_mutex_unlock(&hca->mw_lock);
		*mw_p = mw;
		*key_p = mw->key;
		return 0;
	}
	pthread_mutex_unlock(&hca->mw_lock);
	free(mw);
	ibemu_log_dbg("alloc_mw: all %d memory windows in use", IBEMU_MAX_MW);
	return ENOMEM;
}

/* Take back what mw grants; caller holds hca.mw_lock. */
static void mw_unbind_locked(struct emu_hca *hca, struct emu_mw *mw)
{
	if (mw->bound && mw->type == IBV_MW_TYPE_2)
		hca->nr_mw_bound2--;
	mw->bound = false;
	mw->length = 0;
	mw->access = 0;
	mw->mr_key = 0;
	mw->qpn = 0;
}

/* Deallocation unbinds the window first (ibv_alloc_mw(3)); its keys stop
 * working before this returns (see the lock rule). */
int emu_mw_dealloc(struct emu_mw *mw)
{
	struct emu_hca *hca = mw->hca;

	pthread_mutex_lock(&hca->mw_lock);
	mw_unbind_locked(hca, mw);
	key_table_free(&hca->mws, mw->index);
	pthread_mutex_unlock(&hca->mw_lock);
	free(mw);
	return 0;
}

/* The checks on the region a window is bound to, IBA 10.6.7.2.2. */
static bool mw_bind_region_ok(const struct emu_mw *mw, const struct emu_mr *mr,
			      const struct wqe_bind *b)
{
	uint64_t end;

	/* The region and the window belong to one PD. */
	if (!mr || mr->pd_id != mw->pd_id)
		return false;
	/* C10-73: the region was registered with Memory Window Binding
	 * access. */
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return false;
	/* C10-74: a window granting remote write or atomic access needs
	 * a region with local write access. */
	if ((b->access &
	     (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return false;
	/* C10-75: the window lies within the region. */
	if (__builtin_add_overflow(b->addr, b->length, &end))
		return false;
	return b->addr >= mr->iova && end <= mr->iova + mr->length;
}

/* Whether the bind b may be executed for mw by qp (IBA 10.6.7.2). */
static bool mw_bind_ok(const struct emu_qp *qp, const struct emu_mw *mw,
		       const struct emu_mr *mr, const struct wqe_bind *b)
{
	if (b->access & ~(MW_ACCESS_REMOTE | IBV_ACCESS_LOCAL_WRITE)) {
		/* Zero-based windows (o10-36.2.2 forbids them for type 1)
		 * and anything else unknown are not offered. */
		ibemu_log_dbg("bind_mw: access %#x not offered", b->access);
		return false;
	}
	if (mw->type == IBV_MW_TYPE_1) {
		/* A type 1 window is named by its current key: a bind
		 * posted against an older one is stale. */
		if (b->mw_key != mw->key)
			return false;
		/* Length 0 unbinds it (IBA 10.6.7.2.1). */
		return !b->length || mw_bind_region_ok(mw, mr, b);
	}
	/* A type 2 window is named by its key but for the consumer's 8
	 * bits, and its new key keeps the rest (IBA 10.6.7.2.3: the
	 * consumer owns only the key part): a stale or guessed key with
	 * the right number names nothing. */
	if ((b->mw_key ^ mw->key) & ~KEY_VARIANT_MASK ||
	    (b->new_key ^ mw->key) & ~KEY_VARIANT_MASK)
		return false;
	/* o10-37.2.30: a type 2 window is bound only while free
	 * (invalidated or never bound); C10-72: through a QP of its PD;
	 * o10-37.2.40: to a region, never with length 0. */
	if (mw->bound || qp->pd_id != mw->pd_id || !b->length)
		return false;
	return mw_bind_region_ok(mw, mr, b);
}

/*
 * Execute a BIND_MW work request of qp (IBA 10.6.7.2): IBV_WC_SUCCESS or
 * IBV_WC_MW_BIND_ERR (manual 6.2.8).  Caller holds qp.lock, which keeps
 * the region looked up registered until it returns (mr.c).
 */
enum ibv_wc_status mw_bind_locked(struct emu_qp *qp, const struct wqe_bind *b)
{
	struct emu_hca *hca = qp->hca;
	struct emu_mr *mr = b->length ? mr_lookup(hca, b->mr_lkey) : NULL;
	struct emu_mw *mw;

	pthread_mutex_lock(&hca->mw_lock);
	mw = mw_by_index_locked(hca, b->mw_key);
	if (!mw || !mw_bind_ok(qp, mw, mr, b)) {
		pthread_mutex_unlock(&hca->mw_lock);
		ibemu_log_dbg("bind_mw: qp %#x window %#x: bind refused",
			      qp->qpn, b->mw_key);
		return IBV_WC_MW_BIND_ERR;
	}
	/* The key part of the R_Key is the next one (type 1, the
	 * provider's ibv_inc_rkey) or the consumer's (type 2). */
	mw->key = (mw->key & ~KEY_VARIANT_MASK) |
		  (b->new_key & KEY_VARIANT_MASK);
	mw_unbind_locked(hca, mw);
	mw->bound = b->length != 0;
	if (mw->bound && mw->type == IBV_MW_TYPE_2)
		hca->nr_mw_bound2++;
	mw->addr = b->addr;
	mw->length = b->length;
	mw->access = (int)(b->access & MW_ACCESS_REMOTE);
	mw->mr_key = mw->bound ? b->mr_lkey : 0;
	/* Type 2B: remote access only through this QP (IBA 10.6.7.1). */
	mw->qpn = mw->type == IBV_MW_TYPE_2 ? qp->qpn : 0;
	pthread_mutex_unlock(&hca->mw_lock);
	return IBV_WC_SUCCESS;
}

/*
 * Invalidate the window rkey names, for a Local Invalidate work request
 * of qp (remote false) or a Send with Invalidate that qp received (remote
 * true), IBA 10.6.7.3 and 9.4.1.1.  Only a type 2 window can be
 * invalidated: a region registered by ibv_reg_mr, a type 1 window
 * (o10-37.2.26) or a key that names nothing is an error (EINVAL).  A type
 * 2B window is invalidated remotely only through the QP it is bound to
 * (IBA 10.6.7.1).  Caller holds qp.lock.
 */
int mw_invalidate_locked(struct emu_qp *qp, uint32_t rkey, bool remote)
{
	struct emu_hca *hca = qp->hca;
	struct emu_mw *mw;
	int ret = EINVAL;

	pthread_mutex_lock(&hca->mw_lock);
	mw = mw_by_index_locked(hca, rkey);
	if (!mw || mw->key != rkey || mw->type != IBV_MW_TYPE_2 ||
	    mw->pd_id != qp->pd_id)
		goto out;
	if (remote && mw->bound && mw->qpn != qp->qpn)
		goto out;
	/* Invalidating a window already free changes nothing. */
	mw_unbind_locked(hca, mw);
	ret = 0;
out:
	pthread_mutex_unlock(&hca->mw_lock);
	if (ret)
		ibemu_log_dbg("%s: qp %#x key %#x: no type 2 window of its PD",
			      remote ? "send with invalidate" : "local_inv",
			      qp->qpn, rkey);
	return ret;
}

/*
 * The QP qpn is destroyed: the type 2B windows bound through it grant
 * nothing from now on (IBA 10.6.7.1: usable only through that QP, and its
 * number may soon name another).  The table is walked only while some
 * type 2 window is bound.
 */
void mw_qp_destroyed(struct emu_hca *hca, uint32_t qpn)
{
	struct emu_mw *mw;
	uint32_t i;

	pthread_mutex_lock(&hca->mw_lock);
	for (i = 0; hca->nr_mw_bound2 && i < hca->mws.size; i++) {
		mw = key_table_get(&hca->mws, i);
		if (mw && mw->bound && mw->type == IBV_MW_TYPE_2 &&
		    mw->qpn == qpn)
			mw_unbind_locked(hca, mw);
	}
	pthread_mutex_unlock(&hca->mw_lock);
}

/* Whether [va, va+len) with access is inside what mw grants qp. */
static bool mw_grants(const struct emu_qp *qp, const struct emu_mw *mw,
		      uint32_t rkey, uint64_t va, uint64_t len, int access)
{
	/* IBA 10.6.7.2.4 / C9-88: the current key of a bound window of
	 * the QP's PD with the access right, the range inside it; a type
	 * 2B window only through the QP it is bound to. */
	if (mw->key != rkey || !mw->bound || mw->pd_id != qp->pd_id)
		return false;
	if (mw->type == IBV_MW_TYPE_2 && mw->qpn != qp->qpn)
		return false;
	if (!(mw->access & access))
		return false;
	return va >= mw->addr && len <= mw->length &&
	       va - mw->addr <= mw->length - len;
}

/*
 * The local address of [va, va+len) through the window rkey names, with
 * hca.mw_lock held until mw_access_end(); NULL (and unlocked) if the
 * window does not grant it.  Caller holds qp.lock, which keeps the region
 * looked up registered (mr.c).
 */
uint8_t *mw_access_begin(struct emu_qp *qp, uint32_t rkey, uint64_t va,
			 uint64_t len, int access)
{
	struct emu_hca *hca = qp->hca;
	struct emu_mw *mw;
	struct emu_mr *mr;
	uint8_t *addr = NULL;

	pthread_mutex_lock(&hca->mw_lock);
	mw = mw_by_index_locked(hca, rkey);
	if (mw && mw_grants(qp, mw, rkey, va, len, access)) {
		/* The region may have gone or changed since the bind. */
		mr = mr_lookup(hca, mw->mr_key);
		if (mr && mr->pd_id == mw->pd_id)
			addr = sge_mr_addr(mr, va, len,
					   access != IBV_ACCESS_REMOTE_READ);
	}
	if (!addr)
		pthread_mutex_unlock(&hca->mw_lock);
	return addr;
}

void mw_access_end(struct emu_qp *qp)
{
	pthread_mutex_unlock(&qp->hca->mw_lock);
}
