// SPDX-License-Identifier: MIT
/*
 * The process's pages under a memory region: whether they are mapped
 * with the access a registration asks for (a pinned region, checked
 * once at ibv_reg_mr), and faulting them in at each access of an
 * on-demand paging region (IBV_ACCESS_ON_DEMAND, ibv_reg_mr(3)).
 *
 * A real HCA with ODP translates through its own page table and, on a
 * miss, raises a page fault that the kernel's driver serves by faulting
 * the pages in (hmm_range_fault); an address with no mapping, or without
 * the access, cannot be served and the HCA completes the access in
 * error (mlx5: the page fault is resumed with an error, below).  ibemu's
 * engines run in the process that owns the memory, so the fault is the
 * kernel's MADV_POPULATE_READ / MADV_POPULATE_WRITE (madvise(2), Linux
 * 5.14): it faults the pages in as a read or a write would, and fails
 * instead of raising SIGSEGV or SIGBUS where the access would.  Kernels
 * without it are answered by the mappings (/proc/self/maps).
 *
 * No lock: both only read the process's own mappings.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hca.h"

static bool mr_maps_line(const char *line, uintptr_t *lo_p, uintptr_t *hi_p,
			 bool *r_p, bool *w_p)
{
	unsigned long lo, hi;
	char perms[5];

	if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) != 3)
		return false;
	*lo_p = lo;
	*hi_p = hi;
	*r_p = perms[0] == 'r';
	*w_p = perms[1] == 'w';
	return true;
}

int mr_pages_mapped(const void *addr, size_t length, bool write)
{
	uintptr_t next = (uintptr_t)addr, end = (uintptr_t)addr + length;
	bool r, w, more = false, cont;
	uintptr_t lo, hi;
	char line[512];
	FILE *maps;

	maps = fopen("/proc/self/maps", "re");
	if (!maps)
		return 0; /* no way to tell: let the data path find out */
	/* Mappings are listed in address order: walk them over the range. */
	while (next < end && fgets(line, sizeof(line), maps)) {
		/* The rest of a long path name is not a new mapping. */
		cont = more;
		more = !strchr(line, '\n');
		if (cont || !mr_maps_line(line, &lo, &hi, &r, &w) ||
		    hi <= next)
			continue;
		if (lo > next || !r || (write && !w))
			break;
		next = hi;
	}
	fclose(maps);
	return next >= end ? 0 : EFAULT;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#define MADV_POPULATE_WRITE 23
#endif

int mr_pages_fault(const void *addr, uint64_t len, bool write)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = (uintptr_t)addr & ~(page - 1);
	uintptr_t end = (uintptr_t)addr + len;

	if (!len)
		return 0;
	/* A range that wraps is no memory of the process. */
	if (end < (uintptr_t)addr)
		return EFAULT;
	if (!madvise((void *)lo, end - lo,
		     write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ))
		return 0;
	/* ENOMEM: a hole in the range; EFAULT: the access would fault.
	 * EINVAL: a kernel before 5.14, or I/O and PFN mappings (device
	 * memory), which the mappings answer. */
	if (errno == EINVAL)
		return mr_pages_mapped(addr, len, write);
	return EFAULT;
}
