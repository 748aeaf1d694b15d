// SPDX-License-Identifier: MIT
/*
 * libibemu-audit.so: the rtld-audit(7) module that serves programs which
 * load libibverbs themselves, with dlopen(), and take its functions with
 * dlsym() on that handle.  Such a lookup searches libibverbs alone, so
 * the preload's interposers (shim.c) are not found; the dynamic linker
 * reports every binding to libibverbs to this module, and for the
 * functions the preload stands in for it answers with the preload's
 * definition.  Every other binding is left as it was.
 *
 * The module runs in a link-map namespace of its own (rtld-audit(7)) and
 * reaches the preload, in the program's namespace, through a handle
 * dlmopen(LM_ID_BASE, ..., RTLD_NOLOAD) gives.  Used only with the
 * preload: `ibemu run` sets LD_AUDIT beside LD_PRELOAD.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <string.h>

/* The functions the preload stands in for, at the versions it exports
 * (libibemu.map). */
static const struct {
	const char *name, *version;
} audit_symbols[] = {
	{ "ibv_get_device_list", "IBVERBS_1.1" },
	{ "ibv_get_device_guid", "IBVERBS_1.1" },
	{ "ibv_query_gid", "IBVERBS_1.1" },
	{ "ibv_query_pkey", "IBVERBS_1.1" },
	{ "ibv_create_comp_channel", "IBVERBS_1.0" },
	{ "ibv_import_device", "IBVERBS_1.10" },
	{ "_ibv_query_gid_ex", "IBVERBS_1.11" },
	{ "_ibv_query_gid_table", "IBVERBS_1.11" },
};

/* The preload's path, as the dynamic linker loaded it, and its cookie
 * (its link map, the default cookie); set once, while the program's
 * objects are loaded, before any binding is reported. */
static char audit_preload[4096];
static uintptr_t audit_preload_cookie;

/* Whether path's last component starts with prefix. */
static int audit_named(const char *path, const char *prefix)
{
	const char *base = strrchr(path, '/');

	base = base ? base + 1 : path;
	return !strncmp(base, prefix, strlen(prefix));
}

unsigned int la_version(unsigned int version)
{
	return version < LAV_CURRENT ? version : LAV_CURRENT;
}

unsigned int la_objopen(struct link_map *map, Lmid_t lmid, uintptr_t *cookie)
{
	if (lmid != LM_ID_BASE || !map->l_name)
		return 0;
	if (audit_named(map->l_name, "libibemu.so")) {
		if (!audit_preload[0] &&
		    strlen(map->l_name) < sizeof(audit_preload)) {
			strcpy(audit_preload, map->l_name);
			audit_preload_cookie = *cookie;
		}
		return 0;
	}
	if (audit_named(map->l_name, "libibverbs.so"))
		return LA_FLG_BINDTO;
	return LA_FLG_BINDFROM;
}

uintptr_t la_symbind64(Elf64_Sym *sym, unsigned int ndx, uintptr_t *refcook,
		       uintptr_t *defcook, unsigned int *flags,
		       const char *symname)
{
	static void *preload;
	void *ours;
	size_t i;

	(void)ndx;
	(void)defcook;
	(void)flags;
	/* The preload's own lookups of the stock functions (shim.c), and
	 * any before the preload was seen, stay as they are. */
	if (!audit_preload[0] || *refcook == audit_preload_cookie)
		return sym->st_value;
	for (i = 0; i < sizeof(audit_symbols) / sizeof(audit_symbols[0]); i++)
		if (!strcmp(symname, audit_symbols[i].name))
			break;
	if (i == sizeof(audit_symbols) / sizeof(audit_symbols[0]))
		return sym->st_value;
	if (!preload)
		preload = dlmopen(LM_ID_BASE, audit_preload,
				  RTLD_LAZY | RTLD_NOLOAD);
	ours = preload ? dlvsym(preload, symname, audit_symbols[i].version)
		       : NULL;
	return ours ? (uintptr_t)ours : sym->st_value;
}
