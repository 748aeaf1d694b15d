// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the packet path: raw packets, as an inbox slot
 * delivers them, fed to the engine's receive path (engine_recv_locked)
 * against live QPs: RC, UC and UD QPs, an RC QP on an SRQ, and an XRC
 * target and initiator pair (IBA A14), a DC target on an SRQ
 * (emulator/hca/dc.c), all connected (RTS; the DCT in RTR), with
 * receives posted (on the XRC target's domain: two XRC SRQs, and one of
 * another domain) and, on the RC QP, a SEND, an RDMA READ, a FETCH_ADD
 * and an RDMA WRITE in flight (a SEND and a READ on the initiator), so
 * that the
 * responder and the completer both have work to match the packets
 * against.  Every buffer the HCA may write is in a region with
 * inaccessible pages on both sides, and the receive and response buffers
 * end at the upper one: a write past a buffer faults at once.
 *
 * The QPs live on a transport of this file's own (fuzz_ops): it delivers
 * nothing by itself, reaches one fake peer whatever the slot, swallows
 * every packet the engine sends (or refuses the room, "inbox full", when
 * the input asks), and keeps the progress thread asleep, so the run is
 * deterministic: everything happens on the fuzzer's thread.
 *
 * Input: any number of records
 *   sel:u8 len:u16 (little endian) bytes[len]
 * sel bits 0-1: the QP the packet is for (0 RC, 1 UC, 2 UD, 3 RC on SRQ)
 *      bit 2:   address it: BTH DestQP := that QP's QPN; link header
 *               src_qpn := the QPN it is connected to, src_proc := our
 *               node slot, slid/dlid := our LID
 *      bit 3:   aim its RETH or AtomicETH at our region: R_Key := the
 *               region's key, VA := the region's IOVA + VA mod its length
 *      bit 4:   aim at the read-only region instead (with bit 3)
 *      bit 5:   the requester's inbox is full while the packet is handled
 *               (every answer is refused room; the pending pass retries)
 *      bit 6:   for the XRC target QP instead of bits 0-1's; addressed,
 *               its XRCETH names the domain's first XRC SRQ (bit 0
 *               clear), its second (bit 0 set, bit 1 clear) or the SRQ
 *               of another domain (bits 0 and 1 set)
 *      bit 7:   for the XRC initiator QP (unless bit 6)
 *      A DC request (prefix 110b, a DCETH), addressed, goes to the DCT
 *      whatever the other bits say, its DCETH carrying the DCT's key
 *      unless bits 0-1 say the UC QP (then a key it does not have).
 * bytes: struct pkt_hdr, then hdr.len bytes of BTH, extended headers and
 * payload (missing bytes read as zero, the rest is the GRH when
 * hdr.flags has PKT_F_GRH).  With no bit 2 the packet is taken as it is.
 * PSNs: every QP's send and receive PSNs start at 0 (fuzz/corpus-from-pcap
 * rebases captures the same way).
 */
#include "config.h"

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "engine.h"
#include "shmfile.h"

#define FZ_PAGE 4096u
#define FZ_BUF_LEN (4 * FZ_PAGE) /* each region */
#define FZ_IOVA 0x100000ull /* the regions' IOVAs: inputs replay */
#define FZ_RO_IOVA 0x200000ull
#define FZ_MTU IBV_MTU_1024
#define FZ_PD 1
#define FZ_QKEY 0x11111111u
#define FZ_MAX_RECORDS 64

enum { FZ_RC, FZ_UC, FZ_UD, FZ_SRQ, FZ_NR_QPS };

#define SEL_QP 3u
#define SEL_ADDRESS 4u
#define SEL_AIM 8u
#define SEL_AIM_RO 16u
#define SEL_FULL 32u
#define SEL_XRC_TARGET 64u
#define SEL_XRC_INITIATOR 128u
#define FZ_DC_KEY 0x0123456789abcdefull

