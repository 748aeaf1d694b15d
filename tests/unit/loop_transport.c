// SPDX-License-Identifier: MIT
/*
 * The engine's unit-test transport (loop_transport.h): two in-memory
 * queues, one lock and one condition variable.  Lock rule: loop.lock
 * protects both queues and the wake flag; it is a leaf (taken under
 * engine.lock and QP locks, never around them).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loop_transport.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct loop_pkt *in_head, *in_tail; /* to the engine */
	struct loop_pkt *out_head, *out_tail; /* from the engine */
	bool woken;
	atomic_bool sleeping;
	int room; /* packets the peer still takes; < 0: no limit */
	uint64_t taken; /* packets the peer took */
	enum { HOLD_NONE, HOLD_ARMED, HOLD_HELD, HOLD_DONE } hold;
	bool hold_timed_out; /* the held sleep ended by its bound */
} loop = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.room = -1,
};

/* The one process the engine reaches, whatever the slot. */
static struct tp_peer loop_peer = { .tp = &loop_ops };

static void loop_deadline(struct timespec *ts, uint64_t ns)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ns += (uint64_t)ts->tv_nsec;
	ts->tv_sec += (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

static void loop_append(struct loop_pkt **head, struct loop_pkt **tail,
			struct loop_pkt *p)
{
	p->next = NULL;
	if (*tail)
		(*tail)->next = p;
	else
		*head = p;
	*tail = p;
}

static struct loop_pkt *loop_pop(struct loop_pkt **head,
				 struct loop_pkt **tail)
{
	struct loop_pkt *p = *head;

	if (p) {
		*head = p->next;
		if (!*head)
			*tail = NULL;
	}
	return p;
}

static void loop_free_all(struct loop_pkt **head, struct loop_pkt **tail)
{
	struct loop_pkt *p;

	while ((p = loop_pop(head, tail)))
		free(p);
}

static int loop_open(struct engine *e)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&loop.cond, &attr);
	pthread_condattr_destroy(&attr);
	e->tp_priv = NULL;
	return 0;
}

static void loop_close(struct engine *e)
{
	loop_reset();
	pthread_cond_destroy(&loop.cond);
}

static void loop_forget(struct engine *e)
{
}

static struct tp_peer *loop_peer_get(struct engine *e, int32_t slot)
{
	return &loop_peer;
}

static bool loop_peer_is_self(struct engine *e, const struct tp_peer *peer)
{
	return false;
}

/* The engine's view of one of our packets. */
static bool loop_pkt_at(struct loop_pkt *p, struct tp_pkt *pkt)
{
	if (!p)
		return false;
	pkt->slot = p;
	pkt->hdr = &p->hdr;
	pkt->data = p->data;
	pkt->grh = &p->grh;
	pkt->pos = 0;
	return true;
}

static uint64_t loop_peer_taken(struct tp_peer *peer)
{
	uint64_t n;

	pthread_mutex_lock(&loop.lock);
	n = loop.taken;
	pthread_mutex_unlock(&loop.lock);
	return n;
}

static bool loop_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt)
{
	bool full;

	pthread_mutex_lock(&loop.lock);
	full = loop.room == 0;
	if (loop.room > 0)
		loop.room--;
	if (!full)
		loop.taken++;
	pthread_mutex_unlock(&loop.lock);
	if (full)
		return false;
	return loop_pkt_at(calloc(1, sizeof(struct loop_pkt)), pkt);
}

void loop_set_room(int room)
{
	pthread_mutex_lock(&loop.lock);
	loop.room = room;
	loop.woken = true;
	pthread_cond_broadcast(&loop.cond);
	pthread_mutex_unlock(&loop.lock);
}

static void loop_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt)
{
	pthread_mutex_lock(&loop.lock);
	loop_append(&loop.out_head, &loop.out_tail, pkt->slot);
	pthread_cond_broadcast(&loop.cond);
	pthread_mutex_unlock(&loop.lock);
}

/* Unlocked callers (engine_has_packet) only peek: the head stays until
 * pkt_release, which runs under engine.lock. */
static bool loop_pkt_peek(struct engine *e, struct tp_pkt *pkt)
{
	struct loop_pkt *p;

	pthread_mutex_lock(&loop.lock);
	p = loop.in_head;
	pthread_mutex_unlock(&loop.lock);
	return loop_pkt_at(p, pkt);
}

static void loop_pkt_release(struct engine *e, struct tp_pkt *pkt)
{
	struct loop_pkt *p;

	pthread_mutex_lock(&loop.lock);
	p = loop_pop(&loop.in_head, &loop.in_tail);
	pthread_cond_broadcast(&loop.cond);
	pthread_mutex_unlock(&loop.lock);
	free(p);
}

/* Wait for a packet, a wake, *more or the deadline; caller holds the
 * lock.  True if the deadline ended it. */
static bool loop_wait_locked(uint64_t timeout_ns, atomic_bool *more)
{
	struct timespec ts;
	int ret = 0;

	if (timeout_ns)
		loop_deadline(&ts, timeout_ns);
	while (!loop.in_head && !loop.woken && ret != ETIMEDOUT &&
	       !(more && atomic_load(more))) {
		if (timeout_ns)
			ret = pthread_cond_timedwait(&loop.cond, &loop.lock,
						     &ts);
		else
			pthread_cond_wait(&loop.cond, &loop.lock);
	}
	loop.woken = false;
	return ret == ETIMEDOUT && !loop.in_head && !(more && atomic_load(more));
}

/* Bound on a held sleep (loop_hold_sleep), whatever it waits for. */
#define LOOP_HOLD_NS (1000ull * 1000 * 1000)

