// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the rsocket protocol's receiving (rsocket_proto.c):
 * what the peer writes, as this side interprets it: its offer in the
 * connection's private data (rs_conn_data_take), then its messages in
 * our receive buffers as their completions report them (rs_poll_cq,
 * rs_recv_wc: headers, credits, data, iomap announcements, FIN), with
 * the application reading the stream (rs_recv_some) and writing to it
 * (rs_send_some) in between, so that the counters the peer sends meet a
 * sender using them.
 *
 * rsocket_proto.c is linked alone, on verbs objects of the harness's
 * own: the CQ yields the completions the input makes, one a poll, the
 * QP's receive queue is the FIFO of buffers posted (a peer's SEND lands
 * in the oldest, as in an RC receive queue, IBA 10.8.3), and its sends
 * complete when the input says.  They check the protocol's promises to
 * the peer: a buffer is posted again only once read (never while
 * stream bytes still wait in it), no more sends are outstanding than the
 * send queue holds, no data-class message goes beyond the peer's window
 * and no more credit messages than it has room for.
 *
 * Input: the peer's offer (struct rs_conn_data, 12 bytes), then records
 *   op:u8 len:u16 (little endian)
 *   op bits 0-1: 0 a message of the peer: len bytes (the completion's
 *                  byte_len; the bytes in the buffer, at most its size,
 *                  follow in the input); bits 2-3 its status: 0 success,
 *                  1 flushed, 2 a remote access error
 *                1 the application reads len bytes (bit 2: peeking)
 *                2 the application sends len bytes
 *                3 the oldest len & 15 outstanding sends complete (bit 2:
 *                  with an error)
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "rsocket.h"

#define FZ_RQ 4u
#define FZ_SQ 4u
#define FZ_NRECV (FZ_RQ + RS_CTRL_SLOTS + RS_FIN_SLOTS)
#define FZ_MAX_RECORDS 64
#define FZ_WR_RECV (1ull << 63)

/* What rsocket_proto.c calls that the harness does not drive
 * (rs_verbs_init, rs_res_create, rs_res_destroy). */
void *ibemu_verbs_sym(const char *name, const char *version)
{
	return NULL;
}

int ibemu_set_nonblock(int fd)
{
	return ENOSYS;
}

struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	errno = ENOSYS;
	return NULL;
}

int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
		   struct ibv_qp_init_attr *qp_init_attr)
{
	errno = ENOSYS;
	return -1;
}

void rdma_destroy_qp(struct rdma_cm_id *id)
{
}

/* ---- the verbs objects ---- */

static struct {
	/* the receive queue: buffer indexes in posting order */
	uint32_t rq[FZ_NRECV];
	uint32_t rq_head, rq_cnt;
	/* sends posted, not completed: their opcodes */
	enum ibv_wr_opcode sq[FZ_SQ];
	uint32_t sq_head, sq_cnt;
	/* the completion the next poll yields */
	struct ibv_wc wc;
	bool has_wc;
} fz;

static struct rsock rs;
static struct ibv_context ctx;
static struct ibv_cq cq = { .context = &ctx };
static struct ibv_qp qp = { .context = &ctx };
static struct rdma_cm_id id = { .qp = &qp };
static struct ibv_mr rmr, smr;
static uint8_t *rbuf, *sbuf, *app;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_rsocket: %s\n", what);
	abort();
}

static int fz_poll_cq(struct ibv_cq *c, int n, struct ibv_wc *wc)
{
	if (!fz.has_wc || n < 1)
		return 0;
	*wc = fz.wc;
	fz.has_wc = false;
	return 1;
}

static int fz_req_notify_cq(struct ibv_cq *c, int solicited_only)
{
	return 0;
}

/* A buffer still holding unread stream bytes, or already posted. */
static bool buffer_busy(uint32_t idx)
{
	uint32_t k;

	for (k = 0; k < rs.rxq_cnt; k++)
		if (rs.rxq[(rs.rxq_head + k) % rs.nrecv] == idx)
			return true;
	for (k = 0; k < fz.rq_cnt; k++)
		if (fz.rq[(fz.rq_head + k) % FZ_NRECV] == idx)
			return true;
	return false;
}

static int fz_post_recv(struct ibv_qp *q, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad)
{
	uint32_t idx = (uint32_t)(wr->wr_id & 0xffffffffu);

	if (idx >= FZ_NRECV || wr->num_sge != 1 ||
	    wr->sg_list[0].addr != (uintptr_t)(rbuf + idx * RS_MSG_SIZE) ||
	    wr->sg_list[0].length != RS_MSG_SIZE)
		die("a receive not of one of the buffers");
	if (buffer_busy(idx))
		die("a buffer posted again before it was read");
	fz.rq[(fz.rq_head + fz.rq_cnt++) % FZ_NRECV] = idx;
	return 0;
}

/* Messages the peer has room for, as this side counts them. */
static void window_check(const struct ibv_send_wr *wr)
{
	const struct rs_hdr *h = (const struct rs_hdr *)wr->sg_list[0].addr;

	if (wr->opcode != IBV_WR_SEND)
		return;
	if ((h->type == RS_DATA || h->type == RS_IOMAP) &&
	    rs.data_sent - rs.peer_data_freed >= rs.peer_q)
		die("a data-class message beyond the peer's window");
	if (h->type == RS_CREDIT &&
	    rs.ctrl_sent - rs.peer_ctrl_polled >= RS_CTRL_SLOTS)
		die("a credit message beyond the peer's room");
}

