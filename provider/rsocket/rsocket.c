// SPDX-License-Identifier: MIT
/*
 * rsockets (rsocket(7)), at librdmacm's symbol versions (libibemu.map):
 * the socket calls, the descriptor table, connection set-up and
 * tear-down over ibemu's RDMA CM face (rdmacm.c), rpoll and rselect.
 * The stream itself is rsocket_proto.c's.  librdmacm's own rsockets are
 * built on its internal functions and cannot run on top of the face.
 *
 * An rsocket is named by the descriptor of its own RDMA CM event
 * channel: a real descriptor, so numbers never collide with the
 * process's other files, and the one rpoll watches for CM events.  An
 * accepted rsocket's id is migrated to a channel of its own.  Stream
 * sockets only: SOCK_DGRAM fails with ESOCKTNOSUPPORT.
 *
 * Lock rule: tab_lock guards the table (rs_tab, rs_tab_len) and is held
 * only to look up, add or remove an entry; each rsocket's lock guards
 * the rsocket (rsocket.h).  A socket is not to be closed while another
 * thread uses it, as with any descriptor.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <infiniband/ib.h>

#include "cm.h"
#include "ibemu.h"
#include "log.h"
#include "rsocket.h"

/* rdma_resolve_addr/route's time limit, as librdmacm's rsockets. */
#define RS_RESOLVE_MS 2000
/* rclose waits this long at most for its last sends to be acknowledged. */
#define RS_CLOSE_MS 2000

/* ---- the descriptor table ---- */

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **rs_tab;
static int rs_tab_len;

static int tab_add(struct rsock *rs)
{
	int ret = 0;

	pthread_mutex_lock(&tab_lock);
	if (rs->fd >= rs_tab_len) {
		int n = rs_tab_len ? rs_tab_len : 64;
		struct rsock **t;

		while (n <= rs->fd)
			n *= 2;
		t = realloc(rs_tab, (size_t)n * sizeof(*t));
		if (!t) {
			ret = ENOMEM;
			goto out;
		}
		memset(t + rs_tab_len, 0,
		       (size_t)(n - rs_tab_len) * sizeof(*t));
		rs_tab = t;
		rs_tab_len = n;
	}
	rs_tab[rs->fd] = rs;
out:
	pthread_mutex_unlock(&tab_lock);
	return ret;
}

static struct rsock *tab_find(int s, bool remove)
{
	struct rsock *rs = NULL;

	pthread_mutex_lock(&tab_lock);
	if (s >= 0 && s < rs_tab_len) {
		rs = rs_tab[s];
		if (remove)
			rs_tab[s] = NULL;
	}
	pthread_mutex_unlock(&tab_lock);
	return rs;
}

/* The rsocket s, locked; NULL with errno EBADF if s is none. */
static struct rsock *rs_get(int s)
{
	struct rsock *rs = tab_find(s, false);

	if (!rs) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

static int rs_put_err(struct rsock *rs, int err)
{
	pthread_mutex_unlock(&rs->lock);
	errno = err;
	return -1;
}

static struct rsock *rs_alloc(void)
{
	struct rsock *rs = calloc(1, sizeof(*rs));

