// SPDX-License-Identifier: MIT
/*
 * Fixture helpers shared by every suite: opening the device under test,
 * formatted assertions, skips, the QP state table and the one walker
 * through it, and bounded waits for a QP state and for completions.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <CUnit/TestRun.h>

#include "conformance.h"

struct cf_ctx cf;
unsigned int cf_skip_count;

int cf_rc(int ret)
{
	if (ret == 0)
		return 0;
	if (ret == -1)
		return errno ? errno : EIO;
	return ret < 0 ? -ret : ret;
}

const char *cf_errname(int err)
{
	static const struct {
		int err;
		const char *name;
	} names[] = {
		{ 0, "success" },	{ EPERM, "EPERM" },
		{ ENOENT, "ENOENT" },	{ EIO, "EIO" },
		{ E2BIG, "E2BIG" },	{ EBADF, "EBADF" },
		{ EAGAIN, "EAGAIN" },	{ ENOMEM, "ENOMEM" },
		{ EACCES, "EACCES" },	{ EFAULT, "EFAULT" },
		{ EBUSY, "EBUSY" },	{ EEXIST, "EEXIST" },
		{ ENODEV, "ENODEV" },	{ EINVAL, "EINVAL" },
		{ ENOSPC, "ENOSPC" },	{ ERANGE, "ERANGE" },
		{ ENOSYS, "ENOSYS" },	{ ENODATA, "ENODATA" },
		{ EOPNOTSUPP, "EOPNOTSUPP" },
		{ EPROTONOSUPPORT, "EPROTONOSUPPORT" },
	};
	static __thread char buf[32];
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(names); i++)
		if (names[i].err == err)
			return names[i].name;
	snprintf(buf, sizeof(buf), "errno %d", err);
	return buf;
}

const char *cf_state_name(int state)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
		[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
		[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	if (state < 0 || state >= (int)CF_ARRAY_SIZE(names) || !names[state])
		return "?";
	return names[state];
}

const char *cf_qpt_name(enum ibv_qp_type type)
{
	switch (type) {
	case IBV_QPT_RC:
		return "RC";
	case IBV_QPT_UC:
		return "UC";
	case IBV_QPT_UD:
		return "UD";
	default:
		return "?";
	}
}

void cf_skip(const char *fmt, ...)
{
	CU_pSuite suite = CU_get_current_suite();
	CU_pTest test = CU_get_current_test();
	va_list ap;

	char why[512];

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	printf("\nSKIP: %s/%s: %s\n", suite ? suite->pName : "?",
	       test ? test->pName : "?", why);
	fflush(stdout);
	cf_skip_count++;
	cf_report_skip(suite ? suite->pName : "?", test ? test->pName : "?",
		       why);
}

void cf_check(int ok, unsigned int line, const char *file, const char *func,
	      const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ok) {
		CU_assertImplementation(CU_TRUE, line, "", file, func,
					CU_FALSE);
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* CUnit copies the condition text into its failure record. */
	CU_assertImplementation(CU_FALSE, line, msg, file, func, CU_FALSE);
}

void cf_expect_err(int got, int want, const char *what, unsigned int line,
		   const char *file, const char *func)
{
	cf_check(got == want, line, file, func, "%s: expected %s, got %s",
		 what, cf_errname(want), cf_errname(got));
}

struct ibv_context *cf_open_device(void)
{
	struct ibv_device **list, *dev = NULL;
	struct ibv_context *ctx = NULL;
	int n, i;

	list = ibv_get_device_list(&n);
	if (!list)
		return NULL;
	for (i = 0; i < n; i++) {
		if (!cf_dev_name ||
		    !strcmp(ibv_get_device_name(list[i]), cf_dev_name)) {
			dev = list[i];
			break;
		}
	}
	if (dev)
		ctx = ibv_open_device(dev);
	ibv_free_device_list(list);
	return ctx;
}

bool cf_is_roce(const struct cf_ctx *c)
{
	return c->port.link_layer == IBV_LINK_LAYER_ETHERNET;
}

/* An IPv4 address in a GID, ::ffff:a.b.c.d (RFC 4291 2.5.5.2). */
static bool cf_gid_is_v4(const uint8_t *gid)
{
	static const uint8_t v4_prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(gid, v4_prefix, sizeof(v4_prefix));
}

