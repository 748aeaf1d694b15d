/* SPDX-License-Identifier: MIT */
/* The unit tests' CUnit driver: one suite, verbose, exit 1 on failure. */
#ifndef IBEMU_TESTS_UNIT_H
#define IBEMU_TESTS_UNIT_H

#include <CUnit/Basic.h>

struct unit_test {
	const char *name;
	CU_TestFunc fn;
};

static inline int unit_run(const char *suite, const struct unit_test *t)
{
	unsigned int failed;
	CU_pSuite s;

	if (CU_initialize_registry() != CUE_SUCCESS)
		return 1;
	s = CU_add_suite(suite, NULL, NULL);
	for (; t->name; t++)
		CU_add_test(s, t->name, t->fn);
	CU_basic_set_mode(CU_BRM_VERBOSE);
	CU_basic_run_tests();
	failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
	CU_cleanup_registry();
	return failed ? 1 : 0;
}

#endif /* IBEMU_TESTS_UNIT_H */
