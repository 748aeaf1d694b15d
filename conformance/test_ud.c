// SPDX-License-Identifier: MIT
/*
 * UD between two processes (peer.h with qp_type UD): SEND and SEND with
 * immediate up to the path MTU, the 40-byte GRH area in front of every
 * received payload (IBA 11.4.1.2, manual 3.6 struct ibv_wc: IBV_WC_GRH),
 * the source QP and LID of a receive completion, Q_Key checks (IBA
 * 10.2.5), no RNR for UD (IBA 9.8), the MTU limit (IBA 9.7.1, manual
 * 6.2.2) and loopback within one process.  Every payload is checked.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include "tests.h"

#define WAIT_MS 5000
#define QUIET_MS 300	/* how long "nothing arrives" is watched */
#define GRH_LEN 40
#define RECV_OFF (1u << 20)	/* receive buffers: GRH area + payload */

static uint32_t mtu_bytes(enum ibv_mtu mtu)
{
	return 128u << mtu;	/* IBV_MTU_256 is 1 */
}

/* The UD path MTU: the smaller of both ports' active MTUs. */
static uint32_t path_mtu(const struct cf_ep *ep)
{
	enum ibv_mtu m = ep->port.active_mtu < ep->peer.mtu ?
				 ep->port.active_mtu :
				 (enum ibv_mtu)ep->peer.mtu;

	return mtu_bytes(m);
}

/* Addresses on this port need a GRH (RoCE, or no LID). */
static bool roce(const struct cf_ep *ep)
{
	return ep->port.link_layer == IBV_LINK_LAYER_ETHERNET ||
	       !ep->port.lid;
}

CF_TUNE_IMPL(ud)
{
	p->qp_type = IBV_QPT_UD;
	p->max_sge = 1;
}

/* A UD SEND (imm != 0: with immediate) of len bytes at offset 0. */
static int ud_send(struct cf_ep *ep, struct ibv_qp *qp, struct ibv_ah *ah,
		   uint32_t dest_qpn, uint32_t qkey, uint32_t len,
		   uint32_t imm, uint64_t wr_id)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	cf_ep_send_wr(ep, &wr, &sge, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
		      0, len, wr_id);
	wr.imm_data = imm;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = dest_qpn;
	wr.wr.ud.remote_qkey = qkey;
	return cf_ep_post_send(ep, qp, &wr);
}

/* Sender: post to the peer's QP and expect a successful completion. */
static void send_ok(struct cf_ep *ep, struct ibv_ah *ah, uint32_t qkey,
		    uint32_t len, uint32_t imm, uint64_t wr_id,
		    const char *what)
{
	struct ibv_wc wc;
	int got;

	if (ud_send(ep, ep->qp, ah, ep->peer.qpn[0], qkey, len, imm, wr_id))
		return;
	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	cf_ep_wc_ok(ep, &wc, got, wr_id, IBV_WC_SEND, what);
}

/* Receiver: one receive of GRH_LEN + max bytes at RECV_OFF. */
static int post_ud_recv(struct cf_ep *ep, uint32_t max, uint64_t wr_id)
{
	memset(ep->buf + RECV_OFF, 0xee, GRH_LEN + max + 64);
	return EP_CHECK(ep, !cf_ep_post_recv(ep, ep->qp, RECV_OFF,
					     GRH_LEN + max, wr_id),
			"ibv_post_recv failed") ? 0 : -1;
}

/* Receiver: no completion at all within QUIET_MS. */
static void expect_quiet(struct cf_ep *ep, const char *what)
{
	struct ibv_wc wc;
	int got = cf_poll_cq_wait(ep->cq, &wc, 1, QUIET_MS);

	EP_CHECK(ep, got == 0, "%s: the receiver got a completion (%s, "
		 "wr_id %llu) within %d ms, expected the datagram dropped",
		 what, got > 0 ? ibv_wc_status_str(wc.status) : "-",
		 got > 0 ? (unsigned long long)wc.wr_id : 0ull, QUIET_MS);
}

