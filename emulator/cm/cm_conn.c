// SPDX-License-Identifier: MIT
/*
 * Listen, connect and accept (cm.h): the calls that drive an id's
 * connection (IBA 12.9) from our side, listen, connect (a REQ or
 * SIDR_REQ with the IP CM header), accept, reject, establish, notify and
 * disconnect, and the QP attributes the connection gives.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <string.h>

#include "clock.h"
#include "cm.h"
#include "cm_int.h"
#include "cm_wire.h"
#include "hca.h"
#include "node.h"
#include "params.h"
#include "engine.h"
#include "wire.h"

/* ---- listen, connect, accept ---- */

int emu_cm_listen(struct emu_cm_id *id, int backlog)
{
	struct sockaddr_in any;
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state == CM_IDLE) {
		/* Listening unbound: any IPv4 address, an ephemeral port
		 * (the kernel's rdma_listen binds the same way). */
		memset(&any, 0, sizeof(any));
		any.sin_family = AF_INET;
		ret = cm_bind_locked(id, (struct sockaddr *)&any);
	}
	if (!ret && id->state == CM_LISTEN) {
		id->backlog = backlog > 0 && backlog < CM_BACKLOG_MAX
				      ? backlog
				      : CM_BACKLOG_MAX;
		goto out;
	}
	if (!ret && id->state != CM_ADDR_BOUND)
		ret = cm_wrong_state_locked(id);
	if (!ret)
		ret = -node_cm_listen(&id->cm->hca->node, id->port_idx);
	if (!ret) {
		id->state = CM_LISTEN;
		id->backlog = backlog > 0 && backlog < CM_BACKLOG_MAX
				      ? backlog
				      : CM_BACKLOG_MAX;
	}
out:
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

/* The IP CM header (IBA A11.6) at the start of a request's private
 * data: the addresses of both ends and the source port. */
static void cm_ip_hdr_put(const struct emu_cm_id *id, uint8_t *p)
{
	uint8_t a[16];
	bool v4;

	cm_put8(p, CM_IP_HDR_VERSION, 0);
	cm_addr16((const struct sockaddr *)&id->src, a, &v4);
	cm_put8(p, CM_IP_HDR_IPV, (uint8_t)((v4 ? 4 : 6) << 4));
	cm_put16(p, CM_IP_HDR_SPORT, cm_port_of(&id->src));
	if (v4) {
		memcpy(p + CM_IP_HDR_SIP + 12, a + 12, 4);
		cm_addr16((const struct sockaddr *)&id->dst, a, &v4);
		memcpy(p + CM_IP_HDR_DIP + 12, a + 12, 4);
	} else {
		memcpy(p + CM_IP_HDR_SIP, a, 16);
		cm_addr16((const struct sockaddr *)&id->dst, a, &v4);
		memcpy(p + CM_IP_HDR_DIP, a, 16);
	}
}

/*
 * The process that listens on the id's destination on another node
 * (its door answers, the network transport's resolve_cm), reached over
 * the network: 0 with its slot and token, or a positive errno
 * (ECONNREFUSED: nobody listens there).  Called with cm.lock held; it
 * is dropped while the door is asked (which blocks, and the engine
 * thread takes cm.lock to deliver to us) and the id marked connecting
 * meanwhile.  The caller checks
 * the id's state again.
 */
static int cm_resolve_remote_locked(struct emu_cm_id *id, int32_t *slot_p,
				    uint64_t *token_p)
{
	struct emu_cm *cm = id->cm;
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	struct sockaddr_storage node_addr = id->node_addr, a;
	uint16_t ps = id->ps, dport = cm_port_of(&id->dst), lid = 0;
	uint8_t a16[16], gid[16];
	int32_t slot = -1;
	bool v4;
	int err;

	cm_addr16((struct sockaddr *)&id->dst, a16, &v4);
	id->connecting = true;
	pthread_mutex_unlock(&cm->lock);
	err = net ? net->resolve_cm(e, &node_addr, ps, a16, v4, dport, &slot)
		  : ENETDOWN;
	if (!err && !cm_remote_peer(cm, slot, &lid, gid, &a, token_p))
		err = EHOSTUNREACH;
	pthread_mutex_lock(&cm->lock);
	id->connecting = false;
	pthread_cond_broadcast(&cm->connected);
	if (err == ENOENT) /* the listener's process went meanwhile */
		err = ECONNREFUSED;
	if (err)
		return err;
	/* the node's own LID, as it answered */
	id->rlid = lid;
	*slot_p = slot;
	return 0;
}

