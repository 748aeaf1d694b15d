// SPDX-License-Identifier: MIT
/*
 * The extended verbs on RC between two processes (peer.h):
 * ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS and the ibv_wr_*
 * builders (man ibv_wr_post(3)), and ibv_create_cq_ex with
 * ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_*
 * readers (man ibv_create_cq_ex(3)).  The operations are those of IBA 9.4;
 * doc/design.md §3 "The emulated HCA and its verbs face" lists the
 * extended API that ibemu offers.
 */
#include "config.h" /* what the libibverbs headers have */

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000

/*
 * ibv_wr_post(3): a batch of SEND (one SGE), SEND_WITH_IMM (SGE list),
 * RDMA_WRITE (inline data, its source overwritten right after
 * ibv_wr_set_inline_data), RDMA_WRITE_WITH_IMM and RDMA_READ between one
 * ibv_wr_start and ibv_wr_complete; completions in order with the
 * opcodes of manual 3.6.
 */
#define W_OFF (1u << 20)	/* RDMA WRITE target */
#define WI_OFF (2u << 20)	/* RDMA WRITE with immediate target */
#define R_OFF (3u << 20)	/* RDMA READ source */

CF_BODY_IMPL(rc_ex, wr_ops)
{
	const uint32_t imm1 = htonl(0xa1), imm2 = htonl(0xb2);
	struct ibv_qp_ex *qx = ep->qpx;
	struct ibv_wc wc[5];
	struct ibv_sge sl[2];
	uint8_t inl[64];
	int got, ret, i;

	if (ep->side == CF_CHILD) {
		static const enum ibv_wc_opcode rop[3] = {
			IBV_WC_RECV, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM,
		};

		memset(ep->buf, 0, 4u << 20);
		cf_pattern_fill(ep->buf + R_OFF, 2000, 15);
		for (i = 0; i < 3; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp,
							(size_t)i * 4096, 4096,
							(uint64_t)i),
				   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 3, WAIT_MS);
		EP_CHECK(ep, got == 3, "%d receives of 3", got);
		for (i = 0; i < got; i++)
			cf_ep_expect_wc(ep, &wc[i], 1, (uint64_t)i,
					IBV_WC_SUCCESS, rop[i], "receive");
		if (got == 3) {
			EP_CHECK(ep, wc[0].byte_len == 100 &&
				 !(wc[0].wc_flags & IBV_WC_WITH_IMM),
				 "ibv_wr_send: byte_len %u", wc[0].byte_len);
			EP_CHECK(ep, wc[1].byte_len == 500 &&
				 (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
				 wc[1].imm_data == imm1,
				 "ibv_wr_send_imm: byte_len %u imm 0x%x",
				 wc[1].byte_len, wc[1].imm_data);
			EP_CHECK(ep, wc[2].byte_len == 1000 &&
				 (wc[2].wc_flags & IBV_WC_WITH_IMM) &&
				 wc[2].imm_data == imm2,
				 "ibv_wr_rdma_write_imm: byte_len %u imm 0x%x",
				 wc[2].byte_len, wc[2].imm_data);
		}
		EP_CHECK(ep, cf_pattern_check(ep->buf, 100, 11) < 0,
			 "ibv_wr_send: data differs");
		EP_CHECK(ep, cf_pattern_check(ep->buf + 4096, 500, 12) < 0,
			 "ibv_wr_send_imm (SGE list): data differs");
		EP_CHECK(ep, cf_pattern_check(ep->buf + W_OFF, 64, 13) < 0,
			 "ibv_wr_rdma_write (inline): data differs");
		EP_CHECK(ep, cf_pattern_check(ep->buf + WI_OFF, 1000, 14) < 0,
			 "ibv_wr_rdma_write_imm: data differs");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 100, 11);
	/* 500 bytes of seed 12, from two SGEs 200 + 300. */
	cf_pattern_fill(ep->buf + 8192, 500, 12);
	memmove(ep->buf + 16384, ep->buf + 8192 + 200, 300);
	cf_pattern_fill(inl, sizeof(inl), 13);
	cf_pattern_fill(ep->buf + WI_OFF, 1000, 14);
	memset(ep->buf + R_OFF, 0, 2000);
	sl[0].addr = (uintptr_t)ep->buf + 8192;
	sl[0].length = 200;
	sl[0].lkey = ep->mr->lkey;
	sl[1].addr = (uintptr_t)ep->buf + 16384;
	sl[1].length = 300;
	sl[1].lkey = ep->mr->lkey;
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;

	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)ep->buf, 100);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send_imm(qx, imm1);
	ibv_wr_set_sge_list(qx, 2, sl);
	qx->wr_id = 3;
	qx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	ibv_wr_rdma_write(qx, ep->peer.rkey, ep->peer.addr + W_OFF);
	ibv_wr_set_inline_data(qx, inl, sizeof(inl));
	memset(inl, 0, sizeof(inl));	/* copied by set_inline_data */
	qx->wr_id = 4;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write_imm(qx, ep->peer.rkey, ep->peer.addr + WI_OFF,
			      imm2);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)ep->buf + WI_OFF, 1000);
	qx->wr_id = 5;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qx, ep->peer.rkey, ep->peer.addr + R_OFF);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)ep->buf + R_OFF, 2000);
	ret = cf_rc(ibv_wr_complete(qx));
	EP_REQUIRE(ep, !ret, "ibv_wr_complete: %s", cf_errname(ret));

	got = cf_poll_cq_wait(ep->cq, wc, 5, WAIT_MS);
	EP_CHECK(ep, got == 5, "%d send completions of 5", got);
	if (got == 5) {
		static const enum ibv_wc_opcode op[5] = {
			IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
			IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ,
		};

		for (i = 0; i < 5; i++)
			cf_ep_expect_wc(ep, &wc[i], 1, (uint64_t)i + 1,
					IBV_WC_SUCCESS, op[i],
					"ibv_wr_* batch, in order");
		EP_CHECK(ep, wc[4].byte_len == 2000,
			 "ibv_wr_rdma_read: byte_len %u", wc[4].byte_len);
	}
	EP_CHECK(ep, cf_pattern_check(ep->buf + R_OFF, 2000, 15) < 0,
		 "ibv_wr_rdma_read: data differs");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(wr_ops)
{
	p->qp_ex = true;
	p->max_inline = 64;
	p->send_ops_flags = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_READ;
}

