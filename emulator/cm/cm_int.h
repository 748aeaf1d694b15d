/* SPDX-License-Identifier: MIT */
/*
 * What the files of the RDMA CM (cm.h) share, private to them: its
 * timing, the states of an id, its objects (ids, event channels, the CM
 * itself) and the functions one file calls in another.  The files:
 *
 *   cm.c          the CM's start, the lifecycle of its ids, and what its
 *                 multicast joins (cm_mcast.c, cm_mcast.h) call
 *   cm_addr.c     addresses, other nodes, bind, address and route
 *                 resolution
 *   cm_channel.c  the event channels
 *   cm_send.c     the messages sent
 *   cm_conn.c     listen, connect, accept
 *   cm_recv.c     the messages received (cm_recv_locked, cm.h)
 *   cm_timer.c    timers, the peers' liveness, the CM thread
 *
 * Lock rule: cm.lock protects every id, every channel's queue and the
 * id list; it is taken after engine.lock (cm_recv_locked runs under
 * it) and never held while calling out of the CM except to send a
 * packet (the transport's producer side), to lock the node segment, or
 * to ask the network transport about a remote slot or tell it a route
 * (tp_net_ops: peer_info, peer_watch_fd, seed_qpn, which take only the
 * transport's lock and a connection's); it is dropped while another
 * node's door is asked (resolve_cm blocks), the id marked connecting
 * meanwhile.
 * Each channel's descriptor pair is written under cm.lock and read by
 * the application without it.  The functions below named _locked are
 * called with cm.lock held.
 */
#ifndef IBEMU_CM_INT_H
#define IBEMU_CM_INT_H

#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

#include "cm.h"
#include "cm_watch.h"
#include "cm_wire.h"

/*
 * Timing.  IBA 12.4 gives a request's timeout from the CM Response
 * Timeout field (4.096 us * 2^n) and retries up to Max CM Retries; the
 * kernel's rdma_cm asks for 2^20 (4.3 s) and 15 retries.  On one node a
 * message is lost only when the receiver skipped its room, so a shorter
 * timer serves: CM_RETRY_MS, CM_MAX_RETRIES times.
 */
#define CM_RETRY_MS 500
#define CM_MAX_RETRIES 8
/* What REQ says of both (IBA 12.6.5): 4.096 us * 2^17 = 537 ms, the
 * CM_RETRY_MS above, and Max CM Retries. */
#define CM_RESPONSE_TIMEOUT 17
#define CM_LIVENESS_MS 100
#define CM_LOCAL_ACK_TIMEOUT 14 /* 4.096 us * 2^14 = 67 ms (IBA 9.7.6.1.3) */
#define CM_BACKLOG_MAX 1024
/* The GRH's hop limit on a path to another node (IBA 8.3.1): routers
 * may lie between. */
#define CM_HOP_LIMIT 64
/* The time wait after a disconnection (IBA 12.9.6): twice the packet
 * lifetime the path gives (CM_LOCAL_ACK_TIMEOUT) and some. */
#define CM_TIMEWAIT_MS 150

enum cm_state {
	CM_IDLE,
	CM_ADDR_BOUND,
	CM_ADDR_QUERY,
	CM_ADDR_RESOLVED,
	CM_ROUTE_RESOLVED,
	CM_LISTEN,
	CM_REQ_SENT,
	CM_REQ_RCVD,
	CM_REP_SENT,
	CM_REP_RCVD,
	CM_ESTABLISHED,
	CM_DREQ_SENT,
	CM_DISCONNECTED,
	CM_SIDR_REQ_SENT,
	CM_SIDR_REQ_RCVD,
	CM_FAILED, /* rejected, unreachable: only destroy is left */
	/* emu_cm_id_close ended it: off the id list, no event, every call
	 * refused (ENOENT); its memory waits for emu_cm_id_free */
	CM_CLOSED,
};

struct cm_ev_node {
	struct cm_ev_node *next;
	struct emu_cm_event ev;
};

struct emu_cm_chan {
	struct emu_cm *cm;
	/* An eventfd counting queued events (EFD_SEMAPHORE: a read takes
	 * one).  The application blocks in read or polls it, with
	 * whatever O_NONBLOCK it sets.  A count whose event was dropped
	 * with its id (or moved with it to another channel) stays: a read
	 * that finds no event behind its count reads on. */
	int fd;
	struct cm_ev_node *head, **tail;
	unsigned int nr_ids;
	/* threads in emu_cm_get_event; destroyed under them, the channel
	 * is closed and freed by the last one out */
	unsigned int readers;
	bool destroyed;
};

struct emu_cm_id {
	struct emu_cm *cm;
	struct emu_cm_id *next;
	struct emu_cm_chan *chan;
	uint64_t handle;
	uint16_t ps;
	enum ibv_qp_type qp_type;
	enum cm_state state;
	struct sockaddr_storage src, dst;
	int port_idx; /* node_cm entry, -1: none */
	bool reuse, afonly;
	/* a listener: requests reported but not yet answered */
	int backlog, queued;
	struct emu_cm_id *listener; /* a request of it, not yet answered */
	/* the connection (IBA 12.6.5 Local/Remote Communication ID) */
	uint32_t local_id, remote_id;
	int32_t peer_slot;
	uint64_t peer_token;
	/* the peer is on another node: its node's address, its port's LID
	 * and the path's GIDs, ours and its (IBA 12.6.5 primary path) */
	bool remote;
	struct sockaddr_storage node_addr;
	uint16_t rlid;
	uint8_t lgid[16], rgid[16];
	/* emu_cm_connect asks the peer's node, cm.lock dropped */
	bool connecting;
	uint64_t tid;
	uint32_t qpn, psn, qkey;
	uint32_t remote_qpn, remote_psn, remote_qkey;
	uint8_t resp_res, init_depth, retry_count, rnr_retry;
	/* RDMA_OPTION_ID_ACK_TIMEOUT: the requester's Local ACK Timeout
	 * (IBA 9.7.6.1.3) for RTS, in place of CM_LOCAL_ACK_TIMEOUT */
	uint8_t ack_timeout;
	bool ack_timeout_set;
	/* retransmission: the last message sent that awaits an answer, or
	 * answers a message the peer may repeat */
	uint8_t last[CM_MAD_LEN];
	bool has_last;
	uint64_t deadline; /* ns, 0: no timer */
	unsigned int retries;
	uint64_t live_check; /* ns: next liveness look at the peer */
	bool peer_exited; /* its watch fired: look at once */
	/* events of the id taken off its channel (emu_cm_get_event) */
	unsigned int delivered;
};

