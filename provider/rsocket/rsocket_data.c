// SPDX-License-Identifier: MIT
/*
 * The rsocket data calls (rsocket.c): rsend, rrecv and their kin
 * (rread, rwritev, rsendmsg...) over the stream of rsocket_proto.c, and
 * the iomaps riowrite writes into.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "ibemu.h"
#include "rsocket.h"

/* ---- data ---- */

static ssize_t iov_total(const struct iovec *iov, int iovcnt)
{
	size_t t = 0;
	int i;

	if (iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt && !iov))
		return -1;
	for (i = 0; i < iovcnt; i++) {
		if (iov[i].iov_len > SSIZE_MAX - t)
			return -1;
		t += iov[i].iov_len;
	}
	return (ssize_t)t;
}

/* The start of rs_sendv or rs_recvv: s's rsocket, locked, the length
 * of iov and whether the call may not block; NULL with errno EINVAL or
 * EBADF. */
static struct rsock *rs_xfer_begin(int s, const struct iovec *iov, int iovcnt,
				   int flags, size_t *total, bool *nonblock)
{
	ssize_t t = iov_total(iov, iovcnt);
	struct rsock *rs;

	if (t < 0) {
		errno = EINVAL;
		return NULL;
	}
	rs = rs_get(s);
	if (!rs)
		return NULL;
	*total = (size_t)t;
	*nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	return rs;
}

/* What there is taken in; then why rs can send no more: EPIPE after a
 * shutdown, the error of a broken connection; 0 while it may. */
static int rs_send_progress(struct rsock *rs)
{
	rs_progress(rs);
	if (rs->wr_shut)
		return EPIPE;
	if (rs->state == RS_FAILED || rs->peer_gone)
		return rs->err ? rs->err : ECONNRESET;
	return 0;
}

/* A transfer that cannot go on now: EAGAIN if it may not block, else 0
 * once rs_wait has waited. */
static int rs_xfer_wait(struct rsock *rs, bool nonblock)
{
	if (nonblock)
		return EAGAIN;
	rs_wait(rs, -1);
	return 0;
}

/* The end of a transfer: rs unlocked; the bytes moved, or -1 with errno
 * err when none were and err is nonzero. */
static ssize_t rs_xfer_end(struct rsock *rs, size_t done, int err)
{
	pthread_mutex_unlock(&rs->lock);
	if (done || !err)
		return (ssize_t)done;
	errno = err;
	return -1;
}

static ssize_t rs_sendv(int s, const struct iovec *iov, int iovcnt, int flags)
{
	size_t total, done = 0;
	struct rsock *rs;
	bool nonblock;
	int err = 0;

	rs = rs_xfer_begin(s, iov, iovcnt, flags, &total, &nonblock);
	if (!rs)
		return -1;
	for (;;) {
		err = rs_send_progress(rs);
		if (err)
			break;
		if (rs->state == RS_CONNECTED) {
			done += rs_send_some(rs, iov, iovcnt, done,
					     total - done);
			if (done == total)
				break;
		} else if (rs->state != RS_ACCEPTING &&
			   rs->state != RS_CONNECTING &&
			   rs->state != RS_ADDR_QUERY &&
			   rs->state != RS_ROUTE_QUERY) {
			err = ENOTCONN;
			break;
		}
		err = rs_xfer_wait(rs, nonblock);
		if (err)
			break;
	}
	return rs_xfer_end(rs, done, total ? err : 0);
}

static ssize_t rs_recvv(int s, const struct iovec *iov, int iovcnt, int flags)
{
	bool nonblock, waitall, peek = flags & MSG_PEEK;
	size_t total, done = 0, n;
	struct rsock *rs;
	int err = 0;

	rs = rs_xfer_begin(s, iov, iovcnt, flags, &total, &nonblock);
	if (!rs)
		return -1;
	waitall = (flags & MSG_WAITALL) && !nonblock && !peek;
	for (;;) {
		rs_progress(rs);
		if (rs->state == RS_IDLE || rs->state == RS_BOUND ||
		    rs->state == RS_LISTENING) {
			err = ENOTCONN;
			break;
		}
		n = rs_recv_some(rs, iov, iovcnt, done, total - done, peek);
		done += n;
		if (done == total || (done && !waitall))
			break;
		if (rs->rd_shut || (rs->peer_fin && !rs_has_data(rs)))
			break; /* end of stream */
		if (rs->state == RS_FAILED || rs->peer_gone) {
			if (rs->state == RS_FAILED || rs->err)
				err = rs->err ? rs->err : ECONNRESET;
			break;
		}
		err = rs_xfer_wait(rs, nonblock);
		if (err)
			break;
	}
	return rs_xfer_end(rs, done, err);
}

IBEMU_EXPORT ssize_t rrecv(int s, void *b, size_t n, int f)
{
	struct iovec v = {.iov_base = b, .iov_len = n};

	return rs_recvv(s, &v, 1, f);
}

static int rs_peer_out(int s, struct sockaddr *a, socklen_t *l)
{
	struct rsock *rs;

	if (!a || !l)
		return 0;
	rs = rs_get(s);
	if (!rs)
		return -1;
	rs_sa_out(&rs->id->route.addr.dst_addr, a, l);
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

IBEMU_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f,
			       struct sockaddr *a, socklen_t *l)
{
	ssize_t ret = rrecv(s, b, n, f);

