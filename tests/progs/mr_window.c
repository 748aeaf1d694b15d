// SPDX-License-Identifier: MIT
/*
 * The memory model of one-sided operations, whatever places them (loads
 * and stores into a mapping of the target's memory, cross-memory attach,
 * packets):
 *
 *  regions  memory on the heap (unaligned), on the stack, in .bss, in an
 *           initialised static array (.data, file-backed), the same pages
 *           registered twice and two regions that overlap keep their
 *           contents when registered, are read and written whole by RDMA
 *           READ and WRITE from another process, see the target's own
 *           stores, and nothing around them changes.  With the same pages
 *           registered twice, deregistering one leaves the other working;
 *           once both are gone a WRITE fails with a remote access error
 *           and the memory is left alone (IBA 10.6.3.5); deregistered
 *           memory is anonymous memory again (MADV_DONTNEED zeroes it).
 *  fork     a child forked after registration never writes into its
 *           parent's registered memory, and an RDMA WRITE into the parent
 *           never reaches the child's copy; the parent's region keeps
 *           working.  With RDMAV_FORK_SAFE set (ibv_fork_init(3)) the
 *           child does not have the registered pages at all.
 *
 * The target is this process, the requester a forked child; both open the
 * device after the fork.  Usage: mr_window regions|fork
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <errno.h>
#include <stdbool.h>
#include <time.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define PAGE 4096
#define NREG 8
#define REPLY_MS 10000
#define GUARD 0x5a

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One region the requester reaches. */
struct region {
	uint64_t addr, len;
	uint32_t rkey;
};

/* Target to requester: {what, region, seed}; the answer is one byte, 0
 * when it went right. */
#define DO_READ 'R'   /* RDMA READ the region, compare with seed */
#define DO_WRITE 'W'  /* RDMA WRITE seed's pattern into the region */
#define DO_DENIED 'D' /* a WRITE must fail with REM_ACCESS_ERR */
#define DO_END 'E'

/* The pattern is a function of the target's address, so that regions
 * over the same bytes agree. */
static uint8_t pattern(uint8_t seed, uint64_t addr)
{
	return (uint8_t)((seed * 101 + addr * 7 + (addr >> 12) * 13) | 1);
}

static void fill(uint8_t *p, size_t len, uint8_t seed, uint64_t addr)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pattern(seed, addr + i);
}

/* The first offset where p differs from seed's pattern at addr, or -1. */
static long long differs(const uint8_t *p, size_t len, uint8_t seed,
			 uint64_t addr)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern(seed, addr + i))
			return (long long)i;
	return -1;
}

static int wait_in(int fd, void *buf, size_t len)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};

	if (poll(&pfd, 1, REPLY_MS) != 1)
		return -1;
	return rc_xfer(fd, buf, len, 0);
}

static const struct rc_pair_attr pair_attr = {
	.buf_len = 1 << 20,
	.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ,
	.cq_depth = 16,
	.max_send_wr = 4,
	.max_recv_wr = 4,
	.qp_access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
	.path_mtu = IBV_MTU_1024,
	.timeout = 14, /* 4.096 us * 2^14: 67 ms */
	.retry_cnt = 3,
	.rnr_retry = 3,
};

/* One signaled RDMA operation between the start of the requester's
 * buffer and the whole region: its completion status, -1 if none. */
static int rdma(struct rc_side *s, enum ibv_wr_opcode op,
		const struct region *r)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf,
		.length = (uint32_t)r->len,
		.lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 1,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = {.remote_addr = r->addr, .rkey = r->rkey},
	}, *bad;
	struct ibv_wc wc;
	long long deadline = now_ms() + REPLY_MS;
	int n;

	if (ibv_post_send(s->qp, &wr, &bad))
		return -1;
	while ((n = ibv_poll_cq(s->cq, 1, &wc)) == 0 && now_ms() < deadline)
		;
	return n == 1 ? (int)wc.status : -1;
}

