// SPDX-License-Identifier: MIT
/*
 * ibemu keeps an XRC domain in one process (ibemu(7) LIMITATIONS): two
 * processes that open a domain on the same file get one each, and what
 * would need the other's SRQ or target QP fails clearly, not silently.
 *
 * The child opens the domain of a file, makes an XRC SRQ and a target QP
 * on it and tells the parent their numbers.  The parent opens the domain
 * of the same file and checks that
 *  - ibv_open_qp of the child's target QP fails with EOPNOTSUPP;
 *  - its own initiator, connected to its own target QP, delivers a SEND
 *    naming its own SRQ (the setup works), and a SEND naming the child's
 *    SRQ completes with IBV_WC_REM_INV_REQ_ERR.
 * The messages ibemu logs are checked by tests/local/xrc-foreign.sh.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h" /* say(), rc_xfer(), verbs_open() */

#define WAIT_MS 5000
#define TAG "xrc-foreign"

struct xrc_nums {
	uint32_t tqpn, srqn;
};

struct xrc_side {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_port_attr pa;
	struct ibv_xrcd *xrcd;
	struct ibv_srq *srq;
	struct ibv_qp *tqp, *sqp;
	struct ibv_mr *mr;
	char buf[4096];
};

static int side_open(struct xrc_side *s, const char *path)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.oflags = O_CREAT,
	};
	struct ibv_srq_init_attr_ex sa = {
		.attr = { .max_wr = 4, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD |
			     IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD,
		.srq_type = IBV_SRQT_XRC,
	};
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_RECV,
		.comp_mask = IBV_QP_INIT_ATTR_XRCD,
	};
	int ret, fd;

	ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->cq, 16, &s->pa);
	if (ret)
		return ret;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	xa.fd = fd;
	s->xrcd = ibv_open_xrcd(s->ctx, &xa);
	close(fd);
	if (!s->xrcd) {
		say(TAG ": ibv_open_xrcd: %s", strerror(errno));
		return -1;
	}
	sa.xrcd = s->xrcd;
	sa.cq = s->cq;
	sa.pd = s->pd;
	s->srq = ibv_create_srq_ex(s->ctx, &sa);
	qa.xrcd = s->xrcd;
	s->tqp = s->srq ? ibv_create_qp_ex(s->ctx, &qa) : NULL;
	s->mr = ibv_reg_mr(s->pd, s->buf, sizeof(s->buf),
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->tqp || !s->mr) {
		say(TAG ": XRC SRQ, target QP or MR: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void side_close(struct xrc_side *s)
{
	if (s->sqp)
		ibv_destroy_qp(s->sqp);
	if (s->tqp)
		ibv_destroy_qp(s->tqp);
	if (s->srq)
		ibv_destroy_srq(s->srq);
	if (s->xrcd)
		ibv_close_xrcd(s->xrcd);
	verbs_release(NULL, s->mr, s->cq, s->pd, s->ctx, s->list);
}

/* RESET, INIT, RTR, RTS towards dest_qpn on our own port. */
static int qp_connect(struct xrc_side *s, struct ibv_qp *qp,
		      uint32_t dest_qpn, bool target)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = 0,
	};

	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest_qpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = s->pa.lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  (target ? IBV_QP_MAX_DEST_RD_ATOMIC |
						    IBV_QP_MIN_RNR_TIMER
					  : 0)))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a,
			     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN |
				     (target ? 0
					     : IBV_QP_RETRY_CNT |
						       IBV_QP_RNR_RETRY |
						       IBV_QP_MAX_QP_RD_ATOMIC))
		       ? -1
		       : 0;
}

/* One SEND naming srqn; its completion status, or -1. */
static int send_to(struct xrc_side *s, uint32_t srqn, uint64_t wr_id)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf, .length = 32, .lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	}, *bad;
	struct ibv_wc wc;
	int i, n;

	wr.qp_type.xrc.remote_srqn = srqn;
	if (ibv_post_send(s->sqp, &wr, &bad))
		return -1;
	for (i = 0; i < WAIT_MS; i++) {
		while ((n = ibv_poll_cq(s->cq, 1, &wc)) > 0)
			if (wc.wr_id == wr_id)
				return wc.status;
		if (n < 0)
			return -1;
		usleep(1000);
	}
	say(TAG ": no completion of SEND %llu",
	    (unsigned long long)wr_id);
	return -1;
}

