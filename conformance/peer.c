// SPDX-License-Identifier: MIT
/*
 * The two-process harness of the RC suites (see peer.h).
 *
 * Socket protocol: framed messages {type, length, payload} on a stream
 * socketpair.  INFO carries struct cf_peer_info, SYNC and VAL coordinate
 * the bodies, DONE ends a side's body and carries its failures ("line\tfile
 * \tfunc\tmessage\n" records) so the parent can assert them in CUnit.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "peer.h"

enum {
	MSG_INFO = 1,
	MSG_SYNC = 2,
	MSG_VAL = 3,
	MSG_DONE = 4,
};

struct msg_hdr {
	uint32_t type;
	uint32_t len;
};

long long cf_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

const char *cf_side_name(const struct cf_ep *ep)
{
	return ep->side == CF_PARENT ? "parent" : "child";
}

void cf_peer_params_init(struct cf_peer_params *p)
{
	memset(p, 0, sizeof(*p));
	p->buf_len = 4u << 20;
	p->mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
	p->qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC;
	p->qp_type = IBV_QPT_RC;
	p->qkey = 0x11223344;
	p->nqp = 1;
	p->cq_size = 512;
	p->max_send_wr = 128;
	p->max_recv_wr = 128;
	p->max_sge = 3;
	p->max_inline = 0;
	p->max_rd_atomic = -1;
	p->max_dest_rd_atomic = -1;
	p->timeout = 14;	/* 4.096 us * 2^14 = 67 ms */
	p->retry_cnt = 7;
	p->rnr_retry = 7;	/* infinite */
	p->min_rnr_timer = 1;	/* 0.01 ms */
	p->sq_sig_all = true;
	p->connect = true;
	p->deadline_s = 60;
}

/* ---- verdicts ---- */

static void report_append(struct cf_ep *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void report_append(struct cf_ep *ep, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	size_t n;
	char *r;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (ep->report_len + n + 1 > 16384)
		return;
	r = realloc(ep->report, ep->report_len + n + 1);
	if (!r)
		return;
	memcpy(r + ep->report_len, line, n + 1);
	ep->report = r;
	ep->report_len += n;
}

int cf_ep_check(struct cf_ep *ep, int ok, unsigned int line, const char *file,
		const char *func, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ep->side == CF_PARENT && ok) {
		cf_check(1, line, file, func, "%s", "");
		return 1;
	}
	if (ok)
		return 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Tabs and newlines separate the report's fields. */
	for (char *c = msg; *c; c++)
		if (*c == '\t' || *c == '\n')
			*c = ' ';
	ep->nfail++;
	if (ep->side == CF_PARENT)
		cf_check(0, line, file, func, "[parent] %s", msg);
	else
		report_append(ep, "%u\t%s\t%s\t%s\n", line, file, func, msg);
	return 0;
}

void cf_ep_skip(struct cf_ep *ep, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	ep->skipped = true;
	if (ep->side != CF_PARENT)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cf_skip("%s", msg);
}

/* ---- the socket ---- */

static int wait_fd(int fd, short events, long long deadline)
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
		if (ret == 0)
			return -1;
		if (errno != EINTR)
			return -1;
	}
}

/*
 * Move all len bytes: send when wbuf is given, else read into rbuf, each
 * read waiting until deadline.  0, or -1 on timeout / EOF / error.
 */
