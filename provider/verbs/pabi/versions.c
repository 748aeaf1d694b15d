// SPDX-License-Identifier: MIT
/*
 * The version nodes a loaded object defines, read from its ELF version
 * definitions (DT_VERDEF) in memory.  dlvsym() answers only for a symbol
 * and a version one already knows; a libibverbs newer than ibemu is told
 * by a node ibemu does not know, which only the definitions list.
 *
 * The dynamic section's addresses are file-relative in the object, and
 * the dynamic linker rewrites some of them in place (glibc relocates
 * DT_STRTAB where the section is writable, not DT_VERDEF): an address is
 * taken as it is when it falls inside the object's loaded segments, and
 * relocated by the object's base otherwise.
 */
#include "config.h"

#include <link.h>
#include <stdint.h>
#include <string.h>

#include "layout.h"

struct version_walk {
	const void *addr; /* a symbol of the object sought */
	void (*fn)(const char *name, void *arg);
	void *arg;
	int ret; /* 1 found and read, -1 found and unreadable, 0 not found */
};

/* The extent of info's object in memory; whether it holds addr. */
static int object_extent(const struct dl_phdr_info *info, uintptr_t addr,
			 uintptr_t *lo_p, uintptr_t *hi_p)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	int holds = 0;

	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t start, end;

		if (ph->p_type != PT_LOAD)
			continue;
		start = info->dlpi_addr + ph->p_vaddr;
		end = start + ph->p_memsz;
		if (addr >= start && addr < end)
			holds = 1;
		lo = start < lo ? start : lo;
		hi = end > hi ? end : hi;
	}
	*lo_p = lo;
	*hi_p = hi;
	return holds;
}

static uintptr_t dyn_addr(const struct dl_phdr_info *info, uintptr_t lo,
			  uintptr_t hi, uintptr_t value)
{
	if (value >= lo && value < hi)
		return value;
	return value + info->dlpi_addr;
}

static const ElfW(Dyn) *object_dynamic(const struct dl_phdr_info *info)
{
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			return (const ElfW(Dyn) *)(info->dlpi_addr +
						   info->dlpi_phdr[i].p_vaddr);
	return NULL;
}

static int walk_verdef(const struct dl_phdr_info *info,
		       struct version_walk *w)
{
	uintptr_t lo, hi, strtab = 0, verdef = 0, p;
	const ElfW(Dyn) *dyn = object_dynamic(info);
	size_t strsz = 0, n = 0;

	object_extent(info, (uintptr_t)w->addr, &lo, &hi);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		if (dyn->d_tag == DT_STRTAB)
			strtab = dyn_addr(info, lo, hi, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_STRSZ)
			strsz = dyn->d_un.d_val;
		else if (dyn->d_tag == DT_VERDEF)
			verdef = dyn_addr(info, lo, hi, dyn->d_un.d_ptr);
		else if (dyn->d_tag == DT_VERDEFNUM)
			n = dyn->d_un.d_val;
	}
	if (!strtab || !verdef || !n || strtab < lo || strtab + strsz > hi)
		return -1;
	for (p = verdef; n--; ) {
		const ElfW(Verdef) *vd = (const ElfW(Verdef) *)p;
		const ElfW(Verdaux) *aux;

		if (p < lo || p + sizeof(*vd) > hi || vd->vd_version != 1)
			return -1;
		aux = (const ElfW(Verdaux) *)(p + vd->vd_aux);
		if ((uintptr_t)aux + sizeof(*aux) > hi ||
		    aux->vda_name >= strsz)
			return -1;
		if (!(vd->vd_flags & VER_FLG_BASE))
			w->fn((const char *)strtab + aux->vda_name, w->arg);
		if (!vd->vd_next)
			break;
		p += vd->vd_next;
	}
	return 1;
}

static int version_walk_one(struct dl_phdr_info *info, size_t size,
			    void *data)
{
	struct version_walk *w = data;
	uintptr_t lo, hi;

	(void)size;
	if (!object_extent(info, (uintptr_t)w->addr, &lo, &hi))
		return 0;
	w->ret = walk_verdef(info, w);
	return 1;
}

int pabi_version_nodes(const void *addr,
		       void (*fn)(const char *name, void *arg), void *arg)
{
	struct version_walk w = { .addr = addr, .fn = fn, .arg = arg };

	dl_iterate_phdr(version_walk_one, &w);
	return w.ret == 1 ? 0 : -1;
}
