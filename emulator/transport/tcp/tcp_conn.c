// SPDX-License-Identifier: MIT
/*
 * The TCP transport's connections (tcp_int.h): their states, their
 * entries in conns[], their sockets under epoll, connecting to a remote
 * process, and what a remote slot names (tp_tcp.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "tcp_int.h"
#include "tp_tcp.h"

void tcp_conn_dead(struct tcp_conn *c, int err)
{
	char a[INET6_ADDRSTRLEN];

	if (atomic_exchange(&c->state, TCP_CONN_DEAD) == TCP_CONN_DEAD)
		return;
	atomic_store(&c->t->reap_now, true);
	ibemu_log_dbg("tcp: connection to %s slot %d lost: %s",
		      tcp_addr_str(&c->addr, a, sizeof(a)), c->rslot,
		      strerror(err));
	if (tcp_pub(c))
		atomic_store_explicit(&tcp_pub(c)->state, NODE_NET_DOWN,
				      memory_order_relaxed);
}

/* A new entry in conns[] (tcp.lock held), fd not open yet, with the
 * buffer of a greeting only (tcp_conn_buffers gives it the rest). */
struct tcp_conn *tcp_conn_new_locked(struct tp_tcp *t)
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
	c->rx = malloc(TCP_RX_HELLO_CAP);
	c->stage = malloc(sizeof(*c->stage));
	if (!c->rx || !c->stage) {
		free(c->rx);
		free(c->stage);
		free(c);
		return NULL;
	}
	c->rx_cap = TCP_RX_HELLO_CAP;
	c->base.tp = &tp_tcp_ops;
	c->t = t;
	c->ev.kind = TCP_EV_CONN;
	c->ev.ptr = c;
	c->wev.kind = TCP_EV_CONN_OUT;
	c->wev.ptr = c;
	c->wfd = -1;
	/* The generation wraps long before the slot would overflow. */
	t->gens[i] = (t->gens[i] + 1) & 0xfffff;
	c->slot = IBEMU_MAX_PROCS + (int32_t)i +
		  (int32_t)(t->gens[i] * TCP_MAX_CONNS);
	c->fd = -1;
	c->pub = -1;
	c->hello_by = tcp_now_ms() + TCP_HELLO_MS;
	atomic_init(&c->rx_at, tcp_now_ms());
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
bool tcp_conn_carries_data(struct tcp_conn *c)
{
	int state = atomic_load(&c->state);

	return state == TCP_CONN_UP ||
	       ((state == TCP_CONN_DEAD || state == TCP_CONN_ATTACHING) &&
		atomic_load(&c->rx_drain));
}

/* Whether c has a socket to read: greeted, being greeted, or dead
 * with something still to read. */
bool tcp_conn_live(struct tcp_conn *c)
{
	return atomic_load(&c->state) == TCP_CONN_HELLO ||
	       tcp_conn_carries_data(c);
}

/* Let the network thread read c once more (EPOLLONESHOT).  Under
 * rx_lock: a resolver may put a new socket under a dead c meanwhile
 * (tcp_conn_attach), and the old one's number may then be another's. */
void tcp_rearm(struct tp_tcp *t, struct tcp_conn *c)
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
int tcp_conn_register(struct tp_tcp *t, struct tcp_conn *c, int fd)
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

void tcp_conn_close_fds(struct tp_tcp *t, struct tcp_conn *c)
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
	atomic_store(&c->rx_at, tcp_now_ms());
	c->tx_head = c->tx_tail = 0;
	c->tx_reg = c->tx_armed = false;
	atomic_store(&c->out_fired, false);
	atomic_store_explicit(&c->tx_backlog, false, memory_order_relaxed);
	c->rx_len = 0;
	atomic_store_explicit(&c->rx_stalled, false, memory_order_relaxed);
	c->parked = false;
	atomic_store(&c->rx_drain, false);
	if (tcp_conn_buffers(c)) {
		tcp_conn_dead(c, ENOMEM);
	} else {
		/* UP before the socket is registered: its first event may
		 * come at once (the peer wrote, or went, as it greeted),
		 * and one that finds c not live is dropped without a
		 * re-arm (EPOLLONESHOT), leaving c deaf.  The reader it
		 * wakes waits for rx_lock, held here. */
		atomic_store(&c->state, TCP_CONN_UP);
		if (tcp_conn_register(t, c, fd))
			tcp_conn_dead(c, errno);
	}
	pthread_mutex_unlock(&c->tx_lock);
	pthread_mutex_unlock(&c->rx_lock);
	tcp_publish(t, c);
}

