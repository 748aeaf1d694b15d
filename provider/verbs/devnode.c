// SPDX-License-Identifier: MIT
/*
 * The device node, as programs probe it.
 *
 * ibemu0 has no character device: libibverbs opens none for a device
 * without sysfs (doc/design.md §4 "Device and contexts").  Some verbs
 * users check for one before they take a device: UCX skips any device
 * whose /dev/infiniband/<dev_name> is not a character device it may read
 * and write (uct_ib_device_is_
 * accessible).  Once the preload offers ibemu0, stat() and access() of
 * exactly that path answer as for a uverbs node of mode 0666; every other
 * path, and every call before ibemu0 is offered, goes to the C library.
 *
 * Open MPI's verbs components (opal_common_verbs_check_basics) take no
 * device unless <sysfs>/class/infiniband is a directory, and look before
 * they list devices.  Where that directory does not exist and libibverbs
 * is in the process, stat() of it answers as for an empty directory.
 * Nothing under /dev or /sys is created or touched.  ibemu0's net
 * directory (sysfs_net.c) answers stat, stat64 and statx here too.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
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

int ibemu_sysfs_class_path(char *buf, size_t len)
{
	const char *sysfs = getenv("SYSFS_PATH");
	size_t n;
	int ret;

	if (!sysfs || !*sysfs)
		sysfs = "/sys";
	n = strlen(sysfs);
	while (n > 1 && sysfs[n - 1] == '/')
		n--;
	ret = snprintf(buf, len, "%.*s/class/infiniband", (int)n, sysfs);
	return ret < 0 || (size_t)ret >= len ? -ENAMETOOLONG : 0;
}

/*
 * Whether path is the sysfs class directory of RDMA devices, as
 * libibverbs' ibv_get_sysfs_path() places it: $SYSFS_PATH without its
 * trailing slashes, else /sys.  Asked only after the real stat failed.
 */
static bool devnode_is_class_dir(const char *path)
{
	char want[PATH_MAX];
	size_t len;
	void *verbs;

	if (!path || ibemu_sysfs_class_path(want, sizeof(want)))
		return false;
	len = strlen(want);
	if (strncmp(path, want, len) || (path[len] && strcmp(path + len, "/")))
		return false;
	/* Only a process that has libibverbs: RTLD_NOLOAD never loads it. */
	verbs = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!verbs)
		return false;
	dlclose(verbs);
	return true;
}

/* Whether a path the C library found absent is one of the directories
 * ibemu answers for: the class directory, ibemu0's net directory and
 * its interface (sysfs_net.c). */
static bool devnode_is_absent_dir(const char *path)
{
	char ifname[IFNAMSIZ];

	return devnode_is_class_dir(path) ||
	       ibemu_sysfs_net_kind(path, ifname, sizeof(ifname)) !=
		       SYSFS_NET_NONE;
}

static void devnode_stat(struct stat *st, mode_t mode)
{
	memset(st, 0, sizeof(*st));
	st->st_mode = mode;
	if (S_ISCHR(mode))
		st->st_rdev = makedev(DEVNODE_MAJOR, DEVNODE_MINOR);
	st->st_nlink = S_ISDIR(mode) ? 2 : 1;
	st->st_uid = getuid();
	st->st_gid = getgid();
	st->st_blksize = 4096;
}

/* stat@GLIBC_2.33, stat64@GLIBC_2.33, statx@GLIBC_2.28 and
 * access@GLIBC_2.2.5 on x86-64, the versions programs bind to
 * (libibemu-libc.map); the real calls are fstatat, statx and faccessat. */
static int devnode_stat_path(const char *path, struct stat *st)
{
	int saved, ret;

	if (!devnode_is_ours(path)) {
		saved = errno;
		ret = fstatat(AT_FDCWD, path, st, 0);
		if (ret == 0 || errno != ENOENT || !st)
			return ret;
		if (!devnode_is_absent_dir(path)) {
			errno = ENOENT;
			return ret;
		}
		errno = saved;
		devnode_stat(st, S_IFDIR | 0755);
		return 0;
	}
	if (!st) {
		errno = EFAULT;
		return -1;
	}
	devnode_stat(st, S_IFCHR | 0666);
	return 0;
}

IBEMU_EXPORT int ibemu_devnode_stat(const char *path, struct stat *st)
	__asm__("stat");
IBEMU_EXPORT int ibemu_devnode_stat(const char *path, struct stat *st)
{
	return devnode_stat_path(path, st);
}

/* struct stat64 is struct stat on the 64-bit targets (x86-64, arm64). */
_Static_assert(sizeof(struct stat) == sizeof(struct stat64),
	       "struct stat and struct stat64 differ");

IBEMU_EXPORT int ibemu_devnode_stat64(const char *path, struct stat64 *st)
	__asm__("stat64");
IBEMU_EXPORT int ibemu_devnode_stat64(const char *path, struct stat64 *st)
{
	return devnode_stat_path(path, (struct stat *)st);
}

#ifdef HAVE_STATX
/* statx of a path stat answers for: the fields stat gives. */
static void devnode_statx_from(struct statx *stx, const struct stat *st)
{
	memset(stx, 0, sizeof(*stx));
	stx->stx_mask = STATX_BASIC_STATS & ~(unsigned int)STATX_INO;
	stx->stx_mode = st->st_mode;
	stx->stx_nlink = st->st_nlink;
	stx->stx_uid = st->st_uid;
	stx->stx_gid = st->st_gid;
	stx->stx_blksize = st->st_blksize;
	stx->stx_rdev_major = major(st->st_rdev);
	stx->stx_rdev_minor = minor(st->st_rdev);
}

IBEMU_EXPORT int ibemu_devnode_statx(int dirfd, const char *path, int flags,
				     unsigned int mask, struct statx *stx)
	__asm__("statx");
IBEMU_EXPORT int ibemu_devnode_statx(int dirfd, const char *path, int flags,
				     unsigned int mask, struct statx *stx)
{
	static void *_Atomic libc_statx;
	int (*real_statx)(int, const char *, int, unsigned int,
			  struct statx *) =
		ibemu_libc_next("statx", &libc_statx);
	struct stat st;
	int saved = errno, ret;

	/* Absolute paths only: those are the ones answered. */
	if (!devnode_is_ours(path) || !stx) {
		if (!real_statx) {
			errno = ENOSYS;
			return -1;
		}
		ret = real_statx(dirfd, path, flags, mask, stx);
		if (ret == 0 || errno != ENOENT || !stx || !path ||
		    path[0] != '/')
			return ret;
		if (!devnode_is_absent_dir(path)) {
			errno = ENOENT;
			return ret;
		}
		devnode_stat(&st, S_IFDIR | 0755);
	} else {
		devnode_stat(&st, S_IFCHR | 0666);
	}
	errno = saved;
	devnode_statx_from(stx, &st);
	return 0;
}
#endif

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
