// SPDX-License-Identifier: MIT
/*
 * Automatic path migration (IBA 17.2.8; the verbs of 11.2.5, Modify QP):
 * a connected QP (RC, UC) may hold an alternate path beside its primary
 * one, each a (port, address vector) pair, and move its traffic to it,
 * by software's request or by itself when the primary path fails.
 *
 * The path migration state (PathMigState) is one of
 *   MIGRATED  no alternate path armed (the state after RESET, and after
 *             a migration); packets go out with BTH MigReq = 1 (IBA 9.2,
 *             17.2.8);
 *   REARM     software loaded an alternate path and asks the CA to arm
 *             it; packets go out with MigReq = 0;
 *   ARMED     the CA armed it: its port is ACTIVE, its DLID reaches the
 *             QP's peer, and the peer has rearmed too, which a packet
 *             of the peer with MigReq = 0 shows (a peer still in
 *             MIGRATED sends MigReq = 1).  MigReq = 0.
 * Software sets REARM (with an alternate path loaded, now or before) or
 * MIGRATED (from ARMED: a migration on request; in MIGRATED already: no
 * change; from REARM: EINVAL); ARMED is the CA's to enter, never
 * software's (EINVAL).
 *
 * Migrating makes the alternate path the primary one (ah_attr, port_num,
 * timeout, pkey_index take the alternate's values) and the state
 * MIGRATED.  The CA migrates
 *  - as requester, when the primary path fails while ARMED: its port
 *    went down (`ibemu port down`), or its retries are spent (IBA
 *    9.7.6.1.3: the timeout would otherwise end in RETRY_EXC_ERR); the
 *    retry budget starts afresh on the new path and what was not
 *    acknowledged is sent again there, so nothing is lost;
 *  - as responder, when a packet with MigReq = 1 arrives on the
 *    alternate path while ARMED: the peer migrated.
 * Each migration the CA makes raises IBV_EVENT_PATH_MIG on the QP
 * (IBA 11.6.3.1, manual 6.1.7); one software asked for raises none (the
 * application knows).  An alternate path that cannot work, when it is
 * armed or when the CA would migrate to it (its port not ACTIVE, its
 * DLID not leading to the peer), raises IBV_EVENT_PATH_MIG_ERR (manual
 * 6.1.8) and leaves the QP in REARM.
 *
 * Lock rule: everything here runs under qp.lock, but apm_route_alt
 * (no lock: it may block as req_route_peer does).
 */
#include "config.h"

#include <errno.h>

#include "engine.h"
#include "log.h"
#include "node.h"
#include "route.h"

void apm_route_alt(const struct emu_qp *qp, const struct ibv_qp_attr *attr,
		   int mask, struct req_route *route)
{
	uint32_t dqpn = (mask & IBV_QP_DEST_QPN) ? attr->dest_qp_num
						 : qp->attr.dest_qp_num;

	route->done = false;
	if (!(mask & IBV_QP_ALT_PATH) || qp->type == IBV_QPT_UD ||
	    emu_av_check(&attr->alt_ah_attr) ||
	    !emu_port_valid(attr->alt_port_num))
		return;
	req_route_peer(qp->hca, &attr->alt_ah_attr, dqpn, route);
}

