// SPDX-License-Identifier: MIT
/*
 * XRC: extended reliable connected transport (IBA Annex A14).
 *
 * An XRC domain (A14) groups XRC SRQs and XRC target QPs.  An XRC
 * initiator QP (A14) is an RC requester without a receive queue; each
 * request carries an XRCETH naming an XRC SRQ (A14), and the target
 * QP it reaches, which has no receive queue, send queue, PD or CQs of its
 * own, receives into that SRQ, completes on the SRQ's CQ and checks R_Keys
 * against the SRQ's PD, provided the SRQ belongs to the target QP's
 * domain (A14).
 *
 * ibemu keeps a domain, its SRQs and its target QPs in one process: the
 * same file opened by two processes gives each its own domain, and a
 * request naming an SRQ of another process is refused (logged, NAKed).
 * XRC SRQ numbers come from the node's QPN space, so every SRQ number is
 * unique on the node and its owner is known.
 *
 * Lock rule: hca.lock protects hca.xrcds and each domain's refs and
 * usecnt; engine.lock protects hca.xsrqs, which the responder walks.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include "engine.h"
#include "hca.h"
#include "log.h"

/* The open domain tied to (dev, ino); caller holds hca.lock. */
static struct emu_xrcd *xrcd_find_locked(struct emu_hca *hca, uint64_t dev,
					 uint64_t ino)
{
	struct emu_xrcd *x;

	for (x = hca->xrcds; x; x = x->next)
		if (x->ino && x->dev == dev && x->ino == ino)
			return x;
	return NULL;
}

