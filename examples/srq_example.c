// SPDX-License-Identifier: MIT
/*
 * The SRQ program of the "RDMA Aware Networks Programming User Manual"
 * (chapter 8.3, "Shared Received Queue (SRQ)"), written for ibemu from the
 * manual's description: several RC QPs, connected through the RDMA CM's
 * synchronous endpoints (manual 4.2.5, 4.2.12), receive through one shared
 * receive queue on each side (manual 5.1.5; IBA 10.2.9).
 *
 * The server binds an endpoint to ADDRESS (rdma_getaddrinfo with
 * RAI_PASSIVE, rdma_create_ep), creates ONE SRQ of `-m` receives on it
 * (rdma_create_srq), posts every receive, listens and accepts `-q`
 * connections, each QP created with the SRQ and one receive CQ that all
 * of them share.  The client makes `-q` endpoints to ADDRESS, the SRQ for
 * the replies on the first, and connects each QP with its index as the
 * CM's private data.
 *
 * The client then sends `-n` messages of `-s` bytes in bursts of `-m`
 * (what the server's SRQ holds): message k on its QP k % QPS, so every QP
 * carries messages.  The server waits until the whole burst arrived,
 * checks each message (its size, number, pattern, and that the QP number
 * of its completion is the connection the client sent it on), posts the
 * receives again and replies once on each QP with the number of messages
 * that QP brought in the burst.  The client checks each reply the same
 * way (its QP, its burst, the count), and sends the next burst once all
 * replies are in, until `-n` messages went.  Both disconnect and release
 * everything.
 *
 *   server:  srq_example -l [-p PORT] [-q QPS] [-m MAX_WR] [-n MSG_COUNT]
 *                           [-s SIZE] [-t SECONDS] ADDRESS
 *   client:  srq_example    [same options] ADDRESS
 *
 * Both sides must be given the same -q, -m, -n and -s.  `-t` bounds each
 * wait for completions (default 30 s).  `-x FAULT` breaks one message on
 * purpose, to show that the checks catch it: on the client `size` (one
 * byte short), `byte` (a damaged byte), `qp` (sent on the next QP); on
 * the server `drop` (one reply counts a message fewer, as if one were
 * lost).
 *
 * A message is a header (number, the client's QP index, a count and its
 * kind, each 4 bytes in network order) and then bytes that follow from
 * the header and their place.  Exit status 0 when every message and every
 * reply arrived intact on its QP, 1 otherwise.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define MSG_HDR_LEN 16
#define MSG_DATA 1  /* client to server */
#define MSG_REPLY 2 /* server to client, one per QP and burst */
#define MAX_QPS 256

enum fault { FAULT_NONE, FAULT_SIZE, FAULT_BYTE, FAULT_QP, FAULT_DROP };

struct options {
	const char *addr;
	const char *port;
	bool server;
	int qps;
	int max_wr;
	int msg_count;
	int size;
	int timeout_s;
	enum fault fault;
};

/* A message's header, host byte order. */
struct msg_hdr {
	uint32_t seq;	/* DATA: message number; REPLY: burst number */
	uint32_t qp;	/* the client's QP index */
	uint32_t count; /* REPLY: messages that QP brought in the burst */
	uint32_t kind;
};

/* One side's resources.  conn[i] is the client's QP i; on the server
 * conn[j] is the j-th connection accepted, cli_idx[j] the client's index
 * of its QP. */
struct side {
	struct rdma_addrinfo *rai;
	struct rdma_cm_id *listen; /* server */
	struct rdma_cm_id *srq_id; /* the id the SRQ is on */
	struct rdma_cm_id *conn[MAX_QPS];
	int cli_idx[MAX_QPS];
	int conns;
	struct ibv_comp_channel *rch; /* the shared receive CQ's */
	struct ibv_cq *rcq;
	struct ibv_mr *send_mr, *recv_mr;
	uint8_t *send_buf, *recv_buf;
	int recv_slots;
};

static struct options opt = {
	.port = "7473",
	.qps = 4,
	.max_wr = 64,
	.msg_count = 1000,
	.size = 256,
	.timeout_s = 30,
};

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint8_t msg_byte(const struct msg_hdr *h, int i)
{
	return (uint8_t)(h->seq * 13 + h->qp * 31 + h->kind * 101 + i * 7 + 1);
}

