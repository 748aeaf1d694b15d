// SPDX-License-Identifier: MIT
/*
 * A responder that goes away right after it saw its last receive
 * completion still acknowledged what it executed: the requester's SENDs
 * all complete successfully.  An HCA acknowledges a request when it
 * executes it (IBA 9.7.5.1); the ACK's timing is the responder's to
 * choose (9.7.5.1.1, coalescing), but a message whose receive completed
 * was executed, and its requester must not retry it until it fails with
 * IBV_WC_RETRY_EXC_ERR (9.7.6.1.3) because the responder stopped.
 *
 * Two processes, one RC QP each, connected; the requester sends NMSG
 * SENDs, one at a time, each completed before the next.  The responder
 * polls the receive completions, checks every payload, and after the
 * last one, as the mode says:
 *
 *   exit     calls exit(0) at once: no verb, no clean-up;
 *   destroy  destroys its QP at once;
 *   error    moves its QP to the error state at once (what
 *            rdma_disconnect does);
 *   idle     calls no verb for a second (busy with something else), then
 *            exits.
 *
 * The requester's QP has a short transport timeout and no retry, so an
 * ACK not sent in time fails its SEND within a fraction of a second.
 *
 * With "reply", the responder answers every message but the last with a
 * SEND of its own, and the requester waits for the answer before it
 * sends the next: a ping-pong, where a device may hold an ACK to carry
 * it with the answer (ibemu does, doc/design.md §9), and the last one has
 * no answer to ride with.
 *
 * Usage: ack_exit exit|destroy|error|idle [LENGTH [reply]].  Exit: 0
 * pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NMSG 64
#define WAIT_MS 5000

/* The length of each message: 32 bytes by default; 65536, a SEND large
 * enough for a device to move it apart from its small ones (ibemu has the
 * responder copy it straight from the sender's memory). */
static size_t msg_len = 32;

/* The responder answers each message but the last (see above). */
static int reply;

/* The answer to message m: its first bytes, from where it landed. */
#define REPLY_LEN 8u

/* 4.096 us * 2^16 (268 ms: room for a loaded machine), no retry: a SEND
 * whose ACK does not come within the timeout fails, where a resend would
 * earn a duplicate's ACK and hide the missing one. */
static struct rc_pair_attr pair_attr = {
	.mr_access = IBV_ACCESS_LOCAL_WRITE,
	.cq_depth = 2 * NMSG,
	.max_send_wr = 4,
	.max_recv_wr = NMSG,
	.qp_access = 0,
	.path_mtu = IBV_MTU_1024,
	.timeout = 16,
	.retry_cnt = 0,
	.rnr_retry = 7,
};

enum mode { MODE_EXIT, MODE_DESTROY, MODE_ERROR, MODE_IDLE };

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One completion within WAIT_MS: 1, or 0 after the wait, -1 on error. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	long long deadline = now_ms() + WAIT_MS;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n < 0 ? -1 : 1;
	} while (now_ms() < deadline);
	return 0;
}

static uint8_t pattern(unsigned int msg, unsigned int i)
{
	return (uint8_t)(msg * 31 + i * 7 + 1);
}

/* The one segment of a message: msg_len bytes at byte off of the
 * registered buffer. */
static struct ibv_sge msg_sge(const struct rc_side *s, size_t off)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf + off,
		.length = (uint32_t)msg_len,
		.lkey = s->mr->lkey,
	};

	return sge;
}

/* The answer to message m, unsignaled: the requester's next SEND is
 * its acknowledgement. */
static int answer(struct rc_side *s, unsigned int m)
{
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge = msg_sge(s, (size_t)m * msg_len);

	sge.length = msg_len < REPLY_LEN ? (uint32_t)msg_len : REPLY_LEN;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = 1000 + m;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	if (ibv_post_send(s->qp, &wr, &bad)) {
		say("FAIL: ack-exit: answer %u: post_send", m);
		return -1;
	}
	return 0;
}

/* Receives for the answers, one per message but the last, into the
 * requester's buffer past its first message. */
static int post_answers(struct rc_side *s)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;
	unsigned int m;

	for (m = 0; m + 1 < NMSG; m++) {
		sge = msg_sge(s, (size_t)(m + 1) * msg_len);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = 1000 + m;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(s->qp, &wr, &bad))
			return -1;
	}
	return 0;
}

/* SEND m's completion and, in reply mode, its answer: 0, or -1 (said). */
static int requester_wait(struct rc_side *s, const char *name, unsigned int m)
{
	bool sent = false, answered = !reply || m + 1 == NMSG;
	struct ibv_wc wc;
	uint8_t *p;
	unsigned int i;
	int got;

	while (!sent || !answered) {
		got = poll_one(s->cq, &wc);
		if (got == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.wr_id == m && !sent) {
			sent = true;
			continue;
		}
		if (got == 1 && wc.status == IBV_WC_SUCCESS &&
		    wc.wr_id == 1000 + m && wc.opcode == IBV_WC_RECV &&
		    !answered) {
			p = (uint8_t *)s->buf + (size_t)(m + 1) * msg_len;
			for (i = 0; i < wc.byte_len; i++)
				if (p[i] != pattern(m, i)) {
					say("FAIL: ack-exit %s: answer %u byte %u",
					    name, m, i);
					return -1;
				}
			answered = true;
			continue;
		}
		say("FAIL: ack-exit %s: SEND %u of %u%s: %s, expected %s", name,
		    m, NMSG, sent ? " (its answer)" : "",
		    got == 1 ? ibv_wc_status_str(wc.status) : "no completion",
		    ibv_wc_status_str(IBV_WC_SUCCESS));
		return -1;
	}
	return 0;
}