int apm_check(const struct emu_qp *qp, const struct ibv_qp_attr *a,
	      int mask, const char **why_p)
{
	/* Offered with a second port only, where the device claims
	 * IBV_DEVICE_AUTO_PATH_MIG (provider/verbs/query.c). */
	if ((mask & (IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE)) &&
	    emu_nr_ports() < 2) {
		*why_p = "alternate path (one port: no automatic path "
			 "migration; IBEMU_PORTS=2)";
		return EINVAL;
	}
	if (mask & IBV_QP_ALT_PATH) {
		if (!emu_port_valid(a->alt_port_num)) {
			*why_p = "alt_port_num";
			return EINVAL;
		}
		if (emu_av_check(&a->alt_ah_attr)) {
			*why_p = "alt_ah_attr";
			return EINVAL;
		}
		/* 5-bit local ACK timeout (IBA 11.2.5.2). */
		if (a->alt_timeout > 31) {
			*why_p = "alt_timeout";
			return EINVAL;
		}
		if (a->alt_pkey_index >= IBEMU_PKEY_TBL_LEN) {
			*why_p = "alt_pkey_index";
			return EINVAL;
		}
	}
	if (!(mask & IBV_QP_PATH_MIG_STATE))
		return 0;
	switch (a->path_mig_state) {
	case IBV_MIG_REARM:
		/* Rearming needs an alternate path (IBA 17.2.8). */
		if (!(mask & IBV_QP_ALT_PATH) && !qp->apm.loaded) {
			*why_p = "REARM with no alternate path loaded";
			return EINVAL;
		}
		return 0;
	case IBV_MIG_MIGRATED:
		/* A migration on request, from ARMED (IBA 17.2.8); in
		 * MIGRATED already, nothing changes (the Linux drivers
		 * and rxe accept it, the conformance suite's transitions
		 * ask it). */
		if (qp->attr.path_mig_state == IBV_MIG_REARM) {
			*why_p = "MIGRATED asked while not ARMED";
			return EINVAL;
		}
		return 0;
	default:
		*why_p = "path_mig_state (ARMED is the CA's to set)";
		return EINVAL;
	}
}

/* The alternate path's port and peer work: the port is ACTIVE and the
 * route found at load leads to the primary path's peer process. */
static bool apm_alt_usable_locked(const struct emu_qp *qp)
{
	return qp->apm.loaded && qp->apm.alt_reaches &&
	       node_port_state(qp->hca->node.seg, qp->attr.alt_port_num) ==
		       IBV_PORT_ACTIVE;
}

static bool apm_same_peer_locked(struct emu_qp *qp,
				 const struct req_route *route)
{
	struct engine *e = qp->hca->engine;
	const struct tp_net_ops *net = engine_net(e);

	if (!route->done || route->err)
		return false;
	if (qp->peer_proc < 0)
		req_resolve_peer_locked(qp);
	if (qp->peer_proc < 0)
		return false;
	return route->slot == qp->peer_proc ||
	       (net && net->same_process &&
		net->same_process(e, route->slot, qp->peer_proc));
}

/* REARM: the CA arms once the alternate path works and the peer has
 * rearmed (a packet of it with MigReq = 0, apm_recv_locked); an
 * alternate path that does not work is told at once. */
static void apm_rearm_locked(struct emu_qp *qp)
{
	qp->attr.path_mig_state = IBV_MIG_REARM;
	if (!apm_alt_usable_locked(qp)) {
		ibemu_log_dbg("qp %#x: alternate path (port %u, DLID %#x) "
			      "cannot be armed", qp->qpn,
			      qp->attr.alt_port_num,
			      qp->attr.alt_ah_attr.dlid);
		emu_event(&qp->owner, IBV_EVENT_PATH_MIG_ERR);
	}
}

void apm_apply_locked(struct emu_qp *qp, const struct ibv_qp_attr *a,
		      int mask, const struct req_route *alt)
{
	struct ibv_qp_attr *s = &qp->attr;

	if (mask & IBV_QP_ALT_PATH) {
		s->alt_ah_attr = a->alt_ah_attr;
		s->alt_port_num = a->alt_port_num;
		s->alt_timeout = a->alt_timeout;
		s->alt_pkey_index = a->alt_pkey_index;
		qp->apm.loaded = true;
		/* Before RTR the peer is not bound yet: the alternate
		 * route is judged against it at the transition, whose
		 * lookup apm_route_alt made alike. */
		qp->apm.alt_reaches = alt->done && !alt->err;
		qp->apm.alt_slot = alt->slot;
		qp->apm.alt_checked = false;
	}
	if (!(mask & IBV_QP_PATH_MIG_STATE))
		return;
	if (a->path_mig_state == IBV_MIG_REARM)
		apm_rearm_locked(qp);
	else if (a->path_mig_state == IBV_MIG_MIGRATED &&
		 s->path_mig_state == IBV_MIG_ARMED)
		apm_migrate_locked(qp, false);
}

/* Whether the route found at load leads to the peer: checked once the
 * QP has its peer (at RTR or later). */
