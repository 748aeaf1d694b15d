// SPDX-License-Identifier: MIT
/*
 * UD multicast through the verbs (manual 3.6.13 ibv_attach_mcast, 3.6.14
 * ibv_detach_mcast; IBA 10.5): a datagram sent to a group (its MGID in a
 * GRH, its MLID, destination QP 0xFFFFFF, IBA 10.5.2.2) reaches every QP
 * attached to it, of this process and of another, intact and with the
 * group's GID as the GRH's DGID; the sending QP only if it is attached
 * itself; a detached QP no more.  Attaching what cannot be attached is
 * EINVAL as the kernel's ib_attach_mcast checks it (a UD QP, a multicast
 * GID, on InfiniBand a multicast LID).  The device's group limits
 * (max_mcast_grp, max_mcast_qp_attach, max_total_mcast_qp_attach) are
 * reported; IBA 10.5 leaves their size to the device, so a test only
 * checks that what is reported holds (max_mcast_grp groups for one QP,
 * max_mcast_qp_attach QPs in one group).
 *
 * The groups are attached here by hand, without a subnet administrator
 * join: on a fabric the HCA still loops a group's datagrams back to its
 * own attached QPs; the RDMA CM's joins are tested in the cm suite.  On
 * RoCE the group is an IP multicast address of the source GID's family
 * and the host's IP layer joins it (test_group, ip_join).
 */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests.h"

#define WAIT_MS 5000
#define QUIET_MS 300	/* how long "nothing arrives" is watched */
#define GRH_LEN 40
#define MSG_LEN 256
#define NMSG 4
/* Receive slots: one region per QP index, NMSG slots in each. */
#define SLOT (GRH_LEN + MSG_LEN)
#define RECV_OFF(qp, i) ((1u << 20) + ((qp) * NMSG + (i)) * SLOT)
#define SEND_WR_ID 0x50000u
#define MC_QPN 0xffffffu	/* IBA 10.5.2.2 */
#define TEST_MLID 0xc321	/* within 0xC000-0xFFFE, IBA 4.1.3 */

/* A group of the link-local scope: ff12:401b:ffff::efff:1:2 */
static const union ibv_gid test_mgid = {
	.raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0x0e,
		 0xff, 0x01, 0x02 }
};
/* The IPv4 group of an IPv4 source GID on RoCE: 239.1.2.3 (RFC 2365's
 * organization-local scope), IPv4-mapped. */
static const union ibv_gid test_mgid_v4 = {
	.raw = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 239, 1, 2, 3 }
};

static bool ib_link(const struct cf_ep *ep)
{
	return ep->port.link_layer != IBV_LINK_LAYER_ETHERNET;
}

static bool gid_v4mapped(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { [10] = 0xff, [11] = 0xff };

	return !memcmp(g->raw, prefix, sizeof(prefix));
}

/*
 * The group the fan-out tests use, by the port's link layer.  On
 * InfiniBand an MGID (IBA 4.1.1) and an MLID (IBA 4.1.3).  On RoCE
 * (IBA Annex A16, A17) the group is an IP multicast address of the
 * source GID's family, since RoCE v2 builds the IP header from the GIDs
 * and an IPv4 header cannot carry an IPv6 group: IPv4-mapped 239.1.2.3
 * with an IPv4 source GID, the IPv6 group ff12:: otherwise; there are no
 * LIDs (the kernel's ib_attach_mcast ignores the LID on RoCE).
 */
static void test_group(const struct cf_ep *ep, union ibv_gid *mgid,
		       uint16_t *mlid)
{
	if (ib_link(ep)) {
		*mgid = test_mgid;
		*mlid = TEST_MLID;
	} else {
		*mgid = gid_v4mapped(&ep->gid) ? test_mgid_v4 : test_mgid;
		*mlid = 0;
	}
}

/*
 * On RoCE the group is an IP multicast group: the host's IP layer joins
 * it on the interface of the source GID (IGMP / MLD, as the kernel's
 * RDMA CM does for a RoCE join, cma_igmp_send), so that the network and
 * a device that loops its datagrams through the IP stack (rxe) deliver
 * them; ibv_attach_mcast only attaches the QP.  The socket holds the
 * membership until closed; -1 on InfiniBand or when the join failed
 * (reported: a device that loops back by itself needs none).
 * CF_MCAST_IP_JOIN=0 leaves it out, to see what the device does alone.
 */
