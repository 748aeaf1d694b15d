// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the receiving side of multicast across nodes
 * (mcast_ip.c): datagrams as another node sends them to an IP group, read
 * and checked by the receiving thread's own code (sock_drain,
 * frame_accept, through mcast_ip_fuzz_drain, built with IBEMU_FUZZ only)
 * and handed to the engine, where UD QPs attached to the groups take
 * them (IBA 10.5).  The datagrams come on a local datagram socket pair
 * instead of a joined IP group: the same recv, the same bytes.
 *
 * Each input gets two UD QPs, one attached to each of two groups (the
 * second to both), with receives posted; the harness's mcast_ip state
 * has joined the first group and a third one no QP has.
 *
 * Input: any number of records, sel:u8 len:u16 (little endian)
 * bytes[len], each one datagram.
 *   sel bit 0: aim: the frame header's magic, version, type (DATA) and
 *              length made right, and its GRH flag set
 *       bit 1: aim the GRH's DGID at the first group (bit 2: the
 *              second), its SGID at the sender's IPv4 address, the BTH
 *              at the multicast QP (IBA 10.5.2.2), the DLID at the
 *              group's MLID
 * Every datagram comes from FZ_SRC4 at LID FZ_SLID, as the kernel's
 * envelope would say for a sender of the node's subnet.
 */
#include "config.h"

#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "fuzz_input.h"
#include "hca.h"
#include "shmfile.h"
#include "tp_frame.h"

#define FZ_QKEY 0x11111111u
#define FZ_MLID 0xc001
#define FZ_SRC4 0x0a000002u /* 10.0.0.2, host order */
#define FZ_SLID 2
#define FZ_MAX_RECORDS 32
#define FZ_BUF 65536 /* a datagram longer than a frame too */

void mcast_ip_fuzz_drain(struct engine *e, const uint8_t (*mgids)[16],
			 unsigned int n, int fd, uint32_t src4, uint16_t slid);

static const uint8_t mgids[3][16] = {
	{ 0xff, 0x0e, [15] = 1 },
	{ 0xff, 0x12, 0x40, 0x1b, [15] = 2 },
	{ 0xff, 0x0e, [15] = 3 },
};
/* What the mcast_ip state joined: the first and the third. */
static const uint8_t joined[2][16] = {
	{ 0xff, 0x0e, [15] = 1 },
	{ 0xff, 0x0e, [15] = 3 },
};

static struct emu_hca *hca;
static struct emu_cq *cq;
static struct emu_mr *mr;
static uint8_t *buf;
static uint32_t lkey;
static int sv[2];
static char node_name[64];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_mcast_ip: %s\n", what);
	abort();
}

static void fz_exit(void)
{
	emu_mr_dereg(mr);
	emu_cq_destroy(cq);
	emu_hca_put(hca);
	shmfile_unlink_node(node_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };

	snprintf(node_name, sizeof(node_name), "fuzz-mcast-%d",
		 (int)getpid());
	setenv("IBEMU_NODE", node_name, 1);
	unsetenv("IBEMU_NET");
	unsetenv("IBEMU_TRANSPORT");
	if (emu_hca_get(&hca))
		die("cannot attach the HCA");
	if (emu_cq_create(hca, 64, -1, &owner, false, NULL, &cq))
		die("emu_cq_create");
	buf = calloc(1, 4 * 8192);
	if (!buf || emu_mr_reg(hca, 1, buf, 4 * 8192, (uintptr_t)buf,
			       IBV_ACCESS_LOCAL_WRITE, &mr, &lkey))
		die("emu_mr_reg");
	if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv))
		die("socketpair");
	atexit(fz_exit);
	return 0;
}

