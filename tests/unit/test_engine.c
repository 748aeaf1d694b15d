// SPDX-License-Identifier: MIT
/*
 * Unit tests of the engine alone (emulator/, without the provider): the
 * responder and the completer of one RC QP are fed crafted packets through
 * a transport of the test's own (loop_transport.c), and their answers (the
 * packets they send, the completions they make) are checked field by
 * field against the IBA rule each case names.
 *
 * The QP under test is connected to a second QP of this process that
 * stays in RESET: its QPN resolves to this process's node slot, which the
 * loop transport maps to its one fake peer, so everything the engine sends
 * is captured.  The whole program runs on a node of its own (IBEMU_NODE).
 */
#include "config.h"

#include "unit.h"
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine_fixture.h"


/* ---- the fault injector ---- */

#define FAULT_TEST_PKTS 2000
#define FAULT_TEST_ROUNDS 20

/*
 * IBEMU_FAULTS drop:P loses each receipt of a packet with probability P:
 * a packet resent again and again gets through.  The injector counts the
 * receipts of each packet, and its decision depends on the count; the
 * counts sat in a direct-mapped table, so two packets resent together
 * whose tags shared a slot reset each other's count on every round, met
 * their first decision every time, and one whose first decision was a
 * drop was lost for good: a retransmission loop no transport survives
 * (the RC fault run's requester resent the same WQEs until its retries
 * ran out).  Here 2000 packets are received 20 times each with drop:0.5;
 * every one must get through at least once.  The packets go to a QPN
 * that does not exist: those delivered are dropped by the engine.
 */
static void test_fault_resent_packet_gets_through(void)
{
	static unsigned int dropped[FAULT_TEST_PKTS];
	struct engine *e = hca->engine;
	struct fault_stats st;
	struct pkt_hdr hdr;
	struct bth bth;
	struct tp_pkt in = { .hdr = &hdr, .data = (uint8_t *)&bth };
	uint64_t before;
	unsigned int i, r, lost = 0;

	memset(dropped, 0, sizeof(dropped));
	setenv("IBEMU_FAULTS", "drop:0.5,seed=7", 1);
	emu_lock(&e->lock);
	CU_ASSERT_FATAL(fault_open(e) == 0);
	CU_ASSERT_FATAL(e->faults != NULL);
	for (r = 0; r < FAULT_TEST_ROUNDS; r++) {
		for (i = 0; i < FAULT_TEST_PKTS; i++) {
			memset(&hdr, 0, sizeof(hdr));
			memset(&bth, 0, sizeof(bth));
			hdr.len = sizeof(bth);
			hdr.src_qpn = 0xabcde;
			bth.opcode = IB_OP_SEND_ONLY;
			bth.qpn = htobe32(0xfffff0);
			bth.apsn = htobe32(i);
			fault_get_stats(e, &st);
			before = st.dropped;
			fault_recv(e, &in);
			fault_get_stats(e, &st);
			dropped[i] += (unsigned int)(st.dropped - before);
		}
	}
	fault_close(e);
	emu_unlock(&e->lock);
	unsetenv("IBEMU_FAULTS");
	for (i = 0; i < FAULT_TEST_PKTS; i++)
		lost += dropped[i] == FAULT_TEST_ROUNDS;
	CU_ASSERT_EQUAL(lost, 0);
}

/* ---- the program ---- */

/* Remove the node segment and anything else named for this node. */
/*
 * A destroyed QP's completions not yet polled leave its CQ with it (as
 * mlx4 and mlx5 clean the CQ in ibv_destroy_qp); another QP's stay.
 * libfabric's verbs provider drains the CQ right after destroying a QP
 * and would otherwise repost a receive to the endpoint it has freed.
 */
static void test_qp_destroy_drops_its_completions(void)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
	};
	struct ibv_sge sge;
	struct ibv_recv_wr wr = { .wr_id = 21, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	struct ibv_wc wc;
	struct fixture f;
	uint8_t msg[64];

	fx_setup(&f, &default_params);
	fill(msg, 64, 3);
	fx_post_recv(&f, 11, RECV_OFF, 256);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, 64);
	CU_ASSERT_FATAL(loop_settle(hca->engine, WAIT_MS));
	/* the other QP's flushed receive, queued after it */
	sge = (struct ibv_sge){ .addr = fx_va(&f, RECV_OFF + 256),
				.length = 256, .lkey = f.key };
	CU_ASSERT_FATAL(emu_qp_modify(f.remote, &a, IBV_QP_STATE |
				      IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS) == 0);
	CU_ASSERT_FATAL(emu_post_recv(f.remote, &wr, &bad) == 0);
	a.qp_state = IBV_QPS_ERR;
	CU_ASSERT_FATAL(emu_qp_modify(f.remote, &a, IBV_QP_STATE) == 0);
	CU_ASSERT(emu_qp_destroy(f.qp) == 0);
	CU_ASSERT_EQUAL_FATAL(emu_cq_poll(f.cq, 1, &wc), 1);
	CU_ASSERT_EQUAL(wc.qp_num, f.remote_qpn);
	CU_ASSERT_EQUAL(wc.wr_id, 21);
	CU_ASSERT_EQUAL(wc.status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(emu_cq_poll(f.cq, 1, &wc), 0);
	CU_ASSERT(emu_qp_destroy(f.remote) == 0);
	CU_ASSERT(emu_mr_dereg(f.mr) == 0);
	CU_ASSERT(emu_cq_destroy(f.cq) == 0);
	munmap(f.buf, BUF_LEN);
	close(f.async[0]);
	close(f.async[1]);
	loop_reset();
}

