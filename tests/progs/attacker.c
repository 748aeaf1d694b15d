// SPDX-License-Identifier: MIT
/*
 * An attacker with raw TCP only, for tests/net/attack.sh: it speaks the
 * TCP transport's frames (tp_frame.h, tcp_int.h) to a node's door and to
 * a process's data port, against the victim of tests/progs/victim.c,
 * whose INFO file tells it what it could at best have learnt (QPNs, the
 * region's address, length and R_Key, the PSNs the QPs started at).
 *
 *   attacker inject INFO SECS [RATE]  HELLO as the victim's peer (token,
 *       slot and LID from a lookup of the peer's QPN at its node's door),
 *       then RC SEND-only and RDMA-WRITE-only packets from the peer's
 *       QPN, sweeping the PSNs near the victim's and all 2^24, with
 *       R_Key guesses, a marker as payload; SECS seconds, at most RATE
 *       frames a second (0, or none: as fast as it can)
 *   attacker dupread INFO SECS     as the peer too: RDMA READ requests
 *       with PSNs behind the victim's expected one (the traffic has
 *       moved on) and a bogus R_Key or VA, which a responder taking them
 *       would NAK and go to the error state on
 *   attacker doorhold ADDR SECS N  N connections to ADDR's door, silent,
 *       held SECS seconds
 *   attacker doorhalf ADDR SECS N  the same, each after half a LOOKUP
 *   attacker connflood INFO SECS COUNT  64 connections to the victim's
 *       data port held without HELLO for a second, then COUNT
 *       connect/close cycles; SECS at most
 *   attacker enum INFO SECS COUNT  door lookups of COUNT QPNs from the
 *       first: how many the door answers
 *   attacker udspoof INFO ADDR LID a UD SEND to the victim's UD QP at
 *       ADDR, its HELLO and frames claiming LID and a made-up source QP;
 *       the first two with a GRH whose SGID is not the connection's
 *       address (SPOOF_SGID6, SPOOF_SGID4)
 *
 * It prints what it did; it exits 0 when it could do it (reached the
 * door and data port it needed), 1 otherwise.  Every loop is bounded in
 * count and time, and an alarm ends a process that overstays.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "params.h"
#include "tcp_int.h"
#include "tp_frame.h"

#define ALARM_S 120
#define IO_S 2.0 /* bound on one exchange */
#define MAX_RECONNECT 20
#define HOLD_N_MAX 256
#define FLOOD_HOLD 64
#define WINDOW (1u << 18) /* PSNs swept near the victim's */
#define BEHIND 2048 /* PSNs behind the victim's for dupread */
#define MARKER "ATTACKER-MARKER-0123456789abcdef" /* 32 bytes */
#define MARKER_LEN 32
/* SGIDs udspoof's GRHs claim: none is the attacker's connection's. */
#define SPOOF_SGID6 "2001:db8::66"
#define SPOOF_SGID4 "::ffff:10.47.0.99"
#define OUT_CAP (64u << 10)

/* What the victim's INFO says. */
struct info {
	char addr[64], peer_addr[64];
	uint32_t qpn, peer_qpn, rkey, len, rq_psn, qkey;
	uint16_t lid, peer_lid;
	uint16_t vport; /* the victim's data port, as a port scan finds it */
	uint64_t va;
};

/* A door's answer: the frame it came in, and the reply. */
struct door_ans {
	struct tp_frame_hdr f;
	struct tcp_lookup_reply r;
};

