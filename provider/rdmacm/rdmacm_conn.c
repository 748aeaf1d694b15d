// SPDX-License-Identifier: MIT
/*
 * Connections of the librdmacm face (rdmacm.c): rdma_listen,
 * rdma_connect, rdma_accept, rdma_reject, rdma_establish, rdma_notify,
 * rdma_disconnect, rdma_get_request and rdma_init_qp_attr.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "ibemu.h"
#include "cm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- connections ---- */

/*
 * Connection parameters as the emulator takes them, as librdmacm makes
 * them: resources beyond the device's refused (port space TCP), the
 * RDMA_MAX_* values meaning "as many as allowed" (dflt_*: the device's
 * on connect, the requester's bounded by the device's on accept);
 * retries 7 without parameters.  limit: the consumer's share of the
 * message's private data.
 */
static int face_conn(struct face_id *fid, const struct rdma_conn_param *p,
		     struct emu_cm_conn *c, unsigned int limit,
		     uint8_t dflt_resp, uint8_t dflt_init)
{
	memset(c, 0, sizeof(*c));
	if (fid->id.ps == RDMA_PS_TCP) {
		if (!fid->id.qp && !p)
			return EINVAL;
		if (p && p->responder_resources != RDMA_MAX_RESP_RES &&
		    p->responder_resources > face_max_rd_atom)
			return EINVAL;
		if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
		    p->initiator_depth > face_max_init_rd_atom)
			return EINVAL;
	}
	c->responder_resources = p && p->responder_resources !=
						      RDMA_MAX_RESP_RES
					 ? p->responder_resources
					 : dflt_resp;
	c->initiator_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH
				     ? p->initiator_depth
				     : dflt_init;
	c->retry_count = 7;
	c->rnr_retry_count = 7;
	if (p) {
		if (p->private_data_len > limit ||
		    (p->private_data_len && !p->private_data))
			return EINVAL;
		if (p->private_data_len)
			memcpy(c->private_data, p->private_data,
			       p->private_data_len);
		c->private_data_len = p->private_data_len;
		c->flow_control = p->flow_control;
		c->retry_count = p->retry_count & 7;
		c->rnr_retry_count = p->rnr_retry_count & 7;
		c->srq = p->srq;
		c->qp_num = p->qp_num;
	}
	if (fid->id.qp) {
		c->qp_num = fid->id.qp->qp_num;
		c->srq = fid->id.qp->srq != NULL;
	}
	return 0;
}

static uint8_t face_min(uint8_t a, uint8_t b)
{
	return a < b ? a : b;
}

IBEMU_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	FACE_DISPATCH(listen, id, backlog);
	int ret;

	if (!id)
		return face_err(EINVAL);
	ret = emu_cm_listen(to_fid(id)->emu, backlog);
	if (ret)
		return face_err(ret);
	face_sync_route(to_fid(id));
	/* a listener on any address takes the real device's requests too */
	if (to_fid(id)->where == FACE_BOTH &&
	    CM_REAL(cm_real.listen(to_fid(id)->real, backlog)))
		face_real_keep(to_fid(id), FACE_EMU);
	return 0;
}

IBEMU_EXPORT int rdma_connect(struct rdma_cm_id *id,
			      struct rdma_conn_param *conn_param)
{
	struct face_id *fid = to_fid(id);
	struct emu_cm_conn c;
	int ret;

	FACE_DISPATCH_STARTED(connect, id, conn_param);
	if (!id)
		return face_err(EINVAL);
	/* IBA 12.6.5 and 12.11.1 less the IP CM header (A11.6): 56 bytes
	 * in a REQ, 180 in a SIDR_REQ */
	ret = face_conn(fid, conn_param, &c,
			id->qp_type == IBV_QPT_UD ? 180 : 56,
			face_max_rd_atom, face_max_init_rd_atom);
	if (!ret)
		ret = emu_cm_connect(fid->emu, &c);
	if (ret)
		return face_err(ret);
	return face_complete(fid);
}

IBEMU_EXPORT int rdma_accept(struct rdma_cm_id *id,
			     struct rdma_conn_param *conn_param)
{
	struct face_id *fid = to_fid(id);
	struct emu_cm_conn c;
	int ret;

