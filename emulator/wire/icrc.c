// SPDX-License-Identifier: MIT
/*
 * The invariant CRC (ICRC, IBA 7.8.1) of a RoCEv2 packet (IBA Annex A17
 * A17.3.3).  RoCEv2 has no LRH: eight bytes of 1s stand for it, then come
 * the IP header, the UDP header and the BTH with the fields a router or
 * switch may change on the way masked to 1s (the variant fields), then the
 * rest of the transport headers, the payload and the pad, unmasked.
 *
 * The CRC is CRC-32 with the Ethernet polynomial (IBA 7.8.1: that of
 * IEEE 802.3), bits taken least significant first, register preset to
 * all 1s; the ICRC is its complement.  On the wire it follows the pad
 * least significant byte first, as the Ethernet FCS does and as Linux's
 * rxe stores it (confirmed on tests/data/rxe0-roce.pcap).
 *
 * No state: safe from any thread.
 */
#include "config.h"

#include "icrc.h"

#define CRC32_POLY_REFLECTED 0xedb88320u /* IEEE 802.3, bits reversed */
#define IPV4_HDR_MIN 20
#define IPV6_HDR_LEN 40
#define UDP_HDR_LEN 8
#define BTH_LEN 12
#define BTH_RESV8A 4 /* the byte before the destination QP */
#define IPPROTO_UDP_NR 17

static uint32_t crc32_byte(uint32_t crc, uint8_t b)
{
	int i;

	crc ^= b;
	for (i = 0; i < 8; i++)
		crc = (crc >> 1) ^ (CRC32_POLY_REFLECTED & -(crc & 1));
	return crc;
}

static uint32_t crc32_bytes(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--)
		crc = crc32_byte(crc, *p++);
	return crc;
}

/* n bytes of 1s: a masked field. */
static uint32_t crc32_ones(uint32_t crc, size_t n)
{
	while (n--)
		crc = crc32_byte(crc, 0xff);
	return crc;
}

/* IPv4 (A17.3.3): Type of Service (DSCP and ECN), TTL and the header
 * checksum masked; the options, if any, are covered as they are. */
static uint32_t crc32_ipv4(uint32_t crc, const uint8_t *ip, size_t hlen)
{
	crc = crc32_bytes(crc, ip, 1);
	crc = crc32_ones(crc, 1); /* Type of Service */
	crc = crc32_bytes(crc, ip + 2, 6); /* length, ID, fragment */
	crc = crc32_ones(crc, 1); /* TTL */
	crc = crc32_bytes(crc, ip + 9, 1); /* protocol */
	crc = crc32_ones(crc, 2); /* header checksum */
	return crc32_bytes(crc, ip + 12, hlen - 12);
}

/* IPv6 (A17.3.3): traffic class, flow label and hop limit masked. */
static uint32_t crc32_ipv6(uint32_t crc, const uint8_t *ip)
{
	crc = crc32_byte(crc, ip[0] | 0x0f); /* version; traffic class */
	crc = crc32_ones(crc, 3); /* traffic class, flow label */
	crc = crc32_bytes(crc, ip + 4, 3); /* payload length, next header */
	crc = crc32_ones(crc, 1); /* hop limit */
	return crc32_bytes(crc, ip + 8, IPV6_HDR_LEN - 8);
}

/* The IP header's length, or 0 when it is no IPv4 or IPv6 header of a
 * UDP datagram within len bytes. */
static size_t ip_hdr_len(const uint8_t *ip, size_t len)
{
	size_t hlen;

	if (len < 1)
		return 0;
	switch (ip[0] >> 4) {
	case 4:
		hlen = (size_t)(ip[0] & 0x0f) * 4;
		if (hlen < IPV4_HDR_MIN || len < hlen ||
		    ip[9] != IPPROTO_UDP_NR)
			return 0;
		return hlen;
	case 6:
		if (len < IPV6_HDR_LEN || ip[6] != IPPROTO_UDP_NR)
			return 0;
		return IPV6_HDR_LEN;
	default:
		return 0;
	}
}

int icrc_compute(const uint8_t *ip, size_t len, uint32_t *icrc_p)
{
	size_t hlen = ip_hdr_len(ip, len), off;
	const uint8_t *udp, *bth;
	uint32_t crc = 0xffffffffu;

	if (!hlen || len < hlen + UDP_HDR_LEN + BTH_LEN)
		return -1;
	udp = ip + hlen;
	bth = udp + UDP_HDR_LEN;
	crc = crc32_ones(crc, 8); /* the LRH RoCEv2 has not */
	crc = ip[0] >> 4 == 4 ? crc32_ipv4(crc, ip, hlen) : crc32_ipv6(crc, ip);
	crc = crc32_bytes(crc, udp, 6);
	crc = crc32_ones(crc, 2); /* UDP checksum */
	crc = crc32_bytes(crc, bth, BTH_RESV8A);
	crc = crc32_ones(crc, 1); /* resv8a (IBA 9.2, A17.3.3) */
	off = hlen + UDP_HDR_LEN + BTH_RESV8A + 1;
	crc = crc32_bytes(crc, ip + off, len - off);
	*icrc_p = ~crc;
	return 0;
}

void icrc_put(uint8_t *p, uint32_t icrc)
{
	int i;

	for (i = 0; i < ICRC_LEN; i++)
		p[i] = (uint8_t)(icrc >> (8 * i));
}

uint32_t icrc_get(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}
