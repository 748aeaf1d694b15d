/* SPDX-License-Identifier: MIT */
/*
 * The private provider ABI of libibverbs, version IBVERBS_PRIVATE_34.
 *
 * libibverbs does not install its provider interface (libibverbs/driver.h).
 * This header declares, in ibemu's own words, the parts of PABI 34 that the
 * preload relies on.  PABI 34 is what rdma-core v35 through v57 export; a
 * layout change there bumps the IBVERBS_PRIVATE_ version, which the preload
 * checks at run time (doc/design.md §2 "The private ABI: pabi.h and
 * run-time resolution") before touching any of this.
 *
 * Every structure is checked against the public <infiniband/verbs.h> with
 * static asserts on size and offsets, so a mismatch fails the build rather
 * than corrupting a program at run time.
 */
#ifndef IBEMU_PABI_H
#define IBEMU_PABI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

/* The version node every private symbol carries. */
#define IBEMU_PABI_VERSION_NAME "IBVERBS_PRIVATE_34"
/* The rdma-core releases that export it. */
#define IBEMU_PABI_RDMA_CORE_MIN 35
#define IBEMU_PABI_RDMA_CORE_MAX 57

/* ccan/list.h's list_node: two pointers. */
struct pabi_list_node {
	struct pabi_list_node *next, *prev;
};

/* Opaque to providers that do not come from sysfs; ibemu's devices never do. */
struct verbs_sysfs_dev;
struct verbs_match_ent;
struct verbs_context_ops;

/* What a memory region is; libibverbs reads it in ibv_rereg_mr/dereg_mr. */
enum pabi_mr_type {
	PABI_MR_TYPE_MR,
	PABI_MR_TYPE_NULL_MR,
	PABI_MR_TYPE_IMPORTED_MR,
	PABI_MR_TYPE_DMABUF_MR,
};

/* Every provider MR embeds this first: stock code reads mr_type and access. */
struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum pabi_mr_type mr_type;
	int access;
};

struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

/* verbs_qp.comp_mask bits: ibv_qp_to_qp_ex() tests VERBS_QP_EX. */
enum {
	PABI_VERBS_QP_XRCD = 1 << 0,
	PABI_VERBS_QP_EX = 1 << 1,
};

/* Every provider QP embeds this first. */
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

/* How libibverbs learns of a provider's devices and opens them. */
struct verbs_device_ops {
	const char *name;
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);
	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd, void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);
	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

/*
 * The device libibverbs hands out in ibv_get_device_list().  With sysfs NULL,
 * ibv_open_device() opens no character device and calls alloc_context with
 * cmd_fd -1.  refcount: one per list entry and per open context; at zero
 * libibverbs calls ops->uninit_device.
 */
struct verbs_device {
	struct ibv_device device;
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct pabi_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

/*
 * The union of every op a provider may supply, in the order PABI 34 lays
 * them out (alphabetical).  verbs_set_ops() copies each non-NULL member;
 * the rest keep libibverbs' defaults, which fail with EOPNOTSUPP/ENOSYS.
 */
struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			 uint32_t flags, struct ibv_sge *sg_list,
			 uint32_t num_sges);
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
				   struct ibv_alloc_dm_attr *attr);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	struct ibv_pd *(*alloc_parent_domain)(
		struct ibv_context *context,
		struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	struct ibv_td *(*alloc_td)(struct ibv_context *context,
				   struct ibv_td_init_attr *init_attr);
	void (*async_event)(struct ibv_context *context,
			    struct ibv_async_event *event);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	struct ibv_counters *(*create_counters)(
		struct ibv_context *context,
		struct ibv_counters_init_attr *init_attr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp,
					struct ibv_flow_attr *flow_attr);
	struct ibv_flow_action *(*create_flow_action_esp)(
		struct ibv_context *context,
		struct ibv_flow_action_esp_attr *attr);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
		struct ibv_context *context,
		struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *attr);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *wq_init_attr);
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*dealloc_td)(struct ibv_td *td);
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*destroy_counters)(struct ibv_counters *counters);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *rwq_ind_table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	void (*free_context)(struct ibv_context *context);
	int (*free_dm)(struct ibv_dm *dm);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_dm *(*import_dm)(struct ibv_context *context,
				    uint32_t dm_handle);
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context,
				    uint32_t pd_handle);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp,
				    struct ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
			  int srq_attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *wq_attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context,
				  struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *recv_wr,
			     struct ibv_recv_wr **bad_recv_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op,
				      uint32_t flags);
	int (*query_rt_values)(struct ibv_context *context,
			       struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr);
	int (*read_counters)(struct ibv_counters *counters,
			     uint64_t *counters_value, uint32_t ncounters,
			     uint32_t flags);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t dm_offset, size_t length,
				    unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	void (*unimport_dm)(struct ibv_dm *dm);
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

