/* SPDX-License-Identifier: MIT */
/*
 * The layouts of libibverbs' private interface that ibemu carries, and the
 * one the process's libibverbs has (doc/design.md §2 "The private ABI").
 *
 * What differs between rdma-core releases, read from CMakeLists.txt,
 * libibverbs/libibverbs.map.in, driver.h and verbs.h at each tag:
 *
 *   releases  private node          newest public  ops  verbs_context
 *   35        IBVERBS_PRIVATE_34    IBVERBS_1.13    75  40 words (refused)
 *   36        IBVERBS_PRIVATE_34    IBVERBS_1.14    76  40 words (own open)
 *   37-56     IBVERBS_PRIVATE_34    IBVERBS_1.14    76  40 words
 *   57-58     IBVERBS_PRIVATE_57    IBVERBS_1.14    76  40 words
 *   59-61     IBVERBS_PRIVATE_59    IBVERBS_1.15    79  43 words
 *   62-63     IBVERBS_PRIVATE_59    IBVERBS_1.16    81  44 words
 *   64        IBVERBS_PRIVATE_64    IBVERBS_1.17    83  46 words
 *   65 (main) IBVERBS_PRIVATE_65    IBVERBS_1.18    93  46 words
 *
 * ("ops": members of struct verbs_context_ops; "words": what struct
 * verbs_context has before its struct ibv_context.)  The private node
 * alone does not tell a layout (62 kept PRIVATE_59 and added two ops),
 * but every layout change came with a new public node, so the pair of
 * them does: a process's layout is the row whose private node and newest
 * public node its libibverbs defines, and a libibverbs that defines a
 * pair no row has, older or newer, is not one ibemu knows.  36 has 37's
 * layout, but its ibv_open_device() cannot open a device without sysfs,
 * which ibemu's is: there ibemu opens its own device (open_own.c).  It is
 * told from 37 by a private function 37 added (layouts.c).
 *
 * struct ibv_qp_ex grew inside the row 37-56 with no node to show it (20
 * wr_* ops to 43, 21 at 44, 22 from 45): its size is measured, by asking
 * the process's own ibv_qp_to_qp_ex() where it reads comp_mask.
 *
 * Adding a layout: read the new release's driver.h and verbs.h; add its
 * new verbs_context_ops members to PABI_CONTEXT_OPS (ops.h) under its
 * release, and a row to pabi_layouts[] (layouts.c); raise
 * PABI_VCTX_WORDS_MAX or PABI_QP_EX_WR_OPS_MAX (pabi.h) if it grew
 * those; then tests/unit/test_pabi.c and, against a build of the release,
 * tests/pabi/check-headers.sh.
 */
#ifndef IBEMU_PABI_LAYOUT_H
#define IBEMU_PABI_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>

#include "ops.h"
#include "pabi.h"

/* One layout of the private interface: a row of the table above. */
struct pabi_layout {
	int first, last; /* the rdma-core releases that have it */
	bool unreleased; /* last is rdma-core's main branch */
	const char *private_node; /* the version of the private symbols */
	int public_minor; /* the newest public node: IBVERBS_1.<minor> */
	int ops_release; /* verbs_context_ops as PABI_CONTEXT_OPS has it then */
	unsigned int nr_ops; /* its members */
	unsigned int vctx_words; /* struct verbs_context before ibv_context */
	/* struct ibv_qp_ex's sizes in the row, as counts of wr_* ops; 0 ends */
	unsigned char qp_ex_wr_ops[4];
	/* a private function the row's first release added, which tells it
	 * from an older one of the same nodes; or NULL */
	const char *private_since;
	/* its ibv_open_device() opens the device's sysfs character device
	 * first, and ibemu opens its own device (../open_own.c) */
	bool open_needs_sysfs;
};

extern const struct pabi_layout pabi_layouts[];
extern const unsigned int pabi_nr_layouts;

/*
 * What the process's libibverbs is, once pabi_select() accepted it.
 * Lock rule: written once, by pabi_select() under the shim's lock, before
 * the shim is marked resolved; read-only afterwards (provider/verbs/shim.c).
 */
struct pabi {
	const struct pabi_layout *layout;
	size_t qp_ex_size; /* libibverbs' sizeof(struct ibv_qp_ex) */
	pabi_init_and_alloc_context_fn init_and_alloc_context;
	pabi_set_ops_fn set_ops;
	pabi_uninit_context_fn uninit_context;
	/* Where the row opens its own device (open_needs_sysfs): libibverbs'
	 * verbs_init_cq, and the compat entry points set_lib_ops() installs
	 * (ibv_query_port and ibv_query_device at IBVERBS_1.1). */
	pabi_init_cq_fn init_cq;
	void (*compat_query_port)(void);
	void (*compat_query_device)(void);
};
extern struct pabi pabi;

/* layouts.c */

/* The newest row for this private node and newest public node whose
 * private_since, if any, sym(name, version) finds (sym NULL: as if it
 * found every one); or NULL. */
const struct pabi_layout *pabi_layout_find(
	const char *private_node, int public_minor,
	void *(*sym)(const char *name, const char *version));
/* Where member `name` is in l's verbs_context_ops, or -1: not in it. */
int pabi_op_slot(const struct pabi_layout *l, const char *name);
/* ibemu's ops, laid out as the process's libibverbs has them, installed
 * on its context vctx (libibverbs' own, pabi_lib_vctx) with verbs_set_ops. */
void pabi_set_ops(struct verbs_context *vctx, const struct pabi_ops *ops);
/* "rdma-core 36 to 64 and the main branch (65)" */
void pabi_supported(char *buf, size_t len);

/* select.c */

/*
 * Choose the layout of the libibverbs whose ibv_get_device_list is
 * anchor, and resolve the private functions at its version with
 * sym(name, version).  Fills pabi and returns true; or prints one line on
 * stderr naming the rdma-core found and the ones supported, leaves pabi
 * empty and returns false.
 */
bool pabi_select(void *(*sym)(const char *name, const char *version),
		 const void *anchor);

/* versions.c */

/*
 * Call fn(name, arg) with each version node (ELF version definition) the
 * loaded object that holds addr defines, the file's own name excepted.
 * 0, or -1 when the object or its definitions cannot be read.
 */
int pabi_version_nodes(const void *addr,
		       void (*fn)(const char *name, void *arg), void *arg);

/* libibverbs' own verbs_context for a context of ibemu's: it starts
 * vctx_words before the ibv_context, within pctx's room. */
static inline struct verbs_context *
pabi_lib_vctx(struct pabi_context *pctx)
{
	return (struct verbs_context *)((char *)&pctx->vctx.context -
					pabi.layout->vctx_words *
						sizeof(void *));
}

/* The offset _verbs_init_and_alloc_context() is given for an object of
 * ibemu's whose pabi_context is at pctx_offset. */
static inline size_t pabi_vctx_offset(size_t pctx_offset)
{
	return pctx_offset + offsetof(struct pabi_context, vctx.context) -
	       pabi.layout->vctx_words * sizeof(void *);
}

/* libibverbs' verbs_qp fields after its struct ibv_qp_ex. */
static inline struct pabi_qp_tail *pabi_qp_tail(struct verbs_qp *vqp)
{
	return (struct pabi_qp_tail *)(vqp->room + pabi.qp_ex_size);
}

/* Whether libibverbs' struct ibv_qp_ex has the member at offset: ibemu
 * fills no member the process's programs cannot have. */
static inline bool pabi_qp_ex_has(size_t offset)
{
	return offset < pabi.qp_ex_size;
}

#endif /* IBEMU_PABI_LAYOUT_H */
