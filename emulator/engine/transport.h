/* SPDX-License-Identifier: MIT */
/*
 * The transport interface: how the engine moves packets between the
 * processes of the fabric.  A transport carries packets to a peer process
 * (claim room, fill it in place, send), hands the engine the packets
 * addressed to this process (peek, release), lets the progress thread
 * wait for them (sleep, nap, wake), and says which processes it can reach
 * (peer_get).  One-sided placement, where the requester moves RDMA data
 * itself, is an optional capability (place); without it every operation
 * travels as packets.
 *
 * The shared-memory transport (tp_shm.c, with its placement in cma.c)
 * reaches the processes of the node (node slots 0..IBEMU_MAX_PROCS-1)
 * and is the engine's local transport: every packet for this process
 * arrives in its inbox.  The TCP transport (tp_tcp.c) is the network
 * transport: it reaches processes of other nodes, named by slots from
 * IBEMU_MAX_PROCS up that this process assigns (one per remote process),
 * resolves destinations there (tp_net_ops), and delivers what it
 * receives through the local transport's self peer, as a producer of
 * the node would; it has no peek, sleep or wake of its own.  Multicast
 * beyond the node is a table of its own (tp_mcast_ops).  A transport is
 * one folder behind these ops: the engine and the objects include no
 * transport's header (doc/design.md, "The tree").
 *
 * Lock rule: the consumer calls (pkt_peek, pkt_release) run under
 * engine.lock; the producer calls under the sending QP's lock; peer_get
 * may be called from anywhere and serialises itself.
 */
#ifndef IBEMU_TRANSPORT_H
#define IBEMU_TRANSPORT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "hdr.h"
#include "params.h"
#include "wire.h"

struct iovec;

struct engine;
struct emu_qp;
struct emu_hca;
struct emu_mr;
struct mr_window;
struct wqe;
struct transport_ops;

/* A process a transport reaches.  Each transport's peers begin with this
 * header, the rest is the transport's own: the engine sends through
 * whichever transport reaches the peer. */
struct tp_peer {
	const struct transport_ops *tp;
};

/* Requester-placed RDMA (optional). */
struct tp_place_ops {
	/* The QP's peer (qp->peer, qp->peer_proc) was resolved or dropped,
	 * under qp.lock: learn what placement it allows, and set or clear
	 * the QP's WRITE fast path (qp->post_write, hca.h). */
	void (*peer_bind)(struct emu_qp *qp);
	/* Execute w (RDMA WRITE or READ) directly; true if done.  local:
	 * the nl local iovecs of its checked SGEs (nl < 0: not resolved,
	 * as for inline data). */
	bool (*rdma)(struct emu_qp *qp, struct wqe *w,
		     const struct iovec *local, int nl);
	/* Large SENDs: the requester describes, the responder pulls. */
	bool (*pull_ok)(struct emu_qp *qp, const struct wqe *w);
	uint32_t (*pull_desc)(struct emu_qp *qp, struct wqe *w, void *buf);
	/* 0; ESRCH: the sender is gone; another positive errno: its data
	 * cannot be read. */
	int (*pull)(struct emu_qp *qp, const struct wqe *rwqe,
		    const struct pull_desc_copy *d);
	/* Regions and QPs of ours that requesters may place into; withdraw
	 * and fence return once no placement into them is under way. */
	void (*mr_publish)(struct engine *e, const struct emu_mr *mr);
	void (*mr_withdraw)(struct engine *e, const struct emu_mr *mr);
	void (*qp_fence)(struct engine *e, uint32_t qpn);
	/* Registration: make the whole pages of [addr, addr+length), a
	 * region with access, reachable by the node's placement where it
	 * can be (w: where; zero: not), and give that back. */
	void (*mr_share)(struct emu_hca *hca, void *addr, size_t length,
			 int access, struct mr_window *w);
	void (*mr_release)(struct emu_hca *hca, const struct mr_window *w);
};

/*
 * Reaching other nodes: a network transport's resolution of destinations
 * (transport_ops.net; NULL for the node's own transport).  A node is
 * reached at its address (fabric_locate) through a door that one of its
 * processes holds, which answers which process owns a QPN or listens on
 * a CM address; the process found is named by a slot from
 * IBEMU_MAX_PROCS up, as engine_peer() takes it.  The resolving calls
 * block the calling thread for a bounded time and may be made under a
 * QP lock; the implementation caches what it learns.
 */
