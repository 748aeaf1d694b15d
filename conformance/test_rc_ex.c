// SPDX-License-Identifier: MIT
/*
 * The extended verbs on RC between two processes (peer.h):
 * ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS and the ibv_wr_*
 * builders (man ibv_wr_post(3)), and ibv_create_cq_ex with
 * ibv_start_poll / ibv_next_poll / ibv_end_poll and the ibv_wc_read_*
 * readers (man ibv_create_cq_ex(3)).  The operations are those of IBA 9.4;
 * doc/design.md §3 lists the extended API that ibemu offers.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
};

/* ibv_start_poll / ibv_next_poll / ibv_end_poll with a deadline. */
static int poll_ex(struct cf_ep *ep, struct exwc *out, int n, int timeout_ms)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	struct ibv_cq_ex *cq = ep->cqx;
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

			w->wr_id = cq->wr_id;
			w->status = cq->status;
			w->opcode = ibv_wc_read_opcode(cq);
			w->byte_len = ibv_wc_read_byte_len(cq);
			w->qp_num = ibv_wc_read_qp_num(cq);
			w->flags = ibv_wc_read_wc_flags(cq);
			w->imm = w->flags & IBV_WC_WITH_IMM ?
					 ibv_wc_read_imm_data(cq) : 0;
			ret = got < n ? ibv_next_poll(cq) : ENOENT;
		} while (!ret);
		ibv_end_poll(cq);
	}
	return got;
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
