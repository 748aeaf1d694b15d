// SPDX-License-Identifier: MIT
/*
 * XRC, the extended reliable connected transport (IBA Annex A14):
 * ibv_open_xrcd(3)/ibv_close_xrcd, ibv_create_srq_ex(3) of type
 * IBV_SRQT_XRC and ibv_get_srq_num(3), ibv_create_qp_ex(3) of types
 * IBV_QPT_XRC_SEND (initiator) and IBV_QPT_XRC_RECV (target),
 * ibv_open_qp(3); and, between two processes, SENDs that land in the XRC
 * SRQ each request names (wr.qp_type.xrc.remote_srqn,
 * ibv_wr_set_xrc_srqn), a request naming an SRQ of another domain, and
 * RDMA over XRC.  Every test is skipped on a device without
 * IBV_DEVICE_XRC.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "peer.h"
#include "tests.h"

#define WAIT_MS 5000

#define NEED_XRC()							\
	do {								\
		if (!(cf.dev->device_cap_flags & IBV_DEVICE_XRC))	\
			SKIP("device lacks IBV_DEVICE_XRC (no XRC)");	\
	} while (0)

static struct ibv_xrcd *open_xrcd(struct ibv_context *ctx, int fd,
				  int oflags)
{
	struct ibv_xrcd_init_attr xa;

	memset(&xa, 0, sizeof(xa));
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	xa.fd = fd;
	xa.oflags = oflags;
	return ibv_open_xrcd(ctx, &xa);
}

static struct ibv_srq *make_xrc_srq(struct ibv_context *ctx,
				    struct ibv_pd *pd, struct ibv_xrcd *xrcd,
				    struct ibv_cq *cq, uint32_t max_wr)
{
	struct ibv_srq_init_attr_ex sa;

	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = max_wr;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = xrcd;
	sa.cq = cq;
	sa.pd = pd;
	return ibv_create_srq_ex(ctx, &sa);
}

static struct ibv_qp *make_xrc_recv_qp(struct ibv_context *ctx,
				       struct ibv_xrcd *xrcd)
{
	struct ibv_qp_init_attr_ex qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_XRCD;
	qa.xrcd = xrcd;
	return ibv_create_qp_ex(ctx, &qa);
}

static struct ibv_qp *make_xrc_send_qp(struct ibv_context *ctx,
				       struct ibv_pd *pd, struct ibv_cq *cq,
				       uint64_t send_ops_flags)
{
	struct ibv_qp_init_attr_ex qa;

	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_SEND;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = pd;
	qa.send_cq = cq;
	qa.cap.max_send_wr = 16;
	qa.cap.max_send_sge = 1;
	if (send_ops_flags) {
		qa.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		qa.send_ops_flags = send_ops_flags;
	}
	return ibv_create_qp_ex(ctx, &qa);
}

/* RESET to INIT, as for RC (IBA 11.2.5.2). */
static int xrc_qp_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.pkey_index = 0;
	a.port_num = (uint8_t)cf_port;
	a.qp_access_flags = (unsigned int)access;
	return cf_rc(ibv_modify_qp(qp, &a,
				   IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					   IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

/* ---- one process ---- */

/* ibv_open_xrcd(3): fd -1 with O_CREAT is a private domain; a file's
 * domain is opened again by the same file, refused with O_CREAT|O_EXCL,
 * and not created without O_CREAT. */
CF_TEST_IMPL(xrc, open_close)
{
	char path[] = "/tmp/ibemu-xrcd-XXXXXX";
	struct ibv_xrcd *a, *b, *c;
	int fd, fd2;

	NEED_XRC();
	a = open_xrcd(cf.ctx, -1, O_CREAT);
	CF_CHECK(a != NULL, "fd -1, O_CREAT: %s", cf_errname(errno));
	if (a)
		CF_EXPECT_OK(cf_rc(ibv_close_xrcd(a)), "ibv_close_xrcd");
	errno = 0;
	a = open_xrcd(cf.ctx, -1, 0);
	CF_CHECK(!a && errno == EINVAL, "fd -1 without O_CREAT: %s",
		 a ? "opened" : cf_errname(errno));
	if (a)
		ibv_close_xrcd(a);

	fd = mkstemp(path);
	CF_CHECK(fd >= 0, "mkstemp: %s", cf_errname(errno));
	if (fd < 0)
		return;
	fd2 = open(path, O_RDONLY);
	errno = 0;
	a = open_xrcd(cf.ctx, fd, 0);
	CF_CHECK(!a && errno == EINVAL, "a new file without O_CREAT: %s",
		 a ? "opened" : cf_errname(errno));
	if (a)
		ibv_close_xrcd(a);
	a = open_xrcd(cf.ctx, fd, O_CREAT);
	CF_CHECK(a != NULL, "file, O_CREAT: %s", cf_errname(errno));
	/* Another descriptor of the same inode finds the same domain. */
	b = open_xrcd(cf.ctx, fd2, 0);
	CF_CHECK(b != NULL, "same inode again without O_CREAT: %s",
		 cf_errname(errno));
	errno = 0;
	c = open_xrcd(cf.ctx, fd2, O_CREAT | O_EXCL);
	CF_CHECK(!c && errno == EINVAL,
		 "O_CREAT|O_EXCL on an inode with a domain: %s",
		 c ? "opened" : cf_errname(errno));
	if (c)
		ibv_close_xrcd(c);
	if (b)
		CF_EXPECT_OK(cf_rc(ibv_close_xrcd(b)), "close the second");
	if (a)
		CF_EXPECT_OK(cf_rc(ibv_close_xrcd(a)), "close the first");
	close(fd2);
	close(fd);
	unlink(path);
}

/* ibv_close_xrcd(3) "may fail if any other resource is still
 * associated": a private domain with an SRQ cannot close. */
CF_TEST_IMPL(xrc, close_busy)
{
	struct ibv_xrcd *x;
	struct ibv_srq *srq;

	NEED_XRC();
	x = open_xrcd(cf.ctx, -1, O_CREAT);
	CF_CHECK(x != NULL, "ibv_open_xrcd: %s", cf_errname(errno));
	if (!x)
		return;
	srq = make_xrc_srq(cf.ctx, cf.pd, x, cf.cq, 4);
	CF_CHECK(srq != NULL, "XRC SRQ: %s", cf_errname(errno));
	if (srq) {
		CF_EXPECT_ERR(cf_rc(ibv_close_xrcd(x)), EBUSY,
			      "ibv_close_xrcd with an SRQ");
		CF_EXPECT_OK(cf_rc(ibv_destroy_srq(srq)), "ibv_destroy_srq");
	}
	CF_EXPECT_OK(cf_rc(ibv_close_xrcd(x)), "ibv_close_xrcd");
}

/* An XRC SRQ needs its domain and CQ; each has a number of its own
 * (ibv_get_srq_num(3)). */
CF_TEST_IMPL(xrc, srq_num)
{
	struct ibv_srq_init_attr_ex sa;
	struct ibv_srq *s1, *s2, *bad;
	uint32_t n1 = 0, n2 = 0;
	struct ibv_xrcd *x;

	NEED_XRC();
	x = open_xrcd(cf.ctx, -1, O_CREAT);
	CF_CHECK(x != NULL, "ibv_open_xrcd: %s", cf_errname(errno));
	if (!x)
		return;
	s1 = make_xrc_srq(cf.ctx, cf.pd, x, cf.cq, 4);
	s2 = make_xrc_srq(cf.ctx, cf.pd, x, cf.cq, 4);
	CF_CHECK(s1 && s2, "XRC SRQs: %s", cf_errname(errno));
	if (s1 && s2) {
		CF_EXPECT_OK(cf_rc(ibv_get_srq_num(s1, &n1)), "srq_num 1");
		CF_EXPECT_OK(cf_rc(ibv_get_srq_num(s2, &n2)), "srq_num 2");
		CF_CHECK(n1 != n2 && n1 <= 0xffffff && n2 <= 0xffffff,
			 "SRQ numbers 0x%x and 0x%x", n1, n2);
	}
	memset(&sa, 0, sizeof(sa));
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	sa.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
		       IBV_SRQ_INIT_ATTR_PD;
	sa.srq_type = IBV_SRQT_XRC;
	sa.xrcd = x;
	sa.pd = cf.pd;
	bad = ibv_create_srq_ex(cf.ctx, &sa);
	CF_CHECK(!bad, "an XRC SRQ without a CQ was created");
	if (bad)
		ibv_destroy_srq(bad);
	if (s2)
		ibv_destroy_srq(s2);
	if (s1)
		ibv_destroy_srq(s1);
	CF_EXPECT_OK(cf_rc(ibv_close_xrcd(x)), "ibv_close_xrcd");
}

/* IBA A14: the target QP is made on a domain and has no receive queue
 * of its own; neither has the initiator. */
CF_TEST_IMPL(xrc, qp_create)
{
	struct ibv_qp_init_attr_ex qa;
	struct ibv_qp *t, *s, *bad;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr q;
	struct ibv_xrcd *x;
	struct ibv_recv_wr rwr, *bad_rwr;

	NEED_XRC();
	x = open_xrcd(cf.ctx, -1, O_CREAT);
	CF_CHECK(x != NULL, "ibv_open_xrcd: %s", cf_errname(errno));
	if (!x)
		return;
	memset(&qa, 0, sizeof(qa));
	qa.qp_type = IBV_QPT_XRC_RECV;
	qa.comp_mask = IBV_QP_INIT_ATTR_PD;
	qa.pd = cf.pd;
	bad = ibv_create_qp_ex(cf.ctx, &qa);
	CF_CHECK(!bad, "an XRC target QP without a domain was created");
	if (bad)
		ibv_destroy_qp(bad);
	t = make_xrc_recv_qp(cf.ctx, x);
	CF_CHECK(t != NULL, "XRC_RECV QP: %s", cf_errname(errno));
	s = make_xrc_send_qp(cf.ctx, cf.pd, cf.cq, 0);
	CF_CHECK(s != NULL, "XRC_SEND QP: %s", cf_errname(errno));
	memset(&rwr, 0, sizeof(rwr));
	if (t) {
		CF_CHECK(t->qp_type == IBV_QPT_XRC_RECV, "type %d",
			 t->qp_type);
		CF_EXPECT_OK(cf_rc(ibv_query_qp(t, &q, IBV_QP_STATE, &ia)),
			     "query target");
		CF_CHECK(q.qp_state == IBV_QPS_RESET, "target in %s",
			 cf_state_name(q.qp_state));
		CF_EXPECT_OK(xrc_qp_init(t, IBV_ACCESS_REMOTE_WRITE),
			     "target to INIT");
		CF_CHECK(ibv_post_recv(t, &rwr, &bad_rwr) != 0,
			 "post_recv on an XRC target QP succeeded");
		CF_EXPECT_ERR(cf_rc(ibv_close_xrcd(x)), EBUSY,
			      "ibv_close_xrcd with a target QP");
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(t)), "destroy target");
	}
	if (s) {
		CF_CHECK(s->qp_type == IBV_QPT_XRC_SEND, "type %d",
			 s->qp_type);
		CF_EXPECT_OK(xrc_qp_init(s, 0), "initiator to INIT");
		CF_CHECK(ibv_post_recv(s, &rwr, &bad_rwr) != 0,
			 "post_recv on an XRC initiator QP succeeded");
		CF_EXPECT_OK(cf_rc(ibv_destroy_qp(s)), "destroy initiator");
	}
	CF_EXPECT_OK(cf_rc(ibv_close_xrcd(x)), "ibv_close_xrcd");
}

