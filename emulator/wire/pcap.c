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
 * is written as zero.  RDMA placed by the requester (cma.c) sends no
 * packet and is not captured; IBEMU_CMA=0 captures everything.
 *
 * Lock rule: pcap_lock serialises writes to the file.
 */
#include "config.h"

#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "pcap.h"
#include "wire.h"

#define PCAP_MAGIC 0xa1b2c3d4u
#define PCAP_LINKTYPE_ETHERNET 1
#define ROCEV2_UDP_PORT 4791 /* IBA Annex A17.2.1 */
#define ICRC_LEN 4

static FILE *_Atomic pcap_file;
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

bool pcap_enabled(void)
{
	return atomic_load_explicit(&pcap_file, memory_order_relaxed) != NULL;
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

/*
 * The packet is in the receiver's inbox, shared memory its owner can
 * write: the link header and the BTH flags are read once, and a length
 * no packet can have writes no record (nothing past the slot is read).
 */
void pcap_write(const struct pkt_hdr *hdr_in, const uint8_t *bth_base)
{
	const struct pkt_hdr link = *hdr_in, *hdr = &link;
	uint8_t frame[14 + 20 + 8], pad[3] = { 0 }, icrc[ICRC_LEN] = { 0 };
	unsigned int npad;
	uint32_t ib_len;
	uint16_t udp_len, ip_len, v16;
	struct pcap_rec_hdr rec;
	struct timespec ts;
	uint8_t *ip = frame + 14, *udp = ip + 20;

	if (!pcap_enabled())
		return;
	if (link.len < sizeof(struct bth) || link.len > PKT_MAX_LEN) {
		ibemu_log_dbg("IBEMU_PCAP: packet length %u not captured",
			      link.len);
		return;
	}
	npad = bth_pad((const struct bth *)bth_base);
	ib_len = link.len + npad + ICRC_LEN;
	udp_len = (uint16_t)(8 + ib_len);
	ip_len = (uint16_t)(20 + udp_len);
	clock_gettime(CLOCK_REALTIME, &ts);
	rec.ts_sec = (uint32_t)ts.tv_sec;
	rec.ts_usec = (uint32_t)(ts.tv_nsec / 1000);
	rec.incl_len = rec.orig_len = sizeof(frame) + ib_len;

	lid_mac(frame, hdr->dlid);
	lid_mac(frame + 6, hdr->slid);
	frame[12] = 0x08;
	frame[13] = 0x00; /* IPv4 */
	memset(ip, 0, 20);
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
	v16 = htobe16(ip_checksum(ip, 20));
	memcpy(ip + 10, &v16, 2);
	/* The source port carries entropy (IBA A17.3.4): the source QPN. */
	v16 = htobe16((uint16_t)(0xc000 | (hdr->src_qpn & 0x3fff)));
	memcpy(udp, &v16, 2);
	v16 = htobe16(ROCEV2_UDP_PORT);
	memcpy(udp + 2, &v16, 2);
	v16 = htobe16(udp_len);
	memcpy(udp + 4, &v16, 2);
	udp[6] = udp[7] = 0; /* no UDP checksum (IPv4) */

	pthread_mutex_lock(&pcap_lock);
	if (pcap_file &&
	    (fwrite(&rec, sizeof(rec), 1, pcap_file) != 1 ||
	     fwrite(frame, sizeof(frame), 1, pcap_file) != 1 ||
	     fwrite(bth_base, hdr->len, 1, pcap_file) != 1 ||
	     (npad && fwrite(pad, npad, 1, pcap_file) != 1) ||
	     fwrite(icrc, sizeof(icrc), 1, pcap_file) != 1)) {
		ibemu_log_err("IBEMU_PCAP: write failed; capture stopped");
		fclose(pcap_file);
		pcap_file = NULL;
	}
	pthread_mutex_unlock(&pcap_lock);
}
