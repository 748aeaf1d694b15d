// SPDX-License-Identifier: MIT
/*
 * A UD destination that does not drain its inbox must not hold up the
 * sender's other datagrams.
 *
 * Three processes, each with a UD QP: the sender S (this process), a
 * "dead" receiver D and a live receiver L.  D stops itself (SIGSTOP) once
 * its QP is ready, so nobody drains its inbox.  S posts more signaled
 * SENDs to D than D's inbox has slots, then one SEND with a recognisable
 * payload to L.  UD is unreliable (IBA 9.8): a fabric drops what a stuck
 * destination cannot take, and a send completes once it has left the
 * requester.  So every one of S's sends must complete successfully within
 * a bounded time, and L must receive its datagram (after the 40-byte GRH
 * area, IBA 11.4.1.2) with S's QPN as the source.
 *
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

#include "rc_pair.h" /* say(), rc_xfer() */

#define NDEAD 3000 /* SENDs to D: more than its inbox's 1024 slots */
#define NSENDS (NDEAD + 1)
#define MSG_LEN 64
#define GRH_LEN 40
#define NRECV 16 /* receives L posts */
#define QKEY 0x11111111u
#define WAIT_MS 5000
#define TAG "ud-dead-peer"

/* What a receiver tells the sender, and the sender tells L. */
struct ud_addr {
	uint32_t qpn;
	uint16_t lid;
	uint8_t global; /* no LID: address by GID */
	union ibv_gid gid;
};

/* L's verdict on the datagram it got, or did not get. */
struct ud_report {
	int32_t got;	    /* 1: a completion, 0: none in time */
	int32_t status;	    /* enum ibv_wc_status */
	int32_t opcode;	    /* enum ibv_wc_opcode */
	uint32_t byte_len;
	uint32_t src_qp;
	int32_t payload_ok; /* the bytes after the GRH area */
};

struct ud_side {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct ud_addr me;
	char *buf;
	size_t buf_len;
};

static const char payload_l[MSG_LEN] = "ud-dead-peer: the datagram to L";

/* Progress, for the alarm handler. */
static volatile sig_atomic_t stage;
static volatile sig_atomic_t n_posted, n_done;

static const char *const stage_name[] = {
	"setting up", "posting the SENDs", "waiting for completions",
	"tearing down",
};

static void put_num(char *p, size_t *n, long v)
{
	char d[24];
	int i = 0;

	if (v < 0) {
		p[(*n)++] = '-';
		v = -v;
	}
	do
		d[i++] = (char)('0' + v % 10);
	while ((v /= 10) && i < 23);
	while (i)
		p[(*n)++] = d[--i];
}

static void put_str(char *p, size_t *n, const char *s)
{
	while (*s)
		p[(*n)++] = *s++;
}

/* A hang anywhere is a failure with the progress so far. */
static void on_alarm(int sig)
{
	char m[256];
	size_t n = 0;

	(void)sig;
	put_str(m, &n, "FAIL: " TAG ": hung while ");
	put_str(m, &n, stage_name[stage]);
	put_str(m, &n, " (");
	put_num(m, &n, n_posted);
	put_str(m, &n, " posted, ");
	put_num(m, &n, n_done);
	put_str(m, &n, " of ");
	put_num(m, &n, NSENDS);
	put_str(m, &n, " sends completed)\n");
	if (write(2, m, n) < 0)
		_exit(1);
	_exit(1);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Device, PD, CQ, MR, one UD QP in RTS.  0, 1: no device, -1: error. */
static int ud_open(struct ud_side *s, size_t buf_len, int cq_depth,
		   uint32_t max_send, uint32_t max_recv,
		   int (*before_rtr)(struct ud_side *))
{
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	int ret;

	ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->cq, cq_depth, &pa);
	if (ret)
		return ret;
	s->buf = calloc(1, buf_len);
	if (!s->buf)
		return -1;
	s->buf_len = buf_len;
	s->mr = ibv_reg_mr(s->pd, s->buf, buf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = max_send;
	ia.cap.max_recv_wr = max_recv;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		return -1;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.pkey_index = 0;
	a.qkey = QKEY;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_QKEY))
		return -1;
	if (before_rtr && before_rtr(s))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		return -1;

	memset(&s->me, 0, sizeof(s->me));
	s->me.qpn = s->qp->qp_num;
	s->me.lid = pa.lid;
	s->me.global = pa.link_layer == IBV_LINK_LAYER_ETHERNET || !pa.lid;
	if (s->me.global && ibv_query_gid(s->ctx, 1, 0, &s->me.gid))
		return -1;
	return 0;
}

