// SPDX-License-Identifier: MIT
/*
 * Events of the peer harness: bounded waits for an asynchronous event on
 * the device's async_fd and for a CQ event on a completion channel.
 */
#include <poll.h>
#include <stdio.h>

#include "peer_int.h"

/* Append the name of type to the list in seen (", " between names). */
static void cf_event_note(char *seen, size_t seen_len, size_t *used_p,
			  enum ibv_event_type type)
{
	size_t used = *used_p;

	if (!seen || used + 40 >= seen_len)
		return;
	*used_p += (size_t)snprintf(seen + used, seen_len - used, "%s%s",
				    used ? ", " : "",
				    ibv_event_type_str(type));
}

int cf_ep_wait_async(struct cf_ep *ep, enum ibv_event_type type,
		     int timeout_ms, struct ibv_async_event *ev_p,
		     char *seen, size_t seen_len)
{
	long long deadline = cf_now_ms() + timeout_ms;
	struct ibv_async_event ev;
	size_t used = 0;

	if (seen && seen_len)
		seen[0] = 0;
	for (;;) {
		if (cf_fd_wait(ep->ctx->async_fd, POLLIN, deadline))
			return -1;
		if (ibv_get_async_event(ep->ctx, &ev))
			return -1;
		if (ev.event_type == type) {
			if (ev_p)
				*ev_p = ev;
			ibv_ack_async_event(&ev);
			return 0;
		}
		cf_event_note(seen, seen_len, &used, ev.event_type);
		ibv_ack_async_event(&ev);
	}
}

int cf_ep_wait_cq_event(struct cf_ep *ep, int timeout_ms)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	if (cf_fd_wait(ep->ch->fd, POLLIN, cf_now_ms() + timeout_ms))
		return 0;
	if (ibv_get_cq_event(ep->ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	return cq == ep->cq ? 1 : -1;
}
