// SPDX-License-Identifier: MIT
/*
 * Thread domains and parent domains (ibv_alloc_td(3),
 * ibv_alloc_parent_domain(3)): a parent domain stands for its PD wherever
 * a PD is accepted (ibv_reg_mr, ibv_create_qp, ibv_create_srq,
 * ibv_create_ah, ibv_create_cq_ex's parent_domain); a TD, a PD or a
 * parent domain in use cannot be deallocated (EBUSY); the allocators,
 * when the device calls them, are given the parent domain and its
 * pd_context, and every buffer they gave is freed by the time the
 * objects are destroyed.  Traffic on a parent domain: rc_ex/parent_domain.
 * A device that promises to call the allocators for its queue buffers is
 * held to it with CF_EXPECT_PD_ALLOCATORS=1 (run-conformance.sh sets it
 * for ibemu).
 */
#include <stdlib.h>
#include <string.h>

#include "tests.h"

/* A TD, or a SKIP when the device has none. */
#define TD_OR_SKIP(td)							\
	do {								\
		struct ibv_td_init_attr ta_ = { .comp_mask = 0 };	\
									\
		(td) = ibv_alloc_td(cf.ctx, &ta_);			\
		if (!(td) && (errno == EOPNOTSUPP || errno == ENOSYS))	\
			SKIP("ibv_alloc_td: %s", cf_errname(errno));	\
		CF_CHECK((td) != NULL, "ibv_alloc_td: %s",		\
			 cf_errname(errno));				\
		if (!(td))						\
			return;						\
	} while (0)

/* What the allocators were asked, for the checks. */
#define TD_MAX_BUFS 64
struct td_allocs {
	struct ibv_pd *pdom;
	unsigned int allocs, frees, wrong;
	void *live[TD_MAX_BUFS];
};

static void *td_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
		      size_t alignment, uint64_t resource_type)
{
	struct td_allocs *a = pd_context;
	void *buf = NULL;
	unsigned int i;

	(void)resource_type;
	if (pd != a->pdom)
		a->wrong++;
	if (alignment < sizeof(void *))
		alignment = sizeof(void *);
	if (posix_memalign(&buf, alignment, size ? size : 1))
		return NULL;
	for (i = 0; i < TD_MAX_BUFS && a->live[i]; i++)
		;
	if (i == TD_MAX_BUFS) {
		free(buf);
		return IBV_ALLOCATOR_USE_DEFAULT;
	}
	a->live[i] = buf;
	a->allocs++;
	return buf;
}

static void td_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		    uint64_t resource_type)
{
	struct td_allocs *a = pd_context;
	unsigned int i;

	(void)resource_type;
	if (pd != a->pdom)
		a->wrong++;
	for (i = 0; i < TD_MAX_BUFS && a->live[i] != ptr; i++)
		;
	if (i == TD_MAX_BUFS) {
		a->wrong++;	/* not one of ours: leak it, do not free */
		return;
	}
	a->live[i] = NULL;
	a->frees++;
	free(ptr);
}

/* A parent domain of cf.pd with td (may be NULL) and, when a is given,
 * its allocators; NULL with a SKIP printed when the device has none. */
static struct ibv_pd *pdom_alloc(struct ibv_td *td, struct td_allocs *a)
{
	struct ibv_parent_domain_init_attr pa = {
		.pd = cf.pd,
		.td = td,
	};
	struct ibv_pd *pdom;

	if (a) {
		pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			       IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
		pa.alloc = td_alloc;
		pa.free = td_free;
		pa.pd_context = a;
	}
	pdom = ibv_alloc_parent_domain(cf.ctx, &pa);
	if (!pdom && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_skip("ibv_alloc_parent_domain: %s", cf_errname(errno));
		return NULL;
	}
	CF_CHECK(pdom != NULL, "ibv_alloc_parent_domain: %s",
		 cf_errname(errno));
	if (a)
		a->pdom = pdom;
	return pdom;
}

CF_TEST_IMPL(td, alloc_dealloc)
{
	struct ibv_td *td;

	TD_OR_SKIP(td);
	CU_ASSERT_PTR_EQUAL(td->context, cf.ctx);
	CF_EXPECT_OK(cf_rc(ibv_dealloc_td(td)), "ibv_dealloc_td");
}

/* A TD and a PD in use by a parent domain, and the parent domain in use
 * by an MR: EBUSY until their users are gone. */
CF_TEST_IMPL(td, dealloc_busy)
{
	struct ibv_pd *pd, *pdom;
	struct ibv_td *td;
	struct ibv_mr *mr;
	struct ibv_parent_domain_init_attr pa = { .comp_mask = 0 };
	char buf[64];

	TD_OR_SKIP(td);
	pd = ibv_alloc_pd(cf.ctx);
	CU_ASSERT_PTR_NOT_NULL_FATAL(pd);
	pa.pd = pd;
	pa.td = td;
	pdom = ibv_alloc_parent_domain(cf.ctx, &pa);
	if (!pdom) {
		ibv_dealloc_pd(pd);
		ibv_dealloc_td(td);
		if (errno == EOPNOTSUPP || errno == ENOSYS)
			SKIP("ibv_alloc_parent_domain: %s", cf_errname(errno));
		CF_CHECK(0, "ibv_alloc_parent_domain: %s", cf_errname(errno));
		return;
	}
	CU_ASSERT_PTR_EQUAL(pdom->context, cf.ctx);
	CF_EXPECT_ERR(cf_rc(ibv_dealloc_td(td)), EBUSY,
		      "ibv_dealloc_td used by a parent domain");
	CF_EXPECT_ERR(cf_rc(ibv_dealloc_pd(pd)), EBUSY,
		      "ibv_dealloc_pd used by a parent domain");
	mr = ibv_reg_mr(pdom, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE);
	CF_CHECK(mr != NULL, "ibv_reg_mr on a parent domain: %s",
		 cf_errname(errno));
	if (mr) {
		CU_ASSERT_PTR_EQUAL(mr->pd, pdom);
		CF_EXPECT_ERR(cf_rc(ibv_dealloc_pd(pdom)), EBUSY,
			      "ibv_dealloc_pd of a parent domain with an MR");
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
	}
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pdom)), "dealloc parent domain");
	CF_EXPECT_OK(cf_rc(ibv_dealloc_td(td)), "ibv_dealloc_td after");
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pd)), "ibv_dealloc_pd after");
}

