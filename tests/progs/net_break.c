// SPDX-License-Identifier: MIT
/*
 * An RC connection between two nodes (two network namespaces, see
 * tests/net/net-break.sh) broken in the middle of a transfer: the peer
 * process killed (SIGKILL), or the peer node's link taken down.
 *
 *   net_break survivor PORT kill|link|bulk|idle|close
 *   net_break peer HOST PORT
 *
 * The two meet over a TCP socket (the survivor listens on PORT), trade
 * their QP's number, LID and PSN over it, and connect one RC QP each,
 * addressed by LID, with a transport timeout of 4.096 us * 2^TIMEOUT and
 * RETRY retries (RNR NAKs retried for ever).  Then both SEND 64 KiB
 * messages to each other as fast as they can, every message checked.
 * The survivor prints "flowing" once messages went both ways; the
 * script then breaks the connection and tells the survivor so
 * (SIGUSR1).  The survivor keeps sending; it must see (IBA 9.7.6.1.3,
 * C9-140 .. C9-142) its outstanding SENDs complete, the first with
 * IBV_WC_RETRY_EXC_ERR within timeout x (retry_cnt + 1) of the break
 * (four times that and a second allowed: the IBA lets the timer run up to
 * four times its value, and the machine is loaded), every later one with
 * IBV_WC_WR_FLUSH_ERR (IBA 10.8.3.3, the QP in the error state), its
 * posted receives flushed, and no completion after that.  It prints
 * "broken" and then:
 *
 *  - kill: accepts the connection of a new peer (the script starts one);
 *  - link: waits for SIGUSR2 (the link is up again), then asks the peer,
 *    whose own QP must have failed the same way, for its report.
 *
 * On the same socket both open a new QP, connect it and trade COUNT
 * checked messages each way: a node whose link came back, or whose peer
 * was replaced, is reachable again.  The survivor prints "reconnected".
 * The bulk mode breaks nothing: the peer SENDs BULK messages (1 GiB)
 * to the survivor, which checks every byte and prints "bulk".  The idle
 * mode (for bench/) trades one message each way, then both sides post a
 * receive and do nothing for IDLE_S seconds: the survivor prints the CPU
 * time its process (every thread) used meanwhile.
 * The close mode breaks it the way a finished program does: the peer
 * takes one message and closes its device at once, so the ACK it owes
 * leaves as it closes, on the one connection both QPs use.  The
 * survivor, once the peer is gone, SENDs twice more: the first finds
 * the peer's socket closed and draws a reset, the second fails on the
 * reset connection.  Run with its reads
 * of the network held back (IBEMU_FAULTS=stall:netread:USEC), the
 * survivor reads that ACK only after its sending side broke; the first
 * SEND must still complete with IBV_WC_SUCCESS (the peer received it
 * and acknowledged it), the other two with errors, and it prints
 * "closed".
 * Every wait is bounded (WAIT_MS, and an alarm ends a process that
 * overstays).  Exit: 0 pass, 1 fail, 77 no device.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "msg_slots.h"
#include "rc_pair.h"

#define COUNT 64 /* checked messages each way after the reconnection */
#define BULK 16384 /* messages of the bulk mode: 1 GiB */
/* The rounds, in the messages' pattern: the traffic that is broken is
 * round 0, then the checked exchange on new QPs, or the bulk transfer. */
#define ROUND_V 1
#define ROUND_B 2
#define IDLE_S 3
#define FLOWING 16 /* messages each way before saying "flowing" */
#define WAIT_MS 30000 /* bound on anything that must happen */
#define TIMEOUT 14 /* 4.096 us * 2^14: 67 ms */
#define RETRY 3
#define ALARM_S 120
#define SEND_WR_ID (1ull << 63) /* or'ed into a SEND's wr_id */

enum dir { TO_PEER, TO_SURVIVOR };

/* One side's traffic on its RC QP. */
struct traffic {
	struct rc_side *s;
	uint32_t round;
	enum dir out, in;	/* what we send, what we receive */
	uint32_t limit;		/* SENDs to post; UINT32_MAX: no end */
	uint32_t sent, send_done, send_ok, send_flushed;
	uint32_t recv_posted, recv_done, recvd, recv_flushed;
	int first_err;		/* status of the first failed SEND, -1 */
	long long first_err_ms;	/* when it was polled */
	bool bad;		/* a wrong payload or an unexpected status */
};

