// SPDX-License-Identifier: MIT
/*
 * The TCP transport's sending (tcp_int.h): the engine's producer calls
 * (pkt_claim, pkt_send), the connection's queue and its flush, ACKs held
 * back for the application's next call, and a connection whose sending
 * side broke.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "tcp_int.h"

/*
 * After a flush: ask the network thread to flush when the socket takes
 * more, if the queue holds what it refused, one event at a time
 * (EPOLLONESHOT: the registration stays, arming is one epoll_ctl, and
 * a queue that empties meanwhile costs at most one look).  Not while a
 * busy poller flushes it (out_parked, tcp_poll).  Caller holds tx_lock.
 */
static void tcp_arm_out_locked(struct tcp_conn *c)
{
	struct epoll_event ev = { .events = EPOLLOUT | EPOLLONESHOT,
				  .data.ptr = &c->wev };
	bool backlog = c->tx_head < c->tx_tail;

	atomic_store_explicit(&c->tx_backlog, backlog, memory_order_relaxed);
	if (atomic_load_explicit(&c->out_fired, memory_order_relaxed) &&
	    atomic_exchange(&c->out_fired, false))
		c->tx_armed = false;
	if (!backlog || c->tx_armed ||
	    atomic_load_explicit(&c->out_parked, memory_order_relaxed) ||
	    atomic_load(&c->state) != TCP_CONN_UP)
		return;
	if (!epoll_ctl(c->t->ep, c->tx_reg ? EPOLL_CTL_MOD : EPOLL_CTL_ADD,
		       c->wfd, &ev))
		c->tx_reg = c->tx_armed = true;
}

/* The sending side is done: its queue lost, its duplicate out of
 * epoll.  Caller holds tx_lock. */
static void tcp_conn_stop_sending_locked(struct tcp_conn *c)
{
	if (c->tx_reg)
		epoll_ctl(c->t->ep, EPOLL_CTL_DEL, c->wfd, NULL);
	c->tx_reg = c->tx_armed = false;
	c->tx_head = c->tx_tail = 0;
	atomic_store_explicit(&c->tx_backlog, false, memory_order_relaxed);
}

/* Reading c's socket ended (a read failed, the peer closed, a frame
 * not this connection's): dead, its queue lost, its socket out of
 * epoll (a dead socket stays readable and writable: the network thread
 * would spin on it).  A c that was draining is dead already, and may
 * be a resolver's by now (ATTACHING): its state is left alone.
 * Caller holds rx_lock and tx_lock. */
void tcp_conn_drop_locked(struct tcp_conn *c, int err)
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
void tcp_flush_locked(struct tcp_conn *c)
{
	ssize_t n;

	c->tx_retry_at = 0;
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
		else
			c->tx_retry_at = clock_now_ns() + TCP_TX_RETRY_NS;
		break;
	}
	if (c->tx_head == c->tx_tail)
		c->tx_head = c->tx_tail = 0;
	tcp_arm_out_locked(c);
}

/* Whether a socket that refused the queue is worth asking again: it
 * frees room as its peer acknowledges, and a poller that asked at every
 * turn would spend a system call a poll for nothing.  Caller holds
 * tx_lock. */
static bool tcp_retry_due_locked(const struct tcp_conn *c)
{
	return !c->tx_retry_at || clock_now_ns() >= c->tx_retry_at;
}

/* A busy poller's flush (tcp_poll): what the socket refused before,
 * unless the queue's holder is at it now (it flushes itself). */