/*
 * Receiver: the completion of a datagram of len bytes with pattern seed:
 * byte_len = len + 40 (IBA 11.4.1.2), the payload after the GRH area,
 * src_qp and slid of the sender (manual 3.6 struct ibv_wc), IBV_WC_GRH
 * exactly when the sender's AH is global, and then the GRH's SGID is the
 * sender's GID (IBA 8.3; on RoCE v2 over IPv4 the IPv4 header's source,
 * cf_grh_names).
 */
static void check_ud_recv(struct cf_ep *ep, uint64_t wr_id, uint32_t len,
			  uint64_t seed, uint32_t imm, bool global,
			  const char *what)
{
	const uint8_t *grh = ep->buf + RECV_OFF;
	struct ibv_wc wc;
	long bad;
	int got;

	got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
	if (!cf_ep_wc_ok(ep, &wc, got, wr_id, IBV_WC_RECV, what))
		return;
	EP_CHECK(ep, wc.byte_len == len + GRH_LEN, "%s: byte_len %u, "
		 "expected %u + %d (GRH)", what, wc.byte_len, len, GRH_LEN);
	EP_CHECK(ep, wc.src_qp == ep->peer.qpn[0], "%s: src_qp 0x%x, "
		 "expected the sender's QPN 0x%x", what, wc.src_qp,
		 ep->peer.qpn[0]);
	EP_CHECK(ep, wc.qp_num == ep->qp->qp_num, "%s: qp_num 0x%x, "
		 "expected 0x%x", what, wc.qp_num, ep->qp->qp_num);
	if (ep->port.link_layer != IBV_LINK_LAYER_ETHERNET)
		EP_CHECK(ep, wc.slid == ep->peer.lid, "%s: slid 0x%x, "
			 "expected the sender's LID 0x%x", what, wc.slid,
			 ep->peer.lid);
	EP_CHECK(ep, !(wc.wc_flags & IBV_WC_GRH) == !global,
		 "%s: wc_flags 0x%x: IBV_WC_GRH %s, expected %s (the "
		 "sender's AH is %sglobal)", what, wc.wc_flags,
		 wc.wc_flags & IBV_WC_GRH ? "set" : "clear",
		 global ? "set" : "clear", global ? "" : "not ");
	if (global && (wc.wc_flags & IBV_WC_GRH))
		EP_CHECK(ep, cf_grh_names(grh, ep->peer.gid, ep->gid.raw),
			 "%s: the GRH's SGID/DGID are not the sender's and "
			 "the receiver's GID", what);
	EP_CHECK(ep, !(wc.wc_flags & IBV_WC_WITH_IMM) == !imm &&
		 (!imm || wc.imm_data == imm),
		 "%s: wc_flags 0x%x imm_data 0x%x, expected %s 0x%x", what,
		 wc.wc_flags, wc.imm_data, imm ? "WITH_IMM" : "no WITH_IMM",
		 imm);
	bad = cf_pattern_check(grh + GRH_LEN, len, seed);
	EP_CHECK(ep, bad < 0, "%s: payload differs at byte %ld", what, bad);
	bad = cf_bytes_check(grh + GRH_LEN + len, 64, 0xee);
	EP_CHECK(ep, bad < 0, "%s: receive buffer written past the payload, "
		 "at byte %ld", what, bad);
}

/*
 * SEND and SEND_WITH_IMM of 0, 1, MTU/2 and the path MTU (IBA 9.7.1: a
 * UD message is one packet), through an AH with a GRH when ep->arg is not
 * 0, else without one.
 */