/* ---- a peer looked up over the network ---- */

/* A network transport whose lookup of a QPN's owner waits until the
 * test lets it answer: this process, as if the QP were on another node
 * whose door is slow to answer. */
static pthread_mutex_t slow_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cv = PTHREAD_COND_INITIALIZER;
static bool slow_entered, slow_release;

static bool slow_forced(struct engine *e)
{
	return true;
}

static int slow_resolve_qpn(struct engine *e,
			    const struct sockaddr_storage *node_addr,
			    uint16_t want_lid, uint32_t qpn, int32_t *slot_p)
{
	pthread_mutex_lock(&slow_mu);
	slow_entered = true;
	pthread_cond_broadcast(&slow_cv);
	while (!slow_release)
		pthread_cond_wait(&slow_cv, &slow_mu);
	pthread_mutex_unlock(&slow_mu);
	*slot_p = hca->node.proc_slot;
	return 0;
}

/* What the engine calls on any network transport: nothing to do. */
static void slow_idle(struct engine *e)
{
}

static const struct tp_net_ops slow_net = {
	.forced = slow_forced,
	.resolve_qpn = slow_resolve_qpn,
};
static const struct transport_ops slow_tp = {
	.name = "slow",
	.flush = slow_idle,
	.poll = slow_idle,
	.poll_done = slow_idle,
	.room = slow_idle,
	.net = &slow_net,
};

struct slow_modify {
	struct emu_qp *qp;
	uint32_t dest_qpn;
	int ret;
};

static void *slow_modify_rtr(void *arg)
{
	struct slow_modify *m = arg;
	struct emu_port_info port;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_1024,
		.rq_psn = RQ_PSN,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = RNR_TIMER,
	};

	emu_hca_port_info(hca, 1, &port);
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	a.dest_qp_num = m->dest_qpn;
	m->ret = emu_qp_modify(m->qp, &a, IBV_QP_STATE | IBV_QP_AV |
			       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
			       IBV_QP_MIN_RNR_TIMER);
	return NULL;
}

/* Wait up to WAIT_MS for the slow lookup to begin. */
static bool slow_wait_entered(void)
{
	struct timespec until;
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += WAIT_MS / 1000 + 1;
	pthread_mutex_lock(&slow_mu);
	while (!slow_entered && rc == 0)
		rc = pthread_cond_timedwait(&slow_cv, &slow_mu, &until);
	pthread_mutex_unlock(&slow_mu);
	return slow_entered;
}

/*
 * IBA 10.3.1: a QP in INIT drops what arrives for it, and the other QPs
 * of the HCA go on.  One QP is moved to RTR while the lookup of its peer
 * (on another node: a round trip to that node's door) is slow; a packet
 * for it arrives meanwhile, as its peer, already in RTS, sends at once
 * (gloo's pairs do), and then a SEND for another, connected QP.  The
 * SEND is executed and acknowledged while the lookup still waits, and
 * the transition completes once it answers.  The lookup ran under the
 * moving QP's lock, and the engine, which dispatches a packet holding
 * its own lock and then the QP's, took nothing for any QP until it
 * ended: the connected QPs' requesters timed out meanwhile.
 */
static void test_qp_rtr_lookup_holds_up_nobody(void)
{
	struct emu_owner owner = { .handle = 3, .async_fd = -1 };
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE,
	};
	struct slow_modify m = { .dest_qpn = 0 };
	struct fixture f, g;
	struct loop_pkt *ack;
	pthread_t t;
	uint8_t msg[64];

	fx_setup(&f, &default_params);
	g = f;
	CU_ASSERT_FATAL(fx_create_qp(&g, &owner, &g.qp, &g.qpn) == 0);
	CU_ASSERT_FATAL(emu_qp_modify(g.qp, &a, IBV_QP_STATE |
				      IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS) == 0);
	m.qp = g.qp;
	m.dest_qpn = f.remote_qpn;
	slow_entered = slow_release = false;
	hca->engine->net = &slow_tp;
	CU_ASSERT_FATAL(pthread_create(&t, NULL, slow_modify_rtr, &m) == 0);
	CU_ASSERT(slow_wait_entered());
	fill(msg, sizeof(msg), 5);
	fx_post_recv(&f, 61, RECV_OFF, 256);
	inject_send(&g, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	ack = loop_capture(WAIT_MS);
	CU_ASSERT_PTR_NOT_NULL(ack);
	if (ack) {
		CU_ASSERT_EQUAL(bth_qpn(pkt_bth(ack)), f.remote_qpn);
		CU_ASSERT_EQUAL(ack->hdr.src_qpn, f.qpn);
		CU_ASSERT_EQUAL(ack->data[0], IB_OP_ACKNOWLEDGE);
		CU_ASSERT_EQUAL(bth_psn(pkt_bth(ack)), RQ_PSN);
		free(ack);
	}
	pthread_mutex_lock(&slow_mu);
	slow_release = true;
	pthread_cond_broadcast(&slow_cv);
	pthread_mutex_unlock(&slow_mu);
	pthread_join(t, NULL);
	hca->engine->net = NULL;
	CU_ASSERT_EQUAL(m.ret, 0);
	CU_ASSERT_EQUAL(fx_state(&g), IBV_QPS_RTR);
	expect_recv(&f, 61, IBV_WC_SUCCESS, sizeof(msg));
	expect_quiet();
	CU_ASSERT(emu_qp_destroy(g.qp) == 0);
	fx_teardown(&f);
}

