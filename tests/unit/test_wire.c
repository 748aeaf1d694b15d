// SPDX-License-Identifier: MIT
/*
 * The wire format and the opcode table against IBA chapter 9: header
 * sizes, which extended headers each opcode carries and where, and 24-bit
 * PSN arithmetic across the wrap.
 */
#include "config.h"

#include "unit.h"

#include "opcode.h"
#include "wire.h"

static void check_op(uint8_t code, const char *name, uint8_t hdr_len,
		     uint8_t reth, uint8_t aeth, uint8_t atmeth,
		     uint8_t atmack, uint8_t immdt, uint8_t deth)
{
	const struct opcode_info *op = opcode_get(code);

	CU_ASSERT_PTR_NOT_NULL_FATAL(op->name);
	CU_ASSERT_STRING_EQUAL(op->name, name);
	CU_ASSERT_EQUAL(op->hdr_len, hdr_len);
	CU_ASSERT_EQUAL(op->reth, reth);
	CU_ASSERT_EQUAL(op->aeth, aeth);
	CU_ASSERT_EQUAL(op->atmeth, atmeth);
	CU_ASSERT_EQUAL(op->atmack, atmack);
	CU_ASSERT_EQUAL(op->immdt, immdt);
	CU_ASSERT_EQUAL(op->deth, deth);
}

/* IBA 9.2 table 35 and 9.3: header order BTH DETH RETH AtomicETH AETH
 * AtomicAckETH ImmDt. */
