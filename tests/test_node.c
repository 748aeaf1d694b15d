// SPDX-License-Identifier: MIT
/*
 * Unit tests of the node segment (emulator/node.c): concurrent creation,
 * a lock holder killed with SIGKILL, stale and foreign segments, QPN
 * allocation and the sweep of dead processes.
 *
 * Each test runs on its own node (IBEMU_NODE) and removes it afterwards.
 */
#include "config.h"

#include "unit.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "node.h"
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
	if (shmfile_create(probe, 64, "probe", &map) == 0)
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

	/* Lock from a watchdogged grandchild so a hang fails the test. */
	waiter = fork();
	CU_ASSERT_FATAL(waiter >= 0);
	if (waiter == 0) {
		alarm(5);
		node_lock(&node);
		node_unlock(&node);
		_exit(node_qpn_owner(&node, qpn_child) == 0 ? 0 : 2);
	}
	CU_ASSERT(waitpid(waiter, &status, 0) == waiter);
	CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* And the node still works for us. */
	CU_ASSERT(node_qpn_alloc(&node, 2, &qpn) == 0);
	CU_ASSERT(node_qpn_owner(&node, qpn) == getpid());
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
	/* Full size, never marked ready, creator pid 0 (gone). */
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
 * 0700; refused, and nothing written through it, when it is a symbolic
 * link or others may enter it; a symbolic link at the segment's name is
 * not followed.
 */
static char shm_base[64];

static void use_private_base(void)
{
	snprintf(shm_base, sizeof(shm_base), "/tmp/ibemu-unit-XXXXXX");
	CU_ASSERT_FATAL(mkdtemp(shm_base) != NULL);
	setenv("IBEMU_SHM_DIR", shm_base, 1);
}

static void drop_private_base(void)
{
	char cmd[128];

	unsetenv("IBEMU_SHM_DIR");
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", shm_base);
	CU_ASSERT(system(cmd) == 0);
}

static void user_dir(char *buf, size_t len)
{
	snprintf(buf, len, "%s/ibemu-%u", shm_base, (unsigned int)getuid());
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
	node_close(&node);
	drop_private_base();
}

static void test_dir_symlink_refused(void)
{
	struct node node;
	char dir[128], real[128];

	use_private_base();
	use_fresh_node("dirlink");
	user_dir(dir, sizeof(dir));
	snprintf(real, sizeof(real), "%s/elsewhere", shm_base);
	CU_ASSERT_FATAL(mkdir(real, 0700) == 0);
	CU_ASSERT_FATAL(symlink(real, dir) == 0);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_EQUAL(node_open(&node), -EPERM);
	unsetenv("IBEMU_QUIET");
	CU_ASSERT(rmdir(real) == 0); /* still empty */
	drop_private_base();
}

static void test_dir_mode_refused(void)
{
	struct node node;
	char dir[128];

	use_private_base();
	use_fresh_node("dirmode");
	user_dir(dir, sizeof(dir));
	CU_ASSERT_FATAL(mkdir(dir, 0700) == 0);
	CU_ASSERT_FATAL(chmod(dir, 0755) == 0);
	setenv("IBEMU_QUIET", "1", 1);
	CU_ASSERT_EQUAL(node_open(&node), -EPERM);
	unsetenv("IBEMU_QUIET");
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

int main(void)
{
	static const struct unit_test tests[] = {
		{ "concurrent_open", test_concurrent_open },
		{ "lock_holder_killed", test_lock_holder_killed },
		{ "stale_segment", test_stale_segment },
		{ "foreign_mode_refused", test_foreign_mode_refused },
		{ "segment_mode", test_segment_mode },
		{ "dir_private", test_dir_private },
		{ "dir_symlink_refused", test_dir_symlink_refused },
		{ "dir_mode_refused", test_dir_mode_refused },
		{ "segment_symlink_not_followed",
		  test_segment_symlink_not_followed },
		{ "qpn_allocation", test_qpn_allocation },
		{ NULL, NULL },
	};

	return unit_run("node_segment", tests);
}