/* ibv_open_qp(3): another handle on a target QP of the domain; the QP
 * lives while any handle does. */
CF_TEST_IMPL(xrc, open_qp)
{
	struct ibv_qp_open_attr oa;
	struct ibv_qp_init_attr ia;
	struct ibv_qp_attr q;
	struct ibv_qp *t, *o;
	struct ibv_xrcd *x;

	NEED_XRC();
	x = open_xrcd(cf.ctx, -1, O_CREAT);
	CF_CHECK(x != NULL, "ibv_open_xrcd: %s", cf_errname(errno));
	if (!x)
		return;
	t = make_xrc_recv_qp(cf.ctx, x);
	CF_CHECK(t != NULL, "XRC_RECV QP: %s", cf_errname(errno));
	if (!t)
		goto out;
	memset(&oa, 0, sizeof(oa));
	oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
		       IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT;
	oa.qp_num = t->qp_num;
	oa.xrcd = x;
	oa.qp_type = IBV_QPT_XRC_RECV;
	oa.qp_context = &oa;
	o = ibv_open_qp(cf.ctx, &oa);
	CF_CHECK(o != NULL, "ibv_open_qp: %s", cf_errname(errno));
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(t)), "destroy the creator's handle");
	if (!o)
		goto out;
	CF_CHECK(o->qp_num == oa.qp_num && o->qp_context == &oa,
		 "opened handle: qp_num 0x%x", o->qp_num);
	CF_EXPECT_OK(xrc_qp_init(o, IBV_ACCESS_REMOTE_WRITE),
		     "INIT through the opened handle");
	memset(&q, 0, sizeof(q));
	CF_EXPECT_OK(cf_rc(ibv_query_qp(o, &q, IBV_QP_STATE, &ia)), "query");
	CF_CHECK(q.qp_state == IBV_QPS_INIT, "state %s",
		 cf_state_name(q.qp_state));
	CF_EXPECT_OK(cf_rc(ibv_destroy_qp(o)), "destroy the opened handle");