static void ud_close(struct ud_side *s)
{
	verbs_release(s->qp, s->mr, s->cq, s->pd, s->ctx, s->list);
	free(s->buf);
}

static struct ibv_ah *ud_ah(struct ud_side *s, const struct ud_addr *to)
{
	struct ibv_ah_attr a;

	memset(&a, 0, sizeof(a));
	a.dlid = to->lid;
	a.port_num = 1;
	if (to->global) {
		a.is_global = 1;
		a.grh.dgid = to->gid;
		a.grh.sgid_index = 0;
		a.grh.hop_limit = 1;
	}
	return ibv_create_ah(s->pd, &a);
}

/*
 * D: a ready UD QP, then stop.  It is never continued; the sender kills
 * it.  Exit 77 when there is no device.
 */
static int dead(int fd)
{
	struct ud_side s;
	int ret;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	ret = ud_open(&s, 4096, 16, 1, 1, NULL);
	if (ret)
		return ret > 0 ? 77 : 2;
	if (rc_xfer(fd, &s.me, sizeof(s.me), 1))
		return 3;
	raise(SIGSTOP);
	for (;;)
		pause();
}

/* L's receives: GRH area + payload each, posted before RTR. */
static int live_recvs(struct ud_side *s)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	int i;

	memset(s->buf, 0xee, s->buf_len);
	for (i = 0; i < NRECV; i++) {
		sge.addr = (uintptr_t)(s->buf + i * (GRH_LEN + MSG_LEN));
		sge.length = GRH_LEN + MSG_LEN;
		sge.lkey = s->mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = (uint64_t)i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(s->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

/*
 * L: receives posted, tell S the address, wait (bounded) for one
 * datagram and report on it.  Exit 77 when there is no device.
 */
static int live(int fd)
{
	struct ud_report r;
	struct ud_side s;
	struct ibv_wc wc;
	long long deadline;
	uint32_t s_qpn;
	int ret, n;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	ret = ud_open(&s, NRECV * (GRH_LEN + MSG_LEN), 2 * NRECV, 1, NRECV,
		      live_recvs);
	if (ret)
		return ret > 0 ? 77 : 2;
	if (rc_xfer(fd, &s.me, sizeof(s.me), 1) ||
	    rc_xfer(fd, &s_qpn, sizeof(s_qpn), 0))
		return 3;
	memset(&r, 0, sizeof(r));
	/* Longer than the sender waits: the sender judges the time. */
	deadline = now_ms() + 4 * WAIT_MS;
	while (now_ms() < deadline) {
		n = ibv_poll_cq(s.cq, 1, &wc);
		if (n < 0)
			return 4;
		if (n == 0) {
			usleep(200);
			continue;
		}
		r.got = 1;
		r.status = wc.status;
		r.opcode = wc.opcode;
		r.byte_len = wc.byte_len;
		r.src_qp = wc.src_qp;
		r.payload_ok =
			wc.status == IBV_WC_SUCCESS && wc.wr_id < NRECV &&
			!memcmp(s.buf + wc.wr_id * (GRH_LEN + MSG_LEN) +
					GRH_LEN,
				payload_l, MSG_LEN);
		break;
	}
	if (rc_xfer(fd, &r, sizeof(r), 1))
		return 3;
	ud_close(&s);
	return 0;
}

static pid_t spawn(int (*fn)(int), int *fd)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		_exit(fn(sv[1]));
	}
	close(sv[1]);
	*fd = sv[0];
	return pid;
}