/* Every receive posted, then the messages checked as they come. */
static int responder(int fd, enum mode mode)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_qp_attr a;
	struct rc_side s;
	struct ibv_sge sge;
	struct ibv_wc wc;
	unsigned int m, i;
	uint8_t *p;
	char ready = 'r';
	int ret, got;

	memset(&s, 0, sizeof(s));
	ret = rc_pair_join(&s, &pair_attr, fd);
	if (ret < 0)
		say("FAIL: ack-exit: the responder's QP not set up: %s",
		    strerror(errno));
	if (ret)
		return ret > 0 ? 77 : 2;
	for (m = 0; m < NMSG; m++) {
		sge = msg_sge(&s, (size_t)m * msg_len);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = m;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		if (ibv_post_recv(s.qp, &wr, &bad))
			return 3;
	}
	if (rc_xfer(fd, &ready, 1, 1))
		return 3;
	for (m = 0; m < NMSG; m++) {
		/* An answer's completion, where the QP signals every
		 * SEND, is not what is waited for. */
		while ((got = poll_one(s.cq, &wc)) == 1 &&
		       wc.opcode == IBV_WC_SEND &&
		       wc.status == IBV_WC_SUCCESS && wc.wr_id >= 1000)
			;
		if (got != 1 || wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != IBV_WC_RECV ||
		    wc.wr_id != m || wc.byte_len != msg_len) {
			say("FAIL: ack-exit: receive %u", m);
			return 4;
		}
		p = (uint8_t *)s.buf + m * msg_len;
		for (i = 0; i < msg_len; i++)
			if (p[i] != pattern(m, i)) {
				say("FAIL: ack-exit: message %u byte %u", m, i);
				return 4;
			}
		if (reply && m + 1 < NMSG && answer(&s, m))
			return 4;
	}
	/* At once, as the mode says. */
	switch (mode) {
	case MODE_EXIT:
		exit(0);
	case MODE_DESTROY:
		if (ibv_destroy_qp(s.qp))
			return 5;
		break;
	case MODE_ERROR:
		memset(&a, 0, sizeof(a));
		a.qp_state = IBV_QPS_ERR;
		if (ibv_modify_qp(s.qp, &a, IBV_QP_STATE))
			return 5;
		break;
	case MODE_IDLE:
		sleep(1);
		break;
	}
	/* Stay until the requester has its answer. */
	(void)rc_xfer(fd, &ready, 1, 0);
	exit(0);
}

static int requester(int fd, pid_t pid, const char *name)
{
	struct ibv_send_wr wr, *bad;
	struct rc_side s;
	struct ibv_sge sge;
	unsigned int m, i;
	int ret, status;
	char ready;

	memset(&s, 0, sizeof(s));
	ret = rc_pair_join(&s, &pair_attr, fd);
	if (ret < 0)
		say("FAIL: ack-exit %s: the requester's QP not set up: %s",
		    name, strerror(errno));
	if (ret)
		return ret > 0 ? 77 : 1;
	if (reply && post_answers(&s)) {
		say("FAIL: ack-exit %s: post_recv", name);
		return 1;
	}
	if (rc_xfer(fd, &ready, 1, 0)) {
		say("FAIL: ack-exit %s: the responder did not get ready", name);
		return 1;
	}
	for (m = 0; m < NMSG; m++) {
		for (i = 0; i < msg_len; i++)
			((uint8_t *)s.buf)[i] = pattern(m, i);
		sge = msg_sge(&s, 0);
		memset(&wr, 0, sizeof(wr));
		wr.wr_id = m;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		wr.opcode = IBV_WR_SEND;
		wr.send_flags = IBV_SEND_SIGNALED;
		if (ibv_post_send(s.qp, &wr, &bad)) {
			say("FAIL: ack-exit %s: post_send %u", name, m);
			return 1;
		}
		if (requester_wait(&s, name, m))
			return 1;
	}
	(void)rc_xfer(fd, &ready, 1, 1);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
		say("FAIL: ack-exit %s: the responder did not exit", name);
		return 1;
	}
	if (WEXITSTATUS(status) == 77)
		return 77;
	if (WEXITSTATUS(status)) {
		say("FAIL: ack-exit %s: the responder exited %d", name,
		    WEXITSTATUS(status));
		return 1;
	}
	rc_pair_close(&s);
	return 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = {
		[MODE_EXIT] = "exit",
		[MODE_DESTROY] = "destroy",
		[MODE_ERROR] = "error",
		[MODE_IDLE] = "idle",
	};
	enum mode mode;
	pid_t pid;
	int fd;

	if (argc < 2 || argc > 4 ||
	    (argc == 4 && strcmp(argv[3], "reply"))) {
		say("usage: ack_exit exit|destroy|error|idle [LENGTH [reply]]");
		return 2;
	}
	reply = argc == 4;
	if (argc >= 3) {
		char *end;

		msg_len = strtoul(argv[2], &end, 0);
		if (*end || !msg_len || msg_len > (1u << 20)) {
			say("ack_exit: bad length %s", argv[2]);
			return 2;
		}
	}
	pair_attr.buf_len = msg_len * NMSG;
	for (mode = MODE_EXIT; mode <= MODE_IDLE; mode++)
		if (!strcmp(argv[1], names[mode]))
			break;
	if (mode > MODE_IDLE) {
		say("ack_exit: unknown mode %s", argv[1]);
		return 2;
	}
	pid = rc_pair_fork(&fd);
	if (pid < 0) {
		say("FAIL: ack-exit: fork: %s", strerror(errno));
		return 1;
	}
	if (!pid)
		return responder(fd, mode);
	return requester(fd, pid, names[mode]);
}
