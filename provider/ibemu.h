/* SPDX-License-Identifier: MIT */
/*
 * The provider: ibemu's objects as libibverbs sees them.  Each embeds the
 * core object first (struct verbs_qp, verbs_mr, verbs_cq, ...) so stock
 * code that reads the core fields keeps working; to_xxx() go back.
 *
 * Prototypes are grouped by the file that defines them.
 */
#ifndef IBEMU_PROVIDER_H
#define IBEMU_PROVIDER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "inbox.h"
#include "node.h"
#include "pabi.h"
#include "params.h"
#include "queue.h"

#define IBEMU_EXPORT __attribute__((visibility("default")))

#ifndef container_of
#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/*
 * The process's attachment to its node, shared by every context.
 * Lock rule: process.lock protects refs, node attach/detach and the MR
 * key table (mr_table, mr_cursor, mr_variant).
 */
struct ibemu_process {
	pthread_mutex_t lock;
	unsigned int refs; /* open contexts */
	struct node node;
	struct ibemu_mr **mr_table; /* IBEMU_MAX_MR entries, by key index */
	uint8_t *mr_variant; /* per index: low 8 bits of the next key */
	uint32_t mr_cursor;
	uint32_t nr_mrs;
	struct engine *engine; /* the data path; see emulator/engine.h */
	pid_t pid; /* who attached: a forked child sees its parent's here */
};

extern struct ibemu_process ibemu_process;

struct ibemu_device {
	struct verbs_device vdev;
	int port_count;
};

struct ibemu_context {
	struct verbs_context vctx;
	pid_t pid; /* the process that opened it */
	struct node *node;
	int async_wfd; /* non-blocking write end of context.async_fd */
	/* Lock rule: counts only, atomically updated. */
	atomic_int nr_pds, nr_cqs, nr_qps, nr_srqs, nr_ahs;
};

struct ibemu_pd {
	struct ibv_pd ibv_pd;
	atomic_int usecnt; /* MRs, QPs, SRQs, AHs using this PD */
};

struct ibemu_mr {
	struct verbs_mr vmr;
	uint64_t iova; /* address the HCA sees (ibv_reg_mr_iova) */
	uint32_t index; /* in ibemu_process.mr_table */
};

/*
 * Completion queue.  Lock rule: cq.lock protects the ring, armed and
 * overflow; it may be taken while holding a QP lock (QP -> CQ order),
 * never the reverse.
 */
struct ibemu_cq {
	struct verbs_cq vcq;
	pthread_mutex_t lock;
	struct wc_ring ring;
	int armed; /* 0, IBEMU_CQ_ARM_NEXT or IBEMU_CQ_ARM_SOLICITED */
	bool overflow;
	atomic_int usecnt; /* QPs and SRQs using this CQ */
	uint64_t wc_flags; /* ibv_create_cq_ex: which fields to report */
	struct ibv_wc *cur; /* extended poll: the entry being read */
};

enum {
	IBEMU_CQ_ARM_NEXT = 1,
	IBEMU_CQ_ARM_SOLICITED = 2,
};

/* Receive queue: the QP's own or an SRQ's.  Lock rule: its own lock. */
struct ibemu_rq {
	pthread_mutex_t lock;
	struct wqe_ring ring;
	uint32_t max_sge;
};

struct ibemu_srq {
	struct verbs_srq vsrq;
	struct ibemu_rq rq;
	uint32_t srq_limit; /* armed limit, 0 = not armed (IBA 10.2.9.4) */
	atomic_int usecnt; /* QPs attached */
};

/*
 * Queue pair.  Lock rule: qp.lock protects attr, state, the send queue;
 * the receive queue has its own lock (rq.lock).  Order: qp.lock, then
 * rq.lock, then cq.lock.
 */
struct ibemu_qp {
	struct verbs_qp vqp;
	pthread_mutex_t lock;
	struct ibv_qp_attr attr; /* everything set by modify_qp */
	struct ibv_qp_cap cap; /* what create_qp granted */
	int sq_sig_all;
	struct wqe_ring sq;
	struct ibemu_rq rq; /* unused when attached to an SRQ */
	struct ibemu_cq *scq, *rcq;
	struct ibemu_srq *srq;
	struct ibemu_mcast_attach *mcast; /* groups joined (UD only) */
	unsigned int nr_mcast;

	/* Extended send API, under qp.lock from wr_start to wr_complete. */
	uint64_t send_ops_flags;
	uint32_t wr_tail; /* WRs built but not yet posted end here */
	int wr_err; /* first builder error of the batch */
	struct wqe *wr_cur; /* the WR the setters fill */

