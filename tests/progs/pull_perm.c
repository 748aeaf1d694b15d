// SPDX-License-Identifier: MIT
/*
 * Large SENDs and RDMA WRITEs between a parent and its child when the
 * kernel lets only one of them read the other's memory.
 *
 * From 64 KiB a SEND's data is pulled by the responder with cross-memory
 * attach (emulator/transport/shm/cma.c).  Who may read whom is the
 * kernel's decision and need not be symmetric: under Yama ptrace_scope 1
 * a parent may read its child and not the reverse; a seccomp filter
 * (Docker's default profile without CAP_SYS_PTRACE) refuses
 * process_vm_readv/writev to one process only.  This test makes the
 * asymmetry with a seccomp filter that fails both calls with EPERM in one
 * process, which a process may install on itself without privileges and
 * which acts whatever Yama says.
 *
 * Each variant forks a parent and its child before either opens the
 * device: filter in neither, in the child (the parent->child SEND is the
 * one Yama 1 would refuse: the child cannot read its parent), or in the
 * parent.  Over one RC connection each side then sends the other SENDs
 * of 64 KiB, 256 KiB + 3 and 1 MiB and an RDMA WRITE of 256 KiB, each
 * filled with a pattern of its own; the receiver checks the completion
 * (status, opcode, byte_len) and every byte.
 *
 * Usage: pull_perm
 * Exit: 0 pass, 1 fail, 77 skip (no device, or no seccomp filter here).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define BUF_LEN (1024 * 1024)
#define WAIT_MS 10000

#if defined(__x86_64__)
#define FILTER_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define FILTER_ARCH AUDIT_ARCH_AARCH64
#endif

enum filtered { F_NONE, F_CHILD, F_PARENT };
static const char *const variant_name[] = { "no filter", "child filtered",
					    "parent filtered" };

static const uint32_t send_sizes[] = { 64 * 1024, 256 * 1024 + 3, BUF_LEN };
#define WRITE_SIZE (256 * 1024)

/* process_vm_readv and process_vm_writev fail with EPERM from now on. */
static int refuse_cross_memory_attach(void)
{
#ifdef FILTER_ARCH
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, FILTER_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS,
			 offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2,
			 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1,
			 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
	};
	struct sock_fprog prog = {
		.len = sizeof(f) / sizeof(f[0]),
		.filter = f,
	};

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		return -1;
	return 0;
#else
	errno = ENOSYS;
	return -1;
#endif
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The byte at offset i of message (tag, size). */
static uint8_t pattern(unsigned int tag, uint32_t size, uint32_t i)
{
	return (uint8_t)(i * 131u + (i >> 9) + tag * 29u + size);
}

static void fill(uint8_t *buf, unsigned int tag, uint32_t size)
{
	uint32_t i;

	for (i = 0; i < size; i++)
		buf[i] = pattern(tag, size, i);
}

/* The first offset that differs from the pattern, or -1. */
static long long first_bad(const uint8_t *buf, unsigned int tag,
			   uint32_t size)
{
	uint32_t i;

	for (i = 0; i < size; i++)
		if (buf[i] != pattern(tag, size, i))
			return i;
	return -1;
}

/* One completion within WAIT_MS: 0, or -1 (said why). */
static int wait_wc(struct rc_side *s, struct ibv_wc *wc, const char *who)
{
	long long deadline = now_ms() + WAIT_MS;
	int n;

	do {
		n = ibv_poll_cq(s->cq, 1, wc);
		if (n < 0) {
			say("FAIL: %s: ibv_poll_cq %d", who, n);
			return -1;
		}
		if (n == 1)
			return 0;
	} while (now_ms() < deadline);
	say("FAIL: %s: no completion within %d ms", who, WAIT_MS);
	return -1;
}

static int post_recv(struct rc_side *s, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf,
		.length = len,
		.lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1 };
	struct ibv_recv_wr *bad;

	return ibv_post_recv(s->qp, &wr, &bad);
}