static int fz_post_send(struct ibv_qp *q, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad)
{
	if (fz.sq_cnt == FZ_SQ)
		die("more sends outstanding than the send queue holds");
	if (wr->sg_list[0].length > RS_MSG_SIZE ||
	    wr->sg_list[0].addr < (uintptr_t)sbuf ||
	    wr->sg_list[0].addr + wr->sg_list[0].length >
		    (uintptr_t)(sbuf + FZ_SQ * RS_MSG_SIZE))
		die("a send outside the send buffers");
	window_check(wr);
	fz.sq[(fz.sq_head + fz.sq_cnt++) % FZ_SQ] = wr->opcode;
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	ctx.ops.poll_cq = fz_poll_cq;
	ctx.ops.req_notify_cq = fz_req_notify_cq;
	ctx.ops.post_recv = fz_post_recv;
	ctx.ops.post_send = fz_post_send;
	rbuf = malloc(FZ_NRECV * RS_MSG_SIZE);
	sbuf = malloc(FZ_SQ * RS_MSG_SIZE);
	app = malloc(1u << 16);
	if (!rbuf || !sbuf || !app)
		die("malloc");
	memset(app, 'a', 1u << 16);
	return 0;
}

/* A connected rsocket, every receive buffer posted (rs_res_create). */
static void rs_reset(void)
{
	static uint32_t rxq[FZ_NRECV], rx_pos[FZ_NRECV], rx_end[FZ_NRECV];
	uint32_t i;

	memset(&rs, 0, sizeof(rs));
	memset(&fz, 0, sizeof(fz));
	rs.fd = -1;
	rs.state = RS_CONNECTED;
	rs.id = &id;
	rs.cq = &cq;
	rs.rq_size = FZ_RQ;
	rs.sq_size = FZ_SQ;
	rs.nrecv = FZ_NRECV;
	rs.rbuf = rbuf;
	rs.sbuf = sbuf;
	rs.rmr = &rmr;
	rs.smr = &smr;
	rs.rxq = rxq;
	rs.rx_pos = rx_pos;
	rs.rx_end = rx_end;
	for (i = 0; i < FZ_NRECV; i++)
		fz.rq[fz.rq_cnt++] = i;
}

static const enum ibv_wc_status statuses[4] = {
	IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR, IBV_WC_REM_ACCESS_ERR,
	IBV_WC_SUCCESS,
};

/* The peer's SEND into the oldest posted buffer. */
static void message(uint8_t op, uint16_t len, struct input *in)
{
	uint32_t idx;

	if (!fz.rq_cnt)
		return; /* the peer has no buffer: it may not send */
	idx = fz.rq[fz.rq_head];
	fz.rq_head = (fz.rq_head + 1) % FZ_NRECV;
	fz.rq_cnt--;
	take(in, rbuf + idx * RS_MSG_SIZE,
	     len < RS_MSG_SIZE ? len : RS_MSG_SIZE);
	memset(&fz.wc, 0, sizeof(fz.wc));
	fz.wc.wr_id = FZ_WR_RECV | idx;
	fz.wc.status = statuses[(op >> 2) & 3];
	fz.wc.opcode = IBV_WC_RECV;
	fz.wc.byte_len = len;
	fz.has_wc = true;
	rs_poll_cq(&rs);
}

static void send_done(uint8_t op, uint16_t len)
{
	uint32_t n = len & 15;

	while (n-- && fz.sq_cnt) {
		memset(&fz.wc, 0, sizeof(fz.wc));
		fz.wc.wr_id = fz.sq_head;
		fz.wc.status = op & 4 ? IBV_WC_RETRY_EXC_ERR : IBV_WC_SUCCESS;
		fz.wc.opcode = fz.sq[fz.sq_head] == IBV_WR_RDMA_WRITE
				       ? IBV_WC_RDMA_WRITE
				       : IBV_WC_SEND;
		fz.sq_head = (fz.sq_head + 1) % FZ_SQ;
		fz.sq_cnt--;
		fz.has_wc = true;
		rs_poll_cq(&rs);
	}
}

static void record(uint8_t op, uint16_t len, struct input *in)
{
	struct iovec iov = { .iov_base = app, .iov_len = len };
	size_t n;

	switch (op & 3) {
	case 0:
		message(op, len, in);
		break;
	case 1:
		n = rs_recv_some(&rs, &iov, 1, 0, len, op & 4);
		if (n > len)
			die("read more than asked");
		break;
	case 2:
		n = rs_send_some(&rs, &iov, 1, 0, len);
		if (n > len)
			die("sent more than asked");
		break;
	default:
		send_done(op, len);
		break;
	}
	if (rs.rxq_cnt > rs.nrecv)
		die("more buffers queued than there are");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct rs_conn_data offer;
	unsigned int records = 0;
	uint16_t len;
	uint8_t op;

	rs_reset();
	take(&in, &offer, sizeof(offer));
	if (rs_conn_data_take(&rs, &offer, sizeof(offer)))
		return 0; /* refused: the connection fails */
	while (in.n && records++ < FZ_MAX_RECORDS) {
		take(&in, &op, 1);
		take(&in, &len, 2);
		len = le16toh(len);
		record(op, len, &in);
	}
	return 0;
}
