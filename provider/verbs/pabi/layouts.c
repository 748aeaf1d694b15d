// SPDX-License-Identifier: MIT
/*
 * The layouts of the private interface ibemu carries, as data (the table
 * in layout.h says where each figure comes from), and the ops table laid
 * out as one of them.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "layout.h"

struct pabi pabi;

/*
 * Oldest first; the rows' releases follow on from each other.  rdma-core
 * 36 has the second row's layout, but its ibv_open_device() opens the
 * device's sysfs character device before the provider is asked, and
 * crashes on a device without sysfs: ibemu opens its own device there
 * (../open_own.c).  37 opens none for such a device (rdma-core commit
 * 9b239d0e0) and added __verbs_log to the private node in the same
 * release: the second row requires it, which tells 37 from 36.
 */
const struct pabi_layout pabi_layouts[] = {
	{ .first = 36, .last = 36, .private_node = "IBVERBS_PRIVATE_34",
	  .public_minor = 14, .ops_release = 36, .nr_ops = 76,
	  .vctx_words = 40, .qp_ex_wr_ops = { 20 },
	  .open_needs_sysfs = true },
	{ .first = 37, .last = 56, .private_node = "IBVERBS_PRIVATE_34",
	  .public_minor = 14, .ops_release = 36, .nr_ops = 76,
	  .vctx_words = 40, .qp_ex_wr_ops = { 20, 21, 22 },
	  .private_since = "__verbs_log" },
	{ .first = 57, .last = 58, .private_node = "IBVERBS_PRIVATE_57",
	  .public_minor = 14, .ops_release = 57, .nr_ops = 76,
	  .vctx_words = 40, .qp_ex_wr_ops = { 22 } },
	{ .first = 59, .last = 61, .private_node = "IBVERBS_PRIVATE_59",
	  .public_minor = 15, .ops_release = 59, .nr_ops = 79,
	  .vctx_words = 43, .qp_ex_wr_ops = { 22 } },
	{ .first = 62, .last = 63, .private_node = "IBVERBS_PRIVATE_59",
	  .public_minor = 16, .ops_release = 62, .nr_ops = 81,
	  .vctx_words = 44, .qp_ex_wr_ops = { 22 } },
	{ .first = 64, .last = 64, .private_node = "IBVERBS_PRIVATE_64",
	  .public_minor = 17, .ops_release = 64, .nr_ops = 83,
	  .vctx_words = 46, .qp_ex_wr_ops = { 22 } },
	{ .first = 65, .last = 65, .unreleased = true,
	  .private_node = "IBVERBS_PRIVATE_65", .public_minor = 18,
	  .ops_release = 65, .nr_ops = 93, .vctx_words = 46,
	  .qp_ex_wr_ops = { 22 } },
};
const unsigned int pabi_nr_layouts =
	sizeof(pabi_layouts) / sizeof(pabi_layouts[0]);

/* Each member of struct verbs_context_ops, in order, and its release. */
#define PABI_OP_NAME(name, release) #name,
#define PABI_OP_RELEASE(name, release) release,
static const char *const pabi_op_names[] = { PABI_CONTEXT_OPS(PABI_OP_NAME) };
static const unsigned char pabi_op_releases[] = {
	PABI_CONTEXT_OPS(PABI_OP_RELEASE)
};
#define PABI_NR_OPS_ALL (sizeof(pabi_op_names) / sizeof(pabi_op_names[0]))
#define PABI_OP_COUNT(name, release) +1
_Static_assert(0 PABI_CONTEXT_OPS(PABI_OP_COUNT) == 93,
	       "verbs_context_ops has 93 members on rdma-core's main branch");
#define PABI_OP_AT_36(name, release) +(release <= 36)
_Static_assert(0 PABI_CONTEXT_OPS(PABI_OP_AT_36) == 76,
	       "verbs_context_ops has 76 members at rdma-core 36");
_Static_assert(sizeof(struct pabi_ops) == 76 * sizeof(pabi_op_fn),
	       "struct pabi_ops holds the members of rdma-core 36");

const struct pabi_layout *pabi_layout_find(
	const char *private_node, int public_minor,
	void *(*sym)(const char *name, const char *version))
{
	for (unsigned int i = pabi_nr_layouts; i-- > 0;) {
		const struct pabi_layout *l = &pabi_layouts[i];

		if (strcmp(l->private_node, private_node) ||
		    l->public_minor != public_minor)
			continue;
		if (!l->private_since || !sym ||
		    sym(l->private_since, l->private_node))
			return l;
	}
	return NULL;
}

int pabi_op_slot(const struct pabi_layout *l, const char *name)
{
	int slot = 0;

	for (size_t i = 0; i < PABI_NR_OPS_ALL; i++) {
		if (pabi_op_releases[i] > l->ops_release)
			continue;
		if (!strcmp(pabi_op_names[i], name))
			return slot;
		slot++;
	}
	return -1;
}

/*
 * Members of the releases struct pabi_ops covers are taken from it by
 * name; newer members ibemu does not supply and leaves NULL, which
 * verbs_set_ops() skips, keeping libibverbs' default.
 */
#define PABI_TAKE_35(ops, name) ((pabi_op_fn)(ops)->name)
#define PABI_TAKE_36(ops, name) ((pabi_op_fn)(ops)->name)
#define PABI_TAKE_59(ops, name) ((pabi_op_fn)NULL)
#define PABI_TAKE_62(ops, name) ((pabi_op_fn)NULL)
#define PABI_TAKE_64(ops, name) ((pabi_op_fn)NULL)
#define PABI_TAKE_65(ops, name) ((pabi_op_fn)NULL)
#define PABI_PLACE(name, release)                                              \
	if (release <= l->ops_release)                                         \
		slots[slot++] = PABI_TAKE_##release(ops, name);

void pabi_set_ops(struct verbs_context *vctx, const struct pabi_ops *ops)
{
	/* verbs_set_ops() copies each non-NULL member and keeps no pointer
	 * to the table (libibverbs/dummy_ops.c). */
	pabi_op_fn slots[PABI_NR_OPS_ALL] = { NULL };
	const struct pabi_layout *l = pabi.layout;
	unsigned int slot = 0;

	PABI_CONTEXT_OPS(PABI_PLACE)
	pabi.set_ops(vctx, slots);
}

void pabi_supported(char *buf, size_t len)
{
	const struct pabi_layout *oldest = &pabi_layouts[0];
	const struct pabi_layout *newest = &pabi_layouts[pabi_nr_layouts - 1];

	if (newest->unreleased && pabi_nr_layouts > 1)
		snprintf(buf, len, "rdma-core %d to %d and the main branch (%d)",
			 oldest->first, newest[-1].last, newest->first);
	else
		snprintf(buf, len, "rdma-core %d to %d", oldest->first,
			 newest->last);
}
