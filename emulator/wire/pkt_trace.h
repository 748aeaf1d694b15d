/* SPDX-License-Identifier: MIT */
/* A packet as a run trace event (doc/trace.md tx, rx, drop). */
#ifndef IBEMU_PKT_TRACE_H
#define IBEMU_PKT_TRACE_H

#include "hdr.h"

/* Record ev for the parsed packet p; extra holds more fields (leading
 * space included) or is "". */
void pkt_trace(const char *ev, const struct pkt *p, const char *extra);
/* Record the packet being sent: its headers are parsed from a copy, the
 * room it is in being another process's. */
void pkt_trace_out(const char *ev, const struct pkt_out *out,
		   const char *extra);
/* The trace name of an AETH syndrome (IBA 9.7.5.2, table 44). */
const char *aeth_trace_name(uint8_t syndrome);

#endif /* IBEMU_PKT_TRACE_H */
