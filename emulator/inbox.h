/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport: every process of a node owns one inbox, a
 * shared-memory object into which any process of the node writes packets
 * for it.  An inbox is a bounded multi-producer, single-consumer ring of
 * packet slots (a sequence number per slot, as in D. Vyukov's bounded
 * queue): producers claim a slot with one compare-and-swap on the tail
 * and publish it by storing its sequence number; the consumer (the
 * owner's engine, under its engine lock) reads slots in order.
 *
 * Waking the owner: its progress thread sleeps on a futex in the inbox
 * only after announcing it in `sleeping`; a producer that sees the flag
 * bumps `wake` and calls FUTEX_WAKE.  A busy-polling owner never sets the
 * flag, so the fast path has no system call and no thread wake-up.
 */
#ifndef IBEMU_INBOX_H
#define IBEMU_INBOX_H

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
 * (doc/design.md §8 has the figures).
 */
#define INBOX_SLOTS 128
/*
 * Published memory regions, a power of two: region key index i is
 * published in mrs[i % INBOX_PUB_MRS] if that entry is free.  A region
 * that finds its entry taken by another live region is not published,
 * and RDMA to it takes the packet path (cma.c).
 */
#define INBOX_PUB_MRS 1024

/*
 * A packet slot.  The sequence number, the link header and the first 32
 * bytes of the packet share one cache line, so an ACK or a small SEND
 * moves between the cores as a single line.
 */
struct inbox_slot {
	_Atomic uint64_t seq;
	struct pkt_hdr hdr;
	alignas(32) uint8_t data[PKT_MAX_LEN];
	struct pkt_grh grh; /* valid when hdr.flags has PKT_F_GRH */
} __attribute__((aligned(64)));

_Static_assert(offsetof(struct inbox_slot, data) == 32,
	       "a small packet shares the slot's first cache line");

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
};

struct inbox {
	uint64_t magic;
	pid_t pid;
	uint64_t start_time;
	uint64_t self_addr; /* this mapping's address in the owner (cma.c) */
	alignas(64) _Atomic uint64_t tail; /* producers */
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

/* Create the calling process's inbox; 0 or -errno.  name_p gets its name. */
int inbox_create(const char *node_name, struct inbox **ib_p, char *name,
		 size_t name_len);
/* Map another process's inbox (read-write). */
int inbox_map(const char *node_name, pid_t pid, uint64_t start_time,
	      struct inbox **ib_p);
void inbox_unmap(struct inbox *ib);
void inbox_unlink(const char *node_name, pid_t pid, uint64_t start_time);

/* Producer: claim a slot (NULL when full), fill it, then publish it. */
struct inbox_slot *inbox_claim(struct inbox *ib, uint64_t *pos_p);
void inbox_publish(struct inbox *ib, struct inbox_slot *slot, uint64_t pos);

/* Consumer: the next published slot or NULL; release it when done. */
static inline struct inbox_slot *inbox_peek(struct inbox *ib)
{
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed);
	struct inbox_slot *s = &ib->slots[head & (INBOX_SLOTS - 1)];

	if (atomic_load_explicit(&s->seq, memory_order_acquire) != head + 1)
		return NULL;
	return s;
}
static inline void inbox_release(struct inbox *ib, struct inbox_slot *s)
{
	uint64_t head = atomic_load_explicit(&ib->head, memory_order_relaxed);

	atomic_store_explicit(&s->seq, head + INBOX_SLOTS,
			      memory_order_release);
	atomic_store_explicit(&ib->head, head + 1, memory_order_relaxed);
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
