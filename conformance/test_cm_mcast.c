// SPDX-License-Identifier: MIT
/*
 * Multicast through the RDMA CM (rdma_join_multicast(3),
 * rdma_join_multicast_ex(3), rdma_leave_multicast(3); manual chapter 4
 * and 6.3), on the address given with -a (the suite skips without it):
 * an IP multicast destination resolves; a join reports
 * RDMA_CM_EVENT_MULTICAST_JOIN with the join's context, QPN 0xFFFFFF
 * (IBA 10.5.2.2), the port space's Q_Key (RDMA_UDP_QKEY) and an address
 * vector to the group (on InfiniBand a GRH to the MGID the kernel maps
 * the address to and a multicast LID, IBA 4.1.3; on RoCE a GRH to the
 * group's IP address, Annex A16/A17); two ids joining the same
 * group get the same group; a datagram sent through that vector reaches
 * the other id's QP, which librdmacm attached; after rdma_leave_multicast
 * nothing more arrives and a second leave is EADDRNOTAVAIL; a send-only
 * member's QP is not attached; the calls librdmacm and the kernel refuse
 * are refused with their errno.  A group the CM cannot join on this
 * device (mc_unsupported) is a SKIP with the CM's errno.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "tests.h"
#include "test_cm.h"

#define GRH_LEN 40
#define MSG_LEN 64
#define QUIET_MS 300

/* One UD id resolved to the group, with its QP and buffer (two
 * receive slots of GRH_LEN + MSG_LEN in side.buf). */
struct mc_node {
	struct rdma_cm_id *id;
	struct cm_side side;
	struct ibv_ah *ah;
	uint32_t qpn, qkey; /* from MULTICAST_JOIN */
	struct ibv_ah_attr ah_attr;
};

_Static_assert(2 * (GRH_LEN + MSG_LEN) <= sizeof(((struct mc_node *)0)
						   ->side.buf),
	       "two receive slots fit in the QP's buffer");

/* The group under test: an IPv4 or IPv6 multicast address as -a is. */
static bool mc_group(struct sockaddr_storage *mc, const char *v4,
		     const char *v6)
{
	struct sockaddr_storage a;

	if (!cm_addr(&a, 0))
		return false;
	memset(mc, 0, sizeof(*mc));
	mc->ss_family = a.ss_family;
	if (a.ss_family == AF_INET)
		return inet_pton(AF_INET, v4,
				 &((struct sockaddr_in *)mc)->sin_addr) == 1;
	return inet_pton(AF_INET6, v6,
			 &((struct sockaddr_in6 *)mc)->sin6_addr) == 1;
}

/* n: an id of port space ps on ch, resolved from -a to the group, with
 * a UD QP; false after a failure. */
static bool mc_node_init(struct mc_node *n, struct rdma_event_channel *ch,
			 struct sockaddr_storage *group,
			 enum rdma_port_space ps)
{
	struct sockaddr_storage src;
	struct rdma_cm_event *ev;

	memset(n, 0, sizeof(*n));
	if (!cm_addr(&src, 0))
		return false;
	if (rdma_create_id(ch, &n->id, n, ps)) {
		CF_CHECK(0, "rdma_create_id: %s", cf_errname(errno));
		return false;
	}
	/* rdma_resolve_addr(3): a multicast destination is resolved for
	 * rdma_join_multicast. */
	CF_EXPECT_OK(cf_rc(rdma_resolve_addr(n->id, (struct sockaddr *)&src,
					     (struct sockaddr *)group, 2000)),
		     "rdma_resolve_addr to a multicast address");
	ev = cm_expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, n->id);
	if (!ev)
		return false;
	rdma_ack_cm_event(ev);
	CF_CHECK(n->id->verbs != NULL, "resolved id without a device");
	if (!n->id->verbs)
		return false;
	return cm_side_qp(&n->side, n->id, IBV_QPT_UD);
}

static void mc_node_free(struct mc_node *n)
{
	if (n->ah)
		ibv_destroy_ah(n->ah);
	cm_side_free(&n->side, n->id);
	if (n->id)
		rdma_destroy_id(n->id);
	memset(n, 0, sizeof(*n));
}

static bool ib_port(struct rdma_cm_id *id)
{
	struct ibv_port_attr pa;

	return !ibv_query_port(id->verbs, id->port_num, &pa) &&
	       pa.link_layer != IBV_LINK_LAYER_ETHERNET;
}

