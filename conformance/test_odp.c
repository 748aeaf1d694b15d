// SPDX-License-Identifier: MIT
/*
 * On-demand paging: ibv_reg_mr(3) IBV_ACCESS_ON_DEMAND, implicit regions
 * (IBV_ODP_SUPPORT_IMPLICIT: addr NULL, length SIZE_MAX), ibv_advise_mr(3),
 * ibv_query_device_ex(3) odp_caps.  Every test skips on a device whose
 * odp_caps lack what it uses.
 *
 * An ODP region's memory is not pinned: pages that are not present when
 * the HCA reaches them are faulted in; an address with no mapping cannot
 * be, and the access fails as any protection violation does: the NAK
 * Remote Access Error for a remote access (IBA 9.7.5.2.4, C9-88; mlx5 and
 * rxe resume such a page fault with an error), IBV_WC_LOC_PROT_ERR for a
 * local buffer (IBA 10.6.3.2 local access checks).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000
#define ODP_LEN (4u << 20)

static const int odp_rw = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			  IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND;

/* Whether the device pages RC's operations in on demand (and implicit
 * regions if asked). */
static bool odp_rc_caps(const struct ibv_device_attr_ex *a, uint32_t need,
			bool implicit, const char **why_p)
{
	const struct ibv_odp_caps *c = &a->odp_caps;

	*why_p = NULL;
	if (!(c->general_caps & IBV_ODP_SUPPORT))
		*why_p = "no on-demand paging (odp_caps.general_caps)";
	else if ((c->per_transport_caps.rc_odp_caps & need) != need)
		*why_p = "RC operations not paged on demand (rc_odp_caps)";
	else if (implicit && !(c->general_caps & IBV_ODP_SUPPORT_IMPLICIT))
		*why_p = "no implicit on-demand paging regions";
	return !*why_p;
}

static bool odp_ep_caps(struct cf_ep *ep, uint32_t need, bool implicit)
{
	const char *why;

	if (odp_rc_caps(&ep->dev_ex, need, implicit, &why))
		return true;
	cf_ep_skip(ep, "%s", why);
	return false;
}

/* Fresh anonymous memory, never touched: no page of it is present. */
static uint8_t *odp_untouched(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* Post one signaled WR of op on lkey's [laddr, +len) to the peer's
 * [raddr, +len) under rkey, and wait for its completion. */
static int odp_post_wait(struct cf_ep *ep, enum ibv_wr_opcode op,
			 uint32_t lkey, const void *laddr, uint32_t len,
			 uint64_t raddr, uint32_t rkey, struct ibv_wc *wc)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len,
			       .lkey = lkey };
	struct ibv_send_wr wr = { .wr_id = op, .sg_list = &sge, .num_sge = 1,
				  .opcode = op,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (cf_ep_post_send(ep, ep->qp, &wr))
		return -1;
	return cf_poll_cq_wait(ep->cq, wc, 1, WAIT_MS);
}

static int odp_post_recv(struct cf_ep *ep, uint32_t lkey, void *addr,
			 uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = 77, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(ep->qp, &wr, &bad);
}

/*
 * Explicit ODP regions over memory no one touched before the
 * registration: an RDMA WRITE lands in the target's region, an RDMA READ
 * lands in the requester's, a SEND in a receive buffer of one; every byte
 * as sent and none around it.
 */
