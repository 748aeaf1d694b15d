// SPDX-License-Identifier: MIT
/*
 * Seeded, deterministic fault injection on the receive side of the
 * engine (see fault.h).
 *
 * Grammar of IBEMU_FAULTS, items separated by commas:
 *
 *   drop:P           lose the packet
 *   dup:P            process the packet twice
 *   reorder:P        hold the packet until the next one has been taken
 *                    (at most FAULT_REORDER_NS)
 *   delay:P[:USEC]   hold the packet USEC microseconds (default 100)
 *   seed=N           the seed of every decision (default: drawn, and
 *                    printed so that the run can be replayed)
 *   kill:POINT:N     SIGKILL this process at the Nth pass of POINT
 *                    (publish, write, atomic, ack, place, netread)
 *   stall:POINT:USEC sleep USEC microseconds at every pass of POINT (a
 *                    thread preempted there: tests of the placement
 *                    fence stall a placement between its checks and its
 *                    copy)
 *
 * P is a probability from 0 to 1.  A packet gets at most one fault, tried
 * in the order drop, dup, reorder, delay.
 *
 * Lock rule: struct fault belongs to one engine and is used under its
 * engine.lock only; the point counters are atomics of their own.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"
#include "fault.h"
#include "log.h"
#include "pkt_trace.h"
#include "trace_rec.h"

/* Received packets remembered, for how often each was seen: a packet is
 * retransmitted soon after it was first sent, long before 2^16 others
 * have come.  Sets of FAULT_SEEN_WAYS, the least recently seen replaced:
 * a packet that keeps being resent must keep its count even when others
 * resent with it hash to its set, or it would meet its first decision
 * (a drop, say) again and again, a loss no retransmission gets past. */
#define FAULT_SEEN_SLOTS (1u << 16)
#define FAULT_SEEN_WAYS 4u
/* Packets held back at once; a packet that finds no room goes through. */
#define FAULT_HOLD_MAX 16
/* The longest a reordered packet waits for a successor. */
#define FAULT_REORDER_NS (200ull * 1000)
#define FAULT_DELAY_US 100

enum fault_kind { FAULT_DROP, FAULT_DUP, FAULT_REORDER, FAULT_DELAY,
		  FAULT_NR_KINDS, FAULT_NONE = FAULT_NR_KINDS };

static const char *const fault_kind_name[FAULT_NR_KINDS] = {
	[FAULT_DROP] = "drop",
	[FAULT_DUP] = "dup",
	[FAULT_REORDER] = "reorder",
	[FAULT_DELAY] = "delay",
};

static const char *const fault_point_name[FAULT_NR_POINTS] = {
	[FAULT_AT_PUBLISH] = "publish",
	[FAULT_AT_WRITE] = "write",
	[FAULT_AT_ATOMIC] = "atomic",
	[FAULT_AT_ACK] = "ack",
	[FAULT_AT_PLACE] = "place",
	[FAULT_AT_NETREAD] = "netread",
};

struct fault_cfg {
	/* probability * 2^32: the fault happens when a 32-bit hash of the
	 * packet is below it */
	uint64_t threshold[FAULT_NR_KINDS];
	double prob[FAULT_NR_KINDS];
	uint32_t delay_us;
	uint64_t seed;
	bool seed_set;
	uint64_t kill_at[FAULT_NR_POINTS]; /* 0: not armed */
	uint32_t stall_us[FAULT_NR_POINTS]; /* 0: not armed */
};

/* A packet copied out of the transport, in private memory. */
struct fault_copy {
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	uint8_t data[PKT_MAX_LEN];
};

struct fault_held {
	uint64_t due; /* when it is delivered anyway */
	bool reorder; /* also delivered after the next packet */
	struct fault_copy pkt;
};

struct fault_seen {
	uint64_t tag; /* 0: empty */
	uint32_t count;
	uint32_t last; /* fault.seen_clock when last received */
};

