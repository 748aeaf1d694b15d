// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the CM's receiving (cm_recv.c): MADs as the
 * payload of UD SENDs to QP1 (IBA 12.6.1), handed to the engine
 * (engine_recv_locked), which gives them to the CM's QP1 handler
 * (cm_recv_locked), against live ids: an RC and a UD listener, an RC id
 * that sent its REQ (REQ_SENT) and a UD id that sent its SIDR_REQ
 * (SIDR_REQ_SENT), and the passive ids the input's requests make, which
 * the harness accepts or rejects when the input asks, so that REQ, REP,
 * RTU, REJ, DREQ, DREP, SIDR_REQ and SIDR_REP each find an id in the
 * state that takes them.
 *
 * The engine runs on a transport of this file's own (as fuzz_packet.c):
 * every MAD the CM sends (REQ, REP, REJ, DREP...) is swallowed, the
 * progress thread sleeps, and everything received happens on the
 * fuzzer's thread.  The same transport is the engine's network one
 * (e->net), for one remote slot (another node's process, as a TCP
 * connection names it), so the CM's paths for peers of other nodes are
 * reached too.
 *
 * Input: any number of records, sel:u8 then 256 bytes of MAD (missing
 * bytes read as zero).
 *   sel bits 0-1: the id aimed at: 0 the RC id, 1 the UD id, 2 the
 *                 newest passive id, 3 the listeners
 *       bit 2:    aim: the MAD header made a CM Send (IBA 13.4.3), the
 *                 message's communication IDs those of the id aimed at
 *                 (its local ID as the Remote Communication ID, its
 *                 remote ID as the Local one), a request's service ID
 *                 and IP CM header (IBA A11.6) those of the listener
 *       bit 3:    from the remote slot (else from this process, the
 *                 active ids' peer)
 *       bits 4-5: the passive ids the MAD made: 1 accepted, 2 rejected,
 *                 else left as they are
 *       bit 6:    afterwards, the id aimed at disconnects (DREQ)
 *       bit 7:    afterwards, the RC id establishes (its RTU)
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm_int.h"
#include "engine.h"
#include "fuzz_input.h"
#include "hca.h"
#include "shmfile.h"

#define FZ_PORT 7472
#define FZ_REMOTE_SLOT (IBEMU_MAX_PROCS + 5)
#define FZ_MAX_RECORDS 32
#define FZ_MAX_PASSIVE 16

#define SEL_ID 3u
#define SEL_AIM 4u
#define SEL_REMOTE 8u
#define SEL_ANSWER 0x30u
#define SEL_DISCONNECT 0x40u
#define SEL_ESTABLISH 0x80u

/* ---- the transport (fuzz_transport.h), and a remote slot ---- */

#include "fuzz_transport.h"

/* The remote slot: a process of another node at 192.0.2.7. */
static bool fz_peer_info(struct engine *e, int32_t slot,
			 struct tp_peer_info *info)
{
	struct sockaddr_in *a = (struct sockaddr_in *)&info->addr;

	if (slot != FZ_REMOTE_SLOT)
		return false;
	memset(info, 0, sizeof(*info));
	info->lid = 0x77;
	info->guid = 0x0202020202020202ull;
	info->token = 0x1234;
	a->sin_family = AF_INET;
	inet_pton(AF_INET, "192.0.2.7", &a->sin_addr);
	info->up = true;
	return true;
}

static int fz_peer_watch_fd(struct engine *e, int32_t slot, uint64_t token)
{
	errno = ENOENT;
	return -1;
}

static bool fz_same_process(struct engine *e, int32_t a, int32_t b)
{
	return a == b;
}

static void fz_seed_qpn(struct engine *e, int32_t slot, uint32_t qpn)
{
}

static void fz_flush(struct engine *e)
{
}

static void fz_poll(struct engine *e)
{
}

static const struct tp_net_ops fz_net = {
	.peer_info = fz_peer_info,
	.peer_watch_fd = fz_peer_watch_fd,
	.seed_qpn = fz_seed_qpn,
	.same_process = fz_same_process,
};

static const struct transport_ops fuzz_ops = {
	FZ_TRANSPORT_OPS,
	.flush = fz_flush,
	.poll = fz_poll,
	.poll_done = fz_poll,
	.net = &fz_net,
};

/* ---- the CM's ids ---- */

static struct emu_hca *hca;
static struct emu_cm_chan *chan;
static int chan_fd;
static struct emu_cm_id *rc_listener, *ud_listener;
static struct emu_cm_id *rc_id, *ud_id;
static struct emu_cm_id *passive[FZ_MAX_PASSIVE];
static unsigned int nr_passive;
static char node_name[64];

static void die(const char *what)
{
	fprintf(stderr, "fuzz_cm: %s\n", what);
	abort();
}

static struct sockaddr_in fz_addr(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(FZ_PORT) };

	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	return a;
}

