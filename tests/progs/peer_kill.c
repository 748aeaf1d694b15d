// SPDX-License-Identifier: MIT
/*
 * A peer killed (SIGKILL) or stopped (SIGSTOP) at a random moment of RC
 * traffic never wedges nor crashes the survivor.
 *
 * The survivor runs every round; each round it starts a peer (this
 * program again, exec'd), connects one RC QP to it, and both send 64 KiB
 * SENDs to each other as fast as they can, so the peer is often in the
 * middle of writing a packet into the survivor's inbox.  After a random
 * 0 to RUN_MS ms the survivor kills or stops the peer, then:
 *
 *  - killed: its QP to the peer ends with IBV_WC_RETRY_EXC_ERR (IBA
 *    9.7.6.1.3, no answer within timeout x (retry_cnt + 1)), the rest
 *    flushed; every message it received before was intact, in order;
 *  - stopped: after 0 to STOP_MS ms it sends itself a message through its
 *    own inbox while the peer is still stopped, continues the peer
 *    (SIGCONT) and both finish: each side's QP either completes all its
 *    work or fails with IBV_WC_RETRY_EXC_ERR; every message received is
 *    intact and in order, and every message whose SEND completed
 *    successfully was received.
 *
 * In both cases a SEND between two QPs of the survivor itself (through its
 * own inbox) must then complete, intact: a peer that died or stopped
 * between claiming a slot of the survivor's inbox and publishing it used
 * to wedge that inbox for good (or until SIGCONT).
 *
 * Usage: peer_kill [kills [stops]]   (100 each; PEER_KILL_SEED replays)
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "msg_slots.h"
#include "rc_pair.h"

#define RUN_MS 12 /* traffic before the signal: 0 to RUN_MS ms */
#define STOP_MS 30 /* a stopped peer stays stopped 0 to STOP_MS ms */
#define WAIT_MS 5000 /* bound on anything that must happen */
/* Peer QPs: 4.096 us * 2^10 (the emulator takes at least 32 ms), one
 * retry, so a dead peer is found quickly; RNR retried for ever. */
#define PEER_TIMEOUT 10
#define PEER_RETRY 1

enum dir { TO_PEER, TO_SURVIVOR, LOOP };

/* One side's traffic on its RC QP. */
struct traffic {
	struct rc_side *s;
	uint32_t round;
	enum dir out, in; /* what we send, what we receive */
	bool running; /* post more SENDs, repost receives */
	uint32_t sent, send_done, send_ok;
	uint32_t recv_posted, recv_done, recvd;
	int first_err; /* status of the first failed SEND, -1: none */
	bool bad; /* a wrong payload or an unexpected status */
};

/* What a side tells the other once its SENDs are done. */
struct report {
	uint32_t sent, send_ok, recvd;
	int32_t first_err;
	int32_t bad;
};

static int post_recv(struct traffic *t)
{
	return msg_post_recv(t->s, &t->recv_posted);
}

static int post_send(struct traffic *t)
{
	return msg_post_send(t->s, t->round, t->out, &t->sent, 0);
}

static void traffic_init(struct traffic *t, struct rc_side *s, uint32_t round,
			 enum dir out, enum dir in)
{
	memset(t, 0, sizeof(*t));
	t->s = s;
	t->round = round;
	t->out = out;
	t->in = in;
	t->first_err = -1;
	t->running = true;
}

/* Post what may be posted, take what completed.  -1 on a verb error. */
static int traffic_step(struct traffic *t)
{
	struct ibv_wc wc[8];
	int n, i;

	while (t->running && t->first_err < 0 &&
	       t->sent - t->send_done < MSG_DEPTH)
		if (post_send(t))
			return -1;
	n = ibv_poll_cq(t->s->cq, 8, wc);
	if (n < 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (wc[i].opcode & IBV_WC_RECV) {
			t->recv_done++;
			if (wc[i].status == IBV_WC_SUCCESS) {
				if (wc[i].byte_len != MSG_LEN ||
				    wc[i].wr_id != t->recvd ||
				    !msg_check(msg_recv_slot(t->s, t->recvd),
					       t->round, t->in, t->recvd)) {
					say("round %u: message %u from the "
					    "other side is not intact",
					    t->round, t->recvd);
					t->bad = true;
				}
				t->recvd++;
				/* Always: a SEND the other side posted
				 * before it heard "finish" needs one. */
				if (post_recv(t))
					return -1;
			} else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
				say("round %u: receive: %s", t->round,
				    ibv_wc_status_str(wc[i].status));
				t->bad = true;
			}
			continue;
		}
		/* A failed WC's opcode is undefined: a SEND, ours. */
		t->send_done++;
		if (wc[i].status == IBV_WC_SUCCESS) {
			if (t->first_err >= 0) {
				say("round %u: a SEND completed after an "
				    "error", t->round);
				t->bad = true;
			}
			t->send_ok++;
		} else if (t->first_err < 0) {
			t->first_err = wc[i].status;
		} else if (wc[i].status != IBV_WC_WR_FLUSH_ERR) {
			t->bad = true;
		}
	}
	return 0;
}

