/* SPDX-License-Identifier: MIT */
/*
 * The transport engine, split as the kernel's rxe is: the requester turns
 * send WQEs into packets (req.c), the responder executes request packets
 * (resp.c), the completer turns responses into completions (comp.c), and
 * progress.c drives them: from the application's own calls (post_send
 * pushes, poll_cq pulls) and from one background thread per process that
 * sleeps on the inbox futex when idle.
 *
 * Lock rule: engine.lock serialises the consumer side of the inbox and
 * the QP table; it is taken before any QP lock.
 * post_send runs the requester under the QP lock alone.
 */
#ifndef IBEMU_ENGINE_H
#define IBEMU_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fault.h"
#include "hca.h"
#include "hdr.h"
#include "inbox.h"
#include "transport.h"
#include "opcode.h"
#include "pcap.h"
#include "qp_stats.h"
#include "trace_rec.h"
#include "wire.h"
#include "wr_opcode.h"

struct engine {
	struct emu_hca *hca; /* the HCA this engine drives */
	const struct transport_ops *tp; /* how packets travel on the node */
	void *tp_priv; /* the transport's state */
	/* How packets reach other nodes (transport.h), NULL: not at all */
	const struct transport_ops *net;
	void *net_priv; /* its state */
	/* The network transport waits for room in the inbox: the engine
	 * calls its room op after a drain (transport.h). */
	atomic_bool net_room;
	struct emu_lock lock;
	struct emu_qp **qps; /* by QPN - IBEMU_QPN_FIRST */
	struct emu_qp *all_qps; /* the same, as a list (all_next) */
	struct emu_qp *ack_list; /* ACKs owed by the current drain */
	/* ack_list holds QPs whose ACKs an application's poll held for
	 * their next SEND (ack_bundle.c); written under engine.lock, read
	 * without it by engine_poll */
	atomic_bool acks_held;
	/* listed for the exit-time flush of held ACKs (ack_bundle.c); set
	 * at start, before the thread */
	bool acks_flushed_at_exit;
	/* The application's last poll left inbox room to give back
	 * (engine_poll); read unlocked */
	atomic_bool owed;
	/* QPs with blocked or timed work; lock rule: pending_lock, taken
	 * after a QP lock, never before one */
	struct emu_lock pending_lock;
	struct emu_qp *_Atomic pending; /* read unlocked: engine_has_pending */
	/* Added since the last pass, or engine_stop: the thread's sleep
	 * returns at once while it is set (transport.h) */
	atomic_bool pending_new;
	atomic_bool busy; /* the last pass left work blocked */
	atomic_uint polls; /* application polls, counted loosely */
	_Atomic uint64_t next_deadline; /* earliest timer of the last pass */
	pthread_t thread;
	atomic_bool stop;
	atomic_uint app_polled; /* poll_cq ran since the thread looked */
	struct fault *faults; /* IBEMU_FAULTS (fault.c); NULL: none */
	/* Multicast across nodes (transport.h), set at start, and its
	 * state (its own lock); NULL: the node is alone, multicast stays
	 * on it. */
	const struct tp_mcast_ops *mcast;
	void *mcast_priv;
	/* The node's ports as last seen (port.c); engine.lock */
	uint32_t port_gen;
	uint32_t port_state[IBEMU_MAX_PORTS];
};

/* port.c: port state changes, told to contexts and QPs */
void engine_ports_init(struct engine *e);
/* Whether the node's ports changed since the engine's thread looked
 * (that thread only). */
bool engine_ports_changed(const struct engine *e);
void engine_ports_watch_locked(struct engine *e);


/* progress.c */
int engine_start(struct emu_hca *hca);
/* The transport engines started from now on use (default: tp_shm_ops);
 * the engine's unit tests hand in their own. */
