// SPDX-License-Identifier: MIT
/* Quiescence of the engine's readers (see quiesce.h). */
#include "config.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "quiesce.h"

__thread struct quiesce_reader *quiesce_self
	__attribute__((tls_model("initial-exec")));
atomic_bool quiesce_reader_fence;
atomic_uint quiesce_unregistered;

static pthread_mutex_t quiesce_lock = PTHREAD_MUTEX_INITIALIZER;
static struct quiesce_reader *quiesce_readers;
static pthread_once_t quiesce_once = PTHREAD_ONCE_INIT;
static pthread_key_t quiesce_key;
static bool quiesce_membarrier;

static int quiesce_sys_membarrier(int cmd)
{
	return (int)syscall(__NR_membarrier, cmd, 0, 0);
}

/* A thread that exits gives its record back (it is reused, never freed:
 * a writer may be reading it). */
static void quiesce_thread_exit(void *arg)
{
	struct quiesce_reader *r = arg;

	atomic_store(&r->in_use, false);
}

static void quiesce_init(void)
{
	int cmds = quiesce_sys_membarrier(MEMBARRIER_CMD_QUERY);

	pthread_key_create(&quiesce_key, quiesce_thread_exit);
	quiesce_membarrier =
		cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) &&
		quiesce_sys_membarrier(
			MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
	if (!quiesce_membarrier)
		ibemu_log_dbg("membarrier(2) not available: each region lookup "
			      "issues a full fence");
	atomic_store(&quiesce_reader_fence, !quiesce_membarrier);
}

struct quiesce_reader *quiesce_register(void)
{
	struct quiesce_reader *r;

	pthread_once(&quiesce_once, quiesce_init);
	pthread_mutex_lock(&quiesce_lock);
	for (r = quiesce_readers; r; r = r->next)
		if (!atomic_load(&r->in_use))
			break;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&quiesce_lock);
			return NULL;
		}
		r->next = quiesce_readers;
		quiesce_readers = r;
	}
	atomic_store(&r->in_use, true);
	r->depth = 0;
	pthread_mutex_unlock(&quiesce_lock);
	quiesce_self = r;
	pthread_setspecific(quiesce_key, r);
	return r;
}

void quiesce_wait(void)
{
	struct quiesce_reader *r;
	uint32_t seq;

	pthread_once(&quiesce_once, quiesce_init);
	if (quiesce_membarrier)
		quiesce_sys_membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED);
	else
		atomic_thread_fence(memory_order_seq_cst);
	pthread_mutex_lock(&quiesce_lock);
	for (r = quiesce_readers; r; r = r->next) {
		seq = atomic_load_explicit(&r->seq, memory_order_acquire);
		if (r == quiesce_self || !(seq & 1))
			continue;
		while (atomic_load_explicit(&r->seq, memory_order_acquire) ==
		       seq)
			sched_yield();
	}
	pthread_mutex_unlock(&quiesce_lock);
	while (atomic_load(&quiesce_unregistered))
		sched_yield();
}

void quiesce_fork_child(void)
{
	struct quiesce_reader *r;

	pthread_mutex_init(&quiesce_lock, NULL);
	for (r = quiesce_readers; r; r = r->next) {
		if (r == quiesce_self)
			continue;
		atomic_store(&r->in_use, false);
		if (atomic_load(&r->seq) & 1)
			atomic_fetch_add(&r->seq, 1);
		r->depth = 0;
	}
	atomic_store(&quiesce_unregistered, 0);
	/* Registration belongs to the address space: a new one here. */
	if (quiesce_membarrier &&
	    quiesce_sys_membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)) {
		quiesce_membarrier = false;
		atomic_store(&quiesce_reader_fence, true);
	}
}
