// SPDX-License-Identifier: MIT
/*
 * UMR over indirect mkeys, through libmlx5's API (mlx5dv_create_mkey(3),
 * mlx5dv_wr_mr_interleaved(3), mlx5dv_wr_mr_list(3),
 * mlx5dv_wr_mkey_configure(3)), between two RC QPs of this process:
 *
 *   - a strided RDMA WRITE through an interleaved mkey lands in the
 *     pattern, byte for byte, and nothing outside it changes;
 *   - a WRITE at an offset crossing entries, and a READ of the whole
 *     layout, see the same pattern;
 *   - a SEND gathers from a list mkey, and a receive scatters into one;
 *   - the UMR completes as MLX5DV_WC_UMR;
 *   - libmlx5's limits: not inline (EOPNOTSUPP), more entries than
 *     max_inline_data holds or the mkey has (ENOMEM);
 *   - after LOCAL_INV of the mkey, and past its end, a WRITE fails with
 *     IBV_WC_REM_ACCESS_ERR and touches nothing.
 *
 * Exit 0: all as above; 77: no device with mlx5 direct verbs; 1: not.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#define LEN 4096
#define INLINE 128 /* max_inline_data: (128 + 4) / 16 = 8 entries */
#define FILL 0xee

struct side {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct mlx5dv_qp_ex *mqpx;
	struct ibv_mr *mr;
	struct mlx5dv_mkey *mkey;
	uint8_t *buf;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static uint16_t lid;
static int failures;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok: ");                                        \
		} else {                                                       \
			printf("FAIL: ");                                      \
			failures++;                                            \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
	} while (0)

static int side_open(struct side *s)
{
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 2, .max_recv_sge = 2,
			 .max_inline_data = INLINE },
		.pd = pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_RDMA_READ |
				  IBV_QP_EX_WITH_LOCAL_INV,
	};
	struct mlx5dv_qp_init_attr dv = {
		.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS,
		.send_ops_flags = MLX5DV_QP_EX_WITH_MR_INTERLEAVED |
				  MLX5DV_QP_EX_WITH_MR_LIST |
				  MLX5DV_QP_EX_WITH_MKEY_CONFIGURE,
	};
	struct mlx5dv_mkey_init_attr ma = {
		.pd = pd,
		.create_flags = MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT,
		.max_entries = 4,
	};

	s->buf = aligned_alloc(4096, LEN);
	memset(s->buf, FILL, LEN);
	s->cq = ibv_create_cq(ctx, 64, NULL, NULL, 0);
	s->mr = ibv_reg_mr(pd, s->buf, LEN,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	if (!s->cq || !s->mr)
		return -1;
	ia.send_cq = ia.recv_cq = s->cq;
	s->qp = mlx5dv_create_qp(ctx, &ia, &dv);
	if (!s->qp) {
		perror("mlx5dv_create_qp");
		return -1;
	}
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	s->mqpx = mlx5dv_qp_ex_from_ibv_qp_ex(s->qpx);
	s->mkey = mlx5dv_create_mkey(&ma);
	if (!s->mkey) {
		perror("mlx5dv_create_mkey");
		return -1;
	}
	return 0;
}

static int side_connect(struct side *s, uint32_t dest)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
						    IBV_ACCESS_REMOTE_READ };

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
					     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					     IBV_QP_RQ_PSN |
					     IBV_QP_MAX_DEST_RD_ATOMIC |
					     IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
						IBV_QP_RETRY_CNT |
						IBV_QP_RNR_RETRY |
						IBV_QP_SQ_PSN |
						IBV_QP_MAX_QP_RD_ATOMIC)
		       ? -1
		       : 0;
}

/* One completion of cq, within 5 s. */
static int poll1(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long i = 0; i < 500000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 0;
		usleep(10);
	}
	memset(wc, 0, sizeof(*wc));
	wc->status = (enum ibv_wc_status)-1;
	return -1;
}

