// SPDX-License-Identifier: MIT
/*
 * The Dynamically Connected transport (emulator/hca/dc.c) in the engine
 * alone, over the loop transport: the test is the wire, taking every
 * packet the engine sends and handing it back, so a DCI and its DCTs,
 * all of this process, talk as over a fabric (and the test can watch,
 * drop or forge packets on the way).
 */
#include "config.h"

#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine_fixture.h"
#include "shmfile.h"

#define KEY1 0x1111222233334444ull
#define KEY2 0x5555666677778888ull
#define DC_BUF_LEN 65536
#define DC_RECV_OFF 0	    /* receive buffers, 2 KiB, 1 KiB apart */
#define DC_TARGET_OFF 32768 /* RDMA targets */
#define DC_LOCAL_OFF 49152  /* the DCI's own buffers */

/* The DCI, two DCTs with an SRQ and a CQ each, one region, one AH. */
struct dc_fx {
	struct emu_cq *scq, *rcq[2];
	struct emu_srq *srq[2];
	struct emu_qp *dci, *dct[2];
	uint32_t dcin, dctn[2];
	struct emu_mr *mr;
	uint32_t key;
	uint32_t ah;
	uint8_t *buf;
};

/* What the wire saw: one letter per packet ('a', 'b': a request to
 * DCT 0 or 1, 'k' an ACK to the DCI, 'r' an RNR NAK, 'n' another NAK,
 * 'd' a READ response, '?' else), and how it may meddle. */
static struct {
	char log[256];
	unsigned int n;
	int drop_first_request; /* drop the next request packet */
	uint32_t stream_psn[8]; /* the DCETH stream PSN of requests */
	unsigned int nr_streams;
} wire;

static void wire_reset(void)
{
	memset(&wire, 0, sizeof(wire));
}

static char wire_letter(struct dc_fx *f, const struct loop_pkt *p)
{
	const struct opcode_info *op = opcode_get(p->data[0]);
	uint32_t dqpn = bth_qpn((const struct bth *)p->data), smsn;

	if (op->mask & OPM_DCETH)
		return dqpn == f->dctn[0]   ? 'a'
		       : dqpn == f->dctn[1] ? 'b'
					    : 'x';
	if (op->mask & OPM_READ)
		return 'd';
	if (!(op->mask & OPM_AETH))
		return '?';
	smsn = be32toh(((const struct aeth *)(p->data + op->aeth))->smsn);
	switch ((smsn >> 24) & AETH_TYPE_MASK) {
	case AETH_ACK:
		return 'k';
	case AETH_RNR_NAK:
		return 'r';
	default:
		return 'n';
	}
}

/* Note a request's stream PSN when it is a new one. */
static void wire_note_stream(const struct loop_pkt *p)
{
	const struct opcode_info *op = opcode_get(p->data[0]);
	const struct dceth *h = (const struct dceth *)(p->data + op->dceth);
	uint32_t sp = be32toh(h->stream_psn) & BTH_PSN_MASK;

	if (wire.nr_streams && wire.stream_psn[wire.nr_streams - 1] == sp)
		return;
	if (wire.nr_streams < 8)
		wire.stream_psn[wire.nr_streams++] = sp;
}

/* Carry the packets the engine sends until cq has want completions (in
 * wc) or WAIT_MS passes; the number it had. */
static int pump(struct dc_fx *f, struct emu_cq *cq, int want, struct ibv_wc *wc)
{
	struct timespec t0, t;
	struct loop_pkt *p;
	int n = 0;
	char c;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (cq && n < want)
			n += emu_cq_poll(cq, want - n, wc + n);
		if (cq && n >= want)
			return n;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if ((t.tv_sec - t0.tv_sec) * 1000 +
			    (t.tv_nsec - t0.tv_nsec) / 1000000 >
		    (cq ? WAIT_MS : 100))
			return n;
		p = loop_capture(2);
		if (!p)
			continue;
		c = wire_letter(f, p);
		if (wire.n < sizeof(wire.log) - 1)
			wire.log[wire.n++] = c;
		if (c == 'a' || c == 'b')
			wire_note_stream(p);
		if ((c == 'a' || c == 'b') && wire.drop_first_request) {
			wire.drop_first_request = 0;
			free(p);
			continue;
		}
		loop_inject(p);
		free(p);
	}
}

