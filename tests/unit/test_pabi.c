// SPDX-License-Identifier: MIT
/*
 * The layouts of libibverbs' private interface (provider/verbs/pabi/):
 * the table is complete and consistent, each of ibemu's ops lands in the
 * slot rdma-core's own driver.h gives it in each layout, a libibverbs of
 * an unknown pair of version nodes finds no layout, and the preload
 * defines ibv_query_gid_type at every private version it carries.
 *
 * The slots asserted below are offsetof(struct verbs_context_ops, m) / 8
 * in the driver.h of builds of rdma-core 39, 44, 56.1, 57, 59, 61, 62, 64
 * and the main branch (tests/unit/pabi-headers.sh checks every member
 * against a build's headers where one is at hand).
 *
 * `test_pabi --rows` prints the table for that script instead.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "layout.h"

#define PABI_OP_NAME(name, release) #name,
static const char *const op_names[] = { PABI_CONTEXT_OPS(PABI_OP_NAME) };
#define NR_OP_NAMES (sizeof(op_names) / sizeof(op_names[0]))

/* A libibverbs that exports every private function asked for, or none. */
static void *sym_all(const char *name, const char *version)
{
	(void)name;
	(void)version;
	return (void *)sym_all;
}

static void *sym_none(const char *name, const char *version)
{
	(void)name;
	(void)version;
	return NULL;
}

static const struct pabi_layout *row_of(int release)
{
	for (unsigned int i = 0; i < pabi_nr_layouts; i++)
		if (pabi_layouts[i].first <= release &&
		    release <= pabi_layouts[i].last)
			return &pabi_layouts[i];
	return NULL;
}

/* Rows oldest first, one after the other, from 36; only the last may be
 * the main branch; each row's figures within what pabi.h makes room for. */
static void test_rows_follow_on(void)
{
	const struct pabi_layout *l;

	CU_ASSERT_EQUAL(pabi_layouts[0].first, 36);
	for (unsigned int i = 0; i < pabi_nr_layouts; i++) {
		l = &pabi_layouts[i];
		CU_ASSERT(l->first <= l->last);
		if (i)
			CU_ASSERT_EQUAL(l->first, l[-1].last + 1);
		CU_ASSERT(!l->unreleased || i == pabi_nr_layouts - 1);
		CU_ASSERT(l->vctx_words >= 40 &&
			  l->vctx_words <= PABI_VCTX_WORDS_MAX);
		CU_ASSERT(l->qp_ex_wr_ops[0] >= 20);
		for (unsigned int j = 0; j < sizeof(l->qp_ex_wr_ops); j++)
			CU_ASSERT(l->qp_ex_wr_ops[j] <= PABI_QP_EX_WR_OPS_MAX);
		CU_ASSERT(l->nr_ops <= NR_OP_NAMES);
		CU_ASSERT_PTR_EQUAL(
			pabi_layout_find(l->private_node, l->public_minor,
					 l->private_since ? sym_all : sym_none),
			l);
	}
}

/* Each row's member count is what PABI_CONTEXT_OPS has at its release,
 * and what driver.h has: 76 to 58, 79 at 59, 81 at 62, 83 at 64, 93 on
 * the main branch. */
static void test_op_counts(void)
{
	static const struct {
		int release;
		unsigned int nr_ops, vctx_words;
	} facts[] = { { 39, 76, 40 }, { 44, 76, 40 }, { 56, 76, 40 },
		      { 57, 76, 40 }, { 59, 79, 43 }, { 61, 79, 43 },
		      { 62, 81, 44 }, { 64, 83, 46 }, { 65, 93, 46 } };

	for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
		const struct pabi_layout *l = row_of(facts[i].release);
		int last = -1;

		CU_ASSERT_PTR_NOT_NULL_FATAL(l);
		CU_ASSERT_EQUAL(l->nr_ops, facts[i].nr_ops);
		CU_ASSERT_EQUAL(l->vctx_words, facts[i].vctx_words);
		for (size_t j = 0; j < NR_OP_NAMES; j++) {
			int slot = pabi_op_slot(l, op_names[j]);

			if (slot < 0)
				continue;
			CU_ASSERT_EQUAL(slot, last + 1);
			last = slot;
		}
		CU_ASSERT_EQUAL(last + 1, (int)l->nr_ops);
	}
}