struct fault {
	struct fault_cfg cfg;
	struct fault_seen *seen; /* FAULT_SEEN_SLOTS, sets by tag */
	uint32_t seen_clock; /* packets looked up, wrapping */
	struct fault_held *held; /* FAULT_HOLD_MAX, in the order held */
	unsigned int nr_held;
	struct fault_copy dup; /* a duplicated packet's copy */
	struct fault_stats st;
};

atomic_bool fault_points_armed;
static _Atomic uint64_t fault_kill_at[FAULT_NR_POINTS];
static _Atomic uint32_t fault_stall_us[FAULT_NR_POINTS];
static _Atomic uint64_t fault_kill_passes[FAULT_NR_POINTS];

/* ---- decisions ---- */

/* splitmix64's finaliser: every bit of x moves every bit of the result. */
static uint64_t fault_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* The packet's identity: who sent it to whom, PSN and opcode. */
static uint64_t fault_tag(uint32_t src_qpn, uint32_t dst_qpn, uint32_t psn,
			  uint8_t opcode)
{
	uint64_t a = (uint64_t)src_qpn << 32 | dst_qpn;
	uint64_t b = (uint64_t)psn << 8 | opcode;

	return fault_mix(a ^ fault_mix(b + 0x9e3779b97f4a7c15ull)) | 1;
}

/* How often this process received the packet tagged tag before. */
static uint32_t fault_occurrence(struct fault *f, uint64_t tag)
{
	struct fault_seen *set = &f->seen[tag & (FAULT_SEEN_SLOTS -
						 FAULT_SEEN_WAYS)];
	struct fault_seen *s = NULL;
	uint32_t now = ++f->seen_clock;
	unsigned int i;

	for (i = 0; i < FAULT_SEEN_WAYS; i++) {
		if (set[i].tag == tag) {
			s = &set[i];
			break;
		}
		/* An empty way, or else the least recently seen. */
		if (!s || (s->tag &&
			   (!set[i].tag || now - set[i].last > now - s->last)))
			s = &set[i];
	}
	if (s->tag != tag) {
		s->tag = tag;
		s->count = 0;
	}
	s->last = now;
	return s->count++;
}

static enum fault_kind fault_decide(const struct fault *f, uint64_t tag,
				    uint32_t occurrence)
{
	uint64_t r = fault_mix(tag ^ fault_mix(f->cfg.seed ^
					       (uint64_t)occurrence << 40));
	unsigned int k;

	for (k = 0; k < FAULT_NR_KINDS; k++) {
		uint64_t u = fault_mix(r + k * 0x9e3779b97f4a7c15ull) >> 32;

		if (u < f->cfg.threshold[k])
			return k;
	}
	return FAULT_NONE;
}

/* ---- holding packets back ---- */

/* Copy the packet out of the transport, reading each field once; false
 * if its length is not one a packet can have. */
static bool fault_copy_in(struct fault_copy *c, const struct tp_pkt *in)
{
	c->hdr = *in->hdr;
	if (c->hdr.len > PKT_MAX_LEN)
		return false;
	if (c->hdr.flags & PKT_F_GRH)
		c->grh = *in->grh;
	/* A bundled acknowledgement (ack_bundle.c) is held, lost or
	 * duplicated with the packet it rides behind, as one frame. */
	if ((c->hdr.flags & PKT_F_ACK_BUNDLED) && pkt_bundle_fits(c->hdr.len))
		memcpy(c->data, in->data,
		       pkt_bundle_off(c->hdr.len) + PKT_BUNDLE_ACK_LEN);
	else
		memcpy(c->data, in->data, c->hdr.len);
	return true;
}

static void fault_deliver_copy(struct engine *e, struct fault_copy *c)
{
	struct tp_pkt view = {
		.hdr = &c->hdr, .data = c->data, .grh = &c->grh,
	};

	engine_recv_locked(e, &view);
}

/* Deliver held packet i and close the gap, keeping the order held. */
static void fault_release(struct engine *e, struct fault *f, unsigned int i)
{
	struct fault_held h = f->held[i];

	memmove(&f->held[i], &f->held[i + 1],
		(f->nr_held - i - 1) * sizeof(f->held[0]));
	f->nr_held--;
	fault_deliver_copy(e, &h.pkt);
}

