// SPDX-License-Identifier: MIT
/*
 * UD QPs for the multicast tests (see ud_qp.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>
#include <time.h>

#include "rc_pair.h"
#include "ud_qp.h"

double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct ibv_qp *ud_qp_open(struct ibv_pd *pd, struct ibv_cq *scq,
			  struct ibv_cq *rcq, uint32_t max_send_wr,
			  uint32_t max_recv_wr, uint32_t qkey)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = { .max_send_wr = max_send_wr,
			 .max_recv_wr = max_recv_wr,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_UD,
		.sq_sig_all = 1,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = qkey };
	struct ibv_qp *qp = ibv_create_qp(pd, &ia);

	if (!qp) {
		say("create_qp: %s", strerror(errno));
		return NULL;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_QKEY))
		goto err;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto err;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto err;
	return qp;
err:
	say("modify_qp: %s", strerror(errno));
	ibv_destroy_qp(qp);
	return NULL;
}

int ud_post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *base,
		  size_t slot, size_t first, size_t n)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	size_t j;

	for (j = first; j < first + n; j++) {
		sge.addr = (uintptr_t)(base + j * slot);
		sge.length = (uint32_t)slot;
		sge.lkey = mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = j;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(qp, &wr, &bad)) {
			say("post_recv: %s", strerror(errno));
			return -1;
		}
	}
	return 0;
}

int ud_send_mcast(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		  void *buf, uint32_t len, struct ibv_ah *ah, uint32_t qkey,
		  uint32_t k, bool with_imm, double wait_s)
{
	struct ibv_sge sge = { (uintptr_t)buf, len, mr->lkey };
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	double end;
	int got;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = k;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
	wr.imm_data = htonl(k);
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = 0xffffff;
	wr.wr.ud.remote_qkey = qkey;
	if (ibv_post_send(qp, &wr, &bad)) {
		say("post_send: %s", strerror(errno));
		return -1;
	}
	end = now_s() + wait_s;
	while (!(got = ibv_poll_cq(cq, 1, &wc)) && now_s() < end)
		;
	if (got != 1 || wc.status != IBV_WC_SUCCESS) {
		say("send %u: %s", k,
		    got == 1 ? ibv_wc_status_str(wc.status) : "no completion");
		return -1;
	}
	return 0;
}