out:
	CF_EXPECT_OK(cf_rc(ibv_close_xrcd(x)), "ibv_close_xrcd");
}

/* ---- two processes: the parent sends, the child is the target ---- */

#define XRC_NSRQ 3 /* SRQ 0, 1 in the domain; SRQ 2 in another one */
#define XRC_PSN_TARGET 0x2222
#define XRC_PSN_SEND 0x1111
#define XRC_RECVS 8

struct xrc_side {
	struct ibv_xrcd *xrcd, *other;
	struct ibv_cq *cq[XRC_NSRQ];
	struct ibv_srq *srq[XRC_NSRQ];
	struct ibv_qp *qp; /* target (child) or initiator (parent) */
	uint32_t srqn[XRC_NSRQ]; /* child's, as the parent learns them */
	uint32_t peer_qpn;
};

static void xrc_av(const struct cf_ep *ep, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = ep->peer.lid;
	ah->port_num = (uint8_t)cf_port;
	if (ep->port.link_layer == IBV_LINK_LAYER_ETHERNET ||
	    !ep->peer.lid) {
		ah->is_global = 1;
		memcpy(ah->grh.dgid.raw, ep->peer.gid, 16);
		ah->grh.sgid_index = (uint8_t)cf_gid_index;
		ah->grh.hop_limit = 1;
	}
}

