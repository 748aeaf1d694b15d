// SPDX-License-Identifier: MIT
/*
 * RDMA into more memory regions than a process publishes for requesters
 * that place data themselves (INBOX_PUB_MRS, 1024): every region takes
 * WRITEs and READs with its data intact, whether its entry in the table
 * was free or another live region held it (then the packets carry it);
 * and a deregistered region's rkey is refused (IBA 10.6.3.5: after
 * deregistration the keys are invalid) in both cases.
 *
 * The target registers NR_MRS regions of SLICE bytes each, consecutive
 * key indices, so the last NR_MRS - 1024 share their entries with the
 * first ones.  The requester WRITEs a pattern of its own into every
 * region, one at a time (as cross-memory attach would place it), READs it
 * back and compares; the target checks every byte.  Then the target
 * deregisters a region that held its entry while another region shared
 * it; a WRITE to it must complete with IBV_WC_REM_ACCESS_ERR and change
 * nothing.
 *
 * Usage: many_mrs    Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NR_MRS 1100
#define SLICE 4096
#define PUB_MRS 1024 /* INBOX_PUB_MRS */
#define REPLY_MS 20000
#define ACCESS                                                                 \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ)

static const struct rc_pair_attr pair_attr = {
	.buf_len = SLICE,
	.mr_access = IBV_ACCESS_LOCAL_WRITE,
	.cq_depth = 16,
	.max_send_wr = 4,
	.max_recv_wr = 4,
	.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	.path_mtu = IBV_MTU_4096,
	.timeout = 14,
	.retry_cnt = 3,
	.rnr_retry = 3,
};

/* The target's regions, as the requester needs them. */
struct target_info {
	uint64_t addr; /* slice i at addr + i * SLICE */
	uint32_t rkey[NR_MRS];
	uint32_t gone; /* deregistered before the last step */
};

static int xfer_in_ms(int fd, void *buf, size_t len, int ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	if (poll(&pfd, 1, ms) != 1)
		return -1;
	return rc_xfer(fd, buf, len, 0);
}

static int setup(struct rc_side *s, int fd, struct rc_conn *to)
{
	int ret = rc_pair_open(s, &pair_attr);

	if (ret)
		return ret;
	if (rc_xfer(fd, &s->me, sizeof(s->me), 1) ||
	    xfer_in_ms(fd, to, sizeof(*to), REPLY_MS) || rc_pair_connect(s, to))
		return -1;
	return 0;
}

static unsigned char pattern(uint32_t i, uint32_t j)
{
	return (unsigned char)(1 + (i * 31 + j) % 251);
}

/* One signaled WRITE or READ of SLICE bytes; its completion status. */
static int rdma(struct rc_side *s, enum ibv_wr_opcode op, uint64_t raddr,
		uint32_t rkey)
{
	struct ibv_sge sge = {.addr = (uintptr_t)s->buf,
			      .length = SLICE,
			      .lkey = s->mr->lkey};
	struct ibv_send_wr wr = {.sg_list = &sge,
				 .num_sge = 1,
				 .opcode = op,
				 .send_flags = IBV_SEND_SIGNALED},
			   *bad;
	struct ibv_wc wc;
	long spins;
	int n;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(s->qp, &wr, &bad))
		return -1;
	for (spins = 0; spins < 2000000000L; spins++) {
		n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n == 1)
			return (int)wc.status;
		if ((spins & 1023) == 1023)
			usleep(50);
	}
	return -1;
}

static int requester(int fd)
{
	struct target_info *ti = malloc(sizeof(*ti));
	struct rc_side s;
	struct rc_conn to;
	uint32_t i, j;
	int st, ret = 1;
	char m = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	if (!ti)
		return 2;
	st = setup(&s, fd, &to);
	if (st)
		return st > 0 ? 77 : 2;
	if (xfer_in_ms(fd, ti, sizeof(*ti), REPLY_MS))
		return 3;
	for (i = 0; i < NR_MRS; i++) {
		uint64_t raddr = ti->addr + (uint64_t)i * SLICE;

		for (j = 0; j < SLICE; j++)
			((unsigned char *)s.buf)[j] = pattern(i, j);
		st = rdma(&s, IBV_WR_RDMA_WRITE, raddr, ti->rkey[i]);
		if (st) {
			say("many_mrs: WRITE to region %u: status %d", i, st);
			goto out;
		}
		memset(s.buf, 0, SLICE);
		st = rdma(&s, IBV_WR_RDMA_READ, raddr, ti->rkey[i]);
		if (st) {
			say("many_mrs: READ of region %u: status %d", i, st);
			goto out;
		}
		for (j = 0; j < SLICE; j++)
			if (((unsigned char *)s.buf)[j] != pattern(i, j))
				break;
		if (j < SLICE) {
			say("many_mrs: region %u read back wrong at %u", i, j);
			goto out;
		}
	}
	/* The target checks, then deregisters two regions. */
	m = 'w';
	if (rc_xfer(fd, &m, 1, 1) || xfer_in_ms(fd, &m, 1, REPLY_MS) ||
	    m != 'd')
		goto out;
	i = ti->gone;
	memset(s.buf, 0xee, SLICE);
	st = rdma(&s, IBV_WR_RDMA_WRITE, ti->addr + (uint64_t)i * SLICE,
		  ti->rkey[i]);
	if (st != IBV_WC_REM_ACCESS_ERR) {
		say("many_mrs: WRITE to deregistered region %u: status %d, "
		    "not REM_ACCESS_ERR",
		    i, st);
		goto out;
	}
	ret = 0;
out:
	m = ret ? 'f' : 'e';
	rc_xfer(fd, &m, 1, 1);
	rc_pair_close(&s);
	free(ti);
	return ret;
}