static int ip_join(const struct cf_ep *ep)
{
	union ibv_gid g;
	uint16_t lid;
	const char *env = getenv("CF_MCAST_IP_JOIN");
	int fd = -1, ok = -1;

	if (ib_link(ep) || (env && !strcmp(env, "0")))
		return -1;
	test_group(ep, &g, &lid);
	if (gid_v4mapped(&ep->gid)) {
		struct ip_mreqn mr;

		memset(&mr, 0, sizeof(mr));
		memcpy(&mr.imr_multiaddr, g.raw + 12, 4);
		memcpy(&mr.imr_address, ep->gid.raw + 12, 4);
		fd = socket(AF_INET, SOCK_DGRAM, 0);
		if (fd >= 0)
			ok = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP,
					&mr, sizeof(mr));
	} else {
		struct ipv6_mreq mr;
		struct ifaddrs *ifa, *i;

		memset(&mr, 0, sizeof(mr));
		memcpy(&mr.ipv6mr_multiaddr, g.raw, 16);
		if (!getifaddrs(&ifa)) {
			for (i = ifa; i; i = i->ifa_next)
				if (i->ifa_addr &&
				    i->ifa_addr->sa_family == AF_INET6 &&
				    !memcmp(&((struct sockaddr_in6 *)
						      i->ifa_addr)->sin6_addr,
					    ep->gid.raw, 16))
					break;
			if (i)
				mr.ipv6mr_interface =
					if_nametoindex(i->ifa_name);
			freeifaddrs(ifa);
		}
		fd = mr.ipv6mr_interface ? socket(AF_INET6, SOCK_DGRAM, 0)
					 : -1;
		if (fd >= 0)
			ok = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP,
					&mr, sizeof(mr));
	}
	if (ok) {
		printf("\n    (no IP membership of the group: %s) ",
		       cf_errname(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

CF_TUNE_IMPL(mcast)
{
	(void)arg;
	p->qp_type = IBV_QPT_UD;
	p->max_sge = 1;
	p->nqp = 3;
}

/* The address of the group: its MGID in a GRH and its MLID. */
static struct ibv_ah *group_ah(struct cf_ep *ep)
{
	struct ibv_ah_attr aa;
	struct ibv_ah *ah;

	memset(&aa, 0, sizeof(aa));
	aa.is_global = 1;
	test_group(ep, &aa.grh.dgid, &aa.dlid);
	aa.grh.sgid_index = (uint8_t)cf_gid_index;
	aa.grh.hop_limit = 1;
	aa.port_num = (uint8_t)cf_port;
	ah = ibv_create_ah(ep->pd, &aa);
	EP_CHECK(ep, ah != NULL, "ibv_create_ah to the group: %s",
		 cf_errname(errno));
	return ah;
}

/* Attach (or detach) QP qp to the test's group. */
static int membership(struct cf_ep *ep, int qp, bool join)
{
	union ibv_gid g;
	uint16_t lid;
	int ret;

	test_group(ep, &g, &lid);
	ret = cf_rc(join ? ibv_attach_mcast(ep->qps[qp], &g, lid)
			 : ibv_detach_mcast(ep->qps[qp], &g, lid));
	EP_CHECK(ep, !ret, "%s (QP %d): %s",
		 join ? "ibv_attach_mcast" : "ibv_detach_mcast", qp,
		 cf_errname(ret));
	return ret;
}

static int attach(struct cf_ep *ep, int qp)
{
	return membership(ep, qp, true);
}

static int detach(struct cf_ep *ep, int qp)
{
	return membership(ep, qp, false);
}

/* NMSG receives on QP qp; wr_id = qp << 8 | slot. */
static int post_recvs(struct cf_ep *ep, int qp)
{
	for (int i = 0; i < NMSG; i++) {
		memset(ep->buf + RECV_OFF(qp, i), 0xee, SLOT);
		if (!EP_CHECK(ep, !cf_ep_post_recv(ep, ep->qps[qp],
						   RECV_OFF(qp, i), SLOT,
						   (uint64_t)qp << 8 | i),
			      "ibv_post_recv (QP %d) failed", qp))
			return -1;
	}
	return 0;
}

/* Post NMSG datagrams of MSG_LEN bytes (pattern seed + i) to the group
 * from QP qp; expect_recvs takes their completions with the receives'
 * (one CQ: a receive of this process may come first). */
static int send_group(struct cf_ep *ep, int qp, struct ibv_ah *ah,
		      uint64_t seed)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	for (int i = 0; i < NMSG; i++) {
		cf_pattern_fill(ep->buf + i * MSG_LEN, MSG_LEN, seed + i);
		cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND, i * MSG_LEN, MSG_LEN,
			      SEND_WR_ID + i);
		wr.wr.ud.ah = ah;
		wr.wr.ud.remote_qpn = MC_QPN;
		wr.wr.ud.remote_qkey = ep->p->qkey;
		if (cf_ep_post_send(ep, ep->qps[qp], &wr))
			return -1;
	}
	return 0;
}

/*
 * Take the receive completions of the QPs in want (a bit per QP index):
 * each must get all NMSG datagrams, in order, intact, from src_qpn, with
 * the group's GID as DGID; a QP not in want must get none (watched
 * QUIET_MS once the others are done).  sends: the send completions of
 * send_group to take as well (0 or NMSG), each successful.
 */
static void expect_recvs(struct cf_ep *ep, unsigned int want, uint32_t src_qpn,
			 uint64_t seed, int sends, const char *what)
{
	int got_n[CF_PEER_MAX_QP] = { 0 }, need = sends, have = 0, got;
	long long end = cf_now_ms() + WAIT_MS;
	struct ibv_wc wc;
	union ibv_gid mgid;
	uint16_t mlid;

	test_group(ep, &mgid, &mlid);

	for (int q = 0; q < ep->p->nqp; q++)
		if (want & (1u << q))
			need += NMSG;
	while (have < need || cf_now_ms() < end) {
		int wait = have < need ? (int)(end - cf_now_ms()) : QUIET_MS;

		got = cf_poll_cq_wait(ep->cq, &wc, 1, wait > 0 ? wait : 0);
		if (got <= 0)
			break;
		if (wc.opcode == IBV_WC_SEND ||
		    (wc.wr_id >= SEND_WR_ID && wc.wr_id < SEND_WR_ID + NMSG)) {
			EP_CHECK(ep, wc.status == IBV_WC_SUCCESS &&
					     sends > 0,
				 "%s: send %#llx: %s", what,
				 (unsigned long long)wc.wr_id,
				 ibv_wc_status_str(wc.status));
			have++;
			if (have == need)
				end = cf_now_ms() + QUIET_MS;
			continue;
		}
		int q = (int)(wc.wr_id >> 8), i = (int)(wc.wr_id & 0xff);
		const uint8_t *grh = ep->buf + RECV_OFF(q, i);

		if (!EP_CHECK(ep, q >= 0 && q < ep->p->nqp &&
				      (want & (1u << q)),
			      "%s: QP %d (%#x) got a datagram it should not "
			      "have (%s)", what, q, wc.qp_num,
			      ibv_wc_status_str(wc.status)))
			continue;
		have++;
		EP_CHECK(ep, wc.status == IBV_WC_SUCCESS &&
			 wc.opcode == IBV_WC_RECV &&
			 wc.byte_len == GRH_LEN + MSG_LEN &&
			 wc.src_qp == src_qpn && (wc.wc_flags & IBV_WC_GRH),
			 "%s: QP %d: %s, opcode %d, byte_len %u, src_qp %#x "
			 "(want %#x), wc_flags %#x", what, q,
			 ibv_wc_status_str(wc.status), wc.opcode,
			 wc.byte_len, wc.src_qp, src_qpn, wc.wc_flags);
		EP_CHECK(ep, i == got_n[q], "%s: QP %d: datagram in slot %d, "
			 "expected %d (order)", what, q, i, got_n[q]);
		got_n[q]++;
		/* IBA 8.3: the GRH names the group as destination; on
		 * RoCE v2 over IPv4 (Annex A17) the receive buffer's 40
		 * bytes end with the IPv4 header, whose destination is
		 * the group. */
		EP_CHECK(ep, cf_grh_names(grh, NULL, mgid.raw),
			 "%s: QP %d: the GRH's DGID (or the IPv4 header's "
			 "destination) is not the group's", what, q);
		EP_CHECK(ep, cf_pattern_check(grh + GRH_LEN, MSG_LEN,
					      seed + i) < 0,
			 "%s: QP %d: datagram %d differs", what, q, i);
		if (have == need)
			end = cf_now_ms() + QUIET_MS;
	}
	EP_CHECK(ep, have == need, "%s: %d of %d completions (%d sends, the "
		 "rest datagrams) came", what, have, need, sends);
}

/*
 * One burst from QP 0 to the group through ah: NMSG receives posted
 * first on each QP in post (a bit per QP index), then expect_recvs with
 * want and the sends' completions.  -1 if a step could not be posted.
 */
static int burst(struct cf_ep *ep, struct ibv_ah *ah, unsigned int post,
		 unsigned int want, uint64_t seed, const char *what)
{
	for (int q = 0; q < ep->p->nqp; q++)
		if ((post & (1u << q)) && post_recvs(ep, q))
			return -1;
	if (send_group(ep, 0, ah, seed))
		return -1;
	expect_recvs(ep, want, ep->qps[0]->qp_num, seed, NMSG, what);
	return 0;
}

/* A test's group torn down (its AH, the IP-level join), then the
 * parent meets its child within wait_ms. */
static int group_done(struct cf_ep *ep, struct ibv_ah *ah, int ipfd,
		      int wait_ms)
{
	if (ah)
		ibv_destroy_ah(ah);
	if (ipfd >= 0)
		close(ipfd);
	return cf_ep_sync(ep, wait_ms);
}

/*
 * One process: QPs 1 and 2 attached, QP 0 sends.  Both attached QPs get
 * every datagram; QP 0, which is not attached, none (IBA 10.5.2.3: a
 * multicast packet is delivered to the QPs attached to its group).  Then
 * the sender attaches too and gets its own datagrams (the HCA loops them
 * back, IBA 10.5.2.3; manual 3.6.13).
 */
CF_BODY_IMPL(mcast, fanout_local)
{
	struct ibv_ah *ah;
	int ipfd;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 3 * WAIT_MS);
	ipfd = ip_join(ep);
	ah = group_ah(ep);
	if (!ah || attach(ep, 1) || attach(ep, 2))
		goto out;
	burst(ep, ah, 1u << 0 | 1u << 1 | 1u << 2, 1u << 1 | 1u << 2, 100,
	      "two attached QPs, sender not attached");
	/* QP 0's receives are still posted. */
	if (!attach(ep, 0))
		burst(ep, ah, 1u << 1 | 1u << 2, 1u << 0 | 1u << 1 | 1u << 2,
		      200, "the sender attached as well");
	detach(ep, 0);
	detach(ep, 1);
	detach(ep, 2);
out:
	return group_done(ep, ah, ipfd, 3 * WAIT_MS);
}

