/* SPDX-License-Identifier: MIT */
/*
 * Two-process harness for the RC data path suites (rc_ops, rc_errors,
 * rc_events, rc_ex, rc_stress).
 *
 * Each run forks BEFORE any device is opened (a process may not use verbs
 * objects inherited across fork on a real HCA), then both processes open
 * their own context, PD, CQ, memory region and RC QP(s), exchange {LID, GID,
 * QPN, PSN, buffer address, rkey} over a socketpair and bring their QPs to
 * RTS as manual 3.5 describes.  The same body function runs on both sides;
 * ep->side says which one it is.  The parent is the one CUnit records:
 * EP_CHECK in the parent is a CUnit assertion at once, in the child it is
 * recorded and sent to the parent at the end, which asserts it there.
 *
 * Every wait is bounded: socket reads, CQ polls, event waits and the child
 * itself (killed by PID when it overstays).
 *
 * The harness, one file per concern: peer_run.c (fork, wait, kill,
 * deadlines), peer_setup.c (verbs objects and connection), peer_msg.c
 * (framing on the socketpair), peer_check.c (assertions and verdicts),
 * peer_wr.c (work requests), peer_event.c (async and CQ events).
 */
#ifndef IBEMU_CONFORMANCE_PEER_H
#define IBEMU_CONFORMANCE_PEER_H

#include "conformance.h"

#define CF_PEER_MAX_QP 64

enum cf_side {
	CF_PARENT = 0,	/* usually the requester */
	CF_CHILD = 1,	/* usually the responder */
};

/* What each side sets up before the body runs (cf_peer_params_init). */
struct cf_peer_params {
	size_t buf_len;		/* registered buffer per side */
	int mr_access;		/* access of that MR */
	int qp_access;		/* IBV_QP_ACCESS_FLAGS at INIT */
	enum ibv_qp_type qp_type;	/* RC (default), UC or UD */
	uint32_t qkey;		/* UD: the Q_Key of every QP */
	int nqp;		/* QPs, connected pairwise (UD: addressed) */
	int cq_size;		/* one CQ per side, send and receive */
	uint32_t max_send_wr, max_recv_wr, max_sge, max_inline;
	int max_rd_atomic;	/* RTS; -1: min(device, 16) */
	int max_dest_rd_atomic;	/* RTR; -1: min(device, 16) */
	uint8_t timeout, retry_cnt, rnr_retry, min_rnr_timer;
	bool sq_sig_all;
	bool srq;		/* receives from an SRQ */
	bool channel;		/* CQ with a completion channel */
	bool cq_ex;		/* CQ from ibv_create_cq_ex */
	uint64_t cq_ex_wc_flags;
	bool qp_ex;		/* QPs from ibv_create_qp_ex */
	uint64_t send_ops_flags;
	/* MR, QPs and CQ (ibv_create_cq_ex) on a parent domain of the PD
	 * with a thread domain and counting allocators; a skip when the
	 * device has none */
	bool parent_domain;
	bool connect;		/* walk to RTS before the body (default) */
	bool child_may_die;	/* the body kills the child on purpose */
	int deadline_s;		/* whole run, default 60 */
};

/* The connection data of one side (manual 3.5, "exchange QP info"). */
struct cf_peer_info {
	uint16_t lid;
	uint8_t gid[16];
	uint8_t mtu;
	uint32_t nqp;
	uint64_t addr;
	uint32_t rkey;
	uint64_t len;
	uint32_t qkey;
	uint32_t qpn[CF_PEER_MAX_QP];
	uint32_t psn[CF_PEER_MAX_QP];
};

struct cf_ep {
	enum cf_side side;
	const struct cf_peer_params *p;
	int sock;
	long arg;		/* the run's argument (test-list.h) */
	/* Verbs objects. */
	struct ibv_context *ctx;
	struct ibv_device_attr_ex dev_ex;
	struct ibv_device_attr *dev;
	struct ibv_port_attr port;
	union ibv_gid gid;
	struct ibv_pd *pd;
	struct ibv_td *td;	/* p->parent_domain */
	struct ibv_pd *pdom;	/* p->parent_domain: the objects' PD */
	/* what the parent domain's allocators saw */
	unsigned int pd_allocs, pd_frees, pd_alloc_wrong;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct ibv_cq_ex *cqx;
	struct ibv_srq *srq;
	struct ibv_qp *qps[CF_PEER_MAX_QP];
	struct ibv_qp *qp;	/* qps[0] */
	struct ibv_qp_ex *qpx;	/* of qps[0], with p->qp_ex */
	struct ibv_qp_init_attr init;	/* caps granted to qps[0] */
	enum ibv_qp_state state;	/* reached by cf_ep_connect */
	struct ibv_mr *mr;
	uint8_t *buf;
	struct ibv_ah *ah;	/* UD: to the peer (cf_ep_connect to RTR) */
	/* The peer. */
	struct cf_peer_info me, peer;
	bool exchanged;
	/* Verdict. */
	unsigned int nfail;
	char *report;		/* child: failures to send */
	size_t report_len;
	char *peer_done;	/* a DONE that arrived early */
	size_t peer_done_len;
	bool got_peer_done;
	bool skipped;
};

