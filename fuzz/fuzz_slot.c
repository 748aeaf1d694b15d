// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of what is read out of one inbox slot (shared memory
 * its sender writes): the link header and the transport headers
 * (pkt_parse and every header accessor its opcode allows), a pulled
 * SEND's descriptor (resp_pull_desc_copy), and the pcap writer, which
 * reads back the packet being built in the receiver's inbox.
 *
 * Input: struct pkt_hdr, then the packet's data (BTH onwards; missing
 * bytes read as zero), then the GRH.  The data buffer holds exactly the
 * bytes the link header claims (up to a slot's room), so a read past
 * them is caught.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "pcap.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char pcap_dir[64];

static void fz_exit(void)
{
	char path[128];

	pcap_close();
	snprintf(path, sizeof(path), "%s/cap.%d", pcap_dir, (int)getpid());
	unlink(path);
	rmdir(pcap_dir);
}

/* Capture into /dev/null: a symlink where the capture file goes. */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[128];

	snprintf(pcap_dir, sizeof(pcap_dir), "/tmp/ibemu-fuzz-XXXXXX");
	if (!mkdtemp(pcap_dir))
		abort();
	snprintf(path, sizeof(path), "%s/cap.%d", pcap_dir, (int)getpid());
	if (symlink("/dev/null", path))
		abort();
	snprintf(path, sizeof(path), "%s/cap", pcap_dir);
	setenv("IBEMU_PCAP", path, 1);
	pcap_open();
	if (!pcap_enabled())
		abort();
	atexit(fz_exit);
	return 0;
}

/* Read every header the opcode has, as the engines do. */
static uint64_t read_headers(const struct pkt *p)
{
	uint32_t mask = p->op->mask;
	uint64_t sum = p->psn ^ p->qpn ^ p->paylen ^ p->hdr->slid ^
		       p->hdr->src_qpn ^ (uint32_t)p->hdr->src_proc;

	sum += pkt_se(p) + pkt_ackreq(p);
	if (mask & OPM_RETH)
		sum += pkt_reth_va(p) + pkt_reth_rkey(p) + pkt_reth_len(p);
	if (mask & OPM_AETH)
		sum += pkt_aeth_syndrome(p) + pkt_aeth_msn(p);
	if (mask & OPM_ATMETH)
		sum += pkt_atmeth_va(p) + pkt_atmeth_rkey(p) +
		       pkt_atmeth_swap_add(p) + pkt_atmeth_compare(p);
	if (mask & OPM_ATMACK)
		sum += pkt_atmack_orig(p);
	if (mask & OPM_IMMDT)
		sum += pkt_immdt(p);
	if (mask & OPM_DETH)
		sum += pkt_deth_qkey(p) + pkt_deth_sqp(p);
	if (p->hdr->flags & PKT_F_GRH)
		sum += p->grh->flow + p->grh->hop_limit + p->grh->sgid[15] +
		       p->grh->dgid[15];
	/* The payload: every byte the packet has, none after. */
	if (p->paylen)
		sum += p->payload[0] + p->payload[p->paylen - 1];
	return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pkt_hdr *hdr = calloc(1, sizeof(*hdr));
	struct pkt_grh *grh = calloc(1, sizeof(*grh));
	struct pull_desc_copy d;
	struct tp_pkt in;
	struct pkt p;
	uint32_t len;
	uint8_t *buf, *slot;
	size_t take;
	volatile uint64_t sink;

	if (!hdr || !grh)
		abort();
	take = size < sizeof(*hdr) ? size : sizeof(*hdr);
	memcpy(hdr, data, take);
	data += take;
	size -= take;
	len = hdr->len < PKT_MAX_LEN ? hdr->len : PKT_MAX_LEN;
	buf = calloc(1, len ? len : 1);
	if (!buf)
		abort();
	take = size < len ? size : len;
	memcpy(buf, data, take);
	data += take;
	size -= take;
	memcpy(grh, data, size < sizeof(*grh) ? size : sizeof(*grh));

	in.hdr = hdr;
	in.data = buf;
	in.grh = grh;
	in.slot = NULL;
	in.pos = 0;
	if (pkt_parse(&in, &p)) {
		/* What pkt_parse promises the engines. */
		if (p.op->hdr_len + p.paylen != hdr->len ||
		    p.payload != buf + p.op->hdr_len || p.hdr->len > PKT_MAX_LEN)
			abort();
		sink = read_headers(&p);
		if (resp_pull_desc_copy(p.payload, p.paylen, &d) &&
		    (d.nr > PULL_MAX_SEGS ||
		     sizeof(struct pull_desc) + d.nr * sizeof(d.seg[0]) >
			     p.paylen))
			abort();
	}
	/* The capture reads the packet being sent where it was built, in a
	 * slot's whole room. */
	slot = calloc(1, PKT_MAX_LEN);
	if (!slot)
		abort();
	memcpy(slot, buf, len);
	pcap_write(hdr, slot);
	free(slot);
	(void)sink;
	free(buf);
	free(grh);
	free(hdr);
	return 0;
}
