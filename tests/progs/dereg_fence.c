// SPDX-License-Identifier: MIT
/*
 * No RDMA WRITE lands in a region once ibv_dereg_mr() has returned
 * (IBA 10.6.3.5, 11.2.8.4), nor in the memory of a QP once ibv_modify_qp()
 * has moved it to ERR (IBA 10.3.1), while a peer keeps writing into it.
 *
 * Each round forks a target and a requester (before either opens the
 * device), with RC QPs connected to each other.  The target registers a
 * 1 MiB buffer for REMOTE_WRITE; the requester writes a non-zero pattern
 * into it as fast as it can, one signaled WRITE of 16 KiB to 1 MiB at a
 * time (large enough to be placed by the requester itself when
 * cross-memory attach is on).  After 100 to 150 ms the target tells the
 * requester the fence is coming, deregisters the region (variant "dereg")
 * or moves its QP to ERR (variant "err"), and, as soon as that returns:
 * snapshots the buffer and checks it stays as it is for a few ms, then
 * fills it with a sentinel and checks every byte keeps it for 200 ms.  The
 * requester stops at its first error completion.  A WRITE posted after the
 * requester heard that the fence returned must not complete successfully.
 *
 * Usage: dereg_fence [rounds per variant]
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define BUF_LEN (1024 * 1024)
#define MIN_WRITE (16 * 1024)
#define ROUNDS 8
#define RUN_MS 100    /* plus up to another 50 ms, varied per round */
#define STABLE_MS 2   /* the snapshot must hold this long */
#define WATCH_MS 200  /* the sentinel must hold this long */
#define SENTINEL 0xa5 /* the pattern bytes are 0x01 to 0x7f */
#define REPLY_MS 5000

/* Target to requester, one byte each. */
#define MSG_FENCE 'F' /* about to deregister / move to ERR */
#define MSG_DONE 'D'  /* ibv_dereg_mr() / ibv_modify_qp() returned */
#define MSG_END 'E'   /* stop, report */

enum variant { V_DEREG, V_ERR };

static const char *const variant_name[] = {"dereg", "err"};

/* What the requester saw, sent to the target at the end. */
struct req_report {
	uint32_t ok_before;  /* SUCCESS, completed before MSG_FENCE */
	uint32_t ok_between; /* SUCCESS between MSG_FENCE and MSG_DONE */
	uint32_t ok_after;   /* SUCCESS of a WRITE posted after MSG_DONE */
	uint32_t posted;
	int32_t err_status; /* first error completion, -1: none */
	uint32_t err_early; /* the error came before MSG_FENCE */
	int32_t failed;	    /* the requester itself failed (post, poll) */
};

/* One round as seen by the target, sent to the parent. */
struct round_result {
	int32_t ret;	 /* 0 pass, 1 fail, 77 skip */
	int32_t landed;	 /* pattern bytes were in the buffer before */
	int64_t bad_off; /* first changed offset, -1: none */
	int32_t bad_val;
	int32_t bad_phase; /* 0 snapshot, 1 sentinel */
	int64_t fence_us;  /* how long dereg / modify took */
	struct req_report req;
};

static long long now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Wait up to ms for fd to be readable, then read len bytes. */
static int xfer_in_ms(int fd, void *buf, size_t len, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	return rc_xfer(fd, buf, len, 0);
}

static int send_msg(int fd, char msg)
{
	return rc_xfer(fd, &msg, 1, 1);
}

/*
 * A 1 MiB buffer, one WRITE outstanding.  A short transport timeout with
 * few retries: a requester writing to a QP in ERR gets RETRY_EXC in well
 * under a second.
 */
static const struct rc_pair_attr pair_attr = {
	.buf_len = BUF_LEN,
	.cq_depth = 16,
	.max_send_wr = 4,
	.max_recv_wr = 4,
	.qp_access = IBV_ACCESS_REMOTE_WRITE,
	.path_mtu = IBV_MTU_4096,
	.timeout = 14, /* 4.096 us * 2^14: 67 ms */
	.retry_cnt = 3,
	.rnr_retry = 3,
};

/* Open with the region's access, exchange, connect: both sides.
 * 1: no device, -1: error. */
static int side_setup(struct rc_side *s, int fd, int access, struct rc_conn *to)
{
	struct rc_pair_attr attr = pair_attr;
	int ret;

	attr.mr_access = access;
	ret = rc_pair_open(s, &attr);
	if (ret)
		return ret;
	if (rc_xfer(fd, &s->me, sizeof(s->me), 1) ||
	    xfer_in_ms(fd, to, sizeof(*to), REPLY_MS) || rc_pair_connect(s, to))
		return -1;
	return 0;
}