/* The requester: does what the target asks. */
static int requester(int fd)
{
	struct rc_side s = {0};
	struct region reg[NREG];
	unsigned char msg[3], verdict;
	struct region *r;
	long long bad;
	int st, ret;

	ret = rc_pair_join(&s, &pair_attr, fd);
	if (ret)
		return ret > 0 ? 77 : 1;
	if (wait_in(fd, reg, sizeof(reg)))
		return 1;
	while (!wait_in(fd, msg, 3) && msg[0] != DO_END && msg[1] < NREG) {
		r = &reg[msg[1]];
		verdict = 1;
		switch (msg[0]) {
		case DO_READ:
			memset(s.buf, 0, r->len);
			st = rdma(&s, IBV_WR_RDMA_READ, r);
			bad = differs(s.buf, r->len, msg[2], r->addr);
			if (st || bad >= 0)
				say("FAIL: region %u: READ status %d, first "
				    "wrong byte at %lld", msg[1], st, bad);
			else
				verdict = 0;
			break;
		case DO_WRITE:
			fill(s.buf, r->len, msg[2], r->addr);
			st = rdma(&s, IBV_WR_RDMA_WRITE, r);
			if (st)
				say("FAIL: region %u: WRITE status %d", msg[1],
				    st);
			else
				verdict = 0;
			break;
		case DO_DENIED:
			memset(s.buf, 0xee, r->len);
			st = rdma(&s, IBV_WR_RDMA_WRITE, r);
			if (st != IBV_WC_REM_ACCESS_ERR)
				say("FAIL: region %u deregistered: WRITE "
				    "status %d, expected remote access error "
				    "(%d)", msg[1], st, IBV_WC_REM_ACCESS_ERR);
			else
				verdict = 0;
			break;
		}
		if (rc_xfer(fd, &verdict, 1, 1))
			return 1;
	}
	rc_pair_close(&s);
	return 0;
}

/* Ask the requester for one operation; 0 if it went right. */
static int ask(int fd, char what, unsigned int idx, uint8_t seed)
{
	unsigned char msg[3] = {(unsigned char)what, (unsigned char)idx, seed};
	unsigned char v;

	if (rc_xfer(fd, msg, 3, 1) || wait_in(fd, &v, 1))
		return 1;
	return v != 0;
}

/* The target's own view of region i: 0 if it holds seed's pattern. */
static int owner_sees(const struct region *r, unsigned int i, uint8_t seed,
		      const char *when)
{
	long long bad = differs((const uint8_t *)(uintptr_t)r->addr, r->len,
				seed, r->addr);

	if (bad < 0)
		return 0;
	say("FAIL: region %u %s: the owner reads byte %lld as %#x, "
	    "expected %#x", i, when, bad,
	    ((const uint8_t *)(uintptr_t)r->addr)[bad],
	    pattern(seed, r->addr + (uint64_t)bad));
	return 1;
}

static int check_guard(const uint8_t *p, size_t len, const char *where)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != GUARD) {
			say("FAIL: %s: byte %zu changed to %#x", where, i,
			    p[i]);
			return 1;
		}
	return 0;
}

/* Static storage of both kinds: .bss (zero) and .data (initialised). */
static uint8_t bss_buf[4 * PAGE] __attribute__((aligned(PAGE)));
static uint8_t data_buf[3 * PAGE + 512] = {1};