/* ibv_wr_atomic_cmp_swp / ibv_wr_atomic_fetch_add (IBA 9.4.5). */
CF_BODY_IMPL(rc_ex, wr_atomics)
{
	volatile uint64_t *word = (volatile uint64_t *)(void *)ep->buf;
	volatile uint64_t *r1 = (volatile uint64_t *)(void *)(ep->buf + 64);
	volatile uint64_t *r2 = (volatile uint64_t *)(void *)(ep->buf + 128);
	struct ibv_qp_ex *qx = ep->qpx;
	struct ibv_wc wc[2];
	int got, ret;

	if (ep->dev->atomic_cap == IBV_ATOMIC_NONE) {
		cf_ep_skip(ep, "device atomic_cap is IBV_ATOMIC_NONE");
		return 0;
	}
	if (ep->side == CF_CHILD) {
		*word = 10;
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		EP_CHECK(ep, *word == 27, "target after cmp_swp(10->20) and "
			 "fetch_add(7): %llu, expected 27",
			 (unsigned long long)*word);
		return 0;
	}
	*r1 = *r2 = 0xdead;
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(qx, ep->peer.rkey, ep->peer.addr, 10, 20);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)r1, 8);
	qx->wr_id = 2;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(qx, ep->peer.rkey, ep->peer.addr, 7);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)r2, 8);
	ret = cf_rc(ibv_wr_complete(qx));
	EP_REQUIRE(ep, !ret, "ibv_wr_complete: %s", cf_errname(ret));
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_CHECK(ep, got == 2, "%d completions of 2", got);
	if (got == 2) {
		cf_ep_expect_wc(ep, &wc[0], 1, 1, IBV_WC_SUCCESS,
				IBV_WC_COMP_SWAP, "ibv_wr_atomic_cmp_swp");
		cf_ep_expect_wc(ep, &wc[1], 1, 2, IBV_WC_SUCCESS,
				IBV_WC_FETCH_ADD, "ibv_wr_atomic_fetch_add");
	}
	EP_CHECK(ep, *r1 == 10 && *r2 == 20, "returned %llu and %llu, "
		 "expected 10 and 20", (unsigned long long)*r1,
		 (unsigned long long)*r2);
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(wr_atomics)
{
	p->qp_ex = true;
	p->send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			    IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
}

/*
 * ibv_wr_abort (ibv_wr_post(3)): the WRs built since ibv_wr_start are
 * discarded and never execute; the next batch does.
 */
CF_BODY_IMPL(rc_ex, wr_abort)
{
	struct ibv_qp_ex *qx = ep->qpx;
	struct ibv_wc wc[2];
	int got, ret;

	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0, 8192);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1) &&
			   !cf_ep_post_recv(ep, ep->qp, 4096, 4096, 2),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
		if (cf_ep_expect_wc(ep, wc, got, 1, IBV_WC_SUCCESS,
				    IBV_WC_RECV, "SEND after an aborted one"))
			EP_CHECK(ep, wc[0].byte_len == 300 &&
				 cf_pattern_check(ep->buf, 300, 22) < 0,
				 "the first message received is not the one "
				 "after ibv_wr_abort (byte_len %u)",
				 wc[0].byte_len);
		got = cf_poll_cq_wait(ep->cq, wc, 1, 200);
		EP_CHECK(ep, got == 0, "a second message arrived: the aborted "
			 "WR executed");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 100, 21);
	cf_pattern_fill(ep->buf + 4096, 300, 22);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	ibv_wr_start(qx);
	qx->wr_id = 7;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)ep->buf, 100);
	ibv_wr_abort(qx);
	ibv_wr_start(qx);
	qx->wr_id = 8;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_sge(qx, ep->mr->lkey, (uintptr_t)ep->buf + 4096, 300);
	ret = cf_rc(ibv_wr_complete(qx));
	EP_REQUIRE(ep, !ret, "ibv_wr_complete: %s", cf_errname(ret));
	got = cf_poll_cq_wait(ep->cq, wc, 2, 500);
	EP_CHECK(ep, got == 1, "%d send completions, expected 1 (wr_id 8)",
		 got);
	if (got >= 1)
		cf_ep_expect_wc(ep, wc, 1, 8, IBV_WC_SUCCESS, IBV_WC_SEND,
				"SEND after ibv_wr_abort");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(wr_send)
{
	p->qp_ex = true;
	p->send_ops_flags = IBV_QP_EX_WITH_SEND;
}

