// SPDX-License-Identifier: MIT
/*
 * The node segment (see node.h for the lock rule).
 *
 * Creation protocol, safe for any number of processes racing:
 *   1. Exclusive creation (shmfile_create): the winner allocates, maps and
 *      initialises the segment, then publishes `ready` with release order.
 *   2. Everyone else opens the existing object, checks it is ours (owner
 *      uid, mode 0600), waits (bounded) for the size and for `ready`.
 *   3. A segment whose creator died before `ready`, or that never became
 *      ready, is stale: it is unlinked (if it is still the same object)
 *      and the protocol restarts.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "inbox.h"
#include "log.h"
#include "node.h"
#include "seqlock.h"
#include "shmfile.h"

#define NODE_WAIT_READY_NS (3ull * 1000 * 1000 * 1000)
#define NODE_OPEN_ATTEMPTS 8

static uint64_t fnv1a64(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len--) {
		h ^= *p++;
		h *= 0x100000001b3ull;
	}
	return h;
}

static uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void pause_briefly(void)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = 200 * 1000 };

	nanosleep(&ts, NULL);
}

/* The network namespace's inode number: one node per namespace. */
static uint64_t netns_id(void)
{
	struct stat st;

	if (stat("/proc/self/ns/net", &st) == 0)
		return (uint64_t)st.st_ino;
	return 0;
}

int node_default_name(char *buf, size_t len)
{
	const char *env = getenv("IBEMU_NODE");
	int n;

	if (env && *env) {
		if (strchr(env, '/')) {
			ibemu_log_err("IBEMU_NODE=%s: a node name has no '/'",
				      env);
			return -EINVAL;
		}
		n = snprintf(buf, len, "v%d-%s", IBEMU_NODE_LAYOUT, env);
	} else {
		n = snprintf(buf, len, "v%d-%" PRIu64, IBEMU_NODE_LAYOUT,
			     netns_id());
	}
	if (n < 0 || (size_t)n >= len)
		return -ENAMETOOLONG;
	return 0;
}

uint64_t node_proc_start_time(pid_t pid)
{
	char path[64], buf[1024];
	unsigned long long start = 0;
	const char *p;
	ssize_t n;
	int fd, field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* comm may hold spaces and parentheses: skip to the last ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return 0;
	/* Field 3 (state) follows; starttime is field 22. */
	for (field = 2; field < 22 && p; field++)
		p = strchr(p + 1, ' ');
	if (p)
		start = strtoull(p + 1, NULL, 10);
	return start;
}

bool node_pid_alive(pid_t pid, uint64_t start_time)
{
	if (pid <= 0)
		return false;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return false;
	/* Same pid, other process: the pid was reused. */
	if (start_time && node_proc_start_time(pid) != start_time)
		return false;
	return true;
}

static void node_identity_init(struct node_seg *seg, const char *name)
{
	char machine_id[64] = "";
	uint64_t h = 0xcbf29ce484222325ull, ns = netns_id();
	uid_t uid = getuid();
	FILE *f;
	int i;

	f = fopen("/etc/machine-id", "re");
	if (f) {
		if (!fgets(machine_id, sizeof(machine_id), f))
			machine_id[0] = '\0';
		fclose(f);
	}
	if (!machine_id[0])
		gethostname(machine_id, sizeof(machine_id) - 1);
	h = fnv1a64(h, machine_id, strlen(machine_id));
	h = fnv1a64(h, &ns, sizeof(ns));
	h = fnv1a64(h, &uid, sizeof(uid));
	h = fnv1a64(h, name, strlen(name));

	/* EUI-64, locally administered (bit 1 of the first octet). */
	seg->node_guid = (h & 0x00ffffffffffff00ull) | (0x02ull << 56);
	seg->port_guid = seg->node_guid | 1;
	seg->gid_prefix = 0xfe80000000000000ull; /* link-local, IBA 4.1.1 */
	seg->lid = (uint16_t)(1 + (h >> 16) % IBEMU_LID_UNICAST_MAX);
	/* A one-node fabric is its own subnet manager. */
	seg->sm_lid = seg->lid;
	for (i = 0; i < IBEMU_PKEY_TBL_LEN; i++)
		seg->pkeys[i] = 0;
	seg->pkeys[0] = IBEMU_DEFAULT_PKEY;
	if (gethostname(seg->node_name, sizeof(seg->node_name) - 1))
		strcpy(seg->node_name, "ibemu");
}

