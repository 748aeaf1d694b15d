// SPDX-License-Identifier: MIT
/*
 * RC operations between two processes (peer.h): SEND / RECV with and
 * without immediate data, inline data, scatter/gather, RDMA WRITE (with
 * immediate), RDMA READ, atomics, unsignaled sends, fences, solicited
 * events, completion channels, ordering and asynchronous progress.
 * Manual 3.6 (ibv_post_send / ibv_post_recv / ibv_poll_cq), IBA 9.4
 * (transport operations), 9.5 (ordering), 10.7 (completion events),
 * 11.4.1.1 (send WR attributes).  Every payload is checked byte for byte.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000

static int post_send1(struct cf_ep *ep, enum ibv_wr_opcode op, size_t off,
		      uint32_t len, uint64_t wr_id, unsigned int flags)
{
	return cf_ep_post1(ep, op, off, len, 0, wr_id, flags);
}

/* A one-sided WR towards the peer's buffer at roff. */
static int post_rdma(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		     uint32_t len, uint64_t roff, uint64_t wr_id)
{
	return cf_ep_post1(ep, op, loff, len, roff, wr_id, IBV_SEND_SIGNALED);
}

static int post_atomic(struct cf_ep *ep, struct ibv_qp *qp,
		       enum ibv_wr_opcode op, size_t loff, uint64_t roff,
		       uint64_t cmp_add, uint64_t swap, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int ret;

	cf_ep_send_wr(ep, &wr, &sge, op, loff, 8, wr_id);
	wr.wr.atomic.remote_addr = ep->peer.addr + roff;
	wr.wr.atomic.rkey = ep->peer.rkey;
	wr.wr.atomic.compare_add = cmp_add;
	wr.wr.atomic.swap = swap;
	ret = cf_rc(ibv_post_send(qp, &wr, &bad));
	return EP_CHECK(ep, !ret, "%s: ibv_post_send(atomic %d): %s",
			cf_side_name(ep), op, cf_errname(ret)) ? 0 : -1;
}

/*
 * SEND / RECV of 0 B to 1 MiB (IBA 9.4.1): messages longer than the path
 * MTU are segmented (IBA 9.7.1); byte_len is the message length (manual
 * 3.6, struct ibv_wc) and the receive buffer past it is untouched.
 */
CF_BODY_IMPL(rc_ops, send_sizes)
{
	static const uint32_t sizes[] = { 0, 1, 4095, 4096, 4097, 1u << 20 };
	struct ibv_wc wc;
	size_t i;
	long bad;
	int got;

	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		uint32_t len = sizes[i];
		char what[64];

		snprintf(what, sizeof(what), "SEND of %u bytes", len);
		if (ep->side == CF_CHILD) {
			memset(ep->buf, 0xee, len + 4096);
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0,
							len + 4096, 10 + i),
				   "ibv_post_recv failed");
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			if (!cf_ep_wc_ok(ep, &wc, got, 10 + i, IBV_WC_RECV,
					 what))
				return -1;
			EP_CHECK(ep, wc.byte_len == len &&
				 wc.qp_num == ep->qp->qp_num &&
				 !(wc.wc_flags & IBV_WC_WITH_IMM),
				 "%s: byte_len %u qp_num 0x%x wc_flags 0x%x, "
				 "expected %u 0x%x without WITH_IMM", what,
				 wc.byte_len, wc.qp_num, wc.wc_flags, len,
				 ep->qp->qp_num);
			bad = cf_pattern_check(ep->buf, len, 1000 + i);
			EP_CHECK(ep, bad < 0, "%s: received data differs at "
				 "byte %ld", what, bad);
			bad = cf_bytes_check(ep->buf + len, 4096, 0xee);
			EP_CHECK(ep, bad < 0, "%s: receive buffer written "
				 "past the message, at byte %ld", what,
				 len + bad);
		} else {
			cf_pattern_fill(ep->buf, len, 1000 + i);
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
			if (post_send1(ep, IBV_WR_SEND, 0, len, 20 + i,
				       IBV_SEND_SIGNALED))
				return -1;
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			if (!cf_ep_wc_ok(ep, &wc, got, 20 + i, IBV_WC_SEND,
					 what))
				return -1;
		}
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
	}
	return 0;
}

/*
 * SEND with immediate (IBA 9.4.1, manual 3.6 struct ibv_wc): the receive
 * completion has IBV_WC_WITH_IMM and imm_data as sent (network order,
 * untouched); a plain SEND has no WITH_IMM.
 */
CF_BODY_IMPL(rc_ops, send_imm)
{
	const uint32_t imm = htonl(0x12345678);
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[2];
	int got;

	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0, 8192);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1) &&
			   !cf_ep_post_recv(ep, ep->qp, 4096, 4096, 2),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
		EP_REQUIRE(ep, got == 2, "%d receive completions of 2", got);
		if (cf_ep_wc_ok(ep, &wc[0], 1, 1, IBV_WC_RECV, "SEND_WITH_IMM"))
			EP_CHECK(ep, (wc[0].wc_flags & IBV_WC_WITH_IMM) &&
				 wc[0].imm_data == imm &&
				 wc[0].byte_len == 100,
				 "SEND_WITH_IMM: wc_flags 0x%x imm_data 0x%x "
				 "byte_len %u, expected WITH_IMM 0x%x 100",
				 wc[0].wc_flags, wc[0].imm_data,
				 wc[0].byte_len, imm);
		if (cf_ep_wc_ok(ep, &wc[1], 1, 2, IBV_WC_RECV, "SEND"))
			EP_CHECK(ep, !(wc[1].wc_flags & IBV_WC_WITH_IMM),
				 "plain SEND: completion has WITH_IMM");
		EP_CHECK(ep, cf_pattern_check(ep->buf, 100, 7) < 0 &&
			 cf_pattern_check(ep->buf + 4096, 50, 8) < 0,
			 "SEND_WITH_IMM: received data differs");
	} else {
		cf_pattern_fill(ep->buf, 100, 7);
		cf_pattern_fill(ep->buf + 4096, 50, 8);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND_WITH_IMM, 0, 100, 1);
		wr.imm_data = imm;
		EP_REQUIRE(ep, !ibv_post_send(ep->qp, &wr, &bad),
			   "ibv_post_send(SEND_WITH_IMM) failed");
		if (post_send1(ep, IBV_WR_SEND, 4096, 50, 2,
			       IBV_SEND_SIGNALED))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
		EP_REQUIRE(ep, got == 2, "%d send completions of 2", got);
		cf_ep_wc_ok(ep, &wc[0], 1, 1, IBV_WC_SEND, "SEND_WITH_IMM");
		cf_ep_wc_ok(ep, &wc[1], 1, 2, IBV_WC_SEND, "SEND");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * IBV_SEND_INLINE (manual 3.6 ibv_post_send): the data is copied at post
 * time, so the buffer may be reused at once and need not be registered.
 */
