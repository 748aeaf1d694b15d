/* SPDX-License-Identifier: MIT */
/*
 * The RDMA communication manager of the emulated HCA (cm.c): what the
 * kernel's rdma_cm and ib_cm do for a real one.  CM ids with their
 * addresses, listeners, the connection state machine of IBA 12.9, the
 * CM messages (cm_wire.h) that travel as packets to QP1 of the peer's
 * port, retransmission and timeouts, and the events the librdmacm face
 * (provider/rdmacm/) reads.
 *
 * The face never receives a call from here: events are queued on an
 * event channel whose descriptor (an eventfd counting queued events)
 * the application polls; emu_cm_get_event() reads one count,
 * honouring the descriptor's O_NONBLOCK, and takes the oldest event.
 *
 * Errors are positive errno values (emu.h); events carry a status as
 * librdmacm reports it (0, a negative errno, or an IBA reject reason).
 */
#ifndef IBEMU_CM_H
#define IBEMU_CM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <infiniband/verbs.h>

struct emu_hca;
struct emu_cm_chan;
struct emu_cm_id;

/* Port spaces, as rdma_cma.h numbers them. */
#define EMU_CM_PS_IPOIB 0x0002
#define EMU_CM_PS_TCP 0x0106
#define EMU_CM_PS_UDP 0x0111
#define EMU_CM_PS_IB 0x013f

/* Event types: enum rdma_cm_event_type's values. */
enum emu_cm_event_type {
	EMU_CM_ADDR_RESOLVED,
	EMU_CM_ADDR_ERROR,
	EMU_CM_ROUTE_RESOLVED,
	EMU_CM_ROUTE_ERROR,
	EMU_CM_CONNECT_REQUEST,
	EMU_CM_CONNECT_RESPONSE,
	EMU_CM_CONNECT_ERROR,
	EMU_CM_UNREACHABLE,
	EMU_CM_REJECTED,
	EMU_CM_ESTABLISHED,
	EMU_CM_DISCONNECTED,
	EMU_CM_DEVICE_REMOVAL,
	EMU_CM_MULTICAST_JOIN,
	EMU_CM_MULTICAST_ERROR,
	EMU_CM_ADDR_CHANGE,
	EMU_CM_TIMEWAIT_EXIT,
};

#define EMU_CM_PRIVATE_MAX 256

/* What a connect, accept or a connection event carries. */
struct emu_cm_conn {
	uint8_t private_data[EMU_CM_PRIVATE_MAX];
	uint8_t private_data_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t flow_control;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint32_t qp_num;
	uint32_t qkey; /* UD */
	struct ibv_ah_attr ah_attr; /* UD: how to reach the peer */
};

struct emu_cm_event {
	uint64_t handle; /* the id's, as the face set it */
	struct emu_cm_id *id;
	/* CONNECT_REQUEST: the new id (handle 0 until the face names it)
	 * and the listener's handle in handle. */
	struct emu_cm_id *new_id;
	enum emu_cm_event_type event;
	int status;
	struct emu_cm_conn param;
	/* MULTICAST_JOIN, MULTICAST_ERROR: the join's context (as given to
	 * emu_cm_join), its join flags, and the membership it reports. */
	uint64_t mc_context;
	uint64_t mc_cookie;
	int mc_join_flags;
};

/* The path an id's connection takes (one node: the node's own port). */
struct emu_cm_route {
	union ibv_gid sgid, dgid;
	uint16_t slid, dlid;
	uint16_t pkey;
	enum ibv_mtu mtu;
	uint8_t port_num;
};

/* The process's CM on hca, started on first use; it lives as long as
 * the process holds hca. */
int emu_cm_open(struct emu_hca *hca);

/* Event channels.  *fd_p: the descriptor the application polls. */
int emu_cm_chan_create(struct emu_hca *hca, struct emu_cm_chan **chan_p,
		       int *fd_p);
/* EBUSY if ids still use it.  A thread in emu_cm_get_event keeps it
 * (and its descriptor) until it returns. */
int emu_cm_chan_destroy(struct emu_cm_chan *chan);
/* The next event: 0, EAGAIN (non-blocking descriptor, none queued),
 * EINTR, or another errno of read(2); EBADF instead when the channel
 * was destroyed meanwhile (a blocking read stays blocked, as on the
 * kernel's rdma_cm). */
int emu_cm_get_event(struct emu_cm_chan *chan, struct emu_cm_event *ev);
/* Keep chan as a reader in emu_cm_get_event does, across a caller's
 * own use of it: EBADF if it is destroyed already; a destroy meanwhile
 * leaves it to emu_cm_chan_put to free. */
int emu_cm_chan_hold(struct emu_cm_chan *chan);
void emu_cm_chan_put(struct emu_cm_chan *chan);

int emu_cm_id_create(struct emu_hca *hca, struct emu_cm_chan *chan,
		     uint64_t handle, int ps, enum ibv_qp_type qp_type,
		     struct emu_cm_id **id_p);
void emu_cm_id_set_handle(struct emu_cm_id *id, uint64_t handle);
/* Moves the id's queued events with it; *delivered_p: as below. */
int emu_cm_id_migrate(struct emu_cm_id *id, struct emu_cm_chan *chan,
		      unsigned int *delivered_p);