/* A UD QP in RTS attached to groups [first, last], receives posted. */
static struct emu_qp *qp_new(int first, int last, int i)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_UD,
		.pd_id = 1,
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.owner = owner,
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qkey = FZ_QKEY };
	struct ibv_sge sge = { .length = 8192, .lkey = lkey };
	struct ibv_recv_wr wr = { .sg_list = &sge, .num_sge = 1 }, *bad;
	struct emu_qp *qp;
	uint32_t qpn;
	int g, k;

	if (emu_qp_create(hca, &init, &qp, &qpn) ||
	    emu_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				      IBV_QP_PORT | IBV_QP_QKEY))
		die("UD QP");
	a.qp_state = IBV_QPS_RTR;
	if (emu_qp_modify(qp, &a, IBV_QP_STATE))
		die("RTR");
	a.qp_state = IBV_QPS_RTS;
	if (emu_qp_modify(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		die("RTS");
	for (g = first; g <= last; g++)
		if (emu_mcast_attach(qp, (const union ibv_gid *)mgids[g],
				     (uint16_t)(FZ_MLID + g)))
			die("attach");
	for (k = 0; k < 2; k++) {
		sge.addr = (uintptr_t)buf + (size_t)(2 * i + k) * 8192;
		wr.wr_id = (uint64_t)k;
		if (emu_post_recv(qp, &wr, &bad))
			die("post_recv");
	}
	return qp;
}

/* Detached (a QP with groups cannot go, as in verbs), and destroyed. */
static void qp_free(struct emu_qp *qp, int first, int last)
{
	int g;

	for (g = first; g <= last; g++)
		if (emu_mcast_detach(qp, (const union ibv_gid *)mgids[g],
				     (uint16_t)(FZ_MLID + g)))
			die("detach");
	if (emu_qp_destroy(qp))
		die("emu_qp_destroy");
}

static void aim(uint8_t sel, uint8_t *d, size_t n)
{
	struct tp_frame_hdr f;
	struct tp_frame_grh g;
	struct bth b;
	uint32_t src4;
	size_t off = sizeof(f) + sizeof(g);
	int grp = sel & 4 ? 1 : 0;

	if (n < off + sizeof(b))
		return;
	memcpy(&f, d, sizeof(f));
	memcpy(&g, d + sizeof(f), sizeof(g));
	memcpy(&b, d + off, sizeof(b));
	if (sel & 1) {
		f.magic = htobe32(TP_FRAME_MAGIC);
		f.version = TP_FRAME_VERSION;
		f.type = TP_FRAME_DATA;
		f.flags |= TP_FRAME_F_GRH;
		f.len = htobe32((uint32_t)(n - sizeof(f)));
	}
	if (sel & 2) {
		g.next_hdr = TP_FRAME_GRH_NEXT_BTH;
		memcpy(g.dgid, mgids[grp], 16);
		memset(g.sgid, 0, 10);
		g.sgid[10] = g.sgid[11] = 0xff;
		src4 = htobe32(FZ_SRC4);
		memcpy(g.sgid + 12, &src4, 4);
		b.qpn = htobe32((be32toh(b.qpn) & ~BTH_QPN_MASK) |
				BTH_QPN_MULTICAST);
		f.dlid = htobe16((uint16_t)(FZ_MLID + grp));
	}
	memcpy(d, &f, sizeof(f));
	memcpy(d + sizeof(f), &g, sizeof(g));
	memcpy(d + off, &b, sizeof(b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t d[FZ_BUF];
	struct emu_qp *a, *b;
	struct ibv_wc wc[16];
	struct input in = { .p = data, .n = size };
	unsigned int records = 0;
	const uint8_t *rec;
	uint16_t n;
	uint8_t sel;

	a = qp_new(0, 0, 0);
	b = qp_new(0, 1, 1);
	while (records++ < FZ_MAX_RECORDS && take_record(&in, &sel, &rec, &n)) {
		memcpy(d, rec, n);
		aim(sel, d, n);
		if (send(sv[1], d, n, MSG_DONTWAIT) == (ssize_t)n)
			mcast_ip_fuzz_drain(hca->engine, joined, 2, sv[0],
					    htobe32(FZ_SRC4), FZ_SLID);
	}
	qp_free(a, 0, 0);
	qp_free(b, 0, 1);
	while (emu_cq_poll(cq, 16, wc) > 0)
		;
	return 0;
}
