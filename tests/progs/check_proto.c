// SPDX-License-Identifier: MIT
/*
 * Misuses of the verbs that the checking mode reports (queues, protocol,
 * threads), one per subcommand, each committed in a function named for
 * it, and for each a correct twin ("NAME-ok") that must run clean:
 *
 *   sq-overflow    a chain of max_send_wr + 1 WRITEs (ENOMEM)
 *   rq-overflow    a chain of max_recv_wr + 1 receives (ENOMEM)
 *   unsignaled     max_send_wr unsignaled WRITEs with sq_sig_all 0
 *   cq-overflow    three signaled WRITEs into a CQ of two, unpolled
 *   rnr            a SEND before the receive is posted
 *   remote-access  a WRITE to a region registered without remote write
 *   atomic-align   a FETCH_AND_ADD at an address 4 bytes off
 *   inline-size    IBV_SEND_INLINE past max_inline_data
 *   qkey           a UD SEND with a Q_Key other than the receiver's
 *   ud-ah-pd       a UD SEND through an AH of another PD
 *   threads-cq     two threads polling one CQ at once
 *   srq-empty      an SRQ drained by SENDs, no srq_limit armed (the twin
 *                  arms it, takes IBV_EVENT_SRQ_LIMIT_REACHED, posts again)
 *   threads-qp     two threads posting to one QP at once
 *
 * Two RC QPs of this process are connected to each other; the UD cases
 * use two UD QPs on one context.  Exit 0 when the program ran, whatever
 * ibemu said of it (the test reads the reports); 77: no device.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"
#include "ud_qp.h"

#define DEPTH 4
#define WAIT_S 5.0
#define NOINLINE __attribute__((noinline))

/* The misuses, named in the reports' stacks: exported (-rdynamic). */
int post_write_chain(int n);
int post_recv_chain(int n);
int post_unsignaled(bool ok);
int post_without_polling(int n);
int send_before_recv(void);
int write_to_region_without_remote_write(void);
int fetch_add_unaligned(uint64_t off);
int send_inline_too_big(uint32_t len);
int ud_send(uint32_t qkey);
int send_with_wrong_qkey(uint32_t qkey);
int send_through_ah_of_other_pd(void);
void *poll_from_two_threads(void *arg);
void *post_from_two_threads(void *arg);

static struct rc_side a, b;

/* A fresh QP on s in place of rc_pair_open's, with sig_all and
 * max_inline as given. */
static int requeue(struct rc_side *s, int sig_all, uint32_t max_inline)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = s->cq, .recv_cq = s->cq, .qp_type = IBV_QPT_RC,
		.sq_sig_all = sig_all,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1,
			 .max_inline_data = max_inline },
	};

	ibv_destroy_qp(s->qp);
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		return -1;
	s->me.qpn = s->qp->qp_num;
	return 0;
}

/* a and b, not connected yet; mr_access for both regions. */
static int pair_open(int mr_access, int cq_depth)
{
	struct rc_pair_attr at = {
		.buf_len = 4096, .mr_access = mr_access,
		.cq_depth = cq_depth, .max_send_wr = DEPTH,
		.max_recv_wr = DEPTH,
		.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
			     IBV_ACCESS_REMOTE_ATOMIC,
		.path_mtu = IBV_MTU_1024, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = 7,
	};
	int ret = rc_pair_open(&a, &at);

	return ret ? ret : rc_pair_open(&b, &at);
}

static int pair_connect(void)
{
	return rc_pair_connect(&a, &b.me) || rc_pair_connect(&b, &a.me) ? -1
									 : 0;
}

/* a and b, connected; mr_access for both regions. */
static int pair(int mr_access, int cq_depth, int sig_all, uint32_t inl)
{
	int ret = pair_open(mr_access, cq_depth);

	if (ret)
		return ret;
	if ((!sig_all || inl) &&
	    (requeue(&a, sig_all, inl) || requeue(&b, sig_all, inl)))
		return -1;
	return pair_connect();
}

static void unpair(void)
{
	rc_pair_close(&a);
	rc_pair_close(&b);
}

/* n completions from cq within WAIT_S; 0, or -1 (said). */
static int reap(struct ibv_cq *cq, int n)
{
	double end = now_s() + WAIT_S;
	struct ibv_wc wc;
	int got;

	while (n > 0 && now_s() < end) {
		got = ibv_poll_cq(cq, 1, &wc);
		if (got < 0)
			return -1;
		if (got && wc.status != IBV_WC_SUCCESS) {
			say("completion: %s", ibv_wc_status_str(wc.status));
			return -1;
		}
		n -= got;
	}
	if (n)
		say("%d completions missing", n);
	return n ? -1 : 0;
}