struct emu_cm {
	struct emu_hca *hca;
	pthread_mutex_t lock;
	/* an id's connecting ended (cm_resolve_remote_locked), for a
	 * destroy that waits for it; with lock */
	pthread_cond_t connected;
	int wake_fd; /* eventfd: the CM thread has work or a new timer */
	pthread_t thread;
	struct cm_watch watch; /* the CM thread's, under lock */
	/* the CM thread's poll set: wake_fd, then the watched peers */
	struct pollfd pfd[CM_WATCH_MAX + 1];
	int32_t pfd_slot[CM_WATCH_MAX];
	struct emu_cm_id *ids;
	uint32_t next_id;
	uint64_t next_tid;
};

/* cm.c */
uint32_t cm_random(void);
/* Make the CM thread look again at its ids (a new timer or peer). */
void cm_wake(struct emu_cm *cm);
/* ENOENT for an id emu_cm_id_close ended, else EINVAL. */
int cm_wrong_state_locked(const struct emu_cm_id *id);
struct emu_cm_id *cm_id_alloc_locked(struct emu_cm *cm,
				     struct emu_cm_chan *chan, uint64_t handle,
				     uint16_t ps, enum ibv_qp_type qp_type);
/* The listener no longer counts id among its unanswered requests. */
void cm_unqueue_locked(struct emu_cm_id *id);

/* cm_addr.c */
/* addr as 16 bytes: IPv6, or IPv4 mapped; *v4 says which. */
void cm_addr16(const struct sockaddr *sa, uint8_t out[16], bool *v4);
uint16_t cm_port_of(const struct sockaddr_storage *ss);
bool cm_addr_any(const struct sockaddr *sa);
/* The port's GID for our address src. */
void cm_own_gid(struct emu_cm *cm, const struct sockaddr *src, uint8_t gid[16]);
/* The remote slot's process owns qpn: the network transport learns it. */
void cm_route_learn(struct emu_cm *cm, int32_t slot, uint32_t qpn);
/* What the transport knows of the remote slot's process: its node's
 * LID, address (as a GID) and token; false if the slot names none. */
bool cm_remote_peer(struct emu_cm *cm, int32_t slot, uint16_t *lid,
		    uint8_t gid[16], struct sockaddr_storage *node_addr,
		    uint64_t *token);
/* The address vector to the id's peer. */
void cm_ah_locked(struct emu_cm_id *id, struct ibv_ah_attr *ah);
/* Bind id to addr (port 0: an ephemeral one). */
int cm_bind_locked(struct emu_cm_id *id, const struct sockaddr *addr);

/* cm_channel.c */
/* Queue ev on the id's channel. */
void cm_queue_locked(struct emu_cm_id *id, struct emu_cm_event *ev);
void cm_event_locked(struct emu_cm_id *id, enum emu_cm_event_type type,
		     int status);
/* The connection is over: DISCONNECTED now, TIMEWAIT_EXIT after the
 * time wait.  ev: the DISCONNECTED event to queue (NULL: one without
 * data). */
void cm_disconnected_locked(struct emu_cm_id *id, struct emu_cm_event *ev);

/* cm_send.c */
void cm_mad_init(struct emu_cm_id *id, uint8_t *mad, uint16_t attr);
/* Send one MAD to QP1 of process slot. */
void cm_send_locked(struct emu_cm *cm, int32_t slot, const uint8_t *mad);
/* Record a CM message sent or received (dir "tx", "rx") in the run
 * trace. */
void cm_trace_mad(const char *dir, const uint8_t *mad);
/* Send mad to the id's peer and keep it for retransmission (timed: an
 * answer is awaited) or for repeating (a duplicate asks again). */
void cm_send_keep_locked(struct emu_cm_id *id, const uint8_t *mad, bool timed);
void cm_send_rej_to(struct emu_cm *cm, int32_t slot, uint64_t tid,
		    uint32_t local_id, uint32_t remote_id, uint8_t msg,
		    uint16_t reason, const void *pd, uint8_t len);
void cm_send_rej_locked(struct emu_cm_id *id, uint8_t msg, uint16_t reason,
			const void *pd, uint8_t len);
void cm_send_sidr_rep_locked(struct emu_cm_id *id, uint8_t status,
			     const void *pd, uint8_t len);
void cm_send_dreq_locked(struct emu_cm_id *id, bool timed);

/* cm_timer.c */
/* Whether the peer process in slot holding token lives. */
bool cm_peer_alive(struct emu_cm *cm, int32_t slot, uint64_t token);
/* The CM thread (emu_cm_open starts it); arg: the CM. */
void *cm_thread(void *arg);

#endif /* IBEMU_CM_INT_H */
