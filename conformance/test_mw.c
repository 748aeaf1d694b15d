// SPDX-License-Identifier: MIT
/*
 * Memory windows between two processes (peer.h), IBA 10.6.7: the child
 * (responder) allocates a window on its buffer's region and binds it, the
 * parent (requester) reaches the child's memory through the window's
 * R_Key.  Type 1 windows are bound with ibv_bind_mw(3), type 2 with a
 * BIND_MW work request (ibv_post_send(3) or ibv_wr_bind_mw(3)) and
 * invalidated with LOCAL_INV or a SEND with Invalidate (IBA 9.4.1.1).
 * Access outside the window or its rights, or after it is invalidated or
 * deallocated, is a remote access error (IBA 10.6.7.2.4, C9-88); a bind
 * that breaks a rule of IBA 10.6.7.2.2 completes with IBV_WC_MW_BIND_ERR.
 * Runs skip where the device lacks IBV_DEVICE_MEM_WINDOW (type 1) or
 * IBV_DEVICE_MEM_WINDOW_TYPE_2A/2B (type 2).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000
#define WIN_OFF 4096u /* the window, in the child's buffer */
#define WIN_LEN 8192u
#define SRC_OFF 65536u /* the parent's source and sink */
#define SINK_OFF 131072u

#define MW_RIGHTS                                                              \
	(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |                    \
	 IBV_ACCESS_REMOTE_ATOMIC)

/* The regions may be bound to windows (C10-73). */
CF_TUNE_IMPL(mw)
{
	(void)arg;
	p->mr_access |= IBV_ACCESS_MW_BIND;
}

/* The same, with extended QPs for ibv_wr_bind_mw (arg 1 of type2). */
CF_TUNE_IMPL(mw_ex)
{
	p->mr_access |= IBV_ACCESS_MW_BIND;
	if (arg == 1) {
		p->qp_ex = true;
		p->send_ops_flags = IBV_QP_EX_WITH_BIND_MW |
				    IBV_QP_EX_WITH_LOCAL_INV |
				    IBV_QP_EX_WITH_SEND |
				    IBV_QP_EX_WITH_RDMA_WRITE |
				    IBV_QP_EX_WITH_RDMA_READ;
	}
}

/* Whether the device has the windows of type; if not, both sides skip. */
static bool mw_skip(struct cf_ep *ep, enum ibv_mw_type type)
{
	unsigned int f = ep->dev->device_cap_flags;

	if (!(f & IBV_DEVICE_MEM_WINDOW)) {
		cf_ep_skip(ep, "device has no memory windows "
			       "(no IBV_DEVICE_MEM_WINDOW)");
		return true;
	}
	if (type == IBV_MW_TYPE_2 &&
	    !(f & (IBV_DEVICE_MEM_WINDOW_TYPE_2A |
		   IBV_DEVICE_MEM_WINDOW_TYPE_2B))) {
		cf_ep_skip(ep, "device has no type 2 memory windows (no "
			       "IBV_DEVICE_MEM_WINDOW_TYPE_2A/2B)");
		return true;
	}
	return false;
}

static void mw_bind_info(struct cf_ep *ep, struct ibv_mw_bind_info *info,
			 struct ibv_mr *mr, uint64_t off, uint64_t len,
			 unsigned int access)
{
	memset(info, 0, sizeof(*info));
	info->mr = mr;
	info->addr = (uintptr_t)ep->buf + off;
	info->length = len;
	info->mw_access_flags = access;
}

/* Wait for the completion of wr_id; 1 if it has status st. */
static int mw_wait(struct cf_ep *ep, uint64_t wr_id, enum ibv_wc_status st,
		   int opcode, const char *what)
{
	struct ibv_wc wc;
	int got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);

	return cf_ep_expect_wc(ep, &wc, got, wr_id, st,
			       st == IBV_WC_SUCCESS ? opcode : -1, what);
}

/* Bind mw (type 1) to [off, off+len) of mr with ibv_bind_mw(3). */
static int mw_bind1(struct cf_ep *ep, struct ibv_mw *mw, struct ibv_mr *mr,
		    uint64_t off, uint64_t len, unsigned int access,
		    enum ibv_wc_status st)
{
	struct ibv_mw_bind bind;
	int ret;

