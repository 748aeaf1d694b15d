// SPDX-License-Identifier: MIT
/*
 * The CM messages received: cm_recv_locked takes each MAD the engine
 * hands to QP1, checks it and passes it to the handler of its
 * attribute, which finds the id it names (or the listener a request is
 * for) and moves that id's state (IBA 12.9).
 */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>

#include "clock.h"
#include "cm_int.h"
#include "cm_wire.h"
#include "engine.h"
#include "fabric.h"
#include "hca.h"
#include "node.h"
#include "transport.h"

/* ---- receiving ---- */

/* Read the IP CM header into src (the peer's) and dst (ours); false
 * if it is not one (IBA A11.6: version 0, IP version 4 or 6). */
static bool cm_ip_hdr_get(const uint8_t *p, struct sockaddr_storage *src,
			  struct sockaddr_storage *dst, uint16_t dport)
{
	unsigned int ipv = cm_get8(p, CM_IP_HDR_IPV) >> 4;
	struct sockaddr_in *s4 = (struct sockaddr_in *)(void *)src;
	struct sockaddr_in *d4 = (struct sockaddr_in *)(void *)dst;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)(void *)src;
	struct sockaddr_in6 *d6 = (struct sockaddr_in6 *)(void *)dst;

	memset(src, 0, sizeof(*src));
	memset(dst, 0, sizeof(*dst));
	if (cm_get8(p, CM_IP_HDR_VERSION) != 0)
		return false;
	if (ipv == 4) {
		s4->sin_family = d4->sin_family = AF_INET;
		memcpy(&s4->sin_addr, p + CM_IP_HDR_SIP + 12, 4);
		memcpy(&d4->sin_addr, p + CM_IP_HDR_DIP + 12, 4);
		s4->sin_port = htons(cm_get16(p, CM_IP_HDR_SPORT));
		d4->sin_port = htons(dport);
		return true;
	}
	if (ipv == 6) {
		s6->sin6_family = d6->sin6_family = AF_INET6;
		memcpy(&s6->sin6_addr, p + CM_IP_HDR_SIP, 16);
		memcpy(&d6->sin6_addr, p + CM_IP_HDR_DIP, 16);
		s6->sin6_port = htons(cm_get16(p, CM_IP_HDR_SPORT));
		d6->sin6_port = htons(dport);
		return true;
	}
	return false;
}

static struct emu_cm_id *cm_find_locked(struct emu_cm *cm, uint32_t local_id,
					int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next)
		if (id->local_id == local_id && id->peer_slot == slot)
			return id;
	return NULL;
}

static struct emu_cm_id *cm_find_remote_locked(struct emu_cm *cm,
					       uint32_t remote_id, int32_t slot)
{
	struct emu_cm_id *id;

	for (id = cm->ids; id; id = id->next)
		if (id->peer_slot == slot && id->remote_id == remote_id &&
		    id->state != CM_LISTEN)
			return id;
	return NULL;
}

/* Our listener for (ps, port) that takes address a (exact first). */
static struct emu_cm_id *cm_listener_locked(struct emu_cm *cm, uint16_t ps,
					    uint16_t port,
					    const struct sockaddr *a)
{
	struct emu_cm_id *id, *wild = NULL;
	uint8_t want[16], have[16];
	bool v4, v4b;

	cm_addr16(a, want, &v4);
	for (id = cm->ids; id; id = id->next) {
		if (id->state != CM_LISTEN || id->ps != ps ||
		    cm_port_of(&id->src) != port)
			continue;
		if (cm_addr_any((struct sockaddr *)&id->src)) {
			if (id->src.ss_family == AF_INET && !v4)
				continue;
			if (id->src.ss_family == AF_INET6 && v4 && id->afonly)
				continue;
			wild = id;
			continue;
		}
		cm_addr16((struct sockaddr *)&id->src, have, &v4b);
		if (!memcmp(want, have, 16))
			return id;
	}
	return wild;
}

/* A request (REQ or SIDR_REQ) for a listener: a new id with the
 * connection's addresses, reported as CONNECT_REQUEST. */
