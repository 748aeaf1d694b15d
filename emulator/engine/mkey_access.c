// SPDX-License-Identifier: MIT
/*
 * Accesses through an indirect mkey (mkey.c): an address of the mkey is
 * an offset into its layout (zero-based, mlx5dv_wr_post(3): "The mkey
 * should be used in a zero-based mode"), and a range of it is a series
 * of pieces, each bytes of one region.  A list layout's pieces are its
 * entries in order; an interleaved one's are repetitions r = 0 ..
 * repeat - 1 of every entry i, each [addr_i + r * stride_i, +count_i)
 * of region lkey_i (mlx5dv_wr_mr_interleaved(3)).
 *
 * Every access is checked as a region's is (IBA 10.6.3.2, C9-88): at
 * the mkey, a layout installed, of the QP's PD, granting the access,
 * the range inside the layout; at each piece, its region still
 * registered, of the mkey's PD, itself granting the access (an mkey
 * never grants more than its regions: deregistering or reregistering a
 * region takes effect through every mkey that names it), the piece
 * inside it.  A range is checked whole before a byte is copied, so a
 * failed access touches nothing.
 *
 * Lock rule: the caller holds its QP's lock (regions and the mkey stay,
 * mr.c, mkey.c); the mkey's lock is held for reading from the walk to
 * the end of the copy (mkey_access_begin: until mkey_access_end).
 */
#include "config.h"

#include <string.h>

#include "engine.h"

/* Where a walk is: entry i of repetition r, at byte in of the piece. */
struct mkey_pos {
	uint32_t i;
	uint64_t r, in;
};

/* The piece holding offset off (< mk->total, so rep_len > 0): the last
 * entry starting at or before it (an empty entry starts where the next
 * one does, so it is never the one found). */
static void mkey_find(const struct emu_mkey *mk, uint64_t off,
		      struct mkey_pos *pos)
{
	uint64_t in;
	uint32_t lo = 0, hi = mk->nr, mid;

	pos->r = off / mk->rep_len;
	in = off - pos->r * mk->rep_len;
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if (mk->ent[mid].start <= in)
			lo = mid;
		else
			hi = mid;
	}
	pos->i = lo;
	pos->in = in - mk->ent[lo].start;
}

static void mkey_next(const struct emu_mkey *mk, struct mkey_pos *pos)
{
	pos->in = 0;
	if (++pos->i == mk->nr) {
		pos->i = 0;
		pos->r++;
	}
}

/* Where n bytes of the piece at pos are here, checked (see the head of
 * this file), or NULL. */
static uint8_t *mkey_piece(struct emu_qp *qp, const struct emu_mkey *mk,
			   const struct mkey_pos *pos, uint64_t n, int access)
{
	const struct mkey_ent *e = &mk->ent[pos->i];
	struct emu_mr *mr = mr_lookup(qp->hca, e->lkey);

	if (!mr || mr->mkey || mr->pd_id != mk->mr.pd_id ||
	    (access && !(mr->access & access)))
		return NULL;
	return sge_mr_addr(mr, e->addr + pos->r * e->stride + pos->in, n,
			   access && access != IBV_ACCESS_REMOTE_READ);
}

/* The mkey's own checks; its lock held. */
static bool mkey_grants(const struct emu_qp *qp, const struct emu_mkey *mk,
			uint64_t off, uint64_t len, int access)
{
	return mk->valid && mk->mr.pd_id == qp->pd_id &&
	       (mk->access & (uint32_t)access) == (uint32_t)access &&
	       off < mk->total && len <= mk->total - off;
}

/* Walk [off, off+len): each piece checked, and copied to or from buf if
 * buf; false at the first piece that fails.  Its lock held. */