/* A REQ's Transport Service Type: 0 RC, 1 UC (IBA 12.6.5), 3 XRC
 * (IBA A14.6.1). */
static uint32_t cm_transport_type(enum ibv_qp_type type)
{
	if (type == IBV_QPT_UC)
		return 1;
	if (type == IBV_QPT_XRC_SEND || type == IBV_QPT_XRC_RECV)
		return 3;
	return 0;
}

int emu_cm_connect(struct emu_cm_id *id, const struct emu_cm_conn *param)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad), a16[16];
	bool v4, ud = id->qp_type == IBV_QPT_UD;
	uint16_t dport;
	int32_t slot;
	uint64_t token;
	int ret = 0, err;

	if (param->private_data_len >
	    (ud ? CM_SIDR_REQ_USER_PRIVATE : CM_REQ_USER_PRIVATE))
		return EINVAL;
	pthread_mutex_lock(&cm->lock);
	if (id->state != CM_ROUTE_RESOLVED || id->connecting) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	cm_addr16((struct sockaddr *)&id->dst, a16, &v4);
	dport = cm_port_of(&id->dst);
	if (id->remote) {
		err = cm_resolve_remote_locked(id, &slot, &token);
		if (id->state != CM_ROUTE_RESOLVED) {
			ret = EINVAL;
			goto out;
		}
	} else {
		err = node_cm_lookup(&cm->hca->node, id->ps, a16, v4, dport,
				     &slot, &token) ? ECONNREFUSED : 0;
	}
	id->tid = cm->next_tid++;
	id->qpn = param->qp_num & BTH_QPN_MASK;
	if (err == ECONNREFUSED) {
		/* Nobody listens: the remote CM answers REJ "invalid
		 * service ID" (IBA 12.6.7.2), SIDR_REP "service ID not
		 * supported" (IBA 12.11.2) to a UD request. */
		id->state = CM_FAILED;
		cm_event_locked(id, ud ? EMU_CM_UNREACHABLE : EMU_CM_REJECTED,
				ud ? SIDR_STATUS_NO_SERVICE
				   : REJ_INVALID_SERVICE_ID);
		goto out;
	}
	if (err) {
		/* No node answers there: the request goes unanswered, as
		 * the kernel's CM reports it (IBA 12.4). */
		id->state = CM_FAILED;
		cm_event_locked(id, EMU_CM_UNREACHABLE, -(int)err);
		goto out;
	}
	id->peer_slot = slot;
	id->peer_token = token;
	id->live_check = clock_now_ns() + CM_LIVENESS_MS * 1000000ull;
	if (ud) {
		cm_mad_init(id, mad, CM_ATTR_SIDR_REQ);
		cm_put32(d, SIDR_REQ_REQUEST_ID, id->local_id);
		cm_put16(d, SIDR_REQ_PKEY, IBEMU_DEFAULT_PKEY);
		cm_put64(d, SIDR_REQ_SERVICE_ID,
			 CM_IP_SERVICE_ID(id->ps, dport));
		cm_ip_hdr_put(id, d + SIDR_REQ_PRIVATE);
		memcpy(d + SIDR_REQ_PRIVATE + CM_IP_HDR_LEN,
		       param->private_data, param->private_data_len);
		id->state = CM_SIDR_REQ_SENT;
		cm_send_keep_locked(id, mad, true);
		goto out;
	}
	id->psn = cm_random() & BTH_PSN_MASK;
	id->resp_res = param->responder_resources;
	id->init_depth = param->initiator_depth;
	id->retry_count = param->retry_count & 7;
	id->rnr_retry = param->rnr_retry_count & 7;
	cm_mad_init(id, mad, CM_ATTR_REQ);
	cm_put32(d, REQ_LOCAL_COMM_ID, id->local_id);
	cm_put64(d, REQ_SERVICE_ID, CM_IP_SERVICE_ID(id->ps, dport));
	cm_put64(d, REQ_LOCAL_CA_GUID, cm->hca->node.seg->node_guid);
	cm_put32(d, REQ_LOCAL_QPN, id->qpn << 8 | id->resp_res);
	cm_put32(d, REQ_LOCAL_EECN, id->init_depth);
	/* Transport Service Type 0: RC, 1: UC (IBA 12.6.5), 3: XRC
	 * (IBA A14.6.1) */
	cm_put32(d, REQ_REMOTE_EECN,
		 (uint32_t)CM_RESPONSE_TIMEOUT << 3 |
			 (uint32_t)cm_transport_type(id->qp_type) << 1 |
			 (param->flow_control ? 1 : 0));
	cm_put32(d, REQ_START_PSN,
		 id->psn << 8 | (uint32_t)CM_RESPONSE_TIMEOUT << 3 |
			 id->retry_count);
	cm_put16(d, REQ_PKEY, IBEMU_DEFAULT_PKEY);
	cm_put8(d, REQ_MTU_RNR,
		(uint8_t)(IBEMU_MAX_MTU << 4 | id->rnr_retry));
	cm_put8(d, REQ_MAX_RETRIES,
		(uint8_t)(CM_MAX_RETRIES << 4 | (param->srq ? 8 : 0)));
	/* The primary path (IBA 12.6.5): on one node, the port's own LID
	 * and GID 0 at both ends, within the subnet; to another node, the
	 * two ports' LIDs and the GIDs of the two addresses, with a GRH
	 * (SubnetLocal 0), which reaches the node across subnets too. */
	cm_put16(d, REQ_PRI_LOCAL_LID, cm->hca->node.seg->lid);
	if (id->remote) {
		cm_put16(d, REQ_PRI_REMOTE_LID, id->rlid);
		memcpy(d + REQ_PRI_LOCAL_GID, id->lgid, 16);
		memcpy(d + REQ_PRI_REMOTE_GID, id->rgid, 16);
		cm_put8(d, REQ_PRI_HOP_LIMIT, CM_HOP_LIMIT);
	} else {
		cm_put16(d, REQ_PRI_REMOTE_LID, cm->hca->node.seg->lid);
		cm_put64(d, REQ_PRI_LOCAL_GID, cm->hca->node.seg->gid_prefix);
		cm_put64(d, REQ_PRI_LOCAL_GID + 8,
			 cm->hca->node.seg->port_guid);
		cm_put64(d, REQ_PRI_REMOTE_GID, cm->hca->node.seg->gid_prefix);
		cm_put64(d, REQ_PRI_REMOTE_GID + 8,
			 cm->hca->node.seg->port_guid);
		cm_put8(d, REQ_PRI_SL, REQ_SUBNET_LOCAL);
	}
	cm_put8(d, REQ_PRI_ACK_TIMEOUT, CM_LOCAL_ACK_TIMEOUT << 3);
	cm_ip_hdr_put(id, d + REQ_PRIVATE);
	memcpy(d + REQ_PRIVATE + CM_IP_HDR_LEN, param->private_data,
	       param->private_data_len);
	id->state = CM_REQ_SENT;
	cm_send_keep_locked(id, mad, true);
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_accept(struct emu_cm_id *id, const struct emu_cm_conn *param)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_SIDR_REQ_RCVD) {
		if (param->private_data_len > SIDR_REP_PRIVATE_LEN) {
			ret = EINVAL;
			goto out;
		}
		id->qpn = param->qp_num & BTH_QPN_MASK;
		if (param->qkey)
			id->qkey = param->qkey;
		cm_unqueue_locked(id);
		cm_send_sidr_rep_locked(id, SIDR_STATUS_OK,
					param->private_data,
					param->private_data_len);
		id->state = CM_ESTABLISHED;
		goto out;
	}
	if (id->state != CM_REQ_RCVD ||
	    param->private_data_len > REP_PRIVATE_LEN) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	if (!cm_peer_alive(cm, id->peer_slot, id->peer_token)) {
		ret = ECONNRESET;
		goto out;
	}
	cm_unqueue_locked(id);
	id->qpn = param->qp_num & BTH_QPN_MASK;
	id->resp_res = param->responder_resources;
	id->init_depth = param->initiator_depth;
	cm_mad_init(id, mad, CM_ATTR_REP);
	cm_put32(d, REP_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, REP_REMOTE_COMM_ID, id->remote_id);
	cm_put32(d, REP_LOCAL_QPN, id->qpn << 8);
	cm_put32(d, REP_START_PSN, id->psn << 8);
	cm_put8(d, REP_RESP_RES, id->resp_res);
	cm_put8(d, REP_INIT_DEPTH, id->init_depth);
	cm_put8(d, REP_FLAGS,
		(uint8_t)(CM_LOCAL_ACK_TIMEOUT << 3 |
			  (param->flow_control ? 1 : 0)));
	cm_put8(d, REP_RNR_SRQ,
		(uint8_t)((param->rnr_retry_count & 7) << 5 |
			  (param->srq ? 0x10 : 0)));
	cm_put64(d, REP_LOCAL_CA_GUID, cm->hca->node.seg->node_guid);
	memcpy(d + REP_PRIVATE, param->private_data, param->private_data_len);
	id->state = CM_REP_SENT;
	cm_send_keep_locked(id, mad, true);
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_reject(struct emu_cm_id *id, const void *pd, uint8_t len)
{
	struct emu_cm *cm = id->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	switch (id->state) {
	case CM_SIDR_REQ_RCVD:
		if (len > SIDR_REP_PRIVATE_LEN) {
			ret = EINVAL;
			break;
		}
		cm_unqueue_locked(id);
		cm_send_sidr_rep_locked(id, SIDR_STATUS_REJECTED, pd, len);
		id->state = CM_FAILED;
		break;
	case CM_REQ_RCVD:
	case CM_REP_RCVD:
		if (len > REJ_PRIVATE_LEN) {
			ret = EINVAL;
			break;
		}
		cm_unqueue_locked(id);
		cm_send_rej_locked(id,
				   id->state == CM_REQ_RCVD ? REJ_MSG_REQ
							    : REJ_MSG_REP,
				   REJ_CONSUMER, pd, len);
		id->state = CM_FAILED;
		id->deadline = 0;
		break;
	default:
		ret = cm_wrong_state_locked(id);
	}
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_establish(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (id->state != CM_REP_RCVD) {
		ret = cm_wrong_state_locked(id);
		goto out;
	}
	cm_mad_init(id, mad, CM_ATTR_RTU);
	cm_put32(d, RTU_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, RTU_REMOTE_COMM_ID, id->remote_id);
	/* kept to answer a repeated REP (IBA 12.9.5) */
	cm_send_keep_locked(id, mad, false);
	id->state = CM_ESTABLISHED;
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_notify(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;

	pthread_mutex_lock(&cm->lock);
	/* IBA 12.9.5: data on the QP before the RTU stands for it */
	if (id->state == CM_REP_SENT) {
		id->deadline = 0;
		id->has_last = false;
		id->state = CM_ESTABLISHED;
		cm_event_locked(id, EMU_CM_ESTABLISHED, 0);
	}
	pthread_mutex_unlock(&cm->lock);
	return 0;
}

int emu_cm_disconnect(struct emu_cm_id *id)
{
	struct emu_cm *cm = id->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	switch (id->state) {
	case CM_ESTABLISHED:
	case CM_REP_RCVD:
	case CM_REP_SENT:
		if (id->qp_type == IBV_QPT_UD) {
			id->state = CM_DISCONNECTED;
			break;
		}
		cm_send_dreq_locked(id, true);
		id->state = CM_DREQ_SENT;
		break;
	case CM_DREQ_SENT:
	case CM_DISCONNECTED:
		break;
	default:
		ret = cm_wrong_state_locked(id);
	}
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

int emu_cm_init_qp_attr(struct emu_cm_id *id, struct ibv_qp_attr *attr,
			int *mask)
{
	struct emu_cm *cm = id->cm;
	enum ibv_qp_state want = attr->qp_state;
	bool connected;
	int ret = 0;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = want;
	pthread_mutex_lock(&cm->lock);
	if (id->state == CM_CLOSED) {
		ret = ENOENT;
		goto out;
	}
	connected = id->state == CM_REQ_RCVD || id->state == CM_REP_SENT ||
		    id->state == CM_REP_RCVD || id->state == CM_ESTABLISHED;
	if (id->qp_type == IBV_QPT_UD) {
		switch (want) {
		case IBV_QPS_INIT:
			attr->pkey_index = 0;
			attr->port_num = 1;
			attr->qkey = id->qkey;
			*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				IBV_QP_PORT | IBV_QP_QKEY;
			break;
		case IBV_QPS_RTR:
			*mask = IBV_QP_STATE;
			break;
		case IBV_QPS_RTS:
			attr->sq_psn = id->psn;
			*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
			break;
		default:
			ret = EINVAL;
		}
		goto out;
	}
	switch (want) {
	case IBV_QPS_INIT:
		attr->pkey_index = 0;
		attr->port_num = 1;
		/* Before a connection no remote access; with one, what its
		 * responder resources allow (the kernel's ib_cm). */
		attr->qp_access_flags = 0;
		if (connected) {
			attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
			if (id->resp_res)
				attr->qp_access_flags |=
					IBV_ACCESS_REMOTE_READ |
					IBV_ACCESS_REMOTE_ATOMIC;
		}
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			IBV_QP_ACCESS_FLAGS;
		break;
	case IBV_QPS_RTR:
		if (!connected) {
			ret = EINVAL;
			break;
		}
		attr->path_mtu = IBEMU_MAX_MTU;
		attr->dest_qp_num = id->remote_qpn;
		attr->rq_psn = id->remote_psn;
		cm_ah_locked(id, &attr->ah_attr);
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
		/* RDMA READ and atomic responders: RC and the XRC target;
		 * not UC nor the XRC initiator (IBA 11.2.5.2, A14.4) */
		if (id->qp_type == IBV_QPT_RC ||
		    id->qp_type == IBV_QPT_XRC_RECV) {
			attr->max_dest_rd_atomic = id->resp_res;
			attr->min_rnr_timer = 0;
			*mask |= IBV_QP_MAX_DEST_RD_ATOMIC |
				 IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_RTS:
		if (!connected) {
			ret = EINVAL;
			break;
		}
		attr->sq_psn = id->psn;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
		/* Acknowledged transports have a timeout; their requesters,
		 * RC and the XRC initiator, retries and READ depth
		 * (IBA 11.2.5.2, A14.4) */
		if (id->qp_type != IBV_QPT_UC) {
			attr->timeout = id->ack_timeout_set ?
						id->ack_timeout :
						CM_LOCAL_ACK_TIMEOUT;
			*mask |= IBV_QP_TIMEOUT;
		}
		if (id->qp_type == IBV_QPT_RC ||
		    id->qp_type == IBV_QPT_XRC_SEND) {
			attr->retry_cnt = id->retry_count;
			attr->rnr_retry = id->rnr_retry;
			attr->max_rd_atomic = id->init_depth;
			*mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				 IBV_QP_MAX_QP_RD_ATOMIC;
		}
		break;
	default:
		ret = EINVAL;
	}
out:
	pthread_mutex_unlock(&cm->lock);
	return ret;
}
