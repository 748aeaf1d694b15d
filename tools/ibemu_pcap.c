// SPDX-License-Identifier: MIT
/*
 * `ibemu pcap check FILE...` (doc/design.md §15 "Packet capture"): every
 * RoCEv2 packet (UDP to port 4791, IBA Annex A17.2.1) of each pcap file
 * has its ICRC recomputed (icrc.c, IBA 7.8.1 and A17.3.3) and compared
 * with the one it carries; one line per bad packet, a summary per file.
 * Reads what IBEMU_PCAP, tcpdump and Wireshark write: pcap in either byte
 * order, micro- or nanosecond timestamps; Ethernet (one 802.1Q tag or
 * none), Linux cooked SLL and SLL2 (`tcpdump -i any`); IPv4 and IPv6.
 *
 * The file is untrusted input: each record is read whole into a buffer of
 * its checked length and nothing is read past it.
 * Exit status: 0 all good, 1 a packet is bad, 2 a file is unreadable.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu_pcap.h"
#include "icrc.h"
#include "opcode.h"

#define PCAP_MAGIC_US 0xa1b2c3d4u
#define PCAP_MAGIC_NS 0xa1b23c4du
#define PCAPNG_MAGIC 0x0a0d0d0au
#define PCAP_FILE_HDR_LEN 24
#define PCAP_REC_HDR_LEN 16
#define PCAP_MAX_RECORD 262144 /* tcpdump's largest snapshot length */

#define LINKTYPE_ETHERNET 1
#define LINKTYPE_LINUX_SLL 113
#define LINKTYPE_LINUX_SLL2 276

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_IPV6 0x86dd
#define ETHERTYPE_VLAN 0x8100
#define ROCEV2_UDP_PORT 4791 /* IBA Annex A17.2.1 */
#define UDP_HDR_LEN 8
#define BTH_LEN 12

struct pcap_in {
	const char *name;
	FILE *f;
	bool swapped;
	uint32_t linktype;
	uint8_t *rec; /* PCAP_MAX_RECORD bytes */
};

struct pcap_counts {
	unsigned long packets, good, bad, skipped;
};

static uint16_t be16_at(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t u32_at(const uint8_t *p, bool swapped)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return swapped ? __builtin_bswap32(v) : v;
}

static int pcap_in_open(struct pcap_in *in)
{
	uint8_t h[PCAP_FILE_HDR_LEN];
	uint32_t magic;

	in->f = fopen(in->name, "re");
	if (!in->f) {
		fprintf(stderr, "ibemu: %s: %s\n", in->name, strerror(errno));
		return -1;
	}
	if (fread(h, sizeof(h), 1, in->f) != 1) {
		fprintf(stderr, "ibemu: %s: no pcap file header\n", in->name);
		return -1;
	}
	memcpy(&magic, h, 4);
	in->swapped = magic == __builtin_bswap32(PCAP_MAGIC_US) ||
		      magic == __builtin_bswap32(PCAP_MAGIC_NS);
	if (!in->swapped && magic != PCAP_MAGIC_US && magic != PCAP_MAGIC_NS) {
		fprintf(stderr, "ibemu: %s: not a pcap file%s\n", in->name,
			magic == PCAPNG_MAGIC ?
				" (pcapng: convert it with editcap -F pcap)" :
				"");
		return -1;
	}
	/* The link type is the low 16 bits (the others: FCS length). */
	in->linktype = u32_at(h + 20, in->swapped) & 0xffff;
	if (in->linktype != LINKTYPE_ETHERNET &&
	    in->linktype != LINKTYPE_LINUX_SLL &&
	    in->linktype != LINKTYPE_LINUX_SLL2) {
		fprintf(stderr, "ibemu: %s: link type %" PRIu32
			" (Ethernet, SLL or SLL2 only)\n", in->name,
			in->linktype);
		return -1;
	}
	return 0;
}

/* The next record into in->rec: 1 with *len_p and *orig_p set, 0 at the
 * end of the file, -1 when it is cut short or no record can be that long. */
static int pcap_in_next(struct pcap_in *in, uint32_t *len_p, uint32_t *orig_p)
{
	uint8_t h[PCAP_REC_HDR_LEN];
	size_t n = fread(h, 1, sizeof(h), in->f);

	if (n == 0 && feof(in->f))
		return 0;
	if (n != sizeof(h))
		return -1;
	*len_p = u32_at(h + 8, in->swapped);
	*orig_p = u32_at(h + 12, in->swapped);
	if (*len_p > PCAP_MAX_RECORD)
		return -1;
	if (*len_p && fread(in->rec, *len_p, 1, in->f) != 1)
		return -1;
	return 1;
}

/* Where the IP header of a frame of this link type starts, and its
 * ethertype; -1 when the frame is too short or carries no IP. */
static long link_ip(uint32_t linktype, const uint8_t *p, uint32_t len)
{
	uint32_t off, type;

	switch (linktype) {
	case LINKTYPE_ETHERNET:
		if (len < 14)
			return -1;
		type = be16_at(p + 12);
		off = 14;
		if (type == ETHERTYPE_VLAN) { /* IEEE 802.1Q */
			if (len < 18)
				return -1;
			type = be16_at(p + 16);
			off = 18;
		}
		break;
	case LINKTYPE_LINUX_SLL:
		if (len < 16)
			return -1;
		type = be16_at(p + 14);
		off = 16;
		break;
	default: /* LINKTYPE_LINUX_SLL2 */
		if (len < 20)
			return -1;
		type = be16_at(p);
		off = 20;
		break;
	}
	if (type != ETHERTYPE_IPV4 && type != ETHERTYPE_IPV6)
		return -1;
	return off;
}

