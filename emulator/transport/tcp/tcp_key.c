// SPDX-License-Identifier: MIT
/*
 * The fabric key at the TCP transport's greeting and door (tcp_int.h,
 * fabric_key.h; doc/design.md §22 "The fabric key").
 *
 * With a key (IBEMU_FABRIC_KEY), a connection goes UP only after each
 * side proved the key on a challenge the other chose for it:
 *
 *   connecting side -> HELLO { KEY, nonce_c }
 *   accepting side  -> HELLO { KEY, nonce_a, proof("accept", nonce_c, nonce_a) }
 *   connecting side -> HELLO { KEY, proof("connect", nonce_a, nonce_c) }
 *
 * and a lookup believes a door's reply only with the door's proof over
 * the lookup's nonce and the reply.  A node without the key, or with
 * another one, is refused, and the side that sees why says so in one
 * line (once a process).  Without a key nothing is proven: the rule
 * that a connected QP takes packets only from its peer's connection
 * (route_from_peer_locked) is what holds, as on RoCE.
 *
 * Lock rule: t->key is written once at open, read after; key_told is
 * atomic.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "hmac.h"
#include "log.h"
#include "tcp_int.h"

#define TCP_KEY_ACCEPT "ibemu tcp hello accept"
#define TCP_KEY_CONNECT "ibemu tcp hello connect"
#define TCP_KEY_DOOR "ibemu tcp door reply"

/* 0, or a positive errno for a key setting that cannot be used (said
 * by fabric_key_load): network mode is then refused. */
int tcp_key_open(struct tp_tcp *t)
{
	int err = fabric_key_load(&t->key);

	if (err)
		ibemu_log_err("tcp: network mode refused: the fabric key "
			      "set (IBEMU_FABRIC_KEY, IBEMU_FABRIC_KEY_FILE) "
			      "cannot be used");
	return err;
}

/* One line, once a process, about the node at addr. */
void tcp_key_say(struct tp_tcp *t, const struct sockaddr_storage *addr,
		 const char *what)
{
	char a[INET6_ADDRSTRLEN];

	if (atomic_exchange(&t->key_told, true))
		return;
	ibemu_log_warn("tcp: the node at %s %s; every node of a fabric needs "
		       "the same IBEMU_FABRIC_KEY, or none",
		       tcp_addr_str(addr, a, sizeof(a)), what);
}

/* What the other side's TCP_F_KEY says, before any proof: 1, neither
 * side has a key (nothing to prove); 0, both have one (the proof
 * decides); -1, one side only (refused, said with verdict). */
static int tcp_key_sides(struct tp_tcp *t, const struct sockaddr_storage *addr,
			 uint8_t flags, const char *verdict)
{
	char what[96];

	if (!t->key.set && !(flags & TCP_F_KEY))
		return 1;
	if (t->key.set && (flags & TCP_F_KEY))
		return 0;
	snprintf(what, sizeof(what), "%s: %s",
		 t->key.set ? "has no fabric key"
			    : "has a fabric key and this process none",
		 verdict);
	tcp_key_say(t, addr, what);
	return -1;
}

/* The flags and a fresh challenge of a HELLO this side sends first. */
int tcp_key_hello_out(struct tp_tcp *t, struct tcp_hello *h)
{
	if (!t->key.set)
		return 0;
	h->flags |= TCP_F_KEY;
	return crypto_random(h->nonce, sizeof(h->nonce));
}

/* The accepting side: whether to answer the HELLO in, and the answer in
 * out (its challenge and proof); the connecting side's proof is then
 * awaited (tcp_key_proven). */
bool tcp_key_accept(struct tp_tcp *t, struct tcp_conn *c,
		    const struct tcp_hello *in, struct tcp_hello *out)
{
	if (!t->key.set) {
		/* A keyed node is told by the answer's missing flag. */
		return true;
	}
	if (!(in->flags & TCP_F_KEY)) {
		tcp_key_say(t, &c->addr,
			    "connected without the fabric key: refused");
		return false;
	}
	if (crypto_random(c->nonce_a, sizeof(c->nonce_a)))
		return false;
	memcpy(c->nonce_c, in->nonce, sizeof(c->nonce_c));
	out->flags |= TCP_F_KEY;
	memcpy(out->nonce, c->nonce_a, sizeof(out->nonce));
	fabric_key_proof(&t->key, TCP_KEY_ACCEPT, c->nonce_c,
			 sizeof(c->nonce_c), c->nonce_a, sizeof(c->nonce_a),
			 out->proof);
	c->await_proof = true;
	return true;
}

