// SPDX-License-Identifier: MIT
/*
 * The completer: acknowledgements, NAKs, RDMA READ responses and atomic
 * acknowledgements turn send WQEs into completions, in order (IBA 9.7.5,
 * 10.8); the retransmit and RNR timers live here (IBA 9.7.6).
 *
 * Called with qp.lock held.
 */
#include "config.h"

#include <string.h>

#include "check_mem.h"
#include "check_recv.h"
#include "clock.h"
#include "engine.h"
#include "trace_rec.h"
#include "log.h"
#include "route.h"

/* The smallest retransmit timeout used, whatever the QP asks: a busy
 * 2-core machine may not schedule the peer within microseconds. */
#define COMP_MIN_TIMEOUT_NS (32ull * 1000 * 1000)

/* RNR NAK timer field encoding, IBA 9.7.5.2.8 table 45, in microseconds. */
const uint32_t comp_rnr_timer_us[32] = {
	655360, 10,    20,    30,    40,    60,    80,    120,
	160,	240,   320,   480,   640,   960,   1280,  1920,
	2560,	3840,  5120,  7680,  10240, 15360, 20480, 30720,
	40960,	61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/* Local ACK timeout 4.096 us * 2^timeout; 0 means infinite (IBA 11.2.5.2
 * / 9.7.6.1.3). */
static uint64_t comp_timeout_ns(const struct emu_qp *qp)
{
	uint64_t ns;

	if (!qp->attr.timeout)
		return 0;
	ns = 4096ull << qp->attr.timeout;
	return ns < COMP_MIN_TIMEOUT_NS ? COMP_MIN_TIMEOUT_NS : ns;
}

static uint64_t comp_peer_taken(const struct emu_qp *qp)
{
	return engine_peer_taken(qp->peer);
}

/*
 * A request that cannot leave because the peer's inbox is full met
 * congestion, not loss, when the peer took packets since the requester
 * found it full or is known to run (its consumer is then at most a grace
 * period from taking more, inbox.h): the timer starts again without
 * spending a retry.  A peer gone or stopped spends them as for a loss
 * (IBA 9.7.6.1.3).
 */
static bool comp_congested(struct emu_qp *qp)
{
	uint64_t taken;

	if (!qp->req.blocked)
		return false;
	taken = comp_peer_taken(qp);
	if (taken != qp->comp.peer_taken) {
		qp->comp.peer_taken = taken;
		return true;
	}
	return engine_peer_runs(qp->hca->engine, qp->peer_proc);
}

void comp_blocked_locked(struct emu_qp *qp)
{
	qp->comp.peer_taken = comp_peer_taken(qp);
}

/*
 * Start the transport timer (IBA 9.7.6.1).  It restarts at every
 * request sent after an idle moment, so it is armed lazily: the engine is
 * asked to look at the QP (the pending list, a lock and a wake-up check)
 * only when no look is due by the new deadline already.  A look that
 * finds the deadline moved later, or gone, moves or drops its own
 * (comp_timers_locked).
 */
void comp_arm_timer_locked(struct emu_qp *qp)
{
	uint64_t t = comp_timeout_ns(qp);

	if (!t || qp->comp.deadline)
		return;
	/* Milliseconds matter here: the coarse clock is enough and cheap. */
	qp->comp.deadline = clock_coarse_ns() + t;
	if (qp->comp.timer_at && qp->comp.timer_at <= qp->comp.deadline)
		return;
	qp->comp.timer_at = qp->comp.deadline;
	/* Already queued: its pass comes no later than the deadline it knew,
	 * which is older than this one; nothing to wake. */
	if (atomic_load_explicit(&qp->on_pending, memory_order_relaxed))
		return;
	engine_pending_add_locked(qp);
}

static void wqe_done(struct emu_qp *qp, struct wqe *w)
{
	if (wr_is(w->opcode, WR_RD_ATOMIC) && w->state != WQE_DONE && qp->req.rd_atomic)
		qp->req.rd_atomic--;
	w->state = WQE_DONE;
}

static void wqe_fail(struct emu_qp *qp, struct wqe *w,
		     enum ibv_wc_status status)
{
	if (wr_is(w->opcode, WR_RD_ATOMIC) && qp->req.rd_atomic)
		qp->req.rd_atomic--;
	w->state = WQE_ERROR;
	w->status = status;
}

/* The SQ of a QP in SQD has drained: say so once (manual 6.1.6). */
static void comp_check_drained(struct emu_qp *qp)
{
	if (!qp->comp.sqd_notify || qp->state != IBV_QPS_SQD ||
	    qp->sq.head != qp->req.next)
		return;
	qp->comp.sqd_notify = false;
	emu_event(&qp->owner, IBV_EVENT_SQ_DRAINED);
}

/* The fields of a send completion every status has. */
static void comp_wc_of(const struct emu_qp *qp, uint64_t wr_id,
		       enum ibv_wr_opcode opcode, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = wr_id;
	wc->opcode = wr_opcode_get(opcode)->wc_opcode;
	wc->qp_num = qp->qpn;
}

static void comp_wc(const struct emu_qp *qp, const struct wqe *w,
		    struct ibv_wc *wc)
{
	comp_wc_of(qp, w->wr_id, w->opcode, wc);
}

/*
 * Complete the WQEs at the head of the send queue that are done, in order:
 * a success only if signaled (IBA 10.8.3.1 / sq_sig_all), an error always,
 * after which the QP enters the error state.
 */
void comp_retire_locked(struct emu_qp *qp)
{
	struct ibv_wc wc;
	struct wqe *w;
	bool progress = false;

	while (qp->sq.head != qp->sq.tail) {
		w = wqe_ring_at(&qp->sq, qp->sq.head);
		if (w->state != WQE_DONE && w->state != WQE_ERROR)
			break;
		if (w->state == WQE_ERROR) {
			comp_wc(qp, w, &wc);
			wc.status = w->status;
			qp->sq.head++;
			if (qp->req.next == qp->sq.head - 1)
				qp->req.next = qp->sq.head;
			if (!cq_push(qp->scq, &wc, false))
				qp_fatal_locked(qp);
			else if (qp_is_reliable(qp))
				qp_error_locked(qp);
			else
				qp_sq_error_locked(qp);
			return;
		}
		qp->sq.head++;
		progress = true;
		check_mem_retire(qp, qp->sq.head - 1);
		/* An acknowledgement that passed a rewind's resend
		 * (comp_ack_upto) retires WQEs at and after req.next:
		 * the resend resumes behind them. */
		if (qp->req.next - qp->sq.head > qp->sq.tail - qp->sq.head)
			qp->req.next = qp->sq.head;
		/* Built only for a completion that is wanted. */
		if (!comp_wanted(qp, w->send_flags))
			continue;
		comp_wc(qp, w, &wc);
		wc.status = IBV_WC_SUCCESS;
		wc.byte_len = wr_is(w->opcode, WR_ATOMIC | WR_ATOMIC_WRITE)
				      ? 8
				      : w->length;
		if (!cq_push(qp->scq, &wc, false)) {
			qp_fatal_locked(qp);
			return;
		}
	}
	if (progress)
		comp_forward_locked(qp);
	comp_check_drained(qp);
}

void comp_unqueued_wc_locked(struct emu_qp *qp, uint64_t wr_id,
			     enum ibv_wr_opcode opcode, uint32_t byte_len)
{
	struct ibv_wc wc;

	comp_wc_of(qp, wr_id, opcode, &wc);
	wc.status = IBV_WC_SUCCESS;
	wc.byte_len = byte_len;
	if (!cq_push(qp->scq, &wc, false))
		qp_fatal_locked(qp);
}

/* An acknowledgement up to psn answers a resend from a NAK at or
 * before psn (IBA 9.7.5.2.1): the responder executed what it asked. */
static void comp_acked_answers(struct emu_qp *qp, uint32_t psn)
{
	if (qp->comp.told.on && psn_cmp(psn, qp->comp.told.psn) >= 0)
		qp->comp.told.on = false;
}

/* Forward progress: the retry budget is whole again and the transport
 * timer starts over. */
static void comp_budget_restore(struct emu_qp *qp)
{
	qp->comp.retry_left = qp->attr.retry_cnt;
	/* The transport timer waits for progress, not for the head of
	 * the queue to complete: restart it (IBA 9.7.6.1.1). */
	qp->comp.deadline = 0;
	comp_arm_timer_locked(qp);
}

/*
 * The responder has executed every request up to psn.  Beyond what it
 * had acknowledged before, that is forward progress: the retry budget is
 * whole again (IBA 9.7.6.1), as it counts the attempts at one PSN, not
 * the losses of a busy QP, whose NAKs name ever later PSNs while its
 * oldest READ is still being answered.
 */
static bool comp_progress(struct emu_qp *qp, uint32_t psn)
{
	if (psn_cmp(psn, qp->comp.acked_psn) <= 0 ||
	    psn_cmp(psn, qp->req.psn) >= 0)
		return false;
	qp->comp.acked_psn = psn;
	comp_budget_restore(qp);
	comp_acked_answers(qp, psn);
	return true;
}

/*
 * Everything up to and including psn is acknowledged (IBA 9.7.5.1).
 * Reads and atomics complete with their responses only: one that an
 * acknowledgement passes had its responses lost, since a responder
 * answers in request order (IBA 9.7.5.1.3, "implied NAK"); it is
 * returned, and nothing after it is acknowledged.  An acknowledgement
 * is good for any PSN up to the most recent one sent (IBA 9.7.5.1),
 * also one that a rewind has not come back to yet: a responder that
 * had executed them answers the packets sent before the rewind.
 */
static struct wqe *comp_ack_upto(struct emu_qp *qp, uint32_t psn)
{
	uint32_t i, end = req_sent_end(qp);
	struct wqe *w;

	for (i = qp->sq.head; i != end; i++) {
		w = wqe_ring_at(&qp->sq, i);
		if (w->state == WQE_DONE || w->state == WQE_ERROR)
			continue;
		if (psn_cmp(w->last_psn, psn) > 0)
			break;
		/* Passed (its last PSN is at or before psn): its
		 * responses were lost, unless it is being resent. */
		if (wr_is(w->opcode, WR_RD_ATOMIC))
			return w->state == WQE_SENT ? w : NULL;
		wqe_done(qp, w);
	}
	return NULL;
}

/* The outstanding WQE whose PSN range holds psn, or NULL. */
static struct wqe *comp_find(struct emu_qp *qp, uint32_t psn)
{
	struct wqe *w;
	uint32_t i;

	for (i = qp->sq.head; i != qp->req.next; i++) {
		w = wqe_ring_at(&qp->sq, i);
		if (w->state != WQE_SENT && w->state != WQE_SENDING)
			continue;
		if (psn_cmp(psn, w->first_psn) >= 0 &&
		    psn_cmp(psn, w->last_psn) <= 0)
			return w;
	}
	return NULL;
}

/* The oldest WQE still waiting for an answer, or blocked on its way out
 * (it is at req.next then). */
static struct wqe *comp_oldest(struct emu_qp *qp)
{
	uint32_t i, end = qp->req.next;
	struct wqe *w;

	if (qp->req.blocked && end != qp->sq.tail)
		end++;
	for (i = qp->sq.head; i != end; i++) {
		w = wqe_ring_at(&qp->sq, i);
		if (w->state == WQE_SENT || w->state == WQE_SENDING)
			return w;
	}
	return NULL;
}

/*
 * A sequence error, told (a NAK) or implied (a READ or atomic that a
 * later answer passed, or a gap in a READ's responses): resend from psn
 * while the retry budget lasts (IBA 9.7.5.2.1, 9.7.5.1.3, 9.7.6.1.3);
 * during an RNR wait the resend is already scheduled.  Once: until
 * something answers the resend, or the transport timer fires, another
 * sequence error at the same PSN (the old stream's later responses, the
 * acknowledgements of the requests resent behind it) means nothing new,
 * as rxe's started_retry.  Told and implied ones are kept apart: a NAK
 * at a later PSN, sent ahead of the responses the responder owes (resp.c),
 * does not make the next implied NAK of the READ resent before it look
 * new, which alternated the two resends until the budget was spent.
 */
static void comp_seq_retry(struct emu_qp *qp, uint32_t psn, bool implied)
{
	struct comp_resend *r = implied ? &qp->comp.implied : &qp->comp.told;
	struct wqe *w;

	if (r->on && r->psn == psn)
		return;

	ibemu_trace("comp qp %#x sequence retry from psn %#x%s, %u retries "
		    "left%s", qp->qpn, psn, implied ? " (implied)" : "",
		    qp->comp.retry_left,
		    qp->comp.rnr_resume ? " (RNR wait)" : "");
	if (qp->comp.rnr_resume)
		return;
	if (!qp->comp.retry_left) {
		w = comp_oldest(qp);
		if (w)
			wqe_fail(qp, w, IBV_WC_RETRY_EXC_ERR);
		return;
	}
	qp->comp.retry_left--;
	r->on = true;
	r->psn = psn;
	if (trace_rec_on())
		trace_rec("retry", "qp=%u psn=%u why=%s", (unsigned int)qp->qpn,
			  (unsigned int)psn, implied ? "implied_nak" : "nak_seq");
	req_rewind_from_locked(qp, psn);
}

/* Where a READ or atomic whose responses were lost resumes: a READ at
 * its first response missing, an atomic whole. */
static uint32_t comp_resume_psn(const struct wqe *w)
{
	return w->opcode == IBV_WR_RDMA_READ ? w->read_next : w->first_psn;
}

/* An implied NAK (IBA 9.7.5.1.3): the responses of lost, a READ or an
 * atomic that an acknowledgement passed, did not come. */
static void comp_implied_nak(struct emu_qp *qp, const struct wqe *lost)
{
	comp_seq_retry(qp, comp_resume_psn(lost), true);
}

/*
 * A response of w, a READ or an atomic, answers a resend from a PSN
 * inside w.  The responses of later requests do not: the responder may
 * have queued them before the resend reached it, and each passes the
 * READ or atomic still unanswered; taking them as answers would start
 * the resend again at every one and spend the whole retry budget in a
 * burst (IBA 9.7.6.1.3 counts the attempts that get no answer).
 */
static void comp_answered(struct emu_qp *qp, const struct wqe *w,
			  uint32_t psn)
{
	if (qp->comp.implied.on &&
	    psn_cmp(qp->comp.implied.psn, w->first_psn) >= 0 &&
	    psn_cmp(qp->comp.implied.psn, w->last_psn) <= 0)
		qp->comp.implied.on = false;
	comp_acked_answers(qp, psn);
}

/* Acknowledge up to psn; an implied NAK is a sequence error. */
static void comp_ack(struct emu_qp *qp, uint32_t psn)
{
	struct wqe *lost = comp_ack_upto(qp, psn);

	if (lost)
		comp_implied_nak(qp, lost);
}

static void comp_nak(struct emu_qp *qp, uint32_t psn, uint8_t code)
{
	static const enum ibv_wc_status status[] = {
		[AETH_NAK_INVALID_REQ] = IBV_WC_REM_INV_REQ_ERR,
		[AETH_NAK_REM_ACC_ERR] = IBV_WC_REM_ACCESS_ERR,
		[AETH_NAK_REM_OP_ERR] = IBV_WC_REM_OP_ERR,
		[AETH_NAK_INV_RD_REQ] = IBV_WC_REM_INV_RD_REQ_ERR,
	};
	struct wqe *w;

	/* A NAK acknowledges every earlier PSN (IBA 9.7.5.1.2).  The
	 * responder sends a NAK at once, ahead of READ responses it still
	 * owes (resp.c): a READ or atomic it passes is not taken as lost. */
	comp_ack_upto(qp, psn_add(psn, BTH_PSN_MASK));
	comp_progress(qp, psn_add(psn, BTH_PSN_MASK));
	if (code == AETH_NAK_PSN_SEQ_ERR) {
		/* Sequence error: resend from psn (IBA 9.7.5.2.1). */
		comp_seq_retry(qp, psn, false);
		return;
	}
	w = comp_find(qp, psn);
	if (!w)
		w = comp_oldest(qp);
	if (w)
		wqe_fail(qp, w,
			 code < sizeof(status) / sizeof(status[0]) &&
					 status[code] ? status[code]
						      : IBV_WC_REM_OP_ERR);
}

/* RNR NAK: wait the timer, then resend; rnr_retry 7 retries forever
 * (IBA 9.7.5.2.8). */
static void comp_rnr(struct emu_qp *qp, uint32_t psn, uint8_t timer)
{
	struct wqe *w;

	/* As for a NAK: a READ or atomic it passes is not taken as lost. */
	comp_ack_upto(qp, psn_add(psn, BTH_PSN_MASK));
	w = comp_find(qp, psn);
	if (!w)
		w = comp_oldest(qp);
	if (!w)
		return;
	if (qp->attr.rnr_retry != 7) {
		if (!qp->comp.rnr_left) {
			wqe_fail(qp, w, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		qp->comp.rnr_left--;
	}
	req_rewind_from_locked(qp, psn);
	qp->comp.deadline = 0;
	qp->comp.rnr_resume =
		clock_now_ns() + comp_rnr_timer_us[timer & 31] * 1000ull;
	if (trace_rec_on())
		trace_rec("rnr_wait", "qp=%u psn=%u us=%u", (unsigned int)qp->qpn,
			  (unsigned int)psn, comp_rnr_timer_us[timer & 31]);
	engine_pending_add_locked(qp);
}

/*
 * Whether a READ response fits where the READ expects it: the next PSN,
 * an MTU of data unless it is the last, exactly the rest if it is.
 */
static bool comp_read_resp_fits(const struct emu_qp *qp, const struct wqe *w,
				const struct pkt *p, uint32_t off)
{
	if (p->psn != w->read_next || off > w->length ||
	    p->paylen > w->length - off)
		return false;
	if (p->op->mask & OPM_LAST)
		return off + p->paylen == w->length;
	return p->paylen == qp->mtu;
}

static void comp_read_resp(struct emu_qp *qp, const struct pkt *p)
{
	struct wqe *w = comp_find(qp, p->psn), *lost;
	bool progress;
	uint32_t off;

	if (!w || w->opcode != IBV_WR_RDMA_READ)
		return; /* a duplicate or stray response: ignored */
	if (psn_cmp(p->psn, w->read_next) < 0)
		return; /* a response to a READ re-issued: seen already */
	/* A response acknowledges every earlier request (IBA 9.7.5.1.3),
	 * and implies the loss of an earlier READ or atomic unanswered:
	 * that one is resent first, with everything after it, this READ
	 * included, whatever gap its own responses show. */
	lost = comp_ack_upto(qp, psn_add(w->first_psn, BTH_PSN_MASK));
	if (lost) {
		comp_implied_nak(qp, lost);
		return;
	}
	off = (uint32_t)psn_cmp(p->psn, w->first_psn) * qp->mtu;
	if (!comp_read_resp_fits(qp, w, p, off)) {
		/* Once the READ is re-issued, the responses of the old
		 * stream still on their way do not fit either: ignored, as
		 * a responder NAKs a gap once (IBA 9.7.5.2.1), or each of
		 * them would re-issue it again and spend a retry. */
		if (w->read_reissued)
			return;
		/* A response went missing (or does not fit): an implied
		 * sequence error, the READ is re-issued from its first
		 * response missing (IBA 9.7.5.2.1, 9.7.5.1.3). */
		comp_seq_retry(qp, w->read_next, true);
		return;
	}
	w->read_reissued = false; /* the new stream has begun */
	comp_answered(qp, w, p->psn);
	progress = comp_progress(qp, p->psn);
	if (!off)
		check_read_place(qp, w, true);
	if (p->paylen && sge_copy(qp, w->sge, w->num_sge, off,
				  (void *)p->payload, p->paylen, true)) {
		wqe_fail(qp, w, IBV_WC_LOC_PROT_ERR);
		return;
	}
	w->read_next = psn_add(w->read_next, 1);
	/* A READ response taken for the first time is forward progress
	 * too, though its PSN is below what later requests' ACKs told:
	 * a READ whose responses were lost after those ACKs came is
	 * re-issued for the part missing, and each part that comes
	 * restores the budget, which counts the attempts that get no
	 * answer (IBA 9.7.6.1.3), not the losses of a long READ.  (In
	 * order, comp_progress did it already.) */
	if (!progress)
		comp_budget_restore(qp);
	if (p->op->mask & OPM_LAST)
		wqe_done(qp, w);
}

static void comp_atomic_ack(struct emu_qp *qp, const struct pkt *p)
{
	struct wqe *w = comp_find(qp, p->psn), *lost;
	uint64_t orig;

	if (!w || !wr_is(w->opcode, WR_ATOMIC))
		return;
	comp_answered(qp, w, p->psn);
	comp_progress(qp, p->psn);
	lost = comp_ack_upto(qp, psn_add(w->first_psn, BTH_PSN_MASK));
	if (lost) {
		comp_implied_nak(qp, lost);
		return;
	}
	orig = pkt_atmack_orig(p);
	check_read_place(qp, w, true);
	if (sge_copy(qp, w->sge, 1, 0, &orig, 8, true)) {
		wqe_fail(qp, w, IBV_WC_LOC_PROT_ERR);
		return;
	}
	wqe_done(qp, w);
}

/* What the completer makes of a response (traced with IBEMU_DEBUG). */
enum comp_outcome {
	COMP_IGNORED, /* not in RTS/SQD, or not from our connection */
	COMP_ACK, /* IBA 9.7.5.1 */
	COMP_RNR_NAK, /* IBA 9.7.5.2.8 */
	COMP_NAK, /* IBA 9.7.5.2.1-5 */
	COMP_READ_RESPONSE, /* IBA 9.7.5.1.3 */
	COMP_ATOMIC_ACK, /* IBA 9.7.5.1.4 */
	COMP_UNEXPECTED, /* a response opcode we do not take */
};

static const char *const comp_outcome_name[] = {
	[COMP_IGNORED] = "ignored",
	[COMP_ACK] = "ack",
	[COMP_RNR_NAK] = "rnr-nak",
	[COMP_NAK] = "nak",
	[COMP_READ_RESPONSE] = "read-response",
	[COMP_ATOMIC_ACK] = "atomic-ack",
	[COMP_UNEXPECTED] = "unexpected",
};

static enum comp_outcome comp_classify(struct emu_qp *qp, const struct pkt *p)
{
	uint8_t syn, code;

	if (qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_SQD)
		return COMP_IGNORED;
	/* RC, or an XRC initiator: responses of its own transport only
	 * (IBA 9.2, A14). */
	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_XRC_SEND) ||
	    !(p->op->mask & qp_opm_transport(qp)) ||
	    p->hdr->src_qpn != qp->attr.dest_qp_num ||
	    !route_from_peer_locked(qp, p->hdr->src_proc))
		return COMP_IGNORED;
	code = p->opcode & ~IB_OPCODE_MASK_PREFIX;
	if (code == IB_OP_ATOMIC_ACKNOWLEDGE)
		return COMP_ATOMIC_ACK;
	if (p->op->mask & OPM_READ)
		return COMP_READ_RESPONSE;
	if (code != IB_OP_ACKNOWLEDGE)
		return COMP_UNEXPECTED;
	syn = pkt_aeth_syndrome(p);
	switch (syn & AETH_TYPE_MASK) {
	case AETH_ACK:
		return COMP_ACK;
	case AETH_RNR_NAK:
		return COMP_RNR_NAK;
	case AETH_NAK:
		return COMP_NAK;
	default:
		return COMP_UNEXPECTED; /* reserved syndrome (table 44) */
	}
}

void comp_recv_locked(struct emu_qp *qp, const struct pkt *p)
{
	enum comp_outcome o;

	if (comp_fast_ack_locked(qp, p))
		return;
	o = comp_classify(qp, p);

	ibemu_trace("comp qp %#x psn %#x %s: %s", qp->qpn, p->psn,
		    p->op->name, comp_outcome_name[o]);
	switch (o) {
	case COMP_IGNORED:
		return;
	case COMP_ACK:
		comp_progress(qp, p->psn);
		comp_ack(qp, p->psn);
		break;
	case COMP_RNR_NAK:
		comp_rnr(qp, p->psn, pkt_aeth_syndrome(p) & 0x1f);
		break;
	case COMP_NAK:
		comp_nak(qp, p->psn, pkt_aeth_syndrome(p) & 0x1f);
		break;
	case COMP_READ_RESPONSE:
		comp_read_resp(qp, p);
		break;
	case COMP_ATOMIC_ACK:
		comp_atomic_ack(qp, p);
		break;
	case COMP_UNEXPECTED:
		break;
	}
	comp_retire_locked(qp);
	req_run_locked(qp);
}

/* Timers: RNR wait and retransmit timeout.  Returns the next deadline. */
uint64_t comp_timers_locked(struct emu_qp *qp, uint64_t now)
{
	uint64_t next = 0;
	struct wqe *w;

	if (qp->state != IBV_QPS_RTS &&
	    qp->state != IBV_QPS_SQD) {
		qp->comp.deadline = 0;
		qp->comp.timer_at = 0;
		qp->comp.rnr_resume = 0;
		return 0;
	}
	if (qp->comp.rnr_resume) {
		if (now >= qp->comp.rnr_resume) {
			qp->comp.rnr_resume = 0;
			req_run_locked(qp);
		} else {
			next = qp->comp.rnr_resume;
		}
	}
	if (qp->comp.deadline && now >= qp->comp.deadline) {
		qp->comp.deadline = 0;
		qp->comp.told.on = false;
		qp->comp.implied.on = false;
		w = comp_oldest(qp);
		if (w && comp_congested(qp)) {
			comp_arm_timer_locked(qp);
			w = NULL;
		}
		/* The primary path failed: an armed QP migrates and
		 * resends on the alternate one (IBA 17.2.8, apm.c). */
		if (w && !qp->comp.retry_left && apm_path_failed_locked(qp))
			w = NULL;
		if (w && !qp->comp.retry_left) {
			/* No answer within timeout * (retry_cnt + 1)
			 * (IBA 9.7.6.1.3). */
			wqe_fail(qp, w, IBV_WC_RETRY_EXC_ERR);
			comp_retire_locked(qp);
			return next;
		}
		if (w) {
			ibemu_trace("comp qp %#x timeout: resend from psn "
				    "%#x, %u retries left", qp->qpn,
				    w->first_psn, qp->comp.retry_left);
			qp->comp.retry_left--;
			if (trace_rec_on())
				trace_rec("retry", "qp=%u psn=%u why=timeout",
					  (unsigned int)qp->qpn,
					  (unsigned int)w->first_psn);
			req_rewind_locked(qp);
			req_run_locked(qp);
			comp_arm_timer_locked(qp);
		}
	}
	/* The next look at this QP for its timer: at its deadline, or none
	 * when it has none (then the pass drops it, unless other work
	 * keeps it queued). */
	qp->comp.timer_at = qp->comp.deadline;
	if (qp->comp.deadline && (!next || qp->comp.deadline < next))
		next = qp->comp.deadline;
	return next;
}