/* What a side tells the other. */
struct report {
	uint32_t sent, send_ok, send_flushed, recvd;
	int32_t first_err;
	int32_t bad;
};

static volatile sig_atomic_t broken_signal, link_up_signal;

static void on_usr1(int sig)
{
	(void)sig;
	broken_signal = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
	link_up_signal = 1;
}

static int post_recv(struct traffic *t)
{
	return msg_post_recv(t->s, &t->recv_posted);
}

static int post_send(struct traffic *t)
{
	return msg_post_send(t->s, t->round, t->out, &t->sent, SEND_WR_ID);
}

static int traffic_start(struct traffic *t, struct rc_side *s, uint32_t round,
			 enum dir out, uint32_t limit)
{
	uint32_t i;

	memset(t, 0, sizeof(*t));
	t->s = s;
	t->round = round;
	t->out = out;
	t->in = out == TO_PEER ? TO_SURVIVOR : TO_PEER;
	t->limit = limit;
	t->first_err = -1;
	for (i = 0; i < MSG_DEPTH; i++)
		if (post_recv(t))
			return -1;
	return 0;
}

/* Post what may be posted (nothing once a SEND failed: the QP is in the
 * error state), take what completed.  -1 on a verb error. */
static int traffic_step(struct traffic *t)
{
	struct ibv_wc wc[8];
	int n, i;

	while (t->first_err < 0 && t->sent < t->limit &&
	       t->sent - t->send_done < MSG_DEPTH)
		if (post_send(t))
			return -1;
	n = ibv_poll_cq(t->s->cq, 8, wc);
	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		bool is_send = wc[i].wr_id & SEND_WR_ID;

		if (wc[i].status == IBV_WC_SUCCESS && !is_send) {
			t->recv_done++;
			if (wc[i].byte_len != MSG_LEN ||
			    wc[i].wr_id != t->recvd ||
			    !msg_check(msg_recv_slot(t->s, t->recvd),
				       t->round, t->in, t->recvd)) {
				if (!t->bad)
					say("round %u: message %u is not "
					    "intact", t->round, t->recvd);
				t->bad = true;
			}
			t->recvd++;
			if (post_recv(t))
				return -1;
		} else if (!is_send) {
			/* A receive fails only by being flushed (IBA
			 * 10.8.3.3, the QP in the error state). */
			t->recv_done++;
			t->recv_flushed++;
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				say("round %u: a receive completed with %s",
				    t->round, ibv_wc_status_str(wc[i].status));
				t->bad = true;
			}
		} else if (wc[i].status == IBV_WC_SUCCESS) {
			t->send_done++;
			t->send_ok++;
			if (t->first_err >= 0) {
				say("round %u: a SEND completed after an "
				    "error", t->round);
				t->bad = true;
			}
		} else if (t->first_err < 0) {
			t->send_done++;
			t->first_err = wc[i].status;
			t->first_err_ms = now_ms();
		} else {
			/* After the first error, the rest is flushed. */
			t->send_done++;
			t->send_flushed++;
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				say("round %u: after %s, a SEND completed "
				    "with %s, not WR_FLUSH_ERR", t->round,
				    ibv_wc_status_str(t->first_err),
				    ibv_wc_status_str(wc[i].status));
				t->bad = true;
			}
		}
	}
	return 0;
}

/* Everything posted completed (after a failure: flushed). */
static bool traffic_done(const struct traffic *t)
{
	return t->send_done == t->sent &&
	       (t->first_err < 0 || t->recv_done == t->recv_posted);
}

static void report_of(const struct traffic *t, struct report *r)
{
	*r = (struct report){ t->sent, t->send_ok, t->send_flushed, t->recvd,
			      t->first_err, t->bad };
}

/* Read len bytes from fd while keeping our QP going.  0, or -1. */
static int read_while(struct traffic *t, int fd, void *buf, size_t len,
		      long long ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long end = now_ms() + ms;

	while (now_ms() < end) {
		if (poll(&pfd, 1, 0) == 1)
			return rc_xfer(fd, buf, len, 0);
		if (t && traffic_step(t))
			return -1;
		if (!t)
			poll(&pfd, 1, 100);
	}
	return -1;
}

