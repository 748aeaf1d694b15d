/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport's resolution of destinations on other nodes
 * (tcp_resolve.c), the functions behind its tp_net_ops (transport.h), which
 * is how the engine and the CM reach them.
 *
 * A node is reached at its address (fabric_locate) on its door port,
 * held by one of its processes, which answers which process owns a QPN
 * or listens on a CM address and at which TCP port that process takes
 * connections.  This process then connects to that process (one
 * connection per pair of processes, multiplexing their QPs) and names
 * it by a slot from IBEMU_MAX_PROCS up, as engine_peer() takes it.
 *
 * Both calls block the calling thread for at most TCP_RESOLVE_MS and
 * may be made under a QP lock; results are cached, a node that does not
 * answer for ten seconds, so it costs one wait per ten seconds, not one
 * per packet.
 */
#ifndef IBEMU_TP_TCP_H
#define IBEMU_TP_TCP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

struct engine;
struct tp_peer_info;

/* Network mode (IBEMU_NET=1, `ibemu run --net`): whether this process
 * may open what another host can reach.  Off unless asked. */
bool tp_tcp_net_on(void);

/*
 * The slot of the process owning qpn on the node at node_addr (port
 * ignored).  want_lid: the LID the sender addressed (0: by GID), checked
 * against the LID the node answers with (a collision is reported and
 * nothing is sent).  0, or EHOSTUNREACH (nobody answers at that
 * address), ENOENT (no such QP there), EADDRNOTAVAIL (the node there
 * has another LID), ENETDOWN (no network).
 */
int tp_tcp_resolve_qpn(struct engine *e,
		       const struct sockaddr_storage *node_addr,
		       uint16_t want_lid, uint32_t qpn, int32_t *slot_p);

/* The slot of the process that listens on (ps, addr, port) on the node
 * at node_addr (the CM's listener table, node_cm.c); errors as above,
 * ECONNREFUSED when nobody listens there. */
int tp_tcp_resolve_cm(struct engine *e,
		      const struct sockaddr_storage *node_addr, uint16_t ps,
		      const uint8_t addr[16], bool v4, uint16_t port,
		      int32_t *slot_p);

/* qpn is owned by the process that slot names (the CM learnt it from
 * the connection's messages): a later tp_tcp_resolve_qpn of qpn at that
 * process's node finds it without asking the node's door. */
void tp_tcp_seed_qpn(struct engine *e, int32_t slot, uint32_t qpn);

/* Whether a node answers at node_addr (port ignored): its door takes a
 * lookup within timeout_ms (at most TCP_RESOLVE_MS; 0: that).  0 with
 * the node's LID, or EHOSTUNREACH (nobody answers), ENETDOWN (no
 * network).  For the CM's address resolution, as a neighbour that
 * answers; blocks as the calls above. */
int tp_tcp_probe_node(struct engine *e,
		      const struct sockaddr_storage *node_addr,
		      int timeout_ms, uint16_t *lid_p);

/* What a remote slot names (transport.h). */
bool tp_tcp_peer_info(struct engine *e, int32_t slot,
		      struct tp_peer_info *info);

/* A descriptor that poll(2) reports with POLLRDHUP, POLLHUP or POLLERR
 * once the connection of slot to the process holding token ends (that
 * process exited or closed it): a dup of its socket, to be polled for
 * those events only, never read or written, closed by the caller.  -1
 * (errno set) when slot is no live connection to that process. */
int tp_tcp_peer_watch_fd(struct engine *e, int32_t slot, uint64_t token);

#endif /* IBEMU_TP_TCP_H */
