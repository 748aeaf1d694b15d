// SPDX-License-Identifier: MIT
/*
 * The tutorial's laboratory (doc/tutorial/): two RC QPs of one process,
 * connected to each other, made to meet one rule of the transport each.
 *
 *   verbs_lab rnr [-t MIN_RNR_TIMER] [-w DELAY_MS] [-r RNR_RETRY] [-u]
 *	A SEND is posted before the responder has a receive: the responder
 *	answers RNR NAKs (IBA 9.7.5.2.8) until the receive is posted DELAY_MS
 *	later; the requester waits the responder's MIN_RNR_TIMER (IBA table
 *	45) between tries and gives up after RNR_RETRY of them (7: never).
 *	With -u the requester writes a new message into the SEND's buffer
 *	while it waits, before its completion (ibv_post_send(3) forbids it):
 *	what arrives is either message, as the HCA happened to read it.
 *
 *   verbs_lab access [-m rkey|noperm]
 *	An RDMA WRITE with a wrong R_Key (rkey), or to a region registered
 *	without IBV_ACCESS_REMOTE_WRITE (noperm), then a SEND behind it: the
 *	responder answers NAK remote access error (IBA 9.7.5.2.4, C9-96),
 *	the WRITE completes with IBV_WC_REM_ACCESS_ERR, the QP goes to the
 *	error state and the SEND is flushed (IBA 10.8.3.3).
 *
 * Every line says which QP did what; the last lines are the completions.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tests/progs/rc_pair.h"

#define LAB_BUF 4096
#define LAB_MSG 64
#define LAB_POLL_S 30 /* the longest a completion is waited for */

/* IBA table 45: the RNR NAK timer field, in hundredths of a millisecond. */
static const unsigned int rnr_timer_10us[32] = {
	65536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192,
	256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192,
	12288, 16384, 24576, 32768, 49152,
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One completion of cq, waited for at most LAB_POLL_S seconds. */
static int lab_poll(struct ibv_cq *cq, struct ibv_wc *wc)
{
	double end = now_s() + LAB_POLL_S;
	int n;

	while ((n = ibv_poll_cq(cq, 1, wc)) == 0 && now_s() < end)
		usleep(100);
	if (n != 1)
		fprintf(stderr, "verbs_lab: no completion within %d s\n",
			LAB_POLL_S);
	return n == 1 ? 0 : -1;
}

/* The responder's program at work for delay_ms, polling its CQ as a
 * receiver does (nothing can complete there yet). */
static void lab_idle(struct rc_side *s, int delay_ms)
{
	double end = now_s() + delay_ms / 1000.0;
	struct ibv_wc wc;

	while (now_s() < end) {
		if (ibv_poll_cq(s->cq, 1, &wc) == 1)
			printf("responder: unexpected completion of wr %llu\n",
			       (unsigned long long)wc.wr_id);
		usleep(100);
	}
}

static const char *state_name(enum ibv_qp_state s)
{
	static const char *const names[] = { "RESET", "INIT", "RTR", "RTS",
					     "SQD", "SQE", "ERR" };

	return (unsigned int)s < 7 ? names[s] : "?";
}

static enum ibv_qp_state qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr a;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return (enum ibv_qp_state)-1;
	return a.qp_state;
}

static int post_send(struct rc_side *s, uint64_t wr_id,
		     enum ibv_wr_opcode op, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, LAB_MSG, s->mr->lkey };
	struct ibv_send_wr wr, *bad;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = op;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp, &wr, &bad);
}

static int post_recv(struct rc_side *s, uint64_t wr_id)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, LAB_BUF, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

/* The statuses this laboratory meets, as the enum names them. */
static const char *status_name(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_SUCCESS:
		return "IBV_WC_SUCCESS";
	case IBV_WC_REM_ACCESS_ERR:
		return "IBV_WC_REM_ACCESS_ERR";
	case IBV_WC_WR_FLUSH_ERR:
		return "IBV_WC_WR_FLUSH_ERR";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "IBV_WC_RNR_RETRY_EXC_ERR";
	case IBV_WC_RETRY_EXC_ERR:
		return "IBV_WC_RETRY_EXC_ERR";
	default:
		return "another status";
	}
}

/* Wait for one completion and print it; the status, or -1. */
static int show_wc(const char *who, struct rc_side *s)
{
	struct ibv_wc wc;

	if (lab_poll(s->cq, &wc))
		return -1;
	printf("%s: completion of wr %llu: %s (%s)\n", who,
	       (unsigned long long)wc.wr_id, status_name(wc.status),
	       ibv_wc_status_str(wc.status));
	return wc.status;
}

/* The two sides, A the requester and B the responder, connected. */
static int lab_open(struct rc_side *a, struct rc_side *b, int b_access,
		    uint8_t rnr_retry)
{
	struct rc_pair_attr at = {
		.buf_len = LAB_BUF,
		.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		.cq_depth = 16,
		.max_send_wr = 8,
		.max_recv_wr = 8,
		.qp_access = IBV_ACCESS_REMOTE_WRITE,
		.path_mtu = IBV_MTU_1024,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = rnr_retry,
	};
	int ret;

	ret = rc_pair_open(a, &at);
	if (!ret) {
		at.mr_access = b_access;
		ret = rc_pair_open(b, &at);
	}
	if (ret) {
		fprintf(stderr, "verbs_lab: %s\n",
			ret > 0 ? "no RDMA device" : "cannot open the device");
		return -1;
	}
	if (rc_pair_connect(a, &b->me) || rc_pair_connect(b, &a->me)) {
		fprintf(stderr, "verbs_lab: cannot connect the QPs\n");
		return -1;
	}
	printf("requester: QP %u, responder: QP %u, both RTS\n", a->me.qpn,
	       b->me.qpn);
	return 0;
}

