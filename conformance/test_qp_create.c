// SPDX-License-Identifier: MIT
/*
 * QP creation: manual 3.4.8 (ibv_create_qp) and 3.6.1 (ibv_query_qp);
 * IBA 11.2.4.1 (Create QP) and 3.5.5 (QP numbers).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests.h"

static const enum ibv_qp_type types[] = { IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD };

static void init_attr(struct ibv_qp_init_attr *ia)
{
	memset(ia, 0, sizeof(*ia));
	ia->send_cq = cf.cq;
	ia->recv_cq = cf.cq;
	ia->cap.max_send_wr = 4;
	ia->cap.max_recv_wr = 4;
	ia->cap.max_send_sge = 1;
	ia->cap.max_recv_sge = 1;
}

/* Create with *ia; expect success (want 0) or NULL with errno want. */
static void expect_create(enum ibv_qp_type t, struct ibv_qp_init_attr *ia,
			  int want, const char *what)
{
	struct ibv_qp *qp;

	errno = 0;
	qp = cf_create_qp(&cf, t, ia);
	if (want == 0)
		CF_CHECK(qp != NULL, "%s %s: expected success, got %s",
			 cf_qpt_name(t), what, cf_errname(errno));
	else
		CF_CHECK(!qp && errno == want,
			 "%s %s: expected NULL/%s, got %s/%s", cf_qpt_name(t),
			 what, cf_errname(want), qp ? "QP" : "NULL",
			 cf_errname(errno));
	if (qp)
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
}

/* IBA 11.2.4.1: requested WQ depth and SGEs are bounded by the HCA's. */
CF_TEST_IMPL(qp_create, limits)
{
	struct ibv_qp_init_attr ia;
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(types); i++) {
		enum ibv_qp_type t = types[i];

		init_attr(&ia);
		ia.cap.max_send_wr = cf.dev->max_qp_wr;
		expect_create(t, &ia, 0, "max_send_wr = max_qp_wr");
		init_attr(&ia);
		ia.cap.max_recv_wr = cf.dev->max_qp_wr;
		expect_create(t, &ia, 0, "max_recv_wr = max_qp_wr");
		init_attr(&ia);
		ia.cap.max_send_wr = cf.dev->max_qp_wr + 1;
		expect_create(t, &ia, EINVAL, "max_send_wr = max_qp_wr + 1");
		init_attr(&ia);
		ia.cap.max_recv_wr = cf.dev->max_qp_wr + 1;
		expect_create(t, &ia, EINVAL, "max_recv_wr = max_qp_wr + 1");
		init_attr(&ia);
		ia.cap.max_send_sge = cf.dev->max_sge;
		ia.cap.max_recv_sge = cf.dev->max_sge;
		expect_create(t, &ia, 0, "max_send/recv_sge = max_sge");
		init_attr(&ia);
		ia.cap.max_send_sge = cf.dev->max_sge + 1;
		expect_create(t, &ia, EINVAL, "max_send_sge = max_sge + 1");
		init_attr(&ia);
		ia.cap.max_recv_sge = cf.dev->max_sge + 1;
		expect_create(t, &ia, EINVAL, "max_recv_sge = max_sge + 1");
	}
}

/*
 * IBA 11.2.4.1: the returned capabilities are at least those requested,
 * inline data included; an inline size the HCA cannot hold is refused.
 */