/* ---- the transport (fuzz_transport.h) ---- */

#include "fuzz_input.h"
#include "fuzz_transport.h"

static const struct transport_ops fuzz_ops = {
	FZ_TRANSPORT_OPS,
	.place = NULL,
};

/* ---- the HCA, its regions and QPs ---- */

struct fz_region {
	uint8_t *map; /* guard page, FZ_BUF_LEN, guard page */
	uint8_t *buf;
	struct emu_mr *mr;
	uint32_t key;
	uint64_t iova;
};

static struct emu_hca *hca;
static struct emu_cq *cq;
static struct fz_region rw, ro;
static struct emu_qp *remote; /* stays in RESET: the QPN peers are */
static uint32_t remote_qpn;
static uint16_t lid;
static char node_name[64];

static struct fz_qp {
	struct emu_qp *qp;
	uint32_t qpn;
} qps[FZ_NR_QPS];
static struct emu_srq *srq;
/* The DC target and its SRQ. */
static struct fz_qp dct;
static struct emu_srq *dct_srq;
/* XRC (IBA A14): a domain with two SRQs, another domain with one, a
 * target QP on the first and an initiator. */
static struct {
	struct emu_xrcd *xrcd, *other;
	struct emu_srq *srq[3];
	uint32_t srqn[3];
	struct fz_qp target, initiator;
} xrc;

static void die(const char *what)
{
	fprintf(stderr, "fuzz_packet: %s\n", what);
	abort();
}

static void region_init(struct fz_region *r, uint64_t iova, int access)
{
	r->map = mmap(NULL, FZ_BUF_LEN + 2 * FZ_PAGE, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->map == MAP_FAILED)
		die("mmap");
	r->buf = r->map + FZ_PAGE;
	if (mprotect(r->buf, FZ_BUF_LEN, PROT_READ | PROT_WRITE))
		die("mprotect");
	r->iova = iova;
	if (emu_mr_reg(hca, FZ_PD, r->buf, FZ_BUF_LEN, iova, access, &r->mr,
		       &r->key))
		die("emu_mr_reg");
}

static void drop_node(void)
{
	shmfile_unlink_node(node_name);
}

static void fz_exit(void)
{
	emu_qp_destroy(remote);
	emu_mr_dereg(rw.mr);
	emu_mr_dereg(ro.mr);
	emu_cq_destroy(cq);
	emu_hca_put(hca);
	drop_node();
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC,
		.pd_id = FZ_PD,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct emu_port_info port;

	/* A node of its own: $IBEMU_NODE if given, else one named for
	 * this process. */
	if (getenv("IBEMU_NODE") && *getenv("IBEMU_NODE"))
		snprintf(node_name, sizeof(node_name), "%s",
			 getenv("IBEMU_NODE"));
	else
		snprintf(node_name, sizeof(node_name), "fuzz-packet-%d",
			 (int)getpid());
	setenv("IBEMU_NODE", node_name, 1);
	engine_use_transport(&fuzz_ops);
	if (emu_hca_get(&hca))
		die("cannot attach the HCA");
	emu_hca_port_info(hca, 1, &port);
	lid = port.lid;
	if (emu_cq_create(hca, 1024, -1, &owner, false, NULL, &cq))
		die("emu_cq_create");
	region_init(&rw, FZ_IOVA,
		    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			    IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
	region_init(&ro, FZ_RO_IOVA, IBV_ACCESS_REMOTE_READ);
	init.send_cq = init.recv_cq = cq;
	init.owner = owner;
	if (emu_qp_create(hca, &init, &remote, &remote_qpn))
		die("emu_qp_create");
	atexit(fz_exit);
	return 0;
}

static void post_recv(struct fz_qp *q, uint64_t wr_id,
		      const struct ibv_sge *sge, int n)
{
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list =
				  (struct ibv_sge *)sge, .num_sge = n };
	struct ibv_recv_wr *bad;
	int ret;

	ret = q == &qps[FZ_SRQ] ? emu_srq_post_recv(srq, &wr, &bad)
				: emu_post_recv(q->qp, &wr, &bad);
	if (ret)
		die("post_recv");
}

