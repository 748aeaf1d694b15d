/* SPDX-License-Identifier: MIT */
/*
 * The run trace (doc/trace.md): with IBEMU_TRACE=FILE every process of a
 * node appends one line per event to FILE.  The layers above format the
 * events; this one opens the file, stamps each line with the time, the
 * node and the process, and writes it whole.
 */
#ifndef IBEMU_TRACE_REC_H
#define IBEMU_TRACE_REC_H

#include <stdatomic.h>
#include <stdbool.h>

/* The trace file's descriptor, -1: no trace (trace_rec.c). */
extern atomic_int trace_rec_fd;

/* Whether events are recorded: one relaxed load. */
static inline bool trace_rec_on(void)
{
	return atomic_load_explicit(&trace_rec_fd, memory_order_relaxed) >= 0;
}

/* Start recording if IBEMU_TRACE is set ("%n": node_name, "%p": the
 * process ID); a no-op when it is not, or when already recording.
 * Returns false only when IBEMU_TRACE is set and cannot be opened. */
bool trace_rec_open(const char *node_name);
void trace_rec_close(void);
/* Record one event of kind ev; fmt gives the fields after the four
 * every line has (doc/trace.md), without a leading space. */
void trace_rec(const char *ev, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif /* IBEMU_TRACE_REC_H */