CF_BODY_IMPL(odp_peer, explicit)
{
	const uint32_t wlen = (1u << 20) + 3, rlen = 65536 + 5, slen = 5000;
	const size_t woff = 8, roff = 2u << 20, soff = 3u << 20;
	uint8_t *buf = odp_untouched(ODP_LEN);
	struct ibv_mr *mr = NULL;
	uint64_t raddr = 0;
	uint32_t rkey = 0;
	struct ibv_wc wc;
	int got, ret = -1;

	if (!odp_ep_caps(ep, IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
				     IBV_ODP_SUPPORT_WRITE |
				     IBV_ODP_SUPPORT_READ,
			 false))
		goto out;
	EP_REQUIRE(ep, buf, "mmap(%u) failed", ODP_LEN);
	mr = ibv_reg_mr(ep->pd, buf, ODP_LEN, odp_rw);
	if (!EP_CHECK(ep, mr, "ibv_reg_mr(ON_DEMAND): %s", cf_errname(errno)))
		goto out;
	EP_CHECK(ep, mr->addr == buf && mr->length == ODP_LEN,
		 "ODP region's addr/length are not the caller's");
	if (ep->side == CF_CHILD) {
		if (cf_ep_send_key(ep, (uintptr_t)buf, mr->rkey) ||
		    odp_post_recv(ep, mr->lkey, buf + soff, slen) ||
		    cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			goto out;
		EP_CHECK(ep, cf_bytes_check(buf, woff, 0) < 0 &&
			 cf_bytes_check(buf + woff + wlen, 64, 0) < 0,
			 "RDMA WRITE into an ODP region wrote outside its range");
		EP_CHECK(ep, cf_pattern_check(buf + woff, wlen, 1) < 0,
			 "RDMA WRITE into an ODP region: data differs at %ld",
			 cf_pattern_check(buf + woff, wlen, 1));
		/* Touched for the first time now, after registration. */
		cf_pattern_fill(buf + roff, rlen, 2);
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (cf_ep_wc_ok(ep, &wc, got, 77, IBV_WC_RECV,
				"SEND into an ODP receive buffer"))
			EP_CHECK(ep, wc.byte_len == slen &&
				 cf_pattern_check(buf + soff, slen, 3) < 0,
				 "SEND into an ODP buffer: %u bytes, data "
				 "differs at %ld", wc.byte_len,
				 cf_pattern_check(buf + soff, slen, 3));
	} else {
		if (cf_ep_recv_key(ep, &raddr, &rkey, WAIT_MS))
			goto out;
		cf_pattern_fill(buf, wlen, 1);
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = odp_post_wait(ep, IBV_WR_RDMA_WRITE, mr->lkey, buf, wlen,
				    raddr + woff, rkey, &wc);
		cf_ep_wc_ok(ep, &wc, got, IBV_WR_RDMA_WRITE,
			    IBV_WC_RDMA_WRITE, "RDMA WRITE from an ODP region");
		if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = odp_post_wait(ep, IBV_WR_RDMA_READ, mr->lkey, buf + roff,
				    rlen, raddr + roff, rkey, &wc);
		if (cf_ep_wc_ok(ep, &wc, got, IBV_WR_RDMA_READ,
				IBV_WC_RDMA_READ, "RDMA READ into an ODP region"))
			EP_CHECK(ep, cf_pattern_check(buf + roff, rlen, 2) < 0,
				 "RDMA READ from/into ODP regions: data "
				 "differs at %ld",
				 cf_pattern_check(buf + roff, rlen, 2));
		cf_pattern_fill(buf + soff, slen, 3);
		got = odp_post_wait(ep, IBV_WR_SEND, mr->lkey, buf + soff,
				    slen, 0, 0, &wc);
		cf_ep_wc_ok(ep, &wc, got, IBV_WR_SEND, IBV_WC_SEND,
			    "SEND from an ODP region");
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	if (mr)
		EP_CHECK(ep, !ibv_dereg_mr(mr), "ibv_dereg_mr(ODP)");
	if (buf)
		munmap(buf, ODP_LEN);
	return ret;
}

/*
 * An implicit ODP region (ibv_reg_mr(pd, NULL, SIZE_MAX, ON_DEMAND)):
 * addr NULL and length SIZE_MAX, and its keys name any address of the
 * process: heap buffers allocated after it are written, read and sent
 * with them.
 */
CF_BODY_IMPL(odp_peer, implicit)
{
	const uint32_t len = 256u << 10;
	uint8_t *buf = NULL, *back = NULL;
	struct ibv_mr *mr = NULL;
	uint64_t raddr = 0;
	uint32_t rkey = 0;
	struct ibv_wc wc;
	int got, ret = -1;

	if (!odp_ep_caps(ep, IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ,
			 true))
		goto out;
	mr = ibv_reg_mr(ep->pd, NULL, SIZE_MAX, odp_rw);
	if (!EP_CHECK(ep, mr, "implicit ibv_reg_mr: %s", cf_errname(errno)))
		goto out;
	EP_CHECK(ep, mr->addr == NULL && mr->length == SIZE_MAX,
		 "implicit region: addr %p length %zu, expected NULL and "
		 "SIZE_MAX", mr->addr, mr->length);
	buf = malloc(len);
	back = malloc(len);
	EP_REQUIRE(ep, buf && back, "malloc failed");
	memset(buf, 0xee, len);
	if (ep->side == CF_CHILD) {
		if (cf_ep_send_key(ep, (uintptr_t)buf, mr->rkey) || cf_ep_sync(ep, WAIT_MS) ||
		    cf_ep_sync(ep, WAIT_MS))
			goto out;
		EP_CHECK(ep, cf_pattern_check(buf + 16, len - 32, 4) < 0 &&
			 cf_bytes_check(buf, 16, 0xee) < 0 &&
			 cf_bytes_check(buf + len - 16, 16, 0xee) < 0,
			 "RDMA WRITE through an implicit region: data wrong");
	} else {
		if (cf_ep_recv_key(ep, &raddr, &rkey, WAIT_MS))
			goto out;
		cf_pattern_fill(buf, len - 32, 4);
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		got = odp_post_wait(ep, IBV_WR_RDMA_WRITE, mr->lkey, buf,
				    len - 32, raddr + 16, rkey, &wc);
		cf_ep_wc_ok(ep, &wc, got, IBV_WR_RDMA_WRITE,
			    IBV_WC_RDMA_WRITE, "WRITE, implicit regions");
		got = odp_post_wait(ep, IBV_WR_RDMA_READ, mr->lkey, back, len,
				    raddr, rkey, &wc);
		if (cf_ep_wc_ok(ep, &wc, got, IBV_WR_RDMA_READ,
				IBV_WC_RDMA_READ, "READ, implicit regions"))
			EP_CHECK(ep, cf_pattern_check(back + 16, len - 32, 4) < 0,
				 "RDMA READ through implicit regions: data "
				 "differs");
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	if (mr)
		EP_CHECK(ep, !ibv_dereg_mr(mr), "ibv_dereg_mr(implicit)");
	free(buf);
	free(back);
	return ret;
}

/*
 * A page of an ODP region unmapped after registration (arg 0: the
 * target's, arg 1: the requester's own).  An RDMA WRITE to it completes
 * IBV_WC_REM_ACCESS_ERR at the requester (IBA 9.7.5.2.4), one from it
 * IBV_WC_LOC_PROT_ERR (IBA 10.6.3.2); the process lives on, nothing
 * else of its region nor of the peer's memory is written.
 */
CF_BODY_IMPL(odp_peer, unmapped)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE);
	const bool local = ep->arg == 1;
	const enum cf_side owner = local ? CF_PARENT : CF_CHILD;
	uint8_t *buf = odp_untouched(3 * page);
	struct ibv_mr *mr = NULL;
	uint64_t raddr = 0;
	uint32_t rkey = 0;
	struct ibv_wc wc;
	int got, ret = -1;

	if (!odp_ep_caps(ep, IBV_ODP_SUPPORT_WRITE, false))
		goto out;
	EP_REQUIRE(ep, buf, "mmap failed");
	if (ep->side == owner) {
		mr = ibv_reg_mr(ep->pd, buf, 3 * page, odp_rw);
		if (!EP_CHECK(ep, mr, "ibv_reg_mr(ON_DEMAND): %s",
			      cf_errname(errno)))
			goto out;
		memset(buf, 0x5a, page);
		EP_REQUIRE(ep, !munmap(buf + page, page), "munmap failed");
	}
	if (ep->side == CF_CHILD) {
		memset(ep->buf, 0x33, 4 * page);
		if ((!local && cf_ep_send_key(ep, (uintptr_t)buf, mr->rkey)) ||
		    cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			goto out;
		EP_CHECK(ep, cf_bytes_check(ep->buf, 4 * page, 0x33) < 0,
			 "a WRITE from an unmapped ODP page wrote the target");
		EP_CHECK(ep, local || (cf_bytes_check(buf, page, 0x5a) < 0 &&
				       cf_bytes_check(buf + 2 * page, page,
						      0) < 0),
			 "a WRITE to an unmapped ODP page changed the "
			 "mapped pages around it");
	} else {
		if (!local) {
			if (cf_ep_recv_key(ep, &raddr, &rkey, WAIT_MS))
				goto out;
		} else {
			raddr = ep->peer.addr + page;
			rkey = ep->peer.rkey;
		}
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
		memset(ep->buf, 0xa5, page);
		got = local ? odp_post_wait(ep, IBV_WR_RDMA_WRITE, mr->lkey,
					    buf + page, 256, raddr, rkey, &wc)
			    : odp_post_wait(ep, IBV_WR_RDMA_WRITE,
					    ep->mr->lkey, ep->buf, 64,
					    raddr + page + 64, rkey, &wc);
		cf_ep_expect_wc(ep, &wc, got, IBV_WR_RDMA_WRITE,
				local ? IBV_WC_LOC_PROT_ERR
				      : IBV_WC_REM_ACCESS_ERR,
				-1, local ? "RDMA WRITE from an unmapped ODP page"
					  : "RDMA WRITE to an unmapped ODP page");
		if (cf_ep_sync(ep, WAIT_MS))
			goto out;
	}
	ret = cf_ep_sync(ep, WAIT_MS);
out:
	if (mr)
		EP_CHECK(ep, !ibv_dereg_mr(mr), "ibv_dereg_mr(ODP)");
	if (buf)
		munmap(buf, 3 * page);
	return ret;
}

static bool odp_cf_caps(bool implicit)
{
	const char *why;

	if (odp_rc_caps(&cf.dev_ex, 0, implicit, &why))
		return true;
	cf_skip("%s", why);
	return false;
}

/*
 * Registration (ibv_reg_mr(3)): an ODP region over memory not yet
 * touched; an implicit one is addr NULL, length SIZE_MAX; ibv_rereg_mr
 * changes an ODP region's access and translation; both deregister.
 */
CF_TEST_IMPL(odp, reg)
{
	const size_t len = 1u << 20;
	uint8_t *a = odp_untouched(len), *b = odp_untouched(len);
	struct ibv_mr *mr;

	if (!odp_cf_caps(false))
		goto out;
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	mr = ibv_reg_mr(cf.pd, a, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND);
	CF_CHECK(mr, "ibv_reg_mr(ON_DEMAND): %s", cf_errname(errno));
	if (mr) {
		CF_EXPECT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, NULL,
					  NULL, 0,
					  odp_rw), "rereg access of ODP");
		CF_EXPECT_OK(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION,
					  NULL, b, len, 0),
			     "rereg translation of ODP");
		CF_CHECK(mr->addr == b && mr->length == len,
			 "rereg did not move the ODP region");
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr(ODP)");
	}
	if (!(cf.dev_ex.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT))
		goto out;
	mr = ibv_reg_mr(cf.pd, NULL, SIZE_MAX, odp_rw);
	CF_CHECK(mr && mr->addr == NULL && mr->length == SIZE_MAX,
		 "implicit ibv_reg_mr: %s", mr ? "wrong addr/length"
					      : cf_errname(errno));
	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "dereg implicit");
	/* The whole address space only on demand: without ON_DEMAND no
	 * region is that long (max_mr_size, IBA 11.2.8.1). */
	mr = ibv_reg_mr(cf.pd, NULL, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE);
	CF_CHECK(!mr, "ibv_reg_mr(NULL, SIZE_MAX) without ON_DEMAND "
		      "registered");
	if (mr)
		ibv_dereg_mr(mr);