static void wr_write(struct ibv_send_wr *wr, struct ibv_sge *sge,
		     uint32_t len, int flags)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)a.buf;
	sge->length = len;
	sge->lkey = a.mr->lkey;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = IBV_WR_RDMA_WRITE;
	wr->send_flags = flags;
	wr->wr.rdma.remote_addr = b.me.addr;
	wr->wr.rdma.rkey = b.me.rkey;
}

static const int ALL = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;

/* A chain of n WRITEs; how many were posted. */
NOINLINE int post_write_chain(int n)
{
	struct ibv_send_wr wr[DEPTH + 1], *bad = NULL;
	struct ibv_sge sge[DEPTH + 1];
	int i;

	for (i = 0; i < n; i++) {
		wr_write(&wr[i], &sge[i], 8, IBV_SEND_SIGNALED);
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	if (!ibv_post_send(a.qp, wr, &bad))
		return n;
	return (int)(bad - wr);
}

static int sq_overflow(bool ok)
{
	int posted;

	if (pair(ALL, 16, 1, 0))
		return -1;
	posted = post_write_chain(ok ? DEPTH : DEPTH + 1);
	return reap(a.cq, posted);
}

NOINLINE int post_recv_chain(int n)
{
	struct ibv_recv_wr wr[DEPTH + 1], *bad = NULL;
	struct ibv_sge sge = { (uintptr_t)b.buf, 64, b.mr->lkey };
	int i;

	for (i = 0; i < n; i++) {
		memset(&wr[i], 0, sizeof(wr[i]));
		wr[i].sg_list = &sge;
		wr[i].num_sge = 1;
		wr[i].next = i + 1 < n ? &wr[i + 1] : NULL;
	}
	if (!ibv_post_recv(b.qp, wr, &bad))
		return n;
	return (int)(bad - wr);
}

static int rq_overflow(bool ok)
{
	if (pair(ALL, 16, 1, 0))
		return -1;
	post_recv_chain(ok ? DEPTH : DEPTH + 1);
	return 0;
}

NOINLINE int post_unsignaled(bool ok)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int i, sig = 0;

	for (i = 0; i < DEPTH; i++) {
		/* the twin signals every other one, and reaps it */
		wr_write(&wr, &sge, 8, ok && (i & 1) ? IBV_SEND_SIGNALED : 0);
		if (ibv_post_send(a.qp, &wr, &bad))
			return -1;
		if (wr.send_flags && reap(a.cq, 1))
			return -1;
		sig += !!wr.send_flags;
	}
	return sig;
}

static int unsignaled(bool ok)
{
	if (pair(ALL, 16, 0, 0))
		return -1;
	return post_unsignaled(ok) < 0 ? -1 : 0;
}

NOINLINE int post_without_polling(int n)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	int i;

	for (i = 0; i < n; i++) {
		wr_write(&wr, &sge, 8, IBV_SEND_SIGNALED);
		if (ibv_post_send(a.qp, &wr, &bad))
			return -1;
	}
	/* Let the completions land: a poll of no entries still drives. */
	usleep(100000);
	ibv_poll_cq(a.cq, 0, NULL);
	return 0;
}

static int cq_overflow(bool ok)
{
	if (pair(ALL, 2, 1, 0))
		return -1;
	if (post_without_polling(ok ? 2 : 3))
		return -1;
	return ok ? reap(a.cq, 2) : 0;
}

static void post_one_recv(void)
{
	post_recv_chain(1);
}

NOINLINE int send_before_recv(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	wr_write(&wr, &sge, 8, IBV_SEND_SIGNALED);
	wr.opcode = IBV_WR_SEND;
	return ibv_post_send(a.qp, &wr, &bad);
}

static int rnr(bool ok)
{
	struct ibv_wc wc;
	double end;

	if (pair(ALL, 16, 1, 0))
		return -1;
	if (ok)
		post_one_recv();
	if (send_before_recv())
		return -1;
	if (!ok) {
		/* drive until the responder has NAKed, then post */
		end = now_s() + 0.2;
		while (now_s() < end)
			ibv_poll_cq(b.cq, 1, &wc);
		post_one_recv();
	}
	return reap(a.cq, 1) || reap(b.cq, 1) ? -1 : 0;
}

NOINLINE int write_to_region_without_remote_write(void)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	wr_write(&wr, &sge, 64, IBV_SEND_SIGNALED);
	return ibv_post_send(a.qp, &wr, &bad);
}