/* The held sleep: wait for the wake that comes while the caller is on
 * its way to sleep, then sleep as a futex does, for which that wake came
 * too early: only a packet, *more, or a later wake end it.  Caller holds
 * the lock. */
static void loop_sleep_held_locked(atomic_bool *more)
{
	loop.hold = HOLD_HELD;
	loop.woken = false;
	pthread_cond_broadcast(&loop.cond);
	while (!loop.woken)
		pthread_cond_wait(&loop.cond, &loop.lock);
	loop.woken = false;
	loop.hold = HOLD_DONE;
	loop.hold_timed_out = loop_wait_locked(LOOP_HOLD_NS, more);
}

static void loop_sleep(struct engine *e, uint64_t timeout_ns,
		       atomic_bool *more)
{
	pthread_mutex_lock(&loop.lock);
	atomic_store(&loop.sleeping, true);
	if (loop.hold == HOLD_ARMED)
		loop_sleep_held_locked(more);
	else
		loop_wait_locked(timeout_ns, more);
	atomic_store(&loop.sleeping, false);
	pthread_mutex_unlock(&loop.lock);
}

static void loop_nap(struct engine *e, uint64_t timeout_ns)
{
	pthread_mutex_lock(&loop.lock);
	loop_wait_locked(timeout_ns ? timeout_ns : 1, NULL);
	pthread_mutex_unlock(&loop.lock);
}

static void loop_wake(struct engine *e)
{
	pthread_mutex_lock(&loop.lock);
	loop.woken = true;
	pthread_cond_broadcast(&loop.cond);
	pthread_mutex_unlock(&loop.lock);
}

static bool loop_is_sleeping(struct engine *e)
{
	return atomic_load(&loop.sleeping);
}

const struct transport_ops loop_ops = {
	.name = "loop",
	/* Its rooms are PKT_MAX_LEN bytes, carried whole (struct loop_pkt). */
	.bundles = true,
	.open = loop_open,
	.close = loop_close,
	.forget = loop_forget,
	.peer_get = loop_peer_get,
	.peer_is_self = loop_peer_is_self,
	.peer_taken = loop_peer_taken,
	.pkt_claim = loop_pkt_claim,
	.pkt_send = loop_pkt_send,
	.pkt_peek = loop_pkt_peek,
	.pkt_release = loop_pkt_release,
	.sleep = loop_sleep,
	.nap = loop_nap,
	.wake = loop_wake,
	.is_sleeping = loop_is_sleeping,
	.place = NULL,
};

void loop_inject(const struct loop_pkt *p)
{
	struct loop_pkt *copy = malloc(sizeof(*copy));

	if (!copy)
		abort();
	memcpy(copy, p, sizeof(*copy));
	pthread_mutex_lock(&loop.lock);
	loop_append(&loop.in_head, &loop.in_tail, copy);
	pthread_cond_broadcast(&loop.cond);
	pthread_mutex_unlock(&loop.lock);
}

struct loop_pkt *loop_capture(unsigned int timeout_ms)
{
	struct loop_pkt *p;
	struct timespec ts;
	int ret = 0;

	loop_deadline(&ts, timeout_ms * 1000000ull);
	pthread_mutex_lock(&loop.lock);
	while (!loop.out_head && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&loop.cond, &loop.lock, &ts);
	p = loop_pop(&loop.out_head, &loop.out_tail);
	pthread_mutex_unlock(&loop.lock);
	return p;
}

unsigned int loop_captured(void)
{
	unsigned int n = 0;
	struct loop_pkt *p;

	pthread_mutex_lock(&loop.lock);
	for (p = loop.out_head; p; p = p->next)
		n++;
	pthread_mutex_unlock(&loop.lock);
	return n;
}

void loop_reset(void)
{
	pthread_mutex_lock(&loop.lock);
	loop_free_all(&loop.in_head, &loop.in_tail);
	loop_free_all(&loop.out_head, &loop.out_tail);
	loop.room = -1;
	loop.hold = HOLD_NONE;
	pthread_mutex_unlock(&loop.lock);
}

bool loop_hold_sleep(unsigned int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	loop_deadline(&ts, timeout_ms * 1000000ull);
	pthread_mutex_lock(&loop.lock);
	loop.hold = HOLD_ARMED;
	loop.hold_timed_out = false;
	/* Out of the sleep it may be in, into the next one. */
	loop.woken = true;
	pthread_cond_broadcast(&loop.cond);
	while (loop.hold != HOLD_HELD && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&loop.cond, &loop.lock, &ts);
	ret = loop.hold == HOLD_HELD;
	pthread_mutex_unlock(&loop.lock);
	return ret;
}

bool loop_hold_timed_out(void)
{
	bool t;

	pthread_mutex_lock(&loop.lock);
	t = loop.hold_timed_out;
	pthread_mutex_unlock(&loop.lock);
	return t;
}

bool loop_settle(struct engine *e, unsigned int timeout_ms)
{
	struct timespec ts;
	int ret = 0;

	loop_deadline(&ts, timeout_ms * 1000000ull);
	pthread_mutex_lock(&loop.lock);
	while (loop.in_head && ret != ETIMEDOUT)
		ret = pthread_cond_timedwait(&loop.cond, &loop.lock, &ts);
	ret = loop.in_head ? ETIMEDOUT : 0;
	pthread_mutex_unlock(&loop.lock);
	if (ret)
		return false;
	/* The drain that released the last packet sends its coalesced
	 * ACKs before it lets engine.lock go. */
	emu_lock(&e->lock);
	emu_unlock(&e->lock);
	return true;
}