/*
 * Detach stops delivery (manual 3.6.14): QP 1 gets the first burst, is
 * detached, and gets nothing of the second while QP 2, still attached,
 * gets it all; a second detach of the same group fails.
 */
CF_BODY_IMPL(mcast, detach_stops)
{
	struct ibv_ah *ah;
	union ibv_gid g;
	uint16_t lid;
	int ret, ipfd;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 3 * WAIT_MS);
	ipfd = ip_join(ep);
	ah = group_ah(ep);
	if (!ah || attach(ep, 1) || attach(ep, 2))
		goto out;
	burst(ep, ah, 1u << 1 | 1u << 2, 1u << 1 | 1u << 2, 300,
	      "both attached");
	if (!detach(ep, 1))
		burst(ep, ah, 1u << 1 | 1u << 2, 1u << 2, 400,
		      "QP 1 detached");
	test_group(ep, &g, &lid);
	ret = cf_rc(ibv_detach_mcast(ep->qps[1], &g, lid));
	EP_CHECK(ep, ret != 0, "ibv_detach_mcast of a group the QP left "
		 "succeeded");
	detach(ep, 2);
out:
	return group_done(ep, ah, ipfd, 3 * WAIT_MS);
}

/*
 * Another process: the child attaches two QPs and posts receives; the
 * parent, attached to nothing, sends; every datagram reaches both of the
 * child's QPs.  Then the child detaches one and the next burst reaches
 * only the other.
 */