/* A data connection to the victim, greeted as someone. */
struct conn {
	int fd;
	uint32_t vslot;
	uint16_t vlid, vport;
	/* whom we claim to be */
	uint64_t token, guid;
	uint32_t slot;
	uint16_t lid, port;
	/* frames queued */
	uint8_t out[OUT_CAP];
	uint32_t len;
	uint64_t frames;
	bool dead;
	/* at most rate frames a second from start (rate 0: no bound) */
	double rate, start;
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int info_read(const char *path, struct info *in)
{
	char key[32], val[64];
	unsigned long long v;
	FILE *f = fopen(path, "r");

	if (!f) {
		fprintf(stderr, "attacker: %s: %s\n", path, strerror(errno));
		return -1;
	}
	memset(in, 0, sizeof(*in));
	while (fscanf(f, "%31s %63s", key, val) == 2) {
		v = strtoull(val, NULL, 0);
		if (!strcmp(key, "addr"))
			snprintf(in->addr, sizeof(in->addr), "%s", val);
		else if (!strcmp(key, "peer_addr"))
			snprintf(in->peer_addr, sizeof(in->peer_addr), "%s",
				 val);
		else if (!strcmp(key, "qpn"))
			in->qpn = (uint32_t)v;
		else if (!strcmp(key, "peer_qpn"))
			in->peer_qpn = (uint32_t)v;
		else if (!strcmp(key, "lid"))
			in->lid = (uint16_t)v;
		else if (!strcmp(key, "peer_lid"))
			in->peer_lid = (uint16_t)v;
		else if (!strcmp(key, "va"))
			in->va = v;
		else if (!strcmp(key, "len"))
			in->len = (uint32_t)v;
		else if (!strcmp(key, "rkey"))
			in->rkey = (uint32_t)v;
		else if (!strcmp(key, "rq_psn"))
			in->rq_psn = (uint32_t)v;
		else if (!strcmp(key, "qkey"))
			in->qkey = (uint32_t)v;
		else if (!strcmp(key, "vport"))
			in->vport = (uint16_t)v;
	}
	fclose(f);
	return 0;
}

/* A TCP connection to addr:port, by the deadline: its descriptor
 * (non-blocking), or -1. */
static int dial(const char *addr, uint16_t port, double deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };
	struct pollfd p = { .events = POLLOUT };
	socklen_t l = sizeof(int);
	int fd, err = 0, ms;

	if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		return -1;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (!connect(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return fd;
	if (errno != EINPROGRESS)
		goto fail;
	p.fd = fd;
	ms = (int)((deadline - now_s()) * 1000);
	if (ms <= 0 || poll(&p, 1, ms) != 1)
		goto fail;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) || err)
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

/* All len bytes of buf out (out) or in, by the deadline: 0 or -1. */
static int io_all(int fd, void *buf, size_t len, bool out, double deadline)
{
	struct pollfd p = { .fd = fd, .events = out ? POLLOUT : POLLIN };
	size_t done = 0;
	ssize_t n;
	int ms;

	while (done < len) {
		n = out ? send(fd, (char *)buf + done, len - done,
			       MSG_NOSIGNAL | MSG_DONTWAIT)
			: recv(fd, (char *)buf + done, len - done,
			       MSG_DONTWAIT);
		if (n > 0) {
			done += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			return -1;
		ms = (int)((deadline - now_s()) * 1000);
		if (ms <= 0 || poll(&p, 1, ms) < 0)
			return -1;
	}
	return 0;
}

static void frame_hdr(struct tp_frame_hdr *f, uint8_t type, uint32_t len)
{
	memset(f, 0, sizeof(*f));
	f->magic = htobe32(TP_FRAME_MAGIC);
	f->version = TP_FRAME_VERSION;
	f->type = type;
	f->len = htobe32(len);
	f->dst_slot = htobe32(UINT32_MAX);
}

/* Ask addr's door who owns qpn: the reply's status (0: found), or -1
 * when the door did not answer. */
static int door_lookup(const char *addr, uint32_t qpn, struct door_ans *a)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
	double deadline = now_s() + IO_S;
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_QPN),
				.qpn = htobe32(qpn) };
	struct tp_frame_hdr f;
	int fd, ret = -1;

	fd = dial(addr, IBEMU_DEFAULT_DOOR_PORT, deadline);
	if (fd < 0)
		return -1;
	frame_hdr(&f, TP_FRAME_LOOKUP, sizeof(q));
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), &q, sizeof(q));
	if (!io_all(fd, buf, sizeof(buf), true, deadline) &&
	    !io_all(fd, a, sizeof(*a), false, deadline) &&
	    be32toh(a->f.magic) == TP_FRAME_MAGIC &&
	    a->f.type == TP_FRAME_LOOKUP_REPLY)
		ret = (int)be32toh(a->r.status);
	close(fd);
	return ret;
}