/*
 * Stopping the engine (the last ibv_close_device) while its thread has
 * just looked at the stop flag and is on its way to sleep with no timeout:
 * the stop's wake comes before the sleep began, which a futex does not
 * count, so the thread must learn of the stop from what its sleep checks
 * after it began.  It used to sleep until the next packet, and the
 * process hung in ibv_close_device.
 */
static void test_engine_stop_before_sleep(void)
{
	CU_ASSERT_FATAL(loop_hold_sleep(WAIT_MS));
	engine_stop(hca);
	CU_ASSERT(!loop_hold_timed_out());
	CU_ASSERT_FATAL(engine_start(hca) == 0);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "resp_send_in_sequence", test_resp_send_in_sequence },
		{ "resp_duplicate_send", test_resp_duplicate_send },
		{ "resp_ack_owed_at_error", test_resp_ack_owed_at_error },
		{ "resp_psn_ahead", test_resp_psn_ahead },
		{ "resp_rnr", test_resp_rnr },
		{ "resp_write_bad_rkey", test_resp_write_bad_rkey },
		{ "resp_write_past_mr", test_resp_write_past_mr },
		{ "resp_send_too_long", test_resp_send_too_long },
		{ "resp_middle_without_first",
		  test_resp_middle_without_first },
		{ "resp_pull_without_placement",
		  test_resp_pull_without_placement },
		{ "resp_read", test_resp_read },
		{ "resp_ack_behind_read", test_resp_ack_behind_read },
		{ "resp_atomic_ack_full", test_resp_atomic_ack_full },
		{ "comp_ack_past_read", test_comp_ack_past_read },
		{ "comp_blocked_times_out", test_comp_blocked_times_out },
		{ "comp_ack_past_resend", test_comp_ack_past_resend },
		{ "resp_fetch_add", test_resp_fetch_add },
		{ "resp_fetch_add_pipelined", test_resp_fetch_add_pipelined },
		{ "comp_ack", test_comp_ack },
		{ "fast_bundled_ack", test_fast_bundled_ack },
		{ "fast_bundled_ack_stray", test_fast_bundled_ack_stray },
		{ "comp_nak_access", test_comp_nak_access },
		{ "comp_rnr_exhausted", test_comp_rnr_exhausted },
		{ "comp_nak_psn_seq", test_comp_nak_psn_seq },
		{ "comp_read", test_comp_read },
		{ "comp_read_gap", test_comp_read_gap },
		{ "comp_read_gap_stragglers", test_comp_read_gap_stragglers },
		{ "comp_nak_resend_from_psn", test_comp_nak_resend_from_psn },
		{ "comp_nak_progress_restores_retries",
		  test_comp_nak_progress_restores_retries },
		{ "resp_duplicate_atomic_then_read",
		  test_resp_duplicate_atomic_then_read },
		{ "comp_stale_response_past_reissued_read",
		  test_comp_stale_response_past_reissued_read },
		{ "comp_nak_between_implied_naks",
		  test_comp_nak_between_implied_naks },
		{ "comp_read_progress_restores_retries",
		  test_comp_read_progress_restores_retries },
		{ "fault_resent_packet_gets_through",
		  test_fault_resent_packet_gets_through },
		{ "resp_duplicate_reply_holds_no_resource",
		  test_resp_duplicate_reply_holds_no_resource },
		{ "resp_duplicate_read_foreign",
		  test_resp_duplicate_read_foreign },
		{ "resp_duplicate_read_saved", test_resp_duplicate_read_saved },
		{ "resp_duplicate_atomic_foreign",
		  test_resp_duplicate_atomic_foreign },
		{ "resp_key_wrong_part", test_resp_key_wrong_part },
		{ "req_lkey_wrong_part", test_req_lkey_wrong_part },
		{ "keys_not_bare_index", test_keys_not_bare_index },
		{ "mw_type2_key_part", test_mw_type2_key_part },
		{ "engine_stop_before_sleep", test_engine_stop_before_sleep },
		{ "qp_destroy_drops_its_completions",
		  test_qp_destroy_drops_its_completions },
		{ "qp_rtr_lookup_holds_up_nobody",
		  test_qp_rtr_lookup_holds_up_nobody },
		{ NULL, NULL },
	};

	return fx_run("engine", tests);
}