CF_BODY_IMPL(rc_ops, inline)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint32_t len = ep->init.cap.max_inline_data;
	uint8_t *priv;
	int got, ret;

	if (len < 16) {
		cf_ep_skip(ep, "max_inline_data granted is %u", len);
		return 0;
	}
	if (len > 256)
		len = 256;
	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0xee, 4096);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 1),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_RECV, "inline SEND"))
			EP_CHECK(ep, wc.byte_len == len,
				 "inline SEND: byte_len %u, expected %u",
				 wc.byte_len, len);
		EP_CHECK(ep, cf_pattern_check(ep->buf, len, 77) < 0,
			 "inline SEND: received data differs (buffer "
			 "overwritten after post must not matter)");
		EP_CHECK(ep, cf_bytes_check(ep->buf + len, 64, 0xee) < 0,
			 "inline SEND: written past the message");
	} else {
		/* Unregistered memory: lkey is not used for inline. */
		priv = malloc(len);
		EP_REQUIRE(ep, priv, "malloc");
		cf_pattern_fill(priv, len, 77);
		if (cf_ep_sync(ep, WAIT_MS)) {
			free(priv);
			return -1;
		}
		memset(&wr, 0, sizeof(wr));
		sge.addr = (uintptr_t)priv;
		sge.length = len;
		sge.lkey = 0;
		wr.wr_id = 1;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		ret = cf_rc(ibv_post_send(ep->qp, &wr, &bad));
		memset(priv, 0x55, len);
		free(priv);
		EP_REQUIRE(ep, !ret, "ibv_post_send(INLINE, %u): %s", len,
			   cf_errname(ret));
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_SEND, "inline SEND");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(inline)
{
	p->max_inline = 128;
}

/* One inline RDMA WRITE of len bytes of pattern seed from a private
 * buffer, overwritten and freed as soon as the post returns, to the
 * peer's buffer at roff; ibv_post_send's return. */
static int post_inline_write(struct cf_ep *ep, uint32_t len, uint64_t roff,
			     int seed, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad = NULL;
	struct ibv_sge sge;
	uint8_t *priv = malloc(len);
	int ret;

	if (!priv)
		return ENOMEM;
	cf_pattern_fill(priv, len, seed);
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_RDMA_WRITE, 0, len, wr_id);
	/* Unregistered memory: lkey is not used for inline. */
	sge.addr = (uintptr_t)priv;
	sge.lkey = 0;
	wr.send_flags |= IBV_SEND_INLINE;
	wr.wr.rdma.remote_addr = ep->peer.addr + roff;
	wr.wr.rdma.rkey = ep->peer.rkey;
	ret = cf_rc(ibv_post_send(ep->qp, &wr, &bad));
	memset(priv, 0x55, len);
	free(priv);
	if (ret && bad != &wr)
		EP_CHECK(ep, 0, "inline RDMA WRITE refused, bad_wr %p not "
			 "the WR", (void *)bad);
	return ret;
}

/*
 * A stream of inline RDMA WRITEs into one region (manual 3.6
 * ibv_post_send, IBA 9.4.3): each lands whole at its address from a
 * buffer reused at once, nothing between them changes.  One longer than
 * max_inline_data is refused at post time (bad_wr names it; errno is the
 * device's: EINVAL on rxe, ENOMEM on mlx5), lands nothing, and the QP
 * goes on.
 */
