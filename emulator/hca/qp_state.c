// SPDX-License-Identifier: MIT
/*
 * The QP state machine of IBA 10.3.1 (QP states) and 11.2.5.2 (Modify QP:
 * the required and optional attributes of each transition), as the manual
 * lays out in 3.5.  Transitions not listed are invalid.  Any state may go
 * to RESET or ERR with no attributes.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>

#include "qp_state.h"

/* XRC initiator and target QPs (IBA A14) follow RC, with the
 * differences of their own columns.  So do DC initiators and targets,
 * with the attributes mlx5 asks for (rdma-core's pyverbs
 * Mlx5QP._get_comp_mask, the kernel's mlx5_ib_modify_dct): a DCI has
 * no responder and no fixed destination, its AV is ignored (each work
 * request names its target, mlx5dv_wr_set_dc_addr(3)); a DCT has no
 * requester, never goes past RTR, and its AV only says which port. */
enum { T_UD, T_UC, T_RC, T_XI, T_XT, T_DI, T_DT, T_NR };

#define NR_STATES (IBV_QPS_ERR + 1)

struct qp_transition {
	bool valid;
	int req[T_NR];
	int opt[T_NR];
};

#define PATH_OPT (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)

/* The RC requester's RTR->RTS required set, which an XRC initiator
 * shares (IBA 11.2.5.2, A14). */
#define RTR_RTS_REQ_RC                                                         \
	(IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |                \
	 IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC)

/* What SQD->SQD may change on RC and both XRC QP types. */
#define SQD_SQD_OPT_RC                                                         \
	(IBV_QP_PORT | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |         \
	 IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC |                          \
	 IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_ACCESS_FLAGS |                     \
	 IBV_QP_PKEY_INDEX | IBV_QP_MIN_RNR_TIMER | PATH_OPT)

/* What RTR->RTS, RTS->RTS and SQD->RTS allow besides their required set
 * (the three rows agree, IBA 11.2.5.2). */
#define TO_RTS_OPT                                                             \
	{                                                                      \
		[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,                       \
		[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | PATH_OPT,    \
		[T_RC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |              \
			 IBV_QP_MIN_RNR_TIMER | PATH_OPT,                      \
		[T_XI] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | PATH_OPT,    \
		[T_XT] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS |              \
			 IBV_QP_MIN_RNR_TIMER | PATH_OPT,                      \
		[T_DI] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS,               \
	}

static const struct qp_transition qp_table[NR_STATES][NR_STATES] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.req = {
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY,
				[T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_XI] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_XT] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_DI] = IBV_QP_PKEY_INDEX | IBV_QP_PORT,
				[T_DT] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
			},
			.opt = {
				/* a DCI's rights mean nothing: accepted */
				[T_DI] = IBV_QP_ACCESS_FLAGS,
			},
		},
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_INIT] = {
			.valid = true,
			.opt = {
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY,
				[T_UC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_RC] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_XI] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
				[T_XT] = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_ACCESS_FLAGS,
			},
		},
		/* manual 3.5.3 INIT to RTR */
		[IBV_QPS_RTR] = {
			.valid = true,
			.req = {
				[T_UC] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
				[T_RC] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER,
				/* an initiator has no responder */
				[T_XI] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
				[T_XT] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_MAX_DEST_RD_ATOMIC |
					 IBV_QP_MIN_RNR_TIMER,
				[T_DI] = IBV_QP_PATH_MTU,
				[T_DT] = IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_MIN_RNR_TIMER,
			},
			.opt = {
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
				[T_UC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_RC] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_XI] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_XT] = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX,
				[T_DI] = IBV_QP_AV | IBV_QP_PKEY_INDEX,
			},
		},
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		/* manual 3.5.4 RTR to RTS */
		[IBV_QPS_RTS] = {
			.valid = true,
			.req = {
				[T_UD] = IBV_QP_SQ_PSN,
				[T_UC] = IBV_QP_SQ_PSN,
				[T_RC] = RTR_RTS_REQ_RC,
				[T_XI] = RTR_RTS_REQ_RC,
				/* a target has no requester */
				[T_XT] = IBV_QP_TIMEOUT | IBV_QP_SQ_PSN,
				[T_DI] = RTR_RTS_REQ_RC,
			},
			.opt = TO_RTS_OPT,
		},
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = TO_RTS_OPT,
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {
				[T_UD] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_UC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_RC] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_XI] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_XT] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
				[T_DI] = IBV_QP_EN_SQD_ASYNC_NOTIFY,
			},
		},
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = TO_RTS_OPT,
		},
		[IBV_QPS_SQD] = {
			.valid = true,
			.opt = {
				[T_UD] = IBV_QP_PKEY_INDEX | IBV_QP_QKEY,
				[T_UC] = IBV_QP_AV | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_PKEY_INDEX | PATH_OPT,
				[T_RC] = SQD_SQD_OPT_RC,
				[T_XI] = SQD_SQD_OPT_RC,
				[T_XT] = SQD_SQD_OPT_RC,
			},
		},
	},
	/* Send Queue Error exists for UD and UC only: an RC send error
	 * takes the whole QP to ERR (IBA 10.3.1). */
	[IBV_QPS_SQE] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
		[IBV_QPS_RTS] = {
			.valid = true,
			.opt = {
				[T_UD] = IBV_QP_CUR_STATE | IBV_QP_QKEY,
				[T_UC] = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS,
			},
		},
	},
	[IBV_QPS_ERR] = {
		[IBV_QPS_RESET] = { .valid = true },
		[IBV_QPS_ERR] = { .valid = true },
	},
};

