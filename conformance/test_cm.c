// SPDX-License-Identifier: MIT
/*
 * The RDMA CM (librdmacm, manual chapter 4 and 6.3) between two ids of
 * one process, through the address given with -a (the device's IP
 * address; without it the suite skips): connect, accept, data over the
 * QPs librdmacm moved to RTS, disconnect seen on both sides; the
 * private data sizes IBA 12.6 allows (56 bytes in a REQ after the IP
 * CM header of A11.6, 196 in a REP, 148 in a REJ) delivered intact and
 * one byte more refused; CONNECT_RESPONSE on an id without a QP and
 * rdma_establish; a connect nobody listens for; UD ids (SIDR) and a
 * datagram through the AH the event gives; a non-blocking channel;
 * rdma_destroy_id waiting for its events to be acknowledged.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#include "tests.h"
#include "test_cm.h"

struct cm_pair {
	struct rdma_event_channel *sch, *cch; /* server's, client's */
	struct rdma_cm_id *lid, *cid;
	struct sockaddr_storage addr; /* the listener's */
	int port;
};

bool cm_addr(struct sockaddr_storage *ss, int port)
{
	struct addrinfo h, *ai;
	char service[16];

	memset(&h, 0, sizeof(h));
	h.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%d", port);
	if (!cf_cm_addr || getaddrinfo(cf_cm_addr, service, &h, &ai))
		return false;
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	freeaddrinfo(ai);
	return true;
}

struct rdma_cm_event *cm_next(struct rdma_event_channel *ch)
{
	struct pollfd pfd = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;

	if (poll(&pfd, 1, CM_WAIT_MS) != 1)
		return NULL;
	if (rdma_get_cm_event(ch, &ev))
		return NULL;
	return ev;
}

struct rdma_cm_event *cm_expect(struct rdma_event_channel *ch,
				enum rdma_cm_event_type type,
				struct rdma_cm_id *id)
{
	struct rdma_cm_event *ev = cm_next(ch);

	CF_CHECK(ev != NULL, "no event within %d ms, expected %s",
		 CM_WAIT_MS, rdma_event_str(type));
	if (!ev)
		return NULL;
	CF_CHECK(ev->event == type && (!id || ev->id == id),
		 "event %s (status %d), expected %s",
		 rdma_event_str(ev->event), ev->status, rdma_event_str(type));
	if (ev->event != type || (id && ev->id != id)) {
		rdma_ack_cm_event(ev);
		return NULL;
	}
	return ev;
}

struct rdma_event_channel *cm_channel(void)
{
	struct rdma_event_channel *ch;

	if (!cf_cm_addr) {
		cf_skip("no address to test the RDMA CM with (-a ADDR)");
		return NULL;
	}
	ch = rdma_create_event_channel();
	CF_CHECK(ch != NULL, "rdma_create_event_channel: %s",
		 cf_errname(errno));
	return ch;
}

static void cm_pair_free(struct cm_pair *p)
{
	if (p->cid)
		rdma_destroy_id(p->cid);
	if (p->lid)
		rdma_destroy_id(p->lid);
	if (p->cch)
		rdma_destroy_event_channel(p->cch);
	if (p->sch)
		rdma_destroy_event_channel(p->sch);
	memset(p, 0, sizeof(*p));
}

/*
 * A listener on the address under test and a client id whose address
 * and route to it are resolved; false (after a SKIP or a failure
 * message) when that cannot be.
 */