static int sock_xfer(int fd, const void *wbuf, void *rbuf, size_t len,
		     long long deadline)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (wbuf) {
			n = send(fd, (const uint8_t *)wbuf + done, len - done,
				 MSG_NOSIGNAL);
		} else {
			if (wait_fd(fd, POLLIN, deadline))
				return -1;
			n = read(fd, (uint8_t *)rbuf + done, len - done);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static int sock_write(int fd, const void *buf, size_t len)
{
	return sock_xfer(fd, buf, NULL, len, 0);
}

static int sock_read(int fd, void *buf, size_t len, long long deadline)
{
	return sock_xfer(fd, NULL, buf, len, deadline);
}

static int msg_send(struct cf_ep *ep, uint32_t type, const void *data,
		    uint32_t len)
{
	struct msg_hdr h = { .type = type, .len = len };

	if (sock_write(ep->sock, &h, sizeof(h)))
		return -1;
	return len ? sock_write(ep->sock, data, len) : 0;
}

/*
 * Receive the next message, which must be of type want.  A DONE that
 * arrives instead (the peer gave up) is kept for the verdict.  Returns the
 * payload length, or -1.
 */
static int msg_recv(struct cf_ep *ep, uint32_t want, void *data,
		    uint32_t max, long long deadline, const char *what)
{
	struct msg_hdr h;
	char *extra;

	if (ep->got_peer_done) {
		EP_CHECK(ep, 0, "%s: %s: the peer already finished its part",
			 cf_side_name(ep), what);
		return -1;
	}
	if (sock_read(ep->sock, &h, sizeof(h), deadline)) {
		EP_CHECK(ep, 0, "%s: %s: no word from the peer in time "
			 "(timeout or peer gone)", cf_side_name(ep), what);
		return -1;
	}
	if (h.type == MSG_DONE) {
		extra = malloc(h.len + 1);
		if (!extra || sock_read(ep->sock, extra, h.len, deadline)) {
			free(extra);
			return -1;
		}
		extra[h.len] = 0;
		ep->peer_done = extra;
		ep->peer_done_len = h.len;
		ep->got_peer_done = true;
		EP_CHECK(ep, 0, "%s: %s: the peer finished its part early",
			 cf_side_name(ep), what);
		return -1;
	}
	if (h.type != want || h.len > max) {
		EP_CHECK(ep, 0, "%s: %s: protocol: message type %u len %u, "
			 "expected type %u", cf_side_name(ep), what, h.type,
			 h.len, want);
		return -1;
	}
	if (sock_read(ep->sock, data, h.len, deadline)) {
		EP_CHECK(ep, 0, "%s: %s: truncated message", cf_side_name(ep),
			 what);
		return -1;
	}
	return (int)h.len;
}

int cf_ep_sync(struct cf_ep *ep, int timeout_ms)
{
	if (msg_send(ep, MSG_SYNC, NULL, 0)) {
		EP_CHECK(ep, 0, "%s: sync: peer gone", cf_side_name(ep));
		return -1;
	}
	return msg_recv(ep, MSG_SYNC, NULL, 0, cf_now_ms() + timeout_ms,
			"sync") < 0 ? -1 : 0;
}

int cf_ep_sync_blocking(struct cf_ep *ep, int timeout_ms)
{
	struct timeval tv = {
		.tv_sec = timeout_ms / 1000,
		.tv_usec = (timeout_ms % 1000) * 1000,
	};
	struct timeval none = { 0, 0 };
	struct msg_hdr h;
	ssize_t n;

	if (msg_send(ep, MSG_SYNC, NULL, 0)) {
		EP_CHECK(ep, 0, "%s: sync: peer gone", cf_side_name(ep));
		return -1;
	}
	setsockopt(ep->sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* One plain blocking read(): no poll, no verb. */
	n = read(ep->sock, &h, sizeof(h));
	setsockopt(ep->sock, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	EP_REQUIRE(ep, n == (ssize_t)sizeof(h) && h.type == MSG_SYNC &&
		   h.len == 0, "%s: blocking read for the peer's sync: got %zd "
		   "bytes (type %u), expected a SYNC", cf_side_name(ep), n,
		   n > 0 ? h.type : 0);
	return 0;
}

int cf_ep_wait_peer_gone(struct cf_ep *ep, int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	char skip[256];
	ssize_t n;

	for (;;) {
		if (wait_fd(ep->sock, POLLIN, deadline))
			return -1;
		n = read(ep->sock, skip, sizeof(skip));
		if (n == 0 || (n < 0 && errno != EINTR))
			return 0;
	}
}

int cf_ep_wait_state(struct ibv_qp *qp, int want, int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	int st;

	for (;;) {
		st = cf_qp_state(qp);
		if (st == want || cf_now_ms() >= deadline)
			return st;
		usleep(1000);
	}
}

int cf_ep_send_val(struct cf_ep *ep, uint64_t val)
{
	if (msg_send(ep, MSG_VAL, &val, sizeof(val))) {
		EP_CHECK(ep, 0, "%s: send value: peer gone", cf_side_name(ep));
		return -1;
	}
	return 0;
}

int cf_ep_recv_val(struct cf_ep *ep, uint64_t *val_p, int timeout_ms)
{
	return msg_recv(ep, MSG_VAL, val_p, sizeof(*val_p),
			cf_now_ms() + timeout_ms, "value") == sizeof(*val_p) ?
		       0 : -1;
}

/* ---- data ---- */

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

void cf_pattern_fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1, v = 0;
	uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			v = xorshift(&s);
		b[i] = (uint8_t)(v >> ((i & 7) * 8));
	}
}

long cf_pattern_check(const void *buf, size_t len, uint64_t seed)
{
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1, v = 0;
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++) {
		if (!(i & 7))
			v = xorshift(&s);
		if (b[i] != (uint8_t)(v >> ((i & 7) * 8)))
			return (long)i;
	}
	return -1;
}