/* The frame header of what we send on c, claiming to be who c says. */
static void conn_hdr(const struct conn *c, struct tp_frame_hdr *f,
		     uint8_t type, uint32_t len, uint32_t src_qpn)
{
	frame_hdr(f, type, len);
	f->slid = htobe16(c->lid);
	f->dlid = htobe16(c->vlid);
	f->src_qpn = htobe32(src_qpn);
	f->src_guid = htobe64(c->guid);
	f->src_slot = htobe32(c->slot);
	f->dst_slot = htobe32(c->vslot);
	f->src_token = htobe64(c->token);
}

/* Connect to the victim's data port and greet it as c claims. */
static int conn_greet(struct conn *c, const char *addr)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_hello)];
	struct tcp_hello h = { .lid = htobe16(c->lid),
			       .port = htobe16(c->port) };
	double deadline = now_s() + IO_S;
	struct tp_frame_hdr f;

	c->len = 0;
	c->dead = false;
	c->fd = dial(addr, c->vport, deadline);
	if (c->fd < 0)
		return -1;
	conn_hdr(c, &f, TP_FRAME_HELLO, sizeof(h), 0);
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), &h, sizeof(h));
	if (io_all(c->fd, buf, sizeof(buf), true, deadline) ||
	    io_all(c->fd, buf, sizeof(buf), false, deadline)) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	memcpy(&f, buf, sizeof(f));
	return f.type == TP_FRAME_HELLO ? 0 : -1;
}

/* Whom the victim's QP qpn at addr lives in: c's victim side; where
 * the door does not say, the port a scan found (vport). */
static int conn_victim(struct conn *c, const char *addr, uint32_t qpn,
		       uint16_t vport)
{
	struct door_ans a;
	int st = door_lookup(addr, qpn, &a);

	if (st) {
		printf("lookup of QPN %u at %s: %s\n", qpn, addr,
		       st < 0 ? "no answer" : strerror(st));
		if (!vport)
			return -1;
		printf("using the data port a scan finds: %u\n", vport);
		c->vslot = 0;
		c->vport = vport;
		c->vlid = 0;
		return 0;
	}
	c->vslot = be32toh(a.r.slot);
	c->vport = be16toh(a.r.port);
	c->vlid = be16toh(a.r.lid);
	return 0;
}

/* c claims to be the victim's peer: its token, slot, GUID, LID and
 * port, learnt from its node's door. */
static int conn_as_peer(struct conn *c, const struct info *in)
{
	struct door_ans a;
	int st;

	if (conn_victim(c, in->addr, in->qpn, in->vport))
		return -1;
	st = door_lookup(in->peer_addr, in->peer_qpn, &a);
	if (st) {
		/* Claimed all the same: the peer's LID, a guessed slot
		 * and token. */
		printf("lookup of the peer's QPN %u at %s: %s; its LID %u "
		       "claimed, slot and token guessed\n", in->peer_qpn,
		       in->peer_addr, st < 0 ? "no answer" : strerror(st),
		       in->peer_lid);
		memset(&a, 0, sizeof(a));
		a.r.token = htobe64(0x1234567890abcdefull);
		a.r.lid = htobe16(in->peer_lid);
	}
	c->token = be64toh(a.r.token);
	c->slot = be32toh(a.r.slot);
	c->guid = be64toh(a.f.src_guid);
	c->lid = be16toh(a.r.lid);
	c->port = be16toh(a.r.port);
	if (conn_greet(c, in->addr)) {
		printf("HELLO to %s:%u as the peer failed\n", in->addr,
		       c->vport);
		return -1;
	}
	printf("greeted by the victim (slot %u, port %u) as its peer "
	       "(slot %u, token %#llx, LID %u)\n", c->vslot, c->vport,
	       c->slot, (unsigned long long)c->token, c->lid);
	return 0;
}

