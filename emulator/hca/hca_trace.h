/* SPDX-License-Identifier: MIT */
/*
 * The HCA's objects in the run trace (doc/trace.md): QPs created,
 * destroyed and changing state, work requests posted, completions and
 * asynchronous events.  Each costs one load when no trace is recorded.
 */
#ifndef IBEMU_HCA_TRACE_H
#define IBEMU_HCA_TRACE_H

#include <infiniband/verbs.h>

#include "hca.h"
#include "trace_rec.h"

void hca_trace_qp_create(const struct emu_qp *qp);
void hca_trace_qp_destroy(const struct emu_qp *qp);
/* why: the HCA's reason for a state the consumer did not ask for, or
 * NULL (ibv_modify_qp). */
void hca_trace_qp_state(const struct emu_qp *qp, enum ibv_qp_state from,
			enum ibv_qp_state to, const char *why);
void hca_trace_post_send(const struct emu_qp *qp, const struct wqe *w);
/* The receive WRs of the chain wr accepted, up to bad (NULL: all); srq:
 * the SRQ's handle, or 0 for the QP's own receive queue. */
void hca_trace_post_recv(uint32_t qpn, uint64_t srq,
			 const struct ibv_recv_wr *wr,
			 const struct ibv_recv_wr *bad);
void hca_trace_cqe(const struct emu_cq *cq, const struct ibv_wc *wc);
/* obj: the handle of the object it is about (a QP's is in its
 * qp_create event), or the port number */
void hca_trace_async(enum ibv_event_type type, uint64_t obj);
/* The names doc/trace.md gives to work request and completion opcodes
 * and to statuses. */
const char *wr_opcode_trace_name(enum ibv_wr_opcode op);
const char *wc_opcode_trace_name(enum ibv_wc_opcode op);
const char *wc_status_trace_name(enum ibv_wc_status st);

#endif /* IBEMU_HCA_TRACE_H */