/*
 * The MULTICAST_JOIN of n on ch, checked: the join's context, QPN
 * 0xFFFFFF, Q_Key want_qkey, a global address vector; on InfiniBand a
 * multicast LID and, for an IPv4 group of RDMA_PS_UDP, the MGID the
 * kernel maps it to (cma_set_mgid: ff1x:4001:<P_Key>::<low 28 bits>).
 */
static bool mc_expect_join(struct mc_node *n, struct rdma_event_channel *ch,
			   const struct sockaddr_storage *group,
			   uint32_t want_qkey)
{
	struct rdma_cm_event *ev = cm_expect(ch, RDMA_CM_EVENT_MULTICAST_JOIN,
					     n->id);
	const struct rdma_ud_param *ud;
	const uint8_t *g;

	if (!ev)
		return false;
	ud = &ev->param.ud;
	CF_CHECK(ev->status == 0, "MULTICAST_JOIN status %d", ev->status);
	CF_CHECK(ud->private_data == n, "MULTICAST_JOIN: private_data %p, "
		 "want the join's context %p", ud->private_data, (void *)n);
	CF_CHECK(ud->qp_num == 0xffffff, "MULTICAST_JOIN: qp_num %#x, want "
		 "0xffffff", ud->qp_num);
	CF_CHECK(ud->qkey == want_qkey, "MULTICAST_JOIN: qkey %#x, want %#x",
		 ud->qkey, want_qkey);
	g = ud->ah_attr.grh.dgid.raw;
	CF_CHECK(ud->ah_attr.is_global, "MULTICAST_JOIN: the address vector "
		 "has no GRH");
	if (!ib_port(n->id)) {
		/* RoCE (IBA Annex A16, A17): no LIDs; the GRH (or the IP
		 * header it stands for) goes to the group's IP address:
		 * an IPv6 group as it is, an IPv4 group IPv4-mapped
		 * (RoCE v2, A17) or, the kernel's choice for RoCE v1
		 * (cma_iboe_set_mgid), as ff0e::ffff:<group>. */
		uint8_t want[16] = { 0 };

		if (group->ss_family == AF_INET6) {
			memcpy(want, &((const struct sockaddr_in6 *)group)
					      ->sin6_addr, 16);
		} else {
			want[10] = want[11] = 0xff;
			memcpy(want + 12, &((const struct sockaddr_in *)group)
						   ->sin_addr, 4);
			if (g[0] == 0xff) {
				want[0] = 0xff;
				want[1] = 0x0e;
			}
		}
		CF_CHECK(!memcmp(g, want, 16), "MULTICAST_JOIN on RoCE: "
			 "DGID %02x%02x:%02x%02x:...:%02x%02x:%02x%02x is not "
			 "the group's IP address", g[0], g[1], g[2], g[3],
			 g[12], g[13], g[14], g[15]);
	} else {
		/* InfiniBand: an MGID (IBA 4.1.1) and an MLID. */
		CF_CHECK(g[0] == 0xff, "MULTICAST_JOIN: DGID %02x%02x:... "
			 "is not a multicast GID", g[0], g[1]);
		CF_CHECK(ud->ah_attr.dlid >= 0xc000 &&
				 ud->ah_attr.dlid <= 0xfffe,
			 "MULTICAST_JOIN: dlid %#x is not a multicast LID",
			 ud->ah_attr.dlid);
		if (group->ss_family == AF_INET &&
		    n->id->ps == RDMA_PS_UDP) {
			const uint8_t *a = (const uint8_t *)&((
				const struct sockaddr_in *)group)->sin_addr;

			CF_CHECK((g[1] & 0xf0) == 0x10 && g[2] == 0x40 &&
					 g[3] == 0x01 && !g[6] && !g[7] &&
					 !g[8] && !g[9] && !g[10] && !g[11] &&
					 g[12] == (a[0] & 0x0f) &&
					 g[13] == a[1] && g[14] == a[2] &&
					 g[15] == a[3],
				 "MULTICAST_JOIN: MGID %02x%02x:%02x%02x:..."
				 "%02x%02x:%02x%02x is not the IPoIB mapping "
				 "with the RDMA CM signature", g[0], g[1],
				 g[2], g[3], g[12], g[13], g[14], g[15]);
		}
	}
	n->qpn = ud->qp_num;
	n->qkey = ud->qkey;
	n->ah_attr = ud->ah_attr;
	n->ah = ibv_create_ah(n->side.pd, &n->ah_attr);
	CF_CHECK(n->ah != NULL, "ibv_create_ah from MULTICAST_JOIN: %s",
		 cf_errname(errno));
	rdma_ack_cm_event(ev);
	return n->ah != NULL;
}

