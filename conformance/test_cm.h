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

#endif /* IBEMU_CONFORMANCE_TEST_CM_H */
