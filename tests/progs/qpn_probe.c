// SPDX-License-Identifier: MIT
/*
 * Opens the first device through the public verbs API, creates N UD QPs,
 * prints "GUID LID QPN..." on one line, then holds them until its stdin
 * closes, so that several probes started together overlap in time.
 */
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <infiniband/verbs.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4, i, num;
	struct ibv_device **list = ibv_get_device_list(&num);
	struct ibv_qp_init_attr qa = { 0 };
	struct ibv_port_attr pa;
	struct ibv_context *ctx;
	struct ibv_qp *qp[64];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	char c;

	if (!list || !num || n < 1 || n > 64)
		return 2;
	ctx = ibv_open_device(list[0]);
	if (!ctx || ibv_query_port(ctx, 1, &pa))
		return 3;
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 16, NULL, NULL, 0);
	if (!pd || !cq)
		return 4;
	qa.send_cq = cq;
	qa.recv_cq = cq;
	qa.qp_type = IBV_QPT_UD;
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 1;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	printf("%016llx %u", (unsigned long long)be64toh(
		       ibv_get_device_guid(list[0])), pa.lid);
	for (i = 0; i < n; i++) {
		qp[i] = ibv_create_qp(pd, &qa);
		if (!qp[i])
			return 5;
		printf(" %u", qp[i]->qp_num);
	}
	printf("\n");
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	for (i = 0; i < n; i++)
		ibv_destroy_qp(qp[i]);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