static struct emu_cm_id *cm_new_conn_locked(struct emu_cm *cm,
					    struct emu_cm_id *l, int32_t slot,
					    const struct sockaddr_storage *peer,
					    const struct sockaddr_storage *self)
{
	struct emu_cm_id *id;
	struct node_proc_id pid;

	id = cm_id_alloc_locked(cm, l->chan, 0, l->ps, l->qp_type);
	if (!id)
		return NULL;
	id->src = *self;
	id->dst = *peer;
	id->peer_slot = slot;
	if (tp_slot_is_remote(slot)) {
		/* the path to it as its connection tells; a REQ's primary
		 * path replaces it (cm_recv_req_locked) */
		id->remote = cm_remote_peer(cm, slot, &id->rlid, id->rgid,
					    &id->node_addr, &id->peer_token);
		cm_own_gid(cm, (const struct sockaddr *)self, id->lgid);
	} else {
		id->peer_token = node_proc_id(&cm->hca->node, slot, &pid)
					 ? 0
					 : pid.token;
	}
	id->live_check = clock_now_ns() + CM_LIVENESS_MS * 1000000ull;
	id->listener = l;
	cm_wake(cm); /* to watch the peer */
	l->queued++;
	return id;
}

/*
 * The path to a remote active side from its REQ's primary path
 * (IBA 12.6.5): its Local LID and GID are the peer's, its Remote GID
 * ours.  What does not name a node the fabric reaches is not taken
 * (the connection's own address stays).
 */
static void cm_req_path_locked(struct emu_cm_id *id, const uint8_t *d)
{
	struct emu_cm *cm = id->cm;
	struct sockaddr_storage a;
	uint16_t lid = cm_get16(d, REQ_PRI_LOCAL_LID);
	const uint8_t *rgid = d + REQ_PRI_LOCAL_GID;
	const uint8_t *lgid = d + REQ_PRI_REMOTE_GID;

	/* IBA 4.1.3: a unicast LID */
	if (lid && lid < 0xc000 &&
	    fabric_locate(&cm->hca->node, lid,
			  (cm_get8(d, REQ_PRI_SL) & REQ_SUBNET_LOCAL) ? NULL
								     : rgid,
			  &a) == FABRIC_THERE) {
		id->rlid = lid;
		if (!(cm_get8(d, REQ_PRI_SL) & REQ_SUBNET_LOCAL))
			memcpy(id->rgid, rgid, 16);
	}
	if (fabric_gid_is_local(&cm->hca->node, lgid))
		memcpy(id->lgid, lgid, 16);
}

static void cm_recv_req_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint64_t sid = cm_get64(d, REQ_SERVICE_ID);
	uint32_t rid = cm_get32(d, REQ_LOCAL_COMM_ID);
	uint64_t tid = cm_get64(mad, MAD_TID);
	struct sockaddr_storage peer, self;
	struct emu_cm_id *l, *id;
	struct emu_cm_event ev;
	uint32_t v;

	id = cm_find_remote_locked(cm, rid, slot);
	if (id) {
		/* A repeated REQ (IBA 12.9.5): the REP again if sent. */
		if (id->state == CM_REP_SENT && id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	if ((sid & 0xffffffffff000000ull) != 0x0000000001000000ull ||
	    !cm_ip_hdr_get(d + REQ_PRIVATE, &peer, &self, (uint16_t)sid)) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	l = cm_listener_locked(cm, (uint16_t)(sid >> 16), (uint16_t)sid,
			       (struct sockaddr *)&self);
	if (!l || l->qp_type == IBV_QPT_UD) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_INVALID_SERVICE_ID, NULL, 0);
		return;
	}
	if (l->queued >= l->backlog) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_NO_RESOURCES, NULL, 0);
		return;
	}
	id = cm_new_conn_locked(cm, l, slot, &peer, &self);
	if (!id) {
		cm_send_rej_to(cm, slot, tid, 0, rid, REJ_MSG_REQ,
			       REJ_NO_RESOURCES, NULL, 0);
		return;
	}
	id->tid = tid;
	id->remote_id = rid;
	if (id->remote)
		cm_req_path_locked(id, d);
	/* drawn now: the QP reaches RTS before the REP carries it */
	id->psn = cm_random() & BTH_PSN_MASK;
	v = cm_get32(d, REQ_LOCAL_QPN);
	id->remote_qpn = v >> 8;
	cm_route_learn(cm, slot, id->remote_qpn);
	memset(&ev, 0, sizeof(ev));
	/* the peer's resources become our limits (IBA 12.7.29-30) */
	ev.param.initiator_depth = (uint8_t)v;
	ev.param.responder_resources = (uint8_t)cm_get32(d, REQ_LOCAL_EECN);
	id->resp_res = ev.param.responder_resources;
	id->init_depth = ev.param.initiator_depth;
	v = cm_get32(d, REQ_START_PSN);
	id->remote_psn = v >> 8;
	id->retry_count = v & 7;
	id->rnr_retry = cm_get8(d, REQ_MTU_RNR) & 7;
	ev.param.flow_control = cm_get32(d, REQ_REMOTE_EECN) & 1;
	ev.param.retry_count = id->retry_count;
	ev.param.rnr_retry_count = id->rnr_retry;
	ev.param.srq = (cm_get8(d, REQ_MAX_RETRIES) & 8) != 0;
	ev.param.qp_num = id->remote_qpn;
	ev.param.private_data_len = CM_REQ_USER_PRIVATE;
	memcpy(ev.param.private_data, d + REQ_PRIVATE + CM_IP_HDR_LEN,
	       CM_REQ_USER_PRIVATE);
	ev.new_id = id;
	id->state = CM_REQ_RCVD;
	ev.event = EMU_CM_CONNECT_REQUEST;
	cm_queue_locked(l, &ev);
}

