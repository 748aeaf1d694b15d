// SPDX-License-Identifier: MIT
/*
 * Completion queues: manual 3.3.9-3.3.12 (ibv_create_cq, ibv_resize_cq,
 * ibv_destroy_cq) and 3.6 (ibv_poll_cq); IBA 11.2.7 (CQ verbs).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

CF_TEST_IMPL(cq, create_destroy)
{
	static const int sizes[] = { 1, 2, 16, 100, 1000 };
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		struct ibv_cq *cq;

		if (sizes[i] > cf.dev->max_cqe)
			continue;
		cq = ibv_create_cq(cf.ctx, sizes[i], NULL, NULL, 0);
		CF_CHECK(cq != NULL, "ibv_create_cq(%d): %s", sizes[i],
			 cf_errname(errno));
		if (!cq)
			continue;
		/* IBA 11.2.7.1: the CQ holds at least the requested size. */
		CF_CHECK(cq->cqe >= sizes[i], "cq->cqe %d < requested %d",
			 cq->cqe, sizes[i]);
		CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
	}
	if (cf.dev->max_cqe > 0) {
		struct ibv_cq *cq = ibv_create_cq(cf.ctx, cf.dev->max_cqe,
						  NULL, NULL, 0);

		CF_CHECK(cq != NULL, "ibv_create_cq(max_cqe %d): %s",
			 cf.dev->max_cqe, cf_errname(errno));
		if (cq)
			ibv_destroy_cq(cq);
	}
}

static void expect_create_fails(int cqe, int vector, const char *what)
{
	struct ibv_cq *cq;

	errno = 0;
	cq = ibv_create_cq(cf.ctx, cqe, NULL, NULL, vector);
	CF_CHECK(!cq && errno == EINVAL, "%s: expected NULL/EINVAL, got %s/%s",
		 what, cq ? "CQ" : "NULL", cf_errname(errno));
	if (cq)
		ibv_destroy_cq(cq);
}

/* IBA 11.2.7.1: a CQ has at least one entry and at most the HCA maximum. */
CF_TEST_IMPL(cq, bad_size)
{
	expect_create_fails(0, 0, "ibv_create_cq(cqe 0)");
	expect_create_fails(-1, 0, "ibv_create_cq(cqe -1)");
	if (cf.dev->max_cqe == INT32_MAX)
		SKIP("max_cqe is INT_MAX: no size exceeds it");
	expect_create_fails(cf.dev->max_cqe + 1, 0,
			    "ibv_create_cq(max_cqe + 1)");
}

/* manual 3.3.9: comp_vector is in [0, context->num_comp_vectors). */
CF_TEST_IMPL(cq, bad_comp_vector)
{
	CF_CHECK(cf.ctx->num_comp_vectors >= 1, "num_comp_vectors %d",
		 cf.ctx->num_comp_vectors);
	expect_create_fails(4, cf.ctx->num_comp_vectors,
			    "ibv_create_cq(comp_vector num_comp_vectors)");
	expect_create_fails(4, -1, "ibv_create_cq(comp_vector -1)");
}

/* manual 3.6.10: polling an empty CQ returns 0. */
CF_TEST_IMPL(cq, poll_empty)
{
	struct ibv_wc wc[4];

	CF_CHECK(ibv_poll_cq(cf.cq, 4, wc) == 0, "poll on an empty CQ != 0");
}

/* Fill the CQ of a fresh QP with n flush completions (IBA 10.3.1). */
static struct ibv_qp *make_flushes(struct ibv_cq *cq, struct ibv_mr *mr,
				   int n)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cq;
	ia.cap.max_send_wr = 1;
	ia.cap.max_recv_wr = n;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = cf_create_qp(&cf, IBV_QPT_RC, &ia);
	if (!qp)
		return NULL;
	if (cf_qp_to_state(&cf, qp, IBV_QPS_INIT) ||
	    cf_post_recvs(qp, mr, n, 1))
		goto err;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto err;
	return qp;
err:
	ibv_destroy_qp(qp);
	return NULL;
}

/*
 * IBA 11.2.7.3 Resize CQ: the CQ may grow or shrink, but never below the
 * entries it holds and never beyond the HCA maximum.
 */