typedef int (*cf_peer_body)(struct cf_ep *ep);
/* Adjusts the default parameters of a run; arg is cf_peer_run's arg. */
typedef void (*cf_peer_tune)(struct cf_peer_params *p, long arg);

void cf_peer_params_init(struct cf_peer_params *p);
/*
 * Fork, set up both sides, run body on both, collect the child's verdict.
 * Returns 0 when both sides passed, -1 otherwise (failures are already
 * CUnit assertions).
 */
int cf_peer_run(const struct cf_peer_params *p, cf_peer_body body, long arg);

/* Assertions usable on both sides. */
int cf_ep_check(struct cf_ep *ep, int ok, unsigned int line, const char *file,
		const char *func, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));
#define EP_CHECK(ep, cond, ...)						\
	cf_ep_check((ep), !!(cond), __LINE__, __FILE__, __func__, __VA_ARGS__)
#define EP_REQUIRE(ep, cond, ...)					\
	do {								\
		if (!EP_CHECK(ep, cond, __VA_ARGS__))			\
			return -1;					\
	} while (0)
/* A device choice (choice.c) seen on either side: the parent records it,
 * the child sends it in its report. */
void cf_ep_choice(struct cf_ep *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
#define EP_CHOICE(ep, ...) cf_ep_choice((ep), __VA_ARGS__)
/* A skip decided on both sides; the parent prints and counts it. */
void cf_ep_skip(struct cf_ep *ep, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
const char *cf_side_name(const struct cf_ep *ep);

/*
 * Walk every QP from ep->state to target (INIT, RTR or RTS) with the
 * attributes manual 3.5 names for the service type; for UD, ep->ah is
 * made on the way to RTR.  0 or -1.
 */
int cf_ep_connect(struct cf_ep *ep, enum ibv_qp_state target);

/* Socket coordination with a deadline; 0 or -1 (with a failure). */
int cf_ep_sync(struct cf_ep *ep, int timeout_ms);
int cf_ep_send_val(struct cf_ep *ep, uint64_t val);
/* An address and an R_Key for the peer (a window, a region of the body's
 * own), and the peer's; 0 or -1 (with a failure). */
int cf_ep_send_key(struct cf_ep *ep, uint64_t addr, uint32_t rkey);
int cf_ep_recv_key(struct cf_ep *ep, uint64_t *addr_p, uint32_t *rkey_p,
		   int timeout_ms);
/* Wait until the peer closed its socket (it died); 0, or -1 on timeout. */
int cf_ep_wait_peer_gone(struct cf_ep *ep, int timeout_ms);
int cf_ep_recv_val(struct cf_ep *ep, uint64_t *val_p, int timeout_ms);
/*
 * Wait for the peer's next cf_ep_sync in one plain blocking read() on the
 * socket (SO_RCVTIMEO bounds it), calling no verb meanwhile.
 */
int cf_ep_sync_blocking(struct cf_ep *ep, int timeout_ms);

/* cf_wait_async on ep->ctx. */
int cf_ep_wait_async(struct cf_ep *ep, enum ibv_event_type type,
		     int timeout_ms, struct ibv_async_event *ev_p,
		     char *seen, size_t seen_len);
/* Wait for a CQ event on ep->ch: 1 (got and acked), 0 timeout, -1 error. */
int cf_ep_wait_cq_event(struct cf_ep *ep, int timeout_ms);

/* A one-SGE WR on ep->mr at offset off (NULL next, signaled). */
void cf_ep_send_wr(struct cf_ep *ep, struct ibv_send_wr *wr,
		   struct ibv_sge *sge, enum ibv_wr_opcode op, size_t off,
		   uint32_t len, uint64_t wr_id);
int cf_ep_post_recv(struct cf_ep *ep, struct ibv_qp *qp, size_t off,
		    uint32_t len, uint64_t wr_id);
/*
 * Check a completion: got >= 1, status, wr_id, and opcode unless it is
 * -1.  1 when it matches.
 */
int cf_ep_expect_wc(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		    uint64_t wr_id, enum ibv_wc_status status, int opcode,
		    const char *what);
/*
 * ibv_post_send of the chain wr on qp; a refusal is an EP_CHECK failure.
 * 0 or -1.
 */
int cf_ep_post_send(struct cf_ep *ep, struct ibv_qp *qp,
		    struct ibv_send_wr *wr);
/*
 * Post one cf_ep_send_wr WR on ep->qp with send_flags flags; its RDMA
 * fields name the peer's buffer at roff.  0 or -1 (checked).
 */
int cf_ep_post1(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		uint32_t len, uint64_t roff, uint64_t wr_id,
		unsigned int flags);
/* A successful completion of wr_id with opcode op; 1 when it is. */
int cf_ep_wc_ok(struct cf_ep *ep, const struct ibv_wc *wc, int got,
		uint64_t wr_id, enum ibv_wc_opcode op, const char *what);
/* Wait up to 1 s for qp to reach state want; a failure otherwise. */
void cf_ep_check_state(struct cf_ep *ep, struct ibv_qp *qp, int want,
		       const char *what);
/*
 * An address handle to the peer's port: its LID, and its GID in a GRH
 * when global is true (always on RoCE or without a LID).  NULL on failure
 * (checked).
 */
struct ibv_ah *cf_ep_peer_ah(struct cf_ep *ep, bool global);

#endif /* IBEMU_CONFORMANCE_PEER_H */
