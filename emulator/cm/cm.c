// SPDX-License-Identifier: MIT
/*
 * The RDMA communication manager (cm.h): CM ids, listeners, the
 * connection state machine of IBA 12.9 and its messages (cm_wire.h),
 * their retransmission and timeouts, and the event channels the
 * librdmacm face reads.
 *
 * Messages: each is one 256-byte MAD sent as a UD SEND to QP1 of the
 * peer process's port (IBA 12.6.1), through the engine's transport;
 * the receiving engine hands every packet for QP1 to cm_recv_locked().
 * A request is addressed through the node's table of bound addresses
 * (node_cm.c), or, for an address of another node, through that node's
 * door (tp_tcp_resolve_cm); every later message goes to the process the
 * connection is with, named by its slot (a node slot, or a remote slot
 * of the TCP transport) and checked by its token.
 *
 * Across nodes (doc/design.md §3): an address the fabric locates on
 * another node (fabric_locate) resolves when the network is up, with
 * the source address the host's routing picks toward it; the path is
 * the two ports' LIDs and the GIDs of the two addresses (::ffff:a.b.c.d
 * for IPv4, GIDs 1.. of each port), which the REQ carries (IBA 12.6.5)
 * and the QP's address vector uses with a GRH, so route.c reaches the
 * peer's node.
 *
 * Lock rule: cm.lock protects every id, every channel's queue and the
 * id list; it is taken after engine.lock (cm_recv_locked runs under
 * it) and never held while calling out of this file except to send a
 * packet (the transport's producer side), to lock the node segment, or
 * to ask the TCP transport about a remote slot (tp_tcp_peer_info,
 * tp_tcp_peer_watch_fd, which take only tcp.lock and a connection's
 * tx_lock); it is dropped while another node's door is asked
 * (tp_tcp_resolve_cm blocks), the id marked connecting meanwhile.
 * Each channel's descriptor pair is written under cm.lock and read by
 * the application without it.
 *
 * Robustness: a MAD is copied once out of the transport's slot, then
 * every field is checked before use; a message that names no id of
 * ours, or comes from a process other than the one the id talks to,
 * is dropped (or answered with REJ as IBA 12.6.7 says).  A peer that
 * stops answering makes the id time out (IBA 12.4); one that dies is
 * seen at once through its process descriptor or, on another node, the
 * end of its TCP connection (cm_watch.h), or, where there is neither,
 * by the node's liveness (node_proc_alive) or the connection's state
 * within CM_LIVENESS_MS.  An idle process with connections sleeps: the CM
 * thread wakes for a timer, a peer's exit, or cm_wake.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cm.h"
#include "cm_mcast.h"
#include "cm_watch.h"
#include "cm_wire.h"
#include "engine.h"
#include "fabric.h"
#include "hca.h"
#include "log.h"
#include "node.h"
#include "tp_tcp.h"
#include "transport.h"

/*
 * Timing.  IBA 12.4 gives a request's timeout from the CM Response
 * Timeout field (4.096 us * 2^n) and retries up to Max CM Retries; the
 * kernel's rdma_cm asks for 2^20 (4.3 s) and 15 retries.  On one node a
 * message is lost only when the receiver skipped its room, so a shorter
 * timer serves: CM_RETRY_MS, CM_MAX_RETRIES times.
 */
#define CM_RETRY_MS 500
#define CM_MAX_RETRIES 8
/* What REQ says of both (IBA 12.6.5): 4.096 us * 2^17 = 537 ms, the
 * CM_RETRY_MS above, and Max CM Retries. */
#define CM_RESPONSE_TIMEOUT 17
#define CM_LIVENESS_MS 100
#define CM_LOCAL_ACK_TIMEOUT 14 /* 4.096 us * 2^14 = 67 ms (IBA 9.7.6.1.3) */
#define CM_BACKLOG_MAX 1024
/* The GRH's hop limit on a path to another node (IBA 8.3.1): routers
 * may lie between. */
#define CM_HOP_LIMIT 64
/* The time wait after a disconnection (IBA 12.9.6): twice the packet
 * lifetime the path gives (CM_LOCAL_ACK_TIMEOUT) and some. */
#define CM_TIMEWAIT_MS 150

enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_QUERY,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT,
	CM_REQ_RCVD,
	CM_REP_SENT,
	CM_REP_RCVD,
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DISCONNECTED,
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
	CM_FAILED, /* rejected, unreachable: only destroy is left */
	/* emu_cm_id_close ended it: off the id list, no event, every call
	 * refused (ENOENT); its memory waits for emu_cm_id_free */
	CM_CLOSED,
};

struct cm_ev_node {
	struct cm_ev_node *next;
	struct emu_cm_event ev;
};

struct emu_cm_chan {
	struct emu_cm *cm;
	/* An eventfd counting queued events (EFD_SEMAPHORE: a read takes
	 * one).  The application blocks in read or polls it, with
	 * whatever O_NONBLOCK it sets.  A count whose event was dropped
	 * with its id (or moved with it to another channel) stays: a read
	 * that finds no event behind its count reads on. */
	int fd;
	struct cm_ev_node *head, **tail;
	unsigned int nr_ids;
	/* threads in emu_cm_get_event; destroyed under them, the channel
	 * is closed and freed by the last one out */
	unsigned int readers;
	bool destroyed;
};

struct emu_cm_id {
	struct emu_cm *cm;
	struct emu_cm_id *next;
	struct emu_cm_chan *chan;
	uint64_t handle;
	uint16_t ps;
	enum ibv_qp_type qp_type;
	enum cm_state state;
	struct sockaddr_storage src, dst;
	int port_idx; /* node_cm entry, -1: none */
	bool reuse, afonly;
	/* a listener: requests reported but not yet answered */
	int backlog, queued;
	struct emu_cm_id *listener; /* a request of it, not yet answered */
	/* the connection (IBA 12.6.5 Local/Remote Communication ID) */
	uint32_t local_id, remote_id;
	int32_t peer_slot;
	uint64_t peer_token;
	/* the peer is on another node: its node's address, its port's LID
	 * and the path's GIDs, ours and its (IBA 12.6.5 primary path) */
	bool remote;
	struct sockaddr_storage node_addr;
	uint16_t rlid;
	uint8_t lgid[16], rgid[16];
	/* emu_cm_connect asks the peer's node, cm.lock dropped */
	bool connecting;
	uint64_t tid;
	uint32_t qpn, psn, qkey;
	uint32_t remote_qpn, remote_psn, remote_qkey;
	uint8_t resp_res, init_depth, retry_count, rnr_retry;
	/* retransmission: the last message sent that awaits an answer, or
	 * answers a message the peer may repeat */
	uint8_t last[CM_MAD_LEN];
	bool has_last;
	uint64_t deadline; /* ns, 0: no timer */
	unsigned int retries;
	uint64_t live_check; /* ns: next liveness look at the peer */
	bool peer_exited; /* its watch fired: look at once */
	/* events of the id taken off its channel (emu_cm_get_event) */
	unsigned int delivered;
};

struct emu_cm {
	struct emu_hca *hca;
	pthread_mutex_t lock;
	/* an id's connecting ended (cm_resolve_remote_locked), for a
	 * destroy that waits for it; with lock */
	pthread_cond_t connected;
	int wake_fd; /* eventfd: the CM thread has work or a new timer */
	pthread_t thread;
	struct cm_watch watch; /* the CM thread's, under lock */
	/* the CM thread's poll set: wake_fd, then the watched peers */
	struct pollfd pfd[CM_WATCH_MAX + 1];
	int32_t pfd_slot[CM_WATCH_MAX];
	struct emu_cm_id *ids;
	uint32_t next_id;
	uint64_t next_tid;
};

static pthread_mutex_t cm_open_lock = PTHREAD_MUTEX_INITIALIZER;

static uint64_t cm_now(void)
{
	return engine_now_ns();
}

static uint32_t cm_random(void)
{
	uint32_t v;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)random();
	return v;
}

/* Make the CM thread look again at its ids (a new timer or peer). */
static void cm_wake(struct emu_cm *cm)
{
	uint64_t one = 1;

	if (write(cm->wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is set already, the thread will run */
	}
}

/* ---- addresses ---- */

/* addr as 16 bytes: IPv6, or IPv4 mapped; *v4 says which. */
static void cm_addr16(const struct sockaddr *sa, uint8_t out[16], bool *v4)
{
	const struct sockaddr_in *s4 = (const void *)sa;

	memset(out, 0, 16);

	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &s4->sin_addr, 4);
		*v4 = true;
	} else {
		memcpy(out,
		       &((const struct sockaddr_in6 *)(const void *)sa)
				->sin6_addr,
		       16);
		*v4 = IN6_IS_ADDR_V4MAPPED(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	}
}

/* What a call finding id in a state it cannot act in returns: ENOENT
 * for an id emu_cm_id_close ended (as the kernel's ucma answers for an
 * id it no longer has), else EINVAL; with cm.lock. */
static int cm_wrong_state_locked(const struct emu_cm_id *id)
{
	return id->state == CM_CLOSED ? ENOENT : EINVAL;
}

static uint16_t cm_port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)ss)
				     ->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)ss)
				     ->sin6_port);
	return 0;
}

static void cm_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
}

static bool cm_addr_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)
			       ->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
		&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
}

static bool cm_addr_loopback(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6))
		return a6->s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(a6);
}

static socklen_t cm_sa_len(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (sa->sa_family == AF_INET6)
		return sizeof(struct sockaddr_in6);
	return 0;
}

/*
 * Every address of the node resolves to ibemu0 port 1: loopback and
 * each address of the node's interfaces (getifaddrs).
 */
bool emu_cm_addr_is_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	uint8_t want[16], have[16];
	bool v4, v4b, found = false;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	if (cm_addr_loopback(sa))
		return true;
	if (getifaddrs(&ifa))
		return false;
	cm_addr16(sa, want, &v4);
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		cm_addr16(i->ifa_addr, have, &v4b);
		found = !memcmp(want, have, 16);
	}
	freeifaddrs(ifa);
	return found;
}

/* ---- other nodes ---- */

/* The index of gid in the port's GID table; 0 (GID 0) if not there. */
static uint8_t cm_gid_index(struct emu_cm *cm, const uint8_t gid[16])
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	unsigned int i, nr = f->nr_gids;

	for (i = 0; i < nr && i < IBEMU_GID_TBL_LEN; i++)
		if (!memcmp(f->gids[i], gid, 16))
			return (uint8_t)i;
	return 0;
}

/* The port's GID for our address src: src itself when it is one of the
 * port's GIDs, else the node's address (the one its LID comes from),
 * else GID 0. */
