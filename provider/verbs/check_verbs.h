/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's checks at the verbs face (check_verbs.c;
 * emulator/base/check.h reports): two threads inside ibv_poll_cq on one
 * CQ, or inside ibv_post_send on one QP, at once, where no thread domain
 * was asked for; a UD send through an address handle of another PD.
 */
#ifndef IBEMU_CHECK_VERBS_H
#define IBEMU_CHECK_VERBS_H

#include <infiniband/verbs.h>

/* ibv_poll_cq and ibv_post_send as ibemu_poll_cq and ibemu_post_send do
 * them, with the checks around; called only while checking is on. */
int check_verbs_poll_cq(struct ibv_cq *ibcq, int num_entries,
			struct ibv_wc *wc);
int check_verbs_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
			  struct ibv_send_wr **bad_wr);

#endif /* IBEMU_CHECK_VERBS_H */
