// SPDX-License-Identifier: MIT
/*
 * The QP state machine: IBA 11.2.5 (Modify QP, the state transition table
 * with its required and optional attributes per service type), IBA 10.3.1
 * (QP states) and manual 3.5 (QP bring-up with ibv_modify_qp).  The table
 * itself is cf_qp_trans() in fixture.c.
 *
 * Every QP is connected to itself (its own LID or GID, its own QPN), so the
 * suite runs on one port of a real HCA too.
 */
#include <stdlib.h>
#include <string.h>

#include "tests.h"

#define SQE_WAIT_MS 5000

static const enum ibv_qp_state all_states[] = {
	IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
	IBV_QPS_SQD,   IBV_QPS_SQE,  IBV_QPS_ERR,
};

/* Every attribute a consumer may name in ibv_modify_qp besides the state. */
static const struct {
	int bit;
	const char *name;
} attr_bits[] = {
	{ IBV_QP_CUR_STATE, "CUR_STATE" },
	{ IBV_QP_EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY" },
	{ IBV_QP_ACCESS_FLAGS, "ACCESS_FLAGS" },
	{ IBV_QP_PKEY_INDEX, "PKEY_INDEX" },
	{ IBV_QP_PORT, "PORT" },
	{ IBV_QP_QKEY, "QKEY" },
	{ IBV_QP_AV, "AV" },
	{ IBV_QP_PATH_MTU, "PATH_MTU" },
	{ IBV_QP_TIMEOUT, "TIMEOUT" },
	{ IBV_QP_RETRY_CNT, "RETRY_CNT" },
	{ IBV_QP_RNR_RETRY, "RNR_RETRY" },
	{ IBV_QP_RQ_PSN, "RQ_PSN" },
	{ IBV_QP_MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC" },
	{ IBV_QP_ALT_PATH, "ALT_PATH" },
	{ IBV_QP_MIN_RNR_TIMER, "MIN_RNR_TIMER" },
	{ IBV_QP_SQ_PSN, "SQ_PSN" },
	{ IBV_QP_MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC" },
	{ IBV_QP_PATH_MIG_STATE, "PATH_MIG_STATE" },
	{ IBV_QP_CAP, "CAP" },
	{ IBV_QP_DEST_QPN, "DEST_QPN" },
	{ IBV_QP_RATE_LIMIT, "RATE_LIMIT" },
};

/* A QP of a type, kept in a given state across refused modifies. */
struct held_qp {
	enum ibv_qp_type type;
	enum ibv_qp_state state;
	struct ibv_qp *qp;
	/* SQE only: the QP's own CQ, a buffer, and for UD an AH. */
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_ah *ah;
};

static void held_release(struct held_qp *h)
{
	if (h->qp)
		ibv_destroy_qp(h->qp);
	if (h->ah)
		ibv_destroy_ah(h->ah);
	if (h->mr)
		cf_free_mr(h->mr);
	if (h->cq)
		ibv_destroy_cq(h->cq);
	h->qp = NULL;
	h->ah = NULL;
	h->mr = NULL;
	h->cq = NULL;
}

/*
 * A one-SGE SEND on h->qp from h->mr (wr_id, len bytes, lkey as given),
 * to dest_qpn (UD: through h->ah, Q_Key of cf_qp_fill_attr).  0 or errno.
 */
static int held_send(struct held_qp *h, uint64_t wr_id, uint32_t len,
		     uint32_t lkey, uint32_t dest_qpn)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = {
		.addr = (uintptr_t)h->mr->addr,
		.length = len,
		.lkey = lkey,
	};

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = h->ah;
	wr.wr.ud.remote_qpn = dest_qpn;
	wr.wr.ud.remote_qkey = 0x11111111;
	return cf_rc(ibv_post_send(h->qp, &wr, &bad));
}

/*
 * IBA 10.3.1 / 11.2.5: a UC or UD QP whose send WR completes in error
 * enters SQE.  From RTS (connected to dest_qpn) post a SEND whose SGE has
 * an invalid lkey: it completes with LOC_PROT_ERR (manual 6.2.5) and the
 * QP reports SQE.  False (reported) when it does not.
 */
static bool held_enter_sqe(struct held_qp *h, uint32_t dest_qpn)
{
	struct ibv_qp_init_attr ia;
	struct ibv_ah_attr aa;
	struct ibv_wc wc;
	int ret, got, st;

	h->cq = ibv_create_cq(cf.ctx, 16, NULL, NULL, 0);
	h->mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CF_CHECK(h->cq && h->mr, "SQE set-up: CQ or MR: %s",
		 cf_errname(errno));
	if (!h->cq || !h->mr)
		return false;
	if (h->type == IBV_QPT_UD) {
		cf_fill_ah(&cf, &aa);
		h->ah = ibv_create_ah(cf.pd, &aa);
		CF_CHECK(h->ah != NULL, "SQE set-up: ibv_create_ah: %s",
			 cf_errname(errno));
		if (!h->ah)
			return false;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = h->cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	h->qp = cf_create_qp(&cf, h->type, &ia);
	CF_CHECK(h->qp != NULL, "%s: create: %s", cf_qpt_name(h->type),
		 cf_errname(errno));
	if (!h->qp)
		return false;
	ret = cf_qp_to_state_dest(&cf, h->qp, IBV_QPS_RTS,
				  dest_qpn ? dest_qpn : h->qp->qp_num);
	CF_CHECK(ret == 0, "%s: bring-up to RTS: %s", cf_qpt_name(h->type),
		 cf_errname(ret));
	if (ret)
		return false;
	ret = held_send(h, 1, 64, h->mr->lkey ^ 0x5a5a5a00u,
			dest_qpn ? dest_qpn : h->qp->qp_num);
	CF_CHECK(ret == 0, "%s: SEND with a bad lkey refused at post time: "
		 "%s", cf_qpt_name(h->type), cf_errname(ret));
	if (ret)
		return false;
	got = cf_poll_cq_wait(h->cq, &wc, 1, SQE_WAIT_MS);
	CF_CHECK(got == 1 && wc.wr_id == 1 &&
		 wc.status == IBV_WC_LOC_PROT_ERR,
		 "%s: SEND with a bad lkey: %d completions, status %s, "
		 "expected LOC_PROT_ERR", cf_qpt_name(h->type), got,
		 got == 1 ? ibv_wc_status_str(wc.status) : "-");
	st = cf_qp_wait_state(h->qp, IBV_QPS_SQE, 1000);
	CF_CHECK(st == IBV_QPS_SQE, "%s: after a send completed in error "
		 "the QP is in %s, expected SQE (IBA 10.3.1)",
		 cf_qpt_name(h->type), cf_state_name(st));
	return st == IBV_QPS_SQE;
}

/* Make sure h->qp exists and is in h->state; false (reported) if not. */
static bool held_ensure(struct held_qp *h)
{
	int ret;

	if (h->qp && cf_qp_state(h->qp) == (int)h->state)
		return true;
	held_release(h);
	if (h->state == IBV_QPS_SQE) {
		/* A device that cannot enter SQE is said so once a test,
		 * not once for every transition out of SQE. */
		static CU_pTest sqe_failed_in;

		if (sqe_failed_in && sqe_failed_in == CU_get_current_test())
			return false;
		if (held_enter_sqe(h, 0))
			return true;
		sqe_failed_in = CU_get_current_test();
		held_release(h);
		return false;
	}
	h->qp = cf_create_qp(&cf, h->type, NULL);
	CF_CHECK(h->qp != NULL, "%s: create: %s", cf_qpt_name(h->type),
		 cf_errname(errno));
	if (!h->qp)
		return false;
	ret = cf_qp_to_state(&cf, h->qp, h->state);
	CF_CHECK(ret == 0, "%s: bring-up to %s: %s", cf_qpt_name(h->type),
		 cf_state_name(h->state), cf_errname(ret));
	if (ret) {
		held_release(h);
		return false;
	}
	return true;
}

/* The mask a transition into 'to' needs from its usual predecessor. */
static int natural_mask(enum ibv_qp_type type, enum ibv_qp_state to)
{
	static const enum ibv_qp_state pred[] = {
		[IBV_QPS_INIT] = IBV_QPS_RESET, [IBV_QPS_RTR] = IBV_QPS_INIT,
		[IBV_QPS_RTS] = IBV_QPS_RTR,	[IBV_QPS_SQD] = IBV_QPS_RTS,
	};
	int req = 0;

	if (to == IBV_QPS_INIT || to == IBV_QPS_RTR || to == IBV_QPS_RTS ||
	    to == IBV_QPS_SQD)
		cf_qp_trans(type, pred[to], to, &req, NULL);
	return req;
}

/* Try a modify that must be refused; check EINVAL and the state kept. */
static void expect_refused(struct held_qp *h, enum ibv_qp_state to, int mask,
			   const char *why)
{
	struct ibv_qp_attr a;
	int ret, st;

	if (!held_ensure(h))
		return;
	cf_qp_fill_attr(&cf, h->qp, h->state, to, &a);
	ret = cf_rc(ibv_modify_qp(h->qp, &a, mask | IBV_QP_STATE));
	/* The man page names EINVAL for an attribute the transition does
	 * not take; the Linux core answers a rate limit on a QP type
	 * without one with EOPNOTSUPP (ib_uverbs modify_qp): a refusal
	 * too, the errno the device's choice. */
	if (ret == EOPNOTSUPP && (mask & IBV_QP_RATE_LIMIT)) {
		CF_CHOICE("IBV_QP_RATE_LIMIT on %s refused with EOPNOTSUPP, "
			  "as the Linux core does (the man page names "
			  "EINVAL)", cf_qpt_name(h->type));
		ret = EINVAL;
	}
	CF_CHECK(ret == EINVAL,
		 "%s %s->%s mask 0x%x (%s): expected EINVAL, got %s",
		 cf_qpt_name(h->type), cf_state_name(h->state),
		 cf_state_name(to), mask | IBV_QP_STATE, why, cf_errname(ret));
	st = cf_qp_state(h->qp);
	CF_CHECK(st == (int)h->state,
		 "%s %s->%s (%s): refused modify left the QP in %s",
		 cf_qpt_name(h->type), cf_state_name(h->state),
		 cf_state_name(to), why, cf_state_name(st));
}

/*
 * Modifies IBA 11.2.5 allows that the Linux core refuses for every kernel
 * device (ib_modify_qp_is_ok's qp_state_table, ib_resolve_eth_dmac):
 * RESET->ERR (IBA 10.3.1: any state may go to Error), an alternate path
 * on a RoCE port (IBA 11.2.5.1 with IBV_DEVICE_AUTO_PATH_MIG), an address
 * vector on UC SQD->SQD (IBA 11.2.5.2).  The spec permits them, so a
 * device that accepts one must then be in the target state; one that
 * refuses it makes the Linux stack's choice, which is reported.
 */
static const char *linux_restricts(enum ibv_qp_type type,
				   enum ibv_qp_state from,
				   enum ibv_qp_state to, int mask)
{
	if (from == IBV_QPS_RESET && to == IBV_QPS_ERR)
		return "refuses RESET->ERR, as the Linux core's state table "
		       "does (IBA 10.3.1 allows it)";
	if (cf_is_roce(&cf) &&
	    (mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)))
		return "refuses an alternate path on a RoCE port, as the "
		       "Linux core does (IBA 11.2.5.1 allows it with "
		       "AUTO_PATH_MIG)";
	if (type == IBV_QPT_UC && from == IBV_QPS_SQD && to == IBV_QPS_SQD &&
	    (mask & IBV_QP_AV))
		return "refuses an address vector on UC SQD->SQD, as the "
		       "Linux core's state table does (IBA 11.2.5.2 allows "
		       "it)";
	return NULL;
}

/* A modify that must succeed, on a fresh QP in 'from'. */
static void expect_accepted(enum ibv_qp_type type, enum ibv_qp_state from,
			    enum ibv_qp_state to, int mask, const char *why)
{
	const char *linux_no = linux_restricts(type, from, to, mask);
	struct held_qp h = { .type = type, .state = from };
	struct ibv_qp_attr a;
	int ret, st;

	if (!held_ensure(&h))
		return;
	cf_qp_fill_attr(&cf, h.qp, from, to, &a);
	ret = cf_rc(ibv_modify_qp(h.qp, &a, mask | IBV_QP_STATE));
	st = cf_qp_state(h.qp);
	if (ret == EINVAL && linux_no && st == (int)from) {
		CF_CHOICE("%s %s", cf_qpt_name(type), linux_no);
		held_release(&h);
		return;
	}
	CF_CHECK(ret == 0, "%s %s->%s mask 0x%x (%s): expected success, "
		 "got %s", cf_qpt_name(type), cf_state_name(from),
		 cf_state_name(to), mask | IBV_QP_STATE, why,
		 cf_errname(ret));
	if (ret == 0)
		CF_CHECK(st == (int)to, "%s %s->%s (%s): QP now in %s",
			 cf_qpt_name(type), cf_state_name(from),
			 cf_state_name(to), why, cf_state_name(st));
	held_release(&h);
}

/*
 * All transitions out of one state for one service type, per the IBA
 * 11.2.5 table: legal ones succeed with exactly the required attributes
 * and with each optional one; dropping a required attribute or adding one
 * that is neither required nor optional is refused; illegal transitions
 * are refused.  Refused modifies leave the QP state as it was.
 */
static void from_state(enum ibv_qp_type type, enum ibv_qp_state from)
{
	const bool apm = cf.dev->device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG;
	struct held_qp h = { .type = type, .state = from };
	bool apm_skipped = false;
	char why[96];
	size_t t, b;
	int req, opt;

	for (t = 0; t < CF_ARRAY_SIZE(all_states); t++) {
		enum ibv_qp_state to = all_states[t];

		if (!cf_qp_trans(type, from, to, &req, &opt)) {
			expect_refused(&h, to, 0, "illegal transition");
			snprintf(why, sizeof(why), "illegal transition with "
				 "the attributes of entering %s",
				 cf_state_name(to));
			if (natural_mask(type, to))
				expect_refused(&h, to, natural_mask(type, to),
					       why);
			continue;
		}
		expect_accepted(type, from, to, req, "required attributes");
		for (b = 0; b < CF_ARRAY_SIZE(attr_bits); b++) {
			int bit = attr_bits[b].bit;

			if (req & bit) {
				snprintf(why, sizeof(why), "without required "
					 "%s", attr_bits[b].name);
				expect_refused(&h, to, req & ~bit, why);
			} else if (opt & bit) {
				if (!apm && (bit & (IBV_QP_ALT_PATH |
						    IBV_QP_PATH_MIG_STATE))) {
					apm_skipped = true;
					continue;
				}
				snprintf(why, sizeof(why), "with optional %s",
					 attr_bits[b].name);
				expect_accepted(type, from, to, req | bit, why);
			} else {
				snprintf(why, sizeof(why), "with extraneous "
					 "%s", attr_bits[b].name);
				expect_refused(&h, to, req | bit, why);
			}
		}
	}
	held_release(&h);
	if (apm_skipped)
		cf_skip("optional ALT_PATH/PATH_MIG_STATE not tried: device "
			"lacks IBV_DEVICE_AUTO_PATH_MIG");
}

#define FROM_TEST(T, S)						\
	CF_TEST_IMPL(qp_state, T##_from_##S)			\
	{							\
		from_state(IBV_QPT_##T, IBV_QPS_##S);		\
	}

FROM_TEST(RC, RESET)
FROM_TEST(RC, INIT)
FROM_TEST(RC, RTR)
FROM_TEST(RC, RTS)
FROM_TEST(RC, SQD)
FROM_TEST(RC, ERR)
FROM_TEST(UC, RESET)
FROM_TEST(UC, INIT)
FROM_TEST(UC, RTR)
FROM_TEST(UC, RTS)
FROM_TEST(UC, SQD)
FROM_TEST(UC, ERR)
FROM_TEST(UD, RESET)
FROM_TEST(UD, INIT)
FROM_TEST(UD, RTR)
FROM_TEST(UD, RTS)
FROM_TEST(UD, SQD)
FROM_TEST(UD, ERR)

/*
 * IBA 11.2.5 for SQE (entered by a send completing in error, see
 * held_enter_sqe): SQE->RTS with optional CUR_STATE and QKEY (UD) or
 * ACCESS_FLAGS (UC); SQE->RESET and SQE->ERR; everything else refused.
 */
FROM_TEST(UC, SQE)
FROM_TEST(UD, SQE)

/*
 * IBA 10.3.1 (Send Queue Error): in SQE a send WR posted is completed
 * with WR_FLUSH_ERR (manual 6.2.6) and the QP stays in SQE, while the
 * receive queue keeps working: a SEND from a second QP is received.  UD
 * needs 40 bytes for the GRH in front of the payload (IBA 11.4.1.2).
 */
static void sqe_queues(enum ibv_qp_type type)
{
	const uint32_t grh = type == IBV_QPT_UD ? 40 : 0;
	struct held_qp x = { .type = type, .state = IBV_QPS_SQE };
	struct held_qp y = { .type = type, .state = IBV_QPS_RTS };
	const char *t = cf_qpt_name(type);
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge rsge;
	struct ibv_wc wc;
	uint8_t *rbuf;
	int ret, got, i;

	/* y is created first so that x can be connected to it (UC). */
	y.cq = ibv_create_cq(cf.ctx, 16, NULL, NULL, 0);
	y.mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(y.cq);
	CU_ASSERT_PTR_NOT_NULL_FATAL(y.mr);
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = y.cq, .recv_cq = y.cq,
			.cap = { .max_send_wr = 8, .max_recv_wr = 8,
				 .max_send_sge = 1, .max_recv_sge = 1 },
		};

		y.qp = cf_create_qp(&cf, type, &ia);
	}
	CF_CHECK(y.qp != NULL, "%s: create: %s", t, cf_errname(errno));
	if (!y.qp || !held_enter_sqe(&x, y.qp->qp_num))
		goto out;
	if (type == IBV_QPT_UD) {
		struct ibv_ah_attr aa;

		cf_fill_ah(&cf, &aa);
		y.ah = ibv_create_ah(cf.pd, &aa);
		CF_CHECK(y.ah != NULL, "ibv_create_ah: %s", cf_errname(errno));
		if (!y.ah)
			goto out;
	}
	ret = cf_qp_to_state_dest(&cf, y.qp, IBV_QPS_RTS, x.qp->qp_num);
	CF_EXPECT_OK(ret, "sender QP to RTS");
	if (ret)
		goto out;

	/* A send posted in SQE is flushed; the QP stays in SQE. */
	ret = held_send(&x, 2, 16, x.mr->lkey, y.qp->qp_num);
	CF_EXPECT_OK(ret, "ibv_post_send in SQE");
	if (!ret) {
		got = cf_poll_cq_wait(x.cq, &wc, 1, SQE_WAIT_MS);
		CF_CHECK(got == 1 && wc.wr_id == 2 &&
			 wc.status == IBV_WC_WR_FLUSH_ERR,
			 "%s: SEND posted in SQE: %d completions (wr_id %llu, "
			 "%s), expected WR_FLUSH_ERR", t, got,
			 got == 1 ? (unsigned long long)wc.wr_id : 0ull,
			 got == 1 ? ibv_wc_status_str(wc.status) : "-");
	}
	CF_CHECK(cf_qp_state(x.qp) == IBV_QPS_SQE, "%s: after the flush the "
		 "QP is in %s, expected SQE", t,
		 cf_state_name(cf_qp_state(x.qp)));

	/* The receive queue still works. */
	rbuf = (uint8_t *)x.mr->addr + 1024;
	memset(rbuf, 0, 1024);
	rsge.addr = (uintptr_t)rbuf;
	rsge.length = 1024;
	rsge.lkey = x.mr->lkey;
	memset(&rwr, 0, sizeof(rwr));
	rwr.wr_id = 100;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	ret = cf_rc(ibv_post_recv(x.qp, &rwr, &rbad));
	CF_EXPECT_OK(ret, "ibv_post_recv in SQE");
	for (i = 0; i < 100; i++)
		((uint8_t *)y.mr->addr)[i] = (uint8_t)(i * 7 + 1);
	ret = held_send(&y, 3, 100, y.mr->lkey, x.qp->qp_num);
	CF_EXPECT_OK(ret, "ibv_post_send to the QP in SQE");
	if (ret)
		goto out;
	got = cf_poll_cq_wait(y.cq, &wc, 1, SQE_WAIT_MS);
	CF_CHECK(got == 1 && wc.wr_id == 3 && wc.status == IBV_WC_SUCCESS,
		 "%s: SEND to the QP in SQE: %d completions, status %s", t,
		 got, got == 1 ? ibv_wc_status_str(wc.status) : "-");
	got = cf_poll_cq_wait(x.cq, &wc, 1, SQE_WAIT_MS);
	CF_CHECK(got == 1 && wc.wr_id == 100 &&
		 wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV &&
		 wc.byte_len == 100 + grh,
		 "%s: receive in SQE: %d completions (wr_id %llu status %s "
		 "byte_len %u), expected RECV of %u bytes", t, got,
		 got == 1 ? (unsigned long long)wc.wr_id : 0ull,
		 got == 1 ? ibv_wc_status_str(wc.status) : "-",
		 got == 1 ? wc.byte_len : 0, 100 + grh);
	if (got == 1 && wc.status == IBV_WC_SUCCESS)
		CF_CHECK(!memcmp(rbuf + grh, y.mr->addr, 100),
			 "%s: received data differs", t);
	CF_CHECK(cf_qp_state(x.qp) == IBV_QPS_SQE, "%s: after the receive "
		 "the QP is in %s, expected SQE", t,
		 cf_state_name(cf_qp_state(x.qp)));
out:
	held_release(&x);
	held_release(&y);
}

CF_TEST_IMPL(qp_state, UC_UD_SQE_queues)
{
	sqe_queues(IBV_QPT_UD);
	sqe_queues(IBV_QPT_UC);
}

/*
 * A modify giving a Current QP State the QP is not in.  IBA 11.2.5.2
 * makes the Current QP State an input the CI may check; the verbs man
 * page says "Assume this is the current QP state", and the Linux core
 * takes it as the state to check the transition from (ib_modify_qp).
 * So a device either refuses the modify with EINVAL and keeps the state,
 * or performs it as from the state named; either way the QP ends in a
 * state the transition allows: its own, or the target.  Which it does is
 * the device's choice.
 */
static void cur_state_claim(struct held_qp *h, enum ibv_qp_state claim,
			    int mask)
{
	const char *t = cf_qpt_name(h->type);
	struct ibv_qp_attr a;
	int ret, st;

	if (!held_ensure(h))
		return;
	cf_qp_fill_attr(&cf, h->qp, claim, IBV_QPS_RTS, &a);
	ret = cf_rc(ibv_modify_qp(h->qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE |
				  mask));
	st = cf_qp_state(h->qp);
	CF_CHECK(ret == 0 || ret == EINVAL, "%s in RTS, CUR_STATE=%s: "
		 "expected success or EINVAL, got %s", t,
		 cf_state_name(claim), cf_errname(ret));
	CF_CHECK(st == IBV_QPS_RTS, "%s in RTS, CUR_STATE=%s: the QP is now "
		 "in %s, expected RTS", t, cf_state_name(claim),
		 cf_state_name(st));
	if (ret == EINVAL)
		CF_CHOICE("a Current QP State the QP is not in is refused "
			  "(EINVAL)");
	else if (!ret)
		CF_CHOICE("a Current QP State is assumed, as the man page "
			  "says (RTS->RTS given as %s->RTS accepted)",
			  cf_state_name(claim));
}

CF_TEST_IMPL(qp_state, cur_state_mismatch)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
	};
	size_t t;

	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		struct held_qp h = { .type = types[t], .state = IBV_QPS_RTS };
		struct ibv_qp_attr a;
		int ret, req;

		/* RTS->RTS claiming SQD (SQD->RTS would be legal). */
		cur_state_claim(&h, IBV_QPS_SQD, 0);
		/* RTS->RTS claiming RTR, with the RTR->RTS attributes. */
		cf_qp_trans(types[t], IBV_QPS_RTR, IBV_QPS_RTS, &req, NULL);
		cur_state_claim(&h, IBV_QPS_RTR, req);
		/* The matching current state is accepted (IBA 11.2.5.2). */
		if (!held_ensure(&h))
			continue;
		cf_qp_fill_attr(&cf, h.qp, IBV_QPS_RTS, IBV_QPS_RTS, &a);
		ret = cf_rc(ibv_modify_qp(h.qp, &a, IBV_QP_STATE |
					  IBV_QP_CUR_STATE));
		CF_EXPECT_OK(ret, "RTS->RTS with CUR_STATE=RTS");
		held_release(&h);
	}
}

