// SPDX-License-Identifier: MIT
/*
 * The TCP transport: packets between processes of different nodes
 * (doc/design.md §3), one TCP connection per pair of processes,
 * multiplexing their QPs, opened when a destination is first resolved
 * (tp_tcp.h).
 *
 * Each frame (tp_frame.h) carries one packet exactly as the shared-memory
 * transport carries it.  Sending: the engine claims room and builds the
 * packet in the connection's stage, and pkt_send writes the frame to the
 * socket at once, from the sender's thread; what the socket does not
 * take waits in the connection's queue, bounded by TCP_TX_CAP, which the
 * process's network thread flushes when the socket takes more.  A full
 * queue refuses the claim: the requester is blocked as by a full inbox,
 * and a fast sender cannot grow memory without bound.  Receiving: the
 * network thread, blocked in epoll when there is nothing to do, reads
 * frames, checks them and writes each packet into this process's own
 * inbox as a producer of the node would; the engine never knows the
 * packet came by TCP.  A full inbox stops the reading of the connection
 * (TCP's window then stops the sender) until the engine makes room.
 *
 * A broken connection loses what was queued, as a broken link does: RC
 * retransmits and, the link staying down, completes with RETRY_EXC_ERR
 * (IBA 9.7.6.1.3); UD and UC lose the packets (IBA 9.8.3, 9.9).  A later
 * resolution (a new QP, a UD send) connects again.
 *
 * The door: one process of the node listens on the node's door port and
 * answers lookups (which process owns a QPN or a CM listener, and its
 * TCP port) from the node segment.  The first process to bind it holds
 * it; the others watch the holder's exit (a pidfd) and the first to see
 * it takes the door over.  A door port bound by a process of another
 * node in the same network namespace leaves this node unreachable from
 * other hosts; `ibemu status` says so.
 *
 * Lock rule: tcp.lock protects conns[], the route cache and the node's
 * net_peers entries of this process; a connection's tx_lock protects its
 * queue and stage, taken by pkt_claim and released by pkt_send (the
 * engine's producer calls come in pairs), or by the network thread to
 * flush; the receiving side of every connection is the network
 * thread's alone.  No lock of this file is held while taking an engine
 * or QP lock.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cma.h"
#include "cpu.h"
#include "engine.h"
#include "fabric.h"
#include "log.h"
#include "tp_frame.h"
#include "tp_tcp.h"

#define TCP_MAX_CONNS 1024 /* remote processes one process talks to */
#define TCP_TX_CAP (1u << 20) /* bytes queued per connection */
#define TCP_RX_CAP (256u << 10)
#define TCP_RESOLVE_MS 2000
/* How long a failed resolution is believed: one that cost its caller a
 * wait (a node that does not answer: up to TCP_RESOLVE_MS each try) for
 * long; one that failed at once (no such QP yet, a connection refused or
 * reset, as while a door changes hands) for a moment, so an RC QP whose
 * resolution failed gets its peer on a retry. */
#define TCP_UNREACH_TTL_NS (10000ull * 1000 * 1000)
#define TCP_NOQP_TTL_NS (100ull * 1000 * 1000)
#define TCP_CHEAP_FAIL_NS (100ull * 1000 * 1000)
#define TCP_ROUTES 512 /* (node, QPN) -> connection, a cache */
#define TCP_DOOR_CLIENTS 16
#define TCP_DOOR_RETRY_MS 1000
#define TCP_STALL_MS 1 /* a full inbox: read again this soon */
#define TCP_APP_POLL_NS 5000 /* tcp_app_polling */
#define TCP_BATCH (256u << 10) /* tcp_more_follows */
#define TCP_POLL_CONNS 64 /* connections an application's poll reads */
#define TCP_FRAME_ROOM                                                         \
	(sizeof(struct tp_frame_hdr) + sizeof(struct tp_frame_grh) +         \
	 PKT_MAX_LEN)

enum tcp_conn_state {
	TCP_CONN_HELLO, /* accepted, its HELLO not read yet */
	TCP_CONN_UP,
	TCP_CONN_DEAD,
	TCP_CONN_ATTACHING, /* a resolver puts a new socket under it */
};

/* What epoll reports names one of these. */
enum tcp_ev_kind {
	TCP_EV_KICK,
	TCP_EV_LISTEN,
	TCP_EV_DOOR,
	TCP_EV_DOOR_CLIENT,
	TCP_EV_CONN, /* a connection can be read */
	TCP_EV_CONN_OUT, /* its socket takes more */
	TCP_EV_WATCH,
};

struct tcp_ev {
	enum tcp_ev_kind kind;
	void *ptr;
};

/* The HELLO each side sends first; the LOOKUP and its reply. */
struct tcp_hello {
	__be16 lid;
	__be16 port; /* the sender's own TCP port */
	__be32 resv;
};

enum tcp_lookup_kind {
	TCP_LOOKUP_QPN = 1,
	TCP_LOOKUP_CM = 2,
};

struct tcp_lookup {
	__be32 kind;
	__be32 qpn;
	__be16 ps, port;
	uint8_t v4;
	uint8_t resv[3];
	uint8_t addr[16];
};

struct tcp_lookup_reply {
	__be32 status; /* 0 or a positive errno */
	__be32 slot;
	__be64 token;
	__be16 port;
	__be16 lid;
	__be32 resv;
};

struct tcp_stage {
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	uint8_t data[PKT_MAX_LEN];
};

struct tp_tcp;

struct tcp_conn {
	struct tp_peer base;
	struct tp_tcp *t;
	struct tcp_ev ev, wev;
	int32_t slot; /* IBEMU_MAX_PROCS + index */
	_Atomic int state; /* enum tcp_conn_state */
	/* The socket, registered for reading one event at a time
	 * (EPOLLONESHOT, re-armed by the network thread), and a duplicate
	 * registered for writing while the queue is not empty. */
	int fd, wfd;
	int pub; /* its net_peers entry, -1: none */
	/* The remote process; set before UP, fixed while UP. */
	struct sockaddr_storage addr; /* its node's address, its port */
	uint64_t guid, token;
	int32_t rslot;
	uint16_t lid;
	/* Sending, under tx_lock. */
	pthread_mutex_t tx_lock;
	uint8_t *tx;
	uint32_t tx_head, tx_tail;
	bool tx_armed; /* EPOLLOUT asked for */
	bool tx_refused; /* a claim found no room since the last flush */
	bool tx_deferred; /* holds an ACK for the application's next call */
	bool discard; /* the claimed packet goes nowhere */
	struct tcp_stage *stage;
	_Atomic uint64_t taken; /* bytes the socket took: progress */
	/* Receiving, under rx_lock: the network thread's, or a busy
	 * poller's that gets the lock at once (tcp_poll). */
	pthread_mutex_t rx_lock;
	uint8_t *rx;
	uint32_t rx_len;
	bool rx_stalled;
	bool parked; /* a busy poller reads it: not re-armed (tcp_thread) */
	/* A send failed while the socket may still hold what the peer sent
	 * before it went (an ACK it flushed just before closing): DEAD (or
	 * ATTACHING, a resolver putting a new socket under it), yet read
	 * to its end (tcp_conn_send_failed_locked).  Set and cleared under
	 * tx_lock, cleared by a new socket under rx_lock too; looked at
	 * without them to choose what to read. */
	_Atomic bool rx_drain;
};

/* A lookup being answered by the door. */
struct tcp_door_client {
	struct tcp_ev ev;
	int fd;
	uint32_t len;
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
};

struct tcp_route {
	struct sockaddr_storage node; /* port 0 */
	uint32_t qpn;
	int32_t slot; /* -1: a failure, until expires */
	int err;
	uint64_t expires; /* failures only */
};

struct tp_tcp {
	struct engine *e;
	bool forced;
	int ep, kick, lfd, door_fd, watch_fd;
	uint16_t port, door_port;
	struct tcp_ev kick_ev, listen_ev, door_ev, watch_ev;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct tcp_conn *conns[TCP_MAX_CONNS];
	unsigned int nr_conns;
	struct tcp_route routes[TCP_ROUTES];
	struct tcp_door_client *door_clients[TCP_DOOR_CLIENTS];
	bool door_foreign; /* another node's process holds our door port */
	bool clash_told; /* a LID collision was reported */
	/* The application polled the network since the thread last looked
	 * (tcp_poll); the thread leaves connections to it meanwhile. */
	atomic_bool app_polls;
	atomic_bool deferred; /* some connection holds an ACK back */
	/* Some connection was ever made (conns[] entries are kept while
	 * the transport is open): until then the application's polls have
	 * nothing to read here and pay one load. */
	atomic_bool has_conns;
	unsigned int poll_next; /* the application's next poll starts here */
	unsigned int nr_parked;
	uint64_t park_check; /* ms */
	unsigned int nr_stalled;
};

static struct tp_tcp *tp_tcp(struct engine *e)
{
	return e->net_priv;
}

static uint64_t tcp_now_ms(void)
{
	return engine_coarse_ns() / 1000000;
}

/* ---- addresses ---- */

