// SPDX-License-Identifier: MIT
/*
 * A QP moved to ERR while its requester is blocked on a full peer inbox
 * leaves the process idle.
 *
 * Two processes, each with an RC QP, connected to each other.  The peer
 * stops itself (SIGSTOP) once connected, so nobody drains its inbox.  The
 * requester posts more SENDs than the inbox has slots, so it blocks, then
 * moves its QP to ERR with ibv_modify_qp.  Every WR must complete with a
 * flush error (IBA 10.3.1), and from then on the QP has nothing left to
 * send: the process must go quiet, not keep its progress thread retrying
 * the full inbox.  Quiet is measured over one second with getrusage (all
 * threads): context switches and CPU time, against the same process
 * measured idle before anything was posted.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NSENDS 2048 /* twice the slots of an inbox */
#define MSG_LEN 64
#define MAX_CSW 200    /* context switches in the quiet second */
#define MAX_CPU_MS 100 /* CPU time in the quiet second */

struct busy {
	long csw;    /* voluntary + involuntary context switches */
	long cpu_ms; /* user + system */
};

/*
 * Timeout 0 is infinite (IBA 9.7.6.1.3): the stopped peer never answers,
 * and the QP must reach ERR only by ibv_modify_qp.
 */
static const struct rc_pair_attr pair_attr = {
	.buf_len = MSG_LEN,
	.mr_access = IBV_ACCESS_LOCAL_WRITE,
	.cq_depth = 2 * NSENDS,
	.max_send_wr = NSENDS,
	.max_recv_wr = 16,
	.qp_access = 0,
	.path_mtu = IBV_MTU_1024,
	.timeout = 0,
	.retry_cnt = 7,
	.rnr_retry = 7,
};

/*
 * The peer: connect, tell the parent, stop.  It is never continued; the
 * parent kills it.  Exit 77 when there is no device.
 */
static int peer(int fd)
{
	struct rc_conn to;
	struct rc_side s;
	char ready = 'r';
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	ret = rc_pair_open(&s, &pair_attr);
	if (ret)
		return ret > 0 ? 77 : 2;
	if (rc_xfer(fd, &s.me, sizeof(s.me), 1) ||
	    rc_xfer(fd, &to, sizeof(to), 0) || rc_pair_connect(&s, &to) ||
	    rc_xfer(fd, &ready, 1, 1))
		return 3;
	raise(SIGSTOP);
	for (;;)
		pause();
}

static void busy_now(struct busy *b)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	b->csw = ru.ru_nvcsw + ru.ru_nivcsw;
	b->cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000L +
		    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000L;
}

