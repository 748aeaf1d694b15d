// SPDX-License-Identifier: MIT
/*
 * A host of the fabric's subnet that is no ibemu node, for
 * tests/net/mcast-attack.sh: it sends UDP datagrams laid out as the
 * IP-multicast transport's (tp_frame.h, mcast_ip.c), each a UD SEND to
 * the multicast QP (IBA 10.5) of the group MGID at MLID, Q_Key QKEY,
 * from source QP 0xabcde, with a marker as payload.
 *
 *   mcast_spoof DEST PORT MGID MLID QKEY FROM SGID_IP4 MODE
 *
 * DEST: an IPv4 group (multicast) or a node's own address (unicast);
 * FROM: this host's address, the interface a multicast datagram leaves
 * by; the GRH's SGID is ::ffff:SGID_IP4 (FROM, or another's).  MODE:
 * plain (no MAC), badmac (TP_FRAME_F_MAC with a MAC of no key).  Sends
 * 8 datagrams, 20 ms apart; exit 0 when each was sent, 1 otherwise.
 */
#include <arpa/inet.h>
#include <endian.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "opcode.h"
#include "tp_frame.h"
#include "wire.h"

#define COUNT 8
#define MARKER "MCAST-SPOOF-MARKER-0123456789abc" /* 32 bytes */
#define MARKER_LEN 32

struct datagram {
	struct tp_frame_hdr f;
	struct tp_frame_grh g;
	struct bth b;
	struct deth d;
	uint8_t payload[MARKER_LEN];
	uint8_t mac[TP_FRAME_MAC_LEN];
};

static int usage(const char *me)
{
	fprintf(stderr,
		"usage: %s DEST PORT MGID MLID QKEY FROM SGID_IP4 plain|badmac\n",
		me);
	return 2;
}

int main(int argc, char **argv)
{
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct in_addr from, src;
	struct datagram p;
	size_t len = offsetof(struct datagram, mac);
	uint32_t body;
	int fd, k, sent = 0, ttl = 1;
	int badmac;

	if (argc != 9 || inet_pton(AF_INET, argv[1], &to.sin_addr) != 1 ||
	    inet_pton(AF_INET6, argv[3], p.g.dgid) != 1 ||
	    inet_pton(AF_INET, argv[6], &from) != 1 ||
	    inet_pton(AF_INET, argv[7], &src) != 1)
		return usage(argv[0]);
	badmac = !strcmp(argv[8], "badmac");
	if (!badmac && strcmp(argv[8], "plain"))
		return usage(argv[0]);
	to.sin_port = htons((uint16_t)atoi(argv[2]));

	memset(&p, 0, offsetof(struct datagram, g.dgid));
	body = (uint32_t)(len - sizeof(p.f));
	p.f.magic = htobe32(TP_FRAME_MAGIC);
	p.f.version = TP_FRAME_VERSION;
	p.f.type = TP_FRAME_DATA;
	p.f.flags = TP_FRAME_F_GRH | (badmac ? TP_FRAME_F_MAC : 0);
	p.f.len = htobe32(body);
	p.f.slid = htobe16(0x2); /* a LID of its choosing */
	p.f.dlid = htobe16((uint16_t)strtoul(argv[4], NULL, 0));
	p.f.src_qpn = htobe32(0xabcde);
	p.f.src_guid = htobe64(0x0247000000000099ull);
	p.f.src_slot = htobe32(3);
	p.f.dst_slot = htobe32(UINT32_MAX);
	p.f.src_token = htobe64(0x5eed5eedull);
	p.g.ver_tclass_flow = htobe32(6u << 28);
	p.g.paylen = htobe16((uint16_t)(body - sizeof(p.g)));
	p.g.next_hdr = TP_FRAME_GRH_NEXT_BTH;
	p.g.hop_limit = 1;
	p.g.sgid[10] = p.g.sgid[11] = 0xff;
	memcpy(p.g.sgid + 12, &src, 4);
	memset(&p.b, 0, sizeof(p.b));
	p.b.opcode = IB_OPCODE_UD | IB_OP_SEND_ONLY;
	p.b.pkey = htobe16(0xffff);
	p.b.qpn = htobe32(BTH_QPN_MULTICAST);
	p.d.qkey = htobe32((uint32_t)strtoul(argv[5], NULL, 0));
	p.d.sqp = htobe32(0xabcde);
	memcpy(p.payload, MARKER, MARKER_LEN);
	memset(p.mac, 0x5a, sizeof(p.mac));
	if (badmac)
		len = sizeof(p);

	fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 ||
	    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof(ttl))) {
		perror("socket");
		return 1;
	}
	if (IN_MULTICAST(ntohl(to.sin_addr.s_addr)) &&
	    setsockopt(fd, IPPROTO_IP, IP_MULTICAST_IF, &from, sizeof(from))) {
		perror("IP_MULTICAST_IF");
		return 1;
	}
	for (k = 0; k < COUNT; k++) {
		if (sendto(fd, &p, len, 0, (struct sockaddr *)&to,
			   sizeof(to)) == (ssize_t)len)
			sent++;
		usleep(20000);
	}
	close(fd);
	printf("mcast_spoof: %d of %d %s datagrams to %s:%s\n", sent, COUNT,
	       argv[8], argv[1], argv[2]);
	return sent == COUNT ? 0 : 1;
}
