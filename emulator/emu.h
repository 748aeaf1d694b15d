/* SPDX-License-Identifier: MIT */
/*
 * The emulated HCA's interface: everything the verbs face (provider/) may
 * ask of it.  The HCA owns all of its state (QPs with their requester,
 * completer and responder, CQs, receive queues and SRQs, the memory
 * translation and protection table, address vectors, multicast
 * attachments) and knows nothing of libibverbs' objects: the provider
 * names its PDs with a 64-bit id and hands each object a user handle and
 * the file descriptors its events go to, as a process hands them to a
 * kernel HCA driver through uverbs.
 *
 * Errors: every function that can fail returns 0 or a positive errno
 * (EINVAL, ENOMEM, EBUSY, EOPNOTSUPP, EFAULT, EIO), the convention of the
 * verbs ops it serves; constructors return the object through *_p.
 *
 * Events: an async event is a struct emu_event_desc written, without ever
 * blocking, to the object's async_fd; a completion event is the CQ's
 * 8-byte handle written to its comp_fd.  Both descriptors must be
 * non-blocking; the HCA owns neither.
 */
#ifndef IBEMU_EMU_H
#define IBEMU_EMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <infiniband/verbs.h>

struct emu_hca;
struct emu_cq;
struct emu_qp;
struct emu_srq;
struct emu_mr;
struct emu_mw;
struct emu_xrcd;

/* One async event record, the layout of the kernel's
 * struct ib_uverbs_async_event_desc that ibv_get_async_event() reads. */
struct emu_event_desc {
	uint64_t element; /* the object's user handle, or the port number */
	uint32_t event_type; /* enum ibv_event_type */
	uint32_t reserved;
};

/* Where an object's events go: its user handle and the context's
 * non-blocking async event descriptor. */
struct emu_owner {
	uint64_t handle;
	int async_fd;
};

/*
 * Where the HCA takes a queue's buffer (a QP's send and receive rings, an
 * SRQ's, a CQ's) from: the application's allocator of a parent domain
 * (ibv_alloc_parent_domain(3)).  alloc returns the buffer, NULL when it
 * cannot (the verb fails with ENOMEM), or EMU_BUF_USE_DEFAULT for the
 * HCA's own; free gives back what alloc returned.  Both are called
 * with no lock of the HCA held, except the SRQ's or the CQ's own lock
 * when it is resized.
 * A NULL emu_buf_alloc: always the HCA's own.
 */
#define EMU_BUF_USE_DEFAULT ((void *)-1)
struct emu_buf_alloc {
	void *(*alloc)(void *priv, size_t size, size_t alignment,
		       uint64_t type);
	void (*free)(void *priv, void *ptr, uint64_t type);
	void *priv;
	uint64_t type; /* passed to both, as the application asked */
};

/* hca.c: the process's attachment to its node's HCA (reference counted:
 * each open context holds one). */
int emu_hca_get(struct emu_hca **hca_p);
void emu_hca_put(struct emu_hca *hca);
/* In a forked child: forget the parent's attachment without touching it
 * (its engine thread does not exist here; its mappings are the parent's). */
void emu_hca_fork_child(void);
/*
 * The identity of this attachment: its random token (node.c), drawn at
 * attach and never reused, and whether another attachment of the same
 * node, named by its token, is attached and alive (node.c liveness).
 * What ibv_import_device uses to tell whose objects a context names.
 */
uint64_t emu_hca_token(const struct emu_hca *hca);
bool emu_hca_token_alive(struct emu_hca *hca, uint64_t token);
/* A port's identity, read-only once the node exists (host byte order),
 * and its state now (enum ibv_port_state: `ibemu port down|up`). */
struct emu_port_info {
	uint64_t node_guid;
	uint64_t port_guid;
	uint64_t gid_prefix;
	uint16_t lid;
	uint16_t sm_lid;
	uint32_t state;
};
/* port: 1..emu_nr_ports() (checked by the caller: emu_port_valid). */
void emu_hca_port_info(struct emu_hca *hca, unsigned int port,
		       struct emu_port_info *info);
/* GID index of a port's table (fabric.h: 0 is fe80::/64 + port GUID,
 * then, on port 1, the node's IP addresses) into gid, network order: 0,
 * or ENODATA for an empty entry, EINVAL beyond the table. */