static void cm_own_gid(struct emu_cm *cm, const struct sockaddr *src,
		       uint8_t gid[16])
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	bool v4;

	cm_addr16(src, gid, &v4);
	if (fabric_gid_is_local(&cm->hca->node, gid))
		return;
	if (f->ip4[0]) {
		memset(gid, 0, 16);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, f->ip4, 4);
	} else {
		memcpy(gid, f->gids[0], 16);
	}
}

/*
 * Whether dst is on another node: the fabric places it there (the
 * network is up) and a node answers at that address within timeout_ms
 * (its door, as a neighbour answers address resolution).  *node_addr:
 * that node's address; *lid_p: its LID.  Blocks up to timeout_ms (at
 * most the transport's resolution time); call without cm.lock.
 */
static bool cm_locate_remote(struct emu_cm *cm, const struct sockaddr *dst,
			     int timeout_ms, struct sockaddr_storage *node_addr,
			     uint16_t *lid_p)
{
	struct engine *e = cm->hca->engine;
	uint8_t gid[16];
	bool v4;

	if (!e || !tp_tcp_enabled(e))
		return false;
	cm_addr16(dst, gid, &v4);
	return fabric_locate(&cm->hca->node, 0, gid, node_addr) ==
		       FABRIC_THERE &&
	       !tp_tcp_probe_node(e, node_addr, timeout_ms, lid_p);
}

/* Our address toward dst on another node, port 0: the one the host's
 * routing picks (as the kernel's rdma_cm takes the route's source), or
 * the node's own address if that is none of ours. */
static void cm_source_toward(struct emu_cm *cm, const struct sockaddr *dst,
			     struct sockaddr_storage *src)
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	socklen_t len = sizeof(*src);
	struct sockaddr_in *in = (struct sockaddr_in *)(void *)src;
	int s;

	memset(src, 0, sizeof(*src));
	s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && !connect(s, dst, cm_sa_len(dst)) &&
	    !getsockname(s, (struct sockaddr *)src, &len) &&
	    emu_cm_addr_is_local((struct sockaddr *)src)) {
		close(s);
		cm_set_port(src, 0);
		return;
	}
	if (s >= 0)
		close(s);
	memset(src, 0, sizeof(*src));
	src->ss_family = dst->sa_family;
	if (dst->sa_family == AF_INET && f->ip4[0])
		memcpy(&in->sin_addr, f->ip4, 4);
}

/* What the transport knows of the remote slot's process: its node's
 * LID, address (as a GID) and token; false if the slot names none. */
static bool cm_remote_peer(struct emu_cm *cm, int32_t slot, uint16_t *lid,
			   uint8_t gid[16], struct sockaddr_storage *node_addr,
			   uint64_t *token)
{
	struct engine *e = cm->hca->engine;
	struct tp_peer_info info;
	bool v4;

	if (!e || !tp_slot_is_remote(slot) ||
	    !tp_tcp_peer_info(e, slot, &info))
		return false;
	*lid = info.lid;
	cm_set_port(&info.addr, 0);
	cm_addr16((struct sockaddr *)&info.addr, gid, &v4);
	*node_addr = info.addr;
	*token = info.token;
	return true;
}

/*
 * The address vector to the id's peer (rdma_init_qp_attr's for RC and
 * UC, the UD peer's): on this node, the port's own LID; on another, its
 * port's LID and, in a GRH, the GID of its address, from ours
 * (IBA 8.3.1), which route.c follows to its node.  Caller holds cm.lock.
 */
static void cm_ah_locked(struct emu_cm_id *id, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = 1;
	if (!id->remote) {
		ah->dlid = id->cm->hca->node.seg->lid;
		return;
	}
	ah->dlid = id->rlid;
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, id->rgid, 16);
	ah->grh.sgid_index = cm_gid_index(id->cm, id->lgid);
	ah->grh.hop_limit = CM_HOP_LIMIT;
}

/* ---- the event channels ---- */

/* Queue ev on the id's channel; caller holds cm.lock. */
static void cm_queue_locked(struct emu_cm_id *id, struct emu_cm_event *ev)
{
	struct emu_cm_chan *chan = id->chan;
	struct cm_ev_node *n;
	uint64_t one = 1;

	n = calloc(1, sizeof(*n));
	if (!n) {
		ibemu_log_err("rdma_cm: no memory for an event; dropped");
		return;
	}
	ev->id = id;
	ev->handle = id->handle;
	n->ev = *ev;
	*chan->tail = n;
	chan->tail = &n->next;
	if (write(chan->fd, &one, sizeof(one)) != sizeof(one))
		ibemu_log_err("rdma_cm: event channel: %s", strerror(errno));
}

static void cm_event_locked(struct emu_cm_id *id,
			    enum emu_cm_event_type type, int status)
{
	struct emu_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = type;
	ev.status = status;
	cm_queue_locked(id, &ev);
}

static void cm_id_destroy_locked(struct emu_cm_id *id);

/*
 * The connection is over: DISCONNECTED now, and after the time wait
 * (IBA 12.9.6: no message of the old connection can still arrive) the
 * id reports TIMEWAIT_EXIT, as the kernel's rdma_cm does.  ev: the
 * DISCONNECTED event to queue (NULL: one without data).
 */
static void cm_disconnected_locked(struct emu_cm_id *id,
				   struct emu_cm_event *ev)
{
	struct emu_cm_event plain;

	if (!ev) {
		memset(&plain, 0, sizeof(plain));
		ev = &plain;
	}
	ev->event = EMU_CM_DISCONNECTED;
	id->state = CM_DISCONNECTED;
	id->has_last = false;
	id->deadline = cm_now() + CM_TIMEWAIT_MS * 1000000ull;
	cm_queue_locked(id, ev);
	cm_wake(id->cm);
}

/* Drop id's queued events; the requests a listener had not handed out
 * yet are refused (their ids destroyed).  Caller holds cm.lock. */
static void cm_purge_locked(struct emu_cm_id *id)
{
	struct emu_cm_chan *chan = id->chan;
	struct cm_ev_node **pp = &chan->head, *n;

	while ((n = *pp)) {
		if (n->ev.id != id) {
			pp = &n->next;
			continue;
		}
		*pp = n->next;
		if (n->ev.new_id)
			cm_id_destroy_locked(n->ev.new_id);
		free(n);
	}
	chan->tail = &chan->head;
	for (n = chan->head; n; n = n->next)
		chan->tail = &n->next;
}

int emu_cm_chan_create(struct emu_hca *hca, struct emu_cm_chan **chan_p,
		       int *fd_p)
{
	struct emu_cm_chan *chan;

	if (!hca->cm)
		return EINVAL;
	chan = calloc(1, sizeof(*chan));
	if (!chan)
		return ENOMEM;
	chan->fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (chan->fd < 0) {
		free(chan);
		return errno;
	}
	chan->cm = hca->cm;
	chan->tail = &chan->head;
	*chan_p = chan;
	*fd_p = chan->fd;
	return 0;
}

int emu_cm_chan_destroy(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	struct cm_ev_node *n;
	bool busy;

	pthread_mutex_lock(&cm->lock);
	if (chan->nr_ids) {
		pthread_mutex_unlock(&cm->lock);
		return EBUSY;
	}
	while ((n = chan->head)) {
		chan->head = n->next;
		free(n);
	}
	chan->tail = &chan->head;
	chan->destroyed = true;
	busy = chan->readers != 0;
	pthread_mutex_unlock(&cm->lock);
	/* A thread still in emu_cm_get_event keeps the channel and stays
	 * blocked, as on a closed rdma_cm descriptor (no event can come:
	 * no id is left); the last one out closes and frees it. */
	if (!busy) {
		close(chan->fd);
		free(chan);
	}
	return 0;
}

int emu_cm_chan_hold(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (chan->destroyed)
		ret = EBADF;
	else
		chan->readers++;
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

void emu_cm_chan_put(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	bool last;

	pthread_mutex_lock(&cm->lock);
	last = --chan->readers == 0 && chan->destroyed;
	pthread_mutex_unlock(&cm->lock);
	if (last) {
		close(chan->fd);
		free(chan);
	}
}

int emu_cm_get_event(struct emu_cm_chan *chan, struct emu_cm_event *ev)
{
	struct emu_cm *cm = chan->cm;
	struct cm_ev_node *n = NULL;
	uint64_t count;
	ssize_t r;
	int ret;

	/* The channel stays while this thread is in here, even when
	 * another destroys it (rping 44's exit path): see
	 * emu_cm_chan_destroy. */
	ret = emu_cm_chan_hold(chan);
	if (ret)
		return ret;
	for (;;) {
		r = read(chan->fd, &count, sizeof(count));
		if (r < 0) {
			ret = errno;
			break;
		}
		if (r != sizeof(count)) {
			ret = EIO;
			break;
		}
		pthread_mutex_lock(&cm->lock);
		n = chan->head;
		if (n) {
			chan->head = n->next;
			if (!chan->head)
				chan->tail = &chan->head;
			n->ev.id->delivered++;
		}
		pthread_mutex_unlock(&cm->lock);
		if (n) {
			*ev = n->ev;
			free(n);
			ret = 0;
			break;
		}
		/* the count of an event dropped with its id, or with the
		 * channel: read on */
	}
	/* destroyed under us: the caller must not touch its channel */
	pthread_mutex_lock(&cm->lock);
	if (chan->destroyed && ret)
		ret = EBADF;
	pthread_mutex_unlock(&cm->lock);
	emu_cm_chan_put(chan);
	return ret;
}

/* ---- sending ---- */

/* A REQ's Transport Service Type: 0 RC, 1 UC (IBA 12.6.5), 3 XRC
 * (IBA A14.6.1). */
static uint32_t cm_transport_type(enum ibv_qp_type type)
{
	if (type == IBV_QPT_UC)
		return 1;
	if (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV)
		return 3;
	return 0;
}

static void cm_mad_init(struct emu_cm_id *id, uint8_t *mad, uint16_t attr)
{
	memset(mad, 0, CM_MAD_LEN);
	mad[MAD_BASE_VERSION] = 1;
	mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
	mad[MAD_CLASS_VERSION] = 2;
	mad[MAD_METHOD] = MAD_METHOD_SEND;
	cm_put64(mad, MAD_TID, id->tid);
	cm_put16(mad, MAD_ATTR_ID, attr);
}

/*
 * Send one MAD to QP1 of process slot; caller holds cm.lock.  A packet
 * that finds no room is lost as on a wire: the retransmission timer of
 * whoever waits for an answer sends again.
 */
static void cm_send_locked(struct emu_cm *cm, int32_t slot, const uint8_t *mad)
{
	struct engine *e = cm->hca->engine;
	struct tp_peer_info info;
	uint16_t dlid = cm->hca->node.seg->lid;
	struct tp_peer *peer;
	struct pkt_out out;
	struct pkt_hdr *hdr;

	if (!e || slot < 0)
		return;
	if (tp_slot_is_remote(slot)) {
		if (!tp_tcp_peer_info(e, slot, &info))
			return;
		dlid = info.lid;
	}
	peer = engine_peer(e, slot);
	if (!peer)
		return;
	out.pkt.src_proc = cm->hca->node.proc_slot;
	if (!peer->tp->pkt_claim(peer, &out.pkt))
		return;
	out.e = e;
	out.dst = peer;
	out.op = opcode_get(IB_OPCODE_UD | IB_OP_SEND_ONLY);
	out.base = out.pkt.data;
	hdr = out.pkt.hdr;
	hdr->len = out.op->hdr_len + CM_MAD_LEN;
	hdr->slid = cm->hca->node.seg->lid;
	hdr->dlid = dlid;
	hdr->src_qpn = CM_QPN;
	hdr->src_proc = cm->hca->node.proc_slot;
	hdr->flags = 0;
	out_bth_init(&out, IB_OPCODE_UD | IB_OP_SEND_ONLY, 0,
		     IBEMU_DEFAULT_PKEY, CM_QPN, 0, false);
	out_set_deth(&out, CM_QP1_QKEY, CM_QPN);
	memcpy(out_payload(&out), mad, CM_MAD_LEN);
	pkt_send(&out);
}

/* Send mad to the id's peer and keep it for retransmission (timed: an
 * answer is awaited) or for repeating (a duplicate asks again). */
static void cm_send_keep_locked(struct emu_cm_id *id, const uint8_t *mad,
				bool timed)
{
	memcpy(id->last, mad, CM_MAD_LEN);
	id->has_last = true;
	id->retries = 0;
	id->deadline = timed ? cm_now() + CM_RETRY_MS * 1000000ull : 0;
	cm_send_locked(id->cm, id->peer_slot, mad);
	if (timed)
		cm_wake(id->cm);
}

static void cm_send_rej_to(struct emu_cm *cm, int32_t slot, uint64_t tid,
			   uint32_t local_id, uint32_t remote_id,
			   uint8_t msg, uint16_t reason, const void *pd,
			   uint8_t len)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	memset(mad, 0, sizeof(mad));
	mad[MAD_BASE_VERSION] = 1;
	mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
	mad[MAD_CLASS_VERSION] = 2;
	mad[MAD_METHOD] = MAD_METHOD_SEND;
	cm_put64(mad, MAD_TID, tid);
	cm_put16(mad, MAD_ATTR_ID, CM_ATTR_REJ);
	cm_put32(d, REJ_LOCAL_COMM_ID, local_id);
	cm_put32(d, REJ_REMOTE_COMM_ID, remote_id);
	cm_put8(d, REJ_MSG_REJECTED, (uint8_t)(msg << 6));
	cm_put16(d, REJ_REASON, reason);
	if (pd && len)
		memcpy(d + REJ_PRIVATE, pd, len);
	cm_send_locked(cm, slot, mad);
}

