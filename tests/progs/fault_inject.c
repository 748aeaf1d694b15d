// SPDX-License-Identifier: MIT
/*
 * Traffic under injected faults (IBEMU_FAULTS, doc/man/ibemu.7): two
 * processes, every byte and every atomic result checked.
 *
 *   fault_inject rc MIB     RC over 2 QPs, MIB MiB moved per QP: rounds of
 *                           RDMA WRITE, RDMA READ of what was written,
 *                           SEND with the round in the immediate, and two
 *                           atomics on one counter per QP.  Everything
 *                           must complete successfully, each SEND arrive
 *                           once and in order, each atomic return exactly
 *                           the value its place in the sequence gives (an
 *                           atomic executed twice or never would shift
 *                           every later one) and the counter end at two
 *                           per round.
 *   fault_inject uc COUNT   UC SENDs: what arrives is intact and arrives
 *                           once; lost messages are lost whole; no
 *                           receive WQE is lost with them.
 *   fault_inject ud COUNT   UD datagrams: each intact; received = sent -
 *                           dropped + duplicated, the counts being those
 *                           the receiver's injector reports.
 *   fault_inject kill       kill:atomic:3 in the responder: it dies at
 *                           its third atomic and the requester's WR ends
 *                           in RETRY_EXC_ERR.
 *
 * IBEMU_FAULTS comes from the environment (tests/local/fault-inject.sh).  The
 * requester is the parent; the responder (the child) writes its stderr to
 * a file so that it can read its own injector's summary line after it has
 * closed the device.  The last line on stdout is "received N dropped D
 * duplicated U reordered R delayed L" for the shell test's replay check.
 * alarm() bounds every run.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NQP 2
#define DEPTH 4 /* rounds in flight per QP */
#define RC_LEN (128 * 1024) /* each WRITE, READ and SEND */
#define RDEPTH (2 * DEPTH) /* receives posted per QP */
#define UC_LEN 4096 /* four packets at a 1024-byte MTU */
#define UD_LEN 2048
#define BATCH 64 /* UC/UD messages per QP between two handshakes */
#define QUIET_MS 30 /* no completion for this long: the batch is in */
#define RUN_SECONDS 150

enum mode { MODE_RC, MODE_UC, MODE_UD, MODE_KILL };

/* Each QP's part of the buffer, the same layout on both sides. */
struct qp_area {
	uint8_t wsrc[DEPTH][RC_LEN]; /* requester: WRITE sources */
	uint8_t rdst[DEPTH][RC_LEN]; /* requester: READ destinations */
	uint8_t ssrc[DEPTH][RC_LEN]; /* requester: SEND sources */
	uint8_t wdst[DEPTH][RC_LEN]; /* responder: WRITE targets */
	uint8_t recv[RDEPTH][RC_LEN + 64]; /* responder: receives (+ GRH) */
	uint64_t counter; /* responder: the atomics' target */
	uint64_t result[DEPTH][2]; /* requester: what the atomics returned */
};

struct side {
	enum mode mode;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp[NQP];
	struct ibv_ah *ah;
	struct qp_area *area; /* NQP of them */
	size_t len;
	uint16_t lid;
	uint32_t peer_qpn[NQP];
};

struct conn {
	uint32_t qpn[NQP];
	uint16_t lid;
	uint64_t addr;
	uint32_t rkey;
};

static int sock = -1;

/* ---- data ---- */

static uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x7fb5d329728ea185ull;
	x ^= x >> 27;
	x *= 0x81dadef4bc2dd44dull;
	x ^= x >> 33;
	return x;
}

static uint64_t pattern_seed(unsigned int q, uint64_t n, char kind)
{
	return mix((uint64_t)q << 56 ^ (uint64_t)kind << 48 ^ n);
}

static void fill(void *buf, size_t len, uint64_t seed)
{
	uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		w[i] = seed + i * 0x9e3779b97f4a7c15ull;
}