	memset(&bind, 0, sizeof(bind));
	bind.wr_id = 100;
	bind.send_flags = IBV_SEND_SIGNALED;
	mw_bind_info(ep, &bind.bind_info, mr, off, len, access);
	ret = cf_rc(ibv_bind_mw(ep->qp, mw, &bind));
	EP_REQUIRE(ep, !ret, "ibv_bind_mw: %s", cf_errname(ret));
	return mw_wait(ep, 100, st, IBV_WC_BIND_MW, "ibv_bind_mw") ? 0 : -1;
}

/* Bind mw (type 2) with a BIND_MW work request; *rkey_p: its R_Key. */
static int mw_bind2(struct cf_ep *ep, struct ibv_mw *mw, bool ex,
		    unsigned int access, uint32_t *rkey_p)
{
	struct ibv_send_wr wr, *bad;
	uint32_t rkey = ibv_inc_rkey(mw->rkey);
	int ret;

	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 101;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = rkey;
	mw_bind_info(ep, &wr.bind_mw.bind_info, ep->mr, WIN_OFF, WIN_LEN,
		     access);
	if (ex) {
		ibv_wr_start(ep->qpx);
		ep->qpx->wr_id = 101;
		ep->qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_bind_mw(ep->qpx, mw, rkey, &wr.bind_mw.bind_info);
		ret = cf_rc(ibv_wr_complete(ep->qpx));
	} else {
		ret = cf_rc(ibv_post_send(ep->qp, &wr, &bad));
	}
	EP_REQUIRE(ep, !ret, "%s(BIND_MW): %s",
		   ex ? "ibv_wr_complete" : "ibv_post_send", cf_errname(ret));
	if (!mw_wait(ep, 101, IBV_WC_SUCCESS, IBV_WC_BIND_MW, "BIND_MW"))
		return -1;
	mw->rkey = rkey;
	*rkey_p = rkey;
	return 0;
}

/* Parent: an RDMA op of len bytes at raddr under rkey on qp, expecting
 * st. */
static int mw_rdma_qp(struct cf_ep *ep, struct ibv_qp *qp,
		      enum ibv_wr_opcode op, size_t loff, uint32_t len,
		      uint64_t raddr, uint32_t rkey, enum ibv_wc_status st,
		      const char *what)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	static uint64_t wr_id = 1000;
	int wcop = op == IBV_WR_RDMA_READ	     ? IBV_WC_RDMA_READ
		   : op == IBV_WR_ATOMIC_FETCH_AND_ADD ? IBV_WC_FETCH_ADD
						       : IBV_WC_RDMA_WRITE;

	wr_id++;
	cf_ep_send_wr(ep, &wr, &sge, op, loff, len, wr_id);
	if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = raddr;
		wr.wr.atomic.rkey = rkey;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = raddr;
		wr.wr.rdma.rkey = rkey;
	}
	if (cf_ep_post_send(ep, qp, &wr))
		return -1;
	return mw_wait(ep, wr_id, st, wcop, what) ? 0 : -1;
}

/* The same on the first QP. */
static int mw_rdma(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		   uint32_t len, uint64_t raddr, uint32_t rkey,
		   enum ibv_wc_status st, const char *what)
{
	return mw_rdma_qp(ep, ep->qp, op, loff, len, raddr, rkey, st, what);
}

/* Child: hand the window's address and R_Key to the parent. */
static int mw_offer(struct cf_ep *ep, uint32_t rkey)
{
	return cf_ep_send_key(ep, (uintptr_t)ep->buf + WIN_OFF, rkey);
}

/*
 * Parent: WRITE the window whole, READ it back, both through the window's
 * R_Key, and check the data (and, where offered, a FETCH_AND_ADD).
 */
