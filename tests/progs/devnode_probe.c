// SPDX-License-Identifier: MIT
/*
 * Probe ibemu0's device node as UCX does (uct_ib_device_is_accessible:
 * stat() and access() of /dev/infiniband/<dev_name>) after listing the
 * devices, through the C library calls a program binds to: they reach
 * the preload's interposers only when those carry the C library's symbol
 * versions of this architecture (provider/verbs/devnode.c,
 * libibemu-libc.map).
 *
 *   devnode_probe      exit 0 when ibemu0's node is a character device
 *                      that may be read and written, 1 otherwise
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <infiniband/verbs.h>

int main(void)
{
	struct ibv_device **list;
	char path[64 + IBV_SYSFS_NAME_MAX];
	struct stat st;
	int i, n, rc = 1;

	list = ibv_get_device_list(&n);
	if (!list) {
		perror("ibv_get_device_list");
		return 1;
	}
	for (i = 0; i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), "ibemu0"))
			break;
	if (i == n) {
		fprintf(stderr, "devnode_probe: no ibemu0 listed\n");
		goto out;
	}
	snprintf(path, sizeof(path), "/dev/infiniband/%s", list[i]->dev_name);
	if (stat(path, &st)) {
		perror(path);
		goto out;
	}
	if (!S_ISCHR(st.st_mode)) {
		fprintf(stderr, "%s: mode %o is not a character device\n", path,
			(unsigned)st.st_mode);
		goto out;
	}
	if (access(path, R_OK | W_OK)) {
		perror(path);
		goto out;
	}
	printf("%s: a character device, readable and writable\n", path);
	rc = 0;
out:
	ibv_free_device_list(list);
	return rc;
}
