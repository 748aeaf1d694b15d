// SPDX-License-Identifier: MIT
/*
 * The TCP transport's resolution of destinations (tp_tcp.h): lookups at
 * a node's door, the LID check of their answers, the route cache.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "fabric.h"
#include "log.h"
#include "tcp_int.h"
#include "tp_tcp.h"

/*
 * A node that answers with our LID and is not us: a LID collision (two
 * nodes listed with one LID, a fabric file that disagrees with
 * derivation).  Reported once, loudly; packets to that LID stay on this
 * node, so the operator must fix the addressing (fabric.h).
 */
void tcp_lid_check(struct tp_tcp *t, uint16_t lid, uint64_t guid,
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

/* What a lookup asks: a CM listener, a QPN's owner, or only whether the
 * node answers (QPN 0, nobody's). */
static const char *tcp_lookup_kind(const struct tcp_lookup *q)
{
	if (q->kind == htobe32(TCP_LOOKUP_CM))
		return "cm";
	return q->qpn ? "qpn" : "probe";
}

/* Ask the door of the node at node_addr; 0 or a positive errno. */
int tcp_lookup(struct tp_tcp *t, const struct sockaddr_storage *node_addr,
	       const struct tcp_lookup *ask, struct tcp_lookup_reply *r,
	       uint64_t deadline)
{
	struct sockaddr_storage door = *node_addr;
	struct tcp_lookup q_copy = *ask, *q = &q_copy;
	char a[INET6_ADDRSTRLEN];
	struct tp_frame_hdr rf;
	int fd, err;

	if (tcp_key_lookup_out(t, q))
		return EHOSTUNREACH;
	tcp_set_port(&door, t->door_port);
	if (!tcp_door_ours(t, &door))
		return EHOSTUNREACH;
	/* Said for each lookup: the tests count them (a connection through
	 * the CM needs at most one per side). */
	ibemu_log_dbg("tcp: door lookup (%s) at %s", tcp_lookup_kind(q),
		      tcp_addr_str(node_addr, a, sizeof(a)));
	err = tcp_connect(&door, deadline, &fd);
	if (err)
		return EHOSTUNREACH;
	err = tcp_exchange(t, fd, TP_FRAME_LOOKUP, q, sizeof(*q),
			   TP_FRAME_LOOKUP_REPLY, &rf, r, sizeof(*r), deadline);
	close(fd);
	/* A reply not proven with the fabric key is not believed: the
	 * node is unreachable for this one (said by tcp_key_reply_ok). */
	if (err || !tcp_key_reply_ok(t, node_addr, q, r))
		return EHOSTUNREACH;
	tcp_lid_check(t, be16toh(r->lid), be64toh(rf.src_guid), node_addr);
	if (!tcp_door_one_node(t, node_addr, be16toh(r->lid),
			       be64toh(rf.src_guid)))
		return EADDRNOTAVAIL;
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

	sockaddr_addr16(node, a);
	for (i = 0; i < 16; i++)
		h = (h ^ a[i]) * 16777619u;
	return &t->routes[h % TCP_ROUTES];
}

int tp_tcp_resolve_qpn(struct engine *e,
		       const struct sockaddr_storage *node_at,
		       uint16_t want_lid, uint32_t qpn, int32_t *slot_p)
{
	const struct sockaddr_storage *node_addr = node_at;
	struct sockaddr_storage na;
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
	tcp_node_addr(t, node_at, &na);
	node_addr = &na;
	pthread_mutex_lock(&t->lock);
	r = tcp_route_find_locked(t, node_addr, qpn);
	if (r->qpn == qpn && tcp_same_node(&r->node, node_addr)) {
		if (r->slot < 0 && clock_coarse_ns() < r->expires) {
			err = r->err;
			pthread_mutex_unlock(&t->lock);
			return err;
		}
		c = r->slot >= 0 ? tcp_conn_at(t, r->slot) : NULL;
		/* The LID the sender addressed is checked as a lookup
		 * checks it (tcp_resolve): else the door is asked. */
		if (c && atomic_load(&c->state) == TCP_CONN_UP &&
		    (!want_lid || c->lid == want_lid)) {
			*slot_p = r->slot;
			pthread_mutex_unlock(&t->lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&t->lock);

	began = clock_coarse_ns();
	err = tcp_resolve(t, node_addr, want_lid, &q, &slot);
	if (err == EAGAIN)
		return err; /* not tried: nothing learnt */
	cheap = clock_coarse_ns() - began < TCP_CHEAP_FAIL_NS;

	pthread_mutex_lock(&t->lock);
	r = tcp_route_find_locked(t, node_addr, qpn);
	r->node = *node_addr;
	r->qpn = qpn;
	r->slot = err ? -1 : slot;
	r->err = err;
	r->expires = clock_coarse_ns() +
		     (err == ENOENT || cheap ? TCP_NOQP_TTL_NS
					     : TCP_UNREACH_TTL_NS);
	pthread_mutex_unlock(&t->lock);
	if (!err)
		*slot_p = slot;
	return err;
}

void tp_tcp_seed_qpn(struct engine *e, int32_t slot, uint32_t qpn)
{
	struct tp_tcp *t = tp_tcp(e);
	struct sockaddr_storage at;
	struct tcp_route *r;
	struct tcp_conn *c;

	if (!t)
		return;
	pthread_mutex_lock(&t->lock);
	c = tcp_conn_at(t, slot);
	if (c)
		atomic_store(&c->used, true); /* the route cache names it */
	/* Only where the connection's address is the one the fabric gives
	 * for the LID its greeting named: what a door lookup at that
	 * address would have found.  A peer behind another address (a
	 * second interface, NAT) is looked up as before. */
	if (c && atomic_load(&c->state) == TCP_CONN_UP &&
	    fabric_locate(&e->hca->node, c->lid, NULL, &at) == FABRIC_THERE &&
	    tcp_same_node(&at, &c->addr)) {
		r = tcp_route_find_locked(t, &at, qpn);
		r->node = at;
		tcp_set_port(&r->node, 0);
		r->qpn = qpn;
		r->slot = slot;
		r->err = 0;
		r->expires = 0;
	}
	pthread_mutex_unlock(&t->lock);
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
	struct sockaddr_storage na;

	if (!t)
		return ENETDOWN;
	tcp_node_addr(t, node_addr, &na);
	memcpy(q.addr, addr, 16);
	return tcp_resolve(t, &na, 0, &q, slot_p);
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
	struct sockaddr_storage na;
	int err;

	if (!t)
		return ENETDOWN;
	tcp_node_addr(t, node_addr, &na);
	err = tcp_lookup(t, &na, &q, &r, tcp_now_ms() + ms);
	if (err == EHOSTUNREACH)
		return err;
	*lid_p = be16toh(r.lid);
	return 0;
}
