/* SPDX-License-Identifier: MIT */
/*
 * The node's inboxes, which the shared-memory transport carries packets
 * in (tp_shm.c): every process of a node owns one inbox, a shared-memory
 * object into which any process of the node writes packets for it.  An
 * inbox is a bounded multi-producer, single-consumer ring of packet
 * slots (a sequence number per slot, as in D. Vyukov's bounded queue): producers claim a slot with one compare-and-swap on the tail,
 * write who claimed it, fill it and publish it by storing its sequence
 * number; the consumer (the owner's engine) reads slots in order.
 *
 * The sequence number of the slot for position p (p modulo INBOX_SLOTS):
 *   p          free for position p; claimed once the tail is past p
 *   p + 1      published: the consumer may read it
 *   Q | p      quarantined: the consumer gave up waiting for the claimer
 *              of p (stopped or dead) and went on: the packet is lost
 *   p + 1 seen when the head is past p: the claimer of p came back and
 *              published into its quarantined slot; the packet stays lost
 * with Q = INBOX_SEQ_QUARANTINED.  A claimer that stops must never write
 * into a slot someone else owns, and its stale packet must never be read:
 * the consumer quarantines with one compare-and-swap (p to Q | p), so
 * either the publish came first and the packet is read, or the
 * quarantine did and the slot stays the claimer's until it publishes.
 * Producers reaching a slot still quarantined or late-published treat the
 * ring as full (as for a slot not yet read) and wake the consumer, which,
 * when its head reaches that position, moves the tail past it (the
 * position is skipped) or, once the claimer has published or is known
 * dead, puts the slot back in service.  A claimer that died costs at
 * worst one skipped position per lap.  Publishing stays one plain store:
 * the fast path pays nothing for this.  To the engine a skipped position
 * is a lost packet (RC retransmits, IBA 9.7.5).
 *
 * Waking the owner: its progress thread sleeps on a futex in the inbox
 * only after announcing it in `sleeping`; a producer that sees the flag
 * bumps `wake` and calls FUTEX_WAKE.  A busy-polling owner never sets the
 * flag, so the fast path has no system call and no thread wake-up.
 */
#ifndef IBEMU_INBOX_H
#define IBEMU_INBOX_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "params.h"
#include "wire.h"

#define INBOX_MAGIC 0x69626d75696e6278ull /* "ibmuinbx" */
/*
 * Packet slots: a power of two.  Every inbox is allocated for real
 * (shmfile.h), so its size is what a process costs in /dev/shm: 128 slots
 * of 4.2 KiB (592 KiB with the rest) let 64 processes share Docker's
 * default 64 MiB /dev/shm, the most that does.  Latency and the bandwidth
 * of cross-memory attach do not depend on it; the packet path's does
 * (doc/design.md §8 "The shared-memory transport" has the figures).
 */
#define INBOX_SLOTS 128
/*
 * Published memory regions, a power of two: region key index i is
 * published in mrs[i % INBOX_PUB_MRS] if that entry is free.  A region
 * that finds its entry taken by another live region is not published,
 * and RDMA to it takes the packet path (cma.c).
 */
#define INBOX_PUB_MRS 1024

#define INBOX_SEQ_QUARANTINED (1ull << 63)
#define INBOX_SEQ_POS (INBOX_SEQ_QUARANTINED - 1)

/* How long a consumer waits for a claimed slot to be published before it
 * skips the position: at once when the claimer is gone, this long when it
 * is stopped (SIGSTOP, a debugger), and the long grace when it runs or is
 * unknown (a thread preempted on a loaded machine must not lose its
 * packet, yet nothing may wedge the consumer for good). */
#define INBOX_CLAIM_GRACE_NS (20ull * 1000 * 1000)
#define INBOX_CLAIM_GRACE_LIVE_NS (1000ull * 1000 * 1000)

/* What the owner knows of the process that claimed a slot. */
enum inbox_claimer {
	INBOX_CLAIMER_UNKNOWN,
	INBOX_CLAIMER_RUNS,
	INBOX_CLAIMER_STOPPED,
	INBOX_CLAIMER_GONE,
};

/* Who claimed a slot: the lap of the position (its low 16 bits) and the
 * claimer's node process slot + 1 (0: unknown).  A hint only. */
#define INBOX_CLAIM_TAG(pos, proc)                                             \
	((uint32_t)(((pos) / INBOX_SLOTS) << 16) | (uint16_t)((proc) + 1))
#define INBOX_CLAIM_LAP(tag) ((uint16_t)((tag) >> 16))
#define INBOX_CLAIM_PROC(tag) ((int32_t)((tag) & 0xffff) - 1)

/*
 * A packet slot.  The sequence number, the link header and the first 32
 * bytes of the packet share one cache line, so an ACK or a small SEND
 * moves between the cores as a single line.
 */
struct inbox_slot {
	_Atomic uint64_t seq;
	struct pkt_hdr hdr;
	/* INBOX_CLAIM_TAG(), written by the claimer after its claim */
	_Atomic uint32_t claim;
	alignas(32) uint8_t data[PKT_MAX_LEN];
	struct pkt_grh grh; /* valid when hdr.flags has PKT_F_GRH */
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct inbox_slot, data) == 32,
	       "a small packet shares the slot's first cache line");