int emu_xrcd_open(struct emu_hca *hca, uint64_t dev, uint64_t ino,
		  int oflags, struct emu_xrcd **xrcd_p)
{
	struct emu_xrcd *x = NULL;
	int ret = 0;

	if (oflags & ~(O_CREAT | O_EXCL))
		return EINVAL;
	pthread_mutex_lock(&hca->lock);
	if (ino)
		x = xrcd_find_locked(hca, dev, ino);
	if (x) {
		/* O_CREAT | O_EXCL: fail if the inode has a domain. */
		if ((oflags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
			ret = EINVAL;
			goto out;
		}
		x->refs++;
		goto out;
	}
	/* No domain yet: only O_CREAT makes one (ibv_open_xrcd(3)). */
	if (!(oflags & O_CREAT)) {
		ret = EINVAL;
		goto out;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		ret = ENOMEM;
		goto out;
	}
	x->hca = hca;
	x->dev = dev;
	x->ino = ino;
	x->refs = 1;
	x->next = hca->xrcds;
	hca->xrcds = x;
out:
	pthread_mutex_unlock(&hca->lock);
	if (!ret)
		*xrcd_p = x;
	return ret;
}

/* Forget a domain nobody opens or uses any more; caller holds hca.lock.
 * true if it was freed. */
static bool xrcd_release_locked(struct emu_xrcd *x)
{
	struct emu_xrcd **pp;

	if (x->refs || x->usecnt)
		return false;
	for (pp = &x->hca->xrcds; *pp; pp = &(*pp)->next) {
		if (*pp == x) {
			*pp = x->next;
			break;
		}
	}
	free(x);
	return true;
}

/*
 * Closing the last handle of a domain tied to no file fails while SRQs
 * or QPs use it; a domain tied to a file outlives its handles as long as
 * they do (as the kernel's uverbs keeps an inode's XRCD).
 */
int emu_xrcd_close(struct emu_xrcd *x)
{
	struct emu_hca *hca = x->hca;

	pthread_mutex_lock(&hca->lock);
	if (!x->ino && x->refs == 1 && x->usecnt) {
		pthread_mutex_unlock(&hca->lock);
		return EBUSY;
	}
	x->refs--;
	xrcd_release_locked(x);
	pthread_mutex_unlock(&hca->lock);
	return 0;
}

/* A domain gains or loses an SRQ or target QP. */
void xrcd_use(struct emu_xrcd *x, int n)
{
	struct emu_hca *hca = x->hca;

	pthread_mutex_lock(&hca->lock);
	x->usecnt += n;
	xrcd_release_locked(x);
	pthread_mutex_unlock(&hca->lock);
}

int emu_srq_create_xrc(struct emu_hca *hca, uint64_t pd_id,
		       struct emu_xrcd *xrcd, struct emu_cq *cq,
		       struct ibv_srq_attr *attr, const struct emu_owner *owner,
		       const struct emu_buf_alloc *alloc,
		       struct emu_srq **srq_p, uint32_t *srqn_p)
{
	struct engine *e = hca->engine;
	struct emu_srq *srq;
	int ret;

	if (!xrcd || !cq)
		return EINVAL;
	ret = emu_srq_create(hca, pd_id, attr, owner, alloc, &srq);
	if (ret)
		return ret;
	ret = -node_qpn_alloc(&hca->node, NODE_QPT_XRC_SRQ, &srq->srqn);
	if (ret) {
		emu_srq_destroy(srq);
		return ret;
	}
	srq->xrcd = xrcd;
	srq->cq = cq;
	atomic_fetch_add(&cq->usecnt, 1);
	xrcd_use(xrcd, 1);
	emu_lock(&e->lock);
	srq->xsrq_next = hca->xsrqs;
	hca->xsrqs = srq;
	emu_unlock(&e->lock);
	*srq_p = srq;
	*srqn_p = srq->srqn;
	return 0;
}

/*
 * Withdraw an XRC SRQ before it is freed: no request finds it any more,
 * and a target QP bound to it lets it go, flushing the receive of a
 * message it left open (IBA 10.3.1).
 */
void xrc_srq_withdraw(struct emu_srq *srq)
{
	struct emu_hca *hca = srq->hca;
	struct engine *e = hca->engine;
	struct emu_srq **pp;
	struct emu_qp *qp;

	emu_lock(&e->lock);
	for (pp = &hca->xsrqs; *pp; pp = &(*pp)->xsrq_next) {
		if (*pp == srq) {
			*pp = srq->xsrq_next;
			break;
		}
	}
	for (qp = e->all_qps; qp; qp = qp->all_next) {
		if (qp->type != IBV_QPT_XRC_RECV)
			continue;
		emu_lock(&qp->lock);
		if (qp->srq == srq) {
			resp_flush_open_locked(qp);
			qp->srq = NULL;
			qp->rcq = NULL;
			qp->pd_id = 0;
		}
		emu_unlock(&qp->lock);
	}
	emu_unlock(&e->lock);
	node_qpn_free(&hca->node, srq->srqn);
	atomic_fetch_sub(&srq->cq->usecnt, 1);
	xrcd_use(srq->xrcd, -1);
}

int xrc_bind_locked(struct emu_qp *qp, uint32_t srqn, bool open_message)
{
	struct emu_srq *srq;
	int32_t slot;

	if (qp->srq && qp->srq->srqn == srqn)
		return -1;
	/* A message continues on the SRQ its first packet named. */
	if (open_message) {
		ibemu_log_dbg("xrc qp %#x: srq %#x named inside a message "
			      "begun on another", qp->qpn, srqn);
		return AETH_NAK_INVALID_REQ;
	}
	for (srq = qp->hca->xsrqs; srq; srq = srq->xsrq_next)
		if (srq->srqn == srqn)
			break;
	if (!srq) {
		slot = node_qpn_owner_slot(&qp->hca->node, srqn);
		if (slot >= 0 && slot != qp->hca->node.proc_slot)
			ibemu_log_err("XRC target QP %#x: SRQ %#x belongs to "
				      "another process; ibemu does not share "
				      "XRC domains between processes",
				      qp->qpn, srqn);
		else
			ibemu_log_dbg("xrc qp %#x: no XRC SRQ %#x", qp->qpn,
				      srqn);
		return AETH_NAK_INVALID_REQ;
	}
	/* The SRQ must be of the target QP's domain (IBA A14). */
	if (srq->xrcd != qp->xrcd) {
		ibemu_log_dbg("xrc qp %#x: SRQ %#x of another XRC domain",
			      qp->qpn, srqn);
		return AETH_NAK_INVALID_REQ;
	}
	qp->srq = srq;
	qp->rcq = srq->cq;
	qp->pd_id = srq->pd_id;
	return -1;
}
