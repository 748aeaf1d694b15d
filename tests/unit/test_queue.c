// SPDX-License-Identifier: MIT
/*
 * The work and completion rings (emulator/base/queue.[ch]): entries come back
 * in order and intact, a ring holds exactly its size, and all of it holds
 * across the wrap of the free-running counters at 2^32, with sizes that
 * are not powers of two (a QP's max_send_wr, a CQ's cqe are the user's).
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "unit.h"

#include "queue.h"

/* Counters this far below the wrap. */
#define NEAR_WRAP 7u

/* Fill and empty a ring of size entries over and over, starting just below
 * the wrap, with up to fill entries in it. */
static void wqe_ring_cycle(uint32_t size, uint32_t fill)
{
	struct wqe_ring r;
	uint64_t put = 0, got = 0;
	struct wqe *w;
	uint32_t i;

	CU_ASSERT_FATAL(wqe_ring_init(&r, size, 1, 0, NULL) == 0);
	r.head = r.tail = UINT32_MAX - NEAR_WRAP;
	for (i = 0; i < 10 * size + 4 * NEAR_WRAP; i++) {
		while (wqe_ring_count(&r) < fill) {
			w = wqe_ring_tail(&r);
			w->wr_id = put++;
			r.tail++;
		}
		CU_ASSERT_EQUAL(wqe_ring_full(&r), fill == size);
		w = wqe_ring_head(&r);
		CU_ASSERT_PTR_NOT_NULL_FATAL(w);
		CU_ASSERT_EQUAL(w->wr_id, got);
		got++;
		r.head++;
	}
	CU_ASSERT(r.tail < UINT32_MAX - NEAR_WRAP); /* it did wrap */
	wqe_ring_fini(&r);
}

static void test_wqe_ring_wrap(void)
{
	wqe_ring_cycle(5, 5);
	wqe_ring_cycle(5, 3);
	wqe_ring_cycle(100, 100);
	wqe_ring_cycle(64, 64);
	wqe_ring_cycle(1, 1);
}

static void wc_ring_cycle(uint32_t size, uint32_t fill)
{
	struct wc_ring r;
	struct ibv_wc wc;
	uint64_t put = 0, got = 0;
	uint32_t i;

	CU_ASSERT_FATAL(wc_ring_init(&r, size, false, NULL) == 0);
	r.head = r.tail = UINT32_MAX - NEAR_WRAP;
	for (i = 0; i < 10 * size + 4 * NEAR_WRAP; i++) {
		while (wc_ring_count(&r) < fill) {
			memset(&wc, 0, sizeof(wc));
			wc.wr_id = put++;
			CU_ASSERT_FATAL(wc_ring_put(&r, &wc, NULL));
		}
		if (fill == size) /* full: one more is refused */
			CU_ASSERT_FALSE(wc_ring_put(&r, &wc, NULL));
		CU_ASSERT_FATAL(wc_ring_get(&r, &wc));
		CU_ASSERT_EQUAL(wc.wr_id, got);
		got++;
	}
	wc_ring_fini(&r);
}

static void test_wc_ring_wrap(void)
{
	wc_ring_cycle(3, 3);
	wc_ring_cycle(7, 4);
	wc_ring_cycle(16, 16);
}

/* Resizing and removing a QP's entries keep the others' order, across
 * the wrap. */
static void test_wc_ring_resize_remove(void)
{
	struct wc_ring r;
	struct ibv_wc wc;
	uint32_t i;

	CU_ASSERT_FATAL(wc_ring_init(&r, 5, false, NULL) == 0);
	r.head = r.tail = UINT32_MAX - 2;
	for (i = 0; i < 5; i++) {
		memset(&wc, 0, sizeof(wc));
		wc.wr_id = i;
		wc.qp_num = i % 2 ? 0x20 : 0x10;
		CU_ASSERT_FATAL(wc_ring_put(&r, &wc, NULL));
	}
	CU_ASSERT_EQUAL(wc_ring_resize(&r, 4), -EINVAL);
	CU_ASSERT_EQUAL(wc_ring_remove_qp(&r, 0x20), 2);
	CU_ASSERT_EQUAL(wc_ring_count(&r), 3);
	CU_ASSERT_EQUAL(wc_ring_resize(&r, 11), 0);
	for (i = 0; i < 3; i++) {
		CU_ASSERT_FATAL(wc_ring_get(&r, &wc));
		CU_ASSERT_EQUAL(wc.wr_id, 2 * i);
	}
	CU_ASSERT_FALSE(wc_ring_get(&r, &wc));
	wc_ring_fini(&r);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "wqe_ring_wrap", test_wqe_ring_wrap },
		{ "wc_ring_wrap", test_wc_ring_wrap },
		{ "wc_ring_resize_remove", test_wc_ring_resize_remove },
		{ NULL, NULL },
	};

	return unit_run("queue", tests);
}