long cf_bytes_check(const void *buf, size_t len, uint8_t c)
{
	const uint8_t *b = buf;
	size_t i;

	for (i = 0; i < len; i++)
		if (b[i] != c)
			return (long)i;
	return -1;
}

void cf_ep_send_wr(struct cf_ep *ep, struct ibv_send_wr *wr,
		   struct ibv_sge *sge, enum ibv_wr_opcode op, size_t off,
		   uint32_t len, uint64_t wr_id)
{
	memset(wr, 0, sizeof(*wr));
	sge->addr = (uintptr_t)ep->buf + off;
	sge->length = len;
	sge->lkey = ep->mr->lkey;
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
}

int cf_ep_post_recv(struct cf_ep *ep, struct ibv_qp *qp, size_t off,
		    uint32_t len, uint64_t wr_id)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;

	sge.addr = (uintptr_t)ep->buf + off;
	sge.length = len;
	sge.lkey = ep->mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ep->srq)
		return cf_rc(ibv_post_srq_recv(ep->srq, &wr, &bad));
	return cf_rc(ibv_post_recv(qp, &wr, &bad));
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
		if (wait_fd(ep->ctx->async_fd, POLLIN, deadline))
			return -1;
		if (ibv_get_async_event(ep->ctx, &ev))
			return -1;
		if (ev.event_type == type) {
			if (ev_p)
				*ev_p = ev;
			ibv_ack_async_event(&ev);
			return 0;
		}
		if (seen && used + 40 < seen_len)
			used += (size_t)snprintf(
				seen + used, seen_len - used, "%s%s",
				used ? ", " : "",
				ibv_event_type_str(ev.event_type));
		ibv_ack_async_event(&ev);
	}
}

int cf_ep_wait_cq_event(struct cf_ep *ep, int timeout_ms)
{
	struct ibv_cq *cq;
	void *cq_ctx;

	if (wait_fd(ep->ch->fd, POLLIN, cf_now_ms() + timeout_ms))
		return 0;
	if (ibv_get_cq_event(ep->ch, &cq, &cq_ctx))
		return -1;
	ibv_ack_cq_events(cq, 1);
	return cq == ep->cq ? 1 : -1;
}

/* ---- setup ---- */

static uint32_t clamp_u32(uint32_t v, int max)
{
	return max >= 0 && v > (uint32_t)max ? (uint32_t)max : v;
}