/* INIT to RTR to RTS with the attributes each XRC side requires (IBA
 * 11.2.5.2 as A14 applies it; as ibv_xsrq_pingpong does). */
static int xrc_qp_connect(struct cf_ep *ep, struct xrc_side *x)
{
	bool target = ep->side == CF_CHILD;
	struct ibv_qp_attr a;
	int mask, ret;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = ep->port.active_mtu < ep->peer.mtu
			     ? ep->port.active_mtu
			     : (enum ibv_mtu)ep->peer.mtu;
	a.dest_qp_num = x->peer_qpn;
	a.rq_psn = target ? XRC_PSN_SEND : XRC_PSN_TARGET;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	xrc_av(ep, &a.ah_attr);
	mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
	       IBV_QP_RQ_PSN;
	if (target)
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	ret = cf_rc(ibv_modify_qp(x->qp, &a, mask));
	EP_REQUIRE(ep, !ret, "%s: XRC QP to RTR: %s", cf_side_name(ep),
		   cf_errname(ret));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.sq_psn = target ? XRC_PSN_TARGET : XRC_PSN_SEND;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN;
	if (!target)
		mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	ret = cf_rc(ibv_modify_qp(x->qp, &a, mask));
	EP_REQUIRE(ep, !ret, "%s: XRC QP to RTS: %s", cf_side_name(ep),
		   cf_errname(ret));
	return 0;
}

