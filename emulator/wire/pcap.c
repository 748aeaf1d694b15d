// SPDX-License-Identifier: MIT
/*
 * Packet capture (doc/design.md §15 "Packet capture").  With
 * IBEMU_PCAP=FILE every packet this process sends is written to a pcap file
 * as RoCEv2: Ethernet, IPv4, UDP to port 4791 (IBA Annex A17), then the
 * packet's own IB transport headers and payload, its pad bytes and an ICRC,
 * so Wireshark and tshark dissect it as InfiniBand.  "%p" in FILE becomes
 * the process ID; without it ".PID" is appended, one file per process.
 *
 * Addresses are made up from the LIDs (MAC 02:00:00:00:LID, IPv4
 * 127.0.LID): a node has no Ethernet or IP identity of its own.  The ICRC
 * is computed as a RoCEv2 HCA would (icrc.c), so `ibemu pcap check` and
 * any other checker accept it.  RDMA placed by the requester (cma.c) sends
 * no packet and is not captured; IBEMU_CMA=0 captures everything.
 *
 * Lock rule: pcap_lock serialises writes to the file.
 */
#include "config.h"

#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "icrc.h"
#include "log.h"
#include "pcap.h"
#include "wire.h"

#define PCAP_MAGIC 0xa1b2c3d4u
#define PCAP_LINKTYPE_ETHERNET 1
#define ROCEV2_UDP_PORT 4791 /* IBA Annex A17.2.1 */
#define ETH_HDR_LEN 14
#define IPV4_HDR_LEN 20
#define UDP_HDR_LEN 8
#define FRAME_HDR_LEN (ETH_HDR_LEN + IPV4_HDR_LEN + UDP_HDR_LEN)

FILE *_Atomic pcap_file;
static pthread_mutex_t pcap_lock = PTHREAD_MUTEX_INITIALIZER;

struct pcap_file_hdr {
	uint32_t magic;
	uint16_t major, minor;
	int32_t thiszone;
	uint32_t sigfigs, snaplen, linktype;
};

struct pcap_rec_hdr {
	uint32_t ts_sec, ts_usec, incl_len, orig_len;
};

static void pcap_name(char *buf, size_t len, const char *tmpl)
{
	const char *p = strstr(tmpl, "%p");

	if (p)
		snprintf(buf, len, "%.*s%d%s", (int)(p - tmpl), tmpl,
			 (int)getpid(), p + 2);
	else
		snprintf(buf, len, "%s.%d", tmpl, (int)getpid());
}

void pcap_open(void)
{
	const char *tmpl = getenv("IBEMU_PCAP");
	struct pcap_file_hdr h = {
		.magic = PCAP_MAGIC,
		.major = 2,
		.minor = 4,
		.snaplen = 65535,
		.linktype = PCAP_LINKTYPE_ETHERNET,
	};
	char name[4096];

	if (!tmpl || !*tmpl)
		return;
	pcap_name(name, sizeof(name), tmpl);
	pthread_mutex_lock(&pcap_lock);
	if (!pcap_file) {
		pcap_file = fopen(name, "we");
		if (!pcap_file)
			ibemu_log_err("IBEMU_PCAP: cannot create %s", name);
		else if (fwrite(&h, sizeof(h), 1, pcap_file) != 1)
			ibemu_log_err("IBEMU_PCAP: cannot write %s", name);
	}
	pthread_mutex_unlock(&pcap_lock);
}

void pcap_close(void)
{
	pthread_mutex_lock(&pcap_lock);
	if (pcap_file)
		fclose(pcap_file);
	pcap_file = NULL;
	pthread_mutex_unlock(&pcap_lock);
}

/* A forked child: the parent's file and buffer are not ours to flush. */
void pcap_forget(void)
{
	pcap_file = NULL;
}

