// SPDX-License-Identifier: MIT
/*
 * The engine tests' fixture (engine_fixture.h): one RC QP under test and
 * the QP it is connected to, packets crafted for it, and checks of the
 * packets and completions it answers with.
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

#include "engine_fixture.h"
#include "shmfile.h"

struct emu_hca *hca;
static char node_name[64];

const struct qp_params default_params = {
	.rq_psn = RQ_PSN,
	.retry_cnt = 3,
	.rnr_retry = 0,
};

/* ---- setting up ---- */

int fx_create_qp(struct fixture *f, struct emu_owner *owner,
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
void fx_connect(struct fixture *f, const struct qp_params *p)
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
	emu_hca_port_info(hca, 1, &port);
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

void fx_region(size_t len, uint8_t **buf_p, struct emu_mr **mr_p,
	       uint32_t *key_p)
{
	uint8_t *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	CU_ASSERT_FATAL(buf != MAP_FAILED);
	CU_ASSERT_FATAL(emu_mr_reg(hca, 1, buf, len, (uintptr_t)buf,
				   IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
				   mr_p, key_p) == 0);
	*buf_p = buf;
}

void fx_setup(struct fixture *f, const struct qp_params *p)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };

	memset(f, 0, sizeof(*f));
	loop_reset();
	CU_ASSERT_FATAL(pipe2(f->async, O_NONBLOCK | O_CLOEXEC) == 0);
	fx_region(BUF_LEN, &f->buf, &f->mr, &f->key);
	CU_ASSERT_FATAL(emu_cq_create(hca, 64, -1, &owner, false, NULL, &f->cq) == 0);
	CU_ASSERT_FATAL(fx_create_qp(f, &owner, &f->remote,
				     &f->remote_qpn) == 0);
	owner.handle = 2;
	owner.async_fd = f->async[1];
	CU_ASSERT_FATAL(fx_create_qp(f, &owner, &f->qp, &f->qpn) == 0);
	fx_connect(f, p);
}

void fx_teardown(struct fixture *f)
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

uint64_t fx_va(const struct fixture *f, uint32_t off)
{
	return (uintptr_t)f->buf + off;
}

void fx_post_recv(struct fixture *f, uint64_t wr_id, uint32_t off,
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

void fx_post_send(struct fixture *f, uint64_t wr_id,
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

enum ibv_qp_state fx_state(struct fixture *f)
{
	struct ibv_qp_attr a;

	emu_qp_query(f->qp, &a);
	return a.qp_state;
}

/* ---- crafting packets ---- */

/* A packet from the remote QP to the QP under test. */
void craft(struct loop_pkt *p, const struct fixture *f,
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

void *ext(struct loop_pkt *p, uint8_t off)
{
	CU_ASSERT_FATAL(off != 0);
	return p->data + off;
}

void set_reth(struct loop_pkt *p, uint64_t va, uint32_t rkey,
	      uint32_t len)
{
	struct reth *r = ext(p, opcode_get(p->data[0])->reth);

	r->va = htobe64(va);
	r->rkey = htobe32(rkey);
	r->len = htobe32(len);
}

void set_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn)
{
	struct aeth *a = ext(p, opcode_get(p->data[0])->aeth);

	a->smsn = htobe32((uint32_t)syn << 24 | (msn & 0xffffff));
}

void inject_send(struct fixture *f, uint8_t opcode, uint32_t psn,
		 const void *payload, uint32_t len)
{
	struct loop_pkt p;

	craft(&p, f, opcode, psn, true, payload, len);
	loop_inject(&p);
}

void inject_ack(struct fixture *f, uint32_t psn, uint8_t syn,
		uint32_t msn)
{
	struct loop_pkt p;

	craft(&p, f, IB_OP_ACKNOWLEDGE, psn, false, NULL, 0);
	set_aeth(&p, syn, msn);
	loop_inject(&p);
}

/* ---- checking answers ---- */

struct bth *pkt_bth(struct loop_pkt *p)
{
	return (struct bth *)p->data;
}

uint32_t pkt_paylen(struct loop_pkt *p)
{
	return p->hdr.len - opcode_get(p->data[0])->hdr_len;
}

uint8_t *pkt_data(struct loop_pkt *p)
{
	return p->data + opcode_get(p->data[0])->hdr_len;
}

/* The next packet the QP sends: to the remote QP, with opcode and psn. */
struct loop_pkt *expect_pkt(const struct fixture *f, uint8_t opcode,
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

void expect_aeth(struct loop_pkt *p, uint8_t syn, uint32_t msn)
{
	const struct opcode_info *op = opcode_get(p->data[0]);
	uint32_t smsn;

	CU_ASSERT_FATAL(op->aeth != 0);
	smsn = be32toh(((struct aeth *)(p->data + op->aeth))->smsn);
	CU_ASSERT_EQUAL(smsn >> 24, syn);
	CU_ASSERT_EQUAL(smsn & 0xffffff, msn);
}

/* An ACKNOWLEDGE packet: the coalesced ACK, a NAK or an RNR NAK. */
void expect_ack(const struct fixture *f, uint32_t psn, uint8_t syn,
		uint32_t msn)
{
	struct loop_pkt *p = expect_pkt(f, IB_OP_ACKNOWLEDGE, psn);

	expect_aeth(p, syn, msn);
	CU_ASSERT_EQUAL(pkt_paylen(p), 0);
	free(p);
}

/* Everything injected is consumed and nothing more was sent. */
void expect_quiet(void)
{
	CU_ASSERT_FATAL(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(loop_captured(), 0);
}

void expect_wc(struct fixture *f, struct ibv_wc *wc)
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

void expect_no_wc(struct fixture *f)
{
	struct ibv_wc wc;

	CU_ASSERT_FATAL(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT_EQUAL(emu_cq_poll(f->cq, 1, &wc), 0);
}

void expect_recv(struct fixture *f, uint64_t wr_id,
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

void expect_send_wc(struct fixture *f, uint64_t wr_id,
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
void expect_event(struct fixture *f, enum ibv_event_type type)
{
	struct emu_event_desc d;

	CU_ASSERT_EQUAL_FATAL(read(f->async[0], &d, sizeof(d)), sizeof(d));
	CU_ASSERT_EQUAL(d.event_type, type);
	CU_ASSERT_EQUAL(d.element, 2);
}

/* The QP raised no async event. */
void expect_no_event(struct fixture *f)
{
	struct emu_event_desc d;

	CU_ASSERT_EQUAL(read(f->async[0], &d, sizeof(d)), -1);
}

void fill(uint8_t *buf, uint32_t len, uint8_t seed)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + i * 7);
}

/* ---- running ---- */

static void drop_node(void)
{
	shmfile_unlink_node(node_name);
}

int fx_run(const char *suite, const struct unit_test *tests)
{
	int ret;

	snprintf(node_name, sizeof(node_name), "unit-%s-%d", suite,
		 (int)getpid());
	setenv("IBEMU_NODE", node_name, 1);
	engine_use_transport(&loop_ops);
	if (emu_hca_get(&hca)) {
		fprintf(stderr, "test_%s: cannot attach the HCA\n", suite);
		drop_node();
		return 1;
	}
	ret = unit_run(suite, tests);
	emu_hca_put(hca);
	drop_node();
	return ret;
}