/* A packet was taken: the reordered packets held before it follow it. */
static void fault_release_reordered(struct engine *e, struct fault *f,
				    unsigned int before)
{
	unsigned int i = 0;

	while (i < before && i < f->nr_held) {
		if (f->held[i].reorder) {
			fault_release(e, f, i);
			before--;
		} else {
			i++;
		}
	}
}

static bool fault_hold(struct engine *e, struct fault *f,
		       const struct tp_pkt *in, enum fault_kind kind)
{
	struct fault_held *h;
	uint64_t due, next;

	if (f->nr_held == FAULT_HOLD_MAX)
		return false;
	h = &f->held[f->nr_held];
	if (!fault_copy_in(&h->pkt, in))
		return false;
	h->reorder = kind == FAULT_REORDER;
	due = clock_now_ns() + (h->reorder ? FAULT_REORDER_NS
					    : f->cfg.delay_us * 1000ull);
	h->due = due;
	f->nr_held++;
	/* The application's polls and the thread wake up for it. */
	next = atomic_load_explicit(&e->next_deadline, memory_order_relaxed);
	if (!next || due < next)
		atomic_store_explicit(&e->next_deadline, due,
				      memory_order_relaxed);
	return true;
}

void fault_flush(struct engine *e)
{
	struct fault *f = e->faults;
	uint64_t now;
	unsigned int i = 0;

	if (!f->nr_held)
		return;
	now = clock_now_ns();
	while (i < f->nr_held) {
		if (f->held[i].due <= now)
			fault_release(e, f, i);
		else
			i++;
	}
}

uint64_t fault_next_due(const struct engine *e, uint64_t next)
{
	const struct fault *f = e->faults;
	unsigned int i;

	for (i = 0; i < f->nr_held; i++)
		if (!next || f->held[i].due < next)
			next = f->held[i].due;
	return next;
}

void fault_recv(struct engine *e, const struct tp_pkt *in)
{
	struct fault *f = e->faults;
	const struct bth *bth = (const struct bth *)in->data;
	unsigned int held_before = f->nr_held;
	enum fault_kind kind;
	uint32_t len = in->hdr->len;
	uint32_t occurrence;
	uint64_t tag;

	f->st.packets++;
	if (len < sizeof(*bth) || len > PKT_MAX_LEN) {
		engine_recv_locked(e, in); /* malformed: the engine drops it */
		return;
	}
	tag = fault_tag(in->hdr->src_qpn, bth_qpn(bth), bth_psn(bth),
			bth->opcode);
	occurrence = fault_occurrence(f, tag);
	kind = fault_decide(f, tag, occurrence);
	if (kind != FAULT_NONE)
		ibemu_trace("fault: %s qp %#x -> %#x psn %#x %s (received "
			    "%u times before)", fault_kind_name[kind],
			    in->hdr->src_qpn, bth_qpn(bth), bth_psn(bth),
			    opcode_get(bth->opcode)->name, occurrence);
	switch (kind) {
	case FAULT_DROP:
		f->st.dropped++;
		if (trace_rec_on()) {
			struct pkt p;

			if (pkt_parse(in, &p))
				pkt_trace("drop", &p, " why=fault");
		}
		break;
	case FAULT_DUP:
		if (fault_copy_in(&f->dup, in)) {
			f->st.duplicated++;
			fault_deliver_copy(e, &f->dup);
			fault_deliver_copy(e, &f->dup);
		}
		break;
	case FAULT_REORDER:
	case FAULT_DELAY:
		if (fault_hold(e, f, in, kind)) {
			if (kind == FAULT_REORDER)
				f->st.reordered++;
			else
				f->st.delayed++;
			return;
		}
		engine_recv_locked(e, in);
		break;
	case FAULT_NONE:
		engine_recv_locked(e, in);
		break;
	}
	fault_release_reordered(e, f, held_before);
}