static uint16_t ip_checksum(const uint8_t *p, size_t len)
{
	uint32_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static void lid_mac(uint8_t *mac, uint16_t lid)
{
	static const uint8_t base[6] = { 0x02, 0, 0, 0, 0, 0 };

	memcpy(mac, base, 6);
	mac[4] = (uint8_t)(lid >> 8);
	mac[5] = (uint8_t)lid;
}

/* The frame's Ethernet, IPv4 and UDP headers before the packet's bytes
 * (IBA Annex A17.2: RoCEv2 is IB transport over UDP over IP). */
static void frame_hdrs(uint8_t *frame, const struct pkt_hdr *hdr,
		       uint32_t ib_len)
{
	uint8_t *ip = frame + ETH_HDR_LEN, *udp = ip + IPV4_HDR_LEN;
	uint16_t udp_len = (uint16_t)(UDP_HDR_LEN + ib_len);
	uint16_t ip_len = (uint16_t)(IPV4_HDR_LEN + udp_len), v16;

	lid_mac(frame, hdr->dlid);
	lid_mac(frame + 6, hdr->slid);
	frame[12] = 0x08;
	frame[13] = 0x00; /* IPv4 */
	memset(ip, 0, IPV4_HDR_LEN);
	ip[0] = 0x45;
	v16 = htobe16(ip_len);
	memcpy(ip + 2, &v16, 2);
	ip[6] = 0x40; /* don't fragment */
	ip[8] = 64;
	ip[9] = 17; /* UDP */
	ip[12] = 127;
	ip[14] = (uint8_t)(hdr->slid >> 8);
	ip[15] = (uint8_t)hdr->slid;
	ip[16] = 127;
	ip[18] = (uint8_t)(hdr->dlid >> 8);
	ip[19] = (uint8_t)hdr->dlid;
	v16 = htobe16(ip_checksum(ip, IPV4_HDR_LEN));
	memcpy(ip + 10, &v16, 2);
	/* The source port carries entropy (IBA A17.3.4): the source QPN. */
	v16 = htobe16((uint16_t)(0xc000 | (hdr->src_qpn & 0x3fff)));
	memcpy(udp, &v16, 2);
	v16 = htobe16(ROCEV2_UDP_PORT);
	memcpy(udp + 2, &v16, 2);
	v16 = htobe16(udp_len);
	memcpy(udp + 4, &v16, 2);
	udp[6] = udp[7] = 0; /* no UDP checksum (IPv4) */
}

/*
 * The packet is in the receiver's inbox, shared memory its owner can
 * write: the link header is read once and the packet copied once, a
 * length no packet can have writing no record (nothing past the slot is
 * read); the pad, the ICRC and the record come from the copy.
 */
void pcap_write(const struct pkt_hdr *hdr_in, const uint8_t *bth_base)
{
	const struct pkt_hdr link = *hdr_in;
	uint8_t frame[FRAME_HDR_LEN + PKT_MAX_LEN + 3 + ICRC_LEN];
	uint8_t *ib = frame + FRAME_HDR_LEN;
	unsigned int npad;
	uint32_t ib_len, icrc;
	struct pcap_rec_hdr rec;
	struct timespec ts;

	if (!pcap_enabled())
		return;
	if (link.len < sizeof(struct bth) || link.len > PKT_MAX_LEN) {
		ibemu_log_dbg("IBEMU_PCAP: packet length %u not captured",
			      link.len);
		return;
	}
	memcpy(ib, bth_base, link.len);
	/* The BTH's PadCnt from its flags byte: the copy sits after the
	 * frame's 42 bytes of headers, not aligned for struct bth. */
	npad = (ib[offsetof(struct bth, flags)] >> BTH_PAD_SHIFT) & 3;
	memset(ib + link.len, 0, npad);
	ib_len = link.len + npad + ICRC_LEN;
	frame_hdrs(frame, &link, ib_len);
	if (icrc_compute(frame + ETH_HDR_LEN,
			 IPV4_HDR_LEN + UDP_HDR_LEN + link.len + npad, &icrc))
		return; /* not reached: the headers above are well formed */
	icrc_put(ib + link.len + npad, icrc);
	clock_gettime(CLOCK_REALTIME, &ts);
	rec.ts_sec = (uint32_t)ts.tv_sec;
	rec.ts_usec = (uint32_t)(ts.tv_nsec / 1000);
	rec.incl_len = rec.orig_len = FRAME_HDR_LEN + ib_len;

	pthread_mutex_lock(&pcap_lock);
	if (pcap_file &&
	    (fwrite(&rec, sizeof(rec), 1, pcap_file) != 1 ||
	     fwrite(frame, rec.incl_len, 1, pcap_file) != 1)) {
		ibemu_log_err("IBEMU_PCAP: write failed; capture stopped");
		fclose(pcap_file);
		pcap_file = NULL;
	}
	pthread_mutex_unlock(&pcap_lock);
}