static void post_send(struct fz_qp *q, uint64_t wr_id,
		      enum ibv_wr_opcode opcode, uint32_t off, uint32_t len)
{
	struct ibv_sge sge = {
		.addr = rw.iova + off, .length = len, .lkey = rw.key,
	};
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = opcode, .send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad;

	if (opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
		wr.wr.atomic.remote_addr = 0x1000;
		wr.wr.atomic.rkey = 0x4242;
		wr.wr.atomic.compare_add = 1;
	} else {
		wr.wr.rdma.remote_addr = 0x1000;
		wr.wr.rdma.rkey = 0x4242;
	}
	if (emu_post_send(q->qp, &wr, &bad, false))
		die("post_send");
}

/* RESET -> INIT -> RTR -> RTS, PSNs 0 (IBA 11.2.5.2). */
static void connect_qp(struct fz_qp *q, enum ibv_qp_type type)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qkey = FZ_QKEY,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};
	int mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;

	if (type == IBV_QPT_UD) {
		mask |= IBV_QP_QKEY;
	} else {
		/* UC has no READ or atomics (IBA 9.8). */
		if (type == IBV_QPT_UC)
			a.qp_access_flags &= IBV_ACCESS_LOCAL_WRITE |
					     IBV_ACCESS_REMOTE_WRITE;
		mask |= IBV_QP_ACCESS_FLAGS;
	}
	if (emu_qp_modify(q->qp, &a, mask))
		die("modify INIT");
	a.qp_state = IBV_QPS_RTR;
	mask = IBV_QP_STATE;
	if (type != IBV_QPT_UD) {
		a.ah_attr.port_num = 1;
		a.ah_attr.dlid = lid;
		a.path_mtu = FZ_MTU;
		a.dest_qp_num = remote_qpn;
		a.rq_psn = 0;
		mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			IBV_QP_RQ_PSN;
	}
	/* The responder's attributes: RC and the XRC target (IBA A14). */
	if (type == IBV_QPT_RC || type == IBV_QPT_XRC_RECV) {
		a.max_dest_rd_atomic = 4;
		a.min_rnr_timer = 1;
		mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
	}
	if (emu_qp_modify(q->qp, &a, mask))
		die("modify RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
	if (type == IBV_QPT_XRC_RECV)
		mask |= IBV_QP_TIMEOUT;
	/* The requester's: RC and the XRC initiator. */
	if (type == IBV_QPT_RC || type == IBV_QPT_XRC_SEND) {
		a.timeout = 0; /* resends come from NAKs only */
		a.retry_cnt = 3;
		a.rnr_retry = 1;
		a.max_rd_atomic = 4;
		mask |= IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_MAX_QP_RD_ATOMIC;
	}
	if (emu_qp_modify(q->qp, &a, mask))
		die("modify RTS");
}

static void xrc_post_recv(struct emu_srq *s, uint64_t wr_id, uint32_t off,
			  uint32_t len)
{
	struct ibv_sge sge = {
		.addr = rw.iova + off, .length = len, .lkey = rw.key,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 };
	struct ibv_recv_wr *bad;

	if (emu_srq_post_recv(s, &wr, &bad))
		die("emu_srq_post_recv");
}

