// SPDX-License-Identifier: MIT
/*
 * How many processes a node holds, and what each costs: this process and
 * NPROCS children of it each open the device; the parent makes one RC QP
 * per child, connected to the child's QP, and RDMA-WRITEs a value into
 * each child's registered buffer, which the child checks.  Then every
 * process stays idle: after a second, for SECONDS.  Prints the shared memory the node
 * uses, the proportional resident memory (PSS) of a child, and the CPU
 * time all the children burnt while idle.
 *
 *   node_procs [NPROCS [SECONDS]]      (defaults 256, 2)
 *
 * Exit: 0 when every process attached and every WRITE landed.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "../tests/progs/rc_pair.h"

#define MAGIC 0x6e6f646570726f63ull /* "nodeproc" */

/* Both ends of every pair: a page, written by the parent. */
static const struct rc_pair_attr pair_attr = {
	.buf_len = 4096,
	.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	.cq_depth = 4,
	.max_send_wr = 2,
	.max_recv_wr = 1,
	.qp_access = IBV_ACCESS_REMOTE_WRITE,
	.path_mtu = IBV_MTU_1024,
	.timeout = 14,
	.retry_cnt = 7,
	.rnr_retry = 7,
};

struct child {
	pid_t pid;
	int fd; /* a socket to it */
	struct rc_conn conn; /* its QP and page */
	struct ibv_qp *qp; /* ours, connected to it */
};

/* A child: its own device context, QP and page, connected to the parent's
 * QP; then it waits for the parent's word to check its page, and for the
 * end. */
static int child_main(int fd)
{
	struct rc_side s = {0};
	char c = 'r';

	if (rc_pair_join(&s, &pair_attr, fd))
		return 1;
	if (rc_xfer(fd, &c, 1, 1) || rc_xfer(fd, &c, 1, 0)) /* 'c': check */
		return 1;
	c = *(volatile uint64_t *)s.buf == MAGIC ? 'y' : 'n';
	if (rc_xfer(fd, &c, 1, 1) || rc_xfer(fd, &c, 1, 0)) /* 'e': end */
		return 1;
	rc_pair_close(&s);
	return 0;
}

