// SPDX-License-Identifier: MIT
/*
 * The two-sided fast paths and the acknowledgement bundled behind a
 * SEND (emulator/engine/resp_fast.c, comp_fast.c, ack_bundle.c): a
 * bundled ACK completes what it acknowledges, as one sent alone would,
 * and a stale one completes nothing.  (The fast
 * paths take the other cases' SENDs and ACKs too: test_engine_resp.c and
 * test_engine_comp.c run with them on.)
 */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <CUnit/CUnit.h>

#include "engine_fixture.h"

/* A SEND_ONLY of len bytes at psn with an acknowledgement of ack_psn
 * (ACK, unlimited credits, msn) bundled behind it (wire.h). */
static void inject_send_bundled(struct fixture *f, uint32_t psn,
				const void *payload, uint32_t len,
				uint32_t ack_psn, uint32_t msn)
{
	struct loop_pkt p;
	struct bundled_ack b = {
		.psn = htobe32(ack_psn & BTH_PSN_MASK),
		.aeth = htobe32((uint32_t)(AETH_ACK | AETH_ACK_UNLIMITED)
					<< 24 |
				(msn & 0xffffff)),
	};

	craft(&p, f, IB_OP_SEND_ONLY, psn, true, payload, len);
	CU_ASSERT_FATAL(pkt_bundle_fits(p.hdr.len));
	p.hdr.flags |= PKT_F_ACK_BUNDLED;
	memcpy(p.data + pkt_bundle_off(p.hdr.len), &b, sizeof(b));
	loop_inject(&p);
}

/* Post a 64-byte signaled SEND and take the SEND_ONLY it becomes. */
static void post_send_64(struct fixture *f, uint64_t wr_id, uint32_t psn)
{
	struct loop_pkt *p;

	fill(f->buf + LOCAL_OFF, 64, 7);
	fx_post_send(f, wr_id, IBV_WR_SEND, LOCAL_OFF, 64, 0, 0);
	p = expect_pkt(f, IB_OP_SEND_ONLY, psn);
	free(p);
}

/*
 * A SEND in flight (wr_id), then a SEND from the peer with an ACK of
 * ack_psn bundled behind it: the SEND is received whole, and the one in
 * flight completes at once if the bundled ACK covers it (IBA 9.7.5.1),
 * else only with an ACK of its own.
 */
static void bundled_case(uint64_t wr_id, uint32_t ack_psn, bool covers)
{
	struct fixture f;
	uint8_t msg[32];

	fx_setup(&f, &default_params);
	post_send_64(&f, wr_id, SQ_PSN);
	fx_post_recv(&f, wr_id + 1, RECV_OFF, 256);
	fill(msg, sizeof(msg), (uint8_t)wr_id);
	inject_send_bundled(&f, RQ_PSN, msg, sizeof(msg), ack_psn, 1);
	expect_recv(&f, wr_id + 1, IBV_WC_SUCCESS, sizeof(msg));
	CU_ASSERT(memcmp(f.buf + RECV_OFF, msg, sizeof(msg)) == 0);
	if (!covers) {
		expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
		expect_no_wc(&f);
		inject_ack(&f, SQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	}
	expect_send_wc(&f, wr_id, IBV_WC_SUCCESS, IBV_WC_SEND, 64);
	if (covers)
		expect_ack(&f, RQ_PSN, AETH_ACK | AETH_ACK_UNLIMITED, 1);
	expect_quiet();
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_RTS);
	fx_teardown(&f);
}

/* The SEND is received and the bundled ACK completes the SEND in
 * flight, each as if it had come alone. */
void test_fast_bundled_ack(void)
{
	bundled_case(91, SQ_PSN, true);
}

/* A bundled ACK of a PSN before the one in flight (a duplicate, IBA
 * 9.7.5.1) acknowledges nothing new. */
void test_fast_bundled_ack_stray(void)
{
	bundled_case(93, SQ_PSN - 1, false);
}