CF_TEST_IMPL(qp_create, inline)
{
	static const uint32_t probe[] = { 512, 256, 128, 64, 32 };
	struct ibv_qp_init_attr ia;
	uint32_t best = 0;
	struct ibv_qp *qp;
	size_t i, t;

	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		best = 0;
		for (i = 0; i < CF_ARRAY_SIZE(probe) && !best; i++) {
			init_attr(&ia);
			ia.cap.max_inline_data = probe[i];
			qp = cf_create_qp(&cf, types[t], &ia);
			if (!qp)
				continue;
			best = probe[i];
			CF_CHECK(ia.cap.max_inline_data >= probe[i],
				 "%s: max_inline_data %u < requested %u",
				 cf_qpt_name(types[t]), ia.cap.max_inline_data,
				 probe[i]);
			CF_CHECK(ia.cap.max_send_wr >= 4 &&
				 ia.cap.max_recv_wr >= 4 &&
				 ia.cap.max_send_sge >= 1 &&
				 ia.cap.max_recv_sge >= 1,
				 "%s: returned caps below requested",
				 cf_qpt_name(types[t]));
			ibv_destroy_qp(qp);
		}
		if (!best) {
			cf_skip("%s: device supports no inline data",
				cf_qpt_name(types[t]));
			continue;
		}
		init_attr(&ia);
		ia.cap.max_inline_data = best + 65536;
		expect_create(types[t], &ia, EINVAL,
			      "max_inline_data 64 KiB beyond the supported");
	}
}

/* What null_cq_child saw, as its exit status. */
#define NULL_CQ_BAD_ERRNO 1	/* refused with another errno than EINVAL */
#define NULL_CQ_ACCEPTED 2	/* a QP was created */

/* In a child with a context of its own: each type with a missing CQ. */
static int null_cq_child(void)
{
	struct ibv_qp_init_attr ia;
	struct cf_ctx c;
	struct ibv_qp *qp;
	int bad = 0, which;
	size_t t;

	memset(&c, 0, sizeof(c));
	if (cf_open(&c))
		return 4; /* no device: a failure */
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		for (which = 0; which < 2; which++) {
			memset(&ia, 0, sizeof(ia));
			ia.send_cq = which ? c.cq : NULL;
			ia.recv_cq = which ? NULL : c.cq;
			ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
			ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
			ia.qp_type = types[t];
			errno = 0;
			qp = ibv_create_qp(c.pd, &ia);
			if (!qp && errno != EINVAL) {
				fprintf(stderr, "  %s %s NULL: expected a QP "
					"or EINVAL, got %s\n",
					cf_qpt_name(types[t]),
					which ? "recv_cq" : "send_cq",
					cf_errname(errno));
				bad |= NULL_CQ_BAD_ERRNO;
			}
			if (qp) {
				bad |= NULL_CQ_ACCEPTED;
				ibv_destroy_qp(qp);
			}
		}
	}
	cf_close(&c);
	return bad;
}

/*
 * A QP with a NULL send or receive CQ.  IBA 11.2.4.1 lists an invalid CQ
 * handle among Create QP's errors, but ibv_create_qp(3) makes both CQs
 * part of the call and says nothing of NULL, and the Linux ABI passes a
 * NULL CQ as handle 0, which names the context's first CQ on every kernel
 * device.  So what happens is the device's: refused with EINVAL, created,
 * or a crash of its provider (rxe's).  Required only: a refusal comes with
 * EINVAL.  Tried in a child process, so a provider that crashes does not
 * end the run.  (ibemu itself never crashes on invalid input:
 * run-conformance.sh fails its run on a crash reported here.)
 */
CF_TEST_IMPL(qp_create, null_cq)
{
	int status = 0, waited = 0;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0)
		_exit(null_cq_child());
	while (waitpid(pid, &status, WNOHANG) == 0 && waited < 10000) {
		usleep(10000);
		waited += 10;
	}
	if (waited >= 10000) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		CF_CHECK(0, "ibv_create_qp with a NULL CQ did not return in "
			 "10 s");
		return;
	}
	if (WIFSIGNALED(status) &&
	    (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS ||
	     WTERMSIG(status) == SIGABRT)) {
		CF_CHOICE("a QP with a NULL CQ crashes the process (signal %d)",
			  WTERMSIG(status));
		return;
	}
	CF_CHECK(WIFEXITED(status) &&
		 !(WEXITSTATUS(status) & ~NULL_CQ_ACCEPTED),
		 "NULL send_cq/recv_cq: child exit %d (expected a QP, or NULL "
		 "with EINVAL)", WEXITSTATUS(status));
	if (WEXITSTATUS(status) == NULL_CQ_ACCEPTED)
		CF_CHOICE("a QP with a NULL CQ is created (the Linux ABI's "
			  "handle 0)");
	else if (WEXITSTATUS(status) == 0)
		CF_CHOICE("a QP with a NULL CQ is refused (EINVAL)");
}

