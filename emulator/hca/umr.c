// SPDX-License-Identifier: MIT
/*
 * The UMR work request (mlx5dv_wr_post(3): mlx5dv_wr_mr_interleaved,
 * mlx5dv_wr_mr_list, and mlx5dv_wr_mkey_configure with
 * mlx5dv_wr_set_mkey_layout_*): checked at post as libmlx5 checks it,
 * kept in its WQE, executed by the requester in send queue order as a
 * local operation (IBA 10.8.3.1: a send queue's WRs execute in order),
 * where it gives an mkey (mkey.c) its layout.
 *
 * The WQE: struct wqe_umr in its union, and its entries as struct
 * umr_seg from its SGE array on (a UMR has no SGEs), 16 bytes each as
 * mlx5's KLM and repeat entry segments are.  Lock rule: the WQE is the
 * QP's (qp.lock); the mkey's layout is changed under its own lock.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "hca.h"
#include "log.h"

/* Access rights a UMR may give (mlx5dv_wr_post(3) access_flags; libmlx5
 * get_umr_mr_flags() knows these four). */
#define UMR_ACCESS                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |                     \
	 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)
/* libmlx5's sizes: a KLM or repeat entry segment, the inline data
 * segment header that max_inline_data leaves room for beside the data
 * (struct mlx5_wqe_inl_data_seg), and the largest byte count and
 * stride of an interleaved entry (16-bit fields of struct
 * mlx5_wqe_umr_repeat_ent_seg). */
#define UMR_SEG_SIZE 16u
#define UMR_INL_HDR 4u
#define UMR_REPEAT_MAX 0xffffu

/* One entry as the WQE keeps it: len is the byte count of a list
 * entry, or an interleaved entry's byte count and stride (16 bits
 * each, checked at post). */
struct umr_seg {
	uint64_t addr;
	uint32_t lkey;
	uint32_t len;
};
_Static_assert(sizeof(struct umr_seg) == UMR_SEG_SIZE, "a KLM's size");

static struct umr_seg *umr_segs(struct wqe *wqe)
{
	return (struct umr_seg *)(void *)&wqe->sge[0];
}

/* Entries the QP's WQE can hold: libmlx5's bound
 * (mlx5_send_wr_set_mkey_layout: max_inline_data plus the inline
 * header, in 16-byte segments, one of them the repeat block's header
 * for an interleaved layout), and the room of our WQE. */
static uint32_t umr_room(const struct emu_qp *qp, bool interleaved)
{
	uint32_t n = (qp->cap.max_inline_data + UMR_INL_HDR) / UMR_SEG_SIZE;
	uint32_t ours = (qp->cap.max_send_sge * sizeof(struct ibv_sge) +
			 qp->cap.max_inline_data) /
			UMR_SEG_SIZE;

	if (interleaved)
		n = n ? n - 1 : 0;
	return n < ours ? n : ours;
}

static int umr_check_entries(const struct emu_umr *u)
{
	const struct emu_umr_entry *e;
	uint16_t i;

	for (i = 0; i < u->num_entries; i++) {
		e = &u->entries[i];
		if (!u->interleaved && e->bytes_skip) {
			ibemu_log_dbg("umr: a list entry skips nothing");
			return EINVAL;
		}
		/* libmlx5 would cut these to 16 bits; we refuse them. */
		if (u->interleaved &&
		    (e->bytes_count > UMR_REPEAT_MAX ||
		     (uint64_t)e->bytes_count + e->bytes_skip >
			     UMR_REPEAT_MAX)) {
			ibemu_log_dbg("umr: entry %u: count %u + skip %u past "
				      "a 16-bit stride",
				      i, e->bytes_count, e->bytes_skip);
			return EINVAL;
		}
	}
	return 0;
}

/*
 * The post-time checks (mlx5dv_wr_post(3), libmlx5's
 * mlx5_send_wr_mkey_configure and mlx5_send_wr_set_mkey_layout): an RC
 * QP or a DCI, the four access rights, at least one entry and no more
 * than the mkey and the WQE hold, a repetition at least for an
 * interleaved layout.  Caller holds qp.lock (the mkey's lookup).
 */
