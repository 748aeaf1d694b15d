// SPDX-License-Identifier: MIT
/*
 * The node's multicast groups (node.h struct node_mcast_grp): which QPs,
 * of which processes, are attached to each group.  A real subnet keeps
 * this in its switches' multicast forwarding tables and each HCA's
 * attachment table (IBA 10.5); here one table serves the node.
 *
 * It also keeps the memberships made through the RDMA CM (struct
 * node_cm_mcast), which give each group its MLID as a subnet
 * administrator would (IBA 15.2.5.17).
 *
 * Lock rule: every entry is read and written under node_seg.lock.  Any
 * process of the node can write the segment, so what is read is bounded
 * before use: nr is clamped to the table's size, and a member counts only
 * through its QPN's owner, which node_qpn_owner_slot() validates.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "node.h"
#include "params.h"

/* MLIDs the CM assigns: IBA 4.1.3 gives 0xC000-0xFFFE to multicast;
 * 0xC000 stays out, as subnet managers keep it for the partition's IPoIB
 * broadcast group. */
#define CM_MLID_FIRST 0xc001u
#define CM_MLID_LAST 0xfffeu

static bool lid_in_cm_range(uint16_t lid)
{
	return lid >= CM_MLID_FIRST && lid <= CM_MLID_LAST;
}

/* Members of g, as far as they can be: nr bounded by the table. */
static unsigned int grp_nr(const struct node_mcast_grp *g)
{
	return g->nr < IBEMU_MAX_MCAST_QP_ATTACH ? g->nr
						 : IBEMU_MAX_MCAST_QP_ATTACH;
}

/* Drop the members whose QPN has no owner: their process died without
 * detaching (its QPNs were freed by node_sweep_dead_locked). */
static void grp_prune_locked(struct node *node, struct node_mcast_grp *g)
{
	unsigned int i = 0, nr = grp_nr(g);

	while (i < nr) {
		if (node_qpn_owner_slot(node, g->qpn[i]) >= 0) {
			i++;
			continue;
		}
		g->qpn[i] = g->qpn[--nr];
	}
	g->nr = (uint16_t)nr;
}

static bool grp_is(const struct node_mcast_grp *g, const uint8_t mgid[16],
		   uint16_t mlid)
{
	return g->nr && g->mlid == mlid &&
	       (!mgid || !memcmp(g->mgid, mgid, sizeof(g->mgid)));
}

static struct node_mcast_grp *grp_find_locked(struct node *node,
					      const uint8_t mgid[16],
					      uint16_t mlid)
{
	struct node_mcast_grp *g;
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_MCAST_GRP; i++) {
		g = &node->seg->mcast[i];
		if (!grp_is(g, mgid, mlid))
			continue;
		grp_prune_locked(node, g);
		if (g->nr)
			return g;
	}
	return NULL;
}

int node_mcast_join(struct node *node, const uint8_t mgid[16], uint16_t mlid,
		    uint32_t qpn)
{
	struct node_mcast_grp *g, *free_grp = NULL;
	unsigned int i, nr;
	int ret = 0;

	node_lock(node);
	g = grp_find_locked(node, mgid, mlid);
	for (i = 0; !g && i < IBEMU_MAX_MCAST_GRP; i++) {
		grp_prune_locked(node, &node->seg->mcast[i]);
		if (!node->seg->mcast[i].nr) {
			free_grp = &node->seg->mcast[i];
			break;
		}
	}
	if (!g && !free_grp) {
		ret = -ENOMEM; /* max_mcast_grp */
		goto out;
	}
	if (!g) {
		g = free_grp;
		memcpy(g->mgid, mgid, sizeof(g->mgid));
		g->mlid = mlid;
	}
	nr = grp_nr(g);
	for (i = 0; i < nr; i++)
		if (g->qpn[i] == qpn)
			goto out;
	if (nr >= IBEMU_MAX_MCAST_QP_ATTACH) {
		ret = -ENOMEM; /* max_mcast_qp_attach */
		goto out;
	}
	g->qpn[nr] = qpn;
	g->nr = (uint16_t)(nr + 1);
out:
	node_unlock(node);
	return ret;
}

int node_mcast_leave(struct node *node, const uint8_t mgid[16], uint16_t mlid,
		     uint32_t qpn)
{
	struct node_mcast_grp *g;
	unsigned int i, nr;
	int ret = -EINVAL;

	node_lock(node);
	g = grp_find_locked(node, mgid, mlid);
	nr = g ? grp_nr(g) : 0;
	for (i = 0; i < nr; i++) {
		if (g->qpn[i] != qpn)
			continue;
		g->qpn[i] = g->qpn[nr - 1];
		g->nr = (uint16_t)(nr - 1);
		ret = 0;
		break;
	}
	node_unlock(node);
	return ret;
}

unsigned int node_mcast_procs(struct node *node, const uint8_t mgid[16],
			      uint16_t mlid, int32_t *slots, unsigned int max)
{
	const struct node_mcast_grp *g;
	unsigned int i, j, k, nr, n = 0;
	int32_t slot;

	node_lock(node);
	for (i = 0; i < IBEMU_MAX_MCAST_GRP; i++) {
		g = &node->seg->mcast[i];
		if (!grp_is(g, mgid, mlid))
			continue;
		nr = grp_nr(g);
		for (j = 0; j < nr && n < max; j++) {
			slot = node_qpn_owner_slot(node, g->qpn[j]);
			if (slot < 0)
				continue;
			for (k = 0; k < n && slots[k] != slot; k++)
				;
			if (k == n)
				slots[n++] = slot;
		}
	}
	node_unlock(node);
	return n;
}

/* ---- memberships through the RDMA CM ---- */

