// SPDX-License-Identifier: MIT
/*
 * Memory and lifetime misuse for the checking mode (IBEMU_CHECK,
 * emulator/engine/check_mem.c, provider/verbs/check_life.c): one
 * subcommand per misuse, each committed in a function named for it, and
 * a correct twin "NAME-ok" that does the same work in the right order.
 * Two RC QPs of this process, A and B, are connected to each other.
 *
 * A send that the misuse needs outstanding is held by moving A to SQD
 * before it is posted (IBA 10.3.1: SQD accepts work requests and does
 * not start them), so that the misuse comes before the HCA could have
 * read or completed it, whatever the scheduling.
 *
 * Usage: check_mem SUBCOMMAND
 *   send-reuse   the send buffer changed after ibv_post_send, before
 *                its completion was polled
 *   send-reuse-idle  the same, the program asleep while the device
 *                completes the send (the report waits for its next call)
 *   send-reuse-again  a correct send, then the misuse posted from the
 *                same site through another caller, which the report names
 *   dereg-busy   ibv_dereg_mr of the region a posted send uses
 *   dereg-bound  ibv_dereg_mr of a region with a window bound to it
 *   destroy-qp-busy  ibv_destroy_qp with a send outstanding
 *   dealloc-pd-busy  ibv_dealloc_pd with a QP and an MR on it
 *   destroy-cq-events  ibv_destroy_cq with a completion event taken by
 *                ibv_get_cq_event and never acknowledged
 *   leak         exits with its QPs and MRs never destroyed
 *   recv-written the receive buffer written after ibv_post_recv, before
 *                the peer's SEND lands in it
 *   read-dest-written  an RDMA READ's destination written after
 *                ibv_post_send, before the response lands in it
 *   unmap-registered  munmap of registered memory with a receive in it
 *                (-ok: registered, nothing in flight, as caches keep it)
 *   free-registered   the same with free
 * Exit: 0 done, 1 a verb failed unexpectedly, 2 usage, 77 no device.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NOINLINE __attribute__((noinline))
#define MSG_LEN 64
#define POLL_TRIES 10000000L

static struct rc_side a, b;

/* Not static: the stacks name them (dladdr sees exported symbols). */
int post_send_a(void);
void send_reuse(void);
int post_via_second(void);
int dereg_busy(void);
int dereg_bound(void);
int destroy_qp_busy(void);
int dealloc_pd_busy(void);
int destroy_cq_events(struct ibv_cq **cq);
int post_recv_b(void);
void recv_written(void);
int post_read_a(void);
void read_dest_written(void);
int unmap_registered(void *p, size_t len);
void free_registered(void *p);

static int fail(const char *what)
{
	say("check_mem: %s failed", what);
	return 1;
}

static int set_state(struct ibv_qp *qp, enum ibv_qp_state st)
{
	struct ibv_qp_attr attr = {.qp_state = st};

	return ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

/* One completion from cq (bounded); its status, or -1. */
static int poll_one(struct ibv_cq *cq)
{
	struct ibv_wc wc;
	long i;
	int n;

	for (i = 0; i < POLL_TRIES; i++) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			return -1;
		if (n)
			return wc.status;
	}
	return -1;
}

