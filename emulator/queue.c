// SPDX-License-Identifier: MIT
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "queue.h"

int wqe_ring_init(struct wqe_ring *r, uint32_t size, uint32_t max_sge,
		  uint32_t max_inline)
{
	size_t stride = sizeof(struct wqe) + max_sge * sizeof(struct ibv_sge) +
			max_inline;

	stride = (stride + 15) & ~(size_t)15;
	memset(r, 0, sizeof(*r));
	if (!size)
		size = 1;
	r->buf = calloc(size, stride);
	if (!r->buf)
		return -ENOMEM;
	r->stride = (uint32_t)stride;
	r->size = size;
	return 0;
}

void wqe_ring_fini(struct wqe_ring *r)
{
	free(r->buf);
	r->buf = NULL;
}

int wc_ring_init(struct wc_ring *r, uint32_t size, bool stamped)
{
	memset(r, 0, sizeof(*r));
	r->buf = calloc(size ? size : 1, sizeof(*r->buf));
	if (!r->buf)
		return -ENOMEM;
	if (stamped) {
		r->stamp = calloc(size ? size : 1, sizeof(*r->stamp));
		if (!r->stamp) {
			free(r->buf);
			r->buf = NULL;
			return -ENOMEM;
		}
	}
	r->size = size ? size : 1;
	return 0;
}

void wc_ring_fini(struct wc_ring *r)
{
	free(r->buf);
	free(r->stamp);
	r->buf = NULL;
	r->stamp = NULL;
}

int wc_ring_resize(struct wc_ring *r, uint32_t size)
{
	uint32_t n = wc_ring_count(r), i;
	struct emu_wc_stamp *stamp = NULL;
	struct ibv_wc *buf;

	if (size < n)
		return -EINVAL;
	buf = calloc(size ? size : 1, sizeof(*buf));
	if (!buf)
		return -ENOMEM;
	if (r->stamp) {
		stamp = calloc(size ? size : 1, sizeof(*stamp));
		if (!stamp) {
			free(buf);
			return -ENOMEM;
		}
		for (i = 0; i < n; i++)
			stamp[i] = r->stamp[(r->head + i) % r->size];
		free(r->stamp);
		r->stamp = stamp;
	}
	for (i = 0; i < n; i++)
		buf[i] = r->buf[(r->head + i) % r->size];
	free(r->buf);
	r->buf = buf;
	r->size = size ? size : 1;
	r->head = 0;
	r->tail = n;
	return 0;
}

bool wc_ring_put(struct wc_ring *r, const struct ibv_wc *wc,
		 const struct emu_wc_stamp *stamp)
{
	if (wc_ring_count(r) >= r->size)
		return false;
	r->buf[r->tail % r->size] = *wc;
	if (r->stamp)
		r->stamp[r->tail % r->size] = *stamp;
	atomic_store_explicit(&r->tail, r->tail + 1, memory_order_release);
	return true;
}

bool wc_ring_get(struct wc_ring *r, struct ibv_wc *wc)
{
	const struct ibv_wc *oldest = wc_ring_oldest(r);

	if (!oldest)
		return false;
	*wc = *oldest;
	wc_ring_drop(r);
	return true;
}
