/* SPDX-License-Identifier: MIT */
/*
 * rsockets (rsocket(7)) over ibemu's RDMA CM face and verbs: what the
 * API and descriptor table (rsocket.c and the rsocket_*.c beside it)
 * and the stream protocol (rsocket_proto.c) share.  doc/rsocket.md
 * describes the protocol.
 *
 * Lock rule: each rsocket's lock guards every field of it; a call holds
 * it from lookup to return, letting it go only while it sleeps in
 * poll(2).  The descriptor table has its own lock (rsocket.c), taken
 * alone and never while a socket's lock is wanted.
 */
#ifndef IBEMU_RSOCKET_H
#define IBEMU_RSOCKET_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <rdma/rdma_cma.h>

#include "rsocket_wire.h"

/* Bounds of the data window (receive buffers: a peer offering another
 * is refused) and of the send queue. */
#define RS_QUEUE_MIN 4u
#define RS_QUEUE_MAX 256u
#define RS_QUEUE_DEFAULT 32u
/* Bound of the iomaps one side keeps of each kind. */
#define RS_IOMAP_MAX 64u

enum rs_state {
	RS_IDLE,
	RS_BOUND,
	RS_LISTENING,
	RS_ADDR_QUERY,	/* rconnect: waiting for ADDR_RESOLVED */
	RS_ROUTE_QUERY, /* ... ROUTE_RESOLVED */
	RS_CONNECTING,	/* ... ESTABLISHED */
	RS_ACCEPTING,	/* raccept done, ESTABLISHED not seen yet */
	RS_CONNECTED,
	RS_FAILED, /* connect failed or the connection broke: err says why */
};

/* A region of memory riomap'ed, ours (lkey/MR) or the peer's. */
struct rs_iomap {
	bool used;
	bool announce;	 /* ours: the peer has yet to be told (RS_IOMAP) */
	bool writable;	 /* ours: the peer may write it (PROT_WRITE) */
	uint64_t offset; /* the name riowrite uses */
	uint64_t addr;
	uint64_t len; /* 0 in an announcement: unmapped */
	uint32_t rkey;
	struct ibv_mr *mr; /* ours only */
};

struct rsock {
	int fd; /* the number the application holds: ch->fd */
	pthread_mutex_t lock;
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	enum rs_state state;
	int err; /* pending SO_ERROR, or why the connection broke */
	bool nonblock;
	/* options */
	int reuseaddr, keepalive, nodelay, keepidle;
	uint32_t rq_size; /* data window we offer: receive buffers */
	uint32_t sq_size; /* send queue slots */
	uint32_t inline_size, iomap_size;

	/* verbs (rsocket_proto.c) */
	struct ibv_comp_channel *cc;
	struct ibv_cq *cq;
	bool cq_armed;
	unsigned int cq_events; /* got, not yet acknowledged */
	uint8_t *rbuf, *sbuf;
	struct ibv_mr *rmr, *smr;
	uint32_t nrecv;	  /* rq_size + RS_CTRL_SLOTS + RS_FIN_SLOTS */
	uint32_t sq_next; /* next send slot */
	uint32_t sq_used; /* slots posted, completion not seen */

	/* receive side: data buffers in stream order */
	uint32_t *rxq; /* buffer indexes, ring of nrecv */
	uint32_t rxq_head, rxq_cnt;
	uint32_t *rx_pos, *rx_end; /* per buffer: bytes read, bytes there */
	uint32_t data_freed; /* data-class messages whose buffer we reposted */
	uint32_t data_freed_told; /* ... as last told to the peer */
	uint32_t ctrl_polled;	  /* credit messages we took in */
	bool peer_fin;	/* RS_FIN seen: no data after what is queued */
	bool peer_gone; /* DISCONNECTED, or the QP broke */
	bool rd_shut, wr_shut;

	/* send side */
	uint32_t peer_q; /* the peer's data window */
	uint32_t data_sent, peer_data_freed;
	uint32_t ctrl_sent, peer_ctrl_polled;

	struct rs_iomap lmap[RS_IOMAP_MAX]; /* ours, announced to the peer */
	struct rs_iomap rmap[RS_IOMAP_MAX]; /* the peer's, riowrite targets */
	bool iomap_pending; /* some lmap entry waits to be announced */
};

/* rsocket.c: the descriptor table */
int tab_add(struct rsock *rs);
struct rsock *tab_find(int s, bool remove);
/* The rsocket s, locked; NULL with errno EBADF if s is none. */
struct rsock *rs_get(int s);
/* rs unlocked; -1 with errno err. */
int rs_put_err(struct rsock *rs, int err);
struct rsock *rs_alloc(void);
void rs_free(struct rsock *rs);
/* CLOCK_MONOTONIC in milliseconds. */
int64_t now_ms(void);

/* rsocket_conn.c: completions and CM events there are now; the
 * descriptors that signal news for rs (1 or 2, into p); one step of a
 * blocking call, rs's lock dropped while it sleeps. */
void rs_progress(struct rsock *rs);
nfds_t rs_pollfds(const struct rsock *rs, struct pollfd *p);
void rs_wait(struct rsock *rs, int timeout_ms);
/* sa copied out to a and *l, as accept(2) and getpeername(2) do. */
void rs_sa_out(const struct sockaddr *sa, struct sockaddr *a,
	       socklen_t *l);

/* rsocket_proto.c */
int rs_verbs_init(void);
int rs_res_create(struct rsock *rs);
void rs_res_destroy(struct rsock *rs);
void rs_conn_data_make(const struct rsock *rs, struct rs_conn_data *c);
int rs_conn_data_take(struct rsock *rs, const void *p, size_t len);
int rs_poll_cq(struct rsock *rs);
int rs_arm_cq(struct rsock *rs);
void rs_take_cq_events(struct rsock *rs);
bool rs_can_send(const struct rsock *rs);
bool rs_sq_free(const struct rsock *rs);
bool rs_has_data(const struct rsock *rs);
size_t rs_send_some(struct rsock *rs, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t len);
size_t rs_recv_some(struct rsock *rs, const struct iovec *iov, int iovcnt,
		    size_t skip, size_t len, bool peek);
int rs_give_credits(struct rsock *rs);
int rs_send_fin(struct rsock *rs);
int rs_flush_iomaps(struct rsock *rs);
struct ibv_mr *rs_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access);
void rs_dereg_mr(struct ibv_mr *mr);
size_t rs_write_some(struct rsock *rs, const struct rs_iomap *m,
		     const uint8_t *buf, size_t len, uint64_t offset);

#endif
