// SPDX-License-Identifier: MIT
/*
 * The manual's automatic path migration (APM) program (RDMA Aware Networks
 * Programming User Manual, chapter 8.1), written here from its
 * description and the verbs man pages (ibv_modify_qp(3),
 * ibv_query_qp(3), ibv_get_async_event(3)); it needs an HCA with two
 * ports (under ibemu: IBEMU_PORTS=2).
 *
 *   apm_example -l [-p PORT] [-n COUNT] ADDRESS     server
 *   apm_example [-p PORT] [-n COUNT] ADDRESS        client
 *
 * Client and server connect an RC QP through the RDMA CM and exchange a
 * message, which tells each the peer's port-2 LID.  Each then loads an
 * alternate path through port 2 to the peer's port 2 (alt_ah_attr,
 * alt_port_num 2, path_mig_state REARM: ibv_modify_qp with
 * IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE), and they exchange messages
 * until both QPs are ARMED (the HCA arms once both ends have rearmed,
 * IBA 17.2.8).  The client migrates by software (path_mig_state
 * MIGRATED with IBV_QP_PATH_MIG_STATE); the server's HCA migrates when
 * the client's first packet arrives on the alternate path, and its
 * async event thread sees IBV_EVENT_PATH_MIG.  Then COUNT messages go
 * both ways on the new path, every one checked, and each side checks
 * that its QP's primary path is now port 2.  Exit 0 when all of it held.
 *
 * -a: no software migration: a port going down on the two-port HCA
 * migrates instead (take port 1 down while the COUNT messages flow, one
 * every -i USEC; under ibemu `ibemu port down 1`).  Both sides then
 * need IBV_EVENT_PORT_ERR and IBV_EVENT_PATH_MIG, and every message
 * still arrives once and in order.  -N: load no alternate path (with
 * -a: the traffic then ends in a send's transport retry error).
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#define MSG_MAGIC 0x61706d31u /* "apm1" */
#define ARM_ROUNDS 50

struct msg {
	uint32_t magic;
	uint32_t seq;
	uint16_t lid2; /* the sender's port-2 LID */
	uint16_t armed; /* 1: the sender's QP is ARMED; 2: both are */
	uint32_t check; /* seq * 2654435761 */
};

static struct {
	const char *addr, *port;
	int count;
	bool server, automatic, no_alt;
	unsigned int interval_us;
} opt = { .port = "18515", .count = 100 };

static const char *me = "client";
static atomic_int path_mig, path_mig_err, port_err, other_events;
static atomic_bool stop_events;

static void *event_thread(void *arg)
{
	struct ibv_context *ctx = arg;
	struct ibv_async_event ev;

	while (!atomic_load(&stop_events)) {
		if (ibv_get_async_event(ctx, &ev))
			break;
		printf("%s: async event %s\n", me,
		       ibv_event_type_str(ev.event_type));
		fflush(stdout);
		if (ev.event_type == IBV_EVENT_PATH_MIG)
			atomic_fetch_add(&path_mig, 1);
		else if (ev.event_type == IBV_EVENT_PATH_MIG_ERR)
			atomic_fetch_add(&path_mig_err, 1);
		else if (ev.event_type == IBV_EVENT_PORT_ERR)
			atomic_fetch_add(&port_err, 1);
		else
			atomic_fetch_add(&other_events, 1);
		ibv_ack_async_event(&ev);
	}
	return NULL;
}

struct conn {
	struct rdma_cm_id *listen, *id;
	struct ibv_mr *smr, *rmr;
	struct msg sbuf, rbuf;
	uint16_t my_lid2, peer_lid2;
	uint16_t peer_armed; /* of the last message, read before the
				buffer is posted again */
};

static int post_recv(struct conn *c)
{
	if (rdma_post_recv(c->id, NULL, &c->rbuf, sizeof(c->rbuf), c->rmr)) {
		perror("apm_example: rdma_post_recv");
		return -1;
	}
	return 0;
}

static int wait_wc(struct ibv_cq *cq, const char *what)
{
	struct timespec t0, t;
	struct ibv_wc wc;
	int n;

	/* Bounded: 30 s for one completion. */
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		n = ibv_poll_cq(cq, 1, &wc);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while (n == 0 && t.tv_sec - t0.tv_sec < 30);
	if (n <= 0 || wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr, "apm_example: %s: %s\n", what,
			n < 0	 ? "poll failed"
			: n == 0 ? "no completion within 30 s"
				 : ibv_wc_status_str(wc.status));
		return -1;
	}
	return 0;
}

/* Send one message (seq, armed) and take the peer's, checked. */
static int send_msg(struct conn *c, uint32_t seq, unsigned int armed)
{
	c->sbuf = (struct msg){ MSG_MAGIC, seq, c->my_lid2,
				(uint16_t)armed, seq * 2654435761u };
	if (rdma_post_send(c->id, NULL, &c->sbuf, sizeof(c->sbuf), c->smr,
			   IBV_SEND_SIGNALED)) {
		perror("apm_example: rdma_post_send");
		return -1;
	}
	return wait_wc(c->id->send_cq, "send");
}

