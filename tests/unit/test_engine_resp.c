// SPDX-License-Identifier: MIT
/* The responder's cases of the engine tests (engine_fixture.h). */
#include "config.h"

#include "unit.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine_fixture.h"

/* ---- the responder ---- */

/*
 * IBA 9.7.5.1.1 coalesced acknowledgement: two SEND_ONLY in sequence,
 * drained together, complete two receives with their data and earn one
 * ACK, for the later PSN, with the MSN of both messages.
 */
void test_resp_send_in_sequence(void)
{
	struct engine *e;
	struct fixture f;
	uint8_t msg[2][64];

	fx_setup(&f, &default_params);
	e = hca->engine;
	fill(msg[0], 64, 1);
	fill(msg[1], 40, 2);
	fx_post_recv(&f, 11, RECV_OFF, 256);
	fx_post_recv(&f, 12, RECV_OFF + 256, 256);
	emu_lock(&e->lock); /* one drain takes both */
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg[0], 64);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + 1, msg[1], 40);
	emu_unlock(&e->lock);
	expect_recv(&f, 11, IBV_WC_SUCCESS, 64);
	expect_recv(&f, 12, IBV_WC_SUCCESS, 40);
	CU_ASSERT(memcmp(f.buf + RECV_OFF, msg[0], 64) == 0);
	CU_ASSERT(memcmp(f.buf + RECV_OFF + 256, msg[1], 40) == 0);
	expect_ack(&f, RQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * A SEND executed in a drain whose coalesced ACK (IBA 9.7.5.1.1) is still
 * owed when the consumer, having polled its receive completion, moves the
 * QP to Error (rdma_disconnect does, at once): the ACK still goes, before
 * the transition, so the requester's SEND completes instead of running out
 * of retries on a message that was executed.  The test is the engine's
 * drain, cut between the packet and the drain's ACK flush.
 */
void test_resp_ack_owed_at_error(void)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };
	struct engine *e;
	struct fixture f;
	struct loop_pkt p;
	struct tp_pkt in;
	uint8_t msg[64];

	fx_setup(&f, &default_params);
	e = hca->engine;
	fill(msg, sizeof(msg), 9);
	fx_post_recv(&f, 31, RECV_OFF, 256);
	craft(&p, &f, IB_OP_SEND_ONLY, RQ_PSN, false, msg, sizeof(msg));
	memset(&in, 0, sizeof(in));
	in.slot = &p;
	in.hdr = &p.hdr;
	in.data = p.data;
	in.grh = &p.grh;
	emu_lock(&e->lock); /* the drain, by hand */
	engine_recv_locked(e, &in);
	expect_recv(&f, 31, IBV_WC_SUCCESS, sizeof(msg));
	CU_ASSERT(memcmp(f.buf + RECV_OFF, msg, sizeof(msg)) == 0);
	CU_ASSERT_EQUAL(loop_captured(), 0); /* the ACK waits for the flush */
	CU_ASSERT(emu_qp_modify(f.qp, &attr, IBV_QP_STATE) == 0);
	engine_flush_acks_locked(e);
	emu_unlock(&e->lock);
	expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	expect_quiet(); /* one ACK, not a second one from the flush */
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.2 duplicate requests: a resent SEND that was already
 * executed is acknowledged again (AckReq set) and not executed twice.
 */
