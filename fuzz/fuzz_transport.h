/* SPDX-License-Identifier: MIT */
/*
 * The transport of the harnesses that drive the engine without a peer
 * (fuzz_packet.c, fuzz_cm.c): it swallows what the engine sends (and
 * counts it; with fz.full set it refuses every claim), delivers nothing
 * (packets come through engine_recv_locked), and lets the progress
 * thread sleep until the engine stops.  FZ_TRANSPORT_OPS fills a
 * struct transport_ops with it; the includer names that fuzz_ops.
 *
 * Lock rule: fz.lock guards fz.woken; fz.full and fz.sent are atomic.
 */
#ifndef IBEMU_FUZZ_TRANSPORT_H
#define IBEMU_FUZZ_TRANSPORT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "engine.h"

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool woken;
	bool full; /* refuse every claim */
	unsigned long sent;
} fz = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
};

static const struct transport_ops fuzz_ops;
/* The one peer, reached through the harness's own transport. */
static struct tp_peer fz_peer = { .tp = &fuzz_ops };

/* Room for the packet being built (claim and send run on one thread). */
static __thread struct {
	struct pkt_hdr hdr;
	uint8_t data[PKT_MAX_LEN];
	struct pkt_grh grh;
} fz_out;

static int fz_open(struct engine *e)
{
	e->tp_priv = NULL;
	return 0;
}

static void fz_close(struct engine *e)
{
}

static struct tp_peer *fz_peer_get(struct engine *e, int32_t slot)
{
	return &fz_peer;
}

static bool fz_peer_is_self(struct engine *e, const struct tp_peer *peer)
{
	return false;
}

static bool fz_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt)
{
	if (__atomic_load_n(&fz.full, __ATOMIC_RELAXED))
		return false;
	pkt->hdr = &fz_out.hdr;
	pkt->data = fz_out.data;
	pkt->grh = &fz_out.grh;
	pkt->slot = &fz_out;
	pkt->pos = 0;
	return true;
}

static void fz_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt)
{
	/* The engine must never send more than a slot holds. */
	if (pkt->hdr->len > PKT_MAX_LEN)
		abort();
	__atomic_add_fetch(&fz.sent, 1, __ATOMIC_RELAXED);
}

static bool fz_pkt_peek(struct engine *e, struct tp_pkt *pkt)
{
	return false; /* packets come through engine_recv_locked */
}

static void fz_pkt_release(struct engine *e, struct tp_pkt *pkt)
{
}

/* The progress thread sleeps until the engine stops. */
static void fz_sleep(struct engine *e, uint64_t timeout_ns,
		     atomic_bool *more)
{
	pthread_mutex_lock(&fz.lock);
	while (!fz.woken)
		pthread_cond_wait(&fz.cond, &fz.lock);
	pthread_mutex_unlock(&fz.lock);
}

static void fz_nap(struct engine *e, uint64_t timeout_ns)
{
	fz_sleep(e, timeout_ns, NULL);
}

static void fz_wake(struct engine *e)
{
	/* Only a stopping engine is let go (engine_stop). */
	if (!atomic_load(&e->stop))
		return;
	pthread_mutex_lock(&fz.lock);
	fz.woken = true;
	pthread_cond_broadcast(&fz.cond);
	pthread_mutex_unlock(&fz.lock);
}

static bool fz_is_sleeping(struct engine *e)
{
	return false;
}

#define FZ_TRANSPORT_OPS                                                       \
	.name = "fuzz", .open = fz_open, .close = fz_close,                    \
	.forget = fz_close, .peer_get = fz_peer_get,                           \
	.peer_is_self = fz_peer_is_self, .pkt_claim = fz_pkt_claim,            \
	.pkt_send = fz_pkt_send, .pkt_peek = fz_pkt_peek,                      \
	.pkt_release = fz_pkt_release, .sleep = fz_sleep, .nap = fz_nap,       \
	.wake = fz_wake, .is_sleeping = fz_is_sleeping

#endif /* IBEMU_FUZZ_TRANSPORT_H */
