// SPDX-License-Identifier: MIT
/*
 * Unit tests of the node segment (emulator/node/node.c): concurrent creation,
 * a lock holder killed with SIGKILL, stale and foreign segments, QPN
 * allocation, the sweep of dead processes, liveness that holds for
 * stopped processes, forked children and other pid namespaces, a QP
 * entry whose writer died mid-update, and the RDMA CM's multicast
 * memberships: one MLID per group for every process, freed with the
 * last member, dead or alive.
 *
 * Each test runs on its own node (IBEMU_NODE) and removes it afterwards.
 */
#include "config.h"

#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node.h"
#include "seqlock.h"
#include "shmfile.h"

static char node_env[64];

static void use_fresh_node(const char *what)
{
	struct node node;

	snprintf(node_env, sizeof(node_env), "test-%s-%d", what, (int)getpid());
	setenv("IBEMU_NODE", node_env, 1);
	if (!node_default_name(node.name, sizeof(node.name)))
		shmfile_unlink(node.name);
}

/* Create name in the node's directory, as a process would. */
static int create_in_dir(const char *name)
{
	char path[256], probe[64];
	void *map;

	/* Makes the directory: any small file will do. */
	snprintf(probe, sizeof(probe), "probe-%d", (int)getpid());
	if (shmfile_create(probe, 64, "probe", NULL, &map, NULL) == 0)
		munmap(map, 64);
	shmfile_unlink(probe);
	if (shmfile_path(path, sizeof(path), name))
		return -1;
	return open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
}

static void drop_node(void)
{
	char name[96];

	if (!node_default_name(name, sizeof(name)))
		shmfile_unlink(name);
}

struct probe_result {
	uint64_t guid;
	uint16_t lid;
	uint32_t qpn[4];
	int err;
};

/*
 * N processes released at the same instant (a pipe closed by the parent)
 * each open the node and take 4 QPNs: all see the same GUID and LID and
 * no QPN is handed out twice.
 */
