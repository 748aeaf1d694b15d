// SPDX-License-Identifier: MIT
/*
 * A process that holds the device open, as a long-running application
 * would: it opens the first device, registers a region, creates a CQ and
 * an RC QP in INIT, says "ready", and keeps all of it until STOPFILE
 * exists (at most SECS seconds, default 60).  tests/local/small-shm.sh starts
 * many of them in a small /dev/shm.
 *
 *   shm_holder STOPFILE [SECS]
 *
 * Exit: 0 after a clean teardown, 1 if a verb failed (the line says
 * which, with errno), 2 if STOPFILE never appeared.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int fail(const char *what)
{
	printf("fail: %s: %s\n", what, strerror(errno));
	return 1;
}

int main(int argc, char **argv)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE,
	};
	struct ibv_qp_init_attr qia = {
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 16,
			.max_recv_wr = 16,
			.max_send_sge = 1,
			.max_recv_sge = 1},
	};
	struct timespec nap = {.tv_sec = 0, .tv_nsec = 20 * 1000 * 1000};
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_mr *mr;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	static char buf[4096];
	long secs, i;
	int n;

	if (argc < 2) {
		fprintf(stderr, "usage: shm_holder STOPFILE [SECS]\n");
		return 2;
	}
	secs = argc > 2 ? strtol(argv[2], NULL, 0) : 60;
	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || n < 1)
		return fail("ibv_get_device_list");
	ctx = ibv_open_device(list[0]);
	if (!ctx)
		return fail("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		return fail("ibv_alloc_pd");
	mr = ibv_reg_mr(pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!mr)
		return fail("ibv_reg_mr");
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!cq)
		return fail("ibv_create_cq");
	qia.send_cq = cq;
	qia.recv_cq = cq;
	qp = ibv_create_qp(pd, &qia);
	if (!qp)
		return fail("ibv_create_qp");
	if (ibv_modify_qp(qp, &attr,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return fail("ibv_modify_qp");
	printf("ready qpn %u\n", qp->qp_num);
	for (i = 0; i < secs * 50 && access(argv[1], F_OK); i++)
		nanosleep(&nap, NULL);
	if (access(argv[1], F_OK)) {
		printf("fail: %s never appeared\n", argv[1]);
		return 2;
	}
	if (ibv_destroy_qp(qp) || ibv_destroy_cq(cq) || ibv_dereg_mr(mr) ||
	    ibv_dealloc_pd(pd) || ibv_close_device(ctx))
		return fail("teardown");
	ibv_free_device_list(list);
	printf("done\n");
	return 0;
}