/* Hand what is queued to the socket, reading (and dropping) whatever
 * the victim sends meanwhile, by the deadline. */
static void conn_flush(struct conn *c, double deadline)
{
	struct pollfd p = { .fd = c->fd, .events = POLLOUT | POLLIN };
	uint8_t sink[4096];
	uint32_t done = 0;
	ssize_t n;

	while (!c->dead && done < c->len && now_s() < deadline) {
		while (recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0)
			;
		n = send(c->fd, c->out + done, c->len - done,
			 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			done += (uint32_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			c->dead = true;
		else
			poll(&p, 1, 10);
	}
	c->len = 0;
}

/* Hold back to c's rate. */
static void conn_pace(const struct conn *c, double deadline)
{
	double due;

	if (c->rate <= 0)
		return;
	due = c->start + (double)c->frames / c->rate;
	if (due > deadline)
		due = deadline;
	while (now_s() < due)
		usleep(1000);
}

/* Queue a DATA frame of pkt (len bytes: BTH onwards) from src_qpn. */
/* Queue a DATA frame of pkt, after the GRH g when g is not NULL. */
static void conn_data_grh(struct conn *c, const struct tp_frame_grh *g,
			  const void *pkt, uint32_t len, uint32_t src_qpn,
			  double deadline)
{
	uint32_t glen = g ? (uint32_t)sizeof(*g) : 0;
	struct tp_frame_hdr f;

	if (c->len + sizeof(f) + glen + len > OUT_CAP) {
		conn_flush(c, deadline);
		conn_pace(c, deadline);
	}
	conn_hdr(c, &f, TP_FRAME_DATA, glen + len, src_qpn);
	if (g)
		f.flags = TP_FRAME_F_GRH;
	memcpy(c->out + c->len, &f, sizeof(f));
	if (g)
		memcpy(c->out + c->len + sizeof(f), g, glen);
	memcpy(c->out + c->len + sizeof(f) + glen, pkt, len);
	c->len += (uint32_t)sizeof(f) + glen + len;
	c->frames++;
}

static void conn_data(struct conn *c, const void *pkt, uint32_t len,
		      uint32_t src_qpn, double deadline)
{
	conn_data_grh(c, NULL, pkt, len, src_qpn, deadline);
}

static void bth_put(struct bth *b, uint8_t opcode, uint32_t dqpn,
		    uint32_t psn)
{
	b->opcode = opcode;
	b->flags = 0; /* no pad: payloads are whole words */
	b->pkey = htobe16(0xffff);
	b->qpn = htobe32(dqpn & BTH_QPN_MASK);
	b->apsn = htobe32(BTH_ACKREQ | (psn & BTH_PSN_MASK));
}

/* An RC SEND-only packet with the marker. */
static void pkt_send_only(struct conn *c, const struct info *in,
			  uint32_t psn, double deadline)
{
	uint8_t p[sizeof(struct bth) + MARKER_LEN];

	bth_put((struct bth *)p, IB_OPCODE_RC | IB_OP_SEND_ONLY, in->qpn, psn);
	memcpy(p + sizeof(struct bth), MARKER, MARKER_LEN);
	conn_data(c, p, sizeof(p), in->peer_qpn, deadline);
}

/* An RC RDMA-WRITE-only (payload: the marker) or READ request. */
static void pkt_rdma(struct conn *c, const struct info *in, uint8_t op,
		     uint32_t psn, uint64_t va, uint32_t rkey, double deadline)
{
	uint8_t p[sizeof(struct bth) + sizeof(struct reth) + MARKER_LEN];
	struct reth r = { .va = htobe64(va), .rkey = htobe32(rkey),
			  .len = htobe32(MARKER_LEN) };
	uint32_t len = sizeof(struct bth) + sizeof(r);

	bth_put((struct bth *)p, IB_OPCODE_RC | op, in->qpn, psn);
	memcpy(p + sizeof(struct bth), &r, sizeof(r));
	if (op == IB_OP_WRITE_ONLY) {
		memcpy(p + len, MARKER, MARKER_LEN);
		len += MARKER_LEN;
	}
	conn_data(c, p, len, in->peer_qpn, deadline);
}

/* The R_Keys tried: the real one, 0x100..0x1ff, and the first key of
 * each of the first 64 slots of a process's table (index + 1) << 8. */
static uint32_t key_guess(const struct info *in, uint64_t i)
{
	uint32_t k = (uint32_t)(i % (1 + 256 + 64));

	if (k == 0)
		return in->rkey;
	if (k <= 256)
		return 0x100 + k - 1;
	return (k - 256) << 8;
}

/* Reconnect a connection the victim dropped; false when out of tries. */
static bool conn_revive(struct conn *c, const struct info *in,
			unsigned int *tries)
{
	if (!c->dead)
		return true;
	close(c->fd);
	c->fd = -1;
	while (*tries < MAX_RECONNECT) {
		++*tries;
		if (!conn_greet(c, in->addr))
			return true;
		usleep(100000);
	}
	return false;
}

static int inject_main(const struct info *in, double secs, double rate)
{
	double end = now_s() + secs;
	uint32_t base = (in->rq_psn - 64) & BTH_PSN_MASK, psn;
	uint64_t i, sweeps = 0, global = 0;
	unsigned int tries = 0;
	static struct conn c;

	if (conn_as_peer(&c, in))
		return 1;
	c.rate = rate;
	c.start = now_s();
	for (i = 0; now_s() < end; i++) {
		if (i % 2)
			psn = (global++) & BTH_PSN_MASK;
		else
			psn = psn_add(base, (uint32_t)(i / 2 % WINDOW));
		if (!(i % 2) && i / 2 % WINDOW == 0)
			sweeps++;
		pkt_send_only(&c, in, psn, end);
		pkt_rdma(&c, in, IB_OP_WRITE_ONLY, psn,
			 in->va + (i * MARKER_LEN) % in->len, key_guess(in, i),
			 end);
		if (!conn_revive(&c, in, &tries))
			break;
	}
	conn_flush(&c, end + 1);
	printf("inject: %llu frames (SEND-only and WRITE-only as the peer), "
	       "%llu sweeps of %u PSNs from %u, %llu of 2^24 PSNs, "
	       "%u R_Keys, %u reconnections\n",
	       (unsigned long long)c.frames, (unsigned long long)sweeps,
	       WINDOW, base, (unsigned long long)(global > BTH_PSN_MASK + 1ull
				? BTH_PSN_MASK + 1ull : global),
	       1 + 256 + 64, tries);
	close(c.fd);
	return 0;
}

static int dupread_main(const struct info *in, double secs)
{
	double end = now_s() + secs;
	uint32_t psn, k;
	unsigned int tries = 0;
	static struct conn c;

	if (conn_as_peer(&c, in))
		return 1;
	/* Every PSN before the first the victim expected is behind the
	 * one it expects now (IBA 9.7.1: within 2^23 of it). */
	for (k = 0; k < BEHIND && now_s() < end; k++) {
		psn = (in->rq_psn - BEHIND + k) & BTH_PSN_MASK;
		/* a bogus R_Key; the real one beyond the region */
		pkt_rdma(&c, in, IB_OP_READ_REQUEST, psn, in->va,
			 in->rkey ^ 0xdead00, end);
		pkt_rdma(&c, in, IB_OP_READ_REQUEST, psn, in->va + in->len,
			 in->rkey, end);
		if (!conn_revive(&c, in, &tries))
			break;
	}
	conn_flush(&c, end + 1);
	printf("dupread: %llu READ requests as the peer, %u PSNs from %u, "
	       "all behind the expected one, %u reconnections\n",
	       (unsigned long long)c.frames, k,
	       (in->rq_psn - BEHIND) & BTH_PSN_MASK, tries);
	close(c.fd);
	return 0;
}

/* Hold n connections to addr's door for secs, silent or after half a
 * LOOKUP; say how many the door closed meanwhile. */
static int door_hold_main(const char *addr, double secs, int n, bool half)
{
	struct tcp_lookup q = { .kind = htobe32(TCP_LOOKUP_QPN) };
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(q)], sink[64];
	static int fds[HOLD_N_MAX];
	double end = now_s() + secs;
	struct tp_frame_hdr f;
	int i, held = 0, closed = 0;

	frame_hdr(&f, TP_FRAME_LOOKUP, sizeof(q));
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), &q, sizeof(q));
	for (i = 0; i < n && i < HOLD_N_MAX; i++) {
		fds[i] = dial(addr, IBEMU_DEFAULT_DOOR_PORT, now_s() + IO_S);
		if (fds[i] < 0)
			continue;
		held++;
		if (half)
			(void)!send(fds[i], buf, sizeof(buf) / 2, MSG_NOSIGNAL);
	}
	printf("holding %d door connections%s\n", held,
	       half ? " after half a LOOKUP" : "");
	fflush(stdout);
	while (now_s() < end)
		usleep(50000);
	for (i = 0; i < n && i < HOLD_N_MAX; i++) {
		if (fds[i] < 0)
			continue;
		if (recv(fds[i], sink, sizeof(sink), MSG_DONTWAIT) == 0)
			closed++;
		close(fds[i]);
	}
	printf("door-hold: %d of %d held for %.0f s, %d closed by the door\n",
	       held, n, secs, closed);
	return held ? 0 : 1;
}

