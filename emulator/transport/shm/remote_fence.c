// SPDX-License-Identifier: MIT
/* The remote fence (see remote_fence.h). */
#include "config.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "remote_fence.h"

/* The process (pid) that set up, and what it found.  Lock rule: written
 * under setup_lock; read without it (a reader that sees a stale pid sets
 * up again). */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic pid_t setup_pid;
static atomic_bool receives, issues;

static int membarrier(int cmd)
{
#ifdef __NR_membarrier
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
#else
	(void)cmd;
	errno = ENOSYS;
	return -1;
#endif
}

void remote_fence_setup(void)
{
	const char *env = getenv("IBEMU_REMOTE_FENCE");
	pid_t pid = getpid();
	bool rx = false, tx = false;
	int cmds;

	if (atomic_load(&setup_pid) == pid)
		return;
	pthread_mutex_lock(&setup_lock);
	if (atomic_load(&setup_pid) == pid)
		goto out;
	cmds = env && !strcmp(env, "0") ? 0 : membarrier(MEMBARRIER_CMD_QUERY);
	if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) &&
	    (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED)) {
		rx = !membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED);
		tx = !membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED);
	}
	if (!rx || !tx)
		ibemu_log_dbg("remote fence: %s (receives %d, issues %d): "
			      "placements fence in full",
			      cmds < 0 ? strerror(errno) : "off or incomplete",
			      rx, tx);
	atomic_store(&receives, rx);
	atomic_store(&issues, tx);
	atomic_store(&setup_pid, pid);
out:
	pthread_mutex_unlock(&setup_lock);
}

bool remote_fence_receives(void)
{
	/* A forked child has not registered until it sets up. */
	return atomic_load(&receives) && atomic_load(&setup_pid) == getpid();
}

bool remote_fence_issues(void)
{
	return atomic_load(&issues);
}

bool remote_fence(void)
{
	return membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED) == 0;
}
