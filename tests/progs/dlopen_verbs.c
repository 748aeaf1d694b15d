// SPDX-License-Identifier: MIT
/*
 * A program without libibverbs that loads it itself with dlopen() and
 * takes its functions with dlsym() on that handle must see ibemu0 once
 * under the preload and its audit module (provider/verbs/audit.c).
 *
 * Exit: 0 ibemu0 listed once, 1 not.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

struct ibv_device;

int main(void)
{
	struct ibv_device **(*get_list)(int *num);
	const char *(*get_name)(struct ibv_device *dev);
	void (*free_list)(struct ibv_device **list);
	struct ibv_device **list;
	int i, n = 0, found = 0;
	void *h;

	h = dlopen("libibverbs.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "FAIL: %s\n", dlerror());
		return 1;
	}
	*(void **)&get_list = dlsym(h, "ibv_get_device_list");
	*(void **)&get_name = dlsym(h, "ibv_get_device_name");
	*(void **)&free_list = dlsym(h, "ibv_free_device_list");
	if (!get_list || !get_name || !free_list) {
		fprintf(stderr, "FAIL: %s\n", dlerror());
		return 1;
	}
	list = get_list(&n);
	for (i = 0; list && i < n; i++)
		found += !strcmp(get_name(list[i]), "ibemu0");
	if (list)
		free_list(list);
	printf("ibemu0 listed %d time(s) through dlopen and dlsym\n", found);
	return found == 1 ? 0 : 1;
}
