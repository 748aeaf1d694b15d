// SPDX-License-Identifier: MIT
/* Registered memory the node's other processes can map (see mr_memfd.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "hca.h"
#include "log.h"
#include "mr_memfd.h"

/* At most this many windows (each one mapping of the application's). */
#define MEMFD_MAX_WINDOWS 1024
/* Mappings of our memfd read back from /proc/self/maps at one time. */
#define MEMFD_MAX_VMAS 256

struct memfd_window {
	struct memfd_window *next;
	uint64_t off, lo, len;
	unsigned int users; /* live regions published with it */
};

static struct {
	pthread_mutex_t lock;
	/* -1: not created; written under the lock, read without it by
	 * mr_memfd_fd (under hca.lock: the lock order forbids this lock) */
	_Atomic int fd;
	uint64_t id; /* random, in its name: peers check it (peer_map.c) */
	uint64_t end; /* next free file offset; windows are never reused */
	struct memfd_window *windows;
	unsigned int nr_windows;
	int state; /* 0: untried, 1: on, -1: off (IBEMU_MAP=0, refused) */
} memfd = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

void mr_memfd_name(uint64_t id, char *buf, size_t len)
{
	snprintf(buf, len, "/memfd:ibemu-%016" PRIx64 " (deleted)", id);
}

uint64_t mr_memfd_id(void)
{
	return atomic_load_explicit(&memfd.fd, memory_order_relaxed) >= 0
		       ? memfd.id
		       : 0;
}

int mr_memfd_fd(void)
{
	return atomic_load_explicit(&memfd.fd, memory_order_relaxed);
}

static bool memfd_enabled(void)
{
	const char *env;

	if (!memfd.state) {
		env = getenv("IBEMU_MAP");
		memfd.state = env && !strcmp(env, "0") ? -1 : 1;
	}
	return memfd.state > 0;
}

/* A mapping of the process (one line of /proc/self/maps). */
struct memfd_vma {
	uintptr_t lo, hi;
	uint64_t off;
	char perms[5];
	bool anon_private; /* private, anonymous, not the main stack */
	bool ours; /* a mapping of our memfd */
	bool ibemu; /* a mapping of any process's ibemu memfd */
};

/* How the kernel names an ibemu memfd's mappings (mr_memfd_name). */
static const char ibemu_prefix[] = "/memfd:ibemu-";

static bool memfd_parse_vma(const char *line, const char *our_name,
			    struct memfd_vma *v)
{
	unsigned long lo, hi, ino;
	unsigned long long off;
	int path = 0;
	const char *name;
	size_t n;

	if (sscanf(line, "%lx-%lx %4s %llx %*x:%*x %lu %n", &lo, &hi, v->perms,
		   &off, &ino, &path) < 5 ||
	    !path)
		return false;
	v->lo = lo;
	v->hi = hi;
	v->off = off;
	name = line + path;
	n = strcspn(name, "\n");
	/* Heap and anonymous mappings; the main stack grows down and is
	 * left alone.  Huge pages are file-backed (anon_hugepage). */
	v->anon_private = !strcmp(v->perms, "rw-p") && ino == 0 &&
			  (n == 0 || !strncmp(name, "[heap]", n));
	v->ours = our_name && n == strlen(our_name) &&
		  !strncmp(name, our_name, n);
	v->ibemu = n >= sizeof(ibemu_prefix) - 1 &&
		   !strncmp(name, ibemu_prefix, sizeof(ibemu_prefix) - 1);
	return true;
}

/*
 * Read the process's mappings: whether [lo, hi) is private anonymous
 * memory (*movable), and our memfd's mappings into vmas[] (their count).
 */
static unsigned int memfd_read_maps(uintptr_t lo, uintptr_t hi,
				    bool *movable, struct memfd_vma *vmas)
{
	char name[64], line[512];
	struct memfd_vma v;
	unsigned int n = 0;
	uintptr_t next = lo;
	bool more = false, cont, ok = true;
	FILE *maps;

	*movable = false;
	mr_memfd_name(memfd.id, name, sizeof(name));
	maps = fopen("/proc/self/maps", "re");
	if (!maps)
		return 0;
	while (fgets(line, sizeof(line), maps)) {
		cont = more;
		more = !strchr(line, '\n');
		if (cont || !memfd_parse_vma(line, memfd.fd >= 0 ? name : NULL,
					     &v))
			continue;
		if (v.ours && n < MEMFD_MAX_VMAS)
			vmas[n++] = v;
		if (v.hi <= next || next >= hi || !ok)
			continue;
		if (v.lo > next || !v.anon_private)
			ok = false;
		else
			next = v.hi;
	}
	fclose(maps);
	*movable = ok && next >= hi;
	return n;
}

