// SPDX-License-Identifier: MIT
/*
 * The checking mode's protocol checks at the responder (check_proto.h):
 * what the responder refuses or drops, said in the receiving process with
 * the receiving QP and the sender, and for a refused access why the key
 * does not allow it.  Called only while checking is on, under qp.lock.
 */
#include "config.h"

#include <stdio.h>

#include "check_proto.h"
#include "clock.h"
#include "engine.h"
#include "hca.h"

/* The access a request needs of its R_Key (IBA 10.6.3.2, C9-88). */
static int req_access(uint32_t mask, const char **name)
{
	if (mask & (OPM_ATOMIC | OPM_ATMETH)) {
		*name = "IBV_ACCESS_REMOTE_ATOMIC";
		return IBV_ACCESS_REMOTE_ATOMIC;
	}
	if (mask & OPM_READ) {
		*name = "IBV_ACCESS_REMOTE_READ";
		return IBV_ACCESS_REMOTE_READ;
	}
	*name = "IBV_ACCESS_REMOTE_WRITE";
	return IBV_ACCESS_REMOTE_WRITE;
}

/*
 * IBA 9.7.5.2.8: no receive WQE, the responder NAKs RNR and the requester
 * retries after the timer the NAK carries (the responder's min_rnr_timer),
 * rnr_retry times (7: for ever).  The report waits for the end of the
 * wait, to say how long it was: the first NAK of a SEND starts it, a
 * receive taken for it or the QP leaving the states that receive
 * (check_proto_rnr_end_slow) ends it.
 */
void check_proto_rnr_slow(struct emu_qp *qp, const struct pkt *p)
{
	struct check_qp *c = &qp->chk;
	uint64_t now = clock_now_ns();

	if (!qp_is_reliable(qp))
		return;
	if (!c->rnr.since_ns) {
		c->rnr.since_ns = now;
		c->rnr.naks = 0;
		c->rnr.psn = p->psn;
		c->rnr.src_qpn = p->hdr->src_qpn;
		c->rnr.slid = p->hdr->slid;
	}
	c->rnr.last_ns = now;
	c->rnr.naks++;
}

void check_proto_rnr_end_slow(struct emu_qp *qp, const char *how)
{
	struct check_qp *c = &qp->chk;
	uint8_t timer = qp->attr.min_rnr_timer & 31;
	uint64_t end;

	if (!c->rnr.since_ns)
		return;
	/* A receive taken: the SEND waited until now.  Otherwise its last
	 * NAK is the last the responder knows of it. */
	end = how ? c->rnr.last_ns : clock_now_ns();
	check_report(CHECK_RNR, qp->qpn, NULL,
		     "QP %#x: a SEND from QPN %#x (LID %u), PSN %#x, found no "
		     "receive posted and waited %.3f ms, %u RNR NAK%s of "
		     "min_rnr_timer %u (%u us), %s%s", qp->qpn,
		     c->rnr.src_qpn, c->rnr.slid, c->rnr.psn,
		     (double)(end - c->rnr.since_ns) / 1e6, c->rnr.naks,
		     c->rnr.naks == 1 ? "" : "s", timer,
		     comp_rnr_timer_us[timer],
		     how ? "and no receive was posted before the QP was "
			 : "until a receive was posted",
		     how ? how : "");
	c->rnr.since_ns = 0;
}

/* Why rkey does not grant [va, va+len) with access: the first check of
 * IBA 10.6.3.2's order that fails. */
static const char *access_why(struct emu_qp *qp, uint32_t rkey, uint64_t va,
			      uint64_t len, int access, const char *name,
			      char *buf, size_t size)
{
	struct emu_mr *mr;

	if (mw_key_is_window(rkey))
		return "a memory window that is not bound, is bound to "
		       "another QP or range, or lacks the access";
	mr = mr_lookup(qp->hca, rkey);
	if (mr && mr->mkey)
		return "an indirect mkey with no layout (never laid out by a "
		       "UMR, or invalidated), of another PD, or whose layout "
		       "or regions do not grant this access to this range";
	if (!mr)
		return "no region has this R_Key (never registered, or "
		       "deregistered)";
	if (mr->pd_id != qp->pd_id)
		return "the region is of another PD than the QP";
	if (!(mr->access & access)) {
		snprintf(buf, size, "the region was registered without %s",
			 name);
		return buf;
	}
	if (va < mr->iova || len > mr->length || va - mr->iova > mr->length - len) {
		snprintf(buf, size, "out of the region [%#llx, %#llx)",
			 (unsigned long long)mr->iova,
			 (unsigned long long)(mr->iova + mr->length));
		return buf;
	}
	return "the region's pages are not mapped with that access";
}

void check_proto_nak_slow(struct emu_qp *qp, const struct pkt *p,
			  uint8_t nak)
{
	uint32_t mask = p->op->mask, rkey;
	uint64_t va, len;
	const char *name, *why;
	char buf[96];
	int access = req_access(mask, &name);

	if (!(mask & (OPM_WRITE | OPM_READ | OPM_ATOMIC | OPM_ATMETH |
		      OPM_ATOMIC_WRITE)))
		return;
	if (mask & OPM_ATMETH) {
		rkey = pkt_atmeth_rkey(p);
		va = pkt_atmeth_va(p);
		len = 8;
	} else if (mask & OPM_RETH) {
		rkey = pkt_reth_rkey(p);
		va = pkt_reth_va(p);
		len = pkt_reth_len(p);
	} else {
		/* a WRITE's later packet: where its first one left off */
		rkey = qp->resp.wrkey;
		va = qp->resp.wva;
		len = p->paylen;
	}
	if (nak == AETH_NAK_REM_ACC_ERR)
		why = access_why(qp, rkey, va, len, access, name, buf,
				 sizeof(buf));
	else if (nak == AETH_NAK_INVALID_REQ &&
		 !(qp->attr.qp_access_flags & access) &&
		 !(mask & OPM_ATOMIC_WRITE)) {
		snprintf(buf, sizeof(buf), "the QP's qp_access_flags lack %s",
			 name);
		why = buf;
	} else {
		return;
	}
	check_report(CHECK_REMOTE_ACCESS, qp->qpn, NULL,
		     "QP %#x refused QPN %#x (LID %u): rkey %#x, address "
		     "%#llx, length %llu: %s", qp->qpn, p->hdr->src_qpn,
		     p->hdr->slid, rkey, (unsigned long long)va,
		     (unsigned long long)len, why);
}

/* IBA 10.2.5 (C10-15): a datagram's Q_Key must be the receiving QP's. */
void check_proto_qkey_slow(struct emu_qp *qp, const struct pkt *p)
{
	check_report(CHECK_QKEY, qp->qpn, NULL,
		     "QP %#x (Q_Key %#x) dropped a datagram from QPN %#x "
		     "(LID %u) with Q_Key %#x", qp->qpn, qp->attr.qkey,
		     pkt_deth_sqp(p), p->hdr->slid, pkt_deth_qkey(p));
}