static void xrc_create(void)
{
	struct emu_owner owner = { .handle = 3, .async_fd = -1 };
	struct emu_qp_init ti = {
		.qp_type = IBV_QPT_XRC_RECV,
		.owner = owner,
	};
	struct emu_qp_init ii = {
		.qp_type = IBV_QPT_XRC_SEND,
		.pd_id = FZ_PD,
		.send_cq = cq,
		.cap = { .max_send_wr = 8, .max_send_sge = 2 },
		.owner = owner,
	};
	int i;

	if (emu_xrcd_open(hca, 0, 0, O_CREAT, &xrc.xrcd) ||
	    emu_xrcd_open(hca, 0, 0, O_CREAT, &xrc.other))
		die("emu_xrcd_open");
	for (i = 0; i < 3; i++) {
		struct ibv_srq_attr sattr = { .max_wr = 4, .max_sge = 1 };

		if (emu_srq_create_xrc(hca, FZ_PD,
				       i < 2 ? xrc.xrcd : xrc.other, cq,
				       &sattr, &owner, NULL, &xrc.srq[i],
				       &xrc.srqn[i]))
			die("emu_srq_create_xrc");
		/* Each ends at the upper guard page. */
		xrc_post_recv(xrc.srq[i], 40 + i, FZ_BUF_LEN - 1200, 1200);
	}
	ti.xrcd = xrc.xrcd;
	if (emu_qp_create(hca, &ti, &xrc.target.qp, &xrc.target.qpn))
		die("emu_qp_create XRC target");
	connect_qp(&xrc.target, IBV_QPT_XRC_RECV);
	if (emu_qp_create(hca, &ii, &xrc.initiator.qp, &xrc.initiator.qpn))
		die("emu_qp_create XRC initiator");
	connect_qp(&xrc.initiator, IBV_QPT_XRC_SEND);
	post_send(&xrc.initiator, 51, IBV_WR_SEND, FZ_BUF_LEN - 100, 100);
	post_send(&xrc.initiator, 52, IBV_WR_RDMA_READ, FZ_BUF_LEN - 300,
		  200);
}

static void xrc_destroy(void)
{
	int i;

	if (emu_qp_destroy(xrc.initiator.qp) || emu_qp_destroy(xrc.target.qp))
		die("emu_qp_destroy XRC");
	for (i = 0; i < 3; i++)
		if (emu_srq_destroy(xrc.srq[i]))
			die("emu_srq_destroy XRC");
	if (emu_xrcd_close(xrc.other) || emu_xrcd_close(xrc.xrcd))
		die("emu_xrcd_close");
}

static void dct_create(void)
{
	struct emu_owner owner = { .handle = 4, .async_fd = -1 };
	struct ibv_srq_attr sattr = { .max_wr = 4, .max_sge = 1 };
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_RC,
		.pd_id = FZ_PD,
		.recv_cq = cq,
		.owner = owner,
		.dc_type = EMU_DC_DCT,
		.dct_key = FZ_DC_KEY,
	};
	/* No READ: a READ is an invalid request, which ends its
	 * responder's stream (dc.c) and not the DCT. */
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_ATOMIC,
	};

	if (emu_srq_create(hca, FZ_PD, &sattr, &owner, NULL, &dct_srq))
		die("emu_srq_create DC");
	xrc_post_recv(dct_srq, 61, FZ_BUF_LEN - 1200, 1200);
	xrc_post_recv(dct_srq, 62, FZ_BUF_LEN - 700, 700);
	init.srq = dct_srq;
	if (emu_qp_create(hca, &init, &dct.qp, &dct.qpn))
		die("emu_qp_create DCT");
	if (emu_qp_modify(dct.qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					      IBV_QP_PORT |
					      IBV_QP_ACCESS_FLAGS))
		die("modify DCT INIT");
	a.qp_state = IBV_QPS_RTR;
	a.ah_attr.port_num = 1;
	a.ah_attr.dlid = lid;
	a.path_mtu = FZ_MTU;
	a.min_rnr_timer = 1;
	if (emu_qp_modify(dct.qp, &a, IBV_QP_STATE | IBV_QP_AV |
					      IBV_QP_PATH_MTU |
					      IBV_QP_MIN_RNR_TIMER))
		die("modify DCT RTR");
}

