// SPDX-License-Identifier: MIT
/*
 * Automatic path migration (IBA 17.2.8; the path attributes of Modify QP,
 * IBA 11.2.5.2; ibv_modify_qp(3)), on any device that claims it
 * (IBV_DEVICE_AUTO_PATH_MIG) with two ACTIVE InfiniBand ports.
 *
 * Two RC QPs of one process are connected to each other over the device:
 * the primary path by the first port (cf_port) and its LID, the alternate
 * path by the second port and its LID.  The path migration state machine
 * of IBA 17.2.8: MIGRATED after RESET; software loads an alternate path
 * and sets REARM; the CA arms (ARMED) on a packet of the peer with BTH
 * MigReq = 0, i.e. once the peer has rearmed too; software may then ask
 * MIGRATED (a migration on request); the peer's CA migrates when a packet
 * with MigReq = 1 arrives on its alternate path, and says so with
 * IBV_EVENT_PATH_MIG (IBA 11.6.3.1, manual 6.1.7).
 *
 * On an Ethernet link layer an alternate path needs a GRH, which these
 * tests do not cover: they skip there.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests.h"

#define APM_WAIT_MS 5000
#define APM_MSG 256
#define APM_RECV_OFF 2048
#define APM_BUF 4096
#define APM_TIMEOUT 14
/* Not the primary path's, so that a query mixing them up shows. */
#define APM_ALT_TIMEOUT 15

/* Two RC QPs connected to each other: path [0] primary, [1] alternate. */
struct apm_pair {
	uint8_t port[2];
	uint16_t lid[2];
	struct ibv_cq *cq[2];
	struct ibv_qp *qp[2];
	struct ibv_mr *mr[2];
};

static const char *apm_mig_name(int state)
{
	switch (state) {
	case IBV_MIG_MIGRATED:
		return "MIGRATED";
	case IBV_MIG_REARM:
		return "REARM";
	case IBV_MIG_ARMED:
		return "ARMED";
	default:
		return "?";
	}
}

/*
 * Whether the device can carry an alternate path these tests use: two
 * ports, AUTO_PATH_MIG, both ports ACTIVE on InfiniBand with a LID.
 * Skips (naming what is missing) when not; fills p->port and p->lid.
 */
static bool apm_capable(struct apm_pair *p)
{
	const struct ibv_device_attr *d = cf.dev;
	struct ibv_port_attr pa;
	int i, ret;

	if (d->phys_port_cnt < 2) {
		cf_skip("the device has %u port: an alternate path on another "
			"port needs two", d->phys_port_cnt);
		return false;
	}
	if (!(d->device_cap_flags & IBV_DEVICE_AUTO_PATH_MIG)) {
		cf_skip("no automatic path migration "
			"(IBV_DEVICE_AUTO_PATH_MIG)");
		return false;
	}
	p->port[0] = (uint8_t)cf_port;
	p->port[1] = (uint8_t)(cf_port % d->phys_port_cnt + 1);
	for (i = 0; i < 2; i++) {
		ret = cf_rc(ibv_query_port(cf.ctx, p->port[i], &pa));
		CF_CHECK(!ret, "ibv_query_port(%u): %s", p->port[i],
			 cf_errname(ret));
		if (ret)
			return false;
		if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
			cf_skip("port %u is Ethernet: an alternate path there "
				"needs a GRH, which the APM tests do not "
				"cover", p->port[i]);
			return false;
		}
		if (pa.state != IBV_PORT_ACTIVE || !pa.lid) {
			cf_skip("port %u is not ACTIVE with a LID (%s, LID %u)",
				p->port[i], ibv_port_state_str(pa.state),
				pa.lid);
			return false;
		}
		p->lid[i] = pa.lid;
	}
	return true;
}

static void apm_pair_destroy(struct apm_pair *p)
{
	int i;

	for (i = 0; i < 2; i++) {
		if (p->qp[i])
			ibv_destroy_qp(p->qp[i]);
		if (p->cq[i])
			ibv_destroy_cq(p->cq[i]);
		if (p->mr[i])
			cf_free_mr(p->mr[i]);
		p->qp[i] = NULL;
		p->cq[i] = NULL;
		p->mr[i] = NULL;
	}
}

/* qp[i] from RESET to RTS, connected to qp[1 - i] by the primary path. */
static int apm_connect(struct apm_pair *p, int i)
{
	struct ibv_qp_attr a;

	cf_qp_fill_attr(&cf, p->qp[i], IBV_QPS_RESET, IBV_QPS_RTS, &a);
	a.dest_qp_num = p->qp[1 - i]->qp_num;
	a.port_num = p->port[0];
	memset(&a.ah_attr, 0, sizeof(a.ah_attr));
	a.ah_attr.dlid = p->lid[0];
	a.ah_attr.port_num = p->port[0];
	a.timeout = APM_TIMEOUT;
	return cf_qp_walk(p->qp[i], &a, IBV_QPS_RESET, IBV_QPS_RTS);
}