static int target(int fd)
{
	struct target_info *ti = calloc(1, sizeof(*ti));
	struct ibv_mr **mrs = calloc(NR_MRS, sizeof(*mrs));
	unsigned char *big;
	struct rc_side s;
	struct rc_conn to;
	uint32_t i, j, first;
	int st, ret = 1;
	char m = 0;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&s, 0, sizeof(s));
	big = calloc(NR_MRS, SLICE);
	if (!ti || !mrs || !big)
		return 2;
	st = setup(&s, fd, &to);
	if (st)
		return st > 0 ? 77 : 2;
	for (i = 0; i < NR_MRS; i++) {
		mrs[i] = ibv_reg_mr(s.pd, big + (size_t)i * SLICE, SLICE,
				    ACCESS);
		if (!mrs[i]) {
			say("many_mrs: ibv_reg_mr %u: %s", i, strerror(errno));
			goto out;
		}
		ti->rkey[i] = mrs[i]->rkey;
	}
	/* ibemu hands key indices out in order from a random start, the
	 * index + 1 in bits 8-25 of a region's key, modulo its 65536
	 * regions, the bits above random (emulator/base/key_table.h): check
	 * the last ones share the first ones' entries, or this tests
	 * nothing. */
	first = mrs[0]->rkey >> 8;
	if (((mrs[PUB_MRS]->rkey >> 8) - first) % 0x10000 != PUB_MRS)
		say("many_mrs: note: key indices are not consecutive");
	ti->addr = (uintptr_t)big;
	ti->gone = 5; /* holds its entry, which region PUB_MRS + 5 shares */
	if (rc_xfer(fd, ti, sizeof(*ti), 1) ||
	    xfer_in_ms(fd, &m, 1, REPLY_MS) || m != 'w')
		goto out;
	for (i = 0; i < NR_MRS; i++)
		for (j = 0; j < SLICE; j++)
			if (big[(size_t)i * SLICE + j] != pattern(i, j)) {
				say("many_mrs: region %u wrong at byte %u", i,
				    j);
				goto out;
			}
	if (ibv_dereg_mr(mrs[ti->gone]))
		goto out;
	mrs[ti->gone] = NULL;
	memset(big + (size_t)ti->gone * SLICE, 0x11, SLICE);
	m = 'd';
	if (rc_xfer(fd, &m, 1, 1) || xfer_in_ms(fd, &m, 1, REPLY_MS) ||
	    m != 'e')
		goto out;
	for (j = 0; j < SLICE; j++)
		if (big[(size_t)ti->gone * SLICE + j] != 0x11) {
			say("many_mrs: a WRITE landed in deregistered region");
			goto out;
		}
	ret = 0;
out:
	for (i = 0; i < NR_MRS; i++)
		if (mrs[i])
			ibv_dereg_mr(mrs[i]);
	rc_pair_close(&s);
	free(big);
	free(mrs);
	free(ti);
	return ret;
}

int main(void)
{
	int sv[2], st_t, st_r;
	pid_t t, r;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	t = fork();
	if (t == 0) {
		close(sv[0]);
		_exit(target(sv[1]));
	}
	r = fork();
	if (r == 0) {
		close(sv[1]);
		_exit(requester(sv[0]));
	}
	close(sv[0]);
	close(sv[1]);
	if (waitpid(t, &st_t, 0) < 0 || waitpid(r, &st_r, 0) < 0)
		return 1;
	if (WIFEXITED(st_r) && WEXITSTATUS(st_r) == 77)
		return 77;
	if (!WIFEXITED(st_t) || WEXITSTATUS(st_t) || !WIFEXITED(st_r) ||
	    WEXITSTATUS(st_r)) {
		say("many_mrs: target %#x, requester %#x", st_t, st_r);
		return 1;
	}
	return 0;
}
