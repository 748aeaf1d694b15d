// SPDX-License-Identifier: MIT
/*
 * rsockets (rsocket(7)), as far as ibemu goes today: none.  librdmacm's
 * own rsockets are built on its internal functions, which know nothing
 * of the ids the face (rdmacm.c) makes, so they must not run on top of
 * it; these stand in for them at librdmacm's symbol versions
 * (libibemu.map).  rsocket() fails with ENOSYS, saying why, so no
 * rsocket exists and every call on one fails with EBADF, as for a
 * descriptor that is none; rpoll and rselect, which also take ordinary
 * descriptors, are poll and select.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <rdma/rsocket.h>

#include "ibemu.h"
#include "log.h"

static int rs_none(void)
{
	errno = EBADF;
	return -1;
}

IBEMU_EXPORT int rsocket(int domain, int type, int protocol)
{
	(void)domain;
	(void)type;
	(void)protocol;
	ibemu_log_err("rsocket: rsockets are not provided by ibemu yet");
	errno = ENOSYS;
	return -1;
}

IBEMU_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rlisten(int s, int backlog)
{
	(void)s, (void)backlog;
	return rs_none();
}

IBEMU_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rshutdown(int s, int how)
{
	(void)s, (void)how;
	return rs_none();
}

IBEMU_EXPORT int rclose(int s)
{
	(void)s;
	return rs_none();
}

IBEMU_EXPORT ssize_t rrecv(int s, void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return rs_none();
}

IBEMU_EXPORT ssize_t rrecvfrom(int s, void *b, size_t n, int f,
			       struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT ssize_t rrecvmsg(int s, struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return rs_none();
}

IBEMU_EXPORT ssize_t rsend(int s, const void *b, size_t n, int f)
{
	(void)s, (void)b, (void)n, (void)f;
	return rs_none();
}

IBEMU_EXPORT ssize_t rsendto(int s, const void *b, size_t n, int f,
			     const struct sockaddr *a, socklen_t l)
{
	(void)s, (void)b, (void)n, (void)f, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT ssize_t rsendmsg(int s, const struct msghdr *m, int f)
{
	(void)s, (void)m, (void)f;
	return rs_none();
}

IBEMU_EXPORT ssize_t rread(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return rs_none();
}

IBEMU_EXPORT ssize_t rreadv(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return rs_none();
}

IBEMU_EXPORT ssize_t rwrite(int s, const void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return rs_none();
}

IBEMU_EXPORT ssize_t rwritev(int s, const struct iovec *v, int n)
{
	(void)s, (void)v, (void)n;
	return rs_none();
}

IBEMU_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

IBEMU_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x,
			 struct timeval *timeout)
{
	return select(nfds, r, w, x, timeout);
}

IBEMU_EXPORT int rgetpeername(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rgetsockname(int s, struct sockaddr *a, socklen_t *l)
{
	(void)s, (void)a, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rsetsockopt(int s, int level, int name, const void *v,
			     socklen_t l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rgetsockopt(int s, int level, int name, void *v,
			     socklen_t *l)
{
	(void)s, (void)level, (void)name, (void)v, (void)l;
	return rs_none();
}

IBEMU_EXPORT int rfcntl(int s, int cmd, ...)
{
	(void)s, (void)cmd;
	return rs_none();
}

IBEMU_EXPORT off_t riomap(int s, void *b, size_t n, int prot, int flags,
			  off_t offset)
{
	(void)s, (void)b, (void)n, (void)prot, (void)flags, (void)offset;
	return rs_none();
}

IBEMU_EXPORT int riounmap(int s, void *b, size_t n)
{
	(void)s, (void)b, (void)n;
	return rs_none();
}

IBEMU_EXPORT size_t riowrite(int s, const void *b, size_t n, off_t offset,
			     int flags)
{
	(void)s, (void)b, (void)n, (void)offset, (void)flags;
	rs_none();
	return 0;
}
