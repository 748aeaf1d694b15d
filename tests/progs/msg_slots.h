/* SPDX-License-Identifier: MIT */
/*
 * Checked messages between the two RC QPs of tests/progs/net_break.c and
 * tests/progs/peer_kill.c.  An rc_side's buffer (rc_pair.h) holds
 * MSG_DEPTH send slots, then MSG_DEPTH receive slots, of MSG_LEN bytes
 * each; message seq
 * uses slot seq % MSG_DEPTH.  Its payload is a pattern of its round, its
 * direction and seq, so a receiver checks every byte.
 */
#ifndef IBEMU_TESTS_MSG_SLOTS_H
#define IBEMU_TESTS_MSG_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

#include "rc_pair.h"

#define MSG_LEN (64 * 1024)
#define MSG_DEPTH 4 /* SENDs and receives outstanding per side */
#define MSG_BUF_LEN (2 * MSG_DEPTH * MSG_LEN)

/* The RC QP for these slots (MSG_DEPTH SENDs and receives outstanding,
 * one CQ for both), with the transport timeout and retry count given;
 * RNR NAKs retried for ever. */
struct rc_pair_attr msg_pair_attr(uint8_t timeout, uint8_t retry_cnt);

/* CLOCK_MONOTONIC in milliseconds. */
long long now_ms(void);

/* Write, or check, message seq of round going in direction dir. */
void msg_fill(void *buf, uint32_t round, uint32_t dir, uint32_t seq);
bool msg_check(const void *buf, uint32_t round, uint32_t dir, uint32_t seq);

/* The receive slot of message seq. */
void *msg_recv_slot(const struct rc_side *s, uint32_t seq);

/* Post a receive for message *seq into its slot, wr_id *seq, and count
 * it (*seq + 1).  0, or -1. */
int msg_post_recv(struct rc_side *s, uint32_t *seq);

/* Fill the send slot of message *seq, post it as a signaled SEND with
 * wr_id wr_flags | *seq, and count it (*seq + 1).  0, or -1. */
int msg_post_send(struct rc_side *s, uint32_t round, uint32_t dir,
		  uint32_t *seq, uint64_t wr_flags);

#endif