static void cm_recv_sidr_req_locked(struct emu_cm *cm, const uint8_t *mad,
				    int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint64_t sid = cm_get64(d, SIDR_REQ_SERVICE_ID);
	uint32_t rid = cm_get32(d, SIDR_REQ_REQUEST_ID);
	struct sockaddr_storage peer, self;
	struct emu_cm_id *l, *id;
	struct emu_cm_event ev;
	struct emu_cm_id tmp;

	id = cm_find_remote_locked(cm, rid, slot);
	if (id) {
		if (id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	l = NULL;
	if ((sid & 0xffffffffff000000ull) == 0x0000000001000000ull &&
	    cm_ip_hdr_get(d + SIDR_REQ_PRIVATE, &peer, &self, (uint16_t)sid))
		l = cm_listener_locked(cm, (uint16_t)(sid >> 16),
				       (uint16_t)sid,
				       (struct sockaddr *)&self);
	if (!l || l->qp_type != IBV_QPT_UD || l->queued >= l->backlog) {
		/* IBA 12.11.2: the service ID is not served here */
		memset(&tmp, 0, sizeof(tmp));
		tmp.cm = cm;
		tmp.tid = cm_get64(mad, MAD_TID);
		tmp.remote_id = rid;
		tmp.peer_slot = slot;
		tmp.ps = (uint16_t)(sid >> 16);
		{
			uint8_t out[CM_MAD_LEN], *o = cm_data(out);

			cm_mad_init(&tmp, out, CM_ATTR_SIDR_REP);
			cm_put32(o, SIDR_REP_REQUEST_ID, rid);
			cm_put8(o, SIDR_REP_STATUS,
				l ? SIDR_STATUS_REJECTED
				  : SIDR_STATUS_NO_SERVICE);
			cm_put64(o, SIDR_REP_SERVICE_ID, sid);
			cm_send_locked(cm, slot, out);
		}
		return;
	}
	id = cm_new_conn_locked(cm, l, slot, &peer, &self);
	if (!id)
		return;
	id->tid = cm_get64(mad, MAD_TID);
	id->remote_id = rid;
	id->state = CM_SIDR_REQ_RCVD;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_CONNECT_REQUEST;
	ev.new_id = id;
	ev.param.private_data_len = CM_SIDR_REQ_USER_PRIVATE;
	memcpy(ev.param.private_data, d + SIDR_REQ_PRIVATE + CM_IP_HDR_LEN,
	       CM_SIDR_REQ_USER_PRIVATE);
	cm_queue_locked(l, &ev);
}


static void cm_recv_sidr_rep_locked(struct emu_cm *cm, const uint8_t *mad,
				    int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;
	uint8_t status;

	id = cm_find_locked(cm, cm_get32(d, SIDR_REP_REQUEST_ID), slot);
	if (!id || id->state != CM_SIDR_REQ_SENT)
		return;
	id->deadline = 0;
	status = cm_get8(d, SIDR_REP_STATUS);
	memset(&ev, 0, sizeof(ev));
	ev.param.private_data_len = SIDR_REP_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + SIDR_REP_PRIVATE,
	       SIDR_REP_PRIVATE_LEN);
	if (status != SIDR_STATUS_OK) {
		id->state = CM_FAILED;
		ev.event = EMU_CM_UNREACHABLE;
		ev.status = status;
		cm_queue_locked(id, &ev);
		return;
	}
	id->state = CM_ESTABLISHED;
	id->remote_qpn = cm_get32(d, SIDR_REP_QPN) >> 8;
	cm_route_learn(cm, slot, id->remote_qpn);
	id->remote_qkey = cm_get32(d, SIDR_REP_QKEY);
	ev.event = EMU_CM_ESTABLISHED;
	ev.param.qp_num = id->remote_qpn;
	ev.param.qkey = id->remote_qkey;
	cm_ah_locked(id, &ev.param.ah_attr);
	cm_queue_locked(id, &ev);
}

static void cm_recv_rep_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint32_t rid = cm_get32(d, REP_LOCAL_COMM_ID);
	struct emu_cm_id *id;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, REP_REMOTE_COMM_ID), slot);
	if (!id) {
		cm_send_rej_to(cm, slot, cm_get64(mad, MAD_TID), 0, rid,
			       REJ_MSG_REP, REJ_INVALID_COMM_ID, NULL, 0);
		return;
	}
	if (id->state == CM_ESTABLISHED && id->remote_id == rid) {
		/* A repeated REP: our RTU was lost (IBA 12.9.5). */
		if (id->has_last)
			cm_send_locked(cm, slot, id->last);
		return;
	}
	if (id->state != CM_REQ_SENT)
		return;
	id->deadline = 0;
	id->has_last = false;
	id->remote_id = rid;
	id->remote_qpn = cm_get32(d, REP_LOCAL_QPN) >> 8;
	cm_route_learn(cm, slot, id->remote_qpn);
	id->remote_psn = cm_get32(d, REP_START_PSN) >> 8;
	memset(&ev, 0, sizeof(ev));
	/* IBA 12.7.29-30: the responder's resources are our initiator
	 * depth and its initiator depth our responder resources (as the
	 * kernel's ib_cm takes them) */
	ev.param.initiator_depth = cm_get8(d, REP_RESP_RES);
	ev.param.responder_resources = cm_get8(d, REP_INIT_DEPTH);
	id->init_depth = ev.param.initiator_depth;
	id->resp_res = ev.param.responder_resources;
	id->rnr_retry = cm_get8(d, REP_RNR_SRQ) >> 5;
	ev.param.flow_control = cm_get8(d, REP_FLAGS) & 1;
	ev.param.rnr_retry_count = id->rnr_retry;
	ev.param.srq = (cm_get8(d, REP_RNR_SRQ) & 0x10) != 0;
	ev.param.qp_num = id->remote_qpn;
	ev.param.private_data_len = REP_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + REP_PRIVATE, REP_PRIVATE_LEN);
	id->state = CM_REP_RCVD;
	ev.event = EMU_CM_CONNECT_RESPONSE;
	cm_queue_locked(id, &ev);
}