/* How busy the process is while this thread sleeps for ms. */
static void busy_over(struct busy *d, long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	struct busy a, b;

	busy_now(&a);
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	busy_now(&b);
	d->csw = b.csw - a.csw;
	d->cpu_ms = b.cpu_ms - a.cpu_ms;
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int requester(struct rc_side *s, int fd, pid_t pid)
{
	struct ibv_send_wr wr, *bad;
	struct busy idle, blocked, quiet;
	struct ibv_qp_attr a;
	struct ibv_wc wc[64];
	struct rc_conn to;
	struct ibv_sge sge;
	long long deadline;
	int i, n, got = 0, status;
	char ready;

	if (rc_xfer(fd, &s->me, sizeof(s->me), 1) ||
	    rc_xfer(fd, &to, sizeof(to), 0)) {
		say("FAIL: err-idle: the peer did not send its QPN/LID/PSN");
		return 1;
	}
	if (rc_pair_connect(s, &to)) {
		say("FAIL: err-idle: cannot connect the requester's QP");
		return 1;
	}
	if (rc_xfer(fd, &ready, 1, 0)) {
		say("FAIL: err-idle: the peer did not connect");
		return 1;
	}
	if (waitpid(pid, &status, WUNTRACED) != pid || !WIFSTOPPED(status)) {
		say("FAIL: err-idle: the peer did not stop");
		return 1;
	}

	/* The control: connected, nothing posted. */
	busy_over(&idle, 1000);

	sge.addr = (uintptr_t)s->buf;
	sge.length = MSG_LEN;
	sge.lkey = s->mr->lkey;
	for (i = 0; i < NSENDS; i++) {
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		if (ibv_post_send(s->qp, &wr, &bad)) {
			say("FAIL: err-idle: post_send %d of %d", i, NSENDS);
			return 1;
		}
	}
	/* The peer's inbox fills, the requester retries the rest. */
	busy_over(&blocked, 250);

	/* Nothing was acknowledged: the peer is stopped. */
	n = ibv_poll_cq(s->cq, 64, wc);
	if (n != 0) {
		say("FAIL: err-idle: %d completion(s) before ERR, status %s", n,
		    n > 0 ? ibv_wc_status_str(wc[0].status) : "-");
		return 1;
	}

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_ERR;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE)) {
		say("FAIL: err-idle: modify_qp to ERR");
		return 1;
	}

	/* IBA 10.3.1: in ERR every outstanding WR completes, in order, with
	 * a flush error. */
	deadline = now_ms() + 10000;
	while (got < NSENDS && now_ms() < deadline) {
		n = ibv_poll_cq(s->cq, 64, wc);
		if (n < 0) {
			say("FAIL: err-idle: poll_cq %d", n);
			return 1;
		}
		for (i = 0; i < n; i++, got++) {
			if (wc[i].status != IBV_WC_WR_FLUSH_ERR ||
			    wc[i].wr_id != (uint64_t)got) {
				say("FAIL: err-idle: completion %d: wr_id %llu "
				    "status %s, expected wr_id %d %s",
				    got, (unsigned long long)wc[i].wr_id,
				    ibv_wc_status_str(wc[i].status), got,
				    ibv_wc_status_str(IBV_WC_WR_FLUSH_ERR));
				return 1;
			}
		}
	}
	if (got != NSENDS) {
		say("FAIL: err-idle: %d of %d WRs flushed after ERR", got,
		    NSENDS);
		return 1;
	}
	n = ibv_poll_cq(s->cq, 64, wc);
	if (n != 0) {
		say("FAIL: err-idle: %d completion(s) more than posted", n);
		return 1;
	}

	/* Let the application's polls wear off, then measure. */
	busy_over(&quiet, 100);
	busy_over(&quiet, 1000);

	say("err-idle: idle control: %ld context switches, %ld ms CPU in 1 s",
	    idle.csw, idle.cpu_ms);
	say("err-idle: requester blocked: %ld context switches, %ld ms CPU "
	    "in 250 ms",
	    blocked.csw, blocked.cpu_ms);
	say("err-idle: after ERR (%d WRs flushed): %ld context switches, "
	    "%ld ms CPU in 1 s (bound: < %d, < %d ms)",
	    got, quiet.csw, quiet.cpu_ms, MAX_CSW, MAX_CPU_MS);
	if (idle.csw >= MAX_CSW || idle.cpu_ms >= MAX_CPU_MS) {
		say("FAIL: err-idle: the process is busy even before "
		    "anything is posted");
		return 1;
	}
	if (quiet.csw >= MAX_CSW || quiet.cpu_ms >= MAX_CPU_MS) {
		say("FAIL: err-idle: a QP in ERR keeps the process busy "
		    "(its requester still retries the full inbox)");
		return 1;
	}
	printf("ok: err-idle: a QP moved to ERR while blocked on a full "
	       "inbox flushes its %d WRs and leaves the process idle\n",
	       NSENDS);
	return 0;
}

int main(void)
{
	struct rc_side s;
	int sv[2], ret, status;
	pid_t pid;

	/* A hang is a failure, not a stuck test run. */
	alarm(60);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	fflush(NULL);
	/* Fork before the device is opened: each side has its own. */
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(peer(sv[1]));
	}
	close(sv[1]);

	memset(&s, 0, sizeof(s));
	ret = rc_pair_open(&s, &pair_attr);
	if (ret > 0) {
		say("SKIP: err-idle: no ibemu device");
		ret = 77;
	} else if (ret < 0) {
		say("FAIL: err-idle: cannot open the device");
		ret = 1;
	} else {
		ret = requester(&s, sv[0], pid);
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	close(sv[0]);
	rc_pair_close(&s);
	return ret;
}
