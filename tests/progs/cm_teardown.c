// SPDX-License-Identifier: MIT
/*
 * Tearing down RDMA CM objects while another thread reads their events,
 * as programs do on their exit path (rping of rdma-core 44 among them).
 *
 *   cm_teardown chan: a thread blocks in rdma_get_cm_event; the main
 *	thread makes an event come (rdma_resolve_addr), then at once
 *	destroys the id and the channel.  The reader, woken by the event,
 *	must neither crash nor fail on a descriptor it does not own: it
 *	gets the event (and acknowledges it before rdma_destroy_id
 *	returns) or stays blocked, as on the kernel's rdma_cm.
 *   cm_teardown id: one thread takes and acknowledges the events of a
 *	channel; the main thread resolves a route (ROUTE_RESOLVED, whose
 *	handling reads the id's addresses and route) and destroys the id
 *	at once, after a delay that sweeps 0 to 32 us so that the destroy
 *	falls at every point of the event's handling.  Neither may crash;
 *	rdma_destroy_id returns only once the event, if it was reported,
 *	is acknowledged; a reported event names the id and carries the
 *	address it was resolved to.
 *   cm_teardown late: rdma_get_cm_event on a channel just destroyed
 *	(rping of rdma-core 44 does it from its CM thread, fixed upstream
 *	in commit f3ae6534a) fails with EBADF, as the real librdmacm's
 *	read of the closed descriptor does, and does not crash.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define CHAN_ROUNDS 200
/* how long a thread may take to reach read(2) */
#define BLOCK_WAIT_MS 2000

static const char *mode;

static int say_fail(const char *what, int err)
{
	printf("FAIL: cm-teardown %s: %s (%s)\n", mode, what, strerror(err));
	return 1;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t now_ms(void)
{
	return now_ns() / 1000000;
}

/* Whether thread tid sleeps in read(2) (/proc/PID/task/TID/syscall
 * gives the number of the call a blocked thread is in). */
static int in_read(pid_t tid)
{
	char path[64], buf[64];
	FILE *f;
	int nr = -1;

	snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9')
		nr = atoi(buf);
	fclose(f);
	return nr == SYS_read;
}

static struct sockaddr_in loopback(uint16_t port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

/* ---- chan ---- */

static _Atomic pid_t chan_reader_tid;
static atomic_int chan_events;

static void *chan_reader(void *arg)
{
	struct rdma_event_channel *ch = arg;
	struct rdma_cm_event *ev;

	chan_reader_tid = (pid_t)syscall(SYS_gettid);
	/* one call: the event, or blocked for good once it is dropped */
	if (rdma_get_cm_event(ch, &ev)) {
		say_fail("rdma_get_cm_event on a channel being destroyed",
			 errno);
		_exit(1);
	}
	atomic_fetch_add(&chan_events, 1);
	rdma_ack_cm_event(ev);
	return NULL;
}

static int test_chan(void)
{
	struct sockaddr_in dst = loopback(7792);

	for (int i = 0; i < CHAN_ROUNDS; i++) {
		struct rdma_event_channel *ch;
		struct rdma_cm_id *id;
		uint64_t until;
		pthread_t t;

		ch = rdma_create_event_channel();
		if (!ch) {
			if (errno == ENODEV)
				return 77;
			return say_fail("rdma_create_event_channel", errno);
		}
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return say_fail("rdma_create_id", errno);
		chan_reader_tid = 0;
		if (pthread_create(&t, NULL, chan_reader, ch))
			return say_fail("pthread_create", EAGAIN);
		pthread_detach(t);
		until = now_ms() + BLOCK_WAIT_MS;
		while (!chan_reader_tid || !in_read(chan_reader_tid)) {
			if (now_ms() > until)
				return say_fail("the reader never blocks",
						ETIMEDOUT);
			usleep(100);
		}
		/* ADDR_RESOLVED is queued: the reader wakes */
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000))
			return say_fail("rdma_resolve_addr", errno);
		if (rdma_destroy_id(id))
			return say_fail("rdma_destroy_id", errno);
		rdma_destroy_event_channel(ch);
		usleep(2000); /* the woken reader runs now */
	}
	printf("ok: cm-teardown chan: %d rounds, %d events taken before "
	       "the destroy\n",
	       CHAN_ROUNDS, atomic_load(&chan_events));
	return 0;
}

/* ---- id ---- */

#define ID_ROUNDS 20000
#define ID_PORT 7793
/* a round's wait for the reader */
#define ROUND_WAIT_MS 2000

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	/* with lock: events acknowledged, of which ROUTE_RESOLVED */
	unsigned int acked, routes;
	/* with lock: the id whose events the reader expects; what went
	 * wrong in the reader, or NULL */
	struct rdma_cm_id *cur;
	const char *wrong;
	bool stop;
} idr = { .lock = PTHREAD_MUTEX_INITIALIZER,
	  .cond = PTHREAD_COND_INITIALIZER };