static int remote_access(bool ok)
{
	struct ibv_wc wc;
	double end = now_s() + WAIT_S;
	int n = 0;

	if (pair(ok ? ALL : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ,
		 16, 1, 0))
		return -1;
	if (write_to_region_without_remote_write())
		return -1;
	while (!n && now_s() < end)
		n = ibv_poll_cq(a.cq, 1, &wc);
	return n == 1 && (ok ? wc.status == IBV_WC_SUCCESS
			     : wc.status == IBV_WC_REM_ACCESS_ERR) ? 0 : -1;
}

NOINLINE int fetch_add_unaligned(uint64_t off)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	wr_write(&wr, &sge, 8, IBV_SEND_SIGNALED);
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.wr.atomic.remote_addr = b.me.addr + off;
	wr.wr.atomic.rkey = b.me.rkey;
	wr.wr.atomic.compare_add = 1;
	return ibv_post_send(a.qp, &wr, &bad);
}

static int atomic_align(bool ok)
{
	struct ibv_wc wc;
	double end = now_s() + WAIT_S;
	int n = 0;

	if (pair(ALL, 16, 1, 0))
		return -1;
	if (fetch_add_unaligned(ok ? 8 : 4))
		return ok ? -1 : 0;
	while (!n && now_s() < end)
		n = ibv_poll_cq(a.cq, 1, &wc);
	return !ok || (n == 1 && wc.status == IBV_WC_SUCCESS) ? 0 : -1;
}

NOINLINE int send_inline_too_big(uint32_t len)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	wr_write(&wr, &sge, len, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
	return ibv_post_send(a.qp, &wr, &bad);
}

static int inline_size(bool ok)
{
	if (pair(ALL, 16, 1, 64))
		return -1;
	if (send_inline_too_big(ok ? 32 : 1024))
		return ok ? -1 : 0;
	return reap(a.cq, 1);
}

/* ---- UD ---- */

static struct ibv_device **ud_list;
static struct ibv_context *ud_ctx;
static struct ibv_pd *ud_pd, *other_pd;
static struct ibv_cq *ud_cq;
static struct ibv_mr *ud_mr;
static struct ibv_qp *qa, *qb;
static struct ibv_ah *ud_ah;
static uint8_t ud_buf[4096];

static int ud_open(bool ah_other_pd)
{
	struct ibv_port_attr pa;
	struct ibv_ah_attr av = { .port_num = 1 };
	int ret = verbs_open(&ud_list, &ud_ctx, &ud_pd, &ud_cq, 16, &pa);

	if (ret)
		return ret;
	other_pd = ibv_alloc_pd(ud_ctx);
	ud_mr = ibv_reg_mr(ud_pd, ud_buf, sizeof(ud_buf),
			   IBV_ACCESS_LOCAL_WRITE);
	qa = ud_qp_open(ud_pd, ud_cq, ud_cq, DEPTH, DEPTH, 0x1111);
	qb = ud_qp_open(ud_pd, ud_cq, ud_cq, DEPTH, DEPTH, 0x2222);
	av.dlid = pa.lid;
	if (!other_pd || !ud_mr || !qa || !qb)
		return -1;
	ud_ah = ibv_create_ah(ah_other_pd ? other_pd : ud_pd, &av);
	return ud_ah ? 0 : -1;
}

static void ud_close(void)
{
	if (ud_ah)
		ibv_destroy_ah(ud_ah);
	if (qa)
		ibv_destroy_qp(qa);
	if (other_pd)
		ibv_dealloc_pd(other_pd);
	verbs_release(qb, ud_mr, ud_cq, ud_pd, ud_ctx, ud_list);
}

NOINLINE int ud_send(uint32_t qkey)
{
	struct ibv_sge sge = { (uintptr_t)ud_buf, 32, ud_mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.ud = { .ah = ud_ah, .remote_qpn = qb->qp_num,
			   .remote_qkey = qkey },
	}, *bad;

	return ibv_post_send(qa, &wr, &bad);
}

NOINLINE int send_with_wrong_qkey(uint32_t qkey)
{
	return ud_send(qkey);
}

NOINLINE int send_through_ah_of_other_pd(void)
{
	return ud_send(0x2222);
}

static int ud_case(bool qkey_case, bool ok)
{
	int ret = ud_open(!qkey_case && !ok);

	if (ret)
		return ret;
	if (ud_post_recvs(qb, ud_mr, ud_buf + 1024, 256, 0, 1))
		return -1;
	if (qkey_case)
		ret = send_with_wrong_qkey(ok ? 0x2222 : 0x3333);
	else
		ret = send_through_ah_of_other_pd();
	if (ret)
		return -1;
	/* the send's completion, and the receive's when it is delivered */
	if (reap(ud_cq, 1))
		return -1;
	if (!qkey_case || ok)
		return reap(ud_cq, 1);
	usleep(100000);
	ibv_poll_cq(ud_cq, 0, NULL);
	/* the receive left posted is flushed by the destroy */
	return 0;
}

