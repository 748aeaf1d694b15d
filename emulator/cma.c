// SPDX-License-Identifier: MIT
/* Requester-placed RDMA WRITE and READ (see cma.h). */
#include "config.h"

#include <errno.h>
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

/* Write mr's published record; withdraw: key 0, nothing placed. */
static void cma_write_mr(const struct ibemu_mr *mr, bool withdraw)
{
	struct engine *e = ibemu_process.engine;
	struct pub_mr *p;

	if (!e)
		return;
	p = pub_slot(e->inbox, mr->vmr.ibv_mr.rkey);
	if (!p)
		return;
	seq_write_begin(&p->seq);
	SEQ_SET(p->key, withdraw ? 0 : mr->vmr.ibv_mr.rkey);
	SEQ_SET(p->access, (uint32_t)mr->vmr.access);
	SEQ_SET(p->pd_id, (uint64_t)(uintptr_t)mr->vmr.ibv_mr.pd);
	SEQ_SET(p->addr, (uint64_t)(uintptr_t)mr->vmr.ibv_mr.addr);
	SEQ_SET(p->iova, mr->iova);
	SEQ_SET(p->length, (uint64_t)mr->vmr.ibv_mr.length);
	seq_write_end(&p->seq);
}

void cma_publish_mr(const struct ibemu_mr *mr)
{
	cma_write_mr(mr, false);
}

void cma_withdraw_mr(const struct ibemu_mr *mr)
{
	cma_write_mr(mr, true);
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
static int cma_local_iov(struct ibemu_qp *qp, struct wqe *w,
			 struct iovec *iov)
{
	if (w->send_flags & IBV_SEND_INLINE) {
		iov[0].iov_base = &w->sge[qp->cap.max_send_sge];
		iov[0].iov_len = w->length;
		return 1;
	}
	return sge_iov(w->sge, w->num_sge, iov);
}

bool cma_try(struct ibemu_qp *qp, struct wqe *w)
{
	struct node_seg *seg = ibemu_process.node.seg;
	bool write = w->opcode == IBV_WR_RDMA_WRITE;
	uint32_t idx = qp->attr.dest_qp_num - IBEMU_QPN_FIRST, state, need;
	struct iovec local[IBEMU_MAX_SGE], remote;
	struct node_qp *tq;
	uint64_t addr, pd_id;
	uint32_t seq, access;
	ssize_t n;
	int nl;

	if (!cma_enabled() || !qp->peer || qp->peer == ibemu_process.engine->inbox ||
	    qp->vqp.qp.qp_type != IBV_QPT_RC || !w->length)
		return false;
	if (!write && w->opcode != IBV_WR_RDMA_READ)
		return false;
	/* Nothing in flight: this WQE cannot overtake another. */
	if (qp->sq.head != qp->req_next)
		return false;
	/* A small transfer queued behind others is cheaper as a packet than
	 * as a system call; alone it lands sooner placed from here (a
	 * latency test, a target that spins on memory, not on its CQ). */
	if (w->length < CMA_SMALL && qp->sq.tail - qp->req_next > 1)
		return false;
	if (qp->attr.dest_qp_num < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return false;
	tq = &seg->qps[idx];
	seq = seq_read_begin(&tq->seq);
	state = SEQ_GET(tq->state);
	access = SEQ_GET(tq->access);
	pd_id = SEQ_GET(tq->pd_id);
	if (!seq_read_ok(&tq->seq, seq) ||
	    __atomic_load_n(&tq->owner, __ATOMIC_RELAXED) != qp->peer_proc + 1 ||
	    (state != IBV_QPS_RTR && state != IBV_QPS_RTS &&
	     state != IBV_QPS_SQD))
		return false;
	need = write ? IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_REMOTE_READ;
	if (!(access & need))
		return false;
	if (!cma_check_rkey(qp->peer, w->rkey, w->remote_addr, w->length, need,
			    pd_id, &addr))
		return false;
	nl = cma_local_iov(qp, w, local);
	if (nl <= 0)
		return false;
	remote.iov_base = (void *)(uintptr_t)addr;
	remote.iov_len = w->length;
	if (write)
		n = process_vm_writev(qp->peer->pid, local, (unsigned long)nl,
				      &remote, 1, 0);
	else
		n = process_vm_readv(qp->peer->pid, local, (unsigned long)nl,
				     &remote, 1, 0);
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
static bool cma_peer_ok(struct ibemu_qp *qp)
{
	struct engine *e = ibemu_process.engine;
	struct peer_map *pm;
	struct iovec local, remote;
	uint64_t v;
	int ok;

	if (qp->peer_proc < 0 || qp->peer_proc >= IBEMU_MAX_PROCS)
		return false;
	pm = &e->peers[qp->peer_proc];
	ok = __atomic_load_n(&pm->cma, __ATOMIC_RELAXED);
	if (ok)
		return ok > 0;
	local.iov_base = &v;
	local.iov_len = sizeof(v);
	remote.iov_base = (void *)(uintptr_t)qp->peer->self_addr;
	remote.iov_len = sizeof(v);
	ok = process_vm_readv(qp->peer->pid, &local, 1, &remote, 1, 0) ==
			     sizeof(v)
		     ? 1
		     : -1;
	__atomic_store_n(&pm->cma, ok, __ATOMIC_RELAXED);
	return ok > 0;
}

/*
 * Whether the SEND w should leave its data in place for the responder to
 * pull.  Captures want every byte in the packets: not while IBEMU_PCAP is
 * on.  Cross-memory attach must have worked from here at least once, as
 * the permission it needs is the same both ways between two processes of
 * one user.
 */
bool cma_pull_ok(struct ibemu_qp *qp, const struct wqe *w)
{
	return qp->vqp.qp.qp_type == IBV_QPT_RC &&
	       (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM) &&
	       w->length >= CMA_PULL_MIN &&
	       !(w->send_flags & IBV_SEND_INLINE) && cma_enabled() &&
	       qp->peer && qp->peer != ibemu_process.engine->inbox &&
	       !pcap_enabled() &&
	       w->num_sge * sizeof(((struct pull_desc *)0)->seg[0]) +
			       sizeof(struct pull_desc) <=
		       PKT_MAX_PAYLOAD &&
	       cma_peer_ok(qp);
}

/* Describe w's data for the responder; the descriptor's size. */
uint32_t cma_pull_desc(struct ibemu_qp *qp, struct wqe *w, void *buf)
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
int cma_pull(struct ibemu_qp *qp, const struct wqe *rwqe,
	     const struct pull_desc *d)
{
	struct iovec local[IBEMU_MAX_SGE], remote[IBEMU_MAX_SGE];
	uint32_t i;
	ssize_t n;
	int nl;

	if (d->nr > IBEMU_MAX_SGE)
		return -1;
	nl = sge_iov(rwqe->sge, rwqe->num_sge, local);
	if (nl < 0)
		return -1;
	for (i = 0; i < d->nr; i++) {
		remote[i].iov_base = (void *)(uintptr_t)d->seg[i].addr;
		remote[i].iov_len = d->seg[i].len;
	}
	/* The receive may be longer than the message: read what was sent. */
	n = process_vm_readv(d->pid, local, (unsigned long)nl, remote, d->nr,
			     0);
	return n == (ssize_t)d->length ? 0 : -1;
}