void tcp_flush_backlog(struct tcp_conn *c)
{
	if (!atomic_load_explicit(&c->tx_backlog, memory_order_relaxed) ||
	    pthread_mutex_trylock(&c->tx_lock))
		return;
	if (atomic_load(&c->state) == TCP_CONN_UP && tcp_retry_due_locked(c))
		tcp_flush_locked(c);
	pthread_mutex_unlock(&c->tx_lock);
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
__thread bool tcp_app_draining;

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

/*
 * The application arms a CQ to block (engine_app_blocks): it stops
 * polling now, so the connections the network thread left to its polls
 * go back to the thread at once, not once its last poll is old.
 */
static void tcp_app_blocks(struct tp_tcp *t)
{
	uint64_t one = 1;

	/* The usual way to block arms the CQ, polls it empty, then waits
	 * for the event: those polls do not make a busy poller. */
	atomic_store_explicit(&t->app_armed_ns, clock_now_ns(),
			      memory_order_relaxed);
	if (!atomic_load_explicit(&t->app_poll_ms, memory_order_relaxed))
		return;
	atomic_store(&t->app_poll_ms, 0);
	if (atomic_load(&t->parked_any)) {
		atomic_store(&t->unpark_now, true);
		(void)!write(t->kick, &one, sizeof(one));
	}
}

/* The flush op (transport.h): the progress thread's call every nap,
 * and before it sleeps, and the application's as it arms a CQ: both
 * wait for the locks (what is held back goes before either sleeps). */
void tcp_net_flush(struct engine *e)
{
	if (!check_thread_is_internal())
		tcp_app_blocks(tp_tcp(e));
	tcp_flush_deferred(e, true);
}

/*
 * Send the ACKs held back.  Not wait (the application's poll): a lock
 * held is skipped and looked at again at the next call (the next poll,
 * the progress thread's nap): its holder is sending, which takes what
 * is held back along.
 */
void tcp_flush_deferred(struct engine *e, bool wait)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;
	unsigned int i, n;
	bool again = false;

	if (!atomic_load_explicit(&t->deferred, memory_order_relaxed) ||
	    !atomic_exchange(&t->deferred, false))
		return;
	if (wait)
		pthread_mutex_lock(&t->lock);
	else if (pthread_mutex_trylock(&t->lock)) {
		atomic_store(&t->deferred, true);
		return;
	}
	n = t->nr_conns;
	for (i = 0; i < n; i++) {
		c = t->conns[i];
		if (!c)
			continue;
		/* Looked at under the lock it was set under. */
		if (wait) {
			pthread_mutex_lock(&c->tx_lock);
		} else if (pthread_mutex_trylock(&c->tx_lock)) {
			again = true;
			continue;
		}
		if (c->tx_deferred)
			tcp_undefer_locked(c);
		pthread_mutex_unlock(&c->tx_lock);
	}
	pthread_mutex_unlock(&t->lock);
	if (again)
		atomic_store(&t->deferred, true);
}