static int mw_parent_write_read(struct cf_ep *ep, uint64_t addr, uint32_t rkey)
{
	long bad;

	cf_pattern_fill(ep->buf + SRC_OFF, WIN_LEN, 77);
	memset(ep->buf + SINK_OFF, 0, WIN_LEN);
	if (mw_rdma(ep, IBV_WR_RDMA_WRITE, SRC_OFF, WIN_LEN, addr, rkey,
		    IBV_WC_SUCCESS, "RDMA WRITE through the window"))
		return -1;
	if (mw_rdma(ep, IBV_WR_RDMA_READ, SINK_OFF, WIN_LEN, addr, rkey,
		    IBV_WC_SUCCESS, "RDMA READ through the window"))
		return -1;
	bad = cf_pattern_check(ep->buf + SINK_OFF, WIN_LEN, 77);
	EP_CHECK(ep, bad < 0, "READ through the window: data differs at "
		 "byte %ld", bad);
	return 0;
}

/* Child: the window holds what the parent wrote, the rest is intact. */
static void mw_child_check(struct cf_ep *ep)
{
	long bad = cf_pattern_check(ep->buf + WIN_OFF, WIN_LEN, 77);

	EP_CHECK(ep, bad < 0, "window: written data differs at byte %ld",
		 bad);
	bad = cf_bytes_check(ep->buf, WIN_OFF, 0x5a);
	EP_CHECK(ep, bad < 0, "memory before the window changed at %ld", bad);
	bad = cf_bytes_check(ep->buf + WIN_OFF + WIN_LEN, 4096, 0x5a);
	EP_CHECK(ep, bad < 0, "memory after the window changed at %ld", bad);
}

/*
 * Type 1 (IBA 10.6.7.2.1): ibv_bind_mw gives the window a new R_Key in
 * mw->rkey; RDMA WRITE and READ through it reach exactly the window.
 */
CF_BODY_IMPL(mw, type1)
{
	uint32_t rkey;
	uint64_t addr;
	struct ibv_mw *mw;
	uint32_t old;
	int ret = 0;

	if (mw_skip(ep, IBV_MW_TYPE_1))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_key(ep, &addr, &rkey, WAIT_MS) ||
		    mw_parent_write_read(ep, addr, rkey))
			return -1;
		return cf_ep_sync(ep, WAIT_MS);
	}
	memset(ep->buf, 0x5a, WIN_OFF + WIN_LEN + 4096);
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_1);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw(TYPE_1): %s", strerror(errno));
	EP_CHECK(ep, mw->type == IBV_MW_TYPE_1 && mw->pd == ep->pd,
		 "ibv_alloc_mw: type %d, pd %p", mw->type, (void *)mw->pd);
	old = mw->rkey;
	if (mw_bind1(ep, mw, ep->mr, WIN_OFF, WIN_LEN,
		     IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		     IBV_WC_SUCCESS) ||
	    !EP_CHECK(ep, mw->rkey != old, "ibv_bind_mw left rkey 0x%x", old) ||
	    mw_offer(ep, mw->rkey) || cf_ep_sync(ep, WAIT_MS + 2000))
		ret = -1;
	else
		mw_child_check(ep);
	ibv_dealloc_mw(mw);
	return ret;
}

/*
 * Type 2 (IBA 10.6.7.2): bound by a BIND_MW work request, arg 0 with
 * ibv_post_send, arg 1 with ibv_wr_bind_mw; WRITE, READ and, where the
 * device has atomics, FETCH_AND_ADD through the window.
 */
