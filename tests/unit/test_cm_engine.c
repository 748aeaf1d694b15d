// SPDX-License-Identifier: MIT
/*
 * Unit tests of the CM engine (emulator/cm/) in one process: ids of
 * both ends on one node, the events in order with what they carry
 * (private data of the sizes IBA 12.6 allows, responder resources and
 * initiator depth crossed, QPNs), refusals, address rules, a
 * non-blocking channel, an address nobody has, and MADs of garbage
 * handed to the CM as the engine hands it packets for QP1: nothing
 * wedges, a connection still works afterwards.  Multicast joins: the
 * MGID of each kind of address (the kernel's cma_set_mgid), one MLID per
 * group node-wide, what MULTICAST_JOIN carries, the join rules, and a
 * leave that drops the join's unread event.
 *
 * Runs on its own node (IBEMU_NODE), removed afterwards.
 */
#include "config.h"

#include "unit.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cm.h"
#include "cm_wire.h"
#include "engine.h"
#include "hca.h"
#include "node.h"
#include "qp_state.h"
#include "shmfile.h"

static struct emu_hca *hca;
static struct emu_cm_chan *chan;
static int chan_fd;

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in s;

	memset(&s, 0, sizeof(s));
	s.sin_family = AF_INET;
	s.sin_port = htons(port);
	inet_pton(AF_INET, ip, &s.sin_addr);
	return s;
}

/* The next event within 5 s; false if none came. */
static bool next_event(struct emu_cm_event *ev)
{
	struct pollfd pfd = { .fd = chan_fd, .events = POLLIN };

	if (poll(&pfd, 1, 5000) != 1)
		return false;
	return emu_cm_get_event(chan, ev) == 0;
}

/* Whether an event comes within ms (it is taken). */
static bool next_event_within(int ms)
{
	struct pollfd pfd = { .fd = chan_fd, .events = POLLIN };
	struct emu_cm_event ev;
	int fl = fcntl(chan_fd, F_GETFL);
	bool got;

	if (poll(&pfd, 1, ms) != 1)
		return false;
	/* a count whose event was dropped reads on: do not block */
	fcntl(chan_fd, F_SETFL, fl | O_NONBLOCK);
	got = emu_cm_get_event(chan, &ev) == 0;
	fcntl(chan_fd, F_SETFL, fl);
	return got;
}

static bool expect(enum emu_cm_event_type type, struct emu_cm_id *id,
		   struct emu_cm_event *ev)
{
	if (!next_event(ev)) {
		fprintf(stderr, "no event, expected %d\n", type);
		return false;
	}
	if (ev->event != type || ev->id != id) {
		fprintf(stderr, "event %d (status %d) for %p, expected %d "
				"for %p\n",
			ev->event, ev->status, (void *)ev->id, type,
			(void *)id);
		return false;
	}
	return true;
}

static struct emu_cm_id *listener(uint16_t port)
{
	struct sockaddr_in a = sin_of("127.0.0.1", port);
	struct emu_cm_id *l;

	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 1, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &l) == 0);
	CU_ASSERT_FATAL(emu_cm_bind(l, (struct sockaddr *)&a) == 0);
	CU_ASSERT_FATAL(emu_cm_listen(l, 8) == 0);
	return l;
}

/* A new id (its handle) with its address toward 127.0.0.1:port
 * resolved. */
static struct emu_cm_id *addr_resolved(uint64_t handle, uint16_t port)
{
	struct sockaddr_in a = sin_of("127.0.0.1", port);
	struct emu_cm_event ev;
	struct emu_cm_id *c;

	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, handle, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &c) == 0);
	CU_ASSERT_FATAL(emu_cm_resolve_addr(c, NULL, (struct sockaddr *)&a,
					    1000) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_ADDR_RESOLVED, c, &ev));
	return c;
}

/* A client id with its route to 127.0.0.1:port resolved. */
static struct emu_cm_id *client(uint16_t port)
{
	struct emu_cm_id *c = addr_resolved(2, port);
	struct emu_cm_event ev;

	CU_ASSERT_FATAL(emu_cm_resolve_route(c, 1000) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_ROUTE_RESOLVED, c, &ev));
	return c;
}

/* c connects (its QP qp_num) to the listener l, which accepts as the
 * new id with handle: REQ at l, REP at c.  The passive side's id. */
