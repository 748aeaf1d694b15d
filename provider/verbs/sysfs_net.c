// SPDX-License-Identifier: MIT
/*
 * ibemu0's network interface, where programs look for it in sysfs.
 *
 * The kernel links an RDMA device to the net device it runs over: for
 * rxe, /sys/class/infiniband/rxe0/device is the net device's parent, and
 * its net/ directory names the interface (rxe_net.c: the device's
 * dma_device is the netdev's).  rdma-core's Python tests find the IP
 * address of the device that way (tests/base.py _get_ip_mac: stat of
 * <sysfs>/class/infiniband/<dev>/device/net/, then `ls` of it, then
 * `ip addr show` of its first entry) and skip every RDMA CM test when it
 * is missing.
 *
 * ibemu0's interface is the one its node's address is on (doc/design.md
 * §6 "The node's place on the IP fabric"; `ibemu status` prints it).  So
 * under the preload, and only once the real call has failed with ENOENT,
 * exactly two paths answer: <sysfs>/class/infiniband/ibemu0/device/net
 * as a directory holding one entry, the interface's name, and that entry
 * as a directory (the probes in devnode.c: stat, stat64, statx).  A node
 * without an address has no interface, and the paths stay absent.
 * Nothing else under the device is answered, nothing is created under
 * /sys, and any other path goes to the C library untouched.
 *
 * Listing the directory (opendir, readdir, readdir64, rewinddir,
 * closedir) gives a real DIR stream of an empty directory that was made
 * and removed again, so a call not interposed here (dirfd, telldir,
 * readdir_r) works on a real, empty stream; readdir returns ".", ".."
 * and the interface on it first.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ibemu.h"

#define SYSFS_NET_TAIL "/" IBEMU_DEVICE_NAME "/device/net"
#define SYSFS_NET_NR_ENTRIES 3 /* ".", "..", the interface */

/* struct dirent and struct dirent64 are one layout on the 64-bit
 * targets (x86-64, arm64): one entry serves readdir and readdir64. */
_Static_assert(sizeof(struct dirent) == sizeof(struct dirent64) &&
		       offsetof(struct dirent, d_name) ==
			       offsetof(struct dirent64, d_name),
	       "struct dirent and struct dirent64 differ");

/* One listing of the net directory.  Lock rule: the list and every
 * entry's next and pos are under sysfs_net_lock. */
struct sysfs_net_dir {
	struct sysfs_net_dir *next;
	DIR *dir; /* the real stream of a removed, empty directory */
	unsigned int pos; /* entries returned so far */
	char ifname[IFNAMSIZ];
	struct dirent entry;
};

static pthread_mutex_t sysfs_net_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sysfs_net_dir *sysfs_net_dirs;
static atomic_uint sysfs_net_nr_dirs; /* nonzero: look the DIR up */

void *ibemu_libc_next(const char *name, void *_Atomic *slot)
{
	void *fn = atomic_load_explicit(slot, memory_order_acquire);

	if (!fn) {
		/* Two threads may both look: they store the same address. */
		fn = dlsym(RTLD_NEXT, name);
		atomic_store_explicit(slot, fn, memory_order_release);
	}
	return fn;
}

/* The C library's own directory calls, found once. */
static void *_Atomic libc_opendir, *_Atomic libc_readdir,
	*_Atomic libc_readdir64, *_Atomic libc_rewinddir,
	*_Atomic libc_closedir;

