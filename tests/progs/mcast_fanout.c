// SPDX-License-Identifier: MIT
/*
 * UD multicast on one node (IBA 10.5; manual 3.6.13, 3.6.14): a sender
 * and RECEIVERS processes, each with two UD QPs attached to a group and
 * one that is not.  Every attached QP gets every datagram, byte for byte,
 * with the GRH naming the group; the sender's own QP, not attached, gets
 * none, while another QP of the sender's process that is attached gets
 * them all; a QP not attached gets none; a group named by its MLID alone
 * (no GRH) is delivered too; a detached QP gets nothing more.  Also: the
 * device's group limits hold, and a QP still attached is not destroyed
 * (EBUSY).
 *
 * Usage: mcast_fanout.  Exit 0 pass, 1 fail, 77 no device.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rc_pair.h"
#include "ud_qp.h"

#define RECEIVERS 3
#define BATCHES 8
#define BATCH 32
#define MSGS (BATCHES * BATCH)
#define MAX_MSG 2048
#define GRH_LEN 40
#define SLOT (GRH_LEN + MAX_MSG)
#define QKEY 0x11111111u
#define WAIT_S 20

/* The group with a GRH, and the one named by its MLID alone. */
static const union ibv_gid group_gid = {
	.raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 239,
		 1, 2, 3 }
};
static const union ibv_gid lid_group_gid = {
	.raw = { 0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 239,
		 1, 2, 4 }
};
#define GROUP_LID 0xc001
#define LID_GROUP_LID 0xc002

struct ud_qp {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	unsigned int got; /* datagrams received */
};

struct side {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *scq; /* sends */
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t buf_len;
	struct ud_qp q[3];
};

static uint32_t msg_len(unsigned int k)
{
	return 1 + (k * 97u) % MAX_MSG;
}

static uint8_t msg_byte(unsigned int k, uint32_t i)
{
	return (uint8_t)(k * 31u + i * 7u + 1u);
}

/* Receive slot j of QP i. */
static uint8_t *slot_of(struct side *s, int i, unsigned int j,
			unsigned int recv_wr)
{
	return s->buf + MAX_MSG + ((size_t)i * recv_wr + j) * SLOT;
}

/* Device, PD, send CQ, the buffer, three UD QPs with a CQ each, each
 * with recv_wr receives posted. */
static int side_open(struct side *s, unsigned int recv_wr)
{
	struct ibv_port_attr pa;
	int i, ret;

	ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->scq, BATCH * 4, &pa);
	if (ret)
		return ret;
	s->buf_len = (size_t)3 * recv_wr * SLOT + MAX_MSG;
	s->buf = calloc(1, s->buf_len);
	if (!s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, s->buf_len, IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		say("reg_mr: %s", strerror(errno));
		return -1;
	}
	for (i = 0; i < 3; i++) {
		s->q[i].cq = ibv_create_cq(s->ctx, (int)recv_wr, NULL, NULL, 0);
		if (!s->q[i].cq)
			return -1;
		s->q[i].qp = ud_qp_open(s->pd, s->scq, s->q[i].cq, BATCH * 2,
					recv_wr, QKEY);
		if (!s->q[i].qp ||
		    ud_post_recvs(s->q[i].qp, s->mr, slot_of(s, i, 0, recv_wr),
				  SLOT, 0, recv_wr))
			return -1;
	}
	return 0;
}

/*
 * Take the completions of QP i until it has `want` datagrams in all, or
 * wait_s passed; check each: message k = got (in order from one sender),
 * its bytes, the GRH (when grh) naming gid, the sender's QPN.
 */
