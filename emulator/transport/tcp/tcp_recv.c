// SPDX-License-Identifier: MIT
/*
 * The TCP transport's receiving (tcp_int.h), by the network thread or
 * the application's poll: reading a connection, checking its frames and
 * handing their packets to the engine or the inbox, answering a HELLO,
 * flushing a socket that takes more, accepting connections.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"
#include "log.h"
#include "tcp_int.h"

/* The SLID of a frame: one of the connection's node's port LIDs (port
 * 1's, the connection's, or port 2's as the subnet derives it,
 * fabric_port2_lid_for), else the connection's: never a LID the frame
 * alone claims. */
static uint16_t tcp_frame_slid(const struct tcp_conn *c,
			       const struct tp_frame_hdr *f)
{
	uint16_t slid = be16toh(f->slid);
	const struct node_fabric *fab = &c->t->e->hca->node.seg->fabric;

	if (slid && slid == fabric_port2_lid_for(c->lid, fab->prefix4))
		return slid;
	return c->lid;
}

/* Deliver one checked DATA frame into our inbox: false if it is full. */
static bool tcp_deliver(struct tcp_conn *c, const struct tp_frame_hdr *f,
			const uint8_t *body)
{
	struct engine *e = c->t->e;
	struct tp_peer *self = e->tp->self ? e->tp->self(e) : NULL;
	bool grh = f->flags & TP_FRAME_F_GRH;
	uint32_t len = be32toh(f->len) - (grh ? sizeof(struct tp_frame_grh) : 0);
	struct tp_pkt pkt = { .src_proc = e->hca->node.proc_slot };
	struct tp_frame_grh g;

	/* Into this process's own packets, as a producer of the node
	 * (transport.h, self). */
	if (!self || !e->tp->pkt_claim(self, &pkt))
		return false;
	tp_frame_link_get(pkt.hdr, f, len, c->slot, grh ? PKT_F_GRH : 0);
	pkt.hdr->slid = tcp_frame_slid(c, f);
	if (grh) {
		memcpy(&g, body, sizeof(g));
		tp_frame_grh_get(pkt.grh, &g);
		body += sizeof(g);
	}
	memcpy(pkt.data, body, len);
	e->tp->pkt_send(self, &pkt);
	return true;
}

static void tcp_reply_hello(struct tcp_conn *c, const struct tp_frame_hdr *f,
			    const uint8_t *body)
{
	struct tp_tcp *t = c->t;
	struct tcp_hello h, mine = { 0 };
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(mine)];
	char a[INET6_ADDRSTRLEN];
	uint16_t exp;
	struct tp_frame_hdr out;

	memcpy(&h, body, sizeof(h));
	/* Buffers are the greeted's (the HELLO was read into a small one;
	 * the caller reads c->rx afresh). */
	if (tcp_conn_buffers(c)) {
		tcp_conn_dead(c, ENOMEM);
		return;
	}
	/* Who greeted: read by resolvers under tcp.lock (tcp_conn_to). */
	pthread_mutex_lock(&t->lock);
	c->guid = be64toh(f->src_guid);
	c->token = be64toh(f->src_token);
	c->rslot = (int32_t)be32toh(f->src_slot);
	c->lid = be16toh(h.lid);
	tcp_set_port(&c->addr, be16toh(h.port));
	pthread_mutex_unlock(&t->lock);
	tcp_lid_check(t, c->lid, c->guid, &c->addr);
	/* The SLID of what comes by c is the one the fabric gives the
	 * connection's address where it gives one (derived, or the fabric
	 * file), not the one the peer claims. */
	exp = fabric_expected_lid(&t->e->hca->node, &c->addr);
	if (exp && exp != c->lid) {
		ibemu_log_dbg("tcp: the node at %s greets with LID %u, its "
			      "address gives %u: %u taken",
			      tcp_addr_str(&c->addr, a, sizeof(a)), c->lid,
			      exp, exp);
		c->lid = exp;
	}
	mine.lid = htobe16(t->e->hca->node.seg->lid);
	mine.port = htobe16(t->port);
	if (!tcp_key_accept(t, c, &h, &mine)) {
		tcp_conn_dead(c, EACCES);
		return;
	}
	tcp_frame_init(t, &out, TP_FRAME_HELLO, sizeof(mine), c->rslot);
	memcpy(buf, &out, sizeof(out));
	memcpy(buf + sizeof(out), &mine, sizeof(mine));
	/* The first bytes on a new connection: the socket takes them. */
	if (send(c->fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(buf)) {
		tcp_conn_dead(c, errno ? errno : EPROTO);
		return;
	}
	if (c->await_proof)
		return; /* UP at its proof (tcp_hello_proof) */
	atomic_store(&c->state, TCP_CONN_UP);
	tcp_publish(t, c);
}