/* addr as 16 bytes: IPv6, or ::ffff:a.b.c.d. */
static void tcp_addr16(const struct sockaddr_storage *ss, uint8_t out[16])
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)ss)
				     ->sin6_addr,
		       16);
	}
}

static bool tcp_same_node(const struct sockaddr_storage *a,
			  const struct sockaddr_storage *b)
{
	uint8_t x[16], y[16];

	tcp_addr16(a, x);
	tcp_addr16(b, y);
	return !memcmp(x, y, 16);
}

static void tcp_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
}

static socklen_t tcp_sslen(const struct sockaddr_storage *ss)
{
	return ss->ss_family == AF_INET ? sizeof(struct sockaddr_in)
					: sizeof(struct sockaddr_in6);
}

static const char *tcp_addr_str(const struct sockaddr_storage *ss,
				char *buf, size_t len)
{
	const void *a = ss->ss_family == AF_INET
				? (const void *)&((const struct sockaddr_in *)(const void *)ss)->sin_addr
				: (const void *)&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;

	if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* ---- sockets ---- */

static void tcp_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A listening socket on every address of the node, port 0: any. */
static int tcp_listen_on(uint16_t port, bool reuse, uint16_t *port_p)
{
	struct sockaddr_in6 a6 = { .sin6_family = AF_INET6,
				   .sin6_port = htons(port),
				   .sin6_addr = IN6ADDR_ANY_INIT };
	struct sockaddr_in a4 = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct sockaddr_storage got;
	socklen_t len = sizeof(got);
	int fd, one = 1, zero = 0, ret;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd >= 0) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (reuse)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				   sizeof(one));
		ret = bind(fd, (struct sockaddr *)&a6, sizeof(a6));
	} else {
		/* No IPv6 here: IPv4 alone. */
		fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd < 0)
			return -errno;
		if (reuse)
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				   sizeof(one));
		ret = bind(fd, (struct sockaddr *)&a4, sizeof(a4));
	}
	if (ret || listen(fd, 128)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (port_p) {
		if (getsockname(fd, (struct sockaddr *)&got, &len)) {
			ret = -errno;
			close(fd);
			return ret;
		}
		*port_p = ntohs(got.ss_family == AF_INET
					? ((struct sockaddr_in *)&got)->sin_port
					: ((struct sockaddr_in6 *)&got)->sin6_port);
	}
	return fd;
}

/* Wait for fd to be ready for events until deadline (ms); 0 or errno. */
static int tcp_wait(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now;
	int n;

	for (;;) {
		now = tcp_now_ms();
		if (now >= deadline)
			return ETIMEDOUT;
		n = poll(&p, 1, (int)(deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return errno;
	}
}

static int tcp_connect(const struct sockaddr_storage *addr, uint64_t deadline,
		       int *fd_p)
{
	int fd, err = 0;
	socklen_t len = sizeof(err);

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return errno;
	if (connect(fd, (const struct sockaddr *)addr, tcp_sslen(addr)) &&
	    errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return err;
	}
	err = tcp_wait(fd, POLLOUT, deadline);
	if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (err) {
		close(fd);
		return err;
	}
	tcp_sock_opts(fd);
	*fd_p = fd;
	return 0;
}

static int tcp_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const uint8_t *p = buf;
	ssize_t n;
	int err;

	while (len) {
		n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return errno;
		err = tcp_wait(fd, POLLOUT, deadline);
		if (err)
			return err;
	}
	return 0;
}

static int tcp_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;
	ssize_t n;
	int err;

	while (len) {
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		err = tcp_wait(fd, POLLIN, deadline);
		if (err)
			return err;
	}
	return 0;
}

/* ---- frames ---- */

static void tcp_frame_init(struct tp_tcp *t, struct tp_frame_hdr *f,
			   uint8_t type, uint32_t len, int32_t dst_slot)
{
	struct node *node = &t->e->hca->node;

	memset(f, 0, sizeof(*f));
	f->magic = htobe32(TP_FRAME_MAGIC);
	f->version = TP_FRAME_VERSION;
	f->type = type;
	f->len = htobe32(len);
	f->slid = htobe16(node->seg->lid);
	f->src_guid = htobe64(node->seg->port_guid);
	f->src_slot = htobe32((uint32_t)node->proc_slot);
	f->dst_slot = htobe32((uint32_t)dst_slot);
	f->src_token = htobe64(node->token);
}

/* Send one control frame and read the answer of the same size class:
 * the synchronous exchanges of HELLO and LOOKUP. */
static int tcp_exchange(struct tp_tcp *t, int fd, uint8_t type,
			const void *body, uint32_t len, uint8_t want,
			struct tp_frame_hdr *rf, void *rbody, uint32_t rlen,
			uint64_t deadline)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
	struct tp_frame_hdr f;
	int err;

	tcp_frame_init(t, &f, type, len, -1);
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), body, len);
	err = tcp_send_all(fd, buf, sizeof(f) + len, deadline);
	if (!err)
		err = tcp_recv_all(fd, rf, sizeof(*rf), deadline);
	if (err)
		return err;
	if (!tp_frame_check(rf) || rf->type != want ||
	    be32toh(rf->len) != rlen)
		return EPROTO;
	return tcp_recv_all(fd, rbody, rlen, deadline);
}

/* ---- publication for `ibemu status` ---- */

static void tcp_publish(struct tp_tcp *t, struct tcp_conn *c)
{
	struct node *node = &t->e->hca->node;
	struct node_net_peer *p;
	int i;

	if (c->pub < 0) {
		node_lock(node);
		for (i = 0; i < IBEMU_MAX_NET_PEERS; i++) {
			p = &node->seg->net_peers[i];
			if (atomic_load_explicit(&p->owner,
						 memory_order_relaxed))
				continue;
			atomic_store_explicit(&p->owner,
					      (uint32_t)node->proc_slot + 1,
					      memory_order_relaxed);
			p->token = node->token;
			c->pub = i;
			break;
		}
		node_unlock(node);
		if (c->pub < 0)
			return;
	}
	p = &node->seg->net_peers[c->pub];
	tcp_addr16(&c->addr, p->addr);
	p->port = ntohs(c->addr.ss_family == AF_INET
				? ((struct sockaddr_in *)&c->addr)->sin_port
				: ((struct sockaddr_in6 *)&c->addr)->sin6_port);
	p->lid = c->lid;
	p->rslot = c->rslot;
	p->guid = c->guid;
	atomic_store_explicit(&p->state,
			      atomic_load(&c->state) == TCP_CONN_UP
				      ? NODE_NET_UP
				      : NODE_NET_DOWN,
			      memory_order_relaxed);
}

static struct node_net_peer *tcp_pub(struct tcp_conn *c)
{
	return c->pub < 0 ? NULL
			  : &c->t->e->hca->node.seg->net_peers[c->pub];
}

static void tcp_count(_Atomic uint64_t *ctr, uint64_t n)
{
	/* One writer (the owner): no read-modify-write needed. */
	atomic_store_explicit(ctr,
			      atomic_load_explicit(ctr, memory_order_relaxed) +
				      n,
			      memory_order_relaxed);
}

/* ---- connections ---- */

static void tcp_conn_dead(struct tcp_conn *c, int err)
{
	char a[INET6_ADDRSTRLEN];

	if (atomic_exchange(&c->state, TCP_CONN_DEAD) == TCP_CONN_DEAD)
		return;
	ibemu_log_dbg("tcp: connection to %s slot %d lost: %s",
		      tcp_addr_str(&c->addr, a, sizeof(a)), c->rslot,
		      strerror(err));
	if (tcp_pub(c))
		atomic_store_explicit(&tcp_pub(c)->state, NODE_NET_DOWN,
				      memory_order_relaxed);
}

/* A new entry in conns[] (tcp.lock held), fd not open yet. */
static struct tcp_conn *tcp_conn_new_locked(struct tp_tcp *t)
{
	struct tcp_conn *c;
	unsigned int i;

	for (i = 0; i < TCP_MAX_CONNS && t->conns[i]; i++)
		;
	if (i == TCP_MAX_CONNS)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->tx = malloc(TCP_TX_CAP);
	c->rx = malloc(TCP_RX_CAP);
	c->stage = malloc(sizeof(*c->stage));
	if (!c->tx || !c->rx || !c->stage) {
		free(c->tx);
		free(c->rx);
		free(c->stage);
		free(c);
		return NULL;
	}
	c->base.tp = &tp_tcp_ops;
	c->t = t;
	c->ev.kind = TCP_EV_CONN;
	c->ev.ptr = c;
	c->wev.kind = TCP_EV_CONN_OUT;
	c->wev.ptr = c;
	c->wfd = -1;
	c->slot = IBEMU_MAX_PROCS + (int32_t)i;
	c->fd = -1;
	c->pub = -1;
	atomic_init(&c->state, TCP_CONN_DEAD);
	pthread_mutex_init(&c->tx_lock, NULL);
	pthread_mutex_init(&c->rx_lock, NULL);
	t->conns[i] = c;
	if (i >= t->nr_conns)
		t->nr_conns = i + 1;
	atomic_store_explicit(&t->has_conns, true, memory_order_relaxed);
	return c;
}