CF_TEST_IMPL(qp_create, bad_type)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp *qp;

	init_attr(&ia);
	errno = 0;
	qp = cf_create_qp(&cf, (enum ibv_qp_type)0x7e, &ia);
	CF_CHECK(!qp && (errno == EINVAL || errno == EOPNOTSUPP),
		 "qp_type 0x7e: expected NULL with EINVAL/EOPNOTSUPP, got "
		 "%s/%s", qp ? "QP" : "NULL", cf_errname(errno));
	if (qp)
		ibv_destroy_qp(qp);
}

/*
 * IBA 10.3.1: a new QP is in RESET.  IBA 3.5.5: QP numbers are 24 bits,
 * unique on the HCA, and QP0/QP1 are reserved for the SMI and GSI.
 */
CF_TEST_IMPL(qp_create, initial_state_qpn)
{
	struct ibv_qp *qps[12];
	size_t i, j;

	for (i = 0; i < CF_ARRAY_SIZE(qps); i++) {
		qps[i] = cf_create_qp(&cf, types[i % CF_ARRAY_SIZE(types)],
				      NULL);
		CF_CHECK(qps[i] != NULL, "create #%zu: %s", i,
			 cf_errname(errno));
		if (!qps[i])
			continue;
		CF_CHECK(cf_qp_state(qps[i]) == IBV_QPS_RESET,
			 "new QP in state %s, expected RESET",
			 cf_state_name(cf_qp_state(qps[i])));
		CF_CHECK(qps[i]->state == IBV_QPS_RESET,
			 "qp->state %d on a new QP", qps[i]->state);
		CF_CHECK(qps[i]->qp_num > 1 && qps[i]->qp_num < (1u << 24),
			 "qp_num 0x%x (0 and 1 are reserved, 24 bits)",
			 qps[i]->qp_num);
		for (j = 0; j < i; j++)
			if (qps[j])
				CF_CHECK(qps[j]->qp_num != qps[i]->qp_num,
					 "qp_num 0x%x given twice",
					 qps[i]->qp_num);
	}
	for (i = 0; i < CF_ARRAY_SIZE(qps); i++)
		if (qps[i])
			CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qps[i])),
				     "ibv_destroy_qp");
}