/* Run until the SENDs posted are done (and, if the QP failed, every
 * receive flushed), or WAIT_MS.  0, or -1 if that did not happen. */
static int traffic_drain(struct traffic *t)
{
	long long end = now_ms() + WAIT_MS;

	t->running = false;
	while (now_ms() < end) {
		if (traffic_step(t))
			return -1;
		if (t->send_done == t->sent &&
		    (t->first_err < 0 || t->recv_done == t->recv_posted))
			return 0;
	}
	return -1;
}

/* Read len bytes from fd while keeping our QP going (the other side's
 * SENDs need our receives reposted).  0, or -1. */
static int read_while(struct traffic *t, int fd, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long end = now_ms() + WAIT_MS;

	while (now_ms() < end) {
		if (poll(&pfd, 1, 0) == 1)
			return rc_xfer(fd, buf, len, 0);
		if (traffic_step(t))
			return -1;
	}
	return -1;
}

/* The RC QP between the survivor and its peer, the same on both sides. */
static int peer_join(struct rc_side *s, int fd)
{
	struct rc_pair_attr attr = msg_pair_attr(PEER_TIMEOUT, PEER_RETRY);

	return rc_pair_join(s, &attr, fd);
}

/* ---- the peer ---- */

static int peer_main(int fd, uint32_t round)
{
	struct report mine, theirs;
	struct rc_side s = { 0 };
	struct traffic t;
	struct pollfd pfd = { .fd = fd, .events = POLLIN };
	long long end;
	uint32_t i;
	char c;

	alarm(60); /* whatever happens to the survivor */
	if (peer_join(&s, fd))
		return 1;
	traffic_init(&t, &s, round, TO_SURVIVOR, TO_PEER);
	for (i = 0; i < MSG_DEPTH; i++)
		if (post_recv(&t))
			return 1;
	c = 'R';
	if (rc_xfer(fd, &c, 1, 1) || rc_xfer(fd, &c, 1, 0))
		return 1;
	/* Until the survivor says finish (if it does not kill us). */
	for (i = 0;; i++) {
		if (traffic_step(&t))
			return 1;
		if ((i & 15) == 0 && poll(&pfd, 1, 0) == 1)
			break;
	}
	if (rc_xfer(fd, &c, 1, 0))
		return 1;
	if (traffic_drain(&t)) {
		say("peer, round %u: SENDs not done in %d ms: %u posted, %u "
		    "done (%u ok), first error %d; receives %u posted, %u "
		    "done, %u ok", round, WAIT_MS, t.sent, t.send_done,
		    t.send_ok, t.first_err, t.recv_posted, t.recv_done,
		    t.recvd);
		t.bad = true;
	}
	mine = (struct report){ t.sent, t.send_ok, t.recvd, t.first_err,
				t.bad };
	if (rc_xfer(fd, &mine, sizeof(mine), 1) ||
	    read_while(&t, fd, &theirs, sizeof(theirs)))
		return 1;
	/* What the survivor got acknowledged we have. */
	end = now_ms() + WAIT_MS;
	while (t.recvd < theirs.send_ok && now_ms() < end)
		if (traffic_step(&t))
			return 1;
	mine.recvd = t.recvd;
	mine.bad = t.bad;
	if (rc_xfer(fd, &mine, sizeof(mine), 1))
		return 1;
	rc_pair_close(&s);
	return 0;
}

/* ---- the survivor ---- */

struct loopback {
	struct rc_side a, b;
	uint32_t n;
};

static const struct rc_pair_attr lo_attr = {
	.buf_len = MSG_LEN,
	.mr_access = IBV_ACCESS_LOCAL_WRITE,
	.cq_depth = 4,
	.max_send_wr = 1,
	.max_recv_wr = 1,
	.path_mtu = IBV_MTU_4096,
	.timeout = 14,
	.retry_cnt = 7,
	.rnr_retry = 7,
};

static int loopback_open(struct loopback *lo)
{
	int ret;

	ret = rc_pair_open(&lo->a, &lo_attr);
	if (ret)
		return ret;
	if (rc_pair_open(&lo->b, &lo_attr) ||
	    rc_pair_connect(&lo->a, &lo->b.me) ||
	    rc_pair_connect(&lo->b, &lo->a.me))
		return -1;
	return 0;
}

