// SPDX-License-Identifier: MIT
/* The shared-memory files of a node (see shmfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "shmfile.h"

#define SHMFILE_BASE_DEFAULT "/dev/shm"
/* posix_fallocate on tmpfs gives up with EINTR when a signal arrives. */
#define SHMFILE_ALLOC_ATTEMPTS 16

static const char *shmfile_base(void)
{
	const char *env = getenv("IBEMU_SHM_DIR");

	return env && *env ? env : SHMFILE_BASE_DEFAULT;
}

static int shmfile_dir_path(char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/ibemu-%u", shmfile_base(),
			 (unsigned int)getuid());

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int shmfile_path(char *buf, size_t len, const char *name)
{
	char dir[PATH_MAX];
	int n;

	if (shmfile_dir_path(dir, sizeof(dir)))
		return -ENAMETOOLONG;
	n = snprintf(buf, len, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * Open the user's directory, creating it if create; a descriptor or
 * -errno.  Anything but a directory of ours that no one else may enter is
 * refused with a message naming it (unless quiet).
 */
static int shmfile_dir_open(bool create, bool quiet)
{
	char path[PATH_MAX];
	uid_t uid = getuid();
	struct stat st;
	int fd, err;

	if (shmfile_dir_path(path, sizeof(path))) {
		if (!quiet)
			ibemu_log_err("IBEMU_SHM_DIR=%s: path too long",
				      shmfile_base());
		return -ENAMETOOLONG;
	}
	if (create && mkdir(path, 0700) && errno != EEXIST) {
		err = errno;
		if (!quiet)
			ibemu_log_err("cannot create %s: %s", path,
				      strerror(err));
		return -err;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		if (quiet)
			return -err;
		if (err == ELOOP || err == ENOTDIR) {
			ibemu_log_err("%s is not a directory (a symbolic link "
				      "or a file put there by someone): "
				      "remove it, or set IBEMU_SHM_DIR",
				      path);
			return -EPERM;
		}
		ibemu_log_err("cannot open %s: %s", path, strerror(err));
		return -err;
	}
	if (fstat(fd, &st)) {
		err = errno;
		close(fd);
		return -err;
	}
	if (st.st_uid != uid) {
		if (!quiet)
			ibemu_log_err("%s belongs to uid %u, not to uid %u: "
				      "another user made it; remove it (as "
				      "root) or set IBEMU_SHM_DIR",
				      path, (unsigned int)st.st_uid,
				      (unsigned int)uid);
		close(fd);
		return -EPERM;
	}
	if (st.st_mode & 077) {
		if (!quiet)
			ibemu_log_err("%s has mode %03o: others may use it; "
				      "chmod 700 it",
				      path, (unsigned int)(st.st_mode & 0777));
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* One line: what needed how much, and how much room there is. */
static void shmfile_log_no_room(int dfd, const char *what, size_t size, int err)
{
	char path[PATH_MAX] = "";
	struct statvfs sv;

	shmfile_dir_path(path, sizeof(path));
	if (fstatvfs(dfd, &sv)) {
		ibemu_log_err("cannot allocate the %s (%zu KiB) in %s: %s",
			      what, size >> 10, shmfile_base(), strerror(err));
		return;
	}
	ibemu_log_err("cannot allocate the %s (%zu KiB) in %s: %s; %s has "
		      "%llu KiB free of %llu KiB (a larger one: e.g. docker "
		      "run --shm-size)",
		      what, size >> 10, shmfile_base(), strerror(err),
		      shmfile_base(),
		      (unsigned long long)sv.f_bavail * sv.f_frsize >> 10,
		      (unsigned long long)sv.f_blocks * sv.f_frsize >> 10);
}

int shmfile_create(const char *name, size_t size, const char *what,
		   int (*prepare)(int fd), void **map_p, int *fd_p)
{
	int dfd, fd, ret, attempt;
	void *map;

	dfd = shmfile_dir_open(true, false);
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, name,
		    O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		if (ret != -EEXIST)
			ibemu_log_err("cannot create the %s %s: %s", what, name,
				      strerror(-ret));
		close(dfd);
		return ret;
	}
	if (prepare) {
		ret = prepare(fd);
		if (ret)
			goto err_unlink;
	}
	/* Every page now, so no one touching the mapping can fault on one
	 * tmpfs cannot give (SIGBUS). */
	for (attempt = 0; attempt < SHMFILE_ALLOC_ATTEMPTS; attempt++) {
		ret = posix_fallocate(fd, 0, (off_t)size);
		if (ret != EINTR)
			break;
	}
	if (ret) {
		shmfile_log_no_room(dfd, what, size, ret);
		ret = -ret;
		goto err_unlink;
	}
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		ret = -errno;
		ibemu_log_err("cannot map the %s: %s", what, strerror(-ret));
		goto err_unlink;
	}
	if (fd_p)
		*fd_p = fd;
	else
		close(fd);
	close(dfd);
	*map_p = map;
	return 0;

err_unlink:
	unlinkat(dfd, name, 0);
	close(fd);
	close(dfd);
	return ret;
}

int shmfile_open(const char *name, const char *what)
{
	uid_t uid = getuid();
	struct stat st;
	int dfd, fd, ret;

	dfd = shmfile_dir_open(true, false);
	if (dfd < 0)
		return dfd;
	fd = openat(dfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	ret = fd < 0 ? -errno : 0;
	close(dfd);
	if (ret) {
		if (ret != -ENOENT)
			ibemu_log_err("cannot open the %s %s: %s", what, name,
				      strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		close(fd);
		return ret;
	}
	/* Our own directory holds only what we put there; check anyway. */
	if (!S_ISREG(st.st_mode) || st.st_uid != uid || (st.st_mode & 077)) {
		ibemu_log_err("the %s %s is not a private file of uid %u", what,
			      name, (unsigned int)uid);
		close(fd);
		return -EPERM;
	}
	return fd;
}

int shmfile_map(int fd, size_t size, void **map_p)
{
	struct stat st;
	void *map;

	/* Never map past the end: a page there is a SIGBUS. */
	if (fstat(fd, &st))
		return -errno;
	if (st.st_size < 0 || (unsigned long long)st.st_size < size)
		return -EAGAIN;
	map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	*map_p = map;
	return 0;
}

void shmfile_unlink(const char *name)
{
	int dfd = shmfile_dir_open(false, true);

	if (dfd < 0)
		return;
	unlinkat(dfd, name, 0);
	close(dfd);
}

void shmfile_unlink_node(const char *node)
{
	char pattern[PATH_MAX], name[128];
	glob_t g;
	size_t i;

	snprintf(name, sizeof(name), "v*-%s*", node);
	if (shmfile_path(pattern, sizeof(pattern), name))
		return;
	if (glob(pattern, 0, NULL, &g))
		return;
	for (i = 0; i < g.gl_pathc; i++)
		unlink(g.gl_pathv[i]);
	globfree(&g);
}

void shmfile_unlink_if_same(const char *name, int fd)
{
	struct stat mine, now;
	int dfd;

	if (fstat(fd, &mine))
		return;
	dfd = shmfile_dir_open(false, true);
	if (dfd < 0)
		return;
	if (!fstatat(dfd, name, &now, AT_SYMLINK_NOFOLLOW) &&
	    now.st_ino == mine.st_ino && now.st_dev == mine.st_dev) {
		ibemu_log_warn("removing stale %s", name);
		unlinkat(dfd, name, 0);
	}
	close(dfd);
}
