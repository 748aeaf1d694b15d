// SPDX-License-Identifier: MIT
/*
 * The shared-memory inbox ring (emulator/node/inbox.h) alone: a packet goes
 * through claim, publish, peek and release; a full ring refuses a claim;
 * a ring a peer has scribbled on refuses a claim instead of making the
 * producer spin for good (nothing a peer writes may wedge another
 * process); and a producer that stops or dies between its claim and its
 * publish costs the consumer one lost packet, never a wedged ring nor a
 * stale packet delivered, however many laps the ring has made.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unit.h"

#include "inbox.h"
#include "shmfile.h"

static struct inbox *ib;
static char ib_name[160];

static void inbox_open(void)
{
	char node[64];

	snprintf(node, sizeof(node), "unit-inbox-%d", (int)getpid());
	CU_ASSERT_FATAL(inbox_create(node, 1, false, &ib, ib_name, sizeof(ib_name)) ==
			0);
}

/* Open an inbox that looks as if laps rounds had gone through it. */
static void inbox_open_at(uint64_t laps)
{
	uint64_t base = laps * INBOX_SLOTS;
	uint32_t i;

	inbox_open();
	atomic_store(&ib->head, base);
	atomic_store(&ib->tail, base);
	for (i = 0; i < INBOX_SLOTS; i++)
		atomic_store(&ib->slots[i].seq, base + i);
}

static void inbox_close(void)
{
	shmfile_unlink(ib_name);
	inbox_unmap(ib);
	ib = NULL;
}

