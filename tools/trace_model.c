// SPDX-License-Identifier: MIT
/*
 * The ladder's model of a run trace (doc/trace.md, "Matching"): events in
 * time order, a lane per QP (node, qpn) grouped by process (node, pid),
 * each packet's tx tied to its rx (or drop), each work request to its
 * request packets and its completion.
 *
 * The events come from an untrusted file, so every lookup walks a bounded
 * chain (CHAIN_MAX): what does not match within it stays unmatched.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "tools/trace.h"

#define NB 65536u		/* buckets of each chained map */
#define CHAIN_MAX 256		/* steps of any one lookup */
#define IDMAP_SIZE 16384u	/* open addressing: procs, lanes, LIDs */

/* uint64 key -> uint32 value, open addressing, never more than half full
 * (the callers bound what they add). */
struct idmap {
	uint64_t key[IDMAP_SIZE];
	uint32_t val[IDMAP_SIZE];
	bool used[IDMAP_SIZE];
};

static uint32_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return (uint32_t)k;
}

static uint32_t *idmap_slot(struct idmap *m, uint64_t key, bool add)
{
	uint32_t i = mix(key) & (IDMAP_SIZE - 1), n;

	for (n = 0; n < IDMAP_SIZE; n++, i = (i + 1) & (IDMAP_SIZE - 1)) {
		if (m->used[i] && m->key[i] == key)
			return &m->val[i];
		if (!m->used[i]) {
			if (!add)
				return NULL;
			m->used[i] = true;
			m->key[i] = key;
			m->val[i] = TRACE_NONE;
			return &m->val[i];
		}
	}
	return NULL;
}

/* Items (event or WR indices) in buckets, in the order added; the caller
 * keeps the links (next[]) and says which item matches. */
struct chains {
	uint32_t head[NB], tail[NB];
};

static void chains_init(struct chains *c)
{
	memset(c->head, 0xff, sizeof(c->head));
	memset(c->tail, 0xff, sizeof(c->tail));
}

static void chain_add(struct chains *c, uint32_t *next, uint32_t b,
		      uint32_t item)
{
	next[item] = TRACE_NONE;
	if (c->tail[b] == TRACE_NONE)
		c->head[b] = item;
	else
		next[c->tail[b]] = item;
	c->tail[b] = item;
}

static void chain_del(struct chains *c, uint32_t *next, uint32_t b,
		      uint32_t prev, uint32_t item)
{
	if (prev == TRACE_NONE)
		c->head[b] = next[item];
	else
		next[prev] = next[item];
	if (c->tail[b] == item)
		c->tail[b] = prev;
}

struct build {
	struct trace_model *m;
	struct trace *tr;
	struct idmap procs, lanes, lids;
	struct chains pend, wrc;
	uint32_t *pend_next, *wr_next;
	uint32_t *wr_psn_lo, *wr_psn_hi;
};

static const char *const cls_names[TC_NR] = {
	[TC_NONE] = "", [TC_REQ] = "req", [TC_RESP] = "resp",
	[TC_ACK] = "ack", [TC_NAK] = "nak", [TC_DROP] = "drop",
};

