// SPDX-License-Identifier: MIT
/*
 * ibemu trace show --text: the ladder for a terminal.  A column per lane
 * (header node/pid/QPN), a row per event in time order: the time in
 * microseconds after the first event, the lanes with the event's mark,
 * a packet's arrow drawn across the columns on its tx row, then what the
 * event was.  Marks: o post, # completion, S state, * tx, > < rx, X an
 * error (failed completion, drop, NAK, QP to ERR), R retry, W RNR wait.
 * Arrows: ---> request or response, ...> ACK, ===> NAK, --X dropped.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/trace.h"

#define TIME_W 12		/* "%11.3f " */
#define LANE_W_MAX 22
#define LANE_W_MIN 6

struct grid {
	unsigned int lanes, w;	/* columns, width of each */
	char *row;		/* lanes * w + 1 */
};

static unsigned int centre(const struct grid *g, uint32_t col)
{
	return col * g->w + g->w / 2;
}

static char mark(const struct trace_model *m, uint32_t i)
{
	const struct trace_ev *e = &m->tr->ev[i];
	const struct trace_arrow *a;

	if (m->x[i].error)
		return e->kind == TK_RETRY ? 'R' : e->kind == TK_RNR_WAIT ? 'W'
									  : 'X';
	switch (e->kind) {
	case TK_POST_SEND: case TK_POST_RECV:
		return 'o';
	case TK_CQE:
		return '#';
	case TK_QP_STATE: case TK_QP_CREATE: case TK_QP_DESTROY:
		return 'S';
	case TK_TX:
		return '*';
	case TK_RX:
		if (m->x[i].arrow == TRACE_NONE)
			return '>';
		a = &m->arrows[m->x[i].arrow];
		return a->from_lane == TRACE_NONE ||
		       m->lane_rank[a->from_lane] == TRACE_NONE ||
		       m->lane_rank[a->from_lane] < m->lane_rank[m->x[i].lane]
			       ? '>' : '<';
	default:
		return '.';
	}
}

/* The packet's arrow, on its tx row, from the sender's column towards
 * the receiver's (a stub when that lane is not drawn). */
static void draw_arrow(const struct trace_model *m, struct grid *g,
		       uint32_t i, uint32_t from)
{
	const struct trace_arrow *a = &m->arrows[m->x[i].arrow];
	uint32_t to = a->to_lane == TRACE_NONE ? TRACE_NONE
					      : m->lane_rank[a->to_lane];
	char line = a->cls == TC_ACK ? '.' : a->cls == TC_NAK ? '=' : '-';
	bool dropped = a->end != TRACE_NONE &&
		       m->tr->ev[a->end].kind == TK_DROP;
	unsigned int x0 = centre(g, from), x1, x;

	if (to == TRACE_NONE || to == from) {
		x1 = x0 + 4 < g->lanes * g->w ? x0 + 4 : x0;
		for (x = x0 + 1; x < x1; x++)
			g->row[x] = line;
		if (x1 > x0)
			g->row[x1] = dropped ? 'X' : '?';
		return;
	}
	x1 = centre(g, to);
	if (x1 > x0) {
		for (x = x0 + 1; x < x1 - 1; x++)
			g->row[x] = line;
		g->row[x1 - 1] = dropped ? 'X' : '>';
	} else {
		for (x = x1 + 2; x < x0; x++)
			g->row[x] = line;
		g->row[x1 + 1] = dropped ? 'X' : '<';
	}
}

static void draw_row(const struct trace_model *m, struct grid *g, uint32_t i)
{
	uint32_t col, c;

	memset(g->row, ' ', g->lanes * g->w);
	g->row[g->lanes * g->w] = '\0';
	for (c = 0; c < g->lanes; c++)
		g->row[centre(g, c)] = '|';
	col = m->x[i].lane == TRACE_NONE ? TRACE_NONE
					 : m->lane_rank[m->x[i].lane];
	if (col == TRACE_NONE)
		return;
	if (m->tr->ev[i].kind == TK_TX && m->x[i].arrow != TRACE_NONE)
		draw_arrow(m, g, i, col);
	g->row[centre(g, col)] = mark(m, i);
}

static void write_header(const struct trace_model *m, struct grid *g,
			 FILE *out)
{
	char name[64];
	uint32_t i, col;
	unsigned int x, n;
	const struct trace_lane *l;

	memset(g->row, ' ', g->lanes * g->w);
	g->row[g->lanes * g->w] = '\0';
	for (i = 0; i < m->nr_lanes; i++) {
		col = m->lane_rank[i];
		if (col == TRACE_NONE)
			continue;
		l = &m->lanes[i];
		snprintf(name, sizeof(name), "%s/%" PRIu32 "/%" PRIu32,
			 m->tr->str[l->node], m->procs[l->proc].pid, l->qpn);
		n = strlen(name);
		if (n > g->w - 1)
			n = g->w - 1;
		x = centre(g, col) >= n / 2 ? centre(g, col) - n / 2 : 0;
		memcpy(g->row + x, name, n);
	}
	fprintf(out, "%*s %s\n", TIME_W - 1, "us", g->row);
}

int trace_text_write(const struct trace_model *m, FILE *out,
		     unsigned int width)
{
	char fields[TRACE_LINE_MAX], desc[TRACE_LINE_MAX + 32];
	const struct trace_ev *e;
	struct grid g = { 0 };
	unsigned long errors = 0;
	uint32_t k, i;
	int room;

	for (i = 0; i < m->nr_lanes; i++)
		if (m->lane_rank[i] != TRACE_NONE)
			g.lanes++;
	g.w = LANE_W_MAX;
	while (g.w > LANE_W_MIN && TIME_W + g.lanes * g.w + 40 > width)
		g.w--;
	g.row = malloc(g.lanes * g.w + 1);
	if (!g.row)
		return -1;
	write_header(m, &g, out);
	room = (int)width - TIME_W - (int)(g.lanes * g.w) - 1;
	if (room < 20)
		room = 20;
	for (k = 0; k < m->nr_order; k++) {
		i = m->order[k];
		e = &m->tr->ev[i];
		draw_row(m, &g, i);
		trace_ev_fields(m->tr, e, true, fields, sizeof(fields));
		errors += m->x[i].error;
		snprintf(desc, sizeof(desc), "%s%s %s",
			 m->x[i].error ? "!! " : "", trace_kind_name(e->kind),
			 fields);
		fprintf(out, "%*.3f %s %.*s\n", TIME_W - 1,
			(double)(e->t - m->t0) / 1000.0, g.row, room, desc);
	}
	fprintf(out, "%" PRIu32 " events, %u lanes, %" PRIu32
		" work requests, %" PRIu32 " packets, %lu errors\n",
		m->nr_order, g.lanes, m->nr_wrs, m->nr_arrows, errors);
	free(g.row);
	return ferror(out) ? -1 : 0;
}
