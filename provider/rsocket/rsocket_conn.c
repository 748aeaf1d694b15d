// SPDX-License-Identifier: MIT
/*
 * rsocket connections (rsocket.c): set up over ibemu's RDMA CM face,
 * rconnect and raccept, and the CM events a connected rsocket takes in
 * as it makes progress (rs_progress) or waits (rs_wait).
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>

#include "cm.h"
#include "ibemu.h"
#include "log.h"
#include "rsocket.h"
#include "sockaddr.h"

/* rdma_resolve_addr/route's time limit, as librdmacm's rsockets. */
#define RS_RESOLVE_MS 2000

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
void rs_progress(struct rsock *rs)
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
nfds_t rs_pollfds(const struct rsock *rs, struct pollfd *p)
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
void rs_wait(struct rsock *rs, int timeout_ms)
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

/* ---- rconnect and raccept ---- */

/* An address's length; one of an unknown family, all the room there is. */
static socklen_t rs_sa_len(const struct sockaddr *sa)
{
	socklen_t n = sockaddr_len(sa);

	return n ? n : sizeof(struct sockaddr_storage);
}

void rs_sa_out(const struct sockaddr *sa, struct sockaddr *a,
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