/* The connecting side, given the accepting side's HELLO: whether it
 * proved the key (or neither side has one), and the second HELLO to
 * send in *proof. */
bool tcp_key_connected(struct tp_tcp *t, const struct sockaddr_storage *addr,
		       const struct tcp_hello *mine,
		       const struct tcp_hello *theirs, struct tcp_hello *proof)
{
	uint8_t want[FABRIC_KEY_LEN];
	int sides = tcp_key_sides(t, addr, theirs->flags, "refused");

	if (sides)
		return sides > 0;
	fabric_key_proof(&t->key, TCP_KEY_ACCEPT, mine->nonce,
			 sizeof(mine->nonce), theirs->nonce,
			 sizeof(theirs->nonce), want);
	if (!crypto_equal(want, theirs->proof, sizeof(want))) {
		tcp_key_say(t, addr, "does not prove the fabric key (another "
				     "key): refused");
		return false;
	}
	*proof = *mine;
	memset(proof->nonce, 0, sizeof(proof->nonce));
	fabric_key_proof(&t->key, TCP_KEY_CONNECT, theirs->nonce,
			 sizeof(theirs->nonce), mine->nonce,
			 sizeof(mine->nonce), proof->proof);
	return true;
}

/* The accepting side, given the connecting side's second HELLO:
 * whether it proves the key on our challenge. */
bool tcp_key_proven(struct tp_tcp *t, struct tcp_conn *c,
		    const struct tcp_hello *h)
{
	uint8_t want[FABRIC_KEY_LEN];

	fabric_key_proof(&t->key, TCP_KEY_CONNECT, c->nonce_a,
			 sizeof(c->nonce_a), c->nonce_c, sizeof(c->nonce_c),
			 want);
	c->await_proof = false;
	if (crypto_equal(want, h->proof, sizeof(want)))
		return true;
	tcp_key_say(t, &c->addr, "does not prove the fabric key (another "
				 "key): refused");
	return false;
}

/* The flags and challenge of a lookup. */
int tcp_key_lookup_out(struct tp_tcp *t, struct tcp_lookup *q)
{
	if (!t->key.set)
		return 0;
	q->flags |= TCP_F_KEY;
	return crypto_random(q->nonce, sizeof(q->nonce));
}

/* The proof over a reply: the lookup's nonce, and the reply with its
 * proof field zero. */
static void tcp_key_reply_proof(const struct tp_tcp *t,
				const struct tcp_lookup *q,
				const struct tcp_lookup_reply *r,
				uint8_t out[FABRIC_KEY_LEN])
{
	struct tcp_lookup_reply z = *r;

	memset(z.proof, 0, sizeof(z.proof));
	fabric_key_proof(&t->key, TCP_KEY_DOOR, q->nonce, sizeof(q->nonce),
			 &z, sizeof(z), out);
}

/* The door: a keyed door answers an asker without the key only that
 * it has one (EACCES), and proves every other answer. */
void tcp_key_door_reply(struct tp_tcp *t, const struct tcp_lookup *q,
			struct tcp_lookup_reply *r)
{
	if (!t->key.set)
		return;
	r->flags |= TCP_F_KEY;
	if (!(q->flags & TCP_F_KEY)) {
		r->status = htobe32(EACCES);
		r->slot = 0;
		r->token = 0;
		r->port = 0;
		return;
	}
	tcp_key_reply_proof(t, q, r, r->proof);
}

/* The asker: whether the reply of the door at addr may be believed. */
bool tcp_key_reply_ok(struct tp_tcp *t, const struct sockaddr_storage *addr,
		      const struct tcp_lookup *q,
		      const struct tcp_lookup_reply *r)
{
	uint8_t want[FABRIC_KEY_LEN];
	int sides = tcp_key_sides(t, addr, r->flags, "not believed");

	if (sides)
		return sides > 0;
	tcp_key_reply_proof(t, q, r, want);
	if (crypto_equal(want, r->proof, sizeof(want)))
		return true;
	tcp_key_say(t, addr, "does not prove the fabric key (another key): "
			     "not believed");
	return false;
}
