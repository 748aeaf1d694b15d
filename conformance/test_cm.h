/* SPDX-License-Identifier: MIT */
/*
 * What the RDMA CM tests (test_cm.c) share with the CM multicast tests
 * (test_cm_mcast.c).
 */
#ifndef IBEMU_CONFORMANCE_TEST_CM_H
#define IBEMU_CONFORMANCE_TEST_CM_H

#include <stdbool.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>

#define CM_WAIT_MS 10000

/* The address under test (-a), with port; false if -a names none. */
bool cm_addr(struct sockaddr_storage *ss, int port);
/* The next event of ch within CM_WAIT_MS; NULL if none came. */
struct rdma_cm_event *cm_next(struct rdma_event_channel *ch);
/* The next event of ch, checked to be type for id (NULL: any id). */
struct rdma_cm_event *cm_expect(struct rdma_event_channel *ch,
				enum rdma_cm_event_type type,
				struct rdma_cm_id *id);
/* A channel for a test of the address under test; NULL after a skip
 * (no -a) or a failure message. */
struct rdma_event_channel *cm_channel(void);

/* The objects of one id's QP: a PD, one CQ for both queues, an MR over
 * buf. */
struct cm_side {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t buf[256];
};
/* s: a QP of type on id (4 WRs of 1 SGE each way, every send
 * signaled) and its objects; false after a failure message. */
bool cm_side_qp(struct cm_side *s, struct rdma_cm_id *id,
		enum ibv_qp_type type);
/* Destroy id's QP, if it has one, and s's objects. */
void cm_side_free(struct cm_side *s, struct rdma_cm_id *id);

#endif /* IBEMU_CONFORMANCE_TEST_CM_H */
