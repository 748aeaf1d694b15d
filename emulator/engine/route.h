/* SPDX-License-Identifier: MIT */
/*
 * Where a packet goes (route.c): the process that owns a QPN at the
 * destination an address vector names, on this node (a node slot) or
 * on another (a slot of the network transport, transport.h).
 */
#ifndef IBEMU_ROUTE_H
#define IBEMU_ROUTE_H

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "hca.h"

/* 0 and *slot_p, or a positive errno: ENOENT (no such QP),
 * EHOSTUNREACH (no such node), ENETDOWN (another node, no network),
 * EADDRNOTAVAIL (the LID names a node that has another). */
int route_qpn(struct emu_hca *hca, const struct ibv_ah_attr *av,
	      uint32_t qpn, int32_t *slot_p);

/* Whether a packet that src_proc sent may be taken by the connected QP
 * qp (qp.lock held): only if src_proc is the process its address
 * vector names.  May resolve the QP's peer as req_resolve_peer_locked
 * does.  Inline for the common case, a packet from the bound peer; the
 * rest is route_from_peer_slow_locked's. */
bool route_from_peer_slow_locked(struct emu_qp *qp, int32_t src_proc);
static inline bool route_from_peer_locked(struct emu_qp *qp,
					  int32_t src_proc)
{
	if (src_proc == qp->peer_proc && src_proc >= 0)
		return true;
	return route_from_peer_slow_locked(qp, src_proc);
}

/* Publish the node of the connected QP's peer (node_qp_publish_peer),
 * which its node's door then answers alone; qp.lock held. */
void route_publish_peer_locked(struct emu_qp *qp);

#endif /* IBEMU_ROUTE_H */
