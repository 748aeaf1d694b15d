// SPDX-License-Identifier: MIT
/*
 * Posting work requests without a data path: manual 3.6 (ibv_post_send,
 * ibv_post_recv) and 6.2 (work completion status); IBA 10.8.2 / 11.4.1
 * (Post Send / Post Receive Request and their immediate errors) and
 * 10.3.1 (flushing in the Error state).
 */
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };

struct post_fix {
	struct ibv_mr *mr;
	struct ibv_sge sge[2];
};

static void fix_init(struct post_fix *f)
{
	f->mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(f->mr);
	f->sge[0].addr = (uintptr_t)f->mr->addr;
	f->sge[0].length = 64;
	f->sge[0].lkey = f->mr->lkey;
	f->sge[1] = f->sge[0];
	f->sge[1].addr += 64;
}

/*
 * A QP of type on cq with wr WRs and one SGE per queue, in INIT; ia
 * receives the caps granted.  Fatal when it cannot be made.
 */
static struct ibv_qp *init_qp(enum ibv_qp_type type, struct ibv_cq *cq,
			      uint32_t wr, struct ibv_qp_init_attr *ia)
{
	struct ibv_qp *qp;

	memset(ia, 0, sizeof(*ia));
	ia->send_cq = ia->recv_cq = cq;
	ia->cap.max_send_wr = ia->cap.max_recv_wr = wr;
	ia->cap.max_send_sge = ia->cap.max_recv_sge = 1;
	qp = cf_create_qp(&cf, type, ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	CF_EXPECT_OK(cf_qp_to_state(&cf, qp, IBV_QPS_INIT), "RESET->INIT");
	return qp;
}

/*
 * IBA 10.3.1 and ibv_post_recv(3): receives can be posted from
 * INIT on; rdma-core providers refuse them in RESET with EINVAL.
 */
CF_TEST_IMPL(post, recv_in_reset)
{
	struct ibv_recv_wr wr, *bad = NULL;
	struct post_fix f;
	size_t t;

	fix_init(&f);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		struct ibv_qp *qp = cf_create_qp(&cf, types[t], NULL);
		int ret;

		CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 7;
		wr.sg_list = f.sge;
		wr.num_sge = 1;
		ret = cf_rc(ibv_post_recv(qp, &wr, &bad));
		CF_CHECK(ret == EINVAL && bad == &wr,
			 "%s: ibv_post_recv in RESET: expected EINVAL with "
			 "bad_wr set, got %s, bad_wr %s", cf_qpt_name(types[t]),
			 cf_errname(ret), bad == &wr ? "set" : "wrong");
		/* From INIT on, receives are accepted. */
		CF_EXPECT_OK(cf_qp_to_state(&cf, qp, IBV_QPS_INIT),
			     "RESET->INIT");
		CF_EXPECT_OK(cf_rc(ibv_post_recv(qp, &wr, &bad)),
			     "ibv_post_recv in INIT");
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
	cf_free_mr(f.mr);
}

/* IBA 11.4.1.2: more SGEs than the QP was created with is an error. */
CF_TEST_IMPL(post, recv_too_many_sge)
{
	struct ibv_recv_wr wr[2], *bad = NULL;
	struct ibv_qp_init_attr ia;
	struct ibv_sge *sges;
	struct post_fix f;
	uint32_t n, i;
	size_t t;

	fix_init(&f);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		struct ibv_qp *qp;
		int ret;

		qp = init_qp(types[t], cf.cq, 4, &ia);
		n = ia.cap.max_recv_sge + 1;
		sges = calloc(n, sizeof(*sges));
		CU_ASSERT_PTR_NOT_NULL_FATAL(sges);
		for (i = 0; i < n; i++)
			sges[i] = f.sge[0];
		memset(wr, 0, sizeof(wr));
		wr[0].wr_id = 1;
		wr[0].sg_list = f.sge;
		wr[0].num_sge = 1;
		wr[0].next = &wr[1];
		wr[1].wr_id = 2;
		wr[1].sg_list = sges;
		wr[1].num_sge = n;
		ret = cf_rc(ibv_post_recv(qp, wr, &bad));
		CF_CHECK(ret == EINVAL && bad == &wr[1],
			 "%s: second WR with num_sge %u > max_recv_sge %u: "
			 "expected EINVAL with bad_wr = WR #1, got %s, "
			 "bad_wr #%td", cf_qpt_name(types[t]), n,
			 ia.cap.max_recv_sge, cf_errname(ret),
			 bad ? bad - wr : -1);
		free(sges);
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
	cf_free_mr(f.mr);
}

/* A chain of n receives, wr_ids base.. */
static struct ibv_recv_wr *recv_chain(struct post_fix *f, uint32_t n,
				      uint64_t base)
{
	struct ibv_recv_wr *wrs = calloc(n, sizeof(*wrs));
	uint32_t i;

	if (!wrs)
		return NULL;
	for (i = 0; i < n; i++) {
		wrs[i].wr_id = base + i;
		wrs[i].sg_list = f->sge;
		wrs[i].num_sge = 1;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	return wrs;
}

/* IBA 11.4.1.2: a full receive queue refuses the WR that overflows it. */
CF_TEST_IMPL(post, recv_overflow)
{
	struct ibv_recv_wr *wrs, *bad = NULL;
	struct ibv_qp_init_attr ia;
	struct post_fix f;
	size_t t;

	fix_init(&f);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		struct ibv_qp *qp;
		uint32_t cap;
		int ret;

		qp = init_qp(types[t], cf.cq, 8, &ia);
		cap = ia.cap.max_recv_wr;
		wrs = recv_chain(&f, cap + 1, 0);
		CU_ASSERT_PTR_NOT_NULL_FATAL(wrs);
		ret = cf_rc(ibv_post_recv(qp, wrs, &bad));
		CF_CHECK(ret == ENOMEM && bad == &wrs[cap],
			 "%s: %u receives on a queue of %u: expected ENOMEM "
			 "with bad_wr = WR #%u, got %s, bad_wr #%td",
			 cf_qpt_name(types[t]), cap + 1, cap, cap,
			 cf_errname(ret), bad ? bad - wrs : -1);
		free(wrs);
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
	cf_free_mr(f.mr);
}

static void send_chain(struct post_fix *f, struct ibv_send_wr *wrs,
		       uint32_t n, struct ibv_ah *ah, uint64_t base)
{
	uint32_t i;

	memset(wrs, 0, n * sizeof(*wrs));
	for (i = 0; i < n; i++) {
		wrs[i].wr_id = base + i;
		wrs[i].sg_list = f->sge;
		wrs[i].num_sge = 1;
		wrs[i].opcode = IBV_WR_SEND;
		wrs[i].send_flags = IBV_SEND_SIGNALED;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
		if (ah) {
			wrs[i].wr.ud.ah = ah;
			wrs[i].wr.ud.remote_qpn = 1u << 23;
			wrs[i].wr.ud.remote_qkey = 0x11111111;
		}
	}
}

/* IBA 10.8.2 / 11.4.1.1: Post Send is an immediate error before RTS. */
CF_TEST_IMPL(post, send_not_rts)
{
	static const enum ibv_qp_state st[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR,
	};
	struct ibv_send_wr wr, *bad;
	struct ibv_ah_attr aa;
	struct post_fix f;
	struct ibv_ah *ah;
	size_t t, s;

	fix_init(&f);
	cf_fill_ah(&cf, &aa);
	ah = ibv_create_ah(cf.pd, &aa);
	CU_ASSERT_PTR_NOT_NULL_FATAL(ah);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		for (s = 0; s < CF_ARRAY_SIZE(st); s++) {
			struct ibv_qp *qp = cf_create_qp(&cf, types[t], NULL);
			int ret;

			CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
			CF_EXPECT_OK(cf_qp_to_state(&cf, qp, st[s]),
				     "bring-up");
			send_chain(&f, &wr, 1,
				   types[t] == IBV_QPT_UD ? ah : NULL, 5);
			bad = NULL;
			ret = cf_rc(ibv_post_send(qp, &wr, &bad));
			CF_CHECK(ret == EINVAL && bad == &wr,
				 "%s: ibv_post_send in %s: expected EINVAL "
				 "with bad_wr set, got %s",
				 cf_qpt_name(types[t]), cf_state_name(st[s]),
				 cf_errname(ret));
			CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)),
				     "ibv_destroy_qp");
		}
	}
	ibv_destroy_ah(ah);
	cf_free_mr(f.mr);
}