static int target_regions(struct rc_side *s, int fd)
{
	uint8_t stack_buf[2 * PAGE + 300];
	struct ibv_mr *mr[NREG] = {0};
	struct region reg[NREG];
	uint8_t *heap, *ovl, *small, *at[NREG];
	size_t len[NREG];
	int failed = 0;
	unsigned int i;

	heap = malloc(3 * PAGE + 200);
	small = malloc(PAGE);
	ovl = mmap(NULL, 6 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (!heap || !small || ovl == MAP_FAILED)
		return 1;
	memset(heap, GUARD, 3 * PAGE + 200);
	memset(small, GUARD, PAGE);
	/* 0: heap, unaligned, with guard bytes on both sides; 1: the same
	 * bytes again; 2: the stack; 3: .bss; 4: .data; 5 and 6: two
	 * regions sharing two pages; 7: 2 KiB within one page. */
	at[0] = heap + 100, len[0] = 3 * PAGE;
	at[1] = heap + 100, len[1] = 3 * PAGE;
	at[2] = stack_buf + 100, len[2] = 2 * PAGE;
	at[3] = bss_buf, len[3] = sizeof(bss_buf);
	at[4] = data_buf, len[4] = sizeof(data_buf);
	at[5] = ovl, len[5] = 4 * PAGE;
	at[6] = ovl + 2 * PAGE, len[6] = 4 * PAGE;
	at[7] = small + 1024, len[7] = 2048;
	for (i = 0; i < NREG; i++) {
		fill(at[i], len[i], 0, (uintptr_t)at[i]);
		reg[i].addr = (uintptr_t)at[i];
		reg[i].len = len[i];
	}
	for (i = 0; i < NREG; i++) {
		mr[i] = ibv_reg_mr(s->pd, at[i], len[i], pair_attr.mr_access);
		if (!mr[i]) {
			say("FAIL: ibv_reg_mr region %u: %s", i,
			    strerror(errno));
			return 1;
		}
		reg[i].rkey = mr[i]->rkey;
	}
	if (rc_xfer(fd, reg, sizeof(reg), 1))
		return 1;
	/* Registration keeps what the memory held; READ sees it. */
	for (i = 0; i < NREG; i++) {
		failed |= owner_sees(&reg[i], i, 0, "once registered");
		failed |= ask(fd, DO_READ, i, 0);
	}
	/* WRITE puts it there, for the owner to see. */
	for (i = 0; i < NREG; i++)
		failed |= ask(fd, DO_WRITE, i, 1);
	for (i = 0; i < NREG; i++)
		failed |= owner_sees(&reg[i], i, 1, "after WRITEs");
	failed |= check_guard(heap, 100, "before the heap region");
	failed |= check_guard(heap + 100 + 3 * PAGE, 100,
			      "after the heap region");
	failed |= check_guard(small, 1024, "before the small region");
	failed |= check_guard(small + 3072, PAGE - 3072,
			      "after the small region");
	/* The owner's stores reach the requester. */
	for (i = 0; i < NREG; i++)
		fill(at[i], len[i], 2, (uintptr_t)at[i]);
	for (i = 0; i < NREG; i++)
		failed |= ask(fd, DO_READ, i, 2);
	/* The same bytes registered twice: one region goes, the other
	 * still works; once both are gone nothing reaches the memory. */
	if (ibv_dereg_mr(mr[0]))
		return 1;
	failed |= ask(fd, DO_WRITE, 1, 3);
	failed |= owner_sees(&reg[1], 1, 3, "after a WRITE through its twin");
	if (ibv_dereg_mr(mr[1]))
		return 1;
	failed |= ask(fd, DO_DENIED, 1, 0);
	failed |= owner_sees(&reg[1], 1, 3, "after deregistration");
	failed |= check_guard(heap, 100, "before the heap region");
	for (i = 2; i < NREG; i++)
		ibv_dereg_mr(mr[i]);
	/* Deregistered memory is anonymous memory again: MADV_DONTNEED
	 * gives back zeros, as allocators count on. */
	if (madvise(ovl, 6 * PAGE, MADV_DONTNEED)) {
		say("FAIL: madvise(MADV_DONTNEED): %s", strerror(errno));
		failed = 1;
	}
	for (i = 0; i < 6 * PAGE; i++)
		if (ovl[i]) {
			say("FAIL: byte %u of deregistered memory is %#x "
			    "after MADV_DONTNEED", i, ovl[i]);
			failed = 1;
			break;
		}
	return failed;
}

/*
 * A child forked after registration: without RDMAV_FORK_SAFE it writes
 * its copy of the region, which must reach neither its parent nor be
 * reached by the parent's RDMA; with it, it leaves the region alone.
 */
static int target_fork(struct rc_side *s, int fd)
{
	bool fork_safe = getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE");
	struct ibv_mr *mr;
	struct region reg[NREG] = {{0}};
	int to_child[2], from_child[2], status, failed = 0;
	size_t len = 4 * PAGE;
	uint8_t *buf;
	char c = 0;
	pid_t pid;

	buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (buf == MAP_FAILED || pipe(to_child) || pipe(from_child))
		return 1;
	fill(buf, len, 0, (uintptr_t)buf);
	mr = ibv_reg_mr(s->pd, buf, len, pair_attr.mr_access);
	if (!mr)
		return 1;
	reg[0].addr = (uintptr_t)buf;
	reg[0].len = len;
	reg[0].rkey = mr->rkey;
	if (rc_xfer(fd, reg, sizeof(reg), 1))
		return 1;
	pid = fork();
	if (pid < 0)
		return 1;
	if (pid == 0) {
		close(to_child[1]);
		close(from_child[0]);
		/* ibv_fork_init(3): the child does not have the pages. */
		if (fork_safe && (msync(buf, len, MS_ASYNC) == 0 ||
				  errno != ENOMEM)) {
			say("FAIL: with RDMAV_FORK_SAFE the child has the "
			    "registered pages");
			_exit(1);
		}
		if (!fork_safe)
			memset(buf, 0xcc, len);
		if (write(from_child[1], "w", 1) != 1 ||
		    read(to_child[0], &c, 1) != 1)
			_exit(1);
		if (!fork_safe) {
			long long bad = -1;
			size_t i;

			for (i = 0; i < len && bad < 0; i++)
				if (buf[i] != 0xcc)
					bad = (long long)i;
			if (bad >= 0) {
				say("FAIL: the parent's RDMA WRITE reached "
				    "the child at byte %lld", bad);
				_exit(1);
			}
		}
		_exit(0);
	}
	close(to_child[0]);
	close(from_child[1]);
	if (read(from_child[0], &c, 1) != 1)
		failed = 1;
	if (owner_sees(&reg[0], 0, 0, "after the child wrote its copy"))
		failed = 1;
	failed |= ask(fd, DO_WRITE, 0, 1);
	failed |= owner_sees(&reg[0], 0, 1, "after a WRITE");
	failed |= ask(fd, DO_READ, 0, 1);
	if (write(to_child[1], "c", 1) != 1 || waitpid(pid, &status, 0) != pid ||
	    !WIFEXITED(status) || WEXITSTATUS(status)) {
		say("FAIL: the child saw its copy change");
		failed = 1;
	}
	ibv_dereg_mr(mr);
	return failed;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "regions";
	unsigned char end[3] = {DO_END, 0, 0};
	struct rc_side s = {0};
	int fd, status, ret;
	pid_t pid;

	if (strcmp(mode, "regions") && strcmp(mode, "fork")) {
		fprintf(stderr, "usage: mr_window regions|fork\n");
		return 2;
	}
	pid = rc_pair_fork(&fd);
	if (pid < 0)
		return 1;
	if (pid == 0)
		_exit(requester(fd));
	ret = rc_pair_join(&s, &pair_attr, fd);
	if (ret) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return ret > 0 ? 77 : 1;
	}
	ret = strcmp(mode, "fork") ? target_regions(&s, fd)
				   : target_fork(&s, fd);
	(void)rc_xfer(fd, end, 3, 1);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		ret = 1;
	rc_pair_close(&s);
	if (!ret)
		printf("mr_window %s: passed\n", mode);
	return ret ? 1 : 0;
}