void engine_use_transport(const struct transport_ops *tp);
void engine_stop(struct emu_hca *hca);
void engine_forget(struct emu_hca *hca);
/* active: the application is polling, not about to block. */
void engine_poll(struct engine *e, bool active);
void engine_app_blocks(struct engine *e);
/* Whether a packet waits in the inbox. */
bool engine_has_packet(struct engine *e);
/*
 * A network transport hands packets to the engine itself, without the
 * inbox, between engine_deliver_begin (true: engine.lock is taken and
 * nothing waits in the inbox, so packets that came earlier have all been
 * served and order holds; false: deliver into the inbox) and
 * engine_deliver_end; each packet through engine_recv_locked.  Not with
 * IBEMU_FAULTS, whose injector sees every packet in the inbox.
 */
bool engine_deliver_begin(struct engine *e);
void engine_deliver_end(struct engine *e);
void engine_qp_add(struct engine *e, struct emu_qp *qp);
void engine_qp_remove(struct engine *e, struct emu_qp *qp);
/* A QP the table does not hold (a DC responder, dc.c) on the engine's
 * list of QPs, engine.lock held; and off it, and off the ACK and
 * pending lists, taking engine.lock. */
void engine_qp_link_locked(struct engine *e, struct emu_qp *qp);
void engine_qp_unlink(struct engine *e, struct emu_qp *qp);
/* Take and release every QP lock: whatever ran under one has ended. */
void engine_qp_quiesce(struct engine *e);
void engine_pending_add_locked(struct emu_qp *qp);
/* The process in node slot proc_slot, or NULL if unreachable. */
struct tp_peer *engine_peer(struct engine *e, int32_t proc_slot);
/* How e reaches other nodes (transport.h), NULL: it does not. */
static inline const struct tp_net_ops *engine_net(const struct engine *e)
{
	return e && e->net ? e->net->net : NULL;
}
/* Whether the process in slot is known to run (transport.h peer_runs). */
bool engine_peer_runs(struct engine *e, int32_t proc_slot);
/* How many packets peer took in so far (transport.h peer_taken). */
static inline uint64_t engine_peer_taken(struct tp_peer *peer)
{
	return peer && peer->tp->peer_taken ? peer->tp->peer_taken(peer) : 0;
}
/* Placement capability of the transport, or NULL. */
static inline const struct tp_place_ops *engine_place(const struct engine *e)
{
	return e->tp->place;
}
/* Regions and QPs requesters may place into (transport.h). */
static inline void engine_mr_publish(struct engine *e, const struct emu_mr *mr)
{
	if (e && e->tp->place)
		e->tp->place->mr_publish(e, mr);
}
static inline void engine_mr_withdraw(struct engine *e,
				      const struct emu_mr *mr)
{
	if (e && e->tp->place)
		e->tp->place->mr_withdraw(e, mr);
}
static inline void engine_qp_fence(struct engine *e, uint32_t qpn)
{
	if (e && e->tp->place)
		e->tp->place->qp_fence(e, qpn);
}
/* A region's pages made reachable by placement, and given back
 * (transport.h); w stays zero where they are not. */
void engine_mr_share(struct emu_hca *hca, void *addr, size_t length,
		     int access, struct mr_window *w);
void engine_mr_release(struct emu_hca *hca, const struct mr_window *w);
/* In a forked child, before anything else: the transports' fork hooks. */
void engine_fork_child(void);
/* pkt_layout (hdr.h) with qp's addresses: pkt_begin's second half, and
 * the multicast datagrams, whose room is the caller's. */
void pkt_layout_qp(struct pkt_out *out, struct emu_qp *qp, uint8_t opcode,
		   uint32_t dst_qpn, uint32_t psn, bool ackreq,
		   uint32_t paylen);
/* Claim room to dst and lay out BTH for opcode; false if dst is full.
 * Inline, as pkt_send: every packet takes both. */
static inline bool pkt_begin(struct pkt_out *out, struct tp_peer *dst,
			     struct emu_qp *qp, uint8_t opcode,
			     uint32_t dst_qpn, uint32_t psn, bool ackreq,
			     uint32_t paylen)
{
	out->pkt.src_proc = qp->hca->node.proc_slot;
	if (!dst->tp->pkt_claim(dst, &out->pkt))
		return false;
	out->e = qp->hca->engine;
	out->dst = dst;
	pkt_layout_qp(out, qp, opcode, dst_qpn, psn, ackreq, paylen);
	return true;
}
/* Hand the packet to its transport, counted for `ibemu top`; captured,
 * traced and passed by the fault points first when any of them is on
 * (pkt_send_watched). */
