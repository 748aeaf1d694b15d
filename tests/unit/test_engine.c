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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "loop_transport.h"
#include "shmfile.h"

#define WAIT_MS 1000 /* the longest any expected answer may take */
#define MTU 1024 /* IBV_MTU_1024 */
#define RQ_PSN 100 /* the responder's first expected PSN */
#define SQ_PSN 1000 /* the requester's first PSN */
#define RNR_TIMER 14 /* min_rnr_timer the responder advertises */
#define BUF_LEN 16384
#define RECV_OFF 0 /* receive buffers */
#define TARGET_OFF 4096 /* RDMA WRITE/READ/atomic target, 8 KiB */
#define LOCAL_OFF 12288 /* the requester's own buffers */

static struct emu_hca *hca;
static char node_name[64];

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

static const struct qp_params default_params = {
	.rq_psn = RQ_PSN,
	.retry_cnt = 3,
	.rnr_retry = 0,
};

/* ---- setting up ---- */

static int fx_create_qp(struct fixture *f, struct emu_owner *owner,
			struct emu_qp **qp_p, uint32_t *qpn_p)
{
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC,
		.pd_id = 1,
		.send_cq = f->cq,
		.recv_cq = f->cq,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 2, .max_recv_sge = 2 },
		.owner = *owner,
	};

	return emu_qp_create(hca, &init, qp_p, qpn_p);
}

/* RESET -> INIT -> RTR -> RTS, connected to remote_qpn (IBA 11.2.5.2). */
static void fx_connect(struct fixture *f, const struct qp_params *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	struct emu_port_info port;

	CU_ASSERT_FATAL(emu_qp_modify(f->qp, &a, IBV_QP_STATE |
				      IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				      IBV_QP_ACCESS_FLAGS) == 0);
	emu_hca_port_info(hca, &port);
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = f->remote_qpn;
	a.rq_psn = p->rq_psn;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = RNR_TIMER;
	CU_ASSERT_FATAL(emu_qp_modify(f->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				      IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				      IBV_QP_RQ_PSN |
				      IBV_QP_MAX_DEST_RD_ATOMIC |
				      IBV_QP_MIN_RNR_TIMER) == 0);
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = SQ_PSN;
	/* By default no retransmit timer: resends come from NAKs only. */
	a.timeout = p->timeout;
	a.retry_cnt = p->retry_cnt;
	a.rnr_retry = p->rnr_retry;
	a.max_rd_atomic = 4;
	CU_ASSERT_FATAL(emu_qp_modify(f->qp, &a, IBV_QP_STATE |
				      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
				      IBV_QP_MAX_QP_RD_ATOMIC) == 0);
}

static void fx_setup(struct fixture *f, const struct qp_params *p)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };

	memset(f, 0, sizeof(*f));
	loop_reset();
	CU_ASSERT_FATAL(pipe2(f->async, O_NONBLOCK | O_CLOEXEC) == 0);
	f->buf = mmap(NULL, BUF_LEN, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(f->buf != MAP_FAILED);
	memset(f->buf, 0, BUF_LEN);
	CU_ASSERT_FATAL(emu_cq_create(hca, 64, -1, &owner, false, NULL, &f->cq) == 0);
	CU_ASSERT_FATAL(emu_mr_reg(hca, 1, f->buf, BUF_LEN,
				   (uintptr_t)f->buf,
				   IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
				   &f->mr, &f->key) == 0);
	CU_ASSERT_FATAL(fx_create_qp(f, &owner, &f->remote,
				     &f->remote_qpn) == 0);
	owner.handle = 2;
	owner.async_fd = f->async[1];
	CU_ASSERT_FATAL(fx_create_qp(f, &owner, &f->qp, &f->qpn) == 0);
	fx_connect(f, p);
}

static void fx_teardown(struct fixture *f)
{
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT(emu_qp_destroy(f->qp) == 0);
	CU_ASSERT(emu_qp_destroy(f->remote) == 0);
	CU_ASSERT(emu_mr_dereg(f->mr) == 0);
	CU_ASSERT(emu_cq_destroy(f->cq) == 0);
	munmap(f->buf, BUF_LEN);
	close(f->async[0]);
	close(f->async[1]);
	loop_reset();
}

static uint64_t fx_va(const struct fixture *f, uint32_t off)
{
	return (uintptr_t)f->buf + off;
}