CF_BODY_IMPL(ud, sends)
{
	const bool want_global = ep->arg != 0;
	const uint32_t mtu = path_mtu(ep);
	const uint32_t sizes[] = { 0, 1, mtu / 2, mtu };
	struct ibv_ah *ah = ep->ah;
	bool global = want_global || roce(ep) ||
		      !ep->peer.lid;
	size_t i, k;
	int ret = 0;

	if (ep->side == CF_PARENT && want_global) {
		ah = cf_ep_peer_ah(ep, true);
		if (!ah)
			return -1;
	}
	for (i = 0; i < CF_ARRAY_SIZE(sizes) && !ret; i++) {
		for (k = 0; k < 2 && !ret; k++) {
			const uint32_t imm = k ? htonl(0xa5000000u + i) : 0;
			const uint64_t seed = 100 + i * 2 + k;
			char what[80];

			snprintf(what, sizeof(what), "UD %s of %u bytes (%s)",
				 k ? "SEND_WITH_IMM" : "SEND", sizes[i],
				 global ? "GRH" : "no GRH");
			if (ep->side == CF_CHILD) {
				if (post_ud_recv(ep, mtu, seed) ||
				    cf_ep_sync(ep, WAIT_MS))
					return -1;
				check_ud_recv(ep, seed, sizes[i], seed, imm,
					      global, what);
			} else {
				cf_pattern_fill(ep->buf, sizes[i], seed);
				if (cf_ep_sync(ep, WAIT_MS)) {
					ret = -1;
					break;
				}
				send_ok(ep, ah, ep->peer.qkey, sizes[i], imm,
					seed, what);
			}
			ret = cf_ep_sync(ep, WAIT_MS);
		}
	}
	if (ah != ep->ah)
		ibv_destroy_ah(ah);
	return ret;
}

/*
 * Sender: a datagram the receiver must drop (remote Q_Key qkey), then a
 * good one; the receiver sees only the second (seed 2).  Both sends
 * complete successfully: UD has no acknowledgement (IBA 9.8).
 */