/* The two-entry interleaved layout used throughout: 4 bytes at 0 and
 * 8 bytes at 256 of s's buffer, strides 16, repeated 8 times: 96 bytes. */
#define REPS 8
static struct mlx5dv_mr_interleaved il[2];

static int umr_interleaved(struct side *s, int flags, uint16_t n)
{
	struct ibv_wc wc;
	int ret;

	il[0] = (struct mlx5dv_mr_interleaved){ (uintptr_t)s->buf, 4, 12,
						 s->mr->lkey };
	il[1] = (struct mlx5dv_mr_interleaved){ (uintptr_t)s->buf + 256, 8, 8,
						 s->mr->lkey };
	ibv_wr_start(s->qpx);
	s->qpx->wr_id = 0x5a;
	s->qpx->wr_flags = flags;
	mlx5dv_wr_mr_interleaved(s->mqpx, s->mkey,
				 IBV_ACCESS_LOCAL_WRITE |
					 IBV_ACCESS_REMOTE_WRITE |
					 IBV_ACCESS_REMOTE_READ,
				 REPS, n, il);
	ret = ibv_wr_complete(s->qpx);
	if (ret)
		return ret;
	if (poll1(s->cq, &wc))
		return -1;
	CHECK(wc.status == IBV_WC_SUCCESS && (int)wc.opcode == (int)MLX5DV_WC_UMR &&
		      wc.wr_id == 0x5a,
	      "the UMR completes as MLX5DV_WC_UMR (status %s, opcode %d)",
	      ibv_wc_status_str(wc.status), wc.opcode);
	return 0;
}

/* Where byte k of the interleaved layout lives in the buffer. */
static size_t il_at(size_t k)
{
	size_t r = k / 12, o = k % 12;

	return o < 4 ? r * 16 + o : 256 + r * 16 + (o - 4);
}

static enum ibv_wc_status one_sided(struct side *s, int read, uint32_t rkey,
				    uint64_t raddr, void *local, uint32_t len)
{
	struct ibv_wc wc;

	ibv_wr_start(s->qpx);
	s->qpx->wr_id = 7;
	s->qpx->wr_flags = IBV_SEND_SIGNALED;
	if (read)
		ibv_wr_rdma_read(s->qpx, rkey, raddr);
	else
		ibv_wr_rdma_write(s->qpx, rkey, raddr);
	ibv_wr_set_sge(s->qpx, s->mr->lkey, (uintptr_t)local, len);
	if (ibv_wr_complete(s->qpx))
		return (enum ibv_wc_status)-1;
	poll1(s->cq, &wc);
	return wc.status;
}

