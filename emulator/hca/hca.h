/* SPDX-License-Identifier: MIT */
/*
 * The emulated HCA's objects, as its engines see them.  Private to
 * emulator/: the verbs face knows them only through emu.h.
 *
 * Lock order (outermost first):
 *   engine.lock      the inbox consumer and the QP table (engine.h)
 *   qp.lock          a QP: state, attributes, send queue, its own receive
 *                    queue, engine state
 *   rq.lock          an SRQ's receive queue
 *   cq.lock          a completion queue
 *   engine.pending_lock, hca.lock, hca.mw_lock, mkey.lock, peer_lock
 *                    leaves
 * Async events and completion events are written to non-blocking
 * descriptors, so no lock is held across a write that can block.
 */
#ifndef IBEMU_HCA_H
#define IBEMU_HCA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

#include "check_queue.h"
#include "emu.h"
#include "key_table.h"
#include "lock.h"
#include "node.h"
#include "opcode.h"
#include "params.h"
#include "queue.h"

struct engine;
struct tp_peer;
struct check_sq;
struct check_ring;
struct dc_qp;
struct pkt;

/*
 * The process's attachment to its node's HCA.
 * Lock rule: hca.lock protects refs, attach/detach, and changes to the
 * MR and AH tables (mrs, ah_table)
 * and the writes of the regions published in the inbox (cma.c);
 * the data path reads table entries without it (acquire loads of
 * entries published with release order).
 */
struct emu_cm;

struct emu_hca {
	pthread_mutex_t lock;
	unsigned int refs; /* open contexts */
	pid_t pid; /* who attached */
	struct node node;
	struct key_table mrs; /* IBEMU_MAX_MR regions, by index */
	/* Memory windows (mw.c); lock rule: mw_lock, a leaf */
	pthread_mutex_t mw_lock;
	struct key_table mws; /* IBEMU_MAX_MW windows, by index */
	uint32_t nr_mw_bound2; /* type 2 windows bound */
	struct ibv_ah_attr **ah_table; /* IBEMU_MAX_AH entries, by handle */
	uint32_t ah_cursor;
	struct engine *engine; /* the data path (engine.h) */
	/* The RDMA CM (cm.c), started by its first user; set once, read
	 * by the engine for packets to QP1 */
	struct emu_cm *_Atomic cm;
	/* XRC domains of this process by inode, and its XRC SRQs (xrc.c).
	 * Lock rule: xrcds under hca.lock; xsrqs changes under engine.lock
	 * and is read by the responder, which runs under it. */
	struct emu_xrcd *xrcds;
	struct emu_srq *xsrqs;
	/* The open contexts' async event descriptors, for port events
	 * (event.c).  Lock rule: ctx_lock, a leaf, taken by the engine's
	 * thread without hca.lock (which emu_hca_put holds while it stops
	 * that thread). */
	pthread_mutex_t ctx_lock;
	int *ctx_fds;
	unsigned int nr_ctx_fds, max_ctx_fds;
};

/*
 * An XRC domain (IBA A14): XRC SRQs and XRC target QPs of one domain
 * receive for each other.  Lock rule: refs, usecnt and next are under
 * hca.lock.
 */
struct emu_xrcd {
	struct emu_hca *hca;
	struct emu_xrcd *next; /* hca.xrcds */
	uint64_t dev, ino; /* the file it is tied to; ino 0: none */
	unsigned int refs; /* opens */
	unsigned int usecnt; /* XRC SRQs and target QPs */
};

/* Where a region's whole pages are shared for the node's placement: at
 * file offset off of the owner's shared file, mapped at lo (the owner's
 * address) for len bytes; len 0: not shared (transport.h, mr_share). */
struct mr_window {
	uint64_t off, lo, len;
};

/* A memory region as the HCA translates it (IBA 10.6.3).  Immutable
 * while published in mr_table: rereg puts a copy with the new attributes
 * in its entry while it changes, under hca.lock (mr.c). */
struct emu_mr {
	struct emu_hca *hca;
	uint64_t pd_id;
	uint8_t *addr;
	uint64_t length;
	uint64_t iova; /* address the requester names (ibv_reg_mr_iova) */
	int access;
	uint32_t key; /* lkey == rkey */
	uint32_t index; /* in hca.mrs */
	struct mr_window win; /* its whole pages on the memfd (mr_memfd.h) */
	/* An indirect mkey's entry (mkey.c), NULL for a region.  An mkey's
	 * region fields name nothing (length 0, access 0), so a lookup
	 * that does not know mkeys finds no memory behind its key. */
	struct emu_mkey *mkey;
};