#define INLINE_WRITES 64
#define INLINE_STRIDE 256
CF_BODY_IMPL(rc_ops, inline_write)
{
	uint32_t max = ep->init.cap.max_inline_data;
	const size_t span = (INLINE_WRITES + 2) * INLINE_STRIDE;
	struct ibv_wc wc;
	uint32_t len;
	int i, got, ret;

	if (max < 16) {
		cf_ep_skip(ep, "max_inline_data granted is %u", max);
		return 0;
	}
	if (max > INLINE_STRIDE - 8)
		max = INLINE_STRIDE - 8;
	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0xee, span);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		for (i = 0; i < INLINE_WRITES + 2; i++) {
			const uint8_t *at = ep->buf + (size_t)i * INLINE_STRIDE;

			len = i == INLINE_WRITES ? 0 : 1 + (uint32_t)i % max;
			EP_CHECK(ep, cf_pattern_check(at, len, 100 + i) < 0,
				 "inline RDMA WRITE %d (%u B): data differs "
				 "at %ld", i, len,
				 cf_pattern_check(at, len, 100 + i));
			EP_CHECK(ep, cf_bytes_check(at + len,
						    INLINE_STRIDE - len,
						    0xee) < 0,
				 "inline RDMA WRITE %d (%u B): bytes past it "
				 "changed", i, len);
		}
	} else {
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		for (i = 0; i < INLINE_WRITES; i++) {
			len = 1 + (uint32_t)i % max;
			ret = post_inline_write(ep, len,
						(uint64_t)i * INLINE_STRIDE,
						100 + i, i);
			EP_REQUIRE(ep, !ret, "inline RDMA WRITE %d (%u B): "
				   "ibv_post_send: %s", i, len,
				   cf_errname(ret));
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			if (!cf_ep_wc_ok(ep, &wc, got, i, IBV_WC_RDMA_WRITE,
					 "inline RDMA WRITE"))
				return -1;
		}
		/* Past the QP's inline size: refused, the 0xee stays. */
		len = ep->init.cap.max_inline_data + 1;
		ret = post_inline_write(ep, len,
					(uint64_t)INLINE_WRITES *
						INLINE_STRIDE, 200, 98);
		EP_CHECK(ep, ret, "inline RDMA WRITE of %u B, past "
			 "max_inline_data %u, accepted", len, len - 1);
		if (ret)
			EP_CHOICE(ep, "an inline RDMA WRITE past "
				  "max_inline_data is refused with %s",
				  cf_errname(ret));
		else if (cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS) < 1)
			return -1;
		/* The QP still works after the refused post. */
		i = INLINE_WRITES + 1;
		len = 1 + (uint32_t)i % max;
		ret = post_inline_write(ep, len, (uint64_t)i * INLINE_STRIDE,
					100 + i, 99);
		EP_REQUIRE(ep, !ret, "inline RDMA WRITE after the refused "
			   "one: ibv_post_send: %s", cf_errname(ret));
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 99, IBV_WC_RDMA_WRITE,
			    "inline RDMA WRITE after the refused one");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Scatter/gather (IBA 10.7.2.1, manual 3.6 struct ibv_sge): the message is
 * the concatenation of the sender's SGEs and is scattered across the
 * receiver's SGEs in order.
 */
CF_BODY_IMPL(rc_ops, sge)
{
	static const uint32_t slen[3] = { 100, 2000, 3001 };
	static const uint32_t rlen[3] = { 1500, 64, 4000 };
	static const size_t soff[3] = { 0, 10000, 20000 };
	static const size_t roff[3] = { 30000, 40000, 50000 };
	const uint32_t total = 100 + 2000 + 3001;
	struct ibv_sge sge[3];
	struct ibv_wc wc;
	uint8_t *all;
	uint32_t pos, n;
	int i, got, ret;

	if (ep->init.cap.max_send_sge < 3 || ep->init.cap.max_recv_sge < 3) {
		cf_ep_skip(ep, "fewer than 3 SGEs per WR (max_sge %d)",
			   ep->dev->max_sge);
		return 0;
	}
	all = malloc(total);
	EP_REQUIRE(ep, all, "malloc");
	cf_pattern_fill(all, total, 33);
	for (i = 0; i < 3; i++)
		sge[i].lkey = ep->mr->lkey;
	if (ep->side == CF_CHILD) {
		struct ibv_recv_wr wr, *bad;

		memset(ep->buf, 0xee, 60000);
		for (i = 0; i < 3; i++) {
			sge[i].addr = (uintptr_t)ep->buf + roff[i];
			sge[i].length = rlen[i];
		}
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 5;
		wr.sg_list = sge;
		wr.num_sge = 3;
		ret = cf_rc(ibv_post_recv(ep->qp, &wr, &bad));
		EP_REQUIRE(ep, !ret, "ibv_post_recv(3 SGEs): %s",
			   cf_errname(ret));
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 5, IBV_WC_RECV, "SEND 3 SGEs"))
			EP_CHECK(ep, wc.byte_len == total,
				 "byte_len %u, expected %u", wc.byte_len,
				 total);
		for (i = 0, pos = 0; i < 3; i++, pos += n) {
			n = total - pos < rlen[i] ? total - pos : rlen[i];
			EP_CHECK(ep, !memcmp(ep->buf + roff[i], all + pos, n),
				 "receive SGE %d differs", i);
			EP_CHECK(ep, cf_bytes_check(ep->buf + roff[i] + n,
						    rlen[i] - n + 16, 0xee) < 0,
				 "receive SGE %d: written past its data", i);
		}
	} else {
		struct ibv_send_wr wr, *bad;

		for (i = 0, pos = 0; i < 3; pos += slen[i], i++) {
			memcpy(ep->buf + soff[i], all + pos, slen[i]);
			sge[i].addr = (uintptr_t)ep->buf + soff[i];
			sge[i].length = slen[i];
		}
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 6;
		wr.sg_list = sge;
		wr.num_sge = 3;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		ret = cf_rc(ibv_post_send(ep->qp, &wr, &bad));
		EP_CHECK(ep, !ret, "ibv_post_send(3 SGEs): %s",
			 cf_errname(ret));
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 6, IBV_WC_SEND, "SEND 3 SGEs");
	}
	cf_ep_sync(ep, WAIT_MS);
out:
	free(all);
	return 0;
}

/*
 * RDMA WRITE (IBA 9.4.3): the data lands at remote_addr in the peer's MR,
 * nothing around it changes, and the target consumes no receive.
 */