/* manual 3.6.1: ibv_query_qp returns what ibv_modify_qp set. */
CF_TEST_IMPL(qp_state, query_returns_set)
{
	static const enum ibv_qp_type types[] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD,
	};
	const struct ibv_device_attr *d = cf.dev;
	size_t t;

	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		enum ibv_qp_type type = types[t];
		bool conn = type != IBV_QPT_UD, rc = type == IBV_QPT_RC;
		struct ibv_qp_init_attr qi;
		struct ibv_qp_attr a, q;
		struct ibv_qp *qp;
		int req, ret;
		uint8_t rd = d->max_qp_init_rd_atom >= 2 ? 2 :
			     d->max_qp_init_rd_atom;
		uint8_t drd = d->max_qp_rd_atom >= 3 ? 3 : d->max_qp_rd_atom;
		enum ibv_mtu mtu = cf.port.max_mtu >= IBV_MTU_512 ?
				   IBV_MTU_512 : IBV_MTU_256;

		qp = cf_create_qp(&cf, type, NULL);
		CU_ASSERT_PTR_NOT_NULL_FATAL(qp);

		cf_qp_trans(type, IBV_QPS_RESET, IBV_QPS_INIT, &req, NULL);
		cf_qp_fill_attr(&cf, qp, IBV_QPS_RESET, IBV_QPS_INIT, &a);
		a.qkey = 0x12345678;
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
		ret = cf_rc(ibv_modify_qp(qp, &a, req | IBV_QP_STATE));
		CF_EXPECT_OK(ret, "RESET->INIT");

		cf_qp_trans(type, IBV_QPS_INIT, IBV_QPS_RTR, &req, NULL);
		cf_qp_fill_attr(&cf, qp, IBV_QPS_INIT, IBV_QPS_RTR, &a);
		a.path_mtu = mtu;
		a.rq_psn = 0xabcde;
		a.min_rnr_timer = 17;
		a.max_dest_rd_atomic = drd;
		ret = cf_rc(ibv_modify_qp(qp, &a, req | IBV_QP_STATE));
		CF_EXPECT_OK(ret, "INIT->RTR");

		cf_qp_trans(type, IBV_QPS_RTR, IBV_QPS_RTS, &req, NULL);
		cf_qp_fill_attr(&cf, qp, IBV_QPS_RTR, IBV_QPS_RTS, &a);
		a.sq_psn = 0x54321;
		a.timeout = 18;
		a.retry_cnt = 5;
		a.rnr_retry = 6;
		a.max_rd_atomic = rd;
		ret = cf_rc(ibv_modify_qp(qp, &a, req | IBV_QP_STATE));
		CF_EXPECT_OK(ret, "RTR->RTS");

		memset(&q, 0, sizeof(q));
		ret = cf_rc(ibv_query_qp(qp, &q, IBV_QP_STATE |
					 IBV_QP_PKEY_INDEX | IBV_QP_PORT |
					 IBV_QP_QKEY | IBV_QP_ACCESS_FLAGS |
					 IBV_QP_AV | IBV_QP_PATH_MTU |
					 IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					 IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
					 IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					 IBV_QP_MIN_RNR_TIMER |
					 IBV_QP_MAX_QP_RD_ATOMIC |
					 IBV_QP_MAX_DEST_RD_ATOMIC, &qi));
		CF_EXPECT_OK(ret, "ibv_query_qp");
		CF_CHECK(q.qp_state == IBV_QPS_RTS, "%s: state %s",
			 cf_qpt_name(type), cf_state_name(q.qp_state));
		CF_CHECK(q.pkey_index == 0, "%s: pkey_index %u",
			 cf_qpt_name(type), q.pkey_index);
		CF_CHECK(q.port_num == cf_port, "%s: port_num %u",
			 cf_qpt_name(type), q.port_num);
		CF_CHECK(q.sq_psn == 0x54321, "%s: sq_psn 0x%x",
			 cf_qpt_name(type), q.sq_psn);
		if (!conn) {
			CF_CHECK(q.qkey == 0x12345678, "UD: qkey 0x%x",
				 q.qkey);
		} else {
			CF_CHECK(q.qp_access_flags == IBV_ACCESS_REMOTE_WRITE,
				 "%s: access 0x%x", cf_qpt_name(type),
				 q.qp_access_flags);
			CF_CHECK(q.path_mtu == mtu, "%s: path_mtu %d, set %d",
				 cf_qpt_name(type), q.path_mtu, mtu);
			CF_CHECK(q.dest_qp_num == qp->qp_num,
				 "%s: dest_qp_num 0x%x, set 0x%x",
				 cf_qpt_name(type), q.dest_qp_num, qp->qp_num);
			CF_CHECK(q.rq_psn == 0xabcde, "%s: rq_psn 0x%x",
				 cf_qpt_name(type), q.rq_psn);
			CF_CHECK(q.ah_attr.dlid == cf.port.lid,
				 "%s: ah_attr.dlid 0x%x, set 0x%x",
				 cf_qpt_name(type), q.ah_attr.dlid,
				 cf.port.lid);
			CF_CHECK(q.ah_attr.port_num == cf_port,
				 "%s: ah_attr.port_num %u", cf_qpt_name(type),
				 q.ah_attr.port_num);
		}
		if (rc) {
			CF_CHECK(q.timeout == 18, "RC: timeout %u", q.timeout);
			CF_CHECK(q.retry_cnt == 5, "RC: retry_cnt %u",
				 q.retry_cnt);
			CF_CHECK(q.rnr_retry == 6, "RC: rnr_retry %u",
				 q.rnr_retry);
			CF_CHECK(q.min_rnr_timer == 17, "RC: min_rnr_timer %u",
				 q.min_rnr_timer);
			/* IBA 11.2.5.1: the HCA may round these up. */
			CF_CHECK(q.max_rd_atomic >= rd, "RC: max_rd_atomic "
				 "%u < set %u", q.max_rd_atomic, rd);
			CF_CHECK(q.max_dest_rd_atomic >= drd,
				 "RC: max_dest_rd_atomic %u < set %u",
				 q.max_dest_rd_atomic, drd);
		}
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
}