/* One entry of an mkey's layout, checked by the UMR that installed it:
 * count bytes at addr of region lkey, the next repetition stride bytes
 * further (0 in a list layout), at offset start of each repetition. */
struct mkey_ent {
	uint64_t addr, stride, start;
	uint32_t lkey, count;
};

/*
 * An indirect memory key (mlx5dv_create_mkey(3); mkey.c, mkey_access.c):
 * its entry in the regions' key table, and its layout, installed by a
 * UMR work request, emptied by an invalidation.  Lock rule: lock (a
 * leaf, taken under a QP lock) protects the layout fields; the data
 * path holds it for reading from the walk of a layout to the end of the
 * copy, a UMR or invalidation for writing while it changes the layout.
 * mr, max_entries and remote_inv never change.  The mkey itself stays
 * while a QP lock is held, as a region does (emu_mkey_destroy).
 */
struct emu_mkey {
	struct emu_mr mr;
	uint16_t max_entries;
	bool remote_inv;
	pthread_rwlock_t lock;
	bool valid; /* a layout is installed */
	uint32_t access; /* IBV_ACCESS_* the layout grants */
	uint32_t repeat; /* repetitions of the entries (1: a list) */
	uint16_t nr; /* entries */
	uint64_t rep_len; /* bytes of one repetition */
	uint64_t total; /* bytes of the layout: offsets 0 .. total - 1 */
	struct mkey_ent ent[]; /* max_entries */
};

/* A memory window (IBA 10.6.7; mw.c).  Lock rule: hca.mw_lock protects
 * every field but hca, pd_id, type and index, which never change. */
struct emu_mw {
	struct emu_hca *hca;
	uint64_t pd_id;
	enum ibv_mw_type type;
	uint32_t index; /* in hca.mws */
	uint32_t key; /* the current R_Key */
	bool bound; /* grants access: bound to a region, not invalidated */
	uint64_t addr, length; /* the window, as requesters name it */
	int access; /* remote access rights granted */
	uint32_t mr_key; /* the region bound to, looked up at each access */
	uint32_t qpn; /* type 2B: the QP it was bound through */
};

/*
 * Completion queue.  Lock rule: cq.lock protects the ring, armed,
 * overflow and the extended poll's current entry; it may be taken while
 * holding a QP or RQ lock, never the reverse.
 */
struct emu_cq {
	struct emu_hca *hca;
	struct emu_lock lock;
	struct wc_ring ring;
	atomic_int armed; /* 0, CQ_ARM_NEXT or CQ_ARM_SOLICITED */
	bool overflow;
	bool polling; /* extended poll: an entry is current */
	int comp_fd; /* completion channel, non-blocking; -1: none */
	struct emu_owner owner;
	atomic_int usecnt; /* QPs using this CQ */
	uint64_t last_wall_ns; /* stamped CQ: the last real-time stamp */
	struct check_stack chk_created; /* checking mode: its create */
};

enum {
	CQ_ARM_NEXT = 1,
	CQ_ARM_SOLICITED = 2,
};

/* Receive queue: a QP's own or an SRQ's.  Lock rule: a QP's own ring is
 * under the QP's lock (its rq.lock is unused); an SRQ's ring and limit
 * are under its rq.lock (rq.c). */
struct emu_rq {
	struct emu_lock lock;
	struct wqe_ring ring;
	uint32_t max_sge;
	/* the checking mode's record of the posts (check_recv.c), under
	 * the ring's lock */
	struct check_ring *check_rq;
};

struct emu_srq {
	struct emu_hca *hca;
	struct emu_rq rq;
	uint64_t pd_id;
	uint32_t limit; /* armed limit, 0 = not armed (IBA 10.2.9.4) */
	/* The program armed a limit once: the event disarms it (IBA
	 * 10.2.9.5), the checking mode's srq-empty remembers it was asked
	 * for (check_queue.c).  Under rq.lock. */
	bool limit_armed;
	struct emu_owner owner;
	atomic_int usecnt; /* QPs attached */
	/* XRC SRQ (IBA A14): its domain, the CQ its receives complete
	 * on and its number, which requests name in their XRCETH; NULL and
	 * 0 for a basic SRQ.  Immutable; xsrq_next under engine.lock. */
	struct emu_xrcd *xrcd;
	struct emu_cq *cq;
	uint32_t srqn;
	struct emu_srq *xsrq_next; /* hca.xsrqs */
};

