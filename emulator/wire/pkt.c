// SPDX-License-Identifier: MIT
/*
 * Packets on the wire: parsing a received one (struct pkt) with the one
 * copy of its headers out of the sender's slot.  Its layout in the room
 * a transport gave is hdr.h's pkt_layout, inline for the fast path.
 * Nothing here knows QPs or transports.
 */
#include "config.h"

#include <string.h>

#include "hdr.h"

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