static int check_pattern(const struct side *t, const uint8_t *data,
			 size_t from, size_t len)
{
	size_t i;
	int bad = 0;

	for (i = 0; i < LEN; i++) {
		uint8_t want = FILL;
		size_t k;

		/* where the receive test scattered "hello, world" */
		if ((i >= 1024 && i < 1030) || (i >= 2048 && i < 2054))
			continue;
		for (k = from; k < from + len; k++)
			if (il_at(k) == i)
				want = data[k - from];
		bad += t->buf[i] != want;
	}
	return bad;
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_port_attr pa;
	struct side a = { 0 }, b = { 0 };
	uint8_t data[REPS * 12], back[REPS * 12];
	struct ibv_sge sges[2];
	struct ibv_wc wc;
	int n, ret;
	size_t i;

	setvbuf(stdout, NULL, _IOLBF, 0);
	list = ibv_get_device_list(&n);
	if (!list || !n || !mlx5dv_is_supported(list[0])) {
		printf("SKIP: no device with mlx5 direct verbs\n");
		return 77;
	}
	ctx = mlx5dv_open_device(list[0], &(struct mlx5dv_context_attr){ 0 });
	if (!ctx || ibv_query_port(ctx, 1, &pa) || !(pd = ibv_alloc_pd(ctx)))
		return 1;
	lid = pa.lid;
	if (side_open(&a) || side_open(&b) || side_connect(&a, b.qp->qp_num) ||
	    side_connect(&b, a.qp->qp_num)) {
		printf("FAIL: setting up the two QPs\n");
		return 1;
	}

	/* libmlx5's limits, each failing the batch at ibv_wr_complete. */
	ret = umr_interleaved(&b, IBV_SEND_SIGNALED, 2);
	CHECK(ret == EOPNOTSUPP, "a UMR not posted inline: %s", strerror(ret));
	ret = umr_interleaved(&b, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 5);
	CHECK(ret == ENOMEM, "more entries than the mkey has: %s",
	      strerror(ret));
	ret = umr_interleaved(&b, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 2);
	CHECK(ret == 0, "an interleaved UMR of 2 entries, 8 times: %s",
	      strerror(ret));

	/* A strided WRITE of the whole layout, zero-based. */
	for (i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 1);
	memcpy(a.buf, data, sizeof(data));
	CHECK(one_sided(&a, 0, b.mkey->rkey, 0, a.buf, sizeof(data)) ==
		      IBV_WC_SUCCESS,
	      "WRITE of %zu bytes through the interleaved mkey", sizeof(data));
	CHECK(check_pattern(&b, data, 0, sizeof(data)) == 0,
	      "it landed in the pattern, byte for byte, nothing else touched");

	/* A WRITE at an offset that crosses entries and repetitions. */
	for (i = 0; i < 10; i++)
		a.buf[i] = data[20 + i] = (uint8_t)(0x80 + i);
	CHECK(one_sided(&a, 0, b.mkey->rkey, 20, a.buf, 10) == IBV_WC_SUCCESS &&
		      check_pattern(&b, data, 0, sizeof(data)) == 0,
	      "WRITE of 10 bytes at offset 20 lands where the layout says");

	/* A READ of the whole layout gathers the pattern back. */
	memset(a.buf + 1024, 0, sizeof(back));
	CHECK(one_sided(&a, 1, b.mkey->rkey, 0, a.buf + 1024, sizeof(back)) ==
			      IBV_WC_SUCCESS &&
		      memcmp(a.buf + 1024, data, sizeof(data)) == 0,
	      "READ through the interleaved mkey returns the pattern");

	/* A SEND gathering from a list mkey of A, into a list mkey of B. */
	sges[0] = (struct ibv_sge){ (uintptr_t)a.buf + 2048, 5, a.mr->lkey };
	sges[1] = (struct ibv_sge){ (uintptr_t)a.buf + 3000, 7, a.mr->lkey };
	memcpy(a.buf + 2048, "hello", 5);
	memcpy(a.buf + 3000, ", world", 7);
	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 1;
	a.qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	mlx5dv_wr_mr_list(a.mqpx, a.mkey, IBV_ACCESS_LOCAL_WRITE, 2, sges);
	a.qpx->wr_id = 2;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a.qpx);
	ibv_wr_set_sge(a.qpx, a.mkey->lkey, 0, 12);
	ret = ibv_wr_complete(a.qpx);
	/* B's receive: a list mkey over two pieces (the new API). */
	{
		struct ibv_sge rs[2] = {
			{ (uintptr_t)b.buf + 1024, 6, b.mr->lkey },
			{ (uintptr_t)b.buf + 2048, 6, b.mr->lkey },
		};
		struct mlx5dv_mkey_conf_attr ca = { 0 };
		struct mlx5dv_mkey_init_attr ma = {
			pd, MLX5DV_MKEY_INIT_ATTR_FLAGS_INDIRECT, 2 };
		struct mlx5dv_mkey *rk = mlx5dv_create_mkey(&ma);
		struct ibv_sge sge = { 0, 12, rk ? rk->lkey : 0 };
		struct ibv_recv_wr rwr = { .wr_id = 9, .sg_list = &sge,
					   .num_sge = 1 }, *bad;

		ibv_wr_start(b.qpx);
		b.qpx->wr_id = 3;
		b.qpx->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
		mlx5dv_wr_mkey_configure(b.mqpx, rk, 2, &ca);
		mlx5dv_wr_set_mkey_access_flags(b.mqpx, IBV_ACCESS_LOCAL_WRITE);
		mlx5dv_wr_set_mkey_layout_list(b.mqpx, 2, rs);
		CHECK(rk && ibv_wr_complete(b.qpx) == 0 && !poll1(b.cq, &wc) &&
			      (int)wc.opcode == (int)MLX5DV_WC_UMR &&
			      wc.status == IBV_WC_SUCCESS,
		      "a list layout set with mlx5dv_wr_mkey_configure");
		CHECK(ibv_post_recv(b.qp, &rwr, &bad) == 0,
		      "a receive on the list mkey");
		CHECK(ret == 0 && !poll1(a.cq, &wc) &&
			      (int)wc.opcode == (int)MLX5DV_WC_UMR && !poll1(a.cq, &wc) &&
			      wc.status == IBV_WC_SUCCESS && wc.wr_id == 2,
		      "a SEND from a list mkey posted right behind its UMR");
		CHECK(!poll1(b.cq, &wc) && wc.status == IBV_WC_SUCCESS &&
			      wc.byte_len == 12 &&
			      memcmp(b.buf + 1024, "hello,", 6) == 0 &&
			      memcmp(b.buf + 2048, " world", 6) == 0,
		      "gathered from two pieces, scattered into two");
		if (rk)
			mlx5dv_destroy_mkey(rk);
	}

	/* More entries than max_inline_data holds: ENOMEM. */
	{
		struct ibv_sge many[9];

		for (i = 0; i < 9; i++)
			many[i] = (struct ibv_sge){ (uintptr_t)b.buf, 1,
						    b.mr->lkey };
		ibv_wr_start(b.qpx);
		b.qpx->wr_flags = IBV_SEND_INLINE;
		mlx5dv_wr_mr_list(b.mqpx, b.mkey, 0, 9, many);
		ret = ibv_wr_complete(b.qpx);
		CHECK(ret == ENOMEM, "9 entries past max_inline_data %d: %s",
		      INLINE, strerror(ret));
	}

	/* Past the layout's end: the responder refuses, nothing written. */
	memset(a.buf, 0x11, sizeof(data) + 1);
	CHECK(one_sided(&a, 0, b.mkey->rkey, 1, a.buf, sizeof(data)) ==
			      IBV_WC_REM_ACCESS_ERR &&
		      check_pattern(&b, data, 0, sizeof(data)) == 0,
	      "a WRITE past the layout's end: REM_ACCESS_ERR, nothing "
	      "touched");

	/* After LOCAL_INV, on a fresh pair, the mkey grants nothing. */
	{
		struct side c = { 0 }, d = { 0 };

		if (side_open(&c) || side_open(&d) ||
		    side_connect(&c, d.qp->qp_num) ||
		    side_connect(&d, c.qp->qp_num) ||
		    umr_interleaved(&d, IBV_SEND_SIGNALED | IBV_SEND_INLINE,
				    2)) {
			printf("FAIL: the second pair\n");
			return 1;
		}
		ibv_wr_start(d.qpx);
		d.qpx->wr_id = 4;
		d.qpx->wr_flags = IBV_SEND_SIGNALED;
		ibv_wr_local_inv(d.qpx, d.mkey->lkey);
		CHECK(ibv_wr_complete(d.qpx) == 0 && !poll1(d.cq, &wc) &&
			      wc.status == IBV_WC_SUCCESS &&
			      wc.opcode == IBV_WC_LOCAL_INV,
		      "LOCAL_INV of the mkey");
		memset(c.buf, 0x22, 16);
		CHECK(one_sided(&c, 0, d.mkey->rkey, 0, c.buf, 16) ==
				      IBV_WC_REM_ACCESS_ERR &&
			      d.buf[0] == FILL,
		      "a WRITE through the invalidated mkey: REM_ACCESS_ERR");
	}
	printf("%s\n", failures ? "FAILED" : "all passed");
	return failures ? 1 : 0;
}