static int node_seg_init(struct node_seg *seg, const char *name)
{
	pthread_mutexattr_t attr;
	int ret;

	memset(seg, 0, sizeof(*seg));
	seg->magic = IBEMU_NODE_MAGIC;
	seg->layout = IBEMU_NODE_LAYOUT;
	seg->size = sizeof(*seg);
	seg->creator = getpid();
	node_identity_init(seg, name);

	pthread_mutexattr_init(&attr);
	pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
	pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
	ret = pthread_mutex_init(&seg->lock, &attr);
	pthread_mutexattr_destroy(&attr);
	if (ret)
		return -ret;
	seg->qpn_cursor = 0;
	atomic_store_explicit(&seg->ready, 1, memory_order_release);
	return 0;
}

static int node_try_create(struct node *node)
{
	void *map;
	int ret;

	ret = shmfile_create(node->name, sizeof(struct node_seg),
			     "node segment", &map);
	if (ret)
		return ret;
	ret = node_seg_init(map, node->name);
	if (ret) {
		munmap(map, sizeof(struct node_seg));
		shmfile_unlink(node->name);
		return ret;
	}
	node->seg = map;
	return 0;
}

/* Returns 0, -EAGAIN to restart the protocol, or another -errno. */
static int node_try_attach(struct node *node)
{
	uint64_t deadline = monotonic_ns() + NODE_WAIT_READY_NS;
	struct node_seg *seg;
	void *map;
	int fd, ret;

	fd = shmfile_open(node->name, "node segment");
	if (fd < 0)
		return fd == -ENOENT ? -EAGAIN : fd;
	/* The creator sets the size once every page is allocated. */
	while ((ret = shmfile_map(fd, sizeof(*seg), &map)) == -EAGAIN) {
		if (monotonic_ns() > deadline) {
			shmfile_unlink_if_same(node->name, fd);
			goto out_close;
		}
		pause_briefly();
	}
	if (ret)
		goto out_close;
	seg = map;
	while (!atomic_load_explicit(&seg->ready, memory_order_acquire)) {
		pid_t creator = seg->creator;

		if (monotonic_ns() > deadline ||
		    (creator && !node_pid_alive(creator, 0))) {
			shmfile_unlink_if_same(node->name, fd);
			munmap(seg, sizeof(*seg));
			ret = -EAGAIN;
			goto out_close;
		}
		pause_briefly();
	}
	if (seg->magic != IBEMU_NODE_MAGIC || seg->layout != IBEMU_NODE_LAYOUT ||
	    seg->size != sizeof(*seg)) {
		shmfile_unlink_if_same(node->name, fd);
		munmap(seg, sizeof(*seg));
		ret = -EAGAIN;
		goto out_close;
	}
	node->seg = seg;
	ret = 0;
out_close:
	close(fd);
	return ret;
}

int node_open(struct node *node)
{
	int attempt, ret;

	node->seg = NULL;
	node->proc_slot = -1;
	ret = node_default_name(node->name, sizeof(node->name));
	if (ret)
		return ret;

	for (attempt = 0; attempt < NODE_OPEN_ATTEMPTS; attempt++) {
		ret = node_try_create(node);
		if (ret == 0)
			return 0;
		if (ret != -EEXIST)
			break;
		ret = node_try_attach(node);
		if (ret != -EAGAIN)
			break;
	}
	/* shmfile.c said why, except when the attempts ran out. */
	if (ret == -EAGAIN || ret == -EEXIST)
		ibemu_log_err("cannot open the node segment %s: it stays "
			      "stale or half-made", node->name);
	return ret;
}

void node_close(struct node *node)
{
	if (node->seg) {
		munmap(node->seg, sizeof(*node->seg));
		node->seg = NULL;
	}
}

void node_lock(struct node *node)
{
	int ret = pthread_mutex_lock(&node->seg->lock);

	if (ret == EOWNERDEAD) {
		/* The holder died mid-update; our updates are single stores,
		 * so the data is consistent: drop the dead owner's entries. */
		ibemu_log_warn("node lock holder died; recovering");
		pthread_mutex_consistent(&node->seg->lock);
		node_sweep_dead_locked(node);
	} else if (ret) {
		ibemu_log_err("node lock: %s", strerror(ret));
		abort();
	}
}

void node_unlock(struct node *node)
{
	pthread_mutex_unlock(&node->seg->lock);
}

/* The entry changes hands: nothing may be placed through it. */
static void node_qp_unpublish(struct node_qp *q)
{
	seq_write_begin(&q->seq);
	SEQ_SET(q->state, IBV_QPS_RESET);
	SEQ_SET(q->access, 0);
	SEQ_SET(q->pd_id, 0);
	seq_write_end(&q->seq);
}

static void node_proc_release_locked(struct node *node, int slot)
{
	struct node_seg *seg = node->seg;
	uint32_t i;

	for (i = 0; i < IBEMU_MAX_QP; i++) {
		if (seg->qps[i].owner == slot + 1) {
			node_qp_unpublish(&seg->qps[i]);
			seg->qps[i].owner = 0;
		}
	}
	/* A process that died without closing leaves its inbox behind. */
	if (seg->procs[slot].pid != getpid())
		inbox_unlink(node->name, seg->procs[slot].pid,
			     seg->procs[slot].start_time);
	seg->procs[slot].pid = 0;
	seg->procs[slot].refs = 0;
	seg->procs[slot].start_time = 0;
	seg->nr_procs--;
}