/* A new QP on s (the old one closed first), connected to the other
 * side's over fd.  0, 1: no device, -1. */
static int qp_setup(struct rc_side *s, int fd)
{
	struct rc_pair_attr attr = msg_pair_attr(TIMEOUT, RETRY);

	rc_pair_close(s);
	memset(s, 0, sizeof(*s));
	return rc_pair_join(s, &attr, fd);
}

/* nsend checked messages out, nrecv in, then the reports traded: 0, -1. */
static int verified_run(struct rc_side *s, int fd, uint32_t round,
			enum dir out, const char *who, uint32_t nsend,
			uint32_t nrecv)
{
	struct report mine, theirs;
	struct traffic t;
	long long end = now_ms() + WAIT_MS + nsend / 8 + nrecv / 8;

	if (traffic_start(&t, s, round, out, nsend))
		return -1;
	while (now_ms() < end && (t.recvd < nrecv || !traffic_done(&t) ||
				  t.sent < nsend))
		if (traffic_step(&t) || t.first_err >= 0 || t.bad)
			break;
	report_of(&t, &mine);
	if (rc_xfer(fd, &mine, sizeof(mine), 1) ||
	    read_while(&t, fd, &theirs, sizeof(theirs), WAIT_MS)) {
		say("%s, round %u: no report from the other side", who,
		    round);
		return -1;
	}
	if (mine.bad || mine.first_err >= 0 || mine.send_ok != nsend ||
	    mine.recvd != nrecv || theirs.bad || theirs.first_err >= 0 ||
	    theirs.send_ok != nrecv || theirs.recvd != nsend) {
		say("%s, round %u: we sent %u of %u (error %d) and got %u of "
		    "%u intact; the other side sent %u (error %d) and got %u",
		    who, round, mine.send_ok, nsend, mine.first_err,
		    mine.recvd, nrecv, theirs.send_ok, theirs.first_err,
		    theirs.recvd);
		return -1;
	}
	return 0;
}

/* Sleep IDLE_S seconds (the receives of the last run still posted):
 * the CPU time (user and system, every thread) the process used
 * meanwhile, in seconds. */
static double idle_cpu_s(void)
{
	struct rusage a, b;

	getrusage(RUSAGE_SELF, &a);
	sleep(IDLE_S);
	getrusage(RUSAGE_SELF, &b);
	return (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) +
	       (double)(b.ru_stime.tv_sec - a.ru_stime.tv_sec) +
	       (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec +
			b.ru_stime.tv_usec - a.ru_stime.tv_usec) / 1e6;
}

/* ---- the peer ---- */

static int connect_to(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	long long end = now_ms() + WAIT_MS;
	int fd;

	if (getaddrinfo(host, port, &hints, &ai)) {
		say("peer: cannot resolve %s", host);
		return -1;
	}
	do {
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
		usleep(100000);
	} while (now_ms() < end);
	freeaddrinfo(ai);
	return fd;
}

