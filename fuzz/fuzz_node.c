// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the node segment's entries (procs[], qps[], the
 * QPN cursor and the process count), which every process of the node
 * writes, as node.c reads them: owner lookups, QPN allocation and free,
 * and the sweep of dead processes.  Whatever the entries hold, a lookup
 * names a slot inside procs[] or none, an allocated QPN is ours and in
 * range, and nothing reads outside the segment.
 *
 * Input: our node slot, then up to 32 entries (a process or a QPN entry
 * at an index of the input's choice, raw bytes), then the lookups.  The
 * segment is a private copy, laid out as in shared memory, under a name
 * no segment or inbox has (the sweep unlinks nothing real).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "fuzz_input.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct node node;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	pthread_mutexattr_t attr;

	node.seg = calloc(1, sizeof(*node.seg));
	if (!node.seg)
		abort();
	snprintf(node.name, sizeof(node.name), "/ibemu-fuzz-node-%d",
		 (int)getpid());
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	pthread_mutex_init(&node.seg->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	return 0;
}

#define NODE_MAX_WRITES 16

/* Entries written by other processes of the node; our slot is
 * node.proc_slot. */
static void fuzz_node(struct input *in)
{
	uint32_t procs_written[NODE_MAX_WRITES], qps_written[NODE_MAX_WRITES];
	struct node_seg *seg = node.seg;
	uint32_t n, i, idx, qpn;
	uint16_t sel;
	pid_t pid;
	int32_t slot;

	take(in, &seg->qpn_cursor, sizeof(seg->qpn_cursor));
	take(in, &seg->nr_procs, sizeof(seg->nr_procs));
	node.proc_slot = (int)(take32(in) % IBEMU_MAX_PROCS);
	seg->procs[node.proc_slot].pid = getpid();
	n = take32(in) % NODE_MAX_WRITES;
	for (i = 0; i < n; i++) {
		take(in, &sel, sizeof(sel));
		if (sel & 1) {
			idx = (uint32_t)(sel >> 1) % IBEMU_MAX_PROCS;
			take(in, &seg->procs[idx], sizeof(seg->procs[idx]));
			procs_written[i] = idx;
			qps_written[i] = 0;
		} else {
			idx = take32(in) % IBEMU_MAX_QP;
			take(in, &seg->qps[idx], sizeof(seg->qps[idx]));
			qps_written[i] = idx;
			procs_written[i] = 0;
		}
	}
	for (i = 0; i < 4; i++) {
		qpn = take32(in);
		slot = node_qpn_owner_slot(&node, qpn);
		if (slot < -1 || slot >= IBEMU_MAX_PROCS)
			abort();
		pid = node_qpn_owner(&node, qpn);
		(void)pid;
	}
	if (take32(in) & 1) {
		if (node_qpn_alloc(&node, IBV_QPT_RC, &qpn) == 0) {
			if (qpn < IBEMU_QPN_FIRST ||
			    qpn - IBEMU_QPN_FIRST >= IBEMU_MAX_QP ||
			    node_qpn_owner_slot(&node, qpn) != node.proc_slot)
				abort();
			node_qpn_free(&node, qpn);
		}
	}
	if (take32(in) & 1) {
		node_lock(&node);
		node_sweep_dead_locked(&node);
		node_unlock(&node);
	}
	/* Back to an empty segment for the next input. */
	for (i = 0; i < n; i++) {
		memset(&seg->procs[procs_written[i]], 0, sizeof(seg->procs[0]));
		memset(&seg->qps[qps_written[i]], 0, sizeof(seg->qps[0]));
	}
	memset(&seg->procs[node.proc_slot], 0, sizeof(seg->procs[0]));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };

	fuzz_node(&in);
	return 0;
}