/* The child's domain (and a second one), a CQ and an XRC SRQ per slot,
 * and the target QP in INIT. */
static int xrc_target_setup(struct cf_ep *ep, struct xrc_side *x)
{
	int i;

	x->xrcd = open_xrcd(ep->ctx, -1, O_CREAT);
	x->other = open_xrcd(ep->ctx, -1, O_CREAT);
	EP_REQUIRE(ep, x->xrcd && x->other, "ibv_open_xrcd: %s",
		   strerror(errno));
	for (i = 0; i < XRC_NSRQ; i++) {
		x->cq[i] = ibv_create_cq(ep->ctx, 64, NULL, NULL, 0);
		EP_REQUIRE(ep, x->cq[i], "ibv_create_cq: %s",
			   strerror(errno));
		x->srq[i] = make_xrc_srq(ep->ctx, ep->pd,
					 i < 2 ? x->xrcd : x->other, x->cq[i],
					 XRC_RECVS);
		EP_REQUIRE(ep, x->srq[i], "XRC SRQ %d: %s", i,
			   strerror(errno));
		EP_REQUIRE(ep, !ibv_get_srq_num(x->srq[i], &x->srqn[i]),
			   "ibv_get_srq_num");
	}
	x->qp = make_xrc_recv_qp(ep->ctx, x->xrcd);
	EP_REQUIRE(ep, x->qp, "XRC_RECV QP: %s", strerror(errno));
	EP_REQUIRE(ep, !xrc_qp_init(x->qp, ep->p->qp_access),
		   "target to INIT");
	return 0;
}

static void xrc_teardown(struct xrc_side *x)
{
	int i;

	if (x->qp)
		ibv_destroy_qp(x->qp);
	for (i = 0; i < XRC_NSRQ; i++) {
		if (x->srq[i])
			ibv_destroy_srq(x->srq[i]);
		if (x->cq[i])
			ibv_destroy_cq(x->cq[i]);
	}
	if (x->other)
		ibv_close_xrcd(x->other);
	if (x->xrcd)
		ibv_close_xrcd(x->xrcd);
}

/*
 * Both sides: the skip when the device has no XRC, the objects, the
 * exchange of QP and SRQ numbers, and both QPs in RTS.  0, 1 (skipped)
 * or -1.
 */
static int xrc_setup(struct cf_ep *ep, struct xrc_side *x,
		     uint64_t send_ops_flags)
{
	uint64_t v;
	int i;

	memset(x, 0, sizeof(*x));
	if (!(ep->dev->device_cap_flags & IBV_DEVICE_XRC)) {
		cf_ep_skip(ep, "device lacks IBV_DEVICE_XRC (no XRC)");
		return 1;
	}
	if (ep->side == CF_CHILD) {
		if (xrc_target_setup(ep, x))
			return -1;
		if (cf_ep_send_val(ep, x->qp->qp_num))
			return -1;
		for (i = 0; i < XRC_NSRQ; i++)
			if (cf_ep_send_val(ep, x->srqn[i]))
				return -1;
		if (cf_ep_recv_val(ep, &v, WAIT_MS))
			return -1;
		x->peer_qpn = (uint32_t)v;
	} else {
		x->qp = make_xrc_send_qp(ep->ctx, ep->pd, ep->cq,
					 send_ops_flags);
		EP_REQUIRE(ep, x->qp, "XRC_SEND QP: %s", strerror(errno));
		EP_REQUIRE(ep, !xrc_qp_init(x->qp, 0), "initiator to INIT");
		if (cf_ep_recv_val(ep, &v, WAIT_MS))
			return -1;
		x->peer_qpn = (uint32_t)v;
		for (i = 0; i < XRC_NSRQ; i++) {
			if (cf_ep_recv_val(ep, &v, WAIT_MS))
				return -1;
			x->srqn[i] = (uint32_t)v;
		}
		if (cf_ep_send_val(ep, x->qp->qp_num))
			return -1;
	}
	if (xrc_qp_connect(ep, x))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

static int xrc_post_srq_recv(struct cf_ep *ep, struct ibv_srq *srq,
			     size_t off, uint32_t len, uint64_t wr_id)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge = {
		.addr = (uintptr_t)ep->buf + off,
		.length = len,
		.lkey = ep->mr->lkey,
	};

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	EP_REQUIRE(ep, !ibv_post_srq_recv(srq, &wr, &bad),
		   "ibv_post_srq_recv");
	return 0;
}