void fault_get_stats(const struct engine *e, struct fault_stats *st)
{
	if (e->faults)
		*st = e->faults->st;
	else
		memset(st, 0, sizeof(*st));
}

/* ---- kill and stall points ---- */

void fault_point_pass(enum fault_point point)
{
	uint64_t at = atomic_load_explicit(&fault_kill_at[point],
					   memory_order_relaxed);
	uint32_t us = atomic_load_explicit(&fault_stall_us[point],
					   memory_order_relaxed);
	struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};

	if (us)
		nanosleep(&ts, NULL);

	if (at && atomic_fetch_add(&fault_kill_passes[point], 1) + 1 == at) {
		ibemu_log_warn("IBEMU_FAULTS: kill:%s:%llu: killing process %d",
			       fault_point_name[point], (unsigned long long)at,
			       (int)getpid());
		raise(SIGKILL);
	}
}

/* ---- IBEMU_FAULTS ---- */

static int fault_bad(const char *item, const char *why)
{
	ibemu_log_err("IBEMU_FAULTS: bad item '%s': %s (expected drop:P, "
		      "dup:P, reorder:P, delay:P[:USEC], seed=N, "
		      "kill:POINT:N or stall:POINT:USEC, comma-separated; "
		      "P from 0 to 1)",
		      item, why);
	return EINVAL;
}

/* An unsigned decimal that is the whole of s. */
static bool fault_parse_u64(const char *s, uint64_t *v)
{
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return false;
	errno = 0;
	*v = strtoull(s, &end, 0);
	return !errno && !*end;
}

static bool fault_parse_prob(const char *s, double *p)
{
	char *end;

	if (!*s)
		return false;
	errno = 0;
	*p = strtod(s, &end);
	return !errno && !*end && *p >= 0 && *p <= 1;
}

/* kill:POINT:N (stall false) or stall:POINT:USEC. */
static int fault_parse_point(struct fault_cfg *cfg, const char *item,
			     char *arg, bool stall)
{
	char *count = strchr(arg, ':');
	uint64_t n;
	int i;

	if (!count)
		return fault_bad(item, "a point and a number are needed");
	*count++ = 0;
	if (!fault_parse_u64(count, &n) || !n || (stall && n > 1000000))
		return fault_bad(item, stall ? "the stall is 1 to 1000000 us"
					     : "the count must be 1 or more");
	for (i = 0; i < FAULT_NR_POINTS; i++) {
		if (!strcmp(arg, fault_point_name[i])) {
			if (stall)
				cfg->stall_us[i] = (uint32_t)n;
			else
				cfg->kill_at[i] = n;
			return 0;
		}
	}
	return fault_bad(item, "no such point (publish, write, atomic, ack, "
			       "place, netread)");
}

static int fault_parse_item(struct fault_cfg *cfg, char *item)
{
	char copy[128], *arg, *usec;
	uint64_t v;
	double p;
	int k;

	snprintf(copy, sizeof(copy), "%s", item);
	arg = item + strcspn(item, ":=");
	if (!*arg)
		return fault_bad(copy, "no value");
	*arg++ = 0;
	if (!strcmp(item, "seed")) {
		if (!fault_parse_u64(arg, &cfg->seed))
			return fault_bad(copy, "the seed is an unsigned number");
		cfg->seed_set = true;
		return 0;
	}
	if (!strcmp(item, "kill") || !strcmp(item, "stall"))
		return fault_parse_point(cfg, copy, arg, *item == 's');
	for (k = 0; k < FAULT_NR_KINDS; k++)
		if (!strcmp(item, fault_kind_name[k]))
			break;
	if (k == FAULT_NR_KINDS)
		return fault_bad(copy, "unknown fault");
	usec = k == FAULT_DELAY ? strchr(arg, ':') : NULL;
	if (usec) {
		*usec++ = 0;
		if (!fault_parse_u64(usec, &v) || v > 1000000)
			return fault_bad(copy, "the delay is 0 to 1000000 us");
		cfg->delay_us = (uint32_t)v;
	}
	if (!fault_parse_prob(arg, &p))
		return fault_bad(copy, "the probability is from 0 to 1");
	cfg->prob[k] = p;
	cfg->threshold[k] = (uint64_t)(p * 4294967296.0);
	return 0;
}