static void msg_fill(uint8_t *buf, const struct msg_hdr *h, int size)
{
	uint32_t be[4] = { htonl(h->seq), htonl(h->qp), htonl(h->count),
			   htonl(h->kind) };
	int i;

	memcpy(buf, be, sizeof(be));
	for (i = MSG_HDR_LEN; i < size; i++)
		buf[i] = msg_byte(h, i);
}

/* The header of buf into h; false if a byte after it is not h's. */
static bool msg_parse(const uint8_t *buf, struct msg_hdr *h, int size)
{
	uint32_t be[4];
	int i;

	memcpy(be, buf, sizeof(be));
	h->seq = ntohl(be[0]);
	h->qp = ntohl(be[1]);
	h->count = ntohl(be[2]);
	h->kind = ntohl(be[3]);
	for (i = MSG_HDR_LEN; i < size; i++)
		if (buf[i] != msg_byte(h, i))
			return false;
	return true;
}

/*
 * One completion of cq into wc: polls, arms the CQ, polls again (a
 * completion that came before the arm gives no event), then sleeps on
 * the channel until deadline.  1: a completion, 0: none by deadline,
 * -1: an error.
 */
static int cq_wait(struct ibv_cq *cq, struct ibv_comp_channel *ch,
		   struct ibv_wc *wc, long long deadline)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct ibv_cq *ev_cq;
	void *ev_ctx;
	long long left;
	int n;

	for (;;) {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? -1 : 1;
		if (ibv_req_notify_cq(cq, 0)) {
			perror("srq_example: ibv_req_notify_cq");
			return -1;
		}
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? -1 : 1;
		left = deadline - now_ms();
		if (left <= 0)
			return 0;
		n = poll(&pfd, 1, (int)left);
		if (n < 0 && errno != EINTR) {
			perror("srq_example: poll");
			return -1;
		}
		if (n > 0) {
			if (ibv_get_cq_event(ch, &ev_cq, &ev_ctx)) {
				perror("srq_example: ibv_get_cq_event");
				return -1;
			}
			ibv_ack_cq_events(ev_cq, 1);
		}
	}
}

/* The send completion of one message on id (sent signaled). */
static int send_done(struct rdma_cm_id *id, const char *what, int qp)
{
	struct ibv_wc wc;
	int n;

	n = cq_wait(id->send_cq, id->send_cq_channel, &wc,
		    now_ms() + opt.timeout_s * 1000LL);
	if (n == 1 && wc.status == IBV_WC_SUCCESS)
		return 0;
	fprintf(stderr, "srq_example: %s on QP %d: %s\n", what, qp,
		n == 1 ? ibv_wc_status_str(wc.status)
		       : n == 0 ? "no completion in time" : "poll failed");
	return -1;
}

/* The SRQ on id, the receive CQ all QPs share and the receive buffers,
 * each posted (to the SRQ: id->srq is set, manual 5.2.5). */
static int srq_setup(struct side *s, struct rdma_cm_id *id, int slots)
{
	struct ibv_srq_init_attr sa;
	int i;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = (uint32_t)slots;
	sa.attr.max_sge = 1;
	if (rdma_create_srq(id, NULL, &sa)) {
		perror("srq_example: rdma_create_srq");
		return -1;
	}
	s->srq_id = id;
	s->rch = ibv_create_comp_channel(id->verbs);
	s->rcq = s->rch ? ibv_create_cq(id->verbs, slots, s, s->rch, 0)
			: NULL;
	if (!s->rcq) {
		perror("srq_example: receive CQ");
		return -1;
	}
	s->recv_slots = slots;
	s->recv_buf = calloc((size_t)slots, (size_t)opt.size);
	s->recv_mr = s->recv_buf ? rdma_reg_msgs(id, s->recv_buf,
						 (size_t)slots * opt.size)
				 : NULL;
	if (!s->recv_mr) {
		perror("srq_example: receive buffers");
		return -1;
	}
	for (i = 0; i < slots; i++) {
		if (rdma_post_recv(id, (void *)(uintptr_t)i,
				   s->recv_buf + (size_t)i * opt.size,
				   (size_t)opt.size, s->recv_mr)) {
			perror("srq_example: rdma_post_recv");
			return -1;
		}
	}
	printf("%s: one SRQ of %u receives for %d QPs\n",
	       opt.server ? "server" : "client", sa.attr.max_wr, opt.qps);
	return 0;
}

/* The QP of id: its own send CQ (made by the RDMA CM), the shared
 * receive CQ and the SRQ. */