/* Our QP for child c, connected to its QP. */
static int parent_connect(struct rc_side *shared, struct child *c)
{
	struct rc_side s = *shared;
	struct ibv_qp_init_attr ia = {
		.send_cq = shared->cq,
		.recv_cq = shared->cq,
		.cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	c->qp = ibv_create_qp(shared->pd, &ia);
	if (!c->qp || rc_xfer(c->fd, &c->conn, sizeof(c->conn), 0))
		return -1;
	s.qp = c->qp;
	s.me.qpn = c->qp->qp_num;
	s.me.psn = (c->qp->qp_num * 7919u) & 0xffffff;
	return rc_xfer(c->fd, &s.me, sizeof(s.me), 1) ||
	       rc_pair_connect(&s, &c->conn);
}

/* utime + stime of pid, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid)
{
	unsigned long long ut = 0, st = 0;
	char path[64], buf[1024], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f) && (p = strrchr(buf, ')')))
		sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			      "%llu %llu", &ut, &st);
	fclose(f);
	return ut + st;
}

/* The PSS of pid in KiB (smaps_rollup), 0 if unknown. */
static unsigned long pss_kib(pid_t pid)
{
	char path[64], line[256];
	unsigned long kib = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Pss: %lu kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

/* Bytes of the node's shared-memory files (IBEMU_SHM_DIR, /dev/shm). */
static unsigned long long node_shm_bytes(const char *node)
{
	char cmd[256], out[64] = "";
	FILE *p;

	const char *dir = getenv("IBEMU_SHM_DIR");

	snprintf(cmd, sizeof(cmd),
		 "du -cb '%s'/ibemu-%u/*'%s'* 2>/dev/null | tail -n 1",
		 dir ? dir : "/dev/shm", (unsigned)getuid(), node);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	if (!fgets(out, sizeof(out), p))
		out[0] = 0;
	pclose(p);
	return strtoull(out, NULL, 10);
}

int main(int argc, char **argv)
{
	int nprocs = argc > 1 ? atoi(argv[1]) : 256;
	int secs = argc > 2 ? atoi(argv[2]) : 2;
	const char *node = getenv("IBEMU_NODE");
	unsigned long long t0 = 0, t1 = 0, shm;
	unsigned long pss = 0;
	struct rc_side shared = {.attr = pair_attr};
	struct ibv_port_attr pa;
	struct child *ch;
	struct ibv_wc wc;
	uint64_t value = MAGIC;
	struct ibv_mr *mr;
	int i, landed = 0, failed = 0, polled;
	char c;

	if (nprocs < 1 || secs < 0 || !(ch = calloc(nprocs, sizeof(*ch))))
		return 2;
	for (i = 0; i < nprocs; i++) {
		int sv[2];

		if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
			return 1;
		ch[i].pid = fork();
		if (ch[i].pid < 0)
			return 1;
		if (ch[i].pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(sv[0]);
			_exit(child_main(sv[1]));
		}
		close(sv[1]);
		ch[i].fd = sv[0];
	}
	if (verbs_open(&shared.list, &shared.ctx, &shared.pd, &shared.cq,
		       2 * nprocs + 2, &pa))
		return 1;
	shared.me.lid = pa.lid;
	mr = ibv_reg_mr(shared.pd, &value, sizeof(value), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return 1;
	for (i = 0; i < nprocs; i++)
		if (parent_connect(&shared, &ch[i]) || rc_xfer(ch[i].fd, &c, 1, 0))
			goto fail;
	for (i = 0; i < nprocs; i++) {
		struct ibv_sge sge = {(uintptr_t)&value, 8, mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = {ch[i].conn.addr, ch[i].conn.rkey},
		}, *bad;

		if (ibv_post_send(ch[i].qp, &wr, &bad))
			goto fail;
		for (polled = 0; !polled;) {
			polled = ibv_poll_cq(shared.cq, 1, &wc);
			if (polled < 0 || (polled && wc.status))
				goto fail;
		}
	}
	for (i = 0; i < nprocs; i++) {
		c = 'c';
		if (rc_xfer(ch[i].fd, &c, 1, 1) || rc_xfer(ch[i].fd, &c, 1, 0))
			goto fail;
		landed += c == 'y';
	}
	/* Everyone idle now: the children sit in read(), the parent here.
	 * A second to settle (a progress thread that served packets
	 * watches for more a little before it sleeps), then measured. */
	sleep(1);
	shm = node ? node_shm_bytes(node) : 0;
	for (i = 0; i < nprocs; i++) {
		t0 += cpu_ticks(ch[i].pid);
		pss += pss_kib(ch[i].pid);
	}
	sleep((unsigned)secs);
	for (i = 0; i < nprocs; i++)
		t1 += cpu_ticks(ch[i].pid);
	printf("%d processes on one node, each with a connected RC QP: %d of "
	       "%d RDMA WRITEs landed; /dev/shm %.1f MiB (%.0f KiB a "
	       "process); PSS %lu KiB a process; idle: %.0f ms of CPU in "
	       "%d s, all %d processes\n",
	       nprocs, landed, nprocs, shm / 1048576.0,
	       shm / 1024.0 / (nprocs + 1), pss / (unsigned long)nprocs,
	       (double)(t1 - t0) * 1000.0 / (double)sysconf(_SC_CLK_TCK), secs,
	       nprocs);
	goto out;
fail:
	fprintf(stderr, "node_procs: process %d of %d: %s\n", i, nprocs,
		strerror(errno));
	failed = 1;
out:
	for (i = 0; i < nprocs; i++) {
		c = 'e';
		if (ch[i].fd > 0)
			(void)!write(ch[i].fd, &c, 1);
	}
	for (i = 0; i < nprocs; i++) {
		int st;

		if (waitpid(ch[i].pid, &st, 0) == ch[i].pid &&
		    (!WIFEXITED(st) || WEXITSTATUS(st)))
			failed = 1;
	}
	return failed || landed != nprocs;
}