/* Whether entry i (copied into *c) is held by a live process. */
static bool member_live_locked(struct node *node, unsigned int i,
			       struct node_cm_mcast *c)
{
	*c = node->seg->cm_mcast[i];
	return c->owner && c->owner <= IBEMU_MAX_PROCS &&
	       node_proc_holds(node, (int32_t)c->owner - 1, c->token);
}

/* The MLID of mgid's group (0: none), and which MLIDs are taken by any
 * group, CM-joined or attached by hand, into used[]. */
static uint16_t member_mlid_locked(struct node *node, const uint8_t mgid[16],
				   uint8_t *used)
{
	struct node_cm_mcast e;
	uint16_t found = 0;
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_CM_MCAST; i++) {
		if (!member_live_locked(node, i, &e) ||
		    !lid_in_cm_range(e.mlid))
			continue;
		used[(e.mlid - CM_MLID_FIRST) / 8] |=
			(uint8_t)(1u << ((e.mlid - CM_MLID_FIRST) % 8));
		if (!found && !memcmp(e.mgid, mgid, 16))
			found = e.mlid;
	}
	for (i = 0; i < IBEMU_MAX_MCAST_GRP; i++) {
		const struct node_mcast_grp *g = &node->seg->mcast[i];
		uint16_t mlid = g->mlid;

		if (g->nr && lid_in_cm_range(mlid))
			used[(mlid - CM_MLID_FIRST) / 8] |=
				(uint8_t)(1u << ((mlid - CM_MLID_FIRST) % 8));
	}
	return found;
}

static bool mgid_in_use_locked(struct node *node, const uint8_t mgid[16])
{
	struct node_cm_mcast e;
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_CM_MCAST; i++)
		if (member_live_locked(node, i, &e) &&
		    !memcmp(e.mgid, mgid, 16))
			return true;
	return false;
}

/*
 * A new MGID for a join that names none: the SA's own MGID format
 * (signature 0xA01B after the flags and scope, IBA 15.2.5.17.1 and the
 * kernel's cma_set_mgid, which takes any ff1x:a01b:... as SA-assigned),
 * link-local scope, the default partition, 64 random bits.
 */
static void member_new_mgid_locked(struct node *node, uint8_t mgid[16])
{
	unsigned int tries;

	for (tries = 0; tries < 64; tries++) {
		memset(mgid, 0, 16);
		mgid[0] = 0xff;
		mgid[1] = 0x12;
		mgid[2] = 0xa0;
		mgid[3] = 0x1b;
		mgid[4] = IBEMU_DEFAULT_PKEY >> 8;
		mgid[5] = IBEMU_DEFAULT_PKEY & 0xff;
		if (getrandom(mgid + 8, 8, GRND_NONBLOCK) != 8)
			memcpy(mgid + 8, &node->token, 8);
		mgid[8] ^= (uint8_t)tries;
		if (!mgid_in_use_locked(node, mgid))
			return;
	}
}

int node_mcast_member_add(struct node *node, uint8_t mgid[16],
			  uint16_t *mlid_p, int *index_p)
{
	static const uint8_t zero[16];
	uint8_t used[(CM_MLID_LAST - CM_MLID_FIRST + 1 + 7) / 8];
	struct node_cm_mcast e, c = { 0 };
	unsigned int i, bit;
	int free_idx = -1, ret = 0;
	uint16_t mlid;

	if (node->proc_slot < 0 || !node->token)
		return -EINVAL;
	node_lock(node);
	for (i = 0; i < IBEMU_MAX_CM_MCAST && free_idx < 0; i++)
		if (!member_live_locked(node, i, &e))
			free_idx = (int)i;
	if (free_idx < 0) {
		ret = -ENOMEM;
		goto out;
	}
	if (!memcmp(mgid, zero, 16))
		member_new_mgid_locked(node, mgid);
	memset(used, 0, sizeof(used));
	mlid = member_mlid_locked(node, mgid, used);
	for (bit = 0; !mlid && bit <= CM_MLID_LAST - CM_MLID_FIRST; bit++)
		if (!(used[bit / 8] & (1u << (bit % 8))))
			mlid = (uint16_t)(CM_MLID_FIRST + bit);
	if (!mlid) {
		ret = -ENOMEM;
		goto out;
	}
	c.owner = (uint32_t)node->proc_slot + 1;
	c.token = node->token;
	c.mlid = mlid;
	memcpy(c.mgid, mgid, 16);
	node->seg->cm_mcast[free_idx] = c;
	*mlid_p = mlid;
	*index_p = free_idx;
out:
	node_unlock(node);
	return ret;
}

void node_mcast_member_del(struct node *node, int index)
{
	struct node_cm_mcast *c;

	if (index < 0 || index >= IBEMU_MAX_CM_MCAST)
		return;
	node_lock(node);
	c = &node->seg->cm_mcast[index];
	if (c->token == node->token &&
	    c->owner == (uint32_t)node->proc_slot + 1)
		memset(c, 0, sizeof(*c));
	node_unlock(node);
}

bool node_mcast_mgid(struct node *node, uint16_t mlid, uint8_t mgid[16])
{
	const struct node_mcast_grp *g;
	unsigned int i;
	bool found = false;

	node_lock(node);
	for (i = 0; i < IBEMU_MAX_MCAST_GRP && !found; i++) {
		g = &node->seg->mcast[i];
		if (g->nr && g->mlid == mlid) {
			memcpy(mgid, g->mgid, 16);
			found = true;
		}
	}
	for (i = 0; i < IBEMU_MAX_CM_MCAST && !found; i++) {
		struct node_cm_mcast c;

		if (member_live_locked(node, i, &c) && c.mlid == mlid) {
			memcpy(mgid, c.mgid, 16);
			found = true;
		}
	}
	node_unlock(node);
	return found;
}