CF_BODY_IMPL(rc_ops, write)
{
	static const uint32_t sizes[] = { 1, 4095, 4097, 1u << 20 };
	const size_t roff = 8;
	struct ibv_wc wc;
	size_t i;
	int got;

	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		uint32_t len = sizes[i];

		if (ep->side == CF_CHILD) {
			memset(ep->buf, 0xee, len + 4096);
			if (cf_ep_sync(ep, WAIT_MS) ||
			    cf_ep_sync(ep, WAIT_MS))
				return -1;
			EP_CHECK(ep, cf_bytes_check(ep->buf, roff, 0xee) < 0,
				 "RDMA WRITE %u: bytes before remote_addr "
				 "changed", len);
			EP_CHECK(ep, cf_pattern_check(ep->buf + roff, len,
						      50 + i) < 0,
				 "RDMA WRITE %u: target data differs at %ld",
				 len, cf_pattern_check(ep->buf + roff, len,
						       50 + i));
			EP_CHECK(ep, cf_bytes_check(ep->buf + roff + len, 64,
						    0xee) < 0,
				 "RDMA WRITE %u: written past the end", len);
			EP_CHECK(ep, ibv_poll_cq(ep->cq, 1, &wc) == 0,
				 "RDMA WRITE made a completion at the target");
		} else {
			cf_pattern_fill(ep->buf, len, 50 + i);
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
			if (post_rdma(ep, IBV_WR_RDMA_WRITE, 0, len, roff,
				      i))
				return -1;
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			cf_ep_wc_ok(ep, &wc, got, i, IBV_WC_RDMA_WRITE,
			      "RDMA WRITE");
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
		}
	}
	return 0;
}

/*
 * RDMA WRITE with immediate (IBA 9.4.3, manual 3.6 ibv_wc): consumes a
 * receive whose completion is IBV_WC_RECV_RDMA_WITH_IMM with the
 * immediate and byte_len the length written; the receive buffer is not
 * written.
 */
CF_BODY_IMPL(rc_ops, write_imm)
{
	const uint32_t imm = htonl(0xcafe0001), len = 5000;
	const size_t roff = 65536;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0xee, 2 * roff);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 4096, 9),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 9, IBV_WC_RECV_RDMA_WITH_IMM,
			  "RDMA_WRITE_WITH_IMM"))
			EP_CHECK(ep, (wc.wc_flags & IBV_WC_WITH_IMM) &&
				 wc.imm_data == imm && wc.byte_len == len,
				 "RDMA_WRITE_WITH_IMM: wc_flags 0x%x imm 0x%x"
				 " byte_len %u, expected WITH_IMM 0x%x %u",
				 wc.wc_flags, wc.imm_data, wc.byte_len, imm,
				 len);
		/* The WRITE is placed before its completion (IBA 9.5). */
		EP_CHECK(ep, cf_pattern_check(ep->buf + roff, len, 91) < 0,
			 "RDMA_WRITE_WITH_IMM: target data differs");
		EP_CHECK(ep, cf_bytes_check(ep->buf, 4096, 0xee) < 0,
			 "RDMA_WRITE_WITH_IMM wrote into the receive buffer");
	} else {
		cf_pattern_fill(ep->buf, len, 91);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		cf_ep_send_wr(ep, &wr, &sge, IBV_WR_RDMA_WRITE_WITH_IMM, 0,
			      len, 3);
		wr.imm_data = imm;
		wr.wr.rdma.remote_addr = ep->peer.addr + roff;
		wr.wr.rdma.rkey = ep->peer.rkey;
		EP_REQUIRE(ep, !ibv_post_send(ep->qp, &wr, &bad),
			   "ibv_post_send(RDMA_WRITE_WITH_IMM) failed");
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 3, IBV_WC_RDMA_WRITE,
		      "RDMA_WRITE_WITH_IMM");
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * RDMA READ (IBA 9.4.4): 1 B to 1 MiB into local memory, one SGE, and one
 * read scattered into 3 local SGEs; byte_len of the completion is the
 * length read.
 */
CF_BODY_IMPL(rc_ops, read)
{
	static const uint32_t sizes[] = { 1, 4095, 4096, 4097, 1u << 20 };
	const size_t loff = 2u << 20;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge[3];
	struct ibv_wc wc;
	size_t i;
	int got;

	if (ep->side == CF_CHILD) {
		cf_pattern_fill(ep->buf, 1u << 20, 4242);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, 30000))
			return -1;
		EP_CHECK(ep, cf_pattern_check(ep->buf, 1u << 20, 4242) < 0,
			 "RDMA READ changed the target's memory");
		return 0;
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		uint32_t len = sizes[i];

		memset(ep->buf + loff, 0xee, len + 64);
		if (post_rdma(ep, IBV_WR_RDMA_READ, loff, len, 0, i))
			break;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, i, IBV_WC_RDMA_READ, "RDMA READ"))
			EP_CHECK(ep, wc.byte_len == len,
				 "RDMA READ %u: byte_len %u", len, wc.byte_len);
		EP_CHECK(ep, cf_pattern_check(ep->buf + loff, len, 4242) < 0,
			 "RDMA READ %u: data differs at %ld", len,
			 cf_pattern_check(ep->buf + loff, len, 4242));
		EP_CHECK(ep, cf_bytes_check(ep->buf + loff + len, 64, 0xee) <
			 0, "RDMA READ %u: written past the local SGE", len);
	}
	if (ep->init.cap.max_send_sge >= 3) {
		uint8_t ref[9000];
		static const uint32_t l[3] = { 1000, 3000, 5000 };
		static const size_t o[3] = { 0, 100000, 200000 };
		uint32_t pos = 0;
		int k;

		cf_pattern_fill(ref, sizeof(ref), 4242);
		memset(ep->buf + loff, 0xee, 300000);
		for (k = 0; k < 3; k++) {
			sge[k].addr = (uintptr_t)ep->buf + loff + o[k];
			sge[k].length = l[k];
			sge[k].lkey = ep->mr->lkey;
		}
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 99;
		wr.sg_list = sge;
		wr.num_sge = 3;
		wr.opcode = IBV_WR_RDMA_READ;
		wr.send_flags = IBV_SEND_SIGNALED;
		wr.wr.rdma.remote_addr = ep->peer.addr;
		wr.wr.rdma.rkey = ep->peer.rkey;
		EP_CHECK(ep, !ibv_post_send(ep->qp, &wr, &bad),
			 "ibv_post_send(RDMA READ, 3 SGEs) failed");
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 99, IBV_WC_RDMA_READ,
			    "RDMA READ 3 SGEs");
		for (k = 0; k < 3; pos += l[k], k++)
			EP_CHECK(ep, !memcmp(ep->buf + loff + o[k], ref + pos,
					     l[k]),
				 "RDMA READ into 3 SGEs: SGE %d differs", k);
	}
	return cf_ep_sync(ep, WAIT_MS);
}