/* Read what the target said so far, without waiting. */
static int drain_msgs(int fd, int *fence, int *done, int *end)
{
	char m;
	ssize_t n;

	for (;;) {
		n = recv(fd, &m, 1, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return 0;
		if (n != 1)
			return -1;
		if (m == MSG_FENCE)
			*fence = 1;
		else if (m == MSG_DONE)
			*done = 1;
		else if (m == MSG_END)
			*end = 1;
	}
}

/*
 * The requester: one signaled WRITE at a time, of a size and offset that
 * vary, each of its own pattern byte, until an error completion or until
 * the target says to stop.  Then report and exit.
 */
static int requester(int fd)
{
	int fence = 0, done = 0, end = 0, outstanding = 0, after = 0;
	struct req_report r = {.err_status = -1};
	struct ibv_send_wr wr, *bad;
	struct rc_conn to;
	struct ibv_sge sge;
	struct rc_side s;
	struct ibv_wc wc;
	uint32_t rnd, len, off;
	int ret, n;
	char m;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	ret = side_setup(&s, fd, IBV_ACCESS_LOCAL_WRITE, &to);
	if (ret)
		return ret > 0 ? 77 : 2;
	if (send_msg(fd, 'r') || xfer_in_ms(fd, &m, 1, REPLY_MS))
		return 3;
	rnd = (uint32_t)getpid() * 2654435761u;
	while (!end) {
		if (drain_msgs(fd, &fence, &done, &end)) {
			r.failed = 1;
			break;
		}
		if (!outstanding && r.err_status < 0 && !end) {
			rnd = rnd * 1103515245u + 12345u;
			len = MIN_WRITE << ((rnd >> 8) % 7); /* 16 KiB..1 MiB */
			off = ((rnd >> 16) % (BUF_LEN / MIN_WRITE)) * MIN_WRITE;
			if (off + len > BUF_LEN)
				off = BUF_LEN - len;
			memset(s.buf, 1 + (int)(r.posted % 127), len);
			sge.addr = (uintptr_t)s.buf;
			sge.length = len;
			sge.lkey = s.mr->lkey;
			memset(&wr, 0, sizeof(wr));
			wr.wr_id = r.posted;
			wr.sg_list = &sge;
			wr.num_sge = 1;
			wr.opcode = IBV_WR_RDMA_WRITE;
			wr.wr.rdma.remote_addr = to.addr + off;
			wr.wr.rdma.rkey = to.rkey;
			if (ibv_post_send(s.qp, &wr, &bad)) {
				r.failed = 1;
				break;
			}
			r.posted++;
			outstanding = 1;
			after = done;
		}
		n = ibv_poll_cq(s.cq, 1, &wc);
		if (n < 0) {
			r.failed = 1;
			break;
		}
		if (n == 0) {
			if (!outstanding)
				poll(&(struct pollfd){.fd = fd,
						      .events = POLLIN},
				     1, 10);
			continue;
		}
		outstanding = 0;
		if (wc.status == IBV_WC_SUCCESS) {
			if (after)
				r.ok_after++;
			else if (!fence)
				r.ok_before++;
			else
				r.ok_between++;
			continue;
		}
		if (r.err_status < 0) {
			/* The target sent MSG_FENCE before the fence that
			 * caused this error: it is in the socket already. */
			if (drain_msgs(fd, &fence, &done, &end))
				r.failed = 1;
			r.err_status = (int32_t)wc.status;
			r.err_early = !fence;
		}
	}
	ret = rc_xfer(fd, &r, sizeof(r), 1) ? 3 : 0;
	rc_pair_close(&s);
	return ret;
}

/* First offset of buf that differs from ref (or from byte c if !ref).
 * Read through volatile: the peer writes behind the compiler's back. */
static long first_diff(const unsigned char *buf, const unsigned char *ref,
		       int c, int *val)
{
	const volatile uint64_t *w = (const volatile uint64_t *)buf;
	uint64_t want = 0x0101010101010101ull * (uint8_t)c, got;
	unsigned char g[8], e[8];
	long i, j;

	for (i = 0; i < BUF_LEN / 8; i++) {
		got = w[i];
		if (ref)
			memcpy(&want, ref + i * 8, 8);
		if (got == want)
			continue;
		memcpy(g, &got, 8);
		memcpy(e, &want, 8);
		for (j = 0; j < 7 && g[j] == e[j]; j++)
			;
		*val = g[j];
		return i * 8 + j;
	}
	return -1;
}

/* Watch buf for ms: it must stay equal to ref (or to byte c). */
static long watch(const unsigned char *buf, const unsigned char *ref, int c,
		  long ms, int *val)
{
	long long end = now_us() + ms * 1000;
	long off;

	do {
		off = first_diff(buf, ref, c, val);
		if (off >= 0)
			return off;
	} while (now_us() < end);
	return -1;
}

/* The target: one round.  Fills res; 0 when the round could run. */
static int target(int fd, enum variant v, int round, struct round_result *res)
{
	volatile unsigned char *vbuf;
	unsigned char *snap = NULL;
	struct ibv_qp_attr a;
	struct rc_conn to;
	struct rc_side s;
	long long t0;
	long off;
	char ready;
	int ret, i;

	memset(&s, 0, sizeof(s));
	res->bad_off = -1;
	ret = side_setup(&s, fd,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, &to);
	if (ret > 0) {
		res->ret = 77;
		goto out;
	}
	if (ret < 0 || send_msg(fd, 'r') ||
	    xfer_in_ms(fd, &ready, 1, REPLY_MS)) {
		say("FAIL: dereg-fence: %s round %d: cannot connect",
		    variant_name[v], round);
		res->ret = 1;
		goto out;
	}
	snap = malloc(BUF_LEN);
	if (!snap) {
		res->ret = 1;
		goto out;
	}

	sleep_ms(RUN_MS + (round * 17) % 50);
	vbuf = s.buf;
	for (i = 0; i < BUF_LEN && !res->landed; i += 4096)
		res->landed = vbuf[i] != 0;

	if (send_msg(fd, MSG_FENCE)) {
		res->ret = 1;
		goto out;
	}
	t0 = now_us();
	if (v == V_DEREG) {
		ret = ibv_dereg_mr(s.mr);
		s.mr = NULL;
	} else {
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		ret = ibv_modify_qp(s.qp, &a, IBV_QP_STATE);
	}
	res->fence_us = now_us() - t0;
	if (ret) {
		say("FAIL: dereg-fence: %s round %d: %s: %s", variant_name[v],
		    round, v == V_DEREG ? "ibv_dereg_mr" : "ibv_modify_qp",
		    strerror(ret));
		res->ret = 1;
		goto out;
	}
	/* From here on nothing may change the buffer but us. */
	memcpy(snap, s.buf, BUF_LEN);
	send_msg(fd, MSG_DONE);
	off = watch(s.buf, snap, 0, STABLE_MS, &res->bad_val);
	if (off >= 0) {
		res->bad_off = off;
		res->bad_phase = 0;
	} else {
		memset(s.buf, SENTINEL, BUF_LEN);
		off = watch(s.buf, NULL, SENTINEL, WATCH_MS, &res->bad_val);
		if (off >= 0) {
			res->bad_off = off;
			res->bad_phase = 1;
		}
	}
	if (send_msg(fd, MSG_END) ||
	    xfer_in_ms(fd, &res->req, sizeof(res->req), REPLY_MS)) {
		say("FAIL: dereg-fence: %s round %d: no report from the "
		    "requester",
		    variant_name[v], round);
		res->ret = 1;
		goto out;
	}
	res->ret = 0;
out:
	free(snap);
	rc_pair_close(&s);
	return res->ret;
}

static int reap(pid_t pid)
{
	int status;

	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

/*
 * One round: fork the target and the requester, connected by a socket;
 * the target sends its result back over a pipe.  Neither this process nor
 * the children touch the device before the fork.
 */
static int run_round(enum variant v, int round, struct round_result *res)
{
	int sv[2], pfd[2], rret, tret;
	pid_t tpid, rpid;

	memset(res, 0, sizeof(*res));
	res->ret = 1;
	res->bad_off = -1;
	res->req.err_status = -1;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) || pipe(pfd)) {
		perror("socketpair");
		return 1;
	}
	fflush(NULL);
	tpid = fork();
	if (tpid == 0) {
		close(sv[1]);
		close(pfd[0]);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		target(sv[0], v, round, res);
		_exit(rc_xfer(pfd[1], res, sizeof(*res), 1) ? 2 : 0);
	}
	rpid = tpid < 0 ? -1 : fork();
	if (rpid == 0) {
		close(sv[0]);
		close(pfd[0]);
		close(pfd[1]);
		_exit(requester(sv[1]));
	}
	close(sv[0]);
	close(sv[1]);
	close(pfd[1]);
	if (tpid < 0 || rpid < 0) {
		perror("fork");
		if (tpid > 0)
			kill(tpid, SIGKILL);
		close(pfd[0]);
		return 1;
	}
	if (rc_xfer(pfd[0], res, sizeof(*res), 0)) {
		memset(res, 0, sizeof(*res));
		res->ret = 1;
		res->bad_off = -1;
		res->req.err_status = -1;
	}
	close(pfd[0]);
	tret = reap(tpid);
	rret = reap(rpid);
	if (res->ret == 0 && (tret != 0 || rret != 0)) {
		say("FAIL: dereg-fence: %s round %d: target exit %d, "
		    "requester exit %d",
		    variant_name[v], round, tret, rret);
		res->ret = 1;
	}
	if (res->ret == 1 && rret == 77)
		res->ret = 77;
	return res->ret;
}

