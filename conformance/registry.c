// SPDX-License-Identifier: MIT
/*
 * The registry of the conformance suite: every suite and test of
 * test-list.h registered with CUnit in list order, honouring -s (a suite
 * filter) and -x (excluded tests), and the one runner of the two-process
 * tests.
 */
#include <stdio.h>
#include <string.h>

#include <CUnit/TestRun.h>

#include "tests.h"

struct cf_suite_entry {
	const char *name;
	CU_InitializeFunc init;
	CU_CleanupFunc cleanup;
};

/* A one-process test (fn), or a two-process one: a run for each arg. */
struct cf_test_entry {
	const char *suite;
	const char *name;
	const char *rule; /* what it holds the device to, and the clause */
	CU_TestFunc fn;
	cf_peer_body body;
	cf_peer_tune tune;
	const long *args;
	size_t nargs;
};

static void cf_peer_test_run(void);

#define CF_SUITE(S, INIT, CLEANUP) { #S, INIT, CLEANUP },
#define CF_TEST(S, T, RULE)
#define CF_PEER(S, T, RULE, BODY, TUNE, ...)
static const struct cf_suite_entry cf_suites[] = {
#include "test-list.h"
};
#undef CF_SUITE
#undef CF_TEST
#undef CF_PEER

#define CF_ARGS(...) ((const long[]){ __VA_ARGS__ })
#define CF_SUITE(S, INIT, CLEANUP)
#define CF_TEST(S, T, RULE)						\
	{ .suite = #S, .name = #T, .rule = RULE, .fn = cf_test_##S##_##T },
#define CF_PEER(S, T, RULE, BODY, TUNE, ...)				\
	{								\
		.suite = #S,						\
		.name = #T,						\
		.rule = RULE,						\
		.fn = cf_peer_test_run,					\
		.body = cf_body_##S##_##BODY,				\
		.tune = cf_tune_##TUNE,					\
		.args = CF_ARGS(__VA_ARGS__),				\
		.nargs = sizeof(CF_ARGS(__VA_ARGS__)) / sizeof(long),	\
	},
static const struct cf_test_entry cf_tests[] = {
#include "test-list.h"
};
#undef CF_SUITE
#undef CF_TEST
#undef CF_PEER

CF_TUNE_IMPL(none)
{
}

/* The entry of the test CUnit is running, or NULL. */
static const struct cf_test_entry *cf_test_current(void)
{
	CU_pSuite suite = CU_get_current_suite();
	CU_pTest test = CU_get_current_test();
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(cf_tests); i++)
		if (!strcmp(cf_tests[i].suite, suite->pName) &&
		    !strcmp(cf_tests[i].name, test->pName))
			return &cf_tests[i];
	return NULL;
}

/* The runner of every CF_PEER test: its body once for each arg. */
static void cf_peer_test_run(void)
{
	const struct cf_test_entry *t = cf_test_current();
	struct cf_peer_params p;
	size_t i;

	if (!t) {
		CU_FAIL_FATAL("the running test is not in test-list.h");
		return;
	}
	for (i = 0; i < t->nargs; i++) {
		cf_peer_params_init(&p);
		t->tune(&p, t->args[i]);
		cf_peer_run(&p, t->body, t->args[i]);
	}
}

const char *cf_test_rule(const char *suite, const char *test)
{
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(cf_tests); i++)
		if (!strcmp(cf_tests[i].suite, suite) &&
		    !strcmp(cf_tests[i].name, test))
			return cf_tests[i].rule;
	return NULL;
}

/* Tests excluded with -x SUITE/TEST, as fabtests' exclude lists do. */
#define CF_MAX_EXCLUDES 32
static const char *cf_excludes[CF_MAX_EXCLUDES];
static unsigned int cf_nr_excludes;

int cf_exclude(const char *suite_test)
{
	if (cf_nr_excludes >= CF_MAX_EXCLUDES || !strchr(suite_test, '/'))
		return -1;
	cf_excludes[cf_nr_excludes++] = suite_test;
	return 0;
}

static bool cf_excluded(const char *suite, const char *test)
{
	size_t n = strlen(suite);
	unsigned int i;

	for (i = 0; i < cf_nr_excludes; i++)
		if (!strncmp(cf_excludes[i], suite, n) &&
		    cf_excludes[i][n] == '/' &&
		    !strcmp(cf_excludes[i] + n + 1, test))
			return true;
	return false;
}

/* The body of a test excluded with -x: a skip, so that it stands in the
 * run and its reports as one. */
static void cf_test_excluded(void)
{
	cf_skip("excluded by -x");
}

/* Add t to suite; an excluded one as a skip. */
static void cf_test_register(CU_pSuite suite, const struct cf_test_entry *t)
{
	CU_add_test(suite, t->name,
		    cf_excluded(suite->pName, t->name) ? cf_test_excluded
						       : t->fn);
}

/* Add the suite s and its tests, unless the filter leaves it out. */
static void cf_suite_register(const struct cf_suite_entry *s,
			      const char *filter)
{
	CU_pSuite suite;
	size_t i;

	if (filter && !strstr(s->name, filter))
		return;
	suite = CU_add_suite(s->name, s->init, s->cleanup);
	if (!suite)
		return;
	for (i = 0; i < CF_ARRAY_SIZE(cf_tests); i++)
		if (!strcmp(cf_tests[i].suite, s->name))
			cf_test_register(suite, &cf_tests[i]);
}

void cf_tests_register(const char *suite_filter)
{
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(cf_suites); i++)
		cf_suite_register(&cf_suites[i], suite_filter);
}