static int connflood_main(const struct info *in, double secs, int count)
{
	static int fds[FLOOD_HOLD];
	double end = now_s() + secs;
	struct conn *c = calloc(1, sizeof(*c));
	int k, ok = 0, held = 0;

	if (!c || conn_victim(c, in->addr, in->qpn, in->vport))
		return 1;
	for (k = 0; k < FLOOD_HOLD && now_s() < end; k++) {
		fds[k] = dial(in->addr, c->vport, now_s() + IO_S);
		held += fds[k] >= 0;
	}
	usleep(1000000);
	while (k--)
		if (fds[k] >= 0)
			close(fds[k]);
	for (k = 0; k < count && now_s() < end; k++) {
		int fd = dial(in->addr, c->vport, now_s() + IO_S);

		if (fd >= 0) {
			ok++;
			close(fd);
		}
	}
	printf("conn-flood: %d held without HELLO for 1 s, %d of %d "
	       "connect/close cycles to port %u\n", held, ok, count,
	       c->vport);
	free(c);
	return ok ? 0 : 1;
}

static int enum_main(const struct info *in, double secs, int count)
{
	double end = now_s() + secs;
	struct door_ans a;
	int k, st, answered = 0, silent = 0;
	uint32_t qpn;

	for (k = 0; k < count && now_s() < end; k++) {
		qpn = IBEMU_QPN_FIRST + (uint32_t)k;
		st = door_lookup(in->addr, qpn, &a);
		if (st == 0) {
			answered++;
			printf("  QPN %u: slot %u, port %u\n", qpn,
			       be32toh(a.r.slot), be16toh(a.r.port));
		} else if (st < 0) {
			silent++;
		}
	}
	printf("enum: %d of %d QPN lookups answered with an owner, %d not "
	       "answered at all\n", answered, k, silent);
	return 0;
}