/*
 * The records the kernel writes on the async and completion-channel fds
 * (rdma/ib_user_verbs.h); stock ibv_get_async_event() and ibv_get_cq_event()
 * read exactly these from context->async_fd and channel->fd.
 */
struct pabi_async_event_desc {
	uint64_t element; /* CQ/QP/SRQ pointer, or port number */
	uint32_t event_type;
	uint32_t reserved;
};

struct pabi_comp_event_desc {
	uint64_t cq_handle; /* the struct ibv_cq pointer */
};

/* The three private functions, resolved at run time with dlvsym(). */
typedef void *(*pabi_init_and_alloc_context_fn)(
	struct ibv_device *device, int cmd_fd, size_t alloc_size,
	struct verbs_context *context_offset, uint32_t driver_id);
typedef void (*pabi_set_ops_fn)(struct verbs_context *vctx,
				const struct verbs_context_ops *ops);
typedef void (*pabi_uninit_context_fn)(struct verbs_context *vctx);

/* Layout checks: PABI 34 on LP64 (x86_64, aarch64, ppc64le, s390x). */
_Static_assert(sizeof(void *) == 8, "PABI 34 layouts are checked for LP64");
_Static_assert(sizeof(struct pabi_list_node) == 16, "list_node");
_Static_assert(offsetof(struct verbs_device, device) == 0,
	       "verbs_device.device must come first");
_Static_assert(offsetof(struct verbs_device, ops) ==
		       sizeof(struct ibv_device),
	       "verbs_device.ops");
_Static_assert(offsetof(struct verbs_device, refcount) ==
		       sizeof(struct ibv_device) + 8,
	       "verbs_device.refcount");
_Static_assert(offsetof(struct verbs_device, entry) ==
		       sizeof(struct ibv_device) + 16,
	       "verbs_device.entry");
_Static_assert(offsetof(struct verbs_device, sysfs) ==
		       sizeof(struct ibv_device) + 32,
	       "verbs_device.sysfs");
_Static_assert(offsetof(struct verbs_device, core_support) ==
		       sizeof(struct ibv_device) + 40,
	       "verbs_device.core_support");
_Static_assert(sizeof(struct verbs_device_ops) == 9 * 8, "verbs_device_ops");
_Static_assert(offsetof(struct verbs_device_ops, alloc_context) == 5 * 8,
	       "verbs_device_ops.alloc_context");
_Static_assert(offsetof(struct verbs_device_ops, uninit_device) == 8 * 8,
	       "verbs_device_ops.uninit_device");
_Static_assert(sizeof(struct verbs_context_ops) == 76 * sizeof(void *),
	       "verbs_context_ops has 76 members in PABI 34");
_Static_assert(offsetof(struct verbs_context_ops, alloc_pd) == 5 * 8,
	       "verbs_context_ops.alloc_pd");
_Static_assert(offsetof(struct verbs_context_ops, free_context) == 39 * 8,
	       "verbs_context_ops.free_context");
_Static_assert(offsetof(struct verbs_context_ops, poll_cq) == 53 * 8,
	       "verbs_context_ops.poll_cq");
_Static_assert(offsetof(struct verbs_context_ops, query_device_ex) == 58 * 8,
	       "verbs_context_ops.query_device_ex");
_Static_assert(offsetof(struct verbs_context_ops, unimport_pd) == 75 * 8,
	       "verbs_context_ops.unimport_pd");
_Static_assert(offsetof(struct verbs_mr, ibv_mr) == 0, "verbs_mr.ibv_mr");
_Static_assert(offsetof(struct verbs_mr, mr_type) == sizeof(struct ibv_mr),
	       "verbs_mr.mr_type");
_Static_assert(offsetof(struct verbs_qp, qp_ex) == 0, "verbs_qp.qp_ex");
_Static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0, "ibv_qp_ex.qp_base");
_Static_assert(offsetof(struct verbs_qp, comp_mask) ==
		       sizeof(struct ibv_qp_ex),
	       "verbs_qp.comp_mask");
_Static_assert(offsetof(struct verbs_srq, srq) == 0, "verbs_srq.srq");
_Static_assert(offsetof(struct verbs_cq, cq_ex) == 0, "verbs_cq.cq_ex");
_Static_assert(sizeof(struct pabi_async_event_desc) == 16, "async event desc");
_Static_assert(sizeof(struct pabi_comp_event_desc) == 8, "comp event desc");

#endif /* IBEMU_PABI_H */