const char *trace_cls_name(unsigned int cls)
{
	return cls < TC_NR ? cls_names[cls] : "";
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

/* What a packet is, from its BTH opcode and AETH (IBA 9.2, 9.7.5.2). */
static uint8_t packet_cls(const struct trace *tr, const struct trace_ev *e)
{
	const char *op = trace_s(tr, e, TS_OP), *aeth = trace_s(tr, e, TS_AETH);

	if (strstr(op, "READ_RESPONSE") || ends_with(op, "ATOMIC_ACKNOWLEDGE"))
		return TC_RESP;
	if (ends_with(op, "ACKNOWLEDGE"))
		return *aeth && strcmp(aeth, "ACK") ? TC_NAK : TC_ACK;
	return TC_REQ;
}

static uint32_t proc_of(struct build *b, const struct trace_ev *e)
{
	struct trace_model *m = b->m;
	uint32_t *v;

	if (m->nr_procs == TRACE_PROC_MAX)
		return TRACE_NONE;
	v = idmap_slot(&b->procs, (uint64_t)e->node << 32 | e->pid, true);
	if (!v)
		return TRACE_NONE;
	if (*v == TRACE_NONE) {
		*v = m->nr_procs++;
		m->procs[*v] = (struct trace_proc){ .node = e->node,
						    .pid = e->pid };
	}
	return *v;
}

/* The lane of QP qpn on e's node, made (for e's process) if new. */
static uint32_t lane_of(struct build *b, const struct trace_ev *e,
			uint32_t qpn, bool fresh)
{
	struct trace_model *m = b->m;
	uint32_t *v, proc;

	v = idmap_slot(&b->lanes, (uint64_t)e->node << 32 | qpn, true);
	if (!v)
		return TRACE_NONE;
	/* A QPN made again after qp_destroy is another lane. */
	if (*v != TRACE_NONE && !(fresh && m->lanes[*v].destroyed))
		return *v;
	proc = proc_of(b, e);
	if (m->nr_lanes == TRACE_LANE_MAX || proc == TRACE_NONE) {
		m->dropped_lanes++;
		return TRACE_NONE;
	}
	*v = m->nr_lanes++;
	m->lanes[*v] = (struct trace_lane){ .node = e->node, .qpn = qpn,
					    .proc = proc, .srq = TRACE_NONE };
	return *v;
}

static uint32_t lane_known(struct build *b, uint16_t node, uint32_t qpn)
{
	uint32_t *v = idmap_slot(&b->lanes, (uint64_t)node << 32 | qpn, false);

	return v ? *v : TRACE_NONE;
}

/* The lane an event is drawn on (doc/trace.md, "Matching"). */
static uint32_t ev_lane(struct build *b, const struct trace_ev *e)
{
	uint32_t l;

	switch (e->kind) {
	case TK_TX:
		return trace_has(e, TN_SQP) ? lane_of(b, e, e->num[TN_SQP], 0)
					    : TRACE_NONE;
	case TK_RX:
		return trace_has(e, TN_DQP) ? lane_of(b, e, e->num[TN_DQP], 0)
					    : TRACE_NONE;
	case TK_DROP:
		/* Dropped where it was sent, or where it arrived. */
		l = trace_has(e, TN_SQP) ? lane_known(b, e->node,
						       e->num[TN_SQP])
					 : TRACE_NONE;
		if (l != TRACE_NONE &&
		    b->m->procs[b->m->lanes[l].proc].pid == e->pid)
			return l;
		if (trace_has(e, TN_DQP))
			return lane_of(b, e, e->num[TN_DQP], 0);
		return l;
	default:
		return trace_has(e, TN_QP)
			       ? lane_of(b, e, e->num[TN_QP],
					 e->kind == TK_QP_CREATE)
			       : TRACE_NONE;
	}
}

static uint32_t pkt_bucket(const struct trace_ev *e)
{
	return mix((uint64_t)e->num[TN_SLID] << 48 ^
		   (uint64_t)e->num[TN_SQP] << 24 ^ e->num[TN_DQP] ^
		   (uint64_t)e->num[TN_PSN] << 32 ^ e->name[TS_OP]) & (NB - 1);
}

static bool same_packet(const struct trace_ev *a, const struct trace_ev *b)
{
	static const unsigned int keys[] = { TN_SLID, TN_SQP, TN_DQP, TN_PSN };
	unsigned int i;

	for (i = 0; i < 4; i++)
		if (trace_has(a, keys[i]) != trace_has(b, keys[i]) ||
		    a->num[keys[i]] != b->num[keys[i]])
			return false;
	return a->name[TS_OP] == b->name[TS_OP];
}

static int add_arrow(struct trace_model *m, uint32_t tx, uint32_t end,
		     uint8_t cls)
{
	struct trace_arrow *a;

	if (m->nr_arrows == m->cap_arrows) {
		a = trace_grow(m->arrows, &m->cap_arrows, sizeof(*a), 256);
		if (!a)
			return -1;
		m->arrows = a;
	}
	m->arrows[m->nr_arrows] = (struct trace_arrow){
		.tx = tx, .end = end, .cls = cls,
		.from_lane = tx == TRACE_NONE ? TRACE_NONE : m->x[tx].lane,
		.to_lane = end == TRACE_NONE ? TRACE_NONE : m->x[end].lane,
	};
	if (tx != TRACE_NONE)
		m->x[tx].arrow = m->nr_arrows;
	if (end != TRACE_NONE)
		m->x[end].arrow = m->nr_arrows;
	return m->nr_arrows++, 0;
}

/* A tx waits for its rx or drop: the first one after it with the same
 * slid, sqp, dqp, op and psn. */
static void packet_tx(struct build *b, uint32_t i)
{
	chain_add(&b->pend, b->pend_next, pkt_bucket(&b->tr->ev[i]), i);
}

static int packet_end(struct build *b, uint32_t i)
{
	struct trace_ev *ev = b->tr->ev, *e = &ev[i];
	uint32_t bk = pkt_bucket(e), prev = TRACE_NONE, j, n = 0;
	uint8_t cls = e->kind == TK_DROP ? TC_DROP : packet_cls(b->tr, e);

	for (j = b->pend.head[bk]; j != TRACE_NONE && n < CHAIN_MAX;
	     prev = j, j = b->pend_next[j], n++) {
		if (!same_packet(&ev[j], e))
			continue;
		chain_del(&b->pend, b->pend_next, bk, prev, j);
		return add_arrow(b->m, j, i, cls);
	}
	return add_arrow(b->m, TRACE_NONE, i, cls);
}

static int add_wr(struct build *b, uint32_t i, uint32_t lane, bool recv)
{
	struct trace_model *m = b->m;
	uint32_t cap, *n1, *n2, *n3;
	struct trace_wr *w;

	if (m->nr_wrs == m->cap_wrs) {
		cap = m->cap_wrs ? m->cap_wrs * 2 : 256;
		w = realloc(m->wrs, (size_t)cap * sizeof(*w));
		n1 = realloc(b->wr_next, (size_t)cap * sizeof(*n1));
		if (n1)
			b->wr_next = n1;
		n2 = realloc(b->wr_psn_lo, (size_t)cap * sizeof(*n2));
		if (n2)
			b->wr_psn_lo = n2;
		n3 = realloc(b->wr_psn_hi, (size_t)cap * sizeof(*n3));
		if (n3)
			b->wr_psn_hi = n3;
		if (w)
			m->wrs = w;
		if (!w || !n1 || !n2 || !n3)
			return -1;
		m->cap_wrs = cap;
	}
	m->wrs[m->nr_wrs] = (struct trace_wr){
		.lane = lane, .post = i, .cqe = TRACE_NONE,
		.first_pkt = TRACE_NONE, .last_pkt = TRACE_NONE, .recv = recv,
	};
	m->x[i].wr = m->nr_wrs;
	return m->nr_wrs++, 0;
}

/* The key of a WR queue: a lane's send or receive queue, or an SRQ. */
static uint64_t wr_key(uint32_t lane, bool recv)
{
	return (uint64_t)lane << 1 | recv;
}

static uint32_t wr_bucket(uint64_t key, uint64_t wr)
{
	return mix(key * 0x9e3779b97f4a7c15ull ^ wr) & (NB - 1);
}

/* An SRQ's WRs queue under a key no lane has (above 2 * lanes). */
static uint64_t srq_key(uint16_t node, uint32_t srq)
{
	return (uint64_t)1 << 40 | (uint64_t)node << 32 | srq;
}

static uint64_t post_key(const struct trace_ev *e, uint32_t lane)
{
	if (e->kind == TK_POST_RECV && !trace_has(e, TN_QP))
		return srq_key(e->node, e->num[TN_SRQ]);
	return wr_key(lane, e->kind == TK_POST_RECV);
}

static int wr_post(struct build *b, uint32_t i)
{
	const struct trace_ev *e = &b->tr->ev[i];
	uint32_t lane = b->m->x[i].lane;
	bool srq = e->kind == TK_POST_RECV && !trace_has(e, TN_QP);
	uint64_t key;

	if (!trace_has(e, TN_WR) || (lane == TRACE_NONE && !srq) ||
	    (srq && !trace_has(e, TN_SRQ)))
		return 0;
	key = post_key(e, lane);
	if (add_wr(b, i, srq ? TRACE_NONE : lane, e->kind == TK_POST_RECV))
		return -1;
	chain_add(&b->wrc, b->wr_next, wr_bucket(key, e->wr), b->m->nr_wrs - 1);
	return 0;
}

static bool wr_match(struct build *b, uint32_t w, uint64_t key, uint64_t wr)
{
	const struct trace_ev *p = &b->tr->ev[b->m->wrs[w].post];

	return p->wr == wr && post_key(p, b->m->wrs[w].lane) == key;
}

static bool first_packet(const struct trace *tr, const struct trace_ev *e)
{
	const char *op = trace_s(tr, e, TS_OP);

	return !trace_has(e, TN_RETRY) &&
	       (ends_with(op, "_FIRST") || ends_with(op, "_ONLY") ||
		strstr(op, "_ONLY_WITH") || ends_with(op, "_REQUEST") ||
		strstr(op, "COMPARE_SWAP") || strstr(op, "FETCH_ADD"));
}

/* A request packet names its WR (doc/trace.md): a first packet the oldest
 * WR of that wr_id not yet started, a later one the WR whose PSNs it is
 * in, else the newest started. */
static void wr_packet(struct build *b, uint32_t i)
{
	struct trace_model *m = b->m;
	const struct trace_ev *e = &b->tr->ev[i];
	uint64_t key = wr_key(m->x[i].lane, false);
	uint32_t bk = wr_bucket(key, e->wr), w, n = 0, pick = TRACE_NONE;
	bool first = first_packet(b->tr, e);
	uint32_t psn = e->num[TN_PSN];

	if (!trace_has(e, TN_WR) || m->x[i].lane == TRACE_NONE)
		return;
	for (w = b->wrc.head[bk]; w != TRACE_NONE && n < CHAIN_MAX;
	     w = b->wr_next[w], n++) {
		if (!wr_match(b, w, key, e->wr))
			continue;
		if (first && !m->wrs[w].nr_pkts) {
			pick = w;
			break;
		}
		if (!first && m->wrs[w].nr_pkts) {
			pick = w;
			if (psn >= b->wr_psn_lo[w] && psn <= b->wr_psn_hi[w])
				break;
		}
	}
	if (pick == TRACE_NONE)
		return;
	if (!m->wrs[pick].nr_pkts++) {
		m->wrs[pick].first_pkt = i;
		b->wr_psn_lo[pick] = b->wr_psn_hi[pick] = psn;
	}
	if (psn > b->wr_psn_hi[pick])
		b->wr_psn_hi[pick] = psn;
	m->wrs[pick].last_pkt = i;
	m->x[i].wr = pick;
}

/* The oldest WR of the queue `key` with this wr_id still waiting for its
 * completion; unsignaled WRs before it are complete too (IBA 10.8.3:
 * completions in order) and leave the chain. */
static uint32_t wr_complete(struct build *b, uint64_t key, uint64_t wr)
{
	struct trace_model *m = b->m;
	uint32_t bk = wr_bucket(key, wr), w, prev = TRACE_NONE, n = 0, nx;
	const struct trace_ev *p;

	for (w = b->wrc.head[bk]; w != TRACE_NONE && n < CHAIN_MAX; w = nx, n++) {
		nx = b->wr_next[w];
		if (!wr_match(b, w, key, wr)) {
			prev = w;
			continue;
		}
		p = &b->tr->ev[m->wrs[w].post];
		chain_del(&b->wrc, b->wr_next, bk, prev, w);
		if (p->kind != TK_POST_SEND || !trace_has(p, TN_SIG) ||
		    p->num[TN_SIG])
			return w;
	}
	return TRACE_NONE;
}

static void wr_cqe(struct build *b, uint32_t i)
{
	struct trace_model *m = b->m;
	const struct trace_ev *e = &b->tr->ev[i];
	uint32_t lane = m->x[i].lane, w;
	bool recv = !strncmp(trace_s(b->tr, e, TS_OP), "RECV", 4);
	const char *st = trace_s(b->tr, e, TS_STATUS);

	if (lane == TRACE_NONE || !trace_has(e, TN_WR))
		return;
	w = wr_complete(b, wr_key(lane, recv), e->wr);
	if (w == TRACE_NONE && m->lanes[lane].srq != TRACE_NONE)
		w = wr_complete(b, srq_key(e->node, m->lanes[lane].srq),
				e->wr);
	if (w == TRACE_NONE)	/* a flushed WR's opcode may say nothing */
		w = wr_complete(b, wr_key(lane, !recv), e->wr);
	if (w == TRACE_NONE)
		return;
	m->wrs[w].cqe = i;
	m->wrs[w].lane = lane;
	m->wrs[w].error = *st && strcmp(st, "SUCCESS");
	m->x[i].wr = w;
	m->x[m->wrs[w].post].lane = lane;
}

static bool ev_error(const struct trace *tr, const struct trace_ev *e)
{
	const char *s;

	switch (e->kind) {
	case TK_CQE:
		s = trace_s(tr, e, TS_STATUS);
		return *s && strcmp(s, "SUCCESS");
	case TK_TX:
		return packet_cls(tr, e) == TC_NAK;
	case TK_DROP: case TK_RETRY: case TK_RNR_WAIT:
		return true;
	case TK_QP_STATE:
		s = trace_s(tr, e, TS_TO);
		return !strcmp(s, "ERR") || !strcmp(s, "SQE");
	case TK_ASYNC:
		s = trace_s(tr, e, TS_TYPE);
		return strstr(s, "ERR") || strstr(s, "FATAL");
	default:
		return false;
	}
}

static int model_event(struct build *b, uint32_t i)
{
	struct trace_model *m = b->m;
	struct trace_ev *e = &b->tr->ev[i];
	struct trace_lane *l;
	uint32_t lane, *v;

	lane = m->x[i].lane = ev_lane(b, e);
	m->x[i].error = ev_error(b->tr, e);
	proc_of(b, e);
	if (e->kind == TK_TX && trace_has(e, TN_SLID)) {
		v = idmap_slot(&b->lids, e->num[TN_SLID], true);
		if (v)
			*v = e->node;
	}
	l = lane == TRACE_NONE ? NULL : &m->lanes[lane];
	switch (e->kind) {
	case TK_START:
		v = idmap_slot(&b->procs, (uint64_t)e->node << 32 | e->pid, 0);
		if (v && *v != TRACE_NONE)
			m->procs[*v].prog = e->name[TS_PROG];
		return 0;
	case TK_QP_CREATE:
		if (l) {
			l->type = e->name[TS_TYPE];
			if (trace_has(e, TN_SRQ))
				l->srq = e->num[TN_SRQ];
		}
		return 0;
	case TK_QP_DESTROY:
		if (l)
			l->destroyed = true;
		return 0;
	case TK_POST_SEND: case TK_POST_RECV:
		return wr_post(b, i);
	case TK_TX:
		wr_packet(b, i);
		packet_tx(b, i);
		return 0;
	case TK_RX: case TK_DROP:
		return packet_end(b, i);
	case TK_CQE:
		wr_cqe(b, i);
		return 0;
	default:
		return 0;
	}
}

static int cmp_ev(const void *pa, const void *pb)
{
	const struct trace_ev *a = pa, *b = pb;

	if (a->t != b->t)
		return a->t < b->t ? -1 : 1;
	return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Arrows still open: each tx never received; the receiver's lane, where
 * its LID's node has a lane of its dqp. */
static int finish_arrows(struct build *b)
{
	struct trace_model *m = b->m;
	const struct trace_ev *e;
	struct trace_arrow *a;
	uint32_t bk, i, *node;

	for (bk = 0; bk < NB; bk++)
		for (i = b->pend.head[bk]; i != TRACE_NONE; i = b->pend_next[i])
			if (add_arrow(m, i, TRACE_NONE,
				      packet_cls(b->tr, &b->tr->ev[i])))
				return -1;
	for (i = 0; i < m->nr_arrows; i++) {
		a = &m->arrows[i];
		if (a->tx == TRACE_NONE || a->cls == TC_DROP ||
		    a->end == TRACE_NONE) {
			e = &b->tr->ev[a->tx != TRACE_NONE ? a->tx : a->end];
			node = idmap_slot(&b->lids, e->num[TN_DLID], false);
			if (a->end != TRACE_NONE && a->cls != TC_DROP)
				continue;	/* an rx: it is on its lane */
			a->to_lane = node && trace_has(e, TN_DQP)
					     ? lane_known(b, *node, e->num[TN_DQP])
					     : TRACE_NONE;
		}
	}
	return 0;
}

static bool lane_selected(const struct trace_model *m, uint32_t lane,
			  const struct trace_filter *f)
{
	unsigned int i;

	if (!f->nr_qp)
		return true;
	for (i = 0; i < f->nr_qp; i++)
		if (m->lanes[lane].qpn == f->qp[i])
			return true;
	return false;
}

static const struct trace *sort_tr;

static int cmp_lane(const void *pa, const void *pb)
{
	const struct trace_lane *a = pa, *b = pb;
	int c = strcmp(sort_tr->str[a->node], sort_tr->str[b->node]);

	if (c)
		return c;
	if (a->proc != b->proc)
		return a->proc < b->proc ? -1 : 1;
	return a->qpn < b->qpn ? -1 : a->qpn > b->qpn;
}

/* Which lanes are drawn, in which column: by node, process, QPN. */
static int rank_lanes(struct trace_model *m, const struct trace_filter *f)
{
	struct trace_lane *s = malloc((m->nr_lanes + 1) * sizeof(*s));
	uint32_t i, j, col = 0;

	if (!s)
		return -1;
	for (i = 0; i < m->nr_lanes; i++) {
		s[i] = m->lanes[i];
		s[i].srq = i;	/* the copy carries its index here */
	}
	sort_tr = m->tr;
	qsort(s, m->nr_lanes, sizeof(*s), cmp_lane);
	for (i = 0; i < m->nr_lanes; i++) {
		j = s[i].srq;
		m->lane_rank[j] = lane_selected(m, j, f) ? col++ : TRACE_NONE;
	}
	free(s);
	return 0;
}

static void select_events(struct trace_model *m, const struct trace_filter *f)
{
	uint32_t i, lane;
	uint64_t dt;

	m->nr_order = 0;
	for (i = 0; i < m->tr->nr_ev; i++) {
		dt = m->tr->ev[i].t - m->t0;
		lane = m->x[i].lane;
		if (dt < f->from || dt > f->to)
			continue;
		if (lane == TRACE_NONE ? f->nr_qp != 0
				       : m->lane_rank[lane] == TRACE_NONE)
			continue;
		m->order[m->nr_order++] = i;
	}
}

static int alloc_model(struct trace_model *m, struct build *b, uint32_t n)
{
	m->x = calloc(n + 1, sizeof(*m->x));
	m->order = calloc(n + 1, sizeof(*m->order));
	m->procs = calloc(TRACE_PROC_MAX, sizeof(*m->procs));
	m->lanes = calloc(TRACE_LANE_MAX, sizeof(*m->lanes));
	m->lane_rank = calloc(TRACE_LANE_MAX, sizeof(*m->lane_rank));
	b->pend_next = calloc(n + 1, sizeof(*b->pend_next));
	return m->x && m->order && m->procs && m->lanes && m->lane_rank &&
	       b->pend_next ? 0 : -1;
}

int trace_model_build(struct trace_model *m, struct trace *tr,
		      const struct trace_filter *flt)
{
	struct build *b = calloc(1, sizeof(*b));
	uint32_t i;
	int ret = -1;

	memset(m, 0, sizeof(*m));
	m->tr = tr;
	if (!b)
		return -1;
	b->m = m;
	b->tr = tr;
	chains_init(&b->pend);
	chains_init(&b->wrc);
	if (alloc_model(m, b, tr->nr_ev))
		goto out;
	qsort(tr->ev, tr->nr_ev, sizeof(*tr->ev), cmp_ev);
	m->t0 = tr->nr_ev ? tr->ev[0].t : 0;
	for (i = 0; i < tr->nr_ev; i++) {
		m->x[i] = (struct trace_evx){ .lane = TRACE_NONE,
					      .wr = TRACE_NONE,
					      .arrow = TRACE_NONE };
		if (model_event(b, i))
			goto out;
	}
	if (finish_arrows(b) || rank_lanes(m, flt))
		goto out;
	select_events(m, flt);
	ret = 0;
out:
	free(b->pend_next);
	free(b->wr_next);
	free(b->wr_psn_lo);
	free(b->wr_psn_hi);
	free(b);
	return ret;
}

void trace_model_free(struct trace_model *m)
{
	free(m->x);
	free(m->order);
	free(m->procs);
	free(m->lanes);
	free(m->lane_rank);
	free(m->wrs);
	free(m->arrows);
	memset(m, 0, sizeof(*m));
}