static struct emu_cm_id *connect_accepted(struct emu_cm_id *c,
					  struct emu_cm_id *l, uint32_t qp_num,
					  uint64_t handle)
{
	struct emu_cm_conn p;
	struct emu_cm_event ev;
	struct emu_cm_id *s;

	memset(&p, 0, sizeof(p));
	p.qp_num = qp_num;
	CU_ASSERT_FATAL(emu_cm_connect(c, &p) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_CONNECT_REQUEST, l, &ev));
	s = ev.new_id;
	emu_cm_id_set_handle(s, handle);
	CU_ASSERT_FATAL(emu_cm_accept(s, &p) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_CONNECT_RESPONSE, c, &ev));
	return s;
}

static void fill(uint8_t *p, unsigned int len, uint8_t seed)
{
	unsigned int i;

	for (i = 0; i < len; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

static void test_connect_accept_disconnect(void)
{
	struct emu_cm_id *l = listener(9001), *c = client(9001), *s;
	struct emu_cm_conn p;
	struct emu_cm_event ev;
	struct ibv_qp_attr qa;
	uint8_t want[REP_PRIVATE_LEN];
	int mask;

	memset(&p, 0, sizeof(p));
	p.private_data_len = CM_REQ_USER_PRIVATE + 1;
	p.qp_num = 0x1234;
	/* 56 bytes of consumer data in a REQ (IBA 12.6.5 less A11.6) */
	CU_ASSERT(emu_cm_connect(c, &p) == EINVAL);
	p.private_data_len = CM_REQ_USER_PRIVATE;
	fill(p.private_data, p.private_data_len, 1);
	p.responder_resources = 3;
	p.initiator_depth = 2;
	p.retry_count = 5;
	p.rnr_retry_count = 6;
	CU_ASSERT_FATAL(emu_cm_connect(c, &p) == 0);

	CU_ASSERT_FATAL(expect(EMU_CM_CONNECT_REQUEST, l, &ev));
	s = ev.new_id;
	CU_ASSERT_FATAL(s != NULL);
	CU_ASSERT(ev.param.private_data_len == CM_REQ_USER_PRIVATE);
	CU_ASSERT(!memcmp(ev.param.private_data, p.private_data,
			  CM_REQ_USER_PRIVATE));
	/* the requester's resources, seen from the responder */
	CU_ASSERT(ev.param.responder_resources == 2);
	CU_ASSERT(ev.param.initiator_depth == 3);
	CU_ASSERT(ev.param.retry_count == 5);
	CU_ASSERT(ev.param.rnr_retry_count == 6);
	CU_ASSERT(ev.param.qp_num == 0x1234);
	emu_cm_id_set_handle(s, 3);

	memset(&p, 0, sizeof(p));
	p.private_data_len = REP_PRIVATE_LEN;
	fill(p.private_data, REP_PRIVATE_LEN, 9);
	memcpy(want, p.private_data, sizeof(want));
	p.qp_num = 0x5678;
	p.responder_resources = 2;
	p.initiator_depth = 3;
	p.rnr_retry_count = 4;
	CU_ASSERT_FATAL(emu_cm_accept(s, &p) == 0);
	CU_ASSERT(emu_cm_accept(s, &p) == EINVAL); /* not twice */

	CU_ASSERT_FATAL(expect(EMU_CM_CONNECT_RESPONSE, c, &ev));
	CU_ASSERT(ev.param.private_data_len == REP_PRIVATE_LEN);
	CU_ASSERT(!memcmp(ev.param.private_data, want, sizeof(want)));
	CU_ASSERT(ev.param.qp_num == 0x5678);
	qa.qp_state = IBV_QPS_RTR;
	CU_ASSERT(emu_cm_init_qp_attr(c, &qa, &mask) == 0);
	CU_ASSERT(qa.dest_qp_num == 0x5678);
	CU_ASSERT(mask & IBV_QP_RQ_PSN);
	qa.qp_state = IBV_QPS_RTS;
	CU_ASSERT(emu_cm_init_qp_attr(c, &qa, &mask) == 0);
	CU_ASSERT(qa.retry_cnt == 5);
	CU_ASSERT(qa.rnr_retry == 4); /* the REP's (IBA 12.7.33) */
	CU_ASSERT(qa.max_rd_atomic == 2);
	CU_ASSERT_FATAL(emu_cm_establish(c) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_ESTABLISHED, s, &ev));

	CU_ASSERT(emu_cm_disconnect(c) == 0);
	CU_ASSERT(expect(EMU_CM_DISCONNECTED, s, &ev));
	CU_ASSERT(expect(EMU_CM_DISCONNECTED, c, &ev));
	/* then, after the time wait (IBA 12.9.6), each end's
	 * TIMEWAIT_EXIT, in either order */
	{
		struct emu_cm_id *seen[2] = { NULL, NULL };
		int i;

		for (i = 0; i < 2; i++) {
			CU_ASSERT_FATAL(next_event(&ev));
			CU_ASSERT(ev.event == EMU_CM_TIMEWAIT_EXIT);
			seen[i] = ev.id;
		}
		CU_ASSERT((seen[0] == s && seen[1] == c) ||
			  (seen[0] == c && seen[1] == s));
	}
	emu_cm_id_destroy(s);
	emu_cm_id_destroy(c);
	emu_cm_id_destroy(l);
}

/*
 * The attributes rdma_init_qp_attr gives a connected QP are the ones the
 * QP state machine takes for its type (IBA 11.2.5.2, and for XRC A14):
 * UC and the XRC initiator have no responder resources, UC no timeout or
 * retries, the XRC target no requester; an XRC send id connects to an
 * XRC receive id as RC ids do.
 */
static void test_qp_attr_per_type(void)
{
	static const struct {
		enum ibv_qp_type active, passive;
	} pairs[] = {
		{ IBV_QPT_RC, IBV_QPT_RC },
		{ IBV_QPT_UC, IBV_QPT_UC },
		{ IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV },
	};
	static const enum ibv_qp_state steps[] = {
		IBV_QPS_RESET, IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS,
	};
	struct sockaddr_in a = sin_of("127.0.0.1", 9010);
	struct emu_cm_id *l, *c, *s, *ids[2];
	struct emu_cm_event ev;
	struct ibv_qp_attr qa;
	enum ibv_qp_type type;
	const char *why;
	unsigned int i, k, n;
	int mask;

	for (i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		a.sin_port = htons((uint16_t)(9010 + i));
		CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 1, EMU_CM_PS_IB,
						 pairs[i].passive, &l) == 0);
		CU_ASSERT_FATAL(emu_cm_bind(l, (struct sockaddr *)&a) == 0);
		CU_ASSERT_FATAL(emu_cm_listen(l, 8) == 0);
		CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 2, EMU_CM_PS_IB,
						 pairs[i].active, &c) == 0);
		CU_ASSERT_FATAL(emu_cm_resolve_addr(c, NULL,
						    (struct sockaddr *)&a,
						    1000) == 0);
		CU_ASSERT_FATAL(expect(EMU_CM_ADDR_RESOLVED, c, &ev));
		CU_ASSERT_FATAL(emu_cm_resolve_route(c, 1000) == 0);
		CU_ASSERT_FATAL(expect(EMU_CM_ROUTE_RESOLVED, c, &ev));
		s = connect_accepted(c, l, 0x100 + i, 3);
		ids[0] = c;
		ids[1] = s;
		for (k = 0; k < 2; k++) {
			type = k ? pairs[i].passive : pairs[i].active;
			for (n = 1; n < sizeof(steps) / sizeof(steps[0]); n++) {
				qa.qp_state = steps[n];
				CU_ASSERT_FATAL(emu_cm_init_qp_attr(ids[k], &qa,
								    &mask) ==
						0);
				why = NULL;
				CU_ASSERT(qp_state_check(type, steps[n - 1],
							 steps[n], mask,
							 &why) == 0);
				if (why)
					fprintf(stderr,
						"type %d to state %d: %s\n",
						type, steps[n], why);
			}
		}
		CU_ASSERT_FATAL(emu_cm_establish(c) == 0);
		CU_ASSERT(expect(EMU_CM_ESTABLISHED, s, &ev));
		emu_cm_id_destroy(s);
		emu_cm_id_destroy(c);
		emu_cm_id_destroy(l);
	}
}

