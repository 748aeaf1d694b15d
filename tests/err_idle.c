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
#include <stdarg.h>
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

#define NSENDS 2048 /* twice the slots of an inbox */
#define MSG_LEN 64
#define MAX_CSW 200    /* context switches in the quiet second */
#define MAX_CPU_MS 100 /* CPU time in the quiet second */

struct conn_info {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
};

struct side {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct conn_info me;
	char buf[MSG_LEN];
};

struct busy {
	long csw;    /* voluntary + involuntary context switches */
	long cpu_ms; /* user + system */
};

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int xfer(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (out)
			n = write(fd, (char *)buf + done, len - done);
		else
			n = read(fd, (char *)buf + done, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

/* Device, PD, CQ, MR and one RC QP.  1: no device, -1: error. */
static int side_open(struct side *s)
{
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;

	s->list = ibv_get_device_list(NULL);
	if (!s->list || !s->list[0])
		return 1;
	s->ctx = ibv_open_device(s->list[0]);
	if (!s->ctx || ibv_query_port(s->ctx, 1, &pa))
		return -1;
	s->pd = ibv_alloc_pd(s->ctx);
	s->cq = ibv_create_cq(s->ctx, 2 * NSENDS, NULL, NULL, 0);
	if (!s->pd || !s->cq)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = NSENDS;
	ia.cap.max_recv_wr = 16;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		return -1;
	s->me.qpn = s->qp->qp_num;
	s->me.lid = pa.lid;
	s->me.psn = (s->qp->qp_num * 7919u) & 0xffffff;
	return 0;
}

static void side_close(struct side *s)
{
	if (s->qp)
		ibv_destroy_qp(s->qp);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	if (s->ctx)
		ibv_close_device(s->ctx);
	if (s->list)
		ibv_free_device_list(s->list);
}

/*
 * INIT, RTR, RTS towards the other side, addressed by LID on the same
 * port (no GRH).  Timeout 0 is infinite (IBA 9.7.6.1.3): the stopped
 * peer never answers, and the QP must reach ERR only by ibv_modify_qp.
 */
static int side_connect(struct side *s, const struct conn_info *to)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = to->qpn;
	a.rq_psn = to->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = to->lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = s->me.psn;
	a.timeout = 0;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(s->qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

/*
 * The peer: connect, tell the parent, stop.  It is never continued; the
 * parent kills it.  Exit 77 when there is no device.
 */
static int peer(int fd)
{
	struct conn_info to;
	struct side s;
	char ready = 'r';
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	ret = side_open(&s);
	if (ret)
		return ret > 0 ? 77 : 2;
	if (xfer(fd, &s.me, sizeof(s.me), 1) || xfer(fd, &to, sizeof(to), 0) ||
	    side_connect(&s, &to) || xfer(fd, &ready, 1, 1))
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

static int requester(struct side *s, int fd, pid_t pid)
{
	struct ibv_send_wr wr, *bad;
	struct busy idle, blocked, quiet;
	struct ibv_qp_attr a;
	struct ibv_wc wc[64];
	struct conn_info to;
	struct ibv_sge sge;
	long long deadline;
	int i, n, got = 0, status;
	char ready;

	if (xfer(fd, &s->me, sizeof(s->me), 1) ||
	    xfer(fd, &to, sizeof(to), 0)) {
		say("FAIL: err-idle: the peer did not send its QPN/LID/PSN");
		return 1;
	}
	if (side_connect(s, &to)) {
		say("FAIL: err-idle: cannot connect the requester's QP");
		return 1;
	}
	if (xfer(fd, &ready, 1, 0)) {
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
	struct side s;
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
	ret = side_open(&s);
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
	side_close(&s);
	return ret;
}