enum bad_field {
	BAD_PORT_0, BAD_PORT_HIGH, BAD_PKEY_INDEX, BAD_PATH_MTU,
	BAD_MAX_RD_ATOMIC, BAD_MAX_DEST_RD_ATOMIC, BAD_TIMEOUT, BAD_RETRY_CNT,
	BAD_RNR_RETRY, BAD_MIN_RNR_TIMER, BAD_DEST_QPN, BAD_SQ_PSN,
	BAD_RQ_PSN,
};

static const struct {
	enum bad_field field;
	enum ibv_qp_type type;
	enum ibv_qp_state from, to;
	const char *what;
} bad_values[] = {
	/* IBA 14.2.5.6: HCA ports are numbered 1..phys_port_cnt. */
	{ BAD_PORT_0, IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT, "port 0" },
	{ BAD_PORT_0, IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT, "port 0" },
	{ BAD_PORT_HIGH, IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT,
	  "port phys_port_cnt + 1" },
	{ BAD_PORT_HIGH, IBV_QPT_UC, IBV_QPS_RESET, IBV_QPS_INIT,
	  "port phys_port_cnt + 1" },
	/* IBA 10.9.2: the P_Key index selects an entry of the table. */
	{ BAD_PKEY_INDEX, IBV_QPT_RC, IBV_QPS_RESET, IBV_QPS_INIT,
	  "pkey_index pkey_tbl_len" },
	{ BAD_PKEY_INDEX, IBV_QPT_UD, IBV_QPS_RESET, IBV_QPS_INIT,
	  "pkey_index pkey_tbl_len" },
	/* IBA 11.2.5.1: path MTU at most the port's MTU capability. */
	{ BAD_PATH_MTU, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "path_mtu above max_mtu" },
	{ BAD_PATH_MTU, IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "path_mtu above max_mtu" },
	/* IBA 11.2.5.1: RDMA read/atomic depths bounded by the HCA's. */
	{ BAD_MAX_RD_ATOMIC, IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
	  "max_rd_atomic above device maximum" },
	{ BAD_MAX_DEST_RD_ATOMIC, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "max_dest_rd_atomic above device maximum" },
	/* IBA 9.7.6.1.3 / 9.7.5.2.8: 5-bit timeout and RNR timer, 3-bit
	 * retry counts. */
	{ BAD_TIMEOUT, IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, "timeout 32" },
	{ BAD_RETRY_CNT, IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
	  "retry_cnt 8" },
	{ BAD_RNR_RETRY, IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS,
	  "rnr_retry 8" },
	{ BAD_MIN_RNR_TIMER, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "min_rnr_timer 32" },
	/* IBA 9.2: QPNs and PSNs are 24-bit fields of the BTH. */
	{ BAD_DEST_QPN, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "dest_qp_num 2^24" },
	{ BAD_DEST_QPN, IBV_QPT_UC, IBV_QPS_INIT, IBV_QPS_RTR,
	  "dest_qp_num 2^24" },
	/* A PSN beyond 24 bits: refused or taken modulo 2^24,
	 * psn_beyond_24_bits. */
	{ BAD_RQ_PSN, IBV_QPT_RC, IBV_QPS_INIT, IBV_QPS_RTR, "rq_psn 2^24" },
	{ BAD_SQ_PSN, IBV_QPT_RC, IBV_QPS_RTR, IBV_QPS_RTS, "sq_psn 2^24" },
	{ BAD_SQ_PSN, IBV_QPT_UD, IBV_QPS_RTR, IBV_QPS_RTS, "sq_psn 2^24" },
};

