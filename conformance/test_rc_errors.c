// SPDX-License-Identifier: MIT
/*
 * RC error completions between two processes (peer.h): manual 6.2 (work
 * completion status), 6.1.4 (IBV_EVENT_QP_ACCESS_ERR); IBA 9.7.5.2
 * (NAK codes), 9.7.6 (timeouts and retries), 10.3.1 (the Error state
 * flushes every outstanding WR), 11.6.2 (completion status).  Each check
 * looks at the status on both sides, both QPs' state afterwards, and the
 * target's memory when a remote access is refused.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000

/*
 * Manual 6.2.2 / 6.2.10, IBA 9.7.5.2.4 (invalid request NAK): a SEND
 * longer than the receive buffer is a local length error at the receiver
 * and a remote invalid request at the sender; both QPs go to ERR and the
 * WRs behind flush (manual 6.2.6).
 */
CF_BODY_IMPL(rc_errors, loc_len)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[2];
	int got;

	if (ep->side == CF_CHILD) {
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 100, 1) &&
			   !cf_ep_post_recv(ep, ep->qp, 4096, 4096, 2),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
		cf_ep_expect_wc(ep, &wc[0], got, 1, IBV_WC_LOC_LEN_ERR, -1,
				"200 B SEND into a 100 B receive");
		cf_ep_expect_wc(ep, &wc[1], got - 1, 2, IBV_WC_WR_FLUSH_ERR,
				-1, "the receive behind it");
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "after LOC_LEN_ERR");
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 200, 1);
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 8, 2);
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	cf_ep_expect_wc(ep, &wc[0], got, 1, IBV_WC_REM_INV_REQ_ERR, -1,
			"200 B SEND into a 100 B receive");
	cf_ep_expect_wc(ep, &wc[1], got - 1, 2, IBV_WC_WR_FLUSH_ERR, -1,
			"the SEND behind it");
	cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "after REM_INV_REQ_ERR");
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Manual 6.2.5, IBA 10.6.3 (local memory access checks): an SGE with an
 * invalid lkey, or reaching outside its MR, is a local protection error;
 * the QP goes to ERR and nothing reaches the peer.  ep->arg: 0 for the
 * bad lkey, 1 for the SGE outside the MR.
 */
CF_BODY_IMPL(rc_errors, loc_prot)
{
	const int kind = (int)ep->arg;
	static const char *const names[] = { "bad lkey", "SGE outside MR" };
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc[2];
	int got;

	if (ep->side == CF_CHILD) {
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 1, 200);
		EP_CHECK(ep, got == 0 || wc[0].status != IBV_WC_SUCCESS,
			 "%s: the peer received a SEND whose SGE was bad",
			 names[kind]);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 1);
	if (kind == 0)
		sge.lkey = ep->mr->lkey ^ 0x5a5a5a00u;
	else
		sge.addr = (uintptr_t)ep->buf + ep->p->buf_len - 16;
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 8, 2);
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	cf_ep_expect_wc(ep, &wc[0], got, 1, IBV_WC_LOC_PROT_ERR, -1,
			names[kind]);
	cf_ep_expect_wc(ep, &wc[1], got - 1, 2, IBV_WC_WR_FLUSH_ERR, -1,
			"the SEND behind it");
	cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "after LOC_PROT_ERR");
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * An RDMA READ on a QP whose max_rd_atomic (initiator depth, IBA
 * 11.2.5.2) is 0: the QP may have no READ outstanding, so the READ is
 * never done.  How it ends is the device's: manual 6.2.3 gives
 * IBV_WC_LOC_QP_OP_ERR as the example (the QP then in ERR); rxe leaves it
 * waiting for a credit that never comes.  Required: it does not complete
 * successfully, and once the QP is in ERR it is flushed (IBA 10.3.1).
 */
CF_BODY_IMPL(rc_errors, loc_qp_op)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 2 * WAIT_MS + 1000);
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_RDMA_READ, 0, 64, 1);
	wr.wr.rdma.remote_addr = ep->peer.addr;
	wr.wr.rdma.rkey = ep->peer.rkey;
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (got == 1) {
			EP_CHECK(ep, wc.wr_id == 1 &&
				 wc.status != IBV_WC_SUCCESS,
				 "RDMA READ with max_rd_atomic 0: wr_id %llu "
				 "status %s, expected an error",
				 (unsigned long long)wc.wr_id,
				 ibv_wc_status_str(wc.status));
			EP_CHOICE(ep, "an RDMA READ with max_rd_atomic 0 "
				  "completes with %s",
				  ibv_wc_status_str(wc.status));
			cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR,
					  "after the READ's error");
		} else if (EP_CHECK(ep, got == 0, "ibv_poll_cq failed")) {
			int ret = cf_rc(ibv_modify_qp(ep->qp, &attr,
						      IBV_QP_STATE));

			EP_CHOICE(ep, "an RDMA READ with max_rd_atomic 0 "
				  "waits, never issued");
			EP_CHECK(ep, !ret, "RTS->ERR: %s", cf_errname(ret));
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_WR_FLUSH_ERR,
					-1, "the waiting READ, QP in ERR");
		}
	}
	return cf_ep_sync(ep, 2 * WAIT_MS);
}

