// SPDX-License-Identifier: MIT
/* The shared-memory transport's inbox (see inbox.h for the protocol). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cpu.h"
#include "inbox.h"
#include "log.h"
#include "node.h"
#include "shmfile.h"

/* An inbox is named for its owner's token: unique whatever the pid
 * namespace, and not known to anyone before the owner draws it. */
static void inbox_name(char *buf, size_t len, const char *node_name,
		       uint64_t token)
{
	snprintf(buf, len, "%s-p%016" PRIx64, node_name, token);
}

int inbox_create(const char *node_name, uint64_t token, bool fence_issuer,
		 struct inbox **ib_p, char *name, size_t name_len)
{
	struct inbox *ib;
	uint32_t i;
	void *map;
	int ret;

	inbox_name(name, name_len, node_name, token);
	ret = shmfile_create(name, sizeof(*ib), "process inbox", NULL, &map,
			     NULL);
	if (ret)
		return ret;
	ib = map;
	ib->token = token;
	ib->fence_issuer = fence_issuer;
	atomic_init(&ib->head, 0);
	atomic_init(&ib->tail, 0);
	for (i = 0; i < INBOX_SLOTS; i++)
		atomic_init(&ib->slots[i].seq, i);
	atomic_store_explicit(&ib->magic, INBOX_MAGIC, memory_order_release);
	*ib_p = ib;
	return 0;
}

int inbox_map(const char *node_name, uint64_t token, struct inbox **ib_p)
{
	char name[160];
	struct inbox *ib;
	void *map;
	int fd, ret;

	inbox_name(name, sizeof(name), node_name, token);
	fd = shmfile_open(name, "process inbox");
	if (fd < 0)
		return fd;
	/* Shorter than an inbox: not one of this layout; never map past
	 * its end. */
	ret = shmfile_map(fd, sizeof(*ib), &map);
	close(fd);
	if (ret)
		return ret == -EAGAIN ? -EPERM : ret;
	ib = map;
	if (atomic_load_explicit(&ib->magic, memory_order_acquire) !=
		    INBOX_MAGIC ||
	    ib->token != token) {
		munmap(ib, sizeof(*ib));
		return -EAGAIN;
	}
	*ib_p = ib;
	return 0;
}

void inbox_unmap(struct inbox *ib)
{
	munmap(ib, sizeof(*ib));
}

void inbox_unlink(const char *node_name, uint64_t token)
{
	char name[160];

	inbox_name(name, sizeof(name), node_name, token);
	shmfile_unlink(name);
}

/* How many positions ahead of the one it publishes a producer asks for
 * a slot's lines (inbox_publish). */
#define INBOX_PREFETCH_AHEAD 4

/* Times a claim finds a slot ahead of a tail that does not move before it
 * gives up (see inbox_claim). */
#define INBOX_CLAIM_STALLS 1024