static int recv_msg(struct conn *c, uint32_t seq)
{
	if (wait_wc(c->id->recv_cq, "receive"))
		return -1;
	if (c->rbuf.magic != MSG_MAGIC || c->rbuf.seq != seq ||
	    c->rbuf.check != seq * 2654435761u) {
		fprintf(stderr, "apm_example: message %u expected, got %u "
			"(damaged or out of order)\n", seq, c->rbuf.seq);
		return -1;
	}
	c->peer_lid2 = c->rbuf.lid2;
	c->peer_armed = c->rbuf.armed;
	return post_recv(c);
}

static int query(struct conn *c, struct ibv_qp_attr *a)
{
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(c->id->qp, a, IBV_QP_STATE | IBV_QP_PATH_MIG_STATE |
			 IBV_QP_AV | IBV_QP_PORT | IBV_QP_ALT_PATH, &ia)) {
		perror("apm_example: ibv_query_qp");
		return -1;
	}
	return 0;
}

static bool armed(struct conn *c)
{
	struct ibv_qp_attr a;

	return !query(c, &a) && a.path_mig_state == IBV_MIG_ARMED;
}

/* The alternate path: the primary one's attributes, through our port 2
 * to the peer's port 2 (by LID). */
static int load_alt_path(struct conn *c)
{
	struct ibv_qp_attr a;

	if (query(c, &a))
		return -1;
	a.alt_ah_attr = a.ah_attr;
	a.alt_ah_attr.is_global = 0;
	a.alt_ah_attr.dlid = c->peer_lid2;
	a.alt_ah_attr.port_num = 2;
	a.alt_port_num = 2;
	a.alt_timeout = 14;
	a.alt_pkey_index = 0;
	a.path_mig_state = IBV_MIG_REARM;
	errno = ibv_modify_qp(c->id->qp, &a,
			      IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE);
	if (errno) {
		fprintf(stderr, "apm_example: ibv_modify_qp (alternate path) "
			"returned %d: %s\n", errno, strerror(errno));
		return -1;
	}
	printf("%s: alternate path loaded: port 2 to LID %#x, REARM\n", me,
	       c->peer_lid2);
	return 0;
}

static int migrate(struct conn *c)
{
	struct ibv_qp_attr a = { .path_mig_state = IBV_MIG_MIGRATED };

	errno = ibv_modify_qp(c->id->qp, &a, IBV_QP_PATH_MIG_STATE);
	if (errno) {
		fprintf(stderr, "apm_example: ibv_modify_qp (MIGRATED) "
			"returned %d: %s\n", errno, strerror(errno));
		return -1;
	}
	printf("%s: migrated by software\n", me);
	return 0;
}

static int check_on_port2(struct conn *c)
{
	struct ibv_qp_attr a;

	if (query(c, &a))
		return -1;
	if (a.path_mig_state != IBV_MIG_MIGRATED || a.port_num != 2 ||
	    a.ah_attr.dlid != c->peer_lid2) {
		fprintf(stderr, "apm_example: after migration: state %d, "
			"port %u, DLID %#x (expected MIGRATED, 2, %#x)\n",
			a.path_mig_state, a.port_num, a.ah_attr.dlid,
			c->peer_lid2);
		return -1;
	}
	printf("%s: primary path now port 2 to LID %#x, MIGRATED\n", me,
	       c->peer_lid2);
	return 0;
}

static int connect_side(struct conn *c)
{
	struct rdma_addrinfo hints = { 0 }, *rai;
	struct ibv_qp_init_attr qa = { 0 };
	int ret;

	hints.ai_port_space = RDMA_PS_TCP;
	if (opt.server)
		hints.ai_flags = RAI_PASSIVE;
	ret = rdma_getaddrinfo(opt.addr, opt.port, &hints, &rai);
	if (ret) {
		fprintf(stderr, "apm_example: rdma_getaddrinfo: %s\n",
			gai_strerror(ret));
		return -1;
	}
	qa.cap.max_send_wr = qa.cap.max_recv_wr = 4;
	qa.cap.max_send_sge = qa.cap.max_recv_sge = 1;
	qa.qp_type = IBV_QPT_RC;
	if (opt.server) {
		ret = rdma_create_ep(&c->listen, rai, NULL, NULL);
		if (!ret)
			ret = rdma_listen(c->listen, 1);
		if (!ret)
			ret = rdma_get_request(c->listen, &c->id);
		if (!ret)
			ret = rdma_create_qp(c->id, NULL, &qa);
	} else {
		ret = rdma_create_ep(&c->id, rai, NULL, &qa);
	}
	rdma_freeaddrinfo(rai);
	if (ret) {
		perror("apm_example: rdma_create_ep/listen/get_request");
		return -1;
	}
	c->smr = rdma_reg_msgs(c->id, &c->sbuf, sizeof(c->sbuf));
	c->rmr = rdma_reg_msgs(c->id, &c->rbuf, sizeof(c->rbuf));
	if (!c->smr || !c->rmr || post_recv(c))
		return -1;
	ret = opt.server ? rdma_accept(c->id, NULL) : rdma_connect(c->id, NULL);
	if (ret) {
		perror(opt.server ? "apm_example: rdma_accept"
				  : "apm_example: rdma_connect");
		return -1;
	}
	return 0;
}