void pkt_send_watched(struct pkt_out *out);
static inline void pkt_send(struct pkt_out *out)
{
	if (__builtin_expect(pcap_enabled() || trace_rec_on() ||
				     atomic_load_explicit(&fault_points_armed,
							  memory_order_relaxed),
			     0)) {
		pkt_send_watched(out);
		return;
	}
	qp_stats_tx(out->e->hca, out);
	out->dst->tp->pkt_send(out->dst, &out->pkt);
}
/* Receive one packet as the transport delivered it: parse it and hand it
 * to its QP's responder or completer (a malformed packet, or one for no
 * QP of ours, is dropped).  Caller holds engine.lock; the ACKs it earns
 * are coalesced until engine_flush_acks_locked(). */
void engine_recv_locked(struct engine *e, const struct tp_pkt *in);
void engine_flush_acks_locked(struct engine *e);

/* mcast.c: whether qp is attached to the group a multicast datagram
 * went to (dgid NULL: no GRH, the MLID alone names it; dlid 0: the MGID
 * alone, whatever MLID the QP attached with).  Caller holds qp.lock. */
bool mcast_member_locked(const struct emu_qp *qp, const uint8_t *dgid,
			 uint16_t dlid);

/* QP1's packets (IBA 12.6.1) go to the handler registered for them, the
 * CM, which registers itself when it starts; none: they are dropped.
 * The handler runs under engine.lock. */
typedef void engine_qp1_fn(struct engine *e, const struct pkt *p);
void engine_set_qp1_handler(engine_qp1_fn *fn);

/* req.c */
/* Where a connected QP's peer is (route_qpn): the node slot of the
 * process owning dest_qpn behind av, or why not. */
struct req_route {
	bool done; /* looked up */
	int err; /* 0, or route_qpn's error */
	int32_t slot;
};
/* Look the peer up.  It may block (a door lookup on another node, a
 * network round trip): with no QP lock held, so that the packets of
 * the QP being connected, which the engine dispatches holding its
 * lock, do not hold up every other QP's (emu_qp_modify). */
int req_route_peer(struct emu_hca *hca, const struct ibv_ah_attr *av,
		   uint32_t dest_qpn, struct req_route *r);
/* Make the peer r found the QP's; 0, or -errno. */
int req_bind_peer_locked(struct emu_qp *qp, const struct req_route *r);
void req_run_locked(struct emu_qp *qp);
void req_rewind_locked(struct emu_qp *qp);
void req_rewind_from_locked(struct emu_qp *qp, uint32_t psn);
uint32_t req_sent_end(const struct emu_qp *qp);
/* Both at once, under qp.lock: where the peer is not known yet. */
int req_resolve_peer_locked(struct emu_qp *qp);

/* apm.c: automatic path migration (IBA 17.2.8) */
/* The alternate path's peer, looked up with no lock held (as
 * req_route_peer) when modify loads one. */
void apm_route_alt(const struct emu_qp *qp, const struct ibv_qp_attr *attr,
		   int mask, struct req_route *route);
/* The values of IBV_QP_ALT_PATH and IBV_QP_PATH_MIG_STATE: 0 or
 * EINVAL (*why_p says why). */
int apm_check(const struct emu_qp *qp, const struct ibv_qp_attr *a,
	      int mask, const char **why_p);
/* Load them (alt: apm_route_alt's lookup), rearm, migrate. */
void apm_apply_locked(struct emu_qp *qp, const struct ibv_qp_attr *a,
		      int mask, const struct req_route *alt);
/* Make the alternate path the primary one; by_ca: the CA's own
 * migration (IBV_EVENT_PATH_MIG).  false (IBV_EVENT_PATH_MIG_ERR) when
 * the alternate path does not work. */
