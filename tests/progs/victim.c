// SPDX-License-Identifier: MIT
/*
 * The victim of tests/net/attack.sh: an RC pair between two nodes whose
 * traffic is checked end to end while tests/progs/attacker.c, on a third
 * node, attacks the server with raw TCP; or a UD QP that says who a
 * datagram came from.
 *
 *   victim server PORT INFO SECS [CLIENTS]
 *   victim client HOST PORT SECS
 *   victim ud INFO SECS SLID FROM
 *
 * The server registers a remote-writable region of known content, then
 * serves CLIENTS clients (1 by default) one after the other, each on a
 * new RC QP: they meet over a TCP socket on PORT, trade their QP's
 * number, LID, PSN (random), address and R_Key, and connect.  Then the
 * client, for SECS seconds, round after round: RDMA WRITEs a pattern of
 * the round into a slot of the server's region, SENDs the round's
 * message, RDMA READs the slot back and checks it holds the pattern,
 * and waits for the server's echo of the message, which it checks.  The
 * server checks every message it receives (the next round's, and
 * nothing else), and when the client's last message says how many
 * rounds there were, that its region holds exactly what the client
 * wrote (the last pattern of each slot, the initial content elsewhere);
 * it tells the client the verdict, waits a moment for anything more
 * (nothing may come) and checks the region again.  Every work
 * completion must be IBV_WC_SUCCESS.
 *
 * Once a client is connected the server writes INFO (written whole,
 * then renamed), what an attacker is assumed to know at best, one
 * "key value" a line: its pid, LID, address, QPN, the client's QPN,
 * LID and address, the region's address, length and R_Key, the PSNs
 * both QPs start at.
 *
 * The ud mode opens a UD QP (Q_Key 0x11111111), writes INFO (pid, lid,
 * qpn, qkey) and waits up to SECS for one datagram: its wc.slid must be
 * SLID (the node it came from, whatever the sender claimed), and its
 * GRH, if it has one, must name the IPv4 address FROM as its source.
 *
 * Exit: 0 pass, 1 fail, 77 no device.  An alarm ends a process that
 * overstays.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"
#include "ud_qp.h"

#define RBUF_LEN (64u << 10) /* the remote-writable region */
#define SLOT 256 /* bytes one round writes and reads back */
#define NSLOT 32 /* slots of the region the client writes */
#define RDEPTH 16 /* receives posted */
#define RSLOT 256 /* bytes of one receive */
#define SDEPTH 8
#define MAGIC 0x7669634du /* "vicM" */
#define UD_QKEY 0x11111111u
#define LINGER_MS 500 /* the server's wait for anything more */
#define GRACE_S 30 /* beyond SECS, for anything that must happen */
#define ALARM_S 180

enum vkind { V_DATA = 1, V_ECHO, V_DONE, V_RESULT };

/* A message; SEND payloads are exactly this. */
struct vmsg {
	uint32_t magic, kind, seq, arg;
	uint8_t data[48];
};

/* The local buffer: the message sent, the receives, the pattern
 * written and the slot read back. */
#define M_SEND 0
#define M_RECV 64
#define M_WBUF (M_RECV + RDEPTH * RSLOT)
#define M_RBUF (M_WBUF + SLOT)
#define M_LEN (M_RBUF + SLOT)

struct victim {
	struct rc_side s; /* list, ctx, pd, cq, qp, me; mr the region */
	struct ibv_mr *mmr;
	uint8_t *mbuf;
	uint8_t *rbuf;
	struct rc_conn peer;
	double deadline;
	bool bad;
};

/* Byte i of the pattern of seed. */
static uint8_t pat(uint32_t seed, uint32_t i)
{
	uint32_t x = seed * 0x9e3779b1u + i * 0x85ebca6bu;

	return (uint8_t)(x ^ x >> 15 ^ x >> 24);
}

static void pat_fill(uint8_t *p, uint32_t len, uint32_t seed, uint32_t from)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		p[i] = pat(seed, from + i);
}

/* The first byte at which p differs from the pattern, or -1. */
static long pat_diff(const uint8_t *p, uint32_t len, uint32_t seed,
		     uint32_t from)
{
	uint32_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pat(seed, from + i))
			return (long)i;
	return -1;
}