static void dc_modify(struct emu_qp *qp, struct ibv_qp_attr *a, int mask)
{
	CU_ASSERT_FATAL(emu_qp_modify(qp, a, mask | IBV_QP_STATE) == 0);
}

/* A DCI in RTS with the modify masks mlx5 asks for. */
static void dci_create(struct dc_fx *f, uint8_t timeout, uint8_t retry,
		       uint8_t rnr_retry, struct emu_qp **qp_p, uint32_t *qpn_p)
{
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC,
		.pd_id = 1,
		.send_cq = f->scq,
		.recv_cq = f->scq,
		.cap = {.max_send_wr = 16, .max_send_sge = 2},
		.owner = {.handle = 10, .async_fd = -1},
		.dc_type = EMU_DC_DCI,
	};
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1};

	CU_ASSERT_FATAL(emu_qp_create(hca, &init, qp_p, qpn_p) == 0);
	CU_ASSERT_EQUAL(init.cap.max_recv_wr, 0);
	dc_modify(*qp_p, &a, IBV_QP_PKEY_INDEX | IBV_QP_PORT);
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	dc_modify(*qp_p, &a, IBV_QP_PATH_MTU);
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry;
	a.rnr_retry = rnr_retry;
	a.sq_psn = SQ_PSN;
	a.max_rd_atomic = 4;
	dc_modify(*qp_p, &a,
		  IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static void dct_create(struct dc_fx *f, int i, uint64_t key)
{
	struct ibv_srq_attr sa = {.max_wr = 128, .max_sge = 1};
	struct emu_owner owner = {.handle = 20 + i, .async_fd = -1};
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC,
		.pd_id = 1,
		.recv_cq = f->rcq[i],
		.owner = owner,
		.dc_type = EMU_DC_DCT,
		.dct_key = key,
	};
	struct emu_port_info port;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	CU_ASSERT_FATAL(emu_cq_create(hca, 256, -1, &owner, false, NULL,
				      &f->rcq[i]) == 0);
	init.recv_cq = f->rcq[i];
	CU_ASSERT_FATAL(emu_srq_create(hca, 1, &sa, &owner, NULL, &f->srq[i]) ==
			0);
	/* No SRQ: not a DCT. */
	CU_ASSERT_EQUAL(emu_qp_create(hca, &init, &f->dct[i], &f->dctn[i]),
			EINVAL);
	init.srq = f->srq[i];
	CU_ASSERT_FATAL(emu_qp_create(hca, &init, &f->dct[i], &f->dctn[i]) ==
			0);
	dc_modify(f->dct[i], &a,
		  IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	emu_hca_port_info(hca, 1, &port);
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = port.lid;
	a.path_mtu = IBV_MTU_1024;
	a.min_rnr_timer = 1;
	dc_modify(f->dct[i], &a,
		  IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_MIN_RNR_TIMER);
	/* A DCT never sends: it has no RTS. */
	a.qp_state = IBV_QPS_RTS;
	CU_ASSERT_EQUAL(
		emu_qp_modify(f->dct[i], &a, IBV_QP_STATE | IBV_QP_SQ_PSN),
		EINVAL);
}

static void dc_setup(struct dc_fx *f)
{
	struct emu_owner owner = {.handle = 1, .async_fd = -1};
	struct emu_port_info port;
	struct ibv_ah_attr av = {.port_num = 1};

	memset(f, 0, sizeof(*f));
	loop_reset();
	wire_reset();
	fx_region(DC_BUF_LEN, &f->buf, &f->mr, &f->key);
	CU_ASSERT_FATAL(
		emu_cq_create(hca, 256, -1, &owner, false, NULL, &f->scq) == 0);
	emu_hca_port_info(hca, 1, &port);
	av.dlid = port.lid;
	CU_ASSERT_FATAL(emu_ah_create(hca, &av, &f->ah) == 0);
	dct_create(f, 0, KEY1);
	dct_create(f, 1, KEY2);
	dci_create(f, 0, 3, 7, &f->dci, &f->dcin);
}

static void dc_teardown(struct dc_fx *f)
{
	int i;

	CU_ASSERT(emu_qp_destroy(f->dci) == 0);
	for (i = 0; i < 2; i++) {
		CU_ASSERT(emu_qp_destroy(f->dct[i]) == 0);
		CU_ASSERT(emu_srq_destroy(f->srq[i]) == 0);
		CU_ASSERT(emu_cq_destroy(f->rcq[i]) == 0);
	}
	emu_ah_destroy(hca, f->ah);
	CU_ASSERT(emu_mr_dereg(f->mr) == 0);
	CU_ASSERT(emu_cq_destroy(f->scq) == 0);
	munmap(f->buf, DC_BUF_LEN);
	loop_reset();
}

static void srq_post(struct dc_fx *f, int i, uint64_t wr_id, uint32_t off)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->buf + off,
		.length = 2048,
		.lkey = f->key,
	};
	struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1};
	struct ibv_recv_wr *bad;

	CU_ASSERT_FATAL(emu_srq_post_recv(f->srq[i], &wr, &bad) == 0);
}