/* All rounds of one variant.  0 pass, 1 fail, 77 skip. */
static int run_variant(enum variant v, int rounds, const char *mode)
{
	unsigned long ok_before = 0, ok_between = 0, posted = 0;
	int round, ret, landed = 0, errs = 0, failed = 0;
	long long fence_max = 0;
	struct round_result r;

	for (round = 0; round < rounds; round++) {
		ret = run_round(v, round, &r);
		if (ret == 77)
			return 77;
		if (ret) {
			failed = 1;
			continue;
		}
		ok_before += r.req.ok_before;
		ok_between += r.req.ok_between;
		posted += r.req.posted;
		landed += r.landed;
		errs += r.req.err_status >= 0;
		if (r.fence_us > fence_max)
			fence_max = r.fence_us;
		if (r.bad_off >= 0) {
			say("FAIL: dereg-fence: %s, %s, round %d: byte at "
			    "offset %lld (of %d) is 0x%02x after %s returned "
			    "(%s)",
			    variant_name[v], mode, round, (long long)r.bad_off,
			    BUF_LEN, r.bad_val,
			    v == V_DEREG ? "ibv_dereg_mr" : "ibv_modify_qp",
			    r.bad_phase ? "sentinel 0xa5 overwritten"
					: "changed after the snapshot");
			failed = 1;
		}
		if (r.req.ok_after) {
			say("FAIL: dereg-fence: %s, %s, round %d: %u WRITE(s) "
			    "posted after the fence returned completed "
			    "successfully",
			    variant_name[v], mode, round, r.req.ok_after);
			failed = 1;
		}
		if (r.req.err_early) {
			say("FAIL: dereg-fence: %s, %s, round %d: error "
			    "completion (%s) before the fence",
			    variant_name[v], mode, round,
			    ibv_wc_status_str(
				    (enum ibv_wc_status)r.req.err_status));
			failed = 1;
		}
		if (r.req.failed) {
			say("FAIL: dereg-fence: %s, %s, round %d: the "
			    "requester failed to post or poll",
			    variant_name[v], mode, round);
			failed = 1;
		}
	}
	say("dereg-fence: %s, %s: %d rounds, %lu WRITEs posted, %lu "
	    "completed before the fence, %lu during it, pattern seen in "
	    "%d rounds, error completion in %d rounds, slowest fence %lld us",
	    variant_name[v], mode, rounds, posted, ok_before, ok_between,
	    landed, errs, fence_max);
	if (!ok_before || !landed) {
		say("FAIL: dereg-fence: %s, %s: no WRITE landed before the "
		    "fence: the test proves nothing",
		    variant_name[v], mode);
		failed = 1;
	}
	if (failed)
		return 1;
	printf("ok: dereg-fence: %s, %s: nothing landed after %s returned "
	       "in %d rounds\n",
	       variant_name[v], mode,
	       v == V_DEREG ? "ibv_dereg_mr" : "ibv_modify_qp(ERR)", rounds);
	return 0;
}

int main(int argc, char **argv)
{
	const char *cma = getenv("IBEMU_CMA");
	const char *mode = cma && !strcmp(cma, "0") ? "IBEMU_CMA=0" : "cma";
	int rounds = argc > 1 ? atoi(argv[1]) : ROUNDS;
	int r1, r2;

	if (rounds < 1 || rounds > 1000) {
		say("usage: %s [rounds per variant]", argv[0]);
		return 2;
	}
	/* A hang is a failure, not a stuck test run. */
	alarm(60 + (unsigned int)rounds);
	r1 = run_variant(V_DEREG, rounds, mode);
	if (r1 == 77) {
		say("SKIP: dereg-fence: no ibemu device");
		return 77;
	}
	r2 = run_variant(V_ERR, rounds, mode);
	if (r2 == 77)
		return 77;
	return r1 || r2 ? 1 : 0;
}
