// SPDX-License-Identifier: MIT
/*
 * The RoCEv2 ICRC (icrc.c; IBA 7.8.1, Annex A17.3.3) against packets
 * Linux's rxe put on the wire (tests/data/rxe0-roce.pcap): the ICRC each
 * carries is the one computed; any one bit changed outside the variant
 * fields changes it; changes in the variant fields (TTL, DSCP/ECN, the
 * checksums, traffic class, flow label, hop limit, BTH resv8a) do not.
 */
#include "config.h"

#include <string.h>

#include "unit.h"

#include "icrc.h"

/* Packet 2 of rxe0-roce.pcap from its IPv4 header on: RC SEND_LAST, two
 * bytes of payload, two of pad, then the ICRC. */
static const uint8_t rxe_ipv4[] = {
	0x45, 0x00, 0x00, 0x30, 0x01, 0x1c, 0x40, 0x00, 0x40, 0x11, 0x25, 0x8d,
	0x0a, 0x09, 0x00, 0x01, 0x0a, 0x09, 0x00, 0x02, 0xc1, 0x21, 0x12, 0xb7,
	0x00, 0x1c, 0x00, 0x00, 0x02, 0x20, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11,
	0x80, 0x6c, 0x71, 0xb3, 0x78, 0xe1, 0x00, 0x00, 0xf3, 0x50, 0x8f, 0x2f,
};

/* Packet 73: RC SEND_ONLY of 100 bytes over IPv6. */
static const uint8_t rxe_ipv6[] = {
	0x60, 0x00, 0x00, 0x00, 0x00, 0x7c, 0x11, 0x40, 0xfd, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
	0xfd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
	0x00, 0x00, 0x00, 0x02, 0xc2, 0x11, 0x12, 0xb7, 0x00, 0x7c, 0x00, 0x00,
	0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x17, 0x80, 0xc3, 0x2e, 0xb4,
	0x13, 0xd9, 0x26, 0xfd, 0xe8, 0xee, 0xbc, 0x67, 0xa0, 0xb3, 0x7b, 0x84,
	0xa4, 0x02, 0x87, 0x1d, 0xb2, 0x6b, 0x2a, 0xb2, 0x45, 0xae, 0xfa, 0xff,
	0x3c, 0xec, 0x0e, 0xe2, 0x67, 0x3d, 0x8e, 0x7a, 0x16, 0xb4, 0x77, 0xff,
	0xa2, 0x33, 0x66, 0x43, 0xe6, 0xe1, 0xc7, 0x8a, 0xe3, 0x4e, 0xa7, 0x95,
	0xba, 0xd1, 0x47, 0xff, 0x7f, 0x42, 0xff, 0xbc, 0x2e, 0x0d, 0x9e, 0x95,
	0x4a, 0x2c, 0x0f, 0x61, 0xe0, 0x86, 0x60, 0x82, 0xb9, 0xc6, 0xc5, 0x9f,
	0xa7, 0x8c, 0x2a, 0x8a, 0xdb, 0xd1, 0x1f, 0x95, 0xa3, 0x67, 0x94, 0x22,
	0xa9, 0x93, 0xde, 0xd7, 0xa0, 0x7c, 0x6c, 0xeb, 0xa8, 0x7b, 0x4c, 0x88,
	0x01, 0xac, 0x0b, 0xba, 0x82, 0xfb, 0x85, 0x52,
};

/* The variant fields (A17.3.3) as masks over the packet's bytes. */
static const uint8_t var_ipv4[sizeof(rxe_ipv4)] = {
	[1] = 0xff, [8] = 0xff, [10] = 0xff, [11] = 0xff, /* ToS TTL csum */
	[26] = 0xff, [27] = 0xff, /* UDP checksum */
	[32] = 0xff, /* BTH resv8a */
};
static const uint8_t var_ipv6[sizeof(rxe_ipv6)] = {
	[0] = 0x0f, [1] = 0xff, [2] = 0xff, [3] = 0xff, /* class, flow */
	[7] = 0xff, /* hop limit */
	[46] = 0xff, [47] = 0xff, /* UDP checksum */
	[52] = 0xff, /* BTH resv8a */
};

static uint32_t icrc_of(const uint8_t *p, size_t len)
{
	uint32_t icrc = 0;

	CU_ASSERT_EQUAL_FATAL(icrc_compute(p, len - ICRC_LEN, &icrc), 0);
	return icrc;
}

static void check_wire(const uint8_t *pkt, size_t len)
{
	CU_ASSERT_EQUAL(icrc_of(pkt, len), icrc_get(pkt + len - ICRC_LEN));
}

