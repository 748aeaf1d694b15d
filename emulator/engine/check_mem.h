/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's memory and lifetime checks of the HCA's queues
 * (check_mem.c): send sources that change before their completion,
 * regions deregistered with work or windows on them, QPs destroyed with
 * work outstanding.  Each hook is one relaxed load while IBEMU_CHECK is
 * off (check.h); the work is in check_mem.c.
 *
 * Lock rule: the QP's record of its posts (emu_qp.check_sq) is under
 * qp.lock, as the send queue it shadows.
 */
#ifndef IBEMU_CHECK_MEM_H
#define IBEMU_CHECK_MEM_H

#include "check.h"
#include "hca.h"

void check_mem_post_slow(struct emu_qp *qp, uint32_t pos);
void check_mem_retire_slow(struct emu_qp *qp, uint32_t pos);
void check_mem_dereg_slow(struct emu_mr *mr);
void check_mem_qp_destroy_slow(struct emu_qp *qp);
/* The first WQE of ring [head, tail) with an SGE of key, or NULL; its
 * position in *pos_p.  The ring's lock held. */
const struct wqe *check_ring_uses(const struct wqe_ring *r, uint32_t key,
				  uint32_t *pos_p);

/* A send WQE stored at SQ position pos; qp.lock held. */
static inline void check_mem_post(struct emu_qp *qp, uint32_t pos)
{
	if (check_on())
		check_mem_post_slow(qp, pos);
}

/* The send WQE at SQ position pos completed successfully (its buffers
 * were read for the last time); qp.lock held. */
static inline void check_mem_retire(struct emu_qp *qp, uint32_t pos)
{
	if (qp->check_sq)
		check_mem_retire_slow(qp, pos);
}

/* ibv_dereg_mr of mr, before it is withdrawn; no lock held. */
static inline void check_mem_dereg(struct emu_mr *mr)
{
	if (check_on())
		check_mem_dereg_slow(mr);
}

/* The QP is being freed, out of the engine already; no lock held.
 * Reports work outstanding and frees the record. */
static inline void check_mem_qp_destroy(struct emu_qp *qp)
{
	if (check_on())
		check_mem_qp_destroy_slow(qp);
}

#endif /* IBEMU_CHECK_MEM_H */