/* One completion read through the ibv_wc_read_* accessors. */
struct exwc {
	uint64_t wr_id;
	enum ibv_wc_status status;
	enum ibv_wc_opcode opcode;
	uint32_t byte_len, qp_num, imm;
	unsigned int flags;
	uint64_t ts; /* as poll_ex's stamp says */
};

/* Which completion timestamp poll_ex reads into exwc.ts. */
enum exwc_stamp { STAMP_NONE, STAMP_RAW, STAMP_WALLCLOCK };

/* ibv_start_poll / ibv_next_poll / ibv_end_poll with a deadline. */
static int poll_ex_stamped(struct cf_ep *ep, struct exwc *out, int n,
			   int timeout_ms, enum exwc_stamp stamp)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	struct ibv_cq_ex *cq = ep->cqx;
	uint64_t has = ep->p->cq_ex_wc_flags;
	long long deadline = cf_now_ms() + timeout_ms;
	int got = 0, ret;

	while (got < n && cf_now_ms() < deadline) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT) {
			usleep(100);
			continue;
		}
		if (!EP_CHECK(ep, !ret, "ibv_start_poll: %s", cf_errname(ret)))
			return got;
		do {
			struct exwc *w = &out[got++];

			memset(w, 0, sizeof(*w));
			w->wr_id = cq->wr_id;
			w->status = cq->status;
			w->opcode = ibv_wc_read_opcode(cq);
			w->flags = ibv_wc_read_wc_flags(cq);
			/* Only the readers the CQ was made with exist. */
			if (has & IBV_WC_EX_WITH_BYTE_LEN)
				w->byte_len = ibv_wc_read_byte_len(cq);
			if (has & IBV_WC_EX_WITH_QP_NUM)
				w->qp_num = ibv_wc_read_qp_num(cq);
			if ((has & IBV_WC_EX_WITH_IMM) &&
			    (w->flags & IBV_WC_WITH_IMM))
				w->imm = ibv_wc_read_imm_data(cq);
			if (stamp == STAMP_RAW)
				w->ts = ibv_wc_read_completion_ts(cq);
			else if (stamp == STAMP_WALLCLOCK)
				w->ts = ibv_wc_read_completion_wallclock_ns(cq);
			ret = got < n ? ibv_next_poll(cq) : ENOENT;
		} while (!ret);
		ibv_end_poll(cq);
	}
	return got;
}

static int poll_ex(struct cf_ep *ep, struct exwc *out, int n, int timeout_ms)
{
	return poll_ex_stamped(ep, out, n, timeout_ms, STAMP_NONE);
}

/*
 * ibv_create_cq_ex(3) with WITH_BYTE_LEN | WITH_IMM | WITH_QP_NUM: the
 * receiver reads SEND_WITH_IMM and SEND completions, the sender its SEND
 * completions, through the extended poll.
 */