CF_TUNE_IMPL(no_rd_atomic)
{
	p->max_rd_atomic = 0;
}

/*
 * Manual 6.2.11 / 6.1.4, IBA 9.7.5.2.5 (remote access error NAK),
 * 10.6.3 (rkey checks): WRITE, READ and ATOMIC with a bad rkey, outside
 * the MR, or to an MR without the needed remote access.  The requester
 * completes with REM_ACCESS_ERR, the responder raises
 * IBV_EVENT_QP_ACCESS_ERR, both go to ERR, and the target's memory is
 * untouched.
 */
enum { OP_WRITE, OP_READ, OP_ATOMIC };
enum { K_RKEY, K_RANGE, K_ACCESS };
struct acc_case {
	int op, kind;
};

/* The runs of rem_access_err, by ep->arg: every op with every kind. */
static const struct acc_case acc_cases[] = {
	{ OP_WRITE, K_RKEY },  { OP_WRITE, K_RANGE },  { OP_WRITE, K_ACCESS },
	{ OP_READ, K_RKEY },   { OP_READ, K_RANGE },   { OP_READ, K_ACCESS },
	{ OP_ATOMIC, K_RKEY }, { OP_ATOMIC, K_RANGE }, { OP_ATOMIC, K_ACCESS },
};

#define TGT_LEN 65536u

CF_BODY_IMPL(rc_errors, rem_access)
{
	static const char *const ops[] = { "RDMA WRITE", "RDMA READ",
					   "FETCH_AND_ADD" };
	static const char *const kinds[] = { "bad rkey", "out of the MR",
					     "access flag missing" };
	static const int need[] = { IBV_ACCESS_REMOTE_WRITE,
				    IBV_ACCESS_REMOTE_READ,
				    IBV_ACCESS_REMOTE_ATOMIC };
	const struct acc_case *c = &acc_cases[ep->arg];
	struct ibv_async_event ev;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	char what[96], seen[200];
	uint64_t addr, rkey;
	int got;

	snprintf(what, sizeof(what), "%s, %s", ops[c->op], kinds[c->kind]);
	if (c->op == OP_ATOMIC && ep->dev->atomic_cap == IBV_ATOMIC_NONE) {
		cf_ep_skip(ep, "%s: device atomic_cap is IBV_ATOMIC_NONE",
			   what);
		return 0;
	}
	if (ep->side == CF_CHILD) {
		int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC;
		struct ibv_mr *mr;
		uint8_t *tgt = ep->buf + (1u << 20);

		if (c->kind == K_ACCESS)
			access &= ~need[c->op];
		memset(tgt, 0xa5, TGT_LEN);
		mr = ibv_reg_mr(ep->pd, tgt, TGT_LEN, access);
		EP_REQUIRE(ep, mr, "ibv_reg_mr(access 0x%x): %s", access,
			   strerror(errno));
		if (cf_ep_send_val(ep, (uintptr_t)tgt) ||
		    cf_ep_send_val(ep, mr->rkey) || cf_ep_sync(ep, WAIT_MS)) {
			ibv_dereg_mr(mr);
			return -1;
		}
		/* The requester has its completion. */
		if (!cf_ep_sync(ep, WAIT_MS + 1000)) {
			got = cf_ep_wait_async(ep, IBV_EVENT_QP_ACCESS_ERR,
					       WAIT_MS, &ev, seen,
					       sizeof(seen));
			if (EP_CHECK(ep, !got, "%s: no IBV_EVENT_QP_ACCESS_ERR "
				     "at the responder (other events: %s)",
				     what, seen[0] ? seen : "none"))
				EP_CHECK(ep, ev.element.qp == ep->qp,
					 "%s: QP_ACCESS_ERR for another QP",
					 what);
			cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
			EP_CHECK(ep, cf_bytes_check(tgt, TGT_LEN, 0xa5) < 0,
				 "%s: target memory changed at byte %ld",
				 what, cf_bytes_check(tgt, TGT_LEN, 0xa5));
		}
		ibv_dereg_mr(mr);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_recv_val(ep, &addr, WAIT_MS) ||
	    cf_ep_recv_val(ep, &rkey, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	memset(ep->buf, 0xee, 4096);
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_RDMA_WRITE, 0, 64, 1);
	if (c->op == OP_READ)
		wr.opcode = IBV_WR_RDMA_READ;
	if (c->kind == K_RKEY)
		rkey ^= 0x5a5a5a00u;
	if (c->kind == K_RANGE)
		addr += TGT_LEN - (c->op == OP_ATOMIC ? 0 : 32);
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = (uint32_t)rkey;
	if (c->op == OP_ATOMIC) {
		sge.length = 8;
		wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
		wr.wr.atomic.remote_addr = addr;
		wr.wr.atomic.rkey = (uint32_t)rkey;
		wr.wr.atomic.compare_add = 1;
	}
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_REM_ACCESS_ERR, -1,
				what);
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
		if (c->op != OP_WRITE)
			EP_CHECK(ep, cf_bytes_check(ep->buf, 4096, 0xee) < 0,
				 "%s: the failed operation wrote local memory",
				 what);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	return cf_ep_sync(ep, WAIT_MS + 2000);
}

