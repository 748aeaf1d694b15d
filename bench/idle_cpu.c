// SPDX-License-Identifier: MIT
/*
 * How much CPU an idle process with connected QPs burns, and what a QP
 * costs in memory: PAIRS pairs of RC QPs of this process connected to
 * each other (loopback, default 1), one message exchanged on each pair so
 * the engine has run, a receive posted, then nothing for SECONDS while
 * the progress thread is left alone.  Prints the process's CPU time over
 * that window (user + system, all threads) and the growth of its resident
 * memory per QP.
 *
 *   idle_cpu [SECONDS [PAIRS]]
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static double cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int connect_qp(struct ibv_qp *qp, uint32_t dqpn, uint16_t lid)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Resident memory of this process, in KiB (/proc/self/statm). */
static long rss_kib(void)
{
	long size = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");

	if (f) {
		if (fscanf(f, "%ld %ld", &size, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

/* One message over a connected pair, and a receive left posted. */
static int pair_exchange(struct ibv_qp *a, struct ibv_qp *b,
			 struct ibv_cq *cq, struct ibv_mr *mr)
{
	struct ibv_recv_wr rwr = { 0 }, *bad_r;
	struct ibv_send_wr swr = { 0 }, *bad_s;
	struct ibv_sge sge = {
		.addr = (uintptr_t)mr->addr, .length = 8, .lkey = mr->lkey,
	};
	struct ibv_wc wc;
	int n;

	rwr.sg_list = &sge;
	rwr.num_sge = 1;
	swr.sg_list = &sge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_recv(b, &rwr, &bad_r) || ibv_post_send(a, &swr, &bad_s))
		return -1;
	for (n = 0; n < 2;) {
		int got = ibv_poll_cq(cq, 1, &wc);

		if (got < 0 || (got && wc.status != IBV_WC_SUCCESS))
			return -1;
		n += got;
	}
	return ibv_post_recv(b, &rwr, &bad_r);
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 3;
	int pairs = argc > 2 ? atoi(argv[2]) : 1, i, made = 0;
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_qp_init_attr ia = { 0 };
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	struct ibv_qp **qps;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	static char buf[64];
	long rss0;
	double t0;

	if (pairs < 1 || seconds < 0)
		return 1;
	qps = calloc(2 * (size_t)pairs, sizeof(*qps));
	if (!qps || !list || !list[0] || !(ctx = ibv_open_device(list[0])) ||
	    ibv_query_port(ctx, 1, &pa))
		return 2;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	mr = pd ? ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) : NULL;
	if (!cq || !mr)
		return 3;
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	rss0 = rss_kib();
	for (i = 0; i < pairs; i++, made += 2) {
		struct ibv_qp *a = ibv_create_qp(pd, &ia);
		struct ibv_qp *b = a ? ibv_create_qp(pd, &ia) : NULL;

		qps[made] = a;
		qps[made + 1] = b;
		if (!a || !b) {
			fprintf(stderr, "idle_cpu: QP %d: %m\n", made + !!a);
			break;
		}
		if (connect_qp(a, b->qp_num, pa.lid) ||
		    connect_qp(b, a->qp_num, pa.lid) ||
		    pair_exchange(a, b, cq, mr))
			return 4;
	}
	if (made == 0)
		return 4;
	printf("%d connected QPs, resident memory +%ld KiB, %.1f KiB per QP; ",
	       made, rss_kib() - rss0, (double)(rss_kib() - rss0) / made);
	fflush(stdout);
	sleep(1); /* let the thread settle after the application's polls */
	t0 = cpu_s();
	sleep((unsigned int)seconds);
	printf("%.1f ms CPU in %d s idle (%.3f%%)\n", (cpu_s() - t0) * 1e3,
	       seconds, (cpu_s() - t0) * 100.0 / seconds);
	for (i = 0; i < 2 * pairs; i++)
		if (qps[i])
			ibv_destroy_qp(qps[i]);
	free(qps);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return made == 2 * pairs ? 0 : 5;
}
