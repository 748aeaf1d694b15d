/* SPDX-License-Identifier: MIT */
/*
 * The remote fence: a full memory barrier run on every CPU that is
 * executing a process of the node that asked for them (Linux membarrier(2),
 * MEMBARRIER_CMD_GLOBAL_EXPEDITED), so that a Dekker-style handshake
 * between processes can put its whole cost on its rare side.  The frequent
 * side stores its flag and loads the other's with only the compiler kept
 * from reordering them; the rare side stores its own flag, issues the
 * remote fence, then loads: either the frequent side's load saw the rare
 * side's store, or its store was ordered before the rare side's load by
 * the barrier the remote fence ran on its CPU (a CPU not running it then
 * passed a context switch, which is one).  The same design as a userspace
 * RCU's membarrier flavour, across processes instead of threads.
 *
 * A process may take the frequent side toward a peer only if it receives
 * remote fences (remote_fence_receives) and the peer said it issues one
 * where the handshake needs it (inbox.h's fence_issuer); otherwise both
 * sides fence in full (cpu.h's cpu_store_fence_u64).
 *
 * IBEMU_REMOTE_FENCE=0 turns it off: the handshakes fence on both sides.
 */
#ifndef IBEMU_REMOTE_FENCE_H
#define IBEMU_REMOTE_FENCE_H

#include <stdbool.h>

/* Once per process (again in a forked child): whether the kernel has the
 * remote fence, and if so register for it and issue one.  Thread-safe. */
void remote_fence_setup(void);

/* Whether this process receives remote fences (registered), and whether
 * it can issue them (one issued at setup succeeded). */
bool remote_fence_receives(void);
bool remote_fence_issues(void);

/* Issue a remote fence: true once every registered process's running CPUs
 * ran a full barrier; false if the kernel refused (the caller then falls
 * back, see cma.c). */
bool remote_fence(void);

#endif /* IBEMU_REMOTE_FENCE_H */