void tcp_poll_done(struct engine *e)
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
 * one system call with its LAST packet.  Nothing wakes the network
 * thread for it (which would only fight the requester for tx_lock while
 * it builds the next packet): a requester that stops short because the
 * queue is full flushes in its claim (tcp_pkt_claim), and one that
 * stops on a local error leaves its QP in the error state (IBA
 * 10.7.3.1), sending nothing more; the next frame to the process, or a
 * busy poller (tcp_poll), takes what it queued along.
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
bool tcp_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt)
{
	struct tcp_conn *c = (struct tcp_conn *)peer;

	pthread_mutex_lock(&c->tx_lock);
	c->discard = atomic_load(&c->state) != TCP_CONN_UP;
	if (!c->discard) {
		/* Full: what the socket takes now makes the room, from this
		 * thread, rather than a network thread's wake-up later
		 * (EPOLLOUT) and the engine thread's after it. */
		if (c->tx_tail + TCP_FRAME_ROOM > TCP_TX_CAP &&
		    c->tx_head < c->tx_tail && tcp_retry_due_locked(c)) {
			tcp_flush_locked(c);
			/* A send that failed broke the connection. */
			c->discard = atomic_load(&c->state) != TCP_CONN_UP;
		}
	}
	if (!c->discard) {
		/* Moved to the front only when little waits: a queue the
		 * socket barely drains is not copied again and again to
		 * gain a frame's room each time. */
		if (c->tx_tail + TCP_FRAME_ROOM > TCP_TX_CAP && c->tx_head &&
		    c->tx_tail - c->tx_head <= TCP_TX_CAP / 4) {
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

void tcp_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt)
{
	struct tcp_conn *c = (struct tcp_conn *)peer;
	struct tcp_stage *s = c->stage;
	uint32_t len = s->hdr.len, total;
	bool grh = s->hdr.flags & PKT_F_GRH, batch, defer;
	uint8_t *frame = c->tx + c->tx_tail, opcode;
	struct tp_frame_hdr f;
	struct tp_frame_grh g;

	(void)pkt;
	if (c->discard || len > PKT_MAX_LEN || (s->hdr.flags & PKT_F_LOST)) {
		/* Lost on a broken link (tp_tcp.c), or out of a port that
		 * is down (progress.c). */
		pthread_mutex_unlock(&c->tx_lock);
		return;
	}
	tcp_frame_init(c->t, &f, TP_FRAME_DATA,
		       len + (grh ? (uint32_t)sizeof(g) : 0), c->rslot);
	f.flags = grh ? TP_FRAME_F_GRH : 0;
	tp_frame_link_put(&f, &s->hdr);
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
		atomic_store_explicit(&c->tx_backlog, true,
				      memory_order_relaxed);
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

/* The network thread flushes c (its socket takes more): a requester
 * blocked on the full queue goes on. */
void tcp_conn_writable(struct tcp_conn *c)
{
	bool wake;

	pthread_mutex_lock(&c->tx_lock);
	tcp_flush_locked(c);
	wake = c->tx_refused && c->tx_tail - c->tx_head + TCP_FRAME_ROOM <=
						TCP_TX_CAP;
	if (wake)
		c->tx_refused = false;
	pthread_mutex_unlock(&c->tx_lock);
	if (wake)
		c->t->e->tp->wake(c->t->e);
}

/*
 * c's socket takes more (its one EPOLLOUT event, taken without tx_lock:
 * out_fired tells its holder).  While the application busy-polls, its
 * polls flush the queue (tcp_flush_backlog) and its claims too, and its
 * polls resume a requester blocked on the queue (the pending pass runs
 * while work is blocked): the thread leaves c to it (out_parked), as a
 * parked reader, rather than fight it for tx_lock and wake its engine's
 * thread, which would fight it for the QP's lock.  Network thread only.
 */
void tcp_conn_out_event(struct tp_tcp *t, struct tcp_conn *c)
{
	atomic_store(&c->out_fired, true);
	if (tcp_app_polling(t)) {
		if (!atomic_load_explicit(&c->out_parked,
					  memory_order_relaxed)) {
			atomic_store(&c->out_parked, true);
			t->nr_out_parked++;
			atomic_store(&t->parked_any, true);
			if (!t->park_check)
				t->park_check = tcp_now_ms();
		}
		return;
	}
	tcp_conn_writable(c);
}

/* The application stopped polling: the parked queues are the thread's
 * again, flushed now and watched as before.  Network thread only. */
void tcp_out_unpark(struct tp_tcp *t)
{
	struct tcp_conn *c;
	unsigned int i;

	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || !atomic_load_explicit(&c->out_parked,
						memory_order_relaxed))
			continue;
		atomic_store(&c->out_parked, false);
		tcp_conn_writable(c);
	}
	t->nr_out_parked = 0;
}

uint64_t tcp_peer_taken(struct tp_peer *peer)
{
	return atomic_load_explicit(&((struct tcp_conn *)peer)->taken,
				    memory_order_relaxed);
}

struct tp_peer *tcp_peer_get(struct engine *e, int32_t slot)
{
	struct tp_tcp *t = tp_tcp(e);
	struct tcp_conn *c;

	if (!t)
		return NULL;
	pthread_mutex_lock(&t->lock);
	c = tcp_conn_at(t, slot);
	if (c)
		atomic_store(&c->used, true); /* the caller keeps &c->base */
	pthread_mutex_unlock(&t->lock);
	return c ? &c->base : NULL;
}

bool tcp_peer_is_self(struct engine *e, const struct tp_peer *peer)
{
	(void)e;
	(void)peer;
	return false;
}