enum sysfs_net_kind ibemu_sysfs_net_kind(const char *path, char *ifname,
					 size_t len)
{
	char want[PATH_MAX];
	const char *rest;
	size_t n;

	if (!path || ibemu_sysfs_class_path(want, sizeof(want)) ||
	    strlen(want) + sizeof(SYSFS_NET_TAIL) > sizeof(want))
		return SYSFS_NET_NONE;
	strcat(want, SYSFS_NET_TAIL);
	n = strlen(want);
	if (strncmp(path, want, n))
		return SYSFS_NET_NONE;
	rest = path + n;
	if (*rest && *rest != '/')
		return SYSFS_NET_NONE;
	while (*rest == '/')
		rest++;
	if (emu_node_ifname(ifname, len))
		return SYSFS_NET_NONE;
	if (!*rest || !strcmp(rest, ".") || !strcmp(rest, "./"))
		return SYSFS_NET_DIR;
	n = strlen(ifname);
	if (!strncmp(rest, ifname, n) && !strcspn(rest + n, "/") &&
	    !rest[n + strspn(rest + n, "/")])
		return SYSFS_NET_IFACE;
	return SYSFS_NET_NONE;
}

/* A real stream that lists nothing: a directory made and removed. */
static DIR *sysfs_net_empty_stream(void)
{
	DIR *(*real_opendir)(const char *) =
		ibemu_libc_next("opendir", &libc_opendir);
	const char *bases[] = { getenv("TMPDIR"), "/tmp", "/dev/shm" };
	char tmp[PATH_MAX];
	DIR *dir;
	size_t i;

	if (!real_opendir)
		return NULL;
	for (i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
		if (!bases[i] || !*bases[i] ||
		    snprintf(tmp, sizeof(tmp), "%s/ibemu-net-XXXXXX",
			     bases[i]) >= (int)sizeof(tmp) ||
		    !mkdtemp(tmp))
			continue;
		dir = real_opendir(tmp);
		rmdir(tmp);
		if (dir)
			return dir;
	}
	return NULL;
}

IBEMU_EXPORT DIR *ibemu_sysfs_net_opendir(const char *path)
	__asm__("opendir");
IBEMU_EXPORT DIR *ibemu_sysfs_net_opendir(const char *path)
{
	DIR *(*real_opendir)(const char *) =
		ibemu_libc_next("opendir", &libc_opendir);
	struct sysfs_net_dir *nd;
	char ifname[IFNAMSIZ];
	int saved = errno;
	DIR *dir;

	if (!real_opendir) {
		errno = ENOSYS;
		return NULL;
	}
	dir = real_opendir(path);
	if (dir || errno != ENOENT)
		return dir;
	if (ibemu_sysfs_net_kind(path, ifname, sizeof(ifname)) !=
	    SYSFS_NET_DIR)
		goto out_absent;
	nd = calloc(1, sizeof(*nd));
	if (!nd)
		goto out_absent;
	nd->dir = sysfs_net_empty_stream();
	if (!nd->dir) {
		free(nd);
		goto out_absent;
	}
	strcpy(nd->ifname, ifname);
	pthread_mutex_lock(&sysfs_net_lock);
	nd->next = sysfs_net_dirs;
	sysfs_net_dirs = nd;
	atomic_fetch_add(&sysfs_net_nr_dirs, 1);
	pthread_mutex_unlock(&sysfs_net_lock);
	errno = saved;
	return nd->dir;
out_absent:
	errno = ENOENT;
	return NULL;
}

/* The listing of dir, or NULL.  Called with sysfs_net_lock held. */
static struct sysfs_net_dir *sysfs_net_find_locked(DIR *dir)
{
	struct sysfs_net_dir *nd;

	for (nd = sysfs_net_dirs; nd; nd = nd->next)
		if (nd->dir == dir)
			return nd;
	return NULL;
}

/* The listing's next entry, or NULL when it has given them all.
 * Called with sysfs_net_lock held. */
static struct dirent *sysfs_net_next_locked(struct sysfs_net_dir *nd)
{
	static const char *const dots[] = { ".", ".." };
	struct dirent *ent = &nd->entry;

	if (nd->pos >= SYSFS_NET_NR_ENTRIES)
		return NULL;
	memset(ent, 0, sizeof(*ent));
	snprintf(ent->d_name, sizeof(ent->d_name), "%s",
		 nd->pos < 2 ? dots[nd->pos] : nd->ifname);
	ent->d_ino = nd->pos + 1;
	ent->d_type = DT_DIR;
	ent->d_reclen = sizeof(*ent);
	nd->pos++;
	ent->d_off = nd->pos;
	return ent;
}

