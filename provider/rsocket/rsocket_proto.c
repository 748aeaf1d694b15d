// SPDX-License-Identifier: MIT
/*
 * The stream protocol of ibemu's rsockets (doc/rsocket.md): one RC QP
 * per connection, messages sent with SEND into fixed receive buffers,
 * flow controlled by credits.
 *
 * Each message is a 16-byte header and up to RS_PAYLOAD_MAX bytes.  The
 * header carries the sender's two cumulative counters: data-class
 * messages (RS_DATA, RS_IOMAP) whose buffer it has given back to its
 * receive queue, and credit messages (RS_CREDIT) it has taken in.  A
 * side offers rq_size buffers for data-class messages (the window told
 * in the connection's private data), RS_CTRL_SLOTS for credit messages
 * and one for RS_FIN, and posts all of them; a sender keeps within each
 * count, so a SEND always finds a posted receive (IBA 9.7.5.2.8: an RC
 * receiver without a WQE would answer RNR NAK, which this protocol never
 * relies on).  A data buffer is given back when the application has read
 * it; a credit or iomap message's at once.  A credit message is sent
 * when half the data window has been given back and not yet told, and
 * never to return credit messages alone, so credit messages cannot
 * answer each other forever.
 *
 * riowrite is an RDMA WRITE into memory the peer announced with an
 * RS_IOMAP message; RC ordering (IBA 9.5: a SEND after a WRITE completes
 * at the responder after it) makes later stream data arrive after it.
 *
 * Lock rule: every function here but rs_verbs_init is called with
 * rs->lock held; rv_lock guards the table of libibverbs functions (rv)
 * until it is filled, which it then never changes.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "ibemu.h"
#include "log.h"
#include "rsocket.h"

#define RS_WR_RECV (1ull << 63)

static struct {
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len,
				 int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *channel,
			    struct ibv_cq **cq, void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
	int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
} rv;

static pthread_mutex_t rv_lock = PTHREAD_MUTEX_INITIALIZER;
static bool rv_done;

#define RV(field, name, ver)                                                   \
	do {                                                                   \
		*(void **)&rv.field = ibemu_verbs_sym(name, ver);              \
		if (!rv.field)                                                 \
			goto out;                                              \
	} while (0)

/* libibverbs' functions this file calls; 0 or a positive errno. */
int rs_verbs_init(void)
{
	int ret = ENOSYS;

	pthread_mutex_lock(&rv_lock);
	if (rv_done) {
		ret = 0;
		goto out;
	}
	RV(reg_mr, "ibv_reg_mr", "IBVERBS_1.1");
	RV(dereg_mr, "ibv_dereg_mr", "IBVERBS_1.1");
	RV(create_cq, "ibv_create_cq", "IBVERBS_1.1");
	RV(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
	RV(get_cq_event, "ibv_get_cq_event", "IBVERBS_1.1");
	RV(ack_cq_events, "ibv_ack_cq_events", "IBVERBS_1.1");
	RV(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0");
	rv_done = true;
	ret = 0;
out:
	pthread_mutex_unlock(&rv_lock);
	if (ret)
		ibemu_log_err("rsocket: libibverbs functions not found");
	return ret;
}

struct ibv_mr *rs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	return rv.reg_mr(pd, addr, len, access);
}

void rs_dereg_mr(struct ibv_mr *mr)
{
	if (mr)
		rv.dereg_mr(mr);
}

/* The connection broke: every later call says why. */
static void rs_broken(struct rsock *rs, int err)
{
	rs->peer_gone = true;
	if (!rs->err)
		rs->err = err;
}

static int rs_repost(struct rsock *rs, uint32_t idx)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)(rs->rbuf + (size_t)idx * RS_MSG_SIZE),
		.length = RS_MSG_SIZE,
		.lkey = rs->rmr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = RS_WR_RECV | idx,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad;
	int ret;

	ret = ibv_post_recv(rs->id->qp, &wr, &bad);
	if (ret && !rs->peer_gone) {
		rs_broken(rs, ret);
		return ret;
	}
	return 0;
}

void rs_conn_data_make(const struct rsock *rs, struct rs_conn_data *c)
{
	memset(c, 0, sizeof(*c));
	c->version = RS_VERSION;
	c->rq_size = htobe32(rs->rq_size);
	c->msg_size = htobe32(RS_MSG_SIZE);
}

