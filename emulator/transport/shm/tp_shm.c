// SPDX-License-Identifier: MIT
/*
 * The shared-memory transport: every process of a node owns one inbox
 * (inbox.h), into which the node's other processes write its packets in
 * place.  A peer is a mapping of that process's inbox; requester-placed
 * RDMA through cross-memory attach is this transport's placement
 * capability (cma.c).
 *
 * Lock rule: struct tp_shm.peer_lock protects peers[] and retired; the
 * own inbox's consumer side runs under engine.lock (transport.h), its
 * skips of abandoned claims under consumer.lock (inbox.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cma.h"
#include "engine.h"
#include "log.h"
#include "mr_memfd.h"
#include "peer_map.h"
#include "remote_fence.h"
#include "shmfile.h"

/* A peer: one mapping of a process's inbox, kept as long as the
 * transport (QPs may point at it after its owner is replaced). */
struct tp_shm_map {
	struct tp_peer base;
	struct inbox *ib;
};

/* The transport's state, one per engine. */
struct tp_shm {
	struct inbox *inbox; /* ours */
	struct tp_shm_map self; /* ours as a peer */
	struct inbox_consumer consumer; /* its own lock rule (inbox.h) */
	char inbox_name[160];
	pthread_mutex_t peer_lock;
	/* peer inboxes by node process slot */
	struct tp_shm_peer {
		uint64_t token; /* its owner's (node.h) */
		struct tp_shm_map *map;
	} peers[IBEMU_MAX_PROCS];
	struct tp_shm_map **retired; /* replaced mappings, unmapped at close */
	unsigned int nr_retired;
};

static struct tp_shm *tp_shm(struct engine *e)
{
	return e->tp_priv;
}

struct inbox *tp_shm_inbox(struct tp_peer *peer)
{
	return ((struct tp_shm_map *)peer)->ib;
}

bool tp_peer_is_shm(const struct tp_peer *peer)
{
	return peer && peer->tp == &tp_shm_ops;
}

struct tp_peer *tp_shm_self(struct engine *e)
{
	return e->tp_priv ? &tp_shm(e)->self.base : NULL;
}

struct inbox *tp_shm_own_inbox(struct engine *e)
{
	return e->tp_priv ? tp_shm(e)->inbox : NULL;
}

uint64_t tp_shm_peer_token(struct tp_peer *peer)
{
	/* Checked against the name when mapped (inbox_map); read once. */
	return tp_shm_inbox(peer)->token;
}

/* Whether pid is stopped (SIGSTOP, a tracer): state T or t in
 * /proc/PID/stat, the field after the command's closing parenthesis. */
static bool tp_shm_pid_stopped(pid_t pid)
{
	char path[32], buf[512], *p;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' && (p[2] == 'T' || p[2] == 't');
}

/* What is known of the process in node slot proc, the claimer of a slot
 * of our inbox that is not published: gone when its entry is free or its
 * liveness lock is released (node.h); whether it is stopped only when its
 * pid means something in our pid namespace, else taken as running. */
static enum inbox_claimer tp_shm_claimer_state(void *arg, int32_t proc)
{
	struct engine *e = arg;
	struct node *node = &e->hca->node;
	struct node_proc_id id;

	if (proc < 0 || proc >= IBEMU_MAX_PROCS)
		return INBOX_CLAIMER_UNKNOWN;
	if (node_proc_id(node, proc, &id) || !node_proc_alive(node, proc))
		return INBOX_CLAIMER_GONE;
	return id.same_pidns && tp_shm_pid_stopped(id.pid)
		       ? INBOX_CLAIMER_STOPPED
		       : INBOX_CLAIMER_RUNS;
}

static bool tp_shm_peer_runs(struct engine *e, int32_t proc_slot)
{
	return tp_shm_claimer_state(e, proc_slot) == INBOX_CLAIMER_RUNS;
}

