/* SPDX-License-Identifier: MIT */
/*
 * The lock of the objects every message touches (a QP, a CQ, an SRQ, the
 * engine): one word, 0 free and 1 held.  Taking a free lock is one
 * compare-and-swap and giving it back one release store, inline, where
 * pthread_mutex_lock and _unlock are two calls through the PLT, a
 * dispatch on the mutex's kind and two locked instructions (a locked
 * instruction is some twenty cycles, and a message takes five locks on
 * its way through the receiving side).  A taker that finds the lock held
 * watches it for a while (its holder, on another CPU, is about to give it
 * back), then yields its CPU between looks: the engine's thread and the
 * application often share one CPU, and a holder preempted there must get
 * it back to finish.  No futex, so giving the lock back needs no check
 * for sleepers.  These locks are held for the work of a packet or a
 * verb; the one exception is a CQ's, held from ibv_start_poll to
 * ibv_end_poll (cq.c), where a taker yields until the application ends
 * its poll.  Process-private, not recursive, no owner
 * check.  Acquire and release order, which ThreadSanitizer follows as it
 * does a mutex's.
 */
#ifndef IBEMU_LOCK_H
#define IBEMU_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct emu_lock {
	_Atomic uint32_t word;
};

void emu_lock_wait(struct emu_lock *l);

static inline void emu_lock_init(struct emu_lock *l)
{
	atomic_init(&l->word, 0);
}

/* Whether the lock was free and is now ours. */
static inline bool emu_lock_try(struct emu_lock *l)
{
	uint32_t free_word = 0;

	return atomic_compare_exchange_strong_explicit(
		&l->word, &free_word, 1, memory_order_acquire,
		memory_order_relaxed);
}

static inline void emu_lock(struct emu_lock *l)
{
	if (!emu_lock_try(l))
		emu_lock_wait(l);
}

static inline void emu_unlock(struct emu_lock *l)
{
	atomic_store_explicit(&l->word, 0, memory_order_release);
}

#endif /* IBEMU_LOCK_H */