static int ep_setup(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;
	struct ibv_qp_init_attr_ex ia;
	int i, ret;

	ep->dev = &ep->dev_ex.orig_attr;
	ep->ctx = cf_open_device();
	EP_REQUIRE(ep, ep->ctx, "%s: cannot open device %s", cf_side_name(ep),
		   cf_dev_name ? cf_dev_name : "(first)");
	if (ibv_query_device_ex(ep->ctx, NULL, &ep->dev_ex))
		EP_REQUIRE(ep, !ibv_query_device(ep->ctx, ep->dev),
			   "ibv_query_device failed");
	EP_REQUIRE(ep, !ibv_query_port(ep->ctx, cf_port, &ep->port),
		   "ibv_query_port failed");
	EP_REQUIRE(ep, !ibv_query_gid(ep->ctx, cf_port, cf_gid_index,
				      &ep->gid), "ibv_query_gid failed");
	ep->pd = ibv_alloc_pd(ep->ctx);
	EP_REQUIRE(ep, ep->pd, "ibv_alloc_pd: %s", strerror(errno));
	if (p->channel) {
		ep->ch = ibv_create_comp_channel(ep->ctx);
		EP_REQUIRE(ep, ep->ch, "ibv_create_comp_channel: %s",
			   strerror(errno));
	}
	if (p->cq_ex) {
		struct ibv_cq_init_attr_ex ca = {
			.cqe = (uint32_t)p->cq_size,
			.channel = ep->ch,
			.wc_flags = p->cq_ex_wc_flags,
		};

		ep->cqx = ibv_create_cq_ex(ep->ctx, &ca);
		if (!ep->cqx && (errno == EOPNOTSUPP || errno == ENOSYS)) {
			cf_ep_skip(ep, "ibv_create_cq_ex: %s",
				   strerror(errno));
			return -1;
		}
		EP_REQUIRE(ep, ep->cqx, "ibv_create_cq_ex: %s",
			   strerror(errno));
		ep->cq = ibv_cq_ex_to_cq(ep->cqx);
	} else {
		ep->cq = ibv_create_cq(ep->ctx, p->cq_size, NULL, ep->ch, 0);
		EP_REQUIRE(ep, ep->cq, "ibv_create_cq(%d): %s", p->cq_size,
			   strerror(errno));
	}
	ret = posix_memalign((void **)&ep->buf, 4096, p->buf_len);
	EP_REQUIRE(ep, !ret, "posix_memalign(%zu) failed", p->buf_len);
	memset(ep->buf, 0, p->buf_len);
	ep->mr = ibv_reg_mr(ep->pd, ep->buf, p->buf_len, p->mr_access);
	EP_REQUIRE(ep, ep->mr, "ibv_reg_mr(%zu, 0x%x): %s", p->buf_len,
		   p->mr_access, strerror(errno));
	if (p->srq) {
		struct ibv_srq_init_attr sa = {
			.attr = {
				.max_wr = clamp_u32(p->max_recv_wr,
						    ep->dev->max_srq_wr),
				.max_sge = clamp_u32(p->max_sge,
						     ep->dev->max_srq_sge),
			},
		};

		if (!ep->dev->max_srq) {
			cf_ep_skip(ep, "device has no SRQ (max_srq 0)");
			return -1;
		}
		ep->srq = ibv_create_srq(ep->pd, &sa);
		EP_REQUIRE(ep, ep->srq, "ibv_create_srq: %s", strerror(errno));
	}
	for (i = 0; i < p->nqp; i++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ep->cq;
		ia.recv_cq = ep->cq;
		ia.srq = ep->srq;
		ia.qp_type = p->qp_type;
		ia.sq_sig_all = p->sq_sig_all;
		ia.cap.max_send_wr = clamp_u32(p->max_send_wr,
					       ep->dev->max_qp_wr);
		ia.cap.max_recv_wr = clamp_u32(p->max_recv_wr,
					       ep->dev->max_qp_wr);
		ia.cap.max_send_sge = clamp_u32(p->max_sge, ep->dev->max_sge);
		ia.cap.max_recv_sge = clamp_u32(p->max_sge, ep->dev->max_sge);
		ia.cap.max_inline_data = p->max_inline;
		ia.comp_mask = IBV_QP_INIT_ATTR_PD;
		ia.pd = ep->pd;
		if (p->qp_ex) {
			ia.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			ia.send_ops_flags = p->send_ops_flags;
		}
		ep->qps[i] = ibv_create_qp_ex(ep->ctx, &ia);
		if (!ep->qps[i] && p->qp_ex &&
		    (errno == EOPNOTSUPP || errno == ENOSYS)) {
			cf_ep_skip(ep, "ibv_create_qp_ex with send_ops_flags "
				   "0x%llx: %s",
				   (unsigned long long)p->send_ops_flags,
				   strerror(errno));
			return -1;
		}
		if (!ep->qps[i] && p->max_inline && errno == EINVAL) {
			cf_ep_skip(ep, "%s QP with max_inline_data %u "
				   "refused", cf_qpt_name(p->qp_type),
				   p->max_inline);
			return -1;
		}
		EP_REQUIRE(ep, ep->qps[i], "ibv_create_qp_ex(%s) #%d: %s",
			   cf_qpt_name(p->qp_type), i, strerror(errno));
		if (i == 0) {
			ep->init.cap = ia.cap;
			ep->init.sq_sig_all = ia.sq_sig_all;
		}
		ep->me.qpn[i] = ep->qps[i]->qp_num;
		/* Start close to the 24-bit PSN wrap (IBA 9.7.1) so that
		 * long messages wrap it. */
		ep->me.psn[i] = (0xfffff0u + (uint32_t)ep->side * 0x100u +
				 (uint32_t)i * 0x1001u) & 0xffffffu;
	}
	ep->qp = ep->qps[0];
	if (p->qp_ex) {
		ep->qpx = ibv_qp_to_qp_ex(ep->qp);
		EP_REQUIRE(ep, ep->qpx, "ibv_qp_to_qp_ex returned NULL");
	}
	ep->me.lid = ep->port.lid;
	memcpy(ep->me.gid, ep->gid.raw, 16);
	ep->me.mtu = (uint8_t)ep->port.active_mtu;
	ep->me.nqp = (uint32_t)p->nqp;
	ep->me.addr = (uintptr_t)ep->buf;
	ep->me.rkey = ep->mr->rkey;
	ep->me.len = p->buf_len;
	ep->me.qkey = p->qkey;
	ep->state = IBV_QPS_RESET;
	return 0;
}

