// SPDX-License-Identifier: MIT
/*
 * rsockets (rsocket(7)), at librdmacm's symbol versions (libibemu.map).
 * This file holds the descriptor table and a socket's life: rsocket,
 * rbind, rlisten, rshutdown and rclose.  The rest: rsocket_conn.c
 * connection set-up over ibemu's RDMA CM face (provider/rdmacm/) and
 * the CM events; rsocket_data.c the data calls and iomaps;
 * rsocket_poll.c rpoll and rselect; rsocket_opt.c names and options.
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
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>
#include <rdma/rsocket.h>
#include <infiniband/ib.h>

#include "clock.h"
#include "ibemu.h"
#include "log.h"
#include "rsocket.h"

/* rclose waits this long at most for its last sends to be acknowledged. */
#define RS_CLOSE_MS 2000

/* ---- the descriptor table ---- */

static pthread_mutex_t tab_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rsock **rs_tab;
static int rs_tab_len;

int tab_add(struct rsock *rs)
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

struct rsock *tab_find(int s, bool remove)
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
struct rsock *rs_get(int s)
{
	struct rsock *rs = tab_find(s, false);

	if (!rs) {
		errno = EBADF;
		return NULL;
	}
	pthread_mutex_lock(&rs->lock);
	return rs;
}

int rs_put_err(struct rsock *rs, int err)
{
	pthread_mutex_unlock(&rs->lock);
	errno = err;
	return -1;
}

struct rsock *rs_alloc(void)
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

void rs_free(struct rsock *rs)
{
	rs_res_destroy(rs);
	if (rs->id)
		rdma_destroy_id(rs->id);
	if (rs->ch)
		rdma_destroy_event_channel(rs->ch);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

int64_t now_ms(void)
{
	return (int64_t)(clock_now_ns() / 1000000);
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