static void qps_create(void)
{
	static const enum ibv_qp_type types[FZ_NR_QPS] = {
		IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD, IBV_QPT_RC,
	};
	struct ibv_srq_attr sattr = { .max_wr = 8, .max_sge = 2 };
	struct emu_owner owner = { .handle = 2, .async_fd = -1 };
	uint32_t end = FZ_BUF_LEN;
	int i;

	if (emu_srq_create(hca, FZ_PD, &sattr, &owner, NULL, &srq))
		die("emu_srq_create");
	for (i = 0; i < FZ_NR_QPS; i++) {
		struct emu_qp_init init = {
			.qp_type = types[i],
			.pd_id = FZ_PD,
			.send_cq = cq,
			.recv_cq = cq,
			.srq = i == FZ_SRQ ? srq : NULL,
			.cap = { .max_send_wr = 8, .max_recv_wr = 8,
				 .max_send_sge = 2, .max_recv_sge = 2 },
			.owner = owner,
		};
		struct fz_qp *q = &qps[i];
		/* Addresses are the region's IOVAs.  The first receive
		 * ends at the upper guard page; the second has two
		 * pieces, the first one tiny. */
		struct ibv_sge one = {
			.addr = rw.iova + end - 1500,
			.length = 1500, .lkey = rw.key,
		};
		struct ibv_sge two[2] = {
			{ .addr = rw.iova + 8192, .length = 3,
			  .lkey = rw.key },
			{ .addr = rw.iova + end - 2100,
			  .length = 2100, .lkey = rw.key },
		};

		if (emu_qp_create(hca, &init, &q->qp, &q->qpn))
			die("emu_qp_create");
		connect_qp(q, types[i]);
		post_recv(q, 1, &one, 1);
		post_recv(q, 2, two, 2);
	}
	/* The RC requester's work in flight (PSNs 0, 1, 2, 3): answers to
	 * it land at the end of the region, against the guard page. */
	post_send(&qps[FZ_RC], 11, IBV_WR_SEND, end - 100, 100);
	post_send(&qps[FZ_RC], 12, IBV_WR_RDMA_READ, end - 200, 200);
	post_send(&qps[FZ_RC], 13, IBV_WR_ATOMIC_FETCH_AND_ADD, end - 8, 8);
	post_send(&qps[FZ_RC], 14, IBV_WR_RDMA_WRITE, 0, 64);
	post_send(&qps[FZ_UC], 21, IBV_WR_SEND, end - 100, 100);
	xrc_create();
	dct_create();
}

static void qps_destroy(void)
{
	struct ibv_wc wc[64];
	int i;

	for (i = 0; i < FZ_NR_QPS; i++)
		if (emu_qp_destroy(qps[i].qp))
			die("emu_qp_destroy");
	if (emu_srq_destroy(srq))
		die("emu_srq_destroy");
	xrc_destroy();
	if (emu_qp_destroy(dct.qp) || emu_srq_destroy(dct_srq))
		die("emu_qp_destroy DCT");
	while (emu_cq_poll(cq, 64, wc) > 0)
		;
}

/* ---- the packets ---- */

static void aim(uint8_t *data, uint32_t len, const struct fz_region *r)
{
	const struct opcode_info *op = opcode_get(data[0]);
	uint8_t off;
	__be64 va;
	__be32 key;

	if (op->mask & OPM_RETH)
		off = op->reth;
	else if (op->mask & OPM_ATMETH)
		off = op->atmeth;
	else
		return;
	if ((uint32_t)off + 12 > len)
		return;
	memcpy(&va, data + off, 8);
	va = htobe64(r->iova + be64toh(va) % FZ_BUF_LEN);
	key = htobe32(r->key);
	memcpy(data + off, &va, 8);
	memcpy(data + off + 8, &key, 4);
}