/*
 * An RC QP in RTS whose peer (a QP of ours left in INIT) silently drops
 * everything (IBA 10.3.1: a QP not yet in RTR discards packets), with a
 * long ACK timeout: posted sends stay outstanding.
 */
static struct ibv_qp *stalled_rc(struct ibv_cq *cq, struct ibv_qp **peer_p,
				 uint32_t *cap_p)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp, *peer;
	enum ibv_qp_state from = IBV_QPS_RESET, to;
	int req;

	peer = cf_create_qp(&cf, IBV_QPT_RC, NULL);
	if (!peer)
		return NULL;
	if (cf_qp_to_state(&cf, peer, IBV_QPS_INIT))
		goto err_peer;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = cf_create_qp(&cf, IBV_QPT_RC, &ia);
	if (!qp)
		goto err_peer;
	for (to = IBV_QPS_INIT; to <= IBV_QPS_RTS; from = to, to++) {
		cf_qp_trans(IBV_QPT_RC, from, to, &req, NULL);
		cf_qp_fill_attr(&cf, qp, from, to, &a);
		a.dest_qp_num = peer->qp_num;
		a.timeout = 24;	/* 4.096 us * 2^24: about a minute */
		if (ibv_modify_qp(qp, &a, req | IBV_QP_STATE))
			goto err_qp;
	}
	*peer_p = peer;
	*cap_p = ia.cap.max_send_wr;
	return qp;
err_qp:
	ibv_destroy_qp(qp);
