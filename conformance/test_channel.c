// SPDX-License-Identifier: MIT
/*
 * Completion channels and the asynchronous event file: manual 3.3.7/3.3.8
 * (ibv_create/destroy_comp_channel), 3.6 (ibv_req_notify_cq,
 * ibv_get_cq_event, ibv_ack_cq_events) and 6.1 (async events); IBA 11.2.7.5
 * (Request Completion Notification) and 11.6 (event handling).
 */
#include <fcntl.h>
#include <poll.h>
#include <string.h>

#include "tests.h"

static int fd_readable(int fd, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, timeout_ms);
}

CF_TEST_IMPL(channel, create_destroy)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(cf.ctx);

	CF_CHECK(ch != NULL, "ibv_create_comp_channel: %s", cf_errname(errno));
	if (!ch)
		return;
	CF_CHECK(ch->fd >= 0 && fcntl(ch->fd, F_GETFD) != -1,
		 "channel fd %d is not open", ch->fd);
	/* Nothing happened yet: no event is pending. */
	CF_CHECK(fd_readable(ch->fd, 0) == 0,
		 "fresh completion channel fd polls readable");
	CF_EXPECT_OK(cf_rc(ibv_destroy_comp_channel(ch)),
		     "ibv_destroy_comp_channel");
}

/* manual 3.3.8: a channel still used by a CQ cannot be destroyed. */
CF_TEST_IMPL(channel, destroy_busy)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(cf.ctx);
	struct ibv_cq *cq;
	int ret;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ch);
	cq = ibv_create_cq(cf.ctx, 8, &cf, ch, 0);
	CF_CHECK(cq != NULL, "ibv_create_cq on a channel: %s",
		 cf_errname(errno));
	if (!cq) {
		ibv_destroy_comp_channel(ch);
		return;
	}
	CF_CHECK(cq->channel == ch, "cq->channel not set");
	ret = cf_rc(ibv_destroy_comp_channel(ch));
	CF_EXPECT_ERR(ret, EBUSY, "ibv_destroy_comp_channel with a CQ on it");
	if (ret == 0) {
		ibv_destroy_cq(cq);
		return;
	}
	CF_EXPECT_OK(cf_rc(ibv_req_notify_cq(cq, 0)), "ibv_req_notify_cq(0)");
	CF_EXPECT_OK(cf_rc(ibv_req_notify_cq(cq, 1)),
		     "ibv_req_notify_cq(solicited only)");
	CF_CHECK(fd_readable(ch->fd, 0) == 0,
		 "armed idle CQ made its channel readable");
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
	CF_EXPECT_OK(cf_rc(ibv_destroy_comp_channel(ch)),
		     "ibv_destroy_comp_channel after CQ destroy");
}

/*
 * IBA 11.2.7.5 / 11.6.2: an armed CQ raises one completion event when a
 * completion is added.  Flush completions (IBA 10.3.1) are completions,
 * so moving a QP with posted receives to ERR arms this without data path.
 */
CF_TEST_IMPL(channel, event_on_flush)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(cf.ctx);
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;
	struct ibv_cq *cq, *ev_cq = NULL;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	void *ev_ctx = NULL;

	CU_ASSERT_PTR_NOT_NULL_FATAL(ch);
	cq = ibv_create_cq(cf.ctx, 8, &cf, ch, 0);
	CU_ASSERT_PTR_NOT_NULL_FATAL(cq);
	mr = cf_alloc_mr(&cf, 4096, IBV_ACCESS_LOCAL_WRITE);
	CU_ASSERT_PTR_NOT_NULL_FATAL(mr);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = cq;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	qp = cf_create_qp(&cf, IBV_QPT_RC, &ia);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	CF_EXPECT_OK(cf_qp_to_state(&cf, qp, IBV_QPS_INIT), "RESET->INIT");
	CF_EXPECT_OK(cf_post_recvs(qp, mr, 1, 42), "ibv_post_recv");
	CF_EXPECT_OK(cf_rc(ibv_req_notify_cq(cq, 0)), "ibv_req_notify_cq");
	CF_CHECK(fd_readable(ch->fd, 0) == 0, "event before any completion");

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)), "to ERR");
	CF_CHECK(fd_readable(ch->fd, 2000) == 1,
		 "no completion event within 2 s of a flush completion");
	if (fd_readable(ch->fd, 0) == 1) {
		CF_CHECK(ibv_get_cq_event(ch, &ev_cq, &ev_ctx) == 0,
			 "ibv_get_cq_event failed");
		CF_CHECK(ev_cq == cq && ev_ctx == &cf,
			 "event names cq %p ctx %p, expected %p %p",
			 (void *)ev_cq, ev_ctx, (void *)cq, (void *)&cf);
		if (ev_cq == cq)
			ibv_ack_cq_events(cq, 1);
	}
	CF_CHECK(cf_poll_cq_wait(cq, &wc, 1, 1000) == 1 &&
		 wc.status == IBV_WC_WR_FLUSH_ERR && wc.wr_id == 42,
		 "flushed receive not on the CQ as WR_FLUSH_ERR/42");
	/* Without re-arming, no further event is raised (IBA 11.2.7.5). */
	CF_CHECK(fd_readable(ch->fd, 0) == 0, "second event without re-arm");

	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	cf_free_mr(mr);
	CF_EXPECT_OK(cf_rc(ibv_destroy_cq(cq)), "ibv_destroy_cq");
	CF_EXPECT_OK(cf_rc(ibv_destroy_comp_channel(ch)),
		     "ibv_destroy_comp_channel");
}

/* manual 6.1: the async event fd is open and idle on a fresh context. */
CF_TEST_IMPL(channel, async_fd_idle)
{
	struct ibv_context *ctx = cf_open_device();

	CU_ASSERT_PTR_NOT_NULL_FATAL(ctx);
	CF_CHECK(ctx->async_fd >= 0 && fcntl(ctx->async_fd, F_GETFD) != -1,
		 "async_fd %d is not open", ctx->async_fd);
	CF_CHECK(fd_readable(ctx->async_fd, 0) == 0,
		 "async_fd of a fresh context polls readable");
	ibv_close_device(ctx);
}

/*
 * IBA 11.6.3 / manual 6.1: async errors report conditions the consumer did
 * not cause; moving a QP to ERR with ibv_modify_qp raises no event (no
 * IBV_EVENT_QP_FATAL, no LAST_WQE_REACHED without an SRQ).
 */
CF_TEST_IMPL(channel, no_async_on_modify_err)
{
	struct cf_ctx c;
	struct ibv_qp_attr a;
	struct ibv_qp *qp;

	CU_ASSERT_FATAL(cf_open(&c) == 0);
	qp = cf_create_qp(&c, IBV_QPT_RC, NULL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(qp);
	CF_EXPECT_OK(cf_qp_to_state(&c, qp, IBV_QPS_RTS), "bring-up to RTS");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	CF_EXPECT_OK(cf_rc(ibv_modify_qp(qp, &a, IBV_QP_STATE)), "RTS->ERR");
	CF_CHECK(fd_readable(c.ctx->async_fd, 200) == 0,
		 "async event after a consumer modify to ERR");
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(qp)), "ibv_destroy_qp");
	cf_close(&c);
}