/* A's buffer, first MSG_LEN bytes, to B's; a receive on B first. */
NOINLINE int post_send_a(void)
{
	struct ibv_sge rsge = {(uintptr_t)b.buf, MSG_LEN, b.mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 0xb0, .sg_list = &rsge,
				  .num_sge = 1}, *rbad;
	struct ibv_sge sge = {(uintptr_t)a.buf, MSG_LEN, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 0xa0, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;

	if (ibv_post_recv(b.qp, &rwr, &rbad))
		return fail("ibv_post_recv");
	if (ibv_post_send(a.qp, &wr, &bad))
		return fail("ibv_post_send");
	return 0;
}

/* The send held in SQD (see the top). */
static int post_held(void)
{
	if (set_state(a.qp, IBV_QPS_SQD))
		return fail("ibv_modify_qp SQD");
	return post_send_a();
}

static int release_and_poll(int *status_a, int idle)
{
	if (set_state(a.qp, IBV_QPS_RTS))
		return fail("ibv_modify_qp RTS");
	if (idle)
		usleep(300000); /* the device completes it meanwhile */
	*status_a = poll_one(a.cq);
	poll_one(b.cq);
	return 0;
}

NOINLINE void send_reuse(void)
{
	memset(a.buf, 0x5a, MSG_LEN);
}

static int send_reuse_run(int ok, int idle)
{
	int st;

	if (!ok) {
		if (post_held())
			return 1;
		send_reuse();
		return release_and_poll(&st, idle) || st ? fail("send") : 0;
	}
	if (post_send_a() || poll_one(a.cq) || poll_one(b.cq))
		return fail("send");
	send_reuse(); /* after the completion: allowed */
	return 0;
}

static int do_send_reuse(int ok)
{
	return send_reuse_run(ok, 0);
}

/* The same, with the program asleep while the device completes it. */
static int do_send_reuse_idle(int ok)
{
	return send_reuse_run(ok, 1);
}

/* A second call chain to the same post: the stack of each post is its
 * own, however many posts came from that site before. */
NOINLINE int post_via_second(void)
{
	int ret = post_held();

	__asm__ volatile("" ::: "memory"); /* a frame of its own: no tail call */
	return ret;
}

/* A correct send from post_send_a's site, then the misuse through
 * another caller. */
static int do_send_reuse_again(int ok)
{
	int st;

	if (post_send_a() || poll_one(a.cq) || poll_one(b.cq))
		return fail("the first send");
	if (ok)
		return send_reuse_run(1, 0);
	if (post_via_second())
		return 1;
	send_reuse();
	return release_and_poll(&st, 0) || st ? fail("send") : 0;
}

NOINLINE int dereg_busy(void)
{
	int ret = ibv_dereg_mr(a.mr);

	a.mr = NULL;
	return ret;
}

static int do_dereg_busy(int ok)
{
	int st;

	if (!ok) {
		if (post_held() || dereg_busy())
			return 1;
		/* The send fails now (its key is gone): that is the bug. */
		return release_and_poll(&st, 0);
	}
	if (post_send_a() || poll_one(a.cq) || poll_one(b.cq))
		return fail("send");
	return dereg_busy() ? fail("ibv_dereg_mr") : 0;
}

NOINLINE int dereg_bound(void)
{
	int ret = ibv_dereg_mr(a.mr);

	a.mr = NULL;
	return ret;
}

static int do_dereg_bound(int ok)
{
	struct ibv_mw_bind bind = {.wr_id = 0xa1,
				   .send_flags = IBV_SEND_SIGNALED};
	struct ibv_mw *mw = ibv_alloc_mw(a.pd, IBV_MW_TYPE_1);

	if (!mw)
		return fail("ibv_alloc_mw");
	bind.bind_info.mr = a.mr;
	bind.bind_info.addr = (uintptr_t)a.buf;
	bind.bind_info.length = MSG_LEN;
	bind.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
	if (ibv_bind_mw(a.qp, mw, &bind) || poll_one(a.cq))
		return fail("ibv_bind_mw");
	if (ok && ibv_dealloc_mw(mw))
		return fail("ibv_dealloc_mw");
	if (dereg_bound())
		return fail("ibv_dereg_mr");
	if (!ok && ibv_dealloc_mw(mw))
		return fail("ibv_dealloc_mw");
	return 0;
}

NOINLINE int destroy_qp_busy(void)
{
	int ret = ibv_destroy_qp(a.qp);

	a.qp = NULL;
	return ret;
}

static int do_destroy_qp_busy(int ok)
{
	if (!ok)
		return post_held() || destroy_qp_busy() ? 1 : 0;
	if (post_send_a() || poll_one(a.cq) || poll_one(b.cq))
		return fail("send");
	return destroy_qp_busy() ? fail("ibv_destroy_qp") : 0;
}

NOINLINE int dealloc_pd_busy(void)
{
	int ret = ibv_dealloc_pd(a.pd);

	if (!ret)
		a.pd = NULL;
	return ret;
}

static int do_dealloc_pd_busy(int ok)
{
	if (ok) {
		ibv_destroy_qp(a.qp);
		ibv_dereg_mr(a.mr);
		a.qp = NULL;
		a.mr = NULL;
	}
	/* Misuse: EBUSY, and the PD stays for rc_pair_close. */
	dealloc_pd_busy();
	return 0;
}

NOINLINE int destroy_cq_events(struct ibv_cq **cq)
{
	int ret = ibv_destroy_cq(*cq);

	if (!ret)
		*cq = NULL;
	return ret;
}

/* A's QP again, on a CQ of a completion channel, and the pair connected
 * anew (B from RESET). */
static struct ibv_cq *requeue_on_channel(struct ibv_comp_channel *ch)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC, .sq_sig_all = 1,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8,
			.max_send_sge = 1, .max_recv_sge = 1},
	};
	struct ibv_cq *cq = ibv_create_cq(a.ctx, 16, NULL, ch, 0);

	if (!cq)
		return NULL;
	ia.send_cq = ia.recv_cq = cq;
	ibv_destroy_qp(a.qp);
	a.qp = ibv_create_qp(a.pd, &ia);
	if (!a.qp || set_state(b.qp, IBV_QPS_RESET)) {
		ibv_destroy_cq(cq);
		return NULL;
	}
	a.me.qpn = a.qp->qp_num;
	if (rc_pair_connect(&a, &b.me) || rc_pair_connect(&b, &a.me)) {
		ibv_destroy_cq(cq);
		return NULL;
	}
	return cq;
}