/* The offset of the first byte that differs, or -1. */
static long check(const void *buf, size_t len, uint64_t seed)
{
	const uint64_t *w = buf;
	size_t i;

	for (i = 0; i < len / 8; i++)
		if (w[i] != seed + i * 0x9e3779b97f4a7c15ull)
			return (long)(i * 8);
	return -1;
}

/* ---- setup ---- */

static enum ibv_qp_type mode_qp_type(enum mode m)
{
	return m == MODE_UC ? IBV_QPT_UC : m == MODE_UD ? IBV_QPT_UD
							: IBV_QPT_RC;
}

static int side_open(struct side *s, enum mode mode)
{
	struct ibv_qp_init_attr ia;
	struct ibv_port_attr pa;
	int ret, q;

	s->mode = mode;
	ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->cq,
			 NQP * (5 * DEPTH + RDEPTH + BATCH * 2) + 64, &pa);
	if (ret)
		return ret;
	s->lid = pa.lid;
	s->len = NQP * sizeof(struct qp_area);
	s->area = mmap(NULL, s->len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (s->area == MAP_FAILED)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->area, s->len,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC);
	if (!s->mr)
		return -1;
	for (q = 0; q < NQP; q++) {
		memset(&ia, 0, sizeof(ia));
		ia.send_cq = s->cq;
		ia.recv_cq = s->cq;
		ia.qp_type = mode_qp_type(mode);
		ia.cap.max_send_wr = 5 * DEPTH + BATCH;
		ia.cap.max_recv_wr = RDEPTH + BATCH * 2;
		ia.cap.max_send_sge = 1;
		ia.cap.max_recv_sge = 1;
		s->qp[q] = ibv_create_qp(s->pd, &ia);
		if (!s->qp[q])
			return -1;
	}
	return 0;
}

static void side_close(struct side *s)
{
	int q;

	if (s->ah)
		ibv_destroy_ah(s->ah);
	for (q = 0; q < NQP; q++)
		if (s->qp[q])
			ibv_destroy_qp(s->qp[q]);
	verbs_release(NULL, s->mr, s->cq, s->pd, s->ctx, s->list);
}

