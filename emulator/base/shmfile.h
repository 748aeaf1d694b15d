/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory files of a node: its segment (node.c) and its
 * processes' inboxes (inbox.c).  Where they live, and how they are
 * created, opened, checked and removed (doc/design.md §6 "The node
 * segment").
 *
 * Where: in a directory of the user's own, $IBEMU_SHM_DIR/ibemu-UID
 * ($IBEMU_SHM_DIR defaults to /dev/shm), created with mode 0700.  No other
 * user can create, replace or remove a name in it, so a name another user
 * creates first cannot deny the node, as a fixed name in the
 * world-writable /dev/shm could.  The directory is opened with O_NOFOLLOW
 * and O_DIRECTORY and used only if the user owns it and no one else may
 * enter it.  Anything else there (another user's directory, an open one,
 * a symbolic link, a file) is left alone and the node lives in the first
 * of ibemu-UID-1 .. ibemu-UID-8 (beside it) and $XDG_RUNTIME_DIR/ibemu
 * that is a private directory of the user or can be made one, with one
 * warning per process naming both.  Every process walks the same order,
 * so the processes of a node meet in the same place.  Files are opened
 * relative to it, with O_NOFOLLOW, and refused unless they are regular
 * files of the user with mode 0600.
 *
 * Room: a file is allocated for real (posix_fallocate) before anyone maps
 * it.  A tmpfs too small for it fails the creation (ENOSPC) with one line
 * giving the size needed and the room left, instead of a SIGBUS at the
 * first touch of a page a sparse file could not get.  A mapping never
 * extends past the size fstat gave (shmfile_map).
 */
#ifndef IBEMU_SHMFILE_H
#define IBEMU_SHMFILE_H

#include <stddef.h>

/*
 * Create name exclusively (mode 0600), allocate size bytes and map them
 * read-write.  Returns 0, -EEXIST if the name exists (not logged), or
 * another -errno, logged; on failure nothing is left behind.  what names
 * the file in messages ("node segment", "process inbox").  prepare, if
 * given, runs on the new file before it is sized (0 or -errno); fd_p, if
 * given, gets the file's descriptor, else it is closed.
 */
int shmfile_create(const char *name, size_t size, const char *what,
		   int (*prepare)(int fd), void **map_p, int *fd_p);
/*
 * Open an existing file: a regular file of ours, mode 0600.  Returns an
 * O_RDWR descriptor, -ENOENT (not logged) or another -errno (logged).
 */
int shmfile_open(const char *name, const char *what);
/*
 * Map an existing file's first size bytes read-only, for a tool that
 * must change nothing: no directory is made, no lock taken, nothing
 * logged.  Returns 0, -ENOENT (no such file, or no directory of ours),
 * -EPERM (not a private file of ours), -EAGAIN (shorter than size) or
 * another -errno.  Unmap with munmap(*map_p, size).  fd_p, if given,
 * gets the file's read-only descriptor (for F_OFD_GETLK), else it is
 * closed.
 */
int shmfile_map_ro(const char *name, size_t size, const void **map_p,
		   int *fd_p);
/*
 * Map size bytes of fd read-write if fstat says it has them; -EAGAIN if
 * it is shorter (not logged).
 */
int shmfile_map(int fd, size_t size, void **map_p);
/* Remove name. */
void shmfile_unlink(const char *name);
/* Remove every file of the node $IBEMU_NODE=node names (its segment and
 * its processes' inboxes), for tests that leave nothing behind. */
void shmfile_unlink_node(const char *node);
/* Remove name only if it still names the file behind fd. */
void shmfile_unlink_if_same(const char *name, int fd);
/*
 * The user's directory, as above, for messages and tools: 0 or
 * -ENAMETOOLONG.  Nothing is made and nothing logged: when it does not
 * exist yet, the place that would be made; when no place will do, the
 * first.
 */
int shmfile_dir(char *buf, size_t len);
/* The full path of name, for messages and tools; 0 or -ENAMETOOLONG. */
int shmfile_path(char *buf, size_t len, const char *name);

#endif /* IBEMU_SHMFILE_H */
