// SPDX-License-Identifier: MIT
/*
 * The multicast example of the "RDMA Aware Networks Programming User
 * Manual" (chapter 7.3, the program of 8.2), written for ibemu from the
 * manual's synopsis: UD multicast through the RDMA CM.
 *
 * Each of `-c` connections is an RDMA CM id with its own PD, CQ, UD QP
 * and buffer.  Each id resolves the multicast address (bound first to
 * `-b`, if given), then joins the group with rdma_join_multicast(3); the
 * MULTICAST_JOIN event carries the address handle attributes, the remote
 * QPN (0xFFFFFF) and the Q_Key to send to the group with.  A sender (`-s`)
 * then posts `-C` messages of `-S` bytes to the group, in turn on each
 * of its connections; a receiver, whose receives were posted before it
 * joined, takes all `-C` messages on every one of its connections (each
 * of its QPs is attached to the group) and checks each byte.  Both leave
 * the group and release everything at the end.
 *
 *   mc_example -m MCAST_ADDR [-b BIND_ADDR] [-s] [-c CONNECTIONS]
 *              [-C COUNT] [-S SIZE] [-p udp|ipoib]
 *   mc_example -M MGID -b BIND_ADDR ...       (an unmapped group: AF_IB)
 *
 * A message is its number (4 bytes, network order) and then bytes that
 * follow from the number and their place, so a receiver tells a lost,
 * repeated or damaged message.  A receiver prints one line when every
 * connection has joined ("joined"), so a sender can be started after it,
 * and exits 0 when every message arrived intact on every connection.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/ib.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

/* Room for the GRH that a UD receive buffer starts with (IBA 11.4.1.1). */
#define GRH_LEN 40
/* How long one step (resolve, join, the messages) may take. */
#define STEP_MS 10000

struct options {
	const char *dst; /* -m or -M */
	bool unmapped;	 /* -M: dst is an MGID, AF_IB */
	const char *bind_addr;
	bool sender;
	int connections;
	int count;
	int size;
	enum rdma_port_space ps;
};

/* One connection: an id, its verbs resources and the group it joined. */
struct conn {
	struct rdma_cm_id *id;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf; /* sender: one message; receiver: count slots */
	struct ibv_ah *ah;
	uint32_t remote_qpn, remote_qkey;
	bool joined;
	int received;
	bool *seen; /* receiver: which message numbers came */
};

static struct options opt = {
	.connections = 1,
	.count = 10,
	.size = 100,
	.ps = RDMA_PS_UDP,
};

static struct sockaddr_storage src_addr, dst_addr;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint8_t msg_byte(int k, int i)
{
	return (uint8_t)(k * 13 + i * 7 + 1);
}

/* Message k into buf: its number, then the pattern. */
static void msg_fill(uint8_t *buf, int k, int size)
{
	uint32_t be = htonl((uint32_t)k);
	int i;

	memcpy(buf, &be, sizeof(be));
	for (i = sizeof(be); i < size; i++)
		buf[i] = msg_byte(k, i);
}

/* The message number in buf, or -1 if any byte is not message k's. */
static int msg_check(const uint8_t *buf, int size)
{
	uint32_t be;
	int i, k;

	memcpy(&be, buf, sizeof(be));
	k = (int)ntohl(be);
	if (k < 0 || k >= opt.count)
		return -1;
	for (i = sizeof(be); i < size; i++)
		if (buf[i] != msg_byte(k, i))
			return -1;
	return k;
}

static int get_addr(const char *name, struct sockaddr_storage *addr)
{
	struct addrinfo *res;
	int ret;

	ret = getaddrinfo(name, NULL, NULL, &res);
	if (ret) {
		fprintf(stderr, "getaddrinfo %s: %s\n", name,
			gai_strerror(ret));
		return -1;
	}
	memcpy(addr, res->ai_addr, res->ai_addrlen);
	freeaddrinfo(res);
	return 0;
}

