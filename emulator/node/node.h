/* SPDX-License-Identifier: MIT */
/*
 * The node segment: the state of one node's emulated HCA, shared by every
 * process of that node as a real HCA is (doc/design.md §6 "The node
 * segment").
 *
 * A node is a host or a network namespace.  Its segment is a file of the
 * user's shared-memory directory (shmfile.h) named for the network
 * namespace, mode 0600, created by the first process that needs it; no
 * daemon owns it.
 *
 * Lock rule: node_seg.lock (a robust, process-shared mutex) protects
 * procs[], qps[] and qpn_cursor.  The identity fields (node_guid, lid,
 * gid_prefix, pkeys) are written once by the creator before `ready` is
 * published with release order and are read-only afterwards.  A process
 * that dies holding the lock is detected by EOWNERDEAD; the next locker
 * sweeps every dead process's entries.
 *
 * Who a process is, and whether it lives, must hold across pid namespaces
 * (a container's processes share /dev/shm and the network namespace, each
 * sees the others' pids differently or not at all), so neither is a pid:
 *  - identity: a random 64-bit token drawn at attach (getrandom), never
 *    reused; it names the process's inbox;
 *  - liveness: each attached process holds an open file description lock
 *    (F_OFD_SETLK) on byte NODE_LOCK_PROC(slot) of the segment's file,
 *    through a descriptor only it holds (O_CLOEXEC; a forked child closes
 *    its copy: node_forget()).  The kernel drops the lock when the process
 *    ends, whatever its pid namespace; a stopped process keeps it and is
 *    alive.  Others test the byte with F_OFD_GETLK.  The creator holds
 *    byte NODE_LOCK_CREATOR while it initialises the segment.
 * A pid is kept, with the pid namespace it belongs to, only for
 * cross-memory attach, which the kernel addresses by pid (cma.c).
 */
#ifndef IBEMU_NODE_H
#define IBEMU_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

#include "params.h"

#define IBEMU_NODE_MAGIC 0x6962656d756e6f64ull /* "ibemunod" */
#define IBEMU_NODE_LAYOUT 12

/* Byte offsets of the liveness locks in the segment's file (advisory:
 * they do not touch the mapped data). */
#define NODE_LOCK_CREATOR 0
#define NODE_LOCK_PROC(slot) (1 + (off_t)(slot))

/*
 * One attached process.  token is stored last (release) when the slot is
 * taken and first when it is freed, so a reader without the lock that
 * sees it non-zero sees the rest; readers that use the other fields
 * (pid, pidns, token_addr) take the lock.
 */
struct node_proc {
	_Atomic uint64_t token; /* 0: free slot */
	uint32_t refs; /* contexts this process holds open */
	pid_t pid; /* in the process's own pid namespace */
	uint64_t pidns_dev, pidns_ino; /* that namespace: /proc/self/ns/pid */
	uint64_t token_addr; /* where its token is in its own memory */
	/* The TCP port on which it takes connections from other nodes'
	 * processes (tp_tcp.c), host order; 0: none.  Written by the
	 * process itself. */
	_Atomic uint32_t tcp_port;
};

/* One QPN of the node's 24-bit QPN space. */
struct node_qp {
	_Atomic int32_t owner; /* index in procs[] + 1; 0: free */
	uint32_t qp_type; /* enum ibv_qp_type, or NODE_QPT_XRC_SRQ */
	/* Published by the owner for requesters that place RDMA data
	 * themselves (emulator/transport/shm/cma.c).  Lock rule: seqlock.h; one writer
	 * (the owner under its QP lock, or a locker of the segment when
	 * the entry changes hands). */
	_Atomic uint32_t seq;
	_Atomic uint32_t state; /* enum ibv_qp_state */
	_Atomic uint32_t access; /* qp_access_flags */
	/* A connected QP's peer node once it has one (RTR): a tag of its
	 * address, 32 bits of HMAC-SHA-256 under the node's peer_key (a
	 * stranger can only guess, one lookup a try); 0: none.  The
	 * node's door answers for the QP to that node alone
	 * (node_qp_reachable).  Same seqlock. */
	_Atomic uint32_t peer_tag;
	_Atomic uint64_t pd_id; /* the owner's PD, as the owner names it */
	/* The token of the process this QP's owner verified it can read
	 * (its connected peer): a SEND to this QP may leave its data for
	 * the owner to pull (cma.c).  0: none.  Same seqlock. */
	_Atomic uint64_t pull_from;
};