/* One completion event of ch, waited for (bounded). */
static int take_cq_event(struct ibv_comp_channel *ch)
{
	struct pollfd pfd = {.fd = ch->fd, .events = POLLIN};
	struct ibv_cq *ev_cq;
	void *ev_ctx;

	if (poll(&pfd, 1, 5000) != 1)
		return fail("completion event (none in 5 s)");
	return ibv_get_cq_event(ch, &ev_cq, &ev_ctx) ? fail("ibv_get_cq_event")
						     : 0;
}

static int do_destroy_cq_events(int ok)
{
	struct ibv_comp_channel *ch = ibv_create_comp_channel(a.ctx);
	struct ibv_cq *cq = ch ? requeue_on_channel(ch) : NULL;
	int ret;

	if (!cq)
		return fail("a CQ on a completion channel");
	if (ibv_req_notify_cq(cq, 0) || post_send_a() || take_cq_event(ch) ||
	    poll_one(cq) || poll_one(b.cq))
		return fail("send");
	/* Misuse: the event taken is not acknowledged. */
	if (ok)
		ibv_ack_cq_events(cq, 1);
	ibv_destroy_qp(a.qp);
	a.qp = NULL;
	ret = destroy_cq_events(&cq);
	ibv_destroy_comp_channel(ch);
	return ret ? fail("ibv_destroy_cq") : 0;
}

/* A receive on B, into B's buffer. */
NOINLINE int post_recv_b(void)
{
	struct ibv_sge sge = {(uintptr_t)b.buf, MSG_LEN, b.mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 0xb0, .sg_list = &sge,
				 .num_sge = 1}, *bad;

	return ibv_post_recv(b.qp, &wr, &bad) ? fail("ibv_post_recv") : 0;
}

NOINLINE void recv_written(void)
{
	memset(b.buf, 0x5a, MSG_LEN);
}

/* The receive buffer written while the receive is posted; the peer's
 * SEND comes after, so the write is before the placement. */