static bool no_atomics(struct cf_ep *ep)
{
	if (ep->dev->atomic_cap != IBV_ATOMIC_NONE)
		return false;
	cf_ep_skip(ep, "device atomic_cap is IBV_ATOMIC_NONE");
	return true;
}

/*
 * Atomics (IBA 9.4.5, manual 3.6 wr.atomic): 8-byte aligned target; the
 * original value is returned in the local SGE; CMP_AND_SWP swaps only when
 * equal; FETCH_AND_ADD adds.  Values are host order (rdma-core).
 */
CF_BODY_IMPL(rc_ops, atomics)
{
	volatile uint64_t *tgt = (volatile uint64_t *)(void *)(ep->buf + 64);
	volatile uint64_t *res = (volatile uint64_t *)(void *)(ep->buf + 128);
	struct ibv_wc wc;
	int got;

	if (no_atomics(ep))
		return 0;
	if (ep->side == CF_CHILD) {
		*tgt = 0x1111;
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, 10000))
			return -1;
		EP_CHECK(ep, *tgt == 0x2227,
			 "target after CMP_SWP/CMP_SWP/FETCH_ADD: 0x%llx, "
			 "expected 0x2227", (unsigned long long)*tgt);
		return 0;
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	*res = 0xdead;
	post_atomic(ep, ep->qp, IBV_WR_ATOMIC_CMP_AND_SWP, 128, 64, 0x1111,
		    0x2222, 1);
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_COMP_SWAP,
			"CMP_AND_SWP (equal)"))
		EP_CHECK(ep, *res == 0x1111 && wc.byte_len == 8,
			 "CMP_AND_SWP returned 0x%llx byte_len %u, expected "
			 "0x1111 8", (unsigned long long)*res, wc.byte_len);
	*res = 0xdead;
	post_atomic(ep, ep->qp, IBV_WR_ATOMIC_CMP_AND_SWP, 128, 64, 0x9999,
		    0x7777, 2);
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (cf_ep_wc_ok(ep, &wc, got, 2, IBV_WC_COMP_SWAP,
			"CMP_AND_SWP (differ)"))
		EP_CHECK(ep, *res == 0x2222,
			 "CMP_AND_SWP (no swap) returned 0x%llx, expected "
			 "0x2222", (unsigned long long)*res);
	*res = 0xdead;
	post_atomic(ep, ep->qp, IBV_WR_ATOMIC_FETCH_AND_ADD, 128, 64, 5, 0,
		    3);
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (cf_ep_wc_ok(ep, &wc, got, 3, IBV_WC_FETCH_ADD, "FETCH_AND_ADD"))
		EP_CHECK(ep, *res == 0x2222,
			 "FETCH_AND_ADD returned 0x%llx, expected 0x2222",
			 (unsigned long long)*res);
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Contending atomics (IBA 9.4.5, IBV_ATOMIC_HCA: atomic with respect to
 * other atomics through the HCA): 2 QPs x 1000 FETCH_AND_ADD(1) on one
 * word, several in flight on each; the final value is exact and every
 * original value 0..1999 is returned exactly once.  The target sits in a
 * blocking read() meanwhile.
 */
