// SPDX-License-Identifier: MIT
/*
 * The device behind the librdmacm face (rdmacm.c) and the verbs
 * objects made on it: libibverbs resolved and ibemu0 opened once
 * (face_init), the QP state moves of a connection, and the QPs, SRQs
 * and CQs of ids (rdma_create_qp, rdma_create_srq and theirs).
 *
 * Lock rule: face_lock guards the device and its XRC domain (opened
 * once, kept for the process's life, as librdmacm keeps its devices).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "ibemu.h"
#include "check.h"
#include "cm.h"
#include "log.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- libibverbs, found at run time ---- */

static struct {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int mask);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
} verbs;

static pthread_mutex_t face_lock = PTHREAD_MUTEX_INITIALIZER;
struct ibv_context *face_verbs; /* ibemu0, kept open */
struct ibv_pd *face_pd; /* its default PD (rdma_create_qp) */
static struct ibv_xrcd *face_xrcd; /* XRC ids' domain, opened when needed */
struct emu_hca *face_hca;
uint8_t face_max_rd_atom, face_max_init_rd_atom;

#define VSYM(field, name, ver)                                                 \
	do {                                                                   \
		*(void **)&verbs.field = ibemu_verbs_sym(name, ver);           \
		if (!verbs.field)                                              \
			goto out;                                              \
	} while (0)