static int qp_connect(struct side *s, int q, const struct conn *to)
{
	enum ibv_qp_type t = mode_qp_type(s->mode);
	struct ibv_qp_attr a;
	int mask;

	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
	if (t == IBV_QPT_UD) {
		a.qkey = 0x11111111;
		mask |= IBV_QP_QKEY;
	} else {
		a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				    (t == IBV_QPT_RC ? IBV_ACCESS_REMOTE_READ |
							       IBV_ACCESS_REMOTE_ATOMIC
						     : 0);
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (ibv_modify_qp(s->qp[q], &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (t != IBV_QPT_UD) {
		a.path_mtu = t == IBV_QPT_UC ? IBV_MTU_1024 : IBV_MTU_4096;
		a.dest_qp_num = to->qpn[q];
		a.rq_psn = 1000 * (q + 1);
		a.ah_attr.dlid = to->lid;
		a.ah_attr.port_num = 1;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	}
	if (t == IBV_QPT_RC) {
		a.max_dest_rd_atomic = 16;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (ibv_modify_qp(s->qp[q], &a, mask))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1000 * (q + 1);
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (t == IBV_QPT_RC) {
		/* 67 ms timer, 7 retries, as ibv_rc_pingpong: a loaded
		 * machine must not look like a dead peer */
		a.timeout = 14;
		a.retry_cnt = 7;
		a.rnr_retry = 7;
		a.max_rd_atomic = 16;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	return ibv_modify_qp(s->qp[q], &a, mask);
}

static int side_connect(struct side *s)
{
	struct conn me = { .lid = s->lid, .addr = (uintptr_t)s->area,
			   .rkey = s->mr->rkey }, peer;
	struct ibv_ah_attr aa = { .port_num = 1 };
	int q;

	for (q = 0; q < NQP; q++)
		me.qpn[q] = s->qp[q]->qp_num;
	if (rc_xfer(sock, &me, sizeof(me), 1) ||
	    rc_xfer(sock, &peer, sizeof(peer), 0))
		return -1;
	for (q = 0; q < NQP; q++) {
		s->peer_qpn[q] = peer.qpn[q];
		if (qp_connect(s, q, &peer))
			return -1;
	}
	if (s->mode == MODE_UD) {
		aa.dlid = peer.lid;
		s->ah = ibv_create_ah(s->pd, &aa);
		if (!s->ah)
			return -1;
	}
	return 0;
}

static int sync_byte(char c)
{
	char r;

	if (rc_xfer(sock, &c, 1, 1) || rc_xfer(sock, &r, 1, 0))
		return -1;
	return r == c ? 0 : -1;
}

/* ---- posting ---- */

static uint64_t wr_id(int q, uint64_t n, int op)
{
	return (uint64_t)q << 56 | n << 4 | (uint64_t)op;
}

static int post(struct side *s, int q, enum ibv_wr_opcode opcode,
		void *addr, uint32_t len, uint64_t id, uint64_t raddr,
		uint32_t rkey)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id, .sg_list = &sge, .num_sge = 1,
				  .opcode = opcode,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	wr.wr.rdma.remote_addr = raddr;
	wr.wr.rdma.rkey = rkey;
	return ibv_post_send(s->qp[q], &wr, &bad);
}

static int post_recv(struct side *s, int q, void *addr, uint32_t len,
		     uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len,
			       .lkey = s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = id, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	return ibv_post_recv(s->qp[q], &wr, &bad);
}

/* ---- RC: the requester ---- */

struct rc_req {
	struct side *s;
	struct conn peer;
	uint64_t rounds;
	uint64_t next[NQP]; /* next round to post */
	uint64_t done[NQP]; /* rounds checked */
};

static uint64_t remote(const struct rc_req *r, int q, size_t off)
{
	return r->peer.addr + (uint64_t)q * sizeof(struct qp_area) + off;
}

static int rc_post_round(struct rc_req *r, int q, uint64_t n)
{
	struct qp_area *a = &r->s->area[q];
	int slot = (int)(n % DEPTH), ret;
	uint32_t rkey = r->peer.rkey;
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;

	fill(a->wsrc[slot], RC_LEN, pattern_seed(q, n, 'W'));
	fill(a->ssrc[slot], RC_LEN, pattern_seed(q, n, 'S'));
	memset(a->rdst[slot], 0, RC_LEN);
	ret = post(r->s, q, IBV_WR_RDMA_WRITE, a->wsrc[slot], RC_LEN,
		   wr_id(q, n, 0),
		   remote(r, q, offsetof(struct qp_area, wdst[slot])), rkey);
	ret = ret ?: post(r->s, q, IBV_WR_RDMA_READ, a->rdst[slot], RC_LEN,
			  wr_id(q, n, 1),
			  remote(r, q, offsetof(struct qp_area, wdst[slot])),
			  rkey);
	if (ret)
		return ret;
	sge = (struct ibv_sge){ .addr = (uintptr_t)a->ssrc[slot],
				.length = RC_LEN, .lkey = r->s->mr->lkey };
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id(q, n, 2);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32((uint32_t)n);
	ret = ibv_post_send(r->s->qp[q], &wr, &bad);
	if (ret)
		return ret;
	/* The counter holds 2n here: fetch-add returns 2n, compare-and-
	 * swap finds 2n + 1 and makes it 2n + 2. */
	sge.addr = (uintptr_t)&a->result[slot][0];
	sge.length = 8;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id(q, n, 3);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.atomic.remote_addr = remote(r, q, offsetof(struct qp_area,
							 counter));
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = 1;
	ret = ibv_post_send(r->s->qp[q], &wr, &bad);
	if (ret)
		return ret;
	sge.addr = (uintptr_t)&a->result[slot][1];
	wr.wr_id = wr_id(q, n, 4);
	wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr.wr.atomic.compare_add = 2 * n + 1;
	wr.wr.atomic.swap = 2 * n + 2;
	return ibv_post_send(r->s->qp[q], &wr, &bad);
}

/* Round n of QP q has completed: check what came back. */
static int rc_check_round(struct rc_req *r, int q, uint64_t n)
{
	struct qp_area *a = &r->s->area[q];
	int slot = (int)(n % DEPTH);
	long off = check(a->rdst[slot], RC_LEN, pattern_seed(q, n, 'W'));

	if (off >= 0) {
		say("qp %d round %" PRIu64 ": READ of the WRITE differs at "
		    "byte %ld", q, n, off);
		return -1;
	}
	if (a->result[slot][0] != 2 * n || a->result[slot][1] != 2 * n + 1) {
		say("qp %d round %" PRIu64 ": atomics returned %" PRIu64
		    " and %" PRIu64 ", expected %" PRIu64 " and %" PRIu64,
		    q, n, a->result[slot][0], a->result[slot][1], 2 * n,
		    2 * n + 1);
		return -1;
	}
	return 0;
}

static int rc_requester(struct side *s, uint64_t mib)
{
	struct rc_req r = { .s = s };
	uint64_t n, total = 0;
	struct ibv_wc wc[16];
	int q, i, got;

	/* WRITE, READ and SEND of RC_LEN each per round. */
	r.rounds = (mib << 20) / (3 * RC_LEN);
	if (!r.rounds)
		r.rounds = 1;
	if (rc_xfer(sock, &r.rounds, sizeof(r.rounds), 1) ||
	    rc_xfer(sock, &r.peer, sizeof(r.peer), 0))
		return -1;
	if (sync_byte('g'))
		return -1;
	for (q = 0; q < NQP; q++)
		for (n = 0; n < DEPTH && n < r.rounds; n++, r.next[q]++)
			if (rc_post_round(&r, q, n))
				return -1;
	while (total < NQP * r.rounds) {
		got = ibv_poll_cq(s->cq, 16, wc);
		if (got < 0)
			return -1;
		for (i = 0; i < got; i++) {
			q = (int)(wc[i].wr_id >> 56);
			n = (wc[i].wr_id & ((1ull << 56) - 1)) >> 4;
			if (wc[i].status != IBV_WC_SUCCESS) {
				say("qp %d round %" PRIu64 " op %d: %s", q, n,
				    (int)(wc[i].wr_id & 15),
				    ibv_wc_status_str(wc[i].status));
				return -1;
			}
			if ((wc[i].wr_id & 15) != 4)
				continue;
			if (n != r.done[q] || rc_check_round(&r, q, n))
				return -1;
			r.done[q]++;
			total++;
			if (r.next[q] < r.rounds &&
			    rc_post_round(&r, q, r.next[q]++))
				return -1;
		}
	}
	say("rc: %" PRIu64 " rounds per QP checked", r.rounds);
	return sync_byte('d');
}

/* ---- RC: the responder ---- */

static int rc_responder(struct side *s)
{
	uint64_t rounds, expect[NQP] = { 0 }, total = 0, n;
	struct ibv_wc wc[16];
	struct conn me = { .addr = (uintptr_t)s->area, .rkey = s->mr->rkey };
	int q, i, got, slot;
	long off;

	if (rc_xfer(sock, &rounds, sizeof(rounds), 0) ||
	    rc_xfer(sock, &me, sizeof(me), 1))
		return -1;
	for (q = 0; q < NQP; q++)
		for (slot = 0; slot < RDEPTH; slot++)
			if (post_recv(s, q, s->area[q].recv[slot], RC_LEN,
				      wr_id(q, (uint64_t)slot, 0)))
				return -1;
	if (sync_byte('g'))
		return -1;
	while (total < NQP * rounds) {
		got = ibv_poll_cq(s->cq, 16, wc);
		if (got < 0)
			return -1;
		for (i = 0; i < got; i++) {
			q = (int)(wc[i].wr_id >> 56);
			slot = (int)((wc[i].wr_id >> 4) & 0xffff);
			if (wc[i].status != IBV_WC_SUCCESS ||
			    !(wc[i].wc_flags & IBV_WC_WITH_IMM) ||
			    wc[i].byte_len != RC_LEN) {
				say("responder qp %d: %s, flags %#x, %u bytes",
				    q, ibv_wc_status_str(wc[i].status),
				    wc[i].wc_flags, wc[i].byte_len);
				return -1;
			}
			/* Each SEND once, in order (IBA 9.5, 9.7.4.1.2). */
			n = be32toh(wc[i].imm_data);
			if (n != (expect[q] & 0xffffffffu)) {
				say("responder qp %d: SEND %" PRIu64
				    " arrived, expected %" PRIu64, q, n,
				    expect[q]);
				return -1;
			}
			off = check(s->area[q].recv[slot], RC_LEN,
				    pattern_seed(q, expect[q], 'S'));
			if (off >= 0) {
				say("responder qp %d: SEND %" PRIu64
				    " differs at byte %ld", q, n, off);
				return -1;
			}
			expect[q]++;
			total++;
			if (post_recv(s, q, s->area[q].recv[slot], RC_LEN,
				      wc[i].wr_id))
				return -1;
		}
	}
	/* The requester has every atomic's answer: the counters are final. */
	if (sync_byte('d'))
		return -1;
	for (q = 0; q < NQP; q++) {
		if (s->area[q].counter != 2 * rounds) {
			say("responder qp %d: counter %" PRIu64 ", expected %"
			    PRIu64 " (an atomic ran twice or never)", q,
			    s->area[q].counter, 2 * rounds);
			return -1;
		}
	}
	return 0;
}

/* ---- UC and UD: the sender ---- */

static uint32_t msg_len(enum mode m)
{
	return m == MODE_UC ? UC_LEN : UD_LEN;
}

static int dg_sender(struct side *s, uint64_t count)
{
	struct ibv_sge sge;
	struct ibv_send_wr wr, *bad;
	struct ibv_wc wc[16];
	uint32_t len = msg_len(s->mode);
	uint64_t n, sent = 0, done = 0;
	int q, got, i, in_batch;
	uint8_t *buf;

	if (rc_xfer(sock, &count, sizeof(count), 1) || sync_byte('g'))
		return -1;
	for (n = 0; n < count; n += BATCH) {
		in_batch = 0;
		for (q = 0; q < NQP && (s->mode != MODE_UD || q == 0); q++) {
			for (i = 0; i < BATCH && n + i < count; i++) {
				/* wsrc is big enough for a batch */
				buf = s->area[q].wsrc[0] + (size_t)i * len;
				fill(buf, len, pattern_seed(q, n + i, 'M'));
				sge = (struct ibv_sge){
					.addr = (uintptr_t)buf,
					.length = len, .lkey = s->mr->lkey };
				memset(&wr, 0, sizeof(wr));
				wr.wr_id = n + i;
				wr.sg_list = &sge;
				wr.num_sge = 1;
				wr.opcode = IBV_WR_SEND_WITH_IMM;
				wr.imm_data = htobe32((uint32_t)(n + i));
				wr.send_flags = IBV_SEND_SIGNALED;
				if (s->mode == MODE_UD) {
					wr.wr.ud.ah = s->ah;
					wr.wr.ud.remote_qpn = s->peer_qpn[q];
					wr.wr.ud.remote_qkey = 0x11111111;
				}
				if (ibv_post_send(s->qp[q], &wr, &bad))
					return -1;
				sent++;
				in_batch++;
			}
		}
		while (in_batch) {
			got = ibv_poll_cq(s->cq, 16, wc);
			if (got < 0)
				return -1;
			for (i = 0; i < got; i++) {
				if (wc[i].status != IBV_WC_SUCCESS) {
					say("sender: %s",
					    ibv_wc_status_str(wc[i].status));
					return -1;
				}
				in_batch--;
				done++;
			}
		}
		/* The receiver takes the batch in and posts receives anew. */
		if (sync_byte('b'))
			return -1;
	}
	if (sync_byte('e'))
		return -1;
	say("%s: %" PRIu64 " messages sent", s->mode == MODE_UC ? "uc" : "ud",
	    sent);
	return done == sent ? 0 : -1;
}

/* ---- UC and UD: the receiver ---- */

struct dg_recv {
	struct side *s;
	uint64_t received, posted, completed, flushed;
	int64_t last[NQP]; /* the last message taken, per QP */
};

static uint8_t *dg_buf(struct side *s, int q, int i)
{
	return (uint8_t *)s->area[q].recv + (size_t)i * (msg_len(s->mode) + 64);
}

static int dg_post(struct dg_recv *d, int q, int i)
{
	d->posted++;
	return post_recv(d->s, q, dg_buf(d->s, q, i), msg_len(d->s->mode) + 64,
			 wr_id(q, (uint64_t)i, 0));
}

/* One message taken: check it and post its receive again. */
static int dg_take(struct dg_recv *d, const struct ibv_wc *wc)
{
	struct side *s = d->s;
	int q = (int)(wc->wr_id >> 56), i = (int)((wc->wr_id >> 4) & 0xffff);
	uint32_t len = msg_len(s->mode), grh = s->mode == MODE_UD ? 40 : 0;
	int64_t n;
	long off;

	d->completed++;
	if (wc->status != IBV_WC_SUCCESS || wc->byte_len != len + grh ||
	    !(wc->wc_flags & IBV_WC_WITH_IMM)) {
		say("receiver qp %d: %s, %u bytes, flags %#x", q,
		    ibv_wc_status_str(wc->status), wc->byte_len, wc->wc_flags);
		return -1;
	}
	n = be32toh(wc->imm_data);
	off = check(dg_buf(s, q, i) + grh, len, pattern_seed(q, (uint64_t)n,
							   'M'));
	if (off >= 0) {
		say("receiver qp %d: message %" PRId64 " differs at byte %ld",
		    q, n, off);
		return -1;
	}
	/* UC: a message arrives once, in order, or not at all (IBA 9.8.3);
	 * a UD datagram may come twice or out of order. */
	if (s->mode == MODE_UC && n <= d->last[q]) {
		say("receiver qp %d: message %" PRId64 " after %" PRId64, q,
		    n, d->last[q]);
		return -1;
	}
	d->last[q] = n;
	d->received++;
	return dg_post(d, q, i);
}

/* Take what comes until nothing has for QUIET_MS. */
static int dg_drain(struct dg_recv *d)
{
	struct timespec t0, t;
	struct ibv_wc wc[16];
	int got, i;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		got = ibv_poll_cq(d->s->cq, 16, wc);
		if (got < 0)
			return -1;
		for (i = 0; i < got; i++)
			if (dg_take(d, &wc[i]))
				return -1;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (got)
			t0 = t;
		else if ((t.tv_sec - t0.tv_sec) * 1000 +
				 (t.tv_nsec - t0.tv_nsec) / 1000000 >= QUIET_MS)
			return 0;
	}
}

/* Every receive posted is completed or flushed: none lost (IBA 10.3.1). */
static int dg_flush(struct dg_recv *d)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[16];
	int q, got, i, idle = 0;

	for (q = 0; q < NQP; q++)
		if (ibv_modify_qp(d->s->qp[q], &a, IBV_QP_STATE))
			return -1;
	while (d->completed + d->flushed < d->posted && idle < 1000) {
		got = ibv_poll_cq(d->s->cq, 16, wc);
		if (got < 0)
			return -1;
		idle = got ? 0 : idle + 1;
		if (!got)
			usleep(1000);
		for (i = 0; i < got; i++) {
			if (wc[i].status == IBV_WC_WR_FLUSH_ERR)
				d->flushed++;
			else
				d->completed++;
		}
	}
	if (d->completed + d->flushed != d->posted) {
		say("receiver: %" PRIu64 " receives posted, %" PRIu64
		    " completed, %" PRIu64 " flushed: some were lost",
		    d->posted, d->completed, d->flushed);
		return -1;
	}
	return 0;
}

static int dg_receiver(struct side *s, uint64_t *received)
{
	struct dg_recv d = { .s = s };
	uint64_t count;
	int q, i;
	char c;

	for (q = 0; q < NQP; q++) {
		d.last[q] = -1;
		for (i = 0; i < 2 * BATCH; i++)
			if (dg_post(&d, q, i))
				return -1;
	}
	if (rc_xfer(sock, &count, sizeof(count), 0) || sync_byte('g'))
		return -1;
	do {
		if (rc_xfer(sock, &c, 1, 0) || dg_drain(&d) ||
		    rc_xfer(sock, &c, 1, 1))
			return -1;
	} while (c == 'b');
	*received = d.received;
	return dg_flush(&d);
}

/* ---- the requester's side of the kill test ---- */

static int kill_requester(struct side *s, pid_t child)
{
	struct conn peer;
	struct ibv_wc wc;
	uint64_t n, rounds = 0;
	int got, status, spins;

	if (rc_xfer(sock, &rounds, sizeof(rounds), 1) ||
	    rc_xfer(sock, &peer, sizeof(peer), 0) || sync_byte('g'))
		return -1;
	for (n = 0; n < 3; n++) {
		struct ibv_sge sge = { .addr = (uintptr_t)s->area[0].result[0],
				       .length = 8, .lkey = s->mr->lkey };
		struct ibv_send_wr wr = { .wr_id = n, .sg_list = &sge,
					  .num_sge = 1,
					  .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
					  .send_flags = IBV_SEND_SIGNALED },
				   *bad;

		wr.wr.atomic.remote_addr =
			peer.addr + offsetof(struct qp_area, counter);
		wr.wr.atomic.rkey = peer.rkey;
		wr.wr.atomic.compare_add = 1;
		if (ibv_post_send(s->qp[0], &wr, &bad))
			return -1;
		/* Bounded: 8 timeouts of 32 ms, with room for a slow host. */
		for (spins = 0; spins < 20000; spins++) {
			got = ibv_poll_cq(s->cq, 1, &wc);
			if (got)
				break;
			usleep(500);
		}
		if (got != 1) {
			say("kill: atomic %" PRIu64 " never completed", n);
			return -1;
		}
		if (n < 2 && wc.status != IBV_WC_SUCCESS) {
			say("kill: atomic %" PRIu64 ": %s", n,
			    ibv_wc_status_str(wc.status));
			return -1;
		}
	}
	/* The responder died before answering the third (IBA 9.7.6.1.3). */
	if (wc.status != IBV_WC_RETRY_EXC_ERR) {
		say("kill: third atomic: %s, expected RETRY_EXC_ERR",
		    ibv_wc_status_str(wc.status));
		return -1;
	}
	if (waitpid(child, &status, 0) != child || !WIFSIGNALED(status) ||
	    WTERMSIG(status) != SIGKILL) {
		say("kill: the responder was not killed by SIGKILL (%#x)",
		    status);
		return -1;
	}
	say("kill: the responder died at its third atomic; the requester "
	    "got RETRY_EXC_ERR");
	return 0;
}

/* ---- the two processes ---- */

struct stats {
	unsigned long long packets, dropped, dup, reordered, delayed;
};

/* The injector's summary line, from our own stderr file. */
static int read_stats(FILE *log, struct stats *st)
{
	char line[512], *p;
	int found = 0;

	rewind(log);
	while (fgets(line, sizeof(line), log)) {
		fputs(line, stdout);
		p = strstr(line, "packets received");
		if (!p)
			continue;
		while (p > line && p[-1] != ':')
			p--;
		if (sscanf(p, " %llu packets received, %llu dropped, %llu "
			      "duplicated, %llu reordered, %llu delayed",
			   &st->packets, &st->dropped, &st->dup,
			   &st->reordered, &st->delayed) == 5)
			found = 1;
	}
	return found ? 0 : -1;
}

static int check_counts(enum mode mode, uint64_t sent, uint64_t received,
			const struct stats *st)
{
	if (mode == MODE_UD &&
	    received + st->dropped != sent + st->dup) {
		say("ud: %" PRIu64 " received of %" PRIu64 " sent, with %llu "
		    "dropped and %llu duplicated", received, sent, st->dropped,
		    st->dup);
		return -1;
	}
	if (mode == MODE_UC &&
	    (received > sent ||
	     sent - received > st->dropped + st->reordered + st->delayed)) {
		say("uc: %" PRIu64 " received of %" PRIu64 " sent, with %llu "
		    "dropped, %llu reordered, %llu delayed", received, sent,
		    st->dropped, st->reordered, st->delayed);
		return -1;
	}
	return 0;
}

static int child_main(enum mode mode, uint64_t arg)
{
	struct side s = { 0 };
	struct stats st = { 0 };
	uint64_t received = 0, sent = 0;
	FILE *log = tmpfile();
	char c;
	int ret;

	/* Our stderr into a file we read back after closing the device. */
	if (!log || dup2(fileno(log), 2) < 0)
		return 1;
	if (mode == MODE_KILL)
		setenv("IBEMU_FAULTS", "kill:atomic:3", 1);
	/* The parent's QPs first: the same QPNs on every run (replay). */
	if (rc_xfer(sock, &c, 1, 0))
		return 1;
	ret = side_open(&s, mode);
	if (ret) {
		side_close(&s);
		return ret > 0 ? 77 : 1;
	}
	if (side_connect(&s))
		ret = -1;
	else if (mode == MODE_RC || mode == MODE_KILL)
		ret = rc_responder(&s);
	else
		ret = dg_receiver(&s, &received);
	side_close(&s);
	/* read_stats() also shows our stderr, whatever happened. */
	if (read_stats(log, &st) && mode != MODE_RC && !ret) {
		say("receiver: no injector summary in its stderr");
		return 1;
	}
	if (ret)
		return 1;
	if (mode == MODE_RC)
		return 0;
	sent = arg * (mode == MODE_UD ? 1 : NQP);
	say("receiver: %" PRIu64 " of %" PRIu64 " messages received", received,
	    sent);
	printf("received %" PRIu64 " dropped %llu duplicated %llu reordered "
	       "%llu delayed %llu\n", received, st.dropped, st.dup,
	       st.reordered, st.delayed);
	return check_counts(mode, sent, received, &st) ? 1 : 0;
}

static int parent_main(enum mode mode, uint64_t arg, pid_t child)
{
	char open_done = 'o';
	struct side s = { 0 };
	int ret, status;

	if (mode == MODE_KILL)
		unsetenv("IBEMU_FAULTS");
	ret = side_open(&s, mode);
	if (!ret && rc_xfer(sock, &open_done, 1, 1))
		ret = -1;
	if (ret) {
		side_close(&s);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return ret > 0 ? 77 : 1;
	}
	if (side_connect(&s))
		ret = -1;
	else if (mode == MODE_RC)
		ret = rc_requester(&s, arg);
	else if (mode == MODE_KILL)
		ret = kill_requester(&s, child);
	else
		ret = dg_sender(&s, arg);
	side_close(&s);
	if (mode == MODE_KILL)
		return ret ? 1 : 0;
	if (ret)
		kill(child, SIGKILL); /* it may wait for us for good */
	if (waitpid(child, &status, 0) != child) {
		perror("waitpid");
		return 1;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		say("the responder failed (%#x)", status);
		return WIFEXITED(status) && WEXITSTATUS(status) == 77 ? 77 : 1;
	}
	return ret ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "rc", "uc", "ud", "kill" };
	enum mode mode = MODE_RC;
	uint64_t arg = 0;
	int sv[2], m;
	pid_t pid;

	for (m = 0; argc > 1 && m < 4; m++)
		if (!strcmp(argv[1], names[m]))
			break;
	if (argc < 2 || m == 4 || (m != MODE_KILL && argc < 3)) {
		fprintf(stderr, "usage: fault_inject rc MIB | uc COUNT | "
				"ud COUNT | kill\n");
		return 1;
	}
	mode = (enum mode)m;
	if (argc > 2)
		arg = strtoull(argv[2], NULL, 0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		perror("socketpair");
		return 1;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	alarm(RUN_SECONDS);
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		alarm(RUN_SECONDS); /* not inherited */
		close(sv[0]);
		sock = sv[1];
		_exit(child_main(mode, arg));
	}
	close(sv[1]);
	sock = sv[0];
	return parent_main(mode, arg, pid);
}
