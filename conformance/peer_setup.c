// SPDX-License-Identifier: MIT
/*
 * Setup of the peer harness: each side's device context, PD, CQ, memory
 * region, SRQ and QPs, made after the fork (peer_run.c), and their
 * connection to the peer's QPs as manual 3.5 describes.
 */
#include <stdlib.h>
#include <string.h>

#include "peer_int.h"

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

static uint32_t cf_clamp_u32(uint32_t v, int max)
{
	return max >= 0 && v > (uint32_t)max ? (uint32_t)max : v;
}

/* The context, its device, port and GID attributes, and the PD. */
static int cf_ep_open(struct cf_ep *ep)
{
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
	return 0;
}

/* The parent domain's allocators: buffers of their own, counted; a call
 * with another PD or context than ours is counted as wrong. */
static void *cf_pd_alloc(struct ibv_pd *pd, void *pd_context, size_t size,
			 size_t alignment, uint64_t resource_type)
{
	struct cf_ep *ep = pd_context;
	void *buf = NULL;

	(void)resource_type;
	if (pd != ep->pdom)
		ep->pd_alloc_wrong++;
	if (alignment < sizeof(void *))
		alignment = sizeof(void *);
	if (posix_memalign(&buf, alignment, size ? size : 1))
		return NULL;
	ep->pd_allocs++;
	return buf;
}

static void cf_pd_free(struct ibv_pd *pd, void *pd_context, void *ptr,
		       uint64_t resource_type)
{
	struct cf_ep *ep = pd_context;

	(void)resource_type;
	if (pd != ep->pdom)
		ep->pd_alloc_wrong++;
	ep->pd_frees++;
	free(ptr);
}

/* The thread domain and parent domain (p->parent_domain); a skip when the
 * device offers neither. */
static int cf_ep_create_parent_domain(struct cf_ep *ep)
{
	struct ibv_td_init_attr ta = { .comp_mask = 0 };
	struct ibv_parent_domain_init_attr pa = {
		.pd = ep->pd,
		.comp_mask = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
			     IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
		.alloc = cf_pd_alloc,
		.free = cf_pd_free,
		.pd_context = ep,
	};

	ep->td = ibv_alloc_td(ep->ctx, &ta);
	if (!ep->td && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_ep_skip(ep, "ibv_alloc_td: %s", strerror(errno));
		return -1;
	}
	EP_REQUIRE(ep, ep->td, "ibv_alloc_td: %s", strerror(errno));
	pa.td = ep->td;
	ep->pdom = ibv_alloc_parent_domain(ep->ctx, &pa);
	if (!ep->pdom && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_ep_skip(ep, "ibv_alloc_parent_domain: %s", strerror(errno));
		return -1;
	}
	EP_REQUIRE(ep, ep->pdom, "ibv_alloc_parent_domain: %s",
		   strerror(errno));
	return 0;
}

/* The PD the objects are made on: the parent domain when there is one. */
static struct ibv_pd *cf_ep_obj_pd(const struct cf_ep *ep)
{
	return ep->pdom ? ep->pdom : ep->pd;
}

/* The CQ from ibv_create_cq_ex (p->cq_ex); a skip when unsupported. */
static int cf_ep_create_cq_ex(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;
	struct ibv_cq_init_attr_ex ca = {
		.cqe = (uint32_t)p->cq_size,
		.channel = ep->ch,
		.wc_flags = p->cq_ex_wc_flags,
	};

	if (ep->pdom) {
		ca.comp_mask |= IBV_CQ_INIT_ATTR_MASK_PD;
		ca.parent_domain = ep->pdom;
	}

	ep->cqx = ibv_create_cq_ex(ep->ctx, &ca);
	if (!ep->cqx && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_ep_skip(ep, "ibv_create_cq_ex: %s", strerror(errno));
		return -1;
	}
	EP_REQUIRE(ep, ep->cqx, "ibv_create_cq_ex: %s", strerror(errno));
	ep->cq = ibv_cq_ex_to_cq(ep->cqx);
	return 0;
}

/* The completion channel (p->channel) and the one CQ of the side. */
static int cf_ep_create_cq(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;

	if (p->channel) {
		ep->ch = ibv_create_comp_channel(ep->ctx);
		EP_REQUIRE(ep, ep->ch, "ibv_create_comp_channel: %s",
			   strerror(errno));
	}
	if (p->cq_ex || ep->pdom)
		return cf_ep_create_cq_ex(ep);
	ep->cq = ibv_create_cq(ep->ctx, p->cq_size, NULL, ep->ch, 0);
	EP_REQUIRE(ep, ep->cq, "ibv_create_cq(%d): %s", p->cq_size,
		   strerror(errno));
	return 0;
}

