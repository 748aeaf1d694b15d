// SPDX-License-Identifier: MIT
/* Requester-placed RDMA WRITE and READ (see cma.h). */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "cma.h"
#include "cpu.h"
#include "engine.h"
#include "log.h"
#include "mr_memfd.h"
#include "pcap.h"
#include "peer_map.h"
#include "remote_fence.h"
#include "seqlock.h"
#include "trace_rec.h"

/* A QP's placement state, in its place bytes (hca.h), under qp.lock. */
struct cma_qp {
	/* Cross-memory attach with that process (cma.c): its pid as seen
	 * from here, checked against its token when the peer was resolved;
	 * 0: none (another pid namespace, or the kernel refuses). */
	pid_t pid;
	bool refused; /* a placement from here was refused */
	/* Placement by loads and stores into the peer's memfd windows
	 * (cma.c, peer_map.h): its pid when it is in our pid namespace (0:
	 * not possible), whether opening its memfd was refused, and the
	 * window used last (a reference), under qp.lock. */
	struct {
		pid_t pid;
		bool refused;
		/* Announce placements without a fence of our own: the
		 * peer's placement fence issues a remote fence (cma.c). */
		bool lean;
		/* Our announcement word in the peer's inbox (cma_fence),
		 * while near; its mapping lasts as long as the engine. */
		_Atomic uint64_t *placing;
		struct peer_map *map;
		/* The region last placed into through map, as it was
		 * checked (cma.c): reused for the same R_Key while the
		 * target QP's record and the region's keep the sequence
		 * numbers they had then.  map NULL: none; else it is
		 * `map` above and the QP is still connected as it was
		 * (cma_peer_bind clears it). */
		struct cma_last {
			const struct peer_map *map;
			/* the target QP's record (node segment) and the
			 * region's (the peer's inbox): both stay mapped */
			const struct node_qp *tq;
			const struct pub_mr *pub;
			int32_t owner; /* tq->owner while it is the peer's */
			uint32_t rkey, access; /* the region's key; what both grant */
			uint32_t qp_seq, mr_seq;
			uint64_t iova, length;
			uint8_t *at_iova; /* where iova lies in map */
		} last;
	} window;
};

_Static_assert(sizeof(struct cma_qp) <= sizeof(((struct emu_qp *)0)->place),
	       "IBEMU_QP_PLACE_SIZE holds a QP's placement state");

static inline struct cma_qp *cma_qp(struct emu_qp *qp)
{
	return (struct cma_qp *)(void *)qp->place;
}

static inline const struct cma_qp *cma_qp_c(const struct emu_qp *qp)
{
	return (const struct cma_qp *)(const void *)qp->place;
}

/* Below this size a WRITE or READ in a stream goes as packets: one
 * process_vm_writev costs about a microsecond. */
#define CMA_SMALL 16384

/* From this size a SEND's data is pulled by the responder: one copy and
 * one system call instead of two copies per MTU through the inbox. */
#define CMA_PULL_MIN (64 * 1024)

/* 1: usable, 0: untried, -1: refused here (seccomp, ptrace policy). */
static atomic_int cma_state;

static __attribute__((noinline)) bool cma_enabled_first(void)
{
	const char *env = getenv("IBEMU_CMA");
	/* A run trace shows every RDMA as its packets (doc/trace.md). */
	int st = (env && !strcmp(env, "0")) || trace_rec_on() ? -1 : 1;

	atomic_store(&cma_state, st);
	return st > 0;
}

static inline bool cma_enabled(void)
{
	int st = atomic_load_explicit(&cma_state, memory_order_relaxed);

	return st ? st > 0 : cma_enabled_first();
}

/* The entry a key is published in, if any (inbox.h). */
static struct pub_mr *pub_slot(struct inbox *ib, uint32_t key)
{
	if (key_num(key) == 0)
		return NULL;
	return &ib->mrs[(key_num(key) - 1) & (INBOX_PUB_MRS - 1)];
}

/*
 * The placement fence (IBA 10.6.3.5: after deregistration returns, the
 * region is not accessed; IBA 10.3.1: a QP in the error state executes
 * nothing).  A requester announces each placement in the target's inbox,
 * placing[its node slot] = target QPN << 32 | R_Key, before it checks
 * what the target published, and clears it after the copy.  The target
 * withdraws first and reads the announcements after; with a full fence on
 * both sides either the requester sees the withdrawal, or the target sees
 * the announcement and waits for the copy to end.  A requester that died
 * is not waited for; one that is stopped is waited for at most
 * CMA_FENCE_MAX_NS, and the fence says so.
 *
 * The requester's fence is most of a small placement's cost, and the
 * target's is rare (deregistration, a QP leaving RTS): where both
 * processes can, the requester announces with a plain store and the
 * target's fence adds a remote fence (remote_fence.h), which runs the
 * requester's half on its CPU.  Such a requester first sets the target's
 * lean_placers, with a full fence, so that a target whose scan follows a
 * withdrawal the requester did not see also sees that it must issue one.
 */
#define CMA_FENCE_MAX_NS (1000ull * 1000 * 1000)

/* If the kernel refuses a remote fence it said it would issue, wait this
 * long instead: an announcement a lean requester stored is in its CPU's
 * store buffer, which drains in far less (and at any context switch). */
#define CMA_FENCE_DRAIN_NS (1000ull * 1000)