static int qp_setup(struct side *s, struct rdma_cm_id *id, int send_wr)
{
	struct ibv_qp_init_attr qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_RC;
	qa.recv_cq = s->rcq;
	qa.srq = s->srq_id->srq;
	qa.cap.max_send_wr = (uint32_t)send_wr;
	qa.cap.max_send_sge = 1;
	qa.sq_sig_all = 1;
	if (rdma_create_qp(id, NULL, &qa)) {
		perror("srq_example: rdma_create_qp");
		return -1;
	}
	return 0;
}

static int send_buffers(struct side *s, struct rdma_cm_id *id, int slots)
{
	s->send_buf = calloc((size_t)slots, (size_t)opt.size);
	s->send_mr = s->send_buf ? rdma_reg_msgs(id, s->send_buf,
						 (size_t)slots * opt.size)
				 : NULL;
	if (!s->send_mr) {
		perror("srq_example: send buffers");
		return -1;
	}
	return 0;
}

/* Messages of burst [first, first + n) that QP qp carries. */
static uint32_t burst_share(int first, int n, int qp)
{
	uint32_t c = 0;
	int k;

	for (k = first; k < first + n; k++)
		c += k % opt.qps == qp;
	return c;
}

/* A receive completion of s's shared CQ, checked: the slot it used. */
static int recv_one(struct side *s, struct ibv_wc *wc, long long deadline,
		    const char *what)
{
	int n = cq_wait(s->rcq, s->rch, wc, deadline);

	if (n != 1) {
		fprintf(stderr, "srq_example: %s: %s\n", what,
			n == 0 ? "none in time" : "poll failed");
		return -1;
	}
	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV ||
	    wc->byte_len != (uint32_t)opt.size ||
	    wc->wr_id >= (uint64_t)s->recv_slots) {
		fprintf(stderr, "srq_example: %s on QP number %u: %s, %u "
			"bytes (%d expected)\n", what, wc->qp_num,
			ibv_wc_status_str(wc->status), wc->byte_len, opt.size);
		return -1;
	}
	return (int)wc->wr_id;
}

static int repost(struct side *s, int slot)
{
	if (rdma_post_recv(s->srq_id, (void *)(uintptr_t)slot,
			   s->recv_buf + (size_t)slot * opt.size,
			   (size_t)opt.size, s->recv_mr)) {
		perror("srq_example: rdma_post_recv");
		return -1;
	}
	return 0;
}

/* The server's index of the connection whose QP is qp_num, or -1. */
static int conn_of(struct side *s, uint32_t qp_num)
{
	int j;

	for (j = 0; j < s->conns; j++)
		if (s->conn[j]->qp->qp_num == qp_num)
			return j;
	return -1;
}

/* ---- server ---- */

static int server_connect(struct side *s)
{
	struct rdma_addrinfo hints;
	const uint8_t *pd;
	uint32_t be;
	int j, ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = RAI_PASSIVE;
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_getaddrinfo(opt.addr, opt.port, &hints, &s->rai);
	if (ret) {
		fprintf(stderr, "srq_example: rdma_getaddrinfo %s: %s\n",
			opt.addr, ret == -1 ? strerror(errno)
					    : gai_strerror(ret));
		return -1;
	}
	if (rdma_create_ep(&s->listen, s->rai, NULL, NULL)) {
		perror("srq_example: rdma_create_ep");
		return -1;
	}
	/* Bound to ADDRESS, the id has its device: the SRQ goes on it. */
	if (srq_setup(s, s->listen, opt.max_wr) ||
	    send_buffers(s, s->listen, opt.qps))
		return -1;
	if (rdma_listen(s->listen, opt.qps)) {
		perror("srq_example: rdma_listen");
		return -1;
	}
	printf("server: listening on %s port %s\n", opt.addr, opt.port);
	fflush(stdout);
	for (j = 0; j < opt.qps; j++) {
		if (rdma_get_request(s->listen, &s->conn[j])) {
			perror("srq_example: rdma_get_request");
			return -1;
		}
		s->conns++;
		pd = s->conn[j]->event->param.conn.private_data;
		if (!pd || s->conn[j]->event->param.conn.private_data_len <
				   sizeof(be)) {
			fprintf(stderr, "srq_example: a request without the "
				"client's QP index\n");
			return -1;
		}
		memcpy(&be, pd, sizeof(be));
		s->cli_idx[j] = (int)ntohl(be);
		if (s->cli_idx[j] < 0 || s->cli_idx[j] >= opt.qps) {
			fprintf(stderr, "srq_example: client QP index %d\n",
				s->cli_idx[j]);
			return -1;
		}
		if (qp_setup(s, s->conn[j], 1))
			return -1;
		if (rdma_accept(s->conn[j], NULL)) {
			perror("srq_example: rdma_accept");
			return -1;
		}
		printf("server: QP %u connected (client's QP %d)\n",
		       s->conn[j]->qp->qp_num, s->cli_idx[j]);
	}
	return 0;
}

