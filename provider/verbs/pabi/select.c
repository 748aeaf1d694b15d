// SPDX-License-Identifier: MIT
/*
 * Which layout the process's libibverbs has (doc/design.md §2 "The private
 * ABI"): the version nodes it defines name the row (layout.h), dlvsym()
 * finds the private functions at the row's private node, and its own
 * ibv_qp_to_qp_ex() tells where it reads a QP's comp_mask.  Anything that
 * does not match is refused, in one line on stderr, before any of ibemu's
 * objects reaches libibverbs: the preload then offers no device and the
 * program runs as it would without it.
 */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

/* What the version nodes of libibverbs say. */
struct pabi_nodes {
	char private_node[32]; /* its IBVERBS_PRIVATE_ node */
	int nr_private;
	int public_minor; /* the newest IBVERBS_1.<minor>; -1: none */
	char unknown[32]; /* an IBVERBS_ node of no form ibemu knows */
};

static void pabi_node_seen(const char *name, void *arg)
{
	struct pabi_nodes *n = arg;
	int minor, end = 0;

	if (!strncmp(name, "IBVERBS_PRIVATE_", 16)) {
		snprintf(n->private_node, sizeof(n->private_node), "%s", name);
		n->nr_private++;
	} else if (sscanf(name, "IBVERBS_1.%d%n", &minor, &end) == 1 &&
		   !name[end]) {
		if (minor > n->public_minor)
			n->public_minor = minor;
	} else if (!strncmp(name, "IBVERBS_", 8)) {
		snprintf(n->unknown, sizeof(n->unknown), "%s", name);
	}
}

/* "44.0 (/usr/lib/.../libibverbs.so.1.14.44.0)", for the refusal line. */
static void pabi_lib_version(const void *sym, char *buf, size_t len)
{
	char path[PATH_MAX];
	const char *base;
	Dl_info info;
	int dots = 0;

	snprintf(buf, len, "unknown");
	if (!sym || !dladdr(sym, &info) || !info.dli_fname)
		return;
	if (!realpath(info.dli_fname, path))
		snprintf(path, sizeof(path), "%s", info.dli_fname);
	base = strrchr(path, '/');
	base = base ? base + 1 : path;
	/* libibverbs.so.1.ABI.MAJOR.MINOR: the release is the last two */
	for (const char *p = base; *p; p++) {
		if (*p == '.' && ++dots == 4) {
			snprintf(buf, len, "%s (%s)", p + 1, path);
			return;
		}
	}
	snprintf(buf, len, "of %s", path);
}

static void pabi_refuse(const void *anchor, const char *why)
{
	char version[PATH_MAX + 32], supported[96];

	pabi_lib_version(anchor, version, sizeof(version));
	pabi_supported(supported, sizeof(supported));
	fprintf(stderr,
		"ibemu: rdma-core %s %s; ibemu supports %s; no ibemu device "
		"is offered\n",
		version, why, supported);
}

typedef struct ibv_qp_ex *(*pabi_qp_to_qp_ex_fn)(struct ibv_qp *qp);

/*
 * libibverbs' sizeof(struct ibv_qp_ex), among the sizes l's releases have:
 * its ibv_qp_to_qp_ex() answers for a QP only when comp_mask, right after
 * its ibv_qp_ex, has VERBS_QP_EX; it reads nothing else (libibverbs/
 * verbs.c, the same from 36 to the main branch).  0: none, or not one.
 */
static size_t pabi_qp_ex_measure(const struct pabi_layout *l,
				 pabi_qp_to_qp_ex_fn to_qp_ex)
{
	struct verbs_qp probe;
	size_t found = 0;

	for (size_t i = 0; i < sizeof(l->qp_ex_wr_ops) && l->qp_ex_wr_ops[i];
	     i++) {
		size_t size = PABI_QP_EX_SIZE(l->qp_ex_wr_ops[i]);

		memset(&probe, 0, sizeof(probe));
		((struct pabi_qp_tail *)(probe.room + size))->comp_mask =
			PABI_VERBS_QP_EX;
		if ((void *)to_qp_ex(&probe.qp) != (void *)&probe)
			continue;
		if (found)
			return 0;
		found = size;
	}
	return found;
}

static const struct pabi_layout *
pabi_layout_of(void *(*sym)(const char *name, const char *version),
	       const void *anchor)
{
	struct pabi_nodes n = { .public_minor = -1 };
	const struct pabi_layout *l;
	char why[160];

	if (pabi_version_nodes(anchor, pabi_node_seen, &n)) {
		pabi_refuse(anchor, "has version definitions ibemu cannot read");
		return NULL;
	}
	l = n.nr_private == 1 && !n.unknown[0]
		    ? pabi_layout_find(n.private_node, n.public_minor, sym)
		    : NULL;
	if (l)
		return l;
	if (n.unknown[0])
		snprintf(why, sizeof(why), "defines %s, a version ibemu does "
			 "not know", n.unknown);
	else if (n.nr_private != 1)
		snprintf(why, sizeof(why), "defines %d private versions",
			 n.nr_private);
	else
		snprintf(why, sizeof(why), "defines IBVERBS_1.%d and %s, a "
			 "layout ibemu does not carry", n.public_minor,
			 n.private_node);
	pabi_refuse(anchor, why);
	return NULL;
}

bool pabi_select(void *(*sym)(const char *name, const char *version),
		 const void *anchor)
{
	const struct pabi_layout *l = pabi_layout_of(sym, anchor);
	pabi_qp_to_qp_ex_fn to_qp_ex;
	struct pabi found = { .layout = l };
	const char *missing = NULL;
	char why[160];

	if (!l)
		return false;
	found.init_and_alloc_context =
		sym("_verbs_init_and_alloc_context", l->private_node);
	found.set_ops = sym("verbs_set_ops", l->private_node);
	found.uninit_context = sym("verbs_uninit_context", l->private_node);
	to_qp_ex = sym("ibv_qp_to_qp_ex", "IBVERBS_1.6");
	if (!found.uninit_context)
		missing = "verbs_uninit_context";
	if (!found.set_ops)
		missing = "verbs_set_ops";
	if (!found.init_and_alloc_context)
		missing = "_verbs_init_and_alloc_context";
	if (missing) {
		snprintf(why, sizeof(why), "does not export %s at %s", missing,
			 l->private_node);
		pabi_refuse(anchor, why);
		return false;
	}
	if (l->open_needs_sysfs) {
		found.init_cq = sym("verbs_init_cq", l->private_node);
		found.compat_query_port =
			(void (*)(void))sym("ibv_query_port", "IBVERBS_1.1");
		found.compat_query_device =
			(void (*)(void))sym("ibv_query_device", "IBVERBS_1.1");
		if (!found.init_cq || !found.compat_query_port ||
		    !found.compat_query_device) {
			pabi_refuse(anchor, "does not export verbs_init_cq, "
					    "ibv_query_port or "
					    "ibv_query_device");
			return false;
		}
	}
	found.qp_ex_size = to_qp_ex ? pabi_qp_ex_measure(l, to_qp_ex) : 0;
	if (!found.qp_ex_size) {
		pabi_refuse(anchor, "has a struct ibv_qp_ex of a size ibemu "
				    "does not carry");
		return false;
	}
	pabi = found;
	return true;
}