CF_TEST_IMPL(cq, resize)
{
	struct ibv_wc wc[16];
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	int ret, got;

	cq = ibv_create_cq(cf.ctx, 32, NULL, NULL, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
	ret = cf_rc(ibv_resize_cq(cq, 64));
	if (ret == EOPNOTSUPP || ret == ENOSYS) {
		ibv_destroy_cq(cq);
		SKIP("device does not implement ibv_resize_cq (%s)",
		     cf_errname(ret));
	}
	CF_EXPECT_OK(ret, "ibv_resize_cq(32 -> 64)");
	CF_CHECK(cq->cqe >= 64, "cq->cqe %d after resize to 64", cq->cqe);
	CF_EXPECT_OK(cf_rc(ibv_resize_cq(cq, 16)), "ibv_resize_cq(64 -> 16)");
	CF_CHECK(cq->cqe >= 16, "cq->cqe %d after resize to 16", cq->cqe);
	if (cf.dev->max_cqe < INT32_MAX)
		CF_EXPECT_ERR(cf_rc(ibv_resize_cq(cq, cf.dev->max_cqe + 1)),
			      EINVAL, "ibv_resize_cq(max_cqe + 1)");
	CF_EXPECT_ERR(cf_rc(ibv_resize_cq(cq, 0)), EINVAL,
		      "ibv_resize_cq(0)");

	/* With 8 completions outstanding: no shrink below 8, and a legal
	 * resize keeps every entry. */
	mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mr);
	qp = make_flushes(cq, mr, 8);
	CF_CHECK(qp != NULL, "could not produce flush completions");
	if (qp) {
		/* Flushing may be asynchronous: give it time to land. */
		usleep(200000);
		CF_EXPECT_ERR(cf_rc(ibv_resize_cq(cq, 4)), EINVAL,
			      "ibv_resize_cq below outstanding entries");
		CF_EXPECT_OK(cf_rc(ibv_resize_cq(cq, 24)),
			     "ibv_resize_cq(24) with 8 outstanding");
		got = cf_poll_cq_wait(cq, wc, 16, 1000);
		CF_CHECK(got == 8, "%d completions after resize, expected 8",
			 got);
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
	cf_free_mr(mr);
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
}

/* manual 3.3.9: a CQ still associated with a QP is not destroyed. */
CF_TEST_IMPL(cq, destroy_busy)
{
	struct ibv_cq *cq = ibv_create_cq(cf.ctx, 8, NULL, NULL, 0);
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int ret;

	CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = cq;
	ia.recv_cq = cf.cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = cf_create_qp(&cf, IBV_QPT_RC, &ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	ret = cf_rc(ibv_destroy_cq(cq));
	CF_EXPECT_ERR(ret, EBUSY, "ibv_destroy_cq while a QP uses it");
	if (ret == 0) {
		ibv_destroy_qp(qp);
		return;
	}
	CF_CHECK(ibv_poll_cq(cq, 1, &wc) == 0, "CQ unusable after EBUSY");
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq after QP");
}

/* ibv_create_cq_ex(3): standard wc_flags are supported on every device. */
CF_TEST_IMPL(cq, create_cq_ex)
{
	struct ibv_cq_init_attr_ex a;
	struct ibv_poll_cq_attr pa = { 0 };
	struct ibv_cq_ex *cq;
	int ret;

	memset(&a, 0, sizeof(a));
	a.cqe = 16;
	a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
		     IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
		     IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
		     IBV_WC_EX_WITH_DLID_PATH_BITS;
	errno = 0;
	cq = ibv_create_cq_ex(cf.ctx, &a);
	if (!cq && (errno == EOPNOTSUPP || errno == ENOSYS))
		SKIP("device has no ibv_create_cq_ex (%s)", cf_errname(errno));
	CF_CHECK(cq != NULL, "ibv_create_cq_ex(standard flags): %s",
		 cf_errname(errno));
	if (!cq)
		return;
	CF_CHECK(ibv_cq_ex_to_cq(cq)->cqe >= 16, "cqe %d < 16",
		 ibv_cq_ex_to_cq(cq)->cqe);
	/* An empty CQ: ibv_start_poll returns ENOENT, no end_poll. */
	ret = ibv_start_poll(cq, &pa);
	CF_EXPECT_ERR(ret, ENOENT, "ibv_start_poll on an empty CQ");
	if (ret == 0)
		ibv_end_poll(cq);
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(ibv_cq_ex_to_cq(cq))),
		     "ibv_destroy_cq(cq_ex)");

	/* Unknown wc_flags bits and comp_mask bits are refused. */
	a.wc_flags = 1ull << 40;
	errno = 0;
	cq = ibv_create_cq_ex(cf.ctx, &a);
	CF_CHECK(!cq && (errno == EINVAL || errno == EOPNOTSUPP),
		 "ibv_create_cq_ex(unknown wc_flags): expected NULL with "
		 "EINVAL/EOPNOTSUPP, got %s/%s", cq ? "CQ" : "NULL",
		 cf_errname(errno));
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	a.wc_flags = IBV_WC_EX_WITH_BYTE_LEN;
	a.comp_mask = 1u << 30;
	errno = 0;
	cq = ibv_create_cq_ex(cf.ctx, &a);
	/* ibv_create_cq_ex(3) promises NULL, no errno: the errno is the
	 * device's (rxe's provider sets none). */
	CF_CHECK(!cq, "ibv_create_cq_ex(unknown comp_mask): expected NULL, "
		 "got a CQ");
	if (!cq && errno != EINVAL && errno != EOPNOTSUPP)
		CF_CHOICE("an unknown comp_mask is refused %s %s",
			  errno ? "with errno" : "without an errno",
			  errno ? cf_errname(errno) : "");
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}
