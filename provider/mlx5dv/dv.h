/* SPDX-License-Identifier: MIT */
/*
 * The mlx5 direct verbs face: what libmlx5's mlx5dv_* entry points do
 * for ibemu's objects (dv_shim.c takes them, the stock libmlx5 keeps
 * everyone else's).  DC QPs and UMR over indirect mkeys, as
 * mlx5dv_create_qp(3), mlx5dv_create_mkey(3) and mlx5dv_wr_post(3)
 * describe them; everything is the HCA's (emulator/emu.h), this face
 * only checks arguments and stages work requests.
 */
#ifndef IBEMU_DV_H
#define IBEMU_DV_H

#include <stdbool.h>
#include <stdint.h>

#include "dv_abi.h"
#include "ibemu.h"

/* An indirect mkey (mlx5dv_create_mkey(3)).  Immutable but for the
 * HCA's layout, which the HCA owns. */
struct ibemu_mkey {
	struct dv_mkey dv; /* what the program holds */
	struct emu_mkey *emk;
	struct ibv_pd *pd;
	uint16_t max_entries;
	struct ibemu_mkey *next; /* dv_mkey.c's list of ours */
};

/*
 * The face's part of a QP made by mlx5dv_create_qp(3): the setters
 * table the inline mlx5dv_wr_*() call, and the UMRs of the batch being
 * staged, one per staged WR, each with room for entries_per_wr entries.
 * Lock rule: the UMR staging and conf are under the QP's stage lock
 * (qp_ex.c), held from ibv_wr_start to ibv_wr_complete/abort.
 */
struct ibemu_dv_qp {
	struct dv_qp_ex mqp;
	struct ibemu_qp *qp;
	uint64_t send_ops_flags; /* DV_QP_EX_WITH_* */
	struct emu_umr *umrs;
	struct emu_umr_entry *entries;
	uint16_t entries_per_wr;
	/* mlx5dv_wr_mkey_configure(3): the setters the WR still waits
	 * for, and whether its access flags were set */
	struct {
		uint8_t left;
		bool access_set, layout_set;
		uint16_t max_entries; /* the mkey's */
	} conf;
};

static inline struct ibemu_dv_qp *to_dv_qp(struct dv_qp_ex *mqp)
{
	return container_of(mqp, struct ibemu_dv_qp, mqp);
}

/* dv_shim.c: libmlx5's entry points, in this face's types */
bool mlx5dv_is_supported(struct ibv_device *device);
struct ibv_context *mlx5dv_open_device(struct ibv_device *device,
				       struct dv_context_attr *attr);
int mlx5dv_query_device(struct ibv_context *context, struct dv_context *attrs);
struct ibv_qp *mlx5dv_create_qp(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr,
				struct dv_qp_init_attr *dv_attr);
struct dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qpx);
struct dv_mkey *mlx5dv_create_mkey(struct dv_mkey_init_attr *attr);
int mlx5dv_destroy_mkey(struct dv_mkey *mkey);

/* dv_qp.c */
struct ibv_qp *ibemu_dv_create_qp(struct ibv_context *context,
				  struct ibv_qp_init_attr_ex *attr,
				  struct dv_qp_init_attr *dv_attr);
struct dv_qp_ex *ibemu_dv_qp_ex(struct ibv_qp_ex *qpx);

/* dv_mkey.c */
struct dv_mkey *ibemu_dv_create_mkey(struct dv_mkey_init_attr *attr);
/* ENOENT: not one of ours (the stock libmlx5's, then). */
int ibemu_dv_destroy_mkey(struct dv_mkey *mkey);
void ibemu_dv_set_umr_ops(struct ibemu_dv_qp *dq);

/* dv_context.c */
struct ibv_context *ibemu_dv_open_device(struct ibv_device *device,
					 struct dv_context_attr *attr);
int ibemu_dv_query_device(struct ibv_context *context,
			  struct dv_context *attrs);

#endif /* IBEMU_DV_H */