static void apm_judge_route_locked(struct emu_qp *qp)
{
	struct req_route r = { .done = true, .slot = qp->apm.alt_slot };

	if (qp->apm.alt_checked || !qp->apm.alt_reaches)
		return;
	qp->apm.alt_checked = true;
	qp->apm.alt_reaches = apm_same_peer_locked(qp, &r);
}

bool apm_migrate_locked(struct emu_qp *qp, bool by_ca)
{
	struct ibv_qp_attr *s = &qp->attr;

	apm_judge_route_locked(qp);
	if (!apm_alt_usable_locked(qp)) {
		ibemu_log_dbg("qp %#x: no migration: the alternate path "
			      "(port %u) does not work", qp->qpn,
			      s->alt_port_num);
		emu_event(&qp->owner, IBV_EVENT_PATH_MIG_ERR);
		s->path_mig_state = IBV_MIG_REARM;
		return false;
	}
	s->ah_attr = s->alt_ah_attr;
	s->port_num = s->alt_port_num;
	s->timeout = s->alt_timeout;
	s->pkey_index = s->alt_pkey_index;
	s->path_mig_state = IBV_MIG_MIGRATED;
	qp->apm.loaded = false;
	ibemu_trace("qp %#x migrated to port %u, DLID %#x%s", qp->qpn,
		    s->port_num, s->ah_attr.dlid, by_ca ? "" : " (asked)");
	if (by_ca)
		emu_event(&qp->owner, IBV_EVENT_PATH_MIG);
	return true;
}

/* Which port of ours a packet came in at: the one its DLID names, port
 * 1 when it names none (GRH-routed). */
static unsigned int apm_in_port(const struct emu_qp *qp, const struct pkt *p)
{
	unsigned int port = node_port_of_lid(qp->hca->node.seg, p->hdr->dlid);

	return port ? port : 1;
}

void apm_recv_locked(struct emu_qp *qp, const struct pkt *p)
{
	bool mig = pkt_migreq(p);
	struct ibv_qp_attr *s = &qp->attr;

	if (qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC)
		return;
	if (s->path_mig_state == IBV_MIG_REARM && !mig) {
		/* The peer has rearmed too (IBA 17.2.8). */
		apm_judge_route_locked(qp);
		if (apm_alt_usable_locked(qp))
			s->path_mig_state = IBV_MIG_ARMED;
		return;
	}
	/* The peer migrated: this packet came on our alternate path
	 * (IBA 17.2.8, responder side). */
	if (s->path_mig_state == IBV_MIG_ARMED && mig &&
	    apm_in_port(qp, p) == s->alt_port_num &&
	    p->hdr->slid == s->alt_ah_attr.dlid)
		apm_migrate_locked(qp, true);
}

bool apm_path_failed_locked(struct emu_qp *qp)
{
	if (qp->attr.path_mig_state != IBV_MIG_ARMED)
		return false;
	if (!apm_migrate_locked(qp, true))
		return false;
	/* A fresh budget on the new path; what was not acknowledged goes
	 * again there (IBA 17.2.8). */
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.told.on = false;
	qp->comp.implied.on = false;
	if (qp->type == IBV_QPT_RC && qp->sq.head != qp->sq.tail) {
		req_rewind_locked(qp);
		req_run_locked(qp);
		comp_arm_timer_locked(qp);
	}
	return true;
}

void apm_port_changed_locked(struct emu_qp *qp, unsigned int port,
			     bool up)
{
	struct ibv_qp_attr *s = &qp->attr;

	if ((qp->type != IBV_QPT_RC && qp->type != IBV_QPT_UC) ||
	    qp->state < IBV_QPS_RTR || qp->state > IBV_QPS_SQD)
		return;
	if (!up && s->port_num == port) {
		/* The primary path's link is gone (IBA 17.2.8). */
		apm_path_failed_locked(qp);
		return;
	}
	if (!up && qp->apm.loaded && s->alt_port_num == port &&
	    s->path_mig_state == IBV_MIG_ARMED) {
		/* The alternate path's link is gone: disarmed (manual
		 * 6.1.8). */
		emu_event(&qp->owner, IBV_EVENT_PATH_MIG_ERR);
		s->path_mig_state = IBV_MIG_REARM;
	}
}
