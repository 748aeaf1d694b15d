/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's queue checks (check_queue.c; emulator/base/check.h
 * reports): posts past a queue's depth, a send queue's worth of
 * unsignaled work requests, inline data past max_inline_data, atomics not
 * 8-byte aligned, an SRQ run dry with no limit armed, a CQ overrun.  Each
 * hook costs one relaxed load while checking is off.
 */
#ifndef IBEMU_CHECK_QUEUE_H
#define IBEMU_CHECK_QUEUE_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "check.h"

struct emu_qp;
struct emu_cq;
struct emu_srq;

/* A QP's checking state.  Lock rule: under qp.lock (the posts, the
 * responder). */
struct check_qp {
	uint32_t unsig; /* unsignaled WRs posted since the last signaled */
	struct check_stack first_unsig; /* the first of them */
	/* The SEND the responder NAKs RNR while it waits for a receive
	 * (engine/check_proto.c); since_ns 0: none waits. */
	struct {
		uint64_t since_ns, last_ns; /* its first and last RNR NAK */
		uint32_t naks, psn, src_qpn;
		uint16_t slid;
	} rnr;
};

void check_queue_send_slow(struct emu_qp *qp, const struct ibv_send_wr *wr,
			   int ret);
void check_queue_recv_slow(struct emu_qp *qp, struct emu_srq *srq, int ret);
void check_queue_cq_created_slow(struct emu_cq *cq);
void check_queue_cq_overrun_slow(struct emu_cq *cq);
void check_queue_srq_taken_slow(struct emu_qp *qp, bool found, uint32_t left);

/* A send WR that post_send checked (ret: 0, or why it is refused);
 * qp.lock held. */
static inline void check_queue_send(struct emu_qp *qp,
				    const struct ibv_send_wr *wr, int ret)
{
	if (check_on())
		check_queue_send_slow(qp, wr, ret);
}

/* A post to a QP's own receive queue (srq NULL) or to an SRQ (qp NULL)
 * returned ret. */
static inline void check_queue_recv(struct emu_qp *qp, struct emu_srq *srq,
				    int ret)
{
	if (ret == ENOMEM && check_on())
		check_queue_recv_slow(qp, srq, ret);
}

/* A CQ was created: its creation's stack, for its overrun's report. */
static inline void check_queue_cq_created(struct emu_cq *cq)
{
	if (check_on())
		check_queue_cq_created_slow(cq);
}

/* The CQ has overrun: it holds the entries asked for, and one more came. */
static inline void check_queue_cq_overrun(struct emu_cq *cq)
{
	if (check_on())
		check_queue_cq_overrun_slow(cq);
}

/* The responder took a receive from the QP's SRQ (found), leaving left,
 * or found it empty (!found); qp.lock held, and the SRQ's rq.lock. */
static inline void check_queue_srq_taken(struct emu_qp *qp, bool found,
					 uint32_t left)
{
	if (check_on())
		check_queue_srq_taken_slow(qp, found, left);
}

#endif /* IBEMU_CHECK_QUEUE_H */
