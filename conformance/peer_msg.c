// SPDX-License-Identifier: MIT
/*
 * Framing of the peer harness: the messages the two processes exchange on
 * their stream socketpair.
 *
 * A message is {type, length, payload}.  INFO carries struct cf_peer_info,
 * SYNC and VAL coordinate the bodies, DONE ends a side's body and carries
 * its failure report (see peer_check.c).  Every read waits until a
 * deadline; a write fails only when the peer is gone.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "peer_int.h"

enum cf_msg_type {
	CF_MSG_INFO = 1,
	CF_MSG_SYNC = 2,
	CF_MSG_VAL = 3,
	CF_MSG_DONE = 4,
};

struct cf_msg_hdr {
	uint32_t type;
	uint32_t len;
};

int cf_fd_wait(int fd, short events, long long deadline)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	long long left;
	int ret;

	for (;;) {
		left = deadline - cf_now_ms();
		if (left < 0)
			left = 0;
		ret = poll(&pfd, 1, (int)left);
		if (ret > 0)
			return 0;
		if (ret == 0 || errno != EINTR)
			return -1;
	}
}

/* Send all len bytes; 0, or -1 when the peer is gone. */
static int cf_sock_write(int fd, const void *buf, size_t len)
{
	const uint8_t *b = buf;
	ssize_t n;

	while (len) {
		n = send(fd, b, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Read all len bytes by deadline; 0, or -1 on timeout, EOF or error. */
static int cf_sock_read(int fd, void *buf, size_t len, long long deadline)
{
	uint8_t *b = buf;
	ssize_t n = 0;

	for (; len; b += n, len -= (size_t)n) {
		if (cf_fd_wait(fd, POLLIN, deadline))
			return -1;
		n = read(fd, b, len);
		if (n < 0 && errno == EINTR)
			n = 0;
		else if (n <= 0)
			return -1;
	}
	return 0;
}

static int cf_msg_send(struct cf_ep *ep, uint32_t type, const void *data,
		       uint32_t len)
{
	struct cf_msg_hdr h = { .type = type, .len = len };

	if (cf_sock_write(ep->sock, &h, sizeof(h)))
		return -1;
	return len ? cf_sock_write(ep->sock, data, len) : 0;
}

/* Read the payload of the peer's DONE into ep->peer_done; 0 or -1. */
static int cf_msg_read_done(struct cf_ep *ep, uint32_t len,
			    long long deadline)
{
	char *rep = malloc(len + 1);

	if (!rep || cf_sock_read(ep->sock, rep, len, deadline)) {
		free(rep);
		return -1;
	}
	rep[len] = 0;
	ep->peer_done = rep;
	ep->peer_done_len = len;
	ep->got_peer_done = true;
	return 0;
}

/* Read and drop len bytes of a message nobody awaits; 0 or -1. */
static int cf_msg_skip(struct cf_ep *ep, uint32_t len, long long deadline)
{
	char skip[256];
	uint32_t n;

	for (; len; len -= n) {
		n = len < sizeof(skip) ? len : sizeof(skip);
		if (cf_sock_read(ep->sock, skip, n, deadline))
			return -1;
	}
	return 0;
}

/*
 * Receive the next message, which must be of type want.  A DONE that
 * arrives instead (the peer gave up) is kept for the verdict.  Returns the
 * payload length, or -1 (a failure of ep).
 */
static int cf_msg_recv(struct cf_ep *ep, uint32_t want, void *data,
		       uint32_t max, long long deadline, const char *what)
{
	const char *side = cf_side_name(ep);
	struct cf_msg_hdr h;

	if (ep->got_peer_done) {
		EP_CHECK(ep, 0, "%s: %s: the peer already finished its part",
			 side, what);
		return -1;
	}
	if (cf_sock_read(ep->sock, &h, sizeof(h), deadline)) {
		EP_CHECK(ep, 0, "%s: %s: no word from the peer in time "
			 "(timeout or peer gone)", side, what);
		return -1;
	}
	if (h.type == CF_MSG_DONE) {
		if (cf_msg_read_done(ep, h.len, deadline))
			return -1;
		EP_CHECK(ep, 0, "%s: %s: the peer finished its part early",
			 side, what);
		return -1;
	}
	if (h.type != want || h.len > max) {
		EP_CHECK(ep, 0, "%s: %s: protocol: message type %u len %u, "
			 "expected type %u", side, what, h.type, h.len, want);
		return -1;
	}
	if (cf_sock_read(ep->sock, data, h.len, deadline)) {
		EP_CHECK(ep, 0, "%s: %s: truncated message", side, what);
		return -1;
	}
	return (int)h.len;
}

/* Send a SYNC; a failure of ep when the peer is gone.  0 or -1. */
static int cf_msg_send_sync(struct cf_ep *ep)
{
	if (cf_msg_send(ep, CF_MSG_SYNC, NULL, 0)) {
		EP_CHECK(ep, 0, "%s: sync: peer gone", cf_side_name(ep));
		return -1;
	}
	return 0;
}

int cf_ep_sync(struct cf_ep *ep, int timeout_ms)
{
	if (cf_msg_send_sync(ep))
		return -1;
	return cf_msg_recv(ep, CF_MSG_SYNC, NULL, 0, cf_now_ms() + timeout_ms,
			   "sync") < 0 ? -1 : 0;
}

int cf_ep_sync_blocking(struct cf_ep *ep, int timeout_ms)
{
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	struct timeval none = { 0, 0 };
	struct cf_msg_hdr h;
	ssize_t n;

	if (cf_msg_send_sync(ep))
		return -1;
	setsockopt(ep->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* One plain blocking read(): no poll, no verb. */
	n = read(ep->sock, &h, sizeof(h));
	setsockopt(ep->sock, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	EP_REQUIRE(ep, n == (ssize_t)sizeof(h) && h.type == CF_MSG_SYNC &&
		   h.len == 0, "%s: blocking read for the peer's sync: got %zd "
		   "bytes (type %u), expected a SYNC", cf_side_name(ep), n,
		   n > 0 ? h.type : 0);
	return 0;
}

int cf_ep_send_val(struct cf_ep *ep, uint64_t val)
{
	if (cf_msg_send(ep, CF_MSG_VAL, &val, sizeof(val))) {
		EP_CHECK(ep, 0, "%s: send value: peer gone", cf_side_name(ep));
		return -1;
	}
	return 0;
}

int cf_ep_recv_val(struct cf_ep *ep, uint64_t *val_p, int timeout_ms)
{
	return cf_msg_recv(ep, CF_MSG_VAL, val_p, sizeof(*val_p),
			   cf_now_ms() + timeout_ms, "value") ==
				       sizeof(*val_p) ? 0 : -1;
}

int cf_ep_send_key(struct cf_ep *ep, uint64_t addr, uint32_t rkey)
{
	if (cf_ep_send_val(ep, addr) || cf_ep_send_val(ep, rkey))
		return -1;
	return 0;
}

int cf_ep_recv_key(struct cf_ep *ep, uint64_t *addr_p, uint32_t *rkey_p,
		   int timeout_ms)
{
	uint64_t rkey;

	if (cf_ep_recv_val(ep, addr_p, timeout_ms) ||
	    cf_ep_recv_val(ep, &rkey, timeout_ms))
		return -1;
	*rkey_p = (uint32_t)rkey;
	return 0;
}

int cf_ep_wait_peer_gone(struct cf_ep *ep, int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	char skip[256];
	ssize_t n;

	for (;;) {
		if (cf_fd_wait(ep->sock, POLLIN, deadline))
			return -1;
		n = read(ep->sock, skip, sizeof(skip));
		if (n == 0 || (n < 0 && errno != EINTR))
			return 0;
	}
}

int cf_ep_exchange(struct cf_ep *ep)
{
	int n;

	if (ep->exchanged)
		return 0;
	if (cf_msg_send(ep, CF_MSG_INFO, &ep->me, sizeof(ep->me))) {
		EP_CHECK(ep, 0, "%s: exchange: peer gone", cf_side_name(ep));
		return -1;
	}
	n = cf_msg_recv(ep, CF_MSG_INFO, &ep->peer, sizeof(ep->peer),
			cf_now_ms() + 10000, "exchange");
	if (n < 0)
		return -1;
	EP_REQUIRE(ep, n == sizeof(ep->peer) && ep->peer.nqp == ep->me.nqp,
		   "exchange: bad peer info");
	ep->exchanged = true;
	return 0;
}

void cf_ep_send_done(struct cf_ep *ep)
{
	cf_msg_send(ep, CF_MSG_DONE, ep->report, (uint32_t)ep->report_len);
}

int cf_ep_wait_done(struct cf_ep *ep, long long deadline)
{
	struct cf_msg_hdr h;

	while (!ep->got_peer_done) {
		if (cf_sock_read(ep->sock, &h, sizeof(h), deadline))
			return -1;
		if (h.type == CF_MSG_DONE)
			return cf_msg_read_done(ep, h.len, deadline);
		/* Drain what the peer sent and we did not await. */
		if (cf_msg_skip(ep, h.len, deadline))
			return -1;
	}
	return 0;
}