/*
 * Manual 6.2.12, IBA 9.7.5.2 (remote operational error NAK): the
 * responder cannot use its receive WQE (bad lkey): the requester gets
 * REM_OP_ERR, the receive completes with LOC_PROT_ERR, both go to ERR.
 */
CF_BODY_IMPL(rc_errors, rem_op)
{
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		sge.addr = (uintptr_t)ep->buf;
		sge.length = 4096;
		sge.lkey = ep->mr->lkey ^ 0x5a5a5a00u;
		memset(&rwr, 0, sizeof(rwr));
		rwr.wr_id = 1;
		rwr.sg_list = &sge;
		rwr.num_sge = 1;
		EP_REQUIRE(ep, !ibv_post_recv(ep->qp, &rwr, &rbad),
			   "ibv_post_recv(bad lkey) refused at post time");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_LOC_PROT_ERR, -1,
				"SEND into a receive with a bad lkey");
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "responder");
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 1);
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_REM_OP_ERR, -1,
				"SEND into a receive with a bad lkey");
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "requester");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Manual 6.2.14, IBA 9.7.5.2.8 (RNR NAK and rnr_retry): with no
 * receive posted the responder answers RNR NAK; after rnr_retry retries
 * (0 and 2 here, min_rnr_timer 0.01 ms) the SEND fails with
 * RNR_RETRY_EXC_ERR and the requester goes to ERR; the responder stays in
 * RTS.  ep->arg: rnr_retry.
 */
CF_BODY_IMPL(rc_errors, rnr)
{
	const int retries = (int)ep->arg;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	char what[48];
	int got;

	snprintf(what, sizeof(what), "SEND with no receive, rnr_retry %d",
		 retries);
	if (ep->side == CF_CHILD) {
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS + 1000))
			return -1;
		cf_ep_check_state(ep, ep->qp, IBV_QPS_RTS,
				  "responder after RNR");
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 1);
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_RNR_RETRY_EXC_ERR, -1,
				what);
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
	}
	if (cf_ep_sync(ep, WAIT_MS + 1000))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(rnr)
{
	p->rnr_retry = (uint8_t)arg;
	p->min_rnr_timer = 1;
}

/*
 * IBA 9.7.5.2.8: rnr_retry 7 retries without limit: a SEND waits for the
 * receive the responder posts ~300 ms later and then succeeds.
 */
CF_BODY_IMPL(rc_errors, rnr_infinite)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		usleep(300000);
		memset(ep->buf, 0, 64);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 64, 1),
			   "ibv_post_recv failed");
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_SUCCESS,
				    IBV_WC_RECV, "late receive"))
			EP_CHECK(ep, wc.byte_len == 64 &&
				 cf_pattern_check(ep->buf, 64, 3) < 0,
				 "late receive: data differs");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 64, 3);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 1);
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, 150);
		EP_CHECK(ep, got == 0, "the SEND completed (%s) before the "
			 "receive was posted", got ?
			 ibv_wc_status_str(wc.status) : "");
		if (!got) {
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_SUCCESS,
					IBV_WC_SEND,
					"SEND with rnr_retry 7 (infinite)");
		}
	}
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(rnr7)
{
	p->rnr_retry = 7;
	p->min_rnr_timer = 1;
}