CF_BODY_IMPL(rc_ex, cq_ex)
{
	const uint32_t imm = htonl(0xfeed);
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sge[2];
	struct exwc w[2];
	int got, ret;

	if (ep->side == CF_CHILD) {
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1) &&
			   !cf_ep_post_recv(ep, ep->qp, 4096, 4096, 2),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = poll_ex(ep, w, 2, WAIT_MS);
		EP_CHECK(ep, got == 2, "%d extended completions of 2", got);
		if (got >= 1)
			EP_CHECK(ep, w[0].wr_id == 1 &&
				 w[0].status == IBV_WC_SUCCESS &&
				 w[0].opcode == IBV_WC_RECV &&
				 w[0].byte_len == 300 &&
				 w[0].qp_num == ep->qp->qp_num &&
				 (w[0].flags & IBV_WC_WITH_IMM) &&
				 w[0].imm == imm,
				 "SEND_WITH_IMM: wr_id %llu %s opcode %d len %u"
				 " qp 0x%x flags 0x%x imm 0x%x",
				 (unsigned long long)w[0].wr_id,
				 ibv_wc_status_str(w[0].status), w[0].opcode,
				 w[0].byte_len, w[0].qp_num, w[0].flags,
				 w[0].imm);
		if (got >= 2)
			EP_CHECK(ep, w[1].wr_id == 2 &&
				 w[1].status == IBV_WC_SUCCESS &&
				 w[1].opcode == IBV_WC_RECV &&
				 w[1].byte_len == 0 &&
				 !(w[1].flags & IBV_WC_WITH_IMM),
				 "SEND of 0 B: wr_id %llu %s len %u flags 0x%x",
				 (unsigned long long)w[1].wr_id,
				 ibv_wc_status_str(w[1].status), w[1].byte_len,
				 w[1].flags);
		EP_CHECK(ep, cf_pattern_check(ep->buf, 300, 31) < 0,
			 "SEND_WITH_IMM: data differs");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 300, 31);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr[0], &sge[0], IBV_WR_SEND_WITH_IMM, 0, 300, 1);
	wr[0].imm_data = imm;
	cf_ep_send_wr(ep, &wr[1], &sge[1], IBV_WR_SEND, 0, 0, 2);
	wr[0].next = &wr[1];
	ret = cf_rc(ibv_post_send(ep->qp, wr, &bad));
	EP_REQUIRE(ep, !ret, "ibv_post_send: %s", cf_errname(ret));
	got = poll_ex(ep, w, 2, WAIT_MS);
	EP_CHECK(ep, got == 2 && w[0].wr_id == 1 && w[1].wr_id == 2 &&
		 w[0].status == IBV_WC_SUCCESS &&
		 w[1].status == IBV_WC_SUCCESS &&
		 w[0].opcode == IBV_WC_SEND && w[1].opcode == IBV_WC_SEND &&
		 w[0].qp_num == ep->qp->qp_num,
		 "%d extended send completions of 2, or wrong fields", got);
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(cq_ex)
{
	p->cq_ex = true;
	p->cq_ex_wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
			    IBV_WC_EX_WITH_QP_NUM;
}

/* ---- completion timestamps (ibv_create_cq_ex(3), IBV_WC_EX_WITH_
 * COMPLETION_TIMESTAMP and _WALLCLOCK; ibv_query_rt_values_ex(3)) ---- */

#define STAMP_MSGS 8
#define STAMP_HOLD_MS 50	/* how long a completion waits to be polled */

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The device clock now (ibv_query_rt_values_ex), in its ticks; 0 and a
 * failure when it cannot be read. */
static uint64_t raw_now(struct cf_ep *ep)
{
	struct ibv_values_ex v = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	int ret = ibv_query_rt_values_ex(ep->ctx, &v);

	if (!EP_CHECK(ep, !ret && (v.comp_mask & IBV_VALUES_MASK_RAW_CLOCK),
		      "ibv_query_rt_values_ex(RAW_CLOCK): %s, comp_mask 0x%x",
		      cf_errname(ret), v.comp_mask))
		return 0;
	return (uint64_t)v.raw_clock.tv_sec * 1000000000ull +
	       (uint64_t)v.raw_clock.tv_nsec;
}

/* arg 0: the raw device clock, arg 1: the wall clock. */
static uint64_t stamp_now(struct cf_ep *ep)
{
	return ep->arg ? clock_ns(CLOCK_REALTIME) : raw_now(ep);
}

/* Up to n (<= STAMP_MSGS) successful completions of the extended CQ
 * with their timestamps (arg 1: the wall clock, 0: the raw clock). */
static int poll_stamps(struct cf_ep *ep, uint64_t *wr_id, uint64_t *ts,
		       int n, int timeout_ms)
{
	struct exwc w[STAMP_MSGS];
	int got, i;

	got = poll_ex_stamped(ep, w, n < STAMP_MSGS ? n : STAMP_MSGS,
			      timeout_ms,
			      ep->arg ? STAMP_WALLCLOCK : STAMP_RAW);
	for (i = 0; i < got; i++) {
		EP_CHECK(ep, w[i].status == IBV_WC_SUCCESS,
			 "completion %d: %s", i,
			 ibv_wc_status_str(w[i].status));
		wr_id[i] = w[i].wr_id;
		ts[i] = w[i].ts;
	}
	return got;
}

/*
 * The stamps of n completions polled within [t0, t1] of the same clock:
 * in the window, non-decreasing, for wr_ids first..first+n-1.  For the
 * raw clock, the window converted with hca_core_clock (kHz) is no longer
 * than the monotonic time that elapsed around it: the clock ticks at the
 * rate the device says (1 % and 1 ms of slack for reading two clocks).
 */