static void cm_recv_rtu_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, RTU_REMOTE_COMM_ID), slot);
	if (!id || id->state != CM_REP_SENT ||
	    id->remote_id != cm_get32(d, RTU_LOCAL_COMM_ID))
		return;
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_ESTABLISHED;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_ESTABLISHED;
	ev.param.private_data_len = RTU_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + RTU_PRIVATE, RTU_PRIVATE_LEN);
	ev.param.initiator_depth = id->init_depth;
	ev.param.responder_resources = id->resp_res;
	ev.param.qp_num = id->remote_qpn;
	cm_queue_locked(id, &ev);
}

static void cm_recv_rej_locked(struct emu_cm *cm, const uint8_t *mad,
			       int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;
	struct emu_cm_event ev;
	uint16_t reason = cm_get16(d, REJ_REASON);

	id = cm_find_locked(cm, cm_get32(d, REJ_REMOTE_COMM_ID), slot);
	if (!id)
		return;
	switch (id->state) {
	case CM_REQ_SENT:
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_REQ_RCVD:
		break;
	case CM_ESTABLISHED:
		/* IBA 12.6.7: a REJ of an established connection is
		 * taken as its end (stale connection) */
		cm_disconnected_locked(id, NULL);
		return;
	default:
		return;
	}
	cm_unqueue_locked(id);
	id->deadline = 0;
	id->has_last = false;
	id->state = CM_FAILED;
	memset(&ev, 0, sizeof(ev));
	ev.event = EMU_CM_REJECTED;
	ev.status = reason;
	ev.param.private_data_len = REJ_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + REJ_PRIVATE, REJ_PRIVATE_LEN);
	cm_queue_locked(id, &ev);
}

