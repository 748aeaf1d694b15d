// SPDX-License-Identifier: MIT
/*
 * The TCP transport's bounds under hostile load (tcp_int.h): anyone
 * who reaches the node's address can open connections to the door and
 * to each process's port, so what a connection holds is bounded and
 * given back (doc/design.md §22, "Bounded under load"):
 *
 *  - a door client that has not asked within TCP_DOOR_IDLE_MS is
 *    closed; a full door table closes its oldest client for a new one,
 *    and one address holds at most TCP_DOOR_PER_SOURCE (tcp_door.c);
 *  - an accepted connection reads into TCP_RX_HELLO_CAP bytes until it
 *    greets, and is closed if it has not greeted within TCP_HELLO_MS;
 *  - a greeted connection that no part of this process uses (no QP
 *    resolved to it, nothing keeps its slot) is closed after
 *    TCP_UNUSED_IDLE_MS without a frame, and one address holds at most
 *    TCP_UNUSED_PER_SOURCE of them;
 *  - a dead connection gives back its descriptors and buffers at once,
 *    and its entry too when nothing uses it; an entry given back gets
 *    a new slot generation, so a slot number kept anywhere never names
 *    its successor (tcp_conn_at);
 *  - at the descriptor limit (EMFILE, ENFILE) accepting pauses for
 *    TCP_ACCEPT_PAUSE_MS instead of spinning on a listening socket
 *    that stays readable.
 *
 * Lock rule: tcp_reap runs in the network thread alone, between two
 * batches of epoll events, so no event it has not seen names what it
 * frees; it takes tcp.lock to take entries out of conns[], and a
 * connection's rx_lock and tx_lock (in that order, after tcp.lock is
 * released) to close its descriptors.  An entry taken out is freed
 * once no application poll is under way (pollers), since a poll reads
 * the entries it saw under tcp.lock without it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "log.h"
#include "tcp_int.h"

/* The entry a slot names now, or NULL: a slot of an entry given back
 * names nothing (its generation is not the entry's).  tcp.lock held. */
struct tcp_conn *tcp_conn_at(struct tp_tcp *t, int32_t slot)
{
	struct tcp_conn *c;
	int32_t i;

	if (!tp_slot_is_remote(slot))
		return NULL;
	i = (slot - IBEMU_MAX_PROCS) % TCP_MAX_CONNS;
	c = t->conns[i];
	return c && c->slot == slot ? c : NULL;
}

/* Whether from (an accepted connection's address) holds as many
 * connections as it may that nothing here uses.  tcp.lock held. */
bool tcp_source_full(struct tp_tcp *t, const struct sockaddr_storage *from)
{
	unsigned int i, n = 0;
	struct tcp_conn *c;

	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (c && !atomic_load(&c->used) && tcp_conn_live(c) &&
		    tcp_same_node(&c->addr, from) &&
		    ++n >= TCP_UNUSED_PER_SOURCE)
			return true;
	}
	return false;
}

/* accept4 failed with err: at the descriptor limit, stop listening for
 * a while (the listening sockets stay readable and would spin the
 * thread); tcp_reap listens again. */
void tcp_accept_pause(struct tp_tcp *t, int err)
{
	if (err != EMFILE && err != ENFILE && err != ENOBUFS &&
	    err != ENOMEM)
		return;
	if (!t->accept_paused) {
		ibemu_log_warn("tcp: out of descriptors (%s): not accepting "
			       "connections for %u ms", strerror(err),
			       TCP_ACCEPT_PAUSE_MS);
		epoll_ctl(t->ep, EPOLL_CTL_DEL, t->lfd, NULL);
		if (t->door_fd >= 0)
			epoll_ctl(t->ep, EPOLL_CTL_DEL, t->door_fd, NULL);
	}
	t->accept_paused = true;
	t->accept_paused_until = tcp_now_ms() + TCP_ACCEPT_PAUSE_MS;
}

static void tcp_accept_resume(struct tp_tcp *t, uint64_t now)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (!t->accept_paused || now < t->accept_paused_until)
		return;
	t->accept_paused = false;
	ev.data.ptr = &t->listen_ev;
	epoll_ctl(t->ep, EPOLL_CTL_ADD, t->lfd, &ev);
	if (t->door_fd >= 0) {
		ev.data.ptr = &t->door_ev;
		epoll_ctl(t->ep, EPOLL_CTL_ADD, t->door_fd, &ev);
	}
}

/* The buffers of a greeted connection; 0 or ENOMEM.  Caller holds
 * rx_lock, or c is no reader's yet (ATTACHING). */
int tcp_conn_buffers(struct tcp_conn *c)
{
	uint8_t *rx;

	if (!c->tx) {
		c->tx = malloc(TCP_TX_CAP);
		if (!c->tx)
			return ENOMEM;
	}
	if (c->rx_cap < TCP_RX_CAP) {
		rx = realloc(c->rx, TCP_RX_CAP);
		if (!rx)
			return ENOMEM;
		c->rx = rx;
		c->rx_cap = TCP_RX_CAP;
	}
	return 0;
}

/* Give back what a dead c holds: its descriptors and buffers.  Not
 * while it drains or a resolver puts a new socket under it. */
