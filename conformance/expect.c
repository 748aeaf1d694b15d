// SPDX-License-Identifier: MIT
/*
 * Known deviations (-E FILE): tests a device kind is known to fail, each
 * with the reason (the clause it breaks), as libfabric's fabtests keep
 * exclude lists.  A listed test that fails is an expected failure: the
 * run stays green and the reports say why; a failure not listed is a new
 * deviation and fails the run; a listed test that passes is said (the
 * list may be stale).
 *
 * The file: one "SUITE/TEST reason..." per line; blank lines and lines
 * starting with '#' are ignored; anything else is reported with its
 * file:line and makes the run a usage error.
 *
 * Lock rule: none; read once before the run, on its one thread.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

#define CF_EXPECT_MAX 512

static struct cf_expect {
	char *name; /* SUITE/TEST */
	char *why;
} cf_expects[CF_EXPECT_MAX];
static unsigned int cf_nr_expects;

/* One line: 0, or -1 (said). */
static int cf_expect_line(const char *path, unsigned int lineno, char *line)
{
	char *name, *why, *slash;

	while (isspace((unsigned char)*line))
		line++;
	if (!*line || *line == '#')
		return 0;
	name = line;
	while (*line && !isspace((unsigned char)*line))
		line++;
	if (*line)
		*line++ = '\0';
	while (isspace((unsigned char)*line))
		line++;
	why = line;
	why[strcspn(why, "\r\n")] = '\0';
	slash = strchr(name, '/');
	if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/') ||
	    !*why) {
		fprintf(stderr,
			"%s:%u: expected \"SUITE/TEST reason\", got \"%s\"\n",
			path, lineno, name);
		return -1;
	}
	*slash = '\0';
	if (!cf_test_rule(name, slash + 1)) {
		fprintf(stderr, "%s:%u: %s/%s is no test of the suite\n", path,
			lineno, name, slash + 1);
		return -1;
	}
	*slash = '/';
	if (cf_expect_reason(name)) {
		fprintf(stderr, "%s:%u: %s is listed twice\n", path, lineno,
			name);
		return -1;
	}
	if (cf_nr_expects == CF_EXPECT_MAX) {
		fprintf(stderr, "%s:%u: more than %d deviations\n", path,
			lineno, CF_EXPECT_MAX);
		return -1;
	}
	cf_expects[cf_nr_expects].name = strdup(name);
	cf_expects[cf_nr_expects].why = strdup(why);
	if (!cf_expects[cf_nr_expects].name || !cf_expects[cf_nr_expects].why)
		return -1;
	cf_nr_expects++;
	return 0;
}

int cf_expect_load(const char *path)
{
	char line[1024];
	unsigned int lineno = 0;
	int ret = 0;
	FILE *f;

	f = fopen(path, "r");
	if (!f) {
		fprintf(stderr, "ibemu-conformance: -E %s: %s\n", path,
			strerror(errno));
		return -1;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (cf_expect_line(path, lineno, line))
			ret = -1;
	}
	fclose(f);
	return ret;
}

const char *cf_expect_reason(const char *name)
{
	unsigned int i;

	for (i = 0; i < cf_nr_expects; i++)
		if (!strcmp(cf_expects[i].name, name))
			return cf_expects[i].why;
	return NULL;
}

const char *cf_expect_reason2(const char *suite, const char *test)
{
	char name[256];

	snprintf(name, sizeof(name), "%s/%s", suite, test);
	return cf_expect_reason(name);
}