/* readdir and readdir64 of a listing; *found_p false: not one. */
static struct dirent *sysfs_net_readdir(DIR *dir, bool *found_p)
{
	struct sysfs_net_dir *nd;
	struct dirent *ent = NULL;

	*found_p = false;
	if (!atomic_load(&sysfs_net_nr_dirs))
		return NULL;
	pthread_mutex_lock(&sysfs_net_lock);
	nd = sysfs_net_find_locked(dir);
	if (nd) {
		*found_p = true;
		ent = sysfs_net_next_locked(nd);
	}
	pthread_mutex_unlock(&sysfs_net_lock);
	return ent;
}

IBEMU_EXPORT struct dirent *ibemu_sysfs_net_readdir(DIR *dir)
	__asm__("readdir");
IBEMU_EXPORT struct dirent *ibemu_sysfs_net_readdir(DIR *dir)
{
	struct dirent *(*real_readdir)(DIR *) =
		ibemu_libc_next("readdir", &libc_readdir);
	struct dirent *ent;
	bool found;

	ent = sysfs_net_readdir(dir, &found);
	if (found)
		return ent;
	if (!real_readdir) {
		errno = ENOSYS;
		return NULL;
	}
	return real_readdir(dir);
}

IBEMU_EXPORT struct dirent64 *ibemu_sysfs_net_readdir64(DIR *dir)
	__asm__("readdir64");
IBEMU_EXPORT struct dirent64 *ibemu_sysfs_net_readdir64(DIR *dir)
{
	struct dirent64 *(*real_readdir64)(DIR *) =
		ibemu_libc_next("readdir64", &libc_readdir64);
	struct dirent *ent;
	bool found;

	ent = sysfs_net_readdir(dir, &found);
	if (found)
		return (struct dirent64 *)ent;
	if (!real_readdir64) {
		errno = ENOSYS;
		return NULL;
	}
	return real_readdir64(dir);
}

IBEMU_EXPORT void ibemu_sysfs_net_rewinddir(DIR *dir) __asm__("rewinddir");
IBEMU_EXPORT void ibemu_sysfs_net_rewinddir(DIR *dir)
{
	void (*real_rewinddir)(DIR *) =
		ibemu_libc_next("rewinddir", &libc_rewinddir);
	struct sysfs_net_dir *nd;

	if (atomic_load(&sysfs_net_nr_dirs)) {
		pthread_mutex_lock(&sysfs_net_lock);
		nd = sysfs_net_find_locked(dir);
		if (nd)
			nd->pos = 0;
		pthread_mutex_unlock(&sysfs_net_lock);
	}
	if (real_rewinddir)
		real_rewinddir(dir);
}

IBEMU_EXPORT int ibemu_sysfs_net_closedir(DIR *dir) __asm__("closedir");
IBEMU_EXPORT int ibemu_sysfs_net_closedir(DIR *dir)
{
	int (*real_closedir)(DIR *) =
		ibemu_libc_next("closedir", &libc_closedir);
	struct sysfs_net_dir **p, *nd = NULL;

	if (atomic_load(&sysfs_net_nr_dirs)) {
		pthread_mutex_lock(&sysfs_net_lock);
		for (p = &sysfs_net_dirs; *p; p = &(*p)->next) {
			if ((*p)->dir == dir) {
				nd = *p;
				*p = nd->next;
				atomic_fetch_sub(&sysfs_net_nr_dirs, 1);
				break;
			}
		}
		pthread_mutex_unlock(&sysfs_net_lock);
		free(nd);
	}
	if (!real_closedir) {
		errno = ENOSYS;
		return -1;
	}
	return real_closedir(dir);
}