CF_BODY_IMPL(mcast, fanout_process)
{
	struct ibv_ah *ah = NULL;
	uint32_t sender = ep->peer.qpn[0];
	int ret = 0, ipfd;

	if (ep->side == CF_CHILD) {
		if (attach(ep, 0) || attach(ep, 1) || post_recvs(ep, 0) ||
		    post_recvs(ep, 1)) {
			/* the parent's four steps go on without us */
			for (int i = 0; i < 4 && !ret; i++)
				ret = cf_ep_sync(ep, 3 * WAIT_MS);
			return -1;
		}
		ret = cf_ep_sync(ep, WAIT_MS); /* ready */
		if (!ret)
			ret = cf_ep_sync(ep, 3 * WAIT_MS); /* sent */
		if (!ret)
			expect_recvs(ep, 1u << 0 | 1u << 1, sender, 500, 0,
				     "two QPs of another process");
		detach(ep, 1);
		post_recvs(ep, 0);
		post_recvs(ep, 1);
		if (!ret)
			ret = cf_ep_sync(ep, WAIT_MS); /* ready */
		if (!ret)
			ret = cf_ep_sync(ep, 3 * WAIT_MS); /* sent */
		if (!ret)
			expect_recvs(ep, 1u << 0, sender, 600, 0,
				     "one QP of the other process detached");
		detach(ep, 0);
		return ret;
	}
	ipfd = ip_join(ep);
	ah = group_ah(ep);
	ret = cf_ep_sync(ep, WAIT_MS);
	if (!ret && ah)
		burst(ep, ah, 0, 0, 500, "the sender, attached to nothing");
	if (!ret)
		ret = cf_ep_sync(ep, 3 * WAIT_MS);
	if (!ret)
		ret = cf_ep_sync(ep, 3 * WAIT_MS);
	if (!ret && ah)
		burst(ep, ah, 0, 0, 600, "the sender, attached to nothing");
	if (!ret)
		ret = cf_ep_sync(ep, 3 * WAIT_MS);
	if (ah)
		ibv_destroy_ah(ah);
	if (ipfd >= 0)
		close(ipfd);
	return ret;
}

