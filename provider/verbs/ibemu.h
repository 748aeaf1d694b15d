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

#include "check.h"
#include "emu.h"
#include "layout.h"
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

/*
 * pctx first: libibverbs' verbs_context, however large the process's
 * release has it, ends where pctx.vctx.context does (pabi.h), before the
 * fields that follow.
 */
struct ibemu_context {
	struct pabi_context pctx;
	pid_t pid; /* the process that opened it */
	struct emu_hca *hca;
	int async_wfd; /* non-blocking write end of context.async_fd */
	/* Whose objects this context names (import.c): the token of the
	 * HCA attachment that made its command fd; foreign when that is
	 * another process's. */
	uint64_t exporter;
	bool foreign;
	/* Lock rule: counts only, atomically updated. */
	atomic_int nr_pds, nr_cqs, nr_qps, nr_srqs, nr_ahs;
};

/* A thread domain (ibv_alloc_td): accepted in a parent domain and not
 * exploited, every object keeping its own lock. */
struct ibemu_td {
	struct ibv_td ibv_td;
	atomic_int usecnt; /* parent domains using this TD */
};

/*
 * A protection domain, or a parent domain (ibv_alloc_parent_domain),
 * which stands wherever a PD is accepted for the PD it was made of
 * (`protection`) and adds a thread domain and the application's queue
 * buffer allocators.  Lock rule: usecnt is atomic; the rest is set at
 * allocation and read-only afterwards.
 */
struct ibemu_pd {
	struct ibv_pd ibv_pd;
	atomic_int usecnt; /* MRs, MWs, QPs, SRQs, AHs, CQs, parent domains */
	/* the PD as the HCA names it (import.c); a parent domain's is the
	 * one of the PD it was made of */
	uint64_t id;
	struct ibemu_share *share; /* the object it is a handle of; NULL:
				      a parent domain */
	struct ibemu_pd *protection; /* parent domain: its PD; else NULL */
	struct ibemu_td *td; /* parent domain: its TD, or NULL */
	void *(*alloc)(struct ibv_pd *pd, void *pd_context, size_t size,
		       size_t alignment, uint64_t resource_type);
	void (*free)(struct ibv_pd *pd, void *pd_context, void *ptr,
		     uint64_t resource_type);
	void *pd_context;
};

struct ibemu_mr {
	struct verbs_mr vmr;
	struct emu_mr *emr;
	struct ibemu_share *share;
};

struct ibemu_mw {
	struct ibv_mw ibv_mw;
	struct emu_mw *emw;
};

struct ibemu_cq {
	struct verbs_cq vcq;
	struct emu_cq *ecq;
	int comp_wfd; /* non-blocking write end of the channel, or -1 */
	const struct ibv_wc *cur; /* extended poll: the entry being read */
	struct ibemu_pd *parent; /* its parent domain (ibv_create_cq_ex) */
	struct emu_buf_alloc buf_alloc; /* the parent domain's allocators */
	atomic_uintptr_t chk_thread; /* checking mode: the poller (check_verbs.c) */
	atomic_uint check_events; /* events returned, in checking mode */
	/* checking mode: the watch over its channel (check_arm.c) */
	struct ibemu_cq *check_next;
	bool check_watched, check_said;
	unsigned int check_stuck, check_polls_seen;
	atomic_uint check_polls; /* ibv_poll_cq calls, in checking mode */
	struct check_stack check_last_event;
};

struct ibemu_srq {
	struct verbs_srq vsrq;
	struct emu_srq *esrq;
	struct emu_buf_alloc buf_alloc; /* its parent domain's allocators */
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
	/* DC (mlx5dv_create_qp(3)): an initiator, a target or neither;
	 * the mlx5dv face's part of the QP (provider/mlx5dv/), or NULL.
	 * Set at create. */
	enum emu_dc_type dc_type;
	struct ibemu_dv_qp *dv;
	struct emu_buf_alloc buf_alloc; /* its parent domain's allocators */
	atomic_uintptr_t chk_thread; /* checking mode: the poster (check_verbs.c) */
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
	return container_of(c, struct ibemu_context, pctx.vctx.context)->pid !=
	       ibemu_pid;
}