static int parent(int sock, const char *path)
{
	struct ibv_qp_init_attr_ex qa = {
		.qp_type = IBV_QPT_XRC_SEND,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.cap = { .max_send_wr = 4, .max_send_sge = 1 },
	};
	struct ibv_qp_open_attr oa = {
		.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD |
			     IBV_QP_OPEN_ATTR_TYPE,
		.qp_type = IBV_QPT_XRC_RECV,
	};
	struct ibv_recv_wr rwr = { .wr_id = 9 }, *bad_rwr;
	struct xrc_side s = { 0 };
	struct xrc_nums child;
	uint32_t own_srqn;
	struct ibv_qp *o;
	int ret = -1, st;
	char done = 1;

	if (rc_xfer(sock, &child, sizeof(child), 0)) {
		say(TAG ": the child set up nothing");
		return -1;
	}
	st = side_open(&s, path);
	if (st) {
		ret = st;
		goto out;
	}
	oa.qp_num = child.tqpn;
	oa.xrcd = s.xrcd;
	errno = 0;
	o = ibv_open_qp(s.ctx, &oa);
	if (o || errno != EOPNOTSUPP) {
		say(TAG ": ibv_open_qp of another process's target QP: %s",
		    o ? "opened" : strerror(errno));
		goto out;
	}
	qa.pd = s.pd;
	qa.send_cq = s.cq;
	s.sqp = ibv_create_qp_ex(s.ctx, &qa);
	if (!s.sqp || qp_connect(&s, s.tqp, s.sqp->qp_num, true) ||
	    qp_connect(&s, s.sqp, s.tqp->qp_num, false) ||
	    ibv_get_srq_num(s.srq, &own_srqn)) {
		say(TAG ": XRC initiator or connection: %s", strerror(errno));
		goto out;
	}
	rwr.sg_list = &(struct ibv_sge){ .addr = (uintptr_t)s.buf + 2048,
					 .length = 64, .lkey = s.mr->lkey };
	rwr.num_sge = 1;
	if (ibv_post_srq_recv(s.srq, &rwr, &bad_rwr))
		goto out;
	st = send_to(&s, own_srqn, 1);
	if (st != IBV_WC_SUCCESS) {
		say(TAG ": SEND to our own SRQ: status %d", st);
		goto out;
	}
	st = send_to(&s, child.srqn, 2);
	if (st != IBV_WC_REM_INV_REQ_ERR) {
		say(TAG ": SEND naming another process's SRQ: status %d, "
		    "expected %d (IBV_WC_REM_INV_REQ_ERR)", st,
		    IBV_WC_REM_INV_REQ_ERR);
		goto out;
	}
	ret = 0;
out:
	side_close(&s);
	rc_xfer(sock, &done, 1, 1);
	return ret;
}

static int child(int sock, const char *path)
{
	struct xrc_side s = { 0 };
	struct xrc_nums me;
	struct pollfd p = { .fd = sock, .events = POLLIN };
	char done;
	int ret;

	ret = side_open(&s, path);
	if (!ret) {
		me.tqpn = s.tqp->qp_num;
		ret = ibv_get_srq_num(s.srq, &me.srqn) ? -1 : 0;
	}
	/* The parent learns of a failure from the closed socket. */
	if (!ret && !rc_xfer(sock, &me, sizeof(me), 1) &&
	    poll(&p, 1, 3 * WAIT_MS) == 1)
		rc_xfer(sock, &done, 1, 0);
	side_close(&s);
	return ret;
}

int main(void)
{
	char path[] = "/tmp/ibemu-xrc-foreign-XXXXXX";
	int sv[2], fd, ret, status;
	pid_t pid;

	fd = mkstemp(path);
	if (fd < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	close(fd);
	/* Fork before any device is opened. */
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(sv[0]);
		_exit(child(sv[1], path) ? 1 : 0);
	}
	close(sv[1]);
	ret = parent(sv[0], path);
	close(sv[0]);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		ret = ret ? ret : -1;
	unlink(path);
	if (ret == 1)
		return 77;
	say(TAG ": %s", ret ? "FAIL" : "pass");
	return ret ? 1 : 0;
}
