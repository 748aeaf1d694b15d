/* SPDX-License-Identifier: MIT */
/*
 * The engine's unit tests (test_engine.c): one RC QP under test fed
 * crafted packets through the loop transport, the fixture that sets it
 * up, the packets crafted for it and the checks of what it answers
 * (engine_fixture.c), and the cases of each engine (test_engine_resp.c,
 * test_engine_comp.c, test_engine.c).
 */
#ifndef IBEMU_ENGINE_FIXTURE_H
#define IBEMU_ENGINE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "loop_transport.h"

#define WAIT_MS 1000 /* the longest any expected answer may take */
#define MTU 1024 /* IBV_MTU_1024 */
#define RQ_PSN 100 /* the responder's first expected PSN */
#define SQ_PSN 1000 /* the requester's first PSN */
#define RNR_TIMER 14 /* min_rnr_timer the responder advertises */
#define BUF_LEN 16384
#define RECV_OFF 0 /* receive buffers */
#define TARGET_OFF 4096 /* RDMA WRITE/READ/atomic target, 8 KiB */
#define LOCAL_OFF 12288 /* the requester's own buffers */

/* One QP under test, the QPN it is connected to, and their resources. */
struct fixture {
	struct emu_cq *cq;
	struct emu_qp *qp, *remote;
	uint32_t qpn, remote_qpn;
	struct emu_mr *mr;
	uint32_t key;
	uint8_t *buf;
	int async[2]; /* the QP's async events */
};

/* What a case changes of the QP's connection. */
struct qp_params {
	uint32_t rq_psn;
	uint8_t retry_cnt;
	uint8_t rnr_retry;
	uint8_t timeout; /* 0: no retransmit timer */
};

extern const struct qp_params default_params;

/* The HCA every case runs on (fx_run). */
extern struct emu_hca *hca;
struct unit_test;
/* Run the cases (unit.h) on a node of their own (IBEMU_NODE), over the
 * loop transport; the program's exit status. */
int fx_run(const char *suite, const struct unit_test *tests);

/* engine_fixture.c */
int fx_create_qp(struct fixture *f, struct emu_owner *owner,
		 struct emu_qp **qp_p, uint32_t *qpn_p);
void fx_connect(struct fixture *f, const struct qp_params *p);
/* A zeroed buffer of len bytes (mmap), registered in PD 1 with every
 * right, its address as its IOVA. */
void fx_region(size_t len, uint8_t **buf_p, struct emu_mr **mr_p,
	       uint32_t *key_p);
void fx_setup(struct fixture *f, const struct qp_params *p);
void fx_teardown(struct fixture *f);
uint64_t fx_va(const struct fixture *f, uint32_t off);
void fx_post_recv(struct fixture *f, uint64_t wr_id, uint32_t off,
		  uint32_t len);
void fx_post_send(struct fixture *f, uint64_t wr_id,
		  enum ibv_wr_opcode opcode, uint32_t off, uint32_t len,
		  uint64_t remote_addr, uint32_t rkey);
enum ibv_qp_state fx_state(struct fixture *f);
void craft(struct loop_pkt *p, const struct fixture *f,
	   uint8_t opcode, uint32_t psn, bool ackreq,
	   const void *payload, uint32_t paylen);
void *ext(struct loop_pkt *p, uint8_t off);
void set_reth(struct loop_pkt *p, uint64_t va, uint32_t rkey,
	      uint32_t len);
void set_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn);
void inject_send(struct fixture *f, uint8_t opcode, uint32_t psn,
		 const void *payload, uint32_t len);
void inject_ack(struct fixture *f, uint32_t psn, uint8_t syn,
		uint32_t msn);
struct bth *pkt_bth(struct loop_pkt *p);
uint32_t pkt_paylen(struct loop_pkt *p);
uint8_t *pkt_data(struct loop_pkt *p);
struct loop_pkt *expect_pkt(const struct fixture *f, uint8_t opcode,
			    uint32_t psn);
void expect_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn);
void expect_ack(const struct fixture *f, uint32_t psn, uint8_t syn,
		uint32_t msn);
void expect_quiet(void);
void expect_wc(struct fixture *f, struct ibv_wc *wc);
void expect_no_wc(struct fixture *f);
void expect_recv(struct fixture *f, uint64_t wr_id,
		 enum ibv_wc_status status, uint32_t byte_len);
void expect_send_wc(struct fixture *f, uint64_t wr_id,
		    enum ibv_wc_status status,
		    enum ibv_wc_opcode opcode, uint32_t byte_len);
void expect_event(struct fixture *f, enum ibv_event_type type);
void expect_no_event(struct fixture *f);
void fill(uint8_t *buf, uint32_t len, uint8_t seed);

/* test_engine_resp.c: the responder */
void test_resp_send_in_sequence(void);
void test_resp_ack_owed_at_error(void);
void test_resp_duplicate_send(void);
void test_resp_psn_ahead(void);
void test_resp_rnr(void);
void test_resp_write_bad_rkey(void);
void test_resp_write_past_mr(void);
void test_resp_send_too_long(void);
void test_resp_middle_without_first(void);
void test_resp_pull_without_placement(void);
void test_resp_read(void);
void test_resp_fetch_add(void);
void test_resp_fetch_add_pipelined(void);
void test_resp_ack_behind_read(void);
void test_resp_atomic_ack_full(void);
void test_resp_duplicate_atomic_then_read(void);
void test_resp_duplicate_reply_holds_no_resource(void);
void test_resp_duplicate_read_foreign(void);
void test_resp_duplicate_read_saved(void);
void test_resp_duplicate_atomic_foreign(void);
void test_resp_key_wrong_part(void);
void test_req_lkey_wrong_part(void);
void test_keys_not_bare_index(void);
void test_mw_type2_key_part(void);

/* test_engine_fast.c: the fast paths and a bundled ACK */
void test_fast_bundled_ack(void);
void test_fast_bundled_ack_stray(void);

/* test_engine_comp.c: the completer */
void test_comp_ack(void);
void test_comp_nak_access(void);
void test_comp_rnr_exhausted(void);
void test_comp_nak_psn_seq(void);
void test_comp_read(void);
void test_comp_read_gap(void);
void test_comp_read_gap_stragglers(void);
void test_comp_nak_resend_from_psn(void);
void test_comp_nak_progress_restores_retries(void);
void test_comp_ack_past_read(void);
void test_comp_stale_response_past_reissued_read(void);
void test_comp_nak_between_implied_naks(void);
void test_comp_read_progress_restores_retries(void);
void test_comp_blocked_times_out(void);
void test_comp_ack_past_resend(void);

#endif /* IBEMU_ENGINE_FIXTURE_H */
