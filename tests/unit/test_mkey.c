// SPDX-License-Identifier: MIT
/*
 * Unit tests of indirect mkeys and UMR work requests (emulator/hca/mkey.c,
 * umr.c, emulator/engine/mkey_access.c; mlx5dv_create_mkey(3),
 * mlx5dv_wr_post(3)) on the engine fixture: the QP under test lays an
 * mkey out over its fixture buffer with a UMR, then crafted RDMA WRITEs,
 * READs and SENDs go through it, and its own SENDs gather through it.
 */
#include "config.h"

#include "unit.h"
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"


#define INLINE 64 /* room for 4 list entries, 3 interleaved (umr.c) */
#define ACK_OK (AETH_ACK | AETH_ACK_UNLIMITED)
#define ALL_ACCESS                                                             \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |                     \
	 IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)

/* Each case's mkey and its key (mk_setup). */
static struct emu_mkey *mk;
static uint32_t mkey;

/* The fixture, its QP made again with room for UMRs, and an mkey. */
static void mk_setup(struct fixture *f, uint16_t max_entries)
{
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC, .pd_id = 1,
		.cap = { .max_send_wr = 16, .max_recv_wr = 16,
			 .max_send_sge = 2, .max_recv_sge = 2,
			 .max_inline_data = INLINE },
		.owner = { .handle = 2 },
	};

	fx_setup(f, &default_params);
	init.send_cq = init.recv_cq = f->cq;
	init.owner.async_fd = f->async[1];
	CU_ASSERT_FATAL(emu_qp_destroy(f->qp) == 0);
	CU_ASSERT_FATAL(emu_qp_create(hca, &init, &f->qp, &f->qpn) == 0);
	fx_connect(f, &default_params);
	CU_ASSERT_FATAL(emu_mkey_create(hca, 1, max_entries, true, &mk,
					&mkey) == 0);
}

static void mk_teardown(struct fixture *f)
{
	CU_ASSERT(loop_settle(hca->engine, WAIT_MS));
	CU_ASSERT(emu_mkey_destroy(mk) == 0);
	fx_teardown(f);
}

static int post_umr(struct fixture *f, uint64_t wr_id, uint32_t key,
		    uint32_t access, uint32_t repeat, bool interleaved,
		    const struct emu_umr_entry *ent, uint16_t n)
{
	struct emu_umr u = {
		.mkey = key, .access = access, .interleaved = interleaved,
		.repeat_count = repeat, .num_entries = n, .entries = ent,
	};
	struct emu_wr_ext ext = { .umr = &u };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .opcode = EMU_WR_UMR,
		.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE,
	};
	struct ibv_send_wr *bad;

	return emu_post_send_ext(f->qp, &wr, &ext, &bad, false);
}

/* Interleaved over the target: 4 repetitions of 4 bytes every 16 at
 * TARGET_OFF and 8 bytes every 16 at TARGET_OFF + 2048; 48 bytes. */
#define IL_TOTAL 48u
static void umr_interleaved(struct fixture *f, uint32_t key)
{
	struct emu_umr_entry ent[2] = {
		{ fx_va(f, TARGET_OFF), 4, 12, f->key },
		{ fx_va(f, TARGET_OFF + 2048), 8, 8, f->key },
	};

	CU_ASSERT_FATAL(post_umr(f, 1, key, ALL_ACCESS, 4, true, ent, 2) == 0);
	expect_send_wc(f, 1, IBV_WC_SUCCESS, IBV_WC_DRIVER1, 0);
}

/* The buffer offset of byte off of the interleaved layout. */
static uint32_t il_where(uint32_t off)
{
	uint32_t r = off / 12, in = off % 12;

	return in < 4 ? TARGET_OFF + r * 16 + in
		      : TARGET_OFF + 2048 + r * 16 + in - 4;
}

/* A list over the local buffers: 10 bytes at +100, 20 at +500, 5 at
 * +50 of base; 35 bytes. */
