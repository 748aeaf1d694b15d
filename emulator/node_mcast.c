// SPDX-License-Identifier: MIT
/*
 * The node's multicast groups (node.h struct node_mcast_grp): which QPs,
 * of which processes, are attached to each group.  A real subnet keeps
 * this in its switches' multicast forwarding tables and each HCA's
 * attachment table (IBA 10.5); here one table serves the node.
 *
 * Lock rule: every entry is read and written under node_seg.lock.  Any
 * process of the node can write the segment, so what is read is bounded
 * before use: nr is clamped to the table's size, and a member counts only
 * through its QPN's owner, which node_qpn_owner_slot() validates.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "node.h"

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