/* Whether what c's socket holds is the peer's data: c is UP, or its
 * sending side broke and the rest is still to be read (rx_drain; a
 * resolver may be about to put a new socket under it, which it does
 * under rx_lock, after the reader).  TCP delivers in order, so what a
 * socket gave before its end is whole, whatever became of the sending
 * side. */
static bool tcp_conn_carries_data(struct tcp_conn *c)
{
	int state = atomic_load(&c->state);

	return state == TCP_CONN_UP ||
	       ((state == TCP_CONN_DEAD || state == TCP_CONN_ATTACHING) &&
		atomic_load(&c->rx_drain));
}

/* Whether c has a socket to read: greeted, being greeted, or dead
 * with something still to read. */
static bool tcp_conn_live(struct tcp_conn *c)
{
	return atomic_load(&c->state) == TCP_CONN_HELLO ||
	       tcp_conn_carries_data(c);
}

/* Let the network thread read c once more (EPOLLONESHOT).  Under
 * rx_lock: a resolver may put a new socket under a dead c meanwhile
 * (tcp_conn_attach), and the old one's number may then be another's. */
static void tcp_rearm(struct tp_tcp *t, struct tcp_conn *c)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
				  .data.ptr = &c->ev };

	pthread_mutex_lock(&c->rx_lock);
	if (tcp_conn_live(c))
		epoll_ctl(t->ep, EPOLL_CTL_MOD, c->fd, &ev);
	pthread_mutex_unlock(&c->rx_lock);
}

/* Register a new socket of c: read events one at a time, and a
 * duplicate for write events; 0 or an errno. */
static int tcp_conn_register(struct tp_tcp *t, struct tcp_conn *c, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
				  .data.ptr = &c->ev };

	c->wfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (c->wfd < 0)
		return errno;
	if (epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev))
		return errno;
	return 0;
}

static void tcp_conn_close_fds(struct tp_tcp *t, struct tcp_conn *c)
{
	if (c->fd >= 0) {
		epoll_ctl(t->ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	if (c->wfd >= 0) {
		epoll_ctl(t->ep, EPOLL_CTL_DEL, c->wfd, NULL);
		close(c->wfd);
	}
	c->fd = c->wfd = -1;
}

/* Put an open, greeted socket under c and let the network thread read
 * it.  c is ATTACHING (tcp_conn_to): no other resolver touches it; a
 * reader still draining the old socket (rx_drain) finishes first, as
 * both locks are taken here.  Not under tcp.lock: its readers take
 * tcp.lock under rx_lock (the engine they drive resolves peers). */
static void tcp_conn_attach(struct tp_tcp *t, struct tcp_conn *c, int fd)
{
	pthread_mutex_lock(&c->rx_lock);
	pthread_mutex_lock(&c->tx_lock);
	/* The network thread may still hold events for the old
	 * descriptors: they are closed here, under the locks it takes
	 * before using them. */
	tcp_conn_close_fds(t, c);
	c->fd = fd;
	c->tx_head = c->tx_tail = 0;
	c->tx_armed = false;
	c->rx_len = 0;
	c->rx_stalled = false;
	c->parked = false;
	atomic_store(&c->rx_drain, false);
	if (tcp_conn_register(t, c, fd))
		tcp_conn_dead(c, errno);
	else
		atomic_store(&c->state, TCP_CONN_UP);
	pthread_mutex_unlock(&c->tx_lock);
	pthread_mutex_unlock(&c->rx_lock);
	tcp_publish(t, c);
}

/* The connection to the process (node, slot, token), connecting to its
 * port if there is none up: its slot, or -errno. */
static int32_t tcp_conn_to(struct tp_tcp *t,
			   const struct sockaddr_storage *node_addr,
			   int32_t rslot, uint64_t token, uint16_t port,
			   uint16_t lid, uint64_t deadline)
{
	struct tcp_conn *c = NULL, *dead = NULL;
	struct sockaddr_storage to = *node_addr;
	struct tcp_hello hello = { 0 }, rh;
	struct tp_frame_hdr rf;
	unsigned int i;
	int fd, err;
	int32_t slot;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || c->token != token || c->rslot != rslot ||
		    !tcp_same_node(&c->addr, node_addr))
			continue;
		if (atomic_load(&c->state) == TCP_CONN_UP) {
			pthread_mutex_unlock(&t->lock);
			return c->slot;
		}
		if (atomic_load(&c->state) == TCP_CONN_DEAD)
			dead = c;
	}
	pthread_mutex_unlock(&t->lock);

	tcp_set_port(&to, port);
	err = tcp_connect(&to, deadline, &fd);
	if (err)
		return -EHOSTUNREACH;
	hello.lid = htobe16(t->e->hca->node.seg->lid);
	hello.port = htobe16(t->port);
	err = tcp_exchange(t, fd, TP_FRAME_HELLO, &hello, sizeof(hello),
			   TP_FRAME_HELLO, &rf, &rh, sizeof(rh), deadline);
	if (err || be64toh(rf.src_token) != token ||
	    (int32_t)be32toh(rf.src_slot) != rslot) {
		/* Not the process the door named: it went meanwhile. */
		close(fd);
		return err == ETIMEDOUT ? -EHOSTUNREACH : -ENOENT;
	}
	pthread_mutex_lock(&t->lock);
	if (dead && atomic_load(&dead->state) != TCP_CONN_DEAD)
		dead = NULL; /* another resolver revived it meanwhile */
	c = dead ? dead : tcp_conn_new_locked(t);
	if (!c) {
		pthread_mutex_unlock(&t->lock);
		close(fd);
		return -ENOMEM;
	}
	atomic_store(&c->state, TCP_CONN_ATTACHING);
	c->addr = to;
	c->rslot = rslot;
	c->token = token;
	c->guid = be64toh(rf.src_guid);
	c->lid = lid;
	slot = c->slot;
	pthread_mutex_unlock(&t->lock);
	tcp_conn_attach(t, c, fd);
	return slot;
}

/*
 * A node that answers with our LID and is not us: a LID collision (two
 * nodes listed with one LID, a fabric file that disagrees with
 * derivation).  Reported once, loudly; packets to that LID stay on this
 * node, so the operator must fix the addressing (fabric.h).
 */
static void tcp_lid_check(struct tp_tcp *t, uint16_t lid, uint64_t guid,
			  const struct sockaddr_storage *addr)
{
	const struct node_seg *seg = t->e->hca->node.seg;
	char a[INET6_ADDRSTRLEN];

	if (lid != seg->lid || guid == seg->port_guid || t->clash_told)
		return;
	t->clash_told = true;
	ibemu_log_err("LID collision: LID %u is this node's and that of the "
		      "node at %s (port GUID %016llx); fix the fabric file "
		      "or the addresses (IBEMU_FABRIC, IBEMU_SUBNET)",
		      lid, tcp_addr_str(addr, a, sizeof(a)),
		      (unsigned long long)guid);
}

/* Ask the door of the node at node_addr; 0 or a positive errno. */
static int tcp_lookup(struct tp_tcp *t, const struct sockaddr_storage *node_addr,
		      const struct tcp_lookup *q, struct tcp_lookup_reply *r,
		      uint64_t deadline)
{
	struct sockaddr_storage door = *node_addr;
	struct tp_frame_hdr rf;
	int fd, err;

	tcp_set_port(&door, t->door_port);
	err = tcp_connect(&door, deadline, &fd);
	if (err)
		return EHOSTUNREACH;
	err = tcp_exchange(t, fd, TP_FRAME_LOOKUP, q, sizeof(*q),
			   TP_FRAME_LOOKUP_REPLY, &rf, r, sizeof(*r), deadline);
	close(fd);
	if (err)
		return EHOSTUNREACH;
	tcp_lid_check(t, be16toh(r->lid), be64toh(rf.src_guid), node_addr);
	return (int)be32toh(r->status);
}

static int tcp_resolve(struct tp_tcp *t, const struct sockaddr_storage *node,
		       uint16_t want_lid, const struct tcp_lookup *q,
		       int32_t *slot_p)
{
	uint64_t deadline = tcp_now_ms() + TCP_RESOLVE_MS;
	struct tcp_lookup_reply r;
	char a[INET6_ADDRSTRLEN];
	uint16_t lid;
	int32_t slot;
	int err;

	/* The network thread serves doors and connections: it never waits
	 * for one (the engine it drives resolves again later). */
	if (pthread_equal(pthread_self(), t->thread))
		return EAGAIN;
	err = tcp_lookup(t, node, q, &r, deadline);
	if (err)
		return err;
	lid = be16toh(r.lid);
	if (want_lid && lid != want_lid) {
		ibemu_log_err("LID %u names %s, whose node has LID %u: a LID "
			      "collision or a stale fabric file; nothing sent",
			      want_lid, tcp_addr_str(node, a, sizeof(a)), lid);
		return EADDRNOTAVAIL;
	}
	slot = tcp_conn_to(t, node, (int32_t)be32toh(r.slot),
			   be64toh(r.token), be16toh(r.port), lid, deadline);
	if (slot < 0)
		return -slot;
	*slot_p = slot;
	return 0;
}

