// SPDX-License-Identifier: MIT
/*
 * Assertions of the peer harness, usable on both sides.
 *
 * In the parent an EP_CHECK is a CUnit assertion at once.  In the child a
 * failure is appended to ep->report as a "line\tfile\tfunc\tmessage\n"
 * record; the report travels in the child's DONE message (peer_msg.c) and
 * the parent asserts each record in CUnit (cf_ep_report_assert).  A
 * device choice of the child travels the same way as a
 * "choice\tmessage\n" record.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "peer_int.h"

#define CF_REPORT_MAX 16384

const char *cf_side_name(const struct cf_ep *ep)
{
	return ep->side == CF_PARENT ? "parent" : "child";
}

static void cf_report_append(struct cf_ep *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void cf_report_append(struct cf_ep *ep, const char *fmt, ...)
{
	char line[600];
	va_list ap;
	size_t n;
	char *r;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	n = strlen(line);
	if (ep->report_len + n + 1 > CF_REPORT_MAX)
		return;
	r = realloc(ep->report, ep->report_len + n + 1);
	if (!r)
		return;
	memcpy(r + ep->report_len, line, n + 1);
	ep->report = r;
	ep->report_len += n;
}

int cf_ep_check(struct cf_ep *ep, int ok, unsigned int line, const char *file,
		const char *func, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ep->side == CF_PARENT && ok) {
		cf_check(1, line, file, func, "%s", "");
		return 1;
	}
	if (ok)
		return 1;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Tabs and newlines separate the report's fields. */
	for (char *c = msg; *c; c++)
		if (*c == '\t' || *c == '\n')
			*c = ' ';
	ep->nfail++;
	if (ep->side == CF_PARENT)
		cf_check(0, line, file, func, "[parent] %s", msg);
	else
		cf_report_append(ep, "%u\t%s\t%s\t%s\n", line, file, func, msg);
	return 0;
}

void cf_ep_choice(struct cf_ep *ep, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	for (char *c = msg; *c; c++)
		if (*c == '\t' || *c == '\n')
			*c = ' ';
	if (ep->side == CF_PARENT) {
		cf_choice_add(msg);
		return;
	}
	/* Said once: a choice seen in a loop leaves room for failures. */
	if (ep->report && strstr(ep->report, msg))
		return;
	cf_report_append(ep, "choice\t[child] %s\n", msg);
}

void cf_ep_skip(struct cf_ep *ep, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	ep->skipped = true;
	if (ep->side != CF_PARENT)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cf_skip("%s", msg);
}

/* Assert one "line\tfile\tfunc\tmessage" record (1: it was one), or
 * record a "choice\tmessage" one (0). */
static unsigned int cf_report_assert_line(char *line)
{
	char *f[4] = { NULL };
	char *save = NULL;
	int k = 0;

	for (char *t = strtok_r(line, "\t", &save); t && k < 4;
	     t = strtok_r(NULL, "\t", &save))
		f[k++] = t;
	if (k == 2 && !strcmp(f[0], "choice")) {
		cf_choice_add(f[1]);
		return 0;
	}
	if (k < 4)
		return 0;
	cf_check(0, (unsigned int)atoi(f[0]), f[1], f[2], "[child] %s", f[3]);
	return 1;
}

unsigned int cf_ep_report_assert(char *report)
{
	unsigned int n = 0;
	char *line, *save = NULL;

	for (line = strtok_r(report, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		n += cf_report_assert_line(line);
	return n;
}

int cf_ep_wc_ok(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		uint64_t wr_id, enum ibv_wc_opcode op, const char *what)
{
	if (!EP_CHECK(ep, got >= 1, "%s: %s: no completion in time",
		      cf_side_name(ep), what))
		return 0;
	if (!EP_CHECK(ep, wc->status == IBV_WC_SUCCESS,
		      "%s: %s: status %s (vendor_err 0x%x)", cf_side_name(ep),
		      what, ibv_wc_status_str(wc->status), wc->vendor_err))
		return 0;
	return EP_CHECK(ep, wc->wr_id == wr_id && wc->opcode == op,
			"%s: %s: wr_id %llu opcode %d, expected %llu / %d",
			cf_side_name(ep), what,
			(unsigned long long)wc->wr_id, wc->opcode,
			(unsigned long long)wr_id, op);
}

int cf_ep_expect_wc(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		    uint64_t wr_id, enum ibv_wc_status status, int opcode,
		    const char *what)
{
	if (!EP_CHECK(ep, got >= 1, "%s: %s: no completion in time "
		      "(expected %s)", cf_side_name(ep), what,
		      ibv_wc_status_str(status)))
		return 0;
	/* Only wr_id, status, qp_num and vendor_err are valid on an error
	 * completion (manual 3.6, ibv_poll_cq). */
	return EP_CHECK(ep, wc->status == status && wc->wr_id == wr_id &&
			(opcode < 0 || (int)wc->opcode == opcode),
			"%s: %s: status %s wr_id %llu opcode %d, expected %s "
			"wr_id %llu opcode %d", cf_side_name(ep), what,
			ibv_wc_status_str(wc->status),
			(unsigned long long)wc->wr_id, wc->opcode,
			ibv_wc_status_str(status), (unsigned long long)wr_id,
			opcode);
}

void cf_ep_check_state(struct cf_ep *ep, struct ibv_qp *qp, int want,
		       const char *what)
{
	int st = cf_qp_wait_state(qp, want, 1000);

	EP_CHECK(ep, st == want, "%s: %s: QP state %s, expected %s",
		 cf_side_name(ep), what, cf_state_name(st),
		 cf_state_name(want));
}
