// SPDX-License-Identifier: MIT
/*
 * Protection domains: manual 3.4.1/3.4.2 (ibv_alloc_pd, ibv_dealloc_pd),
 * IBA 10.2.3 and 11.2.2 (a PD cannot be deallocated while resources are
 * still associated with it).
 */
#include <stdlib.h>
#include <string.h>

#include "tests.h"

CF_TEST_IMPL(pd, alloc_dealloc)
{
	struct ibv_pd *pd;

	pd = ibv_alloc_pd(cf.ctx);
	CF_CHECK(pd != NULL, "ibv_alloc_pd: %s", cf_errname(errno));
	if (!pd)
		return;
	CU_ASSERT_PTR_EQUAL(pd->context, cf.ctx);
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pd)), "ibv_dealloc_pd");
}

CF_TEST_IMPL(pd, many)
{
	/* The fixture holds one PD; leave one spare for other users. */
	int n = (cf.dev->max_pd < 256 ? cf.dev->max_pd : 256) - 2, i, got = 0;
	struct ibv_pd **pds;

	if (n < 1)
		SKIP("max_pd %d leaves no room for more PDs", cf.dev->max_pd);
	pds = calloc(n, sizeof(*pds));
	CU_ASSERT_PTR_NOT_NULL_FATAL(pds);
	for (i = 0; i < n; i++) {
		pds[i] = ibv_alloc_pd(cf.ctx);
		if (!pds[i])
			break;
		got++;
	}
	CF_CHECK(got == n, "allocated %d of %d PDs (max_pd %d): %s", got, n,
		 cf.dev->max_pd, cf_errname(errno));
	for (i = 0; i < got; i++)
		CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pds[i])), "ibv_dealloc_pd");
	free(pds);
}

/* Check that pd is still fully usable after a refused dealloc. */
static void check_pd_usable(struct ibv_pd *pd)
{
	char buf[64];
	struct ibv_mr *mr = ibv_reg_mr(pd, buf, sizeof(buf),
				       IBV_ACCESS_LOCAL_WRITE);

	CF_CHECK(mr != NULL, "PD unusable after refused dealloc: %s",
		 cf_errname(errno));
	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
}

enum busy_kind { BUSY_MR, BUSY_QP, BUSY_AH, BUSY_SRQ };

static void pd_busy(enum busy_kind kind)
{
	struct ibv_pd *pd = ibv_alloc_pd(cf.ctx);
	struct ibv_qp_init_attr qa;
	struct ibv_srq_init_attr sa;
	struct ibv_ah_attr aa;
	struct ibv_mr *mr = NULL;
	struct ibv_qp *qp = NULL;
	struct ibv_ah *ah = NULL;
	struct ibv_srq *srq = NULL;
	char buf[64];
	int ret;

	CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
	switch (kind) {
	case BUSY_MR:
		mr = ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
		CU_ASSERT_PTR_NOT_NULL_FATAL(mr);
		break;
	case BUSY_QP:
		memset(&qa, 0, sizeof(qa));
		qa.send_cq = cf.cq;
		qa.recv_cq = cf.cq;
		qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
		qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
		qa.qp_type = IBV_QPT_RC;
		qp = ibv_create_qp(pd, &qa);
		CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
		break;
	case BUSY_AH:
		cf_fill_ah(&cf, &aa);
		ah = ibv_create_ah(pd, &aa);
		CU_ASSERT_PTR_NOT_NULL_FATAL(ah);
		break;
	case BUSY_SRQ:
		memset(&sa, 0, sizeof(sa));
		sa.attr.max_wr = 4;
		sa.attr.max_sge = 1;
		srq = ibv_create_srq(pd, &sa);
		CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
		break;
	}

	ret = cf_rc(ibv_dealloc_pd(pd));
	CF_EXPECT_ERR(ret, EBUSY, "ibv_dealloc_pd with a live object");
	if (ret == 0)
		return;	/* pd is gone: nothing more is safe */
	check_pd_usable(pd);

	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
	if (qp)
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	if (ah)
		CF_EXPECT_OK(cf_rc(ibv_destroy_ah(ah)), "ibv_destroy_ah");
	if (srq)
		CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pd)), "ibv_dealloc_pd after users");
}

CF_TEST_IMPL(pd, dealloc_busy_mr)
{
	pd_busy(BUSY_MR);
}

CF_TEST_IMPL(pd, dealloc_busy_qp)
{
	pd_busy(BUSY_QP);
}

CF_TEST_IMPL(pd, dealloc_busy_ah)
{
	pd_busy(BUSY_AH);
}

CF_TEST_IMPL(pd, dealloc_busy_srq)
{
	if (cf.dev->max_srq <= 0)
		SKIP("device reports max_srq 0 (no SRQ support)");
	pd_busy(BUSY_SRQ);
}