static void fx_post_recv(struct fixture *f, uint64_t wr_id, uint32_t off,
			 uint32_t len)
{
	struct ibv_sge sge = {
		.addr = fx_va(f, off), .length = len, .lkey = f->key,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	CU_ASSERT_FATAL(emu_post_recv(f->qp, &wr, &bad) == 0);
}

static void fx_post_send(struct fixture *f, uint64_t wr_id,
			 enum ibv_wr_opcode opcode, uint32_t off, uint32_t len,
			 uint64_t remote_addr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = fx_va(f, off), .length = len, .lkey = f->key,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = opcode, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = remote_addr;
	wr.wr.rdma.rkey = rkey;
	CU_ASSERT_FATAL(emu_post_send(f->qp, &wr, &bad, false) == 0);
}

static enum ibv_qp_state fx_state(struct fixture *f)
{
	struct ibv_qp_attr a;

	emu_qp_query(f->qp, &a);
	return a.qp_state;
}

/* ---- crafting packets ---- */

/* A packet from the remote QP to the QP under test. */
static void craft(struct loop_pkt *p, const struct fixture *f,
		  uint8_t opcode, uint32_t psn, bool ackreq,
		  const void *payload, uint32_t paylen)
{
	const struct opcode_info *op = opcode_get(opcode);
	struct bth *bth = (struct bth *)p->data;

	memset(p, 0, sizeof(*p));
	p->hdr.len = op->hdr_len + paylen;
	p->hdr.slid = hca->node.seg->lid;
	p->hdr.dlid = hca->node.seg->lid;
	p->hdr.src_qpn = f->remote_qpn;
	p->hdr.src_proc = hca->node.proc_slot;
	bth->opcode = opcode;
	bth->flags = (uint8_t)(((4 - (paylen & 3)) & 3) << BTH_PAD_SHIFT);
	bth->pkey = htobe16(IBEMU_DEFAULT_PKEY);
	bth->qpn = htobe32(f->qpn);
	bth->apsn = htobe32((psn & BTH_PSN_MASK) | (ackreq ? BTH_ACKREQ : 0));
	if (paylen)
		memcpy(p->data + op->hdr_len, payload, paylen);
}

static void *ext(struct loop_pkt *p, uint8_t off)
{
	CU_ASSERT_FATAL(off != 0);
	return p->data + off;
}

static void set_reth(struct loop_pkt *p, uint64_t va, uint32_t rkey,
		     uint32_t len)
{
	struct reth *r = ext(p, opcode_get(p->data[0])->reth);

	r->va = htobe64(va);
	r->rkey = htobe32(rkey);
	r->len = htobe32(len);
}

static void set_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn)
{
	struct aeth *a = ext(p, opcode_get(p->data[0])->aeth);

	a->smsn = htobe32((uint32_t)syn << 24 | (msn & 0xffffff));
}

static void inject_send(struct fixture *f, uint8_t opcode, uint32_t psn,
			const void *payload, uint32_t len)
{
	struct loop_pkt p;

	craft(&p, f, opcode, psn, true, payload, len);
	loop_inject(&p);
}

static void inject_ack(struct fixture *f, uint32_t psn, uint8_t syn,
		       uint32_t msn)
{
	struct loop_pkt p;

	craft(&p, f, IB_OP_ACKNOWLEDGE, psn, false, NULL, 0);
	set_aeth(&p, syn, msn);
	loop_inject(&p);
}

/* ---- checking answers ---- */

static struct bth *pkt_bth(struct loop_pkt *p)
{
	return (struct bth *)p->data;
}

static uint32_t pkt_paylen(struct loop_pkt *p)
{
	return p->hdr.len - opcode_get(p->data[0])->hdr_len;
}

static uint8_t *pkt_data(struct loop_pkt *p)
{
	return p->data + opcode_get(p->data[0])->hdr_len;
}

/* The next packet the QP sends: to the remote QP, with opcode and psn. */
static struct loop_pkt *expect_pkt(const struct fixture *f, uint8_t opcode,
				   uint32_t psn)
{
	struct loop_pkt *p = loop_capture(WAIT_MS);

	CU_ASSERT_PTR_NOT_NULL_FATAL(p);
	CU_ASSERT_EQUAL(p->hdr.src_qpn, f->qpn);
	CU_ASSERT_EQUAL(bth_qpn(pkt_bth(p)), f->remote_qpn);
	CU_ASSERT_EQUAL(p->data[0], opcode);
	CU_ASSERT_EQUAL(bth_psn(pkt_bth(p)), psn);
	return p;
}

static void expect_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn)
{
	const struct opcode_info *op = opcode_get(p->data[0]);
	uint32_t smsn;

	CU_ASSERT_FATAL(op->aeth != 0);
	smsn = be32toh(((struct aeth *)(p->data + op->aeth))->smsn);
	CU_ASSERT_EQUAL(smsn >> 24, syn);
	CU_ASSERT_EQUAL(smsn & 0xffffff, msn);
}

/* An ACKNOWLEDGE packet: the coalesced ACK, a NAK or an RNR NAK. */
static void expect_ack(const struct fixture *f, uint32_t psn, uint8_t syn,
		       uint32_t msn)
{
	struct loop_pkt *p = expect_pkt(f, IB_OP_ACKNOWLEDGE, psn);

	expect_aeth(p, syn, msn);
	CU_ASSERT_EQUAL(pkt_paylen(p), 0);
	free(p);
}

