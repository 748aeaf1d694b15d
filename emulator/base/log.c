// SPDX-License-Identifier: MIT
#include "config.h"

#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

static int env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

atomic_int ibemu_debug_state;

/* A race reads the same environment and stores the same value. */
int ibemu_debug_init(void)
{
	int st = env_flag("IBEMU_DEBUG") ? 2 : 1;

	atomic_store_explicit(&ibemu_debug_state, st, memory_order_relaxed);
	return st == 2;
}

void ibemu_log(enum ibemu_log_level level, const char *fmt, ...)
{
	static const char *const prefix[] = {
		[IBEMU_LOG_ERR] = "error",
		[IBEMU_LOG_WARN] = "warning",
		[IBEMU_LOG_DEBUG] = "debug",
	};
	char line[512];
	int saved_errno = errno;
	va_list ap;

	if (level == IBEMU_LOG_DEBUG ? !ibemu_debug_enabled()
				     : env_flag("IBEMU_QUIET"))
		goto out;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ibemu: %s: %s\n", prefix[level], line);
out:
	errno = saved_errno;
}