static int udspoof_main(const struct info *in, const char *addr,
			uint16_t lid)
{
	uint8_t p[sizeof(struct bth) + sizeof(struct deth) + MARKER_LEN];
	struct deth d = { .qkey = htobe32(in->qkey),
			  .sqp = htobe32(0xabcde) };
	struct conn *c = calloc(1, sizeof(*c));
	struct tp_frame_grh g;
	double end = now_s() + IO_S;
	int k;

	if (!c || conn_victim(c, addr, in->qpn, in->vport))
		return 1;
	c->token = 0x5eed5eed;
	c->slot = 7;
	c->guid = 0x0247000000000003ull;
	c->lid = lid;
	c->port = 1;
	if (conn_greet(c, addr)) {
		printf("HELLO to %s:%u failed\n", addr, c->vport);
		return 1;
	}
	bth_put((struct bth *)p, IB_OPCODE_UD | IB_OP_SEND_ONLY, in->qpn, 0);
	memcpy(p + sizeof(struct bth), &d, sizeof(d));
	memcpy(p + sizeof(struct bth) + sizeof(d), MARKER, MARKER_LEN);
	/* First with GRHs naming sources the connection is not: a global
	 * IPv6 address (over IPv4) and another node's IPv4 address. */
	memset(&g, 0, sizeof(g));
	g.ver_tclass_flow = htobe32(6u << 28);
	g.paylen = htobe16((uint16_t)sizeof(p));
	g.next_hdr = TP_FRAME_GRH_NEXT_BTH;
	g.hop_limit = 64;
	g.dgid[10] = g.dgid[11] = 0xff;
	if (inet_pton(AF_INET, addr, g.dgid + 12) != 1 ||
	    inet_pton(AF_INET6, SPOOF_SGID6, g.sgid) != 1)
		return 1;
	conn_data_grh(c, &g, p, sizeof(p), 0xabcde, end);
	if (inet_pton(AF_INET6, SPOOF_SGID4, g.sgid) != 1)
		return 1;
	conn_data_grh(c, &g, p, sizeof(p), 0xabcde, end);
	for (k = 0; k < 3; k++)
		conn_data(c, p, sizeof(p), 0xabcde, end);
	conn_flush(c, end);
	usleep(500000);
	printf("udspoof: %llu UD SENDs to QPN %u claiming LID %u, source QP "
	       "0xabcde, 2 with the SGIDs %s and %s\n",
	       (unsigned long long)c->frames, in->qpn, lid, SPOOF_SGID6,
	       SPOOF_SGID4);
	close(c->fd);
	free(c);
	return 0;
}

