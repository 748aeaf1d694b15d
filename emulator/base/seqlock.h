/* SPDX-License-Identifier: MIT */
/*
 * A sequence lock for records one process publishes in shared memory and
 * others read without a lock (published MRs, published QP state).
 *
 * Lock rule: one writer per record at a time (its owner, under the lock
 * that owns the object); readers never block and never retry: a reader
 * that finds the sequence odd or changed while it read takes the record
 * as absent (one-sided requesters then send packets instead of placing
 * data).  Fields are accessed with relaxed atomics so that a torn read is
 * detected, never undefined.
 *
 * A writer that dies mid-write leaves the sequence odd: readers see no
 * valid record, never spin.  The next writer (the record's new owner, or
 * whoever takes it back) starts from whatever the sequence is, odd or
 * even, and leaves it even: seq_write_begin makes it odd, seq_write_end
 * the next even value.
 */
#ifndef IBEMU_SEQLOCK_H
#define IBEMU_SEQLOCK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

static inline void seq_write_begin(_Atomic uint32_t *seq)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_relaxed);

	/* Odd already if the last writer died mid-write: stay odd. */
	atomic_store_explicit(seq, s | 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

static inline void seq_write_end(_Atomic uint32_t *seq)
{
	uint32_t s = atomic_load_explicit(seq, memory_order_relaxed);

	atomic_store_explicit(seq, s + 1, memory_order_release);
}

/* The sequence to check later, or an odd value if a write is running. */
static inline uint32_t seq_read_begin(_Atomic uint32_t *seq)
{
	return atomic_load_explicit(seq, memory_order_acquire);
}

static inline bool seq_read_ok(_Atomic uint32_t *seq, uint32_t start)
{
	atomic_thread_fence(memory_order_acquire);
	return !(start & 1) &&
	       atomic_load_explicit(seq, memory_order_relaxed) == start;
}

#define SEQ_SET(field, v)                                                      \
	atomic_store_explicit(&(field), (v), memory_order_relaxed)
#define SEQ_GET(field) atomic_load_explicit(&(field), memory_order_relaxed)

#endif /* IBEMU_SEQLOCK_H */