bool apm_migrate_locked(struct emu_qp *qp, bool by_ca);
/* Every packet of the peer, before the responder or completer: the
 * MigReq bit arms and migrates. */
void apm_recv_locked(struct emu_qp *qp, const struct pkt *p);
/* The primary path failed (retries spent): migrate if ARMED and resend
 * there; true if it did. */
bool apm_path_failed_locked(struct emu_qp *qp);
/* A port of the node went down or came up. */
void apm_port_changed_locked(struct emu_qp *qp, unsigned int port,
			     bool up);

/* resp.c */
void resp_recv_locked(struct emu_qp *qp, const struct pkt *pkt);
void resp_pending_locked(struct emu_qp *qp);
void resp_reset_locked(struct emu_qp *qp);
void resp_flush_open_locked(struct emu_qp *qp);
void resp_ack_flush_locked(struct emu_qp *qp);
/* The message just executed is acknowledged at the end of the drain
 * (resp.c, IBA 9.7.5.1.1); qp.lock and engine.lock held. */
void resp_ack_later_locked(struct emu_qp *qp);
/* A receive WQE was just taken from rq: whether it left the QP's SRQ
 * under its armed limit (IBA 10.2.9.4, manual 6.1.16), which the event
 * disarms; the caller raises IBV_EVENT_SRQ_LIMIT_REACHED once it has let
 * go of rq.lock, held here. */
static inline bool resp_srq_limit_reached(struct emu_qp *qp,
					  const struct emu_rq *rq)
{
	if (!qp->srq || !qp->srq->limit ||
	    wqe_ring_count(&rq->ring) >= qp->srq->limit)
		return false;
	qp->srq->limit = 0;
	return true;
}
/* A receive completion of the QP's receive queue or SRQ, pushed (the QP
 * fails if the CQ overflows); p: the packet that completed it, NULL for
 * none (resp.c).  qp.lock held. */
void resp_push_recv_locked(struct emu_qp *qp, uint64_t wr_id,
			   enum ibv_wc_status st, enum ibv_wc_opcode opcode,
			   uint32_t byte_len, const struct pkt *p);
/* resp_fast.c: a one-packet RC SEND into the QP's own receive queue in
 * a straight line; false: the general responder takes the packet. */
bool resp_fast_send_locked(struct emu_qp *qp, const struct pkt *p);
/* comp_fast.c: the ACK of the one request in flight in a straight line;
 * false: the general completer takes the packet. */
bool comp_fast_ack_locked(struct emu_qp *qp, const struct pkt *p);

/* ack_bundle.c: an owed ACK held for the QP's next SEND (doc/design.md
 * §9).  engine_fast_on: the two-sided fast paths are on (IBEMU_FAST). */
extern atomic_int engine_fast_state, ack_bundle_state;
bool engine_fast_read(void);
bool ack_bundle_read(void);
static inline bool engine_fast_on(void)
{
	int s = atomic_load_explicit(&engine_fast_state, memory_order_relaxed);

	return s ? s == 1 : engine_fast_read();
}
static inline bool ack_bundle_on(void)
{
	int s = atomic_load_explicit(&ack_bundle_state, memory_order_relaxed);

	return s ? s == 1 : ack_bundle_read();
}
bool ack_bundle_hold_locked(struct emu_qp *qp);
void ack_bundle_let_go_locked(struct emu_qp *qp);
void ack_bundle_sent_locked(struct emu_qp *qp);
bool ack_bundle_add_locked(struct emu_qp *qp, struct pkt_out *out);
/* BTH and AETH */
#define ACK_BUNDLE_VIEW_LEN 16
bool ack_bundle_view(const struct pkt *first, const struct tp_pkt *in,
		     struct pkt_hdr *hdr, uint8_t buf[ACK_BUNDLE_VIEW_LEN],
		     struct tp_pkt *view);
void ack_bundle_engine_add(struct engine *e);
void ack_bundle_engine_remove(struct engine *e);
void resp_ack_owed_locked(struct emu_qp *qp);
/* Copy a pulled SEND's descriptor out of its payload (shared memory),
 * once; false if it is malformed. */
