/* SPDX-License-Identifier: MIT */
/*
 * The HCA's objects in the run trace (doc/trace.md): QPs created,
 * destroyed and changing state, work requests posted, completions and
 * asynchronous events.  Each costs one load when no trace is recorded:
 * the inline wrappers test trace_rec_on() before calling the recorder.
 */
#ifndef IBEMU_HCA_TRACE_H
#define IBEMU_HCA_TRACE_H

#include <infiniband/verbs.h>

#include "hca.h"
#include "trace_rec.h"

void hca_trace_qp_create_rec(const struct emu_qp *qp);
static inline void hca_trace_qp_create(const struct emu_qp *qp)
{
	if (trace_rec_on())
		hca_trace_qp_create_rec(qp);
}
void hca_trace_qp_destroy_rec(const struct emu_qp *qp);
static inline void hca_trace_qp_destroy(const struct emu_qp *qp)
{
	if (trace_rec_on())
		hca_trace_qp_destroy_rec(qp);
}
/* why: the HCA's reason for a state the consumer did not ask for, or
 * NULL (ibv_modify_qp). */
void hca_trace_qp_state_rec(const struct emu_qp *qp, enum ibv_qp_state from,
			    enum ibv_qp_state to, const char *why);
static inline void hca_trace_qp_state(const struct emu_qp *qp,
				      enum ibv_qp_state from,
				      enum ibv_qp_state to, const char *why)
{
	if (trace_rec_on())
		hca_trace_qp_state_rec(qp, from, to, why);
}
void hca_trace_post_send_rec(const struct emu_qp *qp, const struct wqe *w);
static inline void hca_trace_post_send(const struct emu_qp *qp,
				       const struct wqe *w)
{
	if (trace_rec_on())
		hca_trace_post_send_rec(qp, w);
}
/* The receive WRs of the chain wr accepted, up to bad (NULL: all); srq:
 * the SRQ's handle, or 0 for the QP's own receive queue. */
void hca_trace_post_recv_rec(uint32_t qpn, uint64_t srq,
			     const struct ibv_recv_wr *wr,
			     const struct ibv_recv_wr *bad);
static inline void hca_trace_post_recv(uint32_t qpn, uint64_t srq,
				       const struct ibv_recv_wr *wr,
				       const struct ibv_recv_wr *bad)
{
	if (trace_rec_on())
		hca_trace_post_recv_rec(qpn, srq, wr, bad);
}
void hca_trace_cqe_rec(const struct emu_cq *cq, const struct ibv_wc *wc);
static inline void hca_trace_cqe(const struct emu_cq *cq,
				 const struct ibv_wc *wc)
{
	if (trace_rec_on())
		hca_trace_cqe_rec(cq, wc);
}
/* obj: the handle of the object it is about (a QP's is in its
 * qp_create event), or the port number */
void hca_trace_async_rec(enum ibv_event_type type, uint64_t obj);
static inline void hca_trace_async(enum ibv_event_type type, uint64_t obj)
{
	if (trace_rec_on())
		hca_trace_async_rec(type, obj);
}
/* The names doc/trace.md gives to completion opcodes and statuses
 * (work request opcodes: wr_opcode.h's table). */
const char *wc_opcode_trace_name(enum ibv_wc_opcode op);
const char *wc_status_trace_name(enum ibv_wc_status st);

#endif /* IBEMU_HCA_TRACE_H */
