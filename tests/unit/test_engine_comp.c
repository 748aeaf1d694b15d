// SPDX-License-Identifier: MIT
/* The completer's cases of the engine tests (engine_fixture.h). */
#include "config.h"

#include "unit.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine_fixture.h"

/* ---- the completer ---- */

/* Post a 64-byte signaled SEND and check the SEND_ONLY it becomes. */
static void post_and_see_send(struct fixture *f, uint64_t wr_id,
			      uint32_t psn, uint8_t seed)
{
	struct loop_pkt *p;
	uint8_t *data = f->buf + LOCAL_OFF + (wr_id & 7) * 64;

	fill(data, 64, seed);
	fx_post_send(f, wr_id, IBV_WR_SEND, LOCAL_OFF + (wr_id & 7) * 64, 64,
		     0, 0);
	p = expect_pkt(f, IB_OP_SEND_ONLY, psn);
	CU_ASSERT(be32toh(pkt_bth(p)->apsn) & BTH_ACKREQ);
	CU_ASSERT_EQUAL(pkt_paylen(p), 64);
	CU_ASSERT(memcmp(pkt_data(p), data, 64) == 0);
	free(p);
}

/* A SEND_ONLY resent at psn with the data post_and_see_send gave it. */
static void expect_resend(struct fixture *f, uint32_t psn, uint8_t seed)
{
	struct loop_pkt *p = expect_pkt(f, IB_OP_SEND_ONLY, psn);
	uint8_t want[64];

	fill(want, sizeof(want), seed);
	CU_ASSERT(be32toh(pkt_bth(p)->apsn) & BTH_ACKREQ);
	CU_ASSERT_EQUAL(pkt_paylen(p), sizeof(want));
	CU_ASSERT(memcmp(pkt_data(p), want, sizeof(want)) == 0);
	free(p);
}