static int post_ud(struct ud_side *s, struct ibv_ah *ah, uint32_t qpn,
		   size_t off, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	sge.addr = (uintptr_t)(s->buf + off);
	sge.length = MSG_LEN;
	sge.lkey = s->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = QKEY;
	return ibv_post_send(s->qp, &wr, &bad);
}

/* Read L's report if it is there; 1 when read, 0 not yet, -1 error. */
static int report_ready(int fd, struct ud_report *r, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int n = poll(&p, 1, ms);

	if (n < 0)
		return errno == EINTR ? 0 : -1;
	if (n == 0)
		return 0;
	return rc_xfer(fd, r, sizeof(*r), 0) ? -1 : 1;
}

static int sender(struct ud_side *s, int dfd, pid_t dpid, int lfd)
{
	struct ud_addr to_d, to_l;
	struct ibv_ah *ah_d = NULL, *ah_l = NULL;
	struct ibv_wc wc[64];
	struct ud_report r;
	long long start, deadline, t_done = -1;
	int i, n, got = 0, have_r = 0, status, ret = 1, bad_wc = 0;

	if (rc_xfer(dfd, &to_d, sizeof(to_d), 0)) {
		say("FAIL: " TAG ": D did not send its QPN/LID");
		return 1;
	}
	if (waitpid(dpid, &status, WUNTRACED) != dpid || !WIFSTOPPED(status)) {
		say("FAIL: " TAG ": D did not stop");
		return 1;
	}
	if (rc_xfer(lfd, &to_l, sizeof(to_l), 0) ||
	    rc_xfer(lfd, &s->me.qpn, sizeof(s->me.qpn), 1)) {
		say("FAIL: " TAG ": no QPN/LID exchange with L");
		return 1;
	}
	ah_d = ud_ah(s, &to_d);
	ah_l = ud_ah(s, &to_l);
	if (!ah_d || !ah_l) {
		say("FAIL: " TAG ": ibv_create_ah");
		goto out;
	}
	memset(s->buf, 0x5a, MSG_LEN);
	memcpy(s->buf + MSG_LEN, payload_l, MSG_LEN);

	stage = 1;
	start = now_ms();
	for (i = 0; i < NDEAD; i++) {
		if (post_ud(s, ah_d, to_d.qpn, 0, (uint64_t)i)) {
			say("FAIL: " TAG ": post_send %d of %d to D", i,
			    NDEAD);
			goto out;
		}
		n_posted = i + 1;
	}
	if (post_ud(s, ah_l, to_l.qpn, MSG_LEN, NDEAD)) {
		say("FAIL: " TAG ": post_send to L after %d to D", NDEAD);
		goto out;
	}
	n_posted = NSENDS;

	/* UD completes once sent: all of them, in order, and L's datagram
	 * arrives, both within WAIT_MS. */
	stage = 2;
	deadline = start + WAIT_MS;
	while (now_ms() < deadline && (got < NSENDS || !have_r)) {
		n = ibv_poll_cq(s->cq, 64, wc);
		if (n < 0) {
			say("FAIL: " TAG ": poll_cq %d", n);
			goto out;
		}
		for (i = 0; i < n; i++, got++) {
			if (!bad_wc && (wc[i].status != IBV_WC_SUCCESS ||
					wc[i].opcode != IBV_WC_SEND ||
					wc[i].wr_id != (uint64_t)got)) {
				say("FAIL: " TAG ": send completion %d: "
				    "wr_id %llu status %s opcode %d, "
				    "expected wr_id %d %s",
				    got, (unsigned long long)wc[i].wr_id,
				    ibv_wc_status_str(wc[i].status),
				    (int)wc[i].opcode, got,
				    ibv_wc_status_str(IBV_WC_SUCCESS));
				bad_wc = 1;
			}
		}
		n_done = got;
		if (got == NSENDS && t_done < 0)
			t_done = now_ms();
		if (!have_r) {
			have_r = report_ready(lfd, &r, n ? 0 : 1);
			if (have_r < 0) {
				say("FAIL: " TAG ": L went away");
				goto out;
			}
		}
	}
	n = ibv_poll_cq(s->cq, 64, wc);
	if (n > 0) {
		say("FAIL: " TAG ": %d completion(s) more than posted", n);
		bad_wc = 1;
	}

	ret = 0;
	if (got < NSENDS) {
		say("FAIL: " TAG ": %d of %d sends completed within %d ms "
		    "(%d of %d to the stopped D, %d of 1 to the live L): "
		    "the send queue is stuck behind D's full inbox",
		    got, NSENDS, WAIT_MS, got < NDEAD ? got : NDEAD, NDEAD,
		    got > NDEAD);
		ret = 1;
	} else {
		say(TAG ": all %d sends completed in %lld ms", NSENDS,
		    t_done - start);
	}
	if (bad_wc)
		ret = 1;
	if (!have_r) {
		say("FAIL: " TAG ": L received nothing within %d ms of the "
		    "first post",
		    WAIT_MS);
		ret = 1;
	} else if (!r.got) {
		say("FAIL: " TAG ": L reports no receive completion");
		ret = 1;
	} else if (r.status != IBV_WC_SUCCESS || r.opcode != IBV_WC_RECV ||
		   r.byte_len != GRH_LEN + MSG_LEN || r.src_qp != s->me.qpn ||
		   !r.payload_ok) {
		say("FAIL: " TAG ": L's receive: status %s opcode %d "
		    "byte_len %u src_qp 0x%x payload %s; expected %s, RECV, "
		    "%d, 0x%x (S), the payload after the %d-byte GRH area",
		    ibv_wc_status_str(r.status), r.opcode, r.byte_len,
		    r.src_qp, r.payload_ok ? "right" : "wrong",
		    ibv_wc_status_str(IBV_WC_SUCCESS), GRH_LEN + MSG_LEN,
		    s->me.qpn, GRH_LEN);
		ret = 1;
	} else {
		say(TAG ": L received the datagram from QPN 0x%x", r.src_qp);
	}
	if (!ret)
		printf("ok: " TAG ": %d UD sends to a stopped peer and one to "
		       "a live peer all complete; the live peer gets its "
		       "datagram\n",
		       NDEAD);
out:
	stage = 3;
	/* Kill the peers before the QP goes: its queue may still be stuck. */
	kill(dpid, SIGKILL);
	if (ah_d)
		ibv_destroy_ah(ah_d);
	if (ah_l)
		ibv_destroy_ah(ah_l);
	return ret;
}

static void reap(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
}

int main(void)
{
	struct sigaction sa;
	struct ud_side s;
	int dfd = -1, lfd = -1, ret;
	pid_t dpid, lpid = -1;

	/* A hang is a failure, not a stuck test run. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(30);

	/* Fork before the device is opened: each process has its own. */
	dpid = spawn(dead, &dfd);
	if (dpid > 0)
		lpid = spawn(live, &lfd);
	if (dpid < 0 || lpid < 0) {
		reap(dpid);
		return 1;
	}

	memset(&s, 0, sizeof(s));
	ret = ud_open(&s, 2 * MSG_LEN, 2 * NSENDS, NSENDS + 16, 1, NULL);
	if (ret > 0) {
		say("SKIP: " TAG ": no ibemu device");
		ret = 77;
	} else if (ret < 0) {
		say("FAIL: " TAG ": cannot open the device");
		ret = 1;
	} else {
		ret = sender(&s, dfd, dpid, lfd);
	}
	stage = 3;
	reap(dpid);
	reap(lpid);
	close(dfd);
	close(lfd);
	ud_close(&s);
	return ret;
}