static struct tcp_route *tcp_route_find_locked(struct tp_tcp *t,
					       const struct sockaddr_storage *node,
					       uint32_t qpn)
{
	uint8_t a[16];
	uint32_t h = qpn * 2654435761u;
	unsigned int i;

	tcp_addr16(node, a);
	for (i = 0; i < 16; i++)
		h = (h ^ a[i]) * 16777619u;
	return &t->routes[h % TCP_ROUTES];
}

int tp_tcp_resolve_qpn(struct engine *e,
		       const struct sockaddr_storage *node_addr,
		       uint16_t want_lid, uint32_t qpn, int32_t *slot_p)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_QPN),
				.qpn = htobe32(qpn) };
	struct tcp_route *r;
	struct tcp_conn *c;
	uint64_t began;
	int32_t slot;
	bool cheap;
	int err;

	if (!t)
		return ENETDOWN;
	pthread_mutex_lock(&t->lock);
	r = tcp_route_find_locked(t, node_addr, qpn);
	if (r->qpn == qpn && tcp_same_node(&r->node, node_addr)) {
		if (r->slot < 0 && engine_coarse_ns() < r->expires) {
			err = r->err;
			pthread_mutex_unlock(&t->lock);
			return err;
		}
		c = r->slot >= 0 ? t->conns[r->slot - IBEMU_MAX_PROCS] : NULL;
		if (c && atomic_load(&c->state) == TCP_CONN_UP) {
			*slot_p = r->slot;
			pthread_mutex_unlock(&t->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&t->lock);

	began = engine_coarse_ns();
	err = tcp_resolve(t, node_addr, want_lid, &q, &slot);
	if (err == EAGAIN)
		return err; /* not tried: nothing learnt */
	cheap = engine_coarse_ns() - began < TCP_CHEAP_FAIL_NS;

	pthread_mutex_lock(&t->lock);
	r = tcp_route_find_locked(t, node_addr, qpn);
	r->node = *node_addr;
	r->qpn = qpn;
	r->slot = err ? -1 : slot;
	r->err = err;
	r->expires = engine_coarse_ns() +
		     (err == ENOENT || cheap ? TCP_NOQP_TTL_NS
					     : TCP_UNREACH_TTL_NS);
	pthread_mutex_unlock(&t->lock);
	if (!err)
		*slot_p = slot;
	return err;
}

int tp_tcp_resolve_cm(struct engine *e,
		      const struct sockaddr_storage *node_addr, uint16_t ps,
		      const uint8_t addr[16], bool v4, uint16_t port,
		      int32_t *slot_p)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_CM),
				.ps = htobe16(ps),
				.port = htobe16(port),
				.v4 = v4 };

	if (!t)
		return ENETDOWN;
	memcpy(q.addr, addr, 16);
	return tcp_resolve(t, node_addr, 0, &q, slot_p);
}

int tp_tcp_probe_node(struct engine *e,
		      const struct sockaddr_storage *node_addr,
		      int timeout_ms, uint16_t *lid_p)
{
	struct tp_tcp *t = tp_tcp(e);
	/* QPN 0 is nobody's (IBEMU_QPN_FIRST up are): any answer, "no
	 * such QP" too, is the node's */
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_QPN) };
	struct tcp_lookup_reply r;
	uint64_t ms = timeout_ms > 0 && timeout_ms < TCP_RESOLVE_MS
			      ? (uint64_t)timeout_ms
			      : TCP_RESOLVE_MS;
	int err;

	if (!t)
		return ENETDOWN;
	err = tcp_lookup(t, node_addr, &q, &r, tcp_now_ms() + ms);
	if (err == EHOSTUNREACH)
		return err;
	*lid_p = be16toh(r.lid);
	return 0;
}

bool tp_tcp_peer_info(struct engine *e, int32_t slot,
		      struct tp_tcp_peer_info *info)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	bool ok = false;

	if (!t || !tp_slot_is_remote(slot) ||
	    slot - IBEMU_MAX_PROCS >= TCP_MAX_CONNS)
		return false;
	pthread_mutex_lock(&t->lock);
	c = t->conns[slot - IBEMU_MAX_PROCS];
	if (c) {
		info->lid = c->lid;
		info->guid = c->guid;
		info->token = c->token;
		info->addr = c->addr;
		info->up = atomic_load(&c->state) == TCP_CONN_UP;
		ok = true;
	}
	pthread_mutex_unlock(&t->lock);
	return ok;
}

int tp_tcp_peer_watch_fd(struct engine *e, int32_t slot, uint64_t token)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	int fd = -1;

	errno = ENOENT;
	if (!t || !tp_slot_is_remote(slot) ||
	    slot - IBEMU_MAX_PROCS >= TCP_MAX_CONNS)
		return -1;
	pthread_mutex_lock(&t->lock);
	c = t->conns[slot - IBEMU_MAX_PROCS];
	if (c) {
		/* tx_lock: the descriptor is replaced under it */
		pthread_mutex_lock(&c->tx_lock);
		if (c->token == token && c->fd >= 0 &&
		    atomic_load(&c->state) == TCP_CONN_UP)
			fd = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
		pthread_mutex_unlock(&c->tx_lock);
	}
	pthread_mutex_unlock(&t->lock);
	return fd;
}

bool tp_tcp_enabled(struct engine *e)
{
	return e->net_priv != NULL;
}

bool tp_tcp_forced(struct engine *e)
{
	return e->net_priv && tp_tcp(e)->forced;
}

/* ---- sending ---- */

/* Ask the network thread to flush while the queue holds bytes; caller
 * holds tx_lock. */
static void tcp_arm_out_locked(struct tcp_conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT, .data.ptr = &c->wev };

	if ((c->tx_head < c->tx_tail) != c->tx_armed &&
	    atomic_load(&c->state) == TCP_CONN_UP) {
		c->tx_armed = !c->tx_armed;
		epoll_ctl(c->t->ep,
			  c->tx_armed ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, c->wfd,
			  &ev);
	}
}

/* The sending side is done: its queue lost, its duplicate out of
 * epoll.  Caller holds tx_lock. */
static void tcp_conn_stop_sending_locked(struct tcp_conn *c)
{
	if (c->tx_armed)
		epoll_ctl(c->t->ep, EPOLL_CTL_DEL, c->wfd, NULL);
	c->tx_armed = false;
	c->tx_head = c->tx_tail = 0;
}

/* Reading c's socket ended (a read failed, the peer closed, a frame
 * not this connection's): dead, its queue lost, its socket out of
 * epoll (a dead socket stays readable and writable: the network thread
 * would spin on it).  A c that was draining is dead already, and may
 * be a resolver's by now (ATTACHING): its state is left alone.
 * Caller holds rx_lock and tx_lock. */
static void tcp_conn_drop_locked(struct tcp_conn *c, int err)
{
	if (!atomic_exchange(&c->rx_drain, false))
		tcp_conn_dead(c, err);
	epoll_ctl(c->t->ep, EPOLL_CTL_DEL, c->fd, NULL);
	tcp_conn_stop_sending_locked(c);
}

/*
 * A send failed (the peer reset the connection, as a process does that
 * closed its socket and then got more): dead, its queue lost.  The
 * socket stays registered for reading: what the peer sent before, such
 * as the ACK it flushed as it closed, is read to the end and delivered
 * (tcp_conn_carries_data), and the reader drops the connection there.
 * A greeted one only: a HELLO-state connection has no data to give.
 * Caller holds tx_lock.
 */
static void tcp_conn_send_failed_locked(struct tcp_conn *c, int err)
{
	if (atomic_load(&c->state) == TCP_CONN_UP)
		atomic_store(&c->rx_drain, true);
	tcp_conn_dead(c, err);
	tcp_conn_stop_sending_locked(c);
}

/* Hand the queue to the socket; caller holds tx_lock. */
static void tcp_flush_locked(struct tcp_conn *c)
{
	ssize_t n;

	while (c->tx_head < c->tx_tail) {
		n = send(c->fd, c->tx + c->tx_head, c->tx_tail - c->tx_head,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			c->tx_head += (uint32_t)n;
			atomic_fetch_add_explicit(&c->taken, (uint64_t)n,
						  memory_order_relaxed);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN)
			tcp_conn_send_failed_locked(c, errno);
		break;
	}
	if (c->tx_head == c->tx_tail)
		c->tx_head = c->tx_tail = 0;
	tcp_arm_out_locked(c);
}

/*
 * ACKs the application's own poll produced (tcp_app_draining) wait for
 * its next call: a reply it sends to the same process takes them along
 * in one system call, its next poll sends them, and the engine's thread
 * sends them at the latest a nap later (progress.c, 1 ms; a requester's
 * timer is at least 32 ms), or when the device closes.  A ping-pong thus
 * costs one system call per message, not two.  Only while the engine's
 * thread naps or runs: the holder announces it in engine.pending_new,
 * which a thread going to sleep checks after it said so, and looks
 * whether the thread sleeps after: either the thread comes round to its
 * flush or the holder sends at once (transport.h, sleep).
 */