/* Parse spec into cfg; 0 or EINVAL (logged). */
static int fault_parse(const char *spec, struct fault_cfg *cfg)
{
	char *buf = strdup(spec), *item, *save = NULL;
	int ret = 0;

	if (!buf)
		return ENOMEM;
	memset(cfg, 0, sizeof(*cfg));
	cfg->delay_us = FAULT_DELAY_US;
	for (item = strtok_r(buf, ",", &save); item && !ret;
	     item = strtok_r(NULL, ",", &save))
		ret = fault_parse_item(cfg, item);
	free(buf);
	return ret;
}

static void fault_arm_points(const struct fault_cfg *cfg)
{
	bool any = false;
	int i;

	for (i = 0; i < FAULT_NR_POINTS; i++) {
		atomic_store(&fault_kill_at[i], cfg->kill_at[i]);
		atomic_store(&fault_kill_passes[i], 0);
		atomic_store(&fault_stall_us[i], cfg->stall_us[i]);
		any |= cfg->kill_at[i] != 0 || cfg->stall_us[i] != 0;
	}
	atomic_store(&fault_points_armed, any);
}

int fault_open(struct engine *e)
{
	const char *spec = getenv("IBEMU_FAULTS");
	struct fault *f;
	struct timespec ts;
	int ret;

	e->faults = NULL;
	if (!spec || !*spec)
		return 0;
	f = calloc(1, sizeof(*f));
	if (!f)
		return ENOMEM;
	ret = fault_parse(spec, &f->cfg);
	if (ret)
		goto err_free;
	if (!f->cfg.seed_set) {
		clock_gettime(CLOCK_REALTIME, &ts);
		f->cfg.seed = fault_mix((uint64_t)ts.tv_nsec ^
					(uint64_t)ts.tv_sec << 20 ^
					(uint64_t)getpid() << 40) >> 16;
	}
	f->seen = calloc(FAULT_SEEN_SLOTS, sizeof(*f->seen));
	f->held = calloc(FAULT_HOLD_MAX, sizeof(*f->held));
	if (!f->seen || !f->held) {
		ret = ENOMEM;
		goto err_free;
	}
	fault_arm_points(&f->cfg);
	ibemu_log_warn("IBEMU_FAULTS: injecting faults in process %d: drop %g "
		       "dup %g reorder %g delay %g (%u us), seed=%llu",
		       (int)getpid(), f->cfg.prob[FAULT_DROP],
		       f->cfg.prob[FAULT_DUP], f->cfg.prob[FAULT_REORDER],
		       f->cfg.prob[FAULT_DELAY], f->cfg.delay_us,
		       (unsigned long long)f->cfg.seed);
	e->faults = f;
	return 0;

err_free:
	free(f->seen);
	free(f->held);
	free(f);
	return ret;
}

static void fault_free(struct engine *e)
{
	struct fault *f = e->faults;

	e->faults = NULL;
	free(f->seen);
	free(f->held);
	free(f);
}

void fault_close(struct engine *e)
{
	struct fault *f = e->faults;

	if (!f)
		return;
	ibemu_log_warn("IBEMU_FAULTS: process %d: %llu packets received, "
		       "%llu dropped, %llu duplicated, %llu reordered, "
		       "%llu delayed, seed=%llu",
		       (int)getpid(), (unsigned long long)f->st.packets,
		       (unsigned long long)f->st.dropped,
		       (unsigned long long)f->st.duplicated,
		       (unsigned long long)f->st.reordered,
		       (unsigned long long)f->st.delayed,
		       (unsigned long long)f->cfg.seed);
	fault_free(e);
}

void fault_forget(struct engine *e)
{
	if (e->faults)
		fault_free(e);
}
