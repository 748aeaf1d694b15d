// SPDX-License-Identifier: MIT
/*
 * Reregistration of memory regions (IBA 10.6.3.6 / 11.2.8.x "Reregister
 * Memory Region", ibv_rereg_mr(3)) between two processes (peer.h): after
 * the call the region's keys address the new range with the new rights
 * and PD, for the local key in an SGE and the remote key of an RDMA
 * WRITE or READ; the old range is no longer reachable (C9-88: an access
 * outside the region is a remote access error).  The keys may change on
 * reregistration (IBA 10.6.3.6), so each side sends the keys it has after
 * the call.  Every payload is checked byte for byte.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

#define WAIT_MS 5000
#define RR_LEN 65536u		/* >= 16 KiB: ibemu places it directly */
#define RR_OLD 0u		/* old range: offset in the side's buffer */
#define RR_NEW (1u << 20)	/* new range */
#define RR_OLD_BYTE 0x5a

#define RR_FULL                                                                \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ)

/* Reregister mr; a skip when the device has no ibv_rereg_mr. */
static int rereg(struct cf_ep *ep, struct ibv_mr *mr, int flags,
		 struct ibv_pd *pd, void *addr, size_t len, int access)
{
	int ret;

	errno = 0;
	ret = ibv_rereg_mr(mr, flags, pd, addr, len, access);
	if (ret && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		cf_ep_skip(ep, "ibv_rereg_mr: %s", strerror(errno));
		return 1;
	}
	EP_REQUIRE(ep, !ret, "ibv_rereg_mr(flags 0x%x, access 0x%x): %d (%s)",
		   flags, access, ret, cf_errname(errno));
	EP_CHECK(ep, (!(flags & IBV_REREG_MR_CHANGE_TRANSLATION) ||
		      (mr->addr == addr && mr->length == len)) &&
			 (!(flags & IBV_REREG_MR_CHANGE_PD) || mr->pd == pd),
		 "ibv_rereg_mr: addr %p length %zu pd %p, expected %p %zu %p",
		 mr->addr, mr->length, (void *)mr->pd, addr, len, (void *)pd);
	return 0;
}

/* One signaled RDMA WR from the side's buffer at loff under lkey. */
static int post_rdma(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		     uint32_t lkey, uint32_t len, uint64_t raddr,
		     uint32_t rkey, uint64_t wr_id)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	cf_ep_send_wr(ep, &wr, &sge, op, loff, len, wr_id);
	sge.lkey = lkey;
	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return cf_ep_post_send(ep, ep->qp, &wr);
}

/* Post and wait for one completion of status want. */
static int rdma_expect(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		       uint32_t lkey, uint32_t len, uint64_t raddr,
		       uint32_t rkey, uint64_t wr_id, enum ibv_wc_status want,
		       const char *what)
{
	struct ibv_wc wc;
	int got;

	if (post_rdma(ep, op, loff, lkey, len, raddr, rkey, wr_id))
		return -1;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	return cf_ep_expect_wc(ep, &wc, got, wr_id, want, -1, what) ? 0 : -1;
}

static void flags_name(char *buf, size_t len, long flags)
{
	snprintf(buf, len, "rereg%s%s%s",
		 flags & IBV_REREG_MR_CHANGE_TRANSLATION ? " TRANSLATION" : "",
		 flags & IBV_REREG_MR_CHANGE_PD ? " PD" : "",
		 flags & IBV_REREG_MR_CHANGE_ACCESS ? " ACCESS" : "");
}

/*
 * The responder's region is reregistered with the flags ep->arg; before
 * the call the region is not usable remotely (another PD with CHANGE_PD,
 * local write only with CHANGE_ACCESS), after it, RDMA WRITE and READ
 * through the new key reach the new range (CHANGE_TRANSLATION) with
 * their data intact, and the old range is out of the region: a WRITE
 * there completes with REM_ACCESS_ERR and changes nothing.
 */