static bool cm_pair_init(struct cm_pair *p, enum rdma_port_space ps)
{
	struct rdma_cm_event *ev;
	int i;

	memset(p, 0, sizeof(*p));
	if (!cf_cm_addr) {
		cf_skip("no address to test the RDMA CM with (-a ADDR)");
		return false;
	}
	p->sch = rdma_create_event_channel();
	p->cch = rdma_create_event_channel();
	CF_CHECK(p->sch && p->cch, "rdma_create_event_channel: %s",
		 cf_errname(errno));
	if (!p->sch || !p->cch)
		goto err;
	if (rdma_create_id(p->sch, &p->lid, NULL, ps) ||
	    rdma_create_id(p->cch, &p->cid, NULL, ps)) {
		CF_CHECK(0, "rdma_create_id: %s", cf_errname(errno));
		goto err;
	}
	/* A port nobody holds: the first of a few that binds. */
	for (i = 0; i < 64; i++) {
		p->port = 20000 + (int)(getpid() % 20000) + i;
		if (!cm_addr(&p->addr, p->port)) {
			CF_CHECK(0, "-a %s: not a numeric address",
				 cf_cm_addr);
			goto err;
		}
		if (!rdma_bind_addr(p->lid, (struct sockaddr *)&p->addr))
			break;
	}
	CF_CHECK(i < 64, "rdma_bind_addr: %s", cf_errname(errno));
	if (i == 64)
		goto err;
	CF_EXPECT_OK(cf_rc(rdma_listen(p->lid, 4)), "rdma_listen");
	CF_EXPECT_OK(cf_rc(rdma_resolve_addr(p->cid, NULL,
					     (struct sockaddr *)&p->addr,
					     2000)),
		     "rdma_resolve_addr");
	ev = cm_expect(p->cch, RDMA_CM_EVENT_ADDR_RESOLVED, p->cid);
	if (!ev)
		goto err;
	rdma_ack_cm_event(ev);
	CF_CHECK(p->cid->verbs != NULL, "resolved id without a device");
	CF_EXPECT_OK(cf_rc(rdma_resolve_route(p->cid, 2000)),
		     "rdma_resolve_route");
	ev = cm_expect(p->cch, RDMA_CM_EVENT_ROUTE_RESOLVED, p->cid);
	if (!ev)
		goto err;
	rdma_ack_cm_event(ev);
	return true;
err:
	cm_pair_free(p);
	return false;
}

static void cm_fill(uint8_t *buf, size_t len, uint8_t seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed + 13 * i);
}

bool cm_side_qp(struct cm_side *s, struct rdma_cm_id *id,
		enum ibv_qp_type type)
{
	struct ibv_qp_init_attr attr;

	memset(s, 0, sizeof(*s));
	s->pd = ibv_alloc_pd(id->verbs);
	s->cq = s->pd ? ibv_create_cq(id->verbs, 8, NULL, NULL, 0) : NULL;
	s->mr = s->cq ? ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
				   IBV_ACCESS_LOCAL_WRITE)
		      : NULL;
	CF_CHECK(s->mr != NULL, "pd, cq, mr: %s", cf_errname(errno));
	if (!s->mr)
		return false;
	memset(&attr, 0, sizeof(attr));
	attr.send_cq = attr.recv_cq = s->cq;
	attr.qp_type = type;
	attr.cap.max_send_wr = attr.cap.max_recv_wr = 4;
	attr.cap.max_send_sge = attr.cap.max_recv_sge = 1;
	attr.sq_sig_all = 1;
	CF_EXPECT_OK(cf_rc(rdma_create_qp(id, s->pd, &attr)), "rdma_create_qp");
	return id->qp != NULL;
}

void cm_side_free(struct cm_side *s, struct rdma_cm_id *id)
{
	if (id && id->qp)
		rdma_destroy_qp(id);
	if (s->mr)
		ibv_dereg_mr(s->mr);
	if (s->cq)
		ibv_destroy_cq(s->cq);
	if (s->pd)
		ibv_dealloc_pd(s->pd);
	memset(s, 0, sizeof(*s));
}

static int cm_post_recv(struct cm_side *s, struct ibv_qp *qp, size_t len)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)len, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* The client asks to connect with cp: the server's new id, the
 * CONNECT_REQUEST acknowledged (NULL: none came). */
static struct rdma_cm_id *cm_request(struct cm_pair *p,
				     struct rdma_conn_param *cp)
{
	struct rdma_cm_event *ev;
	struct rdma_cm_id *sid;

	CF_EXPECT_OK(cf_rc(rdma_connect(p->cid, cp)), "rdma_connect");
	ev = cm_expect(p->sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	if (!ev)
		return NULL;
	sid = ev->id;
	rdma_ack_cm_event(ev);
	return sid;
}

/*
 * Disconnect a connected pair: the initiator a (events on ach) calls
 * rdma_disconnect, the other side b (on bch) sees DISCONNECTED and calls
 * rdma_disconnect in turn, as rdma_disconnect(3) has both sides do; then
 * a sees DISCONNECTED.  IBA 12.9.6 has the DREQ answered with a DREP,
 * but not how soon: the kernel's CM sends it when b's application calls
 * rdma_disconnect or destroys its id (cma.c rdma_disconnect,
 * ib_send_cm_drep), ibemu at once; this order holds on both.
 */
static void cm_disconnect(struct rdma_cm_id *a, struct rdma_event_channel *ach,
			  struct rdma_cm_id *b, struct rdma_event_channel *bch)
{
	struct rdma_cm_event *ev;