static __thread bool tcp_app_draining;

static bool tcp_is_ack(uint8_t opcode)
{
	return (opcode & 0x1f) == IB_OP_ACKNOWLEDGE;
}

/* Send what c holds back; caller holds tx_lock. */
static void tcp_undefer_locked(struct tcp_conn *c)
{
	c->tx_deferred = false;
	tcp_flush_locked(c);
}

static void tcp_flush_deferred(struct engine *e)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	unsigned int i, n;

	if (!atomic_load_explicit(&t->deferred, memory_order_relaxed) ||
	    !atomic_exchange(&t->deferred, false))
		return;
	pthread_mutex_lock(&t->lock);
	n = t->nr_conns;
	for (i = 0; i < n; i++) {
		c = t->conns[i];
		if (!c)
			continue;
		/* Looked at under the lock it was set under. */
		pthread_mutex_lock(&c->tx_lock);
		if (c->tx_deferred)
			tcp_undefer_locked(c);
		pthread_mutex_unlock(&c->tx_lock);
	}
	pthread_mutex_unlock(&t->lock);
}

static void tcp_poll_done(struct engine *e)
{
	/* Set only by a tcp_poll that found connections (it never goes
	 * back): no thread-local access on a node without any. */
	if (atomic_load_explicit(&tp_tcp(e)->has_conns, memory_order_relaxed))
		tcp_app_draining = false;
}

/*
 * Whether a request packet has more of its message right behind it: the
 * FIRST and MIDDLE packets of a SEND or RDMA WRITE (IBA 9.2 table 35),
 * which the requester sends in one go (req.c).  Such a packet is only
 * queued, up to TCP_BATCH bytes, and the message goes to the socket in
 * one system call with its LAST packet; should the requester stop short
 * (its queue full, a region gone), the network thread flushes (EPOLLOUT
 * is asked for with the first queued byte).
 */
static bool tcp_more_follows(uint8_t opcode)
{
	switch (opcode & 0x1f) {
	case IB_OP_SEND_FIRST:
	case IB_OP_SEND_MIDDLE:
	case IB_OP_WRITE_FIRST:
	case IB_OP_WRITE_MIDDLE:
		return true;
	default:
		return false;
	}
}

/*
 * Room for one frame at the queue's tail: the engine builds the packet
 * in place, after the room for the link header (a GRH, UD's only, moves
 * the packet along at send), so the packet is copied once on its way to
 * the socket, by the kernel.  A broken connection gets the stage, which
 * goes nowhere.
 */
static bool tcp_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt)
{
	struct tcp_conn *c = (struct tcp_conn *)peer;

	pthread_mutex_lock(&c->tx_lock);
	c->discard = atomic_load(&c->state) != TCP_CONN_UP;
	if (!c->discard) {
		if (c->tx_tail + TCP_FRAME_ROOM > TCP_TX_CAP && c->tx_head) {
			memmove(c->tx, c->tx + c->tx_head,
				c->tx_tail - c->tx_head);
			c->tx_tail -= c->tx_head;
			c->tx_head = 0;
		}
		if (c->tx_tail + TCP_FRAME_ROOM > TCP_TX_CAP) {
			c->tx_refused = true;
			pthread_mutex_unlock(&c->tx_lock);
			return false;
		}
	}
	pkt->slot = c;
	pkt->hdr = &c->stage->hdr;
	pkt->data = c->discard ? c->stage->data
			       : c->tx + c->tx_tail +
					 sizeof(struct tp_frame_hdr);
	pkt->grh = &c->stage->grh;
	pkt->pos = 0;
	return true;
}

static void tcp_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt)
{
	struct tcp_conn *c = (struct tcp_conn *)peer;
	struct tcp_stage *s = c->stage;
	uint32_t len = s->hdr.len, total;
	bool grh = s->hdr.flags & PKT_F_GRH, batch, defer;
	uint8_t *frame = c->tx + c->tx_tail, opcode;
	struct tp_frame_hdr f;
	struct tp_frame_grh g;

	(void)pkt;
	if (c->discard || len > PKT_MAX_LEN) {
		/* Lost on a broken link (file comment). */
		pthread_mutex_unlock(&c->tx_lock);
		return;
	}
	tcp_frame_init(c->t, &f, TP_FRAME_DATA,
		       len + (grh ? (uint32_t)sizeof(g) : 0), c->rslot);
	f.flags = grh ? TP_FRAME_F_GRH : 0;
	f.slid = htobe16(s->hdr.slid);
	f.dlid = htobe16(s->hdr.dlid);
	f.src_qpn = htobe32(s->hdr.src_qpn);
	if (grh) {
		memmove(frame + sizeof(f) + sizeof(g), frame + sizeof(f), len);
		tp_frame_grh_put(&g, &s->grh, len);
		memcpy(frame + sizeof(f), &g, sizeof(g));
	}
	memcpy(frame, &f, sizeof(f));
	total = (uint32_t)(sizeof(f) + (grh ? sizeof(g) : 0) + len);
	opcode = frame[total - len];
	c->tx_tail += total;

	defer = tcp_app_draining && tcp_is_ack(opcode) &&
		c->tx_tail - c->tx_head <= TCP_BATCH &&
		!c->t->e->tp->is_sleeping(c->t->e);
	batch = tcp_more_follows(opcode) &&
		c->tx_tail - c->tx_head <= TCP_BATCH;
	if (defer) {
		c->tx_deferred = true;
		atomic_store_explicit(&c->t->deferred, true,
				      memory_order_relaxed);
		/* Sequentially consistent, as the sleeper's flag. */
		atomic_store(&c->t->e->pending_new, true);
		if (c->t->e->tp->is_sleeping(c->t->e))
			tcp_undefer_locked(c);
	} else if (batch) {
		tcp_arm_out_locked(c);
	} else {
		/* This frame takes what was held back along. */
		c->tx_deferred = false;
		tcp_flush_locked(c);
	}
	if (tcp_pub(c)) {
		tcp_count(&tcp_pub(c)->tx_pkts, 1);
		tcp_count(&tcp_pub(c)->tx_bytes, total);
	}
	pthread_mutex_unlock(&c->tx_lock);
}

static uint64_t tcp_peer_taken(struct tp_peer *peer)
{
	return atomic_load_explicit(&((struct tcp_conn *)peer)->taken,
				    memory_order_relaxed);
}

static struct tp_peer *tcp_peer_get(struct engine *e, int32_t slot)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;

	if (!t || !tp_slot_is_remote(slot) ||
	    slot - IBEMU_MAX_PROCS >= TCP_MAX_CONNS)
		return NULL;
	pthread_mutex_lock(&t->lock);
	c = t->conns[slot - IBEMU_MAX_PROCS];
	pthread_mutex_unlock(&t->lock);
	return c ? &c->base : NULL;
}

static bool tcp_peer_is_self(struct engine *e, const struct tp_peer *peer)
{
	(void)e;
	(void)peer;
	return false;
}

/* ---- receiving (the network thread) ---- */

/* Deliver one checked DATA frame into our inbox: false if it is full. */
static bool tcp_deliver(struct tcp_conn *c, const struct tp_frame_hdr *f,
			const uint8_t *body)
{
	struct engine *e = c->t->e;
	struct inbox *ib = tp_shm_own_inbox(e);
	bool grh = f->flags & TP_FRAME_F_GRH;
	uint32_t len = be32toh(f->len) - (grh ? sizeof(struct tp_frame_grh) : 0);
	struct inbox_slot *s;
	struct tp_frame_grh g;
	uint64_t pos;

	s = inbox_claim(ib, e->hca->node.proc_slot, &pos);
	if (!s)
		return false;
	s->hdr.len = len;
	s->hdr.slid = be16toh(f->slid);
	s->hdr.dlid = be16toh(f->dlid);
	s->hdr.src_qpn = be32toh(f->src_qpn) & BTH_QPN_MASK;
	s->hdr.src_proc = c->slot;
	s->hdr.flags = grh ? PKT_F_GRH : 0;
	if (grh) {
		memcpy(&g, body, sizeof(g));
		tp_frame_grh_get(&s->grh, &g);
		body += sizeof(g);
	}
	memcpy(s->data, body, len);
	inbox_publish(ib, s, pos);
	return true;
}

