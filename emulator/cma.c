// SPDX-License-Identifier: MIT
/* Requester-placed RDMA WRITE and READ (see cma.h). */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cma.h"
#include "engine.h"
#include "log.h"
#include "pcap.h"
#include "seqlock.h"

/* Below this size a WRITE or READ in a stream goes as packets: one
 * process_vm_writev costs about a microsecond. */
#define CMA_SMALL 16384

/* From this size a SEND's data is pulled by the responder: one copy and
 * one system call instead of two copies per MTU through the inbox. */
#define CMA_PULL_MIN (64 * 1024)

/* 1: usable, 0: untried, -1: refused here (seccomp, ptrace policy). */
static atomic_int cma_state;

static bool cma_enabled(void)
{
	const char *env;
	int st = atomic_load_explicit(&cma_state, memory_order_relaxed);

	if (st)
		return st > 0;
	env = getenv("IBEMU_CMA");
	st = env && !strcmp(env, "0") ? -1 : 1;
	atomic_store(&cma_state, st);
	return st > 0;
}

static struct pub_mr *pub_slot(struct inbox *ib, uint32_t key)
{
	uint32_t idx = (key >> 8) - 1;

	if ((key >> 8) == 0 || idx >= IBEMU_MAX_MR)
		return NULL;
	return &ib->mrs[idx];
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
 */
#define CMA_FENCE_MAX_NS (1000ull * 1000 * 1000)

static bool cma_placer_alive(struct emu_hca *hca, unsigned int slot)
{
	const struct node_proc *p = &hca->node.seg->procs[slot];
	pid_t pid = atomic_load_explicit(&p->pid, memory_order_relaxed);

	return pid && node_pid_alive(pid, p->start_time);
}

static bool cma_fence_match(uint64_t placing, uint32_t qpn, uint32_t key)
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
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		while (cma_fence_match(atomic_load(&ib->placing[i]), qpn,
				       key) &&
		       cma_placer_alive(hca, i)) {
			if (!deadline)
				deadline = engine_now_ns() + CMA_FENCE_MAX_NS;
			if (engine_now_ns() > deadline) {
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

/* Write mr's published record; withdraw: key 0, nothing placed. */
static void cma_write_mr(struct engine *e, const struct emu_mr *mr,
			 bool withdraw)
{
	struct inbox *ib = tp_shm_own_inbox(e);
	struct pub_mr *p = ib ? pub_slot(ib, mr->key) : NULL;

	if (!p)
		return;
	seq_write_begin(&p->seq);
	SEQ_SET(p->key, withdraw ? 0 : mr->key);
	SEQ_SET(p->access, (uint32_t)mr->access);
	SEQ_SET(p->pd_id, mr->pd_id);
	SEQ_SET(p->addr, (uint64_t)(uintptr_t)mr->addr);
	SEQ_SET(p->iova, mr->iova);
	SEQ_SET(p->length, mr->length);
	seq_write_end(&p->seq);
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

/* The target address of [va, va+len) if the published region allows it. */
static bool cma_check_rkey(struct inbox *ib, uint32_t rkey, uint64_t va,
			   uint64_t len, uint32_t access, uint64_t pd_id,
			   uint64_t *addr_p)
{
	struct pub_mr *p = pub_slot(ib, rkey), snap;
	uint32_t seq;

	if (!p)
		return false;
	seq = seq_read_begin(&p->seq);
	snap.key = SEQ_GET(p->key);
	snap.access = SEQ_GET(p->access);
	snap.pd_id = SEQ_GET(p->pd_id);
	snap.addr = SEQ_GET(p->addr);
	snap.iova = SEQ_GET(p->iova);
	snap.length = SEQ_GET(p->length);
	if (!seq_read_ok(&p->seq, seq) || !snap.key || snap.key != rkey)
		return false;
	if (!(snap.access & access) || snap.pd_id != pd_id)
		return false;
	if (va < snap.iova || va > snap.iova + snap.length ||
	    len > snap.iova + snap.length - va)
		return false;
	*addr_p = snap.addr + (va - snap.iova);
	return true;
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
	return sge_iov(qp, w->sge, w->num_sge, iov);
}

/* Whether the target QP, as its owner published it, takes a one-sided
 * operation needing access (IBA 9.7.4.1.4, 10.3.1: RTR, RTS or SQD). */
static bool cma_target_ok(struct emu_qp *qp, uint32_t need,
			  uint64_t *pd_id_p)
{
	uint32_t idx = qp->attr.dest_qp_num - IBEMU_QPN_FIRST, state, access;
	struct node_qp *tq;
	uint32_t seq;

	if (qp->attr.dest_qp_num < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return false;
	tq = &qp->hca->node.seg->qps[idx];
	seq = seq_read_begin(&tq->seq);
	state = SEQ_GET(tq->state);
	access = SEQ_GET(tq->access);
	*pd_id_p = SEQ_GET(tq->pd_id);
	if (!seq_read_ok(&tq->seq, seq) ||
	    atomic_load_explicit(&tq->owner, memory_order_relaxed) !=
		    qp->peer_proc + 1)
		return false;
	if (state != IBV_QPS_RTR && state != IBV_QPS_RTS &&
	    state != IBV_QPS_SQD)
		return false;
	return (access & need) != 0;
}

/* Whether w may be placed from here at all (before any check). */
static bool cma_candidate(struct emu_qp *qp, const struct wqe *w)
{
	if (!cma_enabled() || !qp->peer || qp->peer == (struct tp_peer *)tp_shm_own_inbox(qp->hca->engine) ||
	    qp->type != IBV_QPT_RC || !w->length)
		return false;
	if (w->opcode != IBV_WR_RDMA_WRITE && w->opcode != IBV_WR_RDMA_READ)
		return false;
	/* Nothing in flight: this WQE cannot overtake another. */
	if (qp->sq.head != qp->req.next)
		return false;
	/* A small transfer queued behind others is cheaper as a packet than
	 * as a system call; alone it lands sooner placed from here (a
	 * latency test, a target that spins on memory, not on its CQ). */
	return w->length >= CMA_SMALL || qp->sq.tail - qp->req.next <= 1;
}

/* Check and copy, announced in the target's placing[] (see cma_fence). */
static ssize_t cma_place(struct emu_qp *qp, struct wqe *w, bool write)
{
	uint32_t need = write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	struct iovec local[IBEMU_MAX_SGE], remote;
	uint64_t addr, pd_id;
	ssize_t n;
	int nl;

	if (!cma_target_ok(qp, need, &pd_id) ||
	    !cma_check_rkey(tp_shm_inbox(qp->peer), w->rkey, w->remote_addr, w->length, need,
			    pd_id, &addr))
		return -1;
	nl = cma_local_iov(qp, w, local);
	if (nl <= 0)
		return -1;
	remote.iov_base = (void *)(uintptr_t)addr;
	remote.iov_len = w->length;
	if (write)
		n = process_vm_writev(tp_shm_inbox(qp->peer)->pid, local, (unsigned long)nl,
				      &remote, 1, 0);
	else
		n = process_vm_readv(tp_shm_inbox(qp->peer)->pid, local, (unsigned long)nl,
				     &remote, 1, 0);
	return n;
}

bool cma_try(struct emu_qp *qp, struct wqe *w)
{
	bool write = w->opcode == IBV_WR_RDMA_WRITE;
	_Atomic uint64_t *placing;
	ssize_t n;

	if (!cma_candidate(qp, w))
		return false;
	placing = &tp_shm_inbox(qp->peer)->placing[qp->hca->node.proc_slot];
	atomic_store(placing, (uint64_t)qp->attr.dest_qp_num << 32 | w->rkey);
	atomic_thread_fence(memory_order_seq_cst);
	fault_point(FAULT_AT_PLACE);
	n = cma_place(qp, w, write);
	atomic_store_explicit(placing, 0, memory_order_release);
	if (n == (ssize_t)w->length)
		return true;
	if (n < 0 && (errno == EPERM || errno == ENOSYS)) {
		ibemu_log_dbg("cross-memory attach refused (%s): RDMA data "
			      "goes through the target's engine",
			      strerror(errno));
		atomic_store(&cma_state, -1);
	}
	return false;
}

/*
 * Whether cross-memory attach works between us and qp's peer: read 8
 * bytes of its inbox header once and remember.  The kernel's policy
 * (seccomp, ptrace scope) is the same both ways between two processes of
 * one user, so this stands for the peer reading us too.
 */
/* Per node slot: whether cross-memory attach worked with the process
 * there (pid); lock rule: relaxed atomics, a stale answer is re-learnt. */
static struct {
	_Atomic pid_t pid;
	atomic_int ok; /* 1 works, -1 refused, 0 untried */
} cma_peers[IBEMU_MAX_PROCS];

static bool cma_peer_ok(struct emu_qp *qp)
{
	struct inbox *ib = tp_shm_inbox(qp->peer);
	struct iovec local, remote;
	uint64_t v;
	int ok;

	if (qp->peer_proc < 0 || qp->peer_proc >= IBEMU_MAX_PROCS)
		return false;
	if (atomic_load_explicit(&cma_peers[qp->peer_proc].pid,
				 memory_order_relaxed) == ib->pid) {
		ok = atomic_load_explicit(&cma_peers[qp->peer_proc].ok,
					  memory_order_relaxed);
		if (ok)
			return ok > 0;
	}
	local.iov_base = &v;
	local.iov_len = sizeof(v);
	remote.iov_base = (void *)(uintptr_t)ib->self_addr;
	remote.iov_len = sizeof(v);
	ok = process_vm_readv(ib->pid, &local, 1, &remote, 1, 0) == sizeof(v)
		     ? 1
		     : -1;
	atomic_store_explicit(&cma_peers[qp->peer_proc].ok, ok,
			      memory_order_relaxed);
	atomic_store_explicit(&cma_peers[qp->peer_proc].pid, ib->pid,
			      memory_order_relaxed);
	return ok > 0;
}

/*
 * Whether the SEND w should leave its data in place for the responder to
 * pull.  Captures want every byte in the packets: not while IBEMU_PCAP is
 * on.  Cross-memory attach must have worked from here at least once, as
 * the permission it needs is the same both ways between two processes of
 * one user.
 */
bool cma_pull_ok(struct emu_qp *qp, const struct wqe *w)
{
	return qp->type == IBV_QPT_RC &&
	       (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) &&
	       w->length >= CMA_PULL_MIN &&
	       !(w->send_flags & IBV_SEND_INLINE) && cma_enabled() &&
	       qp->peer && qp->peer != (struct tp_peer *)tp_shm_own_inbox(qp->hca->engine) &&
	       !pcap_enabled() &&
	       w->num_sge * sizeof(((struct pull_desc *)0)->seg[0]) +
			       sizeof(struct pull_desc) <=
		       PKT_MAX_PAYLOAD &&
	       cma_peer_ok(qp);
}

/* Describe w's data for the responder; the descriptor's size. */
uint32_t cma_pull_desc(struct emu_qp *qp, struct wqe *w, void *buf)
{
	struct pull_desc *d = buf;
	struct iovec iov[IBEMU_MAX_SGE];
	int i, n = cma_local_iov(qp, w, iov);

	d->pid = (int32_t)getpid();
	d->length = w->length;
	d->nr = n > 0 ? (uint32_t)n : 0;
	for (i = 0; i < n; i++) {
		d->seg[i].addr = (uintptr_t)iov[i].iov_base;
		d->seg[i].len = iov[i].iov_len;
	}
	return (uint32_t)(sizeof(*d) + d->nr * sizeof(d->seg[0]));
}

/*
 * Responder: copy a pulled SEND's data from the sender into the receive
 * SGEs (already checked).  0, or -1 if the sender cannot be read.
 */
int cma_pull(struct emu_qp *qp, const struct wqe *rwqe,
	     const struct pull_desc_copy *d)
{
	struct iovec local[IBEMU_MAX_SGE], remote[PULL_MAX_SEGS];
	uint32_t i;
	ssize_t n;
	int nl;

	if (d->nr > PULL_MAX_SEGS || !qp->peer)
		return -1;
	nl = sge_iov(qp, rwqe->sge, rwqe->num_sge, local);
	if (nl < 0)
		return -1;
	for (i = 0; i < d->nr; i++) {
		remote[i].iov_base = (void *)(uintptr_t)d->seg[i].addr;
		remote[i].iov_len = d->seg[i].len;
	}
	/* The receive may be longer than the message: read what was sent,
	 * from the connected QP's process, whatever the packet says. */
	n = process_vm_readv(tp_shm_inbox(qp->peer)->pid, local,
			     (unsigned long)nl, remote, d->nr, 0);
	return n == (ssize_t)d->length ? 0 : -1;
}
