/* SPDX-License-Identifier: MIT */
/*
 * The objects of libibverbs' private provider interface that ibemu embeds
 * or fills in, in ibemu's own words.
 *
 * libibverbs does not install its provider interface (libibverbs/driver.h)
 * and versions it as a whole: IBVERBS_PRIVATE_34 (rdma-core 34 to 56),
 * _57 (57, 58), _59 (59 to 63), _64 (64), _65 (the main branch).  What
 * changes between the releases ibemu carries, 37 on, is said in layout.h
 * and chosen at run time (doc/design.md §2 "The private ABI"); what is
 * declared here is the same in every one of them, read from driver.h and
 * verbs.h at each tag: struct verbs_device, verbs_device_ops, verbs_mr,
 * verbs_xrcd, verbs_srq and verbs_cq, and the prototypes of the private
 * functions, have not changed from 35 to the main branch.  Two things move:
 * struct verbs_context grows in front of its struct ibv_context (59, 62,
 * 64), and struct ibv_qp_ex, which struct verbs_qp embeds, grew at 44 and
 * 45; each object that embeds one leaves room for the largest.
 *
 * Each structure is checked against the public <infiniband/verbs.h> with
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

/* ccan/list.h's list_node: two pointers. */
struct pabi_list_node {
	struct pabi_list_node *next, *prev;
};

/* Opaque to providers that do not come from sysfs; ibemu's devices never do. */
struct verbs_sysfs_dev;
struct verbs_match_ent;

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

/*
 * struct ibv_qp_ex's size in each release: its wr_* members start at
 * wr_atomic_cmp_swp and are only ever appended, 20 of them to 43, 21 at 44
 * (wr_atomic_write), 22 from 45 on (wr_flush).
 */
#define PABI_QP_EX_SIZE(wr_ops)                                                \
	(offsetof(struct ibv_qp_ex, wr_atomic_cmp_swp) +                       \
	 (wr_ops) * sizeof(void (*)(void)))
#define PABI_QP_EX_WR_OPS_MAX 22

/* What libibverbs' struct verbs_qp has after its struct ibv_qp_ex. */
struct pabi_qp_tail {
	uint32_t comp_mask; /* PABI_VERBS_QP_* */
	struct verbs_xrcd *xrcd;
};

/*
 * Every provider QP embeds this first.  libibverbs' ibv_qp_to_qp_ex()
 * reads comp_mask right after its own struct ibv_qp_ex, whose size is the
 * release's, not the one of the headers ibemu was built with: the tail is
 * reached through pabi_qp_tail() (layout.h), and the room holds the
 * largest struct ibv_qp_ex and the tail after it.
 */
struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
		unsigned char room[PABI_QP_EX_SIZE(PABI_QP_EX_WR_OPS_MAX) +
				   sizeof(struct pabi_qp_tail)];
	};
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
 * struct verbs_context "grows up": each release adds its members in
 * front, and struct ibv_context stays last.  A provider's context embeds
 * it, and libibverbs lays out its own from where the provider says it
 * starts (_verbs_init_and_alloc_context's context_offset).  An ibemu
 * context holds this first: the largest verbs_context a carried layout has
 * ends where vctx.context does, so a grown one fills the room and never
 * reaches the fields that follow.  The start of libibverbs' own is
 * pabi_lib_vctx() (layout.h).
 */
#define PABI_VCTX_WORDS_MAX 46 /* rdma-core 64 and the main branch */
struct pabi_context {
	unsigned char room[PABI_VCTX_WORDS_MAX * sizeof(void *)];
	struct verbs_context vctx;
};

/*
 * struct ibv_port_attr up to port_cap_flags2, its size from 36 to 48;
 * rdma-core 49 added active_speed_ex.  A provider writes no more than
 * this: libibverbs gives it a buffer of its own release's size.
 */
#define PABI_PORT_ATTR_SIZE_36                                                 \
	(offsetof(struct ibv_port_attr, port_cap_flags2) +                     \
	 sizeof(uint16_t))

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
/* ops: a struct verbs_context_ops in the process's layout (pabi_set_ops). */
typedef void (*pabi_set_ops_fn)(struct verbs_context *vctx, const void *ops);
typedef void (*pabi_uninit_context_fn)(struct verbs_context *vctx);
typedef void (*pabi_init_cq_fn)(struct ibv_cq *cq, struct ibv_context *context,
				struct ibv_comp_channel *channel,
				void *cq_context);

/* Layout checks, on LP64 (x86_64, aarch64, ppc64le, s390x). */
_Static_assert(sizeof(void *) == 8, "the layouts are checked for LP64");
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
_Static_assert(offsetof(struct verbs_mr, ibv_mr) == 0, "verbs_mr.ibv_mr");
_Static_assert(offsetof(struct verbs_mr, mr_type) == sizeof(struct ibv_mr),
	       "verbs_mr.mr_type");
_Static_assert(offsetof(struct verbs_qp, qp_ex) == 0, "verbs_qp.qp_ex");
_Static_assert(offsetof(struct ibv_qp_ex, qp_base) == 0, "ibv_qp_ex.qp_base");
_Static_assert(sizeof(struct ibv_qp_ex) >= PABI_QP_EX_SIZE(20) &&
		       sizeof(struct ibv_qp_ex) <=
			       PABI_QP_EX_SIZE(PABI_QP_EX_WR_OPS_MAX),
	       "struct ibv_qp_ex is one of 36 to the main branch's");
_Static_assert(sizeof(struct pabi_qp_tail) == 16, "verbs_qp tail");
_Static_assert(PABI_PORT_ATTR_SIZE_36 == 50, "ibv_port_attr of 36 to 48");
_Static_assert(offsetof(struct verbs_srq, srq) == 0, "verbs_srq.srq");
_Static_assert(offsetof(struct verbs_cq, cq_ex) == 0, "verbs_cq.cq_ex");
_Static_assert(sizeof(struct pabi_async_event_desc) == 16, "async event desc");
_Static_assert(sizeof(struct pabi_comp_event_desc) == 8, "comp event desc");

#endif /* IBEMU_PABI_H */