static int usage(const char *me)
{
	fprintf(stderr,
		"usage: %s inject INFO SECS [RATE]\n"
		"       %s dupread INFO SECS\n"
		"       %s doorhold|doorhalf ADDR SECS N\n"
		"       %s connflood|enum INFO SECS COUNT\n"
		"       %s udspoof INFO ADDR LID\n", me, me, me, me, me);
	return 2;
}

int main(int argc, char **argv)
{
	struct info in;

	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(ALARM_S);
	if (argc == 5 && !strncmp(argv[1], "door", 4))
		return door_hold_main(argv[2], atof(argv[3]), atoi(argv[4]),
				      !strcmp(argv[1], "doorhalf"));
	if (argc < 4 || info_read(argv[2], &in))
		return usage(argv[0]);
	if ((argc == 4 || argc == 5) && !strcmp(argv[1], "inject"))
		return inject_main(&in, atof(argv[3]),
				   argc == 5 ? atof(argv[4]) : 0);
	if (argc == 4 && !strcmp(argv[1], "dupread"))
		return dupread_main(&in, atof(argv[3]));
	if (argc == 5 && !strcmp(argv[1], "connflood"))
		return connflood_main(&in, atof(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "enum"))
		return enum_main(&in, atof(argv[3]), atoi(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "udspoof"))
		return udspoof_main(&in, argv[3], (uint16_t)atoi(argv[4]));
	return usage(argv[0]);
}
