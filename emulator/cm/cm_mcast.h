/* SPDX-License-Identifier: MIT */
/*
 * What the CM (cm.c) and its multicast joins (cm_mcast.c) call of each
 * other.  Lock rule: cm.lock is taken by the cm.c side of each call and
 * never held while calling into cm_mcast.c, whose own lock (mc_lock) is
 * never held while calling into cm.c.
 */
#ifndef IBEMU_CM_MCAST_H
#define IBEMU_CM_MCAST_H

#include <stdint.h>
#include <sys/socket.h>

#include "cm.h"

struct node;

/* Whether id may join a group now: 0 or EINVAL.  *ps_p, *qkey_p: the
 * id's port space and Q_Key; *node_p: the node the id's device is on. */
int cm_mc_id_check(struct emu_cm_id *id, uint16_t *ps_p, uint32_t *qkey_p,
		   struct node **node_p);
/* Queue ev on the id's channel. */
void cm_mc_queue(struct emu_cm_id *id, struct emu_cm_event *ev);
/* Drop the id's queued events of the membership cookie. */
void cm_mc_purge(struct emu_cm_id *id, uint64_t cookie);

/* The Q_Key the kernel's rdma_cm gives a UD id of port space ps
 * (cma_set_qkey). */
uint32_t cm_mc_ps_qkey(uint16_t ps);
/* The source address of an unbound id resolved to a multicast group. */
void cm_mc_source(int family, struct sockaddr_storage *out);

/* id is being destroyed: its memberships end. */
void cm_mc_id_gone(struct emu_cm_id *id);

#endif /* IBEMU_CM_MCAST_H */
