// SPDX-License-Identifier: MIT
/*
 * Asynchronous events of RC traffic between two processes (peer.h):
 * manual 6.1 (IBV events, read from context->async_fd with
 * ibv_get_async_event / ibv_ack_async_event), IBA 11.6.3 (affiliated
 * asynchronous events).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000

static int post_send(struct cf_ep *ep, enum ibv_wr_opcode op, uint32_t len,
		     uint64_t wr_id)
{
	return cf_ep_post1(ep, op, 0, len, 0, wr_id, IBV_SEND_SIGNALED);
}

/*
 * Manual 6.1.1, IBA 11.6.3.3 (CQ overrun): more completions than the CQ
 * holds raise IBV_EVENT_CQ_ERR for that CQ.  RDMA WRITEs, so that the
 * peer's CQ (as small) gets nothing.
 */
CF_BODY_IMPL(rc_events, cq_overflow)
{
	struct ibv_async_event ev;
	char seen[200];
	int i, n = ep->cq->cqe + 2, ret;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 2 * WAIT_MS);
	if ((uint32_t)n > ep->init.cap.max_send_wr) {
		cf_ep_skip(ep, "the CQ of 2 got %d entries, more than the "
			   "send queue (%u)", ep->cq->cqe,
			   ep->init.cap.max_send_wr);
		return cf_ep_sync(ep, WAIT_MS);
	}
	for (i = 0; i < n; i++)
		if (post_send(ep, IBV_WR_RDMA_WRITE, 8, (uint64_t)i))
			break;
	ret = cf_ep_wait_async(ep, IBV_EVENT_CQ_ERR, WAIT_MS, &ev, seen,
			       sizeof(seen));
	if (ret) {
		/* Say what the CQ holds, to tell a lost event from lost
		 * completions. */
		struct ibv_wc wc[8];
		int got = cf_poll_cq_wait(ep->cq, wc, 8, 1000);

		EP_CHECK(ep, 0, "%d completions on a CQ of %d entries: no "
			 "IBV_EVENT_CQ_ERR (other events: %s; polled for 1 s: "
			 "%d, first %s)", n, ep->cq->cqe,
			 seen[0] ? seen : "none", got,
			 got > 0 ? ibv_wc_status_str(wc[0].status) : "-");
	} else {
		EP_CHECK(ep, ev.element.cq == ep->cq,
			 "IBV_EVENT_CQ_ERR names another CQ");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(cq2)
{
	p->cq_size = 2;
	p->max_send_wr = 64;
}

/*
 * Manual 6.1.5, IBA 11.6.3.1 / 10.3.1 (Communication Established): a QP
 * in RTR that receives its first packet raises IBV_EVENT_COMM_EST; the
 * receive completes; the QP stays in RTR until the consumer moves it.
 */
CF_BODY_IMPL(rc_events, comm_est)
{
	struct ibv_async_event ev;
	struct ibv_wc wc;
	char seen[200];
	int got, ret;

	if (ep->side == CF_CHILD) {
		if (cf_ep_connect(ep, IBV_QPS_INIT))
			return -1;
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 64, 1),
			   "ibv_post_recv in INIT failed");
		if (cf_ep_connect(ep, IBV_QPS_RTR) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_SUCCESS,
				    IBV_WC_RECV, "SEND to a QP in RTR"))
			EP_CHECK(ep, cf_pattern_check(ep->buf, 64, 9) < 0,
				 "SEND to a QP in RTR: data differs");
		ret = cf_ep_wait_async(ep, IBV_EVENT_COMM_EST, WAIT_MS, &ev,
				       seen, sizeof(seen));
		if (EP_CHECK(ep, !ret, "no IBV_EVENT_COMM_EST (other events: "
			     "%s)", seen[0] ? seen : "none"))
			EP_CHECK(ep, ev.element.qp == ep->qp,
				 "IBV_EVENT_COMM_EST names another QP");
		EP_CHECK(ep, cf_qp_state(ep->qp) == IBV_QPS_RTR,
			 "QP state %s after COMM_EST, expected RTR",
			 cf_state_name(cf_qp_state(ep->qp)));
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 64, 9);
	if (cf_ep_connect(ep, IBV_QPS_RTS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (!post_send(ep, IBV_WR_SEND, 64, 1)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_SUCCESS, IBV_WC_SEND,
				"SEND to a QP in RTR");
	}
	return cf_ep_sync(ep, 2 * WAIT_MS);
}

CF_TUNE_IMPL(manual)
{
	p->connect = false;
}

/*
 * Manual 6.1.6, IBA 10.3.1 / 11.6.3.1 (Send Queue Drained): RTS -> SQD
 * with en_sqd_async_notify raises IBV_EVENT_SQ_DRAINED once the
 * outstanding sends are done; SQD -> RTS resumes sending.
 */