/* The next event within 2 s; false if none came. */
static bool next_event(struct emu_cm_event *ev, bool wait)
{
	struct pollfd p = { .fd = chan_fd, .events = POLLIN };

	for (;;) {
		if (!emu_cm_get_event(chan, ev))
			return true;
		if (!wait || poll(&p, 1, 2000) != 1)
			return false;
	}
}

static void expect(struct emu_cm_id *id, enum emu_cm_event_type type)
{
	struct emu_cm_event ev;

	if (!next_event(&ev, true) || ev.id != id || ev.event != type)
		die("an event of setup did not come");
}

static struct emu_cm_id *listen_on(int ps, enum ibv_qp_type type)
{
	struct sockaddr_in a = fz_addr();
	struct emu_cm_id *l;

	if (emu_cm_id_create(hca, chan, 1, ps, type, &l) ||
	    emu_cm_bind(l, (struct sockaddr *)&a) ||
	    emu_cm_listen(l, FZ_MAX_PASSIVE))
		die("listener");
	return l;
}

/* An id of type that sent its request (REQ, SIDR_REQ) to the listener. */
static struct emu_cm_id *connecting(int ps, enum ibv_qp_type type,
				    uint64_t handle)
{
	struct sockaddr_in a = fz_addr();
	struct emu_cm_conn p;
	struct emu_cm_id *id;

	if (emu_cm_id_create(hca, chan, handle, ps, type, &id) ||
	    emu_cm_resolve_addr(id, NULL, (struct sockaddr *)&a, 1000))
		die("resolve_addr");
	expect(id, EMU_CM_ADDR_RESOLVED);
	if (emu_cm_resolve_route(id, 1000))
		die("resolve_route");
	expect(id, EMU_CM_ROUTE_RESOLVED);
	memset(&p, 0, sizeof(p));
	p.qp_num = 0x123;
	p.responder_resources = 1;
	p.initiator_depth = 1;
	p.retry_count = 3;
	if (emu_cm_connect(id, &p))
		die("connect");
	return id;
}

static void fz_exit(void)
{
	emu_cm_id_destroy(rc_listener);
	emu_cm_id_destroy(ud_listener);
	emu_cm_chan_destroy(chan);
	emu_hca_put(hca);
	shmfile_unlink_node(node_name);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	snprintf(node_name, sizeof(node_name), "fuzz-cm-%d", (int)getpid());
	setenv("IBEMU_NODE", node_name, 1);
	engine_use_transport(&fuzz_ops);
	if (emu_hca_get(&hca))
		die("cannot attach the HCA");
	/* The network transport's place: one remote process. */
	hca->engine->net = &fuzz_ops;
	if (emu_cm_open(hca) || emu_cm_chan_create(hca, &chan, &chan_fd))
		die("CM");
	fcntl(chan_fd, F_SETFL, fcntl(chan_fd, F_GETFL) | O_NONBLOCK);
	rc_listener = listen_on(EMU_CM_PS_TCP, IBV_QPT_RC);
	ud_listener = listen_on(EMU_CM_PS_UDP, IBV_QPT_UD);
	atexit(fz_exit);
	return 0;
}

/* ---- the MADs ---- */

static struct emu_cm_id *aimed(uint8_t sel)
{
	switch (sel & SEL_ID) {
	case 0:
		return rc_id;
	case 1:
		return ud_id;
	case 2:
		return nr_passive ? passive[nr_passive - 1] : NULL;
	default:
		return NULL;
	}
}

static void ids_put(uint8_t *d, unsigned int local, unsigned int remote,
		    const struct emu_cm_id *id)
{
	cm_put32(d, local, id->remote_id);
	cm_put32(d, remote, id->local_id);
}

/* A request's service ID (IBA A11.6: 0x0000000001, port space, port)
 * and IP CM header, for the listener of ps. */
static void request_aim(uint8_t *d, unsigned int sid_off,
			unsigned int priv_off, uint16_t ps)
{
	uint8_t *ip = d + priv_off;
	struct sockaddr_in a = fz_addr();

	cm_put64(d, sid_off, 0x0000000001000000ull | (uint64_t)ps << 16 |
				     FZ_PORT);
	ip[CM_IP_HDR_VERSION] = 0;
	ip[CM_IP_HDR_IPV] = 4 << 4;
	memset(ip + CM_IP_HDR_DIP, 0, 12);
	memcpy(ip + CM_IP_HDR_DIP + 12, &a.sin_addr, 4);
}

