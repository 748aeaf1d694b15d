// SPDX-License-Identifier: MIT
/*
 * Unit tests of the node segment (emulator/node.c): concurrent creation,
 * a lock holder killed with SIGKILL, stale and foreign segments, QPN
 * allocation, the sweep of dead processes and a QP entry whose writer died
 * mid-update.
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
#include "seqlock.h"

static char node_env[64];

static void use_fresh_node(const char *what)
{
	struct node node;

	snprintf(node_env, sizeof(node_env), "test-%s-%d", what, (int)getpid());
	setenv("IBEMU_NODE", node_env, 1);
	if (!node_default_name(node.name, sizeof(node.name)))
		shm_unlink(node.name);
}

static void drop_node(void)
{
	char name[96];

	if (!node_default_name(name, sizeof(name)))
		shm_unlink(name);
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
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
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
	fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
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
	snprintf(path, sizeof(path), "/dev/shm%s", node.name);
	CU_ASSERT(stat(path, &st) == 0);
	CU_ASSERT_EQUAL(st.st_mode & 0777, 0600);
	CU_ASSERT_EQUAL(st.st_uid, getuid());
	node_close(&node);
	drop_node();
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

int main(void)
{
	static const struct unit_test tests[] = {
		{ "concurrent_open", test_concurrent_open },
		{ "lock_holder_killed", test_lock_holder_killed },
		{ "stale_segment", test_stale_segment },
		{ "foreign_mode_refused", test_foreign_mode_refused },
		{ "segment_mode", test_segment_mode },
		{ "qpn_allocation", test_qpn_allocation },
		{ "qp_writer_died", test_qp_writer_died },
		{ NULL, NULL },
	};

	return unit_run("node_segment", tests);
}