/*
 * Every object that takes a PD, made on a parent domain with allocators:
 * a CQ (ibv_create_cq_ex with IBV_CQ_INIT_ATTR_MASK_PD), an SRQ, a QP
 * using both, an AH.  The parent domain is busy until all are gone; the
 * allocators saw our parent domain only and got every buffer back.
 */
CF_TEST_IMPL(td, parent_domain_objects)
{
	struct td_allocs a;
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 16,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_PD,
	};
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 4, .max_sge = 1 } };
	struct ibv_qp_init_attr qa;
	struct ibv_ah_attr aa;
	struct ibv_cq_ex *cq;
	struct ibv_srq *srq = NULL;
	struct ibv_qp *qp;
	struct ibv_ah *ah;
	struct ibv_pd *pdom;
	struct ibv_td *td;

	memset(&a, 0, sizeof(a));
	TD_OR_SKIP(td);
	pdom = pdom_alloc(td, &a);
	if (!pdom) {
		ibv_dealloc_td(td);
		return;
	}
	ca.parent_domain = pdom;
	cq = ibv_create_cq_ex(cf.ctx, &ca);
	CF_CHECK(cq != NULL, "ibv_create_cq_ex with a parent domain: %s",
		 cf_errname(errno));
	if (cf.dev->max_srq > 0) {
		srq = ibv_create_srq(pdom, &sa);
		CF_CHECK(srq != NULL, "ibv_create_srq on a parent domain: %s",
			 cf_errname(errno));
	}
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = cq ? ibv_cq_ex_to_cq(cq) : cf.cq;
	qa.recv_cq = qa.send_cq;
	qa.srq = srq;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	qp = ibv_create_qp(pdom, &qa);
	CF_CHECK(qp != NULL, "ibv_create_qp on a parent domain: %s",
		 cf_errname(errno));
	cf_fill_ah(&cf, &aa);
	ah = ibv_create_ah(pdom, &aa);
	CF_CHECK(ah != NULL, "ibv_create_ah on a parent domain: %s",
		 cf_errname(errno));
	if (qp)
		CU_ASSERT_PTR_EQUAL(qp->pd, pdom);
	CF_EXPECT_ERR(cf_rc(ibv_dealloc_pd(pdom)), EBUSY,
		      "ibv_dealloc_pd of a parent domain with objects");
	if (ah)
		CF_EXPECT_OK(cf_rc(ibv_destroy_ah(ah)), "ibv_destroy_ah");
	if (qp)
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	if (srq)
		CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
	if (cq) {
		CF_EXPECT_ERR(cf_rc(ibv_dealloc_pd(pdom)), EBUSY,
			      "ibv_dealloc_pd of a parent domain with a CQ");
		CF_EXPECT_OK(cf_rc(ibv_destroy_cq(ibv_cq_ex_to_cq(cq))),
			     "ibv_destroy_cq");
	}
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pdom)), "dealloc parent domain");
	CF_EXPECT_OK(cf_rc(ibv_dealloc_td(td)), "ibv_dealloc_td");
	CF_CHECK(!a.wrong, "the allocators were called %u times with another "
		 "PD, or freed a buffer they did not give", a.wrong);
	CF_CHECK(a.allocs == a.frees, "%u buffers allocated, %u freed",
		 a.allocs, a.frees);
	if (getenv("CF_EXPECT_PD_ALLOCATORS"))
		CF_CHECK(a.allocs > 0, "CF_EXPECT_PD_ALLOCATORS: the "
			 "allocators were never called");
}

/* A parent domain of a parent domain, or of another context's PD, or
 * allocators without their pair: EINVAL (ibv_alloc_parent_domain(3)). */
CF_TEST_IMPL(td, parent_domain_invalid)
{
	struct ibv_parent_domain_init_attr pa = { .pd = cf.pd };
	struct ibv_pd *pdom, *bad;

	pdom = pdom_alloc(NULL, NULL);
	if (!pdom)
		return;
	pa.pd = pdom;
	bad = ibv_alloc_parent_domain(cf.ctx, &pa);
	CF_CHECK(!bad && errno == EINVAL, "a parent domain of a parent "
		 "domain: %s", bad ? "allocated" : cf_errname(errno));
	if (bad)
		ibv_dealloc_pd(bad);
	pa.pd = cf.pd;
	pa.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS;
	pa.alloc = td_alloc;
	pa.free = NULL;
	bad = ibv_alloc_parent_domain(cf.ctx, &pa);
	CF_CHECK(!bad && errno == EINVAL, "alloc without free: %s",
		 bad ? "allocated" : cf_errname(errno));
	if (bad)
		ibv_dealloc_pd(bad);
	CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pdom)), "dealloc parent domain");
}