/* Post one WR of qp to DCT i (key: its DC key), signaled. */
static int dc_post(struct dc_fx *f, struct emu_qp *qp, int i, uint64_t key,
		   uint64_t wr_id, enum ibv_wr_opcode opcode, uint32_t off,
		   uint32_t len, uint32_t remote_off)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)f->buf + off,
		.length = len,
		.lkey = f->key,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct emu_wr_ext x = {
		.has_dc = true,
		.dc = {.ah_handle = f->ah,
		       .dctn = f->dctn[i & 1],
		       .dc_key = key},
	};
	struct ibv_send_wr *bad;

	if (i > 1)
		x.dc.dctn = (uint32_t)i; /* a number that names no DCT */
	wr.wr.rdma.remote_addr = (uintptr_t)f->buf + remote_off;
	wr.wr.rdma.rkey = f->key;
	return emu_post_send_ext(qp, &wr, &x, &bad, false);
}

static enum ibv_qp_state qp_state(struct emu_qp *qp)
{
	struct ibv_qp_attr a;

	emu_qp_query(qp, &a);
	return a.qp_state;
}

/* ---- the cases ---- */

/* One DCI serves two DCTs in turn: each SEND lands in its DCT's SRQ and
 * CQ, named by the DCT's number and the DCI's; the DCI changes target
 * only once what it sent before is acknowledged, with a new stream. */