struct emu_mcast {
	union ibv_gid gid;
	uint16_t lid;
};

/* The requester's state (req.c). */
struct qp_req {
	uint32_t psn; /* PSN of the next new packet */
	uint32_t next; /* SQ position of the next WQE to (re)send */
	/* SQ position past the last WQE sent whole, as far as a rewind
	 * moved next back from (req.c); meaningless once behind sq.head */
	uint32_t sent_end;
	uint32_t rd_atomic; /* READ/ATOMIC outstanding */
	bool blocked; /* the peer's inbox was full */
	uint64_t ud_full_since; /* UD: destinations full since (ns), 0: no */
	uint64_t ud_wait_ns; /* UD: how long that destination is waited for */
	uint64_t ud_full_taken; /* UD: its peer_taken count then */
	int32_t ud_full_proc; /* UD: the node slot of the full destination */
	/* UD: a multicast datagram's fan-out under way (req.c): the
	 * processes with a QP attached to the group, taken when the send
	 * began, and how many have been sent their copy. */
	struct {
		bool on;
		uint8_t nr, next;
		int32_t procs[IBEMU_MAX_MCAST_QP_ATTACH];
	} mcast;
};

/* A resend under way from psn, none of whose answers has come yet
 * (comp.c comp_seq_retry). */
struct comp_resend {
	bool on;
	uint32_t psn;
};

/* The completer's state (comp.c): timers and retry budgets. */
struct qp_comp {
	uint64_t deadline; /* retransmit timer, ns; 0 = idle */
	/* When the engine's pending pass looks at the QP for its timer at
	 * the latest (0: it does not); at or before deadline, so arming
	 * again while the pass is due anyway costs no list operation. */
	uint64_t timer_at;
	uint64_t rnr_resume; /* RNR wait ends, ns; 0 = none */
	uint8_t retry_left, rnr_left;
	bool sqd_notify; /* raise SQ_DRAINED when the SQ drains */
	/* the peer's count when the requester found it full */
	uint64_t peer_taken;
	/* the last PSN the responder is known to have executed */
	uint32_t acked_psn;
	/* told: a resend from the PSN a NAK named; nothing at or past it
	 * has answered yet, so another NAK naming it means nothing new.
	 * implied: a READ or atomic whose responses were lost is resent
	 * and none of its own responses has come yet, so the ACKs and
	 * responses of later requests, which imply its loss again, mean
	 * nothing new. */
	struct comp_resend told, implied;
};

/*
 * A response the responder owes, in request order: the packets of a READ
 * or the acknowledgement of an atomic.  Responses leave in the order of
 * their requests (IBA 9.7.5.1.3), so one that finds the requester's inbox
 * full waits here, and so does everything after it, plain ACKs included.
 */
struct resp_reply {
	bool atomic; /* an atomic's acknowledgement; else READ responses */
	bool dup; /* owed to a duplicate request (resp.c) */
	uint32_t psn; /* of the next response packet */
	uint32_t rkey; /* READ: checked again for every packet (resp.c) */
	uint64_t va; /* READ: next byte to send, as the requester names it */
	uint32_t left; /* READ: bytes still to send */
	bool first; /* READ: no response packet sent yet */
	uint32_t msn; /* the MSN its AETHs carry */
	uint64_t orig; /* atomic: the original remote value */
};

/*
 * A READ or atomic the responder executed, saved for its duplicates: a
 * responder resource (IBA 9.7.4.1.5).  A duplicate READ or atomic is
 * answered only from one of these, and only if it asks what the saved one
 * asked (IBA 9.7.4.1.2, 9.7.5.2); anything else behind the expected PSN
 * is dropped (resp.c).
 */
