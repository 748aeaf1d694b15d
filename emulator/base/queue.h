/* SPDX-License-Identifier: MIT */
/*
 * Fixed-size rings for work queues and completion queues.
 *
 * Lock rule: a ring has no lock of its own; the object that owns it (QP,
 * SRQ, CQ) holds its lock around every call.  head counts entries taken,
 * tail entries put; both only grow (mod 2^32), so tail - head is the fill.
 * A ring holds size entries in a power of two of slots (mask + 1): a
 * counter indexes it with a mask, no division, and stays in step across
 * its wrap at 2^32, which a modulo by another size would not.
 */
#ifndef IBEMU_QUEUE_H
#define IBEMU_QUEUE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <infiniband/verbs.h>

#include "emu.h"

/* Where the requester is with a send WQE. */
enum wqe_state {
	WQE_PENDING, /* not looked at yet */
	WQE_SENDING, /* some packets sent */
	WQE_SENT, /* all packets sent, waiting for the answer */
	WQE_DONE, /* acknowledged (or answered): ready to complete */
	WQE_ERROR, /* failed with `status`: completes in error */
};

/* A memory window bind (IBA 10.6.7.2), as posted: the window and the
 * region are named by their keys and looked up when the bind executes. */
struct wqe_bind {
	uint64_t addr, length; /* the window, as the requester names it */
	uint32_t mw_key; /* the window's R_Key when posted */
	uint32_t mr_lkey; /* the region it is bound to; 0 with length 0 */
	uint32_t new_key; /* type 2: the R_Key its consumer key gives */
	uint32_t access; /* remote access rights granted */
};

/* A UMR (umr.c), as posted: the mkey named by its key, looked up when
 * it executes; its num_entries entries are in the WQE's inline area. */
struct wqe_umr {
	uint32_t mkey;
	uint32_t access; /* IBV_ACCESS_* the mkey will grant */
	uint32_t repeat_count; /* 1 for a list layout */
	uint16_t num_entries;
	bool interleaved;
};

/* A work queue element: a posted work request, as the HCA keeps it. */
struct wqe {
	uint64_t wr_id;
	uint32_t opcode; /* enum ibv_wr_opcode; receives: IBV_WC_RECV */
	uint32_t send_flags;
	uint32_t num_sge;
	uint32_t imm_data; /* network order, as posted; or the R_Key to
			     * invalidate (LOCAL_INV, SEND_WITH_INV) */
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t inline_len; /* bytes stored after sge[] when inline */
	uint64_t compare_add, swap; /* atomics */
	union {
		struct ibv_ah_attr av; /* UD: the address vector, as posted */
		struct wqe_bind bind; /* BIND_MW (RC, UC) */
		struct wqe_umr umr; /* EMU_WR_UMR (RC) */
	};
	uint32_t remote_qpn, remote_qkey; /* UD */
	uint32_t xrc_srqn; /* XRC: the SRQ its XRCETH names */
	uint64_t dc_key; /* DCI: the key its target DCT must have */
	/* requester state, under the QP lock */
	uint8_t state; /* enum wqe_state */
	uint8_t status; /* enum ibv_wc_status */
	bool pulled; /* one packet; the responder copies the data (cma.c) */
	uint32_t length; /* message length in bytes */
	uint32_t first_psn, last_psn;
	uint32_t sent; /* bytes sent */
	uint32_t read_next; /* RDMA READ: the response PSN expected next */
	/* RDMA READ: re-issued, and no response of the new stream has come
	 * yet; what arrives out of sequence meanwhile is left over from the
	 * old one (comp.c) */
	bool read_reissued;
	struct ibv_sge sge[];
};

struct wqe_ring {
	unsigned char *buf;
	uint32_t stride; /* bytes per element */
	uint32_t size; /* elements it holds */
	uint32_t mask; /* slots - 1 */
	uint32_t head, tail;
	const struct emu_buf_alloc *alloc; /* where buf comes from */
	bool custom; /* buf is from alloc, not the HCA's own */
};