static void umr_list(struct fixture *f, uint32_t key, uint32_t base)
{
	struct emu_umr_entry ent[3] = {
		{ fx_va(f, base + 100), 10, 0, f->key },
		{ fx_va(f, base + 500), 20, 0, f->key },
		{ fx_va(f, base + 50), 5, 0, f->key },
	};

	CU_ASSERT_FATAL(post_umr(f, 2, key, ALL_ACCESS, 1, false, ent, 3) ==
			0);
	expect_send_wc(f, 2, IBV_WC_SUCCESS, IBV_WC_DRIVER1, 0);
}

static uint32_t list_where(uint32_t base, uint32_t off)
{
	return off < 10 ? base + 100 + off
	       : off < 30 ? base + 500 + off - 10
			  : base + 50 + off - 30;
}

static void inject_write(struct fixture *f, uint32_t psn, uint64_t va,
			 uint32_t key, const uint8_t *msg, uint32_t len)
{
	struct loop_pkt p;

	craft(&p, f, IB_OP_WRITE_ONLY, psn, true, msg, len);
	set_reth(&p, va, key, len);
	loop_inject(&p);
}

/* A strided WRITE lands in the pattern byte for byte, from offset 0 and
 * from the middle of a piece, and nothing around it changes. */
static void test_mkey_write_interleaved(void)
{
	static uint8_t want[BUF_LEN];
	uint8_t msg[IL_TOTAL];
	struct fixture f;
	uint32_t i;

	mk_setup(&f, 4);
	fill(f.buf + TARGET_OFF, 8192, 9);
	memcpy(want, f.buf, BUF_LEN);
	umr_interleaved(&f, mkey);
	fill(msg, sizeof(msg), 3);
	inject_write(&f, RQ_PSN, 0, mkey, msg, IL_TOTAL);
	expect_ack(&f, RQ_PSN, ACK_OK, 1);
	for (i = 0; i < IL_TOTAL; i++)
		want[il_where(i)] = msg[i];
	CU_ASSERT(memcmp(want, f.buf, BUF_LEN) == 0);
	/* Zero-based: offset 6 is byte 2 of the second entry. */
	fill(msg, sizeof(msg), 4);
	inject_write(&f, RQ_PSN + 1, 6, mkey, msg, 20);
	expect_ack(&f, RQ_PSN + 1, ACK_OK, 2);
	for (i = 0; i < 20; i++)
		want[il_where(6 + i)] = msg[i];
	CU_ASSERT(memcmp(want, f.buf, BUF_LEN) == 0);
	mk_teardown(&f);
}

/* A READ of the interleaved layout returns the pattern. */
static void test_mkey_read_interleaved(void)
{
	uint8_t want[IL_TOTAL];
	struct loop_pkt p, *r;
	struct fixture f;
	uint32_t i;

	mk_setup(&f, 4);
	fill(f.buf + TARGET_OFF, 8192, 12);
	umr_interleaved(&f, mkey);
	for (i = 0; i < IL_TOTAL; i++)
		want[i] = f.buf[il_where(i)];
	craft(&p, &f, IB_OP_READ_REQUEST, RQ_PSN, true, NULL, 0);
	set_reth(&p, 0, mkey, IL_TOTAL);
	loop_inject(&p);
	r = expect_pkt(&f, IB_OP_READ_RESPONSE_ONLY, RQ_PSN);
	expect_aeth(r, ACK_OK, 1);
	CU_ASSERT_EQUAL(pkt_paylen(r), IL_TOTAL);
	CU_ASSERT(memcmp(pkt_data(r), want, IL_TOTAL) == 0);
	free(r);
	mk_teardown(&f);
}

/* A WRITE refused: NAK remote access error, the buffer as it was. */
static void write_refused(struct fixture *f, uint64_t va, uint32_t key,
			  uint32_t len)
{
	static uint8_t before[BUF_LEN];
	uint8_t msg[64];

	fill(msg, sizeof(msg), 6);
	memcpy(before, f->buf, BUF_LEN);
	inject_write(f, RQ_PSN, va, key, msg, len);
	expect_ack(f, RQ_PSN, AETH_NAK | AETH_NAK_REM_ACC_ERR, 0);
	expect_quiet();
	CU_ASSERT(memcmp(before, f->buf, BUF_LEN) == 0);
	CU_ASSERT_EQUAL(fx_state(f), IBV_QPS_ERR);
	expect_event(f, IBV_EVENT_QP_ACCESS_ERR);
}