/* An unmapped group: the MGID itself, as an AF_IB address. */
static int get_ib_addr(const char *mgid, struct sockaddr_storage *addr)
{
	struct sockaddr_ib *sib = (struct sockaddr_ib *)addr;

	memset(sib, 0, sizeof(*sib));
	sib->sib_family = AF_IB;
	if (inet_pton(AF_INET6, mgid, &sib->sib_addr) != 1) {
		fprintf(stderr, "%s is not an MGID\n", mgid);
		return -1;
	}
	return 0;
}

/* PD, CQ, buffer and UD QP of a connection whose address is resolved;
 * a receiver posts all its receives now, before it joins. */
static int conn_setup(struct conn *c)
{
	struct ibv_qp_init_attr ia;
	size_t slot = GRH_LEN + (size_t)opt.size;
	size_t len = opt.sender ? (size_t)opt.size : slot * opt.count;
	int i;

	c->pd = ibv_alloc_pd(c->id->verbs);
	c->cq = c->pd ? ibv_create_cq(c->id->verbs, opt.count + 1, c, NULL, 0)
		      : NULL;
	c->buf = calloc(1, len);
	c->mr = c->pd && c->buf ? ibv_reg_mr(c->pd, c->buf, len,
					      IBV_ACCESS_LOCAL_WRITE)
				: NULL;
	if (!c->cq || !c->mr) {
		perror("mc_example: PD, CQ or MR");
		return -1;
	}
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = c->cq;
	ia.recv_cq = c->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = opt.sender ? opt.count : 1;
	ia.cap.max_recv_wr = opt.sender ? 1 : opt.count;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	if (rdma_create_qp(c->id, c->pd, &ia)) {
		perror("mc_example: rdma_create_qp");
		return -1;
	}
	if (opt.sender)
		return 0;
	c->seen = calloc((size_t)opt.count, sizeof(*c->seen));
	if (!c->seen)
		return -1;
	for (i = 0; i < opt.count; i++) {
		if (rdma_post_recv(c->id, (void *)(uintptr_t)i,
				   c->buf + slot * i, slot, c->mr)) {
			perror("mc_example: rdma_post_recv");
			return -1;
		}
	}
	return 0;
}

/* The group's address handle, QPN and Q_Key from MULTICAST_JOIN. */
static int conn_joined(struct conn *c, struct rdma_cm_event *ev)
{
	c->remote_qpn = ev->param.ud.qp_num;
	c->remote_qkey = ev->param.ud.qkey;
	c->ah = ibv_create_ah(c->pd, &ev->param.ud.ah_attr);
	if (!c->ah) {
		perror("mc_example: ibv_create_ah");
		return -1;
	}
	c->joined = true;
	return 0;
}

/* A connection whose address is known: its QP, receives, and the join. */
static int conn_join(struct conn *c)
{
	if (conn_setup(c))
		return -1;
	if (rdma_join_multicast(c->id, (struct sockaddr *)&dst_addr, c)) {
		perror("mc_example: rdma_join_multicast");
		return -1;
	}
	return 0;
}

/* One CM event; sets *joins when a connection has joined. */
static int handle_event(struct rdma_cm_event *ev, int *joins)
{
	struct conn *c = ev->id->context;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		return conn_join(c);
	case RDMA_CM_EVENT_MULTICAST_JOIN:
		if (conn_joined(c, ev))
			return -1;
		(*joins)++;
		return 0;
	default:
		fprintf(stderr, "mc_example: event %s, status %d\n",
			rdma_event_str(ev->event), ev->status);
		return -1;
	}
}

/* Resolve and join every connection; 0 when all have joined.  An
 * unmapped group (-M) is no IP address to resolve: the id is bound to
 * the bind address and joins at once (manual 7.3.2). */