static int collect(struct side *s, int i, unsigned int want, double wait_s,
		   unsigned int recv_wr, uint32_t src_qpn, bool grh,
		   const union ibv_gid *gid, unsigned int first_k)
{
	struct ud_qp *q = &s->q[i];
	double end = now_s() + wait_s;
	struct ibv_wc wc;
	struct ibv_grh *g;
	unsigned int k;
	uint8_t *p;
	uint32_t n;
	int got;

	while (q->got < want && now_s() < end) {
		got = ibv_poll_cq(q->cq, 1, &wc);
		if (got < 0)
			return -1;
		if (!got) {
			usleep(100);
			continue;
		}
		k = first_k + q->got;
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV) {
			say("QP %d: datagram %u: %s", i, k,
			    ibv_wc_status_str(wc.status));
			return -1;
		}
		if (wc.src_qp != src_qpn ||
		    wc.byte_len != GRH_LEN + msg_len(k) ||
		    !!(wc.wc_flags & IBV_WC_GRH) != grh) {
			say("QP %d: datagram %u: src_qp %#x byte_len %u "
			    "flags %#x, want %#x %u %s GRH",
			    i, k, wc.src_qp, wc.byte_len, wc.wc_flags, src_qpn,
			    GRH_LEN + msg_len(k), grh ? "with" : "without");
			return -1;
		}
		p = slot_of(s, i, (unsigned int)wc.wr_id, recv_wr);
		g = (struct ibv_grh *)p;
		if (grh && memcmp(&g->dgid, gid, sizeof(*gid))) {
			say("QP %d: datagram %u: the GRH names another group",
			    i, k);
			return -1;
		}
		for (n = 0; n < msg_len(k); n++) {
			if (p[GRH_LEN + n] != msg_byte(k, n)) {
				say("QP %d: datagram %u: byte %u is %#x, "
				    "not %#x", i, k, n, p[GRH_LEN + n],
				    msg_byte(k, n));
				return -1;
			}
		}
		q->got++;
	}
	if (q->got != want) {
		say("QP %d: %u datagrams, want %u", i, q->got, want);
		return -1;
	}
	return 0;
}

/* Nothing more arrives on QP i within wait_s. */
static int none_more(struct side *s, int i, double wait_s)
{
	double end = now_s() + wait_s;
	struct ibv_wc wc;
	int got;

	while (now_s() < end) {
		got = ibv_poll_cq(s->q[i].cq, 1, &wc);
		if (got) {
			say("QP %d got a datagram it must not (status %s)", i,
			    got < 0 ? "poll error" : ibv_wc_status_str(wc.status));
			return -1;
		}
		usleep(1000);
	}
	return 0;
}

static int attach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	int ret = ibv_attach_mcast(qp, gid, lid);

	if (ret)
		say("attach_mcast: %s", strerror(ret));
	return ret ? -1 : 0;
}

static int detach(struct ibv_qp *qp, const union ibv_gid *gid, uint16_t lid)
{
	int ret = ibv_detach_mcast(qp, gid, lid);

	if (ret)
		say("detach_mcast: %s", strerror(ret));
	return ret ? -1 : 0;
}

static int send_batch(struct side *s, struct ibv_ah *ah, unsigned int first)
{
	unsigned int k;
	uint32_t n;

	/* One at a time: the buffer is rewritten for the next. */
	for (k = first; k < first + BATCH; k++) {
		for (n = 0; n < msg_len(k); n++)
			s->buf[n] = msg_byte(k, n);
		if (ud_send_mcast(s->q[0].qp, s->scq, s->mr, s->buf, msg_len(k),
				  ah, QKEY, k, false, WAIT_S))
			return -1;
	}
	return 0;
}

static int put(int fd, uint32_t v)
{
	return rc_xfer(fd, &v, sizeof(v), 1);
}

static int get(int fd, uint32_t *v)
{
	return rc_xfer(fd, v, sizeof(*v), 0);
}

/*
 * A receiver: QPs 0 and 1 attached to the group (and 0 to the MLID-only
 * group), QP 2 attached to nothing.  Receiver 0 detaches QP 1 before the
 * last batch.
 */