	CF_EXPECT_OK(cf_rc(rdma_disconnect(a)), "rdma_disconnect");
	ev = cm_expect(bch, RDMA_CM_EVENT_DISCONNECTED, b);
	if (ev)
		rdma_ack_cm_event(ev);
	CF_EXPECT_OK(cf_rc(rdma_disconnect(b)),
		     "rdma_disconnect on the side that saw DISCONNECTED");
	ev = cm_expect(ach, RDMA_CM_EVENT_DISCONNECTED, a);
	if (ev)
		rdma_ack_cm_event(ev);
}

CF_TEST_IMPL(cm, connect_data_disconnect)
{
	struct cm_pair p;
	struct cm_side cs, ss;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct rdma_cm_id *sid = NULL;
	uint8_t req_pd[56], rep_pd[196];
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&cs, 0, sizeof(cs));
	memset(&ss, 0, sizeof(ss));
	if (!cm_pair_init(&p, RDMA_PS_TCP))
		return;
	if (!cm_side_qp(&cs, p.cid, IBV_QPT_RC))
		goto out;
	CF_CHECK(cf_qp_state(p.cid->qp) == IBV_QPS_INIT,
		 "rdma_create_qp: QP in %s, not INIT",
		 cf_state_name(cf_qp_state(p.cid->qp)));

	memset(&cp, 0, sizeof(cp));
	cm_fill(req_pd, sizeof(req_pd), 1);
	cp.private_data = req_pd;
	cp.private_data_len = sizeof(req_pd);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	cp.rnr_retry_count = 7;
	CF_EXPECT_OK(cf_rc(rdma_connect(p.cid, &cp)), "rdma_connect");

	ev = cm_expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	if (!ev)
		goto out;
	sid = ev->id;
	CF_CHECK(ev->listen_id == p.lid, "CONNECT_REQUEST: listen_id %p, "
		 "not the listener %p", (void *)ev->listen_id, (void *)p.lid);
	CF_CHECK(ev->param.conn.private_data_len >= sizeof(req_pd) &&
			 !memcmp(ev->param.conn.private_data, req_pd,
				 sizeof(req_pd)),
		 "CONNECT_REQUEST: private data not the REQ's 56 bytes "
		 "(%u bytes)", ev->param.conn.private_data_len);
	CF_CHECK(ev->param.conn.responder_resources == 1 &&
			 ev->param.conn.initiator_depth == 1,
		 "CONNECT_REQUEST: resources %u, depth %u; want 1, 1",
		 ev->param.conn.responder_resources,
		 ev->param.conn.initiator_depth);
	rdma_ack_cm_event(ev);
	if (!cm_side_qp(&ss, sid, IBV_QPT_RC))
		goto out;
	CF_EXPECT_OK(cm_post_recv(&ss, sid->qp, 64), "ibv_post_recv");
	memset(&cp, 0, sizeof(cp));
	cm_fill(rep_pd, sizeof(rep_pd), 2);
	cp.private_data = rep_pd;
	cp.private_data_len = sizeof(rep_pd);
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.rnr_retry_count = 7;
	CF_EXPECT_OK(cf_rc(rdma_accept(sid, &cp)), "rdma_accept");
	CF_CHECK(cf_qp_state(sid->qp) == IBV_QPS_RTS,
		 "rdma_accept: QP in %s, not RTS",
		 cf_state_name(cf_qp_state(sid->qp)));

	/* An id with a QP: librdmacm answers the REP itself and reports
	 * ESTABLISHED (manual 6.3). */
	ev = cm_expect(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.cid);
	if (!ev)
		goto out;
	CF_CHECK(ev->param.conn.private_data_len >= sizeof(rep_pd) &&
			 !memcmp(ev->param.conn.private_data, rep_pd,
				 sizeof(rep_pd)),
		 "ESTABLISHED: private data not the REP's 196 bytes");
	rdma_ack_cm_event(ev);
	CF_CHECK(cf_qp_state(p.cid->qp) == IBV_QPS_RTS,
		 "ESTABLISHED: QP in %s, not RTS",
		 cf_state_name(cf_qp_state(p.cid->qp)));
	ev = cm_expect(p.sch, RDMA_CM_EVENT_ESTABLISHED, sid);
	if (!ev)
		goto out;
	rdma_ack_cm_event(ev);