CF_BODY_IMPL(mw, type2)
{
	uint32_t rkey;
	uint64_t addr, v;
	struct ibv_mw *mw;
	int ret = 0;
	bool atomics = ep->dev->atomic_cap != IBV_ATOMIC_NONE;

	if (mw_skip(ep, IBV_MW_TYPE_2))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_key(ep, &addr, &rkey, WAIT_MS) ||
		    mw_parent_write_read(ep, addr, rkey))
			return -1;
		if (atomics &&
		    mw_rdma(ep, IBV_WR_ATOMIC_FETCH_AND_ADD, SINK_OFF, 8,
			    addr + WIN_LEN - 8, rkey, IBV_WC_SUCCESS,
			    "FETCH_AND_ADD through the window"))
			return -1;
		return cf_ep_sync(ep, WAIT_MS);
	}
	memset(ep->buf, 0x5a, WIN_OFF + WIN_LEN + 4096);
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_2);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw(TYPE_2): %s", strerror(errno));
	if (mw_bind2(ep, mw, ep->arg == 1, MW_RIGHTS, &rkey) ||
	    mw_offer(ep, rkey) || cf_ep_sync(ep, WAIT_MS + 2000)) {
		ret = -1;
	} else if (atomics) {
		/* The last word is what was written, plus one. */
		uint8_t want[WIN_LEN];
		uint64_t w;

		cf_pattern_fill(want, WIN_LEN, 77);
		memcpy(&w, want + WIN_LEN - 8, 8);
		memcpy(&v, ep->buf + WIN_OFF + WIN_LEN - 8, 8);
		EP_CHECK(ep, !memcmp(ep->buf + WIN_OFF, want, WIN_LEN - 8),
			 "window: written data differs");
		EP_CHECK(ep, v == w + 1, "FETCH_AND_ADD through the window: "
			 "word 0x%llx, expected 0x%llx", (unsigned long long)v,
			 (unsigned long long)(w + 1));
	} else {
		mw_child_check(ep);
	}
	ibv_dealloc_mw(mw);
	return ret;
}

/* Two connected QP pairs (type2_other_qp). */
CF_TUNE_IMPL(mw_2qp)
{
	(void)arg;
	p->mr_access |= IBV_ACCESS_MW_BIND;
	p->nqp = 2;
}

/*
 * A type 2 window is bound to the QP that bound it (IBA 10.6.7.1, types
 * 2A and 2B): a WRITE through the child's other QP is a remote access
 * error, one through the binding QP lands.
 */
CF_BODY_IMPL(mw, type2_qp)
{
	uint32_t rkey;
	uint64_t addr;
	struct ibv_mw *mw;
	int ret = 0;

	if (mw_skip(ep, IBV_MW_TYPE_2))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_key(ep, &addr, &rkey, WAIT_MS))
			return -1;
		cf_pattern_fill(ep->buf + SRC_OFF, WIN_LEN, 77);
		if (mw_rdma_qp(ep, ep->qps[1], IBV_WR_RDMA_WRITE, SRC_OFF, 64,
			       addr, rkey, IBV_WC_REM_ACCESS_ERR,
			       "WRITE through another QP") ||
		    mw_rdma(ep, IBV_WR_RDMA_WRITE, SRC_OFF, WIN_LEN, addr, rkey,
			    IBV_WC_SUCCESS, "WRITE through the binding QP"))
			ret = -1;
		return cf_ep_sync(ep, WAIT_MS) || ret ? -1 : 0;
	}
	memset(ep->buf, 0x5a, WIN_OFF + WIN_LEN + 4096);
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_2);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw(TYPE_2): %s", strerror(errno));
	if (mw_bind2(ep, mw, false, MW_RIGHTS, &rkey) ||
	    mw_offer(ep, rkey) || cf_ep_sync(ep, WAIT_MS + 2000))
		ret = -1;
	else
		mw_child_check(ep);
	ibv_dealloc_mw(mw);
	return ret;
}

/*
 * Access the window does not grant is a remote access error and touches
 * nothing (IBA 10.6.7.2.4, C9-88): arg 0 a WRITE through a read-only
 * window, arg 1 a READ past its end, arg 2 a READ before its start.
 */