/* Check one client message of burst [first, first + n); count it. */
static int server_check(struct side *s, struct ibv_wc *wc, int slot,
			int first, int n, bool *seen, uint32_t *count)
{
	struct msg_hdr h;
	bool intact;
	int j;

	j = conn_of(s, wc->qp_num);
	if (j < 0) {
		fprintf(stderr, "srq_example: a completion for QP number %u, "
			"none of ours\n", wc->qp_num);
		return -1;
	}
	intact = msg_parse(s->recv_buf + (size_t)slot * opt.size, &h,
			   opt.size);
	if (!intact || h.kind != MSG_DATA || h.seq < (uint32_t)first ||
	    h.seq >= (uint32_t)(first + n) || seen[h.seq - first]) {
		fprintf(stderr, "srq_example: QP %u: a damaged, repeated or "
			"unexpected message (number %u)\n", wc->qp_num, h.seq);
		return -1;
	}
	if (h.qp != (uint32_t)s->cli_idx[j] || h.seq % opt.qps != h.qp) {
		fprintf(stderr, "srq_example: message %u, sent for the "
			"client's QP %u, came on QP %u (the client's QP %d)\n",
			h.seq, h.seq % opt.qps, wc->qp_num, s->cli_idx[j]);
		return -1;
	}
	seen[h.seq - first] = true;
	count[j]++;
	return 0;
}

static int server_run(struct side *s)
{
	uint32_t count[MAX_QPS], total[MAX_QPS] = { 0 };
	struct msg_hdr h;
	struct ibv_wc wc;
	long long deadline;
	bool *seen;
	int first, n, i, j, slot, burst = 0;

	seen = calloc((size_t)opt.max_wr, sizeof(*seen));
	if (!seen)
		return -1;
	for (first = 0; first < opt.msg_count; first += n, burst++) {
		n = opt.msg_count - first;
		if (n > opt.max_wr)
			n = opt.max_wr;
		memset(seen, 0, (size_t)opt.max_wr * sizeof(*seen));
		memset(count, 0, sizeof(count));
		deadline = now_ms() + opt.timeout_s * 1000LL;
		for (i = 0; i < n; i++) {
			slot = recv_one(s, &wc, deadline, "a message");
			if (slot < 0 ||
			    server_check(s, &wc, slot, first, n, seen, count) ||
			    repost(s, slot))
				goto fail;
		}
		/* All of the burst is in: one reply on every QP. */
		for (j = 0; j < s->conns; j++) {
			h.seq = (uint32_t)burst;
			h.qp = (uint32_t)s->cli_idx[j];
			h.count = count[j];
			h.kind = MSG_REPLY;
			if (opt.fault == FAULT_DROP && burst == 0 &&
			    h.qp == 0 && h.count)
				h.count--;
			total[j] += count[j];
			msg_fill(s->send_buf + (size_t)j * opt.size, &h,
				 opt.size);
			if (rdma_post_send(s->conn[j], NULL,
					   s->send_buf + (size_t)j * opt.size,
					   (size_t)opt.size, s->send_mr, 0)) {
				perror("srq_example: rdma_post_send");
				goto fail;
			}
		}
		for (j = 0; j < s->conns; j++)
			if (send_done(s->conn[j], "reply", s->cli_idx[j]))
				goto fail;
	}
	free(seen);
	printf("server: %d messages of %d bytes on %d QPs through one SRQ, "
	       "every byte checked; %d bursts replied to; per QP:",
	       opt.msg_count, opt.size, s->conns, burst);
	for (j = 0; j < s->conns; j++)
		printf(" %u", total[j]);
	printf("\n");
	return 0;
fail:
	free(seen);
	return -1;
}

/* ---- client ---- */