struct inbox_slot *inbox_claim(struct inbox *ib, int32_t claimer,
			       uint64_t *pos_p)
{
	uint64_t pos = atomic_load_explicit(&ib->tail, memory_order_relaxed);
	unsigned int stalls = 0;
	struct inbox_slot *s;
	uint64_t seq, tail;
	int64_t dif;

	for (;;) {
		s = &ib->slots[pos & (INBOX_SLOTS - 1)];
		seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(
				    &ib->tail, &pos, pos + 1,
				    memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (dif < 0 || (seq & INBOX_SEQ_QUARANTINED)) {
			/* Full: not read yet, or out of service until the
			 * consumer's head reaches it.  In the second case
			 * the consumer may be asleep with nothing to read. */
			if (atomic_load_explicit(&ib->sleeping,
						 memory_order_relaxed))
				inbox_wake(ib);
			return NULL;
		} else {
			/* Another producer took pos: look again.  A slot
			 * ahead of a tail that stays put was written by no
			 * producer (a peer wrote garbage): give up, as if
			 * full, rather than spin for good. */
			tail = atomic_load_explicit(&ib->tail,
						    memory_order_relaxed);
			if (tail == pos && ++stalls > INBOX_CLAIM_STALLS)
				return NULL;
			pos = tail;
		}
	}
	/* Who holds the slot, for a consumer that finds it unpublished. */
	atomic_store_explicit(&s->claim, INBOX_CLAIM_TAG(pos, claimer),
			      memory_order_relaxed);
	*pos_p = pos;
	return s;
}

static long futex(_Atomic uint32_t *addr, int op, uint32_t val,
		  const struct timespec *ts)
{
	return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

void inbox_wake(struct inbox *ib)
{
	atomic_store(&ib->sleeping, 0);
	atomic_fetch_add(&ib->wake, 1);
	futex(&ib->wake, FUTEX_WAKE, 1, NULL);
}

void inbox_publish(struct inbox *ib, struct inbox_slot *s, uint64_t pos)
{
	const struct inbox_slot *ahead =
		&ib->slots[(pos + INBOX_PREFETCH_AHEAD) & (INBOX_SLOTS - 1)];

	/* The slot a later claim will likely fill: its first lines, which
	 * the consumer read a lap ago, start on their way back here now,
	 * while this store waits for its own line (cpu.h).  Not the next
	 * slot: an idle consumer polls that one. */
	cpu_prefetch_write(ahead);
	cpu_prefetch_write((const char *)ahead + 64);
	/* Into a quarantined slot, this makes it the consumer's again.
	 * Store-load order against the sleeper's flag-then-check. */
	cpu_store_fence_u64(&s->seq, pos + 1);
	if (atomic_load_explicit(&ib->sleeping, memory_order_relaxed))
		inbox_wake(ib);
}

void inbox_consumer_init(struct inbox_consumer *c,
			 enum inbox_claimer (*claimer_state)(void *arg,
							     int32_t proc),
			 void *arg)
{
	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->lock, NULL);
	c->grace_ns = INBOX_CLAIM_GRACE_NS;
	c->grace_live_ns = INBOX_CLAIM_GRACE_LIVE_NS;
	c->claimer_state = claimer_state;
	c->arg = arg;
}

/* The claimer a tag names if it claimed position pos, else -1. */
static int32_t inbox_claimer(const struct inbox_slot *s, uint64_t pos)
{
	uint32_t tag = atomic_load_explicit(&s->claim, memory_order_relaxed);

	if (INBOX_CLAIM_LAP(tag) != (uint16_t)(pos / INBOX_SLOTS))
		return -1;
	return INBOX_CLAIM_PROC(tag);
}

static enum inbox_claimer inbox_claimer_state(struct inbox_consumer *c,
					      int32_t proc)
{
	if (proc < 0 || !c->claimer_state)
		return INBOX_CLAIMER_UNKNOWN;
	return c->claimer_state(c->arg, proc);
}

/* See inbox_skip_one. */
#define INBOX_CLAIM_ASK_NS (1000ull * 1000)

/*
 * One step on the slot at head that is not published.  Caller holds
 * c->lock.  Returns true if the head moved (look again).
 */
static bool inbox_skip_one(struct inbox *ib, struct inbox_consumer *c,
			   uint64_t head)
{
	struct inbox_slot *s = &ib->slots[head & (INBOX_SLOTS - 1)];
	uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
	enum inbox_claimer state;
	uint64_t tail, now;
	int32_t who;

	if ((seq & INBOX_SEQ_QUARANTINED) ||
	    (seq < head && ((seq - 1) & (INBOX_SLOTS - 1)) ==
				   (head & (INBOX_SLOTS - 1)))) {
		/* Quarantined (Q | p), or published late (p + 1) by its
		 * claimer.  Producers stop at such a slot, so the tail is
		 * here: back in service once published or its claimer is
		 * gone, else skip the position ourselves. */
		tail = atomic_load_explicit(&ib->tail, memory_order_relaxed);
		if (tail != head)
			return false; /* not ours to fix: a peer scribbled */
		if (!(seq & INBOX_SEQ_QUARANTINED) ||
		    inbox_claimer_state(c, inbox_claimer(
						   s, seq & INBOX_SEQ_POS)) ==
			    INBOX_CLAIMER_GONE) {
			atomic_store_explicit(&s->claim, 0,
					      memory_order_relaxed);
			atomic_store_explicit(&s->seq, head,
					      memory_order_release);
			return false;
		}
		if (!atomic_compare_exchange_strong_explicit(
			    &ib->tail, &tail, head + 1, memory_order_relaxed,
			    memory_order_relaxed))
			return false;
		atomic_store_explicit(&ib->head, head + 1,
				      memory_order_relaxed);
		c->hopped++;
		return true;
	}
	if (seq != head)
		return false; /* published meanwhile, or garbage */
	/* Claimed (the tail is past head), or empty? */
	tail = atomic_load_explicit(&ib->tail, memory_order_relaxed);
	if ((int64_t)(tail - head) <= 0) {
		c->stuck_since = 0;
		return false; /* empty */
	}
	now = clock_now_ns();
	if (!c->stuck_since || c->stuck_pos != head) {
		c->stuck_pos = head;
		c->stuck_since = now;
		c->asked_at = 0;
		return false;
	}
	/* A producer fills a slot in microseconds: ask about the claimer
	 * (system calls) only once the claim has stood a while, and then
	 * at most once per INBOX_CLAIM_ASK_NS. */
	if (now - c->stuck_since < INBOX_CLAIM_ASK_NS ||
	    now - c->asked_at < INBOX_CLAIM_ASK_NS)
		return false;
	who = inbox_claimer(s, head);
	state = inbox_claimer_state(c, who);
	c->asked_at = now;
	if (state != INBOX_CLAIMER_GONE &&
	    now - c->stuck_since < (state == INBOX_CLAIMER_STOPPED ?
					    c->grace_ns :
					    c->grace_live_ns))
		return false;
	/* Give up on the claimer: one CAS against its publish. */
	if (!atomic_compare_exchange_strong_explicit(
		    &s->seq, &seq, INBOX_SEQ_QUARANTINED | head,
		    memory_order_relaxed, memory_order_relaxed))
		return false; /* published just now */
	atomic_store_explicit(&ib->head, head + 1, memory_order_relaxed);
	c->stuck_since = 0;
	c->abandoned++;
	ibemu_log_warn("inbox: position %" PRIu64 " claimed by process slot "
		       "%d (%s) was not published in time; skipped (a lost "
		       "packet)", head, (int)who,
		       state == INBOX_CLAIMER_GONE	  ? "gone" :
		       state == INBOX_CLAIMER_STOPPED ? "stopped" :
		       state == INBOX_CLAIMER_RUNS	  ? "running" :
							    "unknown");
	return true;
}

struct inbox_slot *inbox_skip(struct inbox *ib, struct inbox_consumer *c)
{
	struct inbox_slot *s = NULL;
	unsigned int i;

	if (pthread_mutex_trylock(&c->lock))
		return NULL; /* another thread is at it */
	/* Bounded: at most one lap of skipped positions per call. */
	for (i = 0; i < INBOX_SLOTS; i++) {
		if (!inbox_skip_one(ib, c, atomic_load_explicit(
						   &ib->head,
						   memory_order_relaxed)))
			break;
		s = inbox_peek(ib);
		if (s)
			break;
	}
	pthread_mutex_unlock(&c->lock);
	return s;
}

/* Whether the slot at head is claimed and not yet published, so that a
 * sleeper must come back to skip it. */
static bool inbox_head_claimed(struct inbox *ib)
{
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed);
	uint64_t tail = atomic_load_explicit(&ib->tail, memory_order_relaxed);
	uint64_t seq = atomic_load_explicit(
		&ib->slots[head & (INBOX_SLOTS - 1)].seq, memory_order_relaxed);

	return seq == head && (int64_t)(tail - head) > 0;
}