CF_BODY_IMPL(mw, outside)
{
	static const char *const what[] = { "WRITE without the right",
					    "READ past the window",
					    "READ before the window" };
	uint32_t rkey;
	uint64_t addr;
	struct ibv_mw *mw;
	int ret = 0;

	if (mw_skip(ep, IBV_MW_TYPE_1))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_key(ep, &addr, &rkey, WAIT_MS))
			return -1;
		cf_pattern_fill(ep->buf + SRC_OFF, WIN_LEN, 78);
		if (ep->arg == 0)
			ret = mw_rdma(ep, IBV_WR_RDMA_WRITE, SRC_OFF, 64, addr,
				      rkey, IBV_WC_REM_ACCESS_ERR, what[0]);
		else if (ep->arg == 1)
			ret = mw_rdma(ep, IBV_WR_RDMA_READ, SINK_OFF, 64,
				      addr + WIN_LEN - 32, rkey,
				      IBV_WC_REM_ACCESS_ERR, what[1]);
		else
			ret = mw_rdma(ep, IBV_WR_RDMA_READ, SINK_OFF, 64,
				      addr - 8, rkey, IBV_WC_REM_ACCESS_ERR,
				      what[2]);
		return cf_ep_sync(ep, WAIT_MS) || ret ? -1 : 0;
	}
	memset(ep->buf, 0x5a, WIN_OFF + WIN_LEN + 4096);
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_1);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw(TYPE_1): %s", strerror(errno));
	if (mw_bind1(ep, mw, ep->mr, WIN_OFF, WIN_LEN, IBV_ACCESS_REMOTE_READ,
		     IBV_WC_SUCCESS) ||
	    mw_offer(ep, mw->rkey) || cf_ep_sync(ep, WAIT_MS + 2000))
		ret = -1;
	else
		EP_CHECK(ep, cf_bytes_check(ep->buf, WIN_OFF + WIN_LEN + 4096,
					    0x5a) < 0,
			 "%s: memory changed", what[ep->arg]);
	ibv_dealloc_mw(mw);
	return ret;
}

/* revoke: arg 3 reads the receive through the extended CQ. */
CF_TUNE_IMPL(mw_revoke)
{
	p->mr_access |= IBV_ACCESS_MW_BIND;
	if (arg == 3) {
		p->cq_ex = true;
		p->cq_ex_wc_flags = IBV_WC_EX_WITH_BYTE_LEN |
				    IBV_WC_EX_WITH_IMM;
	}
}

/* One completion through ibv_start_poll(3) with a deadline: 1, or 0. */
static int mw_poll_ex(struct cf_ep *ep, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr pa = { .comp_mask = 0 };
	long long deadline = cf_now_ms() + WAIT_MS;
	struct ibv_cq_ex *cq = ep->cqx;
	int ret;

	while (cf_now_ms() < deadline) {
		ret = ibv_start_poll(cq, &pa);
		if (ret == ENOENT) {
			usleep(100);
			continue;
		}
		if (!EP_CHECK(ep, !ret, "ibv_start_poll: %s", cf_errname(ret)))
			return 0;
		memset(wc, 0, sizeof(*wc));
		wc->wr_id = cq->wr_id;
		wc->status = cq->status;
		wc->opcode = ibv_wc_read_opcode(cq);
		wc->wc_flags = ibv_wc_read_wc_flags(cq);
		if (wc->wc_flags & IBV_WC_WITH_INV)
			wc->invalidated_rkey = ibv_wc_read_invalidated_rkey(cq);
		ibv_end_poll(cq);
		return 1;
	}
	return 0;
}

/*
 * Revoking a window (IBA 10.6.7.3): after the child's LOCAL_INV (arg 0)
 * or the parent's SEND with Invalidate (arg 1; arg 3 with the receive
 * read through the extended CQ) of a type 2 window, or ibv_dealloc_mw of
 * a bound type 1 window (arg 2), the R_Key that worked before gives a
 * remote access error.  The SEND's receive completion has IBV_WC_WITH_INV
 * and the invalidated R_Key.
 */
