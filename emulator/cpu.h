/* SPDX-License-Identifier: MIT */
/* A pause in a spin-wait loop, on every architecture. */
#ifndef IBEMU_CPU_H
#define IBEMU_CPU_H

#include <stdatomic.h>
#include <stdint.h>

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
	__asm__ __volatile__("yield" ::: "memory");
#elif defined(__powerpc__) || defined(__powerpc64__)
	__asm__ __volatile__("or 27,27,27" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/*
 * Store v at p, then order the store before every later load (a full
 * fence): the announcing half of a Dekker-style handshake (inbox.h's
 * sleeper flag, cma.c's placement fence).  On x86 one locked exchange
 * does both, which is cheaper than a store and MFENCE.
 */
static inline void cpu_store_fence_u64(_Atomic uint64_t *p, uint64_t v)
{
#if defined(__x86_64__) || defined(__i386__)
	(void)atomic_exchange_explicit(p, v, memory_order_seq_cst);
#else
	atomic_store_explicit(p, v, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
#endif
}

/*
 * Ask for the cache line at p in a state that may be written (x86
 * PREFETCHW): a producer about to write a line that another CPU holds
 * starts the transfer early, instead of stalling at its next fence or
 * locked instruction.  A hint; nothing where the CPU lacks the
 * instruction (cpu_prefetch_write_ok, set once by a constructor).
 */
#if defined(__x86_64__) || defined(__i386__)
extern _Bool cpu_prefetch_write_ok;

static inline void cpu_prefetch_write(const void *p)
{
	if (cpu_prefetch_write_ok)
		__asm__ __volatile__("prefetchw %0" : : "m"(*(const char *)p));
}
#else
static inline void cpu_prefetch_write(const void *p)
{
	__builtin_prefetch(p, 1, 3);
}
#endif

#endif /* IBEMU_CPU_H */