static void cm_send_rej_locked(struct emu_cm_id *id, uint8_t msg,
			       uint16_t reason, const void *pd, uint8_t len)
{
	cm_send_rej_to(id->cm, id->peer_slot, id->tid, id->local_id,
		       id->remote_id, msg, reason, pd, len);
}

static void cm_send_sidr_rep_locked(struct emu_cm_id *id, uint8_t status,
				    const void *pd, uint8_t len)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	cm_mad_init(id, mad, CM_ATTR_SIDR_REP);
	cm_put32(d, SIDR_REP_REQUEST_ID, id->remote_id);
	cm_put8(d, SIDR_REP_STATUS, status);
	cm_put32(d, SIDR_REP_QPN, id->qpn << 8);
	cm_put64(d, SIDR_REP_SERVICE_ID,
		 CM_IP_SERVICE_ID(id->ps, cm_port_of(&id->src)));
	cm_put32(d, SIDR_REP_QKEY, id->qkey);
	if (pd && len)
		memcpy(d + SIDR_REP_PRIVATE, pd, len);
	cm_send_keep_locked(id, mad, false);
}

/* ---- ids ---- */

static struct emu_cm_id *cm_id_alloc_locked(struct emu_cm *cm,
					    struct emu_cm_chan *chan,
					    uint64_t handle, uint16_t ps,
					    enum ibv_qp_type qp_type)
{
	struct emu_cm_id *id = calloc(1, sizeof(*id));

	if (!id)
		return NULL;
	id->cm = cm;
	id->chan = chan;
	id->handle = handle;
	id->ps = ps;
	id->qp_type = qp_type;
	id->port_idx = -1;
	id->peer_slot = -1;
	do {
		id->local_id = cm->next_id++;
	} while (!id->local_id);
	id->qkey = cm_mc_ps_qkey(ps);
	chan->nr_ids++;
	id->next = cm->ids;
	cm->ids = id;
	return id;
}

int emu_cm_id_create(struct emu_hca *hca, struct emu_cm_chan *chan,
		     uint64_t handle, int ps, enum ibv_qp_type qp_type,
		     struct emu_cm_id **id_p)
{
	struct emu_cm *cm = hca->cm;
	struct emu_cm_id *id;

	if (!cm || !chan)
		return EINVAL;
	switch (ps) {
	case EMU_CM_PS_TCP:
	case EMU_CM_PS_IB:
		/* XRC: an initiator connects to a target (IBA A14.6) */
		if (qp_type != IBV_QPT_RC && qp_type != IBV_QPT_UC &&
		    qp_type != IBV_QPT_UD && qp_type != IBV_QPT_XRC_SEND &&
		    qp_type != IBV_QPT_XRC_RECV)
			return EINVAL;
		break;
	case EMU_CM_PS_UDP:
	case EMU_CM_PS_IPOIB:
		if (qp_type != IBV_QPT_UD)
			return EINVAL;
		break;
	default:
		return EPROTONOSUPPORT;
	}
	pthread_mutex_lock(&cm->lock);
	id = cm_id_alloc_locked(cm, chan, handle, (uint16_t)ps, qp_type);
	pthread_mutex_unlock(&cm->lock);
	if (!id)
		return ENOMEM;
	*id_p = id;
	return 0;
}

void emu_cm_id_set_handle(struct emu_cm_id *id, uint64_t handle)
{
	pthread_mutex_lock(&id->cm->lock);
	id->handle = handle;
	pthread_mutex_unlock(&id->cm->lock);
}

int emu_cm_id_migrate(struct emu_cm_id *id, struct emu_cm_chan *chan,
		      unsigned int *delivered_p)
{
	struct emu_cm *cm = id->cm;
	struct emu_cm_chan *old = id->chan;
	struct cm_ev_node **pp, *n;
	uint64_t one = 1;

	if (chan->cm != cm)
		return EINVAL;
	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_CLOSED) {
		pthread_mutex_unlock(&cm->lock);
		return ENOENT;
	}
	if (old != chan) {
		for (pp = &old->head; (n = *pp);) {
			if (n->ev.id != id) {
				pp = &n->next;
				continue;
			}
			*pp = n->next;
			n->next = NULL;
			*chan->tail = n;
			chan->tail = &n->next;
			if (write(chan->fd, &one, sizeof(one)) != sizeof(one))
				ibemu_log_err("rdma_cm: event channel: %s",
					      strerror(errno));
		}
		old->tail = &old->head;
		for (n = old->head; n; n = n->next)
			old->tail = &n->next;
		old->nr_ids--;
		chan->nr_ids++;
		id->chan = chan;
	}
	*delivered_p = id->delivered;
	pthread_mutex_unlock(&cm->lock);
	return 0;
}

static void cm_unlink_locked(struct emu_cm_id *id)
{
	struct emu_cm_id **pp;

	for (pp = &id->cm->ids; *pp; pp = &(*pp)->next) {
		if (*pp == id) {
			*pp = id->next;
			return;
		}
	}
}

/* The listener no longer counts id among its unanswered requests. */
static void cm_unqueue_locked(struct emu_cm_id *id)
{
	if (id->listener) {
		id->listener->queued--;
		id->listener = NULL;
	}
}

static void cm_send_dreq_locked(struct emu_cm_id *id, bool timed)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	id->tid = id->cm->next_tid++;
	cm_mad_init(id, mad, CM_ATTR_DREQ);
	cm_put32(d, DREQ_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, DREQ_REMOTE_COMM_ID, id->remote_id);
	cm_put32(d, DREQ_REMOTE_QPN, id->remote_qpn << 8);
	cm_send_keep_locked(id, mad, timed);
}

/* End id: the peer told, the id off the list, its events dropped and
 * its address released; its memory stays (state CM_CLOSED). */
static void cm_id_end_locked(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	struct emu_cm_id *o;

	/* What the connection's peer is told (IBA 12.9.6 and 12.9.7:
	 * leaving a connection sends DREQ, refusing one REJ). */
	switch (id->state) {
	case CM_REQ_SENT:
		cm_send_rej_locked(id, REJ_MSG_OTHER, REJ_TIMEOUT, NULL, 0);
		break;
	case CM_REQ_RCVD:
	case CM_REP_SENT:
		cm_send_rej_locked(id, id->state == CM_REQ_RCVD ? REJ_MSG_REQ
								: REJ_MSG_OTHER,
				   REJ_CONSUMER, NULL, 0);
		break;
	case CM_SIDR_REQ_RCVD:
		cm_send_sidr_rep_locked(id, SIDR_STATUS_REJECTED, NULL, 0);
		break;
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
		if (id->qp_type != IBV_QPT_UD)
			cm_send_dreq_locked(id, false);
		break;
	default:
		break;
	}
	cm_unlink_locked(id);
	cm_unqueue_locked(id);
	for (o = cm->ids; o; o = o->next)
		if (o->listener == id)
			o->listener = NULL;
	cm_purge_locked(id);
	id->chan->nr_ids--;
	if (id->port_idx >= 0)
		node_cm_release(&cm->hca->node, id->port_idx);
	id->port_idx = -1;
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_CLOSED;
}

/* An id none of whose events were handed out (a request's new id). */
static void cm_id_destroy_locked(struct emu_cm_id *id)
{
	cm_id_end_locked(id);
	free(id);
}

unsigned int emu_cm_id_close(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	unsigned int delivered;

	/* The kernel's rdma_destroy_id leaves the id's groups. */
	cm_mc_id_gone(id);
	pthread_mutex_lock(&cm->lock);
	/* another thread's rdma_connect is asking the peer's node (at
	 * most its resolution time): it goes on with the id after */
	while (id->connecting)
		pthread_cond_wait(&cm->connected, &cm->lock);
	delivered = id->delivered;
	if (id->state != CM_CLOSED)
		cm_id_end_locked(id);
	pthread_mutex_unlock(&cm->lock);
	return delivered;
}

void emu_cm_id_free(struct emu_cm_id *id)
{
	free(id);
}

unsigned int emu_cm_id_destroy(struct emu_cm_id *id)
{
	unsigned int delivered = emu_cm_id_close(id);

	emu_cm_id_free(id);
	return delivered;
}