CF_BODY_IMPL(mw, revoke)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint32_t rkey;
	uint64_t addr;
	int got, ret = 0;

	if (mw_skip(ep, ep->arg == 2 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_key(ep, &addr, &rkey, WAIT_MS) ||
		    mw_rdma(ep, IBV_WR_RDMA_WRITE, SRC_OFF, 64, addr, rkey,
			    IBV_WC_SUCCESS, "WRITE before the revocation"))
			return -1;
		if (cf_ep_sync(ep, WAIT_MS + 2000))
			return -1;
		if (ep->arg == 1 || ep->arg == 3) {
			cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND_WITH_INV,
				      SRC_OFF, 16, 7);
			wr.invalidate_rkey = rkey;
			if (cf_ep_post_send(ep, ep->qp, &wr) ||
			    !mw_wait(ep, 7, IBV_WC_SUCCESS, IBV_WC_SEND,
				     "SEND with Invalidate"))
				return -1;
		}
		/* The window is revoked. */
		if (cf_ep_sync(ep, WAIT_MS + 2000))
			return -1;
		ret = mw_rdma(ep, IBV_WR_RDMA_WRITE, SRC_OFF, 64, addr + 64,
			      rkey, IBV_WC_REM_ACCESS_ERR,
			      "WRITE after the revocation");
		return cf_ep_sync(ep, WAIT_MS) || ret ? -1 : 0;
	}
	memset(ep->buf, 0x5a, WIN_OFF + WIN_LEN + 4096);
	mw = ibv_alloc_mw(ep->pd,
			  ep->arg == 2 ? IBV_MW_TYPE_1 : IBV_MW_TYPE_2);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw: %s", strerror(errno));
	if (ep->arg == 2)
		ret = mw_bind1(ep, mw, ep->mr, WIN_OFF, WIN_LEN, MW_RIGHTS,
			       IBV_WC_SUCCESS);
	else
		ret = mw_bind2(ep, mw, false, MW_RIGHTS, &rkey);
	if (ret || mw_offer(ep, mw->rkey))
		goto out;
	rkey = mw->rkey;
	/* The parent's first WRITE has completed. */
	if ((ep->arg & 1 && cf_ep_post_recv(ep, ep->qp, SINK_OFF, 64, 9)) ||
	    cf_ep_sync(ep, WAIT_MS + 2000))
		goto fail;
	if (ep->arg == 0) {
		cf_ep_send_wr(ep, &wr, &sge, IBV_WR_LOCAL_INV, 0, 0, 8);
		wr.num_sge = 0;
		wr.invalidate_rkey = rkey;
		if (cf_ep_post_send(ep, ep->qp, &wr) ||
		    !mw_wait(ep, 8, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV,
			     "LOCAL_INV"))
			goto fail;
	} else if (ep->arg & 1) {
		if (ep->arg == 3)
			got = mw_poll_ex(ep, &wc);
		else
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (!cf_ep_wc_ok(ep, &wc, got, 9, IBV_WC_RECV,
				 "SEND with Invalidate"))
			goto fail;
		EP_CHECK(ep, (wc.wc_flags & IBV_WC_WITH_INV) &&
			 wc.invalidated_rkey == rkey,
			 "SEND with Invalidate: wc_flags 0x%x rkey 0x%x, "
			 "expected WITH_INV and 0x%x", wc.wc_flags,
			 wc.invalidated_rkey, rkey);
	} else {
		EP_CHECK(ep, !ibv_dealloc_mw(mw),
			 "ibv_dealloc_mw of a bound window failed");
		mw = NULL;
	}
	(void)bad;
	if (cf_ep_sync(ep, WAIT_MS + 2000) || cf_ep_sync(ep, WAIT_MS + 2000))
		goto fail;
	EP_CHECK(ep, cf_bytes_check(ep->buf + WIN_OFF + 64, 64, 0x5a) < 0,
		 "a WRITE after the revocation changed the memory");
	goto out;
fail:
	ret = -1;
out:
	if (mw)
		ibv_dealloc_mw(mw);
	return ret;
}

/*
 * Binds that break a rule of IBA 10.6.7.2.2 complete with
 * IBV_WC_MW_BIND_ERR: arg 0 a region without IBV_ACCESS_MW_BIND (C10-73),
 * arg 1 a window past the region's end (C10-75), arg 2 remote write
 * through a region without local write (C10-74).  Only the child binds.
 */