static int receiver(int id, int rfd, int wfd)
{
	struct side s = { 0 };
	unsigned int recv_wr = MSGS + BATCH, b, want;
	uint32_t src_qpn, go;
	int i, ret;

	ret = side_open(&s, recv_wr);
	if (ret)
		return ret > 0 ? 77 : 1;
	if (attach(s.q[0].qp, &group_gid, GROUP_LID) ||
	    attach(s.q[1].qp, &group_gid, GROUP_LID) ||
	    attach(s.q[0].qp, &lid_group_gid, LID_GROUP_LID))
		return 1;
	if (put(wfd, 1) || get(rfd, &src_qpn))
		return 1;
	for (b = 0; b < BATCHES; b++) {
		if (get(rfd, &go))
			return 1;
		if (b == BATCHES - 1 && id == 0) {
			if (detach(s.q[1].qp, &group_gid, GROUP_LID))
				return 1;
			if (put(wfd, 2) || get(rfd, &go))
				return 1;
		}
		want = (b + 1) * BATCH;
		if (collect(&s, 0, want, WAIT_S, recv_wr, src_qpn, true,
			    &group_gid, 0))
			return 1;
		if (!(b == BATCHES - 1 && id == 0) &&
		    collect(&s, 1, want, WAIT_S, recv_wr, src_qpn, true,
			    &group_gid, 0))
			return 1;
		if (put(wfd, 3))
			return 1;
	}
	/* The MLID-only group: one batch without a GRH, to QP 0 only. */
	if (get(rfd, &go) ||
	    collect(&s, 0, MSGS + BATCH, WAIT_S, recv_wr, src_qpn, false,
		    NULL, 0))
		return 1;
	if (none_more(&s, 2, 0.2) || none_more(&s, 1, 0.05))
		return 1;
	if (id == 0 && s.q[1].got != (BATCHES - 1) * BATCH) {
		say("receiver 0: the detached QP got %u, want %u", s.q[1].got,
		    (BATCHES - 1) * BATCH);
		return 1;
	}
	/* A QP still attached is not destroyed. */
	ret = ibv_destroy_qp(s.q[0].qp);
	if (ret != EBUSY) {
		say("destroy_qp of an attached QP: %s, want EBUSY",
		    ret ? strerror(ret) : "destroyed");
		return 1;
	}
	if (detach(s.q[0].qp, &group_gid, GROUP_LID) ||
	    detach(s.q[0].qp, &lid_group_gid, LID_GROUP_LID) ||
	    (id != 0 && detach(s.q[1].qp, &group_gid, GROUP_LID)))
		return 1;
	for (i = 0; i < 3; i++)
		if (ibv_destroy_qp(s.q[i].qp)) {
			say("destroy_qp after detach: %s", strerror(errno));
			return 1;
		}
	if (put(wfd, 4))
		return 1;
	return 0;
}

/* The device's limits: max_mcast_qp_attach QPs on one group, and
 * max_mcast_grp groups for one QP, then one more fails with ENOMEM. */
static int check_limits(struct side *s)
{
	struct ibv_device_attr da;
	struct ibv_qp **qps;
	union ibv_gid gid = group_gid;
	int i, n, ret, fails = 0;

	if (ibv_query_device(s->ctx, &da))
		return -1;
	if (da.max_mcast_grp <= 0 || da.max_mcast_qp_attach <= 0 ||
	    (long)da.max_total_mcast_qp_attach <
		    (long)da.max_mcast_qp_attach) {
		say("multicast limits: %d groups, %d per group, %d in all",
		    da.max_mcast_grp, da.max_mcast_qp_attach,
		    da.max_total_mcast_qp_attach);
		return -1;
	}
	n = da.max_mcast_qp_attach + 1;
	qps = calloc((size_t)n, sizeof(*qps));
	if (!qps)
		return -1;
	gid.raw[15] = 0x77;
	for (i = 0; i < n && !fails; i++) {
		qps[i] = ud_qp_open(s->pd, s->scq, s->q[0].cq, BATCH * 2, 1,
				    QKEY);
		if (!qps[i])
			fails++;
		else if ((ret = ibv_attach_mcast(qps[i], &gid, 0xc077)) !=
			 (i < n - 1 ? 0 : ENOMEM)) {
			say("attach of QP %d of %d to one group: %s", i + 1,
			    n - 1, ret ? strerror(ret) : "accepted");
			fails++;
		}
	}
	for (i = 0; i < n && qps[i]; i++) {
		if (i < n - 1)
			ibv_detach_mcast(qps[i], &gid, 0xc077);
		ibv_destroy_qp(qps[i]);
	}
	free(qps);
	for (i = 0; i <= da.max_mcast_grp && !fails; i++) {
		gid.raw[13] = (uint8_t)(i >> 8);
		gid.raw[14] = (uint8_t)i;
		ret = ibv_attach_mcast(s->q[2].qp, &gid, 0xc100);
		if (ret != (i < da.max_mcast_grp ? 0 : ENOMEM)) {
			say("attach to group %d of %d: %s", i + 1,
			    da.max_mcast_grp, ret ? strerror(ret) : "accepted");
			fails++;
		}
	}
	for (i = 0; i < da.max_mcast_grp; i++) {
		gid.raw[13] = (uint8_t)(i >> 8);
		gid.raw[14] = (uint8_t)i;
		ibv_detach_mcast(s->q[2].qp, &gid, 0xc100);
	}
	return fails ? -1 : 0;
}

/* The limits, alone on the node: max_mcast_grp counts its groups. */
static int limits(void)
{
	struct side s = { 0 };
	int ret = side_open(&s, 1);

	if (ret)
		return ret > 0 ? 77 : 1;
	return check_limits(&s) ? 1 : 0;
}