/*
 * What cannot be attached (the kernel's ib_attach_mcast, which every
 * uverbs device goes through): a QP that is not UD, a GID that is not
 * multicast (IBA 4.1.1: ff00::/8), and on InfiniBand a LID outside
 * 0xC000-0xFFFE (IBA 4.1.3): EINVAL.
 */
CF_BODY_IMPL(mcast, bad_attach)
{
	struct ibv_qp_init_attr ia;
	union ibv_gid unicast = ep->gid;
	struct ibv_qp *rc;
	int ret;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, WAIT_MS);
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = ep->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	rc = ibv_create_qp(ep->pd, &ia);
	if (EP_CHECK(ep, rc != NULL, "ibv_create_qp (RC): %s",
		     cf_errname(errno))) {
		ret = cf_rc(ibv_attach_mcast(rc, &test_mgid, TEST_MLID));
		EP_CHECK(ep, ret == EINVAL, "attach an RC QP: %s, want EINVAL",
			 cf_errname(ret));
		ibv_destroy_qp(rc);
	}
	ret = cf_rc(ibv_attach_mcast(ep->qps[0], &unicast, TEST_MLID));
	EP_CHECK(ep, ret == EINVAL, "attach to a unicast GID: %s, want EINVAL",
		 cf_errname(ret));
	if (ib_link(ep)) {
		ret = cf_rc(ibv_attach_mcast(ep->qps[0], &test_mgid, 0x0101));
		EP_CHECK(ep, ret == EINVAL, "attach with unicast LID 0x101: "
			 "%s, want EINVAL", cf_errname(ret));
		ret = cf_rc(ibv_attach_mcast(ep->qps[0], &test_mgid, 0xffff));
		EP_CHECK(ep, ret == EINVAL, "attach with the permissive LID: "
			 "%s, want EINVAL", cf_errname(ret));
	}
	return cf_ep_sync(ep, WAIT_MS);
}

/* max_mcast_qp_attach, the QPs one group may have, held: that many UD
 * QPs attach to one group and one more is refused. */
