// SPDX-License-Identifier: MIT
/*
 * Reading a run trace (doc/trace.md, "Format") into struct trace.
 *
 * The file is untrusted: a line longer than TRACE_LINE_MAX is skipped
 * whole, a line without the four leading fields is skipped, a field whose
 * value does not parse is ignored, kinds and keys we do not know are
 * ignored as the format asks; each case is counted in trace_stats.  Names
 * are kept once each in a bounded string table.
 */
#include "config.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "tools/trace.h"

/* Bits of trace_ev.has above those of enum trace_num, while parsing. */
#define HAS_T (1u << 31)
#define HAS_PID (1u << 30)

static const char *const kind_names[TK_NR] = {
	[TK_START] = "start", [TK_QP_CREATE] = "qp_create",
	[TK_QP_STATE] = "qp_state", [TK_QP_DESTROY] = "qp_destroy",
	[TK_POST_SEND] = "post_send", [TK_POST_RECV] = "post_recv",
	[TK_TX] = "tx", [TK_RX] = "rx", [TK_DROP] = "drop",
	[TK_RETRY] = "retry", [TK_RNR_WAIT] = "rnr_wait", [TK_CQE] = "cqe",
	[TK_ASYNC] = "async", [TK_CM] = "cm", [TK_TRACE_FULL] = "trace_full",
};

static const char *const num_names[TN_NR] = {
	[TN_QP] = "qp", [TN_SQP] = "sqp", [TN_DQP] = "dqp", [TN_SLID] = "slid",
	[TN_DLID] = "dlid", [TN_PSN] = "psn", [TN_LEN] = "len",
	[TN_MSN] = "msn",
	[TN_SRQ] = "srq", [TN_US] = "us", [TN_EVENTS] = "events",
	[TN_RQP] = "rqp", [TN_WR] = "wr", [TN_SIG] = "sig", [TN_ACK] = "ack",
	[TN_RETRY] = "retry", [TN_INLINE] = "inline",
};

static const char *const name_names[TS_NR] = {
	[TS_OP] = "op", [TS_TYPE] = "type", [TS_FROM] = "from",
	[TS_TO] = "to", [TS_WHY] = "why", [TS_STATUS] = "status",
	[TS_AETH] = "aeth", [TS_PROG] = "prog", [TS_MSG] = "msg",
	[TS_DIR] = "dir", [TS_CQ] = "cq", [TS_SCQ] = "scq", [TS_RCQ] = "rcq",
};

const char *trace_kind_name(unsigned int kind)
{
	return kind < TK_NR ? kind_names[kind] : "?";
}

const char *trace_num_name(unsigned int num)
{
	return num < TN_NR ? num_names[num] : "?";
}

const char *trace_name_name(unsigned int name)
{
	return name < TS_NR ? name_names[name] : "?";
}

int trace_init(struct trace *tr)
{
	memset(tr, 0, sizeof(*tr));
	tr->str = calloc(TRACE_STR_MAX, sizeof(*tr->str));
	if (!tr->str)
		return -1;
	tr->nr_str = 1;
	return 0;
}

void trace_free(struct trace *tr)
{
	free(tr->ev);
	free(tr->str);
	memset(tr, 0, sizeof(*tr));
}

/* "0x" and hex digits, or decimal digits, into *v; -1 if neither or if
 * it overflows max. */
static int parse_num(const char *s, size_t n, uint64_t max, uint64_t *v)
{
	unsigned int base = 10, d;
	uint64_t x = 0;
	size_t i = 0;

	if (n > 2 && s[0] == '0' && s[1] == 'x') {
		base = 16;
		i = 2;
	}
	if (i == n)
		return -1;
	for (; i < n; i++) {
		if (s[i] >= '0' && s[i] <= '9')
			d = s[i] - '0';
		else if (base == 16 && s[i] >= 'a' && s[i] <= 'f')
			d = s[i] - 'a' + 10;
		else if (base == 16 && s[i] >= 'A' && s[i] <= 'F')
			d = s[i] - 'A' + 10;
		else
			return -1;
		if (x > (max - d) / base)
			return -1;
		x = x * base + d;
	}
	*v = x;
	return 0;
}

