// SPDX-License-Identifier: MIT
/*
 * RC stress between two processes (peer.h): 64 RC QPs, N SENDs each of
 * random sizes (seeded and printed), every byte verified, in order per QP
 * (IBA 9.5).  N is CF_RC_STRESS_MSGS (default 3000 so that the run takes a
 * few seconds; ibemu's make check runs 100000); the seed is CF_RC_STRESS_SEED
 * (default: the time).  Flow control is left to RNR NAK with rnr_retry 7
 * (IBA 9.7.5.2.8): the sender keeps WINDOW sends in flight per QP while
 * the receiver reposts receives as they complete.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests.h"

#define NQP 64
#define WINDOW 8
#define MAX_MSG 8192u
#define MIN_MSG 8u

struct stress_arg {
	uint64_t seed;
	unsigned long n;
};

static uint32_t msg_len(uint64_t seed, int q, unsigned long i)
{
	uint64_t x = seed ^ ((uint64_t)q << 40) ^
		     (uint64_t)i * 0x9e3779b97f4a7c15ull;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return MIN_MSG + (uint32_t)(x % (MAX_MSG - MIN_MSG + 1));
}

static uint64_t msg_seed(uint64_t seed, int q, unsigned long i)
{
	return seed * 1000003u + (uint64_t)q * 7919u + i * 131u;
}

static size_t slot_off(int q, unsigned long i)
{
	return ((size_t)q * WINDOW + i % WINDOW) * MAX_MSG;
}

static int qp_index(struct cf_ep *ep, uint32_t qpn)
{
	int q;

	for (q = 0; q < NQP; q++)
		if (ep->qps[q]->qp_num == qpn)
			return q;
	return -1;
}

static int receiver(struct cf_ep *ep, const struct stress_arg *a)
{
	unsigned long next[NQP] = { 0 }, total = 0, want = a->n * NQP;
	long long last = cf_now_ms();
	struct ibv_wc wc[32];
	int q, k, got;
	unsigned long i;

	for (q = 0; q < NQP; q++)
		for (i = 0; i < WINDOW && i < a->n; i++)
			EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qps[q],
							slot_off(q, i), MAX_MSG,
							(uint64_t)q << 32 | i),
				   "ibv_post_recv failed");
	if (cf_ep_sync(ep, 5000))
		return -1;
	while (total < want) {
		got = ibv_poll_cq(ep->cq, 32, wc);
		if (got < 0) {
			EP_CHECK(ep, 0, "ibv_poll_cq failed");
			return -1;
		}
		if (!got) {
			if (cf_now_ms() - last > 5000) {
				EP_CHECK(ep, 0, "receiver: no progress for 5 s "
					 "after %lu of %lu messages", total,
					 want);
				return -1;
			}
			continue;
		}
		last = cf_now_ms();
		for (k = 0; k < got; k++) {
			uint32_t len;
			long bad;

			q = qp_index(ep, wc[k].qp_num);
			EP_REQUIRE(ep, wc[k].status == IBV_WC_SUCCESS && q >= 0,
				   "receive: %s qp 0x%x",
				   ibv_wc_status_str(wc[k].status),
				   wc[k].qp_num);
			i = next[q]++;
			len = msg_len(a->seed, q, i);
			EP_REQUIRE(ep, wc[k].byte_len == len &&
				   wc[k].wr_id == ((uint64_t)q << 32 | i),
				   "QP %d message %lu: wr_id 0x%llx byte_len "
				   "%u, expected 0x%llx %u (order)", q, i,
				   (unsigned long long)wc[k].wr_id,
				   wc[k].byte_len,
				   (unsigned long long)((uint64_t)q << 32 | i),
				   len);
			bad = cf_pattern_check(ep->buf + slot_off(q, i), len,
					       msg_seed(a->seed, q, i));
			EP_REQUIRE(ep, bad < 0, "QP %d message %lu (%u B): "
				   "data differs at byte %ld", q, i, len, bad);
			if (i + WINDOW < a->n)
				EP_REQUIRE(ep, !cf_ep_post_recv(ep, ep->qps[q],
						slot_off(q, i), MAX_MSG,
						(uint64_t)q << 32 |
						(i + WINDOW)),
					   "ibv_post_recv (repost) failed");
			total++;
		}
	}
	return cf_ep_sync(ep, 5000);
}

static int sender(struct cf_ep *ep, const struct stress_arg *a)
{
	unsigned long posted[NQP] = { 0 }, done[NQP] = { 0 }, total = 0;
	unsigned long want = a->n * NQP;
	long long last = cf_now_ms(), t0;
	struct ibv_send_wr wr, *bad;
	struct ibv_sge sge;
	struct ibv_wc wc[32];
	int q, k, got, ret;

	if (cf_ep_sync(ep, 5000))
		return -1;
	t0 = cf_now_ms();
	while (total < want) {
		for (q = 0; q < NQP; q++) {
			while (posted[q] < a->n &&
			       posted[q] - done[q] < WINDOW) {
				unsigned long i = posted[q];
				uint32_t len = msg_len(a->seed, q, i);

				cf_ep_send_wr(ep, &wr, &sge, IBV_WR_SEND,
					      slot_off(q, i), len,
					      (uint64_t)q << 32 | i);
				cf_pattern_fill(ep->buf + slot_off(q, i), len,
						msg_seed(a->seed, q, i));
				ret = cf_rc(ibv_post_send(ep->qps[q], &wr,
							  &bad));
				EP_REQUIRE(ep, !ret, "QP %d: ibv_post_send: "
					   "%s", q, cf_errname(ret));
				posted[q]++;
			}
		}
		got = ibv_poll_cq(ep->cq, 32, wc);
		if (got < 0) {
			EP_CHECK(ep, 0, "ibv_poll_cq failed");
			return -1;
		}
		if (!got && cf_now_ms() - last > 5000) {
			EP_CHECK(ep, 0, "sender: no progress for 5 s after %lu "
				 "of %lu completions", total, want);
			return -1;
		}
		if (got)
			last = cf_now_ms();
		for (k = 0; k < got; k++) {
			q = (int)(wc[k].wr_id >> 32);
			EP_REQUIRE(ep, wc[k].status == IBV_WC_SUCCESS &&
				   q < NQP &&
				   (wc[k].wr_id & 0xffffffffu) == done[q],
				   "send completion: %s wr_id 0x%llx, expected "
				   "QP %d message %lu (in order)",
				   ibv_wc_status_str(wc[k].status),
				   (unsigned long long)wc[k].wr_id, q,
				   q < NQP ? done[q] : 0);
			done[q]++;
			total++;
		}
	}
	printf("(%lu messages in %lld ms) ", want, cf_now_ms() - t0);
	return cf_ep_sync(ep, 30000);
}

/* The run's message count and seed, set by its tune before the fork. */
static struct stress_arg stress;

