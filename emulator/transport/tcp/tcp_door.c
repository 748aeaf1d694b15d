// SPDX-License-Identifier: MIT
/*
 * The TCP transport's door (tcp_int.h): the node's door port, held by
 * one process of the node, answering lookups from the node segment, and
 * taken over by another when its holder exits.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "tcp_int.h"

/* The asker's node as a connected QP's peer is published
 * (node_qp_publish_peer): loopback is this node's own address. */
static void tcp_door_asker(const struct tp_tcp *t,
			   const struct sockaddr_storage *from, uint8_t a[16])
{
	const struct node_fabric *f = &t->e->hca->node.seg->fabric;

	sockaddr_addr16(from, a);
	if (a[10] == 0xff && a[11] == 0xff && a[12] == 127 &&
	    (f->flags & NODE_FABRIC_MULTI))
		memcpy(a + 12, f->ip4, 4);
}

static void tcp_door_answer(struct tp_tcp *t, const struct tcp_lookup *q,
			    const struct sockaddr_storage *from,
			    struct tcp_lookup_reply *r)
{
	uint8_t asker[16];
	struct node *node = &t->e->hca->node;
	int32_t slot = -1;
	uint64_t token = 0;
	uint32_t port;
	int err = 0;

	memset(r, 0, sizeof(*r));
	switch (be32toh(q->kind)) {
	case TCP_LOOKUP_QPN:
		slot = node_qpn_owner_slot(node, be32toh(q->qpn) & BTH_QPN_MASK);
		tcp_door_asker(t, from, asker);
		/* A connected QP is its peer's business alone. */
		if (slot < 0 ||
		    !node_qp_reachable(node, be32toh(q->qpn) & BTH_QPN_MASK,
				       asker))
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

/* Close d.  Its memory waits for tcp_reap: an event of the batch being
 * served may still name it (d->fd -1 then says it is done). */
void tcp_door_client_done(struct tp_tcp *t, struct tcp_door_client *d)
{
	unsigned int i;

	epoll_ctl(t->ep, EPOLL_CTL_DEL, d->fd, NULL);
	close(d->fd);
	d->fd = -1;
	for (i = 0; i < TCP_DOOR_CLIENTS; i++)
		if (t->door_clients[i] == d)
			t->door_clients[i] = NULL;
	d->next_done = t->door_done;
	t->door_done = d;
}

void tcp_door_client_readable(struct tp_tcp *t,
			      struct tcp_door_client *d)
{
	uint8_t out[sizeof(struct tp_frame_hdr) +
		    sizeof(struct tcp_lookup_reply)];
	struct tcp_lookup_reply r;
	struct tp_frame_hdr f;
	struct tcp_lookup q;
	ssize_t n;

	if (d->fd < 0)
		return;
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
		tcp_door_answer(t, &q, &d->from, &r);
		tcp_key_door_reply(t, &q, &r);
		tcp_frame_init(t, &f, TP_FRAME_LOOKUP_REPLY, sizeof(r), -1);
		memcpy(out, &f, sizeof(f));
		memcpy(out + sizeof(f), &r, sizeof(r));
		/* A fresh connection's socket takes these bytes. */
		(void)!send(d->fd, out, sizeof(out),
			    MSG_DONTWAIT | MSG_NOSIGNAL);
	}
	tcp_door_client_done(t, d);
}

/*
 * The door table's entry for a client from `from`: a free one, else the
 * oldest of that address when it holds TCP_DOOR_PER_SOURCE, else the
 * oldest of all, whose client is closed (tcp_reap.c): clients that
 * hold connections open cannot keep the door from one that asks.
 */
static unsigned int tcp_door_slot(struct tp_tcp *t,
				  const struct sockaddr_storage *from)
{
	unsigned int i, free_i = TCP_DOOR_CLIENTS, old = 0, old_src = 0;
	unsigned int n_src = 0;
	struct tcp_door_client *d;

	for (i = 0; i < TCP_DOOR_CLIENTS; i++) {
		d = t->door_clients[i];
		if (!d) {
			if (free_i == TCP_DOOR_CLIENTS)
				free_i = i;
			continue;
		}
		if (!t->door_clients[old] ||
		    d->by < t->door_clients[old]->by)
			old = i;
		if (tcp_same_node(&d->from, from) &&
		    (!n_src++ || d->by < t->door_clients[old_src]->by))
			old_src = i;
	}
	if (n_src >= TCP_DOOR_PER_SOURCE)
		free_i = old_src;
	else if (free_i == TCP_DOOR_CLIENTS)
		free_i = old;
	if (t->door_clients[free_i])
		tcp_door_client_done(t, t->door_clients[free_i]);
	return free_i;
}

void tcp_door_accept(struct tp_tcp *t)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sockaddr_storage from;
	struct tcp_door_client *d;
	socklen_t len;
	unsigned int i;
	int fd;

	for (;;) {
		len = sizeof(from);
		fd = accept4(t->door_fd, (struct sockaddr *)&from, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			tcp_accept_pause(t, errno);
			return;
		}
		atomic_store(&t->reap_now, true); /* a deadline starts */
		d = calloc(1, sizeof(*d));
		if (!d) {
			close(fd); /* the asker retries */
			continue;
		}
		i = tcp_door_slot(t, &from);
		d->ev.kind = TCP_EV_DOOR_CLIENT;
		d->ev.ptr = d;
		d->fd = fd;
		d->from = from;
		d->by = tcp_now_ms() + TCP_DOOR_IDLE_MS;
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
void tcp_door_try(struct tp_tcp *t)
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
	fd = tcp_listen_on(&t->bind_addr, t->door_port, true, NULL);
	if (fd < 0) {
		/* Several nodes in one network namespace (IBEMU_NODE, or
		 * two users) share its addresses: only one can be reached
		 * from other hosts.  Said once, and by `ibemu status`. */
		if (!t->door_foreign)
			ibemu_log_warn("the door port %u is held by another "
				       "node in this network namespace (of "
				       "IBEMU_NODE or another user): this "
				       "node is not reachable from other "
				       "nodes; give each node its own "
				       "IBEMU_TCP_PORT", t->door_port);
		t->door_foreign = true;
		return;
	}
	t->door_foreign = false;
	t->door_fd = fd;
	atomic_store(&node->seg->door_token, node->token);
	atomic_store(&node->seg->door_owner, (uint32_t)node->proc_slot + 1);
	epoll_ctl(t->ep, EPOLL_CTL_ADD, fd, &ev);
}

void tcp_door_release(struct tp_tcp *t)
{
	struct node *node = &t->e->hca->node;
	uint32_t mine = (uint32_t)node->proc_slot + 1;

	if (t->door_fd < 0)
		return;
	close(t->door_fd);
	t->door_fd = -1;
	atomic_compare_exchange_strong(&node->seg->door_owner, &mine, 0);
}
