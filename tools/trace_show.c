// SPDX-License-Identifier: MIT
/*
 * ibemu trace show [-o OUT.html] [--text] [--qp QPN]... [--from NS]
 *                  [--to NS] FILE...
 *
 * Reads the run traces (doc/trace.md; one FILE per node), merges them by
 * time and writes the ladder: an HTML page (to OUT.html, or standard
 * output) or, with --text, a terminal ladder.  --qp keeps the lanes of
 * those QPNs; --from and --to keep the events between those times, in ns
 * after the first event.  Exit status: 0 drawn, 1 nothing to draw or a
 * file not readable or written, 2 usage.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "tools/trace.h"

static void show_usage(FILE *out)
{
	fputs("usage: ibemu trace show [-o OUT.html] [--text] [--qp QPN]...\n"
	      "                        [--from NS] [--to NS] FILE...\n"
	      "Draw run traces (IBEMU_TRACE) as a ladder diagram: an HTML\n"
	      "page, or with --text one for a terminal.  NS: nanoseconds\n"
	      "after the first event.\n", out);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;

	errno = 0;
	*v = strtoull(s, &end, 0);
	return errno || end == s || *end || *s == '-' ? -1 : 0;
}

/* Say what was skipped: the file is untrusted, its faults are reported. */
static void report_skipped(const char *path, const struct trace_stats *s,
			   const struct trace_stats *before)
{
	unsigned long lng = s->long_lines - before->long_lines,
		      bad = s->bad_lines - before->bad_lines,
		      fld = s->bad_fields - before->bad_fields,
		      over = s->over_limit - before->over_limit;

	if (lng || bad || fld || over)
		fprintf(stderr, "ibemu trace show: %s: skipped %lu lines "
			"longer than %u bytes, %lu malformed lines, %lu bad "
			"fields, %lu events over %u\n", path, lng,
			TRACE_LINE_MAX, bad, fld, over, TRACE_EV_MAX);
}

static int read_files(struct trace *tr, char **paths, int n)
{
	struct trace_stats before;
	FILE *f;
	int i, ret;

	for (i = 0; i < n; i++) {
		f = strcmp(paths[i], "-") ? fopen(paths[i], "r") : stdin;
		if (!f) {
			fprintf(stderr, "ibemu trace show: %s: %s\n", paths[i],
				strerror(errno));
			return -1;
		}
		before = tr->st;
		ret = trace_read(tr, f);
		if (f != stdin)
			fclose(f);
		if (ret) {
			fprintf(stderr, "ibemu trace show: %s: read error or "
				"out of memory\n", paths[i]);
			return -1;
		}
		report_skipped(paths[i], &tr->st, &before);
	}
	return 0;
}

static int parse_opts(int argc, char **argv, struct trace_filter *f,
		      const char **out, bool *text)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "text", no_argument, NULL, 't' },
		{ "qp", required_argument, NULL, 'q' },
		{ "from", required_argument, NULL, 'f' },
		{ "to", required_argument, NULL, 'T' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	uint64_t v;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+o:th", opts, NULL)) != -1) {
		switch (c) {
		case 'o':
			*out = optarg;
			break;
		case 't':
			*text = true;
			break;
		case 'q':
			if (parse_u64(optarg, &v) || v > UINT32_MAX ||
			    f->nr_qp == sizeof(f->qp) / sizeof(f->qp[0]))
				goto bad;
			f->qp[f->nr_qp++] = v;
			break;
		case 'f': case 'T':
			if (parse_u64(optarg, c == 'f' ? &f->from : &f->to))
				goto bad;
			break;
		case 'h':
			show_usage(stdout);
			exit(0);
		default:
			show_usage(stderr);
			return -1;
		}
	}
	if (optind < argc)
		return 0;
	show_usage(stderr);
	return -1;
bad:
	fprintf(stderr, "ibemu trace show: --%s %s: not a number%s\n",
		c == 'q' ? "qp" : c == 'f' ? "from" : "to", optarg,
		c == 'q' ? " (or more than 64 QPs)" : "");
	return -1;
}

static int draw(const struct trace_model *m, const char *path, bool text)
{
	FILE *out = stdout;
	int ret;

	if (path && !(out = fopen(path, "w"))) {
		fprintf(stderr, "ibemu trace show: %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	ret = text ? trace_text_write(m, out, 100) : trace_html_write(m, out);
	if (fflush(out) || (out != stdout && fclose(out)) || ret) {
		fprintf(stderr, "ibemu trace show: cannot write %s\n",
			path ? path : "the output");
		return -1;
	}
	return 0;
}

int trace_show_main(int argc, char **argv)
{
	struct trace_filter flt = { .to = UINT64_MAX };
	const char *out = NULL;
	struct trace_model m;
	struct trace tr;
	bool text = false;
	int ret = 1;

	if (parse_opts(argc, argv, &flt, &out, &text))
		return 2;
	if (trace_init(&tr)) {
		fprintf(stderr, "ibemu trace show: out of memory\n");
		return 1;
	}
	if (read_files(&tr, argv + optind, argc - optind))
		goto out_trace;
	if (!tr.nr_ev) {
		fprintf(stderr, "ibemu trace show: no events in %lu lines\n",
			tr.st.lines);
		goto out_trace;
	}
	if (trace_model_build(&m, &tr, &flt)) {
		fprintf(stderr, "ibemu trace show: out of memory\n");
		goto out_model;
	}
	if (!draw(&m, out, text))
		ret = 0;
out_model:
	trace_model_free(&m);
out_trace:
	trace_free(&tr);
	return ret;
}
