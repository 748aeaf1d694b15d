// SPDX-License-Identifier: MIT
/*
 * The TCP transport: packets between processes of different nodes
 * (doc/design.md §22 "Several nodes: the TCP transport"), one TCP
 * connection per pair of processes, multiplexing their QPs, opened when a
 * destination is first resolved (tp_tcp.h).
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
 * The transport's files: tcp_int.h (its structures, limits and lock
 * rule), tcp_sock.c (addresses, sockets, frames), tcp_status.c
 * (publication for `ibemu status`), tcp_conn.c (connections),
 * tcp_resolve.c (resolution at a node's door), tcp_send.c (sending),
 * tcp_recv.c (receiving), tcp_door.c (the door), tcp_thread.c (the
 * network thread); this one opens and closes the transport and holds
 * its ops.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "fabric.h"
#include "log.h"
#include "tcp_int.h"
#include "tp_tcp.h"

static bool tcp_forced(struct engine *e)
{
	return e->net_priv && tp_tcp(e)->forced;
}

bool tp_tcp_net_on(void)
{
	const char *v = getenv("IBEMU_NET");

	if (!v || !*v || !strcmp(v, "0"))
		return false;
	if (!strcmp(v, "1"))
		return true;
	ibemu_log_warn("IBEMU_NET=%s: not 0 or 1; network mode stays off", v);
	return false;
}

/*
 * Whether this process opens the transport, and on which address
 * (doc/design.md §22, "Network mode"): in network mode (IBEMU_NET=1)
 * on the node's fabric address alone; with IBEMU_TRANSPORT=tcp and no
 * network mode on loopback, where no other host reaches it; else not
 * at all, so a program not told to use the network opens no socket.
 */
static bool tcp_wanted(struct engine *e, bool *forced,
		       struct sockaddr_storage *at)
{
	const struct node_fabric *f = &e->hca->node.seg->fabric;
	const char *v = getenv("IBEMU_TRANSPORT");
	struct sockaddr_in *in = (struct sockaddr_in *)at;
	bool net = tp_tcp_net_on();

	*forced = v && !strcmp(v, "tcp");
	if (v && *v && strcmp(v, "tcp") && strcmp(v, "shm"))
		ibemu_log_warn("IBEMU_TRANSPORT=%s: not shm or tcp, ignored",
			       v);
	memset(at, 0, sizeof(*at));
	in->sin_family = AF_INET;
	in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (net && (f->flags & NODE_FABRIC_MULTI) &&
	    (f->ip4[0] | f->ip4[1] | f->ip4[2] | f->ip4[3])) {
		memcpy(&in->sin_addr, f->ip4, 4);
		return true;
	}
	if (net && !*forced)
		ibemu_log_warn("IBEMU_NET=1, but this node has no IPv4 "
			       "address on the fabric (IBEMU_IFACE, "
			       "IBEMU_SUBNET, IBEMU_FABRIC): it stays alone");
	return *forced;
}

/* node_addr (port ignored) as the transport reaches it: this node's
 * own address, or loopback, is the bind address (tcp_wanted). */
void tcp_node_addr(const struct tp_tcp *t,
		   const struct sockaddr_storage *node_addr,
		   struct sockaddr_storage *out)
{
	const struct node_fabric *f = &t->e->hca->node.seg->fabric;
	struct sockaddr_in self = { .sin_family = AF_INET };
	struct sockaddr_storage ss = { 0 };
	uint8_t a[16];

	memcpy(&self.sin_addr, f->ip4, 4);
	memcpy(&ss, &self, sizeof(self));
	sockaddr_addr16(node_addr, a);
	*out = *node_addr;
	if (tcp_same_node(node_addr, &ss) ||
	    (a[10] == 0xff && a[11] == 0xff && a[12] == 127))
		*out = t->bind_addr;
	tcp_set_port(out, 0);
}

static int tcp_open(struct engine *e)
{
	struct tp_tcp *t;
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage at;
	bool forced;
	int ret;

	if (!tcp_wanted(e, &forced, &at))
		return 0;
	t = calloc(1, sizeof(*t));
	if (!t)
		return ENOMEM;
	t->e = e;
	t->forced = forced;
	t->bind_addr = at;
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
	t->lfd = -1;
	ret = tcp_key_open(t);
	if (ret)
		goto err;
	t->lfd = tcp_listen_on(&t->bind_addr, 0, false, &t->port);
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
	tcp_exit_add(t);
	return 0;
err:
	if (t->lfd >= 0)
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
	tcp_reap_free(t);
	if (t->door_fd >= 0)
		close(t->door_fd);
	if (t->watch_fd >= 0)
		close(t->watch_fd);
	close(t->lfd);
	close(t->kick);
	close(t->ep);
	fabric_key_clear(&t->key);
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
	tcp_exit_remove(t);
	tcp_flush_deferred(e, true);
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
	tcp_exit_forget();
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

static const struct tp_net_ops tcp_net_ops = {
	.forced = tcp_forced,
	.resolve_qpn = tp_tcp_resolve_qpn,
	.resolve_cm = tp_tcp_resolve_cm,
	.probe_node = tp_tcp_probe_node,
	.peer_info = tp_tcp_peer_info,
	.peer_watch_fd = tp_tcp_peer_watch_fd,
	.seed_qpn = tp_tcp_seed_qpn,
	.same_process = tcp_same_process,
};

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
	.flush = tcp_net_flush,
	.net = &tcp_net_ops,
};
