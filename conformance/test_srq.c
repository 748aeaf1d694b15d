// SPDX-License-Identifier: MIT
/*
 * Shared receive queues: manual 3.4.9-3.4.12 (ibv_create_srq,
 * ibv_modify_srq, ibv_query_srq, ibv_destroy_srq) and 3.6 (ibv_post_srq_recv);
 * IBA 11.2.3 (SRQ verbs) and 10.2.9.
 */
#include <stdlib.h>
#include <string.h>

#include "tests.h"

static struct ibv_srq *make_srq(uint32_t wr, uint32_t sge, uint32_t *wr_p)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq *srq;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = wr;
	sa.attr.max_sge = sge;
	srq = ibv_create_srq(cf.pd, &sa);
	if (srq && wr_p)
		*wr_p = sa.attr.max_wr;
	return srq;
}

#define NEED_SRQ()							\
	do {								\
		if (cf.dev->max_srq <= 0)				\
			SKIP("device reports max_srq 0 (no SRQ support)"); \
	} while (0)

/* IBA 11.2.3.1: the SRQ gets at least what was asked, within limits. */
CF_TEST_IMPL(srq, create_query)
{
	struct ibv_srq_init_attr sa;
	struct ibv_srq_attr q;
	struct ibv_srq *srq;

	NEED_SRQ();
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 16;
	sa.attr.max_sge = 1;
	sa.srq_context = &sa;
	srq = ibv_create_srq(cf.pd, &sa);
	CF_CHECK(srq != NULL, "ibv_create_srq: %s", cf_errname(errno));
	if (!srq)
		return;
	CF_CHECK(sa.attr.max_wr >= 16 && sa.attr.max_sge >= 1,
		 "returned max_wr %u max_sge %u", sa.attr.max_wr,
		 sa.attr.max_sge);
	CF_CHECK(srq->srq_context == &sa && srq->pd == cf.pd,
		 "srq fields not set");
	memset(&q, 0, sizeof(q));
	CF_EXPECT_OK(cf_rc(ibv_query_srq(srq, &q)), "ibv_query_srq");
	CF_CHECK(q.max_wr >= 16 && q.max_sge >= 1,
		 "queried max_wr %u max_sge %u, requested 16/1", q.max_wr,
		 q.max_sge);
	CF_CHECK(q.srq_limit == 0, "srq_limit %u on a new SRQ", q.srq_limit);
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
}

static void expect_srq_fails(uint32_t wr, uint32_t sge, const char *what)
{
	struct ibv_srq *srq;

	errno = 0;
	srq = make_srq(wr, sge, NULL);
	CF_CHECK(!srq && errno == EINVAL, "%s: expected NULL/EINVAL, got "
		 "%s/%s", what, srq ? "SRQ" : "NULL", cf_errname(errno));
	if (srq)
		ibv_destroy_srq(srq);
}

CF_TEST_IMPL(srq, create_limits)
{
	NEED_SRQ();
	expect_srq_fails(cf.dev->max_srq_wr + 1, 1, "max_wr max_srq_wr + 1");
	expect_srq_fails(16, cf.dev->max_srq_sge + 1,
			 "max_sge max_srq_sge + 1");
	expect_srq_fails(0, 1, "max_wr 0");
}

/* IBA 11.2.3.3 Modify SRQ: the limit is at most the queue depth. */
CF_TEST_IMPL(srq, limit)
{
	struct ibv_srq_attr a, q;
	struct ibv_srq *srq;
	uint32_t wr = 0;

	NEED_SRQ();
	srq = make_srq(16, 1, &wr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
	memset(&a, 0, sizeof(a));
	a.srq_limit = 4;
	CF_EXPECT_OK(cf_rc(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT)),
		     "ibv_modify_srq(limit 4)");
	memset(&q, 0, sizeof(q));
	CF_EXPECT_OK(cf_rc(ibv_query_srq(srq, &q)), "ibv_query_srq");
	CF_CHECK(q.srq_limit == 4, "srq_limit %u, set 4", q.srq_limit);
	a.srq_limit = wr + 1;
	CF_EXPECT_ERR(cf_rc(ibv_modify_srq(srq, &a, IBV_SRQ_LIMIT)), EINVAL,
		      "ibv_modify_srq(limit > max_wr)");
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
}

