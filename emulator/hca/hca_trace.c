// SPDX-License-Identifier: MIT
/* The HCA's objects in the run trace (see hca_trace.h, doc/trace.md). */
#include "config.h"

#include <stdio.h>

#include "hca_trace.h"
#include "qp_state.h"
#include "wr_opcode.h"

#define NAME(tbl, i)                                                           \
	((unsigned int)(i) < sizeof(tbl) / sizeof(tbl[0]) && tbl[i]            \
		 ? tbl[i]                                                      \
		 : "UNKNOWN")

const char *wc_opcode_trace_name(enum ibv_wc_opcode op)
{
	static const char *const names[] = {
		[IBV_WC_SEND] = "SEND",
		[IBV_WC_RDMA_WRITE] = "RDMA_WRITE",
		[IBV_WC_RDMA_READ] = "RDMA_READ",
		[IBV_WC_COMP_SWAP] = "COMP_SWAP",
		[IBV_WC_FETCH_ADD] = "FETCH_ADD",
		[IBV_WC_BIND_MW] = "BIND_MW",
		[IBV_WC_LOCAL_INV] = "LOCAL_INV",
		[IBV_WC_TSO] = "TSO",
		[EMU_WC_ATOMIC_WRITE] = "ATOMIC_WRITE",
		[IBV_WC_RECV] = "RECV",
		[IBV_WC_RECV_RDMA_WITH_IMM] = "RECV_RDMA_WITH_IMM",
		[IBV_WC_DRIVER1] = "UMR", /* MLX5DV_WC_UMR */
	};

	return NAME(names, op);
}

