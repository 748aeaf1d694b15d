// SPDX-License-Identifier: MIT
/*
 * The run trace's recorder (doc/trace.md "Recording").  Each event is one
 * line, written with one write(2) to a file opened O_APPEND, so that the
 * processes of a node share the file without a lock and a line is never
 * split; nothing is buffered, so a process that is killed loses nothing
 * it recorded.  A process records at most IBEMU_TRACE_MAX events.
 *
 * Lock rule: trace_rec_fd changes under open_lock only (open and close);
 * an event loads it once.  The event count is atomic.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "trace_rec.h"

#define TRACE_LINE_MAX 1024
#define TRACE_MAX_DEFAULT 1000000ul

atomic_int trace_rec_fd = -1;
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static char trace_node[64];
static atomic_ulong trace_events;
static unsigned long trace_max;
static pid_t started_pid; /* the process that wrote its start line */

/* FILE with "%n" and "%p" replaced; false if it does not fit. */
static bool trace_name(char *buf, size_t len, const char *tmpl,
		       const char *node_name)
{
	size_t used = 0;
	int n;

	for (; *tmpl; tmpl++) {
		if (tmpl[0] == '%' && (tmpl[1] == 'n' || tmpl[1] == 'p')) {
			n = tmpl[1] == 'n' ? snprintf(buf + used, len - used,
						      "%s", node_name)
					   : snprintf(buf + used, len - used,
						      "%d", (int)getpid());
			tmpl++;
		} else {
			n = snprintf(buf + used, len - used, "%c", *tmpl);
		}
		if (n < 0 || (size_t)n >= len - used)
			return false;
		used += (size_t)n;
	}
	return true;
}

/* A node name as a field value: no spaces, '=' or non-printing bytes. */
static void trace_set_node(const char *name)
{
	size_t i;

	snprintf(trace_node, sizeof(trace_node), "%s", *name ? name : "-");
	for (i = 0; trace_node[i]; i++)
		if (trace_node[i] <= ' ' || trace_node[i] > '~' ||
		    trace_node[i] == '=')
			trace_node[i] = '_';
}

static unsigned long trace_max_events(void)
{
	const char *env = getenv("IBEMU_TRACE_MAX");
	char *end;
	unsigned long v;

	if (!env || !*env)
		return TRACE_MAX_DEFAULT;
	errno = 0;
	v = strtoul(env, &end, 10);
	if (errno || *end || !v) {
		ibemu_log_warn("IBEMU_TRACE_MAX=%s is not a positive count; "
			       "using %lu",
			       env, TRACE_MAX_DEFAULT);
		return TRACE_MAX_DEFAULT;
	}
	return v;
}

static void trace_start_line(void)
{
	char comm[32] = "-";
	size_t i;
	FILE *f = fopen("/proc/self/comm", "re");

	if (f) {
		if (!fgets(comm, sizeof(comm), f))
			snprintf(comm, sizeof(comm), "-");
		fclose(f);
	}
	for (i = 0; comm[i]; i++)
		if (comm[i] <= ' ' || comm[i] > '~' || comm[i] == '=')
			comm[i] = comm[i] == '\n' ? '\0' : '_';
	trace_rec("start", "prog=%s", *comm ? comm : "-");
}

bool trace_rec_open(const char *node_name)
{
	const char *tmpl = getenv("IBEMU_TRACE");
	char path[4096];
	bool ok = true;
	int fd;

	if (!tmpl || !*tmpl)
		return true;
	pthread_mutex_lock(&open_lock);
	if (atomic_load(&trace_rec_fd) >= 0)
		goto out;
	if (!trace_name(path, sizeof(path), tmpl, node_name)) {
		ibemu_log_err("IBEMU_TRACE: the file name is too long");
		ok = false;
		goto out;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0) {
		ibemu_log_err("IBEMU_TRACE: cannot open %s: %s", path,
			      strerror(errno));
		ok = false;
		goto out;
	}
	trace_set_node(node_name);
	trace_max = trace_max_events();
	atomic_store(&trace_rec_fd, fd);
	/* A forked child that opens again is a process of its own. */
	if (started_pid != getpid()) {
		started_pid = getpid();
		atomic_store(&trace_events, 0);
		trace_start_line();
	}
out:
	pthread_mutex_unlock(&open_lock);
	return ok;
}

void trace_rec_close(void)
{
	int fd;

	pthread_mutex_lock(&open_lock);
	fd = atomic_exchange(&trace_rec_fd, -1);
	if (fd >= 0)
		close(fd);
	pthread_mutex_unlock(&open_lock);
}

void trace_rec(const char *ev, const char *fmt, ...)
{
	char line[TRACE_LINE_MAX];
	struct timespec ts;
	unsigned long n;
	va_list ap;
	int len, more;
	int fd = atomic_load_explicit(&trace_rec_fd, memory_order_acquire);

	if (fd < 0)
		return;
	n = atomic_fetch_add_explicit(&trace_events, 1, memory_order_relaxed);
	if (n > trace_max)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	len = snprintf(line, sizeof(line), "t=%lld%09ld node=%s pid=%d ev=%s",
		       (long long)ts.tv_sec, ts.tv_nsec, trace_node,
		       (int)getpid(), n == trace_max ? "trace_full" : ev);
	if (len < 0 || len >= (int)sizeof(line) - 2)
		return;
	if (n == trace_max) {
		more = snprintf(line + len, sizeof(line) - (size_t)len,
				" events=%lu", n);
	} else {
		va_start(ap, fmt);
		line[len++] = ' ';
		more = vsnprintf(line + len, sizeof(line) - (size_t)len, fmt,
				 ap);
		va_end(ap);
	}
	/* A line that does not fit is cut at the last whole field. */
	if (more < 0)
		return;
	if (more >= (int)sizeof(line) - len - 1) {
		char *sp = memrchr(line, ' ', sizeof(line) - 2);

		len = (int)(sp - line);
	} else {
		len += more;
	}
	line[len++] = '\n';
	/* A short or failed write loses this event, never the process. */
	if (write(fd, line, (size_t)len) < 0)
		ibemu_log_dbg("IBEMU_TRACE: write failed: %s", strerror(errno));
}
