/* SPDX-License-Identifier: MIT */
/*
 * Every member struct verbs_context_ops has had (libibverbs/driver.h), in
 * the order rdma-core lays them out ("Keep sorted": alphabetical), each
 * with the first rdma-core release whose layout has it.  Members are only
 * ever inserted, never removed or reordered, so the layout of release R is
 * this list without the members whose release is above R, and a member's
 * slot is the number of members before it that R has (pabi/layouts.c).
 *
 * Counts, from driver.h at each tag: 75 members at 35, 76 at 36 (to 58),
 * 79 at 59, 81 at 62, 83 at 64, 93 on the main branch (65).  The checks
 * are tests/unit/test_pabi.c, and tests/pabi/check-headers.sh against the
 * headers of a real build.
 *
 * X(name, release): expand with X of the caller's choosing.
 */
#ifndef IBEMU_PABI_OPS_H
#define IBEMU_PABI_OPS_H

#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct verbs_mr;

#define PABI_CONTEXT_OPS(X) \
	X(advise_mr, 35) \
	X(alloc_buf, 64) \
	X(alloc_dm, 35) \
	X(alloc_dmah, 59) \
	X(alloc_mw, 35) \
	X(alloc_null_mr, 35) \
	X(alloc_parent_domain, 35) \
	X(alloc_pd, 35) \
	X(alloc_td, 35) \
	X(async_event, 35) \
	X(attach_counters_point_flow, 35) \
	X(attach_mcast, 35) \
	X(bind_mw, 35) \
	X(close_xrcd, 35) \
	X(cq_event, 35) \
	X(create_ah, 35) \
	X(create_comp_cntr, 65) \
	X(create_counters, 35) \
	X(create_cq, 35) \
	X(create_cq_ex, 35) \
	X(create_flow, 35) \
	X(create_flow_action_esp, 35) \
	X(create_qp, 35) \
	X(create_qp_ex, 35) \
	X(create_rwq_ind_table, 35) \
	X(create_srq, 35) \
	X(create_srq_ex, 35) \
	X(create_wq, 35) \
	X(dealloc_dmah, 59) \
	X(dealloc_mw, 35) \
	X(dealloc_pd, 35) \
	X(dealloc_td, 35) \
	X(dereg_mr, 35) \
	X(destroy_ah, 35) \
	X(destroy_comp_cntr, 65) \
	X(destroy_counters, 35) \
	X(destroy_cq, 35) \
	X(destroy_flow, 35) \
	X(destroy_flow_action, 35) \
	X(destroy_qp, 35) \
	X(destroy_rwq_ind_table, 35) \
	X(destroy_srq, 35) \
	X(destroy_wq, 35) \
	X(detach_mcast, 35) \
	X(dm_export_dmabuf_fd, 62) \
	X(free_buf, 64) \
	X(free_context, 35) \
	X(free_dm, 35) \
	X(get_srq_num, 35) \
	X(import_dm, 35) \
	X(import_mr, 35) \
	X(import_pd, 35) \
	X(inc_comp_cntr, 65) \
	X(inc_err_comp_cntr, 65) \
	X(modify_cq, 35) \
	X(modify_flow_action_esp, 35) \
	X(modify_qp, 35) \
	X(modify_qp_rate_limit, 35) \
	X(modify_srq, 35) \
	X(modify_wq, 35) \
	X(open_qp, 35) \
	X(open_xrcd, 35) \
	X(poll_cq, 35) \
	X(post_recv, 35) \
	X(post_send, 35) \
	X(post_srq_ops, 35) \
	X(post_srq_recv, 35) \
	X(qp_attach_comp_cntr, 65) \
	X(query_comp_cntr_caps, 65) \
	X(query_device_ex, 35) \
	X(query_ece, 35) \
	X(query_port, 35) \
	X(query_port_speed, 62) \
	X(query_qp, 35) \
	X(query_qp_data_in_order, 36) \
	X(query_rt_values, 35) \
	X(query_srq, 35) \
	X(read_comp_cntr, 65) \
	X(read_counters, 35) \
	X(read_err_comp_cntr, 65) \
	X(reg_dm_mr, 35) \
	X(reg_dmabuf_mr, 35) \
	X(reg_mr, 35) \
	X(reg_mr_ex, 59) \
	X(req_notify_cq, 35) \
	X(rereg_mr, 35) \
	X(resize_cq, 35) \
	X(set_comp_cntr, 65) \
	X(set_ece, 35) \
	X(set_err_comp_cntr, 65) \
	X(unimport_dm, 35) \
	X(unimport_mr, 35) \
	X(unimport_pd, 35)

/* Stands for any op in a table laid out at run time (pabi_set_ops). */
typedef void (*pabi_op_fn)(void);

/*
 * The ops ibemu can supply, typed so that the compiler checks each of
 * ibemu's functions against its slot: the members of rdma-core 36's
 * layout (release 35 and 36 in PABI_CONTEXT_OPS), by name.  It is never
 * handed to libibverbs as it is: pabi_set_ops() lays it out as the
 * process's libibverbs has verbs_context_ops.  The members newer releases
 * added (alloc_dmah, reg_mr_ex, alloc_buf, ...) ibemu does not supply;
 * libibverbs' defaults fail them with EOPNOTSUPP.
 */
struct pabi_ops {
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

#endif /* IBEMU_PABI_OPS_H */