/* Name one of the XRC SRQs in the XRCETH (see bit 6 above). */
static void xrc_aim(uint8_t *data, uint8_t sel)
{
	int i = (sel & 3u) == 3u ? 2 : (sel & 1u);
	__be32 srqn = htobe32(xrc.srqn[i]);

	memcpy(data + opcode_get(data[0])->xrceth, &srqn, 4);
}

/* One record as an inbox slot holds it, handed to the engine. */
static void deliver(uint8_t sel, const uint8_t *bytes, size_t n)
{
	struct fz_qp *q = (sel & SEL_XRC_TARGET)      ? &xrc.target
			  : (sel & SEL_XRC_INITIATOR) ? &xrc.initiator
						      : &qps[sel & SEL_QP];
	const struct opcode_info *op;
	__be64 key = htobe64(FZ_DC_KEY);
	struct pkt_hdr hdr = { 0 };
	struct pkt_grh *grh;
	struct tp_pkt in;
	uint32_t len;
	size_t take;
	uint8_t *data;
	struct bth *bth;

	memcpy(&hdr, bytes, n < sizeof(hdr) ? n : sizeof(hdr));
	bytes += n < sizeof(hdr) ? n : sizeof(hdr);
	n -= n < sizeof(hdr) ? n : sizeof(hdr);
	/* Exactly the packet's bytes (within a slot's room): a read past
	 * what the sender wrote is caught. */
	len = hdr.len < PKT_MAX_LEN ? hdr.len : PKT_MAX_LEN;
	data = calloc(1, len ? len : 1);
	grh = calloc(1, sizeof(*grh));
	if (!data || !grh)
		die("calloc");
	take = n < len ? n : len;
	memcpy(data, bytes, take);
	bytes += take;
	n -= take;
	memcpy(grh, bytes, n < sizeof(*grh) ? n : sizeof(*grh));

	if ((sel & SEL_ADDRESS) && len >= sizeof(*bth)) {
		bth = (struct bth *)data;
		op = opcode_get(data[0]);
		if (op->mask & OPM_DCETH)
			q = &dct;
		if ((op->mask & OPM_DCETH) && (sel & SEL_QP) != FZ_UC &&
		    len >= op->dceth + 8u)
			memcpy(data + op->dceth, &key, 8);
		bth->qpn = htobe32((be32toh(bth->qpn) & ~BTH_QPN_MASK) |
				   q->qpn);
		hdr.src_qpn = remote_qpn;
		hdr.src_proc = hca->node.proc_slot;
		hdr.slid = hdr.dlid = lid;
		if ((sel & SEL_XRC_TARGET) &&
		    (opcode_get(data[0])->mask & OPM_XRCETH) &&
		    len >= opcode_get(data[0])->xrceth + 4u)
			xrc_aim(data, sel);
	}
	if ((sel & SEL_AIM) && len)
		aim(data, len, (sel & SEL_AIM_RO) ? &ro : &rw);

	in.hdr = &hdr;
	in.data = data;
	in.grh = grh;
	in.slot = NULL;
	in.pos = 0;
	__atomic_store_n(&fz.full, (sel & SEL_FULL) != 0, __ATOMIC_RELAXED);
	emu_lock(&hca->engine->lock);
	engine_recv_locked(hca->engine, &in);
	engine_flush_acks_locked(hca->engine);
	emu_unlock(&hca->engine->lock);
	__atomic_store_n(&fz.full, false, __ATOMIC_RELAXED);
	/* What the packet left to do: answers owed, resends, timers. */
	engine_poll(hca->engine, true);
	free(data);
	free(grh);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { .p = data, .n = size };
	unsigned int records = 0;
	const uint8_t *rec;
	uint16_t n;
	uint8_t sel;

	memset(rw.buf, 0, FZ_BUF_LEN);
	qps_create();
	while (records++ < FZ_MAX_RECORDS && take_record(&in, &sel, &rec, &n))
		deliver(sel, rec, n);
	qps_destroy();
	return 0;
}