/* The connecting side's second HELLO, its proof of the fabric key. */
static void tcp_hello_proof(struct tcp_conn *c, const uint8_t *body)
{
	struct tcp_hello h;

	memcpy(&h, body, sizeof(h));
	if (!tcp_key_proven(c->t, c, &h)) {
		tcp_conn_dead(c, EACCES);
		return;
	}
	atomic_store(&c->state, TCP_CONN_UP);
	tcp_publish(c->t, c);
}

/*
 * Whether a DATA frame's GRH names, as its source, the node its
 * connection greeted from.  A link-local SGID (fe80::/64 + port GUID,
 * IBA 4.1.1) must carry the greeted node's port GUID.  An IP one must be
 * the connection's own remote address, as RoCEv2 carries the SGID as the
 * IP source address (IBA Annex A17, RoCEv2): a v4-mapped SGID over an IPv4
 * connection, a global IPv6 one over an IPv6 connection (over loopback:
 * one of this node's GIDs).  An IPv6 SGID over an IPv4 connection, or the
 * reverse, names no address the connection proved, and is dropped.
 * Frames without a GRH name no source beyond the connection.
 */
static bool tcp_frame_src_ok(const struct tcp_conn *c,
			     const struct tp_frame_hdr *f, const uint8_t *body)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	static const uint8_t v6loop[16] = { [15] = 1 };
	struct tp_frame_grh g;
	uint8_t a[16];
	uint64_t iid;

	if (!(f->flags & TP_FRAME_F_GRH))
		return true;
	memcpy(&g, body, sizeof(g));
	if (g.sgid[0] == 0xfe && (g.sgid[1] & 0xc0) == 0x80) {
		iid = htobe64(c->guid);
		return !memcmp(g.sgid + 8, &iid, 8);
	}
	sockaddr_addr16(&c->addr, a);
	/* Over loopback: this node's processes, by its GIDs. */
	if ((!memcmp(a, v4mapped, sizeof(v4mapped)) && a[12] == 127) ||
	    !memcmp(a, v6loop, sizeof(v6loop)))
		return fabric_gid_is_local(&c->t->e->hca->node, g.sgid);
	return !memcmp(g.sgid, a, 16);
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
	h.slid = tcp_frame_slid(c, f);
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

	atomic_store_explicit(&c->rx_stalled, false, memory_order_relaxed);
	while (c->rx_len - off >= sizeof(f)) {
		memcpy(&f, c->rx + off, sizeof(f));
		if (!tp_frame_check(&f)) {
			ok = false;
			break;
		}
		flen = (uint32_t)sizeof(f) + be32toh(f.len);
		if (c->rx_len - off < flen)
			break;
		/* A frame whose GRH names another source is dropped. */
		if (f.type == TP_FRAME_DATA &&
		    !tcp_frame_src_ok(c, &f, c->rx + off + sizeof(f))) {
			off += flen;
			continue;
		}
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
				atomic_store_explicit(&c->rx_stalled, true,
						      memory_order_relaxed);
				break;
			}
			if (tcp_pub(c)) {
				tcp_count(&tcp_pub(c)->rx_pkts, 1);
				tcp_count(&tcp_pub(c)->rx_bytes, flen);
			}
		} else if (f.type == TP_FRAME_HELLO &&
			   atomic_load(&c->state) == TCP_CONN_HELLO &&
			   be32toh(f.len) == sizeof(struct tcp_hello)) {
			if (c->await_proof)
				tcp_hello_proof(c, c->rx + off + sizeof(f));
			else
				tcp_reply_hello(c, &f, c->rx + off + sizeof(f));
			if (atomic_load(&c->state) == TCP_CONN_DEAD) {
				ok = false;
				break;
			}
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

void tcp_room(struct engine *e)
{
	uint64_t one = 1;

	(void)!write(tp_tcp(e)->kick, &one, sizeof(one));
}

/* Read what c has, the bytes taken; caller holds c->rx_lock.  poller:
 * the application's poll, which stops at a short read. */
static uint32_t tcp_conn_readable_locked(struct tp_tcp *t, struct tcp_conn *c,
					 bool poller)
{
	bool direct = false, tried = false;
	uint32_t taken = 0, want;
	ssize_t n;
	int err = 0;

	/* A greeted connection's data (not its HELLO, which a peer waits
	 * for) is what a loaded machine reads late. */
	if (atomic_load_explicit(&c->state, memory_order_relaxed) ==
	    TCP_CONN_UP)
		fault_point(FAULT_AT_NETREAD);
	atomic_store_explicit(&c->rx_at, tcp_now_ms(), memory_order_relaxed);
	/* At most TCP_READ_BUDGET a call: a peer that never stops
	 * sending (a flood) leaves the thread to the other connections;
	 * it is read again at its next event (EPOLLONESHOT, re-armed). */
	while (!atomic_load_explicit(&c->rx_stalled, memory_order_relaxed) &&
	       taken < TCP_READ_BUDGET) {
		if (c->rx_len == c->rx_cap) {
			/* A frame is at most TCP_FRAME_ROOM: a full buffer
			 * parses, or the peer is not speaking frames. */
			err = EPROTO;
			break;
		}
		want = c->rx_cap - c->rx_len;
		n = recv(c->fd, c->rx + c->rx_len, want, MSG_DONTWAIT);
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
		taken += (uint32_t)n;
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
		/* Less than asked for: the socket had no more.  Asking
		 * again would cost a busy poller's ping-pong a system call
		 * a message (EAGAIN) before its reply; what comes later is
		 * its next poll's. */
		if (poller && (uint32_t)n < want)
			break;
	}
	if (atomic_load_explicit(&c->rx_stalled, memory_order_relaxed) &&
	    !err) {
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
	return taken;
}

bool tcp_conn_readable(struct tp_tcp *t, struct tcp_conn *c,
		       uint32_t *taken_p)
{
	bool stalled = false;
	uint32_t taken = 0;

	pthread_mutex_lock(&c->rx_lock);
	if (tcp_conn_live(c)) {
		taken = tcp_conn_readable_locked(t, c, false);
		stalled = atomic_load_explicit(&c->rx_stalled,
					       memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->rx_lock);
	if (taken_p)
		*taken_p = taken;
	return stalled;
}

/* tcp_poll, on a transport with connections. */
static __attribute__((noinline)) void tcp_poll_conns(struct engine *e)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c, *ready[TCP_POLL_CONNS];
	unsigned int i, n;

	uint64_t now = tcp_now_ms(),
		 armed = atomic_load_explicit(&t->app_armed_ns,
					      memory_order_relaxed);

	/* Written once a clock tick, not at every poll; not by the polls
	 * that follow the arming of a CQ (tcp_app_blocks). */
	if (armed && clock_now_ns() - armed < TCP_APP_ARMED_NS)
		now = 0;
	else if (armed)
		atomic_store_explicit(&t->app_armed_ns, 0,
				      memory_order_relaxed);
	if (now && atomic_load_explicit(&t->app_poll_ms,
					memory_order_relaxed) != now)
		atomic_store_explicit(&t->app_poll_ms, now,
				      memory_order_relaxed);
	tcp_flush_deferred(e, false);
	tcp_app_draining = true;
	/* The entries seen under the lock are read without it (the
	 * engine the reading drives takes it): counted in pollers, they
	 * are not freed meanwhile (tcp_reap). */
	atomic_fetch_add(&t->pollers, 1);
	if (pthread_mutex_trylock(&t->lock)) {
		atomic_fetch_sub(&t->pollers, 1);
		return;
	}
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
		tcp_flush_backlog(c);
		if (pthread_mutex_trylock(&c->rx_lock))
			continue;
		if (tcp_conn_carries_data(c))
			(void)tcp_conn_readable_locked(t, c, true);
		pthread_mutex_unlock(&c->rx_lock);
	}
	atomic_fetch_sub(&t->pollers, 1);
}

/* The application's poll (transport.h): read the connections nobody
 * else is reading now, and hand their sockets what they refused
 * before (the network thread leaves that to a busy poller).  Never blocks.  Most nodes have none: that costs
 * one load. */
void tcp_poll(struct engine *e)
{
	if (atomic_load_explicit(&tp_tcp(e)->has_conns, memory_order_relaxed))
		tcp_poll_conns(e);
}

/* A v4-mapped peer is an IPv4 node. */
static void tcp_addr_unmap(struct sockaddr_storage *from)
{
	struct sockaddr_in in = { .sin_family = AF_INET };
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)from;

	if (from->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	in.sin_port = in6->sin6_port;
	memcpy(&in.sin_addr, &in6->sin6_addr.s6_addr[12], 4);
	memset(from, 0, sizeof(*from));
	memcpy(from, &in, sizeof(in));
}

void tcp_accept(struct tp_tcp *t)
{
	struct sockaddr_storage from;
	socklen_t len = sizeof(from);
	struct tcp_conn *c;
	int fd;

	for (;;) {
		fd = accept4(t->lfd, (struct sockaddr *)&from, &len,
			     SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			tcp_accept_pause(t, errno);
			return;
		}
		atomic_store(&t->reap_now, true); /* a deadline starts */
		len = sizeof(from);
		tcp_sock_opts(fd);
		tcp_addr_unmap(&from);
		pthread_mutex_lock(&t->lock);
		c = tcp_source_full(t, &from) ? NULL : tcp_conn_new_locked(t);
		if (!c) {
			pthread_mutex_unlock(&t->lock);
			close(fd);
			continue;
		}
		c->addr = from;
		c->fd = fd;
		atomic_store(&c->state, TCP_CONN_HELLO);
		if (tcp_conn_register(t, c, fd))
			tcp_conn_dead(c, errno);
		pthread_mutex_unlock(&t->lock);
	}
}