static int join_all(struct rdma_event_channel *ch, struct conn *conns)
{
	struct rdma_cm_event *ev;
	int i, joins = 0, ret;

	for (i = 0; i < opt.connections; i++) {
		if (rdma_create_id(ch, &conns[i].id, &conns[i], opt.ps)) {
			perror("mc_example: rdma_create_id");
			return -1;
		}
		if (opt.bind_addr &&
		    rdma_bind_addr(conns[i].id, (struct sockaddr *)&src_addr)) {
			perror("mc_example: rdma_bind_addr");
			return -1;
		}
		if (opt.unmapped) {
			if (conn_join(&conns[i]))
				return -1;
		} else if (rdma_resolve_addr(conns[i].id,
					     opt.bind_addr
						     ? (struct sockaddr *)&src_addr
						     : NULL,
					     (struct sockaddr *)&dst_addr,
					     2000)) {
			perror("mc_example: rdma_resolve_addr");
			return -1;
		}
	}
	while (joins < opt.connections) {
		if (rdma_get_cm_event(ch, &ev)) {
			perror("mc_example: rdma_get_cm_event");
			return -1;
		}
		ret = handle_event(ev, &joins);
		rdma_ack_cm_event(ev);
		if (ret)
			return -1;
	}
	return 0;
}

/* Sender: the count messages to the group, message k on connection
 * k % connections, so every connection sends and each message goes
 * once. */
static int post_sends(struct conn *conns)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc;
	struct conn *c;
	long long end;
	int k, got;

	for (k = 0; k < opt.count; k++) {
		c = &conns[k % opt.connections];
		msg_fill(c->buf, k, opt.size);
		sge.addr = (uintptr_t)c->buf;
		sge.length = (uint32_t)opt.size;
		sge.lkey = c->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)k;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.wr.ud.ah = c->ah;
		wr.wr.ud.remote_qpn = c->remote_qpn;
		wr.wr.ud.remote_qkey = c->remote_qkey;
		if (ibv_post_send(c->id->qp, &wr, &bad)) {
			perror("mc_example: ibv_post_send");
			return -1;
		}
		/* The buffer is the next message's: wait. */
		end = now_ms() + STEP_MS;
		while ((got = ibv_poll_cq(c->cq, 1, &wc)) == 0 &&
		       now_ms() < end)
			;
		if (got != 1 || wc.status != IBV_WC_SUCCESS) {
			fprintf(stderr, "mc_example: send %d: %s\n", k,
				got == 1 ? ibv_wc_status_str(wc.status)
					 : "no completion");
			return -1;
		}
	}
	printf("sent %d messages of %d bytes over %d connection(s)\n",
	       opt.count, opt.size, opt.connections);
	return 0;
}

/* Receiver: every message on every connection, each once, intact.  The
 * sender may start long after we joined (it waits for every receiver),
 * so the first message may take three steps; after it, each step
 * without a message ends the wait. */
static int poll_cqs(struct conn *conns)
{
	size_t slot = GRH_LEN + (size_t)opt.size;
	long long end = now_ms() + 3 * STEP_MS;
	struct ibv_wc wc;
	int i, k, got, pending = opt.connections;

	while (pending && now_ms() < end) {
		pending = 0;
		for (i = 0; i < opt.connections; i++) {
			struct conn *c = &conns[i];

			while ((got = ibv_poll_cq(c->cq, 1, &wc)) == 1) {
				if (wc.status != IBV_WC_SUCCESS ||
				    wc.byte_len != slot) {
					fprintf(stderr,
						"mc_example: connection %d: "
						"%s, %u bytes\n", i,
						ibv_wc_status_str(wc.status),
						wc.byte_len);
					return -1;
				}
				k = msg_check(c->buf + slot * wc.wr_id +
						      GRH_LEN, opt.size);
				if (k < 0 || c->seen[k]) {
					fprintf(stderr,
						"mc_example: connection %d: a "
						"damaged or repeated message\n",
						i);
					return -1;
				}
				c->seen[k] = true;
				c->received++;
				end = now_ms() + STEP_MS;
			}
			if (got < 0)
				return -1;
			pending += c->received < opt.count;
		}
	}
	for (i = 0; i < opt.connections; i++) {
		if (conns[i].received != opt.count) {
			fprintf(stderr, "mc_example: connection %d: %d of %d "
				"messages\n", i, conns[i].received, opt.count);
			return -1;
		}
	}
	printf("received %d messages of %d bytes on %d connection(s), "
	       "every byte checked\n", opt.count, opt.size,
	       opt.connections);
	return 0;
}

