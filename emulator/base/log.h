/* SPDX-License-Identifier: MIT */
/*
 * Diagnostics.  The function that decides an error logs it; callers pass
 * -errno up.  IBEMU_DEBUG=1 enables debug lines; errors and warnings go to
 * stderr unless IBEMU_QUIET=1.
 */
#ifndef IBEMU_LOG_H
#define IBEMU_LOG_H

#include <stdatomic.h>

enum ibemu_log_level {
	IBEMU_LOG_ERR,
	IBEMU_LOG_WARN,
	IBEMU_LOG_DEBUG,
};

void ibemu_log(enum ibemu_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define ibemu_log_err(fmt, ...) ibemu_log(IBEMU_LOG_ERR, fmt, ##__VA_ARGS__)
#define ibemu_log_warn(fmt, ...) ibemu_log(IBEMU_LOG_WARN, fmt, ##__VA_ARGS__)
#define ibemu_log_dbg(fmt, ...) ibemu_log(IBEMU_LOG_DEBUG, fmt, ##__VA_ARGS__)

/* Whether IBEMU_DEBUG is on: read once, then one relaxed load.
 * ibemu_debug_state: 0 not read yet, 1 off, 2 on (log.c). */
extern atomic_int ibemu_debug_state;
int ibemu_debug_init(void);
static inline int ibemu_debug_enabled(void)
{
	int st = atomic_load_explicit(&ibemu_debug_state,
				      memory_order_relaxed);

	return st == 2 || (st == 0 && ibemu_debug_init());
}
/* A decision of the engines, for IBEMU_DEBUG: costs one load when off. */
#define ibemu_trace(fmt, ...)                                                  \
	do {                                                                   \
		if (ibemu_debug_enabled())                                     \
			ibemu_log(IBEMU_LOG_DEBUG, fmt, ##__VA_ARGS__);        \
	} while (0)

#endif /* IBEMU_LOG_H */