/* driver.h: "Keep sorted"; a misspelt or misplaced name shows here. */
static void test_ops_sorted(void)
{
	for (size_t i = 1; i < NR_OP_NAMES; i++)
		CU_ASSERT(strcmp(op_names[i - 1], op_names[i]) < 0);
}

static void test_slots_as_driver_h(void)
{
	static const struct {
		int release;
		int alloc_pd, create_qp, free_context, poll_cq, post_send,
			query_device_ex, query_port, unimport_pd;
	} facts[] = {
		{ 39, 5, 19, 39, 53, 55, 58, 60, 75 },
		{ 44, 5, 19, 39, 53, 55, 58, 60, 75 },
		{ 57, 5, 19, 39, 53, 55, 58, 60, 75 },
		{ 59, 6, 20, 41, 55, 57, 60, 62, 78 },
		{ 62, 6, 20, 42, 56, 58, 61, 63, 80 },
		{ 64, 7, 21, 44, 58, 60, 63, 65, 82 },
		{ 65, 7, 22, 46, 62, 64, 69, 71, 92 },
	};

	for (size_t i = 0; i < sizeof(facts) / sizeof(facts[0]); i++) {
		const struct pabi_layout *l = row_of(facts[i].release);

		CU_ASSERT_PTR_NOT_NULL_FATAL(l);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "alloc_pd"), facts[i].alloc_pd);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "create_qp"),
				facts[i].create_qp);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "free_context"),
				facts[i].free_context);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "poll_cq"), facts[i].poll_cq);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "post_send"),
				facts[i].post_send);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "query_device_ex"),
				facts[i].query_device_ex);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "query_port"),
				facts[i].query_port);
		CU_ASSERT_EQUAL(pabi_op_slot(l, "unimport_pd"),
				facts[i].unimport_pd);
	}
	CU_ASSERT_EQUAL(pabi_op_slot(row_of(57), "reg_mr_ex"), -1);
	CU_ASSERT_EQUAL(pabi_op_slot(row_of(59), "reg_mr_ex"), 71);
}

/* What verbs_set_ops() was handed. */
static const pabi_op_fn *installed;
static pabi_op_fn installed_copy[NR_OP_NAMES];

static void capture_set_ops(struct verbs_context *vctx, const void *ops)
{
	(void)vctx;
	installed = ops;
	memcpy(installed_copy, ops, sizeof(installed_copy));
}

/* Each member of ibemu's typed table, by its name, in its slot of every
 * row; nothing in the slots of the members ibemu does not supply. */
#define MEMBER_INDEX_35(name)                                                  \
	((int)(offsetof(struct pabi_ops, name) / sizeof(pabi_op_fn)))