/* The peer's offer, from the private data of its REQ or REP. */
int rs_conn_data_take(struct rsock *rs, const void *p, size_t len)
{
	struct rs_conn_data c;
	uint32_t q;

	if (!p || len < sizeof(c))
		return EPROTO;
	memcpy(&c, p, sizeof(c));
	q = be32toh(c.rq_size);
	if (c.version != RS_VERSION || be32toh(c.msg_size) != RS_MSG_SIZE ||
	    q < RS_QUEUE_MIN || q > RS_QUEUE_MAX)
		return EPROTO;
	rs->peer_q = q;
	return 0;
}

int rs_res_create(struct rsock *rs)
{
	struct rdma_cm_id *id = rs->id;
	struct ibv_qp_init_attr qa;
	int ret;
	uint32_t i;

	if (!id->verbs)
		return EINVAL;
	rs->nrecv = rs->rq_size + RS_CTRL_SLOTS + RS_FIN_SLOTS;
	rs->cc = ibv_create_comp_channel(id->verbs);
	if (!rs->cc)
		return errno ? errno : ENOMEM;
	ret = ibemu_set_nonblock(rs->cc->fd);
	if (ret)
		goto err;
	ret = ENOMEM;
	rs->cq = rv.create_cq(id->verbs, (int)(rs->sq_size + rs->nrecv), rs,
			      rs->cc, 0);
	if (!rs->cq)
		goto err;
	memset(&qa, 0, sizeof(qa));
	qa.send_cq = rs->cq;
	qa.recv_cq = rs->cq;
	qa.qp_type = IBV_QPT_RC;
	qa.sq_sig_all = 1;
	qa.cap.max_send_wr = rs->sq_size;
	qa.cap.max_recv_wr = rs->nrecv;
	qa.cap.max_send_sge = 1;
	qa.cap.max_recv_sge = 1;
	if (rdma_create_qp(id, NULL, &qa)) {
		ret = errno ? errno : ENOMEM;
		goto err;
	}
	if (posix_memalign((void **)&rs->rbuf, 4096,
			   (size_t)rs->nrecv * RS_MSG_SIZE) ||
	    posix_memalign((void **)&rs->sbuf, 4096,
			   (size_t)rs->sq_size * RS_MSG_SIZE))
		goto err;
	rs->rxq = calloc(rs->nrecv, sizeof(*rs->rxq));
	rs->rx_pos = calloc(rs->nrecv, sizeof(*rs->rx_pos));
	rs->rx_end = calloc(rs->nrecv, sizeof(*rs->rx_end));
	if (!rs->rxq || !rs->rx_pos || !rs->rx_end)
		goto err;
	rs->rmr = rv.reg_mr(id->pd, rs->rbuf, (size_t)rs->nrecv * RS_MSG_SIZE,
			    IBV_ACCESS_LOCAL_WRITE);
	rs->smr = rv.reg_mr(id->pd, rs->sbuf, (size_t)rs->sq_size * RS_MSG_SIZE,
			    IBV_ACCESS_LOCAL_WRITE);
	if (!rs->rmr || !rs->smr) {
		ret = errno ? errno : ENOMEM;
		goto err;
	}
	for (i = 0; i < rs->nrecv; i++) {
		ret = rs_repost(rs, i);
		if (ret)
			goto err;
	}
	return 0;
err:
	rs_res_destroy(rs);
	return ret;
}

void rs_res_destroy(struct rsock *rs)
{
	uint32_t i;

	if (rs->id && rs->id->qp)
		rdma_destroy_qp(rs->id);
	for (i = 0; i < RS_IOMAP_MAX; i++) {
		if (rs->lmap[i].mr)
			rv.dereg_mr(rs->lmap[i].mr);
		memset(&rs->lmap[i], 0, sizeof(rs->lmap[i]));
	}
	if (rs->rmr)
		rv.dereg_mr(rs->rmr);
	if (rs->smr)
		rv.dereg_mr(rs->smr);
	rs->rmr = rs->smr = NULL;
	if (rs->cq) {
		if (rs->cq_events)
			rv.ack_cq_events(rs->cq, rs->cq_events);
		rv.destroy_cq(rs->cq);
	}
	rs->cq = NULL;
	rs->cq_events = 0;
	if (rs->cc)
		rv.destroy_comp_channel(rs->cc);
	rs->cc = NULL;
	free(rs->rbuf);
	free(rs->sbuf);
	free(rs->rxq);
	free(rs->rx_pos);
	free(rs->rx_end);
	rs->rbuf = rs->sbuf = NULL;
	rs->rxq = rs->rx_pos = rs->rx_end = NULL;
}

