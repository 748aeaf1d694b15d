// SPDX-License-Identifier: MIT
/*
 * A plug-in linked with libibverbs, as a Python extension or a UCX
 * transport module is: the program loads it with dlopen(RTLD_LOCAL), so
 * libibverbs comes into the process outside the global scope
 * (tests/progs/dlopen_plugin.c).
 */
#include <string.h>
#include <infiniband/verbs.h>

int plugin_count_devices(const char *name);

/* The number of devices named name that libibverbs lists, or -1. */
int plugin_count_devices(const char *name)
{
	struct ibv_device **list;
	int i, n, found = 0;

	list = ibv_get_device_list(&n);
	if (!list)
		return -1;
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			found++;
	ibv_free_device_list(list);
	return found;
}