_Static_assert(IBEMU_MAX_PROCS < 0xffff, "a claim tag names any process");

/*
 * A memory region as its owner publishes it for requesters that place
 * RDMA data themselves (cma.c).  Lock rule: seqlock.h; the writers are
 * the owner's threads registering, re-registering or deregistering a
 * region, serialised by the owner's hca.lock.
 */
struct pub_mr {
	_Atomic uint32_t seq;
	_Atomic uint32_t key; /* rkey; 0: no region */
	_Atomic uint32_t access;
	_Atomic uint64_t pd_id;
	_Atomic uint64_t addr, iova, length;
	/* The window of the owner's memfd holding the region's whole pages
	 * (mr_memfd.h): descriptor, the id in the memfd's name, file
	 * offset, the owner's address of its start, length (0: none,
	 * cross-memory attach only). */
	_Atomic int32_t map_fd;
	_Atomic uint64_t map_id, map_off, map_lo, map_len;
};

struct inbox {
	/* Stored last by the owner, with release order (inbox_create);
	 * read first by a peer, with acquire order (inbox_map): a peer that
	 * maps an inbox still being made (it is sized before it is filled)
	 * sees no magic, or every field stored before it.  On x86 both are
	 * plain moves; on arm64 a store-release and a load-acquire. */
	_Atomic uint64_t magic;
	uint64_t token; /* the owner's (node.h), which names the inbox */
	/* Written once by the owner before magic: non-zero if its placement
	 * fence issues a remote fence (remote_fence.h, cma.c). */
	uint32_t fence_issuer;
	/* Set, never cleared, by a requester before its first placement
	 * into the owner announced without a fence of its own (cma.c).
	 * Any process may write it: non-zero costs the owner a remote
	 * fence at each of its placement fences, nothing else. */
	_Atomic uint32_t lean_placers;
	/* producers; the consumer when it skips a quarantined position */
	alignas(64) _Atomic uint64_t tail;
	/* the consumer, under its engine lock; read by the sleeper */
	alignas(64) _Atomic uint64_t head;
	alignas(64) _Atomic uint32_t wake; /* futex word */
	_Atomic uint32_t sleeping; /* the owner's thread waits on `wake` */
	alignas(64) struct inbox_slot slots[INBOX_SLOTS];
	struct pub_mr mrs[INBOX_PUB_MRS]; /* by key index, see above */
	/* Requester-placed RDMA in progress, by the placer's node slot:
	 * target QPN << 32 | R_Key, 0 when none (cma.c, the fence). */
	_Atomic uint64_t placing[IBEMU_MAX_PROCS];
};

/* Create the inbox of the calling process, whose node token is token;
 * 0 or -errno.  name gets its name.  fence_issuer: see struct inbox. */
int inbox_create(const char *node_name, uint64_t token, bool fence_issuer,
		 struct inbox **ib_p, char *name, size_t name_len);
/* Map the inbox of the process with that token (read-write). */
int inbox_map(const char *node_name, uint64_t token, struct inbox **ib_p);
void inbox_unmap(struct inbox *ib);
void inbox_unlink(const char *node_name, uint64_t token);

/* Producer: claim a slot (NULL when full), fill it, then publish it.
 * claimer: the caller's node process slot (-1: none).  A packet published
 * after the consumer skipped its slot is lost. */
struct inbox_slot *inbox_claim(struct inbox *ib, int32_t claimer,
			       uint64_t *pos_p);
void inbox_publish(struct inbox *ib, struct inbox_slot *slot, uint64_t pos);

/*
 * The consumer's own state (process memory).  Lock rule: `lock`
 * serialises skips (inbox_next's slow path); releases run under the
 * owner's engine lock.  A skip acts only on a slot that is not published
 * and a release only on one that is, so the two never meet on one
 * position.
 */
struct inbox_consumer {
	pthread_mutex_t lock;
	uint64_t stuck_pos; /* the head position seen claimed, unpublished */
	uint64_t stuck_since; /* when (CLOCK_MONOTONIC ns); 0: not stuck */
	uint64_t asked_at; /* when claimer_state was last asked */
	/* INBOX_CLAIM_GRACE_NS and _LIVE_NS unless a test says */
	uint64_t grace_ns, grace_live_ns;
	/* What is known of node process slot proc (NULL: nothing) */
	enum inbox_claimer (*claimer_state)(void *arg, int32_t proc);
	void *arg;
	/* For tests and statistics: claims given up (packets lost) and
	 * positions stepped over at a slot out of service. */
	uint64_t abandoned, hopped;
	/* Peeks that found nothing, counted without a lock (a lost count
	 * costs nothing): every INBOX_CHECK_PEEKS-th looks for a claim
	 * stuck at head. */
	_Atomic unsigned int empty_peeks;
	/* Positions read and not yet given back: [head, head + held)
	 * (inbox_release_later).  Written under the owner's engine lock;
	 * a peek without it may read a stale count (it only looks). */
	_Atomic unsigned int held;
};