out:
	if (a)
		munmap(a, len);
	if (b)
		munmap(b, len);
}

/* ibv_advise_mr(pd, advice, flags, one SGE); its return value. */
static int odp_advise(struct ibv_pd *pd, int advice, uint32_t flags,
		      uint32_t lkey, const void *addr, uint32_t len)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = lkey };

	return ibv_advise_mr(pd, (enum ibv_advise_mr_advice)advice, flags,
			     &sge, 1);
}

/*
 * ibv_advise_mr(3), with the errno of the Linux stack (ib_uverbs_advise_mr,
 * mlx5_ib_advise_mr): the three prefetch advices succeed on an ODP
 * region's range with and without IBV_ADVISE_MR_FLAG_FLUSH; unknown
 * flags EINVAL, an unknown advice EOPNOTSUPP; an lkey of no ODP region
 * ENOENT, a region of another PD EPERM, PREFETCH_WRITE of a read-only
 * region EPERM; a range past the region, or (flushed) unmapped, EFAULT.
 */
CF_TEST_IMPL(odp, advise)
{
	const size_t page = (size_t)sysconf(_SC_PAGESIZE), len = 16 * page;
	const uint32_t flush = IBV_ADVISE_MR_FLAG_FLUSH;
	uint8_t *buf = odp_untouched(len);
	struct ibv_mr *mr = NULL, *ro = NULL, *pinned = NULL, *other = NULL;
	struct ibv_pd *pd2 = NULL;
	struct ibv_sge none;
	int ret;

	if (!odp_cf_caps(false))
		goto out;
	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	mr = ibv_reg_mr(cf.pd, buf, len, odp_rw);
	CF_CHECK(mr, "ibv_reg_mr(ON_DEMAND): %s", cf_errname(errno));
	if (!mr)
		goto out;
	ret = odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, flush,
			 mr->lkey, buf, (uint32_t)(4 * page));
	if (ret == EOPNOTSUPP || ret == ENOSYS) {
		cf_skip("ibv_advise_mr: %s", cf_errname(ret));
		goto out;
	}
	CF_EXPECT_OK(ret, "PREFETCH_WRITE, flushed");
	CF_EXPECT_OK(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0,
				mr->lkey, buf + page, (uint32_t)page),
		     "PREFETCH");
	CF_EXPECT_OK(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT,
				flush, mr->lkey, buf, (uint32_t)len),
		     "PREFETCH_NO_FAULT, flushed");
	CF_EXPECT_OK(ibv_advise_mr(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush,
				   &none, 0),
		     "no SGE");
	CF_EXPECT_ERR(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 1u << 5,
				 mr->lkey, buf, (uint32_t)page),
		      EINVAL, "unknown flags");
	CF_EXPECT_ERR(odp_advise(cf.pd, 7, flush, mr->lkey, buf,
				 (uint32_t)page),
		      EOPNOTSUPP, "unknown advice");
	CF_EXPECT_ERR(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush,
				 mr->lkey ^ 0x80, buf, (uint32_t)page),
		      ENOENT, "an lkey of no region");
	CF_EXPECT_ERR(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, flush,
				 mr->lkey, buf + len - page,
				 (uint32_t)(2 * page)),
		      EFAULT, "a range past the region");
	pinned = ibv_reg_mr(cf.pd, buf, page, IBV_ACCESS_LOCAL_WRITE);
	if (pinned)
		CF_EXPECT_ERR(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH,
					 flush, pinned->lkey, buf,
					 (uint32_t)page),
			      ENOENT, "a region without ON_DEMAND");
	ro = ibv_reg_mr(cf.pd, buf, len,
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
	CF_CHECK(ro, "ibv_reg_mr(REMOTE_READ | ON_DEMAND): %s",
		 cf_errname(errno));
	if (ro) {
		CF_EXPECT_ERR(odp_advise(cf.pd,
					 IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
					 flush, ro->lkey, buf, (uint32_t)page),
			      EPERM, "PREFETCH_WRITE of a read-only region");
		CF_EXPECT_OK(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH,
					flush, ro->lkey, buf, (uint32_t)page),
			     "PREFETCH of a read-only region");
	}
	pd2 = ibv_alloc_pd(cf.ctx);
	if (pd2) {
		other = ibv_reg_mr(pd2, buf, len, odp_rw);
		if (other)
			CF_EXPECT_ERR(odp_advise(cf.pd,
						 IBV_ADVISE_MR_ADVICE_PREFETCH,
						 flush, other->lkey, buf,
						 (uint32_t)page),
				      EPERM, "a region of another PD");
	}
	/* A page unmapped since: a flushed prefetch cannot fault it in. */
	CU_ASSERT_FATAL(!munmap(buf + 8 * page, page));
	CF_EXPECT_ERR(odp_advise(cf.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE,
				 flush, mr->lkey, buf + 7 * page,
				 (uint32_t)(3 * page)),
		      EFAULT, "a flushed prefetch over an unmapped page");
out:
	if (other)
		ibv_dereg_mr(other);
	if (pd2)
		ibv_dealloc_pd(pd2);
	if (ro)
		ibv_dereg_mr(ro);
	if (pinned)
		ibv_dereg_mr(pinned);
	if (mr)
		ibv_dereg_mr(mr);
	if (buf)
		munmap(buf, len);
}