/* The kernel's ENOTSUPP, which it lets out to user space. */
#define KERNEL_ENOTSUPP 524

/*
 * err, a join's errno, says the CM cannot join such a group here: a
 * capability missing, not a failure.  rdma_join_multicast(3) leaves
 * what is supported to the CM: the kernel's refuses send-only joins
 * where the SM cannot have them (EOPNOTSUPP, cma_join_ib_multicast) and
 * IPv6 groups on RoCE v2 (cma_iboe_join_multicast: ENOTSUPP, errno 524).
 */
static bool mc_unsupported(int err, const char *what)
{
	if (err != EOPNOTSUPP && err != ENOSYS && err != KERNEL_ENOTSUPP)
		return false;
	cf_skip("%s: the CM does not join this group here (%s)", what,
		err == KERNEL_ENOTSUPP ? "errno 524, the kernel's ENOTSUPP"
				       : cf_errname(err));
	return true;
}

/* n joins the group as a full member (rdma_join_multicast, what) and
 * its MULTICAST_JOIN on ch checks out; false after a failure or a
 * skip. */
static bool mc_join(struct mc_node *n, struct rdma_event_channel *ch,
		    const struct sockaddr_storage *group, const char *what)
{
	int ret = cf_rc(rdma_join_multicast(n->id, (struct sockaddr *)group,
					    n));

	if (ret && mc_unsupported(ret, what))
		return false;
	CF_EXPECT_OK(ret, what);
	return !ret && mc_expect_join(n, ch, group, RDMA_UDP_QKEY);
}

static void mc_leave(struct mc_node *n, const struct sockaddr_storage *group,
		     const char *what)
{
	CF_EXPECT_OK(cf_rc(rdma_leave_multicast(n->id,
						(struct sockaddr *)group)),
		     what);
}