	/* Engine state, under qp.lock (emulator/req.c, resp.c, comp.c). */
	struct ibemu_qp *pending_next; /* engine's pending list */
	struct ibemu_qp *pass_next; /* the pending pass's own walk */
	struct ibemu_qp *ack_next; /* engine's ACK list (engine.lock) */
	bool ack_queued; /* on it (engine.lock) */
	bool on_pending;
	struct inbox *peer; /* the connected QP's process inbox (RC/UC) */
	int32_t peer_proc;
	uint32_t mtu; /* path MTU in bytes */
	/* requester */
	uint32_t req_psn; /* PSN of the next new packet */
	uint32_t req_next; /* SQ position of the next WQE to (re)send */
	uint32_t req_rd_atomic; /* READ/ATOMIC outstanding */
	bool req_blocked; /* the peer's inbox was full */
	/* completer */
	uint64_t comp_deadline; /* retransmit timer, ns; 0 = idle */
	uint64_t rnr_resume; /* RNR wait ends, ns; 0 = none */
	uint8_t retry_left, rnr_left;
	/* responder */
	uint32_t resp_epsn; /* expected PSN */
	uint32_t resp_msn; /* message sequence number */
	bool resp_nak_sent; /* one PSN sequence NAK per gap */
	bool resp_comm_est; /* COMM_EST raised */
	uint32_t resp_op; /* OPM_SEND/OPM_WRITE while a message is open */
	struct wqe *resp_wqe; /* receive WQE of the open message */
	bool resp_has_wqe;
	uint32_t resp_offset; /* bytes placed in the open message */
	uint8_t *resp_va; /* RDMA WRITE: where the next byte goes */
	uint32_t resp_remaining; /* RDMA WRITE: bytes still expected */
	uint32_t resp_wlen; /* RDMA WRITE: total length */
	bool resp_ack_pending; /* an ACK could not be sent yet */
	bool sqd_notify; /* raise SQ_DRAINED when the SQ drains */
	/* READ responses still to send (IBA 9.7.4.1.5 responder resources) */
	struct resp_read *reads;
	uint32_t reads_head, reads_tail, reads_size;
	/* last atomic, replayed on a duplicate (IBA 9.7.4.1.6) */
	uint32_t atomic_psn;
	uint64_t atomic_orig;
	bool atomic_valid;
};

/* A READ request the responder is answering. */
struct resp_read {
	uint32_t psn; /* of the next response packet */
	uint8_t *va; /* next byte to send */
	uint32_t left; /* bytes still to send */
	bool first; /* no response packet sent yet */
	uint32_t total;
	uint32_t dst_qpn;
	int32_t dst_proc;
};

struct ibemu_mcast_attach {
	union ibv_gid gid;
	uint16_t lid;
};

struct ibemu_ah {
	struct ibv_ah ibv_ah;
	struct ibv_ah_attr attr;
};

/*
 * A context inherited through fork() belongs to the parent's attachment:
 * the child's verbs on it fail with EIO (as on a disassociated device)
 * instead of touching state the child does not have.
 */
static inline bool ibemu_ctx_stale(const struct ibv_context *c)
{
	return container_of(c, struct ibemu_context, vctx.context)->pid !=
	       ibemu_process.pid;
}

static inline struct ibemu_device *to_edev(struct ibv_device *d)
{
	return container_of(d, struct ibemu_device, vdev.device);
}
static inline struct ibemu_context *to_ectx(struct ibv_context *c)
{
	return container_of(c, struct ibemu_context, vctx.context);
}
static inline struct ibemu_pd *to_epd(struct ibv_pd *pd)
{
	return container_of(pd, struct ibemu_pd, ibv_pd);
}
static inline struct ibemu_mr *to_emr(struct ibv_mr *mr)
{
	return container_of(mr, struct ibemu_mr, vmr.ibv_mr);
}
static inline struct ibemu_cq *to_ecq(struct ibv_cq *cq)
{
	return container_of(cq, struct ibemu_cq, vcq.cq);
}
static inline struct ibemu_cq *to_ecq_ex(struct ibv_cq_ex *cq)
{
	return container_of(cq, struct ibemu_cq, vcq.cq_ex);
}
static inline struct ibemu_qp *to_eqp(struct ibv_qp *qp)
{
	return container_of(qp, struct ibemu_qp, vqp.qp);
}
static inline struct ibemu_srq *to_esrq(struct ibv_srq *srq)
{
	return container_of(srq, struct ibemu_srq, vsrq.srq);
}
static inline struct ibemu_ah *to_eah(struct ibv_ah *ah)
{
	return container_of(ah, struct ibemu_ah, ibv_ah);
}