#define CONTEND_N 1000
CF_BODY_IMPL(rc_ops, contend)
{
	volatile uint64_t *tgt = (volatile uint64_t *)(void *)ep->buf;
	const int total = 2 * CONTEND_N;
	int posted[2] = { 0, 0 }, fin[2] = { 0, 0 }, done = 0, depth, q, i;
	int got;
	uint8_t *seen;
	struct ibv_wc wc[16];
	long long deadline;

	if (no_atomics(ep))
		return 0;
	if (ep->side == CF_CHILD) {
		/* Zeroed before the requester starts (the start barrier). */
		*tgt = 0;
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		if (cf_ep_sync_blocking(ep, 30000))
			return -1;
		EP_CHECK(ep, *tgt == (uint64_t)total,
			 "after %d FETCH_AND_ADD(1): 0x%llx", total,
			 (unsigned long long)*tgt);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	seen = calloc(total, 1);
	EP_REQUIRE(ep, seen, "calloc");
	depth = ep->dev->max_qp_init_rd_atom < 8 ?
		ep->dev->max_qp_init_rd_atom : 8;
	if (depth < 1)
		depth = 1;
	deadline = cf_now_ms() + 20000;
	/* Result slots: qp q, index i -> buf + 4096 + (q * N + i) * 8. */
	while (done < total && cf_now_ms() < deadline) {
		for (q = 0; q < 2; q++)
			while (posted[q] < CONTEND_N &&
			       posted[q] - fin[q] < depth) {
				i = posted[q]++;
				if (post_atomic(ep, ep->qps[q],
						IBV_WR_ATOMIC_FETCH_AND_ADD,
						4096 + (size_t)(q * CONTEND_N +
								i) * 8,
						0, 1, 0,
						(uint64_t)(q * CONTEND_N + i)))
					goto out;
			}
		got = ibv_poll_cq(ep->cq, 16, wc);
		if (got < 0) {
			EP_CHECK(ep, 0, "ibv_poll_cq failed");
			goto out;
		}
		for (i = 0; i < got; i++) {
			uint64_t v;

			if (!EP_CHECK(ep, wc[i].status == IBV_WC_SUCCESS &&
				      wc[i].wr_id < (uint64_t)total,
				      "FETCH_AND_ADD #%llu: %s",
				      (unsigned long long)wc[i].wr_id,
				      ibv_wc_status_str(wc[i].status)))
				goto out;
			v = *(uint64_t *)(void *)(ep->buf + 4096 +
						  wc[i].wr_id * 8);
			EP_CHECK(ep, v < (uint64_t)total && !seen[v],
				 "FETCH_AND_ADD #%llu returned %llu (range or "
				 "duplicate)", (unsigned long long)wc[i].wr_id,
				 (unsigned long long)v);
			if (v < (uint64_t)total)
				seen[v] = 1;
			fin[wc[i].wr_id / CONTEND_N]++;
			done++;
		}
	}
	EP_CHECK(ep, done == total, "%d of %d FETCH_AND_ADD completed in 20 s",
		 done, total);
out:
	free(seen);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(contend)
{
	p->nqp = 2;
	p->cq_size = 64;
}

/*
 * Unsignaled sends (IBA 10.7.2.2 / manual 3.6 IBV_SEND_SIGNALED with
 * sq_sig_all 0): only the signaled WRs complete, in order.
 */
CF_BODY_IMPL(rc_ops, unsignaled)
{
	struct ibv_wc wc[12];
	int i, got;

	if (ep->side == CF_CHILD) {
		for (i = 0; i < 10; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, i * 64, 64,
							i),
				   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 10, WAIT_MS);
		EP_CHECK(ep, got == 10, "%d receives of 10 completed", got);
		for (i = 0; i < got; i++)
			EP_CHECK(ep, wc[i].status == IBV_WC_SUCCESS &&
				 wc[i].wr_id == (uint64_t)i &&
				 ep->buf[i * 64] == i,
				 "receive %d: %s wr_id %llu data %u", i,
				 ibv_wc_status_str(wc[i].status),
				 (unsigned long long)wc[i].wr_id,
				 ep->buf[i * 64]);
		return cf_ep_sync(ep, WAIT_MS);
	}
	for (i = 0; i < 10; i++)
		ep->buf[i * 64] = (uint8_t)i;
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < 10; i++)
		if (post_send1(ep, IBV_WR_SEND, (size_t)i * 64, 16, (uint64_t)i,
			       i == 4 || i == 9 ? IBV_SEND_SIGNALED : 0))
			return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_CHECK(ep, got == 2, "%d send completions, expected 2", got);
	if (got == 2) {
		cf_ep_wc_ok(ep, &wc[0], 1, 4, IBV_WC_SEND, "signaled SEND #4");
		cf_ep_wc_ok(ep, &wc[1], 1, 9, IBV_WC_SEND, "signaled SEND #9");
	}
	got = cf_poll_cq_wait(ep->cq, wc, 1, 200);
	EP_CHECK(ep, got == 0, "an unsignaled SEND completed (wr_id %llu)",
		 (unsigned long long)wc[0].wr_id);
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(unsignaled)
{
	p->sq_sig_all = false;
}

/*
 * Unsignaled RDMA WRITEs (IBA 10.7.2.2, 9.4.3): a stream of WRITEs posted
 * one at a time, two of them signaled; only those two complete, in
 * order, and every WRITE lands where it was aimed.
 */
#define UW_COUNT 16
#define UW_LEN 64

static uint8_t uw_byte(int msg, int i)
{
	return (uint8_t)(msg * 37 + i * 3 + 1);
}

CF_BODY_IMPL(rc_ops, unsignaled_write)
{
	struct ibv_wc wc[3];
	int i, j, got, bad = -1;

	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0, UW_COUNT * UW_LEN);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		for (i = 0; i < UW_COUNT && bad < 0; i++)
			for (j = 0; j < UW_LEN; j++)
				if (ep->buf[i * UW_LEN + j] != uw_byte(i, j)) {
					bad = i * UW_LEN + j;
					break;
				}
		EP_CHECK(ep, bad < 0, "the WRITEs' data differs at byte %d",
			 bad);
		return 0;
	}
	for (i = 0; i < UW_COUNT; i++)
		for (j = 0; j < UW_LEN; j++)
			ep->buf[i * UW_LEN + j] = uw_byte(i, j);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < UW_COUNT; i++)
		if (cf_ep_post1(ep, IBV_WR_RDMA_WRITE, (size_t)i * UW_LEN,
				UW_LEN, (uint64_t)i * UW_LEN, (uint64_t)i,
				i == 5 || i == UW_COUNT - 1 ? IBV_SEND_SIGNALED
							    : 0))
			return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_CHECK(ep, got == 2, "%d WRITE completions, expected 2", got);
	if (got == 2) {
		cf_ep_wc_ok(ep, &wc[0], 1, 5, IBV_WC_RDMA_WRITE,
			    "signaled WRITE #5");
		cf_ep_wc_ok(ep, &wc[1], 1, UW_COUNT - 1, IBV_WC_RDMA_WRITE,
			    "signaled WRITE #15");
	}
	got = cf_poll_cq_wait(ep->cq, wc, 1, 200);
	EP_CHECK(ep, got == 0, "an unsignaled WRITE completed (wr_id %llu)",
		 (unsigned long long)wc[0].wr_id);
	/* Both signaled WRITEs completed: every WRITE before them has
	 * landed (IBA 10.8.3.1). */
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * IBV_SEND_FENCE (IBA 10.8.3.3 / manual 3.6): a fenced WR starts only
 * after the RDMA READs before it have completed, so a fenced WRITE to the
 * region an earlier READ reads cannot change what the READ returns.
 */