static bool cma_placer_alive(struct emu_hca *hca, unsigned int slot)
{
	return node_proc_alive(&hca->node, (int)slot);
}

bool cma_fence_match(uint64_t placing, uint32_t qpn, uint32_t key)
{
	if (!placing)
		return false;
	return key ? (uint32_t)placing == key : placing >> 32 == qpn;
}

/* Wait for the placements into (qpn, or key if non-zero) to end. */
static void cma_fence(struct engine *e, uint32_t qpn, uint32_t key)
{
	struct inbox *ib = tp_shm_own_inbox(e);
	struct emu_hca *hca = e->hca;
	uint64_t deadline = 0;
	unsigned int i;

	if (!ib)
		return;
	atomic_thread_fence(memory_order_seq_cst);
	/* Any non-zero value, whoever wrote it: a remote fence too. */
	if (remote_fence_issues() &&
	    atomic_load_explicit(&ib->lean_placers, memory_order_relaxed) &&
	    !remote_fence()) {
		struct timespec ts = {0, CMA_FENCE_DRAIN_NS};

		ibemu_log_warn("remote fence refused (%s): waiting for "
			       "announcements to drain instead",
			       strerror(errno));
		nanosleep(&ts, NULL);
	}
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		while (cma_fence_match(atomic_load(&ib->placing[i]), qpn,
				       key) &&
		       cma_placer_alive(hca, i)) {
			if (!deadline)
				deadline = clock_now_ns() + CMA_FENCE_MAX_NS;
			if (clock_now_ns() > deadline) {
				ibemu_log_warn("a stopped process is placing "
					       "RDMA data; fence given up");
				break;
			}
			sched_yield();
		}
	}
}

void cma_fence_qp(struct engine *e, uint32_t qpn)
{
	cma_fence(e, qpn, 0);
}

/* Announce a placement in the target's placing[] (the fence's first
 * half), ordered before the checks' loads: by a full fence here, or, if
 * the target's fence issues a remote fence (window.lean), by that. */
static inline void cma_announce(const struct emu_qp *qp,
				_Atomic uint64_t *placing, uint64_t v)
{
	if (cma_qp_c(qp)->window.lean) {
		atomic_store_explicit(placing, v, memory_order_relaxed);
		atomic_signal_fence(memory_order_seq_cst);
	} else {
		cpu_store_fence_u64(placing, v);
	}
}

/*
 * Write mr's published record; withdraw: key 0, nothing placed.  The entry
 * is shared by every key index equal modulo INBOX_PUB_MRS: a region takes
 * it only if it is free or its own, and only the region in it frees it.
 * Lock rule: hca.lock, so two regions never write one entry at once.
 */
static void cma_write_mr(struct engine *e, const struct emu_mr *mr,
			 bool withdraw)
{
	struct inbox *ib = tp_shm_own_inbox(e);
	struct pub_mr *p = ib ? pub_slot(ib, mr->key) : NULL;
	uint32_t holder;

	if (!p)
		return;
	pthread_mutex_lock(&e->hca->lock);
	holder = atomic_load_explicit(&p->key, memory_order_relaxed);
	if (holder != mr->key && (withdraw || holder)) {
		pthread_mutex_unlock(&e->hca->lock);
		return; /* another region's entry: not ours to change */
	}
	seq_write_begin(&p->seq);
	SEQ_SET(p->key, withdraw ? 0 : mr->key);
	SEQ_SET(p->access, (uint32_t)mr->access);
	SEQ_SET(p->pd_id, mr->pd_id);
	SEQ_SET(p->addr, (uint64_t)(uintptr_t)mr->addr);
	SEQ_SET(p->iova, mr->iova);
	SEQ_SET(p->length, mr->length);
	SEQ_SET(p->map_fd, mr->win.len ? mr_memfd_fd() : -1);
	SEQ_SET(p->map_id, mr_memfd_id());
	SEQ_SET(p->map_off, mr->win.off);
	SEQ_SET(p->map_lo, mr->win.lo);
	SEQ_SET(p->map_len, mr->win.len);
	seq_write_end(&p->seq);
	pthread_mutex_unlock(&e->hca->lock);
}

void cma_publish_mr(struct engine *e, const struct emu_mr *mr)
{
	cma_write_mr(e, mr, false);
}

void cma_withdraw_mr(struct engine *e, const struct emu_mr *mr)
{
	cma_write_mr(e, mr, true);
	cma_fence(e, 0, mr->key);
}

bool cma_rkey_ok(const struct pub_mr_copy *m, uint32_t rkey, uint64_t va,
		 uint64_t len, uint32_t access, uint64_t pd_id,
		 uint64_t *addr_p)
{
	uint64_t end;

	/* IBA 10.6.3.2 (C9-88): valid key, same PD, access right, range. */
	if (!m->key || m->key != rkey)
		return false;
	if (!(m->access & access) || m->pd_id != pd_id)
		return false;
	if (__builtin_add_overflow(m->iova, m->length, &end))
		return false;
	if (va < m->iova || va > end || len > end - va)
		return false;
	*addr_p = m->addr + (va - m->iova);
	return true;
}

/* Whether [addr, addr+len) lies in the window [lo, lo+wlen), without
 * wrapping: every bound may come from another process. */