/* ---- addresses and routes ---- */

/* Bind id to addr (port 0: an ephemeral one); caller holds cm.lock. */
static int cm_bind_locked(struct emu_cm_id *id, const struct sockaddr *addr)
{
	uint8_t a16[16];
	uint32_t flags = 0;
	uint16_t port;
	bool v4;
	int idx, ret;

	if (id->port_idx >= 0 || id->state != CM_IDLE)
		return cm_wrong_state_locked(id);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	if (!cm_addr_any(addr) && !emu_cm_addr_is_local(addr))
		return EADDRNOTAVAIL;
	cm_addr16(addr, a16, &v4);
	if (v4)
		flags |= NODE_CM_V4;
	if (cm_addr_any(addr))
		flags |= NODE_CM_WILDCARD;
	if (id->reuse)
		flags |= NODE_CM_REUSE;
	if (id->afonly)
		flags |= NODE_CM_AFONLY;
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, addr, cm_sa_len(addr));
	port = cm_port_of(&id->src);
	ret = node_cm_bind(&id->cm->hca->node, id->ps, a16, flags, &port,
			   &idx);
	if (ret)
		return -ret;
	cm_set_port(&id->src, port);
	id->port_idx = idx;
	id->state = CM_ADDR_BOUND;
	return 0;
}

int emu_cm_bind(struct emu_cm_id *id, const struct sockaddr *addr)
{
	int ret;

	pthread_mutex_lock(&id->cm->lock);
	ret = cm_bind_locked(id, addr);
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_set_reuseaddr(struct emu_cm_id *id, bool on)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_IDLE)
		ret = cm_wrong_state_locked(id);
	else
		id->reuse = on;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_set_afonly(struct emu_cm_id *id, bool on)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_IDLE)
		ret = cm_wrong_state_locked(id);
	else
		id->afonly = on;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_resolve_addr(struct emu_cm_id *id, const struct sockaddr *src,
			const struct sockaddr *dst, int timeout_ms)
{
	struct sockaddr_storage any, dss, node_addr, toward;
	bool local, mcast, remote = false;
	uint64_t start = cm_now();
	uint16_t rlid = 0;
	int ret = 0;

	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return EAFNOSUPPORT;
	if (src && src->sa_family != AF_INET && src->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	memset(&dss, 0, sizeof(dss));
	memcpy(&dss, dst, cm_sa_len(dst));
	/* Connecting to the unspecified address means this host, as the
	 * kernel's rdma_cm takes it. */
	if (cm_addr_any(dst)) {
		if (dss.ss_family == AF_INET)
			((struct sockaddr_in *)(void *)&dss)->sin_addr.s_addr =
				htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)(void *)&dss)->sin6_addr =
				in6addr_loopback;
	}
	/* A multicast destination resolves at once, as the kernel's
	 * address resolution maps it to a multicast hardware address
	 * without asking a neighbour (ip_ib_mc_map); the id is then ready
	 * to join it (rdma_join_multicast). */
	mcast = emu_cm_addr_is_multicast((struct sockaddr *)&dss);
	local = mcast || emu_cm_addr_is_local((struct sockaddr *)&dss);
	/* Another node's address: resolved when a node answers there, as
	 * a neighbour answers (the caller waits for that, at most its
	 * timeout). */
	if (!local)
		remote = cm_locate_remote(id->cm, (struct sockaddr *)&dss,
					  timeout_ms, &node_addr, &rlid);
	if (remote)
		cm_source_toward(id->cm, (struct sockaddr *)&dss, &toward);
	pthread_mutex_lock(&id->cm->lock);
	if (id->state == CM_IDLE) {
		memset(&any, 0, sizeof(any));
		if (src) {
			memcpy(&any, src, cm_sa_len(src));
		} else if (mcast) {
			cm_mc_source(dss.ss_family, &any);
		} else if (local) {
			/* The source is the address the destination is
			 * reached from: on this node, itself. */
			memcpy(&any, &dss, sizeof(dss));
			cm_set_port(&any, 0);
		} else if (remote) {
			any = toward;
		} else {
			any.ss_family = dss.ss_family;
		}
		ret = cm_bind_locked(id, (struct sockaddr *)&any);
	} else if (id->state != CM_ADDR_BOUND) {
		ret = cm_wrong_state_locked(id);
	}
	if (ret)
		goto out;
	if (cm_addr_any((struct sockaddr *)&id->src) && local) {
		uint16_t port = cm_port_of(&id->src);

		if (id->src.ss_family == dss.ss_family) {
			if (mcast)
				cm_mc_source(dss.ss_family, &id->src);
			else
				memcpy(&id->src, &dss, sizeof(dss));
			cm_set_port(&id->src, port);
		}
	}
	if (cm_addr_any((struct sockaddr *)&id->src) && remote &&
	    id->src.ss_family == toward.ss_family) {
		uint16_t port = cm_port_of(&id->src);

		id->src = toward;
		cm_set_port(&id->src, port);
	}
	id->dst = dss;
	id->remote = remote;
	if (remote) {
		bool v4;

		id->node_addr = node_addr;
		/* the node's LID, as it answered */
		id->rlid = rlid;
		cm_own_gid(id->cm, (struct sockaddr *)&id->src, id->lgid);
		cm_addr16((struct sockaddr *)&dss, id->rgid, &v4);
	}
	if (local || remote) {
		id->state = CM_ADDR_RESOLVED;
		cm_event_locked(id, EMU_CM_ADDR_RESOLVED, 0);
	} else {
		/* No device of this node reaches it: the query times out
		 * (ADDR_ERROR), as a neighbour that never answers. */
		id->state = CM_ADDR_QUERY;
		id->deadline = start +
			       (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) *
				       1000000ull;
		cm_wake(id->cm);
	}
out:
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_resolve_route(struct emu_cm_id *id, int timeout_ms)
{
	int ret = 0;

	(void)timeout_ms; /* the path is the node's own port */
	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_ADDR_RESOLVED) {
		ret = cm_wrong_state_locked(id);
	} else {
		id->state = CM_ROUTE_RESOLVED;
		cm_event_locked(id, EMU_CM_ROUTE_RESOLVED, 0);
	}
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

void emu_cm_addrs(struct emu_cm_id *id, struct sockaddr_storage *src,
		  struct sockaddr_storage *dst)
{
	pthread_mutex_lock(&id->cm->lock);
	*src = id->src;
	*dst = id->dst;
	pthread_mutex_unlock(&id->cm->lock);
}

bool emu_cm_route(struct emu_cm_id *id, struct emu_cm_route *r)
{
	const struct node_seg *seg = id->cm->hca->node.seg;
	uint64_t prefix = htobe64(seg->gid_prefix);
	uint64_t guid = htobe64(seg->port_guid);
	bool on_dev;

	memset(r, 0, sizeof(*r));
	memcpy(r->sgid.raw, &prefix, 8);
	memcpy(r->sgid.raw + 8, &guid, 8);
	r->dgid = r->sgid;
	r->slid = r->dlid = seg->lid;
	pthread_mutex_lock(&id->cm->lock);
	/* On the device once its address is one of the node's: resolved,
	 * or bound (listening or not) to an address other than "any". */
	on_dev = id->state != CM_IDLE && id->state != CM_ADDR_QUERY &&
		 !((id->state == CM_ADDR_BOUND || id->state == CM_LISTEN) &&
		   cm_addr_any((struct sockaddr *)&id->src));
	if (id->remote) {
		/* the two nodes' ports */
		memcpy(r->sgid.raw, id->lgid, 16);
		memcpy(r->dgid.raw, id->rgid, 16);
		r->dlid = id->rlid;
	}
	pthread_mutex_unlock(&id->cm->lock);
	r->pkey = IBEMU_DEFAULT_PKEY;
	r->mtu = IBEMU_MAX_MTU;
	r->port_num = 1;
	return on_dev;
}

uint16_t emu_cm_src_port(struct emu_cm_id *id)
{
	return cm_port_of(&id->src);
}

uint16_t emu_cm_dst_port(struct emu_cm_id *id)
{
	return cm_port_of(&id->dst);
}

/* ---- for the multicast joins (cm_mcast.c) ---- */

int cm_mc_id_check(struct emu_cm_id *id, uint16_t *ps_p, uint32_t *qkey_p,
		   struct node **node_p)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	/* The kernel's rdma_join_multicast: a UD id with a device (bound
	 * to one of the node's addresses, or resolved), else EINVAL. */
	if (id->qp_type != IBV_QPT_UD ||
	    (id->state != CM_ADDR_RESOLVED &&
	     (id->state != CM_ADDR_BOUND ||
	      cm_addr_any((struct sockaddr *)&id->src))))
		ret = cm_wrong_state_locked(id);
	*ps_p = id->ps;
	*qkey_p = id->qkey;
	*node_p = &id->cm->hca->node;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

void cm_mc_queue(struct emu_cm_id *id, struct emu_cm_event *ev)
{
	pthread_mutex_lock(&id->cm->lock);
	cm_queue_locked(id, ev);
	pthread_mutex_unlock(&id->cm->lock);
}

void cm_mc_purge(struct emu_cm_id *id, uint64_t cookie)
{
	struct emu_cm_chan *chan;
	struct cm_ev_node **pp, *n;

	pthread_mutex_lock(&id->cm->lock);
	chan = id->chan;
	for (pp = &chan->head; (n = *pp);) {
		if (n->ev.id != id || n->ev.mc_cookie != cookie) {
			pp = &n->next;
			continue;
		}
		/* its count on the descriptor stays: a read that finds no
		 * event behind it reads on (emu_cm_get_event) */
		*pp = n->next;
		free(n);
	}
	chan->tail = &chan->head;
	for (n = chan->head; n; n = n->next)
		chan->tail = &n->next;
	pthread_mutex_unlock(&id->cm->lock);
}

/* ---- listen, connect, accept ---- */

int emu_cm_listen(struct emu_cm_id *id, int backlog)
{
	struct sockaddr_in any;
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state == CM_IDLE) {
		/* Listening unbound: any IPv4 address, an ephemeral port
		 * (the kernel's rdma_listen binds the same way). */
		memset(&any, 0, sizeof(any));
		any.sin_family = AF_INET;
		ret = cm_bind_locked(id, (struct sockaddr *)&any);
	}
	if (!ret && id->state == CM_LISTEN) {
		id->backlog = backlog > 0 && backlog < CM_BACKLOG_MAX
				      ? backlog
				      : CM_BACKLOG_MAX;
		goto out;
	}
	if (!ret && id->state != CM_ADDR_BOUND)
		ret = cm_wrong_state_locked(id);
	if (!ret)
		ret = -node_cm_listen(&id->cm->hca->node, id->port_idx);
	if (!ret) {
		id->state = CM_LISTEN;
		id->backlog = backlog > 0 && backlog < CM_BACKLOG_MAX
				      ? backlog
				      : CM_BACKLOG_MAX;
	}