void inbox_consumer_init(struct inbox_consumer *c,
			 enum inbox_claimer (*claimer_state)(void *arg,
							     int32_t proc),
			 void *arg);

/* Consumer: the next published slot or NULL; release it when done.
 * inbox_peek only looks; inbox_next also skips a position whose claimer
 * stopped or died (see above), as does inbox_skip, which the owner's
 * progress thread calls each time it wakes. */
static inline struct inbox_slot *inbox_peek(struct inbox *ib)
{
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed);
	struct inbox_slot *s = &ib->slots[head & (INBOX_SLOTS - 1)];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) != head + 1)
		return NULL;
	return s;
}

/* Empty peeks between two looks for a claim stuck at head (the tail is a
 * line the producers write: not read on every peek). */
#define INBOX_CHECK_PEEKS 1024

struct inbox_slot *inbox_skip(struct inbox *ib, struct inbox_consumer *c);

static inline struct inbox_slot *inbox_next(struct inbox *ib,
					    struct inbox_consumer *c)
{
	unsigned int held = atomic_load_explicit(&c->held,
						 memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed) +
			held;
	struct inbox_slot *s = &ib->slots[head & (INBOX_SLOTS - 1)];
	uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
	unsigned int n;

	if (seq == head + 1) {
		/* The packet's second line (headers and payload past the
		 * first 32 bytes), and the next slot's two lines: in a
		 * stream they are published already, and their transfers
		 * from the producer's core overlap this packet's work
		 * instead of stalling the next peek (doc/design.md §8
		 * "The shared-memory transport"). */
		const char *next = (const char *)&ib->slots[(head + 1) &
							    (INBOX_SLOTS - 1)];

		__builtin_prefetch((const char *)s + 64, 0, 3);
		__builtin_prefetch(next, 0, 3);
		__builtin_prefetch(next + 64, 0, 3);
		return s;
	}
	/* Skips work at head: they wait until what is held goes back. */
	if (held)
		return NULL;
	if (seq == head) { /* empty, or claimed and not yet published */
		n = atomic_load_explicit(&c->empty_peeks,
					 memory_order_relaxed) + 1;
		atomic_store_explicit(&c->empty_peeks, n,
				      memory_order_relaxed);
		if (n % INBOX_CHECK_PEEKS)
			return NULL;
	}
	return inbox_skip(ib, c);
}

/* Give the n slots from head back to the producers (consumer side). */
static inline void inbox_give_back(struct inbox *ib, unsigned int n)
{
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed);
	unsigned int i;

	for (i = 0; i < n; i++)
		atomic_store_explicit(
			&ib->slots[(head + i) & (INBOX_SLOTS - 1)].seq,
			head + i + INBOX_SLOTS, memory_order_release);
	atomic_store_explicit(&ib->head, head + n, memory_order_relaxed);
}

/* The slot at head (inbox_peek's) is read: give it back now. */
static inline void inbox_release(struct inbox *ib, struct inbox_slot *s)
{
	(void)s;
	inbox_give_back(ib, 1);
}

/*
 * Give back every slot read since the last time (the consumer's
 * inbox_next reads on past them).  Giving a slot back is a store into a
 * line the producer wrote: done one at a time, each store would wait for
 * that line at the consumer's next locked instruction (the next packet's
 * QP lock); done in a batch, the lines travel together, and the last
 * batch of a drain can wait until the consumer is idle (progress.c).
 */
static inline void inbox_release_flush(struct inbox *ib,
				       struct inbox_consumer *c)
{
	inbox_give_back(ib, atomic_load_explicit(&c->held,
						 memory_order_relaxed));
	atomic_store_explicit(&c->held, 0, memory_order_relaxed);
}

/* Slots a consumer holds read before it gives them back at once. */
#define INBOX_RELEASE_BATCH 16

/* The slot inbox_next returned is read: given back with the next batch. */
static inline void inbox_release_later(struct inbox *ib,
				       struct inbox_consumer *c)
{
	unsigned int held = atomic_load_explicit(&c->held,
						 memory_order_relaxed) + 1;

	atomic_store_explicit(&c->held, held, memory_order_relaxed);
	if (held >= INBOX_RELEASE_BATCH)
		inbox_release_flush(ib, c);
}

/* The owner's progress thread: sleep until a producer wakes us or
 * timeout_ns passes (0: no timeout).  Returns at once if *more (work
 * announced by the owner's own threads) is set.  Returns after any
 * wake-up. */
void inbox_sleep(struct inbox *ib, uint64_t timeout_ns, atomic_bool *more);
/* Wait on the futex like inbox_sleep, without asking producers to wake
 * us: only inbox_wake() or the timeout ends it. */
void inbox_nap(struct inbox *ib, uint64_t timeout_ns);
/* Wake a sleeping owner, e.g. to stop its thread. */
void inbox_wake(struct inbox *ib);

#endif /* IBEMU_INBOX_H */
