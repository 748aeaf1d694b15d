// SPDX-License-Identifier: MIT
/*
 * A program without libibverbs that loads a verbs plug-in with
 * dlopen(RTLD_LOCAL) must see ibemu0 under the preload, as pyverbs, UCX
 * and Open MPI components do (tests/progs/verbs_plugin.c).
 *
 * Usage: dlopen_plugin PLUGIN.so [deepbind | late]
 *	deepbind: the plug-in is loaded RTLD_DEEPBIND, so its own calls bind
 *	to libibverbs before the global scope.
 *	late: a verbs function is called (found with dlsym(RTLD_DEFAULT))
 *	before any libibverbs is in the process; the plug-in comes after.
 * Exit: 0 ibemu0 listed once, 1 not.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
	int (*count)(const char *name);
	const char *mode = argc == 3 ? argv[2] : "";
	int flags = RTLD_NOW | RTLD_LOCAL;
	void *h;
	int n;

	if (argc < 2 || argc > 3 ||
	    (*mode && strcmp(mode, "deepbind") && strcmp(mode, "late"))) {
		fprintf(stderr, "usage: %s PLUGIN.so [deepbind | late]\n",
			argv[0]);
		return 2;
	}
	if (!strcmp(mode, "deepbind"))
		flags |= RTLD_DEEPBIND;
	/* Nothing of libibverbs before the plug-in comes. */
	if (dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD)) {
		fprintf(stderr, "FAIL: libibverbs is loaded before the plug-in\n");
		return 1;
	}
	if (!strcmp(mode, "late")) {
		void *(*list)(int *num);

		/* The preload's ibv_get_device_list, with no libibverbs yet:
		 * it fails, and must not keep failing once one is loaded. */
		*(void **)&list = dlsym(RTLD_DEFAULT, "ibv_get_device_list");
		if (list && list(NULL)) {
			fprintf(stderr, "FAIL: a device list without libibverbs\n");
			return 1;
		}
	}
	h = dlopen(argv[1], flags);
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
	printf("ibemu0 listed %d time(s) through a RTLD_LOCAL%s plug-in%s\n", n,
	       flags & RTLD_DEEPBIND ? "|RTLD_DEEPBIND" : "",
	       !strcmp(mode, "late") ? " loaded after a verbs call" : "");
	return n == 1 ? 0 : 1;
}
