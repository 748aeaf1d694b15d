// SPDX-License-Identifier: MIT
/* What the CPU offers beyond the baseline (cpu.h), looked up once. */
#include "config.h"

#include <stdbool.h>

#include "cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

bool cpu_prefetch_write_ok;
bool cpu_copy_movsb_ok;

/* PREFETCHW: CPUID leaf 0x80000001, ECX bit 8 (AMD's 3DNowPrefetch,
 * Intel's PRFCHW).  ERMS: leaf 7 subleaf 0, EBX bit 9. */
__attribute__((constructor)) static void cpu_probe(void)
{
	unsigned int a, b, c, d;

	if (__get_cpuid(0x80000001, &a, &b, &c, &d))
		cpu_prefetch_write_ok = (c >> 8) & 1;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d))
		cpu_copy_movsb_ok = (b >> 9) & 1;
}
#endif
