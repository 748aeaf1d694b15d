// SPDX-License-Identifier: MIT
/*
 * ibemu trace show's HTML page: the template (tools/trace_page.html with
 * its .css and .js, built into the command) with the model written into
 * it as JSON.  The page draws the ladder itself; it loads nothing.
 *
 * Names in the JSON come from the untrusted file: they were checked to be
 * printable ASCII (trace_parse.c) and are escaped here so that none can
 * end the script element ('<', '>', '&' as \u00XX).
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/trace.h"

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\' || *s == '<' || *s == '>' ||
		    *s == '&' || (unsigned char)*s < 0x20 ||
		    (unsigned char)*s > 0x7e)
			fprintf(out, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, out);
	}
	fputc('"', out);
}

static long out_idx(const uint32_t *map, uint32_t i)
{
	return i == TRACE_NONE ? -1 : map[i] == TRACE_NONE ? -1 : (long)map[i];
}

static void write_stats(const struct trace_model *m, FILE *out)
{
	const struct trace_stats *s = &m->tr->st;

	fprintf(out, "\"stats\":{\"lines\":%lu,\"events\":%lu,\"long\":%lu,"
		"\"bad\":%lu,\"unknown\":%lu,\"badfields\":%lu,\"over\":%lu,"
		"\"lanes_over\":%lu},\n", s->lines, s->events, s->long_lines,
		s->bad_lines, s->unknown_kinds, s->bad_fields, s->over_limit,
		m->dropped_lanes);
}

/* Processes and the lanes drawn, in column order. */
static void write_lanes(const struct trace_model *m, FILE *out)
{
	const struct trace *tr = m->tr;
	uint32_t i, c, n = 0;

	fputs("\"procs\":[", out);
	for (i = 0; i < m->nr_procs; i++) {
		fprintf(out, "%s[", i ? "," : "");
		json_str(out, tr->str[m->procs[i].node]);
		fprintf(out, ",%" PRIu32 ",", m->procs[i].pid);
		json_str(out, tr->str[m->procs[i].prog]);
		fputc(']', out);
	}
	fputs("],\n\"lanes\":[", out);
	for (c = 0; c < m->nr_lanes; c++)
		for (i = 0; i < m->nr_lanes; i++) {
			if (m->lane_rank[i] != c)
				continue;
			fprintf(out, "%s[%" PRIu32 ",%" PRIu32 ",", n++ ? "," : "",
				m->lanes[i].proc, m->lanes[i].qpn);
			json_str(out, tr->str[m->lanes[i].type]);
			fputc(']', out);
		}
	fputs("],\n", out);
}

/* [t after t0, lane column, kind, fields, error, wr, arrow] each. */
static void write_events(const struct trace_model *m, const uint32_t *wmap,
			 const uint32_t *amap, FILE *out)
{
	const struct trace *tr = m->tr;
	char fields[TRACE_LINE_MAX];
	const struct trace_ev *e;
	const struct trace_evx *x;
	uint32_t k, i;

	fputs("\"ev\":[\n", out);
	for (k = 0; k < m->nr_order; k++) {
		i = m->order[k];
		e = &tr->ev[i];
		x = &m->x[i];
		trace_ev_fields(tr, e, false, fields, sizeof(fields));
		fprintf(out, "%s[%" PRIu64 ",%ld,\"%s\",", k ? ",\n" : "",
			e->t - m->t0, out_idx(m->lane_rank, x->lane),
			trace_kind_name(e->kind));
		json_str(out, fields);
		fprintf(out, ",%d,%ld,%ld]", x->error, out_idx(wmap, x->wr),
			out_idx(amap, x->arrow));
	}
	fputs("],\n", out);
}

/* [lane, post, cqe, first packet, last packet, packets, recv, error]. */
static void write_wrs(const struct trace_model *m, const uint32_t *emap,
		      const uint32_t *wmap, FILE *out)
{
	const struct trace_wr *w;
	uint32_t i, n = 0;

	fputs("\"wrs\":[", out);
	for (i = 0; i < m->nr_wrs; i++) {
		w = &m->wrs[i];
		if (wmap[i] == TRACE_NONE)
			continue;
		fprintf(out, "%s[%ld,%ld,%ld,%ld,%ld,%" PRIu32 ",%d,%d]",
			n++ ? "," : "", out_idx(m->lane_rank, w->lane),
			out_idx(emap, w->post), out_idx(emap, w->cqe),
			out_idx(emap, w->first_pkt), out_idx(emap, w->last_pkt),
			w->nr_pkts, w->recv, w->error);
	}
	fputs("],\n", out);
}