static void test_roundtrip(void)
{
	struct inbox_slot *s;
	uint64_t pos;

	inbox_open();
	CU_ASSERT_PTR_NULL(inbox_peek(ib));
	s = inbox_claim(ib, -1, &pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	s->hdr.len = 12;
	s->data[0] = 0x11;
	inbox_publish(ib, s, pos);
	s = inbox_peek(ib);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(s->hdr.len, 12);
	CU_ASSERT_EQUAL(s->data[0], 0x11);
	inbox_release(ib, s);
	CU_ASSERT_PTR_NULL(inbox_peek(ib));
	inbox_close();
}

static void test_full(void)
{
	struct inbox_slot *s;
	uint64_t pos;
	unsigned int i;

	inbox_open();
	for (i = 0; i < INBOX_SLOTS; i++) {
		s = inbox_claim(ib, -1, &pos);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		inbox_publish(ib, s, pos);
	}
	CU_ASSERT_PTR_NULL(inbox_claim(ib, -1, &pos));
	/* One consumed: one more fits. */
	inbox_release(ib, inbox_peek(ib));
	CU_ASSERT_PTR_NOT_NULL(inbox_claim(ib, -1, &pos));
	inbox_close();
}

/* A slot whose sequence number is ahead of the tail: no claim can
 * succeed there, and none may spin; SIGALRM ends a claim that hangs. */
static void test_scribbled(void)
{
	uint64_t pos, tail;

	inbox_open();
	tail = atomic_load(&ib->tail);
	atomic_store(&ib->slots[tail & (INBOX_SLOTS - 1)].seq, tail + 7);
	alarm(10);
	CU_ASSERT_PTR_NULL(inbox_claim(ib, -1, &pos));
	alarm(0);
	inbox_close();
}

/* ---- producers that stop or die between claim and publish ---- */

static struct inbox_consumer cons;
/* What claimer_state reports, for one process slot */
static int32_t state_proc = -1;
static enum inbox_claimer state_of;

static enum inbox_claimer claimer_state(void *arg, int32_t proc)
{
	(void)arg;
	return proc == state_proc ? state_of : INBOX_CLAIMER_RUNS;
}

/* grace: for stopped claimers; live: for running or unknown ones */
static void consumer_init(uint64_t grace_ns, uint64_t live_ns)
{
	inbox_consumer_init(&cons, claimer_state, NULL);
	cons.grace_ns = grace_ns;
	cons.grace_live_ns = live_ns;
	state_proc = -1;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Claim, write v, publish: whether the packet went out.  A quarantined
 * slot at the tail makes the ring look full until the consumer's head
 * reaches it (and steps over it): let the consumer look once. */
static bool send_one(uint32_t v, int32_t who)
{
	struct inbox_slot *s;
	uint64_t pos;

	s = inbox_claim(ib, who, &pos);
	if (!s) {
		(void)inbox_next(ib, &cons);
		s = inbox_claim(ib, who, &pos);
	}
	if (!s)
		return false;
	memcpy(s->data, &v, sizeof(v));
	s->hdr.len = sizeof(v);
	inbox_publish(ib, s, pos);
	return true;
}

/* The next packet's value, or -1 after up to wait_ms without one.  As
 * the progress thread does: peek, and look for a stuck claim on waking. */
static int64_t recv_one(unsigned int wait_ms)
{
	struct inbox_slot *s;
	unsigned int i;
	uint32_t v;

	for (i = 0; i <= wait_ms * 10; i++) {
		s = inbox_next(ib, &cons);
		if (!s && i < wait_ms * 10) {
			usleep(100);
			s = inbox_skip(ib, &cons);
		}
		if (s) {
			memcpy(&v, s->data, sizeof(v));
			inbox_release(ib, s);
			return v;
		}
	}
	return -1;
}

/* Whether n packets round-trip through the ring, in order. */
static bool flows(unsigned int n, uint32_t first)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (!send_one(first + i, 1) || recv_one(100) != first + i)
			return false;
	return true;
}

/* How many claims fit before the ring says full (all published). */
static unsigned int fill(uint32_t first)
{
	unsigned int n = 0;

	while (n <= 2 * INBOX_SLOTS && send_one(first + n, 1))
		n++;
	return n;
}

/*
 * A producer claims a slot and never publishes (stopped or dead, its
 * process slot unknown): the packets behind it still arrive, after the
 * grace period, and the claim is a lost packet.  On a consumer that never
 * skips (the old inbox) the later packet never arrives.
 */
static void test_claim_never_published(void)
{
	uint64_t pos;

	inbox_open();
	consumer_init(5ull * 1000 * 1000, 5ull * 1000 * 1000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(inbox_claim(ib, -1, &pos));
	CU_ASSERT_TRUE_FATAL(send_one(42, 1));
	CU_ASSERT_EQUAL(recv_one(0), -1); /* within the grace period */
	CU_ASSERT_EQUAL(recv_one(1000), 42);
	CU_ASSERT_EQUAL(cons.abandoned, 1);
	CU_ASSERT_EQUAL(recv_one(0), -1);
	/* The ring goes on for laps with one position out of service. */
	CU_ASSERT_TRUE(flows(5 * INBOX_SLOTS, 1000));
	inbox_close();
}

/*
 * The claimer comes back after its slot was skipped: its packet is never
 * delivered, nothing it writes lands in a slot someone else owns, and the
 * slot returns to service, so the ring holds INBOX_SLOTS packets again.
 * Run at the start and after millions of laps (positions far beyond 32
 * bits, claim tags wrapped).
 */
static void stopped_claimer(uint64_t laps)
{
	struct inbox_slot *stale;
	uint64_t stale_pos, pos;
	unsigned int n, i;
	uint32_t v;

	inbox_open_at(laps);
	consumer_init(2ull * 1000 * 1000, 2ull * 1000 * 1000);
	CU_ASSERT_TRUE_FATAL(flows(3, 1));
	stale = inbox_claim(ib, 3, &stale_pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(stale);
	CU_ASSERT_TRUE_FATAL(send_one(7, 1));
	CU_ASSERT_EQUAL_FATAL(recv_one(1000), 7);
	CU_ASSERT_EQUAL(cons.abandoned, 1);
	/* While the claimer is away its slot is out of service: producers
	 * stop there as if the ring were full. */
	pos = atomic_load(&ib->tail);
	n = fill(100);
	CU_ASSERT_EQUAL(n, stale_pos + INBOX_SLOTS - pos);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(recv_one(100), 100 + i);
	CU_ASSERT_EQUAL(recv_one(0), -1);
	/* The consumer stepped over it a lap later. */
	CU_ASSERT_TRUE(flows(2, 5000));
	CU_ASSERT_EQUAL(cons.hopped, 1);
	/* Back from SIGSTOP: it writes its packet in its own slot and
	 * publishes it; the packet is never seen. */
	v = 0xdead;
	memcpy(stale->data, &v, sizeof(v));
	inbox_publish(ib, stale, stale_pos);
	CU_ASSERT_EQUAL(recv_one(0), -1);
	CU_ASSERT_TRUE(flows(3 * INBOX_SLOTS, 10000));
	/* Back in service: the ring holds INBOX_SLOTS again, nothing was
	 * skipped since. */
	n = fill(20000);
	CU_ASSERT_EQUAL(n, INBOX_SLOTS);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(recv_one(100), 20000 + i);
	CU_ASSERT_EQUAL(recv_one(0), -1);
	CU_ASSERT_EQUAL(cons.abandoned, 1);
	CU_ASSERT_EQUAL(cons.hopped, 1);
	inbox_close();
}

static void test_claim_skip_late_publish(void)
{
	stopped_claimer(0);
}

static void test_claim_skip_late_publish_laps(void)
{
	stopped_claimer(5ull * 1000 * 1000 + 65536 * 3 - 2);
}

/* A claimer that runs (preempted on a loaded machine) keeps its slot
 * for the long grace period; one that is stopped, for the short one; one
 * known gone is skipped at once, and its slot taken back on the next
 * lap. */
static void test_claimer_state(void)
{
	unsigned int n, i;
	uint64_t pos;

	inbox_open();
	consumer_init(3ull * 1000 * 1000, 3600ull * 1000 * 1000 * 1000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(inbox_claim(ib, 9, &pos));
	CU_ASSERT_TRUE_FATAL(send_one(11, 1));
	state_proc = 9;
	state_of = INBOX_CLAIMER_RUNS;
	CU_ASSERT_EQUAL(recv_one(30), -1);
	state_of = INBOX_CLAIMER_STOPPED;
	CU_ASSERT_EQUAL(recv_one(100), 11);
	CU_ASSERT_EQUAL(cons.abandoned, 1);

	consumer_init(3600ull * 1000 * 1000 * 1000,
		      3600ull * 1000 * 1000 * 1000);
	CU_ASSERT_PTR_NOT_NULL_FATAL(inbox_claim(ib, 9, &pos));
	CU_ASSERT_TRUE_FATAL(send_one(12, 1));
	CU_ASSERT_EQUAL(recv_one(10), -1);
	state_proc = 9;
	state_of = INBOX_CLAIMER_GONE;
	CU_ASSERT_EQUAL(recv_one(100), 12);
	CU_ASSERT_TRUE(flows(INBOX_SLOTS, 300));
	n = fill(3000);
	CU_ASSERT_EQUAL(n, INBOX_SLOTS);
	for (i = 0; i < n; i++)
		CU_ASSERT_EQUAL(recv_one(100), 3000 + i);
	CU_ASSERT_EQUAL(cons.abandoned, 1);
	CU_ASSERT_EQUAL(cons.hopped, 0);
	inbox_close();
}

/*
 * Two producer threads, one of which stops (sleeps past the grace
 * period) between claim and publish now and then, and one consumer, over
 * many laps: every packet arrives intact, in its producer's order, at
 * most once; every claim is either delivered or given up, never both.
 */
#define STRESS_PACKETS 200000u
#define STRESS_WORDS 16

static atomic_uint stress_done;

struct stress_producer {
	pthread_t th;
	uint32_t id;
	bool stops;
};

static void stress_fill(uint32_t *w, uint32_t id, uint32_t seq)
{
	unsigned int k;

	w[0] = id;
	w[1] = seq;
	for (k = 2; k < STRESS_WORDS; k++)
		w[k] = (id * 2654435761u) ^ (seq * 40503u) ^ k;
}

/* The consumer's abandoned count, for the stopping producer. */
static _Atomic uint64_t stress_abandons;

static void stress_stop(void)
{
	uint64_t seen = atomic_load(&stress_abandons);
	unsigned int ms;

	sleep_ms(60);
	for (ms = 60; ms < 2000 && atomic_load(&stress_abandons) == seen; ms++)
		sleep_ms(1);
}

static void *stress_produce(void *arg)
{
	struct stress_producer *p = arg;
	uint32_t seq = 0, w[STRESS_WORDS];
	time_t full_since = 0;
	struct inbox_slot *s;
	uint64_t pos;

	while (seq < STRESS_PACKETS) {
		s = inbox_claim(ib, (int32_t)p->id, &pos);
		if (!s) {
			/* A ring that stays full for seconds is wedged. */
			if (!full_since)
				full_since = time(NULL);
			else if (time(NULL) - full_since > 5)
				break;
			sched_yield();
			continue;
		}
		full_since = 0;
		/* Stopped past the grace period, then it writes its slot:
		 * skipped or not, nobody else's.  It stays stopped until
		 * the consumer, which may be far behind on a loaded
		 * machine, has passed over a slot (2 s at most). */
		if (p->stops && seq % 20000 == 19999)
			stress_stop();
		stress_fill(w, p->id, seq);
		memcpy(s->data, w, sizeof(w));
		inbox_publish(ib, s, pos);
		seq++;
	}
	atomic_fetch_add(&stress_done, 1);
	return NULL;
}

static void test_stress(void)
{
	struct stress_producer prod[2] = { { .id = 1 }, { .id = 2, .stops = true } };
	uint32_t next[3] = { 0 }, got[3] = { 0 }, w[STRESS_WORDS], x[STRESS_WORDS];
	struct inbox_slot *s;
	unsigned int i, idle = 0;
	bool ok = true;

	inbox_open();
	consumer_init(20ull * 1000 * 1000, 20ull * 1000 * 1000);
	for (i = 0; i < 2; i++)
		CU_ASSERT_FATAL(pthread_create(&prod[i].th, NULL,
					       stress_produce, &prod[i]) == 0);
	alarm(120);
	atomic_store(&stress_abandons, 0);
	while (idle < 100) {
		s = inbox_next(ib, &cons);
		atomic_store_explicit(&stress_abandons, cons.abandoned,
				      memory_order_relaxed);
		if (!s) {
			/* Done once both are and nothing comes for 100 ms. */
			if (atomic_load(&stress_done) == 2) {
				sleep_ms(1);
				idle++;
			}
			sched_yield();
			continue;
		}
		idle = 0;
		memcpy(w, s->data, sizeof(w));
		inbox_release(ib, s);
		if (w[0] >= 1 && w[0] <= 2)
			stress_fill(x, w[0], w[1]);
		if (w[0] < 1 || w[0] > 2 || w[1] < next[w[0]] ||
		    memcmp(w, x, sizeof(w))) {
			ok = false;
			break;
		}
		next[w[0]] = w[1] + 1;
		got[w[0]]++;
	}
	for (i = 0; i < 2; i++)
		pthread_join(prod[i].th, NULL);
	alarm(0);
	CU_ASSERT_TRUE(ok);
	CU_ASSERT_EQUAL(got[1] + got[2] + cons.abandoned, 2 * STRESS_PACKETS);
	CU_ASSERT_TRUE(cons.abandoned >= 1);
	inbox_close();
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "roundtrip", test_roundtrip },
		{ "full", test_full },
		{ "scribbled", test_scribbled },
		{ "claim never published", test_claim_never_published },
		{ "claim skipped, late publish", test_claim_skip_late_publish },
		{ "claim skipped, late publish, after millions of laps",
		  test_claim_skip_late_publish_laps },
		{ "running, stopped and dead claimers", test_claimer_state },
		{ "stress: stopping producer", test_stress },
		{ NULL, NULL },
	};

	return unit_run("inbox", tests);
}