/* IBA 9.7.5.1 ACK: the acknowledged SEND completes successfully. */
void test_comp_ack(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	post_and_see_send(&f, 81, SQ_PSN, 12);
	expect_no_wc(&f);
	inject_ack(&f, SQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	expect_send_wc(&f, 81, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.4 NAK remote access error: the SEND completes with
 * REM_ACCESS_ERR and the QP enters the error state (10.3.1).
 */
void test_comp_nak_access(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	post_and_see_send(&f, 82, SQ_PSN, 13);
	inject_ack(&f, SQ_PSN, AETH_NAK | AETH_NAK_REM_ACC_ERR, 0);
	expect_send_wc(&f, 82, IBV_WC_REM_ACCESS_ERR, IBV_WC_SEND, 0);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.8 / 9.7.6.2 RNR retry count: with rnr_retry 0 the first
 * RNR NAK ends the SEND with RNR_RETRY_EXC_ERR, nothing is resent.
 */
void test_comp_rnr_exhausted(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	post_and_see_send(&f, 83, SQ_PSN, 14);
	inject_ack(&f, SQ_PSN, AETH_RNR_NAK | 1, 0);
	expect_send_wc(&f, 83, IBV_WC_RNR_RETRY_EXC_ERR, IBV_WC_SEND, 0);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.1 / 9.7.5.1.2 PSN sequence error NAK: it acknowledges the
 * messages before its PSN (the first SEND completes) and the requester
 * resends from its PSN, same PSN and data; the resend's ACK completes it.
 */
void test_comp_nak_psn_seq(void)
{
	struct fixture f;

	fx_setup(&f, &default_params);
	post_and_see_send(&f, 84, SQ_PSN, 15);
	post_and_see_send(&f, 85, SQ_PSN + 1, 16);
	inject_ack(&f, SQ_PSN + 1, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 1);
	expect_send_wc(&f, 84, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	expect_resend(&f, SQ_PSN + 1, 16);
	expect_no_wc(&f);
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_send_wc(&f, 85, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.4.1.5 / 9.7.5.1.3 RDMA READ at the requester: the READ_REQUEST
 * carries the RETH of the WR; READ_RESPONSE_ONLY places its data in the
 * local buffer and completes the WR.
 */
void test_comp_read(void)
{
	uint32_t len = 256;
	struct loop_pkt *req, resp;
	const struct reth *reth;
	struct fixture f;
	uint8_t data[256];

	fx_setup(&f, &default_params);
	fill(data, len, 17);
	fx_post_send(&f, 86, IBV_WR_RDMA_READ, LOCAL_OFF, len,
		     0x123456789000ull, 0xabcd01);
	req = expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN);
	reth = (const struct reth *)(req->data +
				     opcode_get(IB_OP_READ_REQUEST)->reth);
	CU_ASSERT_EQUAL(be64toh(reth->va), 0x123456789000ull);
	CU_ASSERT_EQUAL(be32toh(reth->rkey), 0xabcd01);
	CU_ASSERT_EQUAL(be32toh(reth->len), len);
	CU_ASSERT(be32toh(pkt_bth(req)->apsn) & BTH_ACKREQ);
	free(req);
	expect_no_wc(&f);
	craft(&resp, &f, IB_OP_READ_RESPONSE_ONLY, SQ_PSN, false, data, len);
	set_aeth(&resp, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	loop_inject(&resp);
	expect_send_wc(&f, 86, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF, data, len) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/* A READ response of f's READ at psn carrying data[off, off+len). */
static void inject_read_resp(struct fixture *f, uint8_t opcode, uint32_t psn,
			     const uint8_t *data, uint32_t len)
{
	struct loop_pkt resp;

	craft(&resp, f, opcode, psn, false, data, len);
	if (opcode_get(opcode)->aeth)
		set_aeth(&resp, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	loop_inject(&resp);
}

/* The responses of a READ (re-)issued at psn for len bytes of data, all
 * of them, mtu bytes each: FIRST, MIDDLEs and LAST (or ONLY). */
static void inject_read_stream(struct fixture *f, uint32_t psn,
			       const uint8_t *data, uint32_t len, uint32_t mtu)
{
	uint32_t off = 0, n;
	uint8_t op;

	do {
		n = len - off < mtu ? len - off : mtu;
		if (len <= mtu)
			op = IB_OP_READ_RESPONSE_ONLY;
		else if (off == 0)
			op = IB_OP_READ_RESPONSE_FIRST;
		else if (off + n == len)
			op = IB_OP_READ_RESPONSE_LAST;
		else
			op = IB_OP_READ_RESPONSE_MIDDLE;
		inject_read_resp(f, op, psn++, data + off, n);
		off += n;
	} while (off < len);
}

/* A READ_REQUEST at psn asking for [va, va+len). */
static void expect_read_req(const struct fixture *f, uint32_t psn,
			    uint64_t va, uint32_t len)
{
	struct loop_pkt *req = expect_pkt(f, IB_OP_READ_REQUEST, psn);
	const struct reth *reth = (const struct reth *)(
		req->data + opcode_get(IB_OP_READ_REQUEST)->reth);

	CU_ASSERT_EQUAL(be64toh(reth->va), va);
	CU_ASSERT_EQUAL(be32toh(reth->len), len);
	free(req);
}

/*
 * IBA 9.7.5.2.1 / 9.7.5.1.3: a READ response that is not the next one
 * expected (a MIDDLE lost) is an implied sequence error: the READ does
 * not complete with a hole, it is re-issued for what is missing, from the
 * first response lost (IBA 9.7.4.1.5: its RETH moved on as far), and the
 * responses to that complete it with every byte.
 */
void test_comp_read_gap(void)
{
	uint32_t len = 2500, mtu = 1024;
	struct fixture f;
	uint8_t data[2500];

	fx_setup(&f, &default_params);
	fill(data, len, 19);
	memset(f.buf + LOCAL_OFF, 0, len);
	fx_post_send(&f, 87, IBV_WR_RDMA_READ, LOCAL_OFF, len,
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	inject_read_resp(&f, IB_OP_READ_RESPONSE_FIRST, SQ_PSN, data, mtu);
	inject_read_resp(&f, IB_OP_READ_RESPONSE_LAST, SQ_PSN + 2,
			 data + 2 * mtu, len - 2 * mtu);
	/* Re-issued for what is missing, from the first gap. */
	expect_read_req(&f, SQ_PSN + 1, 0x123456789000ull + mtu, len - mtu);
	expect_no_wc(&f);
	inject_read_stream(&f, SQ_PSN + 1, data + mtu, len - mtu, mtu);
	expect_send_wc(&f, 87, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF, data, len) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.1: after a missing READ response the READ is re-issued
 * once.  The responses of the first stream already on their way (here
 * two behind the gap) are left over, not further gaps: each of them used
 * to re-issue the READ again and spend a retry, so a loss followed by a
 * few stragglers ended in RETRY_EXC_ERR.  With retry_cnt 1 the READ must
 * still complete, every byte in place.
 */
void test_comp_read_gap_stragglers(void)
{
	struct qp_params params = default_params;
	uint32_t len = 3500, mtu = 1024;
	struct fixture f;
	uint8_t data[3500];

	params.retry_cnt = 1;
	fx_setup(&f, &params);
	fill(data, len, 23);
	memset(f.buf + LOCAL_OFF, 0, len);
	fx_post_send(&f, 88, IBV_WR_RDMA_READ, LOCAL_OFF, len,
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	inject_read_resp(&f, IB_OP_READ_RESPONSE_FIRST, SQ_PSN, data, mtu);
	/* SQ_PSN + 1 is lost; two more of the first stream follow. */
	inject_read_resp(&f, IB_OP_READ_RESPONSE_MIDDLE, SQ_PSN + 2,
			 data + 2 * mtu, mtu);
	inject_read_resp(&f, IB_OP_READ_RESPONSE_LAST, SQ_PSN + 3,
			 data + 3 * mtu, len - 3 * mtu);
	expect_read_req(&f, SQ_PSN + 1, 0x123456789000ull + mtu, len - mtu);
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	expect_quiet(); /* re-issued once only */
	expect_no_wc(&f);
	inject_read_stream(&f, SQ_PSN + 1, data + mtu, len - mtu, mtu);
	expect_send_wc(&f, 88, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF, data, len) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.1: a sequence-error NAK names the first PSN to resend.  The
 * requester resumes there, in the middle of a message if that is where
 * the responder stopped, and does not re-issue a READ before that PSN,
 * whose responses the responder queued before the NAK: re-issuing it
 * (and everything after) on every NAK spent the retries of a busy QP.
 */
void test_comp_nak_resend_from_psn(void)
{
	uint32_t len = 3000, mtu = 1024;
	struct loop_pkt *p;
	struct fixture f;
	uint8_t data[256];

	fx_setup(&f, &default_params);
	fill(data, sizeof(data), 29);
	fill(f.buf + LOCAL_OFF + 256, len, 31);
	fx_post_send(&f, 90, IBV_WR_RDMA_READ, LOCAL_OFF, sizeof(data),
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	fx_post_send(&f, 91, IBV_WR_SEND, LOCAL_OFF + 256, len, 0, 0);
	free(expect_pkt(&f, IB_OP_SEND_FIRST, SQ_PSN + 1));
	free(expect_pkt(&f, IB_OP_SEND_MIDDLE, SQ_PSN + 2));
	free(expect_pkt(&f, IB_OP_SEND_LAST, SQ_PSN + 3));
	/* The responder took the READ and the SEND's FIRST, lost the
	 * MIDDLE. */
	inject_ack(&f, SQ_PSN + 2, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 1);
	p = expect_pkt(&f, IB_OP_SEND_MIDDLE, SQ_PSN + 2);
	CU_ASSERT(memcmp(pkt_data(p), f.buf + LOCAL_OFF + 256 + mtu, mtu) ==
		  0);
	free(p);
	free(expect_pkt(&f, IB_OP_SEND_LAST, SQ_PSN + 3));
	expect_quiet();
	inject_read_resp(&f, IB_OP_READ_RESPONSE_ONLY, SQ_PSN, data,
			 sizeof(data));
	expect_send_wc(&f, 90, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sizeof(data));
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF, data, sizeof(data)) == 0);
	inject_ack(&f, SQ_PSN + 3, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_send_wc(&f, 91, IBV_WC_SUCCESS, IBV_WC_SEND, len);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.6.1: the retry budget counts attempts without forward progress.
 * Two NAKs naming ever later PSNs show the responder moving on, while the
 * READ at the head still waits for its response: with retry_cnt 1 the
 * second NAK must not end the QP in RETRY_EXC_ERR, as it did when only a
 * completion at the head restored the budget.
 */
void test_comp_nak_progress_restores_retries(void)
{
	struct qp_params params = default_params;
	struct fixture f;
	uint8_t data[64];
	int i;

	params.retry_cnt = 1;
	fx_setup(&f, &params);
	fill(data, sizeof(data), 37);
	fx_post_send(&f, 92, IBV_WR_RDMA_READ, LOCAL_OFF, sizeof(data),
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	for (i = 1; i <= 3; i++)
		post_and_see_send(&f, 92 + i, SQ_PSN + i, 40 + i);
	inject_ack(&f, SQ_PSN + 2, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 2);
	expect_resend(&f, SQ_PSN + 2, 42);
	expect_resend(&f, SQ_PSN + 3, 43);
	inject_ack(&f, SQ_PSN + 3, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 3);
	expect_resend(&f, SQ_PSN + 3, 43);
	expect_no_wc(&f);
	inject_read_resp(&f, IB_OP_READ_RESPONSE_ONLY, SQ_PSN, data,
			 sizeof(data));
	expect_send_wc(&f, 92, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sizeof(data));
	inject_ack(&f, SQ_PSN + 3, AETH_ACK | AETH_ACK_UNLIMITED, 4);
	for (i = 1; i <= 3; i++)
		expect_send_wc(&f, 92 + i, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.1.3 implied NAK: a responder answers in request order, so an
 * ACK for a SEND posted after a READ means the READ's responses were
 * lost.  The READ is re-issued at once (with the SEND behind it), not
 * left to the retransmit timer, once however many ACKs pass it before its
 * first response comes, and completes with its data.
 */
void test_comp_ack_past_read(void)
{
	uint32_t len = 256;
	struct fixture f;
	uint8_t data[256];

	fx_setup(&f, &default_params);
	fill(data, len, 23);
	memset(f.buf + LOCAL_OFF + 512, 0, len);
	fx_post_send(&f, 88, IBV_WR_RDMA_READ, LOCAL_OFF + 512, len,
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	post_and_see_send(&f, 89, SQ_PSN + 1, 24);
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	expect_resend(&f, SQ_PSN + 1, 24);
	/* The resent SEND's ACK passes the READ again before its response
	 * can come: nothing new, the READ is not re-issued twice. */
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_quiet();
	expect_no_wc(&f);
	inject_read_resp(&f, IB_OP_READ_RESPONSE_ONLY, SQ_PSN, data, len);
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_send_wc(&f, 88, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	expect_send_wc(&f, 89, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF + 512, data, len) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/* A READ_RESPONSE_ONLY at psn carrying data[0, len). */
static void inject_read_only(struct fixture *f, uint32_t psn,
			     const uint8_t *data, uint32_t len)
{
	inject_read_resp(f, IB_OP_READ_RESPONSE_ONLY, psn, data, len);
}

/*
 * IBA 9.7.5.1.3 / 9.7.6.1.3: READ A's response was lost, READ B's came:
 * A is re-issued, B behind it.  The responses the responder queued before
 * the resend reached it keep coming (here B's again): they pass A still,
 * but they do not answer its resend, which is not started again for each
 * of them.  It was: with retry_cnt 1 the second one ended the QP in
 * RETRY_EXC_ERR.  A's own response ends the resend; both complete.
 */
void test_comp_stale_response_past_reissued_read(void)
{
	struct qp_params prm = default_params;
	uint8_t a[64], b[64];
	struct fixture f;

	prm.retry_cnt = 1;
	fx_setup(&f, &prm);
	fill(a, sizeof(a), 61);
	fill(b, sizeof(b), 62);
	fx_post_send(&f, 101, IBV_WR_RDMA_READ, LOCAL_OFF, sizeof(a),
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	fx_post_send(&f, 102, IBV_WR_RDMA_READ, LOCAL_OFF + 64, sizeof(b),
		     0x123456789100ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN + 1));
	inject_read_only(&f, SQ_PSN + 1, b, sizeof(b));
	expect_read_req(&f, SQ_PSN, 0x123456789000ull, sizeof(a));
	expect_read_req(&f, SQ_PSN + 1, 0x123456789100ull, sizeof(b));
	/* The old stream's response of B, again: nothing new. */
	inject_read_only(&f, SQ_PSN + 1, b, sizeof(b));
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	expect_quiet();
	expect_no_wc(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	/* The resend's answers. */
	inject_read_only(&f, SQ_PSN, a, sizeof(a));
	inject_read_only(&f, SQ_PSN + 1, b, sizeof(b));
	expect_send_wc(&f, 101, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sizeof(a));
	expect_send_wc(&f, 102, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sizeof(b));
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF, a, sizeof(a)) == 0);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF + 64, b, sizeof(b)) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.2.1 / 9.7.5.1.3: a READ re-issued for an implied NAK, then a
 * NAK naming a later PSN (the responder took the READ again, lost a
 * SEND behind it, and NAKs ahead of the READ's responses it owes).  An
 * ACK of the old stream passing the READ afterwards implies nothing new:
 * the told NAK does not make the READ's resend look unanswered.  It did,
 * and the two resends alternated, each spending a retry, until
 * RETRY_EXC_ERR (here with retry_cnt 2).
 */
void test_comp_nak_between_implied_naks(void)
{
	struct qp_params prm = default_params;
	struct fixture f;
	uint8_t a[64];

	prm.retry_cnt = 2;
	fx_setup(&f, &prm);
	fill(a, sizeof(a), 63);
	fx_post_send(&f, 103, IBV_WR_RDMA_READ, LOCAL_OFF + 512, sizeof(a),
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	post_and_see_send(&f, 104, SQ_PSN + 1, 64);
	post_and_see_send(&f, 105, SQ_PSN + 2, 65);
	/* The SEND's ACK passes the READ: re-issued, SENDs behind. */
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_read_req(&f, SQ_PSN, 0x123456789000ull, sizeof(a));
	expect_resend(&f, SQ_PSN + 1, 64);
	expect_resend(&f, SQ_PSN + 2, 65);
	/* The responder lost the second SEND of the resend. */
	inject_ack(&f, SQ_PSN + 2, AETH_NAK | AETH_NAK_PSN_SEQ_ERR, 2);
	expect_resend(&f, SQ_PSN + 2, 65);
	/* The old stream's ACK, duplicated on its way: nothing new. */
	inject_ack(&f, SQ_PSN + 1, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	expect_quiet();
	expect_no_wc(&f);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	inject_read_only(&f, SQ_PSN, a, sizeof(a));
	inject_ack(&f, SQ_PSN + 2, AETH_ACK | AETH_ACK_UNLIMITED, 3);
	expect_send_wc(&f, 103, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, sizeof(a));
	expect_send_wc(&f, 104, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	expect_send_wc(&f, 105, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF + 512, a, sizeof(a)) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.6.1.3: the retry budget counts attempts that get no answer.  A
 * READ whose responses were lost after a later SEND's ACK came is
 * re-issued; each of its responses that comes is progress, though its
 * PSN is below what that ACK told, and restores the budget.  A second
 * loss inside the re-issued READ then re-issues it again, as a first
 * loss would; it used to end in RETRY_EXC_ERR (retry_cnt 1).
 */
void test_comp_read_progress_restores_retries(void)
{
	struct qp_params prm = default_params;
	uint32_t len = 2500, mtu = 1024;
	struct fixture f;
	uint8_t data[2500];

	prm.retry_cnt = 1;
	fx_setup(&f, &prm);
	fill(data, len, 66);
	memset(f.buf + LOCAL_OFF + 512, 0, len);
	fx_post_send(&f, 106, IBV_WR_RDMA_READ, LOCAL_OFF + 512, len,
		     0x123456789000ull, 0xabcd01);
	free(expect_pkt(&f, IB_OP_READ_REQUEST, SQ_PSN));
	post_and_see_send(&f, 107, SQ_PSN + 3, 67);
	/* The READ's three responses are lost; the SEND's ACK comes. */
	inject_ack(&f, SQ_PSN + 3, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_read_req(&f, SQ_PSN, 0x123456789000ull, len);
	expect_resend(&f, SQ_PSN + 3, 67);
	/* The first response comes, the second is lost again. */
	inject_read_resp(&f, IB_OP_READ_RESPONSE_FIRST, SQ_PSN, data, mtu);
	inject_read_resp(&f, IB_OP_READ_RESPONSE_LAST, SQ_PSN + 2,
			 data + 2 * mtu, len - 2 * mtu);
	expect_read_req(&f, SQ_PSN + 1, 0x123456789000ull + mtu, len - mtu);
	expect_resend(&f, SQ_PSN + 3, 67);
	expect_no_wc(&f);
	inject_read_stream(&f, SQ_PSN + 1, data + mtu, len - mtu, mtu);
	inject_ack(&f, SQ_PSN + 3, AETH_ACK | AETH_ACK_UNLIMITED, 2);
	expect_send_wc(&f, 106, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, len);
	expect_send_wc(&f, 107, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	CU_ASSERT(memcmp(f.buf + LOCAL_OFF + 512, data, len) == 0);
	expect_quiet();
	fx_teardown(&f);
}

/*
 * IBA 9.7.6.1.3: the transport timer runs for a request that cannot leave
 * because the responder takes nothing (its inbox stays full, as a stopped
 * process's does): after timeout x (retry_cnt + 1) the WQE completes with
 * RETRY_EXC_ERR instead of waiting for good.
 */
void test_comp_blocked_times_out(void)
{
	struct qp_params prm = default_params;
	struct ibv_wc wc;
	struct fixture f;
	int i;

	prm.timeout = 1; /* the shortest the engine uses: 32 ms */
	prm.retry_cnt = 1;
	fx_setup(&f, &prm);
	loop_set_room(0);
	fill(f.buf + LOCAL_OFF, 64, 25);
	fx_post_send(&f, 90, IBV_WR_SEND, LOCAL_OFF, 64, 0, 0);
	for (i = 0; i < 200 && emu_cq_poll(f.cq, 1, &wc) == 0; i++)
		usleep(10000);
	CU_ASSERT_FATAL(i < 200);
	CU_ASSERT_EQUAL(wc.wr_id, 90);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_RETRY_EXC_ERR);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	loop_set_room(-1);
	fx_teardown(&f);
}

/*
 * IBA 9.7.5.1: an ACK is valid for any PSN from the oldest unacknowledged
 * to the most recent one sent, and acknowledges every request up to it.
 * Three SENDs are sent, the retransmit timer goes off before their ACK
 * comes, and the resend stops after the first (the peer takes one more
 * packet): the ACK of the third, sent by a responder that had executed
 * all three, completes all three, and nothing more is resent.  The
 * completer took ACKs only up to where the resend had come: the other
 * two stayed outstanding behind the full peer until the retry budget
 * ran out, and completed in RETRY_EXC_ERR, executed as they were.
 */
void test_comp_ack_past_resend(void)
{
	struct qp_params prm = default_params;
	struct fixture f;
	int i;

	prm.timeout = 1; /* the shortest the engine uses: 32 ms */
	fx_setup(&f, &prm);
	for (i = 0; i < 3; i++)
		post_and_see_send(&f, 100 + i, SQ_PSN + i, 50 + i);
	loop_set_room(1);
	/* the timer's resend: the first SEND, then the peer is full */
	expect_resend(&f, SQ_PSN, 50);
	inject_ack(&f, SQ_PSN + 2, AETH_ACK | AETH_ACK_UNLIMITED, 3);
	for (i = 0; i < 3; i++)
		expect_send_wc(&f, 100 + i, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	loop_set_room(-1);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}