static void ep_teardown(struct cf_ep *ep)
{
	int i;

	for (i = 0; i < CF_PEER_MAX_QP; i++)
		if (ep->qps[i])
			ibv_destroy_qp(ep->qps[i]);
	if (ep->ah)
		ibv_destroy_ah(ep->ah);
	if (ep->srq)
		ibv_destroy_srq(ep->srq);
	if (ep->mr)
		ibv_dereg_mr(ep->mr);
	if (ep->cq)
		ibv_destroy_cq(ep->cq);
	if (ep->ch)
		ibv_destroy_comp_channel(ep->ch);
	if (ep->pd)
		ibv_dealloc_pd(ep->pd);
	if (ep->ctx)
		ibv_close_device(ep->ctx);
	free(ep->buf);
}

static int exchange(struct cf_ep *ep)
{
	int n;

	if (ep->exchanged)
		return 0;
	if (msg_send(ep, MSG_INFO, &ep->me, sizeof(ep->me))) {
		EP_CHECK(ep, 0, "%s: exchange: peer gone", cf_side_name(ep));
		return -1;
	}
	n = msg_recv(ep, MSG_INFO, &ep->peer, sizeof(ep->peer),
		     cf_now_ms() + 10000, "exchange");
	if (n < 0)
		return -1;
	EP_REQUIRE(ep, n == sizeof(ep->peer) && ep->peer.nqp == ep->me.nqp,
		   "exchange: bad peer info");
	ep->exchanged = true;
	return 0;
}

/* The address vector of the peer's port (see cf_ep_peer_ah). */
static void peer_av(const struct cf_ep *ep, struct ibv_ah_attr *ah,
		    bool global)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = ep->peer.lid;
	ah->port_num = (uint8_t)cf_port;
	if (global || ep->port.link_layer == IBV_LINK_LAYER_ETHERNET ||
	    !ep->peer.lid) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, ep->peer.gid, 16);
		ah->grh.sgid_index = (uint8_t)cf_gid_index;
		ah->grh.hop_limit = 1;
	}
}

