// SPDX-License-Identifier: MIT
/*
 * The device node, as programs probe it.
 *
 * ibemu0 has no character device: libibverbs opens none for a device
 * without sysfs (doc/design.md §4).  Some verbs users check for one before
 * they take a device: UCX skips any device whose /dev/infiniband/<dev_name>
 * is not a character device it may read and write (uct_ib_device_is_
 * accessible).  Once the preload offers ibemu0, stat() and access() of
 * exactly that path answer as for a uverbs node of mode 0666; every other
 * path, and every call before ibemu0 is offered, goes to the C library.
 * Nothing under /dev is created or touched.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "ibemu.h"

#define DEVNODE_DIR "/dev/infiniband/"
/* The uverbs character devices' major (Linux devices.txt); a minor past
 * the kernel's 32 uverbs nodes. */
#define DEVNODE_MAJOR 231
#define DEVNODE_MINOR 255

static atomic_bool devnode_offered;

void ibemu_devnode_offer(void)
{
	atomic_store_explicit(&devnode_offered, true, memory_order_release);
}

/* Whether path names ibemu0's node while it is offered. */
static bool devnode_is_ours(const char *path)
{
	const char *name;

	if (!path || strncmp(path, DEVNODE_DIR, sizeof(DEVNODE_DIR) - 1) ||
	    !atomic_load_explicit(&devnode_offered, memory_order_acquire))
		return false;
	name = path + sizeof(DEVNODE_DIR) - 1;
	return !strcmp(name, "uverbs-" IBEMU_DEVICE_NAME);
}

static void devnode_stat(struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = S_IFCHR | 0666;
	st->st_rdev = makedev(DEVNODE_MAJOR, DEVNODE_MINOR);
	st->st_nlink = 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 4096;
}

/* stat@GLIBC_2.33 and access@GLIBC_2.2.5, the versions programs bind
 * to (libibemu.map); the real calls are fstatat and faccessat. */
IBEMU_EXPORT int ibemu_devnode_stat(const char *path, struct stat *st)
	__asm__("stat");
IBEMU_EXPORT int ibemu_devnode_stat(const char *path, struct stat *st)
{
	if (!devnode_is_ours(path))
		return fstatat(AT_FDCWD, path, st, 0);
	if (!st) {
		errno = EFAULT;
		return -1;
	}
	devnode_stat(st);
	return 0;
}

IBEMU_EXPORT int ibemu_devnode_access(const char *path, int mode)
	__asm__("access");
IBEMU_EXPORT int ibemu_devnode_access(const char *path, int mode)
{
	if (!devnode_is_ours(path))
		return faccessat(AT_FDCWD, path, mode, 0);
	if (mode & X_OK) {
		errno = EACCES;
		return -1;
	}
	return 0;
}