static void aim(uint8_t *mad, uint8_t sel)
{
	struct emu_cm_id *id = aimed(sel);
	uint8_t *d = mad + CM_MAD_HDR;

	mad[MAD_BASE_VERSION] = 1;
	mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
	mad[MAD_CLASS_VERSION] = 2;
	mad[MAD_METHOD] = MAD_METHOD_SEND;
	switch (cm_get16(mad, MAD_ATTR_ID)) {
	case CM_ATTR_REQ:
		request_aim(d, REQ_SERVICE_ID, REQ_PRIVATE, EMU_CM_PS_TCP);
		return;
	case CM_ATTR_SIDR_REQ:
		request_aim(d, SIDR_REQ_SERVICE_ID, SIDR_REQ_PRIVATE,
			    EMU_CM_PS_UDP);
		return;
	}
	if (!id)
		return;
	switch (cm_get16(mad, MAD_ATTR_ID)) {
	case CM_ATTR_REP:
		ids_put(d, REP_LOCAL_COMM_ID, REP_REMOTE_COMM_ID, id);
		break;
	case CM_ATTR_RTU:
		ids_put(d, RTU_LOCAL_COMM_ID, RTU_REMOTE_COMM_ID, id);
		break;
	case CM_ATTR_REJ:
		ids_put(d, REJ_LOCAL_COMM_ID, REJ_REMOTE_COMM_ID, id);
		break;
	case CM_ATTR_DREQ:
		ids_put(d, DREQ_LOCAL_COMM_ID, DREQ_REMOTE_COMM_ID, id);
		break;
	case CM_ATTR_DREP:
		ids_put(d, DREP_LOCAL_COMM_ID, DREP_REMOTE_COMM_ID, id);
		break;
	case CM_ATTR_SIDR_REP:
		cm_put32(d, SIDR_REP_REQUEST_ID, id->local_id);
		break;
	}
}

/* One MAD as a UD SEND to QP1 from slot, through the engine. */
static void deliver(const uint8_t *mad, int32_t slot)
{
	uint8_t *data = calloc(1, 12 + 8 + CM_MAD_LEN);
	uint16_t lid = hca->node.seg->lid;
	struct pkt_hdr hdr = {
		.len = 12 + 8 + CM_MAD_LEN,
		.slid = slot == FZ_REMOTE_SLOT ? 0x77 : lid,
		.dlid = lid,
		.src_qpn = CM_QPN,
		.src_proc = slot,
	};
	struct pkt_grh grh = { 0 };
	struct tp_pkt in = { .hdr = &hdr, .grh = &grh };
	struct bth *bth = (struct bth *)data;

	if (!data)
		die("calloc");
	bth->opcode = IB_OPCODE_UD | IB_OP_SEND_ONLY;
	bth->pkey = htobe16(0xffff);
	bth->qpn = htobe32(CM_QPN);
	cm_put32(data, 12, CM_QP1_QKEY);
	cm_put32(data, 16, CM_QPN);
	memcpy(data + 20, mad, CM_MAD_LEN);
	in.data = data;
	emu_lock(&hca->engine->lock);
	engine_recv_locked(hca->engine, &in);
	emu_unlock(&hca->engine->lock);
	free(data);
}

/* The events the MAD queued: its requests' new ids kept, and answered
 * as sel asks. */
static void events(uint8_t sel)
{
	struct emu_cm_conn p;
	struct emu_cm_event ev;
	struct emu_cm_id *id;

	while (next_event(&ev, false)) {
		if (ev.event != EMU_CM_CONNECT_REQUEST || !ev.new_id)
			continue;
		id = ev.new_id;
		emu_cm_id_set_handle(id, 9);
		if (nr_passive == FZ_MAX_PASSIVE) {
			emu_cm_id_destroy(id);
			continue;
		}
		passive[nr_passive++] = id;
		memset(&p, 0, sizeof(p));
		p.qp_num = 0x456;
		p.qkey = 0x11111111;
		if ((sel & SEL_ANSWER) == 0x10)
			emu_cm_accept(id, &p);
		else if ((sel & SEL_ANSWER) == 0x20)
			emu_cm_reject(id, NULL, 0);
	}
}

static void record(uint8_t sel, struct input *in)
{
	uint8_t mad[CM_MAD_LEN];
	struct emu_cm_id *id;

	take(in, mad, sizeof(mad));
	if (sel & SEL_AIM)
		aim(mad, sel);
	deliver(mad, sel & SEL_REMOTE ? FZ_REMOTE_SLOT
				      : hca->node.proc_slot);
	events(sel);
	id = aimed(sel);
	if ((sel & SEL_DISCONNECT) && id)
		emu_cm_disconnect(id);
	if (sel & SEL_ESTABLISH)
		emu_cm_establish(rc_id);
	events(sel);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct emu_cm_event ev;
	unsigned int records = 0;
	uint8_t sel;

	rc_id = connecting(EMU_CM_PS_TCP, IBV_QPT_RC, 2);
	ud_id = connecting(EMU_CM_PS_UDP, IBV_QPT_UD, 3);
	while (in.n && records++ < FZ_MAX_RECORDS) {
		take(&in, &sel, 1);
		record(sel, &in);
	}
	while (nr_passive)
		emu_cm_id_destroy(passive[--nr_passive]);
	emu_cm_id_destroy(rc_id);
	emu_cm_id_destroy(ud_id);
	while (next_event(&ev, false))
		;
	return 0;
}