/* One SEND (or RDMA op) from the initiator, naming the XRC SRQ srqn. */
static int xrc_post(struct cf_ep *ep, struct xrc_side *x,
		    enum ibv_wr_opcode op, size_t off, uint32_t len,
		    uint32_t srqn, uint64_t roff, uint64_t wr_id)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;

	cf_ep_send_wr(ep, &wr, &sge, op, off, len, wr_id);
	wr.qp_type.xrc.remote_srqn = srqn;
	wr.wr.rdma.remote_addr = ep->peer.addr + roff;
	wr.wr.rdma.rkey = ep->peer.rkey;
	EP_REQUIRE(ep, !ibv_post_send(x->qp, &wr, &bad), "ibv_post_send");
	return 0;
}

/* xrc_post, then its completion, which must be a success of wc_op. */
static int xrc_do(struct cf_ep *ep, struct xrc_side *x, enum ibv_wr_opcode op,
		  size_t off, uint32_t len, uint32_t srqn, uint64_t roff,
		  uint64_t wr_id, enum ibv_wc_opcode wc_op, const char *what)
{
	struct ibv_wc wc;
	int got;

	if (xrc_post(ep, x, op, off, len, srqn, roff, wr_id))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, wr_id, wc_op, what);
	return 0;
}

/* A receive completion of the target, checked. */
static void xrc_expect_recv(struct cf_ep *ep, struct xrc_side *x, int i,
			    uint64_t wr_id, uint32_t len, const char *what)
{
	struct ibv_wc wc;
	int got = cf_poll_cq_wait(x->cq[i], &wc, 1, WAIT_MS);

	if (!cf_ep_wc_ok(ep, &wc, got, wr_id, IBV_WC_RECV, what))
		return;
	EP_CHECK(ep, wc.byte_len == len, "%s: byte_len %u, sent %u", what,
		 wc.byte_len, len);
	EP_CHECK(ep, wc.qp_num == x->qp->qp_num,
		 "%s: qp_num 0x%x, the target QP is 0x%x", what, wc.qp_num,
		 x->qp->qp_num);
}

/*
 * IBA A14: SENDs of several sizes land in the SRQ the requests name,
 * complete on that SRQ's CQ with the target QP's number, data intact.
 */
CF_BODY_IMPL(xrc_ops, send)
{
	static const uint32_t sizes[] = { 1, 4097, 65536 };
	const size_t slot = 128 << 10;
	struct xrc_side x;
	size_t i;
	int ret;

	ret = xrc_setup(ep, &x, 0);
	if (ret)
		goto out;
	ret = -1;
	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		if (ep->side == CF_CHILD) {
			memset(ep->buf + i * slot, 0xee, slot);
			if (xrc_post_srq_recv(ep, x.srq[0], i * slot, slot, i))
				goto out;
		}
	}
	if (cf_ep_sync(ep, WAIT_MS))
		goto out;
	for (i = 0; i < CF_ARRAY_SIZE(sizes); i++) {
		if (ep->side == CF_CHILD) {
			xrc_expect_recv(ep, &x, 0, i, sizes[i], "XRC SEND");
			EP_CHECK(ep, cf_pattern_check(ep->buf + i * slot,
						      sizes[i], 70 + i) < 0,
				 "XRC SEND %u: data differs", sizes[i]);
			EP_CHECK(ep, cf_bytes_check(ep->buf + i * slot +
							    sizes[i],
						    64, 0xee) < 0,
				 "XRC SEND %u: written past the end",
				 sizes[i]);
			continue;
		}
		cf_pattern_fill(ep->buf, sizes[i], 70 + i);
		if (xrc_do(ep, &x, IBV_WR_SEND, 0, sizes[i], x.srqn[0], 0, i,
			   IBV_WC_SEND, "XRC SEND"))
			goto out;
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	xrc_teardown(&x);
	return ret < 0 ? -1 : 0;
}