/* What a remote slot names, for the CM and the tools: the node's LID,
 * port GUID and address, the remote process's token (its identity on
 * its node). */
struct tp_peer_info {
	uint16_t lid;
	uint64_t guid;
	uint64_t token;
	struct sockaddr_storage addr;
	bool up;
};

struct tp_net_ops {
	/* Whether every packet, even to this node, goes by the network
	 * (IBEMU_TRANSPORT=tcp). */
	bool (*forced)(struct engine *e);
	/* The slot of the process owning qpn on the node at node_addr
	 * (port ignored).  want_lid: the LID the sender addressed (0: by
	 * GID), checked against the LID the node answers with.  0, or
	 * EHOSTUNREACH (nobody answers there), ENOENT (no such QP there),
	 * EADDRNOTAVAIL (the node there has another LID), ENETDOWN. */
	int (*resolve_qpn)(struct engine *e,
			   const struct sockaddr_storage *node_addr,
			   uint16_t want_lid, uint32_t qpn, int32_t *slot_p);
	/* The slot of the process that listens on (ps, addr, port) on the
	 * node at node_addr (the CM's listener table); errors as above,
	 * ECONNREFUSED when nobody listens there. */
	int (*resolve_cm)(struct engine *e,
			  const struct sockaddr_storage *node_addr,
			  uint16_t ps, const uint8_t addr[16], bool v4,
			  uint16_t port, int32_t *slot_p);
	/* Whether a node answers at node_addr within timeout_ms (0: the
	 * transport's bound): 0 with its LID, EHOSTUNREACH, ENETDOWN. */
	int (*probe_node)(struct engine *e,
			  const struct sockaddr_storage *node_addr,
			  int timeout_ms, uint16_t *lid_p);
	/* What slot names; false when it names no connection. */
	bool (*peer_info)(struct engine *e, int32_t slot,
			  struct tp_peer_info *info);
	/* A descriptor that poll(2) reports with POLLRDHUP, POLLHUP or
	 * POLLERR once the connection of slot to the process holding
	 * token ends: polled for those events only, closed by the caller;
	 * -1 (errno set) when slot is no live connection to it. */
	int (*peer_watch_fd)(struct engine *e, int32_t slot, uint64_t token);
	/* qpn is owned by the process slot names (the CM learnt it from a
	 * connection's messages): resolve_qpn of it at that process's node
	 * need not ask the node's door. */
	void (*seed_qpn)(struct engine *e, int32_t slot, uint32_t qpn);
	/* Whether slots a and b are connections to one remote process
	 * (two processes that connected to each other at once hold two);
	 * false for any slot that names no connection. */
	bool (*same_process)(struct engine *e, int32_t a, int32_t b);
};

struct transport_ops {
	const char *name;
	/* The room pkt_claim gives holds PKT_MAX_LEN bytes of data, all
	 * carried: a packet may bring a bundled acknowledgement behind it
	 * (PKT_F_ACK_BUNDLED, wire.h). */
	bool bundles;
	int (*open)(struct engine *e); /* 0 or a positive errno */
	void (*close)(struct engine *e);
	/* In a forked child: drop the parent's state without touching it. */
	void (*forget)(struct engine *e);
	/* In a forked child, before anything else (optional): drop what
	 * the process shares through this transport, its engines or not
	 * (the peers' mappings, the registered pages' sharing). */
	void (*fork_child)(void);

	/* The process in node slot proc_slot, or NULL if unreachable. */
	struct tp_peer *(*peer_get)(struct engine *e, int32_t proc_slot);
	bool (*peer_is_self)(struct engine *e, const struct tp_peer *peer);
	/* How many packets peer has taken in so far: a count compared only
	 * for change, telling a congested peer from one that takes
	 * nothing (a stopped or stuck process). */
	uint64_t (*peer_taken)(struct tp_peer *peer);
	/* Whether the process in node slot proc_slot is known to run (not
	 * gone, not stopped); optional. */
	bool (*peer_runs)(struct engine *e, int32_t proc_slot);