struct resp_res {
	bool valid;
	bool atomic; /* else a READ */
	uint32_t psn; /* its first PSN */
	uint32_t npkts; /* PSNs it took: its READ responses, or 1 */
	uint32_t msn; /* atomic: the MSN its acknowledgement carried */
	uint32_t rkey; /* as its RETH or AtomicETH named them */
	uint64_t va;
	uint32_t len; /* READ: bytes asked for */
	uint64_t orig; /* atomic: the original remote value */
};
/* The responder's state (resp.c). */
struct qp_resp {
	uint32_t epsn; /* expected PSN */
	uint32_t msn; /* message sequence number */
	bool nak_sent; /* one PSN sequence NAK per gap */
	bool comm_est; /* COMM_EST raised */
	uint32_t op; /* OPM_SEND/OPM_WRITE while a message is open */
	struct wqe *wqe; /* receive WQE of the open message */
	bool has_wqe;
	uint32_t offset; /* bytes placed in the open message */
	uint32_t wrkey; /* RDMA WRITE: its R_Key, checked for every packet */
	uint64_t wva; /* RDMA WRITE: where the next byte goes */
	uint32_t remaining; /* RDMA WRITE: bytes still expected */
	uint32_t wlen; /* RDMA WRITE: total length */
	/* the mkey resp_rkey_begin() holds read-locked until
	 * resp_rkey_end() (mkey_access.c); NULL: none */
	struct emu_mkey *mkey_held;
	bool ack_pending; /* an ACK could not be sent yet */
	/* A message was executed since the last ACK this QP sent, and
	 * held: its ACK waits, at the end of an application's poll, to
	 * ride in the same slot as this QP's next SEND (ack_bundle.c);
	 * misses: held ACKs that had to go alone since the last SEND
	 * posted here */
	bool ack_owed, ack_held;
	uint8_t ack_misses;
	uint64_t pulled_unacked; /* bytes of pulled SENDs not yet ACKed */
	/* responses still to send, in PSN order: at most
	 * max_dest_rd_atomic owed to new requests (IBA 9.7.4.1.5
	 * responder resources), as many more to duplicates (resp.c);
	 * 2 * IBEMU_MAX_QP_INIT_RD_ATOM + 1 entries */
	struct resp_reply *replies;
	uint32_t replies_head, replies_tail, replies_size;
	uint32_t replies_dups; /* of them, owed to duplicates */
	/* the last READs and atomics executed, for their duplicates (IBA
	 * 9.7.4.1.5, 9.7.4.1.6): one per responder resource (of
	 * max_dest_rd_atomic), IBEMU_MAX_QP_INIT_RD_ATOM entries,
	 * allocated at the first READ or atomic */
	struct resp_res *res;
	uint32_t res_next; /* entries written */
};

/*
 * Queue pair.  Lock rule: qp.lock protects state, attr, the send queue,
 * its own receive queue, the multicast list and the req/comp/resp state
 * (an SRQ's ring is under the SRQ's rq.lock).  The engine links
 * (pending_next, pass_next, on_pending) are under engine.pending_lock,
 * ack_next under engine.lock; ack_queued is written under engine.lock and
 * qp.lock, read under either.
 */
struct emu_qp {
	struct emu_lock lock;
	struct emu_hca *hca;
	uint32_t qpn;
	enum ibv_qp_type type;
	uint64_t pd_id;
	struct emu_owner owner;
	enum ibv_qp_state state; /* the QP's one state */
	struct ibv_qp_attr attr; /* as set by modify; qp_state unused */
	struct ibv_qp_cap cap; /* what create granted */
	bool sq_sig_all;
	struct wqe_ring sq;
	/* the checking mode's record of the posts, beside sq (check_mem.c) */
	struct check_sq *check_sq;
	/* ...and of its READs' and atomics' buffers (check_recv.c) */
	struct check_ring *check_rd;
	struct emu_rq rq; /* unused when attached to an SRQ */
	struct emu_cq *scq, *rcq; /* NULL where the QP type has none */
	/* An XRC target QP (IBA A14) has no SRQ of its own: each
	 * request names one of its domain, and the responder binds srq,
	 * rcq and pd_id to it for that request (xrc.c). */
	struct emu_srq *srq;
	const struct emu_buf_alloc *buf_alloc; /* its rings' (emu.h) */
	struct emu_xrcd *xrcd; /* XRC target QP: its domain */
	unsigned int handles; /* verbs handles (ibv_open_qp); engine.lock */
	struct emu_mcast *mcast; /* groups joined (UD only) */
	unsigned int nr_mcast;
	uint32_t mtu; /* path MTU in bytes */
	/* the connected QP (RC/UC) */
	struct tp_peer *peer; /* its process, as the transport reaches it */
	int32_t peer_proc; /* its process's node slot, -1: unresolved */
	/* Its alternate path (apm.c): loaded (attr.alt_*), whether the
	 * lookup at load found its peer (alt_slot) and, once checked
	 * against the primary path's peer (alt_checked), whether that is
	 * the same process. */
	struct {
		bool loaded, alt_reaches, alt_checked;
		int32_t alt_slot;
	} apm;
	/* The placement state of this QP, the transport's (transport.h,
	 * tp_place_ops; cma.c for shared memory), under qp.lock: zero
	 * while no peer is bound. */
	_Alignas(8) unsigned char place[IBEMU_QP_PLACE_SIZE];
	/* The transport's WRITE fast path for this QP, under qp.lock,
	 * the QP in RTS (transport.h, peer_bind sets it): a lone RDMA
	 * WRITE placed at once where the requester may (true: done,
	 * completion and all); NULL or false: the general path. */
	bool (*post_write)(struct emu_qp *qp, const struct ibv_send_wr *wr);