unsigned int node_sweep_dead_locked(struct node *node)
{
	struct node_seg *seg = node->seg;
	unsigned int swept = 0;
	int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		struct node_proc *p = &seg->procs[i];

		if (!p->pid || node_pid_alive(p->pid, p->start_time))
			continue;
		node_proc_release_locked(node, i);
		swept++;
	}
	return swept;
}

int node_proc_attach(struct node *node)
{
	struct node_seg *seg = node->seg;
	pid_t me = getpid();
	int i, free_slot = -1, ret = 0;

	node_lock(node);
	/* A process joining cleans up after those that died without
	 * closing: their QPNs and inboxes. */
	node_sweep_dead_locked(node);
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		if (seg->procs[i].pid == me) {
			node->proc_slot = i;
			break;
		}
		if (!seg->procs[i].pid && free_slot < 0)
			free_slot = i;
	}
	if (i == IBEMU_MAX_PROCS) {
		if (free_slot < 0 && node_sweep_dead_locked(node))
			for (i = 0; i < IBEMU_MAX_PROCS && free_slot < 0; i++)
				if (!seg->procs[i].pid)
					free_slot = i;
		if (free_slot < 0) {
			ret = -EAGAIN;
			goto out;
		}
		seg->procs[free_slot].pid = me;
		seg->procs[free_slot].start_time = node_proc_start_time(me);
		seg->procs[free_slot].refs = 0;
		seg->nr_procs++;
		node->proc_slot = free_slot;
	}
	seg->procs[node->proc_slot].refs++;
out:
	node_unlock(node);
	return ret;
}

void node_proc_detach(struct node *node)
{
	struct node_seg *seg = node->seg;
	int slot = node->proc_slot;

	if (slot < 0)
		return;
	node_lock(node);
	if (seg->procs[slot].pid == getpid() && --seg->procs[slot].refs == 0)
		node_proc_release_locked(node, slot);
	node_unlock(node);
}

int node_qpn_alloc(struct node *node, uint32_t qp_type, uint32_t *qpn_p)
{
	struct node_seg *seg = node->seg;
	uint32_t n, idx;
	int swept = 0;

	node_lock(node);
again:
	/* Round robin, so a destroyed QP's number is not reused at once
	 * and stale packets cannot reach a new QP (as rxe does). */
	for (n = 0; n < IBEMU_MAX_QP; n++) {
		idx = (seg->qpn_cursor + n) % IBEMU_MAX_QP;
		if (seg->qps[idx].owner)
			continue;
		seg->qps[idx].owner = node->proc_slot + 1;
		seg->qps[idx].qp_type = qp_type;
		node_qp_unpublish(&seg->qps[idx]);
		seg->qpn_cursor = (idx + 1) % IBEMU_MAX_QP;
		node_unlock(node);
		*qpn_p = IBEMU_QPN_FIRST + idx;
		return 0;
	}
	if (!swept++ && node_sweep_dead_locked(node))
		goto again;
	node_unlock(node);
	return -ENOMEM;
}

void node_qpn_free(struct node *node, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return;
	node_lock(node);
	if (node->seg->qps[idx].owner == node->proc_slot + 1) {
		node_qp_unpublish(&node->seg->qps[idx]);
		node->seg->qps[idx].owner = 0;
	}
	node_unlock(node);
}

pid_t node_qpn_owner(struct node *node, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;
	pid_t pid = 0;
	int owner;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return 0;
	node_lock(node);
	owner = node->seg->qps[idx].owner;
	if (owner > 0 && owner <= IBEMU_MAX_PROCS)
		pid = node->seg->procs[owner - 1].pid;
	node_unlock(node);
	return pid;
}

int32_t node_qpn_owner_slot(struct node *node, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;
	int32_t owner;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return -1;
	owner = atomic_load_explicit(&node->seg->qps[idx].owner,
				     memory_order_acquire);
	return owner > 0 && owner <= IBEMU_MAX_PROCS ? owner - 1 : -1;
}

void node_qp_publish(struct node *node, uint32_t qpn, uint32_t state,
		     uint32_t access, uint64_t pd_id)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;
	struct node_qp *q;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return;
	q = &node->seg->qps[idx];
	seq_write_begin(&q->seq);
	SEQ_SET(q->state, state);
	SEQ_SET(q->access, access);
	SEQ_SET(q->pd_id, pd_id);
	seq_write_end(&q->seq);
}