	FACE_DISPATCH_STARTED(accept, id, conn_param);
	if (!id)
		return face_err(EINVAL);
	/* IBA 12.6.8: 196 bytes in a REP; 12.11.2: 136 in a SIDR_REP */
	ret = face_conn(fid, conn_param, &c,
			id->qp_type == IBV_QPT_UD ? 136 : 196,
			face_min(fid->resp_res, face_max_rd_atom),
			face_min(fid->init_depth, face_max_init_rd_atom));
	if (ret)
		return face_err(ret);
	if (id->qp_type == IBV_QPT_UD) {
		if (id->qp) {
			struct ibv_qp_attr qa;
			int mask;

			qa.qp_state = IBV_QPS_INIT;
			if (!emu_cm_init_qp_attr(fid->emu, &qa, &mask))
				c.qkey = qa.qkey;
		}
		ret = emu_cm_accept(fid->emu, &c);
		return ret ? face_err(ret) : 0;
	}
	/* The QP is ready to receive before the REP leaves (librdmacm). */
	if (id->qp) {
		ret = face_modify_rtr(fid, c.responder_resources);
		if (!ret)
			ret = face_modify_rts(fid, c.initiator_depth);
		if (ret)
			return face_err(ret);
	}
	ret = emu_cm_accept(fid->emu, &c);
	if (ret) {
		face_modify_err(fid);
		return face_err(ret);
	}
	return face_complete(fid);
}

IBEMU_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	FACE_DISPATCH(reject, id, private_data, private_data_len);
	int ret;

	if (!id || (private_data_len && !private_data))
		return face_err(EINVAL);
	ret = emu_cm_reject(to_fid(id)->emu, private_data, private_data_len);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_reject_ece(struct rdma_cm_id *id,
				 const void *private_data,
				 uint8_t private_data_len)
{
	FACE_DISPATCH(reject_ece, id, private_data, private_data_len);
	return rdma_reject(id, private_data, private_data_len);
}

IBEMU_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	FACE_DISPATCH(establish, id);
	struct face_id *fid = to_fid(id);
	int ret = 0;

	if (!id)
		return face_err(EINVAL);
	if (id->qp) {
		ret = face_modify_rtr(fid, RDMA_MAX_RESP_RES);
		if (!ret)
			ret = face_modify_rts(fid, RDMA_MAX_INIT_DEPTH);
	}
	if (!ret)
		ret = emu_cm_establish(fid->emu);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	FACE_DISPATCH(notify, id, event);
	if (!id)
		return face_err(EINVAL);
	/* Only communication established means anything to the CM. */
	if (event != IBV_EVENT_COMM_EST)
		return 0;
	return emu_cm_notify(to_fid(id)->emu) ? face_err(EINVAL) : 0;
}

IBEMU_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	FACE_DISPATCH(disconnect, id);
	int ret;

	if (!id)
		return face_err(EINVAL);
	/* As librdmacm on InfiniBand: the QP goes to the error state. */
	face_modify_err(to_fid(id));
	ret = emu_cm_disconnect(to_fid(id)->emu);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
				  struct rdma_cm_id **id)
{
	FACE_PASS(get_request, listen, id);
	struct face_id *l = to_fid(listen);
	struct rdma_cm_event *event;
	struct ibv_qp_init_attr attr;
	int ret, err;

	if (!listen || !id)
		return face_err(EINVAL);
	if (!l->sync)
		return face_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->status) {
		ret = face_err(event->status < 0 ? -event->status
						 : event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = face_err(EINVAL);
		goto err;
	}
	if (l->qp_init_attr) {
		attr = *l->qp_init_attr;
		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err_id;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err_id:
	err = errno;
	rdma_destroy_id(event->id);
	errno = err;
err:
	err = errno;
	rdma_ack_cm_event(event);
	errno = err;
	return ret;
}

IBEMU_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				   struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	FACE_DISPATCH(init_qp_attr, id, qp_attr, qp_attr_mask);
	int ret;

	if (!id || !qp_attr || !qp_attr_mask)
		return face_err(EINVAL);
	ret = emu_cm_init_qp_attr(to_fid(id)->emu, qp_attr, qp_attr_mask);
	return ret ? face_err(ret) : 0;
}