/* Whether file range [off, off+len) is mapped by one of vmas[]. */
static bool memfd_mapped(const struct memfd_vma *vmas, unsigned int n,
			 uint64_t off, uint64_t len)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		if (vmas[i].off < off + len &&
		    off < vmas[i].off + (vmas[i].hi - vmas[i].lo))
			return true;
	return false;
}

/* Whether [lo, hi) is mapped from our memfd at the offsets of w. */
static bool memfd_at(const struct memfd_vma *vmas, unsigned int n,
		     const struct memfd_window *w, uintptr_t lo, uintptr_t hi)
{
	uintptr_t next = lo;
	unsigned int i;
	bool found = true;

	while (next < hi && found) {
		found = false;
		for (i = 0; i < n; i++) {
			if (vmas[i].lo <= next && next < vmas[i].hi &&
			    vmas[i].off + (next - vmas[i].lo) ==
				    w->off + (next - w->lo)) {
				next = vmas[i].hi;
				found = true;
				break;
			}
		}
	}
	return next >= hi;
}

/* Windows no region uses and the application unmapped: their memory goes
 * back (a hole punched in the file). */
static void memfd_collect(const struct memfd_vma *vmas, unsigned int n)
{
	struct memfd_window **pw = &memfd.windows, *w;

	while ((w = *pw)) {
		if (w->users || memfd_mapped(vmas, n, w->off, w->len)) {
			pw = &w->next;
			continue;
		}
		(void)fallocate(memfd.fd,
				FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				(off_t)w->off, (off_t)w->len);
		*pw = w->next;
		memfd.nr_windows--;
		free(w);
	}
}

/* Whether a region registered before has a byte in a page of [lo, hi):
 * moving the pages could lose a store made through it meanwhile. */
static bool memfd_pages_in_use(struct emu_hca *hca, uintptr_t lo,
			       uintptr_t hi, uintptr_t page)
{
	uint32_t i, seen = 0;
	struct emu_mr *mr;
	uintptr_t a, b;
	bool used = false;

	pthread_mutex_lock(&hca->lock);
	for (i = 0; i < hca->mrs.size && seen < hca->mrs.used && !used; i++) {
		mr = key_table_get(&hca->mrs, i);
		if (!mr)
			continue;
		seen++;
		a = (uintptr_t)mr->addr & ~(page - 1);
		b = (uintptr_t)mr->addr + mr->length;
		used = mr->length && a < hi && lo < b;
	}
	pthread_mutex_unlock(&hca->lock);
	return used;
}

/* The process's memfd, named after a random id (once per process: a
 * window outlives the attachment that made it). */
static int memfd_open(void)
{
	char name[32];
	uint64_t id = 0;
	int fd;

	if (getrandom(&id, sizeof(id), 0) != sizeof(id) || !id)
		id = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL) ^
		     (uintptr_t)&id;
	snprintf(name, sizeof(name), "ibemu-%016" PRIx64, id);
	fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0) {
		ibemu_log_dbg("memfd_create: %s: one-sided operations use "
			      "cross-memory attach", strerror(errno));
		memfd.state = -1;
		return -1;
	}
	memfd.id = id;
	memfd.end = 0;
	memfd.fd = fd;
	return 0;
}

/* Copy between memory and the memfd through the kernel (pwrite, pread):
 * the pages may hold what the application freed, which a sanitizer
 * would take a plain memcpy for reading.  0 or -1. */
static int memfd_io(int fd, void *buf, uint64_t len, uint64_t off, bool out)
{
	uint64_t done = 0;
	ssize_t n;

	while (done < len) {
		n = out ? pwrite(fd, (char *)buf + done, len - done,
				 (off_t)(off + done))
			: pread(fd, (char *)buf + done, len - done,
				(off_t)(off + done));
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return -1;
		}
		done += (uint64_t)n;
	}
	return 0;
}

/*
 * Put the mapping at p in [to, to+len), replacing what is there, in one
 * step: 0 or -1.  The system call itself, not the libc function: memory
 * hook frameworks in the application (UCX's ucm among them) replace
 * mremap and may drop its fifth argument, which moves the pages to
 * address 0; and a move that leaves the memory as it was is none of the
 * application's business.
 */
static int memfd_move_to(void *p, size_t len, uintptr_t to)
{
	long r = syscall(SYS_mremap, p, len, len,
			 MREMAP_MAYMOVE | MREMAP_FIXED, (void *)to);

	return r == (long)to ? 0 : -1;
}

/* Move [lo, hi) onto a new window at the end of the file. */
static struct memfd_window *memfd_move(uintptr_t lo, uintptr_t hi)
{
	uint64_t len = hi - lo, off = memfd.end;
	struct memfd_window *w;
	void *p;

