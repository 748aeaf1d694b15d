/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport's internals (tp_tcp.c), shared by its files and by
 * nothing else: its limits, the bodies of its control frames (HELLO,
 * LOOKUP), a connection and the transport itself, and the prototypes of
 * what its files call in one another, grouped by the file that defines
 * them.  The transport's interface is tp_tcp.h and tp_tcp_ops
 * (transport.h).
 *
 * Lock rule: tcp.lock protects conns[], the route cache and the node's
 * net_peers entries of this process; a connection's tx_lock protects its
 * queue and stage, taken by pkt_claim and released by pkt_send (the
 * engine's producer calls come in pairs), or by the network thread to
 * flush; the receiving side of every connection is the network
 * thread's alone.  No lock of this file is held while taking an engine
 * or QP lock.
 */
#ifndef IBEMU_TCP_INT_H
#define IBEMU_TCP_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "clock.h"
#include "engine.h"
#include "fabric_key.h"
#include "sockaddr.h"
#include "tp_frame.h"

#define TCP_MAX_CONNS 1024 /* remote processes one process talks to */
#define TCP_TX_CAP (1u << 20) /* bytes queued per connection */
#define TCP_RX_CAP (256u << 10)
#define TCP_READ_BUDGET (256u << 10) /* read of one connection a call */
#define TCP_RESOLVE_MS 2000
/* How long a failed resolution is believed: one that cost its caller a
 * wait (a node that does not answer: up to TCP_RESOLVE_MS each try) for
 * long; one that failed at once (no such QP yet, a connection refused or
 * reset, as while a door changes hands) for a moment, so an RC QP whose
 * resolution failed gets its peer on a retry. */
#define TCP_UNREACH_TTL_NS (10000ull * 1000 * 1000)
#define TCP_NOQP_TTL_NS (100ull * 1000 * 1000)
#define TCP_CHEAP_FAIL_NS (100ull * 1000 * 1000)
#define TCP_ROUTES 512 /* (node, QPN) -> connection, a cache */
#define TCP_DOOR_CLIENTS 16
/* Bounds under hostile load (tcp_reap.c): a door client has this long
 * to ask; an accepted connection to greet; a greeted one that no QP of
 * this process uses is closed after this long without a frame; one
 * address holds at most this many door clients, and this many
 * connections no QP uses; a full descriptor table pauses accepting. */
#define TCP_DOOR_IDLE_MS 2000
#define TCP_HELLO_MS 2000
#define TCP_UNUSED_IDLE_MS (30u * 1000)
#define TCP_DOOR_PER_SOURCE 4
#define TCP_UNUSED_PER_SOURCE 32
#define TCP_ACCEPT_PAUSE_MS 100
#define TCP_REAP_MS 250 /* freeing what a poll may still read */
/* Before its greeting a connection reads into this much: a HELLO. */
#define TCP_RX_HELLO_CAP 256
#define TCP_DOOR_RETRY_MS 1000
#define TCP_STALL_MS 1 /* a full inbox: read again this soon */
/* Parked connections (tcp_thread.c) are looked at this often: one
 * wake-up of the network thread a coarse clock tick while a busy poller
 * has them, not one a millisecond on the CPU it spins on. */
#define TCP_PARK_MS 4
/* An application polled this recently (ms, by the coarse clock whose
 * ticks may be 4 ms) busy-polls (tcp_app_polling). */
#define TCP_APP_POLL_MS 5
/* Polls this soon after the application armed a CQ are its last before
 * it blocks, not a busy poller's (tcp_poll). */
#define TCP_APP_ARMED_NS (1000ull * 1000)
#define TCP_BATCH (256u << 10) /* tcp_more_follows */
/* The network thread reads on after data came (tcp_conn_linger) until
 * none came for this long, this long at most. */
#define TCP_LINGER_NS (20ull * 1000)
#define TCP_LINGER_MIN (16u << 10)
#define TCP_LINGER_MAX_NS (1000ull * 1000)
#define TCP_TX_RETRY_NS (20ull * 1000) /* a full socket asked again */
#define TCP_POLL_CONNS 64 /* connections an application's poll reads */
#define TCP_FRAME_ROOM                                                         \
	(sizeof(struct tp_frame_hdr) + sizeof(struct tp_frame_grh) +         \
	 PKT_MAX_LEN)

enum tcp_conn_state {
	TCP_CONN_HELLO, /* accepted, its HELLO not read yet */
	TCP_CONN_UP,
	TCP_CONN_DEAD,
	TCP_CONN_ATTACHING, /* a resolver puts a new socket under it */
};

/* What epoll reports names one of these. */
enum tcp_ev_kind {
	TCP_EV_KICK,
	TCP_EV_LISTEN,
	TCP_EV_DOOR,
	TCP_EV_DOOR_CLIENT,
	TCP_EV_CONN, /* a connection can be read */
	TCP_EV_CONN_OUT, /* its socket takes more */
	TCP_EV_WATCH,
};

struct tcp_ev {
	enum tcp_ev_kind kind;
	void *ptr;
};

/*
 * The HELLO each side sends first; the LOOKUP and its reply.  With a
 * fabric key (tcp_key.c) each carries a fresh challenge (nonce) and the
 * answers prove the key on the other's challenge: the connecting side's
 * HELLO (nonce_c), the accepting side's (nonce_a, proof of nonce_c and
 * nonce_a), then a second HELLO of the connecting side (proof of
 * nonce_a and nonce_c), before any data; a LOOKUP's nonce, and its
 * reply's proof over the nonce and the reply.
 */
#define TCP_NONCE_LEN 16
#define TCP_F_KEY 1u /* the sender has a fabric key */

struct tcp_hello {
	__be16 lid;
	__be16 port; /* the sender's own TCP port */
	uint8_t flags; /* TCP_F_* */
	uint8_t resv[3];
	uint8_t nonce[TCP_NONCE_LEN];
	uint8_t proof[FABRIC_KEY_LEN];
};

enum tcp_lookup_kind {
	TCP_LOOKUP_QPN = 1,
	TCP_LOOKUP_CM = 2,
};

struct tcp_lookup {
	__be32 kind;
	__be32 qpn;
	__be16 ps, port;
	uint8_t v4;
	uint8_t flags; /* TCP_F_* */
	uint8_t resv[2];
	uint8_t addr[16];
	uint8_t nonce[TCP_NONCE_LEN];
};

struct tcp_lookup_reply {
	__be32 status; /* 0 or a positive errno */
	__be32 slot;
	__be64 token;
	__be16 port;
	__be16 lid;
	uint8_t flags; /* TCP_F_* */
	uint8_t resv[3];
	uint8_t proof[FABRIC_KEY_LEN]; /* over the nonce and the above */
};

#define TCP_CTRL_MAX                                                           \
	(sizeof(struct tcp_hello) > sizeof(struct tcp_lookup)                  \
		 ? sizeof(struct tcp_hello)                                    \
		 : sizeof(struct tcp_lookup))

struct tcp_stage {
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	uint8_t data[PKT_MAX_LEN];
};

struct tp_tcp;

struct tcp_conn {
	struct tp_peer base;
	struct tp_tcp *t;
	struct tcp_ev ev, wev;
	/* IBEMU_MAX_PROCS + index + TCP_MAX_CONNS * generation: a slot
	 * number of an entry given back never names its successor
	 * (tcp_conn_at). */
	int32_t slot;
	/* Some part of this process holds c (tcp_peer_get, a resolution):
	 * never given back while the transport is open.  Set under
	 * tcp.lock. */
	atomic_bool used;
	uint64_t hello_by; /* ms: greeted by then, or closed (tcp_reap) */
	_Atomic uint64_t rx_at; /* ms: the last frame read */
	struct tcp_conn *next_retired; /* tcp_reap's list */
	_Atomic int state; /* enum tcp_conn_state */
	/* The socket, registered for reading one event at a time
	 * (EPOLLONESHOT, re-armed by the network thread), and a duplicate
	 * for writing, armed one event at a time too, when the socket
	 * refused some of the queue (tcp_arm_out_locked). */
	int fd, wfd;
	_Atomic int pub; /* its net_peers entry, -1: none */
	/* The remote process; set before UP, fixed while UP. */
	struct sockaddr_storage addr; /* its node's address, its port */
	uint64_t guid, token;
	int32_t rslot;
	uint16_t lid;
	/* An accepted connection greeted with the fabric key: the
	 * challenges, until the connecting side's proof (tcp_key.c). */
	bool await_proof;
	uint8_t nonce_c[TCP_NONCE_LEN], nonce_a[TCP_NONCE_LEN];
	/* Sending, under tx_lock. */
	pthread_mutex_t tx_lock;
	uint8_t *tx;
	uint32_t tx_head, tx_tail;
	bool tx_reg; /* wfd is in the epoll set */
	uint64_t tx_retry_at; /* ns: the socket refused, ask from then */
	bool tx_armed; /* EPOLLOUT asked for, not seen fired */
	/* The network thread took the EPOLLOUT event (tx_armed is stale)
	 * without tx_lock. */
	atomic_bool out_fired;
	/* A busy poller flushes the queue (tcp_poll): EPOLLOUT is not
	 * asked for.  Set and cleared by the network thread. */
	atomic_bool out_parked;
	/* The queue holds bytes the socket has not taken: written under
	 * tx_lock, read without it as a hint (tcp_poll). */
	atomic_bool tx_backlog;
	bool tx_refused; /* a claim found no room since the last flush */
	bool tx_deferred; /* holds an ACK for the application's next call */
	bool discard; /* the claimed packet goes nowhere */
	struct tcp_stage *stage;
	_Atomic uint64_t taken; /* bytes the socket took: progress */
	/* Receiving, under rx_lock: the network thread's, or a busy
	 * poller's that gets the lock at once (tcp_poll). */
	pthread_mutex_t rx_lock;
	uint8_t *rx;
	uint32_t rx_len, rx_cap; /* TCP_RX_HELLO_CAP until greeted */
	/* Written under rx_lock; read without it as a hint (the thread's
	 * retry sweep), so atomic. */
	atomic_bool rx_stalled;
	bool parked; /* a busy poller reads it: not re-armed (tcp_thread) */
	/* A send failed while the socket may still hold what the peer sent
	 * before it went (an ACK it flushed just before closing): DEAD (or
	 * ATTACHING, a resolver putting a new socket under it), yet read
	 * to its end (tcp_conn_send_failed_locked).  Set and cleared under
	 * tx_lock, cleared by a new socket under rx_lock too; looked at
	 * without them to choose what to read. */
	_Atomic bool rx_drain;
};

/* A lookup being answered by the door. */
struct tcp_door_client {
	struct tcp_ev ev;
	int fd;
	uint64_t by; /* ms: asked by then, or closed */
	struct sockaddr_storage from;
	struct tcp_door_client *next_done; /* freed by tcp_reap */
	uint32_t len;
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
};

struct tcp_route {
	struct sockaddr_storage node; /* port 0 */
	uint32_t qpn;
	int32_t slot; /* -1: a failure, until expires */
	int err;
	uint64_t expires; /* failures only */
};

struct tp_tcp {
	struct engine *e;
	bool forced;
	struct fabric_key key; /* IBEMU_FABRIC_KEY: fixed once open */
	atomic_bool key_told; /* a key mismatch was said */
	atomic_bool door_told; /* another user's door was said */
	atomic_bool twin_told; /* two nodes at one address were said */
	/* What the door and the data port listen on: the node's fabric
	 * address in network mode, else loopback (tcp_wanted). */
	struct sockaddr_storage bind_addr;
	int ep, kick, lfd, door_fd, watch_fd;
	uint16_t port, door_port;
	struct tcp_ev kick_ev, listen_ev, door_ev, watch_ev;
	pthread_t thread;
	atomic_bool stop;
	pthread_mutex_t lock;
	struct tcp_conn *conns[TCP_MAX_CONNS];
	unsigned int nr_conns;
	struct tcp_route routes[TCP_ROUTES];
	struct tcp_door_client *door_clients[TCP_DOOR_CLIENTS];
	bool door_foreign; /* another node's process holds our door port */
	/* Given back (tcp_reap.c), owned by the network thread: the slot
	 * generations, entries taken out of conns[] and freed once no
	 * application poll may still hold them (pollers), and the
	 * accepting paused at the descriptor limit. */
	uint32_t gens[TCP_MAX_CONNS];
	struct tcp_conn *retired;
	struct tcp_door_client *door_done;
	struct tcp_conn *reap_seen[TCP_MAX_CONNS]; /* tcp_reap's snapshot */
	atomic_int pollers;
	atomic_bool reap_now; /* a connection died or came: look */
	uint64_t reap_at, accept_paused_until;
	bool accept_paused;
	bool clash_told; /* a LID collision was reported */
	/* When the application last polled the network (tcp_poll, ms; 0:
	 * it arms its CQs now, tcp_flush_deferred); the thread leaves
	 * connections to it while that is recent. */
	_Atomic uint64_t app_poll_ms;
	_Atomic uint64_t app_armed_ns; /* when it armed a CQ; 0: long ago */
	/* Some connection is parked (written by the network thread, read
	 * as a hint), and the application asks for it back now. */
	atomic_bool parked_any, unpark_now;
	atomic_bool deferred; /* some connection holds an ACK back */
	/* Some connection was ever made (conns[] entries are kept while
	 * the transport is open): until then the application's polls have
	 * nothing to read here and pay one load. */
	atomic_bool has_conns;
	unsigned int poll_next; /* the application's next poll starts here */
	unsigned int nr_parked, nr_out_parked;
	uint64_t park_check; /* ms */
	unsigned int nr_stalled;
	struct tp_tcp *exit_next; /* tcp_exit.c's list, under its lock */
};

static inline struct tp_tcp *tp_tcp(struct engine *e)
{
	return e->net_priv;
}

static inline uint64_t tcp_now_ms(void)
{
	return clock_coarse_ns() / 1000000;
}

/* tcp_sock.c: addresses, sockets, frames */
bool tcp_same_node(const struct sockaddr_storage *a,
		   const struct sockaddr_storage *b);
void tcp_set_port(struct sockaddr_storage *ss, uint16_t port);
const char *tcp_addr_str(const struct sockaddr_storage *ss, char *buf,
			 size_t len);
void tcp_sock_opts(int fd);
int tcp_listen_on(const struct sockaddr_storage *at, uint16_t port,
		  bool reuse, uint16_t *port_p);
int tcp_connect(const struct sockaddr_storage *addr, uint64_t deadline,
		int *fd_p);
void tcp_frame_init(struct tp_tcp *t, struct tp_frame_hdr *f, uint8_t type,
		    uint32_t len, int32_t dst_slot);
int tcp_exchange(struct tp_tcp *t, int fd, uint8_t type, const void *body,
		 uint32_t len, uint8_t want, struct tp_frame_hdr *rf,
		 void *rbody, uint32_t rlen, uint64_t deadline);
int tcp_send_frame(struct tp_tcp *t, int fd, uint8_t type, const void *body,
		   uint32_t len, uint64_t deadline);

/* tcp_trust.c: whom a door's answer is believed from */
bool tcp_door_ours(struct tp_tcp *t, const struct sockaddr_storage *door);
bool tcp_door_one_node(struct tp_tcp *t,
		       const struct sockaddr_storage *node_addr, uint16_t lid,
		       uint64_t guid);

/* tcp_key.c: the fabric key at the greeting and at the door */
int tcp_key_open(struct tp_tcp *t);
void tcp_key_say(struct tp_tcp *t, const struct sockaddr_storage *addr,
		 const char *what);
int tcp_key_hello_out(struct tp_tcp *t, struct tcp_hello *h);
bool tcp_key_accept(struct tp_tcp *t, struct tcp_conn *c,
		    const struct tcp_hello *in, struct tcp_hello *out);
bool tcp_key_connected(struct tp_tcp *t, const struct sockaddr_storage *addr,
		       const struct tcp_hello *mine,
		       const struct tcp_hello *theirs, struct tcp_hello *proof);
bool tcp_key_proven(struct tp_tcp *t, struct tcp_conn *c,
		    const struct tcp_hello *h);
int tcp_key_lookup_out(struct tp_tcp *t, struct tcp_lookup *q);
void tcp_key_door_reply(struct tp_tcp *t, const struct tcp_lookup *q,
			struct tcp_lookup_reply *r);
bool tcp_key_reply_ok(struct tp_tcp *t, const struct sockaddr_storage *addr,
		      const struct tcp_lookup *q,
		      const struct tcp_lookup_reply *r);

/* tp_tcp.c */
void tcp_node_addr(const struct tp_tcp *t,
		   const struct sockaddr_storage *node_addr,
		   struct sockaddr_storage *out);

/* tcp_status.c: publication for `ibemu status` */
void tcp_publish(struct tp_tcp *t, struct tcp_conn *c);
struct node_net_peer *tcp_pub(struct tcp_conn *c);
void tcp_count(_Atomic uint64_t *ctr, uint64_t n);

/* tcp_conn.c: connections */
void tcp_conn_dead(struct tcp_conn *c, int err);
struct tcp_conn *tcp_conn_new_locked(struct tp_tcp *t);
bool tcp_conn_carries_data(struct tcp_conn *c);
bool tcp_conn_live(struct tcp_conn *c);
bool tcp_same_process(struct engine *e, int32_t a, int32_t b);
void tcp_rearm(struct tp_tcp *t, struct tcp_conn *c);
int tcp_conn_register(struct tp_tcp *t, struct tcp_conn *c, int fd);
void tcp_conn_close_fds(struct tp_tcp *t, struct tcp_conn *c);
int32_t tcp_conn_to(struct tp_tcp *t, const struct sockaddr_storage *node_addr,
		    int32_t rslot, uint64_t token, uint16_t port, uint16_t lid,
		    uint64_t deadline);

/* tcp_resolve.c: lookups at a node's door */
void tcp_lid_check(struct tp_tcp *t, uint16_t lid, uint64_t guid,
		   const struct sockaddr_storage *addr);
int tcp_lookup(struct tp_tcp *t, const struct sockaddr_storage *node_addr,
	       const struct tcp_lookup *q, struct tcp_lookup_reply *r,
	       uint64_t deadline);

/* tcp_send.c: sending */
extern __thread bool tcp_app_draining;
void tcp_conn_drop_locked(struct tcp_conn *c, int err);
void tcp_flush_locked(struct tcp_conn *c);
void tcp_flush_backlog(struct tcp_conn *c);
void tcp_flush_deferred(struct engine *e, bool wait);
void tcp_net_flush(struct engine *e);
void tcp_poll_done(struct engine *e);
bool tcp_pkt_claim(struct tp_peer *peer, struct tp_pkt *pkt);
void tcp_pkt_send(struct tp_peer *peer, struct tp_pkt *pkt);
uint64_t tcp_peer_taken(struct tp_peer *peer);
struct tp_peer *tcp_peer_get(struct engine *e, int32_t slot);
bool tcp_peer_is_self(struct engine *e, const struct tp_peer *peer);

/* tcp_recv.c: receiving */
void tcp_room(struct engine *e);
/* Read what c has, under its rx_lock; whether it is left stalled (the
 * engine's inbox full), as seen under that lock. */
bool tcp_conn_readable(struct tp_tcp *t, struct tcp_conn *c,
		       uint32_t *taken_p);
void tcp_poll(struct engine *e);
void tcp_conn_writable(struct tcp_conn *c);
void tcp_conn_out_event(struct tp_tcp *t, struct tcp_conn *c);
void tcp_out_unpark(struct tp_tcp *t);
void tcp_accept(struct tp_tcp *t);

/* tcp_reap.c: bounds under hostile load */
struct tcp_conn *tcp_conn_at(struct tp_tcp *t, int32_t slot);
bool tcp_source_full(struct tp_tcp *t, const struct sockaddr_storage *from);
void tcp_accept_pause(struct tp_tcp *t, int err);
int tcp_conn_buffers(struct tcp_conn *c);
int tcp_reap(struct tp_tcp *t);
void tcp_reap_free(struct tp_tcp *t);

/* tcp_door.c: the door */
void tcp_door_client_readable(struct tp_tcp *t, struct tcp_door_client *d);
void tcp_door_accept(struct tp_tcp *t);
void tcp_door_try(struct tp_tcp *t);
void tcp_door_release(struct tp_tcp *t);
void tcp_door_client_done(struct tp_tcp *t, struct tcp_door_client *d);

/* tcp_exit.c: held-back ACKs at the process's exit */
void tcp_exit_add(struct tp_tcp *t);
void tcp_exit_remove(struct tp_tcp *t);
void tcp_exit_forget(void);

/* tcp_thread.c: the network thread */
bool tcp_app_polling(struct tp_tcp *t);
void *tcp_thread(void *arg);

#endif /* IBEMU_TCP_INT_H */
