// SPDX-License-Identifier: MIT
/*
 * A program without libibverbs that loads a verbs plug-in with
 * dlopen(RTLD_LOCAL) must see ibemu0 under the preload, as pyverbs, UCX
 * and Open MPI components do (tests/verbs_plugin.c).
 *
 * Usage: dlopen_plugin PLUGIN.so
 * Exit: 0 ibemu0 listed once, 1 not.
 */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
	int (*count)(const char *name);
	void *h;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
		return 2;
	}
	/* Nothing of libibverbs before the plug-in comes. */
	if (dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
		fprintf(stderr, "FAIL: libibverbs is loaded before the plug-in\n");
		return 1;
	}
	h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "FAIL: %s\n", dlerror());
		return 1;
	}
	*(void **)&count = dlsym(h, "plugin_count_devices");
	if (!count) {
		fprintf(stderr, "FAIL: %s\n", dlerror());
		return 1;
	}
	n = count("ibemu0");
	printf("ibemu0 listed %d time(s) through a RTLD_LOCAL plug-in\n", n);
	return n == 1 ? 0 : 1;
}