static int peer_main(const char *host, const char *port)
{
	struct rc_side s = { 0 };
	struct report mine;
	struct traffic t;
	uint32_t round;
	long long end;
	int fd, ret;
	char c;

	fd = connect_to(host, port);
	if (fd < 0) {
		say("peer: cannot connect to %s port %s", host, port);
		return 1;
	}
	for (round = 0;; round++) {
		ret = qp_setup(&s, fd);
		if (ret) {
			say("peer, round %u: no QP connected", round);
			return ret == 1 ? 77 : 1;
		}
		if (rc_xfer(fd, &c, 1, 0))
			return 1;
		if (c == 'I') {
			ret = verified_run(&s, fd, ROUND_V, TO_SURVIVOR,
					   "peer", 1, 1);
			if (!ret)
				idle_cpu_s();
			rc_pair_close(&s);
			return ret ? 1 : 0;
		}
		if (c == 'C') {
			/* One message, then the device closed at once. */
			c = 'R';
			ret = traffic_start(&t, &s, ROUND_V, TO_SURVIVOR, 0) ||
			      rc_xfer(fd, &c, 1, 1);
			end = now_ms() + WAIT_MS;
			while (!ret && !t.recvd && !t.bad && now_ms() < end)
				ret = traffic_step(&t);
			rc_pair_close(&s);
			return ret || t.recvd != 1 || t.bad ? 1 : 0;
		}
		if (c == 'V' || c == 'B') {
			ret = c == 'V' ? verified_run(&s, fd, ROUND_V,
						      TO_SURVIVOR, "peer",
						      COUNT, COUNT) :
					 verified_run(&s, fd, ROUND_B,
						      TO_SURVIVOR, "peer",
						      BULK, 0);
			rc_pair_close(&s);
			return ret ? 1 : 0;
		}
		/* 'T': until our QP fails (or we are killed). */
		if (traffic_start(&t, &s, round, TO_SURVIVOR, UINT32_MAX))
			return 1;
		end = now_ms() + 3 * WAIT_MS;
		while (t.first_err < 0 && !t.bad && now_ms() < end)
			if (traffic_step(&t))
				return 1;
		if (t.bad)
			return 1;
		end = now_ms() + WAIT_MS;
		while (!traffic_done(&t) && now_ms() < end)
			if (traffic_step(&t))
				return 1;
		if (!traffic_done(&t))
			t.bad = true;
		/* The survivor asks once the link is back. */
		if (read_while(&t, fd, &c, 1, 3 * WAIT_MS) || c != 'X')
			return 1;
		report_of(&t, &mine);
		if (rc_xfer(fd, &mine, sizeof(mine), 1))
			return 1;
	}
}

/* ---- the survivor ---- */

static int accept_one(int lfd)
{
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };

	if (poll(&pfd, 1, WAIT_MS) != 1)
		return -1;
	return accept(lfd, NULL, NULL);
}

/* Traffic until the break, then the failure as the IBA says: 0, -1. */
static int survive_break(struct rc_side *s, int fd, bool link)
{
	/* IBA 9.7.6.1.3: the timer's value is 4.096 us * 2^TIMEOUT, and
	 * it may run up to four times that (C9-141). */
	long long bound = 4 * (RETRY + 1) * ((4096ll << TIMEOUT) / 1000000) +
			  1000;
	long long end, broke;
	struct report theirs;
	struct traffic t;
	char c = 'T';

	if (rc_xfer(fd, &c, 1, 1) ||
	    traffic_start(&t, s, 0, TO_PEER, UINT32_MAX))
		return -1;
	end = now_ms() + WAIT_MS;
	while ((t.recvd < FLOWING || t.send_ok < FLOWING) &&
	       t.first_err < 0 && !t.bad && now_ms() < end)
		if (traffic_step(&t))
			return -1;
	if (t.recvd < FLOWING || t.send_ok < FLOWING || t.bad) {
		say("survivor: no traffic: %u sent, %u received in %d ms "
		    "(first error %s)", t.send_ok, t.recvd, WAIT_MS,
		    t.first_err < 0 ? "none" :
				      ibv_wc_status_str(t.first_err));
		return -1;
	}
	printf("flowing: %u messages each way\n", FLOWING);
	fflush(stdout);
	/* Until the script broke the connection (and said so). */
	end = now_ms() + WAIT_MS;
	while (!broken_signal && t.first_err < 0 && now_ms() < end)
		if (traffic_step(&t))
			return -1;
	broke = now_ms();
	/* A failure noticed just before the script's signal came. */
	end = broke + 1000;
	while (!broken_signal && now_ms() < end)
		usleep(1000);
	if (!broken_signal) {
		say("survivor: %s before the break was signalled",
		    t.first_err < 0 ? "no break" :
				      ibv_wc_status_str(t.first_err));
		return -1;
	}
	end = broke + bound + WAIT_MS;
	while (!traffic_done(&t) || t.first_err < 0) {
		if (now_ms() >= end) {
			say("survivor: outstanding work not completed %lld ms "
			    "after the break: %u SENDs posted, %u done, first "
			    "error %s; %u receives posted, %u done",
			    now_ms() - broke, t.sent, t.send_done,
			    t.first_err < 0 ? "none" :
					      ibv_wc_status_str(t.first_err),
			    t.recv_posted, t.recv_done);
			return -1;
		}
		if (traffic_step(&t))
			return -1;
	}
	/* Nothing more may complete. */
	end = now_ms() + 200;
	while (now_ms() < end)
		if (traffic_step(&t))
			return -1;
	if (t.first_err != IBV_WC_RETRY_EXC_ERR || t.bad ||
	    t.send_done != t.sent || t.recv_done != t.recv_posted) {
		say("survivor: after the break: first error %s, %u of %u "
		    "SENDs and %u of %u receives completed%s",
		    ibv_wc_status_str(t.first_err), t.send_done, t.sent,
		    t.recv_done, t.recv_posted,
		    t.bad ? ", a wrong completion or message" : "");
		return -1;
	}
	if (t.first_err_ms - broke > bound) {
		say("survivor: RETRY_EXC_ERR %lld ms after the break, more "
		    "than %lld ms (timeout %d, retry_cnt %d)",
		    t.first_err_ms - broke, bound, TIMEOUT, RETRY);
		return -1;
	}
	printf("broken: RETRY_EXC_ERR %lld ms after the break (bound %lld "
	       "ms), then %u SENDs and %u receives WR_FLUSH_ERR; %u messages "
	       "sent, %u received intact before\n",
	       t.first_err_ms - broke, bound, t.send_flushed,
	       t.recv_flushed, t.send_ok, t.recvd);
	fflush(stdout);
	if (!link)
		return 0;
	end = now_ms() + 3 * WAIT_MS;
	while (!link_up_signal && now_ms() < end)
		usleep(10000);
	if (!link_up_signal) {
		say("survivor: the link did not come back");
		return -1;
	}
	c = 'X';
	if (rc_xfer(fd, &c, 1, 1) ||
	    read_while(NULL, fd, &theirs, sizeof(theirs), 3 * WAIT_MS)) {
		say("survivor: the peer did not report after the link came "
		    "back");
		return -1;
	}
	if (theirs.first_err != IBV_WC_RETRY_EXC_ERR || theirs.bad) {
		say("survivor: the peer's QP ended with %s%s",
		    theirs.first_err < 0 ?
			    "no error" :
			    ibv_wc_status_str(theirs.first_err),
		    theirs.bad ? ", a wrong completion or message" : "");
		return -1;
	}
	printf("the peer: RETRY_EXC_ERR, then %u SENDs WR_FLUSH_ERR\n",
	       theirs.send_flushed);
	return 0;
}