/* node_qp.qp_type of a number that names an XRC SRQ (emulator/hca/xrc.c):
 * XRC SRQ numbers come from the same space, so each is unique on the
 * node and its owner known. */
#define NODE_QPT_XRC_SRQ 0x100u

/*
 * What a QP's owner shows of it to `ibemu top` (emulator/hca/qp_stats.c),
 * entry i beside qps[i]: a view for people, on which no process decides
 * anything.  Lock rule: one writer, the QP's owner (its threads store
 * and add with relaxed atomics, a snapshot under its QP lock); a locker
 * of the segment clears the entry when its QPN changes hands
 * (node_qpn_alloc).  Readers load each field once, relaxed, and take the
 * whole as a hint: the fields are not consistent with one another.
 */
struct node_qp_stats {
	/* The PSNs as of the owner's last post or packet received on the
	 * QP; the fills and depth as of its last post or every 16th packet
	 * (qp_stats.h, QP_STATS_RX_SYNC). */
	_Atomic uint32_t sq_psn; /* PSN of the next new request */
	_Atomic uint32_t rq_psn; /* the responder's expected PSN */
	_Atomic uint32_t sq_wrs; /* send WRs posted, not yet completed */
	_Atomic uint32_t rq_wrs; /* receive WRs posted; NODE_QP_STATS_SRQ */
	_Atomic uint32_t cq_depth; /* completions waiting in its CQs */
	/* Counted as they happen (wrap around; readers take differences). */
	_Atomic uint32_t err_cqes; /* completions in error */
	_Atomic uint32_t naks_sent, naks_rcvd; /* NAKs and RNR NAKs */
	_Atomic uint32_t retries; /* resends (timeout, NAK, implied) */
	uint32_t resv;
	_Atomic uint64_t tx_pkts, rx_pkts;
};

/* node_qp_stats.rq_wrs of a QP that takes its receives from an SRQ. */
#define NODE_QP_STATS_SRQ 0xffffffffu

/*
 * One multicast group of the node and the QPs attached to it (IBA 10.5,
 * manual 3.6.13): what a subnet's multicast forwarding and an HCA's
 * attachment table hold for a real fabric.  Lock rule: node_seg.lock
 * (node_mcast.c).  nr == 0: a free entry.  A member whose QPN has no
 * owner any more (its process died without detaching) is dropped by the
 * next locker that walks the group.
 */
struct node_mcast_grp {
	uint8_t mgid[16];
	uint16_t mlid;
	uint16_t nr;
	uint32_t qpn[IBEMU_MAX_MCAST_QP_ATTACH];
};

/*
 * One bound address of the node's RDMA CM (node_cm.c): a port of a port
 * space, on one address or on all (wildcard), held by one process, and
 * whether that process listens on it.  What the kernel's rdma_cm keeps
 * per network namespace.  Lock rule: node_seg.lock.  owner == 0: a free
 * entry; an entry whose owner's token no longer matches, or whose owner
 * is not alive, is free as well (its process died without releasing).
 */
struct node_cm_port {
	uint32_t owner; /* index in procs[] + 1; 0: free */
	uint32_t flags; /* NODE_CM_* */
	uint64_t token; /* the owner's token when it bound */
	uint16_t ps; /* port space (rdma_cma.h RDMA_PS_*) */
	uint16_t port; /* host order */
	uint8_t addr[16]; /* IPv6, or IPv4 mapped (::ffff:a.b.c.d) */
};

/*
 * One membership of a multicast group joined through the RDMA CM: what
 * the subnet administrator keeps as an MCMemberRecord (IBA 15.2.5.17).
 * The SA assigns a group its MLID when the first member joins; every
 * later join of the same MGID gets the same MLID, from any process, for
 * as long as the group has members.  Lock rule: node_seg.lock
 * (node_mcast.c).  owner == 0: a free entry; an entry whose owner's
 * token no longer matches, or whose owner is not alive, is free as well.
 */
struct node_cm_mcast {
	uint32_t owner; /* index in procs[] + 1; 0: free */
	uint16_t mlid;
	uint16_t resv;
	uint64_t token; /* the owner's token when it joined */
	uint8_t mgid[16];
};

#define NODE_CM_LISTEN 1u
#define NODE_CM_WILDCARD 2u /* any address of the node */
#define NODE_CM_REUSE 4u /* RDMA_OPTION_ID_REUSEADDR */
#define NODE_CM_V4 8u /* bound as an IPv4 address */
#define NODE_CM_AFONLY 16u /* an IPv6 wildcard that takes no IPv4 */

