/* SPDX-License-Identifier: MIT */
/*
 * One-sided operations placed by the requester, the shared-memory
 * transport's placement capability (transport.h, doc/design.md §13
 * "Requester-placed RDMA WRITE and READ"): with cross-memory attach
 * (process_vm_writev/readv) an RDMA WRITE or READ moves its data in one
 * copy and one system call, and lands while the target process runs no verb
 * at all.  The requester checks everything the responder would (IBA
 * 9.7.4.1.4, 10.6.3.2: QP state and access, R_Key, PD, range, access right)
 * against what the target published; anything else, or any failure, takes
 * the packet path, where the responder produces the exact error.
 *
 * Ordering (IBA 9.5): a WQE is placed this way only when nothing is in
 * flight on its QP, so it cannot overtake an earlier request.
 */
#ifndef IBEMU_CMA_H
#define IBEMU_CMA_H

#include <stdbool.h>
#include <stdint.h>

struct emu_hca;
struct engine;
struct emu_qp;
struct emu_mr;
struct wqe;

/* qp's peer was resolved or dropped: what placement it allows. */
void cma_peer_bind(struct emu_qp *qp);
struct iovec;
/* Try to execute w (RDMA WRITE or READ) directly; true if done (local,
 * nl: tp_place_ops.rdma). */
bool cma_try(struct emu_qp *qp, struct wqe *w, const struct iovec *local,
	     int nl);
struct pull_desc_copy;
/* Large SENDs: the requester describes, the responder pulls. */
bool cma_pull_ok(struct emu_qp *qp, const struct wqe *w);
uint32_t cma_pull_desc(struct emu_qp *qp, struct wqe *w, void *buf);
int cma_pull(struct emu_qp *qp, const struct wqe *rwqe,
	     const struct pull_desc_copy *d);
/* Publish / withdraw a region of ours (mr.c; one writer per region).
 * Withdrawing returns once no requester is placing into it. */
void cma_publish_mr(struct engine *e, const struct emu_mr *mr);
void cma_withdraw_mr(struct engine *e, const struct emu_mr *mr);
/* Our QP qpn stopped taking one-sided operations: returns once no
 * requester is placing into it. */
void cma_fence_qp(struct engine *e, uint32_t qpn);

/*
 * What a requester reads of the target's shared memory, copied once (under
 * the record's seqlock) into private memory, and the checks made on the
 * copies.  Pure functions: the fuzz harnesses call them directly.
 */
/* A published region (struct pub_mr). */
struct pub_mr_copy {
	uint32_t key, access;
	uint64_t pd_id, addr, iova, length;
	int32_t map_fd;
	uint64_t map_id, map_off, map_lo, map_len;
};
/* Whether m lets [va, va+len) be accessed with access by a QP of pd_id
 * under rkey; *addr_p gets the target's address of va. */
bool cma_rkey_ok(const struct pub_mr_copy *m, uint32_t rkey, uint64_t va,
		 uint64_t len, uint32_t access, uint64_t pd_id,
		 uint64_t *addr_p);
/* Whether [addr, addr+len) of the target (addr from cma_rkey_ok) lies in
 * the memfd window m names; *at_p gets its offset in the window. */
bool cma_window_ok(const struct pub_mr_copy *m, uint64_t addr, uint64_t len,
		   uint64_t *at_p);
/* A published QP (struct node_qp). */
struct node_qp_copy {
	int32_t owner; /* node slot + 1 */
	uint32_t state, access;
	uint64_t pd_id;
};
/* Whether q, owned by node slot peer_proc, takes an operation needing
 * access now. */
bool cma_target_state_ok(const struct node_qp_copy *q, int32_t peer_proc,
			 uint32_t need);
/* Whether a placing[] word announces a placement into qpn (key 0) or
 * under key. */
bool cma_fence_match(uint64_t placing, uint32_t qpn, uint32_t key);

/* tp_shm.c: the inboxes behind the shared-memory transport's peers. */
struct tp_peer;
struct inbox *tp_shm_inbox(struct tp_peer *peer);
struct inbox *tp_shm_own_inbox(struct engine *e);
/* Ours as a peer; whether a peer is the shared-memory transport's. */
struct tp_peer *tp_shm_self(struct engine *e);
bool tp_peer_is_shm(const struct tp_peer *peer);
/* The token of the process behind peer (node.h). */
uint64_t tp_shm_peer_token(struct tp_peer *peer);

#endif /* IBEMU_CMA_H */