static void test_reject_private_data(void)
{
	struct emu_cm_id *l = listener(9002), *c = client(9002), *s;
	struct emu_cm_conn p;
	struct emu_cm_event ev;
	uint8_t pd[REJ_PRIVATE_LEN + 1];

	memset(&p, 0, sizeof(p));
	p.qp_num = 0x42;
	CU_ASSERT_FATAL(emu_cm_connect(c, &p) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_CONNECT_REQUEST, l, &ev));
	s = ev.new_id;
	emu_cm_id_set_handle(s, 3);
	fill(pd, sizeof(pd), 3);
	/* 148 bytes in a REJ (IBA 12.6.7) */
	CU_ASSERT(emu_cm_reject(s, pd, REJ_PRIVATE_LEN + 1) == EINVAL);
	CU_ASSERT_FATAL(emu_cm_reject(s, pd, REJ_PRIVATE_LEN) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_REJECTED, c, &ev));
	CU_ASSERT(ev.status == REJ_CONSUMER);
	CU_ASSERT(ev.param.private_data_len == REJ_PRIVATE_LEN);
	CU_ASSERT(!memcmp(ev.param.private_data, pd, REJ_PRIVATE_LEN));
	emu_cm_id_destroy(s);
	emu_cm_id_destroy(c);
	emu_cm_id_destroy(l);
}