static int tp_shm_open(struct engine *e)
{
	struct tp_shm *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return ENOMEM;
	pthread_mutex_init(&t->peer_lock, NULL);
	/* Our placement fence issues a remote fence if it can (cma.c). */
	remote_fence_setup();
	ret = -inbox_create(e->hca->node.name, e->hca->node.token,
			    remote_fence_issues(), &t->inbox,
			    t->inbox_name, sizeof(t->inbox_name));
	if (ret) {
		/* inbox_create said why. */
		free(t);
		return ret;
	}
	inbox_consumer_init(&t->consumer, tp_shm_claimer_state, e);
	t->self.base.tp = &tp_shm_ops;
	t->self.ib = t->inbox;
	e->tp_priv = t;
	return 0;
}

static void tp_shm_close(struct engine *e)
{
	struct tp_shm *t = tp_shm(e);
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		if (t->peers[i].map) {
			inbox_unmap(t->peers[i].map->ib);
			free(t->peers[i].map);
		}
	for (i = 0; i < t->nr_retired; i++) {
		inbox_unmap(t->retired[i]->ib);
		free(t->retired[i]);
	}
	free(t->retired);
	shmfile_unlink(t->inbox_name);
	inbox_unmap(t->inbox);
	free(t);
	e->tp_priv = NULL;
}

static void tp_shm_forget(struct engine *e)
{
	struct tp_shm *t = tp_shm(e);

	unsigned int i;

	if (!t)
		return;
	/* The mappings are the parent's too: only the private memory. */
	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		free(t->peers[i].map);
	for (i = 0; i < t->nr_retired; i++)
		free(t->retired[i]);
	free(t->retired);
	free(t);
	e->tp_priv = NULL;
}

/* Map the inbox of the process with token in slot; caller holds
 * peer_lock. */
static struct tp_shm_map *tp_shm_map_locked(struct engine *e, int32_t slot,
					    uint64_t token)
{
	struct tp_shm *t = tp_shm(e);
	struct tp_shm_peer *pm = &t->peers[slot];
	struct tp_shm_map *map, **grown;

	if (pm->map && pm->token == token)
		return pm->map;
	map = calloc(1, sizeof(*map));
	if (!map)
		return NULL;
	map->base.tp = &tp_shm_ops;
	if (inbox_map(e->hca->node.name, token, &map->ib)) {
		free(map);
		return NULL;
	}
	if (pm->map) {
		/* QPs may still point at the old mapping: keep it. */
		grown = realloc(t->retired,
				(t->nr_retired + 1) * sizeof(*grown));
		if (!grown) {
			inbox_unmap(map->ib);
			free(map);
			return NULL;
		}
		t->retired = grown;
		t->retired[t->nr_retired++] = pm->map;
	}
	pm->token = token;
	pm->map = map;
	return map;
}

static struct tp_peer *tp_shm_peer_get(struct engine *e, int32_t slot)
{
	struct tp_shm *t = tp_shm(e);
	struct node *node = &e->hca->node;
	struct tp_shm_map *map;
	uint64_t token;

	if (slot < 0 || slot >= IBEMU_MAX_PROCS)
		return NULL;
	/* The slot's owner as the node segment says now. */
	token = atomic_load_explicit(&node->seg->procs[slot].token,
				     memory_order_acquire);
	if (!token)
		return NULL;
	if (token == node->token)
		return &t->self.base;
	pthread_mutex_lock(&t->peer_lock);
	map = tp_shm_map_locked(e, slot, token);
	pthread_mutex_unlock(&t->peer_lock);
	return map ? &map->base : NULL;
}

static bool tp_shm_peer_is_self(struct engine *e, const struct tp_peer *peer)
{
	return peer == &tp_shm(e)->self.base;
}

/* The consumer's position: peer-written, used only as a progress count. */
static uint64_t tp_shm_peer_taken(struct tp_peer *peer)
{
	return atomic_load_explicit(&tp_shm_inbox(peer)->head,
				    memory_order_relaxed);
}

/* A packet is an inbox slot: link header, data, GRH. */
static bool tp_shm_pkt_at(struct inbox_slot *s, struct tp_pkt *pkt)
{
	if (!s)
		return false;
	pkt->slot = s;
	pkt->hdr = &s->hdr;
	pkt->data = s->data;
	pkt->grh = &s->grh;
	return true;
}