void test_resp_duplicate_send(void)
{
	struct fixture f;
	uint8_t msg[64];

	fx_setup(&f, &default_params);
	fill(msg, sizeof(msg), 3);
	fx_post_recv(&f, 21, RECV_OFF, 256);
	fx_post_recv(&f, 22, RECV_OFF + 256, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_recv(&f, 21, IBV_WC_SUCCESS, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	expect_no_wc(&f);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.1 PSN sequence error: a request ahead of the expected PSN
 * earns one NAK (PSN sequence error, for the expected PSN), and only one
 * for the whole gap; the resent request then completes normally.
 */
void test_resp_psn_ahead(void)
{
	struct fixture f;
	uint8_t msg[32];

	fx_setup(&f, &default_params);
	fill(msg, sizeof(msg), 4);
	fx_post_recv(&f, 31, RECV_OFF, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + 2, msg, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 0);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + 3, msg, sizeof(msg));
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + 1, msg, sizeof(msg));
	expect_quiet();
	expect_no_wc(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_recv(&f, 31, IBV_WC_SUCCESS, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.8 RNR NAK: a SEND with no receive posted is answered with
 * an RNR NAK for its PSN carrying the QP's minimum RNR timer; the QP stays
 * up and the resent SEND completes once a receive is posted.
 */
void test_resp_rnr(void)
{
	struct fixture f;
	uint8_t msg[16];

	fx_setup(&f, &default_params);
	fill(msg, sizeof(msg), 5);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_RNR_NAK | RNR_TIMER, 0);
	expect_quiet();
	expect_no_wc(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_post_recv(&f, 41, RECV_OFF, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_recv(&f, 41, IBV_WC_SUCCESS, sizeof(msg));
	CU_ASSERT(memcmp(f.buf + RECV_OFF, msg, sizeof(msg)) == 0);
	expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	fx_teardown(&f);
}

/* A WRITE_ONLY of len bytes to (va, rkey); the target must stay as it
 * was, the QP answers NAK code and enters the error state. */
static void write_refused(struct fixture *f, uint64_t va, uint32_t rkey,
			  uint32_t len, uint8_t code,
			  enum ibv_event_type event)
{
	uint8_t msg[256], before[BUF_LEN];
	struct loop_pkt p;

	fill(msg, sizeof(msg), 6);
	fill(f->buf + TARGET_OFF, 8192, 9);
	memcpy(before, f->buf, BUF_LEN);
	craft(&p, f, IB_OP_WRITE_ONLY, RQ_PSN, true, msg, len);
	set_reth(&p, va, rkey, len);
	loop_inject(&p);
	expect_ack(f, RQ_PSN, AETH_NAK | code, 0);
	expect_quiet();
	CU_ASSERT(memcmp(before, f->buf, BUF_LEN) == 0);
	CU_ASSERT_EQUAL(fx_state(f), IBV_QPS_ERR);
	expect_event(f, event);
}

/*
 * IBA 9.7.5.2.4 / C9-88 R_Key check: an RDMA WRITE under a key that names
 * no region (a stale variant of a valid one) is NAKed remote access
 * error; the QP enters the error state, nothing is written.
 */
void test_resp_write_bad_rkey(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	write_refused(&f, fx_va(&f, TARGET_OFF), f.key ^ 0x80, 64,
		      AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR);
	fx_teardown(&f);
}

/*
 * IBA 10.6.3.2 / C9-88 range check: a WRITE that runs past the end of
 * the region its R_Key names is NAKed remote access error.
 */
void test_resp_write_past_mr(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	write_refused(&f, fx_va(&f, BUF_LEN - 16), f.key, 64,
		      AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.2 invalid request (manual 6.2.2 length error): a SEND
 * longer than the receive buffer completes that receive with LOC_LEN_ERR
 * and is NAKed invalid request; the QP enters the error state and the
 * other receives are flushed.
 */
void test_resp_send_too_long(void)
{
	struct fixture f;
	uint8_t msg[64];

	fx_setup(&f, &default_params);
	fill(msg, sizeof(msg), 7);
	fx_post_recv(&f, 51, RECV_OFF, 32);
	fx_post_recv(&f, 52, RECV_OFF + 256, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_NAK | AETH_NAK_INVALID_REQ, 0);
	expect_recv(&f, 51, IBV_WC_LOC_LEN_ERR, 0);
	expect_recv(&f, 52, IBV_WC_WR_FLUSH_ERR, 0);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.1 opcode sequence: a SEND_MIDDLE with no message open is
 * NAKed invalid request; the QP enters the error state.
 */
void test_resp_middle_without_first(void)
{
	struct fixture f;
	uint8_t msg[MTU];

	fx_setup(&f, &default_params);
	fill(msg, sizeof(msg), 8);
	fx_post_recv(&f, 61, RECV_OFF, 4096);
	inject_send(&f, IB_OP_SEND_MIDDLE, RQ_PSN, msg, sizeof(msg));
	expect_ack(&f, RQ_PSN, AETH_NAK | AETH_NAK_INVALID_REQ, 0);
	expect_recv(&f, 61, IBV_WC_WR_FLUSH_ERR, 0);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	expect_event(&f, IBV_EVENT_QP_REQ_ERR);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * A SEND flagged as pulled (its data left in the sender) on a transport
 * without placement is an invalid request, not a crash: NAK invalid
 * request, the receive completes in error, QP_REQ_ERR (manual 6.1.3).
 */
void test_resp_pull_without_placement(void)
{
	struct pull_desc d = { .pid = 1, .nr = 0, .length = 64 };
	struct fixture f;
	struct loop_pkt p;

	fx_setup(&f, &default_params);
	fx_post_recv(&f, 62, RECV_OFF, 4096);
	craft(&p, &f, IB_OP_SEND_ONLY, RQ_PSN, true, &d, sizeof(d));
	p.hdr.flags |= PKT_F_PULL;
	loop_inject(&p);
	expect_ack(&f, RQ_PSN, AETH_NAK | AETH_NAK_INVALID_REQ, 0);
	expect_recv(&f, 62, IBV_WC_LOC_QP_OP_ERR, 0);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	expect_event(&f, IBV_EVENT_QP_REQ_ERR);
	expect_quiet();
	fx_teardown(&f);
}

/* The READ responses to a request of len bytes at psn, in MTU packets,
 * carrying data; the first and last with an AETH of msn. */
static void expect_read_responses(struct fixture *f, uint32_t psn,
				  const uint8_t *data, uint32_t len,
				  uint32_t msn)
{
	static const uint8_t ops[] = { IB_OP_READ_RESPONSE_FIRST,
				       IB_OP_READ_RESPONSE_MIDDLE,
				       IB_OP_READ_RESPONSE_LAST };
	uint32_t i, n = psn_span(len, MTU), off, chunk;
	struct loop_pkt *p;

	CU_ASSERT_FATAL(n == 3);
	for (i = 0; i < n; i++) {
		off = i * MTU;
		chunk = len - off < MTU ? len - off : MTU;
		p = expect_pkt(f, ops[i], psn_add(psn, i));
		if (i != 1)
			expect_aeth(p, AETH_ACK | AETH_ACK_UNLIMITED, msn);
		CU_ASSERT_EQUAL(pkt_paylen(p), chunk);
		CU_ASSERT(memcmp(pkt_data(p), data + off, chunk) == 0);
		free(p);
	}
}

/*
 * IBA 9.7.4.1.5 RDMA READ: a request for 2500 bytes at MTU 1024 is
 * answered FIRST/MIDDLE/LAST, one PSN each from the request's PSN across
 * the 24-bit wrap (9.7.1), and the next request is expected after them;
 * a duplicate READ is answered again (9.7.4.1.2).
 */
void test_resp_read(void)
{
	struct qp_params prm = default_params;
	uint32_t psn = 0xfffffe, len = 2500;
	struct fixture f;
	struct loop_pkt p;
	uint8_t msg[8];

	prm.rq_psn = psn;
	fx_setup(&f, &prm);
	fill(f.buf + TARGET_OFF, len, 10);
	craft(&p, &f, IB_OP_READ_REQUEST, psn, true, NULL, 0);
	set_reth(&p, fx_va(&f, TARGET_OFF), f.key, len);
	loop_inject(&p);
	expect_read_responses(&f, psn, f.buf + TARGET_OFF, len, 1);
	loop_inject(&p);
	expect_read_responses(&f, psn, f.buf + TARGET_OFF, len, 1);
	expect_quiet();
	/* 0xfffffe + 3 PSNs: the next request is PSN 1. */
	fill(msg, sizeof(msg), 11);
	fx_post_recv(&f, 71, RECV_OFF, 256);
	inject_send(&f, IB_OP_SEND_ONLY, 1, msg, sizeof(msg));
	expect_recv(&f, 71, IBV_WC_SUCCESS, sizeof(msg));
	expect_ack(&f, 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	fx_teardown(&f);
}

static void inject_fetch_add(struct fixture *f, uint32_t psn, uint64_t va,
			     uint64_t add)
{
	struct loop_pkt p;
	struct atmeth *a;

	craft(&p, f, IB_OP_FETCH_ADD, psn, true, NULL, 0);
	a = ext(&p, opcode_get(IB_OP_FETCH_ADD)->atmeth);
	a->va = htobe64(va);
	a->rkey = htobe32(f->key);
	a->swap_add = htobe64(add);
	a->compare = 0;
	loop_inject(&p);
}

static void expect_atomic_ack(struct fixture *f, uint32_t psn,
			      uint64_t orig, uint32_t msn)
{
	struct loop_pkt *p = expect_pkt(f, IB_OP_ATOMIC_ACKNOWLEDGE, psn);
	const struct atmack *ack;

	expect_aeth(p, AETH_ACK | AETH_ACK_UNLIMITED, msn);
	ack = (const struct atmack *)(p->data +
				      opcode_get(p->data[0])->atmack);
	CU_ASSERT_EQUAL(be64toh(ack->orig), orig);
	free(p);
}

/*
 * IBA 9.7.4.1.6 atomics: FETCH_ADD returns the original value in an
 * ATOMIC_ACKNOWLEDGE; its duplicate (9.7.4.1.2) replays the same original
 * value without adding a second time.
 */
void test_resp_fetch_add(void)
{
	uint64_t *target;
	struct fixture f;

	fx_setup(&f, &default_params);
	target = (uint64_t *)(f.buf + TARGET_OFF + 64);
	*target = 10;
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 64), 5);
	expect_atomic_ack(&f, RQ_PSN, 10, 1);
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 15);
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 64), 5);
	expect_atomic_ack(&f, RQ_PSN, 10, 1);
	expect_quiet();
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 15);
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.6 / 9.7.4.1.5: the responder keeps the results of as many
 * atomics as it grants responder resources, so the duplicate of an older
 * one (its acknowledgement lost behind a newer one) is answered with its
 * own original value and MSN, and executes nothing again.
 */
void test_resp_fetch_add_pipelined(void)
{
	uint64_t *target;
	struct fixture f;

	fx_setup(&f, &default_params);
	target = (uint64_t *)(f.buf + TARGET_OFF + 64);
	*target = 10;
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 64), 5);
	expect_atomic_ack(&f, RQ_PSN, 10, 1);
	inject_fetch_add(&f, RQ_PSN + 1, fx_va(&f, TARGET_OFF + 64), 1);
	expect_atomic_ack(&f, RQ_PSN + 1, 15, 2);
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 64), 5);
	expect_atomic_ack(&f, RQ_PSN, 10, 1);
	expect_quiet();
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 16);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.1.3: responses leave in request order.  READ responses that
 * find the requester's inbox full are owed, and the ACK of a later SEND
 * waits behind them: an ACK ahead of them would tell the requester the
 * READ's responses were lost.
 */
void test_resp_ack_behind_read(void)
{
	uint32_t len = 2500, npkts = 3;
	struct fixture f;
	struct loop_pkt p;
	uint8_t msg[8];

	fx_setup(&f, &default_params);
	fill(f.buf + TARGET_OFF, len, 21);
	fill(msg, sizeof(msg), 22);
	fx_post_recv(&f, 72, RECV_OFF, 256);
	loop_set_room(1);
	craft(&p, &f, IB_OP_READ_REQUEST, RQ_PSN, true, NULL, 0);
	set_reth(&p, fx_va(&f, TARGET_OFF), f.key, len);
	loop_inject(&p);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + npkts, msg, sizeof(msg));
	expect_recv(&f, 72, IBV_WC_SUCCESS, sizeof(msg));
	CU_ASSERT(loop_settle(hca->engine, 1000));
	loop_set_room(-1);
	expect_read_responses(&f, RQ_PSN, f.buf + TARGET_OFF, len, 1);
	expect_ack(&f, RQ_PSN + npkts, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.6: an atomic's acknowledgement that finds the requester's
 * inbox full is owed, not dropped; it leaves once there is room, with
 * the original value, and the atomic is executed once.
 */
void test_resp_atomic_ack_full(void)
{
	uint64_t *target;
	struct fixture f;

	fx_setup(&f, &default_params);
	target = (uint64_t *)(f.buf + TARGET_OFF + 64);
	*target = 40;
	loop_set_room(0);
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 64), 2);
	CU_ASSERT(loop_settle(hca->engine, 1000));
	CU_ASSERT_EQUAL(loop_captured(), 0);
	loop_set_room(-1);
	expect_atomic_ack(&f, RQ_PSN, 40, 1);
	expect_quiet();
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 42);
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.2: a duplicate atomic is answered with its saved result,
 * and a duplicate READ anew; both mean the requester resends from their
 * PSN.  Here the FETCH_ADD's acknowledgement was sent (and lost) while
 * the READ behind it waits for room, owed: the requester resends both.
 * The atomic's answer must come out, then the READ's, in request order.
 * It used to be queued behind the READ's owed responses, and the
 * duplicate READ, cancelling what was owed from its PSN on, dropped it
 * with them: the atomic was never answered again, and the requester
 * ended in RETRY_EXC_ERR.
 */
