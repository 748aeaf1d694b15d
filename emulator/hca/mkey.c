// SPDX-License-Identifier: MIT
/*
 * Indirect memory keys (mlx5dv_create_mkey(3)): the object, its key and
 * the emptying of its layout.  The UMR work requests that lay one out
 * are umr.c's; the accesses through one are engine/mkey_access.c's.
 *
 * Keys: an mkey's key is taken from the regions' key table (mr.c), so
 * that the regions' lookups find it and its PD, and its L_Key and R_Key
 * are one value as a region's are.  Its entry there is an emu_mr whose
 * region fields name nothing (length 0, no access): a path of the HCA
 * that does not know mkeys (a memory window's bind, an advice, the
 * shared-memory placement) finds no memory behind the key and fails or
 * takes the general path, never reaches memory unchecked.
 *
 * Lock rule: the table entry is published and withdrawn as a region's
 * (mr.c: hca.lock, lock-free lookups under a QP lock, destroy waits for
 * every QP lock).  The layout is under the mkey's rwlock (struct
 * emu_mkey): an access holds it for reading from the walk to the end of
 * its copy, a UMR or an invalidation for writing, so once either has
 * completed no access uses the layout it replaced (mlx5dv_wr_post(3):
 * after the invalidation the mkey no longer names memory).  The regions
 * a layout names are looked up again at each access (mkey_access.c), so
 * deregistering one needs nothing from the mkey.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hca.h"
#include "log.h"

int emu_mkey_create(struct emu_hca *hca, uint64_t pd_id,
		    uint16_t max_entries, bool remote_inv,
		    struct emu_mkey **mkey_p, uint32_t *key_p)
{
	struct emu_mkey *mk;
	uint32_t idx, part;

	if (!max_entries || max_entries > IBEMU_MAX_MKEY_ENTRIES) {
		ibemu_log_dbg("create_mkey: max_entries %u not in 1..%d",
			      max_entries, IBEMU_MAX_MKEY_ENTRIES);
		return EINVAL;
	}
	mk = calloc(1, sizeof(*mk) + max_entries * sizeof(mk->ent[0]));
	if (!mk)
		return ENOMEM;
	if (pthread_rwlock_init(&mk->lock, NULL)) {
		free(mk);
		return ENOMEM;
	}
	mk->mr.hca = hca;
	mk->mr.pd_id = pd_id;
	mk->mr.mkey = mk;
	mk->max_entries = max_entries;
	mk->remote_inv = remote_inv;
	pthread_mutex_lock(&hca->lock);
	if (key_table_find(&hca->mrs, &idx, &part)) {
		pthread_mutex_unlock(&hca->lock);
		pthread_rwlock_destroy(&mk->lock);
		free(mk);
		ibemu_log_dbg("create_mkey: all %d keys in use", IBEMU_MAX_MR);
		return ENOMEM;
	}
	mk->mr.index = idx;
	mk->mr.key = key_table_key(idx + 1, part);
	/* Published last, empty: lookups run without the lock. */
	key_table_take(&hca->mrs, idx, &mk->mr);
	pthread_mutex_unlock(&hca->lock);
	*mkey_p = mk;
	*key_p = mk->mr.key;
	return 0;
}

int emu_mkey_destroy(struct emu_mkey *mk)
{
	struct emu_hca *hca;

	if (!mk)
		return EINVAL;
	hca = mk->mr.hca;
	pthread_mutex_lock(&hca->lock);
	key_table_free(&hca->mrs, mk->mr.index);
	pthread_mutex_unlock(&hca->lock);
	/* Either a lookup saw the entry gone, or its access (which holds
	 * a QP lock throughout) is waited for (mr.c). */
	engine_qp_quiesce(hca->engine);
	pthread_rwlock_destroy(&mk->lock);
	free(mk);
	return 0;
}

void mkey_install(struct emu_mkey *mk, uint32_t access, uint32_t repeat,
		  const struct mkey_ent *ents, uint16_t nr)
{
	uint64_t rep_len = 0;
	uint16_t i;

	pthread_rwlock_wrlock(&mk->lock);
	mk->valid = ents != NULL;
	mk->nr = ents ? nr : 0;
	for (i = 0; i < mk->nr; i++) {
		mk->ent[i] = ents[i];
		mk->ent[i].start = rep_len;
		rep_len += ents[i].count;
	}
	mk->access = ents ? access : 0;
	mk->repeat = ents ? repeat : 0;
	mk->rep_len = rep_len;
	/* umr.c checked that this does not overflow. */
	mk->total = rep_len * mk->repeat;
	pthread_rwlock_unlock(&mk->lock);
}

/*
 * An mkey is invalidated by a LOCAL_INV of its key, or by a
 * SEND_WITH_INV naming it if it was created with
 * MLX5DV_MKEY_INIT_ATTR_FLAGS_REMOTE_INVALIDATE (mlx5dv_create_mkey(3),
 * mlx5dv_wr_post(3): "Unregister the mkey ... via IBV_WR_LOCAL_INV"), of
 * the QP's PD as for a window (IBA 10.6.7.3).  Emptying an empty mkey
 * changes nothing.
 */
int key_invalidate_locked(struct emu_qp *qp, uint32_t rkey, bool remote)
{
	struct emu_mkey *mk = mkey_lookup(qp->hca, rkey);

	if (!mk)
		return mw_invalidate_locked(qp, rkey, remote);
	if (mk->mr.pd_id != qp->pd_id || (remote && !mk->remote_inv)) {
		ibemu_log_dbg("qp %#x: mkey %#x cannot be invalidated %s",
			      qp->qpn, rkey,
			      remote ? "remotely" : "(another PD)");
		return EINVAL;
	}
	mkey_install(mk, 0, 0, NULL, 0);
	return 0;
}
