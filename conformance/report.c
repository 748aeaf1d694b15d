// SPDX-License-Identifier: MIT
/*
 * Reports for CI systems beside CUnit's console output: TAP (version 13)
 * and JUnit XML, one line or element per test, with its verdict: passed,
 * failed (each failed assertion with its file and line), a known
 * deviation (failed, and listed with -E: expect.c), or skipped (with the
 * reason cf_skip gave).  Written once the run has ended, from the CUnit
 * registry and failure list and the skips recorded here.
 *
 * Lock rule: none; the suite runs on one thread of one process (a
 * child's verdicts reach the parent through the peer harness).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/CUnit.h>
#include <CUnit/TestDB.h>
#include <CUnit/TestRun.h>

#include "conformance.h"

struct cf_note *cf_note_append(struct cf_note ***tail_p, const char *suite,
			       const char *test, const char *text)
{
	struct cf_note *n = calloc(1, sizeof(*n));

	if (!n)
		return NULL;
	n->suite = strdup(suite);
	n->test = strdup(test);
	n->text = strdup(text);
	if (!n->suite || !n->test || !n->text) {
		free(n->suite);
		free(n->test);
		free(n->text);
		free(n);
		return NULL;
	}
	**tail_p = n;
	*tail_p = &n->next;
	return n;
}

/* The skipped tests, each with its reason. */
static struct cf_note *cf_skips, **cf_skips_tail = &cf_skips;

void cf_report_skip(const char *suite, const char *test, const char *why)
{
	cf_note_append(&cf_skips_tail, suite, test, why);
}

void cf_report_skips_by_reason(FILE *out)
{
	const struct cf_note *s, *t;
	unsigned int n;
	bool first;

	for (s = cf_skips; s; s = s->next) {
		/* Each reason once, at its first skip. */
		for (t = cf_skips; t != s && strcmp(t->text, s->text);
		     t = t->next)
			;
		if (t != s)
			continue;
		for (n = 0, t = s; t; t = t->next)
			n += !strcmp(t->text, s->text);
		fprintf(out, "skipped: %u: %s:", n, s->text);
		for (first = true, t = s; t; t = t->next)
			if (!strcmp(t->text, s->text)) {
				fprintf(out, "%s %s/%s", first ? "" : ",",
					t->suite, t->test);
				first = false;
			}
		fputc('\n', out);
	}
}

static const char *cf_skip_reason(const char *suite, const char *test)
{
	const struct cf_note *s;

	for (s = cf_skips; s; s = s->next)
		if (!strcmp(s->suite, suite) && !strcmp(s->test, test))
			return s->text;
	return NULL;
}

/* The failures CUnit recorded for a test (test NULL: its suite's set-up
 * or tear-down). */
static unsigned int cf_failures_of(CU_pSuite suite, CU_pTest test)
{
	CU_pFailureRecord f;
	unsigned int n = 0;

	for (f = CU_get_failure_list(); f; f = f->pNext)
		if (f->pSuite == suite && f->pTest == test)
			n++;
	return n;
}

/* Text in an XML attribute or element. */
static void cf_xml_text(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		switch (*s) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		default:
			/* Control characters have no place in XML 1.0. */
			fputc((unsigned char)*s < 0x20 && *s != '\n' &&
					      *s != '\t'
				      ? '?'
				      : *s,
			      out);
		}
	}
}

/* One line of TAP diagnostics: no newline may break the block. */
static void cf_tap_text(FILE *out, const char *s)
{
	for (; s && *s; s++)
		fputc(*s == '\n' || *s == '\r' ? ' ' : *s, out);
}

/* The same inside a YAML double-quoted string: quotes and backslashes
 * escaped, other control characters as spaces. */
static void cf_yaml_text(FILE *out, const char *s)
{
	for (; s && *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', out);
		fputc((unsigned char)*s < 0x20 ? ' ' : *s, out);
	}
}

/* Each failed assertion of a test (or of its suite's set-up): before,
 * file:line, between, the message on one line (text writes it), after. */
static void cf_failures_print(FILE *out, CU_pSuite suite, CU_pTest test,
			      const char *before, const char *between,
			      const char *after,
			      void (*text)(FILE *, const char *))
{
	CU_pFailureRecord f;

	for (f = CU_get_failure_list(); f; f = f->pNext) {
		if (f->pSuite != suite || (f->pTest != test && f->pTest))
			continue;
		fprintf(out, "%s%s:%u%s", before,
			f->strFileName ? f->strFileName : "?", f->uiLineNumber,
			between);
		text(out, f->strCondition);
		fputs(after, out);
	}
}