static int qp_type_index(enum ibv_qp_type type)
{
	switch ((int)type) {
	case IBV_QPT_UD:
		return T_UD;
	case IBV_QPT_UC:
		return T_UC;
	case IBV_QPT_RC:
		return T_RC;
	case IBV_QPT_XRC_SEND:
		return T_XI;
	case IBV_QPT_XRC_RECV:
		return T_XT;
	case QP_STATE_TYPE_DCI:
		return T_DI;
	case QP_STATE_TYPE_DCT:
		return T_DT;
	default:
		return -1;
	}
}

static bool state_ok(enum ibv_qp_state s)
{
	return (int)s >= IBV_QPS_RESET && (int)s <= IBV_QPS_ERR;
}

bool qp_state_transition_valid(enum ibv_qp_type type, enum ibv_qp_state cur,
			       enum ibv_qp_state next)
{
	int t = qp_type_index(type);

	if (t < 0 || !state_ok(cur) || !state_ok(next))
		return false;
	if (!qp_table[cur][next].valid)
		return false;
	/* SQE -> RTS exists for UD and UC only. */
	if (cur == IBV_QPS_SQE && next == IBV_QPS_RTS && t != T_UD &&
	    t != T_UC)
		return false;
	/* A DCT receives in RTR and goes no further, nor back to INIT
	 * but through RESET (mlx5_ib_modify_dct). */
	if (t == T_DT && (next == IBV_QPS_RTS || next == IBV_QPS_SQD ||
			  next == IBV_QPS_SQE ||
			  (cur == IBV_QPS_INIT && next == IBV_QPS_INIT)))
		return false;
	return true;
}

int qp_state_required(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next)
{
	int t = qp_type_index(type);

	if (!qp_state_transition_valid(type, cur, next))
		return 0;
	return qp_table[cur][next].req[t];
}

int qp_state_optional(enum ibv_qp_type type, enum ibv_qp_state cur,
		      enum ibv_qp_state next)
{
	int t = qp_type_index(type);

	if (!qp_state_transition_valid(type, cur, next))
		return 0;
	return qp_table[cur][next].opt[t];
}

int qp_state_check(enum ibv_qp_type type, enum ibv_qp_state cur,
		   enum ibv_qp_state next, int mask, const char **why_p)
{
	int req, opt, attrs;

	if (!(mask & IBV_QP_STATE))
		next = cur;
	if (!qp_state_transition_valid(type, cur, next)) {
		*why_p = "no such transition";
		return -EINVAL;
	}
	req = qp_table[cur][next].req[qp_type_index(type)];
	opt = qp_table[cur][next].opt[qp_type_index(type)];
	attrs = mask & ~IBV_QP_STATE;
	if ((attrs & req) != req) {
		*why_p = "a required attribute is missing";
		return -EINVAL;
	}
	/* IBV_QP_CUR_STATE is checked by the caller against the real state;
	 * elsewhere it is, like any attribute not listed, refused. */
	if (attrs & ~(req | opt)) {
		*why_p = "an attribute not allowed in this transition";
		return -EINVAL;
	}
	return 0;
}

const char *qp_state_name(enum ibv_qp_state state)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
		[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
		[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return state_ok(state) ? names[state] : "UNKNOWN";
}