/* The zeroed, page-aligned buffer of p->buf_len bytes and its MR. */
static int cf_ep_create_mr(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;
	int ret;

	ret = posix_memalign((void **)&ep->buf, 4096, p->buf_len);
	EP_REQUIRE(ep, !ret, "posix_memalign(%zu) failed", p->buf_len);
	memset(ep->buf, 0, p->buf_len);
	ep->mr = ibv_reg_mr(cf_ep_obj_pd(ep), ep->buf, p->buf_len,
			    p->mr_access);
	EP_REQUIRE(ep, ep->mr, "ibv_reg_mr(%zu, 0x%x): %s", p->buf_len,
		   p->mr_access, strerror(errno));
	return 0;
}

/* The SRQ (p->srq); a skip when the device has none. */
static int cf_ep_create_srq(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;
	struct ibv_srq_init_attr sa = {
		.attr = {
			.max_wr = cf_clamp_u32(p->max_recv_wr,
					       ep->dev->max_srq_wr),
			.max_sge = cf_clamp_u32(p->max_sge,
						ep->dev->max_srq_sge),
		},
	};

	if (!ep->dev->max_srq) {
		cf_ep_skip(ep, "device has no SRQ (max_srq 0)");
		return -1;
	}
	ep->srq = ibv_create_srq(cf_ep_obj_pd(ep), &sa);
	EP_REQUIRE(ep, ep->srq, "ibv_create_srq: %s", strerror(errno));
	return 0;
}

/* The QP attributes of p, clamped to the device's limits. */
static void cf_ep_qp_init_attr(const struct cf_ep *ep,
			       struct ibv_qp_init_attr_ex *ia)
{
	const struct cf_peer_params *p = ep->p;
	const struct ibv_device_attr *d = ep->dev;

	memset(ia, 0, sizeof(*ia));
	ia->send_cq = ep->cq;
	ia->recv_cq = ep->cq;
	ia->srq = ep->srq;
	ia->qp_type = p->qp_type;
	ia->sq_sig_all = p->sq_sig_all;
	ia->cap.max_send_wr = cf_clamp_u32(p->max_send_wr, d->max_qp_wr);
	ia->cap.max_recv_wr = cf_clamp_u32(p->max_recv_wr, d->max_qp_wr);
	ia->cap.max_send_sge = cf_clamp_u32(p->max_sge, d->max_sge);
	ia->cap.max_recv_sge = cf_clamp_u32(p->max_sge, d->max_sge);
	ia->cap.max_inline_data = p->max_inline;
	ia->comp_mask = IBV_QP_INIT_ATTR_PD;
	ia->pd = cf_ep_obj_pd(ep);
	if (p->qp_ex) {
		ia->comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
		ia->send_ops_flags = p->send_ops_flags;
	}
}

/* Skip when QP creation failed for a capability the device may lack. */
static bool cf_ep_qp_unsupported(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;

	if (p->qp_ex && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_ep_skip(ep, "ibv_create_qp_ex with send_ops_flags 0x%llx: "
			   "%s", (unsigned long long)p->send_ops_flags,
			   strerror(errno));
		return true;
	}
	if (p->max_inline && errno == EINVAL) {
		cf_ep_skip(ep, "%s QP with max_inline_data %u refused",
			   cf_qpt_name(p->qp_type), p->max_inline);
		return true;
	}
	return false;
}

/* QP #i, its QPN and its starting PSN in ep->me. */
static int cf_ep_create_qp(struct cf_ep *ep, int i)
{
	struct ibv_qp_init_attr_ex ia;

	cf_ep_qp_init_attr(ep, &ia);
	ep->qps[i] = ibv_create_qp_ex(ep->ctx, &ia);
	if (!ep->qps[i] && cf_ep_qp_unsupported(ep))
		return -1;
	EP_REQUIRE(ep, ep->qps[i], "ibv_create_qp_ex(%s) #%d: %s",
		   cf_qpt_name(ep->p->qp_type), i, strerror(errno));
	if (i == 0) {
		ep->init.cap = ia.cap;
		ep->init.sq_sig_all = ia.sq_sig_all;
	}
	ep->me.qpn[i] = ep->qps[i]->qp_num;
	/* Start close to the 24-bit PSN wrap (IBA 9.7.1) so that long
	 * messages wrap it. */
	ep->me.psn[i] = (0xfffff0u + (uint32_t)ep->side * 0x100u +
			 (uint32_t)i * 0x1001u) & 0xffffffu;
	return 0;
}

