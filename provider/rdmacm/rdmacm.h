/* SPDX-License-Identifier: MIT */
/*
 * What the librdmacm face (rdmacm.c and the files beside it) shares
 * with its multicast part (rdmacm_mcast.c).
 */
#ifndef IBEMU_RDMACM_H
#define IBEMU_RDMACM_H

#include <rdma/rdma_cma.h>

struct emu_cm_id;
struct emu_cm_event;

/* rdmacm.c: the emulator's id behind id. */
struct emu_cm_id *face_emu_id(struct rdma_cm_id *id);
/* rdmacm_event.c: a synchronous id waits for the event of what it started;
 * 0, or -1 with errno. */
int face_complete_id(struct rdma_cm_id *id);

/* rdmacm_mcast.c: MULTICAST_JOIN or MULTICAST_ERROR of id made into
 * ev, the id's QP attached to the group as librdmacm attaches it. */
void face_mcast_event(struct rdma_cm_id *id, struct rdma_cm_event *ev,
		      const struct emu_cm_event *eev);
/* rdmacm_mcast.c: id is being destroyed; its groups are left. */
void face_mcast_id_destroy(struct rdma_cm_id *id);

#endif /* IBEMU_RDMACM_H */