/*
 * The node's place on the IP fabric (fabric.c): written by the creator
 * before the segment is ready, immutable after.
 */
struct node_fabric {
	uint32_t flags; /* NODE_FABRIC_* */
	uint8_t ip4[4]; /* network order: the address the LID comes from */
	uint8_t prefix4; /* its subnet's prefix length */
	uint8_t resv[3];
	char ifname[16]; /* its interface */
	uint16_t door_port; /* the node's door (tcp_door.c), host order */
	uint16_t nr_gids;
	/* GID 0 = fe80::/64 + port GUID; then the node's IP addresses:
	 * ::ffff:a.b.c.d for IPv4, IPv6 as is (doc/design.md §6, "The
	 * node's place on the IP fabric"). */
	uint8_t gids[IBEMU_GID_TBL_LEN][16];
};

/*
 * A TCP connection of one of the node's processes to a process of
 * another node (tcp_status.c), published for `ibemu status`.  Lock rule: an
 * entry is taken and freed under node_seg.lock; its owner alone writes
 * the rest, with relaxed stores; readers take it as a hint.
 */
struct node_net_peer {
	_Atomic uint32_t owner; /* index in procs[] + 1; 0: free */
	_Atomic uint32_t state; /* NODE_NET_* */
	uint64_t token; /* the owner's */
	uint8_t addr[16]; /* the remote process's: IPv6, or ::ffff:a.b.c.d */
	uint16_t port, lid;
	int32_t rslot; /* its slot on its node */
	uint64_t guid; /* its node's port GUID */
	_Atomic uint64_t tx_pkts, tx_bytes, rx_pkts, rx_bytes;
};

#define NODE_NET_UP 1u
#define NODE_NET_DOWN 2u

/*
 * One port of the node's HCA (IBA 14.2.5.6 PortInfo; node_port.c): its
 * GUID and LID are identity, written by the creator and immutable once
 * the segment is ready; its state (enum ibv_port_state) is what `ibemu
 * port down|up` sets, any process of the node may store it (lock rule:
 * atomic stores, then node_seg.port_gen bumped with release order;
 * readers load it relaxed, or acquire after reading port_gen).
 */
struct node_port {
	uint64_t guid; /* host order; its GID 0 = fe80::/64 + guid */
	uint16_t lid;
	uint16_t resv;
	_Atomic uint32_t state;
};

#define NODE_FABRIC_MULTI 1u /* has an address other nodes can reach */
#define NODE_FABRIC_FILE 2u /* the LID came from the fabric file */

struct node_seg {
	uint64_t magic;
	uint32_t layout;
	uint32_t size;
	_Atomic uint32_t ready; /* set last by the creator */

	/* Identity: immutable once ready. */
	uint64_t node_guid; /* host order */
	uint64_t port_guid; /* host order; GID 0 = fe80::/64 + port_guid */
	uint64_t gid_prefix; /* host order, fe80:0000:0000:0000 */
	uint8_t peer_key[16]; /* random, for node_qp.peer_tag */
	uint16_t lid;
	uint16_t sm_lid;
	uint16_t pkeys[IBEMU_PKEY_TBL_LEN];
	char node_name[64];
	struct node_fabric fabric;
	/* The HCA's ports: nr_ports (1..IBEMU_MAX_PORTS) is identity;
	 * ports[0] is port 1 (its guid and lid are port_guid and lid
	 * above).  port_gen counts state changes: a process's engine
	 * compares it to tell its contexts (IBV_EVENT_PORT_ERR/ACTIVE). */
	uint32_t nr_ports;
	struct node_port ports[IBEMU_MAX_PORTS];
	_Atomic uint32_t port_gen;

	/* The process that holds the node's door (tcp_door.c): slot + 1 and
	 * its token, 0 when none; set and cleared by that process. */
	_Atomic uint32_t door_owner;
	_Atomic uint64_t door_token;

	pthread_mutex_t lock;
	uint32_t qpn_cursor; /* next index into qps[] to try */
	uint32_t nr_procs;
	struct node_proc procs[IBEMU_MAX_PROCS];
	struct node_qp qps[IBEMU_MAX_QP];
	struct node_qp_stats qp_stats[IBEMU_MAX_QP];
	struct node_mcast_grp mcast[IBEMU_MAX_MCAST_GRP];
	struct node_cm_port cm_ports[IBEMU_MAX_CM_PORTS];
	struct node_cm_mcast cm_mcast[IBEMU_MAX_CM_MCAST];
	struct node_net_peer net_peers[IBEMU_MAX_NET_PEERS];
};

