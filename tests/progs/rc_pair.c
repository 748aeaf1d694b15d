// SPDX-License-Identifier: MIT
/*
 * Connection setup for the two-process RC tests (see rc_pair.h).
 */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "rc_pair.h"

void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int rc_xfer(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (out) {
			n = send(fd, (char *)buf + done, len - done,
				 MSG_NOSIGNAL);
			if (n < 0 && errno == ENOTSOCK)
				n = write(fd, (char *)buf + done, len - done);
		} else {
			n = read(fd, (char *)buf + done, len - done);
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

pid_t rc_pair_fork(int *fd_p)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return -1;
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		close(sv[0]);
		*fd_p = sv[1];
		return 0;
	}
	close(sv[1]);
	*fd_p = sv[0];
	return pid;
}

int verbs_open(struct ibv_device ***list_p, struct ibv_context **ctx_p,
	       struct ibv_pd **pd_p, struct ibv_cq **cq_p, int cq_depth,
	       struct ibv_port_attr *pa)
{
	*list_p = ibv_get_device_list(NULL);
	if (!*list_p || !(*list_p)[0])
		return 1;
	*ctx_p = ibv_open_device((*list_p)[0]);
	if (!*ctx_p || ibv_query_port(*ctx_p, 1, pa))
		return -1;
	*pd_p = ibv_alloc_pd(*ctx_p);
	*cq_p = ibv_create_cq(*ctx_p, cq_depth, NULL, NULL, 0);
	return *pd_p && *cq_p ? 0 : -1;
}

int rc_pair_open(struct rc_side *s, const struct rc_pair_attr *attr)
{
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	void *buf;
	int ret;

	s->attr = *attr;
	ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->cq, attr->cq_depth,
			 &pa);
	if (ret)
		return ret;
	buf = mmap(NULL, attr->buf_len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED)
		return -1;
	s->buf = buf;
	s->mr = ibv_reg_mr(s->pd, s->buf, attr->buf_len, attr->mr_access);
	if (!s->mr)
		return -1;
	memset(&ia, 0, sizeof(ia));
	ia.send_cq = s->cq;
	ia.recv_cq = s->cq;
	ia.qp_type = IBV_QPT_RC;
	ia.sq_sig_all = 1;
	ia.cap.max_send_wr = attr->max_send_wr;
	ia.cap.max_recv_wr = attr->max_recv_wr;
	ia.cap.max_send_sge = 1;
	ia.cap.max_recv_sge = 1;
	s->qp = ibv_create_qp(s->pd, &ia);
	if (!s->qp)
		return -1;
	s->me.qpn = s->qp->qp_num;
	s->me.lid = pa.lid;
	s->me.psn = (s->qp->qp_num * 7919u) & 0xffffff;
	s->me.addr = (uintptr_t)s->buf;
	s->me.rkey = s->mr->rkey;
	return 0;
}

void verbs_release(struct ibv_qp *qp, struct ibv_mr *mr, struct ibv_cq *cq,
		   struct ibv_pd *pd, struct ibv_context *ctx,
		   struct ibv_device **list)
{
	if (qp)
		ibv_destroy_qp(qp);
	if (mr)
		ibv_dereg_mr(mr);
	if (cq)
		ibv_destroy_cq(cq);
	if (pd)
		ibv_dealloc_pd(pd);
	if (ctx)
		ibv_close_device(ctx);
	if (list)
		ibv_free_device_list(list);
}

void rc_pair_close(struct rc_side *s)
{
	verbs_release(s->qp, s->mr, s->cq, s->pd, s->ctx, s->list);
	if (s->buf)
		munmap(s->buf, s->attr.buf_len);
}

int rc_pair_connect(struct rc_side *s, const struct rc_conn *to)
{
	struct ibv_qp_attr a;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = s->attr.qp_access;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
				  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = s->attr.path_mtu;
	a.dest_qp_num = to->qpn;
	a.rq_psn = to->psn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.dlid = to->lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(s->qp, &a,
			  IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
				  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
				  IBV_QP_MAX_DEST_RD_ATOMIC |
				  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = s->me.psn;
	a.timeout = s->attr.timeout;
	a.retry_cnt = s->attr.retry_cnt;
	a.rnr_retry = s->attr.rnr_retry;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(s->qp, &a,
			     IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC);
}

int rc_pair_join(struct rc_side *s, const struct rc_pair_attr *attr, int fd)
{
	struct rc_conn to;
	int ret;

	ret = rc_pair_open(s, attr);
	if (ret)
		return ret;
	if (rc_xfer(fd, &s->me, sizeof(s->me), 1) ||
	    rc_xfer(fd, &to, sizeof(to), 0) || rc_pair_connect(s, &to))
		return -1;
	return 0;
}

const struct misuse_cmd *misuse_cmd_find(const char *prog, int argc,
					 char **argv,
					 const struct misuse_cmd *table,
					 size_t n, int *ok_p)
{
	const char *cmd = argc == 2 ? argv[1] : "";
	size_t len = strlen(cmd), i;

	*ok_p = len > 3 && !strcmp(cmd + len - 3, "-ok");
	if (*ok_p)
		len -= 3;
	for (i = 0; i < n; i++)
		if (strlen(table[i].name) == len &&
		    !strncmp(table[i].name, cmd, len))
			return &table[i];
	fprintf(stderr, "usage: %s SUBCOMMAND[-ok]\n", prog);
	return NULL;
}