/* A range running past the layout touches nothing. */
static void test_mkey_write_past_layout(void)
{
	struct fixture f;

	mk_setup(&f, 4);
	fill(f.buf + TARGET_OFF, 8192, 9);
	umr_interleaved(&f, mkey);
	write_refused(&f, IL_TOTAL - 8, mkey, 16);
	mk_teardown(&f);
}

/* An mkey never laid out names nothing. */
static void test_mkey_empty_refused(void)
{
	struct fixture f;

	mk_setup(&f, 4);
	write_refused(&f, 0, mkey, 8);
	mk_teardown(&f);
}

/* LOCAL_INV empties the mkey: a WRITE through it afterwards is refused. */
static void test_mkey_local_inv(void)
{
	struct ibv_send_wr wr = {
		.wr_id = 5, .opcode = IBV_WR_LOCAL_INV,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;
	struct fixture f;

	mk_setup(&f, 4);
	umr_interleaved(&f, mkey);
	wr.invalidate_rkey = mkey;
	CU_ASSERT_FATAL(emu_post_send(f.qp, &wr, &bad, false) == 0);
	expect_send_wc(&f, 5, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV, 0);
	write_refused(&f, 0, mkey, 8);
	mk_teardown(&f);
}

/* A SEND_WITH_INV naming an mkey created with remote invalidation: the
 * message is placed, then the mkey is emptied, so that a WRITE through
 * it afterwards is refused. */
static void test_mkey_send_with_inv(void)
{
	uint8_t msg[8];
	struct loop_pkt p;
	struct fixture f;

	mk_setup(&f, 4);
	umr_interleaved(&f, mkey);
	fx_post_recv(&f, 6, RECV_OFF, 64);
	fill(msg, sizeof(msg), 8);
	craft(&p, &f, IB_OP_SEND_ONLY_INV, RQ_PSN, true, msg, sizeof(msg));
	((struct ieth *)ext(&p, opcode_get(IB_OP_SEND_ONLY_INV)->ieth))->rkey =
		htobe32(mkey);
	loop_inject(&p);
	expect_recv(&f, 6, IBV_WC_SUCCESS, sizeof(msg));
	expect_ack(&f, RQ_PSN, ACK_OK, 1);
	CU_ASSERT(memcmp(f.buf + RECV_OFF, msg, sizeof(msg)) == 0);
	inject_write(&f, RQ_PSN + 1, 0, mkey, msg, 8);
	expect_ack(&f, RQ_PSN + 1, AETH_NAK | AETH_NAK_REM_ACC_ERR, 1);
	mk_teardown(&f);
}

static void post_send_mkey(struct fixture *f, uint64_t wr_id, uint32_t key,
			   uint64_t off, uint32_t len)
{
	struct ibv_sge sge = { .addr = off, .length = len, .lkey = key };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	CU_ASSERT_FATAL(emu_post_send(f->qp, &wr, &bad, false) == 0);
}

/* A SEND right behind the UMR gathers the pieces of its SGE's range. */
static void test_mkey_send_gathers(void)
{
	uint8_t want[30];
	struct loop_pkt *p;
	struct fixture f;
	uint32_t i;

	mk_setup(&f, 4);
	fill(f.buf + LOCAL_OFF, 1024, 21);
	umr_list(&f, mkey, LOCAL_OFF);
	for (i = 0; i < sizeof(want); i++)
		want[i] = f.buf[list_where(LOCAL_OFF, 3 + i)];
	post_send_mkey(&f, 7, mkey, 3, sizeof(want));
	p = expect_pkt(&f, IB_OP_SEND_ONLY, SQ_PSN);
	CU_ASSERT_EQUAL(pkt_paylen(p), sizeof(want));
	CU_ASSERT(memcmp(pkt_data(p), want, sizeof(want)) == 0);
	free(p);
	inject_ack(&f, SQ_PSN, ACK_OK, 1);
	expect_send_wc(&f, 7, IBV_WC_SUCCESS, IBV_WC_SEND, sizeof(want));
	mk_teardown(&f);
}

/* A local SGE past the layout: LOC_PROT_ERR, nothing sent. */
static void test_mkey_send_past_layout(void)
{
	struct fixture f;

	mk_setup(&f, 4);
	umr_list(&f, mkey, LOCAL_OFF);
	post_send_mkey(&f, 8, mkey, 30, 10);
	expect_send_wc(&f, 8, IBV_WC_LOC_PROT_ERR, IBV_WC_SEND, 0);
	expect_quiet();
	mk_teardown(&f);
}

/* A receive SGE on an mkey scatters the message over its pieces. */
static void test_mkey_recv_scatters(void)
{
	static uint8_t want[BUF_LEN];
	struct ibv_sge sge = { .addr = 2, .length = 33 };
	struct ibv_recv_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;
	struct fixture f;
	uint8_t msg[33];
	uint32_t i;

	mk_setup(&f, 4);
	umr_list(&f, mkey, RECV_OFF);
	memcpy(want, f.buf, BUF_LEN);
	sge.lkey = mkey;
	CU_ASSERT_FATAL(emu_post_recv(f.qp, &wr, &bad) == 0);
	fill(msg, sizeof(msg), 30);
	inject_send(&f, IB_OP_SEND_ONLY, RQ_PSN, msg, sizeof(msg));
	expect_recv(&f, 9, IBV_WC_SUCCESS, sizeof(msg));
	for (i = 0; i < sizeof(msg); i++)
		want[list_where(RECV_OFF, 2 + i)] = msg[i];
	CU_ASSERT(memcmp(want, f.buf, BUF_LEN) == 0);
	mk_teardown(&f);
}

/* A fetch-and-add through the mkey, on a word inside one piece. */
static void test_mkey_atomic(void)
{
	struct emu_umr_entry ent = { 0, 64, 0, 0 };
	struct loop_pkt p, *r;
	struct atmeth *a;
	uint64_t *target;
	struct fixture f;

	mk_setup(&f, 4);
	ent.addr = fx_va(&f, TARGET_OFF + 64);
	ent.lkey = f.key;
	CU_ASSERT_FATAL(post_umr(&f, 3, mkey, ALL_ACCESS, 1, false, &ent, 1) ==
			0);
	expect_send_wc(&f, 3, IBV_WC_SUCCESS, IBV_WC_DRIVER1, 0);
	target = (uint64_t *)(void *)(f.buf + TARGET_OFF + 64 + 16);
	*target = 10;
	craft(&p, &f, IB_OP_FETCH_ADD, RQ_PSN, true, NULL, 0);
	a = ext(&p, opcode_get(IB_OP_FETCH_ADD)->atmeth);
	a->va = htobe64(16); /* zero-based: byte 16 of the layout */
	a->rkey = htobe32(mkey);
	a->swap_add = htobe64(5);
	loop_inject(&p);
	r = expect_pkt(&f, IB_OP_ATOMIC_ACKNOWLEDGE, RQ_PSN);
	expect_aeth(r, ACK_OK, 1);
	CU_ASSERT_EQUAL(be64toh(((const struct atmack *)(r->data +
			opcode_get(r->data[0])->atmack))->orig), 10);
	free(r);
	CU_ASSERT_EQUAL(__atomic_load_n(target, __ATOMIC_SEQ_CST), 15);
	mk_teardown(&f);
}

/* The post-time checks (mlx5dv_wr_post(3), libmlx5): EINVAL. */
static void test_mkey_umr_limits(void)
{
	struct emu_umr_entry ent[5];
	struct ibv_send_wr wr = { .wr_id = 1, .opcode = EMU_WR_UMR };
	struct ibv_send_wr *bad;
	struct emu_mkey *big, *none;
	struct fixture f;
	uint32_t bkey, nkey;
	int i;

	mk_setup(&f, 3);
	CU_ASSERT_FATAL(emu_mkey_create(hca, 1, 8, false, &big, &bkey) == 0);
	CU_ASSERT_EQUAL(emu_mkey_create(hca, 1, 0, false, &none, &nkey),
			EINVAL);
	CU_ASSERT_EQUAL(emu_mkey_create(hca, 1, IBEMU_MAX_MKEY_ENTRIES + 1,
					false, &none, &nkey),
			EINVAL);
	for (i = 0; i < 5; i++)
		ent[i] = (struct emu_umr_entry){ fx_va(&f, TARGET_OFF + 64 * i),
						 8, 8, f.key };
	/* More than the mkey has room for; than the WQE holds. */
	CU_ASSERT_EQUAL(post_umr(&f, 1, mkey, 0, 1, true, ent, 4), EINVAL);
	CU_ASSERT_EQUAL(post_umr(&f, 1, bkey, 0, 1, true, ent, 4), EINVAL);
	ent[0].bytes_skip = ent[1].bytes_skip = ent[2].bytes_skip = 0;
	ent[3].bytes_skip = ent[4].bytes_skip = 0;
	CU_ASSERT_EQUAL(post_umr(&f, 1, bkey, 0, 1, false, ent, 5), EINVAL);
	CU_ASSERT_EQUAL(post_umr(&f, 1, bkey, 0, 1, false, ent, 0), EINVAL);
	CU_ASSERT_EQUAL(post_umr(&f, 1, bkey, 0, 0, true, ent, 1), EINVAL);
	CU_ASSERT_EQUAL(post_umr(&f, 1, bkey, IBV_ACCESS_MW_BIND, 1, false,
				 ent, 1),
			EINVAL);
	CU_ASSERT_EQUAL(post_umr(&f, 1, f.key, 0, 1, false, ent, 1), EINVAL);
	/* No layout beside it. */
	CU_ASSERT_EQUAL(emu_post_send(f.qp, &wr, &bad, false), EINVAL);
	expect_no_wc(&f);
	/* What fits: 4 list entries, 3 interleaved. */
	CU_ASSERT_EQUAL(post_umr(&f, 11, bkey, 0, 1, false, ent, 4), 0);
	expect_send_wc(&f, 11, IBV_WC_SUCCESS, IBV_WC_DRIVER1, 0);
	ent[0].bytes_skip = 8;
	CU_ASSERT_EQUAL(post_umr(&f, 12, mkey, 0, 2, true, ent, 3), 0);
	expect_send_wc(&f, 12, IBV_WC_SUCCESS, IBV_WC_DRIVER1, 0);
	CU_ASSERT(emu_mkey_destroy(big) == 0);
	mk_teardown(&f);
}

/* An entry outside its region fails the UMR as it executes. */
static void test_mkey_umr_bad_entry(void)
{
	struct emu_umr_entry ent = { 0, 64, 0, 0 };
	struct fixture f;

	mk_setup(&f, 4);
	ent.addr = fx_va(&f, BUF_LEN - 32);
	ent.lkey = f.key;
	CU_ASSERT_FATAL(post_umr(&f, 4, mkey, ALL_ACCESS, 1, false, &ent, 1) ==
			0);
	expect_send_wc(&f, 4, IBV_WC_LOC_PROT_ERR, IBV_WC_DRIVER1, 0);
	CU_ASSERT_EQUAL(fx_state(&f), IBV_QPS_ERR);
	mk_teardown(&f);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "mkey_write_interleaved", test_mkey_write_interleaved },
		{ "mkey_read_interleaved", test_mkey_read_interleaved },
		{ "mkey_write_past_layout", test_mkey_write_past_layout },
		{ "mkey_empty_refused", test_mkey_empty_refused },
		{ "mkey_local_inv", test_mkey_local_inv },
		{ "mkey_send_with_inv", test_mkey_send_with_inv },
		{ "mkey_send_gathers", test_mkey_send_gathers },
		{ "mkey_send_past_layout", test_mkey_send_past_layout },
		{ "mkey_recv_scatters", test_mkey_recv_scatters },
		{ "mkey_atomic", test_mkey_atomic },
		{ "mkey_umr_limits", test_mkey_umr_limits },
		{ "mkey_umr_bad_entry", test_mkey_umr_bad_entry },
		{ NULL, NULL },
	};

	return fx_run("mkey", tests);
}