/* A process's view of its node. */
struct node {
	struct node_seg *seg;
	char name[96]; /* file name in the user's directory (shmfile.h) */
	int fd; /* the segment's file, ours alone: liveness locks */
	int proc_slot; /* our index in seg->procs[], -1 until attached */
	uint64_t token; /* ours while attached, 0 otherwise */
};

/*
 * Open (or create) this user's node segment for the current network
 * namespace, or the one named by $IBEMU_NODE.  Returns 0 or -errno.
 * Safe against many processes opening at once.
 */
int node_open(struct node *node);
/* Unmap; the segment itself stays for the other processes. */
void node_close(struct node *node);
/* In a forked child: drop the parent's view without touching what it
 * holds (its liveness lock stays the parent's). */
void node_forget(struct node *node);

/* Register the calling process as a user of the node (refcounted). */
int node_proc_attach(struct node *node);
void node_proc_detach(struct node *node);

/* Lock the segment; recovers a lock whose holder died. */
void node_lock(struct node *node);
void node_unlock(struct node *node);

/* Allocate a QPN owned by the calling process; returns 0 or -errno. */
int node_qpn_alloc(struct node *node, uint32_t qp_type, uint32_t *qpn_p);
void node_qpn_free(struct node *node, uint32_t qpn);
/* Which process owns qpn: its token, or 0 if none. */
uint64_t node_qpn_owner(struct node *node, uint32_t qpn);
/* Publish a QP's state, access flags and PD for one-sided requesters. */
void node_qp_publish(struct node *node, uint32_t qpn, uint32_t state,
		     uint32_t access, uint64_t pd_id);
/* Publish whose data the QP's owner can pull (token, 0: nobody). */
void node_qp_publish_pull(struct node *node, uint32_t qpn,
			  uint64_t pull_from);
/* The owner's slot in procs[], or -1. */
int32_t node_qpn_owner_slot(struct node *node, uint32_t qpn);
/* The connected QP qpn's peer node is at addr (16 bytes, as node_qp
 * has it); by its owner, under its QP lock. */
void node_qp_publish_peer(struct node *node, uint32_t qpn,
			  const uint8_t addr[16]);
/* Whether the node at asker (16 bytes) may be told who owns qpn: any
 * node for a QP that is not connected (UD, or before RTR), only its
 * peer's for a connected one. */
bool node_qp_reachable(struct node *node, uint32_t qpn,
		       const uint8_t asker[16]);

/*
 * The HCA's ports (node_port.c).  node_ports_init: the creator, after
 * the fabric's LID is chosen, makes IBEMU_PORTS ports (1 by default).
 * node_ports_told: say once a process, clearly, when it asked for a
 * count the node was not made with.  node_nr_ports: the count, bounded.
 * node_port_of_lid: the port (1..) whose LID is lid, 0 if none.
 * node_port_state: enum ibv_port_state of port (1..), IBV_PORT_NOP (0)
 * for no such port.  node_port_set_state: 0, or EINVAL for no such port
 * or a state other than IBV_PORT_DOWN / IBV_PORT_ACTIVE.
 */
void node_ports_init(struct node_seg *seg);
void node_ports_told(const struct node_seg *seg);

/* Inline: every packet asks (the link, pkt_layout_qp). */
static inline unsigned int node_nr_ports(const struct node_seg *seg)
{
	unsigned int n = seg->nr_ports; /* immutable; bounded all the same */

	return n >= 1 && n <= IBEMU_MAX_PORTS ? n : 1;
}

static inline unsigned int node_port_of_lid(const struct node_seg *seg,
					    uint16_t lid)
{
	unsigned int i, n = node_nr_ports(seg);

	for (i = 0; lid && i < n; i++)
		if (seg->ports[i].lid == lid)
			return i + 1;
	return 0;
}

/* The port (1..) a QP's or an address vector's port_num names: its own
 * where the HCA has it, port 1 for any other number (the verbs checked
 * it); node_port_at: that port's entry. */
static inline unsigned int node_port_num(const struct node_seg *seg,
					 unsigned int port_num)
{
	return port_num >= 1 && port_num <= node_nr_ports(seg) ? port_num : 1;
}

static inline const struct node_port *
node_port_at(const struct node_seg *seg, unsigned int port_num)
{
	return &seg->ports[node_port_num(seg, port_num) - 1];
}

/* The segment is writable by every process of the node's user: a value
 * node_port_set_state never writes is taken as DOWN, so it is never
 * reported nor used as a port state of its own. */