	struct qp_req req;
	struct qp_comp comp;
	struct qp_resp resp;
	struct check_qp chk; /* checking mode (check_queue.h) */
	/* its entry in the node's figures for `ibemu top`, NULL: none; set
	 * once its QPN is ours (qp_stats.c) */
	struct node_qp_stats *stats;

	/* engine links */
	/* DC (dc.c): an initiator, a target or neither; a target's key.
	 * Immutable.  A DC responder (DCR), which a DCT keeps per
	 * initiator stream, is a QP of its own, dc_type EMU_DC_DCT,
	 * dcr_of its DCT; dc is dc.c's state (a DCI's target, a DCT's
	 * responders, a DCR's key), under qp.lock; NULL for other QPs. */
	enum emu_dc_type dc_type;
	uint64_t dct_key;
	struct emu_qp *dcr_of;
	struct dc_qp *dc;

	struct emu_qp *_Atomic pending_next; /* engine's pending list */
	struct emu_qp *pass_next; /* the pending pass's own walk */
	struct emu_qp *ack_next; /* engine's ACK list */
	struct emu_qp *all_next; /* every QP of the engine (engine.lock) */
	/* the link that points at this QP in that list, so that a QP leaves
	 * it in constant time (engine.lock; NULL when not on it) */
	struct emu_qp **all_pprev;
	bool ack_queued;
	atomic_bool on_pending; /* read unlocked by comp_arm_timer_locked */
};

/* The receive queue a QP takes its WQEs from. */
static inline struct emu_rq *qp_rq(struct emu_qp *qp)
{
	return qp->srq ? &qp->srq->rq : &qp->rq;
}

/* Whether the QP has a receive queue of its own: not on an SRQ, not an
 * XRC QP (IBA A14: the initiator has no receive queue, the target
 * receives into XRC SRQs). */
static inline bool qp_has_own_rq(const struct emu_qp *qp)
{
	return !qp->srq && qp->type != IBV_QPT_XRC_SEND &&
	       qp->type != IBV_QPT_XRC_RECV && qp->dc_type == EMU_DC_NONE;
}

/* The reliable connected transports: RC, and XRC on either side. */
static inline bool qp_is_reliable(const struct emu_qp *qp)
{
	return qp->type == IBV_QPT_RC || qp->type == IBV_QPT_XRC_SEND ||
	       qp->type == IBV_QPT_XRC_RECV;
}

/* The transport prefix of the QP's opcodes (IBA 9.2 table 35, A14)
 * and the opcode mask bit that says a packet is of its transport. */
static inline uint8_t qp_opcode_prefix(const struct emu_qp *qp)
{
	/* A DCI's requests are DC's; a DCT answers as RC (dc.c). */
	if (qp->dc_type == EMU_DC_DCI)
		return IB_OPCODE_DC;
	switch (qp->type) {
	case IBV_QPT_UC:
		return IB_OPCODE_UC;
	case IBV_QPT_UD:
		return IB_OPCODE_UD;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return IB_OPCODE_XRC;
	default:
		return IB_OPCODE_RC;
	}
}

static inline uint32_t qp_opm_transport(const struct emu_qp *qp)
{
	/* What the QP takes: a DCT's responders DC requests, a DCI RC
	 * responses (dc.c). */
	if (qp->dc_type == EMU_DC_DCT)
		return OPM_DC;
	switch (qp->type) {
	case IBV_QPT_RC:
		return OPM_RC;
	case IBV_QPT_UC:
		return OPM_UC;
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		return OPM_XRC;
	default:
		return OPM_UD;
	}
}

