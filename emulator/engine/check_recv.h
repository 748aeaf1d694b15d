/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's check of the buffers the HCA writes into
 * (check_recv.c): a receive buffer, or the local buffer of an RDMA READ
 * or an atomic, changed between its post and the moment the HCA places
 * data there, which is the program writing into memory it gave to the
 * device (ibv_post_recv(3), ibv_post_send(3)).  Each hook is one relaxed
 * load while IBEMU_CHECK is off (check.h); the work is in check_recv.c.
 *
 * Lock rule: a receive queue's record (emu_rq.check_rq) is under the
 * ring's lock (qp.lock for a QP's own, rq.lock for an SRQ's, rq.c); a
 * send queue's (emu_qp.check_rd) under qp.lock.
 */
#ifndef IBEMU_CHECK_RECV_H
#define IBEMU_CHECK_RECV_H

#include "check.h"
#include "hca.h"

void check_recv_post_slow(struct emu_hca *hca, struct emu_rq *rq,
			  uint32_t from, const struct emu_qp *qp);
void check_recv_take_slow(struct emu_qp *qp, struct emu_rq *rq,
			  uint32_t pos);
void check_read_post_slow(struct emu_qp *qp, uint32_t pos);
void check_read_place_slow(struct emu_qp *qp, const struct wqe *w,
			   bool placing);

/* Receive WQEs stored at [from, tail) of rq's ring; the ring's lock held.
 * qp: the QP whose own queue rq is, NULL for an SRQ. */
static inline void check_recv_post(struct emu_hca *hca, struct emu_rq *rq,
				   uint32_t from, const struct emu_qp *qp)
{
	if (check_on())
		check_recv_post_slow(hca, rq, from, qp);
}

/* The responder takes the receive WQE at pos of rq's ring for a message
 * whose data goes into it (a SEND, a datagram); the ring's lock and
 * qp.lock held. */
static inline void check_recv_take(struct emu_qp *qp, struct emu_rq *rq,
				   uint32_t pos)
{
	if (rq->check_rq)
		check_recv_take_slow(qp, rq, pos);
}

/* A send WQE stored at SQ position pos; qp.lock held. */
static inline void check_read_post(struct emu_qp *qp, uint32_t pos)
{
	if (check_on())
		check_read_post_slow(qp, pos);
}

/* The HCA is about to write the local buffers of w, an RDMA READ or an
 * atomic of the send queue: placing, the first data now (its record is
 * done with); else it may (a placement by the requester).  qp.lock
 * held. */
static inline void check_read_place(struct emu_qp *qp, const struct wqe *w,
				    bool placing)
{
	if (qp->check_rd)
		check_read_place_slow(qp, w, placing);
}

#endif /* IBEMU_CHECK_RECV_H */