static void test_dc_send_two_dcts(void)
{
	struct ibv_wc wc[4];
	struct dc_fx f;
	int i;

	dc_setup(&f);
	srq_post(&f, 0, 100, DC_RECV_OFF);
	srq_post(&f, 0, 101, DC_RECV_OFF + 1024);
	srq_post(&f, 1, 200, DC_RECV_OFF + 2048);
	for (i = 0; i < 3; i++)
		memset(f.buf + DC_LOCAL_OFF + i * 256, 'A' + i, 256);
	CU_ASSERT(dc_post(&f, f.dci, 0, KEY1, 1, IBV_WR_SEND, DC_LOCAL_OFF, 100,
			  0) == 0);
	CU_ASSERT(dc_post(&f, f.dci, 1, KEY2, 2, IBV_WR_SEND,
			  DC_LOCAL_OFF + 256, 200, 0) == 0);
	CU_ASSERT(dc_post(&f, f.dci, 0, KEY1, 3, IBV_WR_SEND_WITH_IMM,
			  DC_LOCAL_OFF + 512, 50, 0) == 0);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 3, wc), 3);
	for (i = 0; i < 3; i++) {
		CU_ASSERT_EQUAL(wc[i].wr_id, (uint64_t)i + 1);
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc[i].qp_num, f.dcin);
	}
	/* Each target in turn, after the ACK of the one before. */
	CU_ASSERT_STRING_EQUAL(wire.log, "akbkak");
	CU_ASSERT_EQUAL(wire.nr_streams, 3);
	CU_ASSERT_EQUAL(wire.stream_psn[0], SQ_PSN);
	CU_ASSERT_EQUAL(wire.stream_psn[1], SQ_PSN + 1);
	CU_ASSERT_EQUAL(wire.stream_psn[2], SQ_PSN + 2);

	CU_ASSERT_EQUAL_FATAL(emu_cq_poll(f.rcq[0], 4, wc), 2);
	CU_ASSERT_EQUAL(wc[0].wr_id, 100);
	CU_ASSERT_EQUAL(wc[0].byte_len, 100);
	CU_ASSERT_EQUAL(wc[1].wr_id, 101);
	CU_ASSERT_EQUAL(wc[1].byte_len, 50);
	CU_ASSERT(wc[1].wc_flags & IBV_WC_WITH_IMM);
	for (i = 0; i < 2; i++) {
		CU_ASSERT_EQUAL(wc[i].status, IBV_WC_SUCCESS);
		CU_ASSERT_EQUAL(wc[i].opcode, IBV_WC_RECV);
		CU_ASSERT_EQUAL(wc[i].qp_num, f.dctn[0]);
		CU_ASSERT_EQUAL(wc[i].src_qp, f.dcin);
	}
	CU_ASSERT_EQUAL_FATAL(emu_cq_poll(f.rcq[1], 4, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 200);
	CU_ASSERT_EQUAL(wc[0].byte_len, 200);
	CU_ASSERT_EQUAL(wc[0].qp_num, f.dctn[1]);
	CU_ASSERT_EQUAL(wc[0].src_qp, f.dcin);
	CU_ASSERT(!memcmp(f.buf + DC_RECV_OFF, f.buf + DC_LOCAL_OFF, 100));
	CU_ASSERT(!memcmp(f.buf + DC_RECV_OFF + 1024,
			  f.buf + DC_LOCAL_OFF + 512, 50));
	CU_ASSERT(!memcmp(f.buf + DC_RECV_OFF + 2048,
			  f.buf + DC_LOCAL_OFF + 256, 200));
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), 1);
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[1]), 1);
	/* A DCI WR must name its target; a DCT takes no send WR. */
	CU_ASSERT_EQUAL(
		emu_post_send_ext(f.dci,
				  &(struct ibv_send_wr){.opcode = IBV_WR_SEND},
				  NULL, &(struct ibv_send_wr *){NULL}, false),
		EINVAL);
	dc_teardown(&f);
}

/* RDMA WRITE of three packets, whose first is lost (the DCT's responder
 * starts from the DCETH's stream PSN and NAKs the gap), then a READ from
 * the other DCT. */
static void test_dc_write_read(void)
{
	struct ibv_wc wc[2];
	struct dc_fx f;
	uint32_t i;

	dc_setup(&f);
	for (i = 0; i < 3000; i++)
		f.buf[DC_LOCAL_OFF + i] = (uint8_t)(i * 7 + 1);
	for (i = 0; i < 2500; i++)
		f.buf[DC_TARGET_OFF + 4096 + i] = (uint8_t)(i * 3 + 5);
	wire.drop_first_request = 1;
	CU_ASSERT(dc_post(&f, f.dci, 0, KEY1, 1, IBV_WR_RDMA_WRITE,
			  DC_LOCAL_OFF, 3000, DC_TARGET_OFF) == 0);
	CU_ASSERT(dc_post(&f, f.dci, 1, KEY2, 2, IBV_WR_RDMA_READ,
			  DC_LOCAL_OFF + 4096, 2500,
			  DC_TARGET_OFF + 4096) == 0);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 2, wc), 2);
	CU_ASSERT_EQUAL(wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[0].opcode, IBV_WC_RDMA_WRITE);
	CU_ASSERT_EQUAL(wc[1].wr_id, 2);
	CU_ASSERT_EQUAL(wc[1].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(wc[1].opcode, IBV_WC_RDMA_READ);
	CU_ASSERT(!memcmp(f.buf + DC_TARGET_OFF, f.buf + DC_LOCAL_OFF, 3000));
	CU_ASSERT(!memcmp(f.buf + DC_LOCAL_OFF + 4096,
			  f.buf + DC_TARGET_OFF + 4096, 2500));
	/* The lost FIRST: MIDDLE and LAST drew a PSN sequence NAK. */
	CU_ASSERT_PTR_NOT_NULL(strchr(wire.log, 'n'));
	CU_ASSERT_PTR_NOT_NULL(strstr(wire.log, "bddd"));
	/* One-sided operations complete nothing at the target. */
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[0], 2, wc), 0);
	dc_teardown(&f);
}