/* One SEND from a to b through our own inbox: intact, in time. */
static int loopback_check(struct loopback *lo, uint32_t round)
{
	struct ibv_sge sa = { (uintptr_t)lo->a.buf, MSG_LEN, lo->a.mr->lkey };
	struct ibv_sge sb = { (uintptr_t)lo->b.buf, MSG_LEN, lo->b.mr->lkey };
	struct ibv_send_wr swr = { 0 }, *sbad;
	struct ibv_recv_wr rwr = { 0 }, *rbad;
	long long end = now_ms() + WAIT_MS;
	int got_a = 0, got_b = 0;
	struct ibv_wc wc;

	rwr.sg_list = &sb;
	rwr.num_sge = 1;
	memset(lo->b.buf, 0, MSG_LEN);
	msg_fill(lo->a.buf, round, LOOP, lo->n);
	swr.sg_list = &sa;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_recv(lo->b.qp, &rwr, &rbad) ||
	    ibv_post_send(lo->a.qp, &swr, &sbad))
		return -1;
	while ((!got_a || !got_b) && now_ms() < end) {
		if (!got_a && ibv_poll_cq(lo->a.cq, 1, &wc) == 1) {
			got_a = 1;
			if (wc.status != IBV_WC_SUCCESS) {
				say("round %u: SEND to ourselves: %s", round,
				    ibv_wc_status_str(wc.status));
				return -1;
			}
		}
		if (!got_b && ibv_poll_cq(lo->b.cq, 1, &wc) == 1) {
			got_b = 1;
			if (wc.status != IBV_WC_SUCCESS) {
				say("round %u: receive from ourselves: %s",
				    round, ibv_wc_status_str(wc.status));
				return -1;
			}
		}
	}
	if (!got_a || !got_b) {
		say("round %u: a SEND to ourselves did not complete in %d ms:"
		    " our inbox is wedged", round, WAIT_MS);
		return -1;
	}
	if (!msg_check(lo->b.buf, round, LOOP, lo->n++)) {
		say("round %u: a SEND to ourselves arrived corrupted", round);
		return -1;
	}
	return 0;
}

static pid_t peer_start(const char *self, uint32_t round, int *fd_p)
{
	char fdbuf[16], roundbuf[16];
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
		return -1;
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		/* The peer's end survives exec. */
		if (fcntl(sv[1], F_SETFD, 0))
			_exit(1);
		snprintf(fdbuf, sizeof(fdbuf), "%d", sv[1]);
		snprintf(roundbuf, sizeof(roundbuf), "%u", round);
		execl(self, self, "--peer", fdbuf, roundbuf, (char *)NULL);
		_exit(127);
	}
	close(sv[1]);
	*fd_p = sv[0];
	return pid;
}

/* Poll our traffic for ms milliseconds. */
static int traffic_for(struct traffic *t, long long ms)
{
	long long end = now_ms() + ms;

	do {
		if (traffic_step(t))
			return -1;
	} while (now_ms() < end);
	return 0;
}

struct tally {
	unsigned int retry_exc, completed;
};