static int post_send(struct rc_side *s, enum ibv_wr_opcode op, uint32_t len,
		     const struct rc_conn *to)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf,
		.length = len,
		.lkey = s->mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = 2,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = op,
	};
	struct ibv_send_wr *bad;

	if (op == IBV_WR_RDMA_WRITE) {
		wr.wr.rdma.remote_addr = to->addr;
		wr.wr.rdma.rkey = to->rkey;
	}
	return ibv_post_send(s->qp, &wr, &bad);
}

/* Messages on the socket, one byte each. */
#define MSG_READY 'R' /* the receive is posted */
#define MSG_DONE 'D'  /* the sender's WQE completed (WRITE: look now) */
#define MSG_OK 'K'    /* the receiver found everything right */
#define MSG_BAD 'B'

static int msg_send(int fd, char m)
{
	return rc_xfer(fd, &m, 1, 1);
}

static int msg_wait(int fd, char want, const char *who)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char m = 0;

	if (poll(&p, 1, WAIT_MS) != 1 || rc_xfer(fd, &m, 1, 0) || m != want) {
		say("FAIL: %s: expected '%c' from the other side, got '%c'",
		    who, want, m ? m : '-');
		return -1;
	}
	return 0;
}

/* The sending side of one SEND: 0 or -1. */
static int send_one(struct rc_side *s, int fd, unsigned int tag,
		    uint32_t size, const char *who)
{
	struct ibv_wc wc;

	if (msg_wait(fd, MSG_READY, who))
		return -1;
	fill(s->buf, tag, size);
	if (post_send(s, IBV_WR_SEND, size, NULL)) {
		say("FAIL: %s: ibv_post_send", who);
		return -1;
	}
	if (wait_wc(s, &wc, who))
		return -1;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND) {
		say("FAIL: %s: SEND of %u bytes: %s, opcode %d", who, size,
		    ibv_wc_status_str(wc.status), wc.opcode);
		return -1;
	}
	return msg_wait(fd, MSG_OK, who);
}

/* The receiving side of one SEND: 0 or -1. */
static int recv_one(struct rc_side *s, int fd, unsigned int tag,
		    uint32_t size, const char *who)
{
	struct ibv_wc wc;
	long long bad;

	memset(s->buf, 0, BUF_LEN);
	if (post_recv(s, BUF_LEN) || msg_send(fd, MSG_READY)) {
		say("FAIL: %s: ibv_post_recv", who);
		return -1;
	}
	if (wait_wc(s, &wc, who))
		return -1;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV ||
	    wc.byte_len != size) {
		say("FAIL: %s: receive of a %u-byte SEND: %s, opcode %d, "
		    "byte_len %u",
		    who, size, ibv_wc_status_str(wc.status), wc.opcode,
		    wc.byte_len);
		msg_send(fd, MSG_BAD);
		return -1;
	}
	bad = first_bad(s->buf, tag, size);
	if (bad >= 0) {
		say("FAIL: %s: %u-byte SEND received with a wrong byte at %lld",
		    who, size, bad);
		msg_send(fd, MSG_BAD);
		return -1;
	}
	return msg_send(fd, MSG_OK);
}

/* One RDMA WRITE from the writer into the target's buffer. */
static int write_one(struct rc_side *s, int fd, const struct rc_conn *to,
		     unsigned int tag, const char *who)
{
	struct ibv_wc wc;

	if (msg_wait(fd, MSG_READY, who))
		return -1;
	fill(s->buf, tag, WRITE_SIZE);
	if (post_send(s, IBV_WR_RDMA_WRITE, WRITE_SIZE, to) ||
	    wait_wc(s, &wc, who))
		return -1;
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RDMA_WRITE) {
		say("FAIL: %s: RDMA WRITE: %s", who,
		    ibv_wc_status_str(wc.status));
		return -1;
	}
	if (msg_send(fd, MSG_DONE))
		return -1;
	return msg_wait(fd, MSG_OK, who);
}

