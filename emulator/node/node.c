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
 *      and the protocol restarts.  The creator holds the liveness lock
 *      NODE_LOCK_CREATOR from before it sizes the file until `ready` is
 *      set, so a full-sized segment that is not ready and whose creator
 *      lock is free has a dead creator, in whatever pid namespace.
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
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "clock.h"
#include "fabric.h"
#include "hmac.h"
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

/* The calling process's pid namespace (0, 0 if /proc does not say). */
static void pidns_id(uint64_t *dev_p, uint64_t *ino_p)
{
	struct stat st;

	*dev_p = 0;
	*ino_p = 0;
	if (stat("/proc/self/ns/pid", &st) == 0) {
		*dev_p = (uint64_t)st.st_dev;
		*ino_p = (uint64_t)st.st_ino;
	}
}

/* A fresh token: random, never 0.  0 or -errno. */
static int node_new_token(uint64_t *token_p)
{
	uint64_t t = 0;
	int tries;

	for (tries = 0; tries < 8 && !t; tries++) {
		ssize_t n = getrandom(&t, sizeof(t), 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n != (ssize_t)sizeof(t)) {
			int err = n < 0 ? errno : 0;

			ibemu_log_err("getrandom: %s",
				      err ? strerror(err) : "short read");
			/* Never 0 here: the caller then has no token. */
			return err ? -err : -EIO;
		}
	}
	if (!t)
		return -EIO;
	*token_p = t;
	return 0;
}

/* An open file description lock on byte off of fd: F_WRLCK to take it
 * (without waiting), F_UNLCK to drop it.  0 or -errno. */
static int node_ofd_lock(int fd, off_t off, short type)
{
	struct flock fl = {
		.l_type = type,
		.l_whence = SEEK_SET,
		.l_start = off,
		.l_len = 1,
	};

	return fcntl(fd, F_OFD_SETLK, &fl) ? -errno : 0;
}

/* Whether another open file description holds byte off of fd locked.
 * An error answers "held": a live process is never taken for dead. */
static bool node_ofd_held(int fd, off_t off)
{
	struct flock fl = {
		.l_type = F_WRLCK,
		.l_whence = SEEK_SET,
		.l_start = off,
		.l_len = 1,
	};

	if (fcntl(fd, F_OFD_GETLK, &fl))
		return true;
	return fl.l_type != F_UNLCK;
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
	if (crypto_random(seg->peer_key, sizeof(seg->peer_key)))
		memcpy(seg->peer_key, &h, sizeof(h)); /* logged; best left */
	seg->lid = (uint16_t)(1 + (h >> 16) % IBEMU_LID_UNICAST_MAX);
	/* A one-node fabric is its own subnet manager. */
	seg->sm_lid = seg->lid;
	for (i = 0; i < IBEMU_PKEY_TBL_LEN; i++)
		seg->pkeys[i] = 0;
	seg->pkeys[0] = IBEMU_DEFAULT_PKEY;
	if (gethostname(seg->node_name, sizeof(seg->node_name) - 1))
		strcpy(seg->node_name, "ibemu");
	/* The node's address, LID and GIDs on the IP fabric; on failure
	 * (logged) the node is alone with the hashed LID. */
	fabric_init(seg);
	/* Its ports, once port 1's LID is chosen (node_port.c). */
	node_ports_init(seg);
}

