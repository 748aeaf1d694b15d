/* SPDX-License-Identifier: MIT */
/*
 * Windows of other processes' registered memory, mapped here (the peer's
 * side of mr_memfd.h).  A requester that places RDMA data by loads and
 * stores (cma.c) maps the window a target published, once: the memfd is
 * opened through /proc/PID/fd/FD (the kernel lets a process of the same
 * user in the same pid namespace do that, as for cross-memory attach),
 * its name is read back to prove it is the memfd the target published (a
 * random id in its name: another process reusing the pid has none such),
 * and the window is mapped shared.  Mappings are cached by (id, offset,
 * length) and counted: a QP holds the one it used last.  Unused ones are
 * unmapped when more than PEER_MAP_IDLE of them are kept.
 *
 * A mapping only ever reaches the target's pages: what may be written
 * through it, and when, is decided by the target's published region and
 * the placement fence (cma.c), never by the mapping's existence.
 *
 * Lock rule: a mutex of this file guards the cache and every reference
 * count; base, len, id and off never change while a reference is held.
 */
#ifndef IBEMU_PEER_MAP_H
#define IBEMU_PEER_MAP_H

#include <stdint.h>
#include <sys/types.h>

struct peer_map {
	struct peer_map *next;
	uint64_t id, off, len;
	uint8_t *base;
	unsigned int refs;
};

/* A reference to the window [off, off+len) of the memfd fd of the process
 * pid, which must be named after id; NULL if it cannot be mapped. */
struct peer_map *peer_map_get(pid_t pid, uint64_t id, int32_t fd,
			      uint64_t off, uint64_t len);
void peer_map_put(struct peer_map *m);
/* In a forked child: the parent's mappings are unmapped. */
void peer_map_fork_child(void);

#endif /* IBEMU_PEER_MAP_H */