/* Ends the id: a connection is disconnected (DREQ) or refused (REJ), its
 * address released, its queued events dropped.  No event refers to it
 * once this returns.  Returns how many of its events emu_cm_get_event
 * handed out (the face waits for their acknowledgement).
 * The id's memory stays until emu_cm_id_free, so that a thread still
 * turning one of those events into the application's may call on it:
 * every call that would act on the id then fails with ENOENT (what the
 * kernel's rdma_cm answers for an id it no longer has); emu_cm_addrs
 * and emu_cm_route give what the id had. */
unsigned int emu_cm_id_close(struct emu_cm_id *id);
/* Frees a closed id; no thread may use it any more. */
void emu_cm_id_free(struct emu_cm_id *id);
/* emu_cm_id_close and emu_cm_id_free, for an id none of whose events is
 * in a thread's hands. */
unsigned int emu_cm_id_destroy(struct emu_cm_id *id);

/* Addresses (IPv4 or IPv6). */
int emu_cm_bind(struct emu_cm_id *id, const struct sockaddr *addr);
int emu_cm_set_reuseaddr(struct emu_cm_id *id, bool on);
int emu_cm_set_afonly(struct emu_cm_id *id, bool on);
/* RDMA_OPTION_ID_ACK_TIMEOUT: the Local ACK Timeout the id's QP gets at
 * RTS (emu_cm_init_qp_attr); EINVAL for a QP type without ACKs. */
int emu_cm_set_ack_timeout(struct emu_cm_id *id, uint8_t timeout);
/* ADDR_RESOLVED, or ADDR_ERROR once timeout_ms passed. */
int emu_cm_resolve_addr(struct emu_cm_id *id, const struct sockaddr *src,
			const struct sockaddr *dst, int timeout_ms);
int emu_cm_resolve_route(struct emu_cm_id *id, int timeout_ms);
void emu_cm_addrs(struct emu_cm_id *id, struct sockaddr_storage *src,
		  struct sockaddr_storage *dst);
/* false until the address is resolved or bound to a local address */
bool emu_cm_route(struct emu_cm_id *id, struct emu_cm_route *route);
/* Whether addr is one of the node's: it belongs to ibemu0. */
bool emu_cm_addr_is_local(const struct sockaddr *addr);

int emu_cm_listen(struct emu_cm_id *id, int backlog);
/* param->qp_num: the local QP; its starting PSN is drawn here. */
int emu_cm_connect(struct emu_cm_id *id, const struct emu_cm_conn *param);
int emu_cm_accept(struct emu_cm_id *id, const struct emu_cm_conn *param);
int emu_cm_reject(struct emu_cm_id *id, const void *private_data,
		  uint8_t len);
/* The active side's RTU (after CONNECT_RESPONSE). */
int emu_cm_establish(struct emu_cm_id *id);
/* The passive side's QP received data before the RTU (rdma_notify with
 * IBV_EVENT_COMM_EST): the connection is established. */
int emu_cm_notify(struct emu_cm_id *id);
int emu_cm_disconnect(struct emu_cm_id *id);
/* rdma_init_qp_attr: attr->qp_state in: the state asked for. */
int emu_cm_init_qp_attr(struct emu_cm_id *id, struct ibv_qp_attr *attr,
			int *mask);
/*
 * Multicast through the CM (cm_mcast.c), as the kernel's rdma_cm joins
 * a group for a UD id (rdma_join_multicast).  join_flags: rdma_cma.h's
 * RDMA_MC_JOIN_FLAG_*.  join: EINVAL (not a UD id bound to or resolved
 * on the device, or a bad address or flags), ENOMEM; otherwise
 * MULTICAST_JOIN follows on the id's channel (MULTICAST_ERROR if the
 * group cannot be had).  leave: addr NULL leaves any one group; *info
 * tells what the face must detach; EADDRNOTAVAIL if the id has not
 * joined addr.  A destroyed id leaves its groups.
 */
#define EMU_CM_JOIN_FULLMEMBER 0
#define EMU_CM_JOIN_SENDONLY_FULLMEMBER 1
#define EMU_CM_MC_QPN 0xffffff /* IBA 10.5.2.2: multicast DQPN */
struct emu_cm_mc_info {
	union ibv_gid mgid;
	uint16_t mlid;
	int join_flags;
};
int emu_cm_join(struct emu_cm_id *id, const struct sockaddr *addr,
		int join_flags, uint64_t context);
int emu_cm_leave(struct emu_cm_id *id, const struct sockaddr *addr,
		 struct emu_cm_mc_info *info);
/* The MGID the kernel's rdma_cm gives an address of port space ps on an
 * InfiniBand port of partition pkey (cma_set_mgid); false if addr is not
 * IPv4, IPv6 or AF_IB.  All-zero for the unspecified address. */
bool emu_cm_mgid(uint16_t ps, const struct sockaddr *addr, uint16_t pkey,
		 uint8_t mgid[16]);
/* Whether addr is an IPv4 or IPv6 multicast address. */
bool emu_cm_addr_is_multicast(const struct sockaddr *addr);

/* Ports (host order). */
uint16_t emu_cm_src_port(struct emu_cm_id *id);
uint16_t emu_cm_dst_port(struct emu_cm_id *id);


/* cm_recv.c: a packet for QP1 (IBA 12.6.1), the engine's QP1 handler
 * (engine.h); caller holds engine.lock. */
struct engine;
struct pkt;
void cm_recv_locked(struct engine *e, const struct pkt *p);

#endif /* IBEMU_CM_H */