static bool cma_in_window(uint64_t lo, uint64_t wlen, uint64_t addr,
			  uint64_t len)
{
	return wlen && addr >= lo && addr - lo <= wlen &&
	       len <= wlen - (addr - lo);
}

bool cma_window_ok(const struct pub_mr_copy *m, uint64_t addr, uint64_t len,
		   uint64_t *at_p)
{
	uint64_t end;

	if (m->map_fd < 0 || !m->map_id ||
	    __builtin_add_overflow(m->map_lo, m->map_len, &end) ||
	    __builtin_add_overflow(m->map_off, m->map_len, &end) ||
	    !cma_in_window(m->map_lo, m->map_len, addr, len))
		return false;
	*at_p = addr - m->map_lo;
	return true;
}

/* The target address of [va, va+len) if the published region allows it:
 * the record is copied once under its seqlock into *snap, then checked. */
static bool cma_check_rkey(struct inbox *ib, uint32_t rkey, uint64_t va,
			   uint64_t len, uint32_t access, uint64_t pd_id,
			   struct pub_mr_copy *snap, uint32_t *seq_p,
			   uint64_t *addr_p)
{
	struct pub_mr *p = pub_slot(ib, rkey);
	uint32_t seq;

	if (!p)
		return false;
	seq = seq_read_begin(&p->seq);
	snap->key = SEQ_GET(p->key);
	snap->access = SEQ_GET(p->access);
	snap->pd_id = SEQ_GET(p->pd_id);
	snap->addr = SEQ_GET(p->addr);
	snap->iova = SEQ_GET(p->iova);
	snap->length = SEQ_GET(p->length);
	snap->map_fd = SEQ_GET(p->map_fd);
	snap->map_id = SEQ_GET(p->map_id);
	snap->map_off = SEQ_GET(p->map_off);
	snap->map_lo = SEQ_GET(p->map_lo);
	snap->map_len = SEQ_GET(p->map_len);
	if (!seq_read_ok(&p->seq, seq))
		return false;
	*seq_p = seq;
	return cma_rkey_ok(snap, rkey, va, len, access, pd_id, addr_p);
}

/* Local iovecs of w's data (inline or SGEs, already checked). */
static int cma_local_iov(struct emu_qp *qp, struct wqe *w,
			 struct iovec *iov)
{
	if (w->send_flags & IBV_SEND_INLINE) {
		iov[0].iov_base = wqe_inline_data(qp, w);
		iov[0].iov_len = w->length;
		return 1;
	}
	return sge_iov(qp, w->sge, w->num_sge, wr_is(w->opcode, WR_RD_ATOMIC),
		       iov);
}

bool cma_target_state_ok(const struct node_qp_copy *q, int32_t peer_proc,
			 uint32_t need)
{
	/* The QP must still be the one our QP is connected to: owned by
	 * the process we resolved it to. */
	if (peer_proc < 0 || peer_proc >= IBEMU_MAX_PROCS ||
	    q->owner != peer_proc + 1)
		return false;
	if (q->state != IBV_QPS_RTR && q->state != IBV_QPS_RTS &&
	    q->state != IBV_QPS_SQD)
		return false;
	return (q->access & need) != 0;
}

/* The node's record of the QP qp is connected to, NULL if its number
 * names none. */
static struct node_qp *cma_target_record(const struct emu_qp *qp)
{
	uint32_t idx = qp->attr.dest_qp_num - IBEMU_QPN_FIRST;

	if (qp->attr.dest_qp_num < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return NULL;
	return &qp->hca->node.seg->qps[idx];
}

/* Whether the target QP, as its owner published it, takes a one-sided
 * operation needing access (IBA 9.7.4.1.4, 10.3.1: RTR, RTS or SQD); the
 * record is copied once under its seqlock, then checked. */
static bool cma_target_ok(struct emu_qp *qp, uint32_t need,
			  struct node_qp_copy *snap_p, uint32_t *seq_p)
{
	struct node_qp *tq = cma_target_record(qp);
	struct node_qp_copy snap;
	uint32_t seq;