/* IBA 12.9.5: data before the RTU establishes the passive side (what
 * rdma_notify(IBV_EVENT_COMM_EST) reports); the RTU that follows adds no
 * second ESTABLISHED. */
static void test_notify_establishes(void)
{
	struct emu_cm_id *l = listener(9007), *c = client(9007), *s;
	struct emu_cm_event ev;
	int fl = fcntl(chan_fd, F_GETFL);

	s = connect_accepted(c, l, 0x99, 3);
	CU_ASSERT(emu_cm_notify(s) == 0);
	CU_ASSERT(expect(EMU_CM_ESTABLISHED, s, &ev));
	CU_ASSERT(emu_cm_establish(c) == 0);
	usleep(100000);
	CU_ASSERT_FATAL(fcntl(chan_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	CU_ASSERT(emu_cm_get_event(chan, &ev) == EAGAIN);
	fcntl(chan_fd, F_SETFL, fl);
	emu_cm_id_destroy(c);
	CU_ASSERT(expect(EMU_CM_DISCONNECTED, s, &ev));
	emu_cm_id_destroy(s);
	emu_cm_id_destroy(l);
}

static void test_no_listener(void)
{
	struct emu_cm_id *c = client(9003);
	struct emu_cm_conn p;
	struct emu_cm_event ev;

	memset(&p, 0, sizeof(p));
	CU_ASSERT_FATAL(emu_cm_connect(c, &p) == 0);
	CU_ASSERT(expect(EMU_CM_REJECTED, c, &ev));
	CU_ASSERT(ev.status == REJ_INVALID_SERVICE_ID);
	emu_cm_id_destroy(c);
}

static void test_address_rules(void)
{
	struct sockaddr_in a = sin_of("127.0.0.1", 9004);
	struct sockaddr_in any = sin_of("0.0.0.0", 9004);
	struct sockaddr_in far = sin_of("198.51.100.1", 9004);
	struct emu_cm_id *x, *y, *z;
	struct emu_cm_event ev;

	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 5, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &x) == 0);
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 6, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &y) == 0);
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 7, EMU_CM_PS_UDP,
					 IBV_QPT_UD, &z) == 0);
	CU_ASSERT(emu_cm_bind(x, (struct sockaddr *)&a) == 0);
	CU_ASSERT(emu_cm_bind(y, (struct sockaddr *)&any) == EADDRINUSE);
	/* another port space is another set of ports */
	CU_ASSERT(emu_cm_bind(z, (struct sockaddr *)&any) == 0);
	CU_ASSERT(emu_cm_bind(y, (struct sockaddr *)&far) == EADDRNOTAVAIL);
	emu_cm_id_destroy(x);
	/* released with its id */
	CU_ASSERT(emu_cm_bind(y, (struct sockaddr *)&any) == 0);
	emu_cm_id_destroy(y);
	emu_cm_id_destroy(z);

	/* An address of no device of the node: ADDR_ERROR after the
	 * timeout. */
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 8, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &x) == 0);
	CU_ASSERT_FATAL(emu_cm_resolve_addr(x, NULL, (struct sockaddr *)&far,
					    100) == 0);
	CU_ASSERT(expect(EMU_CM_ADDR_ERROR, x, &ev));
	CU_ASSERT(ev.status == -ETIMEDOUT);
	emu_cm_id_destroy(x);
}