CF_BODY_IMPL(rc_stress, stress)
{
	return ep->side == CF_CHILD ? receiver(ep, &stress) :
				      sender(ep, &stress);
}

/*
 * The parameters of the run, and its message count and seed from the
 * environment (printed, so that a failure can be replayed).
 */
CF_TUNE_IMPL(stress)
{
	const char *s;

	s = getenv("CF_RC_STRESS_MSGS");
	stress.n = s ? strtoul(s, NULL, 0) : 3000;
	s = getenv("CF_RC_STRESS_SEED");
	stress.seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL);
	if (!stress.n)
		stress.n = 1;
	printf("\n  rc_stress: %d QPs x %lu messages of %u..%u B, seed %llu "
	       "(CF_RC_STRESS_MSGS, default 3000; make check: 100000; "
	       "CF_RC_STRESS_SEED)\n  ", NQP, stress.n, MIN_MSG, MAX_MSG,
	       (unsigned long long)stress.seed);
	p->nqp = NQP;
	p->buf_len = (size_t)NQP * WINDOW * MAX_MSG;
	p->cq_size = NQP * WINDOW * 2;
	p->max_send_wr = WINDOW;
	p->max_recv_wr = WINDOW;
	p->max_sge = 1;
	p->sq_sig_all = true;
	p->rnr_retry = 7;
	p->min_rnr_timer = 1;
	/* Bounded by "no progress for 5 s" on both sides, and by this. */
	p->deadline_s = 600;
}