static void *id_reader(void *arg)
{
	struct rdma_event_channel *ch = arg;
	struct rdma_cm_event *ev;
	const char *wrong;

	for (;;) {
		if (rdma_get_cm_event(ch, &ev)) {
			pthread_mutex_lock(&idr.lock);
			idr.wrong = "rdma_get_cm_event failed";
			pthread_cond_broadcast(&idr.cond);
			pthread_mutex_unlock(&idr.lock);
			return NULL;
		}
		pthread_mutex_lock(&idr.lock);
		wrong = NULL;
		if (ev->id != idr.cur)
			wrong = "an event names another id";
		else if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED &&
			 ntohs(rdma_get_dst_port(ev->id)) != ID_PORT)
			wrong = "ROUTE_RESOLVED without the destination";
		else if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED &&
			 ev->event != RDMA_CM_EVENT_ROUTE_RESOLVED)
			wrong = "an event neither ADDR_ nor ROUTE_RESOLVED";
		if (wrong && !idr.wrong)
			idr.wrong = wrong;
		if (ev->event == RDMA_CM_EVENT_ROUTE_RESOLVED)
			idr.routes++;
		pthread_mutex_unlock(&idr.lock);
		rdma_ack_cm_event(ev);
		pthread_mutex_lock(&idr.lock);
		idr.acked++;
		pthread_cond_broadcast(&idr.cond);
		if (idr.stop) {
			pthread_mutex_unlock(&idr.lock);
			return NULL;
		}
		pthread_mutex_unlock(&idr.lock);
	}
}

/* Wait (at most ROUND_WAIT_MS) until the reader acknowledged n events. */
static int wait_acked(unsigned int n)
{
	struct timespec until;
	int ret = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ROUND_WAIT_MS / 1000;
	pthread_mutex_lock(&idr.lock);
	while (idr.acked < n && !idr.wrong && !ret)
		ret = pthread_cond_timedwait(&idr.cond, &idr.lock, &until);
	ret = idr.acked >= n ? 0 : -1;
	pthread_mutex_unlock(&idr.lock);
	return ret;
}

static int test_id(void)
{
	struct sockaddr_in dst = loopback(ID_PORT);
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	unsigned int expect = 0, routes;
	pthread_t t;

	ch = rdma_create_event_channel();
	if (!ch)
		return errno == ENODEV ? 77
				       : say_fail("rdma_create_event_channel",
						  errno);
	if (pthread_create(&t, NULL, id_reader, ch))
		return say_fail("pthread_create", EAGAIN);
	for (int i = 0; i < ID_ROUNDS; i++) {
		uint64_t until;

		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
			return say_fail("rdma_create_id", errno);
		pthread_mutex_lock(&idr.lock);
		idr.cur = id;
		pthread_mutex_unlock(&idr.lock);
		if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000))
			return say_fail("rdma_resolve_addr", errno);
		if (wait_acked(++expect))
			return say_fail("no ADDR_RESOLVED", ETIMEDOUT);
		if (rdma_resolve_route(id, 1000))
			return say_fail("rdma_resolve_route", errno);
		until = now_ns() + (uint64_t)(i % 64) * 500;
		while (now_ns() < until)
			;
		if (rdma_destroy_id(id))
			return say_fail("rdma_destroy_id", errno);
		pthread_mutex_lock(&idr.lock);
		/* a ROUTE_RESOLVED reported is acknowledged by now; one
		 * not reported never comes */
		routes = idr.routes;
		idr.cur = NULL;
		expect = idr.acked;
		if (idr.wrong) {
			pthread_mutex_unlock(&idr.lock);
			return say_fail(idr.wrong, EPROTO);
		}
		pthread_mutex_unlock(&idr.lock);
	}
	/* the reader's last event: it stops after it */
	pthread_mutex_lock(&idr.lock);
	idr.stop = true;
	pthread_mutex_unlock(&idr.lock);
	if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP))
		return say_fail("rdma_create_id", errno);
	pthread_mutex_lock(&idr.lock);
	idr.cur = id;
	pthread_mutex_unlock(&idr.lock);
	if (rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000) ||
	    wait_acked(expect + 1))
		return say_fail("the last ADDR_RESOLVED", errno);
	pthread_join(t, NULL);
	rdma_destroy_id(id);
	rdma_destroy_event_channel(ch);
	printf("ok: cm-teardown id: %d rounds, %u ROUTE_RESOLVED handled "
	       "while the id was destroyed or before\n",
	       ID_ROUNDS, routes);
	return 0;
}

/* ---- late ---- */

#define LATE_ROUNDS 200

static int test_late(void)
{
	struct sockaddr_in dst = loopback(7794);

	for (int i = 0; i < LATE_ROUNDS; i++) {
		struct rdma_event_channel *ch;
		struct rdma_cm_event *ev;
		struct rdma_cm_id *id;

		ch = rdma_create_event_channel();
		if (!ch)
			return errno == ENODEV
				       ? 77
				       : say_fail("rdma_create_event_channel",
						  errno);
		if (rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
		    rdma_resolve_addr(id, NULL, (struct sockaddr *)&dst, 1000))
			return say_fail("rdma_create_id, rdma_resolve_addr",
					errno);
		/* an event queued, then dropped with its id */
		if (rdma_destroy_id(id))
			return say_fail("rdma_destroy_id", errno);
		rdma_destroy_event_channel(ch);
		errno = 0;
		if (rdma_get_cm_event(ch, &ev) != -1 || errno != EBADF)
			return say_fail("rdma_get_cm_event on a destroyed "
					"channel is not EBADF",
					errno);
	}
	printf("ok: cm-teardown late: %d rounds\n", LATE_ROUNDS);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "chan"))
		return test_chan();
	if (!strcmp(mode, "id"))
		return test_id();
	if (!strcmp(mode, "late"))
		return test_late();
	fprintf(stderr, "usage: cm_teardown chan|id|late\n");
	return 1;
}