int umr_check_wr(struct emu_qp *qp, const struct ibv_send_wr *wr,
		 const struct emu_wr_ext *ext)
{
	const struct emu_umr *u = ext ? ext->umr : NULL;
	struct emu_mkey *mk;

	(void)wr;
	if (!u || !u->entries || !u->num_entries ||
	    qp->type != IBV_QPT_RC || qp->dc_type == EMU_DC_DCT ||
	    (u->access & ~UMR_ACCESS) ||
	    (u->interleaved && !u->repeat_count)) {
		ibemu_log_dbg("post_send: qp %#x: UMR refused", qp->qpn);
		return EINVAL;
	}
	if (u->num_entries > umr_room(qp, u->interleaved)) {
		ibemu_log_dbg("post_send: UMR of %u entries, room for %u "
			      "(max_inline_data %u)",
			      u->num_entries, umr_room(qp, u->interleaved),
			      qp->cap.max_inline_data);
		return EINVAL;
	}
	mk = mkey_lookup(qp->hca, u->mkey);
	if (!mk || u->num_entries > mk->max_entries) {
		ibemu_log_dbg("post_send: UMR: %#x is no mkey with room for "
			      "%u entries",
			      u->mkey, u->num_entries);
		return EINVAL;
	}
	return umr_check_entries(u);
}

int umr_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		  const struct emu_wr_ext *ext)
{
	const struct emu_umr *u = ext->umr;
	struct umr_seg *seg = umr_segs(wqe);
	uint16_t i;

	(void)qp;
	wqe->umr.mkey = u->mkey;
	wqe->umr.access = u->access;
	wqe->umr.interleaved = u->interleaved;
	wqe->umr.repeat_count = u->interleaved ? u->repeat_count : 1;
	wqe->umr.num_entries = u->num_entries;
	for (i = 0; i < u->num_entries; i++) {
		seg[i].addr = u->entries[i].addr;
		seg[i].lkey = u->entries[i].lkey;
		seg[i].len = u->interleaved
				     ? u->entries[i].bytes_count |
					       (u->entries[i].bytes_count +
						u->entries[i].bytes_skip)
						       << 16
				     : u->entries[i].bytes_count;
	}
	return 0;
}

/* Whether an entry's every repetition lies in a region of the QP's PD
 * (IBA 10.6.3.2: key valid, same PD, range inside; the rights are
 * checked at each access, mkey_access.c). */
static bool umr_ent_ok(struct emu_qp *qp, const struct mkey_ent *e,
		       uint32_t repeat)
{
	struct emu_mr *mr = mr_lookup(qp->hca, e->lkey);
	uint64_t span, end;

	if (!mr || mr->mkey || mr->pd_id != qp->pd_id)
		return false;
	/* stride < 2^16 and count < 2^32: the product cannot wrap. */
	span = (uint64_t)(repeat - 1) * e->stride + e->count;
	if (__builtin_add_overflow(e->addr, span, &end))
		return false;
	return e->addr >= mr->iova && end - mr->iova <= mr->length;
}

/*
 * Execute a UMR: the mkey must be of the QP's PD and every entry inside
 * a region of it.  A failure completes the UMR with
 * IBV_WC_LOC_PROT_ERR, what mlx5 reports for a memory key that fails
 * its checks (the CQE syndrome LOCAL_PROT_ERR), and leaves the mkey's
 * layout as it was; IBV_WC_MW_BIND_ERR is a window's.
 */
enum ibv_wc_status umr_execute_locked(struct emu_qp *qp, struct wqe *wqe)
{
	struct mkey_ent ents[IBEMU_MAX_INLINE_DATA / UMR_SEG_SIZE + 1];
	const struct wqe_umr *u = &wqe->umr;
	const struct umr_seg *seg = umr_segs(wqe);
	struct emu_mkey *mk = mkey_lookup(qp->hca, u->mkey);
	uint16_t i;

	if (!mk || mk->mr.pd_id != qp->pd_id ||
	    u->num_entries > mk->max_entries ||
	    u->num_entries > sizeof(ents) / sizeof(ents[0]))
		goto refused;
	for (i = 0; i < u->num_entries; i++) {
		ents[i].addr = seg[i].addr;
		ents[i].lkey = seg[i].lkey;
		ents[i].count = u->interleaved ? seg[i].len & 0xffff
					       : seg[i].len;
		ents[i].stride = u->interleaved ? seg[i].len >> 16 : 0;
		if (!umr_ent_ok(qp, &ents[i], u->repeat_count))
			goto refused;
	}
	mkey_install(mk, u->access, u->repeat_count, ents, u->num_entries);
	return IBV_WC_SUCCESS;
refused:
	ibemu_log_dbg("qp %#x: UMR of mkey %#x refused", qp->qpn, u->mkey);
	return IBV_WC_LOC_PROT_ERR;
}