	if (!rs)
		return NULL;
	pthread_mutex_init(&rs->lock, NULL);
	rs->fd = -1;
	rs->rq_size = RS_QUEUE_DEFAULT;
	rs->sq_size = RS_QUEUE_DEFAULT;
	return rs;
}

static void rs_free(struct rsock *rs)
{
	rs_res_destroy(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- connection events ---- */

static void rs_fail(struct rsock *rs, int err)
{
	rs->state = RS_FAILED;
	rs->peer_gone = true;
	rs->err = err ? err : ECONNABORTED;
}

/* rs's QP and buffers, and p offering them in cd (the private data of
 * rconnect's REQ or raccept's REP); 0 or a positive errno. */
static int rs_conn_param(struct rsock *rs, struct rdma_conn_param *p,
			 struct rs_conn_data *cd)
{
	int ret = rs_res_create(rs);

	if (ret)
		return ret;
	rs_conn_data_make(rs, cd);
	memset(p, 0, sizeof(*p));
	p->private_data = cd;
	p->private_data_len = sizeof(*cd);
	p->retry_count = 7;
	p->rnr_retry_count = 7;
	return 0;
}

static int rs_do_connect(struct rsock *rs)
{
	struct rdma_conn_param p;
	struct rs_conn_data cd;
	int ret;

	ret = rs_conn_param(rs, &p, &cd);
	if (ret)
		return ret;
	if (rdma_connect(rs->id, &p))
		return errno ? errno : ECONNREFUSED;
	rs->state = RS_CONNECTING;
	return 0;
}

static int ev_err(const struct rdma_cm_event *ev, int dflt)
{
	return ev->status < 0 ? -ev->status : dflt;
}

/* One event of rs's own channel (not a listener's); acknowledged. */
static void rs_cm_event(struct rsock *rs, struct rdma_cm_event *ev)
{
	int ret;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rs->state != RS_ADDR_QUERY)
			break;
		if (rdma_resolve_route(rs->id, RS_RESOLVE_MS))
			rs_fail(rs, errno);
		else
			rs->state = RS_ROUTE_QUERY;
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		if (rs->state != RS_ROUTE_QUERY)
			break;
		ret = rs_do_connect(rs);
		if (ret)
			rs_fail(rs, ret);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		if (rs->state == RS_CONNECTING) {
			ret = rs_conn_data_take(
				rs, ev->param.conn.private_data,
				ev->param.conn.private_data_len);
			if (ret) {
				ibemu_log_err("rconnect: the peer is no ibemu "
					      "rsocket");
				rdma_disconnect(rs->id);
				rs_fail(rs, ECONNREFUSED);
				break;
			}
			rs->state = RS_CONNECTED;
		} else if (rs->state == RS_ACCEPTING) {
			rs->state = RS_CONNECTED;
		}
		if (rs->iomap_pending)
			rs_flush_iomaps(rs);
		break;
	case RDMA_CM_EVENT_REJECTED:
		rs_fail(rs, ECONNREFUSED);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
		rs_fail(rs, ev_err(ev, EHOSTUNREACH));
		break;
	case RDMA_CM_EVENT_UNREACHABLE:
		rs_fail(rs, ev_err(ev, ETIMEDOUT));
		break;
	case RDMA_CM_EVENT_CONNECT_ERROR:
		rs_fail(rs, ev_err(ev, ECONNREFUSED));
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		if (rs->state == RS_CONNECTED)
			rs->peer_gone = true;
		else if (rs->state != RS_FAILED)
			rs_fail(rs, ECONNRESET);
		break;
	default:
		break;
	}
	rdma_ack_cm_event(ev);
}

/* Every event there is on rs's channel; never sleeps. */
static void rs_cm_process(struct rsock *rs)
{
	struct rdma_cm_event *ev;

	if (rs->state == RS_LISTENING)
		return; /* raccept takes a listener's events */
	while (!rdma_get_cm_event(rs->ch, &ev))
		rs_cm_event(rs, ev);
}

/* Completions and CM events there are now.  What the peer sent before
 * it disconnected is in the CQ before DISCONNECTED is reported (its
 * rclose waits for its sends to be acknowledged): a look at the CQ after
 * the event finds all of it. */
static void rs_progress(struct rsock *rs)
{
	bool gone = rs->peer_gone;

	/* While completions come, a connection's CM events can wait: no
	 * read of the channel per call on the data path. */
	if (rs_poll_cq(rs) && rs->state == RS_CONNECTED)
		return;
	rs_cm_process(rs);
	if (!gone && rs->peer_gone)
		rs_poll_cq(rs);
}

/* The descriptors that signal news for rs, its CM channel and its
 * completion channel (once it has one), into p; how many (1 or 2). */
static nfds_t rs_pollfds(const struct rsock *rs, struct pollfd *p)
{
	nfds_t n = 0;

	p[n].fd = rs->ch->fd;
	p[n++].events = POLLIN;
	if (rs->cc) {
		p[n].fd = rs->cc->fd;
		p[n++].events = POLLIN;
	}
	return n;
}

/*
 * One step of a blocking call: the first arms the CQ (the caller then
 * looks again, so no completion slips between its look and the sleep);
 * the next sleeps, lock dropped, until the CQ or the channel has news.
 */
static void rs_wait(struct rsock *rs, int timeout_ms)
{
	struct pollfd p[2];
	nfds_t n;

	if (rs->cq && !rs->cq_armed) {
		rs_arm_cq(rs);
		return;
	}
	n = rs_pollfds(rs, p);
	pthread_mutex_unlock(&rs->lock);
	poll(p, n, timeout_ms);
	pthread_mutex_lock(&rs->lock);
	rs_take_cq_events(rs);
}

/* ---- sockets ---- */

IBEMU_EXPORT int rsocket(int domain, int type, int protocol)
{
	struct rsock *rs;
	int ret;

	if (domain != AF_INET && domain != AF_INET6 && domain != AF_IB) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	type &= ~(SOCK_NONBLOCK | SOCK_CLOEXEC);
	if (type != SOCK_STREAM) {
		ibemu_log_err("rsocket: only SOCK_STREAM rsockets are provided "
			      "by ibemu");
		errno = ESOCKTNOSUPPORT;
		return -1;
	}
	if (protocol && protocol != IPPROTO_TCP) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	ret = rs_verbs_init();
	if (ret) {
		errno = ret;
		return -1;
	}
	rs = rs_alloc();
	if (!rs) {
		errno = ENOMEM;
		return -1;
	}
	rs->ch = rdma_create_event_channel();
	if (!rs->ch) {
		ret = errno;
		goto err;
	}
	if (rdma_create_id(rs->ch, &rs->id, rs, RDMA_PS_TCP)) {
		ret = errno;
		rs->id = NULL;
		goto err;
	}
	ret = ibemu_set_nonblock(rs->ch->fd);
	if (ret)
		goto err;
	rs->fd = rs->ch->fd;
	ret = tab_add(rs);
	if (ret)
		goto err;
	return rs->fd;
err:
	rs_free(rs);
	errno = ret ? ret : ENOMEM;
	return -1;
}

IBEMU_EXPORT int rbind(int s, const struct sockaddr *a, socklen_t l)
{
	struct rsock *rs = rs_get(s);

	if (!rs)
		return -1;
	if (!a || l < sizeof(struct sockaddr_in))
		return rs_put_err(rs, EINVAL);
	if (rs->state != RS_IDLE)
		return rs_put_err(rs, EINVAL);
	if (rdma_bind_addr(rs->id, (struct sockaddr *)a))
		return rs_put_err(rs, errno);
	rs->state = RS_BOUND;
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

IBEMU_EXPORT int rlisten(int s, int backlog)
{
	struct rsock *rs = rs_get(s);

	if (!rs)
		return -1;
	if (rs->state == RS_LISTENING) {
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	if (rs->state != RS_BOUND && rs->state != RS_IDLE)
		return rs_put_err(rs, EINVAL);
	if (rdma_listen(rs->id, backlog))
		return rs_put_err(rs, errno);
	rs->state = RS_LISTENING;
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

/* An address's length; one of an unknown family, all the room there is. */
static socklen_t rs_sa_len(const struct sockaddr *sa)
{
	socklen_t n = emu_cm_addr_len(sa);

	return n ? n : sizeof(struct sockaddr_storage);
}

static void rs_sa_out(const struct sockaddr *sa, struct sockaddr *a,
		      socklen_t *l)
{
	socklen_t n = rs_sa_len(sa);

	if (!a || !l)
		return;
	memcpy(a, sa, *l < n ? *l : n);
	*l = n;
}

/* A connection request on listener l: a new rsocket, accepted; NULL
 * (the request refused) when it cannot be made. */
static struct rsock *rs_accept_one(struct rsock *l, struct rdma_cm_event *ev)
{
	struct rdma_cm_id *id = ev->id;
	struct rdma_conn_param p;
	struct rs_conn_data cd;
	struct rsock *rs;
	int ret = ENOMEM;

	rs = rs_alloc();
	if (!rs)
		goto refuse;
	rs->rq_size = l->rq_size;
	rs->sq_size = l->sq_size;
	rs->inline_size = l->inline_size;
	rs->iomap_size = l->iomap_size;
	rs->nodelay = l->nodelay;
	rs->keepalive = l->keepalive;
	rs->keepidle = l->keepidle;
	ret = rs_conn_data_take(rs, ev->param.conn.private_data,
				ev->param.conn.private_data_len);
	if (ret) {
		ibemu_log_err(
			"raccept: a request from no ibemu rsocket refused");
		goto refuse;
	}
	rdma_ack_cm_event(ev);
	ev = NULL;
	rs->ch = rdma_create_event_channel();
	if (!rs->ch || ibemu_set_nonblock(rs->ch->fd) ||
	    rdma_migrate_id(id, rs->ch)) {
		ret = errno ? errno : ENOMEM;
		goto refuse;
	}
	rs->id = id;
	id->context = rs;
	rs->fd = rs->ch->fd;
	ret = rs_conn_param(rs, &p, &cd);
	if (ret)
		goto refuse;
	if (rdma_accept(id, &p)) {
		ret = errno;
		goto refuse;
	}
	rs->state = RS_ACCEPTING;
	ret = tab_add(rs);
	if (ret) {
		rdma_disconnect(id);
		rs_free(rs);
		return NULL;
	}
	return rs;
refuse:
	/* The QP before the id, the id before its channel. */
	rdma_reject(id, NULL, 0);
	if (ev)
		rdma_ack_cm_event(ev);
	if (rs)
		rs_res_destroy(rs);
	rdma_destroy_id(id);
	if (rs) {
		rs->id = NULL;
		rs_free(rs);
	}
	errno = ret;
	return NULL;
}

IBEMU_EXPORT int raccept(int s, struct sockaddr *a, socklen_t *l)
{
	struct rsock *rs = rs_get(s), *nrs = NULL;
	struct rdma_cm_event *ev;

	if (!rs)
		return -1;
	if (rs->state != RS_LISTENING)
		return rs_put_err(rs, EINVAL);
	while (!nrs) {
		if (rdma_get_cm_event(rs->ch, &ev)) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return rs_put_err(rs, errno);
			if (rs->nonblock)
				return rs_put_err(rs, EAGAIN);
			rs_wait(rs, -1);
			continue;
		}
		if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
			rdma_ack_cm_event(ev);
			continue;
		}
		nrs = rs_accept_one(rs, ev);
	}
	pthread_mutex_unlock(&rs->lock);
	rs_sa_out(&nrs->id->route.addr.dst_addr, a, l);
	return nrs->fd;
}

IBEMU_EXPORT int rconnect(int s, const struct sockaddr *a, socklen_t l)
{
	struct rsock *rs = rs_get(s);
	int err;

	if (!rs)
		return -1;
	switch (rs->state) {
	case RS_IDLE:
	case RS_BOUND:
		if (!a || l < sizeof(struct sockaddr_in))
			return rs_put_err(rs, EINVAL);
		if (rdma_resolve_addr(rs->id, NULL, (struct sockaddr *)a,
				      RS_RESOLVE_MS))
			return rs_put_err(rs, errno);
		rs->state = RS_ADDR_QUERY;
		break;
	case RS_ADDR_QUERY:
	case RS_ROUTE_QUERY:
	case RS_CONNECTING:
		if (rs->nonblock)
			return rs_put_err(rs, EALREADY);
		break;
	case RS_CONNECTED:
	case RS_ACCEPTING:
		return rs_put_err(rs, EISCONN);
	case RS_LISTENING:
		return rs_put_err(rs, EINVAL);
	case RS_FAILED:
		err = rs->err;
		rs->err = 0;
		return rs_put_err(rs, err ? err : ECONNREFUSED);
	}
	for (;;) {
		rs_cm_process(rs);
		if (rs->state == RS_CONNECTED)
			break;
		if (rs->state == RS_FAILED) {
			err = rs->err;
			rs->err = 0;
			return rs_put_err(rs, err);
		}
		if (rs->nonblock)
			return rs_put_err(rs, EINPROGRESS);
		rs_wait(rs, -1);
	}
	pthread_mutex_unlock(&rs->lock);
	return 0;
}

/* rclose's orderly end: our FIN, and every send acknowledged (so what
 * we sent is at the peer before the disconnect), within RS_CLOSE_MS. */
static void rs_linger(struct rsock *rs)
{
	int64_t end = now_ms() + RS_CLOSE_MS, left;

	for (;;) {
		rs_progress(rs);
		if (rs->state != RS_CONNECTED || rs->peer_gone)
			return;
		if (!rs->wr_shut)
			rs_send_fin(rs);
		if (rs->wr_shut && !rs->sq_used)
			return;
		left = end - now_ms();
		if (left <= 0)
			return;
		rs_wait(rs, (int)left);
	}
}

/* A listener's requests not accepted: refused. */
static void rs_drain_listener(struct rsock *rs)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *id;

	while (!rdma_get_cm_event(rs->ch, &ev)) {
		id = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
		if (id)
			rdma_reject(id, NULL, 0);
		rdma_ack_cm_event(ev);
		if (id)
			rdma_destroy_id(id);
	}
}

IBEMU_EXPORT int rclose(int s)
{
	struct rsock *rs = tab_find(s, true);

	if (!rs) {
		errno = EBADF;
		return -1;
	}
	pthread_mutex_lock(&rs->lock);
	if (rs->state == RS_CONNECTED)
		rs_linger(rs);
	if (rs->state == RS_CONNECTED || rs->state == RS_ACCEPTING ||
	    rs->state == RS_CONNECTING)
		rdma_disconnect(rs->id);
	if (rs->state == RS_LISTENING)
		rs_drain_listener(rs);
	pthread_mutex_unlock(&rs->lock);
	rs_free(rs);
	return 0;
}

IBEMU_EXPORT int rshutdown(int s, int how)
{
	struct rsock *rs = rs_get(s);
	int64_t end;
	int ret = 0;

	if (!rs)
		return -1;
	if (how != SHUT_RD && how != SHUT_WR && how != SHUT_RDWR)
		return rs_put_err(rs, EINVAL);
	if (rs->state != RS_CONNECTED && rs->state != RS_ACCEPTING)
		return rs_put_err(rs, ENOTCONN);
	if (how != SHUT_WR)
		rs->rd_shut = true;
	if (how == SHUT_RD || rs->state != RS_CONNECTED) {
		pthread_mutex_unlock(&rs->lock);
		return 0;
	}
	/* The FIN needs only a send-queue slot, which the transport's
	 * acknowledgements free without the peer's help. */
	end = now_ms() + RS_CLOSE_MS;
	while (!rs->wr_shut && !rs->peer_gone) {
		rs_progress(rs);
		ret = rs_send_fin(rs);
		if (ret != EAGAIN)
			break;
		ret = 0;
		if (now_ms() >= end)
			break;
		rs_wait(rs, 10);
	}
	pthread_mutex_unlock(&rs->lock);
	if (ret && !rs->peer_gone) {
		errno = ret;
		return -1;
	}
	return 0;
}

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

/* ---- rpoll and rselect ---- */

/* rs's readiness for events, after taking in what there is. */
static short rs_revents(struct rsock *rs, short events)
{
	struct pollfd p;
	short r = 0;

	if (rs->state == RS_LISTENING) {
		p.fd = rs->ch->fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		return r & events;
	}
	rs_progress(rs);
	switch (rs->state) {
	case RS_ACCEPTING:
	case RS_CONNECTED:
		if (rs_has_data(rs) || rs->peer_fin || rs->rd_shut ||
		    rs->peer_gone)
			r |= POLLIN;
		if (rs->state == RS_CONNECTED && !rs->wr_shut &&
		    !rs->iomap_pending && rs_can_send(rs))
			r |= POLLOUT;
		/* Hung up only when nothing is left to read: what the peer
		 * sent before it went is still POLLIN, as on TCP. */
		if (rs->peer_gone && !rs_has_data(rs)) {
			r |= POLLHUP;
			if (rs->err)
				r |= POLLERR;
		}
		break;
	case RS_FAILED:
		r |= POLLOUT | POLLERR | POLLHUP;
		break;
	default:
		break;
	}
	return r & (events | POLLERR | POLLHUP);
}

static int poll_left(int timeout, int64_t end)
{
	int64_t left;

	if (timeout < 0)
		return -1;
	left = end - now_ms();
	return left > 0 ? (int)left : 0;
}

IBEMU_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd *p;
	struct rsock *rs;
	int64_t end = now_ms() + (timeout > 0 ? timeout : 0);
	nfds_t i, np;
	int ready, n, wait;