/* manual 3.6.1: ibv_query_qp returns the attributes given at creation. */
CF_TEST_IMPL(qp_create, query_init_attr)
{
	struct ibv_qp_init_attr ia, qi;
	struct ibv_qp_attr qa;
	struct ibv_qp *qp;
	size_t t;
	int sig;

	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		for (sig = 0; sig < 2; sig++) {
			init_attr(&ia);
			ia.cap.max_send_wr = 7;
			ia.cap.max_recv_wr = 5;
			ia.sq_sig_all = sig;
			ia.qp_context = &ia;
			qp = cf_create_qp(&cf, types[t], &ia);
			CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
			CF_CHECK(qp->qp_context == &ia && qp->qp_type ==
				 types[t] && qp->pd == cf.pd,
				 "ibv_qp fields not set at creation");
			memset(&qi, 0, sizeof(qi));
			memset(&qa, 0, sizeof(qa));
			CF_EXPECT_OK(cf_rc(ibv_query_qp(qp, &qa, IBV_QP_STATE |
							IBV_QP_CAP, &qi)),
				     "ibv_query_qp");
			CF_CHECK(qi.qp_type == types[t] &&
				 qi.send_cq == cf.cq && qi.recv_cq == cf.cq &&
				 qi.srq == NULL,
				 "%s: init_attr type/CQs/SRQ not returned",
				 cf_qpt_name(types[t]));
			CF_CHECK(qi.sq_sig_all == sig,
				 "%s: sq_sig_all %d, created with %d",
				 cf_qpt_name(types[t]), qi.sq_sig_all, sig);
			CF_CHECK(qi.cap.max_send_wr == ia.cap.max_send_wr &&
				 qi.cap.max_recv_wr == ia.cap.max_recv_wr &&
				 qi.cap.max_send_sge == ia.cap.max_send_sge &&
				 qi.cap.max_recv_sge == ia.cap.max_recv_sge,
				 "%s: queried caps %u/%u/%u/%u differ from "
				 "created %u/%u/%u/%u", cf_qpt_name(types[t]),
				 qi.cap.max_send_wr, qi.cap.max_recv_wr,
				 qi.cap.max_send_sge, qi.cap.max_recv_sge,
				 ia.cap.max_send_wr, ia.cap.max_recv_wr,
				 ia.cap.max_send_sge, ia.cap.max_recv_sge);
			CF_CHECK(qa.cap.max_send_wr == ia.cap.max_send_wr &&
				 qa.cap.max_recv_wr == ia.cap.max_recv_wr,
				 "%s: attr.cap differs from creation",
				 cf_qpt_name(types[t]));
			CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)),
				     "ibv_destroy_qp");
		}
	}
}

/*
 * IBA 10.2.9 / manual 3.4.8: with an SRQ the QP takes receives from it
 * and max_recv_wr/max_recv_sge are ignored ("ignored if the QP is
 * associated with an SRQ", ibv_create_qp(3)).
 */
CF_TEST_IMPL(qp_create, srq_attach)
{
	struct ibv_srq_init_attr sa;
	struct ibv_qp_init_attr ia, qi;
	struct ibv_qp_attr qa;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	size_t t;

	if (cf.dev->max_srq <= 0)
		SKIP("device reports max_srq 0 (no SRQ support)");
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 8;
	sa.attr.max_sge = 1;
	srq = ibv_create_srq(cf.pd, &sa);
	CU_ASSERT_PTR_NOT_NULL_FATAL(srq);
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		init_attr(&ia);
		ia.srq = srq;
		ia.cap.max_recv_wr = cf.dev->max_qp_wr + 1;
		ia.cap.max_recv_sge = cf.dev->max_sge + 1;
		qp = cf_create_qp(&cf, types[t], &ia);
		CF_CHECK(qp != NULL, "%s on an SRQ with out-of-range recv "
			 "caps (ignored): %s", cf_qpt_name(types[t]),
			 cf_errname(errno));
		if (!qp)
			continue;
		CF_CHECK(qp->srq == srq, "qp->srq not set");
		memset(&qi, 0, sizeof(qi));
		CF_EXPECT_OK(cf_rc(ibv_query_qp(qp, &qa, IBV_QP_CAP, &qi)),
			     "ibv_query_qp");
		CF_CHECK(qi.srq == srq, "init_attr.srq %p, expected %p",
			 (void *)qi.srq, (void *)srq);
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	}
	CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
}

CF_TEST_IMPL(qp_create, destroy_any_state)
{
	static const enum ibv_qp_state st[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
		IBV_QPS_ERR,
	};
	size_t t, i;

	/* IBA 11.2.4.4 Destroy QP is valid in any state. */
	for (t = 0; t < CF_ARRAY_SIZE(types); t++) {
		for (i = 0; i < CF_ARRAY_SIZE(st); i++) {
			struct ibv_qp *qp = cf_create_qp(&cf, types[t], NULL);

			CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
			CF_EXPECT_OK(cf_qp_to_state(&cf, qp, st[i]),
				     "bring-up");
			CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)),
				     "ibv_destroy_qp");
		}
	}
}