bool resp_pull_desc_copy(const uint8_t *payload, uint32_t paylen,
			 struct pull_desc_copy *d);

/* comp.c */
/* The RNR NAK timer field's waits, in microseconds (IBA 9.7.5.2.8,
 * table 45). */
extern const uint32_t comp_rnr_timer_us[32];
void comp_recv_locked(struct emu_qp *qp, const struct pkt *pkt);
uint64_t comp_timers_locked(struct emu_qp *qp, uint64_t now);
void comp_retire_locked(struct emu_qp *qp);
void comp_arm_timer_locked(struct emu_qp *qp);

/* Whether a send WR that succeeded gets a completion (IBA 10.8.3.1:
 * signaled, or sq_sig_all); most of a stream's do not. */
static inline bool comp_wanted(const struct emu_qp *qp,
			       unsigned int send_flags)
{
	return (send_flags & IBV_SEND_SIGNALED) || qp->sq_sig_all;
}

/* Forward progress restores the retry budgets (IBA 9.7.6); the transport
 * timer starts over for what is still in flight.  qp.lock held. */
static inline void comp_forward_locked(struct emu_qp *qp)
{
	qp->comp.retry_left = qp->attr.retry_cnt;
	qp->comp.rnr_left = qp->attr.rnr_retry;
	qp->comp.deadline = 0;
	if (qp->sq.head != qp->req.next)
		comp_arm_timer_locked(qp);
}

/* A successful send WR's completion, pushed to the send CQ (the QP fails
 * if the CQ overflows). */
void comp_unqueued_wc_locked(struct emu_qp *qp, uint64_t wr_id,
			     enum ibv_wr_opcode opcode, uint32_t byte_len);

/* A send WR executed at once without a WQE, on an idle send queue of a
 * QP in RTS (cma_post_write_locked): completed as comp_retire_locked
 * completes one at the queue's head (in RTS there is no SQ drain to
 * report).  Inline: most of a stream's have no completion. */
static inline void comp_unqueued_locked(struct emu_qp *qp, uint64_t wr_id,
					enum ibv_wr_opcode opcode,
					unsigned int send_flags,
					uint32_t byte_len)
{
	comp_forward_locked(qp);
	if (comp_wanted(qp, send_flags))
		comp_unqueued_wc_locked(qp, wr_id, opcode, byte_len);
}
/* The requester found the peer full: note how far the peer has taken
 * packets in, to tell congestion from loss when the timer expires. */
void comp_blocked_locked(struct emu_qp *qp);

/* sge.c: copy between a message and a list of local SGEs (MR-checked). */
/* write: the iovecs are to be written (on-demand paging, sge_mr_addr).
 * SGE_SPAN_INDIRECT: the range is good but an mkey's SGE is in it, so
 * there are no iovecs; sge_copy copies it. */
#define SGE_SPAN_INDIRECT (-2)
int sge_span(struct emu_qp *qp, const struct ibv_sge *sge, uint32_t num_sge,
	     uint32_t offset, uint32_t len, bool write, struct iovec *iov);
void iov_gather(void *buf, const struct iovec *iov, int nr);
int sge_copy(struct emu_qp *qp, const struct ibv_sge *sge,
	     uint32_t num_sge, uint32_t offset, void *buf, uint32_t len,
	     bool to_sge);
/*
 * Where [addr, addr+len) of mr is here, to be read (or written if
 * write), or NULL if outside.  An on-demand paging region's pages are
 * faulted in first (mr_pages.c); NULL where they cannot be, as a real
 * HCA's page fault that fails ends the access in error: the caller
 * answers a protection error, IBV_WC_LOC_PROT_ERR for a local access
 * and the NAK Remote Access Error (IBV_WC_REM_ACCESS_ERR at the
 * requester) for a remote one (IBA 10.6.3.2, C9-88; mlx5 resumes a
 * failed page fault with an error, drivers/infiniband/hw/mlx5/odp.c).
 * Computed as integers: an implicit region's addr is NULL.
 */
