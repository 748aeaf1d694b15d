/* SPDX-License-Identifier: MIT */
/*
 * The tests of test-list.h: the macros that define them in the
 * test_<suite>.c files, and their declarations, made from the list.
 */
#ifndef IBEMU_CONFORMANCE_TESTS_H
#define IBEMU_CONFORMANCE_TESTS_H

#include "peer.h"

/* A one-process test, run by CUnit with the suite's fixture. */
#define CF_TEST_IMPL(suite, test) void cf_test_##suite##_##test(void)
/* The body of two-process tests, run on both sides (see peer.h). */
#define CF_BODY_IMPL(suite, body)					\
	int cf_body_##suite##_##body(struct cf_ep *ep)
/* Adjusts the parameters p of a two-process run with argument arg. */
#define CF_TUNE_IMPL(tune)						\
	void cf_tune_##tune(struct cf_peer_params *p, long arg)

/* The tune that leaves the parameters as they are. */
CF_TUNE_IMPL(none);

#define CF_SUITE(suite, init, cleanup)
#define CF_TEST(suite, test, rule) CF_TEST_IMPL(suite, test);
#define CF_PEER(suite, test, rule, body, tune, ...)				\
	CF_BODY_IMPL(suite, body);					\
	CF_TUNE_IMPL(tune);
#include "test-list.h"
#undef CF_SUITE
#undef CF_TEST
#undef CF_PEER

#endif /* IBEMU_CONFORMANCE_TESTS_H */