static int written_one(struct rc_side *s, int fd, unsigned int tag,
		       const char *who)
{
	long long bad;

	memset(s->buf, 0, BUF_LEN);
	if (msg_send(fd, MSG_READY) || msg_wait(fd, MSG_DONE, who))
		return -1;
	bad = first_bad(s->buf, tag, WRITE_SIZE);
	if (bad >= 0) {
		say("FAIL: %s: RDMA WRITE landed with a wrong byte at %lld",
		    who, bad);
		msg_send(fd, MSG_BAD);
		return -1;
	}
	return msg_send(fd, MSG_OK);
}

/*
 * One side of a variant.  The parent sends first, then the child; tags
 * tell the messages apart.  Returns 0, 1 (fail) or 77.
 */
static int side(int fd, bool parent, bool filter)
{
	const char *who = parent ? "parent" : "child";
	struct rc_pair_attr attr = {
		.buf_len = BUF_LEN,
		.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
		.cq_depth = 16,
		.max_send_wr = 4,
		.max_recv_wr = 4,
		.qp_access = IBV_ACCESS_REMOTE_WRITE,
		.path_mtu = IBV_MTU_4096,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
	};
	struct rc_side s;
	struct rc_conn peer;
	unsigned int i, tag;
	int ret = 1;

	memset(&s, 0, sizeof(s));
	if (filter && refuse_cross_memory_attach()) {
		say("SKIP: %s: cannot install a seccomp filter: %s", who,
		    strerror(errno));
		return 77;
	}
	ret = rc_pair_open(&s, &attr);
	if (ret) {
		say("%s: %s: no ibemu device", ret > 0 ? "SKIP" : "FAIL", who);
		rc_pair_close(&s);
		return ret > 0 ? 77 : 1;
	}
	ret = 1;
	if (rc_xfer(fd, &s.me, sizeof(s.me), 1) ||
	    rc_xfer(fd, &peer, sizeof(peer), 0) || rc_pair_connect(&s, &peer)) {
		say("FAIL: %s: connection setup", who);
		goto out;
	}
	for (i = 0; i < 2 * (sizeof(send_sizes) / sizeof(send_sizes[0]));
	     i++) {
		uint32_t size = send_sizes[i / 2];
		bool we_send = (i % 2 == 0) == parent;

		tag = i;
		if (we_send ? send_one(&s, fd, tag, size, who)
			    : recv_one(&s, fd, tag, size, who))
			goto out;
	}
	for (i = 0; i < 2; i++) {
		bool we_write = (i == 0) == parent;

		tag = 100 + i;
		if (we_write ? write_one(&s, fd, &peer, tag, who)
			     : written_one(&s, fd, tag, who))
			goto out;
	}
	ret = 0;
out:
	rc_pair_close(&s);
	return ret;
}

/* One variant in a process of its own, the parent of the child. */
static int variant(enum filtered v)
{
	int sv[2], status, ret;
	pid_t child;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv))
		return 1;
	child = fork();
	if (child < 0)
		return 1;
	if (child == 0) {
		close(sv[0]);
		alarm(60);
		_exit(side(sv[1], false, v == F_CHILD));
	}
	close(sv[1]);
	ret = side(sv[0], true, v == F_PARENT);
	close(sv[0]);
	if (waitpid(child, &status, 0) != child || !WIFEXITED(status)) {
		say("FAIL: %s: the child did not exit", variant_name[v]);
		return 1;
	}
	if (ret == 0)
		ret = WEXITSTATUS(status);
	return ret;
}

int main(void)
{
	int v, ret, status, fails = 0, skips = 0;
	pid_t pid;

	for (v = F_NONE; v <= F_PARENT; v++) {
		/* The filter of the parent side must not stay with us. */
		pid = fork();
		if (pid < 0)
			return 1;
		if (pid == 0) {
			alarm(90);
			_exit(variant((enum filtered)v));
		}
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
			ret = 1;
		else
			ret = WEXITSTATUS(status);
		if (ret == 77)
			skips++;
		else if (ret)
			fails++;
		say("%s: %s", ret == 0 ? "ok" : ret == 77 ? "SKIP" : "FAIL",
		    variant_name[v]);
	}
	if (fails)
		return 1;
	return skips ? 77 : 0;
}
