// SPDX-License-Identifier: MIT
/*
 * Multicast attachment of UD QPs (manual 3.6.13, 3.6.14; IBA 10.5).
 * Each attachment is in two places: the QP's own list, which the engine
 * reads to hand a multicast datagram to the QPs of this process attached
 * to its group (mcast_deliver_locked), and the node's group table, which
 * senders read to find the processes to send it to (node_mcast.c).
 * A process with a QP attached to a group also takes the group's
 * datagrams from the other nodes of the fabric (mcast_ip.c).
 * Lock rule: the QP's list is under qp.lock; the node's table under
 * node_seg.lock, taken after qp.lock, never before; mcast_ip's lock
 * after qp.lock as well.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hca.h"
#include "log.h"
#include "node.h"

static int mcast_check(struct emu_qp *qp, const union ibv_gid *gid,
		       uint16_t lid)
{
	if (qp->type != IBV_QPT_UD) {
		ibemu_log_dbg("attach_mcast: only UD QPs join groups");
		return EINVAL;
	}
	/* A multicast GID starts with 0xff (IBA 4.1.1). */
	if (!gid || gid->raw[0] != 0xff) {
		ibemu_log_dbg("attach_mcast: not a multicast GID");
		return EINVAL;
	}
	if (!lid_is_multicast(lid)) {
		ibemu_log_dbg("attach_mcast: LID %#x is not a multicast LID",
			      lid);
		return EINVAL;
	}
	return 0;
}

static int mcast_find_locked(struct emu_qp *qp, const union ibv_gid *gid,
			     uint16_t lid)
{
	unsigned int i;

	for (i = 0; i < qp->nr_mcast; i++)
		if (!memcmp(&qp->mcast[i].gid, gid, sizeof(*gid)) &&
		    qp->mcast[i].lid == lid)
			return (int)i;
	return -1;
}

int emu_mcast_attach(struct emu_qp *qp, const union ibv_gid *gid,
		     uint16_t lid)
{
	struct emu_mcast *grown;
	int ret;

	ret = mcast_check(qp, gid, lid);
	if (ret)
		return ret;
	emu_lock(&qp->lock);
	if (mcast_find_locked(qp, gid, lid) >= 0)
		goto out; /* attaching twice is a no-op */
	if (qp->nr_mcast >= IBEMU_MAX_MCAST_GRP) {
		ret = ENOMEM;
		goto out;
	}
	grown = realloc(qp->mcast, (qp->nr_mcast + 1) * sizeof(*grown));
	if (!grown) {
		ret = ENOMEM;
		goto out;
	}
	qp->mcast = grown;
	ret = -node_mcast_join(&qp->hca->node, gid->raw, lid, qp->qpn);
	if (ret) {
		ibemu_log_dbg("attach_mcast: QP %#x: the node has %s", qp->qpn,
			      "no room for the group or the member");
		goto out;
	}
	qp->mcast[qp->nr_mcast].gid = *gid;
	qp->mcast[qp->nr_mcast].lid = lid;
	qp->nr_mcast++;
	/* And on the other nodes' (mcast_ip.c): a failure is said in the
	 * log; the group still works on this node. */
	qp->hca->engine->mcast->join(qp->hca->engine, gid->raw);
out:
	emu_unlock(&qp->lock);
	return ret;
}

int emu_mcast_detach(struct emu_qp *qp, const union ibv_gid *gid,
		     uint16_t lid)
{
	int ret, i;

	ret = mcast_check(qp, gid, lid);
	if (ret)
		return ret;
	emu_lock(&qp->lock);
	i = mcast_find_locked(qp, gid, lid);
	if (i < 0) {
		ret = EINVAL;
	} else {
		node_mcast_leave(&qp->hca->node, gid->raw, lid, qp->qpn);
		qp->hca->engine->mcast->leave(qp->hca->engine, gid->raw);
		qp->mcast[i] = qp->mcast[qp->nr_mcast - 1];
		qp->nr_mcast--;
	}
	emu_unlock(&qp->lock);
	return ret;
}

bool mcast_member_locked(const struct emu_qp *qp, const uint8_t *dgid,
			 uint16_t dlid)
{
	unsigned int i;

	for (i = 0; i < qp->nr_mcast; i++)
		if ((!dlid || qp->mcast[i].lid == dlid) &&
		    (!dgid || !memcmp(qp->mcast[i].gid.raw, dgid, 16)))
			return true;
	return false;
}