/* A closed id (its memory kept for a thread still handling one of its
 * events) refuses every call that would act on it, keeps its addresses,
 * gets no event, and its address is free again. */
static void test_closed_id(void)
{
	struct sockaddr_in a = sin_of("127.0.0.1", 9010);
	struct sockaddr_storage src, dst;
	struct emu_cm_conn p = { 0 };
	struct ibv_qp_attr qa;
	struct emu_cm_id *x, *y;
	unsigned int delivered;
	int mask;

	x = addr_resolved(11, 9010);
	CU_ASSERT(emu_cm_resolve_route(x, 100) == 0);
	delivered = emu_cm_id_close(x);
	CU_ASSERT(delivered == 1); /* ROUTE_RESOLVED was dropped */
	CU_ASSERT(emu_cm_resolve_route(x, 100) == ENOENT);
	CU_ASSERT(emu_cm_connect(x, &p) == ENOENT);
	CU_ASSERT(emu_cm_establish(x) == ENOENT);
	CU_ASSERT(emu_cm_reject(x, NULL, 0) == ENOENT);
	CU_ASSERT(emu_cm_disconnect(x) == ENOENT);
	CU_ASSERT(emu_cm_listen(x, 1) == ENOENT);
	CU_ASSERT(emu_cm_bind(x, (struct sockaddr *)&a) == ENOENT);
	CU_ASSERT(emu_cm_id_migrate(x, chan, &delivered) == ENOENT);
	qa.qp_state = IBV_QPS_INIT;
	CU_ASSERT(emu_cm_init_qp_attr(x, &qa, &mask) == ENOENT);
	emu_cm_addrs(x, &src, &dst);
	CU_ASSERT(dst.ss_family == AF_INET &&
		  ((struct sockaddr_in *)(void *)&dst)->sin_port ==
			  htons(9010));
	CU_ASSERT(!next_event_within(50));
	/* its address went with the close */
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 12, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &y) == 0);
	CU_ASSERT(emu_cm_bind(y, (struct sockaddr *)&src) == 0);
	emu_cm_id_destroy(y);
	emu_cm_id_free(x);
}

static void test_nonblocking_channel(void)
{
	struct sockaddr_in a = sin_of("127.0.0.1", 9005);
	struct emu_cm_event ev;
	struct emu_cm_id *x;
	int fl = fcntl(chan_fd, F_GETFL);

	CU_ASSERT_FATAL(fcntl(chan_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	CU_ASSERT(emu_cm_get_event(chan, &ev) == EAGAIN);
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 9, EMU_CM_PS_TCP,
					 IBV_QPT_RC, &x) == 0);
	CU_ASSERT(emu_cm_resolve_addr(x, NULL, (struct sockaddr *)&a, 100) ==
		  0);
	CU_ASSERT(expect(EMU_CM_ADDR_RESOLVED, x, &ev));
	CU_ASSERT(emu_cm_get_event(chan, &ev) == EAGAIN);
	/* destroyed with an event queued: the event goes with it */
	CU_ASSERT(emu_cm_resolve_route(x, 100) == 0);
	emu_cm_id_destroy(x);
	CU_ASSERT(emu_cm_get_event(chan, &ev) == EAGAIN);
	fcntl(chan_fd, F_SETFL, fl);
}

/* Hand one MAD to the CM as the engine does a packet for QP1. */
static void inject(const uint8_t *mad, int32_t src_slot)
{
	static uint8_t buf[PKT_MAX_LEN];
	const struct opcode_info *op =
		opcode_get(IB_OPCODE_UD | IB_OP_SEND_ONLY);
	struct pkt_hdr hdr;
	struct tp_pkt in;
	struct bth *bth = (struct bth *)buf;
	struct deth *deth = (struct deth *)(buf + op->deth);
	struct pkt p;

	memset(&hdr, 0, sizeof(hdr));
	hdr.len = op->hdr_len + CM_MAD_LEN;
	hdr.src_qpn = CM_QPN;
	hdr.src_proc = src_slot;
	memset(buf, 0, op->hdr_len);
	bth->opcode = IB_OPCODE_UD | IB_OP_SEND_ONLY;
	bth->pkey = htobe16(0xffff);
	bth->qpn = htobe32(CM_QPN);
	deth->qkey = htobe32(CM_QP1_QKEY);
	deth->sqp = htobe32(CM_QPN);
	memcpy(buf + op->hdr_len, mad, CM_MAD_LEN);
	memset(&in, 0, sizeof(in));
	in.hdr = &hdr;
	in.data = buf;
	CU_ASSERT_FATAL(pkt_parse(&in, &p));
	emu_lock(&hca->engine->lock);
	cm_recv_locked(hca->engine, &p);
	emu_unlock(&hca->engine->lock);
}