/* The index of the name s[0..n) in the table, added if new; 0 if it is
 * too long or the table is full.  A linear search: the table is small. */
static uint16_t intern(struct trace *tr, const char *s, size_t n)
{
	uint32_t i;

	if (!n || n > TRACE_STR_LEN)
		return 0;
	for (i = 1; i < tr->nr_str; i++)
		if (!strncmp(tr->str[i], s, n) && !tr->str[i][n])
			return i;
	if (tr->nr_str == TRACE_STR_MAX)
		return 0;
	memcpy(tr->str[i], s, n);
	tr->str[i][n] = '\0';
	return tr->nr_str++;
}

static int lookup(const char *const *names, unsigned int nr, const char *s,
		  size_t n)
{
	unsigned int i;

	for (i = 0; i < nr; i++)
		if (names[i] && strlen(names[i]) == n && !memcmp(names[i], s, n))
			return i;
	return -1;
}

/* One key=value of an event; false if it is one of the four and bad. */
static bool parse_field(struct trace *tr, struct trace_ev *e, const char *k,
			size_t kn, const char *v, size_t vn)
{
	uint64_t x;
	int i;

	if (kn == 1 && *k == 't') {
		if (parse_num(v, vn, UINT64_MAX, &e->t))
			return false;
		e->has |= HAS_T;
		return true;
	}
	if (kn == 3 && !memcmp(k, "pid", 3)) {
		if (parse_num(v, vn, UINT32_MAX, &x))
			return false;
		e->pid = x;
		e->has |= HAS_PID;
		return true;
	}
	if (kn == 4 && !memcmp(k, "node", 4))
		return (e->node = intern(tr, v, vn)) != 0;
	if (kn == 2 && !memcmp(k, "ev", 2)) {
		i = lookup(kind_names, TK_NR, v, vn);
		e->kind = i < 0 ? TK_NR : i;
		return true;
	}
	i = lookup(num_names, TN_NR, k, kn);
	/* An SRQ is named by the provider's handle, a 64-bit value: kept
	 * as a name, its index standing for it. */
	if (i == TN_SRQ) {
		if (!(e->num[i] = intern(tr, v, vn)))
			tr->st.bad_fields++;
		else
			e->has |= 1u << i;
		return true;
	}
	if (i >= 0) {
		if (parse_num(v, vn, i == TN_WR ? UINT64_MAX : UINT32_MAX, &x)) {
			tr->st.bad_fields++;
			return true;
		}
		if (i == TN_WR)
			e->wr = x;
		else
			e->num[i] = x;
		e->has |= 1u << i;
		return true;
	}
	i = lookup(name_names, TS_NR, k, kn);
	if (i >= 0 && !(e->name[i] = intern(tr, v, vn)))
		tr->st.bad_fields++;
	return true;
}

/* Printable ASCII without '=' (doc/trace.md, "Format"). */
static bool value_ok(const char *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (v[i] < '!' || v[i] > '~' || v[i] == '=')
			return false;
	return true;
}

/* Room for one more element in arr, an array of *cap elements of size
 * elem, all in use: twice as many, or first when it has none.  The new
 * array, *cap updated; NULL without memory (arr is kept). */
void *trace_grow(void *arr, uint32_t *cap, size_t elem, uint32_t first)
{
	uint32_t n = *cap ? *cap * 2 : first;
	void *p;

	if (n <= *cap)
		return NULL;
	p = realloc(arr, (size_t)n * elem);
	if (p)
		*cap = n;
	return p;
}