static int node_seg_init(struct node_seg *seg, const char *name)
{
	pthread_mutexattr_t attr;
	int ret;

	memset(seg, 0, sizeof(*seg));
	seg->magic = IBEMU_NODE_MAGIC;
	seg->layout = IBEMU_NODE_LAYOUT;
	seg->size = sizeof(*seg);
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

/* Held by the creator from before the segment is sized until it is
 * ready: others tell a dead creator from a slow one. */
static int node_creator_lock(int fd)
{
	return node_ofd_lock(fd, NODE_LOCK_CREATOR, F_WRLCK);
}

static int node_try_create(struct node *node)
{
	void *map;
	int fd, ret;

	ret = shmfile_create(node->name, sizeof(struct node_seg),
			     "node segment", node_creator_lock, &map, &fd);
	if (ret)
		return ret;
	ret = node_seg_init(map, node->name);
	if (ret) {
		munmap(map, sizeof(struct node_seg));
		shmfile_unlink(node->name);
		return ret;
	}
	node_ofd_lock(fd, NODE_LOCK_CREATOR, F_UNLCK);
	node->seg = map;
	node->fd = fd;
	return 0;
}

/* Returns 0, -EAGAIN to restart the protocol, or another -errno. */
static int node_try_attach(struct node *node)
{
	uint64_t deadline = clock_now_ns() + NODE_WAIT_READY_NS;
	struct node_seg *seg;
	void *map;
	int fd, ret;

	fd = shmfile_open(node->name, "node segment");
	if (fd < 0)
		return fd == -ENOENT ? -EAGAIN : fd;
	/* The creator sets the size once every page is allocated. */
	while ((ret = shmfile_map(fd, sizeof(*seg), &map)) == -EAGAIN) {
		if (clock_now_ns() > deadline) {
			shmfile_unlink_if_same(node->name, fd);
			goto out_close;
		}
		pause_briefly();
	}
	if (ret)
		goto out_close;
	seg = map;
	while (!atomic_load_explicit(&seg->ready, memory_order_acquire)) {
		/* The creator sets ready before it drops its lock: ready
		 * is looked at again after the lock is found free. */
		bool creator_gone =
			!node_ofd_held(fd, NODE_LOCK_CREATOR) &&
			!atomic_load_explicit(&seg->ready,
					      memory_order_acquire);

		if (clock_now_ns() > deadline || creator_gone) {
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
	node->fd = fd;
	return 0;
out_close:
	close(fd);
	return ret;
}

int node_open(struct node *node)
{
	int attempt, ret;

	node->seg = NULL;
	node->fd = -1;
	node->proc_slot = -1;
	node->token = 0;
	ret = node_default_name(node->name, sizeof(node->name));
	if (ret)
		return ret;

	for (attempt = 0; attempt < NODE_OPEN_ATTEMPTS; attempt++) {
		ret = node_try_create(node);
		if (ret != -EEXIST)
			break;
		ret = node_try_attach(node);
		if (ret != -EAGAIN)
			break;
	}
	/* A mapping holds the open file description, and so our liveness
	 * lock: a forked child must not inherit it (node_forget()). */
	if (ret == 0)
		madvise(node->seg, sizeof(*node->seg), MADV_DONTFORK);
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
	/* Drops our liveness lock if we still held it. */
	if (node->fd >= 0) {
		close(node->fd);
		node->fd = -1;
	}
}

void node_forget(struct node *node)
{
	/* Closing our copy of the descriptor leaves the parent's open file
	 * description, and the lock on it, as they are; unlocking would
	 * not. */
	if (node->fd >= 0)
		close(node->fd);
	node->fd = -1;
	node->seg = NULL;
	node->proc_slot = -1;
	node->token = 0;
}

bool node_proc_alive(struct node *node, int slot)
{
	if (slot < 0 || slot >= IBEMU_MAX_PROCS ||
	    !atomic_load_explicit(&node->seg->procs[slot].token,
				  memory_order_acquire))
		return false;
	if (slot == node->proc_slot)
		return true;
	return node_ofd_held(node->fd, NODE_LOCK_PROC(slot));
}

bool node_proc_holds(struct node *node, int32_t slot, uint64_t token)
{
	if (slot < 0 || slot >= IBEMU_MAX_PROCS || !token)
		return false;
	if (atomic_load_explicit(&node->seg->procs[slot].token,
				 memory_order_acquire) != token)
		return false;
	return slot == node->proc_slot || node_proc_alive(node, slot);
}

int node_proc_id(struct node *node, int slot, struct node_proc_id *id)
{
	const struct node_proc *p;
	uint64_t dev, ino;
	int ret = 0;

	if (slot < 0 || slot >= IBEMU_MAX_PROCS)
		return -ENOENT;
	pidns_id(&dev, &ino);
	p = &node->seg->procs[slot];
	node_lock(node);
	id->token = atomic_load_explicit(&p->token, memory_order_relaxed);
	id->pid = p->pid;
	id->same_pidns = ino && p->pidns_ino == ino && p->pidns_dev == dev;
	id->token_addr = p->token_addr;
	node_unlock(node);
	if (!id->token)
		ret = -ENOENT;
	return ret;
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
	SEQ_SET(q->pull_from, 0);
	SEQ_SET(q->peer_tag, 0);
	seq_write_end(&q->seq);
}

/* A new owner's QP starts from nothing (struct node_qp_stats). */
static void node_qp_stats_clear(struct node_qp_stats *st)
{
	atomic_store_explicit(&st->sq_psn, 0, memory_order_relaxed);
	atomic_store_explicit(&st->rq_psn, 0, memory_order_relaxed);
	atomic_store_explicit(&st->sq_wrs, 0, memory_order_relaxed);
	atomic_store_explicit(&st->rq_wrs, 0, memory_order_relaxed);
	atomic_store_explicit(&st->cq_depth, 0, memory_order_relaxed);
	atomic_store_explicit(&st->err_cqes, 0, memory_order_relaxed);
	atomic_store_explicit(&st->naks_sent, 0, memory_order_relaxed);
	atomic_store_explicit(&st->naks_rcvd, 0, memory_order_relaxed);
	atomic_store_explicit(&st->retries, 0, memory_order_relaxed);
	atomic_store_explicit(&st->tx_pkts, 0, memory_order_relaxed);
	atomic_store_explicit(&st->rx_pkts, 0, memory_order_relaxed);
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
	for (i = 0; i < IBEMU_MAX_NET_PEERS; i++)
		if (atomic_load_explicit(&seg->net_peers[i].owner,
					 memory_order_relaxed) ==
		    (uint32_t)slot + 1)
			atomic_store_explicit(&seg->net_peers[i].owner, 0,
					      memory_order_relaxed);
	if (atomic_load_explicit(&seg->door_owner, memory_order_relaxed) ==
	    (uint32_t)slot + 1)
		atomic_store_explicit(&seg->door_owner, 0,
				      memory_order_relaxed);
	/* A process that died without closing leaves its inbox behind. */
	if (slot != node->proc_slot)
		inbox_unlink(node->name, seg->procs[slot].token);
	atomic_store_explicit(&seg->procs[slot].token, 0,
			      memory_order_relaxed);
	seg->procs[slot].refs = 0;
	seg->procs[slot].pid = 0;
	seg->procs[slot].pidns_dev = 0;
	seg->procs[slot].pidns_ino = 0;
	seg->procs[slot].token_addr = 0;
	seg->nr_procs--;
}

unsigned int node_sweep_dead_locked(struct node *node)
{
	struct node_seg *seg = node->seg;
	unsigned int swept = 0;
	int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		if (!atomic_load_explicit(&seg->procs[i].token,
					  memory_order_relaxed) ||
		    node_proc_alive(node, i))
			continue;
		node_proc_release_locked(node, i);
		swept++;
	}
	return swept;
}

/* Take a free slot whose liveness byte nobody holds; -1 if none. */
static int node_take_slot_locked(struct node *node)
{
	struct node_seg *seg = node->seg;
	int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		if (atomic_load_explicit(&seg->procs[i].token,
					 memory_order_relaxed))
			continue;
		/* Held by a process that released its slot and has not let
		 * go yet (or its forked child): not ours to take. */
		if (node_ofd_lock(node->fd, NODE_LOCK_PROC(i), F_WRLCK) == 0)
			return i;
	}
	return -1;
}

int node_proc_attach(struct node *node)
{
	struct node_seg *seg = node->seg;
	struct node_proc *p;
	uint64_t token;
	int slot, ret;

	node_lock(node);
	if (node->proc_slot >= 0 &&
	    atomic_load_explicit(&seg->procs[node->proc_slot].token,
				 memory_order_relaxed) == node->token) {
		seg->procs[node->proc_slot].refs++;
		node_unlock(node);
		return 0;
	}
	ret = node_new_token(&token);
	if (ret)
		goto out;
	/* A process joining cleans up after those that died without
	 * closing: their QPNs and inboxes. */
	node_sweep_dead_locked(node);
	slot = node_take_slot_locked(node);
	if (slot < 0) {
		ret = -EAGAIN;
		goto out;
	}
	node->token = token;
	node->proc_slot = slot;
	p = &seg->procs[slot];
	p->refs = 1;
	p->pid = getpid();
	pidns_id(&p->pidns_dev, &p->pidns_ino);
	p->token_addr = (uint64_t)(uintptr_t)&node->token;
	atomic_store_explicit(&p->token, token, memory_order_release);
	seg->nr_procs++;
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
	if (atomic_load_explicit(&seg->procs[slot].token,
				 memory_order_relaxed) == node->token &&
	    --seg->procs[slot].refs == 0) {
		node_proc_release_locked(node, slot);
		node_ofd_lock(node->fd, NODE_LOCK_PROC(slot), F_UNLCK);
		node->proc_slot = -1;
		node->token = 0;
	}
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
		node_qp_stats_clear(&seg->qp_stats[idx]);
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

uint64_t node_qpn_owner(struct node *node, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;
	uint64_t token = 0;
	int owner;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return 0;
	node_lock(node);
	owner = node->seg->qps[idx].owner;
	if (owner > 0 && owner <= IBEMU_MAX_PROCS)
		token = atomic_load_explicit(&node->seg->procs[owner - 1].token,
					     memory_order_relaxed);
	node_unlock(node);
	return token;
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

/* The entry of qpn, or NULL outside the QPN space. */
static struct node_qp *node_qp_entry(struct node *node, uint32_t qpn)
{
	uint32_t idx = qpn - IBEMU_QPN_FIRST;

	if (qpn < IBEMU_QPN_FIRST || idx >= IBEMU_MAX_QP)
		return NULL;
	return &node->seg->qps[idx];
}

void node_qp_publish(struct node *node, uint32_t qpn, uint32_t state,
		     uint32_t access, uint64_t pd_id)
{
	struct node_qp *q = node_qp_entry(node, qpn);

	if (!q)
		return;
	seq_write_begin(&q->seq);
	SEQ_SET(q->state, state);
	SEQ_SET(q->access, access);
	SEQ_SET(q->pd_id, pd_id);
	seq_write_end(&q->seq);
}

/* The tag of a peer address (16 bytes) under this node's key; never 0. */
static uint32_t node_peer_tag(const struct node *node, const uint8_t addr[16])
{
	uint8_t mac[HMAC_SHA256_LEN];
	uint32_t tag;

	hmac_sha256(node->seg->peer_key, sizeof(node->seg->peer_key), addr,
		    16, mac);
	memcpy(&tag, mac, sizeof(tag));
	return tag ? tag : 1;
}

void node_qp_publish_peer(struct node *node, uint32_t qpn,
			  const uint8_t addr[16])
{
	struct node_qp *q = node_qp_entry(node, qpn);
	uint32_t tag;

	if (!q)
		return;
	tag = node_peer_tag(node, addr);
	seq_write_begin(&q->seq);
	SEQ_SET(q->peer_tag, tag);
	seq_write_end(&q->seq);
}

/* A connected QP answers lookups of its peer's node only (IBA 9.7.1:
 * one connection, one peer), so a stranger learns neither that it
 * exists nor where its owner takes connections. */
bool node_qp_reachable(struct node *node, uint32_t qpn,
		       const uint8_t asker[16])
{
	struct node_qp *q = node_qp_entry(node, qpn);
	uint32_t start, type, state, tag;

	if (!q)
		return true;
	do {
		start = seq_read_begin(&q->seq);
		state = SEQ_GET(q->state);
		tag = SEQ_GET(q->peer_tag);
	} while (!seq_read_ok(&q->seq, start));
	type = q->qp_type;
	if (type != IBV_QPT_RC && type != IBV_QPT_UC &&
	    type != IBV_QPT_XRC_RECV && type != IBV_QPT_XRC_SEND)
		return true;
	if ((state != IBV_QPS_RTR && state != IBV_QPS_RTS &&
	     state != IBV_QPS_SQD && state != IBV_QPS_SQE) ||
	    !tag)
		return true;
	return tag == node_peer_tag(node, asker);
}

void node_qp_publish_pull(struct node *node, uint32_t qpn, uint64_t pull_from)
{
	struct node_qp *q = node_qp_entry(node, qpn);

	if (!q)
		return;
	seq_write_begin(&q->seq);
	SEQ_SET(q->pull_from, pull_from);
	seq_write_end(&q->seq);
}