/* Walk every test of the registry: fn(suite, test, n) for each, n from 1. */
typedef void (*cf_each_fn)(FILE *out, CU_pSuite suite, CU_pTest test,
			   unsigned int n);

static unsigned int cf_each_test(FILE *out, cf_each_fn fn)
{
	CU_pTestRegistry reg = CU_get_registry();
	CU_pSuite suite;
	CU_pTest test;
	unsigned int n = 0;

	for (suite = reg ? reg->pSuite : NULL; suite; suite = suite->pNext)
		for (test = suite->pTest; test; test = test->pNext)
			if (fn)
				fn(out, suite, test, ++n);
			else
				n++;
	return n;
}

static bool cf_test_failed(CU_pSuite suite, CU_pTest test)
{
	return cf_failures_of(suite, test) || cf_failures_of(suite, NULL);
}

unsigned int cf_report_judge(void)
{
	CU_pTestRegistry reg = CU_get_registry();
	unsigned int unexpected = 0, expected = 0;
	CU_pSuite suite;
	CU_pTest test;
	const char *why;

	for (suite = reg ? reg->pSuite : NULL; suite; suite = suite->pNext)
		for (test = suite->pTest; test; test = test->pNext) {
			why = cf_expect_reason2(suite->pName, test->pName);
			if (!cf_test_failed(suite, test)) {
				if (why)
					printf("LISTED BUT PASSED: %s/%s (%s)\n",
					       suite->pName, test->pName, why);
				continue;
			}
			if (why) {
				printf("KNOWN DEVIATION: %s/%s: %s\n",
				       suite->pName, test->pName, why);
				expected++;
			} else {
				unexpected++;
			}
		}
	if (expected || unexpected)
		printf("Failed: %u new, %u known deviations\n", unexpected,
		       expected);
	return unexpected;
}

static void cf_tap_test(FILE *out, CU_pSuite suite, CU_pTest test,
			unsigned int n)
{
	const char *why = cf_skip_reason(suite->pName, test->pName);
	const char *known = cf_expect_reason2(suite->pName, test->pName);

	if (cf_test_failed(suite, test)) {
		fprintf(out, "not ok %u - %s/%s", n, suite->pName,
			test->pName);
		if (known) {
			fputs(" # TODO known deviation: ", out);
			cf_tap_text(out, known);
		}
		fputs("\n  ---\n  rule: \"", out);
		cf_yaml_text(out, cf_test_rule(suite->pName, test->pName));
		fputs("\"\n  failures:\n", out);
		cf_failures_print(out, suite, test, "    - at: ",
				  "\n      message: \"", "\"\n", cf_yaml_text);
		fputs("  ...\n", out);
	} else if (why) {
		fprintf(out, "ok %u - %s/%s # SKIP ", n, suite->pName,
			test->pName);
		cf_tap_text(out, why);
		fputc('\n', out);
	} else {
		fprintf(out, "ok %u - %s/%s\n", n, suite->pName, test->pName);
	}
	/* What the spec left to the device, as TAP diagnostics. */
	cf_choices_print(out, suite->pName, test->pName, "# device choice: ",
			 "\n");
}

/* A test's failed assertions, as <failure> elements or (a known
 * deviation) as lines of its <system-out>. */
static void cf_junit_failures(FILE *out, CU_pSuite suite, CU_pTest test,
			      bool known)
{
	CU_pFailureRecord f;

	for (f = CU_get_failure_list(); f; f = f->pNext) {
		if (f->pSuite != suite || (f->pTest != test && f->pTest))
			continue;
		if (!known)
			fputs("      <failure type=\"assertion\" message=\"",
			      out);
		cf_xml_text(out, f->strCondition);
		fputs(known ? " at " : "\">", out);
		cf_xml_text(out, f->strFileName);
		fprintf(out, known ? ":%u\n" : ":%u</failure>\n",
			f->uiLineNumber);
	}
}

/* One <system-out> of the device's choices, then the failures of a
 * known deviation. */
static void cf_junit_out(FILE *out, CU_pSuite suite, CU_pTest test,
			 bool known)
{
	char *text = NULL;
	size_t len = 0;
	FILE *mem;

	mem = open_memstream(&text, &len);
	if (!mem)
		return;
	cf_choices_print(mem, suite->pName, test->pName, "device choice: ",
			 "\n");
	fclose(mem);
	if (!known && !len) {
		free(text);
		return;
	}
	fputs("      <system-out>", out);
	cf_xml_text(out, text);
	if (known)
		cf_junit_failures(out, suite, test, true);
	fputs("</system-out>\n", out);
	free(text);
}

