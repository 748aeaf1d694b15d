// SPDX-License-Identifier: MIT
/*
 * The TCP transport's addresses and sockets (tcp_int.h): a node's
 * address as 16 bytes and as text, listening and connecting, and the
 * synchronous exchanges of control frames (HELLO, LOOKUP) with a
 * deadline.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sockaddr.h"
#include "tcp_int.h"

/* ---- addresses ---- */

bool tcp_same_node(const struct sockaddr_storage *a,
		   const struct sockaddr_storage *b)
{
	uint8_t x[16], y[16];

	sockaddr_addr16(a, x);
	sockaddr_addr16(b, y);
	return !memcmp(x, y, 16);
}

void tcp_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
}

const char *tcp_addr_str(const struct sockaddr_storage *ss,
			 char *buf, size_t len)
{
	const void *a = ss->ss_family == AF_INET
				? (const void *)&((const struct sockaddr_in *)(const void *)ss)->sin_addr
				: (const void *)&((const struct sockaddr_in6 *)(const void *)ss)->sin6_addr;

	if (!inet_ntop(ss->ss_family, a, buf, (socklen_t)len))
		snprintf(buf, len, "?");
	return buf;
}

/* ---- sockets ---- */

void tcp_sock_opts(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

/* A listening socket on at (its port ignored) and port, 0: any; the
 * listening fd or -errno.  Never on every address: the transport's
 * bind address is the node's fabric address or loopback (tp_tcp.c). */
int tcp_listen_on(const struct sockaddr_storage *at, uint16_t port,
		  bool reuse, uint16_t *port_p)
{
	struct sockaddr_storage a = *at, got;
	socklen_t len = sizeof(got);
	int fd, one = 1, ret;

	tcp_set_port(&a, port);
	fd = socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return -errno;
	if (a.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (reuse)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sockaddr_len((struct sockaddr *)&a)) ||
	    listen(fd, 128)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (port_p) {
		if (getsockname(fd, (struct sockaddr *)&got, &len)) {
			ret = -errno;
			close(fd);
			return ret;
		}
		*port_p = ntohs(got.ss_family == AF_INET
					? ((struct sockaddr_in *)&got)->sin_port
					: ((struct sockaddr_in6 *)&got)->sin6_port);
	}
	return fd;
}

/* Wait for fd to be ready for events until deadline (ms); 0 or errno. */
static int tcp_wait(int fd, short events, uint64_t deadline)
{
	struct pollfd p = { .fd = fd, .events = events };
	uint64_t now;
	int n;

	for (;;) {
		now = tcp_now_ms();
		if (now >= deadline)
			return ETIMEDOUT;
		n = poll(&p, 1, (int)(deadline - now));
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return errno;
	}
}

int tcp_connect(const struct sockaddr_storage *addr, uint64_t deadline,
		int *fd_p)
{
	const struct sockaddr *sa = (const struct sockaddr *)addr;
	int fd, err = 0;
	socklen_t len = sizeof(err);

	fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    0);
	if (fd < 0)
		return errno;
	if (connect(fd, sa, sockaddr_len(sa)) &&
	    errno != EINPROGRESS) {
		err = errno;
		close(fd);
		return err;
	}
	err = tcp_wait(fd, POLLOUT, deadline);
	if (!err && getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		err = errno;
	if (err) {
		close(fd);
		return err;
	}
	tcp_sock_opts(fd);
	*fd_p = fd;
	return 0;
}

static int tcp_send_all(int fd, const void *buf, size_t len, uint64_t deadline)
{
	const uint8_t *p = buf;
	ssize_t n;
	int err;

	while (len) {
		n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return errno;
		err = tcp_wait(fd, POLLOUT, deadline);
		if (err)
			return err;
	}
	return 0;
}

static int tcp_recv_all(int fd, void *buf, size_t len, uint64_t deadline)
{
	uint8_t *p = buf;
	ssize_t n;
	int err;

	while (len) {
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return ECONNRESET;
		if (errno != EAGAIN && errno != EINTR)
			return errno;
		err = tcp_wait(fd, POLLIN, deadline);
		if (err)
			return err;
	}
	return 0;
}

/* ---- frames ---- */

void tcp_frame_init(struct tp_tcp *t, struct tp_frame_hdr *f,
		    uint8_t type, uint32_t len, int32_t dst_slot)
{
	struct node *node = &t->e->hca->node;

	memset(f, 0, sizeof(*f));
	f->magic = htobe32(TP_FRAME_MAGIC);
	f->version = TP_FRAME_VERSION;
	f->type = type;
	f->len = htobe32(len);
	f->slid = htobe16(node->seg->lid);
	f->src_guid = htobe64(node->seg->port_guid);
	f->src_slot = htobe32((uint32_t)node->proc_slot);
	f->dst_slot = htobe32((uint32_t)dst_slot);
	f->src_token = htobe64(node->token);
}

/* Send one control frame (a body of at most TCP_CTRL_MAX bytes). */
int tcp_send_frame(struct tp_tcp *t, int fd, uint8_t type, const void *body,
		   uint32_t len, uint64_t deadline)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + TCP_CTRL_MAX];
	struct tp_frame_hdr f;

	if (len > TCP_CTRL_MAX)
		return EINVAL;
	tcp_frame_init(t, &f, type, len, -1);
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), body, len);
	return tcp_send_all(fd, buf, sizeof(f) + len, deadline);
}

/* Send one control frame and read the answer of the same size class:
 * the synchronous exchanges of HELLO and LOOKUP. */
int tcp_exchange(struct tp_tcp *t, int fd, uint8_t type,
		 const void *body, uint32_t len, uint8_t want,
		 struct tp_frame_hdr *rf, void *rbody, uint32_t rlen,
		 uint64_t deadline)
{
	int err;

	err = tcp_send_frame(t, fd, type, body, len, deadline);
	if (!err)
		err = tcp_recv_all(fd, rf, sizeof(*rf), deadline);
	if (err)
		return err;
	if (!tp_frame_check(rf) || rf->type != want ||
	    be32toh(rf->len) != rlen)
		return EPROTO;
	return tcp_recv_all(fd, rbody, rlen, deadline);
}