	/* Out: room for one packet to peer (false: full, try later).  A
	 * sent packet may still be lost (the receiver skipped its room). */
	bool (*pkt_claim)(struct tp_peer *peer, struct tp_pkt *pkt);
	void (*pkt_send)(struct tp_peer *peer, struct tp_pkt *pkt);

	/* In: the next packet for this process, released once consumed.
	 * A transport may give the room of released packets back to the
	 * producers in batches: pkt_flush (optional) gives back what it
	 * still holds, pkt_held says whether it holds any.  While it holds
	 * one, sleep returns at once (the inbox is not empty to it). */
	bool (*pkt_peek)(struct engine *e, struct tp_pkt *pkt);
	void (*pkt_release)(struct engine *e, struct tp_pkt *pkt);
	void (*pkt_flush)(struct engine *e);
	bool (*pkt_held)(struct engine *e);

	/* The progress thread waits for packets: sleep until one comes, a
	 * wake, *more, or the timeout (0: none); nap without asking
	 * producers to wake it; wake a sleeper or napper.  As a futex, a
	 * wake may count only if it comes after the sleep began: whatever
	 * the caller looked at before calling sleep and must not miss is
	 * announced in *more, which sleep checks after it began. */
	void (*sleep)(struct engine *e, uint64_t timeout_ns, atomic_bool *more);
	void (*nap)(struct engine *e, uint64_t timeout_ns);
	void (*wake)(struct engine *e);
	bool (*is_sleeping)(struct engine *e);

	/* A network transport that found the local inbox full: the engine
	 * made room (after a drain, when engine.net_room was set). */
	void (*room)(struct engine *e);
	/* The application polls and the inbox is empty: take in what the
	 * network has now, without waiting for the transport's thread
	 * (optional; must not block). */
	void (*poll)(struct engine *e);
	/* The application's poll is over (after poll and the drain it
	 * drove); and: send now whatever the transport held back. */
	void (*poll_done)(struct engine *e);
	void (*flush)(struct engine *e);

	/* Local injection: the peer that names this process, for a
	 * network transport to deliver what it receives into this
	 * process's own packets as a producer of the node does (pkt_claim
	 * with src_proc this process's slot, then pkt_send); the node's
	 * transport has it, NULL while closed. */
	struct tp_peer *(*self)(struct engine *e);

	const struct tp_place_ops *place; /* NULL: not offered */
	const struct tp_net_ops *net; /* NULL: the node's own transport */
};

/*
 * Multicast beyond the node (IBA 10.5): how a UD datagram to a group
 * reaches the attached QPs of other nodes.  Within the node the engine
 * delivers it itself (the node's group table); these carry it further.
 * open sets the state a later call finds (none: multicast stays on the
 * node, and every other call does nothing).  Lock rule: the
 * implementation's own lock, a leaf, taken under qp.lock (join, leave,
 * send) or alone.
 */
struct tp_mcast_ops {
	const char *name;
	int (*open)(struct engine *e); /* 0 or a positive errno */
	void (*close)(struct engine *e);
	void (*forget)(struct engine *e); /* in a forked child */
	/* A QP of this process was attached to mgid / detached from it;
	 * join: 0 or a positive errno, said in the log. */
	int (*join)(struct engine *e, const uint8_t mgid[16]);
	void (*leave)(struct engine *e, const uint8_t mgid[16]);
	/* pkt, a datagram to the group mgid built as for a process of this
	 * node, to the other nodes; may be dropped (IBA 9.8). */
	void (*send)(struct engine *e, const uint8_t mgid[16],
		     const struct tp_pkt *pkt);
	/* Whether open found other nodes to carry datagrams to. */
	bool (*active)(const struct engine *e);
};

/* tp_shm.c */
extern const struct transport_ops tp_shm_ops;
/* tp_tcp.c */
extern const struct transport_ops tp_tcp_ops;
/* mcast_ip.c: over IP multicast on the node's subnet */
extern const struct tp_mcast_ops tp_mcast_ip_ops;

/* Whether slot names a process of another node (a network transport's). */
static inline bool tp_slot_is_remote(int32_t slot)
{
	return slot >= IBEMU_MAX_PROCS;
}

#endif /* IBEMU_TRANSPORT_H */