static bool tp_shm_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt)
{
	return tp_shm_pkt_at(inbox_claim(tp_shm_inbox(peer), pkt->src_proc,
					 &pkt->pos),
			     pkt);
}

static void tp_shm_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt)
{
	/* Lost if the receiver gave up on the slot while we were away, as
	 * on a fabric (RC retransmits). */
	inbox_publish(tp_shm_inbox(peer), pkt->slot, pkt->pos);
}

static bool tp_shm_pkt_peek(struct engine *e, struct tp_pkt *pkt)
{
	struct tp_shm *t = tp_shm(e);

	return tp_shm_pkt_at(inbox_next(t->inbox, &t->consumer), pkt);
}

static void tp_shm_pkt_release(struct engine *e, struct tp_pkt *pkt)
{
	struct tp_shm *t = tp_shm(e);

	inbox_release_later(t->inbox, &t->consumer);
}

static void tp_shm_pkt_flush(struct engine *e)
{
	struct tp_shm *t = tp_shm(e);

	if (atomic_load_explicit(&t->consumer.held, memory_order_relaxed))
		inbox_release_flush(t->inbox, &t->consumer);
}

static bool tp_shm_pkt_held(struct engine *e)
{
	return atomic_load_explicit(&tp_shm(e)->consumer.held,
				    memory_order_relaxed) != 0;
}

static void tp_shm_sleep(struct engine *e, uint64_t timeout_ns,
			 atomic_bool *more)
{
	struct tp_shm *t = tp_shm(e);

	inbox_sleep(t->inbox, timeout_ns, more);
	/* Awake: a claim stuck at our head is skipped in time. */
	(void)inbox_skip(t->inbox, &t->consumer);
}

static void tp_shm_nap(struct engine *e, uint64_t timeout_ns)
{
	struct tp_shm *t = tp_shm(e);

	inbox_nap(t->inbox, timeout_ns);
	(void)inbox_skip(t->inbox, &t->consumer);
}

static void tp_shm_wake(struct engine *e)
{
	inbox_wake(tp_shm(e)->inbox);
}

static bool tp_shm_is_sleeping(struct engine *e)
{
	return atomic_load(&tp_shm(e)->inbox->sleeping) != 0;
}

static const struct tp_place_ops tp_shm_place_ops = {
	.peer_bind = cma_peer_bind,
	.rdma = cma_try,
	.pull_ok = cma_pull_ok,
	.pull_desc = cma_pull_desc,
	.pull = cma_pull,
	.mr_publish = cma_publish_mr,
	.mr_withdraw = cma_withdraw_mr,
	.qp_fence = cma_fence_qp,
	.mr_share = mr_memfd_share_region,
	.mr_release = mr_memfd_release,
};

/* First the peers' windows go, then the registered pages stop being
 * shared with the parent. */
static void tp_shm_fork_child(void)
{
	peer_map_fork_child();
	mr_memfd_fork_child();
}

const struct transport_ops tp_shm_ops = {
	.name = "shm",
	.open = tp_shm_open,
	.close = tp_shm_close,
	.forget = tp_shm_forget,
	.fork_child = tp_shm_fork_child,
	.peer_get = tp_shm_peer_get,
	.peer_is_self = tp_shm_peer_is_self,
	.peer_taken = tp_shm_peer_taken,
	.peer_runs = tp_shm_peer_runs,
	.pkt_claim = tp_shm_pkt_claim,
	.pkt_send = tp_shm_pkt_send,
	.bundles = true,
	.pkt_peek = tp_shm_pkt_peek,
	.pkt_release = tp_shm_pkt_release,
	.pkt_flush = tp_shm_pkt_flush,
	.pkt_held = tp_shm_pkt_held,
	.sleep = tp_shm_sleep,
	.nap = tp_shm_nap,
	.wake = tp_shm_wake,
	.is_sleeping = tp_shm_is_sleeping,
	.self = tp_shm_self,
	.place = &tp_shm_place_ops,
};