/*
 * The close mode: 0, 1 (fail), 77 (no device).  Our QP is connected
 * only once the peer's is, so that ours finds the peer's connection to
 * this node greeted and takes it too: the peer's ACK and our later
 * SENDs then share one connection, whose sending side breaks first.
 */
static int survive_close(struct rc_side *s, int fd)
{
	struct rc_pair_attr attr = msg_pair_attr(TIMEOUT, RETRY);
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	struct rc_conn them;
	struct traffic t;
	long long end;
	char c = 'C';
	int ret;

	ret = rc_pair_open(s, &attr);
	if (ret)
		return ret == 1 ? 77 : 1;
	/* The peer connects its QP, posts its receives and says 'R'. */
	if (rc_xfer(fd, &s->me, sizeof(s->me), 1) ||
	    rc_xfer(fd, &them, sizeof(them), 0) || rc_xfer(fd, &c, 1, 1) ||
	    rc_xfer(fd, &c, 1, 0) || c != 'R' || rc_pair_connect(s, &them)) {
		say("survivor: no QP connected");
		return 1;
	}
	/* One SEND: traffic_step posts no more (limit 1). */
	if (traffic_start(&t, s, ROUND_V, TO_PEER, 1) || post_send(&t))
		return 1;
	/* The peer exits once its device is closed: its end of fd goes
	 * after the ACK it owed was handed to the network. */
	if (poll(&pfd, 1, WAIT_MS) != 1 || read(fd, &c, 1) != 0) {
		say("survivor: the peer did not close");
		return 1;
	}
	if (post_send(&t))
		return 1;
	usleep(20000); /* the peer's node answers with a reset */
	if (post_send(&t))
		return 1;
	end = now_ms() + WAIT_MS;
	while ((!traffic_done(&t) || t.first_err < 0) && now_ms() < end)
		if (traffic_step(&t))
			return 1;
	if (t.send_ok != 1 || t.first_err < 0 || t.bad ||
	    t.send_done != t.sent) {
		say("survivor: of the SEND the peer received before it closed "
		    "and the %u after, %u completed, %u with success; first "
		    "error %s%s", t.sent - 1, t.send_done, t.send_ok,
		    t.first_err < 0 ? "none" : ibv_wc_status_str(t.first_err),
		    t.bad ? ", a wrong completion" : "");
		return 1;
	}
	printf("closed: the SEND the peer took before closing completed "
	       "with SUCCESS, the %u after it with %s and WR_FLUSH_ERR\n",
	       t.sent - 1, ibv_wc_status_str(t.first_err));
	return 0;
}