static void cf_junit_test(FILE *out, CU_pSuite suite, CU_pTest test,
			  unsigned int n)
{
	const char *why = cf_skip_reason(suite->pName, test->pName);
	const char *known = cf_expect_reason2(suite->pName, test->pName);
	bool failed = cf_test_failed(suite, test);

	(void)n;
	fputs("    <testcase classname=\"", out);
	cf_xml_text(out, suite->pName);
	fputs("\" name=\"", out);
	cf_xml_text(out, test->pName);
	fputs("\">\n", out);
	/* A known deviation is not a failure of the run: a skip with its
	 * reason, the failures in its output. */
	if (failed && known) {
		fputs("      <skipped message=\"known deviation: ", out);
		cf_xml_text(out, known);
		fputs("\"/>\n", out);
	} else if (failed) {
		cf_junit_failures(out, suite, test, false);
	} else if (why) {
		fputs("      <skipped message=\"", out);
		cf_xml_text(out, why);
		fputs("\"/>\n", out);
	}
	cf_junit_out(out, suite, test, failed && known);
	fputs("    </testcase>\n", out);
}

static FILE *cf_report_open(const char *path)
{
	FILE *out = fopen(path, "w");

	if (!out)
		fprintf(stderr, "ibemu-conformance: %s: %m\n", path);
	return out;
}

int cf_report_tap(const char *path)
{
	FILE *out = cf_report_open(path);

	if (!out)
		return -1;
	fputs("TAP version 13\n", out);
	fprintf(out, "1..%u\n", cf_each_test(out, NULL));
	fprintf(out, "# device %s, port %d, GID index %d\n", cf_dev_name,
		cf_port, cf_gid_index);
	cf_each_test(out, cf_tap_test);
	return fclose(out) ? -1 : 0;
}

int cf_report_junit(const char *path)
{
	CU_pTestRegistry reg = CU_get_registry();
	unsigned int tests, failed, skipped;
	FILE *out = cf_report_open(path);
	CU_pSuite suite;
	CU_pTest test;

	if (!out)
		return -1;
	fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", out);
	fputs("<testsuites name=\"ibemu-conformance ", out);
	cf_xml_text(out, cf_dev_name);
	fputs("\">\n", out);
	for (suite = reg ? reg->pSuite : NULL; suite; suite = suite->pNext) {
		tests = failed = skipped = 0;
		for (test = suite->pTest; test; test = test->pNext) {
			tests++;
			if (cf_test_failed(suite, test) &&
			    !cf_expect_reason2(suite->pName, test->pName))
				failed++;
			else if (cf_test_failed(suite, test) ||
				 cf_skip_reason(suite->pName, test->pName))
				skipped++;
		}
		fputs("  <testsuite name=\"", out);
		cf_xml_text(out, suite->pName);
		fprintf(out,
			"\" tests=\"%u\" failures=\"%u\" errors=\"0\" "
			"skipped=\"%u\">\n",
			tests, failed, skipped);
		for (test = suite->pTest; test; test = test->pNext)
			cf_junit_test(out, suite, test, 0);
		fputs("  </testsuite>\n", out);
	}
	fputs("</testsuites>\n", out);
	return fclose(out) ? -1 : 0;
}

int cf_report_deviations(const char *path)
{
	CU_pTestRegistry reg = CU_get_registry();
	FILE *out = cf_report_open(path);
	CU_pSuite suite;
	CU_pTest test;
	const char *known;
	unsigned int n = 0;

	if (!out)
		return -1;
	fprintf(out, "# deviations of %s, port %d: test, what the spec says "
		"(the known-deviations list), what the device did\n",
		cf_dev_name, cf_port);
	for (suite = reg ? reg->pSuite : NULL; suite; suite = suite->pNext)
		for (test = suite->pTest; test; test = test->pNext) {
			if (!cf_test_failed(suite, test))
				continue;
			known = cf_expect_reason2(suite->pName, test->pName);
			fprintf(out, "%s/%s: %s", suite->pName, test->pName,
				known ? "known: " : "NEW (not in the list)");
			if (known)
				cf_tap_text(out, known);
			fputs("\n  the spec: ", out);
			cf_tap_text(out, cf_test_rule(suite->pName,
						      test->pName));
			fputs("\n  the device:\n", out);
			cf_failures_print(out, suite, test, "  - ", ": ",
					  "\n", cf_tap_text);
			n++;
		}
	fprintf(out, "# %u deviation(s)\n", n);
	return fclose(out) ? -1 : 0;
}