static int client_connect(struct side *s)
{
	struct rdma_conn_param cp;
	struct rdma_addrinfo hints;
	uint32_t be;
	int i, ret;

	memset(&hints, 0, sizeof(hints));
	hints.ai_port_space = RDMA_PS_TCP;
	ret = rdma_getaddrinfo(opt.addr, opt.port, &hints, &s->rai);
	if (ret) {
		fprintf(stderr, "srq_example: rdma_getaddrinfo %s: %s\n",
			opt.addr, ret == -1 ? strerror(errno)
					    : gai_strerror(ret));
		return -1;
	}
	for (i = 0; i < opt.qps; i++) {
		/* Address and route resolved: the id is on a device. */
		if (rdma_create_ep(&s->conn[i], s->rai, NULL, NULL)) {
			perror("srq_example: rdma_create_ep");
			return -1;
		}
		s->conns++;
		if (i == 0 && (srq_setup(s, s->conn[0], opt.qps) ||
			       send_buffers(s, s->conn[0], opt.max_wr)))
			return -1;
		/* A QP's share of a burst, and one more for -x qp. */
		if (qp_setup(s, s->conn[i],
			     (opt.max_wr + opt.qps - 1) / opt.qps + 1))
			return -1;
		be = htonl((uint32_t)i);
		memset(&cp, 0, sizeof(cp));
		cp.private_data = &be;
		cp.private_data_len = sizeof(be);
		cp.retry_count = 7;
		cp.rnr_retry_count = 7;
		if (rdma_connect(s->conn[i], &cp)) {
			fprintf(stderr, "srq_example: rdma_connect %s port %s: "
				"%s\n", opt.addr, opt.port, strerror(errno));
			return -1;
		}
		printf("client: QP %d (number %u) connected\n", i,
		       s->conn[i]->qp->qp_num);
	}
	return 0;
}

/* Send message k from buffer slot slot on its QP (or break it). */
static int client_send(struct side *s, int k, int slot)
{
	struct msg_hdr h = { .seq = (uint32_t)k, .qp = (uint32_t)(k % opt.qps),
			     .kind = MSG_DATA };
	uint8_t *buf = s->send_buf + (size_t)slot * opt.size;
	size_t len = (size_t)opt.size;
	int qp = k % opt.qps;

	msg_fill(buf, &h, opt.size);
	if (k == opt.msg_count / 2) {
		if (opt.fault == FAULT_SIZE)
			len--;
		else if (opt.fault == FAULT_BYTE)
			buf[opt.size - 1] ^= 0x5a;
		else if (opt.fault == FAULT_QP)
			qp = (qp + 1) % opt.qps;
	}
	if (rdma_post_send(s->conn[qp], NULL, buf, len, s->send_mr, 0)) {
		perror("srq_example: rdma_post_send");
		return -1;
	}
	return 0;
}

/* Check one reply of burst `burst` (messages [first, first + n)). */
static int client_check(struct side *s, struct ibv_wc *wc, int slot,
			int burst, int first, int n, bool *replied)
{
	struct msg_hdr h;
	bool intact;

	intact = msg_parse(s->recv_buf + (size_t)slot * opt.size, &h,
			   opt.size);
	if (!intact || h.kind != MSG_REPLY || h.seq != (uint32_t)burst ||
	    h.qp >= (uint32_t)opt.qps || replied[h.qp]) {
		fprintf(stderr, "srq_example: QP number %u: a damaged, "
			"repeated or unexpected reply (burst %u, QP %u; "
			"burst %d expected)\n", wc->qp_num, h.seq, h.qp, burst);
		return -1;
	}
	if (s->conn[h.qp]->qp->qp_num != wc->qp_num) {
		fprintf(stderr, "srq_example: the reply for QP %u came on QP "
			"number %u\n", h.qp, wc->qp_num);
		return -1;
	}
	if (h.count != burst_share(first, n, (int)h.qp)) {
		fprintf(stderr, "srq_example: burst %d: the server counted %u "
			"messages on QP %u, %u were sent\n", burst, h.count,
			h.qp, burst_share(first, n, (int)h.qp));
		return -1;
	}
	replied[h.qp] = true;
	return 0;
}

static int client_run(struct side *s)
{
	bool replied[MAX_QPS];
	struct ibv_wc wc;
	long long deadline;
	int first, n, i, k, slot, burst = 0;

	for (first = 0; first < opt.msg_count; first += n, burst++) {
		n = opt.msg_count - first;
		if (n > opt.max_wr)
			n = opt.max_wr;
		/* The burst fills the server's SRQ, no more. */
		for (k = first; k < first + n; k++)
			if (client_send(s, k, k - first))
				return -1;
		for (k = first; k < first + n; k++)
			if (send_done(s->conn[k % opt.qps], "send",
				      k % opt.qps))
				return -1;
		memset(replied, 0, sizeof(replied));
		deadline = now_ms() + opt.timeout_s * 1000LL;
		for (i = 0; i < opt.qps; i++) {
			slot = recv_one(s, &wc, deadline, "a reply");
			if (slot < 0 ||
			    client_check(s, &wc, slot, burst, first, n,
					 replied) ||
			    repost(s, slot))
				return -1;
		}
	}
	printf("client: %d messages of %d bytes sent on %d QPs in %d bursts "
	       "of up to %d; %d replies through one SRQ, every byte "
	       "checked\n", opt.msg_count, opt.size, opt.qps, burst,
	       opt.max_wr, burst * opt.qps);
	return 0;
}