static inline struct ibemu_device *to_edev(struct ibv_device *d)
{
	return container_of(d, struct ibemu_device, vdev.device);
}
static inline struct ibemu_context *to_ectx(struct ibv_context *c)
{
	return container_of(c, struct ibemu_context, pctx.vctx.context);
}
static inline struct ibemu_pd *to_epd(struct ibv_pd *pd)
{
	return container_of(pd, struct ibemu_pd, ibv_pd);
}
static inline struct ibemu_td *to_etd(struct ibv_td *td)
{
	return container_of(td, struct ibemu_td, ibv_td);
}
static inline bool ibemu_pd_is_parent(struct ibv_pd *pd)
{
	return to_epd(pd)->protection != NULL;
}
static inline struct ibemu_mr *to_emr(struct ibv_mr *mr)
{
	return container_of(mr, struct ibemu_mr, vmr.ibv_mr);
}
static inline struct ibemu_mw *to_emw(struct ibv_mw *mw)
{
	return container_of(mw, struct ibemu_mw, ibv_mw);
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

/* shim.c: the interposers' link to libibverbs */
bool ibemu_is_ours(const struct ibv_context *context);
/* A stock libibverbs function, found in libibverbs's scope (shim.c);
 * NULL when libibverbs is not in the process. */
void *ibemu_verbs_sym(const char *name, const char *version);
/* fd made non-blocking (O_NONBLOCK added): 0 or a positive errno. */
int ibemu_set_nonblock(int fd);
bool ibemu_shim_enabled(void);
int ibemu_pipe_rdwr(int *fd_p);

/* device.c: devices and contexts */
struct ibv_device *ibemu_device_get(void);
/* Where events of an object of this context go. */
struct emu_owner ibemu_owner(struct ibv_context *context, void *object);
/* devnode.c: ibemu0 is offered; its device node answers probes. */
void ibemu_devnode_offer(void);
/* <sysfs>/class/infiniband, as libibverbs places it ($SYSFS_PATH or
 * /sys): 0, or -ENAMETOOLONG. */
int ibemu_sysfs_class_path(char *buf, size_t len);
/* The next definition of the C library function name (dlsym RTLD_NEXT),
 * looked up once and kept in *slot: the interposers of devnode.c and
 * sysfs_net.c run on every stat and directory read of the program. */
void *ibemu_libc_next(const char *name, void *_Atomic *slot);

/* sysfs_net.c: what path is of ibemu0's net directory; ifname gets the
 * interface when it is one of them. */
enum sysfs_net_kind {
	SYSFS_NET_NONE, /* not one: the C library's answer stands */
	SYSFS_NET_DIR, /* <class>/ibemu0/device/net */
	SYSFS_NET_IFACE, /* <class>/ibemu0/device/net/<interface> */
};
enum sysfs_net_kind ibemu_sysfs_net_kind(const char *path, char *ifname,
					 size_t len);
/* A non-blocking write descriptor for fd's pipe; -1 on failure. */
int ibemu_fd_nonblock_writer(int fd);

/* query.c: device, port, GID and P_Key attributes */
int ibemu_query_device_ex(struct ibv_context *context,
			  const struct ibv_query_device_ex_input *input,
			  struct ibv_device_attr_ex *attr, size_t attr_size);
/* open_own.c: open ibemu's device where libibverbs cannot (rdma-core
 * 36: pabi/layout.h, open_needs_sysfs). */
struct ibv_context *ibemu_open_own(struct ibv_device *device);
int ibemu_query_port(struct ibv_context *context, uint8_t port_num,
		     struct ibv_port_attr *port_attr);
int ibemu_query_gid_entry(struct ibv_context *context, uint32_t port_num,
			  uint32_t index, struct ibv_gid_entry *entry);
int ibemu_query_rt_values(struct ibv_context *context,
			  struct ibv_values_ex *values);
int ibemu_query_pkey_value(struct ibv_context *context, uint8_t port_num,
			   int index, uint16_t *pkey_p);

/* pd.c: protection domains, thread domains, parent domains */
struct ibv_pd *ibemu_alloc_pd(struct ibv_context *context);
int ibemu_dealloc_pd(struct ibv_pd *pd);
struct ibv_td *ibemu_alloc_td(struct ibv_context *context,
			      struct ibv_td_init_attr *attr);
int ibemu_dealloc_td(struct ibv_td *td);
struct ibv_pd *ibemu_alloc_parent_domain(
	struct ibv_context *context, struct ibv_parent_domain_init_attr *attr);
/*
 * The resource_type a parent domain's allocators are called with for a
 * queue buffer (documented in ibemu(7)): a QP's send and receive rings,
 * an SRQ's ring, a CQ's ring.
 */
enum {
	IBEMU_RES_TYPE_QP = 1,
	IBEMU_RES_TYPE_SRQ = 4,
	IBEMU_RES_TYPE_CQ = 5,
};
/* Fill *a with pd's allocators for objects of type and return it, or
 * NULL when pd is not a parent domain with allocators. */
const struct emu_buf_alloc *ibemu_pd_buf_alloc(struct ibv_pd *pd,
					       uint64_t type,
					       struct emu_buf_alloc *a);

/* verbs_mr.c */
int ibemu_rereg_mr(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
		   void *addr, size_t length, int access);
struct ibv_mr *ibemu_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
			    uint64_t hca_va, int access);
int ibemu_dereg_mr(struct verbs_mr *vmr);
int ibemu_advise_mr(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
		    uint32_t flags, struct ibv_sge *sg_list, uint32_t num_sge);