/*
 * Load the alternate path into qp[i] in RTS and ask REARM (RTS -> RTS,
 * IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE: IBA 11.2.5.2, 17.2.8).
 */
static int apm_load_alt(struct apm_pair *p, int i)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.alt_ah_attr.dlid = p->lid[1];
	a.alt_ah_attr.port_num = p->port[1];
	a.alt_port_num = p->port[1];
	a.alt_pkey_index = 0;
	a.alt_timeout = APM_ALT_TIMEOUT;
	a.path_mig_state = IBV_MIG_REARM;
	return cf_rc(ibv_modify_qp(p->qp[i], &a, IBV_QP_STATE |
				   IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE));
}

/*
 * Two QPs in RTS connected to each other, qp[i] with the alternate path
 * loaded and REARM asked where alt[i].  False (skipped or failed, said)
 * when that cannot be set up.
 */
static bool apm_pair_create(struct apm_pair *p, const bool alt[2])
{
	struct ibv_qp_init_attr ia;
	int i, ret;

	memset(p, 0, sizeof(*p));
	if (!apm_capable(p))
		return false;
	for (i = 0; i < 2; i++) {
		p->cq[i] = ibv_create_cq(cf.ctx, 16, NULL, NULL, 0);
		p->mr[i] = cf_alloc_mr(&cf, APM_BUF, IBV_ACCESS_LOCAL_WRITE);
		CF_CHECK(p->cq[i] && p->mr[i], "CQ or MR: %s",
			 cf_errname(errno));
		if (!p->cq[i] || !p->mr[i])
			return false;
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = ia.recv_cq = p->cq[i];
		ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
		ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
		p->qp[i] = cf_create_qp(&cf, IBV_QPT_RC, &ia);
		CF_CHECK(p->qp[i] != NULL, "RC QP: %s", cf_errname(errno));
		if (!p->qp[i])
			return false;
	}
	for (i = 0; i < 2; i++) {
		ret = apm_connect(p, i);
		CF_CHECK(!ret, "QP %d to RTS on port %u: %s", i, p->port[0],
			 cf_errname(ret));
		if (ret)
			return false;
	}
	for (i = 0; i < 2; i++) {
		if (!alt[i])
			continue;
		ret = apm_load_alt(p, i);
		CF_CHECK(!ret, "QP %d, RTS -> RTS with an alternate path on "
			 "port %u, LID 0x%x, REARM: %s (IBA 11.2.5.2)", i,
			 p->port[1], p->lid[1], cf_errname(ret));
		if (ret)
			return false;
	}
	return true;
}

/* ibv_query_qp of the state and the path attributes; 0 or errno. */
static int apm_query(struct ibv_qp *qp, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr init;

	memset(a, 0, sizeof(*a));
	a->path_mig_state = (enum ibv_mig_state)-1;
	return cf_rc(ibv_query_qp(qp, a, IBV_QP_STATE | IBV_QP_AV |
				  IBV_QP_PORT | IBV_QP_ALT_PATH |
				  IBV_QP_PATH_MIG_STATE, &init));
}

/* qp's path migration state, or -1 when the query fails. */
static int apm_mig_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;

	return apm_query(qp, &a) ? -1 : (int)a.path_mig_state;
}

/*
 * One SEND of APM_MSG bytes from qp[from] to qp[to], a receive posted
 * there first: both complete SUCCESS within APM_WAIT_MS and the data
 * arrives intact (IBA 9.4.1, 17.2.8: migration loses nothing).  True when
 * so; what differs is failed, named by what.
 */
