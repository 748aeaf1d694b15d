// SPDX-License-Identifier: MIT
/*
 * Misuse for the checking mode's registration and lifetime checks
 * (tests/local/check-life.sh), one process, one device.  Each subcommand
 * commits one; SUBCOMMAND-ok does the same work correctly and must be
 * reported clean:
 *   reg-conflict  the same buffer registered twice, local write only and
 *                 then remote write (-ok: the same rights twice)
 *   async-unacked  an RC QP on an SRQ moved to ERR raises
 *                 IBV_EVENT_QP_LAST_WQE_REACHED, which is taken with
 *                 ibv_get_async_event and never acknowledged before
 *                 ibv_destroy_qp (-ok: ibv_ack_async_event first)
 *   srq-busy      ibv_destroy_srq of an SRQ a QP still uses: EBUSY (-ok:
 *                 the QP goes first)
 *   cq-rearm      a CQ's event is taken and the CQ polled but not re-armed;
 *                 a completion comes, and a thread blocks in
 *                 ibv_get_cq_event for a second (-ok: re-armed at once)
 * Every object is released at the end, so a correct run has no leaks.
 * Exit: 0 done, 1 a verb failed unexpectedly, 2 usage, 77 no device.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NOINLINE __attribute__((noinline))
#define BUF_LEN 4096

static struct ibv_device **list;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static char buf[BUF_LEN];

/* Not static: the stacks name them (dladdr sees exported symbols). */
int reg_twice(int ok);
int destroy_qp_unacked(int ok);
int destroy_srq_busy(int ok);
int wait_event_unarmed(int ok);

static int fail(const char *what)
{
	say("check_life: %s failed", what);
	return 1;
}

NOINLINE int reg_twice(int ok)
{
	struct ibv_mr *a, *b;
	int rights = ok ? IBV_ACCESS_LOCAL_WRITE
			: IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	a = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!a)
		return fail("ibv_reg_mr");
	b = ibv_reg_mr(pd, buf, BUF_LEN, rights);
	if (!b) {
		ibv_dereg_mr(a);
		return fail("ibv_reg_mr (second)");
	}
	return ibv_dereg_mr(b) || ibv_dereg_mr(a) ? fail("ibv_dereg_mr") : 0;
}

static struct ibv_srq *make_srq(void)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};

	return ibv_create_srq(pd, &sa);
}

/* An SRQ and an RC QP on it: 0, or -1 with nothing left made. */
static int make_srq_qp(struct ibv_srq **srq_p, struct ibv_qp **qp_p)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_send_sge = 1},
	};

	ia.srq = *srq_p = make_srq();
	*qp_p = ia.srq ? ibv_create_qp(pd, &ia) : NULL;
	if (*qp_p)
		return 0;
	if (*srq_p)
		ibv_destroy_srq(*srq_p);
	return fail("ibv_create_srq/qp");
}

/* The QP's next async event, within five seconds: 0, or -1. */
static int take_event(struct ibv_qp *qp, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, 5000) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	if (ev->event_type != IBV_EVENT_QP_LAST_WQE_REACHED ||
	    ev->element.qp != qp) {
		say("check_life: event %d, not LAST_WQE_REACHED of the QP",
		    ev->event_type);
		ibv_ack_async_event(ev);
		return -1;
	}
	return 0;
}

NOINLINE int destroy_qp_unacked(int ok)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	struct ibv_async_event ev;
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	int ret = 0;

	if (make_srq_qp(&srq, &qp))
		return 1;
	/* IBA 10.3.1: an SRQ-attached QP in ERR raises LAST_WQE_REACHED. */
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) || take_event(qp, &ev))
		ret = fail("the LAST_WQE_REACHED event");
	else if (ok)
		ibv_ack_async_event(&ev);
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		ret = fail("ibv_destroy_qp/srq");
	return ret;
}

NOINLINE int destroy_srq_busy(int ok)
{
	struct ibv_srq *srq;
	struct ibv_qp *qp;
	int ret = 0;

	if (make_srq_qp(&srq, &qp))
		return 1;
	if (!ok && ibv_destroy_srq(srq) != EBUSY)
		ret = fail("ibv_destroy_srq of a busy SRQ: not EBUSY");
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		ret = fail("ibv_destroy_qp/srq");
	return ret;
}

/* Two RC QPs of this process, A's sends completing on a CQ with a
 * completion channel, A granted RDMA WRITE into B's buffer. */
static struct rc_side qa, qb;
static struct ibv_comp_channel *chan;
static struct ibv_cq *chan_cq;