/* Inline data of a send WQE is stored after its SGE array. */
static inline uint8_t *wqe_inline_data(const struct emu_qp *qp,
				       struct wqe *w)
{
	return (uint8_t *)&w->sge[qp->cap.max_send_sge];
}

/* xrc.c: the XRC SRQ a request names, bound to the target QP for it
 * (IBA A14); an AETH NAK code if it cannot be, else -1.  Caller
 * holds engine.lock and qp.lock. */
int xrc_bind_locked(struct emu_qp *qp, uint32_t srqn, bool open_message);
/* A domain gains (n > 0) or loses an XRC SRQ or target QP. */
void xrcd_use(struct emu_xrcd *xrcd, int n);
/* Before an XRC SRQ is freed: no request finds it, no QP keeps it. */
void xrc_srq_withdraw(struct emu_srq *srq);

/* dc.c: the Dynamically Connected transport.  Store a DCI's WQE's
 * target from its ext (EINVAL if it has none or names no AH). */
int dc_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		 const struct emu_wr_ext *ext);
/* At create: check what a DC QP is given (EINVAL) and set up its state
 * (ENOMEM); nothing for other QPs.  At destroy, once no packet reaches
 * the QP: free it, and a DCT's responders. */
int dc_check_init(const struct emu_qp_init *init);
int dc_qp_init(struct emu_qp *qp, const struct emu_qp_init *init);
void dc_qp_fini(struct emu_qp *qp);
/* The responders a DCT keeps now (its tests; takes engine.lock). */
uint32_t dc_dct_responders(struct emu_qp *qp);
/* A DCT goes to Reset: its responders start over at their next
 * packet.  qp.lock held. */
void dc_qp_reset_locked(struct emu_qp *qp);
/* A packet for a DC QP (engine.lock and qp.lock held): true if dc.c
 * took it (a DCT takes every packet). */
bool dc_recv_locked(struct emu_qp *qp, const struct pkt *p);
/* The requester reached w, a DCI's WQE not yet started: true if it may
 * be sent now, bound to its target; false while earlier WRs to another
 * target are still outstanding.  qp.lock held. */
bool dc_req_bind_locked(struct emu_qp *qp, const struct wqe *w);
struct pkt_out;
/* The DCETH of a DCI's request packet. */
void dc_fill_eth(const struct emu_qp *qp, struct pkt_out *out);

/* mkey.c: UMR work requests.  The post-time checks of a UMR (EINVAL,
 * as mlx5dv_wr_post(3) says), and storing it in its WQE. */
int umr_check_wr(struct emu_qp *qp, const struct ibv_send_wr *wr,
		 const struct emu_wr_ext *ext);
int umr_store_wqe(struct emu_qp *qp, struct wqe *wqe,
		  const struct emu_wr_ext *ext);
/* umr.c: execute a UMR WQE of qp in send queue order: IBV_WC_SUCCESS
 * or IBV_WC_LOC_PROT_ERR.  Caller holds qp.lock. */
enum ibv_wc_status umr_execute_locked(struct emu_qp *qp, struct wqe *wqe);

/* Install a checked layout (umr.c), or empty the mkey (ents NULL). */
void mkey_install(struct emu_mkey *mk, uint32_t access, uint32_t repeat,
		  const struct mkey_ent *ents, uint16_t nr);
/* Invalidate the key rkey names, for a LOCAL_INV of qp (remote false)
 * or a SEND_WITH_INV qp received (remote true): an mkey of qp's PD is
 * emptied (remotely only if created with remote_inv), else the key is
 * a window's (mw_invalidate_locked).  0 or EINVAL.  Caller holds
 * qp.lock. */
int key_invalidate_locked(struct emu_qp *qp, uint32_t rkey, bool remote);

/* event.c: async events to the owner's descriptor (never blocks) */
void emu_event(const struct emu_owner *owner, enum ibv_event_type type);
/* An unaffiliated port event (element: the port number) to every open
 * context of the process. */
void emu_port_event(struct emu_hca *hca, unsigned int port,
		    enum ibv_event_type type);

/* cq.c: add a completion; false if the CQ has overrun (entry lost). */
bool cq_push(struct emu_cq *cq, const struct ibv_wc *wc, bool solicited);
/* Remove the unpolled completions of QP qpn, keeping the others in
 * order (a QP moved to Reset, qp.c).  Takes cq.lock. */