/*
 * Manual 6.2.13, IBA 9.7.6.1 (local ACK timeout, retry_cnt): the peer's QP
 * is gone (destroyed, or its process killed): with timeout 10 (4.096 us *
 * 2^10) and retry_cnt 1 the SEND fails with RETRY_EXC_ERR in bounded time.
 * ep->arg: 0 when the peer destroys its QP, 1 when its process is killed.
 */
CF_BODY_IMPL(rc_errors, retry)
{
	const int kill_it = (int)ep->arg;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	long long t0;
	int got;

	if (ep->side == CF_CHILD) {
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		if (kill_it)
			raise(SIGKILL);
		EP_CHECK(ep, !ibv_destroy_qp(ep->qp), "ibv_destroy_qp failed");
		ep->qps[0] = ep->qp = NULL;
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		return cf_ep_sync(ep, WAIT_MS + 2000);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (kill_it)
		EP_REQUIRE(ep, !cf_ep_wait_peer_gone(ep, WAIT_MS),
			   "the child did not die");
	else if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	t0 = cf_now_ms();
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 1);
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_RETRY_EXC_ERR, -1,
				kill_it ? "SEND to a killed process" :
				"SEND to a destroyed QP");
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR,
				  "after RETRY_EXC_ERR");
		if (got)
			printf("(RETRY_EXC_ERR after %lld ms) ",
			       cf_now_ms() - t0);
	}
	return kill_it ? 0 : cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(retry)
{
	p->timeout = 10;
	p->retry_cnt = 1;
	p->child_may_die = arg != 0;
}

/*
 * Manual 6.2.6, IBA 10.3.1: once a QP is in ERR every outstanding
 * WR on both of its queues completes with WR_FLUSH_ERR, in the order
 * posted on each queue, and so does a WR posted afterwards.
 */
CF_BODY_IMPL(rc_errors, flush)
{
	struct ibv_send_wr wr[4], *bad;
	struct ibv_sge sge[4];
	struct ibv_wc wc[16];
	uint64_t next_send = 1, next_recv = 100;
	int i, got, ret;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 2 * WAIT_MS);
	for (i = 0; i < 4; i++)
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 8192, 64,
						100 + (uint64_t)i),
			   "ibv_post_recv failed");
	for (i = 0; i < 4; i++) {
		cf_ep_send_wr(ep, &wr[i], &sge[i], IBV_WR_SEND, 0, 64,
			      1 + (uint64_t)i);
		wr[i].next = i < 3 ? &wr[i + 1] : NULL;
	}
	sge[0].lkey ^= 0x5a5a5a00u;	/* LOC_PROT_ERR (manual 6.2.5) */
	ret = cf_rc(ibv_post_send(ep->qp, wr, &bad));
	EP_CHECK(ep, !ret, "ibv_post_send(4): %s", cf_errname(ret));
	got = cf_poll_cq_wait(ep->cq, wc, 8, WAIT_MS);
	EP_CHECK(ep, got == 8, "%d completions of 8 (4 sends, 4 receives)",
		 got);
	for (i = 0; i < got; i++) {
		if (wc[i].wr_id < 100) {
			enum ibv_wc_status want = next_send == 1 ?
				IBV_WC_LOC_PROT_ERR : IBV_WC_WR_FLUSH_ERR;

			cf_ep_expect_wc(ep, &wc[i], 1, next_send, want, -1,
					"send queue, in order");
			next_send++;
		} else {
			cf_ep_expect_wc(ep, &wc[i], 1, next_recv,
					IBV_WC_WR_FLUSH_ERR, -1,
					"receive queue, in order");
			next_recv++;
		}
		EP_CHECK(ep, wc[i].qp_num == ep->qp->qp_num,
			 "completion %d: qp_num 0x%x", i, wc[i].qp_num);
	}
	cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, "after LOC_PROT_ERR");
	/* Posted in ERR: flushed too. */
	cf_ep_send_wr(ep, &wr[0], &sge[0], IBV_WR_SEND, 0, 64, 9);
	ret = cf_rc(ibv_post_send(ep->qp, wr, &bad));
	EP_CHECK(ep, !ret, "ibv_post_send in ERR: %s", cf_errname(ret));
	EP_CHECK(ep, !cf_ep_post_recv(ep, ep->qp, 8192, 64, 109),
		 "ibv_post_recv in ERR failed");
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_CHECK(ep, got == 2 && wc[0].status == IBV_WC_WR_FLUSH_ERR &&
		 wc[1].status == IBV_WC_WR_FLUSH_ERR,
		 "WRs posted in ERR: %d flush completions of 2", got);
	return cf_ep_sync(ep, WAIT_MS);
}
