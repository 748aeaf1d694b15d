/* SPDX-License-Identifier: MIT */
/*
 * ibemu trace show: a run trace (doc/trace.md) read into memory, matched
 * and drawn as a ladder.  trace_parse.c reads the lines, trace_model.c
 * sorts them and ties packets, work requests and completions together,
 * trace_html.c and trace_text.c draw the result, trace_show.c is the
 * command.
 *
 * Everything here belongs to the one thread of the command: no locks.
 */
#ifndef IBEMU_TOOLS_TRACE_H
#define IBEMU_TOOLS_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* Bounds on what an untrusted file can make us hold. */
#define TRACE_LINE_MAX 1024		/* longer lines are skipped */
#define TRACE_EV_MAX (4u << 20)		/* events kept over all files */
#define TRACE_STR_MAX 4096		/* distinct names (ops, nodes...) */
#define TRACE_STR_LEN 63		/* longest name kept */
#define TRACE_LANE_MAX 4096		/* QPs drawn */
#define TRACE_PROC_MAX 1024		/* processes */
#define TRACE_NONE UINT32_MAX		/* no event, lane, WR */

enum trace_kind {
	TK_START, TK_QP_CREATE, TK_QP_STATE, TK_QP_DESTROY, TK_POST_SEND,
	TK_POST_RECV, TK_TX, TK_RX, TK_DROP, TK_RETRY, TK_RNR_WAIT, TK_CQE,
	TK_ASYNC, TK_CM, TK_TRACE_FULL, TK_NR
};

/* The numeric fields; an event's `has` says which were given and valid. */
enum trace_num {
	TN_QP, TN_SQP, TN_DQP, TN_SLID, TN_DLID, TN_PSN, TN_LEN, TN_MSN,
	TN_SRQ, TN_US, TN_EVENTS, TN_RQP, TN_WR,
	TN_SIG, TN_ACK, TN_RETRY, TN_INLINE, TN_NR
};

/* The name fields, each an index into the string table (0: absent); the
 * CQs are names too: only shown, and recorded as wide as a pointer. */
enum trace_name {
	TS_OP, TS_TYPE, TS_FROM, TS_TO, TS_WHY, TS_STATUS, TS_AETH, TS_PROG,
	TS_MSG, TS_DIR, TS_CQ, TS_SCQ, TS_RCQ, TS_NR
};

struct trace_ev {
	uint64_t t;			/* CLOCK_REALTIME ns */
	uint64_t wr;			/* TN_WR */
	uint32_t num[TN_NR];		/* the numeric fields but wr */
	uint32_t pid;
	uint32_t seq;			/* order read, for the stable sort */
	uint32_t has;			/* bit per enum trace_num */
	uint16_t node;			/* string index of the node name */
	uint16_t name[TS_NR];
	uint8_t kind;			/* enum trace_kind */
};

/* What was read, and what was not (the file is untrusted). */
struct trace_stats {
	unsigned long lines, events, long_lines, bad_lines, unknown_kinds,
		bad_fields, over_limit;
};

struct trace {
	struct trace_ev *ev;
	uint32_t nr_ev, cap_ev;
	char (*str)[TRACE_STR_LEN + 1];	/* str[0] is "" */
	uint32_t nr_str;
	struct trace_stats st;
};

/* trace_parse.c */
/* Room for one more element in a growing array (trace_parse.c). */
void *trace_grow(void *arr, uint32_t *cap, size_t elem, uint32_t first);
int trace_init(struct trace *tr);
void trace_free(struct trace *tr);
int trace_read(struct trace *tr, FILE *f);
const char *trace_kind_name(unsigned int kind);
const char *trace_num_name(unsigned int num);
const char *trace_name_name(unsigned int name);
static inline bool trace_has(const struct trace_ev *e, unsigned int num)
{
	return e->has & (1u << num);
}
static inline const char *trace_s(const struct trace *tr,
				  const struct trace_ev *e, unsigned int name)
{
	return tr->str[e->name[name]];
}
/* The event's fields after the four, "key=value ...", names first; brief:
 * without the QPNs, LIDs and CQs a ladder shows by where it draws. */
void trace_ev_fields(const struct trace *tr, const struct trace_ev *e,
		     bool brief, char *buf, size_t len);

/* The matched trace (trace_model.c). */
enum trace_cls {
	TC_NONE, TC_REQ, TC_RESP, TC_ACK, TC_NAK, TC_DROP, TC_NR
};

struct trace_proc {
	uint16_t node;
	uint32_t pid;
	uint16_t prog;			/* string index, 0 before `start` */
};

struct trace_lane {
	uint16_t node;
	uint32_t qpn;
	uint32_t proc;			/* index in procs[] */
	uint16_t type;			/* string index of the QP type */
	uint32_t srq;			/* TRACE_NONE without an SRQ */
	bool destroyed;
};

struct trace_wr {
	uint32_t lane;			/* TRACE_NONE: SRQ WR not completed */
	uint32_t post, cqe;		/* event indices; cqe TRACE_NONE */
	uint32_t first_pkt, last_pkt;	/* request tx events */
	uint32_t nr_pkts;
	bool recv, error;
};

/* A packet: its tx, and the rx or drop that ends it. */
struct trace_arrow {
	uint32_t tx, end;		/* either may be TRACE_NONE */
	uint32_t from_lane, to_lane;	/* to_lane TRACE_NONE: not known */
	uint8_t cls;			/* enum trace_cls */
};

/* Per event, what the model made of it. */
struct trace_evx {
	uint32_t lane;			/* the lane it is drawn on */
	uint32_t wr;			/* the work request it belongs to */
	uint32_t arrow;			/* tx, rx, drop: its packet */
	bool error;
};

struct trace_filter {
	uint32_t qp[64];
	unsigned int nr_qp;
	uint64_t from, to;		/* ns after the first event */
};

struct trace_model {
	struct trace *tr;
	uint64_t t0;			/* the first event's time */
	struct trace_evx *x;		/* per event */
	uint32_t *order;		/* the events shown, in time order */
	uint32_t nr_order;
	struct trace_proc *procs;
	uint32_t nr_procs;
	struct trace_lane *lanes;
	uint32_t nr_lanes;
	uint32_t *lane_rank;		/* drawing position of each lane */
	struct trace_wr *wrs;
	uint32_t nr_wrs, cap_wrs;
	struct trace_arrow *arrows;
	uint32_t nr_arrows, cap_arrows;
	unsigned long dropped_lanes;	/* events past TRACE_LANE_MAX */
};

int trace_model_build(struct trace_model *m, struct trace *tr,
		      const struct trace_filter *flt);
void trace_model_free(struct trace_model *m);
const char *trace_cls_name(unsigned int cls);

/* trace_html.c, trace_text.c */
int trace_html_write(const struct trace_model *m, FILE *out);
int trace_text_write(const struct trace_model *m, FILE *out,
		     unsigned int width);

/* The page's template, tools/trace_page.{html,css,js} made into C by
 * tools/trace_embed.awk at build time. */
extern const char trace_page_html[], trace_page_css[], trace_page_js[];

/* trace_show.c */
int trace_show_main(int argc, char **argv);

#endif