static inline uint8_t *sge_mr_addr(const struct emu_mr *mr, uint64_t addr,
				   uint64_t len, bool write)
{
	uint64_t start = mr->iova, end = mr->iova + mr->length;
	uint8_t *p;

	if (addr < start || addr > end || len > end - addr)
		return NULL;
	p = (uint8_t *)((uintptr_t)mr->addr + (uintptr_t)(addr - start));
	if ((mr->access & IBV_ACCESS_ON_DEMAND) &&
	    mr_pages_fault(p, len, write))
		return NULL;
	return p;
}
/* Where one SGE's bytes are here in mr, the region its lkey names
 * (NULL: none), checked as a local access (IBA 10.6.3.2: key, PD,
 * range, and LOCAL_WRITE to be written), or NULL.  An mkey's entry
 * names no bytes: NULL (mkey_access.c). */
static inline uint8_t *sge_mr_local(const struct emu_qp *qp,
				    const struct emu_mr *mr,
				    const struct ibv_sge *sge,
				    bool write_access)
{
	if (!mr || mr->pd_id != qp->pd_id ||
	    (write_access && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
		return NULL;
	return sge_mr_addr(mr, sge->addr, sge->length, write_access);
}
/* sge_mr_local of the SGE's key.  Caller holds qp.lock (mr_lookup). */
static inline uint8_t *sge_local_addr(struct emu_qp *qp,
				      const struct ibv_sge *sge,
				      bool write_access)
{
	return sge_mr_local(qp, mr_lookup(qp->hca, sge->lkey), sge,
			    write_access);
}
int sge_iov(struct emu_qp *qp, const struct ibv_sge *sge, uint32_t num_sge,
	    bool write, struct iovec *iov);
/* Check the SGEs of a WQE against their MRs; an IBV_WC_* status. */
enum ibv_wc_status sge_check(struct emu_qp *qp, const struct ibv_sge *sge,
			     uint32_t num_sge, bool write_access);
/* sge_check, and on success the local iovecs of the SGEs in iov (at most
 * num_sge, zero-length ones left out) and their count in *nr_p: valid
 * while the caller holds the QP lock (mr.c); -1 in *nr_p if an SGE is
 * an mkey's: then no iovecs, the data is copied by sge_copy. */
enum ibv_wc_status sge_check_iov(struct emu_qp *qp, const struct ibv_sge *sge,
				 uint32_t num_sge, bool write_access,
				 struct iovec *iov, int *nr_p);
/* mkey_access.c: accesses through an indirect mkey (see its head); the
 * caller holds qp.lock.  access: the IBV_ACCESS_* right the access
 * needs, 0 for a local read.  Whether [off, off+len) allows it: */
bool mkey_check(struct emu_qp *qp, struct emu_mkey *mk, uint64_t off,
		uint64_t len, int access);
/* Checked, then copied between buf and the range (to_mem: into it); 0,
 * or -1 and nothing copied. */
int mkey_copy(struct emu_qp *qp, struct emu_mkey *mk, uint64_t off,
	      void *buf, uint64_t len, int access, bool to_mem);
/* Where the range is if it lies in one piece, 8-aligned (an atomic's
 * word), the mkey's lock then held until mkey_access_end; else NULL. */
uint8_t *mkey_access_begin(struct emu_qp *qp, struct emu_mkey *mk,
			   uint64_t off, uint64_t len, int access);
void mkey_access_end(struct emu_mkey *mk);
/* Whether an SGE of the list names an mkey. */
bool sge_has_mkey(struct emu_qp *qp, const struct ibv_sge *sge,
		  uint32_t num_sge);
int sge_copy_indirect(struct emu_qp *qp, const struct ibv_sge *sge,
		      uint32_t num_sge, uint32_t offset, void *buf,
		      uint32_t len, bool to_sge);

/* Copy len bytes of buf into the iovecs, in order (at most their sum). */
void iov_scatter(const struct iovec *iov, int nr, const void *buf,
		 uint32_t len);

#endif /* IBEMU_ENGINE_H */
