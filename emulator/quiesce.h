/* SPDX-License-Identifier: MIT */
/*
 * Quiescence: how deregistration waits for the engine's copies into and
 * out of a region (mr.c), without making every copy pay for an atomic
 * read-modify-write.
 *
 * Each thread that runs the engine has a reader record of its own; a
 * reader enters before it looks a region up and leaves after its copy
 * (quiesce_enter/quiesce_leave: a plain increment of its own sequence
 * number, odd while inside).  A writer that has unpublished something
 * calls quiesce_wait(): a process-wide memory barrier on every running
 * thread (membarrier(2), MEMBARRIER_CMD_PRIVATE_EXPEDITED), then it waits
 * for every reader that was inside to leave.  Either a reader's lookup
 * saw the unpublication, or the writer sees the reader inside and waits:
 * the asymmetric form of a Dekker handshake.  Where membarrier is not
 * available, readers issue a full fence on entry instead.
 *
 * Lock rule: quiesce_lock protects the list of reader records; a record's
 * sequence is written only by its thread.
 */
#ifndef IBEMU_QUIESCE_H
#define IBEMU_QUIESCE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct quiesce_reader {
	_Atomic uint32_t seq; /* odd while inside */
	uint32_t depth; /* nesting, this thread only */
	struct quiesce_reader *next;
	atomic_bool in_use; /* false once its thread exited */
};

extern __thread struct quiesce_reader *quiesce_self;
extern atomic_bool quiesce_reader_fence;
/* Readers of threads that could not get a record of their own. */
extern atomic_uint quiesce_unregistered;

/* This thread's record, or NULL if none could be allocated. */
struct quiesce_reader *quiesce_register(void);

static inline void quiesce_enter(void)
{
	struct quiesce_reader *r = quiesce_self;

	if (!r)
		r = quiesce_register();
	if (!r) {
		atomic_fetch_add(&quiesce_unregistered, 1);
		return;
	}
	if (r->depth++)
		return;
	atomic_store_explicit(&r->seq,
			      atomic_load_explicit(&r->seq,
						   memory_order_relaxed) + 1,
			      memory_order_relaxed);
	if (atomic_load_explicit(&quiesce_reader_fence, memory_order_relaxed))
		atomic_thread_fence(memory_order_seq_cst);
	else
		atomic_signal_fence(memory_order_seq_cst);
}

static inline void quiesce_leave(void)
{
	struct quiesce_reader *r = quiesce_self;

	if (!r) {
		atomic_fetch_sub(&quiesce_unregistered, 1);
		return;
	}
	if (--r->depth)
		return;
	atomic_store_explicit(&r->seq,
			      atomic_load_explicit(&r->seq,
						   memory_order_relaxed) + 1,
			      memory_order_release);
}

/* Once this returns, every reader that was inside when it was called has
 * left.  Never call it from inside. */
void quiesce_wait(void);
/* In a forked child: the parent's other threads are not here. */
void quiesce_fork_child(void);

#endif /* IBEMU_QUIESCE_H */