/* IBA A14: one target QP serves every SRQ of its domain; each request
 * goes to the SRQ it names, on that SRQ's CQ. */
CF_BODY_IMPL(xrc_ops, two_srqs)
{
	const uint32_t len = 3000;
	struct xrc_side x;
	int ret, i;

	ret = xrc_setup(ep, &x, 0);
	if (ret)
		goto out;
	ret = -1;
	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0xee, 2 * 8192);
		if (xrc_post_srq_recv(ep, x.srq[0], 0, 8192, 10) ||
		    xrc_post_srq_recv(ep, x.srq[1], 8192, 8192, 11))
			goto out;
	}
	if (cf_ep_sync(ep, WAIT_MS))
		goto out;
	if (ep->side == CF_CHILD) {
		/* The second SRQ was named first. */
		xrc_expect_recv(ep, &x, 1, 11, len, "SEND to SRQ 1");
		xrc_expect_recv(ep, &x, 0, 10, len + 1, "SEND to SRQ 0");
		EP_CHECK(ep, cf_pattern_check(ep->buf + 8192, len, 81) < 0,
			 "SRQ 1's buffer does not hold what was sent to it");
		EP_CHECK(ep, cf_pattern_check(ep->buf, len + 1, 80) < 0,
			 "SRQ 0's buffer does not hold what was sent to it");
	} else {
		for (i = 1; i >= 0; i--) {
			cf_pattern_fill(ep->buf + i * 8192, len + 1 - i,
					80 + i);
			if (xrc_do(ep, &x, IBV_WR_SEND, i * 8192, len + 1 - i,
				   x.srqn[i], 0, i, IBV_WC_SEND, "XRC SEND"))
				goto out;
		}
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	xrc_teardown(&x);
	return ret < 0 ? -1 : 0;
}

/*
 * A request naming an SRQ the target QP may not use (arg 0: an SRQ of
 * another domain; arg 1: an SRQ destroyed) is an invalid request (IBA
 * A14, 9.7.5.2.2): the requester completes it in error with
 * IBV_WC_REM_INV_REQ_ERR and nothing is received.
 */
CF_BODY_IMPL(xrc_ops, wrong_srqn)
{
	struct xrc_side x;
	struct ibv_wc wc;
	uint64_t v;
	int ret, got;

	ret = xrc_setup(ep, &x, 0);
	if (ret)
		goto out;
	ret = -1;
	if (ep->side == CF_CHILD) {
		if (xrc_post_srq_recv(ep, x.srq[2], 0, 4096, 20) ||
		    xrc_post_srq_recv(ep, x.srq[0], 0, 4096, 21))
			goto out;
		if (ep->arg == 1) {
			EP_CHECK(ep, !ibv_destroy_srq(x.srq[1]),
				 "ibv_destroy_srq");
			x.srq[1] = NULL;
		}
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			goto out;
		EP_CHECK(ep, ibv_poll_cq(x.cq[2], 1, &wc) == 0 &&
				     ibv_poll_cq(x.cq[1], 1, &wc) == 0,
			 "a request naming a foreign SRQ was received");
	} else {
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		v = x.srqn[ep->arg == 1 ? 1 : 2];
		if (xrc_post(ep, &x, IBV_WR_SEND, 0, 64, (uint32_t)v, 0, 7))
			goto out;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 7, IBV_WC_REM_INV_REQ_ERR, -1,
				"XRC SEND naming a foreign SRQ");
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
	}
	ret = 0;
out:
	xrc_teardown(&x);
	return ret;
}