/* [tx, rx or drop, from lane, to lane, class]. */
static void write_arrows(const struct trace_model *m, const uint32_t *emap,
			 const uint32_t *amap, FILE *out)
{
	const struct trace_arrow *a;
	uint32_t i, n = 0;

	fputs("\"arrows\":[", out);
	for (i = 0; i < m->nr_arrows; i++) {
		a = &m->arrows[i];
		if (amap[i] == TRACE_NONE)
			continue;
		fprintf(out, "%s[%ld,%ld,%ld,%ld,\"%s\"]", n++ ? ",\n" : "",
			out_idx(emap, a->tx), out_idx(emap, a->end),
			out_idx(m->lane_rank, a->from_lane),
			out_idx(m->lane_rank, a->to_lane),
			trace_cls_name(a->cls));
	}
	fputs("]", out);
}

/* Which events, WRs and arrows the page gets, and their indices there: a
 * WR when its post is shown, an arrow when either end is. */
static void number(const struct trace_model *m, uint32_t *emap,
		   uint32_t *wmap, uint32_t *amap)
{
	const struct trace_arrow *a;
	uint32_t i, n = 0;

	for (i = 0; i < m->nr_order; i++)
		emap[m->order[i]] = i;
	for (i = 0; i < m->nr_wrs; i++)
		if (out_idx(emap, m->wrs[i].post) >= 0 &&
		    out_idx(m->lane_rank, m->wrs[i].lane) >= 0)
			wmap[i] = n++;
	for (i = 0, n = 0; i < m->nr_arrows; i++) {
		a = &m->arrows[i];
		if (out_idx(emap, a->tx) >= 0 || out_idx(emap, a->end) >= 0)
			amap[i] = n++;
	}
}

static void write_data(const struct trace_model *m, const uint32_t *emap,
		       const uint32_t *wmap, const uint32_t *amap, FILE *out)
{
	fprintf(out, "{\"t0\":\"%" PRIu64 "\",\n", m->t0);
	write_stats(m, out);
	write_lanes(m, out);
	write_events(m, wmap, amap, out);
	write_wrs(m, emap, wmap, out);
	write_arrows(m, emap, amap, out);
	fputs("}\n", out);
}

/* The template, with its markers replaced by the style, the data and the
 * script. */
static void write_page(const struct trace_model *m, const uint32_t *emap,
		       const uint32_t *wmap, const uint32_t *amap, FILE *out)
{
	const char *p = trace_page_html, *mark;

	while ((mark = strchr(p, '@'))) {
		fwrite(p, 1, mark - p, out);
		if (!strncmp(mark, "@STYLE@", 7))
			fputs(trace_page_css, out);
		else if (!strncmp(mark, "@DATA@", 6))
			write_data(m, emap, wmap, amap, out);
		else if (!strncmp(mark, "@SCRIPT@", 8))
			fputs(trace_page_js, out);
		else {
			fputc('@', out);
			p = mark + 1;
			continue;
		}
		p = strchr(mark + 1, '@') + 1;
	}
	fputs(p, out);
}

int trace_html_write(const struct trace_model *m, FILE *out)
{
	size_t ne = m->tr->nr_ev + 1, nw = m->nr_wrs + 1, na = m->nr_arrows + 1;
	uint32_t *emap = malloc(ne * 4), *wmap = malloc(nw * 4),
		 *amap = malloc(na * 4);
	int ret = -1;

	if (emap && wmap && amap) {
		memset(emap, 0xff, ne * 4);
		memset(wmap, 0xff, nw * 4);
		memset(amap, 0xff, na * 4);
		number(m, emap, wmap, amap);
		write_page(m, emap, wmap, amap, out);
		ret = ferror(out) ? -1 : 0;
	}
	free(emap);
	free(wmap);
	free(amap);
	return ret;
}
