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

#include "emu.h"
#include "pabi.h"
#include "params.h"

#define IBEMU_EXPORT __attribute__((visibility("default")))

#ifndef container_of
#define container_of(ptr, type, member)                                        \
	((type *)((char *)(ptr)-offsetof(type, member)))
#endif

/* The process's pid as the provider last saw it (device.c): a forked
 * child's contexts are its parent's. */
extern pid_t ibemu_pid;

struct ibemu_device {
	struct verbs_device vdev;
	int port_count;
};

struct ibemu_context {
	struct verbs_context vctx;
	pid_t pid; /* the process that opened it */
	struct emu_hca *hca;
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
	struct emu_mr *emr;
};

struct ibemu_cq {
	struct verbs_cq vcq;
	struct emu_cq *ecq;
	int comp_wfd; /* non-blocking write end of the channel, or -1 */
	const struct ibv_wc *cur; /* extended poll: the entry being read */
};

struct ibemu_srq {
	struct verbs_srq vsrq;
	struct emu_srq *esrq;
};

/* One ibv_open_xrcd(3) handle; handles on one file share the domain. */
struct ibemu_xrcd {
	struct verbs_xrcd vxrcd;
	struct emu_xrcd *exrcd;
};

/*
 * Queue pair.  The extended send API stages work requests here, under
 * wr_lock from ibv_wr_start to ibv_wr_complete/abort, and posts them
 * whole (qp_ex.c); nothing else of the QP lives in the provider.
 */
struct ibemu_qp {
	struct verbs_qp vqp;
	struct emu_qp *eqp;
	bool sq_sig_all;
	struct ibv_qp_cap cap; /* what create granted */
	struct ibemu_wr_stage *stage; /* extended send API */
};

struct ibemu_ah {
	struct ibv_ah ibv_ah; /* handle: the HCA's address vector */
};

/*
 * A context inherited through fork() belongs to the parent's attachment:
 * the child's verbs on it fail with EIO (as on a disassociated device)
 * instead of touching state the child does not have.
 */
static inline bool ibemu_ctx_stale(const struct ibv_context *c)
{
	return container_of(c, struct ibemu_context, vctx.context)->pid !=
	       ibemu_pid;
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
static inline struct ibemu_xrcd *to_exrcd(struct ibv_xrcd *xrcd)
{
	return container_of(xrcd, struct ibemu_xrcd, vxrcd.xrcd);
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
/* devnode.c: ibemu0 is offered; its device node answers probes. */
void ibemu_devnode_offer(void);
/* Where events of an object of this context go. */
struct emu_owner ibemu_owner(struct ibv_context *context, void *object);
/* A non-blocking write descriptor for fd's pipe; -1 on failure. */
int ibemu_fd_nonblock_writer(int fd);

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

/* pd.c */
struct ibv_pd *ibemu_alloc_pd(struct ibv_context *context);
int ibemu_dealloc_pd(struct ibv_pd *pd);

/* mr.c */
struct ibv_mr *ibemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access);
int ibemu_dereg_mr(struct verbs_mr *vmr);
int ibemu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		   void *addr, size_t length, int access);

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

/* srq.c */
struct ibv_srq *ibemu_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int ibemu_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		     int mask);
int ibemu_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int ibemu_destroy_srq(struct ibv_srq *srq);
int ibemu_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);

/* xrc.c: XRC domains, XRC SRQs, opening XRC target QPs (IBA A14) */
struct ibv_xrcd *ibemu_open_xrcd(struct ibv_context *context,
				 struct ibv_xrcd_init_attr *attr);
int ibemu_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_srq *ibemu_create_srq_ex(struct ibv_context *context,
				    struct ibv_srq_init_attr_ex *attr);
int ibemu_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *ibemu_open_qp(struct ibv_context *context,
			     struct ibv_qp_open_attr *attr);

/* qp.c */
struct ibv_qp *ibemu_create_qp(struct ibv_pd *pd,
			       struct ibv_qp_init_attr *attr);
struct ibv_qp *ibemu_create_qp_ex(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr);
int ibemu_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
int ibemu_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		   struct ibv_qp_init_attr *init_attr);
int ibemu_destroy_qp(struct ibv_qp *qp);

int ibemu_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		       uint16_t lid);
int ibemu_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
		       uint16_t lid);

int ibemu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		    struct ibv_send_wr **bad_wr);
int ibemu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		    struct ibv_recv_wr **bad_wr);

/* qp_ex.c: the extended send API */
int ibemu_qp_ex_init(struct ibemu_qp *qp, uint64_t send_ops_flags);
void ibemu_qp_ex_fini(struct ibemu_qp *qp);

/* ah.c */
struct ibv_ah *ibemu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ibemu_destroy_ah(struct ibv_ah *ah);

#endif /* IBEMU_PROVIDER_H */