out:
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

/* The IP CM header (IBA A11.6) at the start of a request's private
 * data: the addresses of both ends and the source port. */
static void cm_ip_hdr_put(const struct emu_cm_id *id, uint8_t *p)
{
	uint8_t a[16];
	bool v4;

	cm_put8(p, CM_IP_HDR_VERSION, 0);
	cm_addr16((const struct sockaddr *)&id->src, a, &v4);
	cm_put8(p, CM_IP_HDR_IPV, (uint8_t)((v4 ? 4 : 6) << 4));
	cm_put16(p, CM_IP_HDR_SPORT, cm_port_of(&id->src));
	if (v4) {
		memcpy(p + CM_IP_HDR_SIP + 12, a + 12, 4);
		cm_addr16((const struct sockaddr *)&id->dst, a, &v4);
		memcpy(p + CM_IP_HDR_DIP + 12, a + 12, 4);
	} else {
		memcpy(p + CM_IP_HDR_SIP, a, 16);
		cm_addr16((const struct sockaddr *)&id->dst, a, &v4);
		memcpy(p + CM_IP_HDR_DIP, a, 16);
	}
}

/* Read the IP CM header into src (the peer's) and dst (ours); false
 * if it is not one (IBA A11.6: version 0, IP version 4 or 6). */
static bool cm_ip_hdr_get(const uint8_t *p, struct sockaddr_storage *src,
			  struct sockaddr_storage *dst, uint16_t dport)
{
	unsigned int ipv = cm_get8(p, CM_IP_HDR_IPV) >> 4;
	struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)src;
	struct sockaddr_in *d4 = (struct sockaddr_in *)(void *)dst;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)src;
	struct sockaddr_in6 *d6 = (struct sockaddr_in6 *)(void *)dst;

	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (cm_get8(p, CM_IP_HDR_VERSION) != 0)
		return false;
	if (ipv == 4) {
		s4->sin_family = d4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, p + CM_IP_HDR_SIP + 12, 4);
		memcpy(&d4->sin_addr, p + CM_IP_HDR_DIP + 12, 4);
		s4->sin_port = htons(cm_get16(p, CM_IP_HDR_SPORT));
		d4->sin_port = htons(dport);
		return true;
	}
	if (ipv == 6) {
		s6->sin6_family = d6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, p + CM_IP_HDR_SIP, 16);
		memcpy(&d6->sin6_addr, p + CM_IP_HDR_DIP, 16);
		s6->sin6_port = htons(cm_get16(p, CM_IP_HDR_SPORT));
		d6->sin6_port = htons(dport);
		return true;
	}
	return false;
}

/* Whether the peer process in slot holding token lives: on this node,
 * by its lock in the node file; on another, by its connection being up
 * (what can be known across nodes). */
static bool cm_peer_alive(struct emu_cm *cm, int32_t slot, uint64_t token)
{
	struct engine *e = cm->hca->engine;
	struct tp_peer_info info;

	if (tp_slot_is_remote(slot))
		return e && tp_tcp_peer_info(e, slot, &info) && info.up &&
		       info.token == token;
	return node_proc_holds(&cm->hca->node, slot, token);
}

/*
 * The process that listens on the id's destination on another node
 * (its door answers, tp_tcp_resolve_cm), reached over TCP: 0 with its
 * slot and token, or a positive errno (ECONNREFUSED: nobody listens
 * there).  Called with cm.lock held; it is dropped while the door is
 * asked (which blocks, and the engine thread takes cm.lock to deliver
 * to us) and the id marked connecting meanwhile.  The caller checks
 * the id's state again.
 */
static int cm_resolve_remote_locked(struct emu_cm_id *id, int32_t *slot_p,
				    uint64_t *token_p)
{
	struct emu_cm *cm = id->cm;
	struct engine *e = cm->hca->engine;
	struct sockaddr_storage node_addr = id->node_addr, a;
	uint16_t ps = id->ps, dport = cm_port_of(&id->dst), lid = 0;
	uint8_t a16[16], gid[16];
	int32_t slot = -1;
	bool v4;
	int err;

	cm_addr16((struct sockaddr *)&id->dst, a16, &v4);
	id->connecting = true;
	pthread_mutex_unlock(&cm->lock);
	err = e ? tp_tcp_resolve_cm(e, &node_addr, ps, a16, v4, dport, &slot)
		: ENETDOWN;
	if (!err && !cm_remote_peer(cm, slot, &lid, gid, &a, token_p))
		err = EHOSTUNREACH;
	pthread_mutex_lock(&cm->lock);
	id->connecting = false;
	pthread_cond_broadcast(&cm->connected);
	if (err == ENOENT) /* the listener's process went meanwhile */
		err = ECONNREFUSED;
	if (err)
		return err;
	/* the node's own LID, as it answered */
	id->rlid = lid;
	*slot_p = slot;
	return 0;
}