static void test_garbage_wedges_nothing(void)
{
	static const uint16_t attrs[] = { CM_ATTR_REQ, CM_ATTR_MRA,
					  CM_ATTR_REJ, CM_ATTR_REP,
					  CM_ATTR_RTU, CM_ATTR_DREQ,
					  CM_ATTR_DREP, CM_ATTR_SIDR_REQ,
					  CM_ATTR_SIDR_REP, 0xffff };
	struct emu_cm_id *l = listener(9006), *c, *s;
	int32_t self = hca->node.proc_slot, slot;
	uint8_t mad[CM_MAD_LEN], *d = cm_data(mad);
	struct emu_cm_event ev;
	unsigned int i, j, reqs = 0;
	int fl = fcntl(chan_fd, F_GETFL);

	srandom(42);
	for (i = 0; i < 20000; i++) {
		for (j = 0; j < CM_MAD_LEN; j++)
			mad[j] = (uint8_t)random();
		if (i % 4) {
			mad[MAD_BASE_VERSION] = 1;
			mad[MAD_MGMT_CLASS] = MAD_CLASS_CM;
			mad[MAD_CLASS_VERSION] = 2;
			mad[MAD_METHOD] = MAD_METHOD_SEND;
			cm_put16(mad, MAD_ATTR_ID,
				 attrs[random() % (sizeof(attrs) /
						   sizeof(attrs[0]))]);
		}
		/* some requests for our listener, the rest random */
		if (i % 8 == 1) {
			cm_put16(mad, MAD_ATTR_ID, CM_ATTR_REQ);
			cm_put64(d, REQ_SERVICE_ID,
				 CM_IP_SERVICE_ID(EMU_CM_PS_TCP, 9006));
			/* half of them well addressed (IBA A11.6) */
			if (i % 16 == 1) {
				uint8_t *h = d + REQ_PRIVATE;

				h[CM_IP_HDR_VERSION] = 0;
				h[CM_IP_HDR_IPV] = 4 << 4;
				memset(h + CM_IP_HDR_DIP, 0, 12);
				h[CM_IP_HDR_DIP + 12] = 127;
				h[CM_IP_HDR_DIP + 13] = 0;
				h[CM_IP_HDR_DIP + 14] = 0;
				h[CM_IP_HDR_DIP + 15] = 1;
			}
		}
		switch (i % 3) {
		case 0:
			slot = self;
			break;
		case 1:
			slot = (int32_t)(random() % (IBEMU_MAX_PROCS + 8)) - 4;
			break;
		default:
			slot = (int32_t)random();
		}
		inject(mad, slot);
	}
	/* Whatever was taken for a request is refused; nothing else is
	 * reported to the listener. */
	CU_ASSERT_FATAL(fcntl(chan_fd, F_SETFL, fl | O_NONBLOCK) == 0);
	while (emu_cm_get_event(chan, &ev) == 0) {
		CU_ASSERT(ev.event == EMU_CM_CONNECT_REQUEST && ev.id == l);
		if (ev.new_id) {
			emu_cm_id_set_handle(ev.new_id, 4);
			emu_cm_reject(ev.new_id, NULL, 0);
			emu_cm_id_destroy(ev.new_id);
			reqs++;
		}
	}
	fcntl(chan_fd, F_SETFL, fl);
	printf("(%u garbage requests taken and refused) ", reqs);

	/* And the CM still connects. */
	c = client(9006);
	s = connect_accepted(c, l, 0x77, 4);
	CU_ASSERT(emu_cm_establish(c) == 0);
	CU_ASSERT(expect(EMU_CM_ESTABLISHED, s, &ev));
	/* leaving sends DREQ (IBA 12.9.6): the other end learns */
	emu_cm_id_destroy(c);
	CU_ASSERT(expect(EMU_CM_DISCONNECTED, s, &ev));
	emu_cm_id_destroy(s);
	emu_cm_id_destroy(l);
}