/* The rest of the connection data the peer needs (manual 3.5). */
static void cf_ep_fill_info(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;

	ep->me.lid = ep->port.lid;
	memcpy(ep->me.gid, ep->gid.raw, 16);
	ep->me.mtu = (uint8_t)ep->port.active_mtu;
	ep->me.nqp = (uint32_t)p->nqp;
	ep->me.addr = (uintptr_t)ep->buf;
	ep->me.rkey = ep->mr->rkey;
	ep->me.len = p->buf_len;
	ep->me.qkey = p->qkey;
}

int cf_ep_setup(struct cf_ep *ep)
{
	const struct cf_peer_params *p = ep->p;
	int i;

	if (cf_ep_open(ep))
		return -1;
	if (p->parent_domain && cf_ep_create_parent_domain(ep))
		return -1;
	if (cf_ep_create_cq(ep) || cf_ep_create_mr(ep))
		return -1;
	if (p->srq && cf_ep_create_srq(ep))
		return -1;
	for (i = 0; i < p->nqp; i++)
		if (cf_ep_create_qp(ep, i))
			return -1;
	ep->qp = ep->qps[0];
	if (p->qp_ex) {
		ep->qpx = ibv_qp_to_qp_ex(ep->qp);
		EP_REQUIRE(ep, ep->qpx, "ibv_qp_to_qp_ex returned NULL");
	}
	cf_ep_fill_info(ep);
	ep->state = IBV_QPS_RESET;
	return 0;
}

void cf_ep_teardown(struct cf_ep *ep)
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
	if (ep->pdom)
		ibv_dealloc_pd(ep->pdom);
	if (ep->td)
		ibv_dealloc_td(ep->td);
	if (ep->pd)
		ibv_dealloc_pd(ep->pd);
	if (ep->ctx)
		ibv_close_device(ep->ctx);
	free(ep->buf);
}

/* The address vector of the peer's port (see cf_ep_peer_ah). */
static void cf_ep_peer_av(const struct cf_ep *ep, struct ibv_ah_attr *ah,
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

	cf_ep_peer_av(ep, &aa, global);
	ah = ibv_create_ah(ep->pd, &aa);
	EP_CHECK(ep, ah, "%s: ibv_create_ah to the peer (LID 0x%x%s): %s",
		 cf_side_name(ep), aa.dlid, aa.is_global ? ", GRH" : "",
		 strerror(errno));
	return ah;
}

/* The test's value when it gave one (>= 0), else min(dev_max, 16). */
static uint8_t cf_rd_atomic(int want, int dev_max)
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
static void cf_ep_qp_attr(const struct cf_ep *ep, int i,
			  struct ibv_qp_attr *a)
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
	a->max_dest_rd_atomic = cf_rd_atomic(p->max_dest_rd_atomic,
					     ep->dev->max_qp_rd_atom);
	a->min_rnr_timer = p->min_rnr_timer;
	cf_ep_peer_av(ep, &a->ah_attr, false);
	a->timeout = p->timeout;
	a->retry_cnt = p->retry_cnt;
	a->rnr_retry = p->rnr_retry;
	a->sq_psn = ep->me.psn[i];
	a->max_rd_atomic = cf_rd_atomic(p->max_rd_atomic,
					ep->dev->max_qp_init_rd_atom);
}

int cf_ep_connect(struct cf_ep *ep, enum ibv_qp_state target)
{
	struct ibv_qp_attr a;
	enum ibv_qp_state s;
	int i, ret;

	if (target >= IBV_QPS_RTR && cf_ep_exchange(ep))
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
			cf_ep_qp_attr(ep, i, &a);
			ret = cf_qp_walk(ep->qps[i], &a, s - 1, s);
			EP_REQUIRE(ep, !ret, "%s: QP #%d to %s: %s",
				   cf_side_name(ep), i, cf_state_name(s),
				   cf_errname(ret));
		}
		ep->state = s;
	}
	return 0;
}