static void check_stamps(struct cf_ep *ep, const uint64_t *wr_id,
			 const uint64_t *ts, int n, uint64_t first,
			 uint64_t t0, uint64_t t1, uint64_t mono_ns)
{
	uint64_t mask = ep->dev_ex.completion_timestamp_mask;
	const char *clk = ep->arg ? "wallclock ns" : "raw clock";
	int i;

	if (!mask || ep->arg)
		mask = UINT64_MAX;
	for (i = 0; i < n; i++) {
		EP_CHECK(ep, wr_id[i] == first + (uint64_t)i,
			 "completion %d: wr_id %llu", i,
			 (unsigned long long)wr_id[i]);
		EP_CHECK(ep, ((ts[i] - t0) & mask) <= ((t1 - t0) & mask),
			 "%s stamp %llu of completion %d outside the test's "
			 "window [%llu, %llu]", clk,
			 (unsigned long long)ts[i], i,
			 (unsigned long long)t0, (unsigned long long)t1);
		if (i)
			EP_CHECK(ep, ((ts[i] - ts[i - 1]) & mask) <=
					     ((t1 - t0) & mask),
				 "%s stamps decrease: %llu after %llu", clk,
				 (unsigned long long)ts[i],
				 (unsigned long long)ts[i - 1]);
	}
	if (!ep->arg) {
		uint64_t khz = ep->dev_ex.hca_core_clock;
		double ns = (double)((t1 - t0) & mask) * 1e6 / (double)khz;

		EP_CHECK(ep, ns <= (double)mono_ns * 1.01 + 1e6,
			 "%llu ticks at %llu kHz are %.0f ns, but only %llu ns "
			 "elapsed", (unsigned long long)((t1 - t0) & mask),
			 (unsigned long long)khz, ns,
			 (unsigned long long)mono_ns);
	}
}

/*
 * Completion timestamps of a real exchange: the receiver is told of one
 * receive by its completion channel and polls it STAMP_HOLD_MS later;
 * its stamp is not later than the moment the event was seen (taken when
 * the completion was generated, not when polled).  Then STAMP_MSGS
 * receives and their sends: stamps within the window of the test, in
 * order; the raw clock convertible with hca_core_clock.
 */
CF_BODY_IMPL(rc_ex, cq_ex_stamps)
{
	uint64_t wr_id[STAMP_MSGS], ts[STAMP_MSGS], t0, t1, mono0, seen;
	int got, i;

	if (!ep->arg && !ep->dev_ex.hca_core_clock) {
		cf_ep_skip(ep, "hca_core_clock is 0: no completion timestamps");
		return 0;
	}
	if (ep->side == CF_CHILD) {
		for (i = 0; i <= STAMP_MSGS; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp,
							(size_t)i * 256, 256,
							(uint64_t)i),
				   "ibv_post_recv failed");
		EP_REQUIRE(ep, !ibv_req_notify_cq(ep->cq, 0),
			   "ibv_req_notify_cq failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		EP_REQUIRE(ep, cf_ep_wait_cq_event(ep, WAIT_MS) == 1,
			   "no completion event for the first receive");
		seen = stamp_now(ep);
		usleep(STAMP_HOLD_MS * 1000);
		got = poll_stamps(ep, wr_id, ts, 1, WAIT_MS);
		EP_CHECK(ep, got == 1, "%d first receives of 1", got);
		if (got == 1)
			EP_CHECK(ep, ts[0] <= seen,
				 "stamp %llu is later than the moment its "
				 "completion event was seen (%llu): taken when "
				 "polled, not when generated",
				 (unsigned long long)ts[0],
				 (unsigned long long)seen);
		mono0 = clock_ns(CLOCK_MONOTONIC);
		t0 = stamp_now(ep);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = poll_stamps(ep, wr_id, ts, STAMP_MSGS, WAIT_MS);
		t1 = stamp_now(ep);
		EP_CHECK(ep, got == STAMP_MSGS, "%d receives of %d", got,
			 STAMP_MSGS);
		check_stamps(ep, wr_id, ts, got, 1, t0, t1,
			     clock_ns(CLOCK_MONOTONIC) - mono0);
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 256, 41);
	if (cf_ep_sync(ep, WAIT_MS) ||
	    cf_ep_post1(ep, IBV_WR_SEND, 0, 64, 0, 100, IBV_SEND_SIGNALED))
		return -1;
	got = poll_stamps(ep, wr_id, ts, 1, WAIT_MS);
	EP_CHECK(ep, got == 1 && wr_id[0] == 100, "first send: %d", got);
	mono0 = clock_ns(CLOCK_MONOTONIC);
	t0 = stamp_now(ep);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < STAMP_MSGS; i++)
		if (cf_ep_post1(ep, IBV_WR_SEND, 0, 64, 0, (uint64_t)i + 1,
				IBV_SEND_SIGNALED))
			return -1;
	got = poll_stamps(ep, wr_id, ts, STAMP_MSGS, WAIT_MS);
	t1 = stamp_now(ep);
	EP_CHECK(ep, got == STAMP_MSGS, "%d sends of %d", got, STAMP_MSGS);
	check_stamps(ep, wr_id, ts, got, 1, t0, t1,
		     clock_ns(CLOCK_MONOTONIC) - mono0);
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(cq_ex_stamps)
{
	p->cq_ex = true;
	p->channel = true;
	p->cq_ex_wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
			    (arg ? IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK
				 : IBV_WC_EX_WITH_COMPLETION_TIMESTAMP);
}

/*
 * The readers of a UD receive (ibv_create_cq_ex(3) with every standard
 * flag): byte_len with the 40-byte GRH area, the immediate, our QP, the
 * sender's QP and LID, SL 0 and no path bits (the sender's AH asks for
 * SL 0 and path bits 0), as ibv_poll_cq reports them (manual 3.6).
 */