/* shim.c: the run-time link to libibverbs' private ABI */
struct pabi_funcs {
	pabi_init_and_alloc_context_fn init_and_alloc_context;
	pabi_set_ops_fn set_ops;
	pabi_uninit_context_fn uninit_context;
};
extern struct pabi_funcs pabi;
bool ibemu_is_ours(const struct ibv_context *context);
bool ibemu_shim_enabled(void);
int ibemu_pipe_rdwr(int *fd_p);
/* PABI 34's ibv_query_gid_type(), interposed; type is enum ibv_gid_type_sysfs */
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, int *type);

/* device.c: devices and contexts */
struct ibv_device *ibemu_device_get(void);
uint64_t ibemu_process_node_guid(void);
void ibemu_async_event(struct ibemu_context *ctx, enum ibv_event_type type,
		       uint64_t element);

/* query.c: device, port, GID and P_Key attributes */
int ibemu_query_device_ex(struct ibv_context *context,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size);
int ibemu_query_port(struct ibv_context *context, uint8_t port_num,
		     struct ibv_port_attr *port_attr);
int ibemu_query_gid_entry(struct ibv_context *context, uint32_t port_num,
			  uint32_t index, struct ibv_gid_entry *entry);
int ibemu_query_pkey_value(struct ibv_context *context, uint8_t port_num,
			   int index, uint16_t *pkey_p);
bool ibemu_port_valid(struct ibv_context *context, unsigned int port_num);

/* pd.c */
struct ibv_pd *ibemu_alloc_pd(struct ibv_context *context);
int ibemu_dealloc_pd(struct ibv_pd *pd);

/* mr.c */
struct ibv_mr *ibemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access);
int ibemu_dereg_mr(struct verbs_mr *vmr);
int ibemu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		   void *addr, size_t length, int access);
struct ibemu_mr *ibemu_mr_lookup(uint32_t key, bool remote);
int ibemu_mr_table_init(struct ibemu_process *proc);
void ibemu_mr_table_fini(struct ibemu_process *proc);

/* cq.c */
struct ibv_cq *ibemu_create_cq(struct ibv_context *context, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector);
struct ibv_cq_ex *ibemu_create_cq_ex(struct ibv_context *context,
				     struct ibv_cq_init_attr_ex *attr);
int ibemu_destroy_cq(struct ibv_cq *cq);
int ibemu_resize_cq(struct ibv_cq *cq, int cqe);
int ibemu_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
int ibemu_req_notify_cq(struct ibv_cq *cq, int solicited_only);
void ibemu_cq_event(struct ibv_cq *cq);
/* Add a completion; false if the CQ has overrun (the entry is lost). */
bool ibemu_cq_push(struct ibemu_cq *cq, const struct ibv_wc *wc);
bool ibemu_cq_push_wc(struct ibemu_cq *cq, const struct ibv_wc *wc,
		      bool solicited);

/* srq.c */
struct ibv_srq *ibemu_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int ibemu_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		     int mask);
int ibemu_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int ibemu_destroy_srq(struct ibv_srq *srq);
int ibemu_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);
int ibemu_rq_init(struct ibemu_rq *rq, uint32_t max_wr, uint32_t max_sge);
void ibemu_rq_fini(struct ibemu_rq *rq);
int ibemu_rq_post(struct ibemu_rq *rq, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);

/* qp.c */
struct ibv_qp *ibemu_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
struct ibv_qp *ibemu_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr);
int ibemu_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int ibemu_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init_attr);
int ibemu_destroy_qp(struct ibv_qp *qp);

/* mcast.c: multicast group attachment */
int ibemu_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		       uint16_t lid);
int ibemu_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		       uint16_t lid);

/* qp_ex.c: the extended send API */
int ibemu_qp_ex_init(struct ibemu_qp *qp, uint64_t send_ops_flags);

/* post.c: posting work requests */
int ibemu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int ibemu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);
void ibemu_qp_flush_locked(struct ibemu_qp *qp);
void ibemu_qp_flush_sq_locked(struct ibemu_qp *qp);
void ibemu_flush_wqe(struct ibemu_cq *cq, struct ibemu_qp *qp,
		     const struct wqe *wqe, enum ibv_wc_opcode opcode);

/* ah.c */
struct ibv_ah *ibemu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ibemu_destroy_ah(struct ibv_ah *ah);
int ibemu_check_ah_attr(struct ibv_context *context,
			const struct ibv_ah_attr *attr);

#endif /* IBEMU_PROVIDER_H */