static void release(struct conn *conns)
{
	int i;

	for (i = 0; i < opt.connections; i++) {
		struct conn *c = &conns[i];

		if (c->joined)
			rdma_leave_multicast(c->id,
					     (struct sockaddr *)&dst_addr);
		if (c->ah)
			ibv_destroy_ah(c->ah);
		if (c->id && c->id->qp)
			rdma_destroy_qp(c->id);
		if (c->mr)
			ibv_dereg_mr(c->mr);
		if (c->cq)
			ibv_destroy_cq(c->cq);
		if (c->pd)
			ibv_dealloc_pd(c->pd);
		if (c->id)
			rdma_destroy_id(c->id);
		free(c->buf);
		free(c->seen);
	}
}

static int parse(int argc, char **argv)
{
	int op;

	while ((op = getopt(argc, argv, "m:M:sb:c:C:S:p:")) != -1) {
		switch (op) {
		case 'm':
		case 'M':
			opt.dst = optarg;
			opt.unmapped = op == 'M';
			break;
		case 's':
			opt.sender = true;
			break;
		case 'b':
			opt.bind_addr = optarg;
			break;
		case 'c':
			opt.connections = atoi(optarg);
			break;
		case 'C':
			opt.count = atoi(optarg);
			break;
		case 'S':
			opt.size = atoi(optarg);
			break;
		case 'p':
			if (!strcmp(optarg, "udp"))
				opt.ps = RDMA_PS_UDP;
			else if (!strcmp(optarg, "ipoib"))
				opt.ps = RDMA_PS_IPOIB;
			else
				return -1;
			break;
		default:
			return -1;
		}
	}
	if (!opt.dst || (opt.unmapped && !opt.bind_addr) ||
	    opt.connections < 1 || opt.connections > 1024 || opt.count < 1 ||
	    opt.count > 1 << 20 || opt.size < 4 || opt.size > 4096 - GRH_LEN)
		return -1;
	return 0;
}

int main(int argc, char **argv)
{
	struct rdma_event_channel *ch;
	struct conn *conns;
	int ret = 1;

	if (parse(argc, argv)) {
		fprintf(stderr,
			"usage: %s -m MCAST_ADDR | -M MGID -b BIND_ADDR\n"
			"\t[-b BIND_ADDR] [-s] [-c CONNECTIONS] [-C COUNT]\n"
			"\t[-S SIZE (4 to 4056)] [-p udp|ipoib]\n",
			argv[0]);
		return 1;
	}
	if ((opt.bind_addr && get_addr(opt.bind_addr, &src_addr)) ||
	    (opt.unmapped ? get_ib_addr(opt.dst, &dst_addr)
			  : get_addr(opt.dst, &dst_addr)))
		return 1;
	ch = rdma_create_event_channel();
	if (!ch) {
		perror("mc_example: rdma_create_event_channel");
		return 1;
	}
	conns = calloc((size_t)opt.connections, sizeof(*conns));
	if (!conns)
		goto out;
	if (join_all(ch, conns))
		goto out_release;
	printf("joined: %d connection(s)\n", opt.connections);
	fflush(stdout);
	if (opt.sender ? post_sends(conns) : poll_cqs(conns))
		goto out_release;
	ret = 0;
out_release:
	release(conns);
	free(conns);
out:
	rdma_destroy_event_channel(ch);
	return ret;
}