static void tcp_reply_hello(struct tcp_conn *c, const struct tp_frame_hdr *f,
			    const uint8_t *body)
{
	struct tp_tcp *t = c->t;
	struct tcp_hello h, mine = { 0 };
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(mine)];
	struct tp_frame_hdr out;

	memcpy(&h, body, sizeof(h));
	c->guid = be64toh(f->src_guid);
	c->token = be64toh(f->src_token);
	c->rslot = (int32_t)be32toh(f->src_slot);
	c->lid = be16toh(h.lid);
	tcp_set_port(&c->addr, be16toh(h.port));
	tcp_lid_check(t, c->lid, c->guid, &c->addr);
	mine.lid = htobe16(t->e->hca->node.seg->lid);
	mine.port = htobe16(t->port);
	tcp_frame_init(t, &out, TP_FRAME_HELLO, sizeof(mine), c->rslot);
	memcpy(buf, &out, sizeof(out));
	memcpy(buf + sizeof(out), &mine, sizeof(mine));
	/* The first bytes on a new connection: the socket takes them. */
	if (send(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(buf)) {
		tcp_conn_dead(c, errno ? errno : EPROTO);
		return;
	}
	atomic_store(&c->state, TCP_CONN_UP);
	tcp_publish(t, c);
}

/* Hand one checked DATA frame to the engine (engine_deliver_begin). */
static void tcp_dispatch(struct tcp_conn *c, const struct tp_frame_hdr *f,
			 const uint8_t *body)
{
	bool grh = f->flags & TP_FRAME_F_GRH;
	struct tp_frame_grh g;
	struct pkt_hdr h;
	struct pkt_grh pg;
	struct tp_pkt in = { .hdr = &h, .grh = &pg };

	h.len = be32toh(f->len) - (grh ? sizeof(struct tp_frame_grh) : 0);
	h.slid = be16toh(f->slid);
	h.dlid = be16toh(f->dlid);
	h.src_qpn = be32toh(f->src_qpn) & BTH_QPN_MASK;
	h.src_proc = c->slot;
	h.flags = grh ? PKT_F_GRH : 0;
	if (grh) {
		memcpy(&g, body, sizeof(g));
		tp_frame_grh_get(&pg, &g);
		body += sizeof(g);
	}
	/* Frames are multiples of 4 bytes from the buffer's start: the
	 * headers are as aligned as in an inbox slot. */
	in.data = (uint8_t *)body;
	engine_recv_locked(c->t->e, &in);
}

/* Take the frames in c's buffer; false when the connection is done.
 * direct: the engine takes them now (engine_deliver_begin). */
static bool tcp_parse(struct tcp_conn *c, bool direct)
{
	uint32_t off = 0, flen;
	struct tp_frame_hdr f;
	bool ok = true;

	c->rx_stalled = false;
	while (c->rx_len - off >= sizeof(f)) {
		memcpy(&f, c->rx + off, sizeof(f));
		if (!tp_frame_check(&f)) {
			ok = false;
			break;
		}
		flen = (uint32_t)sizeof(f) + be32toh(f.len);
		if (c->rx_len - off < flen)
			break;
		/* Straight to the engine only while UP: a resolver holding
		 * a QP lock may wait for rx_lock to put a new socket under
		 * a draining c, and the engine takes QP locks. */
		if (f.type == TP_FRAME_DATA &&
		    atomic_load(&c->state) == TCP_CONN_UP && direct) {
			tcp_dispatch(c, &f, c->rx + off + sizeof(f));
			if (tcp_pub(c)) {
				tcp_count(&tcp_pub(c)->rx_pkts, 1);
				tcp_count(&tcp_pub(c)->rx_bytes, flen);
			}
		} else if (f.type == TP_FRAME_DATA &&
			   tcp_conn_carries_data(c)) {
			if (!tcp_deliver(c, &f, c->rx + off + sizeof(f))) {
				ibemu_log_dbg("tcp: inbox full, slot %d waits",
					      c->slot);
				c->rx_stalled = true;
				break;
			}
			if (tcp_pub(c)) {
				tcp_count(&tcp_pub(c)->rx_pkts, 1);
				tcp_count(&tcp_pub(c)->rx_bytes, flen);
			}
		} else if (f.type == TP_FRAME_HELLO &&
			   atomic_load(&c->state) == TCP_CONN_HELLO &&
			   be32toh(f.len) == sizeof(struct tcp_hello)) {
			tcp_reply_hello(c, &f, c->rx + off + sizeof(f));
		} else {
			ok = false; /* not this connection's to send */
			break;
		}
		off += flen;
	}
	if (off) {
		memmove(c->rx, c->rx + off, c->rx_len - off);
		c->rx_len -= off;
	}
	return ok;
}

/* The inbox was full: ask the engine to say when it made room, then
 * look once more (the engine may have drained before the flag). */
static void tcp_want_room(struct tp_tcp *t)
{
	atomic_store(&t->e->net_room, true);
}

static void tcp_room(struct engine *e)
{
	uint64_t one = 1;

	(void)!write(tp_tcp(e)->kick, &one, sizeof(one));
}

/* Read what c has; caller holds c->rx_lock. */
static void tcp_conn_readable_locked(struct tp_tcp *t, struct tcp_conn *c)
{
	bool direct = false, tried = false;
	ssize_t n;
	int err = 0;

	/* A greeted connection's data (not its HELLO, which a peer waits
	 * for) is what a loaded machine reads late. */
	if (atomic_load_explicit(&c->state, memory_order_relaxed) ==
	    TCP_CONN_UP)
		fault_point(FAULT_AT_NETREAD);
	while (!c->rx_stalled) {
		if (c->rx_len == TCP_RX_CAP) {
			/* A frame is at most TCP_FRAME_ROOM: a full buffer
			 * parses, or the peer is not speaking frames. */
			err = EPROTO;
			break;
		}
		n = recv(c->fd, c->rx + c->rx_len, TCP_RX_CAP - c->rx_len,
			 MSG_DONTWAIT);
		if (n == 0) {
			err = ECONNRESET;
			break;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				err = errno;
			break;
		}
		c->rx_len += (uint32_t)n;
		/* Data came: the engine takes it straight from here when it
		 * can (no inbox copy), once per read of the connection. */
		if (!tried) {
			tried = true;
			direct = atomic_load(&c->state) == TCP_CONN_UP &&
				 engine_deliver_begin(t->e);
		}
		if (!tcp_parse(c, direct)) {
			err = EPROTO;
			break;
		}
	}
	if (c->rx_stalled && !err) {
		tcp_want_room(t);
		if (!tcp_parse(c, false))
			err = EPROTO;
	}
	if (direct)
		engine_deliver_end(t->e);
	if (err) {
		pthread_mutex_lock(&c->tx_lock);
		tcp_conn_drop_locked(c, err);
		pthread_mutex_unlock(&c->tx_lock);
	}
}

static void tcp_conn_readable(struct tp_tcp *t, struct tcp_conn *c)
{
	pthread_mutex_lock(&c->rx_lock);
	if (tcp_conn_live(c))
		tcp_conn_readable_locked(t, c);
	pthread_mutex_unlock(&c->rx_lock);
}

/* tcp_poll, on a transport with connections. */
static __attribute__((noinline)) void tcp_poll_conns(struct engine *e)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c, *ready[TCP_POLL_CONNS];
	unsigned int i, n;

	if (!atomic_load_explicit(&t->app_polls, memory_order_relaxed))
		atomic_store_explicit(&t->app_polls, true,
				      memory_order_relaxed);
	tcp_flush_deferred(e);
	tcp_app_draining = true;
	/* Entries of conns[] are never freed while the transport is
	 * open: the ones seen under the lock are read without it (the
	 * engine the reading drives takes it). */
	if (pthread_mutex_trylock(&t->lock))
		return;
	/* At most TCP_POLL_CONNS a call, taking turns. */
	for (i = n = 0; i < t->nr_conns && n < TCP_POLL_CONNS; i++) {
		c = t->conns[(t->poll_next + i) % t->nr_conns];
		if (c && tcp_conn_carries_data(c))
			ready[n++] = c;
	}
	t->poll_next = t->nr_conns ? (t->poll_next + i) % t->nr_conns : 0;
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < n; i++) {
		c = ready[i];
		if (pthread_mutex_trylock(&c->rx_lock))
			continue;
		if (tcp_conn_carries_data(c))
			tcp_conn_readable_locked(t, c);
		pthread_mutex_unlock(&c->rx_lock);
	}
}

/* The application's poll (transport.h): read the connections nobody
 * else is reading now.  Never blocks.  Most nodes have none: that costs
 * one load. */
static void tcp_poll(struct engine *e)
{
	if (atomic_load_explicit(&tp_tcp(e)->has_conns, memory_order_relaxed))
		tcp_poll_conns(e);
}

static void tcp_conn_writable(struct tcp_conn *c)
{
	bool wake;

	pthread_mutex_lock(&c->tx_lock);
	tcp_flush_locked(c);
	wake = c->tx_refused && c->tx_tail - c->tx_head + TCP_FRAME_ROOM <=
						TCP_TX_CAP;
	if (wake)
		c->tx_refused = false;
	pthread_mutex_unlock(&c->tx_lock);
	/* A requester blocked on the full queue goes on. */
	if (wake)
		c->t->e->tp->wake(c->t->e);
}