CF_BODY_IMPL(mr_rereg, remote)
{
	bool tr = ep->arg & IBV_REREG_MR_CHANGE_TRANSLATION;
	bool chpd = ep->arg & IBV_REREG_MR_CHANGE_PD;
	bool chacc = ep->arg & IBV_REREG_MR_CHANGE_ACCESS;
	uint64_t addr, rkey, oaddr;
	char what[96];
	long bad;

	flags_name(what, sizeof(what), ep->arg);
	if (ep->side == CF_CHILD) {
		uint8_t *obuf = ep->buf + RR_OLD, *nbuf = ep->buf + RR_NEW;
		struct ibv_pd *pd0 = ep->pd;
		struct ibv_mr *mr;
		int ret = -1;

		memset(obuf, RR_OLD_BYTE, RR_LEN);
		memset(nbuf, 0, RR_LEN);
		if (chpd) {
			pd0 = ibv_alloc_pd(ep->ctx);
			EP_REQUIRE(ep, pd0, "ibv_alloc_pd: %s",
				   strerror(errno));
		}
		mr = ibv_reg_mr(pd0, obuf, RR_LEN,
				chacc ? IBV_ACCESS_LOCAL_WRITE : RR_FULL);
		if (!EP_CHECK(ep, mr, "ibv_reg_mr: %s", strerror(errno)))
			goto out_pd;
		ret = rereg(ep, mr, (int)ep->arg, chpd ? ep->pd : NULL,
			    tr ? nbuf : NULL, tr ? RR_LEN : 0,
			    chacc ? RR_FULL : 0);
		/* 0: go on, 1: skipped, 2: failed. */
		if (cf_ep_send_val(ep, ret > 0 ? 1 : ret ? 2 : 0) || ret) {
			ret = ret > 0 ? 0 : -1;
			goto out_mr;
		}
		ret = -1;
		if (cf_ep_send_val(ep, (uintptr_t)(tr ? nbuf : obuf)) ||
		    cf_ep_send_val(ep, mr->rkey) ||
		    cf_ep_send_val(ep, (uintptr_t)obuf))
			goto out_mr;
		/* The requester wrote and read back the new range. */
		if (cf_ep_sync(ep, WAIT_MS))
			goto out_mr;
		bad = cf_pattern_check(tr ? nbuf : obuf, RR_LEN, 77);
		EP_CHECK(ep, bad < 0, "%s: WRITE data differs at byte %ld",
			 what, bad);
		if (tr) {
			bad = cf_bytes_check(obuf, RR_LEN, RR_OLD_BYTE);
			EP_CHECK(ep, bad < 0, "%s: the old range was written "
				 "at byte %ld", what, bad);
		}
		/* The requester's WRITE to the old range failed. */
		if (cf_ep_sync(ep, WAIT_MS + 2000))
			goto out_mr;
		if (tr) {
			bad = cf_bytes_check(obuf, RR_LEN, RR_OLD_BYTE);
			EP_CHECK(ep, bad < 0, "%s: WRITE to the old range "
				 "changed it at byte %ld", what, bad);
		}
		ret = cf_ep_sync(ep, WAIT_MS);
out_mr:
		ibv_dereg_mr(mr);
out_pd:
		if (chpd)
			ibv_dealloc_pd(pd0);
		return ret;
	}
	if (cf_ep_recv_val(ep, &addr, WAIT_MS))
		return -1;
	if (addr) {
		if (addr == 1)
			cf_ep_skip(ep, "%s: ibv_rereg_mr not supported", what);
		return addr == 1 ? 0 : -1;
	}
	if (cf_ep_recv_val(ep, &addr, WAIT_MS) ||
	    cf_ep_recv_val(ep, &rkey, WAIT_MS) ||
	    cf_ep_recv_val(ep, &oaddr, WAIT_MS))
		return -1;
	cf_pattern_fill(ep->buf, RR_LEN, 77);
	memset(ep->buf + RR_NEW, 0, RR_LEN);
	if (rdma_expect(ep, IBV_WR_RDMA_WRITE, 0, ep->mr->lkey, RR_LEN, addr,
			(uint32_t)rkey, 1, IBV_WC_SUCCESS, what) ||
	    rdma_expect(ep, IBV_WR_RDMA_READ, RR_NEW, ep->mr->lkey, RR_LEN,
			addr, (uint32_t)rkey, 2, IBV_WC_SUCCESS, what))
		return -1;
	bad = cf_pattern_check(ep->buf + RR_NEW, RR_LEN, 77);
	EP_CHECK(ep, bad < 0, "%s: READ data differs at byte %ld", what, bad);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (tr) {
		/* IBA 10.6.3.6: the old translation is gone (C9-88). */
		memset(ep->buf, 0xc3, 4096);
		rdma_expect(ep, IBV_WR_RDMA_WRITE, 0, ep->mr->lkey, 4096,
			    oaddr, (uint32_t)rkey, 3, IBV_WC_REM_ACCESS_ERR,
			    what);
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
	}
	if (cf_ep_sync(ep, WAIT_MS + 2000))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * The responder's region first takes a WRITE, then is reregistered to
 * narrower rights (arg 0: REMOTE_WRITE dropped, READ still works) or to
 * another PD than its QP's (arg 1): the next WRITE completes with
 * REM_ACCESS_ERR (IBA 10.6.3.2, C9-88: PD and access rights are checked
 * on every access) and the memory is unchanged.
 */
CF_BODY_IMPL(mr_rereg, narrow)
{
	const char *what = ep->arg ? "rereg to another PD" :
				     "rereg without REMOTE_WRITE";
	uint64_t addr, rkey;
	long bad;

	if (ep->side == CF_CHILD) {
		uint8_t *obuf = ep->buf + RR_OLD;
		struct ibv_pd *pd2 = NULL;
		struct ibv_mr *mr;
		int ret = -1;

		memset(obuf, 0, RR_LEN);
		if (ep->arg) {
			pd2 = ibv_alloc_pd(ep->ctx);
			EP_REQUIRE(ep, pd2, "ibv_alloc_pd: %s",
				   strerror(errno));
		}
		mr = ibv_reg_mr(ep->pd, obuf, RR_LEN, RR_FULL);
		if (!EP_CHECK(ep, mr, "ibv_reg_mr: %s", strerror(errno)))
			goto out_pd;
		if (cf_ep_send_val(ep, (uintptr_t)obuf) ||
		    cf_ep_send_val(ep, mr->rkey) || cf_ep_sync(ep, WAIT_MS))
			goto out_mr;
		/* The requester's first WRITE is done. */
		if (cf_ep_sync(ep, WAIT_MS))
			goto out_mr;
		bad = cf_pattern_check(obuf, RR_LEN, 5);
		EP_CHECK(ep, bad < 0, "WRITE before rereg differs at %ld",
			 bad);
		ret = rereg(ep, mr,
			    ep->arg ? IBV_REREG_MR_CHANGE_PD :
				      IBV_REREG_MR_CHANGE_ACCESS,
			    pd2, NULL, 0,
			    ep->arg ? 0 :
				      IBV_ACCESS_LOCAL_WRITE |
					      IBV_ACCESS_REMOTE_READ);
		if (cf_ep_send_val(ep, ret > 0 ? 2 : ret ? 1 : 0) ||
		    cf_ep_send_val(ep, mr->rkey) || ret) {
			ret = ret > 0 ? 0 : -1;
			goto out_mr;
		}
		ret = -1;
		if (cf_ep_sync(ep, WAIT_MS + 2000))
			goto out_mr;
		bad = cf_pattern_check(obuf, RR_LEN, 5);
		EP_CHECK(ep, bad < 0, "%s: a refused WRITE changed the "
			 "region at byte %ld", what, bad);
		ret = cf_ep_sync(ep, WAIT_MS);
out_mr:
		ibv_dereg_mr(mr);
out_pd:
		if (pd2)
			ibv_dealloc_pd(pd2);
		return ret;
	}
	if (cf_ep_recv_val(ep, &addr, WAIT_MS) ||
	    cf_ep_recv_val(ep, &rkey, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_pattern_fill(ep->buf, RR_LEN, 5);
	if (rdma_expect(ep, IBV_WR_RDMA_WRITE, 0, ep->mr->lkey, RR_LEN, addr,
			(uint32_t)rkey, 1, IBV_WC_SUCCESS, "WRITE before rereg"))
		return -1;
	if (cf_ep_sync(ep, WAIT_MS) || cf_ep_recv_val(ep, &rkey, WAIT_MS))
		return -1;
	if (rkey) {
		if (rkey == 2)
			cf_ep_skip(ep, "%s: ibv_rereg_mr not supported", what);
		return rkey == 2 ? 0 : -1;
	}
	if (cf_ep_recv_val(ep, &rkey, WAIT_MS))
		return -1;
	if (!ep->arg &&
	    rdma_expect(ep, IBV_WR_RDMA_READ, RR_NEW, ep->mr->lkey, RR_LEN,
			addr, (uint32_t)rkey, 2, IBV_WC_SUCCESS,
			"READ after rereg to LOCAL_WRITE|REMOTE_READ"))
		return -1;
	if (!ep->arg) {
		bad = cf_pattern_check(ep->buf + RR_NEW, RR_LEN, 5);
		EP_CHECK(ep, bad < 0, "READ data differs at byte %ld", bad);
	}
	cf_pattern_fill(ep->buf, RR_LEN, 6);
	rdma_expect(ep, IBV_WR_RDMA_WRITE, 0, ep->mr->lkey, RR_LEN, addr,
		    (uint32_t)rkey, 3, IBV_WC_REM_ACCESS_ERR, what);
	cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
	if (cf_ep_sync(ep, WAIT_MS + 2000))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * The requester's own region is reregistered: arg 0, to a new range
 * (CHANGE_TRANSLATION): a SEND gathers from the new range under the
 * region's lkey, an RDMA READ scatters into it, and an SGE on the old
 * range is a local protection error (IBA 10.6.3.6, 10.7.2.1); arg 1, to
 * another PD than its QP's (CHANGE_PD): a SEND under its lkey completes
 * with LOC_PROT_ERR (IBA 10.6.3.2: the lkey's PD must be the QP's).
 */
CF_BODY_IMPL(mr_rereg, local)
{
	uint8_t *obuf = ep->buf + 2 * RR_NEW, *nbuf = ep->buf + 3 * RR_NEW;
	const char *what = ep->arg ? "SEND after rereg to another PD" :
				     "SEND from a new translation";
	struct ibv_pd *pd2 = NULL;
	struct ibv_mr *mr = NULL;
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	struct ibv_wc wc;
	uint64_t val;
	int got, ret;
	long bad;

	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0, RR_LEN);
		if (!ep->arg)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qp, 0, RR_LEN,
							9),
				   "ibv_post_recv failed");
		if (cf_ep_sync(ep, WAIT_MS) ||
		    cf_ep_recv_val(ep, &val, WAIT_MS))
			return -1;
		if (val)	/* the requester skipped or failed */
			return 0;
		if (!ep->arg) {
			got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
			if (cf_ep_wc_ok(ep, &wc, got, 9, IBV_WC_RECV, what)) {
				bad = cf_pattern_check(ep->buf, RR_LEN, 31);
				EP_CHECK(ep, bad < 0 && wc.byte_len == RR_LEN,
					 "%s: %u bytes received, data "
					 "differs at byte %ld", what,
					 wc.byte_len, bad);
			}
			cf_pattern_fill(ep->buf + RR_NEW, RR_LEN, 32);
		}
		if (cf_ep_sync(ep, WAIT_MS))
			return -1;
		return cf_ep_sync(ep, WAIT_MS + 2000);
	}
	if (ep->arg) {
		pd2 = ibv_alloc_pd(ep->ctx);
		EP_REQUIRE(ep, pd2, "ibv_alloc_pd: %s", strerror(errno));
	}
	memset(obuf, RR_OLD_BYTE, RR_LEN);
	mr = ibv_reg_mr(ep->pd, obuf, RR_LEN, RR_FULL);
	ret = EP_CHECK(ep, mr, "ibv_reg_mr: %s", strerror(errno)) ? 0 : -1;
	if (!ret)
		ret = ep->arg ? rereg(ep, mr, IBV_REREG_MR_CHANGE_PD, pd2,
				      NULL, 0, 0) :
				rereg(ep, mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				      NULL, nbuf, RR_LEN, 0);
	if (cf_ep_sync(ep, WAIT_MS) || cf_ep_send_val(ep, ret ? 1 : 0) ||
	    ret)
		goto out;
	ret = -1;
	cf_pattern_fill(nbuf, RR_LEN, 31);
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, RR_LEN, 1);
	sge.addr = (uintptr_t)nbuf;
	sge.lkey = mr->lkey;
	if (cf_ep_post_send(ep, ep->qp, &wr))
		goto out;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (ep->arg) {
		cf_ep_expect_wc(ep, &wc, got, 1, IBV_WC_LOC_PROT_ERR, -1,
				what);
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR, what);
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		ret = cf_ep_sync(ep, WAIT_MS + 2000);
		goto out;
	}
	if (!cf_ep_wc_ok(ep, &wc, got, 1, IBV_WC_SEND, what) ||
	    cf_ep_sync(ep, WAIT_MS))
		goto out;
	/* READ into the new range under the region's lkey. */
	memset(nbuf, 0, RR_LEN);
	if (rdma_expect(ep, IBV_WR_RDMA_READ, 3 * RR_NEW, mr->lkey, RR_LEN,
			ep->peer.addr + RR_NEW, ep->peer.rkey, 2,
			IBV_WC_SUCCESS, "READ into a new translation"))
		goto out;
	bad = cf_pattern_check(nbuf, RR_LEN, 32);
	EP_CHECK(ep, bad < 0, "READ into a new translation: data differs at "
		 "byte %ld", bad);
	bad = cf_bytes_check(obuf, RR_LEN, RR_OLD_BYTE);
	EP_CHECK(ep, bad < 0, "the old range was written at byte %ld", bad);
	/* The old range under the region's lkey: IBA 10.7.2.1. */
	cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, 0, 64, 3);
	sge.addr = (uintptr_t)obuf;
	sge.lkey = mr->lkey;
	if (!cf_ep_post_send(ep, ep->qp, &wr)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		cf_ep_expect_wc(ep, &wc, got, 3, IBV_WC_LOC_PROT_ERR, -1,
				"SEND from the old range");
		cf_ep_check_state(ep, ep->qp, IBV_QPS_ERR,
				  "SEND from the old range");
	}
	ret = cf_ep_sync(ep, WAIT_MS + 2000);
out:
	if (mr)
		ibv_dereg_mr(mr);
	if (pd2)
		ibv_dealloc_pd(pd2);
	return ret;
}