CF_BODY_IMPL(rc_ex, cq_ex_ud_readers)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	const uint32_t imm = htonl(0x5eed);
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int got, ret = ENOENT;
	long long deadline;

	if (ep->side == CF_CHILD) {
		struct ibv_cq_ex *cq = ep->cqx;

		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 40 + 512, 1),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		deadline = cf_now_ms() + WAIT_MS;
		while (cf_now_ms() < deadline &&
		       (ret = ibv_start_poll(cq, &pa)) == ENOENT)
			usleep(100);
		EP_REQUIRE(ep, !ret, "ibv_start_poll: %s", cf_errname(ret));
		EP_CHECK(ep, cq->wr_id == 1 && cq->status == IBV_WC_SUCCESS &&
			 ibv_wc_read_opcode(cq) == IBV_WC_RECV,
			 "wr_id %llu %s", (unsigned long long)cq->wr_id,
			 ibv_wc_status_str(cq->status));
		EP_CHECK(ep, ibv_wc_read_byte_len(cq) == 40 + 300,
			 "byte_len %u, expected 340", ibv_wc_read_byte_len(cq));
		EP_CHECK(ep, (ibv_wc_read_wc_flags(cq) & IBV_WC_WITH_IMM) &&
			 ibv_wc_read_imm_data(cq) == imm,
			 "wc_flags 0x%x imm 0x%x", ibv_wc_read_wc_flags(cq),
			 ibv_wc_read_imm_data(cq));
		EP_CHECK(ep, ibv_wc_read_qp_num(cq) == ep->qp->qp_num,
			 "qp_num 0x%x, expected 0x%x", ibv_wc_read_qp_num(cq),
			 ep->qp->qp_num);
		EP_CHECK(ep, ibv_wc_read_src_qp(cq) == ep->peer.qpn[0],
			 "src_qp 0x%x, expected the sender's 0x%x",
			 ibv_wc_read_src_qp(cq), ep->peer.qpn[0]);
		if (ep->port.link_layer != IBV_LINK_LAYER_ETHERNET)
			EP_CHECK(ep, ibv_wc_read_slid(cq) == ep->peer.lid,
				 "slid 0x%x, expected the sender's 0x%x",
				 ibv_wc_read_slid(cq), ep->peer.lid);
		EP_CHECK(ep, ibv_wc_read_sl(cq) == 0, "sl %u, expected 0",
			 ibv_wc_read_sl(cq));
		EP_CHECK(ep, ibv_wc_read_dlid_path_bits(cq) == 0,
			 "dlid_path_bits %u, expected 0",
			 ibv_wc_read_dlid_path_bits(cq));
		ibv_end_poll(cq);
		EP_CHECK(ep, cf_pattern_check(ep->buf + 40, 300, 51) < 0,
			 "UD payload differs");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 300, 51);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND_WITH_IMM, 0, 300, 7);
	wr.imm_data = imm;
	wr.wr.ud.ah = ep->ah;
	wr.wr.ud.remote_qpn = ep->peer.qpn[0];
	wr.wr.ud.remote_qkey = ep->peer.qkey;
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 7, IBV_WC_SEND, "UD SEND_WITH_IMM");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(cq_ex_ud)
{
	p->qp_type = IBV_QPT_UD;
	p->max_sge = 1;
	p->cq_ex = true;
	p->cq_ex_wc_flags = IBV_WC_STANDARD_FLAGS;
}

/* ---- RDMA ATOMIC WRITE (IBA 1.5; ibv_wr_atomic_write(3)) ---- */

#if HAVE_DECL_IBV_WR_ATOMIC_WRITE

#define AW_OFF 4096		/* the target word, aligned */
#define AW_A 0x0123456789abcdefull
#define AW_B 0xfedcba9876543210ull
#define AW_WRITES 2000

/* Post one ibv_wr_atomic_write of value to the peer's buffer at roff;
 * EOPNOTSUPP (no atomic write on this device) becomes a skip (1). */
static int atomic_write_post(struct cf_ep *ep, uint64_t roff, uint64_t value,
			     uint64_t wr_id, unsigned int flags)
{
	struct ibv_qp_ex *qx = ep->qpx;
	int ret;

	ibv_wr_start(qx);
	qx->wr_id = wr_id;
	qx->wr_flags = flags;
	ibv_wr_atomic_write(qx, ep->peer.rkey, ep->peer.addr + roff, &value);
	ret = cf_rc(ibv_wr_complete(qx));
	if (ret == EOPNOTSUPP) {
		cf_ep_skip(ep, "ibv_wr_atomic_write: EOPNOTSUPP");
		return 1;
	}
	return EP_CHECK(ep, !ret, "ibv_wr_complete(atomic write): %s",
			cf_errname(ret)) ? 0 : -1;
}

/*
 * A device whose provider takes the work request but whose HCA does not
 * execute RDMA ATOMIC WRITE completes it with a local QP operation
 * error, the status of an operation the QP does not support (IBA
 * 10.8.3); rdma-core 44 has no capability flag to ask first (kernel 6.1's
 * rxe does this).  Then the tests of the operation skip.
 */