int emu_cm_connect(struct emu_cm_id *id, const struct emu_cm_conn *param)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad), a16[16];
	bool v4, ud = id->qp_type == IBV_QPT_UD;
	uint16_t dport;
	int32_t slot;
	uint64_t token;
	int ret = 0, err;

	if (param->private_data_len >
	    (ud ? CM_SIDR_REQ_USER_PRIVATE : CM_REQ_USER_PRIVATE))
		return EINVAL;
	pthread_mutex_lock(&cm->lock);
	if (id->state != CM_ROUTE_RESOLVED || id->connecting) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	cm_addr16((struct sockaddr *)&id->dst, a16, &v4);
	dport = cm_port_of(&id->dst);
	if (id->remote) {
		err = cm_resolve_remote_locked(id, &slot, &token);
		if (id->state != CM_ROUTE_RESOLVED) {
			ret = EINVAL;
			goto out;
		}
	} else {
		err = node_cm_lookup(&cm->hca->node, id->ps, a16, v4, dport,
				     &slot, &token) ? ECONNREFUSED : 0;
	}
	id->tid = cm->next_tid++;
	id->qpn = param->qp_num & BTH_QPN_MASK;
	if (err == ECONNREFUSED) {
		/* Nobody listens: the remote CM answers REJ "invalid
		 * service ID" (IBA 12.6.7.2), SIDR_REP "service ID not
		 * supported" (IBA 12.11.2) to a UD request. */
		id->state = CM_FAILED;
		cm_event_locked(id, ud ? EMU_CM_UNREACHABLE : EMU_CM_REJECTED,
				ud ? SIDR_STATUS_NO_SERVICE
				   : REJ_INVALID_SERVICE_ID);
		goto out;
	}
	if (err) {
		/* No node answers there: the request goes unanswered, as
		 * the kernel's CM reports it (IBA 12.4). */
		id->state = CM_FAILED;
		cm_event_locked(id, EMU_CM_UNREACHABLE, -(int)err);
		goto out;
	}
	id->peer_slot = slot;
	id->peer_token = token;
	id->live_check = cm_now() + CM_LIVENESS_MS * 1000000ull;
	if (ud) {
		cm_mad_init(id, mad, CM_ATTR_SIDR_REQ);
		cm_put32(d, SIDR_REQ_REQUEST_ID, id->local_id);
		cm_put16(d, SIDR_REQ_PKEY, IBEMU_DEFAULT_PKEY);
		cm_put64(d, SIDR_REQ_SERVICE_ID,
			 CM_IP_SERVICE_ID(id->ps, dport));
		cm_ip_hdr_put(id, d + SIDR_REQ_PRIVATE);
		memcpy(d + SIDR_REQ_PRIVATE + CM_IP_HDR_LEN,
		       param->private_data, param->private_data_len);
		id->state = CM_SIDR_REQ_SENT;
		cm_send_keep_locked(id, mad, true);
		goto out;
	}
	id->psn = cm_random() & BTH_PSN_MASK;
	id->resp_res = param->responder_resources;
	id->init_depth = param->initiator_depth;
	id->retry_count = param->retry_count & 7;
	id->rnr_retry = param->rnr_retry_count & 7;
	cm_mad_init(id, mad, CM_ATTR_REQ);
	cm_put32(d, REQ_LOCAL_COMM_ID, id->local_id);
	cm_put64(d, REQ_SERVICE_ID, CM_IP_SERVICE_ID(id->ps, dport));
	cm_put64(d, REQ_LOCAL_CA_GUID, cm->hca->node.seg->node_guid);
	cm_put32(d, REQ_LOCAL_QPN, id->qpn << 8 | id->resp_res);
	cm_put32(d, REQ_LOCAL_EECN, id->init_depth);
	/* Transport Service Type 0: RC, 1: UC (IBA 12.6.5), 3: XRC
	 * (IBA A14.6.1) */
	cm_put32(d, REQ_REMOTE_EECN,
		 (uint32_t)CM_RESPONSE_TIMEOUT << 3 |
			 (uint32_t)cm_transport_type(id->qp_type) << 1 |
			 (param->flow_control ? 1 : 0));
	cm_put32(d, REQ_START_PSN,
		 id->psn << 8 | (uint32_t)CM_RESPONSE_TIMEOUT << 3 |
			 id->retry_count);
	cm_put16(d, REQ_PKEY, IBEMU_DEFAULT_PKEY);
	cm_put8(d, REQ_MTU_RNR,
		(uint8_t)(IBEMU_MAX_MTU << 4 | id->rnr_retry));
	cm_put8(d, REQ_MAX_RETRIES,
		(uint8_t)(CM_MAX_RETRIES << 4 | (param->srq ? 8 : 0)));
	/* The primary path (IBA 12.6.5): on one node, the port's own LID
	 * and GID 0 at both ends, within the subnet; to another node, the
	 * two ports' LIDs and the GIDs of the two addresses, with a GRH
	 * (SubnetLocal 0), which reaches the node across subnets too. */
	cm_put16(d, REQ_PRI_LOCAL_LID, cm->hca->node.seg->lid);
	if (id->remote) {
		cm_put16(d, REQ_PRI_REMOTE_LID, id->rlid);
		memcpy(d + REQ_PRI_LOCAL_GID, id->lgid, 16);
		memcpy(d + REQ_PRI_REMOTE_GID, id->rgid, 16);
		cm_put8(d, REQ_PRI_HOP_LIMIT, CM_HOP_LIMIT);
	} else {
		cm_put16(d, REQ_PRI_REMOTE_LID, cm->hca->node.seg->lid);
		cm_put64(d, REQ_PRI_LOCAL_GID, cm->hca->node.seg->gid_prefix);
		cm_put64(d, REQ_PRI_LOCAL_GID + 8,
			 cm->hca->node.seg->port_guid);
		cm_put64(d, REQ_PRI_REMOTE_GID, cm->hca->node.seg->gid_prefix);
		cm_put64(d, REQ_PRI_REMOTE_GID + 8,
			 cm->hca->node.seg->port_guid);
		cm_put8(d, REQ_PRI_SL, REQ_SUBNET_LOCAL);
	}
	cm_put8(d, REQ_PRI_ACK_TIMEOUT, CM_LOCAL_ACK_TIMEOUT << 3);
	cm_ip_hdr_put(id, d + REQ_PRIVATE);
	memcpy(d + REQ_PRIVATE + CM_IP_HDR_LEN, param->private_data,
	       param->private_data_len);
	id->state = CM_REQ_SENT;
	cm_send_keep_locked(id, mad, true);
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_accept(struct emu_cm_id *id, const struct emu_cm_conn *param)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_SIDR_REQ_RCVD) {
		if (param->private_data_len > SIDR_REP_PRIVATE_LEN) {
			ret = EINVAL;
			goto out;
		}
		id->qpn = param->qp_num & BTH_QPN_MASK;
		if (param->qkey)
			id->qkey = param->qkey;
		cm_unqueue_locked(id);
		cm_send_sidr_rep_locked(id, SIDR_STATUS_OK,
					param->private_data,
					param->private_data_len);
		id->state = CM_ESTABLISHED;
		goto out;
	}
	if (id->state != CM_REQ_RCVD ||
	    param->private_data_len > REP_PRIVATE_LEN) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	if (!cm_peer_alive(cm, id->peer_slot, id->peer_token)) {
		ret = ECONNRESET;
		goto out;
	}
	cm_unqueue_locked(id);
	id->qpn = param->qp_num & BTH_QPN_MASK;
	id->resp_res = param->responder_resources;
	id->init_depth = param->initiator_depth;
	cm_mad_init(id, mad, CM_ATTR_REP);
	cm_put32(d, REP_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, REP_REMOTE_COMM_ID, id->remote_id);
	cm_put32(d, REP_LOCAL_QPN, id->qpn << 8);
	cm_put32(d, REP_START_PSN, id->psn << 8);
	cm_put8(d, REP_RESP_RES, id->resp_res);
	cm_put8(d, REP_INIT_DEPTH, id->init_depth);
	cm_put8(d, REP_FLAGS,
		(uint8_t)(CM_LOCAL_ACK_TIMEOUT << 3 |
			  (param->flow_control ? 1 : 0)));
	cm_put8(d, REP_RNR_SRQ,
		(uint8_t)((param->rnr_retry_count & 7) << 5 |
			  (param->srq ? 0x10 : 0)));
	cm_put64(d, REP_LOCAL_CA_GUID, cm->hca->node.seg->node_guid);
	memcpy(d + REP_PRIVATE, param->private_data, param->private_data_len);
	id->state = CM_REP_SENT;
	cm_send_keep_locked(id, mad, true);
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_reject(struct emu_cm_id *id, const void *pd, uint8_t len)
{
	struct emu_cm *cm = id->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	switch (id->state) {
	case CM_SIDR_REQ_RCVD:
		if (len > SIDR_REP_PRIVATE_LEN) {
			ret = EINVAL;
			break;
		}
		cm_unqueue_locked(id);
		cm_send_sidr_rep_locked(id, SIDR_STATUS_REJECTED, pd, len);
		id->state = CM_FAILED;
		break;
	case CM_REQ_RCVD:
	case CM_REP_RCVD:
		if (len > REJ_PRIVATE_LEN) {
			ret = EINVAL;
			break;
		}
		cm_unqueue_locked(id);
		cm_send_rej_locked(id,
				   id->state == CM_REQ_RCVD ? REJ_MSG_REQ
							    : REJ_MSG_REP,
				   REJ_CONSUMER, pd, len);
		id->state = CM_FAILED;
		id->deadline = 0;
		break;
	default:
		ret = cm_wrong_state_locked(id);
	}
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_establish(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (id->state != CM_REP_RCVD) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	cm_mad_init(id, mad, CM_ATTR_RTU);
	cm_put32(d, RTU_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, RTU_REMOTE_COMM_ID, id->remote_id);
	/* kept to answer a repeated REP (IBA 12.9.5) */
	cm_send_keep_locked(id, mad, false);
	id->state = CM_ESTABLISHED;
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_notify(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;

	pthread_mutex_lock(&cm->lock);
	/* IBA 12.9.5: data on the QP before the RTU stands for it */
	if (id->state == CM_REP_SENT) {
		id->deadline = 0;
		id->has_last = false;
		id->state = CM_ESTABLISHED;
		cm_event_locked(id, EMU_CM_ESTABLISHED, 0);
	}
	pthread_mutex_unlock(&cm->lock);
	return 0;
}

int emu_cm_disconnect(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_REP_RCVD:
	case CM_REP_SENT:
		if (id->qp_type == IBV_QPT_UD) {
			id->state = CM_DISCONNECTED;
			break;
		}
		cm_send_dreq_locked(id, true);
		id->state = CM_DREQ_SENT;
		break;
	case CM_DREQ_SENT:
	case CM_DISCONNECTED:
		break;
	default:
		ret = cm_wrong_state_locked(id);
	}
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_init_qp_attr(struct emu_cm_id *id, struct ibv_qp_attr *attr,
			int *mask)
{
	struct emu_cm *cm = id->cm;
	enum ibv_qp_state want = attr->qp_state;
	bool connected;
	int ret = 0;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = want;
	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_CLOSED) {
		ret = ENOENT;
		goto out;
	}
	connected = id->state == CM_REQ_RCVD || id->state == CM_REP_SENT ||
		    id->state == CM_REP_RCVD || id->state == CM_ESTABLISHED;
	if (id->qp_type == IBV_QPT_UD) {
		switch (want) {
		case IBV_QPS_INIT:
			attr->pkey_index = 0;
			attr->port_num = 1;
			attr->qkey = id->qkey;
			*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_QKEY;
			break;
		case IBV_QPS_RTR:
			*mask = IBV_QP_STATE;
			break;
		case IBV_QPS_RTS:
			attr->sq_psn = id->psn;
			*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
			break;
		default:
			ret = EINVAL;
		}
		goto out;
	}
	switch (want) {
	case IBV_QPS_INIT:
		attr->pkey_index = 0;
		attr->port_num = 1;
		/* Before a connection no remote access; with one, what its
		 * responder resources allow (the kernel's ib_cm). */
		attr->qp_access_flags = 0;
		if (connected) {
			attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (id->resp_res)
				attr->qp_access_flags |=
					IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC;
		}
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		if (!connected) {
			ret = EINVAL;
			break;
		}
		attr->path_mtu = IBEMU_MAX_MTU;
		attr->dest_qp_num = id->remote_qpn;
		attr->rq_psn = id->remote_psn;
		cm_ah_locked(id, &attr->ah_attr);
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		/* RDMA READ and atomic responders: RC and the XRC target;
		 * not UC nor the XRC initiator (IBA 11.2.5.2, A14.4) */
		if (id->qp_type == IBV_QPT_RC ||
		    id->qp_type == IBV_QPT_XRC_RECV) {
			attr->max_dest_rd_atomic = id->resp_res;
			attr->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		if (!connected) {
			ret = EINVAL;
			break;
		}
		attr->sq_psn = id->psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		/* Acknowledged transports have a timeout; their requesters,
		 * RC and the XRC initiator, retries and READ depth
		 * (IBA 11.2.5.2, A14.4) */
		if (id->qp_type != IBV_QPT_UC) {
			attr->timeout = CM_LOCAL_ACK_TIMEOUT;
			*mask |= IBV_QP_TIMEOUT;
		}
		if (id->qp_type == IBV_QPT_RC ||
		    id->qp_type == IBV_QPT_XRC_SEND) {
			attr->retry_cnt = id->retry_count;
			attr->rnr_retry = id->rnr_retry;
			attr->max_rd_atomic = id->init_depth;
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	default:
		ret = EINVAL;
	}
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

/* ---- receiving ---- */

static struct emu_cm_id *cm_find_locked(struct emu_cm *cm, uint32_t local_id,
					int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next)
		if (id->local_id == local_id && id->peer_slot == slot)
			return id;
	return NULL;
}

static struct emu_cm_id *cm_find_remote_locked(struct emu_cm *cm,
					       uint32_t remote_id, int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next)
		if (id->peer_slot == slot && id->remote_id == remote_id &&
		    id->state != CM_LISTEN)
			return id;
	return NULL;
}

/* Our listener for (ps, port) that takes address a (exact first). */
static struct emu_cm_id *cm_listener_locked(struct emu_cm *cm, uint16_t ps,
					    uint16_t port,
					    const struct sockaddr *a)
{
	struct emu_cm_id *id, *wild = NULL;
	uint8_t want[16], have[16];
	bool v4, v4b;

	cm_addr16(a, want, &v4);
	for (id = cm->ids; id; id = id->next) {
		if (id->state != CM_LISTEN || id->ps != ps ||
		    cm_port_of(&id->src) != port)
			continue;
		if (cm_addr_any((struct sockaddr *)&id->src)) {
			if (id->src.ss_family == AF_INET && !v4)
				continue;
			if (id->src.ss_family == AF_INET6 && v4 && id->afonly)
				continue;
			wild = id;
			continue;
		}
		cm_addr16((struct sockaddr *)&id->src, have, &v4b);
		if (!memcmp(want, have, 16))
			return id;
	}
	return wild;
}

/* A request (REQ or SIDR_REQ) for a listener: a new id with the
 * connection's addresses, reported as CONNECT_REQUEST. */
static struct emu_cm_id *cm_new_conn_locked(struct emu_cm *cm,
					    struct emu_cm_id *l, int32_t slot,
					    const struct sockaddr_storage *peer,
					    const struct sockaddr_storage *self)
{
	struct emu_cm_id *id;
	struct node_proc_id pid;

	id = cm_id_alloc_locked(cm, l->chan, 0, l->ps, l->qp_type);
	if (!id)
		return NULL;
	id->src = *self;
	id->dst = *peer;
	id->peer_slot = slot;
	if (tp_slot_is_remote(slot)) {
		/* the path to it as its connection tells; a REQ's primary
		 * path replaces it (cm_recv_req_locked) */
		id->remote = cm_remote_peer(cm, slot, &id->rlid, id->rgid,
					    &id->node_addr, &id->peer_token);
		cm_own_gid(cm, (const struct sockaddr *)self, id->lgid);
	} else {
		id->peer_token = node_proc_id(&cm->hca->node, slot, &pid)
					 ? 0
					 : pid.token;
	}
	id->live_check = cm_now() + CM_LIVENESS_MS * 1000000ull;
	id->listener = l;
	cm_wake(cm); /* to watch the peer */
	l->queued++;
	return id;
}

/*
 * The path to a remote active side from its REQ's primary path
 * (IBA 12.6.5): its Local LID and GID are the peer's, its Remote GID
 * ours.  What does not name a node the fabric reaches is not taken
 * (the connection's own address stays).
 */
static void cm_req_path_locked(struct emu_cm_id *id, const uint8_t *d)
{
	struct emu_cm *cm = id->cm;
	struct sockaddr_storage a;
	uint16_t lid = cm_get16(d, REQ_PRI_LOCAL_LID);
	const uint8_t *rgid = d + REQ_PRI_LOCAL_GID;
	const uint8_t *lgid = d + REQ_PRI_REMOTE_GID;

	/* IBA 4.1.3: a unicast LID */
	if (lid && lid < 0xc000 &&
	    fabric_locate(&cm->hca->node, lid,
			  (cm_get8(d, REQ_PRI_SL) & REQ_SUBNET_LOCAL) ? NULL
								     : rgid,
			  &a) == FABRIC_THERE) {
		id->rlid = lid;
		if (!(cm_get8(d, REQ_PRI_SL) & REQ_SUBNET_LOCAL))
			memcpy(id->rgid, rgid, 16);
	}
	if (fabric_gid_is_local(&cm->hca->node, lgid))
		memcpy(id->lgid, lgid, 16);
}

static void cm_recv_req_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint64_t sid = cm_get64(d, REQ_SERVICE_ID);
	uint32_t rid = cm_get32(d, REQ_LOCAL_COMM_ID);
	uint64_t tid = cm_get64(mad, MAD_TID);
	struct sockaddr_storage peer, self;
	struct emu_cm_id *l, *id;
	struct emu_cm_event ev;
	uint32_t v;

	id = cm_find_remote_locked(cm, rid, slot);
	if (id) {
		/* A repeated REQ (IBA 12.9.5): the REP again if sent. */
		if (id->state == CM_REP_SENT && id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	if ((sid & 0xffffffffff000000ull) != 0x0000000001000000ull ||
	    !cm_ip_hdr_get(d + REQ_PRIVATE, &peer, &self, (uint16_t)sid)) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	l = cm_listener_locked(cm, (uint16_t)(sid >> 16), (uint16_t)sid,
			       (struct sockaddr *)&self);
	if (!l || l->qp_type == IBV_QPT_UD) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (l->queued >= l->backlog) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_NO_RESOURCES, NULL, 0);
		return;
	}
	id = cm_new_conn_locked(cm, l, slot, &peer, &self);
	if (!id) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_NO_RESOURCES, NULL, 0);
		return;
	}
	id->tid = tid;
	id->remote_id = rid;
	if (id->remote)
		cm_req_path_locked(id, d);
	/* drawn now: the QP reaches RTS before the REP carries it */
	id->psn = cm_random() & BTH_PSN_MASK;
	v = cm_get32(d, REQ_LOCAL_QPN);
	id->remote_qpn = v >> 8;
	memset(&ev, 0, sizeof(ev));
	/* the peer's resources become our limits (IBA 12.7.29-30) */
	ev.param.initiator_depth = (uint8_t)v;
	ev.param.responder_resources = (uint8_t)cm_get32(d, REQ_LOCAL_EECN);
	id->resp_res = ev.param.responder_resources;
	id->init_depth = ev.param.initiator_depth;
	v = cm_get32(d, REQ_START_PSN);
	id->remote_psn = v >> 8;
	id->retry_count = v & 7;
	id->rnr_retry = cm_get8(d, REQ_MTU_RNR) & 7;
	ev.param.flow_control = cm_get32(d, REQ_REMOTE_EECN) & 1;
	ev.param.retry_count = id->retry_count;
	ev.param.rnr_retry_count = id->rnr_retry;
	ev.param.srq = (cm_get8(d, REQ_MAX_RETRIES) & 8) != 0;
	ev.param.qp_num = id->remote_qpn;
	ev.param.private_data_len = CM_REQ_USER_PRIVATE;
	memcpy(ev.param.private_data, d + REQ_PRIVATE + CM_IP_HDR_LEN,
	       CM_REQ_USER_PRIVATE);
	ev.new_id = id;
	id->state = CM_REQ_RCVD;
	ev.event = EMU_CM_CONNECT_REQUEST;
	cm_queue_locked(l, &ev);
}