/* The MGID of addr in port space ps, as a string. */
static const char *mgid_of(uint16_t ps, const char *addr)
{
	static char out[INET6_ADDRSTRLEN];
	struct sockaddr_storage ss;
	uint8_t mgid[16];

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr,
		      &((struct sockaddr_in *)&ss)->sin_addr) == 1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, addr,
			   &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	if (!emu_cm_mgid(ps, (struct sockaddr *)&ss, 0xffff, mgid))
		return "-";
	inet_ntop(AF_INET6, mgid, out, sizeof(out));
	return out;
}

static void test_mcast_mgid(void)
{
	/* ip_ib_mc_map: ff12:401b:<P_Key>::, the low 28 bits; 0x01 for
	 * RDMA_PS_UDP ("RDMA CM signature") */
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_UDP, "239.1.2.3"),
			       "ff12:4001:ffff::f01:203");
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_IPOIB, "224.0.0.1"),
			       "ff12:401b:ffff::1");
	/* ipv6_ib_mc_map: ff12:601b:<P_Key> and the last 80 bits */
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_UDP, "ff05::1:2:3"),
			       "ff12:6001:ffff::1:2:3");
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_IPOIB,
				       "ff02:1:2:3:4:5:6:7"),
			       "ff12:601b:ffff:3:4:5:6:7");
	/* an SA-assigned MGID (ff1x:a01b:...) as is; unspecified: zero */
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_UDP, "ff15:a01b:1::9"),
			       "ff15:a01b:1::9");
	CU_ASSERT_STRING_EQUAL(mgid_of(EMU_CM_PS_UDP, "0.0.0.0"), "::");
}

/* A UD id of port space ps resolved to the multicast address group. */
static struct emu_cm_id *mc_id(uint16_t ps, const struct sockaddr_in *group,
			       uint64_t handle)
{
	struct emu_cm_event ev;
	struct emu_cm_id *id;

	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, handle, ps, IBV_QPT_UD,
					 &id) == 0);
	CU_ASSERT_FATAL(emu_cm_resolve_addr(id, NULL,
					    (const struct sockaddr *)group,
					    1000) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_ADDR_RESOLVED, id, &ev));
	return id;
}

