// SPDX-License-Identifier: MIT
/*
 * UC between two processes (peer.h with qp_type UC): SEND, SEND with
 * immediate, RDMA WRITE and RDMA WRITE with immediate (IBA 9.4, table of
 * IBA 9.3: the operations UC supports), messages longer than the path MTU
 * (segmented, IBA 9.7.1), and the absence of acknowledgements (IBA 9.8):
 * a UC send completes without the responder, and a message that finds no
 * receive posted is dropped.  Every payload is checked byte for byte.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000
#define QUIET_MS 300
#define DST_OFF (2u << 20)	/* receive / WRITE target area */

CF_TUNE_IMPL(uc)
{
	p->qp_type = IBV_QPT_UC;
	p->qp_access = IBV_ACCESS_REMOTE_WRITE;
	p->mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
}

/* The path MTU in bytes (the RTR path_mtu peer_setup.c set). */
static uint32_t path_mtu(const struct cf_ep *ep)
{
	enum ibv_mtu m = ep->port.active_mtu < ep->peer.mtu ?
				 ep->port.active_mtu :
				 (enum ibv_mtu)ep->peer.mtu;

	return 128u << m;
}

/* cf_pattern_check, repeated until it matches or timeout_ms passed. */
static long wait_pattern(const uint8_t *buf, size_t len, uint64_t seed,
			 int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	long bad;

	while ((bad = cf_pattern_check(buf, len, seed)) >= 0 &&
	       cf_now_ms() < deadline)
		usleep(1000);
	return bad;
}

static const struct {
	enum ibv_wr_opcode op;
	const char *name;
} ops[] = {
	{ IBV_WR_SEND, "SEND" },
	{ IBV_WR_SEND_WITH_IMM, "SEND_WITH_IMM" },
	{ IBV_WR_RDMA_WRITE, "RDMA_WRITE" },
	{ IBV_WR_RDMA_WRITE_WITH_IMM, "RDMA_WRITE_WITH_IMM" },
};

static const enum ibv_wc_opcode send_wc[] = {
	IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE,
};

/*
 * Every operation with 0, 1, MTU, MTU + 1, 3 MTU + 5 and 64 KiB bytes.
 * The receiver checks the receive completion (SEND, *_WITH_IMM: manual
 * 3.6 struct ibv_wc, IBV_WC_RECV or IBV_WC_RECV_RDMA_WITH_IMM, byte_len,
 * imm_data) and the data in its buffer, and that nothing past it changed.
 * ep->arg: the operation, an index in ops[].
 */
CF_BODY_IMPL(uc, ops)
{
	const size_t k = (size_t)ep->arg;
	const enum ibv_wr_opcode op = ops[k].op;
	const bool recv = op != IBV_WR_RDMA_WRITE;
	const bool imm = op == IBV_WR_SEND_WITH_IMM ||
			 op == IBV_WR_RDMA_WRITE_WITH_IMM;
	const uint32_t mtu = path_mtu(ep);
	const uint32_t sizes[] = { 0, 1, mtu, mtu + 1, 3 * mtu + 5, 65536 };
	struct ibv_wc wc;
	size_t i;
	long bad;
	int got;

	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		const uint32_t len = sizes[i];
		const uint32_t imm_data = htonl(0x5c000000u + (uint32_t)i);
		const uint64_t seed = 500 + k * 10 + i;
		char what[80];

		snprintf(what, sizeof(what), "UC %s of %u bytes", ops[k].name,
			 len);
		if (ep->side == CF_CHILD) {
			memset(ep->buf + DST_OFF, 0xee, len + 4096);
			if (recv)
				EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp,
						DST_OFF, len + 4096, seed),
					   "ibv_post_recv failed");
			/* Posted; then the sender's completion. */
			if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
				return -1;
			if (recv) {
				enum ibv_wc_opcode rop =
					op == IBV_WR_RDMA_WRITE_WITH_IMM ?
					IBV_WC_RECV_RDMA_WITH_IMM :
					IBV_WC_RECV;

				got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
				if (cf_ep_wc_ok(ep, &wc, got, seed, rop, what))
					EP_CHECK(ep, wc.byte_len == len &&
						 !(wc.wc_flags &
						   IBV_WC_WITH_IMM) == !imm &&
						 (!imm ||
						  wc.imm_data == imm_data),
						 "%s: byte_len %u wc_flags "
						 "0x%x imm_data 0x%x, expected "
						 "%u, imm 0x%x", what,
						 wc.byte_len, wc.wc_flags,
						 wc.imm_data, len,
						 imm ? imm_data : 0);
			}
			/* A UC sender completes before the data is placed
			 * (no ACK, IBA 9.8): a plain WRITE is awaited in
			 * memory. */
			bad = wait_pattern(ep->buf + DST_OFF, len, seed,
					   recv ? 0 : WAIT_MS);
			EP_CHECK(ep, bad < 0, "%s: data differs at byte %ld",
				 what, bad);
			bad = cf_bytes_check(ep->buf + DST_OFF + len, 4096,
					     0xee);
			EP_CHECK(ep, bad < 0, "%s: target written past the "
				 "message, at byte %ld", what, bad);
		} else {
			struct ibv_send_wr wr;
			struct ibv_sge sge;

			cf_pattern_fill(ep->buf, len, seed);
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
			cf_ep_send_wr(ep, &wr, &sge, op, 0, len, seed);
			wr.imm_data = imm_data;
			wr.wr.rdma.remote_addr = ep->peer.addr + DST_OFF;
			wr.wr.rdma.rkey = ep->peer.rkey;
			if (cf_ep_post_send(ep, ep->qp, &wr))
				return -1;
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			cf_ep_wc_ok(ep, &wc, got, seed, send_wc[k], what);
			if (cf_ep_sync(ep, WAIT_MS))
				return -1;
		}
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
	}
	return 0;
}

/*
 * IBA 9.8 (unreliable service: no acknowledgements, no RNR): a UC SEND
 * completes at the sender although the responder has no receive posted;
 * the message is dropped (no completion within 300 ms), and a receive
 * posted afterwards gets the next message, not the dropped one.
 */
CF_BODY_IMPL(uc, no_ack)
{
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, QUIET_MS);
		EP_CHECK(ep, got == 0, "a UC SEND that found no receive "
			 "produced a completion (%s) within %d ms",
			 got > 0 ? ibv_wc_status_str(wc.status) : "-",
			 QUIET_MS);
		memset(ep->buf + DST_OFF, 0, 4096);
		EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, DST_OFF, 4096, 7),
			   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 7, IBV_WC_RECV,
				"the SEND after the dropped one"))
			EP_CHECK(ep, wc.byte_len == 96 &&
				 cf_pattern_check(ep->buf + DST_OFF, 96, 2) <
				 0, "the receive holds %u bytes, or not the "
				 "second message's data", wc.byte_len);
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 64, 1);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (cf_ep_post1(ep, IBV_WR_SEND, 0, 64, 0, 1, IBV_SEND_SIGNALED))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_SEND,
		    "UC SEND with no receive posted at the peer");
	if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_pattern_fill(ep->buf, 96, 2);
	if (cf_ep_post1(ep, IBV_WR_SEND, 0, 96, 0, 2, IBV_SEND_SIGNALED))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, 2, IBV_WC_SEND, "the SEND after it");
	return cf_ep_sync(ep, WAIT_MS);
}