static void cm_recv_sidr_req_locked(struct emu_cm *cm, const uint8_t *mad,
				    int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint64_t sid = cm_get64(d, SIDR_REQ_SERVICE_ID);
	uint32_t rid = cm_get32(d, SIDR_REQ_REQUEST_ID);
	struct sockaddr_storage peer, self;
	struct emu_cm_id *l, *id;
	struct emu_cm_event ev;
	struct emu_cm_id tmp;

	id = cm_find_remote_locked(cm, rid, slot);
	if (id) {
		if (id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	l = NULL;
	if ((sid & 0xffffffffff000000ull) == 0x0000000001000000ull &&
	    cm_ip_hdr_get(d + SIDR_REQ_PRIVATE, &peer, &self, (uint16_t)sid))
		l = cm_listener_locked(cm, (uint16_t)(sid >> 16),
				       (uint16_t)sid,
				       (struct sockaddr *)&self);
	if (!l || l->qp_type != IBV_QPT_UD || l->queued >= l->backlog) {
		/* IBA 12.11.2: the service ID is not served here */
		memset(&tmp, 0, sizeof(tmp));
		tmp.cm = cm;
		tmp.tid = cm_get64(mad, MAD_TID);
		tmp.remote_id = rid;
		tmp.peer_slot = slot;
		tmp.ps = (uint16_t)(sid >> 16);
		{
			uint8_t out[CM_MAD_LEN], *o = cm_data(out);

			cm_mad_init(&tmp, out, CM_ATTR_SIDR_REP);
			cm_put32(o, SIDR_REP_REQUEST_ID, rid);
			cm_put8(o, SIDR_REP_STATUS,
				l ? SIDR_STATUS_REJECTED
				  : SIDR_STATUS_NO_SERVICE);
			cm_put64(o, SIDR_REP_SERVICE_ID, sid);
			cm_send_locked(cm, slot, out);
		}
		return;
	}
	id = cm_new_conn_locked(cm, l, slot, &peer, &self);
	if (!id)
		return;
	id->tid = cm_get64(mad, MAD_TID);
	id->remote_id = rid;
	id->state = CM_SIDR_REQ_RCVD;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_CONNECT_REQUEST;
	ev.new_id = id;
	ev.param.private_data_len = CM_SIDR_REQ_USER_PRIVATE;
	memcpy(ev.param.private_data, d + SIDR_REQ_PRIVATE + CM_IP_HDR_LEN,
	       CM_SIDR_REQ_USER_PRIVATE);
	cm_queue_locked(l, &ev);
}


static void cm_recv_sidr_rep_locked(struct emu_cm *cm, const uint8_t *mad,
				    int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;
	uint8_t status;

	id = cm_find_locked(cm, cm_get32(d, SIDR_REP_REQUEST_ID), slot);
	if (!id || id->state != CM_SIDR_REQ_SENT)
		return;
	id->deadline = 0;
	status = cm_get8(d, SIDR_REP_STATUS);
	memset(&ev, 0, sizeof(ev));
	ev.param.private_data_len = SIDR_REP_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + SIDR_REP_PRIVATE,
	       SIDR_REP_PRIVATE_LEN);
	if (status != SIDR_STATUS_OK) {
		id->state = CM_FAILED;
		ev.event = EMU_CM_UNREACHABLE;
		ev.status = status;
		cm_queue_locked(id, &ev);
		return;
	}
	id->state = CM_ESTABLISHED;
	id->remote_qpn = cm_get32(d, SIDR_REP_QPN) >> 8;
	id->remote_qkey = cm_get32(d, SIDR_REP_QKEY);
	ev.event = EMU_CM_ESTABLISHED;
	ev.param.qp_num = id->remote_qpn;
	ev.param.qkey = id->remote_qkey;
	cm_ah_locked(id, &ev.param.ah_attr);
	cm_queue_locked(id, &ev);
}

static void cm_recv_rep_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint32_t rid = cm_get32(d, REP_LOCAL_COMM_ID);
	struct emu_cm_id *id;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, REP_REMOTE_COMM_ID), slot);
	if (!id) {
		cm_send_rej_to(cm, slot, cm_get64(mad, MAD_TID), 0, rid,
			       REJ_MSG_REP, REJ_INVALID_COMM_ID, NULL, 0);
		return;
	}
	if (id->state == CM_ESTABLISHED && id->remote_id == rid) {
		/* A repeated REP: our RTU was lost (IBA 12.9.5). */
		if (id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	if (id->state != CM_REQ_SENT)
		return;
	id->deadline = 0;
	id->has_last = false;
	id->remote_id = rid;
	id->remote_qpn = cm_get32(d, REP_LOCAL_QPN) >> 8;
	id->remote_psn = cm_get32(d, REP_START_PSN) >> 8;
	memset(&ev, 0, sizeof(ev));
	/* IBA 12.7.29-30: the responder's resources are our initiator
	 * depth and its initiator depth our responder resources (as the
	 * kernel's ib_cm takes them) */
	ev.param.initiator_depth = cm_get8(d, REP_RESP_RES);
	ev.param.responder_resources = cm_get8(d, REP_INIT_DEPTH);
	id->init_depth = ev.param.initiator_depth;
	id->resp_res = ev.param.responder_resources;
	id->rnr_retry = cm_get8(d, REP_RNR_SRQ) >> 5;
	ev.param.flow_control = cm_get8(d, REP_FLAGS) & 1;
	ev.param.rnr_retry_count = id->rnr_retry;
	ev.param.srq = (cm_get8(d, REP_RNR_SRQ) & 0x10) != 0;
	ev.param.qp_num = id->remote_qpn;
	ev.param.private_data_len = REP_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + REP_PRIVATE, REP_PRIVATE_LEN);
	id->state = CM_REP_RCVD;
	ev.event = EMU_CM_CONNECT_RESPONSE;
	cm_queue_locked(id, &ev);
}

static void cm_recv_rtu_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, RTU_REMOTE_COMM_ID), slot);
	if (!id || id->state != CM_REP_SENT ||
	    id->remote_id != cm_get32(d, RTU_LOCAL_COMM_ID))
		return;
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_ESTABLISHED;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_ESTABLISHED;
	ev.param.private_data_len = RTU_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + RTU_PRIVATE, RTU_PRIVATE_LEN);
	ev.param.initiator_depth = id->init_depth;
	ev.param.responder_resources = id->resp_res;
	ev.param.qp_num = id->remote_qpn;
	cm_queue_locked(id, &ev);
}