/* RDMA WRITE and READ over XRC (IBA A14): checked against the PD of the
 * SRQ named, no receive consumed. */
CF_BODY_IMPL(xrc_ops, rdma)
{
	const uint32_t len = 10000;
	const size_t roff = 4096, loff = 1 << 20;
	struct xrc_side x;
	struct ibv_wc wc;
	int ret;

	ret = xrc_setup(ep, &x, 0);
	if (ret)
		goto out;
	ret = -1;
	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0xee, roff + len + 4096);
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			goto out;
		EP_CHECK(ep, cf_bytes_check(ep->buf, roff, 0xee) < 0,
			 "RDMA WRITE wrote before remote_addr");
		EP_CHECK(ep, cf_pattern_check(ep->buf + roff, len, 90) < 0,
			 "RDMA WRITE over XRC: data differs");
		EP_CHECK(ep, cf_bytes_check(ep->buf + roff + len, 64, 0xee) <
				     0,
			 "RDMA WRITE wrote past the end");
		EP_CHECK(ep, ibv_poll_cq(x.cq[0], 1, &wc) == 0,
			 "RDMA WRITE made a completion at the target");
	} else {
		cf_pattern_fill(ep->buf, len, 90);
		memset(ep->buf + loff, 0, len);
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		if (xrc_do(ep, &x, IBV_WR_RDMA_WRITE, 0, len, x.srqn[0], roff,
			   1, IBV_WC_RDMA_WRITE, "RDMA WRITE") ||
		    xrc_do(ep, &x, IBV_WR_RDMA_READ, loff, len, x.srqn[0], roff,
			   2, IBV_WC_RDMA_READ, "RDMA READ"))
			goto out;
		EP_CHECK(ep, cf_pattern_check(ep->buf + loff, len, 90) < 0,
			 "RDMA READ over XRC: data differs");
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
	}
	ret = 0;
out:
	xrc_teardown(&x);
	return ret;
}

/* The extended send API names the SRQ with ibv_wr_set_xrc_srqn(3). */
CF_BODY_IMPL(xrc_ops, wr_api)
{
	const uint32_t imm = htonl(0x5a5a0001), len = 777;
	struct ibv_qp_ex *qpx;
	struct xrc_side x;
	struct ibv_wc wc;
	int ret, got;

	ret = xrc_setup(ep, &x, IBV_QP_EX_WITH_SEND_WITH_IMM);
	if (ret)
		goto out;
	ret = -1;
	if (ep->side == CF_CHILD) {
		if (xrc_post_srq_recv(ep, x.srq[1], 0, 4096, 30) ||
		    cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = cf_poll_cq_wait(x.cq[1], &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 30, IBV_WC_RECV, "wr API SEND"))
			EP_CHECK(ep, (wc.wc_flags & IBV_WC_WITH_IMM) &&
					     wc.imm_data == imm &&
					     wc.byte_len == len,
				 "flags 0x%x imm 0x%x byte_len %u",
				 wc.wc_flags, ntohl(wc.imm_data), wc.byte_len);
		EP_CHECK(ep, cf_pattern_check(ep->buf, len, 95) < 0,
			 "wr API SEND: data differs");
	} else {
		qpx = ibv_qp_to_qp_ex(x.qp);
		EP_CHECK(ep, qpx != NULL, "ibv_qp_to_qp_ex");
		if (!qpx || cf_ep_sync(ep, WAIT_MS))
			goto out;
		cf_pattern_fill(ep->buf, len, 95);
		ibv_wr_start(qpx);
		qpx->wr_id = 3;
		qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_send_imm(qpx, imm);
		ibv_wr_set_xrc_srqn(qpx, x.srqn[1]);
		ibv_wr_set_sge(qpx, ep->mr->lkey, (uintptr_t)ep->buf, len);
		EP_CHECK(ep, ibv_wr_complete(qpx) == 0, "ibv_wr_complete");
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_wc_ok(ep, &wc, got, 3, IBV_WC_SEND, "wr API SEND");
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	xrc_teardown(&x);
	return ret < 0 ? -1 : 0;
}