err_peer:
	ibv_destroy_qp(peer);
	return NULL;
}

/* IBA 11.4.1.1: a full send queue refuses the WR that overflows it. */
CF_TEST_IMPL(post, send_overflow)
{
	struct ibv_send_wr *wrs, *bad = NULL;
	struct ibv_qp *qp, *peer;
	struct post_fix f;
	uint32_t cap;
	int ret;

	fix_init(&f);
	qp = stalled_rc(cf.cq, &peer, &cap);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	wrs = calloc(cap + 1, sizeof(*wrs));
	CU_ASSERT_PTR_NOT_NULL_FATAL(wrs);
	send_chain(&f, wrs, cap + 1, NULL, 0);
	ret = cf_rc(ibv_post_send(qp, wrs, &bad));
	CF_CHECK(ret == ENOMEM && bad == &wrs[cap],
		 "RC: %u sends on a queue of %u: expected ENOMEM with bad_wr "
		 "= WR #%u, got %s, bad_wr #%td", cap + 1, cap, cap,
		 cf_errname(ret), bad ? bad - wrs : -1);
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(peer)), "ibv_destroy_qp(peer)");
	free(wrs);
	cf_free_mr(f.mr);
}

/*
 * IBA 10.3.1 / manual 6.2: in the Error state every outstanding WR
 * completes with IBV_WC_WR_FLUSH_ERR, in the order posted on each queue,
 * carrying its wr_id and the QP number.
 */
CF_TEST_IMPL(post, recv_flush)
{
	struct ibv_wc wc[16];
	struct post_fix f;
	size_t t;

	fix_init(&f);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		struct ibv_cq *cq = ibv_create_cq(cf.ctx, 32, NULL, NULL, 0);
		struct ibv_qp_init_attr ia;
		struct ibv_qp_attr a;
		struct ibv_qp *qp;
		int got, i;

		CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
		qp = init_qp(types[t], cq, 8, &ia);
		CF_EXPECT_OK(cf_post_recvs(qp, f.mr, 8, 100), "post 8 recvs");
		CF_CHECK(ibv_poll_cq(cq, 16, wc) == 0,
			 "%s: completions before any traffic",
			 cf_qpt_name(types[t]));
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)),
			     "INIT->ERR");
		got = cf_poll_cq_wait(cq, wc, 16, 2000);
		CF_CHECK(got == 8, "%s: %d flush completions, expected 8",
			 cf_qpt_name(types[t]), got);
		for (i = 0; i < got; i++)
			CF_CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR &&
				 wc[i].wr_id == (uint64_t)(100 + i) &&
				 wc[i].qp_num == qp->qp_num,
				 "%s: completion %d: status %s wr_id %llu "
				 "qp 0x%x, expected WR_FLUSH_ERR %d 0x%x",
				 cf_qpt_name(types[t]), i,
				 ibv_wc_status_str(wc[i].status),
				 (unsigned long long)wc[i].wr_id,
				 wc[i].qp_num, 100 + i, qp->qp_num);
		/* A receive posted in ERR is flushed too (IBA 10.3.1). */
		CF_EXPECT_OK(cf_post_recvs(qp, f.mr, 1, 200),
			     "ibv_post_recv in ERR");
		got = cf_poll_cq_wait(cq, wc, 1, 2000);
		CF_CHECK(got == 1 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
			 wc[0].wr_id == 200,
			 "%s: receive posted in ERR not flushed",
			 cf_qpt_name(types[t]));
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
		CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
	}
	cf_free_mr(f.mr);
}

CF_TEST_IMPL(post, send_flush)
{
	struct ibv_send_wr wrs[4], *bad = NULL;
	struct ibv_qp *qp, *peer;
	struct ibv_wc wc[8];
	struct ibv_qp_attr a;
	struct post_fix f;
	struct ibv_cq *cq;
	uint32_t cap;
	int got, i;

	fix_init(&f);
	cq = ibv_create_cq(cf.ctx, 32, NULL, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
	qp = stalled_rc(cq, &peer, &cap);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	send_chain(&f, wrs, 4, NULL, 300);
	CF_EXPECT_OK(cf_rc(ibv_post_send(qp, wrs, &bad)), "post 4 sends");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)), "RTS->ERR");
	got = cf_poll_cq_wait(cq, wc, 8, 2000);
	CF_CHECK(got == 4, "RC: %d send flush completions, expected 4", got);
	for (i = 0; i < got; i++)
		CF_CHECK(wc[i].status == IBV_WC_WR_FLUSH_ERR &&
			 wc[i].wr_id == (uint64_t)(300 + i) &&
			 wc[i].qp_num == qp->qp_num,
			 "RC send completion %d: status %s wr_id %llu, "
			 "expected WR_FLUSH_ERR %d", i,
			 ibv_wc_status_str(wc[i].status),
			 (unsigned long long)wc[i].wr_id, 300 + i);
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(peer)), "ibv_destroy_qp(peer)");
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
	cf_free_mr(f.mr);
}