#define SEED_INIT 0x1badb002u
#define SEED_W(s) (0x57000000u + (s))
#define SEED_D(s) (0x44000000u + (s))
#define SEED_E(s) (0x45000000u + (s))

static uint32_t rand24(void)
{
	uint32_t r = 0;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r = (uint32_t)time(NULL) * 2654435761u ^ (uint32_t)getpid();
	return r & 0xffffff;
}

static int v_open(struct victim *v, bool region)
{
	struct ibv_port_attr pa;
	int ret;

	ret = verbs_open(&v->s.list, &v->s.ctx, &v->s.pd, &v->s.cq,
			 RDEPTH + 2 * SDEPTH, &pa);
	if (ret)
		return ret;
	v->s.me.lid = pa.lid;
	/* The region first: the first key a process hands out. */
	if (region) {
		v->rbuf = aligned_alloc(4096, RBUF_LEN);
		if (!v->rbuf)
			return -1;
		pat_fill(v->rbuf, RBUF_LEN, SEED_INIT, 0);
		v->s.mr = ibv_reg_mr(v->s.pd, v->rbuf, RBUF_LEN,
				     IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE |
					     IBV_ACCESS_REMOTE_READ);
		if (!v->s.mr)
			return -1;
		v->s.me.addr = (uintptr_t)v->rbuf;
		v->s.me.rkey = v->s.mr->rkey;
	}
	v->mbuf = calloc(1, M_LEN);
	if (!v->mbuf)
		return -1;
	v->mmr = ibv_reg_mr(v->s.pd, v->mbuf, M_LEN, IBV_ACCESS_LOCAL_WRITE);
	return v->mmr ? 0 : -1;
}

static void v_close(struct victim *v)
{
	if (v->mmr)
		ibv_dereg_mr(v->mmr);
	v->mmr = NULL;
	rc_pair_close(&v->s); /* s.buf is NULL: rbuf is ours */
	free(v->mbuf);
	free(v->rbuf);
}

/* The last peer's QP: to the error state, what it flushes taken, then
 * destroyed. */
static void v_drop_qp(struct victim *v)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	double end = now_s() + 0.2;
	struct ibv_wc wc;

	ibv_modify_qp(v->s.qp, &a, IBV_QP_STATE);
	while (now_s() < end)
		ibv_poll_cq(v->s.cq, 1, &wc);
	ibv_destroy_qp(v->s.qp);
	v->s.qp = NULL;
}

/* A new RC QP towards the next peer, its PSN random. */
static int v_new_qp(struct victim *v)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = v->s.cq,
		.recv_cq = v->s.cq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = SDEPTH, .max_recv_wr = RDEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};

	if (v->s.qp)
		v_drop_qp(v);
	v->s.qp = ibv_create_qp(v->s.pd, &ia);
	if (!v->s.qp)
		return -1;
	v->s.me.qpn = v->s.qp->qp_num;
	v->s.me.psn = rand24();
	v->s.attr.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	v->s.attr.path_mtu = IBV_MTU_1024;
	v->s.attr.timeout = 16; /* 268 ms: a loaded machine */
	v->s.attr.retry_cnt = 7;
	v->s.attr.rnr_retry = 7;
	return 0;
}