/* ---- both ---- */

static void disconnect_all(struct side *s)
{
	int i;

	for (i = 0; i < s->conns; i++)
		if (rdma_disconnect(s->conn[i]))
			perror("srq_example: rdma_disconnect");
}

/* QPs first, then what they used: the shared CQ, the MRs, the SRQ. */
static void release(struct side *s)
{
	int i;

	for (i = s->conns - 1; i >= 0; i--) {
		if (s->conn[i] == s->srq_id) {
			if (s->conn[i]->qp)
				rdma_destroy_qp(s->conn[i]);
			continue;
		}
		rdma_destroy_ep(s->conn[i]);
	}
	if (s->rcq)
		ibv_destroy_cq(s->rcq);
	if (s->rch)
		ibv_destroy_comp_channel(s->rch);
	if (s->send_mr)
		rdma_dereg_mr(s->send_mr);
	if (s->recv_mr)
		rdma_dereg_mr(s->recv_mr);
	if (s->srq_id)
		rdma_destroy_ep(s->srq_id); /* and its SRQ */
	if (s->listen && s->listen != s->srq_id)
		rdma_destroy_ep(s->listen);
	if (s->rai)
		rdma_freeaddrinfo(s->rai);
	free(s->send_buf);
	free(s->recv_buf);
}

static int parse(int argc, char **argv)
{
	int op;

	while ((op = getopt(argc, argv, "lp:q:m:n:s:t:x:")) != -1) {
		switch (op) {
		case 'l':
			opt.server = true;
			break;
		case 'p':
			opt.port = optarg;
			break;
		case 'q':
			opt.qps = atoi(optarg);
			break;
		case 'm':
			opt.max_wr = atoi(optarg);
			break;
		case 'n':
			opt.msg_count = atoi(optarg);
			break;
		case 's':
			opt.size = atoi(optarg);
			break;
		case 't':
			opt.timeout_s = atoi(optarg);
			break;
		case 'x':
			if (!strcmp(optarg, "size"))
				opt.fault = FAULT_SIZE;
			else if (!strcmp(optarg, "byte"))
				opt.fault = FAULT_BYTE;
			else if (!strcmp(optarg, "qp"))
				opt.fault = FAULT_QP;
			else if (!strcmp(optarg, "drop"))
				opt.fault = FAULT_DROP;
			else
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc - 1)
		return -1;
	opt.addr = argv[optind];
	if (opt.qps < 1 || opt.qps > MAX_QPS || opt.max_wr < 1 ||
	    opt.max_wr > 4096 || opt.msg_count < opt.qps ||
	    opt.msg_count > 1 << 24 || opt.size < MSG_HDR_LEN ||
	    opt.size > 1 << 16 || opt.timeout_s < 1 || opt.timeout_s > 3600)
		return -1;
	if ((opt.fault == FAULT_DROP) != (opt.server && opt.fault) ||
	    (opt.fault == FAULT_QP && opt.qps < 2))
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct side s;
	int ret;

	if (parse(argc, argv)) {
		fprintf(stderr,
			"usage: %s [-l] [-p PORT] [-q QPS (1-%d)] "
			"[-m MAX_WR (1-4096)]\n"
			"\t[-n MSG_COUNT (>= QPS)] [-s SIZE (%d-65536)] "
			"[-t SECONDS] [-x FAULT] ADDRESS\n"
			"\t-l: the server, on ADDRESS; FAULT: size, byte, qp "
			"(client), drop (server)\n",
			argv[0], MAX_QPS, MSG_HDR_LEN);
		return 1;
	}
	memset(&s, 0, sizeof(s));
	if (opt.server)
		ret = server_connect(&s) || server_run(&s);
	else
		ret = client_connect(&s) || client_run(&s);
	if (!ret)
		disconnect_all(&s);
	release(&s);
	return ret ? 1 : 0;
}
