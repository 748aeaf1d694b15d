/* SPDX-License-Identifier: MIT */
/*
 * UD multicast across the nodes of the fabric, over IP multicast on the
 * node's subnet (doc/design.md §21, "Multicast across nodes").
 *
 * Within a node a multicast datagram reaches the attached QPs through
 * the node's group table (node_mcast.c, req.c, progress.c).  When the
 * node is on an IP fabric (NODE_FABRIC_MULTI), a process with a QP
 * attached to a group also joins the IPv4 multicast group that the
 * MGID maps to, on a UDP socket bound to the door port; every multicast
 * send leaves the node as well as one datagram (a tp_frame.h DATA frame)
 * to that IP group, and a thread of each receiving process hands what
 * comes in to its attached QPs, as the engine does with a datagram from
 * its own node.
 *
 * Lock rule: struct mcast_ip's lock guards its group table and its
 * sockets; it is a leaf, taken under qp.lock (attach, detach, send) or
 * alone (the receiving thread, which releases it before it takes
 * engine.lock to deliver).
 */
#ifndef IBEMU_MCAST_IP_H
#define IBEMU_MCAST_IP_H

#include <stdbool.h>
#include <stdint.h>

struct engine;
struct tp_pkt;

/* At engine_start: set e->mcast_ip when the node is on an IP fabric
 * (nothing is opened yet; e->mcast_ip NULL: multicast stays on the
 * node); 0 or a positive errno. */
int mcast_ip_open(struct engine *e);
/* At engine_stop: stop the receiving thread, leave every group. */
void mcast_ip_close(struct engine *e);
/* In a forked child: drop the parent's state (its thread is not here). */
void mcast_ip_forget(struct engine *e);

/* A QP of this process was attached to mgid / detached from it (the
 * IP group is joined on the first, left on the last).  join: 0 or a
 * positive errno, said in the log. */
int mcast_ip_join(struct engine *e, const uint8_t mgid[16]);
void mcast_ip_leave(struct engine *e, const uint8_t mgid[16]);

/* Send pkt (a UD datagram to the group mgid, built as for a process of
 * this node) to the other nodes; a full socket buffer drops it, as the
 * fabric may drop a datagram (IBA 9.8). */
void mcast_ip_send(struct engine *e, const uint8_t mgid[16],
		   const struct tp_pkt *pkt);

#endif /* IBEMU_MCAST_IP_H */