struct ibv_ah *cf_ep_peer_ah(struct cf_ep *ep, bool global)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

	peer_av(ep, &aa, global);
	ah = ibv_create_ah(ep->pd, &aa);
	EP_CHECK(ep, ah, "%s: ibv_create_ah to the peer (LID 0x%x%s): %s",
		 cf_side_name(ep), aa.dlid, aa.is_global ? ", GRH" : "",
		 strerror(errno));
	return ah;
}

/* The smaller of a device limit and 16, or the test's value (>= 0). */
static uint8_t rd_atomic(int want, int dev_max)
{
	if (want >= 0)
		return (uint8_t)want;
	return (uint8_t)(dev_max < 16 ? dev_max : 16);
}

/*
 * Every attribute the walk of QP #i to RTS uses; cf_qp_walk picks the
 * ones each step requires for the service type.  INIT: pkey index, port,
 * access flags or Q_Key (manual 3.5.2).  RTR: path, dest QPN, rq_psn,
 * responder resources and min_rnr_timer (manual 3.5.3).  RTS: timeout,
 * retries, sq_psn and initiator depth (manual 3.5.4).
 */
static void ep_qp_attr(const struct cf_ep *ep, int i, struct ibv_qp_attr *a)
{
	const struct cf_peer_params *p = ep->p;

	memset(a, 0, sizeof(*a));
	a->pkey_index = 0;
	a->port_num = (uint8_t)cf_port;
	a->qkey = p->qkey;
	a->qp_access_flags = (unsigned int)p->qp_access;
	a->path_mtu = ep->port.active_mtu < ep->peer.mtu ?
			      ep->port.active_mtu :
			      (enum ibv_mtu)ep->peer.mtu;
	a->dest_qp_num = ep->peer.qpn[i];
	a->rq_psn = ep->peer.psn[i];
	a->max_dest_rd_atomic = rd_atomic(p->max_dest_rd_atomic,
					  ep->dev->max_qp_rd_atom);
	a->min_rnr_timer = p->min_rnr_timer;
	peer_av(ep, &a->ah_attr, false);
	a->timeout = p->timeout;
	a->retry_cnt = p->retry_cnt;
	a->rnr_retry = p->rnr_retry;
	a->sq_psn = ep->me.psn[i];
	a->max_rd_atomic = rd_atomic(p->max_rd_atomic,
				     ep->dev->max_qp_init_rd_atom);
}

int cf_ep_connect(struct cf_ep *ep, enum ibv_qp_state target)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state s;
	int i, ret;

	if (target >= IBV_QPS_RTR && exchange(ep))
		return -1;
	if (target >= IBV_QPS_RTR && ep->p->qp_type == IBV_QPT_UD &&
	    !ep->ah) {
		ep->ah = cf_ep_peer_ah(ep, false);
		if (!ep->ah)
			return -1;
	}
	/* One state at a time over every QP, as both sides do. */
	for (s = ep->state + 1; s <= target && s <= IBV_QPS_RTS; s++) {
		for (i = 0; i < ep->p->nqp; i++) {
			ep_qp_attr(ep, i, &a);
			ret = cf_qp_walk(ep->qps[i], &a, s - 1, s);
			EP_REQUIRE(ep, !ret, "%s: QP #%d to %s: %s",
				   cf_side_name(ep), i, cf_state_name(s),
				   cf_errname(ret));
		}
		ep->state = s;
	}
	return 0;
}

/* ---- the run ---- */

static void send_done(struct cf_ep *ep)
{
	msg_send(ep, MSG_DONE, ep->report, (uint32_t)ep->report_len);
}