static void test_concurrent_open(void)
{
	enum { NPROC = 16 };
	struct probe_result *res;
	int go[2], i, j, k, status;
	pid_t pids[NPROC];

	use_fresh_node("concurrent");
	res = mmap(NULL, sizeof(*res) * NPROC, PROT_READ | PROT_WRITE,
		   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	CU_ASSERT_FATAL(res != MAP_FAILED);
	CU_ASSERT_FATAL(pipe(go) == 0);
	for (i = 0; i < NPROC; i++) {
		pids[i] = fork();
		CU_ASSERT_FATAL(pids[i] >= 0);
		if (pids[i] == 0) {
			struct node node;
			char c;

			close(go[1]);
			if (read(go[0], &c, 1) < 0)
				_exit(3);
			res[i].err = node_open(&node);
			if (!res[i].err)
				res[i].err = node_proc_attach(&node);
			for (k = 0; !res[i].err && k < 4; k++)
				res[i].err = node_qpn_alloc(&node, 2,
							    &res[i].qpn[k]);
			if (!res[i].err) {
				res[i].guid = node.seg->node_guid;
				res[i].lid = node.seg->lid;
			}
			/* Exit holding the QPNs: the next test sweeps. */
			_exit(res[i].err ? 1 : 0);
		}
	}
	close(go[0]);
	close(go[1]); /* release everyone at once */
	for (i = 0; i < NPROC; i++) {
		CU_ASSERT(waitpid(pids[i], &status, 0) == pids[i]);
		CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	for (i = 0; i < NPROC; i++) {
		CU_ASSERT_EQUAL(res[i].err, 0);
		CU_ASSERT(res[i].guid != 0);
		CU_ASSERT(res[i].lid != 0);
		CU_ASSERT_EQUAL(res[i].guid, res[0].guid);
		CU_ASSERT_EQUAL(res[i].lid, res[0].lid);
		for (k = 0; k < 4; k++)
			for (j = 0; j < NPROC; j++)
				for (int l = 0; l < 4; l++)
					if (i != j || k != l)
						CU_ASSERT(res[i].qpn[k] !=
							  res[j].qpn[l]);
	}
	munmap(res, sizeof(*res) * NPROC);
	drop_node();
}

/*
 * Whether the kernel releases a dead thread's robust mutexes: not under
 * qemu's user mode, which refuses get_robust_list and set_robust_list
 * (ENOSYS; it cannot hand the kernel a list in guest memory), so that a
 * robust mutex there is an ordinary one.
 */
static bool robust_futexes(void)
{
	void *head;
	size_t len;

	return syscall(SYS_get_robust_list, 0, &head, &len) == 0 ||
	       errno != ENOSYS;
}

/*
 * A process killed while it holds the segment lock does not hang the
 * others: the robust mutex reports EOWNERDEAD and the next locker
 * recovers, dropping the dead process's QPNs.
 */
static void test_lock_holder_killed(void)
{
	struct node node;
	int ready[2], status;
	uint32_t qpn_child = 0, qpn;
	pid_t child, waiter;
	char c;

	if (!robust_futexes()) {
		printf("skipped: no robust futexes here (get_robust_list: "
		       "ENOSYS, as under qemu-user) ");
		return;
	}
	use_fresh_node("killed");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	CU_ASSERT_FATAL(pipe(ready) == 0);
	child = fork();
	CU_ASSERT_FATAL(child >= 0);
	if (child == 0) {
		struct node n2;

		close(ready[0]);
		if (node_open(&n2) || node_proc_attach(&n2) ||
		    node_qpn_alloc(&n2, 2, &qpn_child))
			_exit(1);
		if (write(ready[1], &qpn_child, sizeof(qpn_child)) < 0)
			_exit(1);
		node_lock(&n2);
		if (write(ready[1], "L", 1) < 0)
			_exit(1);
		pause(); /* die holding the lock */
		_exit(0);
	}
	close(ready[1]);
	CU_ASSERT_FATAL(read(ready[0], &qpn_child, sizeof(qpn_child)) ==
			sizeof(qpn_child));
	CU_ASSERT_FATAL(read(ready[0], &c, 1) == 1);
	kill(child, SIGKILL);
	waitpid(child, &status, 0);

	/* Lock from a watchdogged grandchild so a hang fails the test.
	 * It opens the node for itself: its copy of ours is our liveness
	 * (node_forget()). */
	waiter = fork();
	CU_ASSERT_FATAL(waiter >= 0);
	if (waiter == 0) {
		struct node n3;

		alarm(5);
		node_forget(&node);
		if (node_open(&n3))
			_exit(3);
		node_lock(&n3);
		node_unlock(&n3);
		_exit(node_qpn_owner(&n3, qpn_child) == 0 ? 0 : 2);
	}
	CU_ASSERT(waitpid(waiter, &status, 0) == waiter);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* And the node still works for us. */
	CU_ASSERT(node_qpn_alloc(&node, 2, &qpn) == 0);
	CU_ASSERT(node_qpn_owner(&node, qpn) == node.token);
	CU_ASSERT(node.token != 0);
	node_qpn_free(&node, qpn);
	CU_ASSERT(node_qpn_owner(&node, qpn) == 0);
	node_proc_detach(&node);
	node_close(&node);
	close(ready[0]);
	drop_node();
}

/* A segment whose creator died before publishing it is replaced. */
static void test_stale_segment(void)
{
	struct node node;
	char name[96];
	int fd;

	use_fresh_node("stale");
	CU_ASSERT_FATAL(node_default_name(name, sizeof(name)) == 0);
	fd = create_in_dir(name);
	CU_ASSERT_FATAL(fd >= 0);
	/* Full size, never marked ready, no creator holding its lock. */
	CU_ASSERT_FATAL(ftruncate(fd, sizeof(struct node_seg)) == 0);
	close(fd);
	CU_ASSERT(node_open(&node) == 0);
	if (node.seg) {
		CU_ASSERT(node.seg->magic == IBEMU_NODE_MAGIC);
		CU_ASSERT(node.seg->lid != 0);
		node_close(&node);
	}
	drop_node();
}

/* A segment readable by others is refused, not trusted. */
static void test_foreign_mode_refused(void)
{
	struct node node;
	char name[96];
	int fd;

	use_fresh_node("mode");
	CU_ASSERT_FATAL(node_default_name(name, sizeof(name)) == 0);
	fd = create_in_dir(name);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(fchmod(fd, 0644) == 0);
	close(fd);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_EQUAL(node_open(&node), -EPERM);
	unsetenv("IBEMU_QUIET");
	drop_node();
}

/* A newly created segment is private to its user. */
static void test_segment_mode(void)
{
	struct node node;
	struct stat st;
	char path[128];

	use_fresh_node("private");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(shmfile_path(path, sizeof(path), node.name) == 0);
	CU_ASSERT(stat(path, &st) == 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	CU_ASSERT_EQUAL(st.st_uid, getuid());
	node_close(&node);
	drop_node();
}

/*
 * The user's directory (shmfile.h), under a private IBEMU_SHM_DIR: made
 * 0700; a symbolic link, an open directory or a file in its place is left
 * alone and the node lives in the next place (ibemu-UID-1, ...,
 * $XDG_RUNTIME_DIR/ibemu), the same for every process; with no place left
 * the open fails (EPERM); a symbolic link at the segment's name is not
 * followed.
 */
static char shm_base[64];

static void use_private_base(void)
{
	snprintf(shm_base, sizeof(shm_base), "/tmp/ibemu-unit-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(shm_base) != NULL);
	setenv("IBEMU_SHM_DIR", shm_base, 1);
	unsetenv("XDG_RUNTIME_DIR");
}

static void drop_private_base(void)
{
	char cmd[128];

	unsetenv("IBEMU_SHM_DIR");
	unsetenv("XDG_RUNTIME_DIR");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm_base);
	CU_ASSERT(system(cmd) == 0);
}

/* Place i of the user's directory under shm_base: 0 ibemu-UID, else -i. */
static void user_dir_n(char *buf, size_t len, unsigned int i)
{
	if (i)
		snprintf(buf, len, "%s/ibemu-%u-%u", shm_base,
			 (unsigned int)getuid(), i);
	else
		snprintf(buf, len, "%s/ibemu-%u", shm_base,
			 (unsigned int)getuid());
}

static void user_dir(char *buf, size_t len)
{
	user_dir_n(buf, len, 0);
}

/* Does the node's segment live in directory dir? */
static bool segment_in(const struct node *node, const char *dir)
{
	char want[256], path[256];
	struct stat st;

	snprintf(want, sizeof(want), "%s/%s", dir, node->name);
	if (shmfile_path(path, sizeof(path), node->name) || strcmp(path, want))
		return false;
	return lstat(want, &st) == 0 && S_ISREG(st.st_mode);
}

static void test_dir_private(void)
{
	struct node node;
	struct stat st;
	char dir[128];

	use_private_base();
	use_fresh_node("dir");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	user_dir(dir, sizeof(dir));
	CU_ASSERT(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0700);
	CU_ASSERT_EQUAL(st.st_uid, getuid());
	CU_ASSERT(segment_in(&node, dir));
	node_close(&node);
	drop_private_base();
}

static void test_dir_symlink_avoided(void)
{
	struct node node;
	char dir[128], next[128], real[128];

	use_private_base();
	use_fresh_node("dirlink");
	user_dir(dir, sizeof(dir));
	user_dir_n(next, sizeof(next), 1);
	snprintf(real, sizeof(real), "%s/elsewhere", shm_base);
	CU_ASSERT_FATAL(mkdir(real, 0700) == 0);
	CU_ASSERT_FATAL(symlink(real, dir) == 0);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_FATAL(node_open(&node) == 0);
	unsetenv("IBEMU_QUIET");
	CU_ASSERT(segment_in(&node, next));
	node_close(&node);
	CU_ASSERT(rmdir(real) == 0); /* still empty */
	drop_private_base();
}

static void test_dir_mode_avoided(void)
{
	struct node node;
	char dir[128], next[128];
	struct stat st;

	use_private_base();
	use_fresh_node("dirmode");
	user_dir(dir, sizeof(dir));
	user_dir_n(next, sizeof(next), 1);
	CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
	CU_ASSERT_FATAL(chmod(dir, 0755) == 0);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_FATAL(node_open(&node) == 0);
	unsetenv("IBEMU_QUIET");
	CU_ASSERT(segment_in(&node, next));
	CU_ASSERT(lstat(next, &st) == 0 && (st.st_mode & 0777) == 0700);
	CU_ASSERT(rmdir(dir) == 0); /* still empty, still 0755 */
	node_close(&node);
	drop_private_base();
}

/* Every place under shm_base taken by a file: $XDG_RUNTIME_DIR or none. */
static void test_dir_runtime_fallback(void)
{
	char path[160], run[128];
	struct node node;
	unsigned int i;
	int fd;

	use_private_base();
	use_fresh_node("dirrun");
	for (i = 0; i <= 8; i++) {
		user_dir_n(path, sizeof(path), i);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
		CU_ASSERT_FATAL(fd >= 0);
		close(fd);
	}
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_EQUAL(node_open(&node), -EPERM);
	snprintf(run, sizeof(run), "%s/run", shm_base);
	CU_ASSERT_FATAL(mkdir(run, 0755) == 0);
	setenv("XDG_RUNTIME_DIR", run, 1);
	CU_ASSERT_EQUAL(node_open(&node), -EPERM); /* others may enter */
	CU_ASSERT_FATAL(chmod(run, 0700) == 0);
	CU_ASSERT_FATAL(node_open(&node) == 0);
	unsetenv("IBEMU_QUIET");
	snprintf(path, sizeof(path), "%s/ibemu", run);
	CU_ASSERT(segment_in(&node, path));
	node_close(&node);
	drop_private_base();
}

static void test_segment_symlink_not_followed(void)
{
	struct node node;
	char dir[128], name[96], link[256], target[128];
	struct stat st;
	int fd;

	use_private_base();
	use_fresh_node("seglink");
	user_dir(dir, sizeof(dir));
	CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
	CU_ASSERT_FATAL(node_default_name(name, sizeof(name)) == 0);
	snprintf(target, sizeof(target), "%s/target", shm_base);
	fd = open(target, O_RDWR | O_CREAT | O_EXCL, 0600);
	CU_ASSERT_FATAL(fd >= 0);
	close(fd);
	snprintf(link, sizeof(link), "%s/%s", dir, name);
	CU_ASSERT_FATAL(symlink(target, link) == 0);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT(node_open(&node) < 0);
	unsetenv("IBEMU_QUIET");
	CU_ASSERT(stat(target, &st) == 0 && st.st_size == 0);
	drop_private_base();
}

/* QPNs are 24-bit, never 0 or 1, not reused at once after a free. */
static void test_qpn_allocation(void)
{
	struct node node;
	uint32_t a, b;

	use_fresh_node("qpn");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	CU_ASSERT_FATAL(node_qpn_alloc(&node, 2, &a) == 0);
	CU_ASSERT(a > 1 && a <= 0xffffff);
	node_qpn_free(&node, a);
	CU_ASSERT_FATAL(node_qpn_alloc(&node, 2, &b) == 0);
	CU_ASSERT(b != a);
	node_qpn_free(&node, b);
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

/*
 * A process attached in a child: it opens the node, attaches, takes a QPN,
 * writes its slot and QPN on fd and waits to be killed.  With newpid it
 * first enters a pid namespace of its own (as its first process).
 * Returns the pid to kill and wait for, or -1.
 */
struct attached {
	int32_t slot;
	uint32_t qpn;
};

static pid_t spawn_attached(bool newpid, struct attached *a)
{
	int p[2];
	pid_t child;

	if (pipe(p))
		return -1;
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		struct node n;
		struct attached me;
		pid_t inner;

		close(p[0]);
		if (newpid) {
			if (unshare(CLONE_NEWPID))
				_exit(77);
			/* The namespace's first process, killed when we
			 * are. */
			inner = fork();
			if (inner < 0)
				_exit(1);
			if (inner > 0) {
				int st;

				waitpid(inner, &st, 0);
				_exit(0);
			}
			if (prctl(PR_SET_PDEATHSIG, SIGKILL))
				_exit(1);
		}
		if (node_open(&n) || node_proc_attach(&n) ||
		    node_qpn_alloc(&n, 2, &me.qpn))
			_exit(1);
		me.slot = n.proc_slot;
		if (write(p[1], &me, sizeof(me)) != sizeof(me))
			_exit(1);
		for (;;)
			pause();
	}
	close(p[1]);
	if (read(p[0], a, sizeof(*a)) != sizeof(*a)) {
		close(p[0]);
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
		return -1;
	}
	close(p[0]);
	return child;
}

/* Sweep as a joining process does; whether slot is still taken. */
static bool sweep_keeps(struct node *node, int32_t slot)
{
	node_lock(node);
	node_sweep_dead_locked(node);
	node_unlock(node);
	return atomic_load(&node->seg->procs[slot].token) != 0;
}

/*
 * A stopped process is alive: its QPNs and slot stay through a sweep.
 * Once killed it is swept.
 */
static void test_stopped_alive(void)
{
	struct attached a;
	struct node node;
	pid_t child;

	use_fresh_node("stopped");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	child = spawn_attached(false, &a);
	CU_ASSERT_FATAL(child > 0);
	CU_ASSERT(node_proc_alive(&node, a.slot));
	kill(child, SIGSTOP);
	CU_ASSERT(sweep_keeps(&node, a.slot));
	CU_ASSERT(node_proc_alive(&node, a.slot));
	CU_ASSERT(node_qpn_owner(&node, a.qpn) != 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	CU_ASSERT(!sweep_keeps(&node, a.slot));
	CU_ASSERT(!node_proc_alive(&node, a.slot));
	CU_ASSERT(node_qpn_owner(&node, a.qpn) == 0);
	/* We stay. */
	CU_ASSERT(node_proc_alive(&node, node.proc_slot));
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

/*
 * A process in another pid namespace (its pid there is 1, which names
 * another process here) is alive while it runs, is known to be in
 * another pid namespace (no cross-memory attach), and is swept when it
 * dies.  Needs CAP_SYS_ADMIN for the namespace: skipped without it.
 */
static void test_other_pid_namespace(void)
{
	struct node_proc_id id;
	struct attached a;
	struct node node;
	int status;
	pid_t child;

	use_fresh_node("pidns");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	child = spawn_attached(true, &a);
	if (child < 0) {
		/* unshare refused (exit 77): nothing to test here. */
		fprintf(stderr, "pid namespaces not permitted: skipped\n");
		node_proc_detach(&node);
		node_close(&node);
		drop_node();
		return;
	}
	CU_ASSERT(sweep_keeps(&node, a.slot));
	CU_ASSERT(node_proc_alive(&node, a.slot));
	CU_ASSERT(node_qpn_owner(&node, a.qpn) != 0);
	CU_ASSERT_FATAL(node_proc_id(&node, a.slot, &id) == 0);
	CU_ASSERT(!id.same_pidns);
	CU_ASSERT_EQUAL(id.pid, 1);
	CU_ASSERT(id.token != 0 && id.token != node.token);
	/* Ourselves, for contrast. */
	CU_ASSERT_FATAL(node_proc_id(&node, node.proc_slot, &id) == 0);
	CU_ASSERT(id.same_pidns);
	CU_ASSERT_EQUAL(id.pid, getpid());
	kill(child, SIGKILL); /* and so the namespace's first process */
	CU_ASSERT(waitpid(child, &status, 0) == child);
	/* Its first process may take a moment to go. */
	for (int i = 0; i < 200 && sweep_keeps(&node, a.slot); i++)
		usleep(10000);
	CU_ASSERT(!sweep_keeps(&node, a.slot));
	CU_ASSERT(node_qpn_owner(&node, a.qpn) == 0);
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

/*
 * A forked child that drops its copy of the parent's node view
 * (node_forget(), as the provider's fork handler does) does not keep the
 * parent alive: once the parent is gone it is swept while the child runs.
 */
/*
 * Whether a forked child is left without a mapping marked MADV_DONTFORK
 * (the node segment's is, node.c): a child that touches it must fault.
 * qemu's user mode takes the advice and ignores it, so that a child
 * there keeps the segment's file description, and its locks, alive.
 */
static bool dontfork_honoured(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int status = 0;
	char *m;
	pid_t c;

	m = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE,
		 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return true;
	m[0] = 1;
	madvise(m, (size_t)page, MADV_DONTFORK);
	c = fork();
	if (c == 0) {
		m[0] = 2;
		_exit(0);
	}
	if (c > 0)
		waitpid(c, &status, 0);
	munmap(m, (size_t)page);
	return c < 0 || WIFSIGNALED(status);
}

static void test_forked_child_forgets(void)
{
	int p[2], forgot[2], status;
	struct node node;
	int32_t slot = -1;
	pid_t parent, grandchild = 0;
	char c;

	if (!dontfork_honoured()) {
		printf("skipped: MADV_DONTFORK is ignored here (as under "
		       "qemu-user) ");
		return;
	}
	use_fresh_node("forget");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	CU_ASSERT_FATAL(pipe(p) == 0 && pipe(forgot) == 0);
	parent = fork();
	CU_ASSERT_FATAL(parent >= 0);
	if (parent == 0) {
		struct node n;
		pid_t gc;

		close(p[0]);
		close(forgot[0]);
		node_forget(&node);
		if (node_open(&n) || node_proc_attach(&n))
			_exit(1);
		gc = fork();
		if (gc < 0)
			_exit(1);
		if (gc == 0) {
			node_forget(&n);
			if (write(forgot[1], "F", 1) < 0)
				_exit(1);
			for (;;)
				pause();
		}
		if (write(p[1], &n.proc_slot, sizeof(n.proc_slot)) < 0 ||
		    write(p[1], &gc, sizeof(gc)) < 0)
			_exit(1);
		_exit(0); /* without detaching: a crash */
	}
	close(p[1]);
	close(forgot[1]);
	CU_ASSERT(read(p[0], &slot, sizeof(slot)) == sizeof(slot));
	CU_ASSERT(read(p[0], &grandchild, sizeof(grandchild)) ==
		  sizeof(grandchild));
	CU_ASSERT(read(forgot[0], &c, 1) == 1);
	close(p[0]);
	close(forgot[0]);
	CU_ASSERT(waitpid(parent, &status, 0) == parent);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	if (slot >= 0) {
		CU_ASSERT(!sweep_keeps(&node, slot));
	}
	if (grandchild > 0) {
		CU_ASSERT(kill(grandchild, 0) == 0); /* still running */
		kill(grandchild, SIGKILL);
	}
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

/* A reader of a published QP entry, as one-sided requesters read it
 * (cma.c): one try, no retry; false: no valid entry. */
static bool read_qp(struct node *node, uint32_t qpn, uint32_t *state)
{
	struct node_qp *q = &node->seg->qps[qpn - IBEMU_QPN_FIRST];
	uint32_t seq = seq_read_begin(&q->seq);

	*state = SEQ_GET(q->state);
	return seq_read_ok(&q->seq, seq);
}

/*
 * The owner of a QP dies in the middle of publishing its state (the
 * sequence stays odd): readers see no valid entry and do not spin, and
 * once the dead owner is swept the entry is valid again for good, for
 * the next owner's updates too.  Before the fix the sweep's update left
 * the sequence odd (and even while it wrote).
 */
static void test_qp_writer_died(void)
{
	struct node node, child;
	uint32_t qpn, state;
	int pipefd[2], st;
	pid_t pid;

	use_fresh_node("seqdead");
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	CU_ASSERT_FATAL(pipe(pipefd) == 0);
	pid = fork();
	CU_ASSERT_FATAL(pid >= 0);
	if (pid == 0) {
		if (node_open(&child) || node_proc_attach(&child) ||
		    node_qpn_alloc(&child, 2, &qpn))
			_exit(1);
		node_qp_publish(&child, qpn, 3, 0, 1);
		if (write(pipefd[1], &qpn, sizeof(qpn)) != sizeof(qpn))
			_exit(1);
		/* Dies mid-update. */
		seq_write_begin(&child.seg->qps[qpn - IBEMU_QPN_FIRST].seq);
		_exit(0);
	}
	close(pipefd[1]);
	CU_ASSERT_FATAL(read(pipefd[0], &qpn, sizeof(qpn)) == sizeof(qpn));
	close(pipefd[0]);
	CU_ASSERT_FATAL(waitpid(pid, &st, 0) == pid);
	CU_ASSERT_FATAL(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	alarm(10);
	CU_ASSERT_FALSE(read_qp(&node, qpn, &state));
	alarm(0);
	node_lock(&node);
	CU_ASSERT(node_sweep_dead_locked(&node) >= 1);
	node_unlock(&node);
	CU_ASSERT_EQUAL(node_qpn_owner_slot(&node, qpn), -1);
	CU_ASSERT_TRUE(read_qp(&node, qpn, &state));
	CU_ASSERT_EQUAL(state, 0); /* IBV_QPS_RESET: nothing placed */
	/* A new owner's updates read back. */
	node_qp_publish(&node, qpn, 3, 0, 7);
	CU_ASSERT_TRUE(read_qp(&node, qpn, &state));
	CU_ASSERT_EQUAL(state, 3);
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

/*
 * Multicast memberships (node_mcast_member_add): a child process joins
 * group X; this process joining X gets the child's MLID, joining Y
 * another; once the child died and we left X, X's MLID is free again
 * (the next new group gets it).  An all-zero MGID gets a new SA-style
 * one (ff12:a01b:...).
 */
static void test_mcast_members(void)
{
	uint8_t x[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, [15] = 1 };
	uint8_t y[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, [15] = 2 };
	uint8_t z[16] = { 0xff, 0x12, 0x40, 0x01, 0xff, 0xff, [15] = 3 };
	uint8_t zero[16] = { 0 };
	uint16_t child_mlid = 0, mx, my, mz, m0;
	int up[2], down[2], ix, iy, iz, i0;
	struct node node;
	pid_t child;
	char c = 0;

	use_fresh_node("mcast-members");
	CU_ASSERT_FATAL(pipe(up) == 0 && pipe(down) == 0);
	child = fork();
	CU_ASSERT_FATAL(child >= 0);
	if (child == 0) {
		struct node cn;
		uint16_t m = 0;
		int idx;

		if (node_open(&cn) || node_proc_attach(&cn) ||
		    node_mcast_member_add(&cn, x, &m, &idx))
			m = 0;
		if (write(up[1], &m, sizeof(m)) != sizeof(m) ||
		    read(down[0], &c, 1) < 0)
			_exit(1);
		_exit(0); /* without leaving: the process dies a member */
	}
	CU_ASSERT_FATAL(read(up[0], &child_mlid, sizeof(child_mlid)) ==
			sizeof(child_mlid));
	CU_ASSERT(child_mlid >= 0xc000 && child_mlid <= 0xfffe);
	CU_ASSERT_FATAL(node_open(&node) == 0);
	CU_ASSERT_FATAL(node_proc_attach(&node) == 0);
	CU_ASSERT(node_mcast_member_add(&node, x, &mx, &ix) == 0);
	CU_ASSERT(mx == child_mlid);
	CU_ASSERT(node_mcast_member_add(&node, y, &my, &iy) == 0);
	CU_ASSERT(my != mx && my >= 0xc000 && my <= 0xfffe);
	CU_ASSERT(write(down[1], &c, 1) == 1);
	waitpid(child, NULL, 0);
	node_mcast_member_del(&node, ix);
	CU_ASSERT(node_mcast_member_add(&node, z, &mz, &iz) == 0);
	CU_ASSERT(mz == mx);
	CU_ASSERT(node_mcast_member_add(&node, zero, &m0, &i0) == 0);
	CU_ASSERT(zero[0] == 0xff && zero[2] == 0xa0 && zero[3] == 0x1b);
	CU_ASSERT(m0 != my && m0 != mz);
	node_mcast_member_del(&node, iy);
	node_mcast_member_del(&node, iz);
	node_mcast_member_del(&node, i0);
	close(up[0]);
	close(up[1]);
	close(down[0]);
	close(down[1]);
	node_proc_detach(&node);
	node_close(&node);
	drop_node();
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "concurrent_open", test_concurrent_open },
		{ "lock_holder_killed", test_lock_holder_killed },
		{ "stale_segment", test_stale_segment },
		{ "foreign_mode_refused", test_foreign_mode_refused },
		{ "segment_mode", test_segment_mode },
		{ "dir_private", test_dir_private },
		{ "dir_symlink_avoided", test_dir_symlink_avoided },
		{ "dir_mode_avoided", test_dir_mode_avoided },
		{ "dir_runtime_fallback", test_dir_runtime_fallback },
		{ "segment_symlink_not_followed",
		  test_segment_symlink_not_followed },
		{ "qpn_allocation", test_qpn_allocation },
		{ "stopped_alive", test_stopped_alive },
		{ "other_pid_namespace", test_other_pid_namespace },
		{ "forked_child_forgets", test_forked_child_forgets },
		{ "qp_writer_died", test_qp_writer_died },
		{ "mcast_members", test_mcast_members },
		{ NULL, NULL },
	};

	return unit_run("node_segment", tests);
}