enum mode { KILL_MODE, LINK_MODE, BULK_MODE, IDLE_MODE, CLOSE_MODE };

static int survivor_main(const char *port, enum mode mode)
{
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rc_side s = { 0 };
	int lfd, fd, ret, one = 1;
	char c = 'V';

	sin.sin_port = htons((uint16_t)atoi(port));
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) || listen(lfd, 4)) {
		say("survivor: cannot listen on port %s: %s", port,
		    strerror(errno));
		return 1;
	}
	fd = accept_one(lfd);
	if (fd < 0) {
		say("survivor: no peer came");
		return 1;
	}
	if (mode == CLOSE_MODE) {
		ret = survive_close(&s, fd);
		rc_pair_close(&s);
		return ret;
	}
	ret = qp_setup(&s, fd);
	if (ret) {
		say("survivor: no QP connected");
		return ret == 1 ? 77 : 1;
	}
	if (mode == IDLE_MODE) {
		c = 'I';
		if (rc_xfer(fd, &c, 1, 1) ||
		    verified_run(&s, fd, ROUND_V, TO_PEER, "survivor", 1, 1))
			return 1;
		printf("idle: %.3f s of CPU in %d s with a connected RC QP "
		       "and a receive posted\n", idle_cpu_s(), IDLE_S);
		rc_pair_close(&s);
		return 0;
	}
	if (mode == BULK_MODE) {
		long long start = now_ms(), ms;

		c = 'B';
		if (rc_xfer(fd, &c, 1, 1) ||
		    verified_run(&s, fd, ROUND_B, TO_PEER, "survivor", 0,
				 BULK))
			return 1;
		ms = now_ms() - start;
		printf("bulk: %d messages of %d bytes (%lld bytes) received "
		       "intact, every byte checked, in %lld ms\n", BULK,
		       MSG_LEN, (long long)BULK * MSG_LEN, ms);
		rc_pair_close(&s);
		return 0;
	}
	if (survive_break(&s, fd, mode == LINK_MODE))
		return 1;
	if (mode == KILL_MODE) {
		/* The dead peer's socket, then a new peer's. */
		close(fd);
		fd = accept_one(lfd);
		if (fd < 0) {
			say("survivor: no new peer came");
			return 1;
		}
	}
	if (qp_setup(&s, fd) || rc_xfer(fd, &c, 1, 1)) {
		say("survivor: no new QP connected");
		return 1;
	}
	if (verified_run(&s, fd, ROUND_V, TO_PEER, "survivor", COUNT, COUNT))
		return 1;
	printf("reconnected: %d messages each way intact on new QPs\n",
	       COUNT);
	rc_pair_close(&s);
	close(fd);
	close(lfd);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { 0 };

	setvbuf(stdout, NULL, _IOLBF, 0);
	signal(SIGPIPE, SIG_IGN);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	alarm(ALARM_S);
	if (argc == 4 && !strcmp(argv[1], "survivor")) {
		if (!strcmp(argv[3], "kill"))
			return survivor_main(argv[2], KILL_MODE);
		if (!strcmp(argv[3], "link"))
			return survivor_main(argv[2], LINK_MODE);
		if (!strcmp(argv[3], "bulk"))
			return survivor_main(argv[2], BULK_MODE);
		if (!strcmp(argv[3], "idle"))
			return survivor_main(argv[2], IDLE_MODE);
		if (!strcmp(argv[3], "close"))
			return survivor_main(argv[2], CLOSE_MODE);
	}
	if (argc == 4 && !strcmp(argv[1], "peer"))
		return peer_main(argv[2], argv[3]);
	fprintf(stderr, "usage: %s survivor PORT kill|link|bulk|idle|close\n"
			"       %s peer HOST PORT\n", argv[0], argv[0]);
	return 2;
}