static void cm_recv_rej_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;
	uint16_t reason = cm_get16(d, REJ_REASON);

	id = cm_find_locked(cm, cm_get32(d, REJ_REMOTE_COMM_ID), slot);
	if (!id)
		return;
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_REQ_RCVD:
		break;
	case CM_ESTABLISHED:
		/* IBA 12.6.7: a REJ of an established connection is
		 * taken as its end (stale connection) */
		cm_disconnected_locked(id, NULL);
		return;
	default:
		return;
	}
	cm_unqueue_locked(id);
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_FAILED;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_REJECTED;
	ev.status = reason;
	ev.param.private_data_len = REJ_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + REJ_PRIVATE, REJ_PRIVATE_LEN);
	cm_queue_locked(id, &ev);
}

static void cm_recv_dreq_locked(struct emu_cm *cm, const uint8_t *mad,
				int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint8_t out[CM_MAD_LEN], *o = cm_data(out);
	struct emu_cm_id *id, tmp;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, DREQ_REMOTE_COMM_ID), slot);
	/* IBA 12.9.6: a DREQ is answered with DREP, also when the
	 * connection is already gone (the first DREP was lost). */
	memset(&tmp, 0, sizeof(tmp));
	tmp.tid = cm_get64(mad, MAD_TID);
	cm_mad_init(&tmp, out, CM_ATTR_DREP);
	cm_put32(o, DREP_LOCAL_COMM_ID, cm_get32(d, DREQ_REMOTE_COMM_ID));
	cm_put32(o, DREP_REMOTE_COMM_ID, cm_get32(d, DREQ_LOCAL_COMM_ID));
	cm_send_locked(cm, slot, out);
	if (!id || id->remote_id != cm_get32(d, DREQ_LOCAL_COMM_ID))
		return;
	switch (id->state) {
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		break;
	default:
		return;
	}
	memset(&ev, 0, sizeof(ev));
	ev.param.private_data_len = DREQ_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + DREQ_PRIVATE, DREQ_PRIVATE_LEN);
	cm_disconnected_locked(id, &ev);
}

static void cm_recv_drep_locked(struct emu_cm *cm, const uint8_t *mad,
				int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;

	id = cm_find_locked(cm, cm_get32(d, DREP_REMOTE_COMM_ID), slot);
	if (!id || id->state != CM_DREQ_SENT)
		return;
	cm_disconnected_locked(id, NULL);
}

void cm_recv_locked(struct engine *e, const struct pkt *p)
{
	struct emu_cm *cm = atomic_load_explicit(&e->hca->cm,
						 memory_order_acquire);
	uint8_t mad[CM_MAD_LEN];
	int32_t slot = p->hdr->src_proc;

	/* From a process of this node, or of another through a
	 * connection of ours (a remote slot the transport knows). */
	if (!cm || p->opcode != (IB_OPCODE_UD | IB_OP_SEND_ONLY) ||
	    p->paylen < CM_MAD_LEN || pkt_deth_qkey(p) != CM_QP1_QKEY ||
	    slot < 0 || (tp_slot_is_remote(slot) && !engine_peer(e, slot)))
		return;
	/* The one copy out of the sender's slot (shared memory). */
	memcpy(mad, p->payload, CM_MAD_LEN);
	if (mad[MAD_BASE_VERSION] != 1 || mad[MAD_MGMT_CLASS] != MAD_CLASS_CM ||
	    mad[MAD_CLASS_VERSION] != 2 || mad[MAD_METHOD] != MAD_METHOD_SEND)
		return;
	pthread_mutex_lock(&cm->lock);
	switch (cm_get16(mad, MAD_ATTR_ID)) {
	case CM_ATTR_REQ:
		cm_recv_req_locked(cm, mad, slot);
		break;
	case CM_ATTR_REP:
		cm_recv_rep_locked(cm, mad, slot);
		break;
	case CM_ATTR_RTU:
		cm_recv_rtu_locked(cm, mad, slot);
		break;
	case CM_ATTR_REJ:
		cm_recv_rej_locked(cm, mad, slot);
		break;
	case CM_ATTR_DREQ:
		cm_recv_dreq_locked(cm, mad, slot);
		break;
	case CM_ATTR_DREP:
		cm_recv_drep_locked(cm, mad, slot);
		break;
	case CM_ATTR_SIDR_REQ:
		cm_recv_sidr_req_locked(cm, mad, slot);
		break;
	case CM_ATTR_SIDR_REP:
		cm_recv_sidr_rep_locked(cm, mad, slot);
		break;
	default: /* MRA, LAP, APR: not sent by this CM */
		break;
	}
	pthread_mutex_unlock(&cm->lock);
}

/* ---- timers ---- */

/* id's peer is gone: the connection ends as the real CM ends it. */
static void cm_peer_gone_locked(struct emu_cm_id *id)
{
	id->deadline = 0;
	id->has_last = false;
	switch (id->state) {
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		if (id->qp_type == IBV_QPT_UD)
			return;
		cm_disconnected_locked(id, NULL);
		break;
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
		cm_unqueue_locked(id);
		id->state = CM_FAILED;
		cm_event_locked(id, EMU_CM_UNREACHABLE, -ETIMEDOUT);
		break;
	default:
		break;
	}
}

static void cm_timeout_locked(struct emu_cm_id *id, uint64_t now)
{
	id->deadline = 0;
	switch (id->state) {
	case CM_ADDR_QUERY:
		id->state = CM_ADDR_BOUND;
		cm_event_locked(id, EMU_CM_ADDR_ERROR, -ETIMEDOUT);
		return;
	case CM_DISCONNECTED:
		/* the time wait is over */
		if (id->qp_type != IBV_QPT_UD)
			cm_event_locked(id, EMU_CM_TIMEWAIT_EXIT, 0);
		return;
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_SIDR_REQ_SENT:
	case CM_DREQ_SENT:
		break;
	default:
		return;
	}
	if (id->has_last && id->retries < CM_MAX_RETRIES) {
		/* IBA 12.4: no answer within the timeout, send again */
		id->retries++;
		id->deadline = now + CM_RETRY_MS * 1000000ull;
		cm_send_locked(id->cm, id->peer_slot, id->last);
		return;
	}
	if (id->state == CM_DREQ_SENT) {
		/* IBA 12.9.6: the DREQ timed out; the connection is over */
		cm_disconnected_locked(id, NULL);
		return;
	}
	if (id->state == CM_REQ_SENT)
		cm_send_rej_locked(id, REJ_MSG_OTHER, REJ_TIMEOUT, NULL, 0);
	cm_unqueue_locked(id);
	id->state = CM_FAILED;
	cm_event_locked(id, EMU_CM_UNREACHABLE, -ETIMEDOUT);
}

static bool cm_has_peer(const struct emu_cm_id *id)
{
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
	case CM_SIDR_REQ_SENT:
		return id->qp_type != IBV_QPT_UD ||
		       id->state == CM_SIDR_REQ_SENT;
	default:
		return false;
	}
}

/* Look at ids whose peer is not watched by a descriptor, or whose
 * watched peer has exited; fire the timers due.  The earliest time the
 * thread must look again, 0: none.  Caller holds cm.lock. */
static uint64_t cm_run_timers_locked(struct emu_cm *cm, uint64_t now)
{
	struct emu_cm_id *id;
	uint64_t next = 0;
	bool watched;

	for (id = cm->ids; id; id = id->next) {
		watched = cm_has_peer(id) &&
			  cm_watch_peer(&cm->watch, &cm->hca->node,
					cm->hca->engine, id->peer_slot,
					id->peer_token);
		if (cm_has_peer(id) && (!watched || id->peer_exited) &&
		    now >= id->live_check) {
			id->live_check = now + CM_LIVENESS_MS * 1000000ull;
			/* A remote peer's connection ended (its watch
			 * fired): that process exited or is cut off, even
			 * before the network thread has seen it. */
			if ((id->peer_exited &&
			     tp_slot_is_remote(id->peer_slot)) ||
			    !cm_peer_alive(cm, id->peer_slot, id->peer_token))
				cm_peer_gone_locked(id);
		}
		id->peer_exited = false;
		if (id->deadline && now >= id->deadline)
			cm_timeout_locked(id, now);
		if (id->deadline && (!next || id->deadline < next))
			next = id->deadline;
		if (cm_has_peer(id) && !watched &&
		    (!next || id->live_check < next))
			next = id->live_check;
	}
	cm_watch_sweep(&cm->watch);
	return next;
}

/* The ids of a peer whose descriptor says it exited are looked at now. */
static void cm_peer_exited_locked(struct emu_cm *cm, int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next) {
		if (id->peer_slot == slot) {
			id->peer_exited = true;
			id->live_check = 0;
		}
	}
	cm_watch_drop(&cm->watch, slot);
}

static void *cm_thread(void *arg)
{
	struct emu_cm *cm = arg;
	struct pollfd *pfd = cm->pfd;
	int32_t *slots = cm->pfd_slot;
	uint64_t now, next, count;
	unsigned int i, n;
	int timeout, r;

	pthread_mutex_lock(&cm->lock);
	for (;;) {
		now = cm_now();
		next = cm_run_timers_locked(cm, now);
		n = cm_watch_fill(&cm->watch, pfd + 1, slots, CM_WATCH_MAX);
		pthread_mutex_unlock(&cm->lock);
		pfd[0].fd = cm->wake_fd;
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		if (!next)
			timeout = -1;
		else if (next <= now)
			timeout = 0;
		else /* rounded up: a timer is never early */
			timeout = (int)((next - now + 999999) / 1000000);
		r = poll(pfd, n + 1, timeout);
		if (r > 0 && (pfd[0].revents & POLLIN) &&
		    read(cm->wake_fd, &count, sizeof(count)) < 0) {
			/* EAGAIN: another read took it */
		}
		pthread_mutex_lock(&cm->lock);
		for (i = 0; r > 0 && i < n; i++)
			if (pfd[i + 1].revents)
				cm_peer_exited_locked(cm, slots[i]);
	}
	return NULL;
}

int emu_cm_open(struct emu_hca *hca)
{
	struct emu_cm *cm;
	int ret = 0;

	pthread_mutex_lock(&cm_open_lock);
	if (hca->cm)
		goto out;
	cm = calloc(1, sizeof(*cm));
	if (!cm) {
		ret = ENOMEM;
		goto out;
	}
	cm->hca = hca;
	cm->next_id = cm_random();
	cm->next_tid = (uint64_t)cm_random() << 32;
	pthread_mutex_init(&cm->lock, NULL);
	pthread_cond_init(&cm->connected, NULL);
	cm_watch_init(&cm->watch);
	cm->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (cm->wake_fd < 0) {
		ret = errno;
		free(cm);
		goto out;
	}
	ret = pthread_create(&cm->thread, NULL, cm_thread, cm);
	if (ret) {
		close(cm->wake_fd);
		free(cm);
		goto out;
	}
	pthread_detach(cm->thread);
	atomic_store_explicit(&hca->cm, cm, memory_order_release);
out:
	pthread_mutex_unlock(&cm_open_lock);
	return ret;
}