static int post_recv(struct victim *v, uint32_t j)
{
	uint8_t *at = v->mbuf + M_RECV + j * RSLOT;
	struct ibv_sge sge = { .addr = (uintptr_t)at, .length = RSLOT,
			       .lkey = v->mmr->lkey };
	struct ibv_recv_wr wr = { .wr_id = j, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (ibv_post_recv(v->s.qp, &wr, &bad)) {
		say("post_recv: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int post_recvs(struct victim *v)
{
	uint32_t j;

	for (j = 0; j < RDEPTH; j++)
		if (post_recv(v, j))
			return -1;
	return 0;
}

/* One send-side WR of len bytes at off in mbuf (under mmr). */
static int post_wr(struct victim *v, enum ibv_wr_opcode op, uint32_t off,
		   uint32_t len, uint64_t raddr)
{
	struct ibv_sge sge = { .addr = (uintptr_t)(v->mbuf + off),
			       .length = len, .lkey = v->mmr->lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = v->peer.rkey;
	if (ibv_post_send(v->s.qp, &wr, &bad)) {
		say("post_send: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int send_msg(struct victim *v, uint32_t kind, uint32_t seq,
		    uint32_t arg, uint32_t seed)
{
	struct vmsg *m = (struct vmsg *)(v->mbuf + M_SEND);

	m->magic = MAGIC;
	m->kind = kind;
	m->seq = seq;
	m->arg = arg;
	pat_fill(m->data, sizeof(m->data), seed, 0);
	return post_wr(v, IBV_WR_SEND, M_SEND, sizeof(*m), 0);
}

/* The next completion, by the deadline: 0, or -1 (said; a failed
 * completion marks the victim bad). */
static int next_wc(struct victim *v, struct ibv_wc *wc)
{
	int n;

	for (;;) {
		n = ibv_poll_cq(v->s.cq, 1, wc);
		if (n < 0) {
			say("poll_cq failed");
			return -1;
		}
		if (n == 1)
			break;
		if (now_s() > v->deadline) {
			say("timed out waiting for a completion");
			v->bad = true;
			return -1;
		}
	}
	if (wc->status != IBV_WC_SUCCESS) {
		say("completion of %s: %s (wr_id %llu)",
		    wc->opcode & IBV_WC_RECV ? "a receive" : "a request",
		    ibv_wc_status_str(wc->status),
		    (unsigned long long)wc->wr_id);
		v->bad = true;
		return -1;
	}
	return 0;
}

/* The message a receive completion holds, checked to be a message of
 * ours at all (else said and NULL), its receive posted again. */
static const struct vmsg *got_msg(struct victim *v, const struct ibv_wc *wc,
				  struct vmsg *copy)
{
	const uint8_t *p = v->mbuf + M_RECV + (wc->wr_id % RDEPTH) * RSLOT;

	if (wc->opcode != IBV_WC_RECV || wc->wr_id >= RDEPTH) {
		say("unexpected receive completion, opcode %d", wc->opcode);
		v->bad = true;
		return NULL;
	}
	memcpy(copy, p, sizeof(*copy));
	if (wc->byte_len != sizeof(*copy) || copy->magic != MAGIC) {
		say("unexpected message: %u bytes, \"%.32s\"", wc->byte_len,
		    (const char *)p);
		v->bad = true;
		return NULL;
	}
	return post_recv(v, (uint32_t)wc->wr_id) ? NULL : copy;
}

static bool msg_is(struct victim *v, const struct vmsg *m, uint32_t kind,
		   uint32_t seq, uint32_t seed)
{
	if (m->kind == kind && m->seq == seq &&
	    pat_diff(m->data, sizeof(m->data), seed, 0) < 0)
		return true;
	say("message kind %u seq %u: expected kind %u seq %u with its "
	    "pattern", m->kind, m->seq, kind, seq);
	v->bad = true;
	return false;
}

static const char *addr_of(const struct sockaddr_storage *ss, char *buf,
			   size_t len)
{
	const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)ss;
	const struct sockaddr_in *s4 = (const struct sockaddr_in *)ss;
	const void *a = ss->ss_family == AF_INET6 ? (const void *)&s6->sin6_addr
						  : (const void *)&s4->sin_addr;

	return inet_ntop(ss->ss_family, a, buf, (socklen_t)len) ? buf : "?";
}

static int write_info(const struct victim *v, const char *path, int fd)
{
	struct sockaddr_storage me, peer;
	socklen_t l1 = sizeof(me), l2 = sizeof(peer);
	char tmp[4096], a1[64], a2[64];
	FILE *f;

	if (getsockname(fd, (struct sockaddr *)&me, &l1) ||
	    getpeername(fd, (struct sockaddr *)&peer, &l2))
		return -1;
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "pid %d\nlid %u\naddr %s\nqpn %u\n", (int)getpid(),
		v->s.me.lid, addr_of(&me, a1, sizeof(a1)), v->s.me.qpn);
	fprintf(f, "peer_qpn %u\npeer_lid %u\npeer_addr %s\n", v->peer.qpn,
		v->peer.lid, addr_of(&peer, a2, sizeof(a2)));
	fprintf(f, "va %llu\nlen %u\nrkey %u\nrq_psn %u\nsq_psn %u\n",
		(unsigned long long)v->s.me.addr, RBUF_LEN, v->s.me.rkey,
		v->peer.psn, v->s.me.psn);
	if (fclose(f))
		return -1;
	return rename(tmp, path);
}

/* What the region must hold after rounds rounds: -1 if it does, else
 * the offset of the first wrong byte (said). */
static long region_check(const struct victim *v, uint32_t rounds)
{
	uint32_t i, last;
	long d;

	for (i = 0; i < NSLOT; i++) {
		if (i < rounds) {
			last = i + (rounds - 1 - i) / NSLOT * NSLOT;
			d = pat_diff(v->rbuf + i * SLOT, SLOT, SEED_W(last), 0);
		} else {
			d = pat_diff(v->rbuf + i * SLOT, SLOT, SEED_INIT,
				     i * SLOT);
		}
		if (d >= 0)
			return (long)i * SLOT + d;
	}
	d = pat_diff(v->rbuf + NSLOT * SLOT, RBUF_LEN - NSLOT * SLOT,
		     SEED_INIT, NSLOT * SLOT);
	return d < 0 ? -1 : d + NSLOT * SLOT;
}

static void say_region(const struct victim *v, long off)
{
	say("the region differs from what the client wrote at offset %ld: "
	    "\"%.32s\"", off, (const char *)v->rbuf + off);
}

/* The client said it is done after rounds rounds: the verdict back. */
static int serve_done(struct victim *v, uint32_t rounds, uint32_t expect)
{
	struct ibv_wc wc;
	long off;

	if (rounds != expect) {
		say("the client did %u rounds, %u messages came", rounds,
		    expect);
		v->bad = true;
	}
	off = region_check(v, rounds);
	if (off >= 0) {
		say_region(v, off);
		v->bad = true;
	}
	if (send_msg(v, V_RESULT, rounds, v->bad, SEED_E(rounds)))
		return -1;
	do {
		if (next_wc(v, &wc))
			return -1;
		if (wc.opcode == IBV_WC_RECV) {
			say("a receive after the last message");
			v->bad = true;
		}
	} while (wc.opcode != IBV_WC_SEND);
	return 0;
}

/* Nothing may come after the last message; the region stays. */
static void serve_linger(struct victim *v, uint32_t rounds)
{
	double end = now_s() + LINGER_MS / 1000.0;
	struct ibv_wc wc;
	long off;
	int n;

	while (now_s() < end) {
		n = ibv_poll_cq(v->s.cq, 1, &wc);
		if (n > 0) {
			say("a completion after the last message: %s, "
			    "opcode %d", ibv_wc_status_str(wc.status),
			    wc.opcode);
			v->bad = true;
		}
	}
	off = region_check(v, rounds);
	if (off >= 0) {
		say_region(v, off);
		v->bad = true;
	}
}

/* Receive and echo the client's messages until its last. */
static int serve_loop(struct victim *v)
{
	struct vmsg copy;
	const struct vmsg *m;
	struct ibv_wc wc;
	uint32_t expect = 0, pending = 0;

	for (;;) {
		if (next_wc(v, &wc))
			return -1;
		if (!(wc.opcode & IBV_WC_RECV)) {
			pending--;
			continue;
		}
		m = got_msg(v, &wc, &copy);
		if (!m)
			return -1;
		if (m->kind == V_DONE)
			break;
		if (!msg_is(v, m, V_DATA, expect, SEED_D(expect)))
			return -1;
		if (pending == SDEPTH) {
			say("the client outran its echoes");
			v->bad = true;
			return -1;
		}
		if (send_msg(v, V_ECHO, expect, 0, SEED_E(expect)))
			return -1;
		pending++;
		expect++;
	}
	for (; pending; pending--) {
		if (next_wc(v, &wc))
			return -1;
		if (wc.opcode & IBV_WC_RECV) {
			say("a receive after the last message");
			v->bad = true;
		}
	}
	if (serve_done(v, m->arg, expect))
		return -1;
	serve_linger(v, m->arg);
	printf("served %u rounds\n", m->arg);
	return 0;
}

static int tcp_listen(const char *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_ANY),
				  .sin_port = htons((uint16_t)atoi(port)) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 4)) {
		say("listen on %s: %s", port, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/* Trade rc_conn with the other side on fd, connect the QP. */
static int v_join(struct victim *v, int fd)
{
	if (rc_xfer(fd, &v->s.me, sizeof(v->s.me), 1) ||
	    rc_xfer(fd, &v->peer, sizeof(v->peer), 0)) {
		say("exchange with the other side failed");
		return -1;
	}
	if (rc_pair_connect(&v->s, &v->peer) || post_recvs(v)) {
		say("connect: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static int serve_one(struct victim *v, int lfd, const char *info)
{
	int fd = accept(lfd, NULL, NULL), ret = -1;

	if (fd < 0)
		return -1;
	if (v_new_qp(v) || v_join(v, fd))
		goto out;
	if (write_info(v, info, fd)) {
		say("writing %s: %s", info, strerror(errno));
		goto out;
	}
	printf("connected qpn %u peer %u\n", v->s.me.qpn, v->peer.qpn);
	ret = serve_loop(v);
out:
	close(fd);
	return ret;
}

static int server_main(const char *port, const char *info, double secs,
		       int clients)
{
	struct victim v = { 0 };
	int lfd, ret, k;

	ret = v_open(&v, true);
	if (ret) {
		v_close(&v);
		return ret > 0 ? 77 : 1;
	}
	lfd = tcp_listen(port);
	for (k = 0; lfd >= 0 && k < clients; k++) {
		v.deadline = now_s() + secs + GRACE_S;
		if (serve_one(&v, lfd, info))
			v.bad = true;
		if (v.bad)
			break;
	}
	if (lfd < 0)
		v.bad = true;
	else
		close(lfd);
	v_close(&v);
	printf("%s\n", v.bad ? "victim: FAIL" : "victim: intact");
	return v.bad ? 1 : 0;
}

static int tcp_dial(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_family = AF_INET,
				  .ai_socktype = SOCK_STREAM }, *res;
	int fd, k;

	if (getaddrinfo(host, port, &hints, &res))
		return -1;
	for (k = 0; k < 100; k++) {
		fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, res->ai_addr, res->ai_addrlen))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100000);
	}
	freeaddrinfo(res);
	return fd;
}

/* One round of the client: WRITE, SEND, READ back, the echo. */
static int client_round(struct victim *v, uint32_t s)
{
	uint64_t raddr = v->peer.addr + (s % NSLOT) * SLOT;
	unsigned int done = 0, echo = 0;
	struct vmsg copy;
	const struct vmsg *m;
	struct ibv_wc wc;
	long d;

	pat_fill(v->mbuf + M_WBUF, SLOT, SEED_W(s), 0);
	memset(v->mbuf + M_RBUF, 0, SLOT);
	if (post_wr(v, IBV_WR_RDMA_WRITE, M_WBUF, SLOT, raddr) ||
	    send_msg(v, V_DATA, s, 0, SEED_D(s)) ||
	    post_wr(v, IBV_WR_RDMA_READ, M_RBUF, SLOT, raddr))
		return -1;
	while (done < 3 || !echo) {
		if (next_wc(v, &wc))
			return -1;
		if (!(wc.opcode & IBV_WC_RECV)) {
			done++;
			continue;
		}
		m = got_msg(v, &wc, &copy);
		if (!m || !msg_is(v, m, V_ECHO, s, SEED_E(s)))
			return -1;
		echo = 1;
	}
	d = pat_diff(v->mbuf + M_RBUF, SLOT, SEED_W(s), 0);
	if (d >= 0) {
		say("round %u: the slot read back differs at byte %ld", s, d);
		v->bad = true;
		return -1;
	}
	return 0;
}

/* The last message and the server's verdict. */
static int client_done(struct victim *v, uint32_t rounds)
{
	struct vmsg copy;
	const struct vmsg *m = NULL;
	struct ibv_wc wc;
	bool sent = false;

	if (send_msg(v, V_DONE, rounds, rounds, SEED_D(rounds)))
		return -1;
	while (!sent || !m) {
		if (next_wc(v, &wc))
			return -1;
		if (!(wc.opcode & IBV_WC_RECV)) {
			sent = true;
			continue;
		}
		m = got_msg(v, &wc, &copy);
		if (!m || !msg_is(v, m, V_RESULT, rounds, SEED_E(rounds)))
			return -1;
	}
	if (m->arg) {
		say("the server found its messages or region wrong");
		v->bad = true;
		return -1;
	}
	return 0;
}

static int client_main(const char *host, const char *port, double secs)
{
	struct victim v = { 0 };
	double end;
	uint32_t s = 0;
	int fd, ret;

	ret = v_open(&v, false);
	if (ret) {
		v_close(&v);
		return ret > 0 ? 77 : 1;
	}
	fd = tcp_dial(host, port);
	if (fd < 0 || v_new_qp(&v) || v_join(&v, fd)) {
		say("could not join the server at %s:%s", host, port);
		v.bad = true;
		goto out;
	}
	printf("connected qpn %u peer %u\n", v.s.me.qpn, v.peer.qpn);
	end = now_s() + secs;
	v.deadline = end + GRACE_S;
	for (s = 0; now_s() < end; s++)
		if (client_round(&v, s)) {
			v.bad = true;
			goto out;
		}
	if (client_done(&v, s))
		v.bad = true;
out:
	if (fd >= 0)
		close(fd);
	v_close(&v);
	printf("%u rounds: %s\n", s, v.bad ? "FAIL" : "all intact");
	return v.bad ? 1 : 0;
}

static int ud_info(const char *path, uint16_t lid, uint32_t qpn)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "pid %d\nlid %u\nqpn %u\nqkey %u\n", (int)getpid(), lid,
		qpn, UD_QKEY);
	if (fclose(f))
		return -1;
	return rename(tmp, path);
}

/* The datagram's sender as the victim sees it. */
static int ud_judge(struct victim *v, const struct ibv_wc *wc,
		    unsigned int want, const uint8_t from4[4])
{
	const uint8_t *grh = (const uint8_t *)v->mbuf + M_RECV;
	char sgid[INET6_ADDRSTRLEN] = "none";

	if ((wc->wc_flags & IBV_WC_GRH) &&
	    !inet_ntop(AF_INET6, grh + 8, sgid, sizeof(sgid)))
		strcpy(sgid, "?");
	printf("ud: slid %u src_qp 0x%x sgid %s, %u bytes: \"%.32s\"\n",
	       wc->slid, wc->src_qp, sgid, wc->byte_len,
	       (const char *)v->mbuf + M_RECV + 40);
	if (wc->slid != want) {
		say("the datagram's wc.slid is %u, its sender's node's LID is "
		    "%u", wc->slid, want);
		return -1;
	}
	/* A GRH's SGID (IBA 8.3.1) names the sender: the address it came
	 * from, over IPv4 (the attacker's frames claim others). */
	if ((wc->wc_flags & IBV_WC_GRH) &&
	    (!IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)(grh + 8)) ||
	     memcmp(grh + 20, from4, 4))) {
		say("the datagram's GRH names the source %s", sgid);
		return -1;
	}
	return 0;
}