static inline uint32_t node_port_state(const struct node_seg *seg,
				       unsigned int port)
{
	uint32_t state;

	if (port < 1 || port > node_nr_ports(seg))
		return IBV_PORT_NOP;
	state = atomic_load_explicit(&seg->ports[port - 1].state,
				     memory_order_relaxed);
	return state == IBV_PORT_ACTIVE ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
}

int node_port_set_state(struct node_seg *seg, unsigned int port,
			uint32_t state);
/* The IBEMU_PORTS this process asks for: 1 or 2 (another value is said
 * once and taken as 1). */
unsigned int node_ports_wanted(void);

/* Drop every entry of processes that no longer exist; caller holds lock. */
unsigned int node_sweep_dead_locked(struct node *node);

/* Whether the process in slot lives (its liveness lock is held; see
 * above).  A free slot is not alive; our own slot is. */
bool node_proc_alive(struct node *node, int slot);
/* Whether the process in slot is still the one that had token (its
 * procs[] token unchanged) and lives: what makes an entry it took, in
 * one of the node's tables, still its own.  Takes no lock: the caller
 * holds node_seg.lock while it reads the entry that names slot and
 * token, or copied them out before; procs[slot].token is read
 * atomically. */
bool node_proc_holds(struct node *node, int32_t slot, uint64_t token);

/* A process's identity as its node entry gives it, copied under the
 * lock.  0, or -ENOENT if the slot is free. */
struct node_proc_id {
	uint64_t token;
	pid_t pid;
	bool same_pidns; /* pid names it in our pid namespace */
	uint64_t token_addr;
};
int node_proc_id(struct node *node, int slot, struct node_proc_id *id);

/*
 * Multicast groups (node_mcast.c).  join: 0, -ENOMEM when the node has
 * IBEMU_MAX_MCAST_GRP groups or the group IBEMU_MAX_MCAST_QP_ATTACH
 * members; joining twice is a no-op.  leave: 0 or -EINVAL if qpn is not
 * a member.  procs: the distinct live processes with a QP attached to the
 * group (mgid NULL: any group of that MLID), at most max, into slots[].
 */
int node_mcast_join(struct node *node, const uint8_t mgid[16], uint16_t mlid,
		    uint32_t qpn);
int node_mcast_leave(struct node *node, const uint8_t mgid[16], uint16_t mlid,
		     uint32_t qpn);
/* The MGID of a group of the node with MLID mlid (attached by hand or
 * joined through the CM): true, or false if none has it. */
bool node_mcast_mgid(struct node *node, uint16_t mlid, uint8_t mgid[16]);
unsigned int node_mcast_procs(struct node *node, const uint8_t mgid[16],
			      uint16_t mlid, int32_t *slots, unsigned int max);
/*
 * Memberships through the RDMA CM (struct node_cm_mcast).  member_add:
 * record a membership of the calling process in mgid's group and give
 * the group's MLID in *mlid_p, assigning a free one if the group has no
 * member yet; an all-zero mgid asks for a new group with a unique MGID,
 * written back (IBA 15.2.5.17.1: the SA assigns it).  0, or -ENOMEM
 * when the table or the MLID space is full.  *index_p names the entry
 * for member_del.
 */
int node_mcast_member_add(struct node *node, uint8_t mgid[16],
			  uint16_t *mlid_p, int *index_p);
void node_mcast_member_del(struct node *node, int index);

/*
 * The RDMA CM's bound addresses (node_cm.c).  bind: *port_p 0 takes a
 * free ephemeral port; 0, -EADDRINUSE, or -ENOMEM when the table is
 * full; *index_p names the entry for listen and release.  listen:
 * 0 or -EADDRINUSE (another listener on the same port and address).
 * lookup: the live process listening on (ps, addr, port), an exact
 * address before a wildcard: 0 or -ENOENT.
 */
int node_cm_bind(struct node *node, uint16_t ps, const uint8_t addr[16],
		 uint32_t flags, uint16_t *port_p, int *index_p);
int node_cm_listen(struct node *node, int index);
void node_cm_release(struct node *node, int index);
int node_cm_lookup(struct node *node, uint16_t ps, const uint8_t addr[16],
		   bool v4, uint16_t port, int32_t *slot_p,
		   uint64_t *token_p);
/* Entry i of the table (node_seg.lock held), copied into *c: whether a
 * live process holds it (for ibemu status). */
bool node_cm_entry_locked(struct node *node, unsigned int i,
			  struct node_cm_port *c);

/* Helpers shared with the tools. */
int node_default_name(char *buf, size_t len);

#endif /* IBEMU_NODE_H */