bool cf_grh_names(const uint8_t *grh, const uint8_t *sgid,
		  const uint8_t *dgid)
{
	/* IBA 8.3: the GRH itself, SGID at byte 8, DGID at byte 24 (IB,
	 * RoCE v1, RoCE v2 over IPv6). */
	if ((!sgid || !memcmp(grh + 8, sgid, 16)) &&
	    !memcmp(grh + 24, dgid, 16))
		return true;
	/* RoCE v2 over IPv4 (IBA Annex A17.4.5.1, and the layout rdma-core's
	 * ibv_init_ah_from_wc reads): bytes 20..39 of the area hold the
	 * packet's IPv4 header, source at 32, destination at 36. */
	return (grh[20] >> 4) == 4 && cf_gid_is_v4(dgid) &&
	       (!sgid || !memcmp(grh + 32, sgid + 12, 4)) &&
	       !memcmp(grh + 36, dgid + 12, 4);
}

int cf_open(struct cf_ctx *c)
{
	memset(c, 0, sizeof(*c));
	c->dev = &c->dev_ex.orig_attr;
	c->ctx = cf_open_device();
	if (!c->ctx) {
		fprintf(stderr, "cannot open device %s: %s\n",
			cf_dev_name ? cf_dev_name : "(first)",
			strerror(errno));
		return -1;
	}
	if (ibv_query_device_ex(c->ctx, NULL, &c->dev_ex) &&
	    ibv_query_device(c->ctx, c->dev))
		goto err;
	if (ibv_query_port(c->ctx, cf_port, &c->port))
		goto err;
	if (ibv_query_gid(c->ctx, cf_port, cf_gid_index, &c->gid))
		goto err;
	c->pd = ibv_alloc_pd(c->ctx);
	if (!c->pd)
		goto err;
	c->cq = ibv_create_cq(c->ctx, 256, NULL, NULL, 0);
	if (!c->cq)
		goto err;
	return 0;
err:
	fprintf(stderr, "fixture setup failed: %s\n", strerror(errno));
	cf_close(c);
	return -1;
}

void cf_close(struct cf_ctx *c)
{
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->pd)
		ibv_dealloc_pd(c->pd);
	if (c->ctx)
		ibv_close_device(c->ctx);
	memset(c, 0, sizeof(*c));
}

int cf_suite_init(void)
{
	return cf_open(&cf) ? -1 : 0;
}

int cf_suite_cleanup(void)
{
	cf_close(&cf);
	return 0;
}

void cf_fill_ah(const struct cf_ctx *c, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = c->port.lid;
	ah->port_num = cf_port;
	if (cf_is_roce(c) || !c->port.lid) {
		ah->is_global = 1;
		ah->grh.dgid = c->gid;
		ah->grh.sgid_index = cf_gid_index;
		ah->grh.hop_limit = 1;
	}
}

struct ibv_mr *cf_alloc_mr(struct cf_ctx *c, size_t len, int access)
{
	struct ibv_mr *mr;
	void *buf;

	buf = calloc(1, len);
	if (!buf)
		return NULL;
	mr = ibv_reg_mr(c->pd, buf, len, access);
	if (!mr)
		free(buf);
	return mr;
}

void cf_free_mr(struct ibv_mr *mr)
{
	void *buf = mr->addr;

	if (!ibv_dereg_mr(mr))
		free(buf);
}

struct ibv_qp *cf_create_qp(struct cf_ctx *c, enum ibv_qp_type type,
			    struct ibv_qp_init_attr *init_p)
{
	struct ibv_qp_init_attr def = {
		.send_cq = c->cq,
		.recv_cq = c->cq,
		.cap = {
			.max_send_wr = 8,
			.max_recv_wr = 8,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
		.qp_type = type,
	};

	if (!init_p)
		init_p = &def;
	init_p->qp_type = type;
	return ibv_create_qp(c->pd, init_p);
}

int cf_qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_init_attr init;
	struct ibv_qp_attr attr;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = (enum ibv_qp_state)-1;
	if (ibv_query_qp(qp, &attr, IBV_QP_STATE, &init))
		return -1;
	return attr.qp_state;
}

