// SPDX-License-Identifier: MIT
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

/* Queue buffers are aligned to a cache line for the allocator. */
#define RING_ALIGN 64

/* The slots of a ring of size entries: the power of two at or above. */
static uint32_t ring_slots(uint32_t size)
{
	uint32_t n = 1;

	while (n < size)
		n <<= 1;
	return n;
}

/* A zeroed buffer of n bytes from alloc (emu.h) or the HCA's own;
 * *custom_p says which.  NULL if there is none. */
static void *ring_buf_get(const struct emu_buf_alloc *alloc, size_t n,
			  bool *custom_p)
{
	void *buf;

	*custom_p = false;
	if (alloc && alloc->alloc) {
		buf = alloc->alloc(alloc->priv, n, RING_ALIGN, alloc->type);
		if (!buf)
			return NULL;
		if (buf != EMU_BUF_USE_DEFAULT) {
			memset(buf, 0, n);
			*custom_p = true;
			return buf;
		}
	}
	return calloc(1, n);
}

static void ring_buf_put(const struct emu_buf_alloc *alloc, void *buf,
			 bool custom)
{
	if (custom)
		alloc->free(alloc->priv, buf, alloc->type);
	else
		free(buf);
}

int wqe_ring_init(struct wqe_ring *r, uint32_t size, uint32_t max_sge,
		  uint32_t max_inline, const struct emu_buf_alloc *alloc)
{
	size_t stride = sizeof(struct wqe) + max_sge * sizeof(struct ibv_sge) +
			max_inline;
	uint32_t slots;

	stride = (stride + 15) & ~(size_t)15;
	memset(r, 0, sizeof(*r));
	if (!size)
		size = 1;
	slots = ring_slots(size);
	r->alloc = alloc;
	r->buf = ring_buf_get(alloc, (size_t)slots * stride, &r->custom);
	if (!r->buf)
		return -ENOMEM;
	r->stride = (uint32_t)stride;
	r->size = size;
	r->mask = slots - 1;
	return 0;
}

void wqe_ring_fini(struct wqe_ring *r)
{
	if (r->buf)
		ring_buf_put(r->alloc, r->buf, r->custom);
	r->buf = NULL;
}

int wc_ring_init(struct wc_ring *r, uint32_t size, bool stamped,
		 const struct emu_buf_alloc *alloc)
{
	uint32_t slots;

	memset(r, 0, sizeof(*r));
	if (!size)
		size = 1;
	slots = ring_slots(size);
	r->alloc = alloc;
	r->buf = ring_buf_get(alloc, (size_t)slots * sizeof(*r->buf),
			      &r->custom);
	if (!r->buf)
		return -ENOMEM;
	if (stamped) {
		r->stamp = calloc(slots, sizeof(*r->stamp));
		if (!r->stamp) {
			ring_buf_put(alloc, r->buf, r->custom);
			r->buf = NULL;
			return -ENOMEM;
		}
	}
	r->size = size;
	r->mask = slots - 1;
	return 0;
}

void wc_ring_fini(struct wc_ring *r)
{
	if (r->buf)
		ring_buf_put(r->alloc, r->buf, r->custom);
	free(r->stamp);
	r->buf = NULL;
	r->stamp = NULL;
}

int wc_ring_resize(struct wc_ring *r, uint32_t size)
{
	uint32_t n = wc_ring_count(r), i, slots;
	struct emu_wc_stamp *stamp = NULL;
	struct ibv_wc *buf;
	bool custom;

	if (size < n)
		return -EINVAL;
	if (!size)
		size = 1;
	slots = ring_slots(size);
	buf = ring_buf_get(r->alloc, (size_t)slots * sizeof(*buf), &custom);
	if (!buf)
		return -ENOMEM;
	if (r->stamp) {
		stamp = calloc(slots, sizeof(*stamp));
		if (!stamp) {
			ring_buf_put(r->alloc, buf, custom);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++)
			stamp[i] = r->stamp[(r->head + i) & r->mask];
		free(r->stamp);
		r->stamp = stamp;
	}
	for (i = 0; i < n; i++)
		buf[i] = r->buf[(r->head + i) & r->mask];
	ring_buf_put(r->alloc, r->buf, r->custom);
	r->buf = buf;
	r->custom = custom;
	r->size = size;
	r->mask = slots - 1;
	r->head = 0;
	r->tail = n;
	return 0;
}

uint32_t wc_ring_remove_qp(struct wc_ring *r, uint32_t qpn)
{
	uint32_t from, to = r->head, tail = r->tail;

	for (from = r->head; from != tail; from++) {
		if (r->buf[from & r->mask].qp_num == qpn)
			continue;
		if (to != from) {
			r->buf[to & r->mask] = r->buf[from & r->mask];
			if (r->stamp)
				r->stamp[to & r->mask] =
					r->stamp[from & r->mask];
		}
		to++;
	}
	atomic_store_explicit(&r->tail, to, memory_order_release);
	return tail - to;
}