	cm_fill(cs.buf, 64, 3);
	sge.addr = (uintptr_t)cs.buf;
	sge.length = 64;
	sge.lkey = cs.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 2;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	CF_EXPECT_OK(ibv_post_send(p.cid->qp, &wr, &bad), "ibv_post_send");
	CF_CHECK(cf_poll_cq_wait(ss.cq, &wc, 1, CM_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS && wc.byte_len == 64,
		 "the SEND did not arrive whole");
	CF_CHECK(!memcmp(ss.buf, cs.buf, 64), "the SEND's data differs");
	CF_CHECK(cf_poll_cq_wait(cs.cq, &wc, 1, CM_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS,
		 "no successful send completion");

	cm_disconnect(p.cid, p.cch, sid, p.sch);
out:
	cm_side_free(&cs, p.cid);
	if (sid) {
		cm_side_free(&ss, sid);
		rdma_destroy_id(sid);
	}
	cm_pair_free(&p);
}

CF_TEST_IMPL(cm, private_data_sizes)
{
	struct cm_pair p;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct rdma_cm_id *sid = NULL;
	uint8_t pd[200];
	int ret;

	if (!cm_pair_init(&p, RDMA_PS_TCP))
		return;
	memset(&cp, 0, sizeof(cp));
	cm_fill(pd, sizeof(pd), 4);
	cp.private_data = pd;
	cp.private_data_len = 57;
	cp.qp_num = 0x123;
	cp.retry_count = 7;
	CF_EXPECT_ERR(cf_rc(rdma_connect(p.cid, &cp)), EINVAL,
		      "rdma_connect with 57 bytes of private data");
	cp.private_data_len = 56;
	sid = cm_request(&p, &cp);
	if (!sid)
		goto out;
	/* IBA 12.6.7: a REJ carries 148 bytes of private data. */
	CF_EXPECT_ERR(cf_rc(rdma_reject(sid, pd, 149)), EINVAL,
		      "rdma_reject with 149 bytes of private data");
	CF_EXPECT_OK(cf_rc(rdma_reject(sid, pd, 148)), "rdma_reject");
	ev = cm_expect(p.cch, RDMA_CM_EVENT_REJECTED, p.cid);
	if (!ev)
		goto out;
	/* IBA 12.6.7.2: the consumer rejected (reason 28) */
	CF_CHECK(ev->status == 28, "REJECTED: status %d, want 28",
		 ev->status);
	CF_CHECK(ev->param.conn.private_data_len >= 148 &&
			 !memcmp(ev->param.conn.private_data, pd, 148),
		 "REJECTED: private data not the REJ's 148 bytes");
	rdma_ack_cm_event(ev);
	rdma_destroy_id(sid);
	sid = NULL;
	cm_pair_free(&p);

	/*
	 * IBA 12.6.8: a REP carries 196 bytes, one more is refused.  What
	 * becomes of the request after a refused rdma_accept is the CM's
	 * choice (rdma_accept(3) does not say): the kernel's rejects it
	 * itself (cma.c rdma_accept, reason 28), ibemu's keeps it for the
	 * application to accept or reject.  Either way the client sees
	 * one REJECTED once the server rejects (EINVAL if it already is).
	 */
	if (!cm_pair_init(&p, RDMA_PS_TCP))
		return;
	cp.private_data_len = 56;
	sid = cm_request(&p, &cp);
	if (!sid)
		goto out;
	cp.private_data_len = 197;
	CF_EXPECT_ERR(cf_rc(rdma_accept(sid, &cp)), EINVAL,
		      "rdma_accept with 197 bytes of private data");
	ret = cf_rc(rdma_reject(sid, NULL, 0));
	CF_CHECK(ret == 0 || ret == EINVAL, "rdma_reject after a refused "
		 "rdma_accept: %s", cf_errname(ret));
	printf("\n    a refused rdma_accept %s the request ",
	       ret ? "rejected" : "kept");
	ev = cm_expect(p.cch, RDMA_CM_EVENT_REJECTED, p.cid);
	if (!ev)
		goto out;
	CF_CHECK(ev->status == 28, "REJECTED: status %d, want 28",
		 ev->status);
	rdma_ack_cm_event(ev);
out:
	if (sid)
		rdma_destroy_id(sid);
	cm_pair_free(&p);
}

CF_TEST_IMPL(cm, response_without_qp)
{
	struct cm_pair p;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct rdma_cm_id *sid = NULL;

	if (!cm_pair_init(&p, RDMA_PS_TCP))
		return;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x321;
	cp.responder_resources = 1;
	cp.initiator_depth = 1;
	cp.retry_count = 7;
	CF_EXPECT_OK(cf_rc(rdma_connect(p.cid, &cp)), "rdma_connect");
	ev = cm_expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	if (!ev)
		goto out;
	sid = ev->id;
	CF_CHECK(ev->param.conn.qp_num == 0x321,
		 "CONNECT_REQUEST: qp_num %#x, want 0x321",
		 ev->param.conn.qp_num);
	rdma_ack_cm_event(ev);
	cp.qp_num = 0x654;
	CF_EXPECT_OK(cf_rc(rdma_accept(sid, &cp)), "rdma_accept");
	/* No QP on the id: the application answers (manual 6.3) */
	ev = cm_expect(p.cch, RDMA_CM_EVENT_CONNECT_RESPONSE, p.cid);
	if (!ev)
		goto out;
	CF_CHECK(ev->param.conn.qp_num == 0x654,
		 "CONNECT_RESPONSE: qp_num %#x, want 0x654",
		 ev->param.conn.qp_num);
	rdma_ack_cm_event(ev);
	CF_EXPECT_OK(cf_rc(rdma_establish(p.cid)), "rdma_establish");
	ev = cm_expect(p.sch, RDMA_CM_EVENT_ESTABLISHED, sid);
	if (ev)
		rdma_ack_cm_event(ev);
	cm_disconnect(sid, p.sch, p.cid, p.cch);
out:
	if (sid)
		rdma_destroy_id(sid);
	cm_pair_free(&p);
}

CF_TEST_IMPL(cm, no_listener)
{
	struct cm_pair p;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;

	if (!cm_pair_init(&p, RDMA_PS_TCP))
		return;
	/* Nobody listens once the listener is gone. */
	rdma_destroy_id(p.lid);
	p.lid = NULL;
	memset(&cp, 0, sizeof(cp));
	cp.qp_num = 0x123;
	cp.retry_count = 7;
	CF_EXPECT_OK(cf_rc(rdma_connect(p.cid, &cp)), "rdma_connect");
	ev = cm_next(p.cch);
	CF_CHECK(ev && (ev->event == RDMA_CM_EVENT_REJECTED ||
			ev->event == RDMA_CM_EVENT_UNREACHABLE),
		 "connect to nobody: %s, want REJECTED or UNREACHABLE",
		 ev ? rdma_event_str(ev->event) : "no event");
	if (ev)
		rdma_ack_cm_event(ev);
	cm_pair_free(&p);
}

CF_TEST_IMPL(cm, ud)
{
	struct cm_pair p;
	struct cm_side cs, ss;
	struct rdma_cm_event *ev;
	struct rdma_conn_param cp;
	struct rdma_cm_id *sid = NULL;
	struct ibv_ah *ah = NULL;
	uint32_t qpn = 0, qkey = 0;
	uint8_t pd[16];
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;

	memset(&cs, 0, sizeof(cs));
	memset(&ss, 0, sizeof(ss));
	if (!cm_pair_init(&p, RDMA_PS_UDP))
		return;
	if (!cm_side_qp(&cs, p.cid, IBV_QPT_UD))
		goto out;
	/* A UD QP has no connection to wait for: RTS at once. */
	CF_CHECK(cf_qp_state(p.cid->qp) == IBV_QPS_RTS,
		 "rdma_create_qp (UD): QP in %s, not RTS",
		 cf_state_name(cf_qp_state(p.cid->qp)));
	memset(&cp, 0, sizeof(cp));
	cm_fill(pd, sizeof(pd), 5);
	cp.private_data = pd;
	cp.private_data_len = sizeof(pd);
	CF_EXPECT_OK(cf_rc(rdma_connect(p.cid, &cp)), "rdma_connect (UD)");
	ev = cm_expect(p.sch, RDMA_CM_EVENT_CONNECT_REQUEST, NULL);
	if (!ev)
		goto out;
	sid = ev->id;
	CF_CHECK(ev->param.ud.private_data_len >= sizeof(pd) &&
			 !memcmp(ev->param.ud.private_data, pd, sizeof(pd)),
		 "CONNECT_REQUEST (UD): private data differs");
	rdma_ack_cm_event(ev);
	if (!cm_side_qp(&ss, sid, IBV_QPT_UD))
		goto out;
	CF_EXPECT_OK(cm_post_recv(&ss, sid->qp, 40 + 64), "ibv_post_recv");
	CF_EXPECT_OK(cf_rc(rdma_accept(sid, NULL)), "rdma_accept (UD)");
	ev = cm_expect(p.cch, RDMA_CM_EVENT_ESTABLISHED, p.cid);
	if (!ev)
		goto out;
	qpn = ev->param.ud.qp_num;
	qkey = ev->param.ud.qkey;
	CF_CHECK(qpn == sid->qp->qp_num, "ESTABLISHED (UD): qp_num %#x, "
		 "the server's QP is %#x", qpn, sid->qp->qp_num);
	CF_CHECK(qkey == RDMA_UDP_QKEY, "ESTABLISHED (UD): qkey %#x, want "
		 "%#x", qkey, RDMA_UDP_QKEY);
	ah = ibv_create_ah(cs.pd, &ev->param.ud.ah_attr);
	CF_CHECK(ah != NULL, "ibv_create_ah from the event's ah_attr: %s",
		 cf_errname(errno));
	rdma_ack_cm_event(ev);
	if (!ah)
		goto out;
	cm_fill(cs.buf, 64, 6);
	sge.addr = (uintptr_t)cs.buf;
	sge.length = 64;
	sge.lkey = cs.mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = qpn;
	wr.wr.ud.remote_qkey = qkey;
	CF_EXPECT_OK(ibv_post_send(p.cid->qp, &wr, &bad), "ibv_post_send");
	CF_CHECK(cf_poll_cq_wait(ss.cq, &wc, 1, CM_WAIT_MS) == 1 &&
			 wc.status == IBV_WC_SUCCESS &&
			 wc.byte_len == 40 + 64 &&
			 !memcmp(ss.buf + 40, cs.buf, 64),
		 "the datagram did not arrive whole");
out:
	if (ah)
		ibv_destroy_ah(ah);
	cm_side_free(&cs, p.cid);
	if (sid) {
		cm_side_free(&ss, sid);
		rdma_destroy_id(sid);
	}
	cm_pair_free(&p);
}

CF_TEST_IMPL(cm, nonblocking_channel)
{
	struct rdma_event_channel *ch;
	struct rdma_cm_event *ev;
	int fl;

	ch = cm_channel();
	if (!ch)
		return;
	fl = fcntl(ch->fd, F_GETFL);
	CF_CHECK(fl >= 0 && fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK) == 0,
		 "O_NONBLOCK on the channel: %s", cf_errname(errno));
	errno = 0;
	CF_CHECK(rdma_get_cm_event(ch, &ev) == -1 && errno == EAGAIN,
		 "rdma_get_cm_event on an empty non-blocking channel: %s",
		 cf_errname(errno));
	rdma_destroy_event_channel(ch);
}

struct cm_destroyer {
	struct rdma_cm_id *id;
	atomic_bool done;
};

static void *cm_destroy_thread(void *arg)
{
	struct cm_destroyer *d = arg;

	rdma_destroy_id(d->id);
	atomic_store(&d->done, true);
	return NULL;
}

/* rdma_destroy_id(3): "Users must free any associated QP with the
 * rdma_cm_id before calling this routine and ack all related events." */
CF_TEST_IMPL(cm, destroy_waits_for_ack)
{
	struct rdma_event_channel *ch;
	struct sockaddr_storage ss;
	struct rdma_cm_event *ev;
	struct cm_destroyer d = { 0 };
	pthread_t t;

	ch = cm_channel();
	if (!ch)
		return;
	CF_CHECK(cm_addr(&ss, 0), "-a %s: not a numeric address", cf_cm_addr);
	if (rdma_create_id(ch, &d.id, NULL, RDMA_PS_TCP)) {
		CF_CHECK(0, "rdma_create_id: %s", cf_errname(errno));
		goto out;
	}
	CF_EXPECT_OK(cf_rc(rdma_resolve_addr(d.id, NULL,
					     (struct sockaddr *)&ss, 2000)),
		     "rdma_resolve_addr");
	ev = cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, d.id);
	if (!ev) {
		rdma_destroy_id(d.id);
		goto out;
	}
	if (pthread_create(&t, NULL, cm_destroy_thread, &d)) {
		rdma_ack_cm_event(ev);
		rdma_destroy_id(d.id);
		goto out;
	}
	usleep(200 * 1000);
	CF_CHECK(!atomic_load(&d.done),
		 "rdma_destroy_id returned with an event not acknowledged");
	rdma_ack_cm_event(ev);
	pthread_join(t, NULL);
	CF_CHECK(atomic_load(&d.done), "rdma_destroy_id did not return");
out:
	rdma_destroy_event_channel(ch);
}