const char *wc_status_trace_name(enum ibv_wc_status st)
{
	static const char *const names[] = {
		[IBV_WC_SUCCESS] = "SUCCESS",
		[IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
		[IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR",
		[IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
		[IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR",
		[IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
		[IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR",
		[IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
		[IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR",
		[IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
		[IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR",
		[IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
		[IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
		[IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR",
		[IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR",
		[IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR",
		[IBV_WC_FATAL_ERR] = "FATAL_ERR",
		[IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR",
		[IBV_WC_GENERAL_ERR] = "GENERAL_ERR",
	};

	return NAME(names, st);
}

static const char *qp_type_trace_name(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	case IBV_QPT_XRC_SEND:
		return "XRC_SEND";
	case IBV_QPT_XRC_RECV:
		return "XRC_RECV";
	case IBV_QPT_RAW_PACKET:
		return "RAW";
	default:
		return "UNKNOWN";
	}
}

static unsigned long long cq_id(const struct emu_cq *cq)
{
	return cq ? (unsigned long long)cq->owner.handle : 0;
}

void hca_trace_qp_create_rec(const struct emu_qp *qp)
{
	char srq[32] = "";

	if (qp->srq)
		snprintf(srq, sizeof(srq), " srq=%llu",
			 (unsigned long long)qp->srq->owner.handle);
	trace_rec("qp_create", "qp=%u type=%s scq=%llu rcq=%llu obj=%llu%s",
		  (unsigned int)qp->qpn, qp_type_trace_name(qp->type),
		  cq_id(qp->scq), cq_id(qp->rcq),
		  (unsigned long long)qp->owner.handle, srq);
}

void hca_trace_qp_destroy_rec(const struct emu_qp *qp)
{
	trace_rec("qp_destroy", "qp=%u", (unsigned int)qp->qpn);
}

void hca_trace_qp_state_rec(const struct emu_qp *qp, enum ibv_qp_state from,
			    enum ibv_qp_state to, const char *why)
{
	if (from == to)
		return;
	if (why)
		trace_rec("qp_state", "qp=%u from=%s to=%s why=%s",
			  (unsigned int)qp->qpn, qp_state_name(from),
			  qp_state_name(to), why);
	else if (to == IBV_QPS_RTR && qp->type != IBV_QPT_UD)
		trace_rec("qp_state", "qp=%u from=%s to=%s dqp=%u dlid=%u",
			  (unsigned int)qp->qpn, qp_state_name(from),
			  qp_state_name(to), (unsigned int)qp->attr.dest_qp_num,
			  (unsigned int)qp->attr.ah_attr.dlid);
	else
		trace_rec("qp_state", "qp=%u from=%s to=%s",
			  (unsigned int)qp->qpn, qp_state_name(from),
			  qp_state_name(to));
}

void hca_trace_post_send_rec(const struct emu_qp *qp, const struct wqe *w)
{
	bool sig = qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED);

	/* Only opcodes the HCA accepts are posted: each has its name. */
	trace_rec("post_send", "qp=%u wr=0x%llx op=%s len=%u sig=%d%s",
		  (unsigned int)qp->qpn, (unsigned long long)w->wr_id,
		  wr_opcode_get(w->opcode)->name, (unsigned int)w->length, sig,
		  w->send_flags & IBV_SEND_INLINE ? " inline=1" : "");
}

static void trace_post_recv_one(uint32_t qpn, uint64_t srq,
				const struct ibv_recv_wr *wr)
{
	uint64_t len = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++)
		len += wr->sg_list[i].length;
	if (srq)
		trace_rec("post_recv", "srq=%llu wr=0x%llx len=%llu",
			  (unsigned long long)srq,
			  (unsigned long long)wr->wr_id,
			  (unsigned long long)len);
	else
		trace_rec("post_recv", "qp=%u wr=0x%llx len=%llu",
			  (unsigned int)qpn, (unsigned long long)wr->wr_id,
			  (unsigned long long)len);
}

void hca_trace_post_recv_rec(uint32_t qpn, uint64_t srq,
			     const struct ibv_recv_wr *wr,
			     const struct ibv_recv_wr *bad)
{
	for (; wr && wr != bad; wr = wr->next)
		trace_post_recv_one(qpn, srq, wr);
}

void hca_trace_cqe_rec(const struct emu_cq *cq, const struct ibv_wc *wc)
{
	trace_rec("cqe", "qp=%u cq=%llu wr=0x%llx status=%s op=%s len=%u",
		  (unsigned int)wc->qp_num, cq_id(cq),
		  (unsigned long long)wc->wr_id,
		  wc_status_trace_name(wc->status),
		  wc_opcode_trace_name(wc->opcode), (unsigned int)wc->byte_len);
}

static const char *event_trace_name(enum ibv_event_type type)
{
	static const char *const names[] = {
		[IBV_EVENT_CQ_ERR] = "CQ_ERR",
		[IBV_EVENT_QP_FATAL] = "QP_FATAL",
		[IBV_EVENT_QP_REQ_ERR] = "QP_REQ_ERR",
		[IBV_EVENT_QP_ACCESS_ERR] = "QP_ACCESS_ERR",
		[IBV_EVENT_COMM_EST] = "COMM_EST",
		[IBV_EVENT_SQ_DRAINED] = "SQ_DRAINED",
		[IBV_EVENT_PATH_MIG] = "PATH_MIG",
		[IBV_EVENT_PATH_MIG_ERR] = "PATH_MIG_ERR",
		[IBV_EVENT_DEVICE_FATAL] = "DEVICE_FATAL",
		[IBV_EVENT_PORT_ACTIVE] = "PORT_ACTIVE",
		[IBV_EVENT_PORT_ERR] = "PORT_ERR",
		[IBV_EVENT_LID_CHANGE] = "LID_CHANGE",
		[IBV_EVENT_PKEY_CHANGE] = "PKEY_CHANGE",
		[IBV_EVENT_SM_CHANGE] = "SM_CHANGE",
		[IBV_EVENT_SRQ_ERR] = "SRQ_ERR",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ_LIMIT_REACHED",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "QP_LAST_WQE_REACHED",
		[IBV_EVENT_CLIENT_REREGISTER] = "CLIENT_REREGISTER",
		[IBV_EVENT_GID_CHANGE] = "GID_CHANGE",
	};

	return NAME(names, type);
}

void hca_trace_async_rec(enum ibv_event_type type, uint64_t obj)
{
	trace_rec("async", "type=%s obj=%llu", event_trace_name(type),
		  (unsigned long long)obj);
}