static void ns_to_timespec(uint64_t ns, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ns / 1000000000ull);
	ts->tv_nsec = (long)(ns % 1000000000ull);
}

void inbox_nap(struct inbox *ib, uint64_t timeout_ns)
{
	uint32_t v = atomic_load(&ib->wake);
	struct timespec ts;

	ns_to_timespec(timeout_ns, &ts);
	futex(&ib->wake, FUTEX_WAIT, v, &ts);
}

void inbox_sleep(struct inbox *ib, uint64_t timeout_ns, atomic_bool *more)
{
	uint32_t v = atomic_load(&ib->wake);
	struct timespec ts, *tsp = NULL;

	atomic_store(&ib->sleeping, 1);
	atomic_thread_fence(memory_order_seq_cst);
	if (inbox_peek(ib) || (more && atomic_load(more))) {
		atomic_store(&ib->sleeping, 0);
		return;
	}
	/* A claimer that stopped at our head: come back to skip it. */
	if (inbox_head_claimed(ib) &&
	    (!timeout_ns || timeout_ns > INBOX_CLAIM_GRACE_NS / 4))
		timeout_ns = INBOX_CLAIM_GRACE_NS / 4;
	if (timeout_ns) {
		ns_to_timespec(timeout_ns, &ts);
		tsp = &ts;
	}
	futex(&ib->wake, FUTEX_WAIT, v, tsp);
	atomic_store(&ib->sleeping, 0);
}