static void qp_attach_limit(struct cf_ep *ep)
{
	const int n = ep->dev->max_mcast_qp_attach;
	struct ibv_qp_init_attr ia;
	struct ibv_qp **qps;
	int i, made, ret = 0;

	if (n <= 0 || n > 512) {
		printf("(max_mcast_qp_attach %d: not filled) ", n);
		return;
	}
	qps = calloc((size_t)n + 1, sizeof(*qps));
	if (!EP_CHECK(ep, qps != NULL, "no memory"))
		return;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = ia.recv_cq = ep->cq;
	ia.qp_type = IBV_QPT_UD;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	for (made = 0; made <= n; made++) {
		qps[made] = ibv_create_qp(ep->pd, &ia);
		if (!qps[made])
			break;
	}
	if (made <= n) {
		cf_ep_skip(ep, "mcast/limits: %d UD QPs to fill a group, only "
			   "%d made", n + 1, made);
		goto out;
	}
	for (i = 0; i <= n; i++) {
		ret = cf_rc(ibv_attach_mcast(qps[i], &test_mgid, TEST_MLID));
		if (ret)
			break;
	}
	EP_CHECK(ep, i == n && ret != 0, "attached %d QPs to one group of "
		 "max_mcast_qp_attach %d (the last attach: %s)", i, n,
		 cf_errname(ret));
	if (i == n && ret)
		printf("(QP %d of a group: %s) ", n + 1, cf_errname(ret));
	while (--i >= 0)
		ibv_detach_mcast(qps[i], &test_mgid, TEST_MLID);
out:
	while (--made >= 0)
		ibv_destroy_qp(qps[made]);
	free(qps);
}

/*
 * The device's limits (IBA 10.5 leaves them to the device): reported,
 * and max_mcast_grp, the groups one QP may join, held: a QP attaches to
 * that many groups, and one more is refused.  A device reporting no
 * multicast support refuses the first attach.
 */
CF_BODY_IMPL(mcast, limits)
{
	const struct ibv_device_attr *d = ep->dev;
	union ibv_gid g = test_mgid;
	int i, n, ret = 0;

	if (ep->side == CF_CHILD)
		return cf_ep_sync(ep, 4 * WAIT_MS);
	printf("\n    mcast limits: max_mcast_grp %d, max_mcast_qp_attach %d, "
	       "max_total_mcast_qp_attach %d ", d->max_mcast_grp,
	       d->max_mcast_qp_attach, d->max_total_mcast_qp_attach);
	EP_CHECK(ep, d->max_mcast_grp >= 0 && d->max_mcast_qp_attach >= 0 &&
		 d->max_total_mcast_qp_attach >= 0,
		 "negative multicast limits");
	if (d->max_mcast_grp && d->max_mcast_qp_attach)
		EP_CHECK(ep, d->max_total_mcast_qp_attach >=
			 d->max_mcast_qp_attach,
			 "max_total_mcast_qp_attach %d < max_mcast_qp_attach "
			 "%d", d->max_total_mcast_qp_attach,
			 d->max_mcast_qp_attach);
	n = d->max_mcast_grp;
	if (n > 4096) {
		cf_ep_skip(ep, "max_mcast_grp %d: too many groups to fill", n);
		return cf_ep_sync(ep, 4 * WAIT_MS);
	}
	for (i = 0; i <= n; i++) {
		g.raw[14] = (uint8_t)(i >> 8);
		g.raw[15] = (uint8_t)i;
		ret = cf_rc(ibv_attach_mcast(ep->qps[0], &g,
					     (uint16_t)(0xc400 + i)));
		if (ret)
			break;
	}
	EP_CHECK(ep, i == n && ret != 0, "attached %d groups of max_mcast_grp "
		 "%d (the last attach: %s)", i, n, cf_errname(ret));
	if (i == n && ret)
		printf("(attach %d: %s) ", n + 1, cf_errname(ret));
	while (--i >= 0) {
		g.raw[14] = (uint8_t)(i >> 8);
		g.raw[15] = (uint8_t)i;
		ibv_detach_mcast(ep->qps[0], &g, (uint16_t)(0xc400 + i));
	}
	qp_attach_limit(ep);
	return cf_ep_sync(ep, 4 * WAIT_MS);
}