static int dropped_then_good(struct cf_ep *ep, uint32_t qkey, bool post,
			     const char *what)
{
	char w2[96];

	snprintf(w2, sizeof(w2), "the datagram after: %s", what);
	if (ep->side == CF_CHILD) {
		if ((post && post_ud_recv(ep, 256, 1)) ||
		    cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		expect_quiet(ep, what);
		if ((!post && post_ud_recv(ep, 256, 1)) ||
		    cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		check_ud_recv(ep, 1, 64, 2, 0, roce(ep) ||
			      !ep->peer.lid, w2);
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 64, 1);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	send_ok(ep, ep->ah, qkey, 64, 0, 1, what);
	if (cf_ep_sync(ep, WAIT_MS) || cf_ep_sync(ep, WAIT_MS))
		return -1;
	cf_pattern_fill(ep->buf, 64, 2);
	send_ok(ep, ep->ah, ep->peer.qkey, 64, 0, 2, w2);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * IBA 10.2.5 (C10-15): a datagram whose Q_Key does not match the
 * destination QP's is silently dropped: no receive completion; the sender
 * still completes successfully.
 */
CF_BODY_IMPL(ud, qkey_mismatch)
{
	return dropped_then_good(ep, ep->peer.qkey ^ 0x1u, true,
				 "datagram with a wrong Q_Key");
}

/*
 * IBA 9.8 / 9.7.5.2.8: UD has no RNR: a datagram that finds no receive
 * posted is dropped, the sender completes successfully, and it is not
 * delivered later into a receive posted afterwards.
 */
CF_BODY_IMPL(ud, no_recv)
{
	return dropped_then_good(ep, ep->peer.qkey, false,
				 "datagram with no receive posted");
}

/*
 * A UD message is a single packet (IBA 9.8.2), so one longer than the
 * MTU never reaches the peer.  IBA C10-93.1.1: "the CI shall not emit any
 * packets for this message" and "shall not generate an error due to this
 * condition": the send completes successfully (rxe's reading, and
 * ibemu's).  Many HCAs and the man pages' LOC_LEN_ERR ("Local Length
 * Error: ... the message length exceeded the port MTU") fail it locally
 * instead.  Nothing arriving is required; the status is the device's
 * choice between those two.
 */
CF_BODY_IMPL(ud, too_long)
{
	const uint32_t mtu = path_mtu(ep);
	struct ibv_wc wc;
	int got;

	if (ep->side == CF_CHILD) {
		if (post_ud_recv(ep, 2 * mtu, 1) || cf_ep_sync(ep, WAIT_MS) ||
		    cf_ep_sync(ep, WAIT_MS))
			return -1;
		expect_quiet(ep, "UD SEND of path MTU + 1 bytes");
		return cf_ep_sync(ep, WAIT_MS);
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	if (!ud_send(ep, ep->qp, ep->ah, ep->peer.qpn[0], ep->peer.qkey,
		     mtu + 1, 0, 1)) {
		got = cf_poll_cq_wait(ep->cq, &wc, 1, WAIT_MS);
		if (EP_CHECK(ep, got == 1 && wc.wr_id == 1 &&
			     (wc.status == IBV_WC_SUCCESS ||
			      wc.status == IBV_WC_LOC_LEN_ERR),
			     "UD SEND of path MTU + 1 bytes: %d completions, "
			     "status %s; expected SUCCESS (IBA C10-93.1.1) or "
			     "LOC_LEN_ERR", got,
			     got == 1 ? ibv_wc_status_str(wc.status) : "-"))
			EP_CHOICE(ep, "a UD SEND longer than the MTU completes "
				  "with %s, nothing sent",
				  ibv_wc_status_str(wc.status));
	}
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * IBA 10.2.5: when the high-order bit of the send WR's Q_Key is set, the
 * Q_Key of the sending QP's context is used instead.  Both QPs have the
 * same Q_Key, so 0x80000001 in the WR must be delivered.
 */
CF_BODY_IMPL(ud, qkey_controlled)
{
	if (ep->side == CF_CHILD) {
		if (post_ud_recv(ep, 256, 1) || cf_ep_sync(ep, WAIT_MS))
			return -1;
		check_ud_recv(ep, 1, 64, 3, 0, roce(ep) ||
			      !ep->peer.lid, "remote_qkey 0x80000001");
		return cf_ep_sync(ep, WAIT_MS);
	}
	cf_pattern_fill(ep->buf, 64, 3);
	if (cf_ep_sync(ep, WAIT_MS))
		return -1;
	send_ok(ep, ep->ah, 0x80000001u, 64, 0, 1, "remote_qkey 0x80000001");
	return cf_ep_sync(ep, WAIT_MS);
}

/*
 * Loopback: a UD QP sends to another QP of the same process through an
 * AH to its own port (cf_fill_ah's address vector, IBA 17.6).
 */
CF_BODY_IMPL(ud, loopback)
{
	const uint8_t *grh = ep->buf + RECV_OFF;
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;
	struct ibv_wc wc[2];
	int got;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, WAIT_MS);
	memset(&aa, 0, sizeof(aa));
	aa.dlid = ep->port.lid;
	aa.port_num = (uint8_t)cf_port;
	if (roce(ep) || !ep->port.lid) {
		aa.is_global = 1;
		aa.grh.dgid = ep->gid;
		aa.grh.sgid_index = (uint8_t)cf_gid_index;
		aa.grh.hop_limit = 1;
	}
	ah = ibv_create_ah(ep->pd, &aa);
	EP_REQUIRE(ep, ah, "ibv_create_ah to the own port: %s",
		   strerror(errno));
	memset(ep->buf + RECV_OFF, 0, 512);
	if (EP_CHECK(ep, !cf_ep_post_recv(ep, ep->qps[1], RECV_OFF, 512, 9),
		     "ibv_post_recv on the second QP failed")) {
		cf_pattern_fill(ep->buf, 200, 4);
		if (!ud_send(ep, ep->qps[0], ah, ep->qps[1]->qp_num,
			     ep->p->qkey, 200, 0, 8)) {
			got = cf_poll_cq_wait(ep->cq, wc, 2, WAIT_MS);
			EP_CHECK(ep, got == 2, "loopback: %d completions of 2",
				 got);
			for (int i = 0; i < got; i++) {
				EP_CHECK(ep, wc[i].status == IBV_WC_SUCCESS,
					 "loopback: wr_id %llu: %s",
					 (unsigned long long)wc[i].wr_id,
					 ibv_wc_status_str(wc[i].status));
				if (wc[i].wr_id == 9)
					EP_CHECK(ep, wc[i].byte_len ==
						 200 + GRH_LEN &&
						 wc[i].src_qp ==
						 ep->qps[0]->qp_num,
						 "loopback: byte_len %u src_qp "
						 "0x%x", wc[i].byte_len,
						 wc[i].src_qp);
			}
		}
		EP_CHECK(ep, cf_pattern_check(grh + GRH_LEN, 200, 4) < 0,
			 "loopback: payload differs");
	}
	ibv_destroy_ah(ah);
	return cf_ep_sync(ep, WAIT_MS);
}

CF_TUNE_IMPL(loopback)
{
	cf_tune_ud(p, arg);
	p->nqp = 2;
}