int emu_hca_gid(struct emu_hca *hca, unsigned int port, unsigned int index,
		uint8_t gid[16]);
/* The node's ports: its count once the process is attached, the count
 * IBEMU_PORTS asks for before. */
unsigned int emu_nr_ports(void);
/* The async event descriptors of the process's open contexts, which the
 * port events (IBV_EVENT_PORT_ERR, IBV_EVENT_PORT_ACTIVE: unaffiliated,
 * IBA 11.6.3.3) go to: added at open, removed before the descriptor is
 * closed.  0 or ENOMEM. */
int emu_hca_ctx_add(struct emu_hca *hca, int async_fd);
void emu_hca_ctx_remove(struct emu_hca *hca, int async_fd);
uint16_t emu_hca_pkey(struct emu_hca *hca, unsigned int index);
/* The node GUID without attaching (0 if the node cannot be opened). */
uint64_t emu_node_guid(void);
/* The interface the node's address is on (doc/design.md §6, "The node's
 * place on the IP fabric"), attached or not: 0, -ENODEV if the node has
 * none, -ENAMETOOLONG, or another -errno if the node cannot be opened. */
int emu_node_ifname(char *buf, size_t len);
bool emu_port_valid(unsigned int port_num);

/* cq.c: completion queues (manual 3.3.7-3.3.9, 3.6.7-3.6.10) */
/*
 * When a completion was generated, taken as the HCA adds it to the CQ
 * (not when it is polled), non-decreasing in the CQ's order.
 */
struct emu_wc_stamp {
	/* the HCA's free-running clock: CLOCK_MONOTONIC_RAW in ticks of
	 * IBEMU_CORE_CLOCK_KHZ (params.h), the value emu_clock_raw() reads */
	uint64_t raw;
	uint64_t wall_ns; /* CLOCK_REALTIME, ns since the epoch */
};
/* The HCA's free-running clock now (ibv_query_rt_values_ex). */
uint64_t emu_clock_raw(void);
/* stamped: keep an emu_wc_stamp with every entry. */
/* alloc: may be NULL; must outlive the CQ. */
int emu_cq_create(struct emu_hca *hca, uint32_t cqe, int comp_fd,
		  const struct emu_owner *owner, bool stamped,
		  const struct emu_buf_alloc *alloc, struct emu_cq **cq_p);
int emu_cq_destroy(struct emu_cq *cq);
int emu_cq_resize(struct emu_cq *cq, uint32_t cqe);
int emu_cq_poll(struct emu_cq *cq, int num_entries, struct ibv_wc *wc);
void emu_cq_arm(struct emu_cq *cq, bool solicited_only);
/* Completions waiting in a CQ that is not armed: no event will say so. */
bool emu_cq_waits_unarmed(struct emu_cq *cq);
/* Extended poll: the oldest entry, with the CQ locked until
 * emu_cq_poll_end(); NULL (and unlocked) when empty. */
const struct ibv_wc *emu_cq_poll_start(struct emu_cq *cq);
/* Consume the current entry; the next one or NULL (still locked). */
const struct ibv_wc *emu_cq_poll_next(struct emu_cq *cq);
/* Consume the current entry, if any, and unlock. */
void emu_cq_poll_end(struct emu_cq *cq);
/* The current entry's stamp (a stamped CQ, between start and end). */
const struct emu_wc_stamp *emu_cq_poll_stamp(struct emu_cq *cq);

/* srq.c: shared receive queues (manual 3.4.5-3.4.7, IBA 10.2.9) */
/* alloc: may be NULL; must outlive the SRQ. */
int emu_srq_create(struct emu_hca *hca, uint64_t pd_id,
		   struct ibv_srq_attr *attr, const struct emu_owner *owner,
		   const struct emu_buf_alloc *alloc, struct emu_srq **srq_p);
int emu_srq_modify(struct emu_srq *srq, const struct ibv_srq_attr *attr,
		   int mask);
