// SPDX-License-Identifier: MIT
/* The shared-memory files of a node (see shmfile.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <stdatomic.h>
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

/*
 * The places the user's directory may be, in the order every process of
 * the user walks them, so that all of a node's processes settle on the
 * same one: BASE/ibemu-UID; if another user made that first, or it is
 * not a private directory, BASE/ibemu-UID-1 .. -SHMFILE_DIR_SPARES; then
 * $XDG_RUNTIME_DIR/ibemu, which no other user can take (shmfile.h).
 */
#define SHMFILE_DIR_SPARES 8
#define SHMFILE_DIR_RUNTIME (SHMFILE_DIR_SPARES + 1)

/* $XDG_RUNTIME_DIR if it is absolute and a directory only we may enter. */
static const char *shmfile_runtime_dir(void)
{
	const char *env = getenv("XDG_RUNTIME_DIR");
	struct stat st;

	if (!env || env[0] != '/' || lstat(env, &st))
		return NULL;
	if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() ||
	    (st.st_mode & 077))
		return NULL;
	return env;
}

/*
 * The path of place i: 0, -ENOENT when it is not to be tried (no usable
 * $XDG_RUNTIME_DIR), -ERANGE past the last, or -ENAMETOOLONG.
 */
static int shmfile_dir_place(unsigned int i, char *buf, size_t len)
{
	unsigned int uid = (unsigned int)getuid();
	const char *rt;
	int n;

	if (i == 0) {
		n = snprintf(buf, len, "%s/ibemu-%u", shmfile_base(), uid);
	} else if (i <= SHMFILE_DIR_SPARES) {
		n = snprintf(buf, len, "%s/ibemu-%u-%u", shmfile_base(), uid,
			     i);
	} else if (i == SHMFILE_DIR_RUNTIME) {
		rt = shmfile_runtime_dir();
		if (!rt)
			return -ENOENT;
		n = snprintf(buf, len, "%s/ibemu", rt);
	} else {
		return -ERANGE;
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * Open the directory at path, making it (mode 0700) first if create.  A
 * descriptor if it is a directory of ours that no one else may enter;
 * -EPERM, with *st describing it, if it is something else (another
 * user's, an open one, a symbolic link, a file); -ENOENT if it does not
 * exist and !create; another -errno.
 */
static int shmfile_dir_try(const char *path, bool create, struct stat *st)
{
	int fd, err;

	if (create && mkdir(path, 0700) && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		err = errno;
		/* A link, a file, a directory we may not read: not ours.
		 * Anything else (EMFILE, ...) is no reason to move. */
		if (err != ELOOP && err != ENOTDIR && err != EACCES)
			return -err;
		return lstat(path, st) ? -err : -EPERM;
	}
	if (fstat(fd, st)) {
		err = errno;
		close(fd);
		return -err;
	}
	if (st->st_uid != getuid() || (st->st_mode & 077)) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* What is wrong with the place st describes, for messages. */
static void shmfile_dir_why(const struct stat *st, char *buf, size_t len)
{
	if (S_ISLNK(st->st_mode))
		snprintf(buf, len, "is a symbolic link of uid %u",
			 (unsigned int)st->st_uid);
	else if (!S_ISDIR(st->st_mode))
		snprintf(buf, len, "is not a directory (a file of uid %u)",
			 (unsigned int)st->st_uid);
	else if (st->st_uid != getuid())
		snprintf(buf, len, "belongs to uid %u, not to uid %u",
			 (unsigned int)st->st_uid, (unsigned int)getuid());
	else
		snprintf(buf, len, "has mode %03o: others may use it",
			 (unsigned int)(st->st_mode & 0777));
}

/*
 * The pid that last said where its node lives, so each process says it
 * once (a child after fork says it again).  Any thread may swap it.
 */
static atomic_int shmfile_moved_pid;

static void shmfile_dir_moved(const char *first, const struct stat *st,
			      const char *path)
{
	int me = (int)getpid();
	char why[96];

	if (atomic_exchange(&shmfile_moved_pid, me) == me)
		return;
	shmfile_dir_why(st, why, sizeof(why));
	ibemu_log_warn("%s %s (another user made it?): the node lives in %s "
		       "instead", first, why, path);
}

/*
 * Find, and open, the user's directory: the first place (above) that is
 * a directory of ours or does not exist yet, made if create.  path gets
 * its name (the first place's when none will do).  A descriptor or
 * -errno (-ENOENT: none yet, and !create); failures logged unless quiet.
 */
static int shmfile_dir_find(char *path, size_t len, bool create, bool quiet)
{
	char first[PATH_MAX] = "";
	struct stat st, first_st;
	unsigned int i;
	int ret;

	for (i = 0;; i++) {
		ret = shmfile_dir_place(i, path, len);
		if (ret == -ENOENT)
			continue;
		if (ret == -ERANGE)
			break;
		if (ret) {
			if (!quiet)
				ibemu_log_err("IBEMU_SHM_DIR=%s: path too long",
					      shmfile_base());
			return ret;
		}
		ret = shmfile_dir_try(path, create, &st);
		if (ret != -EPERM) {
			if (ret >= 0 && first[0] && !quiet)
				shmfile_dir_moved(first, &first_st, path);
			if (ret < 0 && ret != -ENOENT && !quiet)
				ibemu_log_err("cannot %s %s: %s",
					      create ? "create" : "open", path,
					      strerror(-ret));
			return ret;
		}
		if (!first[0]) {
			snprintf(first, sizeof(first), "%s", path);
			first_st = st;
		}
	}
	snprintf(path, len, "%s", first);
	if (!quiet) {
		char why[96];

		shmfile_dir_why(&first_st, why, sizeof(why));
		ibemu_log_err("%s %s, and %s-1 to -%u and $XDG_RUNTIME_DIR/"
			      "ibemu will not do either: remove them (as "
			      "root) or set IBEMU_SHM_DIR",
			      first, why, first, SHMFILE_DIR_SPARES);
	}
	return -EPERM;
}

static int shmfile_dir_open(bool create, bool quiet)
{
	char path[PATH_MAX];

	return shmfile_dir_find(path, sizeof(path), create, quiet);
}

int shmfile_dir(char *buf, size_t len)
{
	int fd = shmfile_dir_find(buf, len, false, true);

	if (fd >= 0)
		close(fd);
	return fd == -ENAMETOOLONG ? fd : 0;
}

int shmfile_path(char *buf, size_t len, const char *name)
{
	char dir[PATH_MAX];
	int n;

	if (shmfile_dir(dir, sizeof(dir)))
		return -ENAMETOOLONG;
	n = snprintf(buf, len, "%s/%s", dir, name);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* One line: what needed how much, and how much room there is. */
static void shmfile_log_no_room(int dfd, const char *what, size_t size, int err)
{
	struct statvfs sv;

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

/* Whether fd is a private file of ours: 0 or -errno. */
static int shmfile_check(int fd, struct stat *st)
{
	if (fstat(fd, st))
		return -errno;
	/* Our own directory holds only what we put there; check anyway. */
	if (!S_ISREG(st->st_mode) || st->st_uid != getuid() ||
	    (st->st_mode & 077))
		return -EPERM;
	return 0;
}

int shmfile_open(const char *name, const char *what)
{
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
	ret = shmfile_check(fd, &st);
	if (ret) {
		if (ret == -EPERM)
			ibemu_log_err("the %s %s is not a private file of "
				      "uid %u", what, name,
				      (unsigned int)getuid());
		close(fd);
		return ret;
	}
	return fd;
}

int shmfile_map_ro(const char *name, size_t size, const void **map_p,
		   int *fd_p)
{
	struct stat st;
	int dfd, fd, ret;
	void *map;

	dfd = shmfile_dir_open(false, true);
	if (dfd < 0)
		return dfd == -EPERM ? -ENOENT : dfd;
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	ret = fd < 0 ? -errno : 0;
	close(dfd);
	if (ret)
		return ret;
	ret = shmfile_check(fd, &st);
	if (!ret && (st.st_size < 0 || (unsigned long long)st.st_size < size))
		ret = -EAGAIN;
	if (!ret) {
		map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED)
			ret = -errno;
		else
			*map_p = map;
	}
	if (!ret && fd_p)
		*fd_p = fd;
	else
		close(fd);
	return ret;
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