/* IBA 11.2.3.3: resizing needs the SRQ-resize capability. */
CF_TEST_IMPL(srq, resize)
{
	struct ibv_srq_attr a, q;
	struct ibv_srq *srq;
	uint32_t wr = 0;
	int ret;

	NEED_SRQ();
	srq = make_srq(16, 1, &wr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
	memset(&a, 0, sizeof(a));
	a.max_wr = wr * 2 < (uint32_t)cf.dev->max_srq_wr ?
		   wr * 2 : (uint32_t)cf.dev->max_srq_wr;
	ret = cf_rc(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR));
	if (!(cf.dev->device_cap_flags & IBV_DEVICE_SRQ_RESIZE)) {
		ibv_destroy_srq(srq);
		SKIP("device lacks IBV_DEVICE_SRQ_RESIZE");
	}
	CF_EXPECT_OK(ret, "ibv_modify_srq(IBV_SRQ_MAX_WR)");
	memset(&q, 0, sizeof(q));
	CF_EXPECT_OK(cf_rc(ibv_query_srq(srq, &q)), "ibv_query_srq");
	CF_CHECK(q.max_wr >= a.max_wr, "max_wr %u after resize to %u",
		 q.max_wr, a.max_wr);
	a.max_wr = cf.dev->max_srq_wr + 1;
	CF_EXPECT_ERR(cf_rc(ibv_modify_srq(srq, &a, IBV_SRQ_MAX_WR)), EINVAL,
		      "ibv_modify_srq(max_wr > max_srq_wr)");
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
}

/* IBA 11.4.1.2: posting to a full SRQ fails at the first WR that
 * does not fit, reported through bad_wr. */
CF_TEST_IMPL(srq, post_overflow)
{
	struct ibv_recv_wr *wrs, *bad = NULL;
	struct ibv_sge sge;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	uint32_t wr = 0, i;
	int ret;

	NEED_SRQ();
	srq = make_srq(16, 1, &wr);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
	mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mr);
	wrs = calloc(wr + 1, sizeof(*wrs));
	CU_ASSERT_PTR_NOT_NULL_FATAL(wrs);
	sge.addr = (uintptr_t)mr->addr;
	sge.length = 64;
	sge.lkey = mr->lkey;
	for (i = 0; i <= wr; i++) {
		wrs[i].wr_id = i;
		wrs[i].sg_list = &sge;
		wrs[i].num_sge = 1;
		wrs[i].next = i < wr ? &wrs[i + 1] : NULL;
	}
	ret = cf_rc(ibv_post_srq_recv(srq, wrs, &bad));
	CF_EXPECT_ERR(ret, ENOMEM, "ibv_post_srq_recv(max_wr + 1 WRs)");
	CF_CHECK(bad == &wrs[wr], "bad_wr is WR #%td, expected #%u",
		 bad ? bad - wrs : -1, wr);
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
	cf_free_mr(mr);
	free(wrs);
}

/* IBA 11.2.3.4: an SRQ associated with a QP cannot be destroyed. */
CF_TEST_IMPL(srq, destroy_busy)
{
	struct ibv_qp_init_attr ia;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	int ret;

	NEED_SRQ();
	srq = make_srq(8, 1, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cf.cq;
	ia.srq = srq;
	ia.cap.max_send_wr = 1;
	ia.cap.max_send_sge = 1;
	qp = cf_create_qp(&cf, IBV_QPT_RC, &ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	ret = cf_rc(ibv_destroy_srq(srq));
	CF_EXPECT_ERR(ret, EBUSY, "ibv_destroy_srq with a QP on it");
	if (ret == 0) {
		ibv_destroy_qp(qp);
		return;
	}
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq after QP");
}
