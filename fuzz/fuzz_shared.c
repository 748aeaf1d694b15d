// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the records other processes publish in shared
 * memory, as their readers take them:
 *
 *   0  a published region (struct pub_mr) copied and checked by a
 *      requester that places RDMA data (cma_rkey_ok, cma_window_ok); what
 *      it accepts must lie inside the region, and inside the memfd window
 *      the record names
 *   1  a published QP (struct node_qp) (cma_target_state_ok) and the
 *      placing[] words of the fence (cma_fence_match)
 *   2  an inbox's ring words (tail, head, slot sequence numbers) as
 *      producers and the consumer read them: a claim, publish, peek and
 *      release must stay in the ring and always return
 *
 * Input: the first byte picks the reader, the rest is the record's bytes
 * and the reader's arguments.  The inbox is a private copy here, laid out
 * as in shared memory.  The node segment has a harness of its own
 * (fuzz_node.c).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cma.h"
#include "engine.h"
#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct inbox *ib;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	ib = calloc(1, sizeof(*ib));
	if (!ib)
		abort();
	return 0;
}

static void fuzz_pub_mr(struct input *in)
{
	struct pub_mr_copy m;
	uint64_t va, len, pd_id, addr = 0, at = 0;
	uint32_t rkey, access;

	m.key = take32(in);
	m.access = take32(in);
	m.pd_id = take64(in);
	m.addr = take64(in);
	m.iova = take64(in);
	m.length = take64(in);
	rkey = take32(in);
	access = take32(in);
	va = take64(in);
	len = take64(in);
	pd_id = take64(in);
	m.map_fd = (int32_t)take32(in);
	m.map_id = take64(in);
	m.map_off = take64(in);
	m.map_lo = take64(in);
	m.map_len = take64(in);
	if (!cma_rkey_ok(&m, rkey, va, len, access, pd_id, &addr))
		return;
	/* Accepted: the key, PD and right match and [va, va+len) lies in
	 * [iova, iova+length) without wrapping. */
	if (!m.key || m.key != rkey || m.pd_id != pd_id ||
	    !(m.access & access) || va < m.iova || len > m.length ||
	    va - m.iova > m.length - len || addr != m.addr + (va - m.iova))
		abort();
	/* In the window: [at, at+len) lies in [0, map_len), and the window
	 * in the file does not wrap. */
	if (cma_window_ok(&m, addr, len, &at) &&
	    (!m.map_len || m.map_fd < 0 || !m.map_id || at > m.map_len ||
	     len > m.map_len - at || addr != m.map_lo + at ||
	     m.map_off + m.map_len < m.map_off))
		abort();
}

static void fuzz_node_qp(struct input *in)
{
	struct node_qp_copy q;
	uint64_t placing;
	uint32_t need, qpn, key;
	int32_t peer;

	q.owner = (int32_t)take32(in);
	q.state = take32(in);
	q.access = take32(in);
	q.pd_id = take64(in);
	peer = (int32_t)take32(in);
	need = take32(in);
	if (cma_target_state_ok(&q, peer, need) &&
	    (peer < 0 || peer >= IBEMU_MAX_PROCS || q.owner != peer + 1 ||
	     !(q.access & need) ||
	     (q.state != IBV_QPS_RTR && q.state != IBV_QPS_RTS &&
	      q.state != IBV_QPS_SQD)))
		abort();
	placing = take64(in);
	qpn = take32(in);
	key = take32(in);
	if (cma_fence_match(placing, qpn, key) &&
	    (!placing || (key ? (uint32_t)placing != key
			      : placing >> 32 != qpn)))
		abort();
}

static void fuzz_inbox(struct input *in)
{
	struct inbox_slot *s, *claimed[4];
	uint64_t pos[4];
	uint32_t n, i, idx;
	unsigned int k;

	atomic_store(&ib->tail, take64(in));
	atomic_store(&ib->head, take64(in));
	for (i = 0; i < INBOX_SLOTS; i++)
		atomic_store(&ib->slots[i].seq, i);
	n = take32(in) % 16;
	for (i = 0; i < n; i++) {
		idx = take32(in) % INBOX_SLOTS;
		atomic_store(&ib->slots[idx].seq, take64(in));
	}
	/* Producers: claims never leave the ring and always return. */
	for (k = 0; k < 4; k++) {
		claimed[k] = inbox_claim(ib, -1, &pos[k]);
		if (!claimed[k])
			break;
		if (claimed[k] != &ib->slots[pos[k] & (INBOX_SLOTS - 1)])
			abort();
	}
	while (k--)
		inbox_publish(ib, claimed[k], pos[k]);
	/* The consumer. */
	for (k = 0; k < 8; k++) {
		s = inbox_peek(ib);
		if (!s)
			break;
		if (s < ib->slots || s >= ib->slots + INBOX_SLOTS)
			abort();
		inbox_release(ib, s);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	uint8_t which;

	take(&in, &which, 1);
	switch (which % 4) {
	case 0:
		fuzz_pub_mr(&in);
		break;
	case 1:
		fuzz_node_qp(&in);
		break;
	case 2:
	case 3:
		fuzz_inbox(&in);
		break;
	}
	return 0;
}
