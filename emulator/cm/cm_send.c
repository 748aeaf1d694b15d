// SPDX-License-Identifier: MIT
/*
 * The CM messages sent (cm_wire.h): a MAD's header, one MAD to QP1 of a
 * peer process through the engine's transport, and an id's REJ,
 * SIDR_REP and DREQ; what awaits an answer is kept for retransmission
 * (cm_timer.c).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "cm_int.h"
#include "cm_wire.h"
#include "engine.h"
#include "hca.h"
#include "params.h"
#include "trace_rec.h"
#include "transport.h"

/* ---- sending ---- */

void cm_mad_init(struct emu_cm_id *id, uint8_t *mad, uint16_t attr)
{
	memset(mad, 0, CM_MAD_LEN);
	mad[MAD_BASE_VERSION] = 1;
	mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
	mad[MAD_CLASS_VERSION] = 2;
	mad[MAD_METHOD] = MAD_METHOD_SEND;
	cm_put64(mad, MAD_TID, id->tid);
	cm_put16(mad, MAD_ATTR_ID, attr);
}

/* A CM message in the run trace (doc/trace.md): its name, the
 * communication IDs, and the QP a REQ or REP offers. */
void cm_trace_mad(const char *dir, const uint8_t *mad)
{
	static const char *const names[] = {
		"REQ", "MRA", "REJ", "REP", "RTU", "DREQ", "DREP",
		"SIDR_REQ", "SIDR_REP",
	};
	uint16_t attr = cm_get16(mad, MAD_ATTR_ID);
	const uint8_t *d = mad + CM_MAD_HDR;
	char qp[24] = "";

	if (!trace_rec_on() || attr < CM_ATTR_REQ || attr > CM_ATTR_SIDR_REP)
		return;
	if (attr == CM_ATTR_REQ || attr == CM_ATTR_REP)
		snprintf(qp, sizeof(qp), " qp=%u",
			 (unsigned int)(cm_get32(d, attr == CM_ATTR_REQ
							    ? REQ_LOCAL_QPN
							    : REP_LOCAL_QPN) >>
					8));
	trace_rec("cm", "dir=%s msg=%s lcid=%#x rcid=%#x%s", dir,
		  names[attr - CM_ATTR_REQ], (unsigned int)cm_get32(d, 0),
		  (unsigned int)cm_get32(d, 4), qp);
}

/*
 * Send one MAD to QP1 of process slot; caller holds cm.lock.  A packet
 * that finds no room is lost as on a wire: the retransmission timer of
 * whoever waits for an answer sends again.
 */
void cm_send_locked(struct emu_cm *cm, int32_t slot, const uint8_t *mad)
{
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	struct pkt_hdr link = {
		.slid = cm->hca->node.seg->lid,
		.dlid = cm->hca->node.seg->lid,
		.src_qpn = CM_QPN,
		.src_proc = cm->hca->node.proc_slot,
	};
	struct tp_peer_info info;
	struct tp_peer *peer;
	struct pkt_out out;

	if (!e || slot < 0)
		return;
	if (tp_slot_is_remote(slot)) {
		if (!net || !net->peer_info(e, slot, &info))
			return;
		link.dlid = info.lid;
	}
	peer = engine_peer(e, slot);
	if (!peer)
		return;
	out.pkt.src_proc = cm->hca->node.proc_slot;
	if (!peer->tp->pkt_claim(peer, &out.pkt))
		return;
	out.e = e;
	out.dst = peer;
	/* A MAD is a multiple of 4 bytes: no pad (IBA 13.4.2). */
	pkt_layout(&out, &link, IB_OPCODE_UD | IB_OP_SEND_ONLY, CM_QPN, 0,
		   false, CM_MAD_LEN);
	out_set_deth(&out, CM_QP1_QKEY, CM_QPN);
	memcpy(out_payload(&out), mad, CM_MAD_LEN);
	cm_trace_mad("tx", mad);
	pkt_send(&out);
}

/* Send mad to the id's peer and keep it for retransmission (timed: an
 * answer is awaited) or for repeating (a duplicate asks again). */
void cm_send_keep_locked(struct emu_cm_id *id, const uint8_t *mad, bool timed)
{
	memcpy(id->last, mad, CM_MAD_LEN);
	id->has_last = true;
	id->retries = 0;
	id->deadline = timed ? clock_now_ns() + CM_RETRY_MS * 1000000ull : 0;
	cm_send_locked(id->cm, id->peer_slot, mad);
	if (timed)
		cm_wake(id->cm);
}

void cm_send_rej_to(struct emu_cm *cm, int32_t slot, uint64_t tid,
		    uint32_t local_id, uint32_t remote_id, uint8_t msg,
		    uint16_t reason, const void *pd, uint8_t len)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	memset(mad, 0, sizeof(mad));
	mad[MAD_BASE_VERSION] = 1;
	mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
	mad[MAD_CLASS_VERSION] = 2;
	mad[MAD_METHOD] = MAD_METHOD_SEND;
	cm_put64(mad, MAD_TID, tid);
	cm_put16(mad, MAD_ATTR_ID, CM_ATTR_REJ);
	cm_put32(d, REJ_LOCAL_COMM_ID, local_id);
	cm_put32(d, REJ_REMOTE_COMM_ID, remote_id);
	cm_put8(d, REJ_MSG_REJECTED, (uint8_t)(msg << 6));
	cm_put16(d, REJ_REASON, reason);
	if (pd && len)
		memcpy(d + REJ_PRIVATE, pd, len);
	cm_send_locked(cm, slot, mad);
}

void cm_send_rej_locked(struct emu_cm_id *id, uint8_t msg, uint16_t reason,
			const void *pd, uint8_t len)
{
	cm_send_rej_to(id->cm, id->peer_slot, id->tid, id->local_id,
		       id->remote_id, msg, reason, pd, len);
}

void cm_send_sidr_rep_locked(struct emu_cm_id *id, uint8_t status,
			     const void *pd, uint8_t len)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	cm_mad_init(id, mad, CM_ATTR_SIDR_REP);
	cm_put32(d, SIDR_REP_REQUEST_ID, id->remote_id);
	cm_put8(d, SIDR_REP_STATUS, status);
	cm_put32(d, SIDR_REP_QPN, id->qpn << 8);
	cm_put64(d, SIDR_REP_SERVICE_ID,
		 CM_IP_SERVICE_ID(id->ps, cm_port_of(&id->src)));
	cm_put32(d, SIDR_REP_QKEY, id->qkey);
	if (pd && len)
		memcpy(d + SIDR_REP_PRIVATE, pd, len);
	cm_send_keep_locked(id, mad, false);
}

void cm_send_dreq_locked(struct emu_cm_id *id, bool timed)
{
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);

	id->tid = id->cm->next_tid++;
	cm_mad_init(id, mad, CM_ATTR_DREQ);
	cm_put32(d, DREQ_LOCAL_COMM_ID, id->local_id);
	cm_put32(d, DREQ_REMOTE_COMM_ID, id->remote_id);
	cm_put32(d, DREQ_REMOTE_QPN, id->remote_qpn << 8);
	cm_send_keep_locked(id, mad, timed);
}