static int ud_main(const char *info, double secs, unsigned int want,
		   const char *from)
{
	uint8_t from4[4];

	struct victim v = { 0 };
	struct ibv_wc wc;
	int ret;

	if (inet_pton(AF_INET, from, from4) != 1) {
		say("%s: not an IPv4 address", from);
		return 1;
	}
	ret = v_open(&v, false);
	if (ret) {
		v_close(&v);
		return ret > 0 ? 77 : 1;
	}
	v.s.qp = ud_qp_open(v.s.pd, v.s.cq, v.s.cq, 1, 1, UD_QKEY);
	v.deadline = now_s() + secs;
	if (!v.s.qp || post_recv(&v, 0) ||
	    ud_info(info, v.s.me.lid, v.s.qp->qp_num) || next_wc(&v, &wc) ||
	    ud_judge(&v, &wc, want, from4))
		v.bad = true;
	v_close(&v);
	return v.bad ? 1 : 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(ALARM_S);
	if ((argc == 5 || argc == 6) && !strcmp(argv[1], "server"))
		return server_main(argv[2], argv[3], atof(argv[4]),
				   argc == 6 ? atoi(argv[5]) : 1);
	if (argc == 5 && !strcmp(argv[1], "client"))
		return client_main(argv[2], argv[3], atof(argv[4]));
	if (argc == 6 && !strcmp(argv[1], "ud"))
		return ud_main(argv[2], atof(argv[3]),
			       (unsigned int)atoi(argv[4]), argv[5]);
	fprintf(stderr, "usage: %s server PORT INFO SECS [CLIENTS]\n"
			"       %s client HOST PORT SECS\n"
			"       %s ud INFO SECS SLID FROM\n",
		argv[0], argv[0], argv[0]);
	return 2;
}