/* A request with another key is not executed, creates no responder, and
 * completes with REM_ACCESS_ERR; the DCI is then in ERR, the rest
 * flushed. */
static void test_dc_wrong_key(void)
{
	struct ibv_wc wc[4];
	struct emu_qp *dci2;
	uint32_t dci2n;
	struct dc_fx f;

	dc_setup(&f);
	srq_post(&f, 0, 100, DC_RECV_OFF);
	CU_ASSERT(dc_post(&f, f.dci, 0, KEY2, 1, IBV_WR_SEND, DC_LOCAL_OFF, 64,
			  0) == 0);
	CU_ASSERT(dc_post(&f, f.dci, 0, KEY1, 2, IBV_WR_SEND, DC_LOCAL_OFF, 64,
			  0) == 0);
	CU_ASSERT(dc_post(&f, f.dci, 1, KEY2, 3, IBV_WR_SEND, DC_LOCAL_OFF, 64,
			  0) == 0);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 3, wc), 3);
	CU_ASSERT_EQUAL(wc[0].wr_id, 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_REM_ACCESS_ERR);
	CU_ASSERT_EQUAL(wc[1].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(wc[2].status, IBV_WC_WR_FLUSH_ERR);
	CU_ASSERT_EQUAL(qp_state(f.dci), IBV_QPS_ERR);
	CU_ASSERT_STRING_EQUAL(wire.log, "an");
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), 0);
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[0], 1, wc), 0);
	/* The SRQ's WQE is still there, for a request with the key. */
	dci_create(&f, 0, 3, 7, &dci2, &dci2n);
	CU_ASSERT(dc_post(&f, dci2, 0, KEY1, 4, IBV_WR_SEND, DC_LOCAL_OFF, 64,
			  0) == 0);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[0], 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 100);
	CU_ASSERT_EQUAL(wc[0].src_qp, dci2n);
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), 1);
	CU_ASSERT(emu_qp_destroy(dci2) == 0);
	dc_teardown(&f);
}

/* The DCT's SRQ is empty: RNR NAK with its min_rnr_timer, then success
 * once a receive is posted. */
static void test_dc_rnr(void)
{
	struct ibv_wc wc[2];
	struct dc_fx f;

	dc_setup(&f);
	CU_ASSERT(dc_post(&f, f.dci, 1, KEY2, 1, IBV_WR_SEND, DC_LOCAL_OFF, 32,
			  0) == 0);
	CU_ASSERT_EQUAL(pump(&f, NULL, 0, NULL), 0);
	CU_ASSERT_EQUAL(wire.log[0], 'b');
	CU_ASSERT_EQUAL(wire.log[1], 'r');
	CU_ASSERT_EQUAL(emu_cq_poll(f.scq, 1, wc), 0);
	srq_post(&f, 1, 200, DC_RECV_OFF);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_SUCCESS);
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[1], 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].wr_id, 200);
	CU_ASSERT_EQUAL(wc[0].byte_len, 32);
	dc_teardown(&f);
}

/* A DCT number that names no DCT: what RC gets for a QP that is not
 * there, retries and then RETRY_EXC_ERR. */
static void test_dc_no_such_dct(void)
{
	struct ibv_wc wc[1];
	struct emu_qp *dci2;
	uint32_t dci2n;
	struct dc_fx f;

	dc_setup(&f);
	dci_create(&f, 8, 2, 0, &dci2, &dci2n);
	CU_ASSERT(dc_post(&f, dci2, (int)(f.dctn[1] + 100), KEY1, 1,
			  IBV_WR_SEND, DC_LOCAL_OFF, 16, 0) == 0);
	CU_ASSERT_EQUAL_FATAL(pump(&f, f.scq, 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].status, IBV_WC_RETRY_EXC_ERR);
	CU_ASSERT_EQUAL(qp_state(dci2), IBV_QPS_ERR);
	CU_ASSERT(emu_qp_destroy(dci2) == 0);
	dc_teardown(&f);
}