	w = calloc(1, sizeof(*w));
	if (!w)
		return NULL;
	if (ftruncate(memfd.fd, (off_t)(off + len)))
		goto err;
	if (memfd_io(memfd.fd, (void *)lo, len, off, true))
		goto err;
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.fd,
		 (off_t)off);
	if (p == MAP_FAILED)
		goto err;
	/* One step replaces the private pages with the window. */
	if (memfd_move_to(p, len, lo)) {
		munmap(p, len);
		goto err;
	}
	/* RDMAV_FORK_SAFE (ibv_fork_init(3)): libibverbs marked the pages
	 * MADV_DONTFORK before this call; the window takes their place and
	 * the mark. */
	if (getenv("RDMAV_FORK_SAFE") || getenv("IBV_FORK_SAFE"))
		(void)madvise((void *)lo, len, MADV_DONTFORK);
	ibemu_log_dbg("reg_mr: [%#lx, %#lx) moved onto the memfd at %#llx",
		      (unsigned long)lo, (unsigned long)hi,
		      (unsigned long long)off);
	memfd.end = off + len;
	w->off = off;
	w->lo = lo;
	w->len = len;
	return w;
err:
	ibemu_log_dbg("reg_mr: [%#lx, %#lx) stays private: %s",
		      (unsigned long)lo, (unsigned long)hi, strerror(errno));
	(void)fallocate(memfd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)off, (off_t)len);
	free(w);
	return NULL;
}

static void mr_memfd_share(struct emu_hca *hca, void *addr,
			   size_t length, struct mr_window *out)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)addr + page - 1) & ~(page - 1);
	uintptr_t hi = ((uintptr_t)addr + length) & ~(page - 1);
	struct memfd_vma vmas[MEMFD_MAX_VMAS];
	struct memfd_window *w;
	unsigned int n;
	bool movable;

	memset(out, 0, sizeof(*out));
	if (hi <= lo || (uintptr_t)addr + length < (uintptr_t)addr)
		return;
	pthread_mutex_lock(&memfd.lock);
	if (!memfd_enabled())
		goto out;
	n = memfd_read_maps(lo, hi, &movable, vmas);
	if (memfd.windows)
		memfd_collect(vmas, n);
	/* The pages of a window: use it if they are still where it put
	 * them; part of a window: leave it. */
	for (w = memfd.windows; w; w = w->next) {
		if (hi <= w->lo || w->lo + w->len <= lo)
			continue;
		if (w->lo <= lo && hi <= w->lo + w->len &&
		    memfd_at(vmas, n, w, lo, hi))
			goto use;
		goto out;
	}
	if (!movable || memfd.nr_windows >= MEMFD_MAX_WINDOWS ||
	    memfd_pages_in_use(hca, lo, hi, page))
		goto out;
	if (memfd.fd < 0 && memfd_open())
		goto out;
	w = memfd_move(lo, hi);
	if (!w)
		goto out;
	w->next = memfd.windows;
	memfd.windows = w;
	memfd.nr_windows++;
use:
	w->users++;
	out->off = w->off;
	out->lo = w->lo;
	out->len = w->len;
out:
	pthread_mutex_unlock(&memfd.lock);
}

/* Replace [lo, hi), our memfd's pages from file offset off (own) or
 * another's, with a private copy of them, protection prot; 0, or -1 with
 * the mapping left as it was. */
static int memfd_copy_back(uintptr_t lo, uintptr_t hi, uint64_t off,
			   bool own, int prot)
{
	size_t len = hi - lo;
	void *p;

	p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return -1;
	if (own && memfd_io(memfd.fd, p, len, off, false))
		goto err;
	if (!own) {
		if (!(prot & PROT_READ))
			mprotect((void *)lo, len, PROT_READ);
		memcpy(p, (void *)lo, len);
	}
	if (memfd_move_to(p, len, lo))
		goto err;
	if (prot != (PROT_READ | PROT_WRITE))
		mprotect((void *)lo, len, prot);
	return 0;
err:
	munmap(p, len);
	return -1;
}

/* In a forked child: never share the parent's pages, drop them rather. */
static void memfd_privatise(uintptr_t lo, uintptr_t hi, uint64_t off,
			    bool own, int prot)
{
	if (memfd_copy_back(lo, hi, off, own, prot))
		munmap((void *)lo, hi - lo);
}

static int memfd_prot(const char *perms)
{
	return (perms[0] == 'r' ? PROT_READ : 0) |
	       (perms[1] == 'w' ? PROT_WRITE : 0) |
	       (perms[2] == 'x' ? PROT_EXEC : 0);
}

