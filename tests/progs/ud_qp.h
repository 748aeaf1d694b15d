/* SPDX-License-Identifier: MIT */
/*
 * UD QPs for the multicast tests (tests/progs/mcast_fanout.c,
 * tests/progs/mcast_nodes.c): one made ready to send and receive, and receives
 * posted into consecutive slots of a registered buffer.
 */
#ifndef IBEMU_TESTS_UD_QP_H
#define IBEMU_TESTS_UD_QP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* CLOCK_MONOTONIC in seconds. */
double now_s(void);

/* A UD QP on port 1 with qkey, moved through INIT, RTR and RTS (every WR
 * signaled; sends complete on scq, receives on rcq), or NULL (said). */
struct ibv_qp *ud_qp_open(struct ibv_pd *pd, struct ibv_cq *scq,
			  struct ibv_cq *rcq, uint32_t max_send_wr,
			  uint32_t max_recv_wr, uint32_t qkey);

/* Post receives first .. first + n - 1: receive j into base + j * slot
 * (slot bytes, under mr), wr_id j.  0, or -1 (said). */
int ud_post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, uint8_t *base,
		  size_t slot, size_t first, size_t n);

/* A UD SEND of len bytes at buf (under mr), wr_id k, from qp to a
 * multicast group (QPN 0xFFFFFF, IBA 10.5.2.3) through ah, with immediate
 * data k (network order) when with_imm; then its completion on cq,
 * waited for up to wait_s seconds.  0, or -1 (said). */
int ud_send_mcast(struct ibv_qp *qp, struct ibv_cq *cq, struct ibv_mr *mr,
		  void *buf, uint32_t len, struct ibv_ah *ah, uint32_t qkey,
		  uint32_t k, bool with_imm, double wait_s);

#endif