static void test_rxe_ipv4(void)
{
	check_wire(rxe_ipv4, sizeof(rxe_ipv4));
}

static void test_rxe_ipv6(void)
{
	check_wire(rxe_ipv6, sizeof(rxe_ipv6));
}

/* Each bit covered as it is, flipped alone, changes the ICRC (a CRC finds
 * every one-bit error) or makes the packet no RoCEv2 one (IP version,
 * header length, protocol); each bit of a variant field does not. */
static void check_bits(const uint8_t *pkt, size_t len, const uint8_t *var)
{
	uint8_t copy[256];
	uint32_t good = icrc_get(pkt + len - ICRC_LEN);
	unsigned int changed = 0, same = 0, i, bit;
	uint32_t icrc;
	int r;

	CU_ASSERT_FATAL(len <= sizeof(copy));
	for (i = 0; i < len - ICRC_LEN; i++) {
		for (bit = 0; bit < 8; bit++) {
			memcpy(copy, pkt, len);
			copy[i] ^= (uint8_t)(1u << bit);
			r = icrc_compute(copy, len - ICRC_LEN, &icrc);
			if (var[i] & (1u << bit)) {
				CU_ASSERT(r == 0 && icrc == good);
				same++;
			} else {
				CU_ASSERT(r != 0 || icrc != good);
				changed++;
			}
		}
	}
	CU_ASSERT(changed > 0 && same > 0);
}

static void test_bits_ipv4(void)
{
	check_bits(rxe_ipv4, sizeof(rxe_ipv4), var_ipv4);
}

static void test_bits_ipv6(void)
{
	check_bits(rxe_ipv6, sizeof(rxe_ipv6), var_ipv6);
}

/* A router's hop: TTL one less and the checksum redone (RFC 1624). */
static void test_ttl(void)
{
	uint8_t copy[sizeof(rxe_ipv4)];

	memcpy(copy, rxe_ipv4, sizeof(copy));
	copy[8]--;
	copy[10]++;
	check_wire(copy, sizeof(copy));
}

/* No IPv4 or IPv6 UDP datagram with a BTH: no ICRC, nothing read past. */
static void test_not_rocev2(void)
{
	uint8_t copy[sizeof(rxe_ipv4)];
	uint32_t icrc;

	CU_ASSERT_EQUAL(icrc_compute(rxe_ipv4, 0, &icrc), -1);
	CU_ASSERT_EQUAL(icrc_compute(rxe_ipv4, 20 + 8 + 11, &icrc), -1);
	CU_ASSERT_EQUAL(icrc_compute(rxe_ipv6, 39, &icrc), -1);
	CU_ASSERT_EQUAL(icrc_compute(rxe_ipv6, 40 + 8 + 11, &icrc), -1);
	memcpy(copy, rxe_ipv4, sizeof(copy));
	copy[9] = 6; /* TCP */
	CU_ASSERT_EQUAL(icrc_compute(copy, sizeof(copy) - ICRC_LEN, &icrc), -1);
	copy[9] = 17;
	copy[0] = 0x44; /* IHL below 5 */
	CU_ASSERT_EQUAL(icrc_compute(copy, sizeof(copy) - ICRC_LEN, &icrc), -1);
	copy[0] = 0x4f; /* IHL past the end */
	CU_ASSERT_EQUAL(icrc_compute(copy, 40, &icrc), -1);
	copy[0] = 0x55;
	CU_ASSERT_EQUAL(icrc_compute(copy, sizeof(copy) - ICRC_LEN, &icrc), -1);
}

/* On the wire the ICRC goes least significant byte first. */
static void test_byte_order(void)
{
	uint8_t b[ICRC_LEN];

	icrc_put(b, 0x2f8f50f3u);
	CU_ASSERT_EQUAL(b[0], 0xf3);
	CU_ASSERT_EQUAL(b[3], 0x2f);
	CU_ASSERT_EQUAL(icrc_get(b), 0x2f8f50f3u);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "rxe's IPv4 packet", test_rxe_ipv4 },
		{ "rxe's IPv6 packet", test_rxe_ipv6 },
		{ "every bit of the IPv4 packet", test_bits_ipv4 },
		{ "every bit of the IPv6 packet", test_bits_ipv6 },
		{ "a router's TTL and checksum", test_ttl },
		{ "not RoCEv2", test_not_rocev2 },
		{ "byte order on the wire", test_byte_order },
		{ NULL, NULL },
	};

	return unit_run("icrc", tests);
}