void test_resp_duplicate_atomic_then_read(void)
{
	uint32_t len = 2500;
	uint64_t *target;
	struct fixture f;
	struct loop_pkt p;

	fx_setup(&f, &default_params);
	target = (uint64_t *)(f.buf + TARGET_OFF + 4000);
	*target = 7;
	fill(f.buf + TARGET_OFF, len, 51);
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 4000), 3);
	expect_atomic_ack(&f, RQ_PSN, 7, 1); /* lost on its way */
	loop_set_room(0);
	craft(&p, &f, IB_OP_READ_REQUEST, RQ_PSN + 1, true, NULL, 0);
	set_reth(&p, fx_va(&f, TARGET_OFF), f.key, len);
	loop_inject(&p);
	/* The resend: the atomic, then the READ. */
	inject_fetch_add(&f, RQ_PSN, fx_va(&f, TARGET_OFF + 4000), 3);
	loop_inject(&p);
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(loop_captured(), 0);
	loop_set_room(-1);
	expect_atomic_ack(&f, RQ_PSN, 7, 1);
	expect_read_responses(&f, RQ_PSN + 1, f.buf + TARGET_OFF, len, 2);
	expect_quiet();
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 10);
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.5 / 9.7.4.1.2: the responder resources granted
 * (max_dest_rd_atomic, 4 here) bound the READs and atomics a requester
 * has outstanding, not the answers owed to duplicates.  READ A was
 * answered; a duplicate of it (the requester resent it, then completed
 * it with the first stream's response that came late) is owed while the
 * requester's inbox is full, and four new READs follow.  The fourth used
 * to find the owed ring full and be refused: NAK invalid request and the
 * QP in error, a failure seen under injected faults.  All are answered,
 * in order, once there is room.
 */
void test_resp_duplicate_reply_holds_no_resource(void)
{
	uint32_t len = 2500, i;
	struct fixture f;
	struct loop_pkt p, *r;

	fx_setup(&f, &default_params);
	fill(f.buf + TARGET_OFF, len, 71);
	craft(&p, &f, IB_OP_READ_REQUEST, RQ_PSN, true, NULL, 0);
	set_reth(&p, fx_va(&f, TARGET_OFF), f.key, len);
	loop_inject(&p);
	expect_read_responses(&f, RQ_PSN, f.buf + TARGET_OFF, len, 1);
	loop_set_room(0);
	loop_inject(&p); /* the duplicate */
	for (i = 0; i < 4; i++) {
		craft(&p, &f, IB_OP_READ_REQUEST, RQ_PSN + 3 + i, true, NULL,
		      0);
		set_reth(&p, fx_va(&f, TARGET_OFF + 8 * i), f.key, 8);
		loop_inject(&p);
	}
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(loop_captured(), 0);
	loop_set_room(-1);
	expect_read_responses(&f, RQ_PSN, f.buf + TARGET_OFF, len, 1);
	for (i = 0; i < 4; i++) {
		r = expect_pkt(&f, IB_OP_READ_RESPONSE_ONLY, RQ_PSN + 3 + i);
		expect_aeth(r, AETH_ACK | AETH_ACK_UNLIMITED, 2 + i);
		CU_ASSERT_EQUAL(pkt_paylen(r), 8);
		CU_ASSERT(memcmp(pkt_data(r), f.buf + TARGET_OFF + 8 * i, 8) ==
			  0);
		free(r);
	}
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}

/* A READ request of len bytes at (va, rkey), PSN psn. */
static void inject_read(struct fixture *f, uint32_t psn, uint64_t va,
			uint32_t rkey, uint32_t len)
{
	struct loop_pkt p;

	craft(&p, f, IB_OP_READ_REQUEST, psn, true, NULL, 0);
	set_reth(&p, va, rkey, len);
	loop_inject(&p);
}

/*
 * IBA 9.7.4.1.2, 9.7.5.2: a request behind the expected PSN is answered
 * only from what the responder saved.  After a READ of 2500 bytes at
 * RQ_PSN (PSNs RQ_PSN..RQ_PSN+2), requests behind the expected PSN that
 * ask anything else are dropped without a word: the same PSN under a bad
 * R_Key (it used to be executed again: NAK remote access error and the QP
 * in error, from two packets of anyone who reaches the QP), a PSN inside
 * it whose range runs past the saved one, another range under the right
 * key, a PSN before it that no READ took.  The QP stays in RTS, raises nothing,
 * and the next requests in order are executed.
 */
void test_resp_duplicate_read_foreign(void)
{
	uint32_t len = 2500;
	struct fixture f;
	uint8_t msg[8];
	struct loop_pkt *r;
	uint64_t va;

	fx_setup(&f, &default_params);
	va = fx_va(&f, TARGET_OFF);
	fill(f.buf + TARGET_OFF, 8192, 81);
	inject_read(&f, RQ_PSN, va, f.key, len);
	expect_read_responses(&f, RQ_PSN, f.buf + TARGET_OFF, len, 1);
	inject_read(&f, RQ_PSN, va, f.key ^ 0x80, len);
	inject_read(&f, RQ_PSN, va, f.key ^ 0x80, 0);
	inject_read(&f, RQ_PSN + 1, va + MTU, f.key, len);
	inject_read(&f, RQ_PSN, fx_va(&f, RECV_OFF), f.key, len);
	inject_read(&f, RQ_PSN - 1, va, f.key, 8);
	expect_quiet();
	expect_no_event(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fill(msg, sizeof(msg), 82);
	fx_post_recv(&f, 81, RECV_OFF, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN + 3, msg, sizeof(msg));
	expect_recv(&f, 81, IBV_WC_SUCCESS, sizeof(msg));
	expect_ack(&f, RQ_PSN + 3, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	inject_read(&f, RQ_PSN + 4, va + 64, f.key, 8);
	r = expect_pkt(&f, IB_OP_READ_RESPONSE_ONLY, RQ_PSN + 4);
	expect_aeth(r, AETH_ACK | AETH_ACK_UNLIMITED, 3);
	CU_ASSERT_EQUAL(pkt_paylen(r), 8);
	CU_ASSERT(memcmp(pkt_data(r), f.buf + TARGET_OFF + 64, 8) == 0);
	free(r);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.2, 9.7.5.2: a duplicate READ that asks what a saved READ
 * covered is answered again with the region's data: the whole READ, and
 * a resend from its second response on (the requester asks for what it
 * still lacks: address and length moved on by one MTU), answered from
 * that PSN.
 */
void test_resp_duplicate_read_saved(void)
{
	uint32_t len = 2500;
	const uint8_t *data;
	struct fixture f;
	struct loop_pkt *r;
	uint64_t va;

	fx_setup(&f, &default_params);
	va = fx_va(&f, TARGET_OFF);
	data = f.buf + TARGET_OFF;
	fill(f.buf + TARGET_OFF, len, 83);
	inject_read(&f, RQ_PSN, va, f.key, len);
	expect_read_responses(&f, RQ_PSN, data, len, 1);
	inject_read(&f, RQ_PSN, va, f.key, len);
	expect_read_responses(&f, RQ_PSN, data, len, 1);
	inject_read(&f, RQ_PSN + 1, va + MTU, f.key, len - MTU);
	r = expect_pkt(&f, IB_OP_READ_RESPONSE_FIRST, RQ_PSN + 1);
	expect_aeth(r, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	CU_ASSERT_EQUAL(pkt_paylen(r), MTU);
	CU_ASSERT(memcmp(pkt_data(r), data + MTU, MTU) == 0);
	free(r);
	r = expect_pkt(&f, IB_OP_READ_RESPONSE_LAST, RQ_PSN + 2);
	expect_aeth(r, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	CU_ASSERT_EQUAL(pkt_paylen(r), len - 2 * MTU);
	CU_ASSERT(memcmp(pkt_data(r), data + 2 * MTU, len - 2 * MTU) == 0);
	free(r);
	expect_quiet();
	expect_no_event(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}

/* A FETCH_ADD at psn under rkey. */
static void inject_fetch_add_key(struct fixture *f, uint32_t psn,
				 uint64_t va, uint32_t rkey, uint64_t add)
{
	struct loop_pkt p;
	struct atmeth *a;

	craft(&p, f, IB_OP_FETCH_ADD, psn, true, NULL, 0);
	a = ext(&p, opcode_get(IB_OP_FETCH_ADD)->atmeth);
	a->va = htobe64(va);
	a->rkey = htobe32(rkey);
	a->swap_add = htobe64(add);
	a->compare = 0;
	loop_inject(&p);
}

/*
 * IBA 9.7.4.1.6, 9.7.5.2: a duplicate atomic is answered from the saved
 * result only, never executed again; one that names another word or
 * another key than the saved one is dropped, and so is one at a PSN no
 * atomic took.  The word is added to once, the QP stays in RTS, and the
 * true duplicate still gets the saved original value.
 */
void test_resp_duplicate_atomic_foreign(void)
{
	uint64_t *target, va;
	struct fixture f;

	fx_setup(&f, &default_params);
	target = (uint64_t *)(f.buf + TARGET_OFF + 64);
	va = fx_va(&f, TARGET_OFF + 64);
	*target = 100;
	inject_fetch_add_key(&f, RQ_PSN, va, f.key, 5);
	expect_atomic_ack(&f, RQ_PSN, 100, 1);
	inject_fetch_add_key(&f, RQ_PSN, va, f.key ^ 0x80, 5);
	inject_fetch_add_key(&f, RQ_PSN, va + 8, f.key, 5);
	inject_fetch_add_key(&f, RQ_PSN - 1, va, f.key, 5);
	expect_quiet();
	expect_no_event(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	inject_fetch_add_key(&f, RQ_PSN, va, f.key, 5);
	expect_atomic_ack(&f, RQ_PSN, 100, 1);
	expect_quiet();
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 105);
	CU_ASSERT_EQUAL(*(uint64_t *)(f.buf + TARGET_OFF + 72), 0);
	fx_teardown(&f);
}

/* ---- keys ---- */

/* key with its tag (the random bits above its number) changed. */
static uint32_t key_other_tag(uint32_t key)
{
	return key ^ 1u << KEY_TAG_SHIFT;
}

/*
 * IBA 10.6.3.1 / C9-88: an R_Key is an index plus a key part, and the
 * whole of it is checked.  A WRITE under a key with the region's number
 * but another tag, and one under the bare number with a key part of 0
 * (what a guess from the index alone would be), are NAKed remote access
 * error exactly as a wrong key; nothing is written.
 */
void test_resp_key_wrong_part(void)
{
	struct fixture f;
	uint32_t bare;

	fx_setup(&f, &default_params);
	write_refused(&f, fx_va(&f, TARGET_OFF), key_other_tag(f.key), 64,
		      AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR);
	fx_teardown(&f);
	fx_setup(&f, &default_params);
	bare = key_table_key(key_num(f.key), 0);
	if (bare == f.key)
		bare ^= 1;
	write_refused(&f, fx_va(&f, TARGET_OFF), bare, 64,
		      AETH_NAK_REM_ACC_ERR, IBV_EVENT_QP_ACCESS_ERR);
	fx_teardown(&f);
}

/*
 * IBA 10.6.3.1, 10.8.3.1: the same for an L_Key.  A SEND whose segment
 * names the region by its number with another tag completes with a local
 * protection error and sends nothing.
 */
void test_req_lkey_wrong_part(void)
{
	struct ibv_send_wr wr = { .wr_id = 91, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;
	struct ibv_sge sge;
	struct fixture f;

	fx_setup(&f, &default_params);
	sge = (struct ibv_sge){ .addr = fx_va(&f, LOCAL_OFF), .length = 64,
				.lkey = key_other_tag(f.key) };
	wr.sg_list = &sge;
	CU_ASSERT_FATAL(emu_post_send(f.qp, &wr, &bad, false) == 0);
	expect_send_wc(&f, 91, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, 0);
	expect_quiet();
	fx_teardown(&f);
}

#define KEYS_N 16

/*
 * IBA 10.6.3.1: the key part of an L_Key/R_Key is the HCA's to choose,
 * and ibemu chooses it at random (key_table.h), so that no key can be
 * told from its index (the first region of every process used to be
 * 0x100).  Of 16 regions and 16 windows, each key carries its number,
 * and some carry a tag and some a variant other than 0: with random
 * parts, all 0 by chance has a probability of 2^-96 or less.
 */
void test_keys_not_bare_index(void)
{
	uint32_t key, tags = 0, variants = 0, wtags = 0, i;
	struct emu_mr *mr[KEYS_N];
	struct emu_mw *mw[KEYS_N];
	uint8_t *buf;

	buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(buf != MAP_FAILED);
	for (i = 0; i < KEYS_N; i++) {
		CU_ASSERT_FATAL(emu_mr_reg(hca, 1, buf, 4096, (uintptr_t)buf,
					   IBV_ACCESS_LOCAL_WRITE, &mr[i],
					   &key) == 0);
		CU_ASSERT_EQUAL(key_num(key), mr[i]->index + 1);
		tags |= key >> KEY_TAG_SHIFT;
		variants |= key & KEY_VARIANT_MASK;
		CU_ASSERT_FATAL(emu_mw_alloc(hca, 1, IBV_MW_TYPE_1, &mw[i],
					     &key) == 0);
		CU_ASSERT_EQUAL(key_num(key),
				IBEMU_MAX_MR + mw[i]->index + 1);
		wtags |= key >> KEY_TAG_SHIFT;
	}
	CU_ASSERT(tags != 0);
	CU_ASSERT(variants != 0);
	CU_ASSERT(wtags != 0);
	for (i = 0; i < KEYS_N; i++) {
		CU_ASSERT(emu_mr_dereg(mr[i]) == 0);
		CU_ASSERT(emu_mw_dealloc(mw[i]) == 0);
	}
	munmap(buf, 4096);
}

/* Post a BIND_MW of the QP under test binding the type 2 window mwkey
 * names to 256 bytes at TARGET_OFF of the region mr_lkey names, for
 * remote reads, with new_key; the bind's completion is status. */
static void bind_mw(struct fixture *f, uint32_t mwkey, uint32_t mr_lkey,
		    uint32_t new_key, enum ibv_wc_status status)
{
	struct ibv_mr mr = { .lkey = mr_lkey };
	struct ibv_mw mw = { .rkey = mwkey, .type = IBV_MW_TYPE_2 };
	struct ibv_send_wr wr = { .wr_id = 95, .opcode = IBV_WR_BIND_MW,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;

	wr.bind_mw.mw = &mw;
	wr.bind_mw.rkey = new_key;
	wr.bind_mw.bind_info.mr = &mr;
	wr.bind_mw.bind_info.addr = fx_va(f, TARGET_OFF);
	wr.bind_mw.bind_info.length = 256;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	CU_ASSERT_FATAL(emu_post_send(f->qp, &wr, &bad, false) == 0);
	expect_send_wc(f, 95, status, IBV_WC_BIND_MW, 0);
}

/*
 * IBA 10.6.7.2.3: the consumer owns only the 8-bit key of a type 2
 * window's R_Key; the rest is the HCA's.  A bind that names the window
 * with another tag, or asks for a new key with another tag, fails with
 * MW_BIND_ERR; one that changes only the 8 bits binds, and a READ
 * through the window under its key with another tag is NAKed remote
 * access error, while the key itself reads.
 */
/* A fixture with an MR and a type 2 window on it, the target filled
 * with seed; the window's key and the key it may bind to (the next
 * 8-bit key) in *mwkey_p and *key_p. */
static void mw_type2_setup(struct fixture *f, uint8_t seed,
			   struct emu_mr **mr_p, struct emu_mw **mw_p,
			   uint32_t *mrkey_p, uint32_t *mwkey_p,
			   uint32_t *key_p)
{
	fx_setup(f, &default_params);
	fill(f->buf + TARGET_OFF, 256, seed);
	CU_ASSERT_FATAL(emu_mr_reg(hca, 1, f->buf, BUF_LEN,
				   (uintptr_t)f->buf,
				   IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_MW_BIND, mr_p, mrkey_p) == 0);
	CU_ASSERT_FATAL(emu_mw_alloc(hca, 1, IBV_MW_TYPE_2, mw_p,
				     mwkey_p) == 0);
	*key_p = (*mwkey_p & ~KEY_VARIANT_MASK) |
		 ((*mwkey_p + 1) & KEY_VARIANT_MASK);
}

static void mw_type2_teardown(struct fixture *f, struct emu_mr *mr,
			      struct emu_mw *mw)
{
	emu_mw_dealloc(mw);
	emu_mr_dereg(mr);
	fx_teardown(f);
}

void test_mw_type2_key_part(void)
{
	uint32_t mrkey, mwkey, key;
	struct emu_mr *mr;
	struct emu_mw *mw;
	struct fixture f;
	struct loop_pkt *r;

	/* A new key with another tag. */
	mw_type2_setup(&f, 97, &mr, &mw, &mrkey, &mwkey, &key);
	bind_mw(&f, mwkey, mrkey, key_other_tag(key), IBV_WC_MW_BIND_ERR);
	mw_type2_teardown(&f, mr, mw);

	/* The window named with another tag. */
	mw_type2_setup(&f, 98, &mr, &mw, &mrkey, &mwkey, &key);
	bind_mw(&f, key_other_tag(mwkey), mrkey, key, IBV_WC_MW_BIND_ERR);
	mw_type2_teardown(&f, mr, mw);

	/* Only the 8 bits: it binds, and reads under that key alone. */
	mw_type2_setup(&f, 99, &mr, &mw, &mrkey, &mwkey, &key);
	bind_mw(&f, mwkey, mrkey, key, IBV_WC_SUCCESS);
	inject_read(&f, RQ_PSN, fx_va(&f, TARGET_OFF), key, 64);
	r = expect_pkt(&f, IB_OP_READ_RESPONSE_ONLY, RQ_PSN);
	CU_ASSERT(memcmp(pkt_data(r), f.buf + TARGET_OFF, 64) == 0);
	free(r);
	inject_read(&f, RQ_PSN + 1, fx_va(&f, TARGET_OFF), key_other_tag(key),
		    64);
	expect_ack(&f, RQ_PSN + 1, AETH_NAK | AETH_NAK_REM_ACC_ERR, 1);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	expect_event(&f, IBV_EVENT_QP_ACCESS_ERR);
	mw_type2_teardown(&f, mr, mw);
}