/* Resolve libibverbs and open ibemu0 once; 0 or a positive errno. */
int face_init(void)
{
	struct ibv_device **list;
	struct ibv_device_attr da;
	int i, n = 0, ret = ENODEV;

	pthread_mutex_lock(&face_lock);
	if (face_verbs) {
		ret = 0;
		goto out;
	}
	VSYM(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
	VSYM(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
	VSYM(open_device, "ibv_open_device", "IBVERBS_1.1");
	VSYM(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
	VSYM(create_cq, "ibv_create_cq", "IBVERBS_1.1");
	VSYM(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
	VSYM(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0");
	VSYM(create_qp, "ibv_create_qp", "IBVERBS_1.1");
	VSYM(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
	VSYM(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
	VSYM(create_srq, "ibv_create_srq", "IBVERBS_1.1");
	VSYM(destroy_srq, "ibv_destroy_srq", "IBVERBS_1.1");
	VSYM(query_device, "ibv_query_device", "IBVERBS_1.1");
	/* Our own interposer: the list with ibemu0 in it. */
	list = ibv_get_device_list(&n);
	if (!list)
		goto out;
	for (i = 0; i < n && !face_verbs; i++) {
		struct ibv_context *ctx;

		if (strcmp(list[i]->name, IBEMU_DEVICE_NAME))
			continue;
		ctx = verbs.open_device(list[i]);
		if (ctx && ibemu_is_ours(ctx))
			face_verbs = ctx;
	}
	verbs.free_device_list(list);
	if (!face_verbs)
		goto out;
	face_hca = to_ectx(face_verbs)->hca;
	face_pd = verbs.alloc_pd(face_verbs);
	/*
	 * The face's device and PD are the library's, kept for the
	 * process's life as librdmacm keeps the devices it opens
	 * (rdma_cm(7)): not the program's objects, so not its leaks in
	 * the checking mode's summary (ibemu(1) CHECKS).
	 */
	check_obj(CHECK_OBJ_CONTEXT, -1);
	if (face_pd)
		check_obj(CHECK_OBJ_PD, -1);
	ret = emu_cm_open(face_hca);
	if (!verbs.query_device(face_verbs, &da)) {
		face_max_rd_atom = (uint8_t)(da.max_qp_rd_atom > 255
						     ? 255
						     : da.max_qp_rd_atom);
		face_max_init_rd_atom =
			(uint8_t)(da.max_qp_init_rd_atom > 255
					  ? 255
					  : da.max_qp_init_rd_atom);
	}
out:
	pthread_mutex_unlock(&face_lock);
	if (ret)
		ibemu_log_err("rdma_cm: no ibemu device: %s", strerror(ret));
	return ret;
}

/* ---- QP states of a connection ---- */

int face_modify_rtr(struct face_id *fid, uint8_t resp_res)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	/* INIT again: the access flags the connection allows. */
	attr.qp_state = IBV_QPS_INIT;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (!ret)
		ret = verbs.modify_qp(fid->id.qp, &attr, mask);
	if (ret)
		return ret;
	attr.qp_state = IBV_QPS_RTR;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (ret)
		return ret;
	if (resp_res != RDMA_MAX_RESP_RES)
		attr.max_dest_rd_atomic = resp_res;
	return verbs.modify_qp(fid->id.qp, &attr, mask);
}

int face_modify_rts(struct face_id *fid, uint8_t init_depth)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	attr.qp_state = IBV_QPS_RTS;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (ret)
		return ret;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		attr.max_rd_atomic = init_depth;
	return verbs.modify_qp(fid->id.qp, &attr, mask);
}

int face_modify_err(struct face_id *fid)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!fid->id.qp)
		return 0;
	return verbs.modify_qp(fid->id.qp, &attr, IBV_QP_STATE);
}

/* ---- QPs, SRQs and their CQs ---- */

/* The device's XRC domain for XRC receive ids that bring none, opened
 * on first use and kept, as librdmacm keeps one per device; NULL and
 * errno set when it cannot be opened. */
static struct ibv_xrcd *face_get_xrcd(void)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *xrcd;

	pthread_mutex_lock(&face_lock);
	if (!face_xrcd)
		face_xrcd = ibv_open_xrcd(face_verbs, &xa);
	xrcd = face_xrcd;
	pthread_mutex_unlock(&face_lock);
	return xrcd;
}

static void face_destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		verbs.destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		verbs.destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		verbs.destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		verbs.destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* CQs with completion channels for the queues not given (librdmacm's
 * ucma_create_cqs: what rdma_get_send_comp/recv_comp wait on). */
static int face_create_cqs(struct rdma_cm_id *id, uint32_t send_size,
			   uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = verbs.create_cq(id->verbs, (int)recv_size, id,
					      id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = verbs.create_cq(id->verbs, (int)send_size, id,
					      id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	face_destroy_cqs(id);
	return ENOMEM;
}

/* A new QP of the id moved as librdmacm moves it: INIT (connected
 * QPs), INIT, RTR and RTS (UD: no connection to wait for). */
static int face_init_qp(struct face_id *fid, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	enum ibv_qp_state s;
	int mask, ret;

	for (s = IBV_QPS_INIT; s <= IBV_QPS_RTS; s++) {
		attr.qp_state = s;
		ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
		if (!ret)
			ret = verbs.modify_qp(qp, &attr, mask);
		if (ret)
			return ret;
		if (fid->id.qp_type != IBV_QPT_UD)
			break;
	}
	return 0;
}

IBEMU_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				   struct ibv_qp_init_attr_ex *attr)
{
	FACE_DISPATCH(create_qp_ex, id, attr);
	struct face_id *fid = to_fid(id);
	struct ibv_qp_init_attr a;
	struct verbs_context *vctx;
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || id->qp)
		return face_err(EINVAL);
	if (!id->verbs)
		return face_err(EINVAL);
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->pd &&
	    attr->pd->context != id->verbs)
		return face_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : face_pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (id->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = face_get_xrcd();
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (!attr->srq && id->srq && id->qp_type != IBV_QPT_XRC_RECV)
		attr->srq = id->srq;
	ret = face_create_cqs(id, attr->send_cq ? 0 : attr->cap.max_send_wr,
			      attr->recv_cq || attr->srq
				      ? 0
				      : attr->cap.max_recv_wr);
	if (ret)
		return face_err(ret);
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq ? id->recv_cq : id->send_cq;
	if (attr->comp_mask == IBV_QP_INIT_ATTR_PD) {
		memset(&a, 0, sizeof(a));
		a.qp_context = attr->qp_context;
		a.send_cq = attr->send_cq;
		a.recv_cq = attr->recv_cq;
		a.srq = attr->srq;
		a.cap = attr->cap;
		a.qp_type = attr->qp_type;
		a.sq_sig_all = attr->sq_sig_all;
		qp = verbs.create_qp(attr->pd, &a);
		attr->cap = a.cap;
	} else {
		vctx = verbs_get_ctx_op(id->verbs, create_qp_ex);
		qp = vctx ? vctx->create_qp_ex(id->verbs, attr) : NULL;
		if (!vctx)
			errno = EOPNOTSUPP;
	}
	if (!qp) {
		ret = errno ? errno : ENOMEM;
		goto err_cqs;
	}
	ret = face_init_qp(fid, qp);
	if (ret) {
		verbs.destroy_qp(qp);
		goto err_cqs;
	}
	id->qp = qp;
	id->pd = attr->pd;
	return 0;
err_cqs:
	face_destroy_cqs(id);
	return face_err(ret);
}

IBEMU_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	FACE_DISPATCH(create_qp, id, pd, qp_init_attr);
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!id || !qp_init_attr)
		return face_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.qp_context = qp_init_attr->qp_context;
	ax.send_cq = qp_init_attr->send_cq;
	ax.recv_cq = qp_init_attr->recv_cq;
	ax.srq = qp_init_attr->srq;
	ax.cap = qp_init_attr->cap;
	ax.qp_type = qp_init_attr->qp_type;
	ax.sq_sig_all = qp_init_attr->sq_sig_all;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd;
	ret = rdma_create_qp_ex(id, &ax);
	if (!ret) {
		qp_init_attr->cap = ax.cap;
		qp_init_attr->send_cq = ax.send_cq;
		qp_init_attr->recv_cq = ax.recv_cq;
	}
	return ret;
}