static void cm_recv_dreq_locked(struct emu_cm *cm, const uint8_t *mad,
				int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	uint8_t out[CM_MAD_LEN], *o = cm_data(out);
	struct emu_cm_id *id, tmp;
	struct emu_cm_event ev;

	id = cm_find_locked(cm, cm_get32(d, DREQ_REMOTE_COMM_ID), slot);
	/* IBA 12.9.6: a DREQ is answered with DREP, also when the
	 * connection is already gone (the first DREP was lost). */
	memset(&tmp, 0, sizeof(tmp));
	tmp.tid = cm_get64(mad, MAD_TID);
	cm_mad_init(&tmp, out, CM_ATTR_DREP);
	cm_put32(o, DREP_LOCAL_COMM_ID, cm_get32(d, DREQ_REMOTE_COMM_ID));
	cm_put32(o, DREP_REMOTE_COMM_ID, cm_get32(d, DREQ_LOCAL_COMM_ID));
	cm_send_locked(cm, slot, out);
	if (!id || id->remote_id != cm_get32(d, DREQ_LOCAL_COMM_ID))
		return;
	switch (id->state) {
	case CM_REP_SENT:
	case CM_REP_RCVD:
	case CM_ESTABLISHED:
	case CM_DREQ_SENT:
		break;
	default:
		return;
	}
	memset(&ev, 0, sizeof(ev));
	ev.param.private_data_len = DREQ_PRIVATE_LEN;
	memcpy(ev.param.private_data, d + DREQ_PRIVATE, DREQ_PRIVATE_LEN);
	cm_disconnected_locked(id, &ev);
}

static void cm_recv_drep_locked(struct emu_cm *cm, const uint8_t *mad,
				int32_t slot)
{
	const uint8_t *d = mad + CM_MAD_HDR;
	struct emu_cm_id *id;

	id = cm_find_locked(cm, cm_get32(d, DREP_REMOTE_COMM_ID), slot);
	if (!id || id->state != CM_DREQ_SENT)
		return;
	cm_disconnected_locked(id, NULL);
}

void cm_recv_locked(struct engine *e, const struct pkt *p)
{
	struct emu_cm *cm = atomic_load_explicit(&e->hca->cm,
						 memory_order_acquire);
	uint8_t mad[CM_MAD_LEN];
	int32_t slot = p->hdr->src_proc;

	/* From a process of this node, or of another through a
	 * connection of ours (a remote slot the transport knows). */
	if (!cm || p->opcode != (IB_OPCODE_UD | IB_OP_SEND_ONLY) ||
	    p->paylen < CM_MAD_LEN || pkt_deth_qkey(p) != CM_QP1_QKEY ||
	    slot < 0 || (tp_slot_is_remote(slot) && !engine_peer(e, slot)))
		return;
	/* The one copy out of the sender's slot (shared memory). */
	memcpy(mad, p->payload, CM_MAD_LEN);
	if (mad[MAD_BASE_VERSION] != 1 || mad[MAD_MGMT_CLASS] != MAD_CLASS_CM ||
	    mad[MAD_CLASS_VERSION] != 2 || mad[MAD_METHOD] != MAD_METHOD_SEND)
		return;
	cm_trace_mad("rx", mad);
	pthread_mutex_lock(&cm->lock);
	switch (cm_get16(mad, MAD_ATTR_ID)) {
	case CM_ATTR_REQ:
		cm_recv_req_locked(cm, mad, slot);
		break;
	case CM_ATTR_REP:
		cm_recv_rep_locked(cm, mad, slot);
		break;
	case CM_ATTR_RTU:
		cm_recv_rtu_locked(cm, mad, slot);
		break;
	case CM_ATTR_REJ:
		cm_recv_rej_locked(cm, mad, slot);
		break;
	case CM_ATTR_DREQ:
		cm_recv_dreq_locked(cm, mad, slot);
		break;
	case CM_ATTR_DREP:
		cm_recv_drep_locked(cm, mad, slot);
		break;
	case CM_ATTR_SIDR_REQ:
		cm_recv_sidr_req_locked(cm, mad, slot);
		break;
	case CM_ATTR_SIDR_REP:
		cm_recv_sidr_rep_locked(cm, mad, slot);
		break;
	default: /* MRA, LAP, APR: not sent by this CM */
		break;
	}
	pthread_mutex_unlock(&cm->lock);
}