CF_BODY_IMPL(rc_ops, fence)
{
	const uint32_t len = 256u << 10;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sge[2];
	struct ibv_wc wc[2];
	int got, ret;

	if (ep->side == CF_CHILD) {
		cf_pattern_fill(ep->buf, len, 1);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, 10000))
			return -1;
		EP_CHECK(ep, cf_pattern_check(ep->buf, len, 2) < 0,
			 "after the fenced WRITE the target differs");
		return 0;
	}
	cf_pattern_fill(ep->buf + len, len, 2);
	memset(ep->buf, 0, len);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr[0], &sge[0], IBV_WR_RDMA_READ, 0, len, 1);
	wr[0].wr.rdma.remote_addr = ep->peer.addr;
	wr[0].wr.rdma.rkey = ep->peer.rkey;
	cf_ep_send_wr(ep, &wr[1], &sge[1], IBV_WR_RDMA_WRITE, len, len, 2);
	wr[1].wr.rdma.remote_addr = ep->peer.addr;
	wr[1].wr.rdma.rkey = ep->peer.rkey;
	wr[1].send_flags |= IBV_SEND_FENCE;
	wr[0].next = &wr[1];
	ret = cf_rc(ibv_post_send(ep->qp, wr, &bad));
	EP_REQUIRE(ep, !ret, "ibv_post_send(READ; FENCE WRITE): %s",
		   cf_errname(ret));
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_REQUIRE(ep, got == 2, "%d completions of 2", got);
	cf_ep_wc_ok(ep, &wc[0], 1, 1, IBV_WC_RDMA_READ, "RDMA READ");
	cf_ep_wc_ok(ep, &wc[1], 1, 2, IBV_WC_RDMA_WRITE, "fenced RDMA WRITE");
	EP_CHECK(ep, cf_pattern_check(ep->buf, len, 1) < 0,
		 "the READ before a fenced WRITE returned data the WRITE "
		 "wrote (at byte %ld)", cf_pattern_check(ep->buf, len, 1));
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Child side of the event tests: two 64 B receives (wr_id 1, 2), the CQ
 * armed (solicited_only as given), then a sync with the sender.  0 or -1.
 */
static int arm_two_recvs(struct cf_ep *ep, int solicited_only)
{
	EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 64, 1) &&
		   !cf_ep_post_recv(ep, ep->qp, 64, 64, 2),
		   "ibv_post_recv failed");
	EP_REQUIRE(ep, !ibv_req_notify_cq(ep->cq, solicited_only),
		   "ibv_req_notify_cq(solicited_only %d) failed",
		   solicited_only);
	return cf_ep_sync(ep, WAIT_MS);
}

/* Sender side: an 8 B SEND with flags, and its successful completion. */
static void send8(struct cf_ep *ep, uint64_t wr_id, unsigned int flags,
		  const char *what)
{
	struct ibv_wc wc;
	int got;

	if (post_send1(ep, IBV_WR_SEND, 0, 8, wr_id, flags))
		return;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, wr_id, IBV_WC_SEND, what);
}

/*
 * Solicited events (IBA 10.7.2.3 / manual 3.6 ibv_req_notify_cq with
 * solicited_only 1): a SEND without IBV_SEND_SOLICITED raises no event,
 * one with it does.
 */