static void tcp_accept(struct tp_tcp *t)
{
	struct sockaddr_storage from;
	socklen_t len = sizeof(from);
	struct tcp_conn *c;
	int fd;

	for (;;) {
		fd = accept4(t->lfd, (struct sockaddr *)&from, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		tcp_sock_opts(fd);
		pthread_mutex_lock(&t->lock);
		c = tcp_conn_new_locked(t);
		if (!c) {
			pthread_mutex_unlock(&t->lock);
			close(fd);
			continue;
		}
		/* A v4-mapped peer is an IPv4 node. */
		if (from.ss_family == AF_INET6 &&
		    IN6_IS_ADDR_V4MAPPED(&((struct sockaddr_in6 *)&from)->sin6_addr)) {
			struct sockaddr_in in = { .sin_family = AF_INET };

			memcpy(&in.sin_addr,
			       &((struct sockaddr_in6 *)&from)->sin6_addr.s6_addr[12],
			       4);
			memset(&from, 0, sizeof(from));
			memcpy(&from, &in, sizeof(in));
		}
		c->addr = from;
		c->fd = fd;
		atomic_store(&c->state, TCP_CONN_HELLO);
		if (tcp_conn_register(t, c, fd))
			tcp_conn_dead(c, errno);
		pthread_mutex_unlock(&t->lock);
		len = sizeof(from);
	}
}

/* ---- the door ---- */

static void tcp_door_answer(struct tp_tcp *t, const struct tcp_lookup *q,
			    struct tcp_lookup_reply *r)
{
	struct node *node = &t->e->hca->node;
	int32_t slot = -1;
	uint64_t token = 0;
	uint32_t port;
	int err = 0;

	memset(r, 0, sizeof(*r));
	switch (be32toh(q->kind)) {
	case TCP_LOOKUP_QPN:
		slot = node_qpn_owner_slot(node, be32toh(q->qpn) & BTH_QPN_MASK);
		if (slot < 0)
			err = ENOENT;
		break;
	case TCP_LOOKUP_CM:
		err = -node_cm_lookup(node, be16toh(q->ps), q->addr, q->v4 != 0,
				      be16toh(q->port), &slot, &token);
		if (err > 0 && err != ECONNREFUSED)
			err = ECONNREFUSED;
		break;
	default:
		err = EINVAL;
	}
	if (!err) {
		struct node_proc_id id;

		if (node_proc_id(node, slot, &id))
			err = ENOENT;
		token = id.token;
		port = atomic_load_explicit(&node->seg->procs[slot].tcp_port,
					    memory_order_relaxed);
		if (!err && (!port || port > 0xffff))
			err = ENOENT; /* that process takes no connections */
		r->slot = htobe32((uint32_t)slot);
		r->token = htobe64(token);
		r->port = htobe16((uint16_t)port);
	}
	r->status = htobe32((uint32_t)err);
	r->lid = htobe16(node->seg->lid);
}

static void tcp_door_client_done(struct tp_tcp *t, struct tcp_door_client *d)
{
	unsigned int i;

	epoll_ctl(t->ep, EPOLL_CTL_DEL, d->fd, NULL);
	close(d->fd);
	for (i = 0; i < TCP_DOOR_CLIENTS; i++)
		if (t->door_clients[i] == d)
			t->door_clients[i] = NULL;
	free(d);
}

static void tcp_door_client_readable(struct tp_tcp *t,
				     struct tcp_door_client *d)
{
	uint8_t out[sizeof(struct tp_frame_hdr) +
		    sizeof(struct tcp_lookup_reply)];
	struct tcp_lookup_reply r;
	struct tp_frame_hdr f;
	struct tcp_lookup q;
	ssize_t n;

	n = recv(d->fd, d->buf + d->len, sizeof(d->buf) - d->len,
		 MSG_DONTWAIT);
	if (n <= 0) {
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		tcp_door_client_done(t, d);
		return;
	}
	d->len += (uint32_t)n;
	if (d->len < sizeof(d->buf))
		return;
	memcpy(&f, d->buf, sizeof(f));
	memcpy(&q, d->buf + sizeof(f), sizeof(q));
	if (tp_frame_check(&f) && f.type == TP_FRAME_LOOKUP &&
	    be32toh(f.len) == sizeof(q)) {
		tcp_door_answer(t, &q, &r);
		tcp_frame_init(t, &f, TP_FRAME_LOOKUP_REPLY, sizeof(r), -1);
		memcpy(out, &f, sizeof(f));
		memcpy(out + sizeof(f), &r, sizeof(r));
		/* A fresh connection's socket takes these bytes. */
		(void)!send(d->fd, out, sizeof(out),
			    MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	tcp_door_client_done(t, d);
}

static void tcp_door_accept(struct tp_tcp *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct tcp_door_client *d;
	unsigned int i;
	int fd;

	for (;;) {
		fd = accept4(t->door_fd, NULL, NULL,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		for (i = 0; i < TCP_DOOR_CLIENTS && t->door_clients[i]; i++)
			;
		d = i < TCP_DOOR_CLIENTS ? calloc(1, sizeof(*d)) : NULL;
		if (!d) {
			close(fd); /* busy: the asker retries */
			continue;
		}
		d->ev.kind = TCP_EV_DOOR_CLIENT;
		d->ev.ptr = d;
		d->fd = fd;
		t->door_clients[i] = d;
		ev.data.ptr = &d->ev;
		epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* Watch the door's holder: its exit is our cue to take the door over. */
static void tcp_door_watch(struct tp_tcp *t)
{
	struct node *node = &t->e->hca->node;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &t->watch_ev };
	struct node_proc_id id;
	uint32_t owner;
	int fd;

	if (t->watch_fd >= 0)
		return;
	owner = atomic_load(&node->seg->door_owner);
	if (!owner || owner > IBEMU_MAX_PROCS ||
	    node_proc_id(node, (int)owner - 1, &id) || !id.same_pidns)
		return;
	fd = (int)syscall(SYS_pidfd_open, id.pid, 0);
	if (fd < 0)
		return;
	t->watch_fd = fd;
	epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
}

/* Hold the node's door if nobody of the node does. */
static void tcp_door_try(struct tp_tcp *t)
{
	struct node *node = &t->e->hca->node;
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &t->door_ev };
	uint32_t owner;
	int fd;

	if (t->door_fd >= 0)
		return;
	owner = atomic_load(&node->seg->door_owner);
	if (owner && owner <= IBEMU_MAX_PROCS &&
	    node_proc_holds(node, (int32_t)owner - 1,
			    atomic_load(&node->seg->door_token))) {
		t->door_foreign = false;
		tcp_door_watch(t);
		return;
	}
	fd = tcp_listen_on(t->door_port, true, NULL);
	if (fd < 0) {
		/* Several nodes in one network namespace (IBEMU_NODE)
		 * share its addresses: only one can be reached from
		 * other hosts.  Said in debug and by `ibemu status`. */
		if (!t->door_foreign)
			ibemu_log_dbg("the door port %u is held by a process "
				      "of another node in this network "
				      "namespace: this node is not reachable "
				      "from other nodes (IBEMU_TCP_PORT)",
				      t->door_port);
		t->door_foreign = true;
		return;
	}
	t->door_foreign = false;
	t->door_fd = fd;
	atomic_store(&node->seg->door_token, node->token);
	atomic_store(&node->seg->door_owner, (uint32_t)node->proc_slot + 1);
	epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
}

static void tcp_door_release(struct tp_tcp *t)
{
	struct node *node = &t->e->hca->node;
	uint32_t mine = (uint32_t)node->proc_slot + 1;

	if (t->door_fd < 0)
		return;
	close(t->door_fd);
	t->door_fd = -1;
	atomic_compare_exchange_strong(&node->seg->door_owner, &mine, 0);
}

/* ---- the network thread ---- */

static void tcp_retry_stalled(struct tp_tcp *t)
{
	unsigned int i, stalled = 0;
	struct tcp_conn *c;

	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || !c->rx_stalled ||
		    !tcp_conn_live(c))
			continue;
		tcp_conn_readable(t, c);
		if (c->rx_stalled)
			stalled++;
		else
			tcp_rearm(t, c);
	}
	t->nr_stalled = stalled;
}

/*
 * A LID from the fabric file may also be the one another node derives
 * from its address: ask the node at the address our LID would name.
 */
static void tcp_probe_own_lid(struct tp_tcp *t)
{
	const struct node_seg *seg = t->e->hca->node.seg;
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_QPN) };
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct tcp_lookup_reply r;
	uint8_t ip4[4];

	if (!(seg->fabric.flags & NODE_FABRIC_FILE) || !seg->fabric.ip4[0] ||
	    !fabric_ip4_for_lid(seg->fabric.ip4, seg->fabric.prefix4,
				seg->lid, ip4) ||
	    !memcmp(ip4, seg->fabric.ip4, 4))
		return;
	in->sin_family = AF_INET;
	memcpy(&in->sin_addr, ip4, 4);
	(void)tcp_lookup(t, &ss, &q, &r, tcp_now_ms() + 500);
}

/*
 * Whether the application busy-polls now: it polled since the thread
 * last looked and polls again within TCP_APP_POLL_NS (a poll loop comes
 * back every microsecond or two).  An application that does not poll
 * costs nothing here.
 */