/*
 * A PSN of 2^24 or more.  IBA 9.2 makes the PSN a 24-bit field; the verbs
 * man page calls sq_psn and rq_psn "a 24 bits value" and says nothing of
 * larger ones, and every kernel provider takes them modulo 2^24.  So a
 * device refuses the modify (EINVAL, state kept) or takes the low 24 bits
 * (then the QP reaches the target and a query returns a 24-bit PSN): its
 * choice, reported.
 */
static void psn_beyond_24_bits(struct held_qp *h, enum ibv_qp_state to,
			       enum bad_field field, int ret,
			       const char *what)
{
	const char *t = cf_qpt_name(h->type);
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr q;
	uint32_t psn;
	int st = cf_qp_state(h->qp);

	if (ret == EINVAL) {
		CF_CHECK(st == (int)h->state, "%s %s->%s with %s refused: QP "
			 "left in %s", t, cf_state_name(h->state),
			 cf_state_name(to), what, cf_state_name(st));
		CF_CHOICE("a PSN of 2^24 or more is refused (EINVAL)");
		return;
	}
	CF_CHECK(ret == 0 && st == (int)to, "%s %s->%s with %s: %s, QP in %s; "
		 "expected EINVAL, or success and %s", t,
		 cf_state_name(h->state), cf_state_name(to), what,
		 cf_errname(ret), cf_state_name(st), cf_state_name(to));
	if (ret)
		return;
	memset(&q, 0, sizeof(q));
	ret = cf_rc(ibv_query_qp(h->qp, &q, IBV_QP_SQ_PSN | IBV_QP_RQ_PSN,
				 &init));
	CF_EXPECT_OK(ret, "ibv_query_qp");
	psn = field == BAD_SQ_PSN ? q.sq_psn : q.rq_psn;
	/* 2^24 was written: modulo 2^24 it is 0. */
	CF_CHECK(ret || psn == 0, "%s with %s accepted: the query returns "
		 "PSN 0x%x, not the 24-bit PSN 0 (IBA 9.2)", t, what, psn);
	if (!ret && psn == 0)
		CF_CHOICE("a PSN of 2^24 or more is taken modulo 2^24, as "
			  "the Linux providers do (queried back as 0x%x)",
			  psn);
}