#define MEMBER_INDEX_36 MEMBER_INDEX_35
#define MEMBER_INDEX_59(name) -1
#define MEMBER_INDEX_62(name) -1
#define MEMBER_INDEX_64(name) -1
#define MEMBER_INDEX_65(name) -1
#define EXPECT_MEMBER(name, release)                                           \
	expect_member(l, #name, release, MEMBER_INDEX_##release(name));

static void expect_member(const struct pabi_layout *l, const char *name,
			  int release, int member)
{
	int slot = pabi_op_slot(l, name);

	CU_ASSERT_EQUAL(slot < 0, release > l->ops_release);
	if (slot < 0)
		return;
	if (member < 0) {
		CU_ASSERT_PTR_NULL(installed_copy[slot]);
	} else {
		CU_ASSERT_EQUAL((uintptr_t)installed_copy[slot],
				(uintptr_t)(member + 1));
	}
}

static void test_set_ops_by_name(void)
{
	uintptr_t values[sizeof(struct pabi_ops) / sizeof(pabi_op_fn)];
	struct pabi_ops ops;

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
		values[i] = i + 1;
	memcpy(&ops, values, sizeof(ops));
	for (unsigned int i = 0; i < pabi_nr_layouts; i++) {
		const struct pabi_layout *l = &pabi_layouts[i];

		pabi = (struct pabi){ .layout = l,
				      .set_ops = capture_set_ops };
		installed = NULL;
		pabi_set_ops(NULL, &ops);
		CU_ASSERT_PTR_NOT_NULL_FATAL(installed);
		PABI_CONTEXT_OPS(EXPECT_MEMBER)
	}
	pabi = (struct pabi){ 0 };
}

/* Pairs of nodes no row has: 35's (PRIVATE_34 and 1.13), a newer public
 * node on a known private one, a newer private node.  36 has 37's pair:
 * it is told by the 37 row's private_since, and is the row that opens
 * ibemu's device itself. */
static void test_unknown_pairs(void)
{
	CU_ASSERT_PTR_NULL(pabi_layout_find("IBVERBS_PRIVATE_34", 13, sym_all));
	CU_ASSERT_PTR_NULL(pabi_layout_find("IBVERBS_PRIVATE_34", 15, sym_all));
	CU_ASSERT_PTR_NULL(pabi_layout_find("IBVERBS_PRIVATE_65", 19, sym_all));
	CU_ASSERT_PTR_NULL(pabi_layout_find("IBVERBS_PRIVATE_66", 19, sym_all));
	CU_ASSERT_PTR_NULL(pabi_layout_find("IBVERBS_PRIVATE_59", 17, sym_all));
	CU_ASSERT_PTR_EQUAL(pabi_layout_find("IBVERBS_PRIVATE_59", 16, sym_all),
			    row_of(62));
	CU_ASSERT_STRING_EQUAL(row_of(37)->private_since, "__verbs_log");
	CU_ASSERT_PTR_EQUAL(pabi_layout_find("IBVERBS_PRIVATE_34", 14, sym_all),
			    row_of(37));
	CU_ASSERT_PTR_EQUAL(pabi_layout_find("IBVERBS_PRIVATE_34", 14, sym_none),
			    row_of(36));
	CU_ASSERT(row_of(36)->open_needs_sysfs);
	CU_ASSERT(!row_of(37)->open_needs_sysfs);
}

static void test_supported_line(void)
{
	char buf[96];

	pabi_supported(buf, sizeof(buf));
	CU_ASSERT_STRING_EQUAL(buf,
			       "rdma-core 36 to 64 and the main branch (65)");
}

/* The preload binds ibv_query_gid_type at each row's private node
 * (ibv_devinfo and pyverbs call it at their release's). */
static void test_gid_type_at_every_private_node(void)
{
	const char *dir = getenv("IBEMU_BUILDDIR");
	char path[4096];
	void *h;

	snprintf(path, sizeof(path), "%s/.libs/libibemu.so", dir ? dir : ".");
	h = dlopen(path, RTLD_LAZY | RTLD_LOCAL);
	CU_ASSERT_PTR_NOT_NULL_FATAL(h);
	for (unsigned int i = 0; i < pabi_nr_layouts; i++)
		CU_ASSERT_PTR_NOT_NULL(dlvsym(h, "ibv_query_gid_type",
					      pabi_layouts[i].private_node));
	CU_ASSERT_PTR_NULL(dlvsym(h, "ibv_query_gid_type",
				  "IBVERBS_PRIVATE_99"));
	dlclose(h);
}

/* first last private_node public_minor nr_ops vctx_words qp_ex_wr_ops
 * private_since ("-": none) */
static void print_rows(void)
{
	for (unsigned int i = 0; i < pabi_nr_layouts; i++) {
		const struct pabi_layout *l = &pabi_layouts[i];

		printf("%d %d %s %d %u %u", l->first, l->last, l->private_node,
		       l->public_minor, l->nr_ops, l->vctx_words);
		for (unsigned int j = 0; j < sizeof(l->qp_ex_wr_ops); j++)
			if (l->qp_ex_wr_ops[j])
				printf("%c%u", j ? ',' : ' ',
				       l->qp_ex_wr_ops[j]);
		printf(" %s\n", l->private_since ? l->private_since : "-");
	}
}

int main(int argc, char **argv)
{
	static const struct unit_test tests[] = {
		{ "rows follow on", test_rows_follow_on },
		{ "op counts", test_op_counts },
		{ "ops sorted", test_ops_sorted },
		{ "slots as driver.h", test_slots_as_driver_h },
		{ "set_ops by name", test_set_ops_by_name },
		{ "unknown pairs", test_unknown_pairs },
		{ "supported line", test_supported_line },
		{ "gid_type at every private node",
		  test_gid_type_at_every_private_node },
		{ NULL, NULL },
	};

	if (argc > 1 && !strcmp(argv[1], "--rows")) {
		print_rows();
		return 0;
	}
	return unit_run("pabi", tests);
}