/* Wait for the peer's DONE (it may have come early); 0 or -1. */
static int wait_done(struct cf_ep *ep, long long deadline)
{
	struct msg_hdr h;

	while (!ep->got_peer_done) {
		if (sock_read(ep->sock, &h, sizeof(h), deadline))
			return -1;
		if (h.type != MSG_DONE) {
			/* Drain what the peer sent and we did not await. */
			char skip[256];
			uint32_t left = h.len;

			while (left) {
				uint32_t n = left < sizeof(skip) ?
						     left : sizeof(skip);

				if (sock_read(ep->sock, skip, n, deadline))
					return -1;
				left -= n;
			}
			continue;
		}
		ep->peer_done = malloc(h.len + 1);
		if (!ep->peer_done ||
		    sock_read(ep->sock, ep->peer_done, h.len, deadline))
			return -1;
		ep->peer_done[h.len] = 0;
		ep->peer_done_len = h.len;
		ep->got_peer_done = true;
	}
	return 0;
}

static void child_main(struct cf_ep *ep, cf_peer_body body)
{
	long long deadline = cf_now_ms() + ep->p->deadline_s * 1000LL;
	int ok;

	ok = ep_setup(ep) == 0 && !ep->skipped;
	if (ok && ep->p->connect)
		ok = cf_ep_connect(ep, IBV_QPS_RTS) == 0;
	if (ok)
		body(ep);
	send_done(ep);
	wait_done(ep, deadline);
	ep_teardown(ep);
	close(ep->sock);
	_exit(ep->nfail ? 1 : 0);
}

/*
 * Last resort when a verb itself never returns: the parent's alarm kills
 * the child and ends the run (a hang must not stall make check).
 */
static volatile pid_t watchdog_child;