static struct ibv_ah *group_ah(struct side *s, const union ibv_gid *gid,
			       uint16_t lid)
{
	struct ibv_ah_attr a = { .dlid = lid, .port_num = 1 };

	if (gid) {
		a.is_global = 1;
		a.grh.dgid = *gid;
		a.grh.hop_limit = 1;
	}
	return ibv_create_ah(s->pd, &a);
}

static int sender(int *rfd, int *wfd)
{
	struct side s = { 0 };
	unsigned int recv_wr = MSGS + BATCH, b;
	struct ibv_ah *ah, *lid_ah;
	uint32_t v;
	int i, ret;

	ret = side_open(&s, recv_wr);
	if (ret)
		return ret > 0 ? 77 : 1;
	/* QP 0 sends and is not attached; QP 1, of the same process, is. */
	if (attach(s.q[1].qp, &group_gid, GROUP_LID))
		return 1;
	ah = group_ah(&s, &group_gid, GROUP_LID);
	lid_ah = group_ah(&s, NULL, LID_GROUP_LID);
	if (!ah || !lid_ah) {
		say("create_ah: %s", strerror(errno));
		return 1;
	}
	for (i = 0; i < RECEIVERS; i++)
		if (get(rfd[i], &v) || put(wfd[i], s.q[0].qp->qp_num))
			return 1;
	for (b = 0; b < BATCHES; b++) {
		for (i = 0; i < RECEIVERS; i++)
			if (put(wfd[i], b))
				return 1;
		if (b == BATCHES - 1 &&
		    (get(rfd[0], &v) || put(wfd[0], 0)))
			return 1;
		if (send_batch(&s, ah, b * BATCH))
			return 1;
		for (i = 0; i < RECEIVERS; i++)
			if (get(rfd[i], &v))
				return 1;
		if (collect(&s, 1, (b + 1) * BATCH, WAIT_S, recv_wr,
			    s.q[0].qp->qp_num, true, &group_gid, 0))
			return 1;
	}
	for (i = 0; i < RECEIVERS; i++)
		if (put(wfd[i], 0))
			return 1;
	if (send_batch(&s, lid_ah, MSGS))
		return 1;
	for (i = 0; i < RECEIVERS; i++)
		if (get(rfd[i], &v) || v != 4)
			return 1;
	if (none_more(&s, 0, 0.05) || none_more(&s, 1, 0.05) ||
	    none_more(&s, 2, 0.05))
		return 1;
	printf("%d receivers x 2 attached QPs and the sender's own attached "
	       "QP: %u datagrams each, byte for byte; unattached and detached "
	       "QPs got none\n", RECEIVERS, MSGS);
	return 0;
}

int main(void)
{
	int to_child[RECEIVERS][2], to_parent[RECEIVERS][2];
	int rfd[RECEIVERS], wfd[RECEIVERS], status, i, ret, worst = 0;
	pid_t pid[RECEIVERS];

	pid[0] = fork();
	if (pid[0] < 0)
		return 1;
	if (pid[0] == 0) {
		alarm(120);
		_exit(limits());
	}
	if (waitpid(pid[0], &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		return WIFEXITED(status) && WEXITSTATUS(status) == 77 ? 77 : 1;
	for (i = 0; i < RECEIVERS; i++) {
		if (pipe(to_child[i]) || pipe(to_parent[i]))
			return 1;
		pid[i] = fork();
		if (pid[i] < 0)
			return 1;
		if (pid[i] == 0) {
			alarm(120);
			_exit(receiver(i, to_child[i][0], to_parent[i][1]));
		}
		close(to_child[i][0]);
		close(to_parent[i][1]);
		wfd[i] = to_child[i][1];
		rfd[i] = to_parent[i][0];
	}
	alarm(120);
	ret = sender(rfd, wfd);
	for (i = 0; i < RECEIVERS; i++) {
		close(wfd[i]);
		close(rfd[i]);
	}
	for (i = 0; i < RECEIVERS; i++) {
		if (waitpid(pid[i], &status, 0) < 0 || !WIFEXITED(status)) {
			worst = 1;
			continue;
		}
		if (WEXITSTATUS(status) && WEXITSTATUS(status) != 77)
			worst = 1;
		else if (WEXITSTATUS(status) == 77 && !worst)
			worst = 77;
	}
	if (ret)
		return ret;
	return worst;
}
