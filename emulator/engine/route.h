/* SPDX-License-Identifier: MIT */
/*
 * Where a packet goes (route.c): the process that owns a QPN at the
 * destination an address vector names, on this node (a node slot) or
 * on another (a slot of the network transport, transport.h).
 */
#ifndef IBEMU_ROUTE_H
#define IBEMU_ROUTE_H

#include <stdint.h>

#include <infiniband/verbs.h>

struct emu_hca;

/* 0 and *slot_p, or a positive errno: ENOENT (no such QP),
 * EHOSTUNREACH (no such node), ENETDOWN (another node, no network),
 * EADDRNOTAVAIL (the LID names a node that has another). */
int route_qpn(struct emu_hca *hca, const struct ibv_ah_attr *av,
	      uint32_t qpn, int32_t *slot_p);

#endif /* IBEMU_ROUTE_H */
