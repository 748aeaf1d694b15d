// SPDX-License-Identifier: MIT
/*
 * libibemu-check.so: munmap and free, interposed for the checking mode
 * (`ibemu run --check` preloads it after libibemu.so).  Each asks the
 * provider whether the memory is still registered in a memory region
 * (ibemu_check_unmap, emulator/engine/check_unmap.c), which reports it,
 * then does what the program asked.  free asks only about pointers that
 * start a region.  Without libibemu.so in the process, both only pass
 * the call on.
 *
 * free runs for every free of the process, from the first, which may
 * come before this library's constructor, and inside the dynamic
 * linker: it allocates nothing and takes no lock.  The next free and
 * munmap (the C library's, or a malloc preloaded after us) are found
 * with dlsym(RTLD_NEXT) once; a free that comes while that is under way
 * (dlsym's own, or another thread's) is dropped, a few bytes kept for
 * good, and munmap goes to the system call meanwhile.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef void free_fn(void *);
typedef int munmap_fn(void *, size_t);
typedef void hook_fn(const void *, size_t, int);

static free_fn *next_free;
static munmap_fn *next_munmap;
static hook_fn *hook;
/* 0: not looked up, 1: being looked up, 2: done */
static atomic_int resolved;

static bool resolve(void)
{
	int st = atomic_load_explicit(&resolved, memory_order_acquire);

	if (st == 2)
		return true;
	if (st == 1 || !atomic_compare_exchange_strong(&resolved, &st, 1))
		return atomic_load_explicit(&resolved,
					    memory_order_acquire) == 2;
	next_free = (free_fn *)dlsym(RTLD_NEXT, "free");
	next_munmap = (munmap_fn *)dlsym(RTLD_NEXT, "munmap");
	hook = (hook_fn *)dlsym(RTLD_DEFAULT, "ibemu_check_unmap");
	atomic_store_explicit(&resolved, 2, memory_order_release);
	return true;
}

__attribute__((constructor)) static void check_unmap_init(void)
{
	resolve();
}

/* Ask the provider, errno kept (free leaves it as it was, POSIX.1-2024;
 * a report prints). */
static void ask(const void *addr, size_t len, int is_free)
{
	int saved = errno;

	if (hook)
		hook(addr, len, is_free);
	errno = saved;
}

int munmap(void *addr, size_t len)
{
	if (!resolve() || !next_munmap)
		return (int)syscall(SYS_munmap, addr, len);
	ask(addr, len, 0);
	return next_munmap(addr, len);
}

void free(void *p)
{
	if (!p || !resolve() || !next_free)
		return;
	ask(p, 0, 1);
	next_free(p);
}
