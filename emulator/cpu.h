/* SPDX-License-Identifier: MIT */
/* A pause in a spin-wait loop, on every architecture. */
#ifndef IBEMU_CPU_H
#define IBEMU_CPU_H

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

#endif /* IBEMU_CPU_H */