CF_BODY_IMPL(rc_events, sq_drained)
{
	struct ibv_async_event ev;
	struct ibv_qp_attr a;
	struct ibv_wc wc[4];
	char seen[200];
	int i, got, ret;

	if (ep->side == CF_CHILD) {
		for (i = 0; i < 4; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp,
							(size_t)i * 64, 64,
							(uint64_t)i),
				   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 4, 3 * WAIT_MS);
		EP_CHECK(ep, got == 4, "%d receives of 4 (3 before SQD, 1 "
			 "after SQD -> RTS)", got);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < 3; i++)
		if (post_send(ep, IBV_WR_SEND, 64, (uint64_t)i))
			return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 3, WAIT_MS);
	EP_CHECK(ep, got == 3, "%d send completions of 3", got);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	ret = cf_rc(ibv_modify_qp(ep->qp, &a, IBV_QP_STATE |
				  IBV_QP_EN_SQD_ASYNC_NOTIFY));
	EP_REQUIRE(ep, !ret, "RTS -> SQD with en_sqd_async_notify: %s",
		   cf_errname(ret));
	ret = cf_ep_wait_async(ep, IBV_EVENT_SQ_DRAINED, WAIT_MS, &ev, seen,
			       sizeof(seen));
	if (EP_CHECK(ep, !ret, "no IBV_EVENT_SQ_DRAINED (other events: %s)",
		     seen[0] ? seen : "none"))
		EP_CHECK(ep, ev.element.qp == ep->qp,
			 "IBV_EVENT_SQ_DRAINED names another QP");
	EP_CHECK(ep, cf_qp_state(ep->qp) == IBV_QPS_SQD,
		 "QP state %s after SQ_DRAINED, expected SQD",
		 cf_state_name(cf_qp_state(ep->qp)));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	ret = cf_rc(ibv_modify_qp(ep->qp, &a, IBV_QP_STATE));
	EP_CHECK(ep, !ret, "SQD -> RTS: %s", cf_errname(ret));
	if (!post_send(ep, IBV_WR_SEND, 64, 3)) {
		got = cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, wc, got, 3, IBV_WC_SUCCESS, IBV_WC_SEND,
				"SEND after SQD -> RTS");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Manual 6.1.17, IBA 10.3.1 / 11.6.3.1 (Last WQE Reached): a QP attached
 * to an SRQ moved to ERR raises IBV_EVENT_QP_LAST_WQE_REACHED; receive
 * WQEs left on the SRQ are not flushed (they belong to the SRQ).
 */
CF_BODY_IMPL(rc_events, last_wqe)
{
	struct ibv_async_event ev;
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	char seen[200];
	int got, ret;

	if (ep->side == CF_CHILD) {
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, NULL, 0, 64, 1) &&
			   !cf_ep_post_recv(ep, NULL, 64, 64, 2),
			   "ibv_post_srq_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_SUCCESS,
				    IBV_WC_RECV, "SEND through the SRQ"))
			EP_CHECK(ep, wc.qp_num == ep->qp->qp_num &&
				 cf_pattern_check(ep->buf, 64, 4) < 0,
				 "SEND through the SRQ: qp_num 0x%x or data "
				 "wrong", wc.qp_num);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		ret = cf_rc(ibv_modify_qp(ep->qp, &a, IBV_QP_STATE));
		EP_CHECK(ep, !ret, "RTS -> ERR: %s", cf_errname(ret));
		ret = cf_ep_wait_async(ep, IBV_EVENT_QP_LAST_WQE_REACHED,
				       WAIT_MS, &ev, seen, sizeof(seen));
		if (EP_CHECK(ep, !ret, "no IBV_EVENT_QP_LAST_WQE_REACHED "
			     "(other events: %s)", seen[0] ? seen : "none"))
			EP_CHECK(ep, ev.element.qp == ep->qp,
				 "LAST_WQE_REACHED names another QP");
		got = cf_poll_cq_wait(ep->cq, &wc, 1, 200);
		EP_CHECK(ep, got == 0, "a receive WQE of the SRQ was flushed "
			 "with the QP (%s)", got ?
			 ibv_wc_status_str(wc.status) : "");
		return 0;
	}
	cf_pattern_fill(ep->buf, 64, 4);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (!post_send(ep, IBV_WR_SEND, 64, 1)) {
		struct ibv_wc swc;

		got = cf_poll_cq_wait(ep->cq, &swc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &swc, got, 1, IBV_WC_SUCCESS, IBV_WC_SEND,
				"SEND through the SRQ");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(srq)
{
	p->srq = true;
}
