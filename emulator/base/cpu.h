/* SPDX-License-Identifier: MIT */
/* What the CPU offers: a pause in a spin-wait loop, a store with a full
 * fence, a write prefetch and a large copy, on every architecture. */
#ifndef IBEMU_CPU_H
#define IBEMU_CPU_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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

/*
 * Copy n bytes (no overlap).  A large copy on an x86 CPU with enhanced
 * REP MOVSB (ERMS, CPUID leaf 7 EBX bit 9) is one REP MOVSB: the CPU
 * then writes whole lines of the destination without reading them
 * first, which C library memcpy loops do not.  A 1 MiB copy here (its
 * source and destination past the L2): 57-59 GB/s against 48 for
 * glibc 2.36's memcpy; from 512 KiB down the two are level, so smaller
 * copies keep memcpy.  Sanitizer builds keep memcpy too, whose accesses
 * they check.
 */
#define CPU_COPY_MOVSB_MIN (512u * 1024)

#if (defined(__x86_64__) || defined(__i386__)) && \
	!defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
extern _Bool cpu_copy_movsb_ok;

static inline void cpu_copy(void *dst, const void *src, size_t n)
{
	if (n >= CPU_COPY_MOVSB_MIN && cpu_copy_movsb_ok) {
		__asm__ __volatile__("rep movsb"
				     : "+D"(dst), "+S"(src), "+c"(n)
				     :
				     : "memory");
		return;
	}
	memcpy(dst, src, n);
}
#else
static inline void cpu_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}
#endif

#endif /* IBEMU_CPU_H */