void emu_srq_query(struct emu_srq *srq, struct ibv_srq_attr *attr);
int emu_srq_destroy(struct emu_srq *srq);
int emu_srq_post_recv(struct emu_srq *srq, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

/* xrc.c: XRC domains and XRC SRQs (IBA A14.2).  Within the process the
 * same file (device, inode) opens the same domain, refcounted; ino 0
 * (fd -1) is a domain of its own.  oflags: O_CREAT, O_EXCL as
 * ibv_open_xrcd(3) says (EINVAL as the kernel answers otherwise). */
int emu_xrcd_open(struct emu_hca *hca, uint64_t dev, uint64_t ino,
		  int oflags, struct emu_xrcd **xrcd_p);
/* EBUSY if this is the last open of a domain tied to no file and SRQs
 * or QPs still use it; a file's domain outlives its opens while used. */
int emu_xrcd_close(struct emu_xrcd *xrcd);
int emu_srq_create_xrc(struct emu_hca *hca, uint64_t pd_id,
		       struct emu_xrcd *xrcd, struct emu_cq *cq,
		       struct ibv_srq_attr *attr, const struct emu_owner *owner,
		       const struct emu_buf_alloc *alloc,
		       struct emu_srq **srq_p, uint32_t *srqn_p);

/* mr.c: the memory translation and protection table (IBA 10.6) */
int emu_mr_reg(struct emu_hca *hca, uint64_t pd_id, void *addr,
	       size_t length, uint64_t iova, int access, struct emu_mr **mr_p,
	       uint32_t *key_p);
/* Returns once no operation of the HCA can touch the region any more. */
int emu_mr_dereg(struct emu_mr *mr);
/* What a region is now (import); its fields as one snapshot. */
struct emu_mr_attr {
	void *addr;
	uint64_t length;
	int access;
	uint32_t key;
};
void emu_mr_attr(struct emu_mr *mr, struct emu_mr_attr *attr);
int emu_mr_rereg(struct emu_mr *mr, int flags, uint64_t pd_id, void *addr,
		 size_t length, int access);
/* mr_advise.c: ibv_advise_mr(3) on the on-demand paging regions of PD
 * pd_id; 0 or the errno the Linux stack gives. */
int emu_mr_advise(struct emu_hca *hca, uint64_t pd_id, int advice,
		  uint32_t flags, const struct ibv_sge *sg_list,
		  uint32_t num_sge);

/* mw.c: memory windows (IBA 10.6.7), type 1 and type 2B; a window is
 * bound and invalidated by work requests (post.c). */
int emu_mw_alloc(struct emu_hca *hca, uint64_t pd_id, enum ibv_mw_type type,
		 struct emu_mw **mw_p, uint32_t *key_p);
/* Unbinds the window: its keys stop working before this returns. */
int emu_mw_dealloc(struct emu_mw *mw);

/* ah.c: address vectors (IBA 10.2.2.1); a UD work request names one by
 * the handle of its struct ibv_ah, and the HCA copies it at post time. */
int emu_av_check(const struct ibv_ah_attr *attr);
int emu_ah_create(struct emu_hca *hca, const struct ibv_ah_attr *attr,
		  uint32_t *handle_p);
void emu_ah_destroy(struct emu_hca *hca, uint32_t handle);

/* qp.c: queue pairs and their state machine (IBA 10.3, 11.2.5) */
struct emu_qp_init {
	enum ibv_qp_type qp_type;
	uint64_t pd_id;
	struct emu_cq *send_cq, *recv_cq;
	struct emu_srq *srq; /* NULL: the QP has its own receive queue */
	struct emu_xrcd *xrcd; /* IBV_QPT_XRC_RECV: its domain */
	struct ibv_qp_cap cap; /* in: requested; out: granted */
	bool sq_sig_all;
	struct emu_owner owner;
	const struct emu_buf_alloc *alloc; /* may be NULL; outlives the QP */
	/* The Dynamically Connected transport (dc.c; mlx5dv_create_qp(3)):
	 * with qp_type IBV_QPT_RC, EMU_DC_DCI makes an initiator whose
	 * every work request names its target (struct emu_wr_ext), and
	 * EMU_DC_DCT a target on srq that takes the requests carrying
	 * dct_key from any initiator. */
	enum emu_dc_type {
		EMU_DC_NONE = 0,
		EMU_DC_DCI,
		EMU_DC_DCT,
	} dc_type;
	uint64_t dct_key;
};
int emu_qp_create(struct emu_hca *hca, struct emu_qp_init *init,
		  struct emu_qp **qp_p, uint32_t *qpn_p);
int emu_qp_modify(struct emu_qp *qp, const struct ibv_qp_attr *attr,
		  int mask);
/* attr->qp_state and cur_qp_state: the QP's one state. */
void emu_qp_query(struct emu_qp *qp, struct ibv_qp_attr *attr);
/* Destroys the QP once its last handle is destroyed (emu_qp_open). */
int emu_qp_destroy(struct emu_qp *qp);
/* Another handle on the XRC target QP qpn of domain xrcd (IBA A14). */
int emu_qp_open(struct emu_hca *hca, struct emu_xrcd *xrcd, uint32_t qpn,
		struct emu_qp **qp_p);
/* mcast.c: multicast attachments of UD QPs (IBA 10.5) */
int emu_mcast_attach(struct emu_qp *qp, const union ibv_gid *gid,
		     uint16_t lid);
int emu_mcast_detach(struct emu_qp *qp, const union ibv_gid *gid,
		     uint16_t lid);

/* post.c: work requests (manual 3.6.4, 3.6.5) */
/* whole: post every WR of the chain or none (ibv_wr_complete(3)). */
int emu_post_send(struct emu_qp *qp, struct ibv_send_wr *wr,
		  struct ibv_send_wr **bad_wr, bool whole);

/*
 * mkey.c: indirect memory keys (mlx5dv_create_mkey(3)).  An mkey is
 * created empty (every access through it fails as a protection error)
 * and given a layout by a UMR work request on a QP of its PD; its key
 * is both its L_Key and its R_Key, in the regions' key space, and the
 * addresses it names are zero-based: offset 0 is the layout's first
 * byte.  LOCAL_INV (or SEND_WITH_INV, if created with remote_inv) of
 * its key empties it again.
 */
struct emu_mkey;
int emu_mkey_create(struct emu_hca *hca, uint64_t pd_id,
		    uint16_t max_entries, bool remote_inv,
		    struct emu_mkey **mkey_p, uint32_t *key_p);
/* Returns once no operation of the HCA can touch the key any more. */
int emu_mkey_destroy(struct emu_mkey *mkey);

/* The UMR work request's opcode, past enum ibv_wr_opcode's values; it
 * completes as IBV_WC_DRIVER1 (MLX5DV_WC_UMR). */
#define EMU_WR_UMR ((enum ibv_wr_opcode)0x40)
/* One entry of a layout: bytes_count bytes at addr of the region lkey,
 * then bytes_skip bytes left out (the interleaved layout's stride; 0
 * in a list layout). */
struct emu_umr_entry {
	uint64_t addr;
	uint32_t bytes_count, bytes_skip;
	uint32_t lkey;
};
/* A UMR: the layout it gives mkey.  interleaved: the entries repeated
 * repeat_count times, each repetition advancing every entry's addr by
 * its bytes_count + bytes_skip (mlx5dv_wr_mr_interleaved(3)); else the
 * entries once, in order (mlx5dv_wr_mr_list(3)).  access: the
 * IBV_ACCESS_* rights the mkey grants. */
struct emu_umr {
	uint32_t mkey; /* the mkey's key */
	uint32_t access;
	bool interleaved;
	uint32_t repeat_count;
	uint16_t num_entries;
	const struct emu_umr_entry *entries; /* copied at post */
};

/* What a work request of a chain carries beyond struct ibv_send_wr:
 * for a DCI, its target (mlx5dv_wr_set_dc_addr(3)), which every WR of
 * a DCI must have; for EMU_WR_UMR, its UMR. */
struct emu_dc_addr {
	uint32_t ah_handle; /* the address vector, as for UD */
	uint32_t dctn; /* the target DCT's number */
	uint64_t dc_key; /* the DC access key it must match */
};
struct emu_wr_ext {
	bool has_dc;
	struct emu_dc_addr dc;
	const struct emu_umr *umr; /* EMU_WR_UMR only */
};
/* As emu_post_send, with ext[i] for the i-th WR of the chain (ext may
 * be NULL when no WR needs one). */
int emu_post_send_ext(struct emu_qp *qp, struct ibv_send_wr *wr,
		      const struct emu_wr_ext *ext,
		      struct ibv_send_wr **bad_wr, bool whole);
int emu_post_recv(struct emu_qp *qp, struct ibv_recv_wr *wr,
		  struct ibv_recv_wr **bad_wr);

#endif /* IBEMU_EMU_H */
