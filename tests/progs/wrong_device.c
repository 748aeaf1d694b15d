// SPDX-License-Identifier: MIT
/*
 * A deliberately wrong device, for tests/local/conformance-judges.sh: preloaded
 * after libibemu.so, it changes the behaviour of the device under it in
 * the ways CF_WRONG_DEVICE names (a comma-separated list), so that the
 * suite can be shown to fail a device that breaks a requirement and to
 * pass one that makes another choice where the spec allows it:
 *
 *   reset_err_refused  Modify QP RESET->ERR refused with EINVAL (the Linux
 *                      core's choice; IBA 10.3.1 allows it)
 *   reset_err_stuck    RESET->ERR answered 0, the QP left in RESET
 *                      (breaks IBA 10.3.1 / ibv_modify_qp(3))
 *   psn_refused        a PSN of 2^24 or more refused with EINVAL (a
 *                      choice; the kernel's providers mask it)
 *   psn_unmasked       RESET..RTR with rq_psn 2^24 accepted, the query
 *                      answering 2^24 (breaks IBA 9.2's 24-bit PSN)
 *   iova_refused       every ibv_reg_mr_iova refused with EINVAL (breaks
 *                      ibv_reg_mr_iova(3) for an IOVA the Linux core
 *                      takes)
 *   lkey_status        a local protection error completed as
 *                      LOC_QP_OP_ERR (rxe's deviation from manual 6.2.5)
 *   bad_wr_null        a refused ibv_post_send leaves *bad_wr NULL (rxe's
 *                      deviation from ibv_post_send(3))
 *
 * The stock verbs are reached through dlvsym; the context's legacy ops
 * (ibv_post_send and ibv_poll_cq are inline calls through them) are
 * wrapped at ibv_open_device.
 *
 * Lock rule: the saved originals are written once, at the first open,
 * before any QP exists, and only read afterwards.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

static bool wrong(const char *what)
{
	const char *list = getenv("CF_WRONG_DEVICE");
	size_t n = strlen(what);

	for (const char *p = list; p && *p; p += strcspn(p, ",")) {
		p += *p == ',';
		if (!strncmp(p, what, n) && (p[n] == ',' || !p[n]))
			return true;
	}
	return false;
}

static void *real(const char *name, const char *version)
{
	return dlvsym(RTLD_NEXT, name, version);
}

static int (*real_post_send)(struct ibv_qp *, struct ibv_send_wr *,
			     struct ibv_send_wr **);
static int (*real_poll_cq)(struct ibv_cq *, int, struct ibv_wc *);

static int wd_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			struct ibv_send_wr **bad_wr)
{
	int ret = real_post_send(qp, wr, bad_wr);

	if (ret && wrong("bad_wr_null"))
		*bad_wr = NULL;
	return ret;
}

static int wd_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	int got = real_poll_cq(cq, n, wc);

	for (int i = 0; i < got && wrong("lkey_status"); i++)
		if (wc[i].status == IBV_WC_LOC_PROT_ERR)
			wc[i].status = IBV_WC_LOC_QP_OP_ERR;
	return got;
}

struct ibv_context *wd_open_device(struct ibv_device *dev);
__asm__(".symver wd_open_device, ibv_open_device@@IBVERBS_1.1");
struct ibv_context *wd_open_device(struct ibv_device *dev)
{
	struct ibv_context *(*open)(struct ibv_device *) =
		real("ibv_open_device", "IBVERBS_1.1");
	struct ibv_context *ctx = open ? open(dev) : NULL;

	if (!ctx)
		return NULL;
	if (!real_post_send) {
		real_post_send = ctx->ops.post_send;
		real_poll_cq = ctx->ops.poll_cq;
	}
	ctx->ops.post_send = wd_post_send;
	ctx->ops.poll_cq = wd_poll_cq;
	return ctx;
}

static int qp_state(struct ibv_qp *qp)
{
	int (*query)(struct ibv_qp *, struct ibv_qp_attr *, int,
		     struct ibv_qp_init_attr *) =
		real("ibv_query_qp", "IBVERBS_1.1");
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr a;

	if (!query || query(qp, &a, IBV_QP_STATE, &init))
		return -1;
	return a.qp_state;
}

/* The QPs whose RQ PSN was set beyond 24 bits (psn_unmasked). */
static uint32_t unmasked_qpn[64];
static unsigned int nr_unmasked;

int wd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
__asm__(".symver wd_modify_qp, ibv_modify_qp@@IBVERBS_1.1");
int wd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask)
{
	int (*modify)(struct ibv_qp *, struct ibv_qp_attr *, int) =
		real("ibv_modify_qp", "IBVERBS_1.1");
	bool to_err = (mask & IBV_QP_STATE) && attr->qp_state == IBV_QPS_ERR;
	bool big_psn = ((mask & IBV_QP_SQ_PSN) && attr->sq_psn > 0xffffff) ||
		       ((mask & IBV_QP_RQ_PSN) && attr->rq_psn > 0xffffff);

	if (!modify)
		return ENOSYS;
	if (to_err && qp_state(qp) == IBV_QPS_RESET) {
		if (wrong("reset_err_refused"))
			return EINVAL;
		if (wrong("reset_err_stuck"))
			return 0;
	}
	if (big_psn && wrong("psn_refused"))
		return EINVAL;
	if (big_psn && (mask & IBV_QP_RQ_PSN) && wrong("psn_unmasked") &&
	    nr_unmasked < 64)
		unmasked_qpn[nr_unmasked++] = qp->qp_num;
	return modify(qp, attr, mask);
}

int wd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init);
__asm__(".symver wd_query_qp, ibv_query_qp@@IBVERBS_1.1");
int wd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask,
		struct ibv_qp_init_attr *init)
{
	int (*query)(struct ibv_qp *, struct ibv_qp_attr *, int,
		     struct ibv_qp_init_attr *) =
		real("ibv_query_qp", "IBVERBS_1.1");
	int ret;

	if (!query)
		return ENOSYS;
	ret = query(qp, attr, mask, init);
	for (unsigned int i = 0; !ret && i < nr_unmasked; i++)
		if (unmasked_qpn[i] == qp->qp_num)
			attr->rq_psn |= 1u << 24;
	return ret;
}

struct ibv_mr *wd_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			      uint64_t iova, int access);
__asm__(".symver wd_reg_mr_iova, ibv_reg_mr_iova@@IBVERBS_1.7");
struct ibv_mr *wd_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
			      uint64_t iova, int access)
{
	struct ibv_mr *(*reg)(struct ibv_pd *, void *, size_t, uint64_t,
			      int) = real("ibv_reg_mr_iova", "IBVERBS_1.7");

	if (wrong("iova_refused") || !reg) {
		errno = EINVAL;
		return NULL;
	}
	return reg(pd, addr, length, iova, access);
}