/*
 * The last region using w is gone: its pages go back to private memory
 * (a copy out of the file, then the hole punched), so that the memory
 * behaves as anonymous memory again (MADV_DONTNEED zeroes it, as
 * allocators expect; a child gets it copied by the kernel).  A store
 * another thread makes into those pages meanwhile may be lost, as while
 * ibv_reg_mr moved them.  If the application moved or unmapped them, the
 * window waits for memfd_collect.
 */
static void memfd_unshare_locked(struct memfd_window *w)
{
	struct memfd_vma vmas[MEMFD_MAX_VMAS];
	struct memfd_window **pw;
	unsigned int n, i;
	bool movable;
	int prot = PROT_READ | PROT_WRITE;

	n = memfd_read_maps(w->lo, w->lo + w->len, &movable, vmas);
	if (!memfd_at(vmas, n, w, w->lo, w->lo + w->len))
		return;
	for (i = 0; i < n; i++)
		if (vmas[i].lo <= w->lo && w->lo < vmas[i].hi)
			prot = memfd_prot(vmas[i].perms);
	if (memfd_copy_back(w->lo, w->lo + w->len, w->off, true, prot))
		return;
	(void)fallocate(memfd.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			(off_t)w->off, (off_t)w->len);
	for (pw = &memfd.windows; *pw; pw = &(*pw)->next)
		if (*pw == w) {
			*pw = w->next;
			memfd.nr_windows--;
			free(w);
			return;
		}
}

void mr_memfd_release(struct emu_hca *hca, const struct mr_window *win)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	struct memfd_window *w, *next;

	pthread_mutex_lock(&memfd.lock);
	for (w = memfd.windows; w && win->len; w = w->next)
		if (w->off == win->off && w->users) {
			w->users--;
			break;
		}
	/* Unused windows whose pages no live region touches: a region
	 * over part of them (which did not use the window) may be written
	 * into while the pages move, so they wait for its deregistration. */
	for (w = memfd.windows; w; w = next) {
		next = w->next;
		if (!w->users &&
		    !memfd_pages_in_use(hca, w->lo, w->lo + w->len, page))
			memfd_unshare_locked(w);
	}
	pthread_mutex_unlock(&memfd.lock);
}

/*
 * A forked child holds its parent's windows, shared with the parent: they
 * become private copies, as a kernel with copy-on-fork for pinned pages
 * gives a child of a process with registered memory.  (The windows of
 * other processes its parent mapped are peer_map.c's.)
 */
void mr_memfd_fork_child(void)
{
	struct memfd_vma v, *vmas = NULL, *tmp;
	char line[512], own[64];
	unsigned int n = 0, cap = 0, i;
	bool more = false, cont;
	FILE *maps;

	/* Every mapping of an ibemu memfd still here is the parent's own
	 * (peer_map_fork_child unmapped the peers' first). */
	if (memfd.fd < 0)
		goto reset;
	mr_memfd_name(memfd.id, own, sizeof(own));
	maps = fopen("/proc/self/maps", "re");
	while (maps && fgets(line, sizeof(line), maps)) {
		cont = more;
		more = !strchr(line, '\n');
		if (cont || !memfd_parse_vma(line, own, &v) || !v.ibemu)
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			tmp = realloc(vmas, cap * sizeof(*vmas));
			if (!tmp)
				break;
			vmas = tmp;
		}
		vmas[n++] = v;
	}
	if (maps) {
		fclose(maps);
		/* Ours are copied through the file; another ibemu
		 * memfd's (none should be left) by loads. */
		for (i = 0; i < n; i++)
			memfd_privatise(vmas[i].lo, vmas[i].hi, vmas[i].off,
					vmas[i].ours,
					memfd_prot(vmas[i].perms));
	} else {
		/* No maps to read: the windows where they were put, as
		 * far as they are still mapped. */
		struct memfd_window *w;

		for (w = memfd.windows; w; w = w->next)
			if (!msync((void *)w->lo, w->len, MS_ASYNC))
				memfd_privatise(w->lo, w->lo + w->len, w->off,
						true, PROT_READ | PROT_WRITE);
	}
	free(vmas);
reset:
	pthread_mutex_init(&memfd.lock, NULL);
	if (memfd.fd >= 0)
		close(memfd.fd);
	memfd.fd = -1;
	while (memfd.windows) {
		struct memfd_window *w = memfd.windows;

		memfd.windows = w->next;
		free(w);
	}
	memfd.nr_windows = 0;
	memfd.end = 0;
}

void mr_memfd_share_region(struct emu_hca *hca, void *addr, size_t length,
			   int access, struct mr_window *w)
{
	/* What peers may reach, and what large SENDs are pulled from. */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		       IBV_ACCESS_REMOTE_ATOMIC)) ||
	    length >= MR_MEMFD_LOCAL_MIN)
		mr_memfd_share(hca, addr, length, w);
}
