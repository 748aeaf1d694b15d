// SPDX-License-Identifier: MIT
/*
 * Packets as run trace events (doc/trace.md): the fields that name a
 * packet (source and destination QPs and LIDs, opcode, PSN) and what a
 * reader of a ladder wants beside them (payload length, AckReq, the
 * AETH's syndrome and MSN).
 */
#include "config.h"

#include <stdio.h>

#include "pkt_trace.h"
#include "trace_rec.h"

const char *aeth_trace_name(uint8_t syndrome)
{
	switch (syndrome & AETH_TYPE_MASK) {
	case AETH_ACK:
		return "ACK";
	case AETH_RNR_NAK:
		return "RNR";
	case AETH_NAK:
		switch (syndrome & ~AETH_TYPE_MASK) {
		case AETH_NAK_PSN_SEQ_ERR:
			return "NAK_SEQ";
		case AETH_NAK_INVALID_REQ:
			return "NAK_INV";
		case AETH_NAK_REM_ACC_ERR:
			return "NAK_ACC";
		case AETH_NAK_REM_OP_ERR:
			return "NAK_OP";
		case AETH_NAK_INV_RD_REQ:
			return "NAK_INV_RD";
		}
		return "NAK";
	}
	return "RESERVED";
}

void pkt_trace(const char *ev, const struct pkt *p, const char *extra)
{
	char aeth[40] = "";

	if (p->op->mask & OPM_AETH)
		snprintf(aeth, sizeof(aeth), " aeth=%s msn=%u",
			 aeth_trace_name(pkt_aeth_syndrome(p)),
			 (unsigned int)pkt_aeth_msn(p));
	trace_rec(ev, "sqp=%u dqp=%u slid=%u dlid=%u op=%s psn=%u len=%u%s%s%s",
		  (unsigned int)p->hdr->src_qpn, (unsigned int)p->qpn,
		  (unsigned int)p->hdr->slid, (unsigned int)p->hdr->dlid,
		  p->op->name, (unsigned int)p->psn, (unsigned int)p->paylen,
		  be32toh(p->bth->apsn) & BTH_ACKREQ ? " ack=1" : "", aeth,
		  extra);
}

void pkt_trace_out(const char *ev, const struct pkt_out *out, const char *extra)
{
	struct pkt p;

	if (pkt_parse(&out->pkt, &p))
		pkt_trace(ev, &p, extra);
}