static void watchdog(int sig)
{
	static const char msg[] = "\nibemu-conformance: an RC test overstayed "
				  "its deadline in a verb; child killed, "
				  "exiting\n";

	(void)sig;
	if (watchdog_child > 0)
		kill(watchdog_child, SIGKILL);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

/* Assert each of the child's failure records in CUnit. */
static unsigned int assert_child_report(char *rep)
{
	unsigned int n = 0;
	char *line, *save = NULL;

	for (line = strtok_r(rep, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *f[4] = { NULL };
		char *s2 = NULL;
		int k = 0;

		for (char *t = strtok_r(line, "\t", &s2); t && k < 4;
		     t = strtok_r(NULL, "\t", &s2))
			f[k++] = t;
		if (k < 4)
			continue;
		cf_check(0, (unsigned int)atoi(f[0]), f[1], f[2], "[child] %s",
			 f[3]);
		n++;
	}
	return n;
}

int cf_peer_run(const struct cf_peer_params *p, cf_peer_body body, void *arg)
{
	long long deadline = cf_now_ms() + p->deadline_s * 1000LL;
	struct sigaction sa, old_sa;
	struct cf_ep ep;
	int sv[2], status = 0, ok, exited = 0;
	unsigned int child_fails = 0;
	pid_t pid, w;

	CU_ASSERT_FATAL(p->nqp >= 1 && p->nqp <= CF_PEER_MAX_QP);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		CF_CHECK(0, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	/* Fork before any device is opened (see peer.h). */
	pid = fork();
	if (pid < 0) {
		CF_CHECK(0, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	memset(&ep, 0, sizeof(ep));
	ep.p = p;
	ep.arg = arg;
	if (pid == 0) {
		/* Never outlive the parent or the deadline. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGALRM, SIG_DFL);
		alarm((unsigned int)p->deadline_s + 20);
		close(sv[0]);
		ep.side = CF_CHILD;
		ep.sock = sv[1];
		child_main(&ep, body);
	}
	close(sv[1]);
	ep.side = CF_PARENT;
	ep.sock = sv[0];
	watchdog_child = pid;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = watchdog;
	sigaction(SIGALRM, &sa, &old_sa);
	alarm((unsigned int)p->deadline_s + 30);

	ok = ep_setup(&ep) == 0 && !ep.skipped;
	if (ok && p->connect)
		ok = cf_ep_connect(&ep, IBV_QPS_RTS) == 0;
	if (ok)
		body(&ep);
	send_done(&ep);
	if (wait_done(&ep, deadline) && !p->child_may_die && !ep.skipped)
		CF_CHECK(0, "the child sent no verdict within %d s",
			 p->deadline_s);
	if (ep.peer_done)
		child_fails = assert_child_report(ep.peer_done);
	ep_teardown(&ep);
	close(ep.sock);

	/* Reap the child, killing it by PID when it overstays. */
	while (cf_now_ms() < deadline + 5000) {
		w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			exited = 1;
			break;
		}
		usleep(1000);
	}
	if (!exited) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		CF_CHECK(0, "the child did not exit in time; killed");
	} else if (WIFSIGNALED(status)) {
		CF_CHECK(p->child_may_die, "the child died of signal %d",
			 WTERMSIG(status));
	} else {
		CF_CHECK(!WEXITSTATUS(status) || child_fails,
			 "the child exited with status %d without a report",
			 WEXITSTATUS(status));
	}
	alarm(0);
	sigaction(SIGALRM, &old_sa, NULL);
	watchdog_child = 0;
	free(ep.report);
	free(ep.peer_done);
	return ep.nfail || child_fails ? -1 : 0;
}

int cf_peer_run_tuned(cf_peer_body body, cf_peer_tune tune, void *arg)
{
	struct cf_peer_params p;

	cf_peer_params_init(&p);
	if (tune)
		tune(&p, arg);
	return cf_peer_run(&p, body, arg);
}

int cf_ep_post_send(struct cf_ep *ep, struct ibv_qp *qp,
		    struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = cf_rc(ibv_post_send(qp, wr, &bad));

	return EP_CHECK(ep, !ret, "%s: ibv_post_send(opcode %d, wr_id %llu): "
			"%s", cf_side_name(ep), wr->opcode,
			(unsigned long long)wr->wr_id, cf_errname(ret)) ?
		       0 : -1;
}

int cf_ep_post1(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		uint32_t len, uint64_t roff, uint64_t wr_id, unsigned int flags)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	cf_ep_send_wr(ep, &wr, &sge, op, loff, len, wr_id);
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = ep->peer.addr + roff;
	wr.wr.rdma.rkey = ep->peer.rkey;
	return cf_ep_post_send(ep, ep->qp, &wr);
}

int cf_ep_wc_ok(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	if (!EP_CHECK(ep, got >= 1, "%s: %s: no completion in time",
		      cf_side_name(ep), what))
		return 0;
	if (!EP_CHECK(ep, wc->status == IBV_WC_SUCCESS,
		      "%s: %s: status %s (vendor_err 0x%x)", cf_side_name(ep),
		      what, ibv_wc_status_str(wc->status), wc->vendor_err))
		return 0;
	return EP_CHECK(ep, wc->wr_id == wr_id && wc->opcode == op,
			"%s: %s: wr_id %llu opcode %d, expected %llu / %d",
			cf_side_name(ep), what,
			(unsigned long long)wc->wr_id, wc->opcode,
			(unsigned long long)wr_id, op);
}

void cf_ep_check_state(struct cf_ep *ep, struct ibv_qp *qp, int want,
		       const char *what)
{
	int st = cf_ep_wait_state(qp, want, 1000);

	EP_CHECK(ep, st == want, "%s: %s: QP state %s, expected %s",
		 cf_side_name(ep), what, cf_state_name(st),
		 cf_state_name(want));
}

int cf_ep_expect_wc(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		    uint64_t wr_id, enum ibv_wc_status status, int opcode,
		    const char *what)
{
	if (!EP_CHECK(ep, got >= 1, "%s: %s: no completion in time "
		      "(expected %s)", cf_side_name(ep), what,
		      ibv_wc_status_str(status)))
		return 0;
	/* Only wr_id, status, qp_num and vendor_err are valid on an error
	 * completion (manual 3.6, ibv_poll_cq). */
	return EP_CHECK(ep, wc->status == status && wc->wr_id == wr_id &&
			(opcode < 0 || (int)wc->opcode == opcode),
			"%s: %s: status %s wr_id %llu opcode %d, expected %s "
			"wr_id %llu opcode %d", cf_side_name(ep), what,
			ibv_wc_status_str(wc->status),
			(unsigned long long)wc->wr_id, wc->opcode,
			ibv_wc_status_str(status), (unsigned long long)wr_id,
			opcode);
}