static int lab_rnr(int timer, int delay_ms, int rnr_retry, int reuse)
{
	struct rc_side a = { 0 }, b = { 0 };
	struct ibv_qp_attr qa = { .min_rnr_timer = (uint8_t)timer };
	int ret = -1, st;

	if (lab_open(&a, &b, IBV_ACCESS_LOCAL_WRITE, (uint8_t)rnr_retry))
		goto out;
	/* The responder's timer may change in RTS (IBA 11.2.1.2, table 91). */
	if (ibv_modify_qp(b.qp, &qa, IBV_QP_MIN_RNR_TIMER)) {
		fprintf(stderr, "verbs_lab: cannot set min_rnr_timer\n");
		goto out;
	}
	printf("responder: min_rnr_timer %d (%u.%02u ms), no receive posted\n",
	       timer, rnr_timer_10us[timer] / 100, rnr_timer_10us[timer] % 100);
	printf("requester: rnr_retry %d%s\n", rnr_retry,
	       rnr_retry == 7 ? " (retry for ever)" : "");
	strcpy(a.buf, "a message for a receive not yet posted");
	if (post_send(&a, 1, IBV_WR_SEND, 0, 0))
		goto out;
	printf("requester: SEND of %d bytes posted\n", LAB_MSG);
	if (reuse) {
		strcpy(a.buf, "the buffer written again before its completion");
		printf("requester: buffer of the SEND written again\n");
	}
	lab_idle(&b, delay_ms);
	if (post_recv(&b, 2))
		goto out;
	printf("responder: receive posted %d ms later\n", delay_ms);
	st = show_wc("requester", &a);
	if (st == IBV_WC_SUCCESS)
		st = show_wc("responder", &b);
	if (reuse && st == IBV_WC_SUCCESS)
		printf("responder: received \"%.*s\"\n", LAB_MSG - 1,
		       (char *)b.buf);
	ret = st < 0 ? -1 : 0;
out:
	rc_pair_close(&b);
	rc_pair_close(&a);
	return ret;
}

static int lab_access(const char *mode)
{
	int noperm = !strcmp(mode, "noperm");
	int b_access = IBV_ACCESS_LOCAL_WRITE |
		       (noperm ? 0 : IBV_ACCESS_REMOTE_WRITE);
	struct rc_side a = { 0 }, b = { 0 };
	uint32_t rkey;
	int ret = -1;

	if (!noperm && strcmp(mode, "rkey")) {
		fprintf(stderr, "verbs_lab: -m rkey or -m noperm\n");
		return -1;
	}
	if (lab_open(&a, &b, b_access, 0))
		goto out;
	/* A key that names no region of the responder: its index bits. */
	rkey = noperm ? b.me.rkey : b.me.rkey ^ 0x5a00;
	printf("responder: region 0x%llx rkey 0x%x, %s\n",
	       (unsigned long long)b.me.addr, b.me.rkey,
	       noperm ? "registered without IBV_ACCESS_REMOTE_WRITE"
		      : "registered with IBV_ACCESS_REMOTE_WRITE");
	if (post_send(&a, 1, IBV_WR_RDMA_WRITE, b.me.addr, rkey) ||
	    post_send(&a, 2, IBV_WR_SEND, 0, 0))
		goto out;
	printf("requester: RDMA WRITE (wr 1) with rkey 0x%x, then SEND (wr 2)\n",
	       rkey);
	if (show_wc("requester", &a) < 0 || show_wc("requester", &a) < 0)
		goto out;
	printf("requester: QP state %s\n", state_name(qp_state(a.qp)));
	ret = 0;
out:
	rc_pair_close(&b);
	rc_pair_close(&a);
	return ret;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: verbs_lab rnr [-t MIN_RNR_TIMER] [-w DELAY_MS] [-r RNR_RETRY] [-u]\n"
		"       verbs_lab access [-m rkey|noperm]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int timer = 14, delay_ms = 20, rnr_retry = 7, reuse = 0, c;
	const char *mode = "rkey";

	if (argc < 2)
		usage();
	optind = 2;
	while ((c = getopt(argc, argv, "t:w:r:m:u")) != -1) {
		switch (c) {
		case 'u':
			reuse = 1;
			break;
		case 't':
			timer = atoi(optarg);
			break;
		case 'w':
			delay_ms = atoi(optarg);
			break;
		case 'r':
			rnr_retry = atoi(optarg);
			break;
		case 'm':
			mode = optarg;
			break;
		default:
			usage();
		}
	}
	if (timer < 0 || timer > 31 || delay_ms < 0 || delay_ms > 10000 ||
	    rnr_retry < 0 || rnr_retry > 7)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!strcmp(argv[1], "rnr"))
		return lab_rnr(timer, delay_ms, rnr_retry, reuse) ? 1 : 0;
	if (!strcmp(argv[1], "access"))
		return lab_access(mode) ? 1 : 0;
	usage();
	return 2;
}