	if (nfds && !fds) {
		errno = EFAULT;
		return -1;
	}
	p = calloc(nfds * 2 + 1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (;;) {
		/* Arm, then look: nothing that comes after the look goes
		 * unseen by the poll below. */
		ready = 0;
		np = 0;
		for (i = 0; i < nfds; i++) {
			fds[i].revents = 0;
			rs = fds[i].fd >= 0 ? tab_find(fds[i].fd, false) : NULL;
			if (!rs) {
				p[np++] = fds[i];
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			rs_arm_cq(rs);
			fds[i].revents = rs_revents(rs, fds[i].events);
			np += rs_pollfds(rs, p + np);
			pthread_mutex_unlock(&rs->lock);
			if (fds[i].revents)
				ready++;
		}
		wait = ready ? 0 : poll_left(timeout, end);
		n = poll(p, np, wait);
		if (n < 0) {
			free(p);
			return ready ? ready : -1;
		}
		np = 0;
		for (i = 0; i < nfds; i++) {
			rs = fds[i].fd >= 0 ? tab_find(fds[i].fd, false) : NULL;
			if (!rs) {
				fds[i].revents = p[np++].revents;
				if (fds[i].revents)
					ready++;
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			np += rs->cc ? 2 : 1;
			rs_take_cq_events(rs);
			if (!fds[i].revents) {
				fds[i].revents = rs_revents(rs, fds[i].events);
				if (fds[i].revents)
					ready++;
			}
			pthread_mutex_unlock(&rs->lock);
		}
		if (ready || !wait) {
			free(p);
			return ready;
		}
	}
}

IBEMU_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x,
			 struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, ret, ms = -1;

	if (nfds < 0 || nfds > FD_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	if (timeout)
		ms = (int)(timeout->tv_sec * 1000 +
			   (timeout->tv_usec + 999) / 1000);
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (r && FD_ISSET(i, r))
			ev |= POLLIN;
		if (w && FD_ISSET(i, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(i, x))
			ev |= POLLPRI;
		if (!ev)
			continue;
		p[n].fd = i;
		p[n++].events = ev;
	}
	ret = rpoll(p, (nfds_t)n, ms);
	if (ret < 0) {
		free(p);
		return -1;
	}
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (x)
		FD_ZERO(x);
	ret = 0;
	for (i = 0; i < n; i++) {
		short rev = p[i].revents;

		if (r && (rev & (POLLIN | POLLHUP | POLLERR)) &&
		    (p[i].events & POLLIN)) {
			FD_SET(p[i].fd, r);
			ret++;
		}
		if (w && (rev & (POLLOUT | POLLERR)) &&
		    (p[i].events & POLLOUT)) {
			FD_SET(p[i].fd, w);
			ret++;
		}
		if (x && (rev & POLLPRI)) {
			FD_SET(p[i].fd, x);
			ret++;
		}
	}
	free(p);
	return ret;
}

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