CF_BODY_IMPL(rc_ops, solicited)
{
	struct ibv_wc wc[2];
	int got, ev;

	if (ep->side == CF_CHILD) {
		if (arm_two_recvs(ep, 1))
			return -1;
		/* The parent's first (unsolicited) SEND has completed. */
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		ev = cf_ep_wait_cq_event(ep, 200);
		EP_CHECK(ep, ev == 0, "an unsolicited SEND raised a CQ event "
			 "on a CQ armed for solicited only (%d)", ev);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		ev = cf_ep_wait_cq_event(ep, WAIT_MS);
		EP_CHECK(ep, ev == 1, "no CQ event for a solicited SEND (%d)",
			 ev);
		got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
		EP_CHECK(ep, got == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2 &&
			 wc[0].status == IBV_WC_SUCCESS &&
			 wc[1].status == IBV_WC_SUCCESS,
			 "%d receive completions, expected 2 in order", got);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	send8(ep, 1, IBV_SEND_SIGNALED, "unsolicited SEND");
	if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	send8(ep, 2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, "solicited SEND");
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(channel)
{
	p->channel = true;
}

/*
 * Completion channel (manual 3.6 ibv_req_notify_cq(cq, 0),
 * ibv_get_cq_event, ibv_ack_cq_events): an armed CQ raises one event for
 * the next completion; without re-arming, none.
 */
CF_BODY_IMPL(rc_ops, channel)
{
	struct ibv_wc wc[2];
	int got, ev;

	if (ep->side == CF_CHILD) {
		if (arm_two_recvs(ep, 0))
			return -1;
		ev = cf_ep_wait_cq_event(ep, WAIT_MS);
		EP_CHECK(ep, ev == 1, "no CQ event for a SEND (%d)", ev);
		got = cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
		EP_CHECK(ep, got == 1 && wc[0].wr_id == 1 &&
			 wc[0].status == IBV_WC_SUCCESS,
			 "first receive did not complete");
		/* Not re-armed: the second SEND raises no event. */
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
		EP_CHECK(ep, got == 1 && wc[0].wr_id == 2,
			 "second receive did not complete");
		ev = cf_ep_wait_cq_event(ep, 200);
		EP_CHECK(ep, ev == 0, "a CQ event without re-arming (%d)", ev);
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	send8(ep, 1, IBV_SEND_SIGNALED, "SEND 1");
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	send8(ep, 2, IBV_SEND_SIGNALED, "SEND 2");
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Ordering (IBA 9.5 / 10.8.3): 100 SENDs of different sizes on one QP
 * arrive in order and complete in order on both sides.
 */
CF_BODY_IMPL(rc_ops, order)
{
	struct ibv_wc wc[100];
	int i, got;

	if (ep->side == CF_CHILD) {
		for (i = 0; i < 100; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp,
							(size_t)i * 8192, 8192,
							(uint64_t)i),
				   "ibv_post_recv %d failed", i);
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 100, WAIT_MS);
		EP_CHECK(ep, got == 100, "%d receives of 100", got);
		for (i = 0; i < got; i++) {
			uint32_t want = 4 + (uint32_t)i * 61;

			if (!EP_CHECK(ep, wc[i].status == IBV_WC_SUCCESS &&
				      wc[i].wr_id == (uint64_t)i &&
				      wc[i].byte_len == want,
				      "receive %d: %s wr_id %llu len %u, "
				      "expected wr_id %d len %u", i,
				      ibv_wc_status_str(wc[i].status),
				      (unsigned long long)wc[i].wr_id,
				      wc[i].byte_len, i, want))
				break;
			EP_CHECK(ep, cf_pattern_check(ep->buf + i * 8192, want,
						      300 + i) < 0,
				 "message %d: data differs", i);
		}
		return cf_ep_sync(ep, WAIT_MS);
	}
	for (i = 0; i < 100; i++)
		cf_pattern_fill(ep->buf + i * 8192, 4 + i * 61, 300 + i);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	for (i = 0; i < 100; i++)
		if (post_send1(ep, IBV_WR_SEND, (size_t)i * 8192,
			       4 + (uint32_t)i * 61, (uint64_t)i,
			       IBV_SEND_SIGNALED))
			return -1;
	got = cf_poll_cq_wait(ep->cq, wc, 100, WAIT_MS);
	EP_CHECK(ep, got == 100, "%d send completions of 100", got);
	for (i = 0; i < got; i++)
		if (!EP_CHECK(ep, wc[i].status == IBV_WC_SUCCESS &&
			      wc[i].wr_id == (uint64_t)i,
			      "send completion %d: %s wr_id %llu", i,
			      ibv_wc_status_str(wc[i].status),
			      (unsigned long long)wc[i].wr_id))
			break;
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(order)
{
	p->max_send_wr = 128;
	p->max_recv_wr = 128;
}

/*
 * IBA 9.5 (C9-28..): an RDMA WRITE followed by a SEND on the same QP: when
 * the SEND's receive completes, the written data is in place; no other
 * synchronisation.
 */
CF_BODY_IMPL(rc_ops, write_send)
{
	const uint32_t len = 64u << 10;
	const size_t roff = 1u << 20;
	struct ibv_send_wr wr[2], *bad;
	struct ibv_sge sge[2];
	struct ibv_wc wc[2];
	int got, ret;

	if (ep->side == CF_CHILD) {
		memset(ep->buf + roff, 0, len);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, 64, 1),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, wc, got, 1, IBV_WC_RECV,
				"SEND after WRITE"))
			EP_CHECK(ep, cf_pattern_check(ep->buf + roff, len, 5) <
				 0, "the SEND completed before the WRITE "
				 "before it was placed (byte %ld)",
				 cf_pattern_check(ep->buf + roff, len, 5));
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, len, 5);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_ep_send_wr(ep, &wr[0], &sge[0], IBV_WR_RDMA_WRITE, 0, len, 1);
	wr[0].wr.rdma.remote_addr = ep->peer.addr + roff;
	wr[0].wr.rdma.rkey = ep->peer.rkey;
	cf_ep_send_wr(ep, &wr[1], &sge[1], IBV_WR_SEND, 0, 16, 2);
	wr[0].next = &wr[1];
	ret = cf_rc(ibv_post_send(ep->qp, wr, &bad));
	EP_REQUIRE(ep, !ret, "ibv_post_send(WRITE; SEND): %s",
		   cf_errname(ret));
	got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
	EP_CHECK(ep, got == 2 && wc[0].wr_id == 1 && wc[1].wr_id == 2,
		 "%d completions (in order) of 2", got);
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Asynchronous progress (IBA 9.4.3-9.4.5: one-sided operations need no
 * action of the target's consumer; the manual's RC example relies on it):
 * the target sits in a blocking read() on the socket, calling no verb,
 * while its memory is read, written and updated atomically.
 */
CF_BODY_IMPL(rc_ops, async)
{
	const uint32_t len = 1u << 20;
	const size_t woff = 1u << 20, aoff = 2u << 20, loff = 3u << 20;
	volatile uint64_t *word = (volatile uint64_t *)(void *)
				  (ep->buf + aoff);
	bool atomics = ep->dev->atomic_cap != IBV_ATOMIC_NONE;
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		cf_pattern_fill(ep->buf, len, 61);
		memset(ep->buf + woff, 0, len);
		*word = 40;
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		/* No verb until the parent's next sync. */
		if (cf_ep_sync_blocking(ep, 20000))
			return -1;
		EP_CHECK(ep, cf_pattern_check(ep->buf + woff, len, 62) < 0,
			 "RDMA WRITE during the blocking read: data differs "
			 "at %ld", cf_pattern_check(ep->buf + woff, len, 62));
		if (atomics)
			EP_CHECK(ep, *word == 42, "FETCH_AND_ADD during the "
				 "blocking read: 0x%llx, expected 42",
				 (unsigned long long)*word);
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf + woff, len, 62);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	/* The child is (or is about to be) in read(). */
	usleep(50000);
	memset(ep->buf + loff, 0, len);
	if (!post_rdma(ep, IBV_WR_RDMA_READ, loff, len, 0, 1)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_RDMA_READ,
		      "RDMA READ of a target in read()");
		EP_CHECK(ep, cf_pattern_check(ep->buf + loff, len, 61) < 0,
			 "RDMA READ of a target in read(): data differs");
	}
	if (!post_rdma(ep, IBV_WR_RDMA_WRITE, woff, len, woff, 2)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 2, IBV_WC_RDMA_WRITE,
		      "RDMA WRITE to a target in read()");
	}
	if (atomics && !post_atomic(ep, ep->qp, IBV_WR_ATOMIC_FETCH_AND_ADD,
				    aoff, aoff, 2, 0, 3)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 3, IBV_WC_FETCH_ADD,
			  "FETCH_AND_ADD on a target in read()"))
			EP_CHECK(ep, *word == 40,
				 "FETCH_AND_ADD returned 0x%llx, expected 40",
				 (unsigned long long)*word);
	}
	if (cf_ep_sync(ep, 25000))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}