/*
 * IBA 11.2.5.1 / 11.2.5.2 (Modify QP) and manual 3.5.2-3.5.4; transcribed
 * from the IBA state tables, cross-checked against the kernel's
 * qp_state_table.  Only RC, UC and UD are covered.
 */
bool cf_qp_trans(enum ibv_qp_type type, enum ibv_qp_state cur,
		 enum ibv_qp_state next, int *req_p, int *opt_p)
{
	const bool ud = type == IBV_QPT_UD, rc = type == IBV_QPT_RC;
	const int apm = IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
	/* Optional on RTR->RTS, RTS->RTS and SQD->RTS alike. */
	const int to_rts_opt = IBV_QP_CUR_STATE |
			       (ud ? IBV_QP_QKEY :
				     apm | IBV_QP_ACCESS_FLAGS |
				     (rc ? IBV_QP_MIN_RNR_TIMER : 0));
	int req = 0, opt = 0;
	bool ok = false;

	/* Any state to RESET and to ERR, with no attribute (IBA 11.2.5). */
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		ok = cur != IBV_QPS_UNKNOWN;
		goto out;
	}
	switch (cur) {
	case IBV_QPS_RESET:
		if (next != IBV_QPS_INIT)
			break;
		ok = true;
		req = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
		      (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		break;
	case IBV_QPS_INIT:
		if (next == IBV_QPS_INIT) {
			ok = true;
			opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			      (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		} else if (next == IBV_QPS_RTR) {
			ok = true;
			if (ud) {
				opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
				break;
			}
			req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			      IBV_QP_RQ_PSN;
			if (rc)
				req |= IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER;
			opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS |
			      IBV_QP_PKEY_INDEX;
		}
		break;
	case IBV_QPS_RTR:
		if (next != IBV_QPS_RTS)
			break;
		ok = true;
		req = IBV_QP_SQ_PSN;
		if (rc)
			req |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		opt = to_rts_opt;
		break;
	case IBV_QPS_RTS:
	case IBV_QPS_SQD:
		if (next == IBV_QPS_RTS) {
			ok = true;
			opt = to_rts_opt;
		} else if (next == IBV_QPS_SQD && cur == IBV_QPS_RTS) {
			ok = true;
			opt = IBV_QP_EN_SQD_ASYNC_NOTIFY;
		} else if (next == IBV_QPS_SQD) {
			ok = true;
			if (ud)
				opt = IBV_QP_PKEY_INDEX | IBV_QP_QKEY;
			else if (!rc)
				opt = IBV_QP_AV | apm | IBV_QP_ACCESS_FLAGS |
				      IBV_QP_PKEY_INDEX;
			else
				opt = IBV_QP_PORT | IBV_QP_AV |
				      IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				      IBV_QP_RNR_RETRY |
				      IBV_QP_MAX_QP_RD_ATOMIC |
				      IBV_QP_MAX_DEST_RD_ATOMIC | apm |
				      IBV_QP_ACCESS_FLAGS |
				      IBV_QP_PKEY_INDEX |
				      IBV_QP_MIN_RNR_TIMER;
		}
		break;
	case IBV_QPS_SQE:
		/* SQE exists for UD and UC only (IBA 11.2.5, 10.8.3.3). */
		if (next != IBV_QPS_RTS || rc)
			break;
		ok = true;
		opt = IBV_QP_CUR_STATE |
		      (ud ? IBV_QP_QKEY : IBV_QP_ACCESS_FLAGS);
		break;
	default:
		break;
	}
out:
	if (req_p)
		*req_p = req;
	if (opt_p)
		*opt_p = opt;
	return ok;
}

void cf_qp_fill_attr(const struct cf_ctx *c, struct ibv_qp *qp,
		     enum ibv_qp_state cur, enum ibv_qp_state next,
		     struct ibv_qp_attr *attr)
{
	const struct ibv_device_attr *d = c->dev;

	memset(attr, 0, sizeof(*attr));
	attr->qp_state = next;
	attr->cur_qp_state = cur;
	attr->pkey_index = 0;
	attr->port_num = cf_port;
	attr->qkey = 0x11111111;
	attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_READ;
	attr->path_mtu = c->port.max_mtu < IBV_MTU_1024 ? c->port.max_mtu :
							 IBV_MTU_1024;
	attr->dest_qp_num = qp->qp_num;
	attr->rq_psn = 0x1234;
	attr->sq_psn = 0x1234;
	attr->max_dest_rd_atomic = d->max_qp_rd_atom < 4 ?
				   d->max_qp_rd_atom : 4;
	attr->max_rd_atomic = d->max_qp_init_rd_atom < 4 ?
			      d->max_qp_init_rd_atom : 4;
	attr->min_rnr_timer = 12;
	attr->timeout = 14;
	attr->retry_cnt = 7;
	attr->rnr_retry = 7;
	cf_fill_ah(c, &attr->ah_attr);
	cf_fill_ah(c, &attr->alt_ah_attr);
	attr->alt_port_num = cf_port;
	attr->alt_pkey_index = 0;
	attr->alt_timeout = 14;
	attr->path_mig_state = IBV_MIG_MIGRATED;
	attr->en_sqd_async_notify = 0;
}

int cf_qp_to_state(const struct cf_ctx *c, struct ibv_qp *qp,
		   enum ibv_qp_state target)
{
	return cf_qp_to_state_dest(c, qp, target, qp->qp_num);
}

int cf_qp_to_state_dest(const struct cf_ctx *c, struct ibv_qp *qp,
			enum ibv_qp_state target, uint32_t dest_qpn)
{
	struct ibv_qp_attr attr;

	cf_qp_fill_attr(c, qp, IBV_QPS_RESET, target, &attr);
	attr.dest_qp_num = dest_qpn;
	return cf_qp_walk(qp, &attr, IBV_QPS_RESET, target);
}

/*
 * The state after cur on the walk RESET, INIT, RTR, RTS, SQD toward
 * target; ERR is entered from INIT (any state -> ERR is legal).
 * IBV_QPS_UNKNOWN when the walk does not lead to target.
 */
static enum ibv_qp_state cf_qp_walk_next(enum ibv_qp_state cur,
					 enum ibv_qp_state target)
{
	if (target == IBV_QPS_ERR && cur == IBV_QPS_INIT)
		return IBV_QPS_ERR;
	switch (cur) {
	case IBV_QPS_RESET:
		return IBV_QPS_INIT;
	case IBV_QPS_INIT:
		return IBV_QPS_RTR;
	case IBV_QPS_RTR:
		return IBV_QPS_RTS;
	case IBV_QPS_RTS:
		return IBV_QPS_SQD;
	default:
		return IBV_QPS_UNKNOWN;
	}
}

int cf_qp_walk(struct ibv_qp *qp, struct ibv_qp_attr *attr,
	       enum ibv_qp_state from, enum ibv_qp_state target)
{
	enum ibv_qp_state cur, next;
	int req, ret;

	for (cur = from; cur != target; cur = next) {
		next = cf_qp_walk_next(cur, target);
		if (next == IBV_QPS_UNKNOWN)
			return EINVAL;
		cf_qp_trans(qp->qp_type, cur, next, &req, NULL);
		attr->qp_state = next;
		attr->cur_qp_state = cur;
		ret = cf_rc(ibv_modify_qp(qp, attr, req | IBV_QP_STATE));
		if (ret)
			return ret;
	}
	return 0;
}

long long cf_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cf_qp_wait_state(struct ibv_qp *qp, int want, int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	int st;

	for (;;) {
		st = cf_qp_state(qp);
		if (st == want || cf_now_ms() >= deadline)
			return st;
		usleep(1000);
	}
}

int cf_poll_cq_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n,
		    int timeout_ms)
{
	long long deadline = cf_now_ms() + timeout_ms;
	int got = 0, ret;

	while (got < n) {
		ret = ibv_poll_cq(cq, n - got, wc + got);
		if (ret < 0)
			return got ? got : -1;
		got += ret;
		if (ret)
			continue;
		if (cf_now_ms() >= deadline)
			break;
		usleep(100);
	}
	return got;
}

int cf_post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, int n,
		  uint64_t first_wr_id)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	int i, ret;

	for (i = 0; i < n; i++) {
		sge.addr = (uintptr_t)mr->addr;
		sge.length = mr->length < 64 ? mr->length : 64;
		sge.lkey = mr->lkey;
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = first_wr_id + i;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		ret = cf_rc(ibv_post_recv(qp, &wr, &bad));
		if (ret)
			return ret;
	}
	return 0;
}