/* One round; 0 pass, -1 fail. */
static int round_run(const char *self, struct loopback *lo, uint32_t round,
		     bool kill_it, unsigned int *seed, struct tally *tally)
{
	struct report mine, theirs, final;
	struct rc_side s = { 0 };
	struct traffic t;
	int fd = -1, st, ret = -1;
	bool reaped = false;
	uint32_t i;
	pid_t pid;
	char c;

	pid = peer_start(self, round, &fd);
	if (pid < 0) {
		say("round %u: cannot start the peer", round);
		return -1;
	}
	if (peer_join(&s, fd)) {
		say("round %u: connection failed", round);
		goto out;
	}
	traffic_init(&t, &s, round, TO_PEER, TO_SURVIVOR);
	for (i = 0; i < MSG_DEPTH; i++)
		if (post_recv(&t))
			goto out;
	c = 'R';
	if (rc_xfer(fd, &c, 1, 0) || rc_xfer(fd, &c, 1, 1))
		goto out;
	if (traffic_for(&t, rand_r(seed) % (RUN_MS + 1)))
		goto out;

	if (kill_it) {
		kill(pid, SIGKILL);
		reaped = waitpid(pid, &st, 0) == pid;
		/* Something to time out on, at once if there is room. */
		if (t.first_err < 0 && t.sent - t.send_done < MSG_DEPTH &&
		    post_send(&t))
			goto out;
		if (loopback_check(lo, round))
			goto out;
		/* What was in flight may have been acknowledged before
		 * the peer died: then one more SEND, to time out on. */
		for (i = 0; i < 2 && t.first_err < 0; i++) {
			if (traffic_drain(&t))
				break;
			if (t.first_err < 0 && post_send(&t))
				goto out;
		}
		if (t.first_err < 0 || traffic_drain(&t)) {
			say("round %u: the QP to a dead peer did not fail in "
			    "%d ms", round, WAIT_MS);
			goto out;
		}
		if (t.first_err != IBV_WC_RETRY_EXC_ERR) {
			say("round %u: the QP to a dead peer ended with %s",
			    round,
			    t.first_err < 0 ?
				    "success" :
				    ibv_wc_status_str(t.first_err));
			goto out;
		}
		tally->retry_exc++;
		ret = t.bad ? -1 : 0;
		goto out;
	}

	kill(pid, SIGSTOP);
	if (waitpid(pid, &st, WUNTRACED) != pid || !WIFSTOPPED(st)) {
		say("round %u: the peer did not stop", round);
		goto out;
	}
	if (traffic_for(&t, rand_r(seed) % (STOP_MS + 1)) ||
	    loopback_check(lo, round))
		goto out;
	kill(pid, SIGCONT);
	/* Finish: both stop sending, say what completed, and check that
	 * what the other got acknowledged arrived. */
	c = 'F';
	if (rc_xfer(fd, &c, 1, 1))
		goto out;
	if (traffic_drain(&t)) {
		say("round %u: our SENDs did not finish in %d ms", round,
		    WAIT_MS);
		goto out;
	}
	mine = (struct report){ t.sent, t.send_ok, t.recvd, t.first_err,
				t.bad };
	if (read_while(&t, fd, &theirs, sizeof(theirs)) ||
	    rc_xfer(fd, &mine, sizeof(mine), 1) ||
	    read_while(&t, fd, &final, sizeof(final))) {
		say("round %u: the peer did not report", round);
		goto out;
	}
	{
		long long end = now_ms() + WAIT_MS;

		while (t.recvd < theirs.send_ok && now_ms() < end)
			if (traffic_step(&t))
				goto out;
	}
	if (t.bad || final.bad) {
		say("round %u: a message arrived corrupted", round);
		goto out;
	}
	if (t.recvd < theirs.send_ok || final.recvd < t.send_ok ||
	    t.recvd > theirs.sent || final.recvd > t.sent) {
		say("round %u: acknowledged messages lost: we got %u of %u "
		    "acknowledged, the peer %u of %u", round, t.recvd,
		    theirs.send_ok, final.recvd, t.send_ok);
		goto out;
	}
	for (i = 0; i < 2; i++) {
		int err = i ? theirs.first_err : t.first_err;

		if (err >= 0 && err != IBV_WC_RETRY_EXC_ERR) {
			say("round %u: %s QP ended with %s", round,
			    i ? "the peer's" : "our", ibv_wc_status_str(err));
			goto out;
		}
	}
	if (t.first_err < 0 && theirs.first_err < 0)
		tally->completed++;
	else
		tally->retry_exc++;
	reaped = waitpid(pid, &st, 0) == pid;
	if (!WIFEXITED(st) || WEXITSTATUS(st)) {
		say("round %u: the peer failed", round);
		goto out;
	}
	ret = 0;
out:
	if (!reaped) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
	}
	close(fd);
	rc_pair_close(&s);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned int kills = 100, stops = 100, seed, seed0, i;
	struct tally tk = { 0 }, ts = { 0 };
	struct loopback lo = { 0 };
	long long start = now_ms();
	const char *env;
	int ret;

	if (argc == 4 && !strcmp(argv[1], "--peer"))
		return peer_main(atoi(argv[2]), (uint32_t)atoi(argv[3]));
	if (argc > 1)
		kills = (unsigned int)atoi(argv[1]);
	if (argc > 2)
		stops = (unsigned int)atoi(argv[2]);
	env = getenv("PEER_KILL_SEED");
	seed = env ? (unsigned int)strtoul(env, NULL, 0) :
		     (unsigned int)(time(NULL) ^ getpid());
	seed0 = seed;
	signal(SIGPIPE, SIG_IGN);
	ret = loopback_open(&lo);
	if (ret == 1) {
		say("no ibemu device: skipped");
		return 77;
	}
	if (ret) {
		say("cannot open the device");
		return 1;
	}
	ret = 0;
	for (i = 0; i < kills + stops && !ret; i++)
		ret = round_run(argv[0], &lo, i, i < kills, &seed,
				i < kills ? &tk : &ts);
	say("peer_kill (PEER_KILL_SEED=%u, IBEMU_CMA=%s): %u kills (%u "
	    "RETRY_EXC_ERR), %u stops (%u completed, %u RETRY_EXC_ERR), "
	    "%lld ms: %s", seed0, getenv("IBEMU_CMA") ?: "default", kills,
	    tk.retry_exc, stops, ts.completed, ts.retry_exc,
	    now_ms() - start, ret ? "FAIL" : "ok");
	rc_pair_close(&lo.b);
	rc_pair_close(&lo.a);
	return ret ? 1 : 0;
}
