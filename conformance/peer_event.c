// SPDX-License-Identifier: MIT
/*
 * Events: bounded waits for an asynchronous event on a context's
 * async_fd (manual 6.1) and, in the peer harness, for a CQ event on a
 * completion channel.
 */
#include <fcntl.h>
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

int cf_wait_async(struct ibv_context *ctx, enum ibv_event_type type,
		  int timeout_ms, struct ibv_async_event *ev_p, char *seen,
		  size_t seen_len)
{
	long long deadline = cf_now_ms() + timeout_ms;
	struct ibv_async_event ev;
	size_t used = 0;
	int flags;

	if (seen && seen_len)
		seen[0] = 0;
	/* Non-blocking, so that a readable fd whose event is gone cannot
	 * block the test past its deadline (ibv_get_async_event(3)). */
	flags = fcntl(ctx->async_fd, F_GETFL);
	if (flags < 0 ||
	    fcntl(ctx->async_fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -1;
	for (;;) {
		if (cf_fd_wait(ctx->async_fd, POLLIN, deadline))
			return -1;
		if (ibv_get_async_event(ctx, &ev)) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			return -1;
		}
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

int cf_ep_wait_async(struct cf_ep *ep, enum ibv_event_type type,
		     int timeout_ms, struct ibv_async_event *ev_p,
		     char *seen, size_t seen_len)
{
	return cf_wait_async(ep->ctx, type, timeout_ms, ev_p, seen, seen_len);
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
