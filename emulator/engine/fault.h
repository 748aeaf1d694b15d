/* SPDX-License-Identifier: MIT */
/*
 * Fault injection (doc/man/ibemu.7, FAULT INJECTION): with IBEMU_FAULTS
 * set, the engine loses, duplicates, reorders and delays the packets it
 * receives, and a process can be killed at a named point, so that users
 * test their own recovery code, and the engine its retransmission.
 *
 *   IBEMU_FAULTS=drop:0.01,dup:0.01,reorder:0.01,delay:0.001:200,seed=7
 *   IBEMU_FAULTS=kill:publish:1000
 *
 * Every decision is a hash of the seed and the packet (source and
 * destination QPN, PSN, opcode, and how often this process has received
 * that packet before), never a draw from a shared random stream, so a run
 * that failed replays with its seed whatever the threads' timing.
 *
 * The injector sits on the receive side of the engine (progress.c), under
 * engine.lock, so it works the same for every transport.  When
 * IBEMU_FAULTS is unset engine.faults is NULL and the receive path pays
 * one predictable branch; a kill point costs one relaxed load.
 */
#ifndef IBEMU_FAULT_H
#define IBEMU_FAULT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct engine;
struct tp_pkt;

/* What was injected, for the summary at close and the unit tests. */
struct fault_stats {
	uint64_t packets; /* received while injecting */
	uint64_t dropped, duplicated, reordered, delayed;
};

/* Read IBEMU_FAULTS; e->faults stays NULL when it is unset or empty.
 * 0, or EINVAL (the reason logged) or ENOMEM. */
int fault_open(struct engine *e);
/* Print the summary line and free the injector; packets still held are
 * lost with the engine. */
void fault_close(struct engine *e);
/* A forked child: drop the parent's injector without a word. */
void fault_forget(struct engine *e);

/* The packet just peeked (engine.lock held): deliver it, drop it, deliver
 * it twice or hold it back.  The caller releases the slot after. */
void fault_recv(struct engine *e, const struct tp_pkt *in);
/* Deliver the packets held back whose time has come (engine.lock). */
void fault_flush(struct engine *e);
/* The earliest time a held packet is due, or next if sooner (0: none). */
uint64_t fault_next_due(const struct engine *e, uint64_t next);
void fault_get_stats(const struct engine *e, struct fault_stats *st);

/* Named points where kill:POINT:N raises SIGKILL at the Nth pass and
 * stall:POINT:USEC sleeps USEC microseconds at every pass. */
enum fault_point {
	FAULT_AT_PUBLISH, /* a packet claimed in a peer's inbox, not yet
			     published (progress.c pkt_send) */
	FAULT_AT_WRITE, /* an RDMA WRITE packet's data landed, before the
			   responder goes on (resp.c) */
	FAULT_AT_ATOMIC, /* an atomic executed, its ACK not yet sent */
	FAULT_AT_ACK, /* an ACK about to be sent (resp.c) */
	FAULT_AT_PLACE, /* a requester-placed RDMA announced and checked,
			   data not yet copied (cma.c) */
	FAULT_AT_NETREAD, /* a greeted network connection about to be
			     read (tcp_recv.c) */
	FAULT_NR_POINTS
};

extern atomic_bool fault_points_armed;
void fault_point_pass(enum fault_point point);

static inline void fault_point(enum fault_point point)
{
	if (__builtin_expect(atomic_load_explicit(&fault_points_armed,
						  memory_order_relaxed), 0))
		fault_point_pass(point);
}

#endif /* IBEMU_FAULT_H */