/* The connection to the process (node, slot, token), connecting to its
 * port if there is none up: its slot, or -errno. */
int32_t tcp_conn_to(struct tp_tcp *t,
		    const struct sockaddr_storage *node_addr,
		    int32_t rslot, uint64_t token, uint16_t port,
		    uint16_t lid, uint64_t deadline)
{
	struct tcp_conn *c = NULL, *dead = NULL;
	int32_t dead_slot = -1;
	struct sockaddr_storage to = *node_addr;
	struct tcp_hello hello = { 0 }, rh, proof;
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
			atomic_store(&c->used, true);
			pthread_mutex_unlock(&t->lock);
			return c->slot;
		}
		if (atomic_load(&c->state) == TCP_CONN_DEAD) {
			dead = c;
			dead_slot = c->slot;
		}
	}
	pthread_mutex_unlock(&t->lock);

	tcp_set_port(&to, port);
	err = tcp_connect(&to, deadline, &fd);
	if (err)
		return -EHOSTUNREACH;
	hello.lid = htobe16(t->e->hca->node.seg->lid);
	hello.port = htobe16(t->port);
	err = tcp_key_hello_out(t, &hello);
	if (!err)
		err = tcp_exchange(t, fd, TP_FRAME_HELLO, &hello,
				   sizeof(hello), TP_FRAME_HELLO, &rf, &rh,
				   sizeof(rh), deadline);
	if (err || be64toh(rf.src_token) != token ||
	    (int32_t)be32toh(rf.src_slot) != rslot) {
		/* Not the process the door named: it went meanwhile. */
		close(fd);
		return err == ETIMEDOUT ? -EHOSTUNREACH : -ENOENT;
	}
	/* With a fabric key, both prove it before any data (tcp_key.c). */
	if (!tcp_key_connected(t, &to, &hello, &rh, &proof) ||
	    (t->key.set && tcp_send_frame(t, fd, TP_FRAME_HELLO, &proof,
					  sizeof(proof), deadline))) {
		close(fd);
		return -EHOSTUNREACH;
	}
	pthread_mutex_lock(&t->lock);
	/* Another resolver may have revived it meanwhile, or the network
	 * thread given it back (tcp_reap): looked up again by its slot. */
	if (dead && (tcp_conn_at(t, dead_slot) != dead ||
		     atomic_load(&dead->state) != TCP_CONN_DEAD))
		dead = NULL;
	c = dead ? dead : tcp_conn_new_locked(t);
	if (!c) {
		pthread_mutex_unlock(&t->lock);
		close(fd);
		return -ENOMEM;
	}
	atomic_store(&c->state, TCP_CONN_ATTACHING);
	atomic_store(&c->used, true);
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

bool tp_tcp_peer_info(struct engine *e, int32_t slot,
		      struct tp_peer_info *info)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	bool ok = false;

	if (!t)
		return false;
	pthread_mutex_lock(&t->lock);
	c = tcp_conn_at(t, slot);
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

/* Connections a and b (slots) were greeted by one process: the same
 * node address, slot and token. */
bool tcp_same_process(struct engine *e, int32_t a, int32_t b)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *x, *y;
	bool same = false;

	if (!t)
		return false;
	pthread_mutex_lock(&t->lock);
	x = tcp_conn_at(t, a);
	y = tcp_conn_at(t, b);
	if (x && y && atomic_load(&x->state) != TCP_CONN_HELLO &&
	    atomic_load(&y->state) != TCP_CONN_HELLO)
		same = x->token == y->token && x->rslot == y->rslot &&
		       tcp_same_node(&x->addr, &y->addr);
	pthread_mutex_unlock(&t->lock);
	return same;
}

int tp_tcp_peer_watch_fd(struct engine *e, int32_t slot, uint64_t token)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	int fd = -1;

	errno = ENOENT;
	if (!t)
		return -1;
	pthread_mutex_lock(&t->lock);
	c = tcp_conn_at(t, slot);
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