static int do_recv_written(int ok)
{
	struct ibv_sge sge = {(uintptr_t)a.buf, MSG_LEN, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 0xa0, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_SEND,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;

	if (ok)
		recv_written(); /* before the post: allowed */
	if (post_recv_b())
		return 1;
	if (!ok)
		recv_written();
	if (ibv_post_send(a.qp, &wr, &bad))
		return fail("ibv_post_send");
	return poll_one(a.cq) || poll_one(b.cq) ? fail("send") : 0;
}

/* A READ of B's buffer into A's. */
NOINLINE int post_read_a(void)
{
	struct ibv_sge sge = {(uintptr_t)a.buf, MSG_LEN, a.mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 0xa2, .sg_list = &sge, .num_sge = 1,
				 .opcode = IBV_WR_RDMA_READ,
				 .send_flags = IBV_SEND_SIGNALED}, *bad;

	wr.wr.rdma.remote_addr = (uintptr_t)b.buf;
	wr.wr.rdma.rkey = b.mr->rkey;
	return ibv_post_send(a.qp, &wr, &bad) ? fail("ibv_post_send") : 0;
}

NOINLINE void read_dest_written(void)
{
	memset(a.buf, 0x5a, MSG_LEN);
}

/* The READ held in SQD (see the top), its destination written meanwhile. */
static int do_read_dest_written(int ok)
{
	if (ok) {
		if (post_read_a() || poll_one(a.cq))
			return fail("read");
		read_dest_written(); /* after the completion: allowed */
		return 0;
	}
	if (set_state(a.qp, IBV_QPS_SQD))
		return fail("ibv_modify_qp SQD");
	if (post_read_a())
		return 1;
	read_dest_written();
	if (set_state(a.qp, IBV_QPS_RTS))
		return fail("ibv_modify_qp RTS");
	return poll_one(a.cq) ? fail("read") : 0;
}

/* Not a tail call: the stack names this function. */
NOINLINE int unmap_registered(void *p, size_t len)
{
	int ret = munmap(p, len);

	__asm__ volatile("");
	return ret;
}

/* A receive on B into [p, p + len) of mr, in flight until B's QP goes to
 * ERR and its flush is polled (flush_b). */
static int recv_into(struct ibv_mr *mr, void *p, size_t len)
{
	struct ibv_sge sge = {(uintptr_t)p, (uint32_t)len, mr->lkey};
	struct ibv_recv_wr wr = {.wr_id = 0xb1, .sg_list = &sge, .num_sge = 1},
			   *bad;

	return ibv_post_recv(b.qp, &wr, &bad) ? fail("ibv_post_recv") : 0;
}

static int flush_b(void)
{
	if (set_state(b.qp, IBV_QPS_ERR))
		return fail("ibv_modify_qp ERR");
	return poll_one(b.cq) == IBV_WC_WR_FLUSH_ERR ? 0 : fail("the flush");
}

/* A mapping of its own, registered, with a receive of B in it (misuse)
 * or not (-ok: a region over unmapped memory with no work on it, as
 * registration caches keep them), unmapped before its deregistration. */
static int do_unmap_registered(int ok)
{
	size_t len = 4096;
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	struct ibv_mr *mr;

	if (p == MAP_FAILED)
		return fail("mmap");
	mr = ibv_reg_mr(b.pd, p, len, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return fail("ibv_reg_mr");
	if (!ok && recv_into(mr, p, len))
		return 1;
	if (unmap_registered(p, len))
		return fail("munmap");
	if (!ok && flush_b())
		return 1;
	return ibv_dereg_mr(mr) ? fail("ibv_dereg_mr") : 0;
}

NOINLINE void free_registered(void *p)
{
	free(p);
	__asm__ volatile("");
}

/* The same with memory from malloc, freed. */
static int do_free_registered(int ok)
{
	struct ibv_mr *mr;
	void *p;

	if (posix_memalign(&p, 4096, 8192))
		return fail("posix_memalign");
	mr = ibv_reg_mr(b.pd, p, 8192, IBV_ACCESS_LOCAL_WRITE);
	if (!mr)
		return fail("ibv_reg_mr");
	if (!ok && recv_into(mr, p, 8192))
		return 1;
	free_registered(p);
	if (!ok && flush_b())
		return 1;
	return ibv_dereg_mr(mr) ? fail("ibv_dereg_mr") : 0;
}

int main(int argc, char **argv)
{
	static const struct misuse_cmd cmds[] = {
		{"send-reuse", do_send_reuse},
		{"send-reuse-idle", do_send_reuse_idle},
		{"send-reuse-again", do_send_reuse_again},
		{"dereg-busy", do_dereg_busy},
		{"dereg-bound", do_dereg_bound},
		{"destroy-qp-busy", do_destroy_qp_busy},
		{"dealloc-pd-busy", do_dealloc_pd_busy},
		{"destroy-cq-events", do_destroy_cq_events},
		{"recv-written", do_recv_written},
		{"read-dest-written", do_read_dest_written},
		{"unmap-registered", do_unmap_registered},
		{"free-registered", do_free_registered},
		{"leak", NULL},
	};
	struct rc_pair_attr attr = {
		.buf_len = 4096,
		.mr_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND |
			     IBV_ACCESS_REMOTE_READ,
		.cq_depth = 16,
		.max_send_wr = 8,
		.max_recv_wr = 8,
		.qp_access = IBV_ACCESS_REMOTE_READ,
		.path_mtu = IBV_MTU_1024,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
	};
	const struct misuse_cmd *c;
	int ok, ret;

	c = misuse_cmd_find("check_mem", argc, argv, cmds,
			    sizeof(cmds) / sizeof(cmds[0]), &ok);
	if (!c)
		return 2;
	ret = rc_pair_open(&a, &attr);
	if (!ret)
		ret = rc_pair_open(&b, &attr);
	if (ret == 1)
		return 77;
	if (ret || rc_pair_connect(&a, &b.me) || rc_pair_connect(&b, &a.me))
		return fail("setup");
	if (!c->run)
		return ok ? (rc_pair_close(&a), rc_pair_close(&b), 0) : 0;
	ret = c->run(ok);
	rc_pair_close(&a);
	rc_pair_close(&b);
	return ret;
}