	if (ret >= 0 && rs_peer_out(s, a, l))
		return -1;
	return ret;
}

IBEMU_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	ssize_t ret;

	if (!m) {
		errno = EINVAL;
		return -1;
	}
	ret = rs_recvv(s, m->msg_iov, (int)m->msg_iovlen, f);
	if (ret >= 0) {
		m->msg_flags = 0;
		m->msg_controllen = 0;
		if (m->msg_name && rs_peer_out(s, m->msg_name, &m->msg_namelen))
			return -1;
	}
	return ret;
}

IBEMU_EXPORT ssize_t rsend(int s, const void *b, size_t n, int f)
{
	struct iovec v = {.iov_base = (void *)b, .iov_len = n};

	return rs_sendv(s, &v, 1, f);
}

/* A stream socket is connected: the address is not used, as TCP's. */
IBEMU_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f,
			     const struct sockaddr *a, socklen_t l)
{
	(void)a, (void)l;
	return rsend(s, b, n, f);
}

IBEMU_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	if (!m) {
		errno = EINVAL;
		return -1;
	}
	return rs_sendv(s, m->msg_iov, (int)m->msg_iovlen, f);
}

IBEMU_EXPORT ssize_t rread(int s, void *b, size_t n)
{
	return rrecv(s, b, n, 0);
}

IBEMU_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n)
{
	return rs_recvv(s, v, n, 0);
}

IBEMU_EXPORT ssize_t rwrite(int s, const void *b, size_t n)
{
	return rsend(s, b, n, 0);
}

IBEMU_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n)
{
	return rs_sendv(s, v, n, 0);
}

/* ---- iomaps ---- */

IBEMU_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags,
			  off_t offset)
{
	struct rsock *rs = rs_get(s);
	struct rs_iomap *m = NULL;
	uint32_t i, limit;
	int access = IBV_ACCESS_LOCAL_WRITE;

	if (!rs)
		return -1;
	if (!b || !n || (prot & ~(PROT_WRITE | PROT_NONE)) || flags)
		return rs_put_err(rs, EINVAL);
	if (!rs->cq) /* no connection yet: no protection domain */
		return rs_put_err(rs, EINVAL);
	limit = rs->iomap_size ? rs->iomap_size : RS_IOMAP_MAX;
	for (i = 0; i < limit && !m; i++)
		if (!rs->lmap[i].used && !rs->lmap[i].announce)
			m = &rs->lmap[i];
	if (!m)
		return rs_put_err(rs, ENOMEM);
	if (prot & PROT_WRITE)
		access |= IBV_ACCESS_REMOTE_WRITE;
	m->mr = rs_reg_mr(rs->id->pd, b, n, access);
	if (!m->mr)
		return rs_put_err(rs, errno ? errno : ENOMEM);
	m->used = true;
	m->offset = offset == -1 ? (uint64_t)(uintptr_t)b : (uint64_t)offset;
	m->addr = (uintptr_t)b;
	m->len = n;
	m->rkey = m->mr->rkey;
	if (prot & PROT_WRITE) {
		m->writable = true;
		m->announce = true;
		rs->iomap_pending = true;
		rs_flush_iomaps(rs);
	}
	offset = (off_t)m->offset;
	pthread_mutex_unlock(&rs->lock);
	return offset;
}

IBEMU_EXPORT int riounmap(int s, void *b, size_t n)
{
	struct rsock *rs = rs_get(s);
	uint32_t i;

	if (!rs)
		return -1;
	for (i = 0; i < RS_IOMAP_MAX; i++) {
		struct rs_iomap *m = &rs->lmap[i];

		if (!m->used || m->addr != (uintptr_t)b || m->len != n)
			continue;
		rs_dereg_mr(m->mr);
		m->mr = NULL;
		m->used = false;
		if (m->writable) {
			/* the peer forgets it too (len 0) */
			m->writable = false;
			m->announce = true;
			rs->iomap_pending = true;
			rs_flush_iomaps(rs);
		}
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	return rs_put_err(rs, EINVAL);
}

IBEMU_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t offset,
			     int flags)
{
	struct rsock *rs = rs_get(s);
	const struct rs_iomap *m = NULL;
	uint64_t off = (uint64_t)offset;
	size_t done = 0;
	bool nonblock;
	uint32_t i;
	int err = 0;

	if (!rs)
		return (size_t)-1;
	if (!b && n) {
		rs_put_err(rs, EINVAL);
		return (size_t)-1;
	}
	nonblock = rs->nonblock || (flags & MSG_DONTWAIT);
	for (;;) {
		err = rs_send_progress(rs);
		if (err)
			break;
		if (rs->state != RS_CONNECTED) {
			err = ENOTCONN;
			break;
		}
		for (i = 0; i < RS_IOMAP_MAX && !m; i++) {
			const struct rs_iomap *r = &rs->rmap[i];

			if (r->used && off >= r->offset && n <= r->len &&
			    off - r->offset <= r->len - n)
				m = r;
		}
		if (!m) {
			err = EINVAL;
			break;
		}
		done += rs_write_some(rs, m, (const uint8_t *)b + done,
				      n - done, off + done);
		if (done == n)
			break;
		err = rs_xfer_wait(rs, nonblock);
		if (err)
			break;
	}
	return (size_t)rs_xfer_end(rs, done, n ? err : 0);
}
