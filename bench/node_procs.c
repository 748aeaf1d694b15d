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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define MAGIC 0x6e6f646570726f63ull /* "nodeproc" */

struct info {
	uint32_t qpn;
	uint16_t lid;
	uint64_t addr;
	uint32_t rkey;
};

struct child {
	pid_t pid;
	int to, from; /* pipes: parent writes to, reads from */
	struct info info;
	struct ibv_qp *qp;
};

struct verbs {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	uint16_t lid;
};

static int verbs_open(struct verbs *v, int cqe)
{
	struct ibv_port_attr pa;

	v->list = ibv_get_device_list(NULL);
	if (!v->list || !v->list[0])
		return -1;
	v->ctx = ibv_open_device(v->list[0]);
	if (!v->ctx || ibv_query_port(v->ctx, 1, &pa))
		return -1;
	v->lid = pa.lid;
	v->pd = ibv_alloc_pd(v->ctx);
	v->cq = v->pd ? ibv_create_cq(v->ctx, cqe, NULL, NULL, 0) : NULL;
	return v->cq ? 0 : -1;
}

static struct ibv_qp *rc_qp(struct verbs *v)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = v->cq,
		.recv_cq = v->cq,
		.cap = {.max_send_wr = 2, .max_recv_wr = 1, .max_send_sge = 1,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
	};

	return ibv_create_qp(v->pd, &ia);
}

static int connect_qp(struct ibv_qp *qp, uint32_t dqpn, uint16_t lid)
{
	struct ibv_qp_attr a = {0};

	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					  IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dqpn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.dlid = lid;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					  IBV_QP_MAX_DEST_RD_ATOMIC |
					  IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
					     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
					     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

static int xfer(int fd, void *buf, size_t len, int out)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = out ? write(fd, (char *)buf + done, len - done)
			: read(fd, (char *)buf + done, len - done);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		done += (size_t)n;
	}
	return 0;
}

/* A child: its own device context, QP and buffer; then it waits for the
 * parent's word to check its buffer, and for the end. */
static int child_main(int in, int out)
{
	static uint64_t buf[512] __attribute__((aligned(4096)));
	struct verbs v = {0};
	struct info me, peer;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char c;

	if (verbs_open(&v, 4))
		return 1;
	mr = ibv_reg_mr(v.pd, buf, sizeof(buf),
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	qp = mr ? rc_qp(&v) : NULL;
	if (!qp)
		return 1;
	me.qpn = qp->qp_num;
	me.lid = v.lid;
	me.addr = (uintptr_t)buf;
	me.rkey = mr->rkey;
	if (xfer(out, &me, sizeof(me), 1) || xfer(in, &peer, sizeof(peer), 0) ||
	    connect_qp(qp, peer.qpn, peer.lid))
		return 1;
	c = 'r';
	if (xfer(out, &c, 1, 1) || xfer(in, &c, 1, 0)) /* 'c': check */
		return 1;
	c = buf[0] == MAGIC ? 'y' : 'n';
	if (xfer(out, &c, 1, 1) || xfer(in, &c, 1, 0)) /* 'e': end */
		return 1;
	return 0;
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
	struct child *ch;
	struct verbs v = {0};
	struct ibv_wc wc;
	uint64_t value = MAGIC;
	struct ibv_mr *mr;
	int i, landed = 0, failed = 0, polled;
	char c;

	if (nprocs < 1 || secs < 0 || !(ch = calloc(nprocs, sizeof(*ch))))
		return 2;
	for (i = 0; i < nprocs; i++) {
		int to[2], from[2];

		if (pipe(to) || pipe(from))
			return 1;
		ch[i].pid = fork();
		if (ch[i].pid < 0)
			return 1;
		if (ch[i].pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			close(to[1]);
			close(from[0]);
			_exit(child_main(to[0], from[1]));
		}
		close(to[0]);
		close(from[1]);
		ch[i].to = to[1];
		ch[i].from = from[0];
	}
	if (verbs_open(&v, 2 * nprocs + 2))
		return 1;
	mr = ibv_reg_mr(v.pd, &value, sizeof(value), IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return 1;
	for (i = 0; i < nprocs; i++) {
		struct info me = {.lid = v.lid};

		ch[i].qp = rc_qp(&v);
		if (!ch[i].qp || xfer(ch[i].from, &ch[i].info, sizeof(ch[i].info), 0))
			goto fail;
		me.qpn = ch[i].qp->qp_num;
		if (xfer(ch[i].to, &me, sizeof(me), 1) ||
		    connect_qp(ch[i].qp, ch[i].info.qpn, ch[i].info.lid) ||
		    xfer(ch[i].from, &c, 1, 0))
			goto fail;
	}
	for (i = 0; i < nprocs; i++) {
		struct ibv_sge sge = {(uintptr_t)&value, 8, mr->lkey};
		struct ibv_send_wr wr = {
			.wr_id = (uint64_t)i,
			.sg_list = &sge,
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = {ch[i].info.addr, ch[i].info.rkey},
		}, *bad;

		if (ibv_post_send(ch[i].qp, &wr, &bad))
			goto fail;
		for (polled = 0; !polled;) {
			polled = ibv_poll_cq(v.cq, 1, &wc);
			if (polled < 0 || (polled && wc.status))
				goto fail;
		}
	}
	for (i = 0; i < nprocs; i++) {
		c = 'c';
		if (xfer(ch[i].to, &c, 1, 1) || xfer(ch[i].from, &c, 1, 0))
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
		if (ch[i].to > 0)
			(void)!write(ch[i].to, &c, 1);
	}
	for (i = 0; i < nprocs; i++) {
		int st;

		if (waitpid(ch[i].pid, &st, 0) == ch[i].pid &&
		    (!WIFEXITED(st) || WEXITSTATUS(st)))
			failed = 1;
	}
	return failed || landed != nprocs;
}
