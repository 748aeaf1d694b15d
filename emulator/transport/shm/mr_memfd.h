/* SPDX-License-Identifier: MIT */
/*
 * Registered memory that the node's other processes can map (doc/design.md
 * §13, "Placement by loads and stores").  At registration the whole pages
 * of a region with remote access (or of MR_MEMFD_LOCAL_MIN bytes or more)
 * are moved onto the process's memfd: they are copied into a window of it
 * and the window is mapped back over them at the same address (mremap),
 * so the application's pointers and data stay as they were and the pages
 * are now shared memory.  A requester of another process maps that
 * window (peer_map.h) and places RDMA WRITE and READ data with memcpy,
 * atomics with CPU atomics, under the placement fence of cma.c; a
 * responder pulls a large SEND's data out of the sender's window.
 *
 * Only private anonymous memory is moved (the heap, anonymous mmaps, .bss
 * past the file): a file-backed range, huge pages, the main stack, a
 * range sharing pages with a region registered before, or a region with
 * no whole page keep cross-memory attach (cma.c).  A region inside a
 * window uses it.  When the last region using a window is deregistered,
 * its pages are copied back into private memory and the hole punched (a
 * window the application moved or unmapped meanwhile is released at a
 * later registration).  Only whole pages of a region move, so the only
 * stores a move can lose are other threads' stores into the region's own
 * bytes while ibv_reg_mr or ibv_dereg_mr runs.  A forked child gets
 * private copies of every window it
 * inherited (mr_memfd_fork_child), as a kernel with copy-on-fork for
 * pinned pages gives it, so it never writes into its parent's memory;
 * with RDMAV_FORK_SAFE (or IBV_FORK_SAFE) set, a window is marked
 * MADV_DONTFORK as libibverbs marked the pages it replaces, and the child
 * has none of it (ibv_fork_init(3)).  An explicit ibv_fork_init() without
 * the variable is not seen here: the child then gets copies.
 *
 * Lock rule: a mutex of this file (memfd_lock) guards the window list and
 * the memfd; it is taken before hca.lock, never under it.  The memfd's
 * descriptor and id are set once (under it) and read without it.
 */
#ifndef IBEMU_MR_MEMFD_H
#define IBEMU_MR_MEMFD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct emu_hca;
struct mr_window; /* hca.h */

/* A region without remote access is moved from this size on: a SEND of
 * its data may be pulled by the responder (cma.c, CMA_PULL_MIN). */
#define MR_MEMFD_LOCAL_MIN (64 * 1024)

/* mr_share of the shared-memory transport (transport.h): a region that
 * peers may reach, or of MR_MEMFD_LOCAL_MIN bytes or more, gets the whole
 * pages of [addr, addr+length) backed by the memfd, or the window that
 * already does; *w is the window (len 0: the region keeps cross-memory
 * attach).  Call before the region is in the key table. */
void mr_memfd_share_region(struct emu_hca *hca, void *addr, size_t length,
			   int access, struct mr_window *w);
/* A region (using the window w, or none: len 0) was deregistered and
 * is out of the key table: unused windows whose pages no live region
 * touches go back to private memory. */
void mr_memfd_release(struct emu_hca *hca, const struct mr_window *w);
/* The descriptor of the memfd (-1: none) and the id in its name. */
int mr_memfd_fd(void);
uint64_t mr_memfd_id(void);
/* In a forked child, after peer_map_fork_child, before anything else:
 * private copies of every window, no memfd. */
void mr_memfd_fork_child(void);

/* The name a peer reads back to know the memfd is the one the target
 * published (id: random, once per process), NUL-terminated into buf. */
void mr_memfd_name(uint64_t id, char *buf, size_t len);

#endif /* IBEMU_MR_MEMFD_H */