/* import.c: command fds, shared PDs and MRs (ibv_import_device(3)). */
struct ibemu_share;
int ibemu_cmd_fd_open(void);
void ibemu_import_fork_child(void);
int ibemu_cmd_fd_bind(struct ibemu_context *ctx, int cmd_fd, bool imported);
int ibemu_import_fd_take(void);
struct ibv_context *ibemu_import_device(int cmd_fd,
				       struct ibv_context *(*open)(
					       struct ibv_device *));
int ibemu_pd_share_new(struct ibemu_pd *pd);
bool ibemu_share_put(struct ibemu_share *share, struct emu_mr **emr_p);
int ibemu_mr_share_new(struct ibemu_mr *mr);
struct ibemu_dm_mem;
void ibemu_mr_share_put(struct ibemu_share *share);
void ibemu_mr_share_set_dm(struct ibemu_share *share, struct ibemu_dm_mem *dm);
struct ibv_pd *ibemu_import_pd(struct ibv_context *context,
			       uint32_t pd_handle);
void ibemu_unimport_pd(struct ibv_pd *pd);
struct ibv_mr *ibemu_import_mr(struct ibv_pd *pd, uint32_t mr_handle);
void ibemu_unimport_mr(struct ibv_mr *mr);

/* verbs_dm.c: device memory */
struct ibv_dm *ibemu_alloc_dm(struct ibv_context *context,
			      struct ibv_alloc_dm_attr *attr);
int ibemu_free_dm(struct ibv_dm *dm);
struct ibv_dm *ibemu_import_dm(struct ibv_context *context,
			       uint32_t dm_handle);
void ibemu_unimport_dm(struct ibv_dm *dm);
struct ibv_mr *ibemu_reg_dm_mr(struct ibv_pd *pd, struct ibv_dm *dm,
			       uint64_t dm_offset, size_t length,
			       unsigned int access);
/* A region on mem is deregistered (import.c). */
void ibemu_dm_region_gone(struct ibemu_dm_mem *mem);

/* verbs_mw.c: memory windows */
struct ibv_mw *ibemu_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
int ibemu_dealloc_mw(struct ibv_mw *mw);
int ibemu_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
		  struct ibv_mw_bind *mw_bind);

/* verbs_cq.c */
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
void ibemu_async_event(struct ibv_context *context,
		       struct ibv_async_event *event);

/* verbs_srq.c */
struct ibv_srq *ibemu_create_srq(struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr);
int ibemu_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
		     int mask);
int ibemu_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr);
int ibemu_destroy_srq(struct ibv_srq *srq);
int ibemu_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			struct ibv_recv_wr **bad_wr);

/* verbs_xrc.c: XRC domains, XRC SRQs, opening XRC target QPs (IBA A14) */
struct ibv_xrcd *ibemu_open_xrcd(struct ibv_context *context,
				 struct ibv_xrcd_init_attr *attr);
int ibemu_close_xrcd(struct ibv_xrcd *xrcd);
struct ibv_srq *ibemu_create_srq_ex(struct ibv_context *context,
				    struct ibv_srq_init_attr_ex *attr);
int ibemu_get_srq_num(struct ibv_srq *srq, uint32_t *srq_num);
struct ibv_qp *ibemu_open_qp(struct ibv_context *context,
			     struct ibv_qp_open_attr *attr);

/* verbs_qp.c */
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

/* A QP as ibv_create_qp_ex(3) makes it, of dc_type (a DC QP has
 * qp_type IBV_QPT_DRIVER, mlx5dv_create_qp(3)). */
struct ibv_qp *ibemu_create_qp_dc(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr,
				  enum emu_dc_type dc_type, uint64_t dct_key);

/* qp_ex.c: the extended send API */
int ibemu_qp_ex_init(struct ibemu_qp *qp, uint64_t send_ops_flags);
void ibemu_qp_ex_fini(struct ibemu_qp *qp);
/* For the setters of other faces (provider/mlx5dv/), between
 * ibv_wr_start and ibv_wr_complete, under the stage's lock: a new staged
 * WR of opcode (flag: the send_ops_flags bit it needs, 0 for none), or
 * NULL with the batch's error recorded; the extension of the WR the
 * setters fill, or NULL (EINVAL recorded); its place in the batch; and
 * an error for the batch, kept if it is the first. */
struct ibv_send_wr *ibemu_wr_stage_new(struct ibemu_qp *qp,
				       enum ibv_wr_opcode opcode,
				       uint64_t flag);
struct emu_wr_ext *ibemu_wr_stage_ext(struct ibemu_qp *qp);
uint32_t ibemu_wr_stage_index(const struct ibemu_qp *qp);
void ibemu_wr_stage_fail(struct ibemu_qp *qp, int err);

/* provider/mlx5dv/dv_qp.c: the face's part of a QP goes with it. */
void ibemu_dv_qp_fini(struct ibemu_qp *qp);

/* verbs_ah.c */
struct ibv_ah *ibemu_create_ah(struct ibv_pd *pd, struct ibv_ah_attr *attr);
int ibemu_destroy_ah(struct ibv_ah *ah);

#endif /* IBEMU_PROVIDER_H */