static void test_opcode_layout(void)
{
	check_op(0x04, "RC_SEND_ONLY", 12, 0, 0, 0, 0, 0, 0);
	check_op(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", 16, 0, 0, 0, 0, 12, 0);
	check_op(0x06, "RC_RDMA_WRITE_FIRST", 28, 12, 0, 0, 0, 0, 0);
	check_op(0x07, "RC_RDMA_WRITE_MIDDLE", 12, 0, 0, 0, 0, 0, 0);
	check_op(0x0b, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 32, 12, 0, 0, 0,
		 28, 0);
	check_op(0x0c, "RC_RDMA_READ_REQUEST", 28, 12, 0, 0, 0, 0, 0);
	check_op(0x0d, "RC_RDMA_READ_RESPONSE_FIRST", 16, 0, 12, 0, 0, 0, 0);
	check_op(0x0e, "RC_RDMA_READ_RESPONSE_MIDDLE", 12, 0, 0, 0, 0, 0, 0);
	check_op(0x11, "RC_ACKNOWLEDGE", 16, 0, 12, 0, 0, 0, 0);
	check_op(0x12, "RC_ATOMIC_ACKNOWLEDGE", 24, 0, 12, 0, 16, 0, 0);
	check_op(0x13, "RC_COMPARE_SWAP", 40, 0, 0, 12, 0, 0, 0);
	check_op(0x14, "RC_FETCH_ADD", 40, 0, 0, 12, 0, 0, 0);
	check_op(0x2a, "UC_RDMA_WRITE_ONLY", 28, 12, 0, 0, 0, 0, 0);
	check_op(0x64, "UD_SEND_ONLY", 20, 0, 0, 0, 0, 0, 12);
	check_op(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", 24, 0, 0, 0, 0, 20, 12);
	/* SEND with Invalidate (IBA 9.3.8): the IETH right after the BTH;
	 * RC only. */
	check_op(0x16, "RC_SEND_LAST_WITH_INVALIDATE", 16, 0, 0, 0, 0, 0, 0);
	check_op(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", 16, 0, 0, 0, 0, 0, 0);
	CU_ASSERT_EQUAL(opcode_get(0x16)->ieth, 12);
	CU_ASSERT_EQUAL(opcode_get(0x17)->ieth, 12);
	CU_ASSERT_EQUAL(opcode_get(0x16)->mask & (OPM_SEND | OPM_ONLY),
			OPM_SEND | OPM_LAST);
	CU_ASSERT_EQUAL(opcode_get(0x17)->mask & (OPM_SEND | OPM_ONLY),
			OPM_SEND | OPM_ONLY);
	CU_ASSERT_EQUAL(opcode_get(0x37)->mask, 0);
}

/* IBA A14: the XRC opcodes (prefix 101b) are RC's; a request has the
 * XRCETH right after the BTH, a response has none. */
static void test_opcode_xrc(void)
{
	static const struct {
		uint8_t code;
		const char *name;
		uint8_t hdr_len, xrceth, reth, aeth, atmeth, atmack, immdt;
	} rows[] = {
		{ 0xa4, "XRC_SEND_ONLY", 16, 12, 0, 0, 0, 0, 0 },
		{ 0xa5, "XRC_SEND_ONLY_WITH_IMMEDIATE", 20, 12, 0, 0, 0, 0,
		  16 },
		{ 0xa6, "XRC_RDMA_WRITE_FIRST", 32, 12, 16, 0, 0, 0, 0 },
		{ 0xa7, "XRC_RDMA_WRITE_MIDDLE", 16, 12, 0, 0, 0, 0, 0 },
		{ 0xac, "XRC_RDMA_READ_REQUEST", 32, 12, 16, 0, 0, 0, 0 },
		{ 0xad, "XRC_RDMA_READ_RESPONSE_FIRST", 16, 0, 0, 12, 0, 0,
		  0 },
		{ 0xb1, "XRC_ACKNOWLEDGE", 16, 0, 0, 12, 0, 0, 0 },
		{ 0xb2, "XRC_ATOMIC_ACKNOWLEDGE", 24, 0, 0, 12, 0, 16, 0 },
		{ 0xb3, "XRC_COMPARE_SWAP", 44, 12, 0, 0, 16, 0, 0 },
		{ 0xb4, "XRC_FETCH_ADD", 44, 12, 0, 0, 16, 0, 0 },
	};
	size_t i;

	CU_ASSERT_EQUAL(sizeof(struct xrceth), 4);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct opcode_info *op = opcode_get(rows[i].code);

		CU_ASSERT_PTR_NOT_NULL_FATAL(op->name);
		CU_ASSERT_STRING_EQUAL(op->name, rows[i].name);
		CU_ASSERT(op->mask & OPM_XRC);
		CU_ASSERT(!(op->mask & (OPM_RC | OPM_UC | OPM_UD)));
		CU_ASSERT_EQUAL(!!(op->mask & OPM_XRCETH),
				!!(op->mask & OPM_REQ));
		CU_ASSERT_EQUAL(op->hdr_len, rows[i].hdr_len);
		CU_ASSERT_EQUAL(op->xrceth, rows[i].xrceth);
		CU_ASSERT_EQUAL(op->reth, rows[i].reth);
		CU_ASSERT_EQUAL(op->aeth, rows[i].aeth);
		CU_ASSERT_EQUAL(op->atmeth, rows[i].atmeth);
		CU_ASSERT_EQUAL(op->atmack, rows[i].atmack);
		CU_ASSERT_EQUAL(op->immdt, rows[i].immdt);
	}
	/* No RC opcode carries an XRCETH; past FETCH_ADD is reserved. */
	CU_ASSERT_EQUAL(opcode_get(0x04)->xrceth, 0);
	CU_ASSERT_EQUAL(opcode_get(0xb5)->mask, 0);
}

/* DC requests (prefix 110b, ours): RC's operations with the DCETH
 * after the BTH; there are no DC responses (they are RC's). */
static void test_opcode_dc(void)
{
	static const struct {
		uint8_t code;
		const char *name;
		uint8_t hdr_len, dceth, reth, atmeth, immdt;
	} rows[] = {
		{ 0xc4, "DC_SEND_ONLY", 24, 12, 0, 0, 0 },
		{ 0xc5, "DC_SEND_ONLY_WITH_IMMEDIATE", 28, 12, 0, 0, 24 },
		{ 0xca, "DC_RDMA_WRITE_ONLY", 40, 12, 24, 0, 0 },
		{ 0xcb, "DC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", 44, 12, 24, 0,
		  40 },
		{ 0xcc, "DC_RDMA_READ_REQUEST", 40, 12, 24, 0, 0 },
		{ 0xd4, "DC_FETCH_ADD", 52, 12, 0, 24, 0 },
	};
	size_t i;

	CU_ASSERT_EQUAL(sizeof(struct dceth), 12);
	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct opcode_info *op = opcode_get(rows[i].code);

		CU_ASSERT_PTR_NOT_NULL_FATAL(op->name);
		CU_ASSERT_STRING_EQUAL(op->name, rows[i].name);
		CU_ASSERT(op->mask & OPM_DC);
		CU_ASSERT(op->mask & OPM_DCETH);
		CU_ASSERT(op->mask & OPM_REQ);
		CU_ASSERT(!(op->mask & (OPM_RC | OPM_UC | OPM_UD | OPM_XRC)));
		CU_ASSERT_EQUAL(op->hdr_len, rows[i].hdr_len);
		CU_ASSERT_EQUAL(op->dceth, rows[i].dceth);
		CU_ASSERT_EQUAL(op->reth, rows[i].reth);
		CU_ASSERT_EQUAL(op->atmeth, rows[i].atmeth);
		CU_ASSERT_EQUAL(op->immdt, rows[i].immdt);
	}
	CU_ASSERT_EQUAL(opcode_get(0xcd)->mask, 0); /* no READ RESPONSE */
	CU_ASSERT_EQUAL(opcode_get(0xd1)->mask, 0); /* no ACKNOWLEDGE */
	CU_ASSERT_EQUAL(opcode_get(0x04)->dceth, 0);
}

static void test_opcode_kinds(void)
{
	CU_ASSERT(opcode_get(0x00)->mask & OPM_REQ);
	CU_ASSERT(opcode_get(0x00)->mask & OPM_FIRST);
	CU_ASSERT(!(opcode_get(0x00)->mask & OPM_LAST));
	CU_ASSERT((opcode_get(0x04)->mask & OPM_ONLY) == OPM_ONLY);
	CU_ASSERT(opcode_get(0x10)->mask & OPM_RESP);
	CU_ASSERT(opcode_get(0x10)->mask & OPM_READ);
	CU_ASSERT(opcode_get(0x22)->mask & OPM_UC);
	CU_ASSERT(opcode_get(0x64)->mask & OPM_UD);
	/* Reserved opcodes have no entry (the engine drops them). */
	CU_ASSERT_EQUAL(opcode_get(0x15)->mask, 0);
	CU_ASSERT_EQUAL(opcode_get(0x2c)->mask, 0);
	CU_ASSERT_EQUAL(opcode_get(0xff)->mask, 0);
	/* RC may not carry READ/atomic on UC (IBA 9.8): no such opcodes. */
	CU_ASSERT_EQUAL(opcode_get(0x2c)->mask & OPM_READ, 0);
}

/* 24-bit PSNs compare modulo 2^24 (IBA 9.7.1). */
static void test_psn_arith(void)
{
	CU_ASSERT(psn_cmp(5, 3) > 0);
	CU_ASSERT(psn_cmp(3, 5) < 0);
	CU_ASSERT(psn_cmp(7, 7) == 0);
	CU_ASSERT(psn_cmp(0x000002, 0xfffffe) > 0); /* across the wrap */
	CU_ASSERT(psn_cmp(0xfffffe, 0x000002) < 0);
	CU_ASSERT_EQUAL(psn_add(0xffffff, 1), 0);
	CU_ASSERT_EQUAL(psn_add(0xfffffe, 5), 3);
}

static void test_bth_fields(void)
{
	struct bth b = {
		.qpn = htobe32(0xff123456),
		.apsn = htobe32(BTH_ACKREQ | 0xabcdef),
		.flags = (uint8_t)(3 << BTH_PAD_SHIFT),
	};

	CU_ASSERT_EQUAL(bth_qpn(&b), 0x123456);
	CU_ASSERT_EQUAL(bth_psn(&b), 0xabcdef);
	CU_ASSERT_EQUAL(bth_pad(&b), 3);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "opcode_layout", test_opcode_layout },
		{ "opcode_kinds", test_opcode_kinds },
		{ "opcode_xrc", test_opcode_xrc },
		{ "opcode_dc", test_opcode_dc },
		{ "psn_arith", test_psn_arith },
		{ "bth_fields", test_bth_fields },
		{ NULL, NULL },
	};

	return unit_run("wire", tests);
}