CF_BODY_IMPL(mw, bind_err)
{
	static const int access[] = {
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND,
		IBV_ACCESS_MW_BIND | IBV_ACCESS_REMOTE_READ,
	};
	struct ibv_mw *mw;
	struct ibv_mr *mr;
	uint64_t len = ep->arg == 1 ? 2 * WIN_LEN : WIN_LEN;
	int ret;

	if (mw_skip(ep, IBV_MW_TYPE_1))
		return 0;
	if (ep->side == CF_PARENT)
		return cf_ep_sync(ep, WAIT_MS + 2000);
	mr = ibv_reg_mr(ep->pd, ep->buf + WIN_OFF, WIN_LEN, access[ep->arg]);
	EP_REQUIRE(ep, mr, "ibv_reg_mr(0x%x): %s", access[ep->arg],
		   strerror(errno));
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_1);
	if (!EP_CHECK(ep, mw, "ibv_alloc_mw: %s", strerror(errno))) {
		ibv_dereg_mr(mr);
		return -1;
	}
	ret = mw_bind1(ep, mw, mr, WIN_OFF, len,
		       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
		       IBV_WC_MW_BIND_ERR);
	ibv_dealloc_mw(mw);
	ibv_dereg_mr(mr);
	return cf_ep_sync(ep, WAIT_MS) || ret ? -1 : 0;
}

/*
 * Only a type 2 window can be invalidated (o10-37.2.26): arg 0 a
 * LOCAL_INV of a type 1 window's R_Key completes in error at the child;
 * arg 1 a SEND with Invalidate naming one fails the child's receive and
 * the parent's send.  Only the statuses are checked: which error each
 * side reports is the device's (ibemu: LOC_QP_OP_ERR, REM_INV_REQ_ERR).
 */
CF_BODY_IMPL(mw, inv_err)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_mw *mw;
	struct ibv_wc wc;
	uint64_t rkey;
	int got, ret = 0;

	if (mw_skip(ep, IBV_MW_TYPE_2))
		return 0;
	if (ep->side == CF_PARENT) {
		if (cf_ep_recv_val(ep, &rkey, WAIT_MS))
			return -1;
		if (ep->arg == 1 || ep->arg == 3) {
			cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND_WITH_INV,
				      SRC_OFF, 16, 11);
			wr.invalidate_rkey = (uint32_t)rkey;
			if (cf_ep_post_send(ep, ep->qp, &wr))
				return -1;
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			EP_CHECK(ep, got == 1 && wc.wr_id == 11 &&
				 wc.status != IBV_WC_SUCCESS,
				 "SEND with Invalidate of a type 1 window: got "
				 "%d, status %s", got,
				 got == 1 ? ibv_wc_status_str(wc.status) : "-");
		}
		return cf_ep_sync(ep, WAIT_MS + 2000);
	}
	mw = ibv_alloc_mw(ep->pd, IBV_MW_TYPE_1);
	EP_REQUIRE(ep, mw, "ibv_alloc_mw: %s", strerror(errno));
	if (mw_bind1(ep, mw, ep->mr, WIN_OFF, WIN_LEN, MW_RIGHTS,
		     IBV_WC_SUCCESS) ||
	    (ep->arg == 1 && cf_ep_post_recv(ep, ep->qp, SINK_OFF, 64, 12)) ||
	    cf_ep_send_val(ep, mw->rkey)) {
		ibv_dealloc_mw(mw);
		return -1;
	}
	if (ep->arg == 0) {
		cf_ep_send_wr(ep, &wr, &sge, IBV_WR_LOCAL_INV, 0, 0, 13);
		wr.num_sge = 0;
		wr.invalidate_rkey = mw->rkey;
		ret = cf_ep_post_send(ep, ep->qp, &wr);
	}
	if (!ret) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		EP_CHECK(ep, got == 1 && wc.wr_id == (ep->arg ? 12u : 13u) &&
			 wc.status != IBV_WC_SUCCESS,
			 "%s of a type 1 window: got %d, status %s",
			 ep->arg ? "SEND with Invalidate" : "LOCAL_INV", got,
			 got == 1 ? ibv_wc_status_str(wc.status) : "-");
	}
	ibv_dealloc_mw(mw);
	return cf_ep_sync(ep, WAIT_MS + 2000) || ret ? -1 : 0;
}
