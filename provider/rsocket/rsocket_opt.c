// SPDX-License-Identifier: MIT
/*
 * rsocket names and options (rsocket.c): rgetpeername, rgetsockname,
 * rsetsockopt, rgetsockopt and rfcntl.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "ibemu.h"
#include "rsocket.h"

/* ---- names and options ---- */

/* s's peer's address (rgetpeername), or its own (rgetsockname). */
static int rs_getname(int s, struct sockaddr *a, socklen_t *l, bool peer)
{
	struct rsock *rs = rs_get(s);

	if (!rs)
		return -1;
	if (!a || !l)
		return rs_put_err(rs, EFAULT);
	if (peer && rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)
		return rs_put_err(rs, ENOTCONN);
	rs_sa_out(peer ? &rs->id->route.addr.dst_addr
		       : &rs->id->route.addr.src_addr,
		  a, l);
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

IBEMU_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_getname(s, a, l, true);
}

IBEMU_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	return rs_getname(s, a, l, false);
}

static uint32_t rs_queue_clamp(uint64_t v)
{
	if (v < RS_QUEUE_MIN)
		return RS_QUEUE_MIN;
	return v > RS_QUEUE_MAX ? RS_QUEUE_MAX : (uint32_t)v;
}

/* SO_SNDBUF or SO_RCVBUF's bytes as queue slots of RS_MSG_SIZE. */
static uint32_t rs_buf_slots(int bytes)
{
	return rs_queue_clamp((uint64_t)(bytes > 0 ? bytes : 0) / RS_MSG_SIZE);
}

IBEMU_EXPORT int rsetsockopt(int s, int level, int name, const void *v,
			     socklen_t l)
{
	struct rsock *rs = rs_get(s);
	bool before = rs && !rs->cq; /* sizes count until the QP exists */
	int iv;

	if (!rs)
		return -1;
	if (level == SOL_RDMA && name == RDMA_ROUTE) {
		/* The route rdma_getaddrinfo found: the CM finds the same. */
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	if (!v || l < sizeof(int))
		return rs_put_err(rs, EINVAL);
	memcpy(&iv, v, sizeof(iv));
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_REUSEADDR:
			rs->reuseaddr = iv != 0;
			if (rdma_set_option(rs->id, RDMA_OPTION_ID,
					    RDMA_OPTION_ID_REUSEADDR,
					    &rs->reuseaddr,
					    sizeof(rs->reuseaddr)) &&
			    errno != ENOSYS)
				return rs_put_err(rs, errno);
			break;
		case SO_KEEPALIVE:
			rs->keepalive = iv != 0;
			break;
		case SO_SNDBUF:
			if (before)
				rs->sq_size = rs_buf_slots(iv);
			break;
		case SO_RCVBUF:
			if (before)
				rs->rq_size = rs_buf_slots(iv);
			break;
		case SO_LINGER:
			break;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			rs->nodelay = iv != 0;
			break;
		case TCP_KEEPIDLE:
			if (iv <= 0)
				return rs_put_err(rs, EINVAL);
			rs->keepidle = iv;
			break;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			if (before)
				rs->sq_size = rs_queue_clamp((uint32_t)iv);
			break;
		case RDMA_RQSIZE:
			if (before)
				rs->rq_size = rs_queue_clamp((uint32_t)iv);
			break;
		case RDMA_INLINE:
			rs->inline_size = (uint32_t)iv;
			break;
		case RDMA_IOMAPSIZE:
			if (before)
				rs->iomap_size = (uint32_t)iv > RS_IOMAP_MAX
							 ? RS_IOMAP_MAX
							 : (uint32_t)iv;
			break;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	default:
		return rs_put_err(rs, ENOPROTOOPT);
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

IBEMU_EXPORT int rgetsockopt(int s, int level, int name, void *v, socklen_t *l)
{
	struct rsock *rs = rs_get(s);
	int iv = 0;

	if (!rs)
		return -1;
	if (!v || !l || *l < sizeof(int))
		return rs_put_err(rs, EINVAL);
	switch (level) {
	case SOL_SOCKET:
		switch (name) {
		case SO_ERROR:
			/* A failed connect's reason, reported once. */
			iv = rs->err;
			if (rs->state == RS_FAILED || !rs->peer_gone)
				rs->err = 0;
			break;
		case SO_TYPE:
			iv = SOCK_STREAM;
			break;
		case SO_REUSEADDR:
			iv = rs->reuseaddr;
			break;
		case SO_KEEPALIVE:
			iv = rs->keepalive;
			break;
		case SO_SNDBUF:
			iv = (int)(rs->sq_size * RS_MSG_SIZE);
			break;
		case SO_RCVBUF:
			iv = (int)(rs->rq_size * RS_MSG_SIZE);
			break;
		case SO_LINGER:
			if (*l < sizeof(struct linger))
				return rs_put_err(rs, EINVAL);
			memset(v, 0, sizeof(struct linger));
			*l = sizeof(struct linger);
			pthread_mutex_unlock(&rs->lock);
			return 0;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	case IPPROTO_TCP:
		switch (name) {
		case TCP_NODELAY:
			iv = rs->nodelay;
			break;
		case TCP_KEEPIDLE:
			iv = rs->keepidle;
			break;
		case TCP_MAXSEG:
			iv = (int)RS_PAYLOAD_MAX;
			break;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	case SOL_RDMA:
		switch (name) {
		case RDMA_SQSIZE:
			iv = (int)rs->sq_size;
			break;
		case RDMA_RQSIZE:
			iv = (int)rs->rq_size;
			break;
		case RDMA_INLINE:
			iv = (int)rs->inline_size;
			break;
		case RDMA_IOMAPSIZE:
			iv = (int)rs->iomap_size;
			break;
		default:
			return rs_put_err(rs, ENOPROTOOPT);
		}
		break;
	default:
		return rs_put_err(rs, ENOPROTOOPT);
	}
	memcpy(v, &iv, sizeof(iv));
	*l = sizeof(iv);
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

IBEMU_EXPORT int rfcntl(int s, int cmd, ...)
{
	struct rsock *rs = rs_get(s);
	va_list ap;
	int ret = 0, arg;

	if (!rs)
		return -1;
	switch (cmd) {
	case F_GETFL:
		ret = O_RDWR | (rs->nonblock ? O_NONBLOCK : 0);
		break;
	case F_SETFL:
		va_start(ap, cmd);
		arg = va_arg(ap, int);
		va_end(ap);
		rs->nonblock = (arg & O_NONBLOCK) != 0;
		break;
	default:
		return rs_put_err(rs, EINVAL);
	}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}
