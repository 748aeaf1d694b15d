// SPDX-License-Identifier: MIT
/*
 * Packets on the wire: laying out a packet's link header and BTH in the
 * room a transport gave (struct pkt_out), and parsing a received one
 * (struct pkt) with the one copy of its headers out of the sender's
 * slot.  Nothing here knows QPs or transports: the engine says where a
 * packet comes from and goes to (the link header's fields), the CM lays
 * out its MADs with the same call.
 */
#include "config.h"

#include <string.h>

#include "hdr.h"
#include "params.h"

void pkt_layout(struct pkt_out *out, const struct pkt_hdr *link,
		uint8_t opcode, uint32_t dst_qpn, uint32_t psn, bool ackreq,
		uint32_t paylen)
{
	const struct opcode_info *op = opcode_get(opcode);
	struct pkt_hdr *hdr;
	uint32_t pad = (4 - (paylen & 3)) & 3;

	out->op = op;
	out->base = out->pkt.data;
	hdr = out->pkt.hdr;
	hdr->len = op->hdr_len + paylen;
	hdr->slid = link->slid;
	hdr->dlid = link->dlid;
	hdr->src_qpn = link->src_qpn;
	hdr->src_proc = link->src_proc;
	hdr->flags = 0;
	/* Pad to 4 bytes as the wire does (IBA 9.2.3). */
	out_bth_init(out, opcode, pad, IBEMU_DEFAULT_PKEY, dst_qpn, psn,
		     ackreq);
}

bool pkt_parse(const struct tp_pkt *in, struct pkt *p)
{
	uint32_t len;

	p->link = *in->hdr;
	len = p->link.len;
	if (len < sizeof(struct bth) || len > PKT_MAX_LEN)
		return false;
	memcpy(p->hdrs, in->data, len < PKT_MAX_HDRS ? len : PKT_MAX_HDRS);
	p->hdr = &p->link;
	p->grh = NULL;
	if (p->link.flags & PKT_F_GRH) {
		p->grh_copy = *in->grh;
		p->grh = &p->grh_copy;
	}
	p->bth_base = p->hdrs;
	p->bth = (const struct bth *)p->hdrs;
	p->opcode = p->bth->opcode;
	p->op = opcode_get(p->opcode);
	if (!p->op->mask || len < p->op->hdr_len ||
	    p->op->hdr_len > PKT_MAX_HDRS)
		return false;
	p->psn = bth_psn(p->bth);
	p->qpn = bth_qpn(p->bth);
	p->payload = in->data + p->op->hdr_len;
	p->paylen = len - p->op->hdr_len;
	return true;
}