/* ---- threads ---- */

struct poller {
	struct ibv_cq *cq;
	pthread_barrier_t *go;
};

NOINLINE void *poll_from_two_threads(void *arg)
{
	struct poller *p = arg;
	double end;
	struct ibv_wc wc;
	long i;

	pthread_barrier_wait(p->go);
	end = now_s() + 0.5;
	for (i = 0; i < 10000000 && now_s() < end; i++)
		ibv_poll_cq(p->cq, 1, &wc);
	return NULL;
}

static int threads_cq(bool ok)
{
	pthread_barrier_t go;
	struct poller p1, p2;
	pthread_t t;

	if (pair(ALL, 16, 1, 0))
		return -1;
	pthread_barrier_init(&go, NULL, 2);
	p1 = (struct poller){ a.cq, &go };
	p2 = (struct poller){ ok ? b.cq : a.cq, &go };
	if (pthread_create(&t, NULL, poll_from_two_threads, &p1))
		return -1;
	poll_from_two_threads(&p2);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&go);
	return 0;
}

/* ---- SRQ ---- */

static struct ibv_srq *srq;

/* B's QP again, its receives from an SRQ of DEPTH. */
static int requeue_on_srq(void)
{
	struct ibv_srq_init_attr sa = {
		.attr = { .max_wr = DEPTH, .max_sge = 1 },
	};
	struct ibv_qp_init_attr ia = {
		.send_cq = b.cq, .recv_cq = b.cq, .qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = { .max_send_wr = DEPTH, .max_send_sge = 1 },
	};

	srq = ibv_create_srq(b.pd, &sa);
	if (!srq)
		return -1;
	ia.srq = srq;
	ibv_destroy_qp(b.qp);
	b.qp = ibv_create_qp(b.pd, &ia);
	if (!b.qp)
		return -1;
	b.me.qpn = b.qp->qp_num;
	return 0;
}

