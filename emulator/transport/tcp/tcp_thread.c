// SPDX-License-Identifier: MIT
/*
 * The TCP transport's network thread (tcp_int.h): its epoll loop, the
 * connections it reads or leaves to a busy-polling application, the
 * stalled ones it retries, and the door it keeps trying to hold.
 */
#include "config.h"

#include <netinet/in.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "check.h"
#include "clock.h"
#include "cpu.h"
#include "fabric.h"
#include "tcp_int.h"

static void tcp_retry_stalled(struct tp_tcp *t)
{
	unsigned int i, stalled = 0;
	struct tcp_conn *c;

	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c ||
		    !atomic_load_explicit(&c->rx_stalled,
					  memory_order_relaxed) ||
		    !tcp_conn_live(c))
			continue;
		if (tcp_conn_readable(t, c, NULL))
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
 * Whether the application busy-polls now: it polled within the last
 * TCP_APP_POLL_MS.  A time, not a flag the thread clears and waits to
 * see set again: on a machine whose every CPU runs a busy poller, the
 * thread wakes on a poller's CPU, and the poller cannot poll while the
 * thread waits for it, so such a check found it "not polling", took its
 * connections back, and fought it for them (its socket, its QPs' locks)
 * at every packet.  An application that does not poll costs nothing.
 */
bool tcp_app_polling(struct tp_tcp *t)
{
	uint64_t at = atomic_load_explicit(&t->app_poll_ms,
					   memory_order_relaxed);

	return at && tcp_now_ms() - at <= TCP_APP_POLL_MS;
}

/*
 * After a read that found a stream's worth of data (TCP_LINGER_MIN),
 * read on a while before sleeping: a stream to a process that runs no verb (the target of RDMA
 * WRITEs) is then read as it comes, not at one wake-up of this thread,
 * an epoll_ctl and an epoll_wait per batch the socket holds.  A small
 * message does not: the application it wakes (a completion channel)
 * may want this CPU for its answer.  Bounded:
 * TCP_LINGER_NS without data ends it, TCP_LINGER_MAX_NS in all (the
 * other connections wait meanwhile), and an application that polls
 * takes over.  Whether c is left stalled.
 */
static bool tcp_conn_linger(struct tp_tcp *t, struct tcp_conn *c)
{
	uint64_t now = clock_now_ns(), idle_end = now + TCP_LINGER_NS,
		 end = now + TCP_LINGER_MAX_NS;
	uint32_t taken;
	bool stalled;

	for (;;) {
		stalled = tcp_conn_readable(t, c, &taken);
		now = clock_now_ns();
		if (taken) {
			engine_poll(t->e, false);
			idle_end = now + TCP_LINGER_NS;
		}
		if (stalled || !tcp_conn_live(c) || tcp_app_polling(t) ||
		    now >= idle_end || now >= end)
			return stalled;
		cpu_relax();
	}
}

/*
 * A connection became readable.  While the application busy-polls, it
 * reads the network itself (tcp_poll): the thread then leaves the
 * connection alone (parked, not re-armed), so a ping-pong neither waits
 * for this thread nor fights it for the connection.
 */
static void tcp_conn_event(struct tp_tcp *t, struct tcp_conn *c)
{
	uint32_t taken;
	bool stalled;

	if (!tcp_conn_live(c))
		return;
	if (atomic_load(&c->state) == TCP_CONN_UP && tcp_app_polling(t)) {
		if (!c->parked) {
			c->parked = true;
			t->nr_parked++;
			atomic_store(&t->parked_any, true);
			if (!t->park_check)
				t->park_check = tcp_now_ms();
		}
		return;
	}
	stalled = tcp_conn_readable(t, c, &taken);
	/* The application does not poll: its engine's thread may be
	 * napping, deaf to producers (progress.c).  What came is served
	 * here at once, as the application's own poll would (a target
	 * spinning on its memory waits for an RDMA WRITE the engine
	 * places), without a second thread's wake-up. */
	engine_poll(t->e, false);
	if (!stalled && taken >= TCP_LINGER_MIN)
		stalled = tcp_conn_linger(t, c);
	if (stalled)
		t->nr_stalled++;
	else
		tcp_rearm(t, c);
	if (engine_has_packet(t->e))
		t->e->tp->wake(t->e);
}

/* Every TCP_PARK_MS: once the application has stopped polling, the
 * parked connections (read and written) are the thread's again; at
 * once when it arms a CQ to block (unpark_now). */
static void tcp_unpark(struct tp_tcp *t)
{
	uint64_t now = tcp_now_ms();
	struct tcp_conn *c;
	unsigned int i;

	if (now < t->park_check + TCP_PARK_MS &&
	    !atomic_load_explicit(&t->unpark_now, memory_order_relaxed))
		return;
	atomic_store(&t->unpark_now, false);
	t->park_check = now;
	if (tcp_app_polling(t))
		return;
	atomic_store(&t->parked_any, false);
	for (i = 0; i < t->nr_conns; i++) {
		c = t->conns[i];
		if (!c || !c->parked)
			continue;
		c->parked = false;
		tcp_rearm(t, c);
	}
	t->nr_parked = 0;
	if (t->nr_out_parked)
		tcp_out_unpark(t);
	t->park_check = 0;
}

void *tcp_thread(void *arg)
{
	struct tp_tcp *t = arg;
	struct epoll_event evs[32];
	struct tcp_ev *ev;
	int n, i, timeout, reap = -1;
	check_thread_internal();

	tcp_probe_own_lid(t);
	while (!atomic_load(&t->stop)) {
		timeout = t->nr_stalled ? TCP_STALL_MS
			  : t->nr_parked || t->nr_out_parked ? TCP_PARK_MS
			  : t->door_fd < 0 && t->watch_fd < 0 ? TCP_DOOR_RETRY_MS
							      : -1;
		if (reap >= 0 && (timeout < 0 || reap < timeout))
			timeout = reap;
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
				tcp_conn_out_event(t, ev->ptr);
				break;
			case TCP_EV_CONN:
				tcp_conn_event(t, ev->ptr);
				break;
			}
		}
		if (t->nr_stalled)
			tcp_retry_stalled(t);
		if (t->nr_parked || t->nr_out_parked)
			tcp_unpark(t);
		if (t->door_fd < 0 && t->watch_fd < 0)
			tcp_door_try(t);
		reap = tcp_reap(t);
	}
	return NULL;
}