static bool mkey_walk(struct emu_qp *qp, const struct emu_mkey *mk,
		      uint64_t off, uint64_t len, int access, uint8_t *buf,
		      bool to_mem)
{
	struct mkey_pos pos;
	uint64_t n;
	uint8_t *p;

	mkey_find(mk, off, &pos);
	while (len) {
		n = mk->ent[pos.i].count - pos.in;
		if (n > len)
			n = len;
		p = n ? mkey_piece(qp, mk, &pos, n, access) : NULL;
		if (n && !p)
			return false;
		if (n && buf && to_mem)
			memcpy(p, buf, n);
		else if (n && buf)
			memcpy(buf, p, n);
		if (buf)
			buf += n;
		len -= n;
		mkey_next(mk, &pos);
	}
	return true;
}

bool mkey_check(struct emu_qp *qp, struct emu_mkey *mk, uint64_t off,
		uint64_t len, int access)
{
	bool ok;

	pthread_rwlock_rdlock(&mk->lock);
	ok = mkey_grants(qp, mk, off, len, access) &&
	     mkey_walk(qp, mk, off, len, access, NULL, false);
	pthread_rwlock_unlock(&mk->lock);
	return ok;
}

int mkey_copy(struct emu_qp *qp, struct emu_mkey *mk, uint64_t off,
	      void *buf, uint64_t len, int access, bool to_mem)
{
	bool ok;

	pthread_rwlock_rdlock(&mk->lock);
	ok = mkey_grants(qp, mk, off, len, access) &&
	     mkey_walk(qp, mk, off, len, access, NULL, false) &&
	     mkey_walk(qp, mk, off, len, access, buf, to_mem);
	pthread_rwlock_unlock(&mk->lock);
	return ok ? 0 : -1;
}

uint8_t *mkey_access_begin(struct emu_qp *qp, struct emu_mkey *mk,
			   uint64_t off, uint64_t len, int access)
{
	struct mkey_pos pos;
	uint8_t *p = NULL;

	pthread_rwlock_rdlock(&mk->lock);
	if (mkey_grants(qp, mk, off, len, access)) {
		mkey_find(mk, off, &pos);
		if (len <= mk->ent[pos.i].count - pos.in)
			p = mkey_piece(qp, mk, &pos, len, access);
	}
	/* For an atomic: its word, aligned (IBA 9.4.5), in one piece. */
	if (!p || ((uintptr_t)p & 7)) {
		pthread_rwlock_unlock(&mk->lock);
		return NULL;
	}
	return p;
}

void mkey_access_end(struct emu_mkey *mk)
{
	pthread_rwlock_unlock(&mk->lock);
}

bool sge_has_mkey(struct emu_qp *qp, const struct ibv_sge *sge,
		  uint32_t num_sge)
{
	uint32_t i;

	for (i = 0; i < num_sge; i++)
		if (sge[i].length && mkey_lookup(qp->hca, sge[i].lkey))
			return true;
	return false;
}

/*
 * sge_copy for a list with mkeys in [offset, offset+len), which
 * sge_span() checked: each segment's part copied from its region or
 * through its mkey.  0, or -1 if a layout or region changed since (then
 * some bytes may have been copied).
 */
int sge_copy_indirect(struct emu_qp *qp, const struct ibv_sge *sge,
		      uint32_t num_sge, uint32_t offset, void *buf,
		      uint32_t len, bool to_sge)
{
	int access = to_sge ? IBV_ACCESS_LOCAL_WRITE : 0;
	uint8_t *b = buf, *p;
	struct emu_mr *mr;
	uint32_t i, n;

	for (i = 0; i < num_sge && len; i++) {
		if (offset >= sge[i].length) {
			offset -= sge[i].length;
			continue;
		}
		n = sge[i].length - offset < len ? sge[i].length - offset
						 : len;
		mr = mr_lookup(qp->hca, sge[i].lkey);
		if (mr && mr->mkey) {
			if (mkey_copy(qp, mr->mkey, sge[i].addr + offset, b, n,
				      access, to_sge))
				return -1;
		} else {
			p = mr ? sge_mr_addr(mr, sge[i].addr + offset, n,
					     to_sge)
			       : NULL;
			if (!p)
				return -1;
			memcpy(to_sge ? p : b, to_sge ? b : p, n);
		}
		b += n;
		len -= n;
		offset = 0;
	}
	return len ? -1 : 0;
}