/* ---- sending ---- */

bool rs_sq_free(const struct rsock *rs)
{
	return rs->cq && rs->sq_used < rs->sq_size;
}

static bool rs_window_open(const struct rsock *rs)
{
	return rs->data_sent - rs->peer_data_freed < rs->peer_q;
}

/* A data-class message may go now. */
bool rs_can_send(const struct rsock *rs)
{
	return rs->state == RS_CONNECTED && !rs->peer_gone &&
	       rs_window_open(rs) && rs_sq_free(rs);
}

static uint8_t *rs_slot(struct rsock *rs)
{
	return rs->sbuf + (size_t)rs->sq_next * RS_MSG_SIZE;
}

static void rs_hdr_put(struct rsock *rs, uint8_t *slot, uint8_t type)
{
	struct rs_hdr h = {
		.type = type,
		.version = RS_VERSION,
		.data_freed = htobe32(rs->data_freed),
		.ctrl_polled = htobe32(rs->ctrl_polled),
	};

	memcpy(slot, &h, sizeof(h));
	rs->data_freed_told = rs->data_freed;
}

/* Post the message (or write) in the current slot; 0 or errno. */
static int rs_post_slot(struct rsock *rs, uint32_t len, enum ibv_wr_opcode op,
			uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)rs_slot(rs),
		.length = len,
		.lkey = rs->smr->lkey,
	};
	struct ibv_send_wr wr = {
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	int ret;

	if (op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	ret = ibv_post_send(rs->id->qp, &wr, &bad);
	if (ret) {
		rs_broken(rs, ret);
		return ret;
	}
	rs->sq_used++;
	if (++rs->sq_next == rs->sq_size)
		rs->sq_next = 0;
	return 0;
}

/* Copy n bytes between buf and the bytes [off, off + n) of iov: into
 * iov when to_iov, else out of it. */
static void rs_iov_copy(const struct iovec *iov, int iovcnt, size_t off,
			uint8_t *buf, size_t n, bool to_iov)
{
	int i;

	for (i = 0; i < iovcnt && n; i++) {
		size_t l = iov[i].iov_len, c;
		uint8_t *base = iov[i].iov_base;

		if (off >= l) {
			off -= l;
			continue;
		}
		c = l - off < n ? l - off : n;
		if (to_iov)
			memcpy(base + off, buf, c);
		else
			memcpy(buf, base + off, c);
		buf += c;
		n -= c;
		off = 0;
	}
}

/* As many RS_DATA messages of the bytes [skip, skip + len) of iov as the
 * credits and send queue allow now; the bytes sent. */
size_t rs_send_some(struct rsock *rs, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t len)
{
	size_t done = 0;

	if (rs->iomap_pending && rs_flush_iomaps(rs))
		return 0;
	if (rs->iomap_pending)
		return 0; /* announcements go first, in stream order */
	while (done < len && rs_can_send(rs)) {
		size_t n = len - done < RS_PAYLOAD_MAX ? len - done
						       : RS_PAYLOAD_MAX;
		uint8_t *slot = rs_slot(rs);

		rs_hdr_put(rs, slot, RS_DATA);
		rs_iov_copy(iov, iovcnt, skip + done, slot + RS_HDR_SIZE, n,
			    false);
		if (rs_post_slot(rs, (uint32_t)(RS_HDR_SIZE + n), IBV_WR_SEND,
				 0, 0))
			break;
		rs->data_sent++;
		done += n;
	}
	return done;
}

int rs_give_credits(struct rsock *rs)
{
	uint32_t half = rs->rq_size / 2;

	if (rs->state != RS_CONNECTED || rs->peer_gone || !rs_sq_free(rs))
		return 0;
	if (rs->data_freed - rs->data_freed_told < (half ? half : 1))
		return 0;
	if (rs->ctrl_sent - rs->peer_ctrl_polled >= RS_CTRL_SLOTS)
		return 0;
	rs_hdr_put(rs, rs_slot(rs), RS_CREDIT);
	if (rs_post_slot(rs, RS_HDR_SIZE, IBV_WR_SEND, 0, 0))
		return rs->err;
	rs->ctrl_sent++;
	return 0;
}

/* End of our stream; the peer holds a buffer for it. */
int rs_send_fin(struct rsock *rs)
{
	if (rs->wr_shut)
		return 0;
	if (rs->state != RS_CONNECTED || rs->peer_gone)
		return ENOTCONN;
	if (!rs_sq_free(rs))
		return EAGAIN;
	rs_hdr_put(rs, rs_slot(rs), RS_FIN);
	if (rs_post_slot(rs, RS_HDR_SIZE, IBV_WR_SEND, 0, 0))
		return rs->err;
	rs->wr_shut = true;
	return 0;
}

/* Tell the peer of our iomaps not yet announced, in order. */
int rs_flush_iomaps(struct rsock *rs)
{
	uint32_t i;

	rs->iomap_pending = false;
	for (i = 0; i < RS_IOMAP_MAX; i++) {
		struct rs_iomap *m = &rs->lmap[i];
		struct rs_iomap_msg im;
		uint8_t *slot;

		if (!m->announce)
			continue;
		if (!rs_can_send(rs)) {
			rs->iomap_pending = true;
			return rs->peer_gone ? rs->err : 0;
		}
		im.index = htobe32(i);
		im.rkey = htobe32(m->rkey);
		im.offset = htobe64(m->offset);
		im.addr = htobe64(m->addr);
		im.len = htobe64(m->used ? m->len : 0);
		slot = rs_slot(rs);
		rs_hdr_put(rs, slot, RS_IOMAP);
		memcpy(slot + RS_HDR_SIZE, &im, sizeof(im));
		if (rs_post_slot(rs, RS_HDR_SIZE + sizeof(im), IBV_WR_SEND, 0,
				 0))
			return rs->err;
		rs->data_sent++;
		m->announce = false;
	}
	return 0;
}

/* RDMA WRITEs of buf into the peer's iomap m at offset, as far as the
 * send queue allows now; the bytes written. */
size_t rs_write_some(struct rsock *rs, const struct rs_iomap *m,
		     const uint8_t *buf, size_t len, uint64_t offset)
{
	size_t done = 0;

	while (done < len && rs->state == RS_CONNECTED && !rs->peer_gone &&
	       rs_sq_free(rs)) {
		size_t n = len - done < RS_MSG_SIZE ? len - done : RS_MSG_SIZE;

		memcpy(rs_slot(rs), buf + done, n);
		if (rs_post_slot(rs, (uint32_t)n, IBV_WR_RDMA_WRITE,
				 m->addr + (offset + done - m->offset),
				 m->rkey))
			break;
		done += n;
	}
	return done;
}

/* ---- receiving ---- */

bool rs_has_data(const struct rsock *rs)
{
	return rs->rxq_cnt != 0;
}

/* Copy queued stream bytes into [skip, skip + len) of iov; a buffer
 * read to its end goes back to the receive queue (unless peeking). */
size_t rs_recv_some(struct rsock *rs, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t len, bool peek)
{
	size_t done = 0;
	uint32_t k = 0;

	while (done < len && k < rs->rxq_cnt) {
		uint32_t idx = rs->rxq[(rs->rxq_head + k) % rs->nrecv];
		uint32_t pos = rs->rx_pos[idx], end = rs->rx_end[idx];
		size_t n = end - pos < len - done ? end - pos : len - done;

		rs_iov_copy(iov, iovcnt, skip + done,
			    rs->rbuf + (size_t)idx * RS_MSG_SIZE + pos, n,
			    true);
		done += n;
		if (peek) {
			k++;
			continue;
		}
		rs->rx_pos[idx] = pos + (uint32_t)n;
		if (rs->rx_pos[idx] < end)
			break;
		rs->rxq_head = (rs->rxq_head + 1) % rs->nrecv;
		rs->rxq_cnt--;
		rs->data_freed++;
		rs_repost(rs, idx);
	}
	if (!peek)
		rs_give_credits(rs);
	return done;
}

/* A cumulative counter of the peer's: it never passes what we sent. */
static void rs_counter(uint32_t *seen, uint32_t v, uint32_t sent)
{
	if (v - *seen <= sent - *seen)
		*seen = v;
}

static void rs_recv_wc(struct rsock *rs, const struct ibv_wc *wc)
{
	uint32_t idx = (uint32_t)(wc->wr_id & 0xffffffffu);
	const uint8_t *buf;
	struct rs_iomap_msg im;
	struct rs_hdr h;
	uint32_t plen;

	if (idx >= rs->nrecv)
		return;
	if (wc->status != IBV_WC_SUCCESS) {
		if (wc->status != IBV_WC_WR_FLUSH_ERR)
			rs_broken(rs, ECONNRESET);
		else
			rs->peer_gone = true;
		return;
	}
	if (wc->byte_len < RS_HDR_SIZE || wc->byte_len > RS_MSG_SIZE) {
		rs_broken(rs, EPROTO);
		return;
	}
	/* The peer wrote this buffer: the header is copied once, then
	 * checked. */
	buf = rs->rbuf + (size_t)idx * RS_MSG_SIZE;
	memcpy(&h, buf, sizeof(h));
	plen = wc->byte_len - RS_HDR_SIZE;
	if (h.version != RS_VERSION) {
		rs_broken(rs, EPROTO);
		return;
	}
	rs_counter(&rs->peer_data_freed, be32toh(h.data_freed), rs->data_sent);
	rs_counter(&rs->peer_ctrl_polled, be32toh(h.ctrl_polled),
		   rs->ctrl_sent);
	switch (h.type) {
	case RS_DATA:
		if (!plen || rs->rd_shut) {
			rs->data_freed++;
			rs_repost(rs, idx);
			break;
		}
		rs->rx_pos[idx] = RS_HDR_SIZE;
		rs->rx_end[idx] = wc->byte_len;
		rs->rxq[(rs->rxq_head + rs->rxq_cnt) % rs->nrecv] = idx;
		rs->rxq_cnt++;
		break;
	case RS_CREDIT:
		rs->ctrl_polled++;
		rs_repost(rs, idx);
		break;
	case RS_IOMAP:
		if (plen >= sizeof(im)) {
			uint32_t i;

			memcpy(&im, buf + RS_HDR_SIZE, sizeof(im));
			i = be32toh(im.index);
			if (i < RS_IOMAP_MAX) {
				struct rs_iomap *m = &rs->rmap[i];

				m->offset = be64toh(im.offset);
				m->addr = be64toh(im.addr);
				m->len = be64toh(im.len);
				m->rkey = be32toh(im.rkey);
				m->used = m->len != 0 &&
					  m->offset + m->len > m->offset;
			}
		}
		rs->data_freed++;
		rs_repost(rs, idx);
		break;
	case RS_FIN:
		rs->peer_fin = true;
		rs_repost(rs, idx);
		break;
	default:
		rs_broken(rs, EPROTO);
		break;
	}
}

/* Take in every completion there is; how many there were. */
int rs_poll_cq(struct rsock *rs)
{
	struct ibv_wc wc[16];
	int n, i, got = 0;

	if (!rs->cq)
		return 0;
	while ((n = ibv_poll_cq(rs->cq, 16, wc)) > 0) {
		got += n;
		for (i = 0; i < n; i++) {
			if (wc[i].wr_id & RS_WR_RECV) {
				rs_recv_wc(rs, &wc[i]);
				continue;
			}
			if (rs->sq_used)
				rs->sq_used--;
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				rs->peer_gone = true;
			else if (wc[i].status != IBV_WC_SUCCESS)
				rs_broken(rs, ECONNRESET);
		}
	}
	if (n < 0)
		rs_broken(rs, EIO);
	rs_give_credits(rs);
	if (rs->iomap_pending)
		rs_flush_iomaps(rs);
	return got;
}

/* Ask for a completion event before sleeping; re-poll after. */
int rs_arm_cq(struct rsock *rs)
{
	if (!rs->cq || rs->cq_armed)
		return 0;
	if (ibv_req_notify_cq(rs->cq, 0))
		return EIO;
	rs->cq_armed = true;
	return 0;
}

void rs_take_cq_events(struct rsock *rs)
{
	struct ibv_cq *cq;
	void *ctx;

	if (!rs->cc)
		return;
	while (!rv.get_cq_event(rs->cc, &cq, &ctx)) {
		rs->cq_armed = false;
		if (++rs->cq_events >= 64) {
			rv.ack_cq_events(rs->cq, rs->cq_events);
			rs->cq_events = 0;
		}
	}
}