static bool apm_send(struct apm_pair *p, int from, int to, uint64_t seed,
		     const char *what)
{
	struct ibv_mr *smr = p->mr[from], *rmr = p->mr[to];
	uint8_t *rbuf = (uint8_t *)rmr->addr + APM_RECV_OFF;
	struct ibv_sge ss = { (uintptr_t)smr->addr, APM_MSG, smr->lkey };
	struct ibv_sge rs = { (uintptr_t)rbuf, APM_MSG, rmr->lkey };
	struct ibv_send_wr swr = { .wr_id = seed, .sg_list = &ss,
				   .num_sge = 1, .opcode = IBV_WR_SEND,
				   .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr rwr = { .wr_id = seed, .sg_list = &rs,
				   .num_sge = 1 };
	struct ibv_send_wr *sbad;
	struct ibv_recv_wr *rbad;
	struct ibv_wc wc;
	int ret, got;
	bool ok;

	cf_pattern_fill(smr->addr, APM_MSG, seed);
	memset(rbuf, 0, APM_MSG);
	ret = cf_rc(ibv_post_recv(p->qp[to], &rwr, &rbad));
	if (!ret)
		ret = cf_rc(ibv_post_send(p->qp[from], &swr, &sbad));
	CF_CHECK(!ret, "%s: posting QP %d -> %d: %s", what, from, to,
		 cf_errname(ret));
	if (ret)
		return false;
	got = cf_poll_cq_wait(p->cq[from], &wc, 1, APM_WAIT_MS);
	ok = got == 1 && wc.status == IBV_WC_SUCCESS &&
	     wc.opcode == IBV_WC_SEND && wc.wr_id == seed;
	CF_CHECK(ok, "%s: SEND QP %d -> %d: %d completions, %s, expected "
		 "one SEND SUCCESS", what, from, to, got,
		 got == 1 ? ibv_wc_status_str(wc.status) : "-");
	if (!ok)
		return false;
	got = cf_poll_cq_wait(p->cq[to], &wc, 1, APM_WAIT_MS);
	ok = got == 1 && wc.status == IBV_WC_SUCCESS &&
	     wc.opcode == IBV_WC_RECV && wc.byte_len == APM_MSG;
	CF_CHECK(ok, "%s: receive of QP %d: %d completions, %s, byte_len "
		 "%u, expected RECV SUCCESS of %d", what, to, got,
		 got == 1 ? ibv_wc_status_str(wc.status) : "-",
		 got == 1 ? wc.byte_len : 0, APM_MSG);
	if (!ok)
		return false;
	ok = cf_pattern_check(rbuf, APM_MSG, seed) < 0;
	CF_CHECK(ok, "%s: SEND QP %d -> %d: data differs at byte %ld", what,
		 from, to, cf_pattern_check(rbuf, APM_MSG, seed));
	return ok;
}

/* n SENDs each way, one at a time, qp[first] sending first. */
static bool apm_traffic(struct apm_pair *p, int first, int n,
			uint64_t seed, const char *what)
{
	int k;

	for (k = 0; k < n; k++)
		if (!apm_send(p, first, 1 - first, seed + 2 * (uint64_t)k,
			      what) ||
		    !apm_send(p, 1 - first, first,
			      seed + 2 * (uint64_t)k + 1, what))
			return false;
	return true;
}

/*
 * Traffic both ways until both QPs report ARMED or APM_WAIT_MS passed
 * (IBA 17.2.8: a QP in REARM arms on a packet of its peer with MigReq =
 * 0; when is the CA's, so the wait goes on with traffic).  The states
 * last seen go to st; true when both are ARMED.
 */
static bool apm_wait_armed(struct apm_pair *p, int st[2])
{
	long long deadline = cf_now_ms() + APM_WAIT_MS;
	uint64_t seed = 100;

	for (;;) {
		if (!apm_traffic(p, 0, 1, seed, "traffic before arming"))
			return false;
		seed += 2;
		st[0] = apm_mig_state(p->qp[0]);
		st[1] = apm_mig_state(p->qp[1]);
		if (st[0] == IBV_MIG_ARMED && st[1] == IBV_MIG_ARMED)
			return true;
		if (cf_now_ms() >= deadline)
			return false;
		usleep(10000);
	}
}

/*
 * IBA 11.2.5.2, 17.2.8: a loaded alternate path is queried back
 * (ibv_query_qp(3)) with the state REARM, or ARMED if the CA armed it
 * already; after traffic both ways both QPs arm.
 */
CF_TEST_IMPL(apm, alt_path_arms)
{
	static const bool alt[2] = { true, true };
	struct apm_pair p;
	struct ibv_qp_attr a;
	int i, ret, st[2];

	if (!apm_pair_create(&p, alt))
		goto out;
	for (i = 0; i < 2; i++) {
		ret = apm_query(p.qp[i], &a);
		CF_CHECK(!ret, "ibv_query_qp: %s", cf_errname(ret));
		if (ret)
			goto out;
		CF_CHECK(a.qp_state == IBV_QPS_RTS, "QP %d in %s after "
			 "loading the alternate path, expected RTS", i,
			 cf_state_name(a.qp_state));
		CF_CHECK(a.alt_ah_attr.dlid == p.lid[1] &&
			 a.alt_port_num == p.port[1] &&
			 a.alt_timeout == APM_ALT_TIMEOUT,
			 "QP %d's alternate path queried: DLID 0x%x, port %u, "
			 "timeout %u; set 0x%x, %u, %u", i,
			 a.alt_ah_attr.dlid, a.alt_port_num, a.alt_timeout,
			 p.lid[1], p.port[1], APM_ALT_TIMEOUT);
		CF_CHECK(a.path_mig_state == IBV_MIG_REARM ||
			 a.path_mig_state == IBV_MIG_ARMED,
			 "QP %d's path migration state %s after REARM was "
			 "set, expected REARM or ARMED", i,
			 apm_mig_name(a.path_mig_state));
	}
	if (!apm_traffic(&p, 0, 1, 1, "traffic after REARM"))
		goto out;
	st[0] = st[1] = -1;
	if (!apm_wait_armed(&p, st))
		CF_CHECK(0, "after traffic both ways for %d ms the QPs are "
			 "%s and %s, expected both ARMED (IBA 17.2.8: REARM "
			 "arms on a packet with MigReq 0)", APM_WAIT_MS,
			 apm_mig_name(st[0]), apm_mig_name(st[1]));
out:
	apm_pair_destroy(&p);
}

/*
 * Say (as the device's choice) what ibv_query_qp reports as qp[i]'s
 * primary path after it migrated: IBA 17.2.8 has the alternate path
 * become the one in use, what a query returns then is not spelled out.
 */
static void apm_report_primary(struct apm_pair *p, int i,
			       const struct ibv_qp_attr *a)
{
	if (a->ah_attr.dlid != p->lid[1] || a->port_num != p->port[1])
		CF_CHOICE("after migrating, QP %d's primary path is queried "
			  "as port %u, DLID 0x%x (the alternate path was "
			  "port %u, DLID 0x%x)", i, a->port_num,
			  a->ah_attr.dlid, p->port[1], p->lid[1]);
}

/*
 * qp[i] reaches MIGRATED within APM_WAIT_MS (polled with ibv_query_qp),
 * in RTS (IBA 17.2.8: a migration leaves the QP state alone); after
 * names what migrated it.  Its primary path is reported then.
 */
static void apm_expect_migrated(struct apm_pair *p, int i, const char *after)
{
	long long deadline = cf_now_ms() + APM_WAIT_MS;
	struct ibv_qp_attr a;
	int ret;

	while (!(ret = apm_query(p->qp[i], &a)) &&
	       a.path_mig_state != IBV_MIG_MIGRATED && cf_now_ms() < deadline)
		usleep(1000);
	CF_CHECK(!ret && a.path_mig_state == IBV_MIG_MIGRATED &&
		 a.qp_state == IBV_QPS_RTS, "QP %d is %s, %s after %s, "
		 "expected RTS, MIGRATED within %d ms", i,
		 ret ? cf_errname(ret) : cf_state_name(a.qp_state),
		 ret ? "-" : apm_mig_name(a.path_mig_state), after,
		 APM_WAIT_MS);
	if (!ret && a.path_mig_state == IBV_MIG_MIGRATED)
		apm_report_primary(p, i, &a);
}

/*
 * Wait for IBV_EVENT_PATH_MIG naming p->qp[1] (IBA 11.6.3.1, manual
 * 6.1.7: the CA migrated the connection); one naming p->qp[0], which
 * software migrated, is reported.  0 or -1; other events named in seen.
 */
static int apm_wait_path_mig(struct apm_pair *p, char *seen, size_t len)
{
	long long deadline = cf_now_ms() + APM_WAIT_MS;
	struct ibv_async_event ev;
	long long left;

	while ((left = deadline - cf_now_ms()) > 0) {
		if (cf_wait_async(cf.ctx, IBV_EVENT_PATH_MIG, (int)left, &ev,
				  seen, len))
			return -1;
		if (ev.element.qp == p->qp[1])
			return 0;
		if (ev.element.qp == p->qp[0])
			CF_CHOICE("IBV_EVENT_PATH_MIG raised for the QP "
				  "software migrated too");
	}
	return -1;
}

/*
 * IBA 17.2.8: software asks MIGRATED of an ARMED QP; it moves to the
 * alternate path, traffic both ways completes SUCCESS with data intact,
 * and the peer's CA, seeing MigReq 1 on its alternate path, migrates too
 * and raises IBV_EVENT_PATH_MIG (IBA 11.6.3.1, manual 6.1.7).
 */
CF_TEST_IMPL(apm, software_migration)
{
	static const bool alt[2] = { true, true };
	struct ibv_qp_attr a;
	struct apm_pair p;
	char seen[200];
	int ret, st[2];

	if (!apm_pair_create(&p, alt))
		goto out;
	st[0] = st[1] = -1;
	if (!apm_wait_armed(&p, st)) {
		CF_CHECK(0, "the QPs are %s and %s after traffic both ways, "
			 "expected both ARMED before migrating (IBA 17.2.8)",
			 apm_mig_name(st[0]), apm_mig_name(st[1]));
		goto out;
	}
	memset(&a, 0, sizeof(a));
	a.path_mig_state = IBV_MIG_MIGRATED;
	ret = cf_rc(ibv_modify_qp(p.qp[0], &a, IBV_QP_PATH_MIG_STATE));
	CF_CHECK(!ret, "MIGRATED asked of an ARMED QP in RTS: %s "
		 "(IBA 17.2.8)", cf_errname(ret));
	if (ret)
		goto out;
	apm_expect_migrated(&p, 0, "migrating by software");
	if (!apm_traffic(&p, 0, 4, 1000, "traffic after migration"))
		goto out;
	ret = apm_wait_path_mig(&p, seen, sizeof(seen));
	CF_CHECK(!ret, "no IBV_EVENT_PATH_MIG for the peer QP within %d ms "
		 "(other events: %s)", APM_WAIT_MS, seen[0] ? seen : "none");
	apm_expect_migrated(&p, 1, "MigReq 1 on its alternate path");
	apm_traffic(&p, 1, 4, 2000, "traffic after both migrated");
out:
	apm_pair_destroy(&p);
}

/*
 * Ask path_mig_state want of qp (RTS -> RTS, IBV_QP_PATH_MIG_STATE), which
 * the rule forbids: it must fail and leave the QP in RTS and in the path
 * migration state was.  The errno is the device's: EINVAL, as
 * ibv_modify_qp(3) gives for an invalid attribute, or another (reported).
 */
static void apm_refused(struct ibv_qp *qp, enum ibv_mig_state want,
			enum ibv_mig_state was, const char *what)
{
	struct ibv_qp_attr a;
	int ret;

	memset(&a, 0, sizeof(a));
	a.path_mig_state = want;
	ret = cf_rc(ibv_modify_qp(qp, &a, IBV_QP_PATH_MIG_STATE));
	CF_CHECK(ret != 0, "%s: accepted", what);
	if (ret && ret != EINVAL)
		CF_CHOICE("%s: refused with %s", what, cf_errname(ret));
	ret = apm_query(qp, &a);
	CF_CHECK(!ret && a.qp_state == IBV_QPS_RTS &&
		 a.path_mig_state == was, "%s: afterwards the QP is %s, %s, "
		 "expected RTS, %s as before", what,
		 ret ? cf_errname(ret) : cf_state_name(a.qp_state),
		 ret ? "-" : apm_mig_name(a.path_mig_state),
		 apm_mig_name(was));
}

/*
 * IBA 17.2.8: software cannot set ARMED (the CA arms), and can set
 * MIGRATED only from ARMED, else Modify QP fails at once (11.2.5.2, the
 * immediate errors), the QP unchanged.  QP 0 has an alternate path and
 * REARM, QP 1 none (MIGRATED); no packet flows, so QP 0 cannot arm.
 */
CF_TEST_IMPL(apm, bad_mig_state)
{
	static const bool alt[2] = { true, false };
	struct apm_pair p;
	int st;

	if (!apm_pair_create(&p, alt))
		goto out;
	st = apm_mig_state(p.qp[0]);
	if (st == IBV_MIG_REARM) {
		apm_refused(p.qp[0], IBV_MIG_MIGRATED, IBV_MIG_REARM,
			    "MIGRATED asked in REARM");
		apm_refused(p.qp[0], IBV_MIG_ARMED, IBV_MIG_REARM,
			    "ARMED asked in REARM");
	} else {
		CF_CHECK(st == IBV_MIG_ARMED, "QP 0 is %s after REARM, "
			 "expected REARM (IBA 17.2.8)", apm_mig_name(st));
		CF_CHOICE("QP 0 armed with no packet of its peer: MIGRATED "
			  "and ARMED from REARM are not tried");
	}
	st = apm_mig_state(p.qp[1]);
	CF_CHECK(st == IBV_MIG_MIGRATED, "QP 1 is %s with no alternate path, "
		 "expected MIGRATED (IBA 17.2.8)", apm_mig_name(st));
	if (st == IBV_MIG_MIGRATED)
		apm_refused(p.qp[1], IBV_MIG_ARMED, IBV_MIG_MIGRATED,
			    "ARMED asked in MIGRATED");
out:
	apm_pair_destroy(&p);
}