static void test_mcast_join(void)
{
	struct sockaddr_in g1 = sin_of("239.9.8.7", 0);
	struct sockaddr_in g2 = sin_of("239.9.8.6", 0);
	struct sockaddr_in lo = sin_of("127.0.0.1", 0);
	struct emu_cm_mc_info info;
	struct emu_cm_event ev, ev2;
	struct emu_cm_id *a, *b, *c, *idle;
	uint16_t mlid;

	a = mc_id(EMU_CM_PS_UDP, &g1, 21);
	b = mc_id(EMU_CM_PS_UDP, &g1, 22);
	c = mc_id(EMU_CM_PS_IPOIB, &g2, 23);
	CU_ASSERT(emu_cm_join(a, (struct sockaddr *)&g1,
			      EMU_CM_JOIN_FULLMEMBER, 0xa) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_MULTICAST_JOIN, a, &ev));
	/* what ib_init_ah_from_mcmember gives: a GRH to the MGID, the
	 * MLID (IBA 4.1.3), QPN 0xFFFFFF, the port space's Q_Key */
	CU_ASSERT(ev.status == 0 && ev.mc_context == 0xa);
	CU_ASSERT(ev.param.ah_attr.is_global &&
		  ev.param.ah_attr.grh.dgid.raw[0] == 0xff &&
		  ev.param.ah_attr.grh.dgid.raw[3] == 0x01);
	mlid = ev.param.ah_attr.dlid;
	CU_ASSERT(mlid >= 0xc000 && mlid <= 0xfffe);
	CU_ASSERT(ev.param.qp_num == 0xffffff);
	CU_ASSERT(ev.param.qkey == 0x01234567);
	/* the same group for a second member */
	CU_ASSERT(emu_cm_join(b, (struct sockaddr *)&g1,
			      EMU_CM_JOIN_SENDONLY_FULLMEMBER, 0xb) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_MULTICAST_JOIN, b, &ev2));
	CU_ASSERT(ev2.param.ah_attr.dlid == mlid && ev2.mc_context == 0xb &&
		  ev2.mc_join_flags == EMU_CM_JOIN_SENDONLY_FULLMEMBER &&
		  !memcmp(&ev2.param.ah_attr.grh.dgid,
			  &ev.param.ah_attr.grh.dgid, 16));
	/* another group, another MLID; the IPoIB port space's Q_Key */
	CU_ASSERT(emu_cm_join(c, (struct sockaddr *)&g2,
			      EMU_CM_JOIN_FULLMEMBER, 0xc) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_MULTICAST_JOIN, c, &ev2));
	CU_ASSERT(ev2.param.ah_attr.dlid != mlid);
	CU_ASSERT(ev2.param.qkey == 0x0b1b);
	CU_ASSERT(ev2.param.ah_attr.grh.dgid.raw[3] == 0x1b);

	/* the rules: join flags, an id with no address, a non-UD id */
	CU_ASSERT(emu_cm_join(a, (struct sockaddr *)&g1, 2, 0) == EINVAL);
	CU_ASSERT_FATAL(emu_cm_id_create(hca, chan, 24, EMU_CM_PS_UDP,
					 IBV_QPT_UD, &idle) == 0);
	CU_ASSERT(emu_cm_join(idle, (struct sockaddr *)&g1,
			      EMU_CM_JOIN_FULLMEMBER, 0) == EINVAL);
	/* bound to one of the node's addresses: it may join */
	CU_ASSERT(emu_cm_bind(idle, (struct sockaddr *)&lo) == 0);
	CU_ASSERT(emu_cm_join(idle, (struct sockaddr *)&g1,
			      EMU_CM_JOIN_FULLMEMBER, 0) == 0);
	/* a leave before the event is read drops it */
	CU_ASSERT(emu_cm_leave(idle, (struct sockaddr *)&g1, &info) == 0);
	CU_ASSERT(info.mlid == mlid);
	CU_ASSERT(emu_cm_leave(idle, (struct sockaddr *)&g1, &info) ==
		  EADDRNOTAVAIL);
	emu_cm_id_destroy(idle);
	CU_ASSERT(emu_cm_leave(a, (struct sockaddr *)&g2, &info) ==
		  EADDRNOTAVAIL);
	CU_ASSERT(emu_cm_leave(a, (struct sockaddr *)&g1, &info) == 0);
	CU_ASSERT(info.join_flags == EMU_CM_JOIN_FULLMEMBER &&
		  info.mlid == mlid);
	/* b still holds the group: a new member gets its MLID */
	CU_ASSERT(emu_cm_join(a, (struct sockaddr *)&g1,
			      EMU_CM_JOIN_FULLMEMBER, 0xa) == 0);
	CU_ASSERT_FATAL(expect(EMU_CM_MULTICAST_JOIN, a, &ev));
	CU_ASSERT(ev.param.ah_attr.dlid == mlid);
	/* destroying the ids leaves their groups */
	emu_cm_id_destroy(a);
	emu_cm_id_destroy(b);
	emu_cm_id_destroy(c);
	CU_ASSERT(!next_event_within(300));
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "connect_accept_disconnect",
		  test_connect_accept_disconnect },
		{ "qp_attr_per_type", test_qp_attr_per_type },
		{ "reject_private_data", test_reject_private_data },
		{ "notify_establishes", test_notify_establishes },
		{ "no_listener", test_no_listener },
		{ "address_rules", test_address_rules },
		{ "closed_id", test_closed_id },
		{ "nonblocking_channel", test_nonblocking_channel },
		{ "garbage_wedges_nothing", test_garbage_wedges_nothing },
		{ "mcast_mgid", test_mcast_mgid },
		{ "mcast_join", test_mcast_join },
		{ NULL, NULL },
	};
	char env[64], name[96];
	int ret;

	snprintf(env, sizeof(env), "test-cm-%d", (int)getpid());
	setenv("IBEMU_NODE", env, 1);
	if (emu_hca_get(&hca) || emu_cm_open(hca) ||
	    emu_cm_chan_create(hca, &chan, &chan_fd)) {
		fprintf(stderr, "test_cm: no HCA\n");
		return 99;
	}
	ret = unit_run("cm", tests);
	emu_cm_chan_destroy(chan);
	emu_hca_put(hca);
	if (!node_default_name(name, sizeof(name)))
		shmfile_unlink(name);
	return ret;
}