/* Everything injected is consumed and nothing more was sent. */
static void expect_quiet(void)
{
	CU_ASSERT_FATAL(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(loop_captured(), 0);
}

static void expect_wc(struct fixture *f, struct ibv_wc *wc)
{
	struct timespec ts = { 0, 100000 };
	int i, n = 0;

	for (i = 0; i < WAIT_MS * 10 && n == 0; i++) {
		n = emu_cq_poll(f->cq, 1, wc);
		if (!n)
			nanosleep(&ts, NULL);
	}
	CU_ASSERT_EQUAL_FATAL(n, 1);
	CU_ASSERT_EQUAL(wc->qp_num, f->qpn);
}

static void expect_no_wc(struct fixture *f)
{
	struct ibv_wc wc;

	CU_ASSERT_FATAL(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(emu_cq_poll(f->cq, 1, &wc), 0);
}

static void expect_recv(struct fixture *f, uint64_t wr_id,
			enum ibv_wc_status status, uint32_t byte_len)
{
	struct ibv_wc wc;

	expect_wc(f, &wc);
	CU_ASSERT_EQUAL(wc.wr_id, wr_id);
	CU_ASSERT_EQUAL(wc.status, status);
	CU_ASSERT_EQUAL(wc.opcode, IBV_WC_RECV);
	if (status == IBV_WC_SUCCESS) {
		CU_ASSERT_EQUAL(wc.byte_len, byte_len);
		CU_ASSERT_EQUAL(wc.src_qp, f->remote_qpn);
	}
}

static void expect_send_wc(struct fixture *f, uint64_t wr_id,
			   enum ibv_wc_status status,
			   enum ibv_wc_opcode opcode, uint32_t byte_len)
{
	struct ibv_wc wc;

	expect_wc(f, &wc);
	CU_ASSERT_EQUAL(wc.wr_id, wr_id);
	CU_ASSERT_EQUAL(wc.status, status);
	if (status == IBV_WC_SUCCESS) {
		CU_ASSERT_EQUAL(wc.opcode, opcode);
		CU_ASSERT_EQUAL(wc.byte_len, byte_len);
	}
}

/* The QP's next async event is type. */
static void expect_event(struct fixture *f, enum ibv_event_type type)
{
	struct emu_event_desc d;

	CU_ASSERT_EQUAL_FATAL(read(f->async[0], &d, sizeof(d)), sizeof(d));
	CU_ASSERT_EQUAL(d.event_type, type);
	CU_ASSERT_EQUAL(d.element, 2);
}

static void fill(uint8_t *buf, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i * 7);
}

/* ---- the responder ---- */

/*
 * IBA 9.7.5.1.1 coalesced acknowledgement: two SEND_ONLY in sequence,
 * drained together, complete two receives with their data and earn one
 * ACK, for the later PSN, with the MSN of both messages.
 */
static void test_resp_send_in_sequence(void)
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
static void test_resp_ack_owed_at_error(void)
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
static void test_resp_duplicate_send(void)
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
static void test_resp_psn_ahead(void)
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
static void test_resp_rnr(void)
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
static void test_resp_write_bad_rkey(void)
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
static void test_resp_write_past_mr(void)
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
static void test_resp_send_too_long(void)
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
static void test_resp_middle_without_first(void)
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
static void test_resp_pull_without_placement(void)
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
 * a duplicate READ is executed again (9.7.4.1.2).
 */
static void test_resp_read(void)
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
static void test_resp_fetch_add(void)
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
static void test_resp_fetch_add_pipelined(void)
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
static void test_resp_ack_behind_read(void)
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
static void test_resp_atomic_ack_full(void)
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
static void test_resp_duplicate_atomic_then_read(void)
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
static void test_resp_duplicate_reply_holds_no_resource(void)
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
static void test_comp_ack(void)
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
static void test_comp_nak_access(void)
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
static void test_comp_rnr_exhausted(void)
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
static void test_comp_nak_psn_seq(void)
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
static void test_comp_read(void)
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
static void test_comp_read_gap(void)
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
static void test_comp_read_gap_stragglers(void)
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
static void test_comp_nak_resend_from_psn(void)
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
static void test_comp_nak_progress_restores_retries(void)
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
static void test_comp_ack_past_read(void)
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
static void test_comp_stale_response_past_reissued_read(void)
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
static void test_comp_nak_between_implied_naks(void)
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
static void test_comp_read_progress_restores_retries(void)
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
static void test_comp_blocked_times_out(void)
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
static void drop_node(void)
{
	shmfile_unlink_node(node_name);
}


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
		{ "resp_fetch_add", test_resp_fetch_add },
		{ "resp_fetch_add_pipelined", test_resp_fetch_add_pipelined },
		{ "comp_ack", test_comp_ack },
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
		{ "engine_stop_before_sleep", test_engine_stop_before_sleep },
		{ "qp_destroy_drops_its_completions",
		  test_qp_destroy_drops_its_completions },
		{ NULL, NULL },
	};
	int ret;

	snprintf(node_name, sizeof(node_name), "unit-engine-%d",
		 (int)getpid());
	setenv("IBEMU_NODE", node_name, 1);
	engine_use_transport(&loop_ops);
	if (emu_hca_get(&hca)) {
		fprintf(stderr, "test_engine: cannot attach the HCA\n");
		drop_node();
		return 1;
	}
	ret = unit_run("engine", tests);
	emu_hca_put(hca);
	drop_node();
	return ret;
}