static bool tcp_app_polling(struct tp_tcp *t)
{
	uint64_t end;

	if (!atomic_exchange(&t->app_polls, false))
		return false;
	end = engine_now_ns() + TCP_APP_POLL_NS;
	do {
		if (atomic_load_explicit(&t->app_polls, memory_order_relaxed))
			return true;
		cpu_relax();
	} while (engine_now_ns() < end);
	return false;
}

/*
 * A connection became readable.  While the application busy-polls, it
 * reads the network itself (tcp_poll): the thread then leaves the
 * connection alone (parked, not re-armed), so a ping-pong neither waits
 * for this thread nor fights it for the connection.
 */
static void tcp_conn_event(struct tp_tcp *t, struct tcp_conn *c)
{
	if (!tcp_conn_live(c))
		return;
	if (atomic_load(&c->state) == TCP_CONN_UP && tcp_app_polling(t)) {
		if (!c->parked) {
			c->parked = true;
			t->nr_parked++;
			if (!t->park_check)
				t->park_check = tcp_now_ms();
		}
		return;
	}
	tcp_conn_readable(t, c);
	if (c->rx_stalled)
		t->nr_stalled++;
	else
		tcp_rearm(t, c);
	/* The application does not poll: its engine's thread may be
	 * napping, deaf to producers (progress.c).  What came is served
	 * here at once, as the application's own poll would (a target
	 * spinning on its memory waits for an RDMA WRITE the engine
	 * places), without a second thread's wake-up. */
	engine_poll(t->e, false);
	if (engine_has_packet(t->e))
		t->e->tp->wake(t->e);
}

/* Every TCP_STALL_MS: once the application has stopped polling, the
 * parked connections are the thread's again. */
static void tcp_unpark(struct tp_tcp *t)
{
	uint64_t now = tcp_now_ms();
	struct tcp_conn *c;
	unsigned int i;

	if (now < t->park_check + TCP_STALL_MS)
		return;
	t->park_check = now;
	if (tcp_app_polling(t))
		return;
	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || !c->parked)
			continue;
		c->parked = false;
		tcp_rearm(t, c);
	}
	t->nr_parked = 0;
	t->park_check = 0;
}

static void *tcp_thread(void *arg)
{
	struct tp_tcp *t = arg;
	struct epoll_event evs[32];
	struct tcp_ev *ev;
	int n, i, timeout;

	tcp_probe_own_lid(t);
	while (!atomic_load(&t->stop)) {
		timeout = t->nr_stalled || t->nr_parked ? TCP_STALL_MS
			  : t->door_fd < 0 && t->watch_fd < 0 ? TCP_DOOR_RETRY_MS
							      : -1;
		n = epoll_wait(t->ep, evs, 32, timeout);
		for (i = 0; i < n; i++) {
			ev = evs[i].data.ptr;
			switch (ev->kind) {
			case TCP_EV_KICK: {
				uint64_t v;

				/* engine_stop, or the engine made room:
				 * look at every stalled connection */
				(void)!read(t->kick, &v, sizeof(v));
				t->nr_stalled++;
				break;
			}
			case TCP_EV_LISTEN:
				tcp_accept(t);
				break;
			case TCP_EV_DOOR:
				tcp_door_accept(t);
				break;
			case TCP_EV_DOOR_CLIENT:
				tcp_door_client_readable(t, ev->ptr);
				break;
			case TCP_EV_WATCH:
				epoll_ctl(t->ep, EPOLL_CTL_DEL, t->watch_fd,
					  NULL);
				close(t->watch_fd);
				t->watch_fd = -1;
				tcp_door_try(t);
				break;
			case TCP_EV_CONN_OUT:
				tcp_conn_writable(ev->ptr);
				break;
			case TCP_EV_CONN:
				tcp_conn_event(t, ev->ptr);
				break;
			}
		}
		if (t->nr_stalled)
			tcp_retry_stalled(t);
		if (t->nr_parked)
			tcp_unpark(t);
		if (t->door_fd < 0 && t->watch_fd < 0)
			tcp_door_try(t);
	}
	return NULL;
}

/* ---- open, close ---- */

static bool tcp_wanted(struct engine *e, bool *forced)
{
	const char *v = getenv("IBEMU_TRANSPORT");
	const char *net = getenv("IBEMU_NET");

	*forced = v && !strcmp(v, "tcp");
	if (v && *v && strcmp(v, "tcp") && strcmp(v, "shm"))
		ibemu_log_warn("IBEMU_TRANSPORT=%s: not shm or tcp, ignored",
			       v);
	if (net && !strcmp(net, "0") && !*forced)
		return false;
	return *forced ||
	       (e->hca->node.seg->fabric.flags & NODE_FABRIC_MULTI);
}

static int tcp_open(struct engine *e)
{
	struct tp_tcp *t;
	struct epoll_event ev = { .events = EPOLLIN };
	bool forced;
	int ret;

	if (!tcp_wanted(e, &forced))
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	t->e = e;
	t->forced = forced;
	t->door_fd = t->watch_fd = -1;
	t->door_port = fabric_door_port();
	pthread_mutex_init(&t->lock, NULL);
	t->kick_ev.kind = TCP_EV_KICK;
	t->listen_ev.kind = TCP_EV_LISTEN;
	t->door_ev.kind = TCP_EV_DOOR;
	t->watch_ev.kind = TCP_EV_WATCH;
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	t->kick = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->ep < 0 || t->kick < 0) {
		ret = errno;
		goto err;
	}
	t->lfd = tcp_listen_on(0, false, &t->port);
	if (t->lfd < 0) {
		ret = -t->lfd;
		ibemu_log_err("tcp: cannot listen: %s", strerror(ret));
		goto err;
	}
	ev.data.ptr = &t->kick_ev;
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->kick, &ev);
	ev.data.ptr = &t->listen_ev;
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->lfd, &ev);
	atomic_store(&e->hca->node.seg->procs[e->hca->node.proc_slot].tcp_port,
		     t->port);
	e->net_priv = t;
	tcp_door_try(t);
	ret = pthread_create(&t->thread, NULL, tcp_thread, t);
	if (ret) {
		e->net_priv = NULL;
		tcp_door_release(t);
		goto err;
	}
	return 0;
err:
	if (t->lfd > 0)
		close(t->lfd);
	if (t->kick >= 0)
		close(t->kick);
	if (t->ep >= 0)
		close(t->ep);
	free(t);
	return ret;
}

/*
 * Free the transport: its descriptors and memory.  owner: this process
 * made them, and its entries in the node segment are cleared too; not
 * so in a forked child (tcp_forget), whose descriptors are copies of the
 * parent's conversations, to be closed and nothing else.
 */
static void tcp_free(struct engine *e, bool owner)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	unsigned int i;

	for (i = 0; i < TCP_DOOR_CLIENTS; i++)
		if (t->door_clients[i]) {
			close(t->door_clients[i]->fd);
			free(t->door_clients[i]);
		}
	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c)
			continue;
		if (c->fd >= 0)
			close(c->fd);
		if (c->wfd >= 0)
			close(c->wfd);
		if (owner && tcp_pub(c))
			atomic_store(&tcp_pub(c)->owner, 0);
		free(c->tx);
		free(c->rx);
		free(c->stage);
		free(c);
	}
	if (t->door_fd >= 0)
		close(t->door_fd);
	if (t->watch_fd >= 0)
		close(t->watch_fd);
	close(t->lfd);
	close(t->kick);
	close(t->ep);
	free(t);
	e->net_priv = NULL;
}

static void tcp_close(struct engine *e)
{
	struct tp_tcp *t = tp_tcp(e);
	struct node *node = &e->hca->node;
	uint64_t one = 1;

	if (!t)
		return;
	/* ACKs held back are owed to peers still waiting for them. */
	tcp_flush_deferred(e);
	atomic_store(&t->stop, true);
	(void)!write(t->kick, &one, sizeof(one));
	pthread_join(t->thread, NULL);
	tcp_door_release(t);
	atomic_store(&node->seg->procs[node->proc_slot].tcp_port, 0);
	tcp_free(e, true);
}

/* In a forked child: the sockets are the parent's conversations. */
static void tcp_forget(struct engine *e)
{
	if (tp_tcp(e))
		tcp_free(e, false);
}

/* Known to run: not knowable across nodes; a congested connection shows
 * its progress through peer_taken instead. */
static bool tcp_peer_runs(struct engine *e, int32_t slot)
{
	(void)e;
	(void)slot;
	return false;
}

const struct transport_ops tp_tcp_ops = {
	.name = "tcp",
	.open = tcp_open,
	.close = tcp_close,
	.forget = tcp_forget,
	.peer_get = tcp_peer_get,
	.peer_is_self = tcp_peer_is_self,
	.peer_taken = tcp_peer_taken,
	.peer_runs = tcp_peer_runs,
	.pkt_claim = tcp_pkt_claim,
	.pkt_send = tcp_pkt_send,
	.room = tcp_room,
	.poll = tcp_poll,
	.poll_done = tcp_poll_done,
	.flush = tcp_flush_deferred,
};