/* alloc: the buffer's allocator, or NULL (emu.h). */
int wqe_ring_init(struct wqe_ring *r, uint32_t size, uint32_t max_sge,
		  uint32_t max_inline, const struct emu_buf_alloc *alloc);
void wqe_ring_fini(struct wqe_ring *r);
static inline uint32_t wqe_ring_count(const struct wqe_ring *r)
{
	return r->tail - r->head;
}
static inline bool wqe_ring_full(const struct wqe_ring *r)
{
	return wqe_ring_count(r) >= r->size;
}
static inline struct wqe *wqe_ring_at(const struct wqe_ring *r, uint32_t n)
{
	return (struct wqe *)(r->buf + (size_t)(n & r->mask) * r->stride);
}
/* The element the next put fills; valid while the ring is not full. */
static inline struct wqe *wqe_ring_tail(const struct wqe_ring *r)
{
	return wqe_ring_at(r, r->tail);
}
static inline struct wqe *wqe_ring_head(const struct wqe_ring *r)
{
	return wqe_ring_count(r) ? wqe_ring_at(r, r->head) : NULL;
}

/* head and tail are atomic for the unlocked emptiness test only. */
struct wc_ring {
	struct ibv_wc *buf;
	uint32_t size; /* entries it holds */
	uint32_t mask; /* slots - 1 */
	_Atomic uint32_t head, tail;
	bool custom; /* buf is from alloc, not the HCA's own */
	struct emu_wc_stamp *stamp; /* one per entry, or NULL: not stamped */
	const struct emu_buf_alloc *alloc; /* where buf comes from */
};

int wc_ring_init(struct wc_ring *r, uint32_t size, bool stamped,
		 const struct emu_buf_alloc *alloc);
void wc_ring_fini(struct wc_ring *r);
/* Move the entries to a ring of new size (>= count); 0 or -errno. */
int wc_ring_resize(struct wc_ring *r, uint32_t size);
static inline uint32_t wc_ring_count(const struct wc_ring *r)
{
	return r->tail - r->head;
}
/* Unlocked emptiness test (a hint: the owner's lock decides). */
static inline bool wc_ring_peek_empty(const struct wc_ring *r)
{
	return atomic_load_explicit(&r->tail, memory_order_acquire) ==
	       atomic_load_explicit(&r->head, memory_order_relaxed);
}
/* The oldest entry, left in place, or NULL if empty. */
static inline const struct ibv_wc *wc_ring_oldest(const struct wc_ring *r)
{
	return wc_ring_count(r) ? &r->buf[r->head & r->mask] : NULL;
}
/* Consume the oldest entry (there is one). */
static inline void wc_ring_drop(struct wc_ring *r)
{
	atomic_store_explicit(&r->head, r->head + 1, memory_order_relaxed);
}
/* false if full; stamp: kept with the entry when the ring is stamped
 * (may be NULL otherwise).  Inline, as wc_ring_get: every completion
 * passes both. */
static inline bool wc_ring_put(struct wc_ring *r, const struct ibv_wc *wc,
			       const struct emu_wc_stamp *stamp)
{
	if (wc_ring_count(r) >= r->size)
		return false;
	r->buf[r->tail & r->mask] = *wc;
	if (r->stamp)
		r->stamp[r->tail & r->mask] = *stamp;
	atomic_store_explicit(&r->tail, r->tail + 1, memory_order_release);
	return true;
}
/* The stamp of the oldest entry (there is one; the ring is stamped). */
static inline const struct emu_wc_stamp *wc_ring_oldest_stamp(
	const struct wc_ring *r)
{
	return &r->stamp[r->head & r->mask];
}
static inline bool wc_ring_get(struct wc_ring *r, struct ibv_wc *wc)
{
	const struct ibv_wc *oldest = wc_ring_oldest(r);

	if (!oldest)
		return false;
	*wc = *oldest;
	wc_ring_drop(r);
	return true;
}
/* Remove every entry of QP qpn; the others keep their order (and
 * stamps).  Returns how many went. */
uint32_t wc_ring_remove_qp(struct wc_ring *r, uint32_t qpn);

#endif /* IBEMU_QUEUE_H */
