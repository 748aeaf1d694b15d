/* SPDX-License-Identifier: MIT */
/*
 * The QP state machine: which transitions exist and which attributes each
 * requires and allows, per QP type (IBA 11.2.5.2 Modify QP; manual 3.5).
 */
#ifndef IBEMU_QP_STATE_H
#define IBEMU_QP_STATE_H

#include <stdbool.h>
#include <infiniband/verbs.h>

/* The columns of the Dynamically Connected QPs (mlx5dv_create_qp(3)),
 * passed where a QP type is: a DCI and a DCT are RC QPs with rules of
 * their own (dc.c). */
#define QP_STATE_TYPE_DCI ((enum ibv_qp_type)0x1001)
#define QP_STATE_TYPE_DCT ((enum ibv_qp_type)0x1002)

/*
 * Whether moving a QP of this type from cur to next with this attribute
 * mask is allowed.  mask without IBV_QP_STATE means next == cur.
 * Returns 0, or -EINVAL with *why_p naming the reason.
 */
int qp_state_check(enum ibv_qp_type type, enum ibv_qp_state cur,
		   enum ibv_qp_state next, int mask, const char **why_p);

/* The attributes this transition requires / allows (for tests, docs). */
int qp_state_required(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next);
int qp_state_optional(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next);
bool qp_state_transition_valid(enum ibv_qp_type type, enum ibv_qp_state cur,
			       enum ibv_qp_state next);

const char *qp_state_name(enum ibv_qp_state state);

#endif /* IBEMU_QP_STATE_H */