static int two_ports(struct conn *c)
{
	struct ibv_device_attr da;
	struct ibv_port_attr pa;

	if (ibv_query_device(c->id->verbs, &da) || da.phys_port_cnt < 2 ||
	    ibv_query_port(c->id->verbs, 2, &pa)) {
		fprintf(stderr, "apm_example: %s has one port: APM needs two "
			"(under ibemu: IBEMU_PORTS=2)\n",
			ibv_get_device_name(c->id->verbs->device));
		return -1;
	}
	c->my_lid2 = pa.lid;
	return 0;
}

/* Until both QPs are ARMED: the client asks, the server answers with
 * its state; the client's message with armed 2 says both are, and ends
 * the exchange on both sides. */
static int arm_both(struct conn *c, uint32_t *seq)
{
	bool done = false;
	int i;

	for (i = 0; i < ARM_ROUNDS; i++, (*seq)++) {
		if (opt.server) {
			if (recv_msg(c, *seq) || send_msg(c, *seq, armed(c)))
				return -1;
			done = c->peer_armed == 2;
		} else {
			done = i && c->peer_armed && armed(c);
			if (send_msg(c, *seq, done ? 2 : armed(c)) ||
			    recv_msg(c, *seq))
				return -1;
		}
		if (done) {
			(*seq)++;
			return 0;
		}
	}
	fprintf(stderr, "apm_example: the QPs were not both ARMED after %d "
		"exchanges\n", ARM_ROUNDS);
	return -1;
}

static int run(void)
{
	struct conn c = { 0 };
	pthread_t thr;
	uint32_t seq = 0;
	int i, ret = -1, waited;

	if (connect_side(&c) || two_ports(&c))
		return -1;
	pthread_create(&thr, NULL, event_thread, c.id->verbs);
	printf("%s: connected, port-2 LID %#x\n", me, c.my_lid2);
	/* First exchange: each learns the other's port-2 LID. */
	if (opt.server ? recv_msg(&c, seq) || send_msg(&c, seq, false)
		       : send_msg(&c, seq, false) || recv_msg(&c, seq))
		goto out;
	seq++;
	if (!opt.no_alt) {
		if (load_alt_path(&c) || arm_both(&c, &seq))
			goto out;
		printf("%s: ARMED\n", me);
	}
	if (!opt.server && !opt.automatic && migrate(&c))
		goto out;
	printf("%s: streaming %d messages\n", me, opt.count);
	for (i = 0; i < opt.count; i++, seq++) {
		if (opt.server ? recv_msg(&c, seq) || send_msg(&c, seq, false)
			       : send_msg(&c, seq, false) || recv_msg(&c, seq))
			goto out;
		if (opt.interval_us)
			usleep(opt.interval_us);
	}
	if (check_on_port2(&c))
		goto out;
	if (opt.automatic && !atomic_load(&port_err)) {
		fprintf(stderr, "apm_example: no IBV_EVENT_PORT_ERR\n");
		goto out;
	}
	if (opt.server || opt.automatic) {
		/* The HCA's own migration is told (manual 6.1.7). */
		for (waited = 0; !atomic_load(&path_mig) && waited < 5000;
		     waited += 10)
			usleep(10000);
		if (!atomic_load(&path_mig)) {
			fprintf(stderr, "apm_example: no IBV_EVENT_PATH_MIG\n");
			goto out;
		}
	}
	if (atomic_load(&path_mig_err)) {
		fprintf(stderr, "apm_example: IBV_EVENT_PATH_MIG_ERR seen\n");
		goto out;
	}
	printf("%s: %d messages each way on the alternate path, every one "
	       "checked; PATH_MIG events %d\n", me, opt.count,
	       atomic_load(&path_mig));
	ret = 0;
out:
	rdma_disconnect(c.id);
	atomic_store(&stop_events, true);
	pthread_cancel(thr);
	pthread_join(thr, NULL);
	return ret;
}

int main(int argc, char **argv)
{
	int o;

	while ((o = getopt(argc, argv, "lp:n:aNi:")) != -1) {
		switch (o) {
		case 'l':
			opt.server = true;
			me = "server";
			break;
		case 'p':
			opt.port = optarg;
			break;
		case 'n':
			opt.count = atoi(optarg);
			break;
		case 'a':
			opt.automatic = true;
			break;
		case 'N':
			opt.no_alt = true;
			break;
		case 'i':
			opt.interval_us = (unsigned int)atoi(optarg);
			break;
		default:
			fprintf(stderr, "usage: apm_example [-l] [-p PORT] "
				"[-n COUNT] [-a] [-N] [-i USEC] ADDRESS\n");
			return 2;
		}
	}
	if (optind != argc - 1 || opt.count < 1) {
		fprintf(stderr, "usage: apm_example [-l] [-p PORT] "
			"[-n COUNT] ADDRESS\n");
		return 2;
	}
	opt.addr = argv[optind];
	setvbuf(stdout, NULL, _IOLBF, 0);
	return run() ? 1 : 0;
}