static int post_srq_recvs(int n)
{
	struct ibv_sge sge = { (uintptr_t)b.buf, 64, b.mr->lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	int i;

	for (i = 0; i < n; i++)
		if (ibv_post_srq_recv(srq, &wr, &bad))
			return -1;
	return 0;
}

/* ibv_modify_srq(3): IBV_EVENT_SRQ_LIMIT_REACHED once fewer than limit
 * receives are left; the event disarms it. */
static int arm_srq_limit(uint32_t limit)
{
	struct ibv_srq_attr attr = { .srq_limit = limit };

	return ibv_modify_srq(srq, &attr, IBV_SRQ_LIMIT) ? -1 : 0;
}

/* The SRQ's limit event, within WAIT_S; 0, or -1 (said). */
static int srq_limit_event(void)
{
	struct pollfd pfd = { .fd = b.ctx->async_fd, .events = POLLIN };
	double end = now_s() + WAIT_S;
	struct ibv_async_event ev;
	bool got = false;

	while (!got && now_s() < end) {
		if (poll(&pfd, 1, 100) != 1)
			continue;
		if (ibv_get_async_event(b.ctx, &ev))
			return -1;
		got = ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
		      ev.element.srq == srq;
		ibv_ack_async_event(&ev);
	}
	if (!got)
		say("no IBV_EVENT_SRQ_LIMIT_REACHED");
	return got ? 0 : -1;
}

/* DEPTH SENDs take the SRQ's DEPTH receives: the last leaves it empty.
 * The twin arms a limit of half first: told at the third, it posts
 * again; the fourth still empties the SRQ, the limit disarmed by then. */
static int srq_empty(bool ok)
{
	int i, ret;

	ret = pair_open(ALL, 16);
	if (ret)
		return ret;
	if (requeue_on_srq() || pair_connect() || post_srq_recvs(DEPTH))
		return -1;
	if (ok && arm_srq_limit(DEPTH / 2))
		return -1;
	for (i = 0; i < DEPTH; i++)
		if (send_before_recv())
			return -1;
	if (reap(a.cq, DEPTH) || reap(b.cq, DEPTH))
		return -1;
	if (ok && (srq_limit_event() || post_srq_recvs(DEPTH)))
		return -1;
	return 0;
}

static void srq_close(void)
{
	if (b.qp)
		ibv_destroy_qp(b.qp);
	b.qp = NULL;
	if (srq)
		ibv_destroy_srq(srq);
	unpair();
}

/* ---- threads posting ---- */

struct poster {
	struct rc_side *from, *to;
	pthread_barrier_t *go;
	pthread_mutex_t *poll_lock; /* the CQ's one poller at a time */
	atomic_int *inflight;	    /* WRs posted and not yet polled */
	bool failed;
};

/* Signaled 8-byte WRITEs from p->from for half a second, no more than
 * DEPTH outstanding on the QP, polled one thread at a time. */
NOINLINE void *post_from_two_threads(void *arg)
{
	struct poster *p = arg;
	struct ibv_sge sge = { (uintptr_t)p->from->buf, 8,
			       p->from->mr->lkey };
	struct ibv_send_wr wr = {
		.sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_RDMA_WRITE,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { p->to->me.addr, p->to->me.rkey },
	}, *bad;
	struct ibv_wc wc[DEPTH];
	double end;
	int n, got;

	pthread_barrier_wait(p->go);
	end = now_s() + 0.5;
	/* Posts for half a second, then drains for at most ten more. */
	while (!p->failed && now_s() < end + 10) {
		n = atomic_load(p->inflight);
		if (n < DEPTH && now_s() < end &&
		    atomic_compare_exchange_weak(p->inflight, &n, n + 1) &&
		    ibv_post_send(p->from->qp, &wr, &bad)) {
			say("ibv_post_send failed");
			p->failed = true;
		}
		pthread_mutex_lock(p->poll_lock);
		got = ibv_poll_cq(p->from->cq, DEPTH, wc);
		pthread_mutex_unlock(p->poll_lock);
		if (got < 0 || (got && wc[0].status != IBV_WC_SUCCESS))
			p->failed = true;
		if (got > 0)
			atomic_fetch_sub(p->inflight, got);
		if (now_s() >= end && !atomic_load(p->inflight))
			break;
	}
	return NULL;
}

/* The twin: the second thread posts to B's QP, not A's. */
static int threads_qp(bool ok)
{
	pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
	atomic_int in1 = 0, in2 = 0;
	pthread_barrier_t go;
	struct poster p1 = { &a, &b, &go, &poll_lock, &in1, false };
	struct poster p2 = { ok ? &b : &a, ok ? &a : &b, &go, &poll_lock,
			     ok ? &in2 : &in1, false };
	pthread_t t;

	if (pair(ALL, 16, 1, 0))
		return -1;
	pthread_barrier_init(&go, NULL, 2);
	if (pthread_create(&t, NULL, post_from_two_threads, &p1))
		return -1;
	post_from_two_threads(&p2);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&go);
	return p1.failed || p2.failed ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		"sq-overflow", "rq-overflow", "unsignaled", "cq-overflow",
		"rnr", "remote-access", "atomic-align", "inline-size",
		"qkey", "ud-ah-pd", "threads-cq", "srq-empty", "threads-qp",
	};
	const char *arg = argc > 1 ? argv[1] : "";
	size_t n, i;
	bool ok;
	int ret = -1;

	setvbuf(stdout, NULL, _IONBF, 0);
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		n = strlen(names[i]);
		if (!strncmp(arg, names[i], n) &&
		    (!arg[n] || !strcmp(arg + n, "-ok")))
			break;
	}
	if (i == sizeof(names) / sizeof(names[0])) {
		fprintf(stderr, "usage: check_proto CASE[-ok]\n");
		return 2;
	}
	ok = arg[strlen(names[i])] != 0;
	switch (i) {
	case 0: ret = sq_overflow(ok); break;
	case 1: ret = rq_overflow(ok); break;
	case 2: ret = unsignaled(ok); break;
	case 3: ret = cq_overflow(ok); break;
	case 4: ret = rnr(ok); break;
	case 5: ret = remote_access(ok); break;
	case 6: ret = atomic_align(ok); break;
	case 7: ret = inline_size(ok); break;
	case 8: ret = ud_case(true, ok); break;
	case 9: ret = ud_case(false, ok); break;
	case 10: ret = threads_cq(ok); break;
	case 11: ret = srq_empty(ok); break;
	case 12: ret = threads_qp(ok); break;
	}
	if (i == 8 || i == 9)
		ud_close();
	else if (i == 11)
		srq_close();
	else
		unpair();
	if (ret == 1)
		return 77;
	if (ret)
		say("check_proto %s: failed", arg);
	printf("check_proto %s: done\n", arg);
	return ret ? 1 : 0;
}
