/* SPDX-License-Identifier: MIT */
/*
 * Internals of the peer harness (peer.h), shared by its files and not by
 * the tests: prototypes grouped by the file that defines them.
 */
#ifndef IBEMU_CONFORMANCE_PEER_INT_H
#define IBEMU_CONFORMANCE_PEER_INT_H

#include "peer.h"

/* peer_msg.c: framing on the socketpair. */
/* poll fd for events until deadline (cf_now_ms); 0 when ready, else -1. */
int cf_fd_wait(int fd, short events, long long deadline);
/* Send ep->me, receive ep->peer (once); 0 or -1 (a failure of ep). */
int cf_ep_exchange(struct cf_ep *ep);
/* End this side's part: DONE with ep->report. */
void cf_ep_send_done(struct cf_ep *ep);
/* Wait for the peer's DONE (it may have come early); 0 or -1. */
int cf_ep_wait_done(struct cf_ep *ep, long long deadline);

/* peer_setup.c: the verbs objects of one side. */
/* Everything ep->p asks for; 0, or -1 on a failure or a skip. */
int cf_ep_setup(struct cf_ep *ep);
void cf_ep_teardown(struct cf_ep *ep);

/* peer_check.c: verdicts. */
/* Assert each failure record of the child's report; their count. */
unsigned int cf_ep_report_assert(char *report);

#endif /* IBEMU_CONFORMANCE_PEER_INT_H */