static bool aw_unsupported(struct cf_ep *ep, const struct ibv_wc *wc)
{
	if (wc->status != IBV_WC_LOC_QP_OP_ERR)
		return false;
	cf_ep_skip(ep, "RDMA ATOMIC WRITE: the first one completed with a "
		   "local QP operation error: the device does not execute it");
	return true;
}

/*
 * ibv_wr_atomic_write: the 8 bytes land as one value.  The responder
 * reads its word all along while the requester writes A and B in turn:
 * every value seen is 0 (before the first), A or B, never a mix; the
 * bytes around the word are untouched; completions are
 * IBV_WC_ATOMIC_WRITE.
 */
CF_BODY_IMPL(rc_ex, wr_atomic_write)
{
	volatile uint64_t *word = (volatile uint64_t *)(void *)(ep->buf +
								 AW_OFF);
	struct pollfd pfd = { .fd = ep->sock, .events = POLLIN };
	uint64_t v, torn = 0, reads = 0, verdict = 0;
	unsigned int changed = 0;
	struct ibv_wc wc[16];
	long long deadline;
	int got, i, done = 0, posted = 0, ret;

	if (ep->side == CF_CHILD) {
		memset(ep->buf + AW_OFF - 64, 0xee, 64);
		memset(ep->buf + AW_OFF + 8, 0xee, 64);
		*word = 0;
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		/* Read the word until the requester's verdict arrives: 1
		 * when its writes completed, 0 when it skipped. */
		deadline = cf_now_ms() + WAIT_MS * 4;
		while (cf_now_ms() < deadline) {
			v = *word;
			reads++;
			if (v != 0 && v != AW_A && v != AW_B && !torn)
				torn = v;
			if ((reads & 1023) == 0 && poll(&pfd, 1, 0) > 0)
				break;
		}
		if (cf_ep_recv_val(ep, &verdict, WAIT_MS))
			return -1;
		if (!verdict)
			return cf_ep_sync(ep, WAIT_MS);
		EP_CHECK(ep, !torn, "the word read 0x%016llx: part of one "
			 "atomic write and part of another",
			 (unsigned long long)torn);
		EP_CHECK(ep, *word == AW_B, "the word is 0x%016llx after the "
			 "last atomic write of 0x%016llx",
			 (unsigned long long)*word,
			 (unsigned long long)AW_B);
		for (i = 0; i < 64; i++)
			changed += ep->buf[AW_OFF - 64 + i] != 0xee ||
				   ep->buf[AW_OFF + 8 + i] != 0xee;
		EP_CHECK(ep, !changed, "%u bytes around the word changed",
			 changed);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	deadline = cf_now_ms() + WAIT_MS * 3;
	while (done < AW_WRITES && cf_now_ms() < deadline) {
		if (posted < AW_WRITES && posted - done < 8) {
			ret = atomic_write_post(ep, AW_OFF,
						posted & 1 ? AW_B : AW_A,
						(uint64_t)posted,
						IBV_SEND_SIGNALED);
			if (ret > 0) {
				cf_ep_send_val(ep, 0);
				return cf_ep_sync(ep, WAIT_MS);
			}
			if (ret)
				return -1;
			posted++;
		}
		got = ibv_poll_cq(ep->cq, 16, wc);
		if (got > 0 && done == 0 && aw_unsupported(ep, &wc[0])) {
			cf_ep_send_val(ep, 0);
			return cf_ep_sync(ep, WAIT_MS);
		}
		for (i = 0; i < got; i++, done++)
			if (!cf_ep_wc_ok(ep, &wc[i], 1, (uint64_t)done,
					 IBV_WC_ATOMIC_WRITE,
					 "ibv_wr_atomic_write"))
				return -1;
	}
	EP_CHECK(ep, done == AW_WRITES, "%d atomic writes completed of %d",
		 done, AW_WRITES);
	if (cf_ep_send_val(ep, 1))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(wr_atomic_write)
{
	p->qp_ex = true;
	p->send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	/* The responder's process spins on the word: on a loaded or
	 * instrumented host (valgrind runs one thread at a time) its HCA
	 * may answer late, which is no part of what is tested here.
	 * 4.096 us * 2^17 = 537 ms a try. */
	p->timeout = 17;
}

/*
 * The errors of an atomic write: arg 0, an R_Key without remote write
 * access: IBV_WC_REM_ACCESS_ERR (IBA 9.7.5.2.4); arg 1, an address not
 * aligned to 8: IBV_WC_REM_INV_REQ_ERR (IBA 9.4.5, NAK Invalid Request,
 * as for the atomics).  The target is not written.
 */
CF_BODY_IMPL(rc_ex, wr_atomic_write_err)
{
	uint64_t roff = ep->arg ? AW_OFF + 4 : AW_OFF;
	struct ibv_wc wc;
	unsigned int changed = 0;
	int got, ret, i;

	if (ep->side == CF_CHILD) {
		memset(ep->buf + AW_OFF - 64, 0xee, 128);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		for (i = 0; i < 128; i++)
			changed += ep->buf[AW_OFF - 64 + i] != 0xee;
		EP_CHECK(ep, !changed, "%u target bytes changed by a failed "
			 "atomic write", changed);
		return 0;
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	ret = atomic_write_post(ep, roff, AW_A, 9, IBV_SEND_SIGNALED);
	if (ret > 0)
		return cf_ep_sync(ep, WAIT_MS);
	if (ret)
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (got == 1 && aw_unsupported(ep, &wc))
		return cf_ep_sync(ep, WAIT_MS);
	cf_ep_expect_wc(ep, &wc, got, 9,
			ep->arg ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_ACCESS_ERR,
			-1, ep->arg ? "misaligned atomic write"
				    : "atomic write without remote write access");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(wr_atomic_write_err)
{
	p->qp_ex = true;
	p->send_ops_flags = IBV_QP_EX_WITH_ATOMIC_WRITE;
	/* The QP allows remote writes; the region only for arg 1. */
	if (!arg)
		p->mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
}
#else
/* The libibverbs headers built with predate rdma-core 44, which added
 * RDMA ATOMIC WRITE to the verbs: nothing to post it with. */
#define AW_NO_HEADERS "built against libibverbs headers older than " \
		      "rdma-core 44: no ibv_wr_atomic_write"
CF_BODY_IMPL(rc_ex, wr_atomic_write)
{
	cf_ep_skip(ep, AW_NO_HEADERS);
	return 0;
}

CF_TUNE_IMPL(wr_atomic_write)
{
	(void)p;
	(void)arg;
}

CF_BODY_IMPL(rc_ex, wr_atomic_write_err)
{
	cf_ep_skip(ep, AW_NO_HEADERS);
	return 0;
}

CF_TUNE_IMPL(wr_atomic_write_err)
{
	(void)p;
	(void)arg;
}
#endif

/* ---- thread and parent domains (ibv_alloc_td(3),
 * ibv_alloc_parent_domain(3)) ---- */

/*
 * MR, QP and CQ made on a parent domain (with a thread domain and
 * allocators): SEND, RDMA WRITE and RDMA READ between the two sides with
 * the data checked; the PD, the TD and the parent domain cannot be
 * deallocated while in use (EBUSY); the allocators, when the device
 * calls them, are called with the parent domain and our pd_context.
 */
CF_BODY_IMPL(rc_ex, parent_domain)
{
	struct ibv_wc wc;
	int got, ret;

	ret = ibv_dealloc_pd(ep->pd);
	EP_CHECK(ep, ret == EBUSY, "ibv_dealloc_pd of the parent domain's "
		 "PD: %s, expected EBUSY", cf_errname(ret));
	ret = ibv_dealloc_td(ep->td);
	EP_CHECK(ep, ret == EBUSY, "ibv_dealloc_td in use: %s, expected "
		 "EBUSY", cf_errname(ret));
	ret = ibv_dealloc_pd(ep->pdom);
	EP_CHECK(ep, ret == EBUSY, "ibv_dealloc_pd of a parent domain with "
		 "an MR, a QP and a CQ: %s, expected EBUSY", cf_errname(ret));
	EP_CHECK(ep, !ep->pd_alloc_wrong, "the allocators were called %u "
		 "times with another PD or context", ep->pd_alloc_wrong);
	/* test_td.c: a device held to calling them */
	if (getenv("CF_EXPECT_PD_ALLOCATORS"))
		EP_CHECK(ep, ep->pd_allocs > 0, "CF_EXPECT_PD_ALLOCATORS: the "
			 "allocators were never called for the QP and CQ");
	if (ep->side == CF_CHILD) {
		cf_pattern_fill(ep->buf + 8192, 3000, 62);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_RECV, "SEND"))
			EP_CHECK(ep, wc.byte_len == 2000 &&
				 cf_pattern_check(ep->buf, 2000, 61) < 0,
				 "SEND: %u bytes or data differs", wc.byte_len);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		EP_CHECK(ep, cf_pattern_check(ep->buf + 4096, 1500, 63) < 0,
			 "RDMA WRITE: data differs");
		return 0;
	}
	cf_pattern_fill(ep->buf, 2000, 61);
	cf_pattern_fill(ep->buf + 4096, 1500, 63);
	if (cf_ep_sync(ep, WAIT_MS) ||
	    cf_ep_post1(ep, IBV_WR_SEND, 0, 2000, 0, 1, IBV_SEND_SIGNALED) ||
	    cf_ep_post1(ep, IBV_WR_RDMA_WRITE, 4096, 1500, 4096, 2,
			IBV_SEND_SIGNALED) ||
	    cf_ep_post1(ep, IBV_WR_RDMA_READ, 8192, 3000, 8192, 3,
			IBV_SEND_SIGNALED))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_SEND, "SEND");
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 2, IBV_WC_RDMA_WRITE, "RDMA WRITE");
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 3, IBV_WC_RDMA_READ, "RDMA READ");
	EP_CHECK(ep, cf_pattern_check(ep->buf + 8192, 3000, 62) < 0,
		 "RDMA READ: data differs");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(parent_domain)
{
	p->parent_domain = true;
}