enum verdict { V_SKIP, V_GOOD, V_BAD };

/*
 * One IP packet of len captured bytes, orig bytes on the wire from its
 * start: V_SKIP unless it is a UDP datagram to port 4791; then V_GOOD
 * when its ICRC is right, else V_BAD with the reason in why.
 */
static enum verdict check_ip(const uint8_t *ip, uint32_t len, uint32_t orig,
			     char *why, size_t why_len)
{
	uint32_t hlen, iplen, icrc;
	const uint8_t *udp;
	uint8_t opcode;

	if (len < 1)
		return V_SKIP;
	if (ip[0] >> 4 == 4) {
		hlen = (ip[0] & 0x0f) * 4u;
		if (hlen < 20 || len < hlen + UDP_HDR_LEN || ip[9] != 17)
			return V_SKIP;
		if (be16_at(ip + 6) & 0x1fff) /* not a first fragment */
			return V_SKIP;
		iplen = be16_at(ip + 2);
	} else if (ip[0] >> 4 == 6) {
		hlen = 40;
		if (len < hlen + UDP_HDR_LEN || ip[6] != 17)
			return V_SKIP;
		iplen = hlen + be16_at(ip + 4);
	} else {
		return V_SKIP;
	}
	udp = ip + hlen;
	if (be16_at(udp + 2) != ROCEV2_UDP_PORT)
		return V_SKIP;
	if (ip[0] >> 4 == 4 && be16_at(ip + 6) & 0x2000) {
		snprintf(why, why_len, "an IP fragment");
		return V_BAD;
	}
	if (iplen > len && orig > len) {
		snprintf(why, why_len, "cut short: %" PRIu32 " of %" PRIu32
			 " bytes captured", len, orig);
		return V_BAD;
	}
	if (iplen > len) {
		snprintf(why, why_len, "IP length %" PRIu32 " past the frame's"
			 " end (%" PRIu32 " bytes)", iplen, len);
		return V_BAD;
	}
	if (iplen < hlen + UDP_HDR_LEN + BTH_LEN + ICRC_LEN) {
		snprintf(why, why_len, "%" PRIu32 " bytes: too short for a BTH"
			 " and an ICRC", iplen);
		return V_BAD;
	}
	if (be16_at(udp + 4) != iplen - hlen) {
		snprintf(why, why_len, "UDP length %u, IP says %" PRIu32,
			 be16_at(udp + 4), iplen - hlen);
		return V_BAD;
	}
	opcode = udp[UDP_HDR_LEN];
	if (icrc_compute(ip, iplen - ICRC_LEN, &icrc)) {
		snprintf(why, why_len, "malformed headers");
		return V_BAD;
	}
	if (icrc == icrc_get(ip + iplen - ICRC_LEN))
		return V_GOOD;
	snprintf(why, why_len, "%s: ICRC 0x%08" PRIx32 ", should be 0x%08"
		 PRIx32, opcode_get(opcode)->name ? opcode_get(opcode)->name :
		 "reserved opcode", icrc_get(ip + iplen - ICRC_LEN), icrc);
	return V_BAD;
}

static void count(struct pcap_counts *c, const struct pcap_in *in,
		  enum verdict v, const char *why)
{
	switch (v) {
	case V_GOOD:
		c->good++;
		break;
	case V_BAD:
		c->bad++;
		printf("%s: packet %lu: %s\n", in->name, c->packets, why);
		break;
	default:
		c->skipped++;
		break;
	}
}

/* One file: 0 every RoCEv2 packet good, 1 one bad, 2 unreadable. */
static int check_file(struct pcap_in *in)
{
	struct pcap_counts c = { 0 };
	uint32_t len, orig;
	char why[160];
	long off;
	int r, rc = 0;

	if (pcap_in_open(in))
		return 2;
	while ((r = pcap_in_next(in, &len, &orig)) == 1) {
		c.packets++;
		off = link_ip(in->linktype, in->rec, len);
		if (off < 0) {
			count(&c, in, V_SKIP, NULL);
			continue;
		}
		count(&c, in, check_ip(in->rec + off, len - (uint32_t)off,
				       orig > (uint32_t)off ?
					       orig - (uint32_t)off : 0,
				       why, sizeof(why)), why);
	}
	if (r < 0) {
		fprintf(stderr, "ibemu: %s: record %lu is cut short or "
			"corrupt\n", in->name, c.packets + 1);
		rc = 2;
	}
	printf("%s: %lu packets, %lu ICRC good, %lu bad, %lu not RoCEv2 "
	       "skipped\n", in->name, c.packets, c.good, c.bad, c.skipped);
	return rc ? rc : c.bad ? 1 : 0;
}

static void pcap_usage(FILE *out)
{
	fprintf(out, "usage: ibemu pcap check FILE...\n"
		"Check the ICRC of every RoCEv2 packet of each pcap FILE.\n");
}

int cmd_pcap(int argc, char **argv)
{
	struct pcap_in in = { 0 };
	int i, r, rc = 0;

	if (argc < 3 || strcmp(argv[1], "check")) {
		pcap_usage(stderr);
		return 2;
	}
	in.rec = malloc(PCAP_MAX_RECORD);
	if (!in.rec) {
		fprintf(stderr, "ibemu: out of memory\n");
		return 2;
	}
	for (i = 2; i < argc; i++) {
		in.name = argv[i];
		r = check_file(&in);
		if (in.f)
			fclose(in.f);
		in.f = NULL;
		if (r > rc)
			rc = r;
	}
	free(in.rec);
	return rc;
}