/* One line (no newline) into e; false if it is not an event. */
static bool parse_line(struct trace *tr, char *line, struct trace_ev *e)
{
	char *p = line, *eq;
	size_t n;
	int field = 0;

	memset(e, 0, sizeof(*e));
	e->kind = TK_NR + 1;
	while (*p) {
		n = strcspn(p, " ");
		eq = memchr(p, '=', n);
		if (!eq || eq == p || !value_ok(eq + 1, p + n - eq - 1)) {
			if (field < 4)
				return false;
			tr->st.bad_fields++;
		} else if (!parse_field(tr, e, p, eq - p, eq + 1,
					p + n - eq - 1) && field < 4) {
			return false;
		}
		field++;
		p += n;
		while (*p == ' ')
			p++;
	}
	/* The four leading fields, all valid (the order is not checked). */
	if (!(e->has & HAS_T) || !(e->has & HAS_PID) || !e->node ||
	    e->kind > TK_NR)
		return false;
	e->has &= (1u << TN_NR) - 1;
	return true;
}

static int add_event(struct trace *tr, const struct trace_ev *e)
{
	struct trace_ev *ev;

	if (tr->nr_ev == TRACE_EV_MAX) {
		tr->st.over_limit++;
		return 0;
	}
	if (tr->nr_ev == tr->cap_ev) {
		ev = trace_grow(tr->ev, &tr->cap_ev, sizeof(*ev), 1024);
		if (!ev)
			return -1;
		tr->ev = ev;
	}
	tr->ev[tr->nr_ev] = *e;
	tr->ev[tr->nr_ev].seq = tr->nr_ev;
	tr->nr_ev++;
	tr->st.events++;
	return 0;
}

/* Read one line of at most TRACE_LINE_MAX bytes into buf; 1 if a line was
 * read, 0 at the end, 2 if it was too long (and skipped). */
static int read_line(FILE *f, char *buf)
{
	size_t n = 0;
	bool over = false;
	int c;

	while ((c = getc(f)) != EOF && c != '\n') {
		if (n < TRACE_LINE_MAX)
			buf[n++] = c == '\0' ? '\x01' : c;
		else
			over = true;
	}
	if (c == EOF && !n && !over)
		return 0;
	if (n && buf[n - 1] == '\r')
		n--;
	buf[n] = '\0';
	return over ? 2 : 1;
}

int trace_read(struct trace *tr, FILE *f)
{
	char buf[TRACE_LINE_MAX + 1];
	struct trace_ev e;
	int r;

	while ((r = read_line(f, buf))) {
		tr->st.lines++;
		if (r == 2) {
			tr->st.long_lines++;
			continue;
		}
		if (!parse_line(tr, buf, &e)) {
			if (buf[0])
				tr->st.bad_lines++;
			continue;
		}
		if (e.kind == TK_NR) {
			tr->st.unknown_kinds++;
			continue;
		}
		if (add_event(tr, &e))
			return -1;
	}
	return ferror(f) ? -1 : 0;
}

static void put(char *buf, size_t len, size_t *used, const char *k,
		const char *v)
{
	int n;

	if (*used >= len)
		return;
	n = snprintf(buf + *used, len - *used, "%s%s=%s", *used ? " " : "", k,
		     v);
	if (n > 0)
		*used += (size_t)n;
}

void trace_ev_fields(const struct trace *tr, const struct trace_ev *e,
		     bool brief, char *buf, size_t len)
{
	/* What a ladder's arrows and columns show already. */
	const uint32_t drawn = 1u << TN_SQP | 1u << TN_DQP | 1u << TN_SLID |
			       1u << TN_DLID;
	size_t used = 0;
	unsigned int i;
	char v[24];

	buf[0] = '\0';
	for (i = 0; i < TS_NR; i++)
		if (e->name[i] && !(brief && i >= TS_CQ))
			put(buf, len, &used, name_names[i], tr->str[e->name[i]]);
	for (i = 0; i < TN_NR; i++) {
		if (!trace_has(e, i) || (brief && (drawn & 1u << i)))
			continue;
		if (i == TN_WR)
			snprintf(v, sizeof(v), "0x%" PRIx64, e->wr);
		else
			snprintf(v, sizeof(v), "%" PRIu32, e->num[i]);
		put(buf, len, &used, num_names[i], v);
	}
}