	if (!tq)
		return false;
	seq = seq_read_begin(&tq->seq);
	snap.state = SEQ_GET(tq->state);
	snap.access = SEQ_GET(tq->access);
	snap.pd_id = SEQ_GET(tq->pd_id);
	snap.owner = atomic_load_explicit(&tq->owner, memory_order_relaxed);
	if (!seq_read_ok(&tq->seq, seq) ||
	    !cma_target_state_ok(&snap, qp->peer_proc, need))
		return false;
	*snap_p = snap;
	*seq_p = seq;
	return true;
}

/* The operations that act on one aligned 8-byte word. */
static bool cma_is_atomic(const struct wqe *w)
{
	return w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ||
	       w->opcode == EMU_WR_ATOMIC_WRITE;
}

/*
 * Execute the atomic w on the target's word at p, mapped here: the same
 * CPU instructions the responder uses (resp.c resp_atomic,
 * resp_atomic_write), so it is atomic with respect to every other atomic
 * of the node and to the CPUs.  The original value goes to the local
 * SGE; an ATOMIC WRITE's value comes from it or from the inline data.
 */
static ssize_t cma_window_atomic(const struct wqe *w, uint64_t *p,
				 const struct iovec *local, int nl)
{
	uint64_t v = w->compare_add;

	if (w->opcode == EMU_WR_ATOMIC_WRITE) {
		if (!(w->send_flags & IBV_SEND_INLINE)) {
			if (nl != 1 || local[0].iov_len != 8)
				return -1;
			memcpy(&v, local[0].iov_base, 8);
		}
		__atomic_store_n(p, v, __ATOMIC_SEQ_CST);
		return 8;
	}
	if (nl != 1 || local[0].iov_len != 8)
		return -1;
	if (w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
		__atomic_compare_exchange_n(p, &v, w->swap, false,
					    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	else
		v = __atomic_fetch_add(p, w->compare_add, __ATOMIC_SEQ_CST);
	memcpy(local[0].iov_base, &v, 8);
	return 8;
}

/* Whether w may be placed from here at all (before any check). */
static bool cma_candidate(struct emu_qp *qp, const struct wqe *w)
{
	/* Atomics and ATOMIC WRITE need one 8-byte CPU instruction on
	 * the target's word: only through a window (cma_place).  The
	 * opcode first: most WQEs (every SEND) stop there. */
	if (w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_READ &&
	    (!cma_is_atomic(w) || !cma_qp(qp)->window.pid))
		return false;
	if ((!cma_qp(qp)->pid && !cma_qp(qp)->window.pid) || !cma_enabled() ||
	    qp->type != IBV_QPT_RC || qp->dc_type != EMU_DC_NONE ||
	    !w->length)
		return false;
	/* Nothing in flight: this WQE cannot overtake another. */
	return qp->sq.head == qp->req.next;
}

/* Whether a system call is worth it for w: a small transfer queued behind
 * others is cheaper as a packet; alone it lands sooner placed from here
 * (a latency test, a target that spins on memory, not on its CQ). */
static bool cma_syscall_ok(struct emu_qp *qp, const struct wqe *w)
{
	return cma_qp(qp)->pid && !cma_qp(qp)->refused &&
	       (w->length >= CMA_SMALL || qp->sq.tail - qp->req.next <= 1);
}

/* Our mapping of the peer's window [off, off+len) of its memfd fd, named
 * after id (NULL: none); the QP keeps it for the next operation. */
static uint8_t *cma_window_base(struct emu_qp *qp, int32_t fd, uint64_t id,
				uint64_t off, uint64_t len)
{
	struct peer_map *pm = cma_qp(qp)->window.map;

	if (pm && pm->id == id && pm->off == off && pm->len == len)
		return pm->base;
	if (cma_qp(qp)->window.refused || !cma_qp(qp)->window.pid)
		return NULL;
	pm = peer_map_get(cma_qp(qp)->window.pid, id, fd, off, len);
	if (!pm) {
		ibemu_log_dbg("the memory of pid %d cannot be mapped: RDMA "
			      "to it uses cross-memory attach",
			      (int)cma_qp(qp)->window.pid);
		cma_qp(qp)->window.refused = true;
		return NULL;
	}
	cma_qp(qp)->window.last.map = NULL; /* it was through the old one */
	peer_map_put(cma_qp(qp)->window.map);
	cma_qp(qp)->window.map = pm;
	return pm->base;
}

/* Copy between the local iovecs and the window at p: loads and stores. */
static inline ssize_t cma_window_copy(uint8_t *p, const struct iovec *local,
				      int nl, bool write)
{
	size_t done = 0;
	int i;

	for (i = 0; i < nl; i++) {
		if (write)
			cpu_copy(p + done, local[i].iov_base, local[i].iov_len);
		else
			cpu_copy(local[i].iov_base, p + done, local[i].iov_len);
		done += local[i].iov_len;
	}
	return (ssize_t)done;
}

/*
 * Where [va, va+len) of the region the QP placed into last lies in our
 * mapping, if nothing it was checked against has changed
 * (window.last): the target QP's and the region's records still have
 * the sequence numbers they had (seqlock.h: every change of a record
 * moves its number, and an odd one never matches), the target QP still
 * belongs to our peer, and the range lies in the region; NULL otherwise.
 * The window is still mapped the same and the QP connected to the same
 * one while c->map is set (cma_window_base and cma_peer_bind clear it).
 * Called announced, as cma_place's checks are, so that the placement
 * fence covers what follows (cma_fence).
 */
static inline uint8_t *cma_last_target(const struct emu_qp *qp,
				       uint32_t rkey, uint64_t va,
				       uint64_t len, uint32_t need)
{
	const struct cma_last *c = &cma_qp_c(qp)->window.last;
	uint64_t off;

	if (!c->map || c->rkey != rkey || !(c->access & need) ||
	    atomic_load_explicit(&c->tq->seq, memory_order_acquire) !=
		    c->qp_seq ||
	    atomic_load_explicit(&c->pub->seq, memory_order_acquire) !=
		    c->mr_seq ||
	    atomic_load_explicit(&c->tq->owner, memory_order_relaxed) !=
		    c->owner)
		return NULL;
	/* IBA 10.6.3.2 (C9-88): the range, within the region. */
	off = va - c->iova;
	if (va < c->iova || off > c->length || len > c->length - off)
		return NULL;
	return c->at_iova + off;
}

/* An RDMA WRITE or READ into the region the QP placed into last
 * (cma_last_target), announced; *n_p: bytes copied. */
static inline bool cma_place_again(struct emu_qp *qp, uint32_t rkey,
				   uint64_t va, uint32_t len, uint32_t need,
				   bool write, const struct iovec *local,
				   int nl, ssize_t *n_p)
{
	uint8_t *dst = cma_last_target(qp, rkey, va, len, need);

	if (!dst || nl <= 0)
		return false;
	fault_point(FAULT_AT_PLACE);
	*n_p = cma_window_copy(dst, local, nl, write);
	return true;
}

/* Remember the region of snap for cma_place_again, if its whole range
 * lies in the window mapped at base.  tq, qp_seq: what cma_target_ok
 * read; snap, mr_seq: what cma_check_rkey read. */
static void cma_remember(struct emu_qp *qp, const struct node_qp_copy *tq,
			 uint32_t qp_seq, const struct pub_mr_copy *snap,
			 uint32_t mr_seq, uint8_t *base)
{
	struct cma_last *c = &cma_qp(qp)->window.last;
	uint64_t at;

	c->map = NULL;
	if (!cma_window_ok(snap, snap->addr, snap->length, &at))
		return; /* part of it only: checked each time */
	/* Both checked to exist by the reads above. */
	c->tq = cma_target_record(qp);
	c->pub = pub_slot(tp_shm_inbox(qp->peer), snap->key);
	c->owner = qp->peer_proc + 1;
	c->rkey = snap->key;
	c->access = tq->access & snap->access;
	c->qp_seq = qp_seq;
	c->mr_seq = mr_seq;
	c->iova = snap->iova;
	c->length = snap->length;
	c->at_iova = base + at;
	c->map = cma_qp(qp)->window.map;
}

/* Check and copy, announced in the target's placing[] (see cma_fence).
 * checked, nl: the local iovecs of w, if resolved (nl >= 0). */
static ssize_t cma_place(struct emu_qp *qp, struct wqe *w, bool write,
			 const struct iovec *checked, int nl)
{
	bool atomic = cma_is_atomic(w);
	uint32_t need = atomic && w->opcode != EMU_WR_ATOMIC_WRITE
				? IBV_ACCESS_REMOTE_ATOMIC
			: write || atomic ? IBV_ACCESS_REMOTE_WRITE
					  : IBV_ACCESS_REMOTE_READ;
	uint64_t addr, at, len = atomic ? 8 : w->length;
	struct iovec local[IBEMU_MAX_SGE], remote;
	struct node_qp_copy tq;
	struct pub_mr_copy snap;
	uint32_t qp_seq, mr_seq;
	/* an inline ATOMIC WRITE carries its word in the WQE: no buffer */
	bool has_local = !(w->send_flags & IBV_SEND_INLINE) || !atomic;
	uint8_t *base;
	ssize_t n;

	if (nl < 0 && has_local) {
		nl = cma_local_iov(qp, w, local);
		checked = local;
	}
	if (!atomic && cma_place_again(qp, w->rkey, w->remote_addr, w->length,
				       need, write, checked, nl, &n))
		return n;
	errno = 0;
	/* A misaligned atomic is the responder's to refuse (IBA 9.4.5). */
	if (atomic && (w->remote_addr & 7))
		return -1;
	if (!cma_target_ok(qp, need, &tq, &qp_seq) ||
	    !cma_check_rkey(tp_shm_inbox(qp->peer), w->rkey, w->remote_addr,
			    len, need, tq.pd_id, &snap, &mr_seq, &addr))
		return -1;
	if (has_local && nl <= 0)
		return -1;
	/* Checked, not yet copied: what the fence must wait for. */
	fault_point(FAULT_AT_PLACE);
	if (cma_qp(qp)->window.pid && cma_window_ok(&snap, addr, len, &at) &&
	    (base = cma_window_base(qp, snap.map_fd, snap.map_id,
				    snap.map_off, snap.map_len))) {
		if (atomic)
			return cma_window_atomic(
				w, (uint64_t *)(void *)(base + at), checked, nl);
		cma_remember(qp, &tq, qp_seq, &snap, mr_seq, base);
		return cma_window_copy(base + at, checked, nl, write);
	}
	if (atomic || !cma_syscall_ok(qp, w))
		return -1;
	remote.iov_base = (void *)(uintptr_t)addr;
	remote.iov_len = w->length;
	if (write)
		n = process_vm_writev(cma_qp(qp)->pid, checked,
				      (unsigned long)nl, &remote, 1, 0);
	else
		n = process_vm_readv(cma_qp(qp)->pid, checked,
				     (unsigned long)nl, &remote, 1, 0);
	return n;
}

/* cma_try for a candidate; out of line, so that turning a WQE away (every
 * SEND) costs no frame. */
static __attribute__((noinline)) bool cma_try_place(struct emu_qp *qp,
						    struct wqe *w,
						    const struct iovec *local,
						    int nl)
{
	bool write = w->opcode == IBV_WR_RDMA_WRITE;
	_Atomic uint64_t *placing = cma_qp(qp)->window.placing;
	ssize_t n;

	/* Ordered before the checks' loads (cma_announce); cma_fence's
	 * fence orders the withdrawal before its scan. */
	cma_announce(qp, placing,
		     (uint64_t)qp->attr.dest_qp_num << 32 | w->rkey);
	n = cma_place(qp, w, write, local, nl);
	atomic_store_explicit(placing, 0, memory_order_release);
	if (n == (ssize_t)(cma_is_atomic(w) ? 8 : w->length))
		return true;
	if (n < 0 && errno == ENOSYS) {
		ibemu_log_dbg("no cross-memory attach: RDMA data goes "
			      "through the target's engine");
		atomic_store(&cma_state, -1);
	} else if (n < 0 && errno == EPERM) {
		/* The permission is the kernel's per pair of processes
		 * (ptrace access mode, Yama, seccomp): this peer only. */
		ibemu_log_dbg("cross-memory attach to pid %d refused: its "
			      "RDMA data goes through its engine",
			      (int)cma_qp(qp)->pid);
		cma_qp(qp)->refused = true;
	}
	return false;
}

bool cma_try(struct emu_qp *qp, struct wqe *w, const struct iovec *local,
	     int nl)
{
	return cma_candidate(qp, w) && cma_try_place(qp, w, local, nl);
}

/*
 * A lone RDMA WRITE of one segment, posted to an idle send queue (nothing
 * queued, nothing in flight, no RNR wait), into the region the QP placed
 * into last (window.last): checked and placed from the work request
 * itself, and completed as the send queue would complete it
 * (comp_unqueued_locked), without a WQE.  The checks are the usual ones, in the
 * usual order: the post's (post.c: the segment count against
 * max_send_sge, an inline length against max_inline_data), the local
 * key's unless inline (IBA 10.6.3.2: key, PD, range), then,
 * announced, the target's (cma_place_again).  false: nothing was done,
 * and the request takes the usual way, which checks it again and
 * reports what is wrong with it.  Caller holds qp.lock; the QP is in
 * RTS.
 */
static bool cma_post_write_locked(struct emu_qp *qp,
				  const struct ibv_send_wr *wr)
{
	const struct ibv_sge *sge = wr->sg_list;
	uint32_t rkey = wr->wr.rdma.rkey;
	_Atomic uint64_t *placing;
	uint8_t *src, *dst;

	/* window.last is set only after a placement from this QP
	 * (cma_remember, past cma_candidate): an RC QP with placement on,
	 * a send queue, and at least one send SGE. */
	if (!cma_qp(qp)->window.last.map ||
	    cma_qp(qp)->window.last.rkey != rkey || wr->num_sge != 1 ||
	    !sge->length || sge->length > IBEMU_MAX_MSG_SZ ||
	    (wr->send_flags & IBV_SEND_FENCE) ||
	    qp->sq.head != qp->sq.tail || qp->req.next != qp->sq.tail ||
	    qp->comp.rnr_resume || qp->req.rd_atomic)
		return false;
	if (wr->send_flags & IBV_SEND_INLINE) {
		/* Inline data has no lkey: the bytes are read at post time
		 * (manual 3.6.5); an oversized one is the post's EINVAL,
		 * said by the general path. */
		if (sge->length > qp->cap.max_inline_data)
			return false;
		src = (uint8_t *)(uintptr_t)sge->addr;
	} else {
		src = sge_local_addr(qp, sge, false);
		if (!src)
			return false;
	}
	placing = cma_qp(qp)->window.placing;
	cma_announce(qp, placing, (uint64_t)qp->attr.dest_qp_num << 32 | rkey);
	dst = cma_last_target(qp, rkey, wr->wr.rdma.remote_addr, sge->length,
			      IBV_ACCESS_REMOTE_WRITE);
	if (dst) {
		fault_point(FAULT_AT_PLACE);
		cpu_copy(dst, src, sge->length);
	}
	atomic_store_explicit(placing, 0, memory_order_release);
	if (!dst)
		return false;
	ibemu_trace("req qp %#x wqe %u RDMA_WRITE: placed at once", qp->qpn,
		    qp->sq.tail);
	comp_unqueued_locked(qp, wr->wr_id, IBV_WR_RDMA_WRITE, wr->send_flags,
			     sge->length);
	return true;
}

/*
 * Whether cross-memory attach reaches the process with token at pid: read
 * its token where it says it keeps it.  Only the process holding that
 * token has it there; any other (another pid namespace's process under
 * the same number, a process that reused the pid) fails the compare.
 */
static bool cma_token_at(pid_t pid, uint64_t addr, uint64_t token)
{
	struct iovec local, remote;
	uint64_t v = 0;

	local.iov_base = &v;
	local.iov_len = sizeof(v);
	remote.iov_base = (void *)(uintptr_t)addr;
	remote.iov_len = sizeof(v);
	return pid > 0 &&
	       process_vm_readv(pid, &local, 1, &remote, 1, 0) ==
		       (ssize_t)sizeof(v) &&
	       v == token;
}

/*
 * Whether placements into the process of inbox ib may be announced
 * without a fence (cma_announce): we receive remote fences and it said
 * (once, read here once) that it issues them.  Then its lean_placers is
 * set, and the full fence orders that before any such announcement.
 */
static bool cma_lean_toward(struct inbox *ib)
{
	if (!remote_fence_receives() || !ib->fence_issuer)
		return false;
	if (!atomic_load_explicit(&ib->lean_placers, memory_order_relaxed))
		atomic_store_explicit(&ib->lean_placers, 1,
				      memory_order_relaxed);
	atomic_thread_fence(memory_order_seq_cst);
	return true;
}

/*
 * qp's peer was resolved (or dropped): decide, once, whether data moves
 * between us by cross-memory attach.  That needs the peer in our pid
 * namespace (the kernel takes pids as the caller sees them) and the
 * kernel's leave for us to read and write it, which is not symmetric
 * (Yama ptrace_scope 1 lets only an ancestor or a declared tracer in, a
 * seccomp filter may refuse one side): the one reading the token is the
 * one that is allowed.  What we learn is ours (place_pid, for RDMA we
 * place and SENDs we pull); whether we can read the peer is published in
 * our QP's entry (pull_from), so that the peer pull-describes a SEND only
 * to a responder that can pull it.
 */
void cma_peer_bind(struct emu_qp *qp)
{
	struct cma_qp *cq = cma_qp(qp);
	struct engine *e = qp->hca->engine;
	struct node_proc_id id;
	struct inbox *ib;
	bool near = false;
	pid_t pid = 0;

	/* A DC QP's requests go by packets: its target checks their key
	 * (dc.c); nothing is placed, pulled or written at post time. */
	if (qp->peer && qp->type == IBV_QPT_RC &&
	    qp->dc_type == EMU_DC_NONE && cma_enabled() &&
	    tp_peer_is_shm(qp->peer) && qp->peer != tp_shm_self(e) &&
	    !node_proc_id(&qp->hca->node, qp->peer_proc, &id) &&
	    id.same_pidns && id.token == tp_shm_peer_token(qp->peer))
		near = true;
	if (near && cma_token_at(id.pid, id.token_addr, id.token))
		pid = id.pid;
	/* Its memfd windows: the id in the memfd's name, published in its
	 * inbox, proves whose it is. */
	peer_map_put(cq->window.map);
	cq->window.map = NULL;
	cq->window.last.map = NULL;
	cq->window.refused = false;
	cq->window.pid = near ? id.pid : 0;
	cq->refused = false;
	ib = near ? tp_shm_inbox(qp->peer) : NULL;
	cq->window.lean = ib && cma_lean_toward(ib);
	cq->window.placing = ib ? &ib->placing[qp->hca->node.proc_slot] : NULL;
	/* A stream of WRITEs into one region of a near peer is placed at
	 * post time (cma_post_write_locked). */
	qp->post_write = near ? cma_post_write_locked : NULL;
	/* Nothing was published, nothing is: no write to shared memory
	 * (a QP whose peer cannot be reached comes back here often). */
	if (!pid && !cq->pid)
		return;
	cq->pid = pid;
	node_qp_publish_pull(&qp->hca->node, qp->qpn, pid ? id.token : 0);
}

/* Whether the QP qp is connected to published that it can pull our data
 * (cma_peer_bind on its side). */
static bool cma_pull_granted(struct emu_qp *qp)
{
	uint32_t idx = qp->attr.dest_qp_num - IBEMU_QPN_FIRST, seq;
	struct node_qp *tq;
	uint64_t from;

	if (qp->attr.dest_qp_num < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return false;
	tq = &qp->hca->node.seg->qps[idx];
	seq = seq_read_begin(&tq->seq);
	from = SEQ_GET(tq->pull_from);
	if (!seq_read_ok(&tq->seq, seq))
		return false;
	return from && from == qp->hca->node.token &&
	       atomic_load_explicit(&tq->owner, memory_order_relaxed) ==
		       qp->peer_proc + 1;
}

/*
 * Whether the SEND w should leave its data in place for the responder to
 * pull.  Captures want every byte in the packets: not while IBEMU_PCAP is
 * on.  The responder is the one that reads (IBA has no such operation:
 * the emulated wire still carries one SEND), so it must have published
 * that it can read us; otherwise the data goes in packets.
 */
bool cma_pull_ok(struct emu_qp *qp, const struct wqe *w)
{
	return qp->type == IBV_QPT_RC && qp->dc_type == EMU_DC_NONE &&
	       (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) &&
	       w->length >= CMA_PULL_MIN &&
	       !(w->send_flags & IBV_SEND_INLINE) && cma_enabled() &&
	       /* an mkey's pieces have no one address: packets */
	       !sge_has_mkey(qp, w->sge, w->num_sge) &&
	       tp_peer_is_shm(qp->peer) &&
	       qp->peer != tp_shm_self(qp->hca->engine) &&
	       !pcap_enabled() &&
	       w->num_sge * sizeof(((struct pull_desc *)0)->seg[0]) +
			       sizeof(struct pull_desc) <=
		       PKT_MAX_PAYLOAD &&
	       cma_pull_granted(qp);
}

/* Describe w's data for the responder; the descriptor's size.  Each
 * segment names the window of our memfd it lies in, if any, so that the
 * responder copies it with loads rather than a system call. */
uint32_t cma_pull_desc(struct emu_qp *qp, struct wqe *w, void *buf)
{
	struct pull_desc d = {0};
	struct pull_seg seg;
	struct iovec iov[IBEMU_MAX_SGE];
	int i, n = cma_local_iov(qp, w, iov);
	uint32_t s = 0;
	const struct emu_mr *mr;
	uint8_t *out = buf;

	/* buf is a payload at any 4-byte offset: written by bytes. */
	d.pid = (int32_t)qp->hca->pid;
	d.length = w->length;
	d.nr = n > 0 ? (uint32_t)n : 0;
	d.map_fd = mr_memfd_fd();
	d.map_id = mr_memfd_id();
	memcpy(out, &d, sizeof(d));
	for (i = 0; i < n; i++) {
		memset(&seg, 0, sizeof(seg));
		seg.addr = (uintptr_t)iov[i].iov_base;
		seg.len = iov[i].iov_len;
		/* The SGE of iov[i] (sge_iov skips empty ones). */
		while (s < w->num_sge && !w->sge[s].length)
			s++;
		mr = s < w->num_sge ? mr_lookup(qp->hca, w->sge[s++].lkey)
				    : NULL;
		if (mr && cma_in_window(mr->win.lo, mr->win.len, seg.addr,
					seg.len)) {
			seg.win_off = mr->win.off;
			seg.win_lo = mr->win.lo;
			seg.win_len = mr->win.len;
		}
		memcpy(out + sizeof(d) + (size_t)i * sizeof(seg), &seg,
		       sizeof(seg));
	}
	return (uint32_t)(sizeof(d) + d.nr * sizeof(seg));
}

/*
 * Responder: copy a pulled SEND's data out of the sender's windows mapped
 * here, into the receive iovecs; false (nothing to undo: the receive is
 * written again whole by the fallback) if a segment has no window we can
 * map.  Every bound comes from the packet: checked against the mapping.
 */
static bool cma_pull_windows(struct emu_qp *qp, const struct iovec *local,
			     int nl, const struct pull_desc_copy *d)
{
	uint64_t total = 0, at;
	size_t li = 0, lo = 0, n;
	const struct pull_seg *sg;
	const uint8_t *src;
	uint8_t *base;
	uint32_t i;

	for (i = 0; i < d->nr; i++) {
		sg = &d->seg[i];
		if (!cma_in_window(sg->win_lo, sg->win_len, sg->addr,
				   sg->len) ||
		    __builtin_add_overflow(total, sg->len, &total))
			return false;
	}
	if (total != d->length || d->map_fd < 0 || !d->map_id)
		return false;
	for (i = 0; i < d->nr; i++) {
		sg = &d->seg[i];
		base = cma_window_base(qp, d->map_fd, d->map_id, sg->win_off,
				       sg->win_len);
		if (!base)
			return false;
		at = sg->addr - sg->win_lo;
		src = base + at;
		for (n = 0; n < sg->len;) {
			size_t room, chunk;

			if (li >= (size_t)nl)
				return false;
			room = local[li].iov_len - lo;
			chunk = sg->len - n < room ? sg->len - n : room;
			cpu_copy((uint8_t *)local[li].iov_base + lo, src + n,
				 chunk);
			n += chunk;
			lo += chunk;
			if (lo == local[li].iov_len) {
				li++;
				lo = 0;
			}
		}
	}
	return true;
}

/* Read a pulled SEND's data into local (nl iovecs): 0, ESRCH or EFAULT. */
static int cma_pull_into(struct emu_qp *qp, const struct iovec *local,
			 int nl, const struct pull_desc_copy *d)
{
	struct iovec remote[PULL_MAX_SEGS];
	uint32_t i;
	ssize_t n;

	if (cma_pull_windows(qp, local, nl, d))
		return 0;
	for (i = 0; i < d->nr; i++) {
		remote[i].iov_base = (void *)(uintptr_t)d->seg[i].addr;
		remote[i].iov_len = d->seg[i].len;
	}
	/* The receive may be longer than the message: read what was sent,
	 * from the connected QP's process, whatever the packet says. */
	n = process_vm_readv(cma_qp(qp)->pid, local, (unsigned long)nl, remote,
			     d->nr, 0);
	if (n == (ssize_t)d->length)
		return 0;
	return n < 0 && errno == ESRCH ? ESRCH : EFAULT;
}

/* A receive through an mkey, whose pieces have no iovecs of their own:
 * the data is read into a buffer, then scattered through the layout. */
static int cma_pull_indirect(struct emu_qp *qp, const struct wqe *rwqe,
			     const struct pull_desc_copy *d)
{
	struct iovec local;
	int ret;

	local.iov_len = d->length;
	local.iov_base = malloc(d->length ? d->length : 1);
	if (!local.iov_base)
		return ENOMEM;
	ret = cma_pull_into(qp, &local, 1, d);
	if (!ret && sge_copy(qp, rwqe->sge, rwqe->num_sge, 0, local.iov_base,
			     (uint32_t)d->length, true))
		ret = EFAULT;
	free(local.iov_base);
	return ret;
}

/*
 * Responder: copy a pulled SEND's data from the sender into the receive
 * SGEs (already checked).  0, or an errno if the sender cannot be read.
 */
int cma_pull(struct emu_qp *qp, const struct wqe *rwqe,
	     const struct pull_desc_copy *d)
{
	struct iovec local[IBEMU_MAX_SGE];
	int nl;

	/* Only from the connected QP's process, as verified at bind. */
	if (d->nr > PULL_MAX_SEGS || !qp->peer || !cma_qp(qp)->pid)
		return EINVAL;
	if (sge_has_mkey(qp, rwqe->sge, rwqe->num_sge))
		return cma_pull_indirect(qp, rwqe, d);
	nl = sge_iov(qp, rwqe->sge, rwqe->num_sge, true, local);
	if (nl < 0)
		return EFAULT;
	return cma_pull_into(qp, local, nl, d);
}