/* A forged DC request of initiator qpn (a process of ours), with
 * DCT 0's key. */
static void forge(struct dc_fx *f, uint8_t code, uint32_t qpn, uint32_t psn,
		  uint32_t stream, uint64_t key, uint32_t paylen)
{
	uint8_t opcode = IB_OPCODE_DC | code;
	const struct opcode_info *op = opcode_get(opcode);
	struct loop_pkt *p = calloc(1, sizeof(*p));
	struct bth *bth = (struct bth *)p->data;
	struct dceth *h = (struct dceth *)(p->data + op->dceth);

	p->hdr.len = op->hdr_len + paylen;
	p->hdr.slid = hca->node.seg->lid;
	p->hdr.dlid = hca->node.seg->lid;
	p->hdr.src_qpn = qpn;
	p->hdr.src_proc = hca->node.proc_slot;
	bth->opcode = opcode;
	bth->pkey = htobe16(IBEMU_DEFAULT_PKEY);
	bth->qpn = htobe32(f->dctn[0]);
	bth->apsn = htobe32(psn | BTH_ACKREQ);
	h->key = htobe64(key);
	h->stream_psn = htobe32(stream);
	loop_inject(p);
	free(p);
}

/* Drop what the DCT answered the forged initiators. */
static unsigned int drain(void)
{
	struct loop_pkt *p;
	unsigned int n = 0;

	loop_settle(hca->engine, WAIT_MS);
	while ((p = loop_capture(20))) {
		free(p);
		n++;
	}
	return n;
}

/* Responders are made only for the right key, at most
 * IBEMU_MAX_DCR_PER_DCT of them; when all are busy a new stream's
 * packet is dropped, and an idle one serves it once there is one. */
static void test_dc_responder_bound(void)
{
	const uint32_t base = 0x800000;
	struct ibv_wc wc[1];
	struct dc_fx f;
	uint32_t i;

	dc_setup(&f);
	for (i = 0; i < 200; i++)
		forge(&f, IB_OP_SEND_ONLY, base + i, 5, 5, KEY2, 0);
	CU_ASSERT_EQUAL(drain(), 200); /* 200 NAKs */
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), 0);

	for (i = 0; i < IBEMU_MAX_DCR_PER_DCT; i++)
		srq_post(&f, 0, 100 + i, DC_RECV_OFF);
	/* Each FIRST opens a message: its responder is busy. */
	for (i = 0; i < IBEMU_MAX_DCR_PER_DCT + 10; i++)
		forge(&f, IB_OP_SEND_FIRST, base + i, 7, 7, KEY1, 1024);
	drain();
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), IBEMU_MAX_DCR_PER_DCT);
	/* A stream with no responder: dropped, unanswered. */
	forge(&f, IB_OP_SEND_ONLY, base + 500, 9, 9, KEY1, 0);
	CU_ASSERT_EQUAL(drain(), 0);
	/* One message ends: its responder becomes free. */
	forge(&f, IB_OP_SEND_LAST, base, 8, 7, KEY1, 16);
	CU_ASSERT_EQUAL(drain(), 1);
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[0], 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].src_qp, base);
	CU_ASSERT_EQUAL(wc[0].byte_len, 1040);
	srq_post(&f, 0, 999, DC_RECV_OFF);
	forge(&f, IB_OP_SEND_ONLY, base + 500, 9, 9, KEY1, 0);
	CU_ASSERT_EQUAL(drain(), 1);
	CU_ASSERT_EQUAL(emu_cq_poll(f.rcq[0], 1, wc), 1);
	CU_ASSERT_EQUAL(wc[0].src_qp, base + 500);
	CU_ASSERT_EQUAL(dc_dct_responders(f.dct[0]), IBEMU_MAX_DCR_PER_DCT);
	dc_teardown(&f);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{"dc_send_two_dcts", test_dc_send_two_dcts},
		{"dc_write_read", test_dc_write_read},
		{"dc_wrong_key", test_dc_wrong_key},
		{"dc_rnr", test_dc_rnr},
		{"dc_no_such_dct", test_dc_no_such_dct},
		{"dc_responder_bound", test_dc_responder_bound},
		{NULL, NULL},
	};
	return fx_run("dc", tests);
}
