/* SPDX-License-Identifier: MIT */
/*
 * The lock of the objects every message touches (a QP, a CQ, an SRQ, the
 * engine): a mutex on a futex word, in three states (U. Drepper,
 * "Futexes Are Tricky", 2011, mutex 3):
 *
 *   0  free
 *   1  held, nobody waits
 *   2  held, someone may sleep on the futex
 *
 * Taking a free lock is one compare-and-swap and giving it back one
 * exchange, inline, where pthread_mutex_lock and _unlock are two calls
 * through the PLT and a dispatch on the mutex's kind (some fifty
 * instructions the pair, several pairs a message).  A contended lock
 * spins briefly (its holder, on another CPU, is usually about to give it
 * back) and then sleeps on the futex, so a holder that was preempted is
 * not spun on for its whole time slice (the engine's thread and the
 * application often share one CPU).  Process-private (FUTEX_PRIVATE):
 * never in shared memory.  Not recursive, no owner check.  Acquire and
 * release order, which ThreadSanitizer follows as it does a mutex.
 */
#ifndef IBEMU_LOCK_H
#define IBEMU_LOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct emu_lock {
	_Atomic uint32_t word;
};

#define EMU_LOCK_INIT { 0 }

void emu_lock_wait(struct emu_lock *l);
void emu_lock_wake(struct emu_lock *l);

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
	if (atomic_exchange_explicit(&l->word, 0, memory_order_release) == 2)
		emu_lock_wake(l);
}

#endif /* IBEMU_LOCK_H */