static int chan_pair(void)
{
	struct rc_pair_attr attr = {
		.buf_len = 4096,
		.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		.cq_depth = 16, .max_send_wr = 8, .max_recv_wr = 8,
		.qp_access = IBV_ACCESS_REMOTE_WRITE,
		.path_mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = 7,
	};
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1,
			.max_recv_sge = 1},
	};

	if (rc_pair_open(&qa, &attr) || rc_pair_open(&qb, &attr))
		return -1;
	chan = ibv_create_comp_channel(qa.ctx);
	chan_cq = chan ? ibv_create_cq(qa.ctx, 16, NULL, chan, 0) : NULL;
	if (!chan_cq)
		return -1;
	ibv_destroy_qp(qa.qp);
	ia.send_cq = chan_cq;
	ia.recv_cq = qa.cq;
	qa.qp = ibv_create_qp(qa.pd, &ia);
	if (!qa.qp)
		return -1;
	qa.me.qpn = qa.qp->qp_num;
	qa.me.psn = (qa.qp->qp_num * 7919u) & 0xffffff;
	return rc_pair_connect(&qa, &qb.me) || rc_pair_connect(&qb, &qa.me);
}

static void chan_pair_close(void)
{
	if (qa.qp)
		ibv_destroy_qp(qa.qp);
	qa.qp = NULL;
	if (chan_cq)
		ibv_destroy_cq(chan_cq);
	if (chan)
		ibv_destroy_comp_channel(chan);
	rc_pair_close(&qa);
	rc_pair_close(&qb);
}

/* One 8-byte RDMA WRITE from A into B, signaled. */
static int write_one(uint64_t wr_id)
{
	struct ibv_sge sge = {(uintptr_t)qa.buf, 8, qa.mr->lkey};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = qb.me.addr, .rkey = qb.me.rkey},
	}, *bad;

	return ibv_post_send(qa.qp, &wr, &bad);
}

/* The next completion event of chan, within five seconds: 0, or -1. */
static int take_cq_event(void)
{
	struct pollfd p = {.fd = chan->fd, .events = POLLIN};
	struct ibv_cq *ev_cq;
	void *cq_ctx;

	if (poll(&p, 1, 5000) != 1 ||
	    ibv_get_cq_event(chan, &ev_cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(ev_cq, 1);
	return ev_cq == chan_cq ? 0 : -1;
}

/* All of chan_cq's completions, each successful: their number, or -1. */
static int drain(void)
{
	struct ibv_wc wc;
	int n = 0, got;

	while ((got = ibv_poll_cq(chan_cq, 1, &wc)) == 1) {
		if (wc.status != IBV_WC_SUCCESS)
			return -1;
		n++;
	}
	return got < 0 ? -1 : n;
}

/* The waiter: blocks in ibv_get_cq_event as an event loop would. */
static void *waiter(void *arg)
{
	struct ibv_cq *ev_cq;
	void *cq_ctx;
	long ret = ibv_get_cq_event(chan, &ev_cq, &cq_ctx);

	(void)arg;
	if (!ret)
		ibv_ack_cq_events(ev_cq, 1);
	return (void *)ret;
}

/* A completion that must arrive: poll until it does, within 5 s. */
static int wait_completion(void)
{
	int i, n;

	for (i = 0; i < 5000; i++) {
		n = drain();
		if (n)
			return n < 0 ? -1 : 0;
		usleep(1000);
	}
	return -1;
}

NOINLINE int wait_event_unarmed(int ok)
{
	pthread_t t;
	void *tret;

	if (chan_pair()) {
		chan_pair_close();
		return fail("the pair with a channel");
	}
	if (ibv_req_notify_cq(chan_cq, 0) || write_one(1) || take_cq_event())
		return fail("the first event");
	if (ok && ibv_req_notify_cq(chan_cq, 0))
		return fail("ibv_req_notify_cq");
	if (drain() != 1 || write_one(2))
		return fail("the first completion");
	if (pthread_create(&t, NULL, waiter, NULL))
		return fail("pthread_create");
	if (!ok) {
		/* The completion of WRITE 2 raises no event: the waiter
		 * waits until the CQ is armed and WRITE 3 completes. */
		sleep(3);
		if (wait_completion() || ibv_req_notify_cq(chan_cq, 0) ||
		    write_one(3))
			return fail("the release of the waiter");
	}
	if (pthread_join(t, &tret) || tret)
		return fail("the waiter's ibv_get_cq_event");
	if (wait_completion())
		return fail("the last completion");
	chan_pair_close();
	return 0;
}

int main(int argc, char **argv)
{
	static const struct misuse_cmd cmds[] = {
		{"reg-conflict", reg_twice},
		{"async-unacked", destroy_qp_unacked},
		{"srq-busy", destroy_srq_busy},
		{"cq-rearm", wait_event_unarmed},
	};
	const struct misuse_cmd *c;
	struct ibv_port_attr pa;
	int ok, ret;

	c = misuse_cmd_find("check_life", argc, argv, cmds,
			    sizeof(cmds) / sizeof(cmds[0]), &ok);
	if (!c)
		return 2;
	ret = verbs_open(&list, &ctx, &pd, &cq, 16, &pa);
	if (ret == 1)
		return 77;
	ret = ret ? fail("setup") : c->run(ok);
	verbs_release(NULL, NULL, cq, pd, ctx, list);
	return ret;
}