static int mc_post_recv(struct mc_node *n, int slot)
{
	struct ibv_sge sge = {
		(uintptr_t)n->side.buf + slot * (GRH_LEN + MSG_LEN),
		GRH_LEN + MSG_LEN, n->side.mr->lkey
	};
	struct ibv_recv_wr wr = { .wr_id = 100 + slot, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return cf_rc(ibv_post_recv(n->id->qp, &wr, &bad));
}

/* Send MSG_LEN bytes of pattern seed to the group from s; its send
 * completes (s's receives, if any, are left on its CQ). */
static void mc_send(struct mc_node *s, uint64_t seed)
{
	static uint8_t msg[MSG_LEN];
	struct ibv_mr *mr = ibv_reg_mr(s->side.pd, msg, sizeof(msg), 0);
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc;
	int got;

	CF_CHECK(mr != NULL, "ibv_reg_mr: %s", cf_errname(errno));
	if (!mr)
		return;
	cf_pattern_fill(msg, sizeof(msg), seed);
	sge.addr = (uintptr_t)msg;
	sge.length = sizeof(msg);
	sge.lkey = mr->lkey;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.ud.ah = s->ah;
	wr.wr.ud.remote_qpn = s->qpn;
	wr.wr.ud.remote_qkey = s->qkey;
	CF_EXPECT_OK(cf_rc(ibv_post_send(s->id->qp, &wr, &bad)),
		     "ibv_post_send to the group");
	do {
		got = cf_poll_cq_wait(s->side.cq, &wc, 1, CM_WAIT_MS);
	} while (got == 1 && wc.wr_id != 7);
	CF_CHECK(got == 1 && wc.status == IBV_WC_SUCCESS,
		 "the send to the group did not complete");
	ibv_dereg_mr(mr);
}

/* r's receive in slot: the datagram of pattern seed from s, intact. */
static void mc_expect_recv(struct mc_node *r, struct mc_node *s, int slot,
			   uint64_t seed, const char *what)
{
	const uint8_t *p = r->side.buf + slot * (GRH_LEN + MSG_LEN);
	struct ibv_wc wc;
	int got = cf_poll_cq_wait(r->side.cq, &wc, 1, CM_WAIT_MS);

	CF_CHECK(got == 1 && wc.status == IBV_WC_SUCCESS &&
			 wc.wr_id == (uint64_t)(100 + slot) &&
			 wc.byte_len == GRH_LEN + MSG_LEN &&
			 wc.src_qp == s->id->qp->qp_num &&
			 cf_pattern_check(p + GRH_LEN, MSG_LEN, seed) < 0,
		 "%s: %d completions (%s, byte_len %u, src_qp %#x), or the "
		 "data differs", what, got,
		 got == 1 ? ibv_wc_status_str(wc.status) : "-",
		 got == 1 ? wc.byte_len : 0, got == 1 ? wc.src_qp : 0);
}

static void mc_expect_quiet(struct mc_node *r, const char *what)
{
	struct ibv_wc wc;
	int got = cf_poll_cq_wait(r->side.cq, &wc, 1, QUIET_MS);

	CF_CHECK(got == 0, "%s: a completion (wr_id %llu) came within %d ms",
		 what, got == 1 ? (unsigned long long)wc.wr_id : 0ull,
		 QUIET_MS);
}

/*
 * Two ids join one group: the same group comes back to both; a's
 * datagram reaches b's QP; b leaves and gets nothing more; a second
 * leave is EADDRNOTAVAIL.
 */
CF_TEST_IMPL(cm, mcast_join_leave)
{
	struct rdma_event_channel *ch;
	struct sockaddr_storage group;
	struct mc_node a = { 0 }, b = { 0 };

	ch = cm_channel();
	if (!ch)
		return;
	CF_CHECK(mc_group(&group, "239.1.9.9", "ff05::1:9:9"),
		 "-a %s: not a numeric address", cf_cm_addr);
	if (!mc_node_init(&a, ch, &group, RDMA_PS_UDP) ||
	    !mc_node_init(&b, ch, &group, RDMA_PS_UDP))
		goto out;
	/* b's receives are posted before it joins, as mckey does */
	CF_EXPECT_OK(mc_post_recv(&b, 0), "ibv_post_recv");
	if (!mc_join(&a, ch, &group, "rdma_join_multicast") ||
	    !mc_join(&b, ch, &group, "rdma_join_multicast (second id)"))
		goto out;
	CF_CHECK(a.ah_attr.dlid == b.ah_attr.dlid &&
			 !memcmp(&a.ah_attr.grh.dgid, &b.ah_attr.grh.dgid, 16),
		 "two joins of one group: MLID %#x and %#x, or different "
		 "MGIDs", a.ah_attr.dlid, b.ah_attr.dlid);
	mc_send(&a, 11);
	mc_expect_recv(&b, &a, 0, 11, "the joined id's QP");
	mc_leave(&b, &group, "rdma_leave_multicast");
	errno = 0;
	CF_CHECK(rdma_leave_multicast(b.id, (struct sockaddr *)&group) == -1 &&
			 errno == EADDRNOTAVAIL,
		 "a second rdma_leave_multicast: %s, want EADDRNOTAVAIL",
		 cf_errname(errno));
	CF_EXPECT_OK(mc_post_recv(&b, 1), "ibv_post_recv");
	mc_send(&a, 12);
	mc_expect_quiet(&b, "after rdma_leave_multicast");
	mc_leave(&a, &group, "rdma_leave_multicast (first id)");
out:
	mc_node_free(&b);
	mc_node_free(&a);
	rdma_destroy_event_channel(ch);
}

/*
 * A send-only full member (rdma_join_multicast_ex with
 * RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER) sends to the group; its own QP
 * is not attached (librdmacm attaches full members only) and gets
 * nothing, while a full member's does.  A device or SM without send-only
 * joins refuses with EOPNOTSUPP (the kernel's cma_join_ib_multicast):
 * then the test skips.
 */
CF_TEST_IMPL(cm, mcast_sendonly)
{
	struct rdma_cm_join_mc_attr_ex mc;
	struct rdma_event_channel *ch;
	struct sockaddr_storage group;
	struct mc_node s = { 0 }, r = { 0 };
	int ret;

	ch = cm_channel();
	if (!ch)
		return;
	CF_CHECK(mc_group(&group, "239.1.9.10", "ff05::1:9:10"),
		 "-a %s: not a numeric address", cf_cm_addr);
	if (!mc_node_init(&s, ch, &group, RDMA_PS_UDP) ||
	    !mc_node_init(&r, ch, &group, RDMA_PS_UDP))
		goto out;
	CF_EXPECT_OK(mc_post_recv(&r, 0), "ibv_post_recv");
	CF_EXPECT_OK(mc_post_recv(&s, 0), "ibv_post_recv");
	if (!mc_join(&r, ch, &group, "rdma_join_multicast"))
		goto out;
	memset(&mc, 0, sizeof(mc));
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.join_flags = RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER;
	mc.addr = (struct sockaddr *)&group;
	ret = cf_rc(rdma_join_multicast_ex(s.id, &mc, &s));
	if (ret && mc_unsupported(ret, "a send-only join"))
		goto out;
	CF_EXPECT_OK(ret, "rdma_join_multicast_ex (send-only)");
	if (!mc_expect_join(&s, ch, &group, RDMA_UDP_QKEY))
		goto out;
	mc_send(&s, 21);
	mc_expect_recv(&r, &s, 0, 21, "a full member's QP");
	mc_expect_quiet(&s, "the send-only member's own QP");
	mc_leave(&s, &group, "rdma_leave_multicast (send-only)");
	mc_leave(&r, &group, "rdma_leave_multicast");
out:
	mc_node_free(&r);
	mc_node_free(&s);
	rdma_destroy_event_channel(ch);
}

/* librdmacm's and the kernel's refusals, with their errno. */
CF_TEST_IMPL(cm, mcast_errors)
{
	struct rdma_cm_join_mc_attr_ex mc;
	struct rdma_event_channel *ch;
	struct sockaddr_storage group, src;
	struct rdma_cm_id *idle = NULL, *tcp = NULL;
	struct rdma_cm_event *ev;
	struct pollfd pfd;
	struct mc_node n;

	ch = cm_channel();
	if (!ch)
		return;
	CF_CHECK(mc_group(&group, "239.1.9.11", "ff05::1:9:11") &&
			 cm_addr(&src, 0),
		 "-a %s: not a numeric address", cf_cm_addr);
	pfd.fd = ch->fd;
	pfd.events = POLLIN;
	memset(&n, 0, sizeof(n));
	/* The kernel: an id with no device (neither bound to an address
	 * of one nor resolved) cannot join: EINVAL. */
	if (!rdma_create_id(ch, &idle, NULL, RDMA_PS_UDP)) {
		errno = 0;
		CF_CHECK(rdma_join_multicast(idle, (struct sockaddr *)&group,
					     NULL) == -1 && errno == EINVAL,
			 "join on an id without an address: %s, want "
			 "EINVAL", cf_errname(errno));
	}
	/* The kernel: only UD ids join (an RC id of RDMA_PS_TCP). */
	if (!rdma_create_id(ch, &tcp, NULL, RDMA_PS_TCP) &&
	    !rdma_resolve_addr(tcp, (struct sockaddr *)&src,
			       (struct sockaddr *)&group, 2000) &&
	    (ev = cm_next(ch))) {
		rdma_ack_cm_event(ev);
		errno = 0;
		CF_CHECK(rdma_join_multicast(tcp, (struct sockaddr *)&group,
					     NULL) == -1 && errno == EINVAL,
			 "join on an RDMA_PS_TCP id: %s, want EINVAL",
			 cf_errname(errno));
	}
	if (!mc_node_init(&n, ch, &group, RDMA_PS_UDP))
		goto out;
	/* librdmacm's rdma_join_multicast_ex: attributes it does not know
	 * ENOTSUP; no address, no join flags or unknown ones EINVAL. */
	memset(&mc, 0, sizeof(mc));
	mc.addr = (struct sockaddr *)&group;
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_RESERVED;
	errno = 0;
	CF_CHECK(rdma_join_multicast_ex(n.id, &mc, NULL) == -1 &&
			 errno == ENOTSUP,
		 "join_ex with an unknown attribute: %s, want ENOTSUP",
		 cf_errname(errno));
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS;
	errno = 0;
	CF_CHECK(rdma_join_multicast_ex(n.id, &mc, NULL) == -1 &&
			 errno == EINVAL,
		 "join_ex without join flags: %s, want EINVAL",
		 cf_errname(errno));
	mc.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS |
		       RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	mc.join_flags = RDMA_MC_JOIN_FLAG_RESERVED;
	errno = 0;
	CF_CHECK(rdma_join_multicast_ex(n.id, &mc, NULL) == -1 &&
			 errno == EINVAL,
		 "join_ex with join flags %d: %s, want EINVAL",
		 RDMA_MC_JOIN_FLAG_RESERVED, cf_errname(errno));
	/* librdmacm: leaving a group the id has not joined */
	errno = 0;
	CF_CHECK(rdma_leave_multicast(n.id, (struct sockaddr *)&group) == -1 &&
			 errno == EADDRNOTAVAIL,
		 "leave a group not joined: %s, want EADDRNOTAVAIL",
		 cf_errname(errno));
	CF_CHECK(poll(&pfd, 1, QUIET_MS) == 0, "an event after refused joins");
out:
	mc_node_free(&n);
	if (tcp)
		rdma_destroy_id(tcp);
	if (idle)
		rdma_destroy_id(idle);
	rdma_destroy_event_channel(ch);
}
