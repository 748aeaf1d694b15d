/* SPDX-License-Identifier: MIT */
/*
 * A transport for the engine's unit tests: nothing leaves the process.
 * Every packet the engine sends is captured in a queue the test reads;
 * every packet the test injects is queued for the engine to drain.  It
 * reaches one fake peer, whatever the node slot, and offers no placement,
 * so every operation travels as packets.
 */
#ifndef IBEMU_TESTS_LOOP_TRANSPORT_H
#define IBEMU_TESTS_LOOP_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

extern const struct transport_ops loop_ops;

/* One packet, as captured or as crafted. */
struct loop_pkt {
	struct loop_pkt *next;
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	uint8_t data[PKT_MAX_LEN]; /* BTH, extended headers, payload */
};

/* Queue a crafted packet for the engine (hdr.len covers BTH..payload). */
void loop_inject(const struct loop_pkt *p);
/* The oldest packet the engine sent, waiting up to timeout_ms; NULL if
 * none came.  The caller frees it. */
struct loop_pkt *loop_capture(unsigned int timeout_ms);
/* Packets the engine sent and nobody took yet. */
unsigned int loop_captured(void);
/* The peer takes room more packets, then its inbox is full; < 0: no
 * limit (the default).  Wakes the engine to retry what was blocked. */
void loop_set_room(int room);
/* Hold the engine thread's next sleep at its start until a wake comes
 * (false if the thread did not get there within timeout_ms); that sleep
 * then treats the wake as a futex treats one that came before the wait
 * (it does not count) and ends only on a packet, its `more` flag, a later
 * wake, or after a second.  Whether it ended by that bound: */
bool loop_hold_sleep(unsigned int timeout_ms);
bool loop_hold_timed_out(void);
/* Drop every packet, in both directions. */
void loop_reset(void);
/* Wait until the engine has consumed every injected packet and finished
 * the drain that took them (its coalesced ACKs are out); false if that
 * did not happen within timeout_ms. */
bool loop_settle(struct engine *e, unsigned int timeout_ms);

#endif /* IBEMU_TESTS_LOOP_TRANSPORT_H */
