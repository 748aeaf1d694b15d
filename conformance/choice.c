// SPDX-License-Identifier: MIT
/*
 * Device choices: what a test observed where the IBA and the verbs man
 * pages leave the behaviour to the device (an errno among several the
 * Linux stack gives, an optional transition, a value the device may
 * round).  A choice is reported, never failed: printed as
 * "CHOICE: SUITE/TEST: text", written under its test in the TAP and
 * JUnit files and gathered in the capability matrix, so that a CI user
 * sees what the device does without a red test.
 *
 * The three kinds of assertion of the suite (conformance.h):
 *   CF_CHECK / EP_CHECK     a requirement, with its clause: a device that
 *                           differs fails the test;
 *   CF_CHOICE / EP_CHOICE   left to the device: recorded here;
 *   SKIP / cf_ep_skip       needs a capability the device lacks: skipped,
 *                           the capability named.
 *
 * Lock rule: none; the suite runs on one thread of one process (a
 * child's choices reach the parent in its report, peer_check.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>
#include <CUnit/TestRun.h>

#include "conformance.h"

static struct cf_note *cf_choices, **cf_choices_tail = &cf_choices;

void cf_choice_add(const char *text)
{
	CU_pSuite suite = CU_get_current_suite();
	CU_pTest test = CU_get_current_test();
	struct cf_note *c;

	/* A choice is said once a test, however often it was seen. */
	for (c = cf_choices; c; c = c->next)
		if (suite && test && !strcmp(c->suite, suite->pName) &&
		    !strcmp(c->test, test->pName) && !strcmp(c->text, text))
			return;
	printf("\nCHOICE: %s/%s: %s\n", suite ? suite->pName : "?",
	       test ? test->pName : "?", text);
	fflush(stdout);
	cf_note_append(&cf_choices_tail, suite ? suite->pName : "?",
		       test ? test->pName : "?", text);
}

void cf_choice(const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	cf_choice_add(text);
}

void cf_choices_print(FILE *out, const char *suite, const char *test,
		      const char *before, const char *after)
{
	const struct cf_note *c;

	for (c = cf_choices; c; c = c->next) {
		if (suite && (strcmp(c->suite, suite) || strcmp(c->test, test)))
			continue;
		fputs(before, out);
		if (!suite)
			fprintf(out, "%s/%s: ", c->suite, c->test);
		for (const char *s = c->text; *s; s++)
			fputc(*s == '\n' ? ' ' : *s, out);
		fputs(after, out);
	}
}