IBEMU_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	FACE_DISPATCH_VOID(destroy_qp, id);
	if (!id || !id->qp)
		return;
	verbs.destroy_qp(id->qp);
	id->qp = NULL;
	face_destroy_cqs(id);
}

/* An XRC SRQ as librdmacm makes it: in the device's domain unless one
 * is given, completing on the id's receive CQ (made here when there is
 * none, with its channel, for rdma_get_recv_comp). */
static int face_create_xrc_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr_ex *attr)
{
	struct verbs_context *vctx;
	struct ibv_srq *srq;
	bool own_cq = false;
	int ret;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
		attr->xrcd = face_get_xrcd();
		if (!attr->xrcd)
			return -1;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
		if (!id->recv_cq) {
			ret = face_create_cqs(id, 0, attr->attr.max_wr);
			if (ret)
				return face_err(ret);
			own_cq = true;
		}
		attr->cq = id->recv_cq;
	}
	attr->pd = pd;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			   IBV_SRQ_INIT_ATTR_CQ;
	/* The context's op, as verbs.h's ibv_create_srq_ex() calls it for
	 * an XRC SRQ.  Not that inline itself: its basic-SRQ branch calls
	 * ibv_create_srq, which the preload does not link (face_init finds
	 * it with dlvsym), and without optimisation the call stays in. */
	vctx = verbs_get_ctx_op(id->verbs, create_srq_ex);
	srq = vctx ? vctx->create_srq_ex(id->verbs, attr) : NULL;
	if (!vctx)
		errno = EOPNOTSUPP;
	if (!srq) {
		ret = errno;
		if (own_cq)
			face_destroy_cqs(id);
		return face_err(ret);
	}
	if (!id->pd)
		id->pd = pd;
	id->srq = srq;
	return 0;
}

IBEMU_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				    struct ibv_srq_init_attr_ex *attr)
{
	FACE_DISPATCH(create_srq_ex, id, attr);
	struct ibv_srq_init_attr a;
	struct ibv_pd *pd;
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs || id->srq)
		return face_err(EINVAL);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd
		     ? attr->pd
		     : (id->pd ? id->pd : face_pd);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type == IBV_SRQT_XRC)
		return face_create_xrc_srq(id, pd, attr);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type != IBV_SRQT_BASIC)
		return face_err(EOPNOTSUPP);
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	srq = verbs.create_srq(pd, &a);
	if (!srq)
		return -1;
	attr->attr = a.attr;
	id->srq = srq;
	return 0;
}

IBEMU_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	FACE_DISPATCH(create_srq, id, pd, attr);
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!attr)
		return face_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.srq_context = attr->srq_context;
	ax.attr = attr->attr;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	/* an XRC receive id's SRQ is an XRC SRQ (librdmacm) */
	ax.srq_type = IBV_SRQT_BASIC;
	if (id && id->qp_type == IBV_QPT_XRC_RECV)
		ax.srq_type = IBV_SRQT_XRC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	if (!ret)
		attr->attr = ax.attr;
	return ret;
}

IBEMU_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	FACE_DISPATCH_VOID(destroy_srq, id);
	if (!id || !id->srq)
		return;
	verbs.destroy_srq(id->srq);
	id->srq = NULL;
	/* an XRC receive id's CQs outlive its QP for the SRQ */
	if (!id->qp)
		face_destroy_cqs(id);
}