static void tcp_conn_give_back(struct tp_tcp *t, struct tcp_conn *c)
{
	pthread_mutex_lock(&c->rx_lock);
	pthread_mutex_lock(&c->tx_lock);
	if (atomic_load(&c->state) == TCP_CONN_DEAD &&
	    !atomic_load(&c->rx_drain) && (c->fd >= 0 || c->tx)) {
		tcp_conn_close_fds(t, c);
		free(c->tx);
		free(c->rx);
		c->tx = c->rx = NULL;
		c->rx_cap = c->rx_len = 0;
		c->tx_head = c->tx_tail = 0;
		atomic_store_explicit(&c->rx_stalled, false,
				      memory_order_relaxed);
		if (c->parked) {
			c->parked = false;
			t->nr_parked--;
		}
		if (atomic_load(&c->out_parked)) {
			atomic_store(&c->out_parked, false);
			t->nr_out_parked--;
		}
	}
	pthread_mutex_unlock(&c->tx_lock);
	pthread_mutex_unlock(&c->rx_lock);
}

/* Close c because of what it did not do in time. */
static void tcp_conn_expire(struct tcp_conn *c, const char *why)
{
	char a[INET6_ADDRSTRLEN];

	ibemu_log_dbg("tcp: connection from %s closed: %s",
		      tcp_addr_str(&c->addr, a, sizeof(a)), why);
	pthread_mutex_lock(&c->rx_lock);
	pthread_mutex_lock(&c->tx_lock);
	atomic_store(&c->rx_drain, false);
	tcp_conn_drop_locked(c, ETIMEDOUT);
	pthread_mutex_unlock(&c->tx_lock);
	pthread_mutex_unlock(&c->rx_lock);
}

/* Close c if it did not do in time what it had to, give it back if it
 * is dead; the time it is next due (ms), UINT64_MAX: none. */
static uint64_t tcp_conn_check(struct tp_tcp *t, struct tcp_conn *c,
			       uint64_t now)
{
	int state = atomic_load(&c->state);
	uint64_t idle_by;

	if (state == TCP_CONN_HELLO) {
		if (now < c->hello_by)
			return c->hello_by;
		tcp_conn_expire(c, "no greeting");
	} else if (state == TCP_CONN_UP && !atomic_load(&c->used)) {
		idle_by = atomic_load_explicit(&c->rx_at,
					       memory_order_relaxed) +
			  TCP_UNUSED_IDLE_MS;
		if (now < idle_by)
			return idle_by;
		tcp_conn_expire(c, "idle, and no QP uses it");
	}
	if (atomic_load(&c->state) == TCP_CONN_DEAD)
		tcp_conn_give_back(t, c);
	return UINT64_MAX;
}

/* Take the dead entries nothing uses out of conns[]. */
static void tcp_retire(struct tp_tcp *t)
{
	struct tcp_conn *c;
	unsigned int i;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || atomic_load(&c->used) || atomic_load(&c->state) != TCP_CONN_DEAD ||
		    c->fd >= 0)
			continue;
		if (tcp_pub(c))
			atomic_store(&tcp_pub(c)->owner, 0);
		t->conns[i] = NULL;
		c->next_retired = t->retired;
		t->retired = c;
	}
	while (t->nr_conns && !t->conns[t->nr_conns - 1])
		t->nr_conns--;
	pthread_mutex_unlock(&t->lock);
}

/* Free the entries taken out, once no poll may still read them, and
 * the door clients closed. */
void tcp_reap_free(struct tp_tcp *t)
{
	struct tcp_door_client *d;
	struct tcp_conn *c;

	while ((d = t->door_done)) {
		t->door_done = d->next_done;
		free(d);
	}
	while ((c = t->retired)) {
		t->retired = c->next_retired;
		free(c->tx);
		free(c->rx);
		free(c->stage);
		free(c);
	}
}

/* Close the door clients that did not ask in time; when the next is
 * due (ms), UINT64_MAX: none. */
static uint64_t tcp_door_expire(struct tp_tcp *t, uint64_t now)
{
	uint64_t next = UINT64_MAX;
	struct tcp_door_client *d;
	unsigned int i;

	for (i = 0; i < TCP_DOOR_CLIENTS; i++) {
		d = t->door_clients[i];
		if (d && now >= d->by)
			tcp_door_client_done(t, d);
		else if (d && d->by < next)
			next = d->by;
	}
	return next;
}

static uint64_t min_ms(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* After a batch of events: when something is due (a deadline, a
 * connection died: reap_now), what did not come in time is closed and
 * what is dead given back.  The epoll timeout until the next deadline
 * (ms), -1: none, so an idle process is not woken. */
int tcp_reap(struct tp_tcp *t)
{
	struct tcp_conn **seen = t->reap_seen;
	uint64_t now = tcp_now_ms(), next;
	unsigned int i, n;

	if (now < t->reap_at && !atomic_exchange(&t->reap_now, false))
		return t->reap_at == UINT64_MAX
			       ? -1
			       : (int)min_ms(t->reap_at - now, INT32_MAX);
	atomic_store(&t->reap_now, false);
	if (!atomic_load(&t->pollers))
		tcp_reap_free(t);
	next = tcp_door_expire(t, now);
	tcp_accept_resume(t, now);
	if (t->accept_paused)
		next = min_ms(next, t->accept_paused_until);
	/* Resolvers add entries under tcp.lock; only this thread takes
	 * them out, so the ones seen stay while they are looked at. */
	pthread_mutex_lock(&t->lock);
	for (i = n = 0; i < t->nr_conns; i++)
		if (t->conns[i])
			seen[n++] = t->conns[i];
	pthread_mutex_unlock(&t->lock);
	for (i = 0; i < n; i++)
		next = min_ms(next, tcp_conn_check(t, seen[i], now));
	tcp_retire(t);
	if (t->retired || t->door_done)
		next = min_ms(next, now + TCP_REAP_MS);
	t->reap_at = next;
	return next == UINT64_MAX ? -1 : (int)min_ms(next - now, INT32_MAX);
}