void cq_forget_qp(struct emu_cq *cq, uint32_t qpn);

/* rq.c: receive queues */
int rq_init(struct emu_rq *rq, uint32_t max_wr, uint32_t max_sge,
	    const struct emu_buf_alloc *alloc);
void rq_fini(struct emu_rq *rq);
int rq_post_locked(struct emu_rq *rq, struct ibv_recv_wr *wr,
		   struct ibv_recv_wr **bad_wr);

/* mr.c: lookups for the engines (lock-free; see struct emu_hca) */
int mr_table_init(struct emu_hca *hca);
void mr_table_fini(struct emu_hca *hca);
/* The region key (an L_Key or R_Key: they are equal) names, or NULL: an
 * acquire load of its entry, without hca.lock (inline: every message
 * looks one up).  Caller holds a QP lock: the region stays registered
 * until that lock is released, since emu_mr_dereg() waits for every QP
 * lock of the HCA. */
static inline struct emu_mr *mr_lookup(struct emu_hca *hca, uint32_t key)
{
	/* Number 0 names no index (the subtraction wraps past the
	 * table); the whole key must match, tag and variant too. */
	struct emu_mr *mr = key_table_get(&hca->mrs, key_num(key) - 1);

	return mr && mr->key == key ? mr : NULL;
}

/* mkey.c: the mkey key names, or NULL (a region, a window, nothing).
 * Caller holds a QP lock (mr_lookup). */
static inline struct emu_mkey *mkey_lookup(struct emu_hca *hca, uint32_t key)
{
	struct emu_mr *mr = mr_lookup(hca, key);

	return mr ? mr->mkey : NULL;
}

/* mr_pages.c: the process's pages under a region (no lock) */
/* 0 if [addr, addr+length) is mapped readable (and writable if write),
 * else EFAULT: read from the process's mappings. */
int mr_pages_mapped(const void *addr, size_t length, bool write);
/* Fault [addr, addr+len) in for a read or a write, as an on-demand
 * paging HCA's page fault does: 0, or EFAULT where the access would
 * fault (no mapping, no such access). */
int mr_pages_fault(const void *addr, uint64_t len, bool write);

/* mw.c: memory windows (see the lock rule there) */
int mw_table_init(struct emu_hca *hca);
void mw_table_fini(struct emu_hca *hca);
/* Whether key is in the windows' key space (no region has such a key). */
bool mw_key_is_window(uint32_t key);
struct wqe_bind;
/* Execute a BIND_MW WQE of qp: IBV_WC_SUCCESS or IBV_WC_MW_BIND_ERR. */
enum ibv_wc_status mw_bind_locked(struct emu_qp *qp, const struct wqe_bind *b);
/* Invalidate a type 2 window (LOCAL_INV, or SEND_WITH_INV if remote);
 * 0 or EINVAL. */
int mw_invalidate_locked(struct emu_qp *qp, uint32_t rkey, bool remote);
/* Where [va, va+len) is through window rkey, hca.mw_lock then held until
 * mw_access_end(); NULL if the window does not grant access. */
uint8_t *mw_access_begin(struct emu_qp *qp, uint32_t rkey, uint64_t va,
			 uint64_t len, int access);
void mw_access_end(struct emu_qp *qp);
/* The type 2B windows bound through QP qpn stop granting access. */
void mw_qp_destroyed(struct emu_hca *hca, uint32_t qpn);

/* ah.c */
void ah_table_fini(struct emu_hca *hca);
/* Copy the address vector of an AH handle; false if there is none. */
bool ah_copy(struct emu_hca *hca, uint32_t handle, struct ibv_ah_attr *av);

/* qp.c: the error transitions, one copy each (IBA 10.3.1) */
void qp_error_locked(struct emu_qp *qp);
void qp_sq_error_locked(struct emu_qp *qp);
void qp_fatal_locked(struct emu_qp *qp);
void qp_publish_locked(struct emu_qp *qp);

/* flush.c: outstanding WRs complete with IBV_WC_WR_FLUSH_ERR */
void flush_wqe(struct emu_cq *cq, struct emu_qp *qp, const struct wqe *wqe,
	       enum ibv_wc_opcode opcode);
void flush_sq_locked(struct emu_qp *qp);
void flush_all_locked(struct emu_qp *qp);

#endif /* IBEMU_HCA_H */