/* Invalid attribute values are refused with EINVAL, state unchanged. */
CF_TEST_IMPL(qp_state, invalid_values)
{
	const struct ibv_device_attr *d = cf.dev;
	int rd_max = d->max_qp_rd_atom > d->max_qp_init_rd_atom ?
		     d->max_qp_rd_atom : d->max_qp_init_rd_atom;
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(bad_values); i++) {
		struct held_qp h = { .type = bad_values[i].type,
				     .state = bad_values[i].from };
		enum ibv_qp_state to = bad_values[i].to;
		struct ibv_qp_attr a;
		int req, ret, st;

		if ((bad_values[i].field == BAD_MAX_RD_ATOMIC ||
		     bad_values[i].field == BAD_MAX_DEST_RD_ATOMIC) &&
		    rd_max >= 255) {
			cf_skip("%s: device maximum %d fills the 8-bit field",
				bad_values[i].what, rd_max);
			continue;
		}
		if (!held_ensure(&h))
			continue;
		cf_qp_trans(h.type, h.state, to, &req, NULL);
		cf_qp_fill_attr(&cf, h.qp, h.state, to, &a);
		switch (bad_values[i].field) {
		case BAD_PORT_0:
			a.port_num = 0;
			break;
		case BAD_PORT_HIGH:
			a.port_num = d->phys_port_cnt + 1;
			break;
		case BAD_PKEY_INDEX:
			a.pkey_index = cf.port.pkey_tbl_len;
			break;
		case BAD_PATH_MTU:
			a.path_mtu = cf.port.max_mtu + 1;
			break;
		case BAD_MAX_RD_ATOMIC:
			a.max_rd_atomic = rd_max + 1;
			break;
		case BAD_MAX_DEST_RD_ATOMIC:
			a.max_dest_rd_atomic = rd_max + 1;
			break;
		case BAD_TIMEOUT:
			a.timeout = 32;
			break;
		case BAD_RETRY_CNT:
			a.retry_cnt = 8;
			break;
		case BAD_RNR_RETRY:
			a.rnr_retry = 8;
			break;
		case BAD_MIN_RNR_TIMER:
			a.min_rnr_timer = 32;
			break;
		case BAD_DEST_QPN:
			a.dest_qp_num = 1u << 24;
			break;
		case BAD_SQ_PSN:
			a.sq_psn = 1u << 24;
			break;
		case BAD_RQ_PSN:
			a.rq_psn = 1u << 24;
			break;
		}
		ret = cf_rc(ibv_modify_qp(h.qp, &a, req | IBV_QP_STATE));
		if (bad_values[i].field == BAD_SQ_PSN ||
		    bad_values[i].field == BAD_RQ_PSN) {
			psn_beyond_24_bits(&h, to, bad_values[i].field, ret,
					   bad_values[i].what);
			held_release(&h);
			continue;
		}
		CF_CHECK(ret == EINVAL, "%s %s->%s with %s: expected EINVAL, "
			 "got %s", cf_qpt_name(h.type), cf_state_name(h.state),
			 cf_state_name(to), bad_values[i].what,
			 cf_errname(ret));
		st = cf_qp_state(h.qp);
		CF_CHECK(st == (int)h.state, "%s %s->%s with %s: QP left in %s",
			 cf_qpt_name(h.type), cf_state_name(h.state),
			 cf_state_name(to), bad_values[i].what,
			 cf_state_name(st));
		held_release(&h);
	}
}

/* IBA 10.3.1: a QP in RESET can be brought up again after ERR. */
CF_TEST_IMPL(qp_state, reuse_after_reset)
{
	struct ibv_qp *qp = cf_create_qp(&cf, IBV_QPT_RC, NULL);
	struct ibv_qp_attr a;
	int round;

	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	for (round = 0; round < 3; round++) {
		CF_EXPECT_OK(cf_qp_to_state(&cf, qp, IBV_QPS_RTS),
			     "RESET..RTS");
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)),
			     "RTS->ERR");
		a.qp_state = IBV_QPS_RESET;
		CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)),
			     "ERR->RESET");
		CF_CHECK(cf_qp_state(qp) == IBV_QPS_RESET, "not in RESET");
	}
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
}
