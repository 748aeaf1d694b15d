/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's protocol checks at the responder (check_proto.c;
 * emulator/base/check.h reports): a SEND with no receive posted (RNR,
 * with how long it waited), an RDMA access refused for its R_Key, range
 * or access, a datagram dropped for its Q_Key.  Each hook costs one relaxed load while checking is off.
 */
#ifndef IBEMU_CHECK_PROTO_H
#define IBEMU_CHECK_PROTO_H

#include <stdint.h>

#include "check.h"

struct emu_qp;
struct pkt;

void check_proto_rnr_slow(struct emu_qp *qp, const struct pkt *p);
void check_proto_rnr_end_slow(struct emu_qp *qp, const char *how);
void check_proto_nak_slow(struct emu_qp *qp, const struct pkt *p,
			  uint8_t nak);
void check_proto_qkey_slow(struct emu_qp *qp, const struct pkt *p);

/* The responder of qp sends an RNR NAK for request p; qp.lock held. */
static inline void check_proto_rnr(struct emu_qp *qp, const struct pkt *p)
{
	if (check_on())
		check_proto_rnr_slow(qp, p);
}

/* The RNR wait of qp's responder, if one is open, ends: a receive was
 * taken for the SEND (how NULL), or the QP was how ("destroyed", "reset",
 * "moved to the error state").  qp.lock held, or the QP out of the
 * engine. */
static inline void check_proto_rnr_end(struct emu_qp *qp, const char *how)
{
	if (check_on())
		check_proto_rnr_end_slow(qp, how);
}

/* The responder refuses request p with NAK code nak; qp.lock held. */
static inline void check_proto_nak(struct emu_qp *qp, const struct pkt *p,
				   uint8_t nak)
{
	if (check_on())
		check_proto_nak_slow(qp, p, nak);
}

/* The datagram p is dropped: its Q_Key is not the QP's. */
static inline void check_proto_qkey(struct emu_qp *qp, const struct pkt *p)
{
	if (check_on())
		check_proto_qkey_slow(qp, p);
}

#endif /* IBEMU_CHECK_PROTO_H */
