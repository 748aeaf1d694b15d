// SPDX-License-Identifier: MIT
/*
 * The RC example of the "RDMA Aware Networks Programming User Manual"
 * (chapter 7.1), written for ibemu from the manual's synopsis.
 *
 * Two processes, a server and a client, each create a PD, a CQ, a
 * registered buffer and an RC QP, swap the buffer's address and rkey, the
 * QP number, LID and GID over a TCP socket, and bring their QPs to RTS
 * (manual 3.5).  The server SENDs a message that the client receives; the
 * client then RDMA READs the server's buffer and RDMA WRITEs a new message
 * into it while the server waits in a blocking TCP read: one-sided
 * operations progress without the target calling any verb.
 *
 *   server:  rc_example [-p PORT] [-d DEVICE] [-i IB_PORT] [-g GID_INDEX]
 *   client:  rc_example [same options] SERVER
 *
 * Exit status 0 when every step succeeded, 1 otherwise.
 */
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* How long poll_completion() waits for one completion. */
#define MAX_POLL_CQ_TIMEOUT_MS 5000

#define MSG_SEND "SEND operation "
#define MSG_RDMA_READ "RDMA read operation "
#define MSG_RDMA_WRITE "RDMA write operation"
/* Large enough for every message above and its terminating NUL. */
#define MSG_SIZE 64

struct config {
	const char *dev_name;	/* NULL: the first device found */
	const char *server_name; /* NULL: server mode */
	unsigned int tcp_port;
	int ib_port;
	int gid_idx;		/* < 0: no GRH */
};

/* What the two sides tell each other over TCP, in network byte order. */
struct cm_con_data {
	uint64_t addr;
	uint32_t rkey;
	uint32_t qp_num;
	uint16_t lid;
	uint8_t gid[16];
} __attribute__((packed));

struct resources {
	struct ibv_port_attr port_attr;
	struct cm_con_data remote;	/* host byte order */
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	struct ibv_mr *mr;
	char *buf;
	int sock;
};

static struct config config = {
	.dev_name = NULL,
	.server_name = NULL,
	.tcp_port = 19875,
	.ib_port = 1,
	.gid_idx = -1,
};

/* 7.1.5: connect to the server, or accept one connection as the server. */
static int sock_connect(const char *server_name, unsigned int port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = server_name ? 0 : AI_PASSIVE,
	};
	struct addrinfo *res, *ai;
	char service[16];
	int listenfd = -1, fd = -1;
	int err, on = 1;

	snprintf(service, sizeof(service), "%u", port);
	err = getaddrinfo(server_name, service, &hints, &res);
	if (err) {
		fprintf(stderr, "%s for %s:%u\n", gai_strerror(err),
			server_name ? server_name : "*", port);
		return -1;
	}

	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (server_name) {
			if (!connect(fd, ai->ai_addr, ai->ai_addrlen))
				break;
		} else {
			setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on,
				   sizeof(on));
			if (!bind(fd, ai->ai_addr, ai->ai_addrlen) &&
			    !listen(fd, 1))
				break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);

	if (fd < 0) {
		fprintf(stderr, "couldn't %s port %u%s%s: %s\n",
			server_name ? "connect to" : "listen on", port,
			server_name ? " of " : "",
			server_name ? server_name : "", strerror(errno));
		return -1;
	}
	if (server_name)
		return fd;

	listenfd = fd;
	fprintf(stdout, "waiting on port %u for TCP connection\n", port);
	fflush(stdout);
	do {
		fd = accept(listenfd, NULL, NULL);
	} while (fd < 0 && errno == EINTR);
	if (fd < 0)
		fprintf(stderr, "accept() on port %u failed: %s\n", port,
			strerror(errno));
	close(listenfd);
	return fd;
}

/* Move exactly len bytes over the socket, writing or reading. */
static int xfer_all(int fd, void *p, size_t len, bool out)
{
	char *c = p;

	while (len) {
		ssize_t n = out ? write(fd, c, len) : read(fd, c, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		c += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_all(int fd, const void *p, size_t len)
{
	return xfer_all(fd, (void *)p, len, true);
}

static int read_all(int fd, void *p, size_t len)
{
	return xfer_all(fd, p, len, false);
}

/*
 * 7.1.9: send our data and receive the peer's, both of @size bytes.  It
 * blocks until the peer has written too, so it doubles as a barrier.
 */
static int sock_sync_data(int sock, size_t size, const void *local,
			  void *remote)
{
	if (write_all(sock, local, size)) {
		fprintf(stderr, "failed writing data during sock_sync_data\n");
		return -1;
	}
	if (read_all(sock, remote, size)) {
		fprintf(stderr, "failed reading remote data during sock_sync_data\n");
		return -1;
	}
	return 0;
}

/* A barrier on the TCP connection. */
static int sock_sync(int sock)
{
	char out = 'Q', in;

	return sock_sync_data(sock, 1, &out, &in);
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* 7.1.13: wait for one completion and check that it succeeded. */
static int poll_completion(struct resources *res)
{
	long long deadline = now_ms() + MAX_POLL_CQ_TIMEOUT_MS;
	struct ibv_wc wc;
	int n;

	do {
		n = ibv_poll_cq(res->cq, 1, &wc);
	} while (n == 0 && now_ms() < deadline);

	if (n < 0) {
		fprintf(stderr, "poll CQ failed\n");
		return -1;
	}
	if (n == 0) {
		fprintf(stderr, "completion wasn't found in the CQ after timeout\n");
		return -1;
	}
	fprintf(stdout, "completion was found in CQ with status 0x%x\n",
		wc.status);
	if (wc.status != IBV_WC_SUCCESS) {
		fprintf(stderr,
			"got bad completion with status: 0x%x (%s), vendor syndrome: 0x%x\n",
			wc.status, ibv_wc_status_str(wc.status), wc.vendor_err);
		return -1;
	}
	return 0;
}

static const char *opcode_name(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_SEND:
		return "Send";
	case IBV_WR_RDMA_READ:
		return "RDMA Read";
	case IBV_WR_RDMA_WRITE:
		return "RDMA Write";
	default:
		return "unknown";
	}
}

/* 7.1.12: post one signaled send request of the whole buffer. */
static int post_send(struct resources *res, enum ibv_wr_opcode opcode)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)res->buf,
		.length = MSG_SIZE,
		.lkey = res->mr->lkey,
	};
	struct ibv_send_wr sr = {
		.wr_id = 0,
		.sg_list = &sge,
		.num_sge = 1,
		.opcode = opcode,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_send_wr *bad_wr;
	int err;

	if (opcode != IBV_WR_SEND) {
		sr.wr.rdma.remote_addr = res->remote.addr;
		sr.wr.rdma.rkey = res->remote.rkey;
	}

	err = ibv_post_send(res->qp, &sr, &bad_wr);
	if (err) {
		fprintf(stderr, "failed to post SR (%s): %s\n",
			opcode_name(opcode), strerror(err));
		return -1;
	}
	fprintf(stdout, "%s Request was posted\n", opcode_name(opcode));
	return 0;
}

/* 7.1.8: post one receive request of the whole buffer. */
static int post_receive(struct resources *res)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)res->buf,
		.length = MSG_SIZE,
		.lkey = res->mr->lkey,
	};
	struct ibv_recv_wr rr = {
		.wr_id = 0,
		.sg_list = &sge,
		.num_sge = 1,
	};
	struct ibv_recv_wr *bad_wr;
	int err;

	err = ibv_post_recv(res->qp, &rr, &bad_wr);
	if (err) {
		fprintf(stderr, "failed to post RR: %s\n", strerror(err));
		return -1;
	}
	fprintf(stdout, "Receive Request was posted\n");
	return 0;
}

/* 7.1.3 */
static void resources_init(struct resources *res)
{
	memset(res, 0, sizeof(*res));
	res->sock = -1;
}

static struct ibv_context *open_device(const char *name)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	int i, num;

	fprintf(stdout, "searching for IB devices in host\n");
	list = ibv_get_device_list(&num);
	if (!list) {
		fprintf(stderr, "failed to get IB devices list: %s\n",
			strerror(errno));
		return NULL;
	}
	if (!num) {
		fprintf(stderr, "found %d device(s)\n", num);
		goto free_list;
	}
	fprintf(stdout, "found %d device(s)\n", num);

	for (i = 0; i < num; i++) {
		if (!name) {
			name = ibv_get_device_name(list[i]);
			fprintf(stdout, "device not specified, using first one found: %s\n",
				name);
		}
		if (!strcmp(ibv_get_device_name(list[i]), name))
			break;
	}
	if (i == num) {
		fprintf(stderr, "IB device %s wasn't found\n", name);
		goto free_list;
	}

	ctx = ibv_open_device(list[i]);
	if (!ctx)
		fprintf(stderr, "failed to open device %s\n", name);
free_list:
	ibv_free_device_list(list);
	return ctx;
}

/* 7.1.4 */
static int resources_create(struct resources *res)
{
	struct ibv_qp_init_attr qp_init_attr = {
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 1,
		.cap = {
			.max_send_wr = 1,
			.max_recv_wr = 1,
			.max_send_sge = 1,
			.max_recv_sge = 1,
		},
	};
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
		     IBV_ACCESS_REMOTE_WRITE;

	res->sock = sock_connect(config.server_name, config.tcp_port);
	if (res->sock < 0) {
		fprintf(stderr, "failed to establish TCP connection %s port %u\n",
			config.server_name ? "to server" : "with client",
			config.tcp_port);
		return -1;
	}
	fprintf(stdout, "TCP connection was established\n");

	res->ctx = open_device(config.dev_name);
	if (!res->ctx)
		return -1;

	if (ibv_query_port(res->ctx, config.ib_port, &res->port_attr)) {
		fprintf(stderr, "ibv_query_port on port %d failed\n",
			config.ib_port);
		return -1;
	}

	res->pd = ibv_alloc_pd(res->ctx);
	if (!res->pd) {
		fprintf(stderr, "ibv_alloc_pd failed\n");
		return -1;
	}

	res->cq = ibv_create_cq(res->ctx, 1, NULL, NULL, 0);
	if (!res->cq) {
		fprintf(stderr, "failed to create CQ with 1 entry\n");
		return -1;
	}

	res->buf = calloc(1, MSG_SIZE);
	if (!res->buf) {
		fprintf(stderr, "failed to allocate %d bytes for the buffer\n",
			MSG_SIZE);
		return -1;
	}
	/* The server has a message to send; the client an empty buffer. */
	if (!config.server_name) {
		strcpy(res->buf, MSG_SEND);
		fprintf(stdout, "going to send the message: '%s'\n", res->buf);
	}

	res->mr = ibv_reg_mr(res->pd, res->buf, MSG_SIZE, access);
	if (!res->mr) {
		fprintf(stderr, "ibv_reg_mr failed with mr_flags=0x%x\n",
			access);
		return -1;
	}
	fprintf(stdout, "MR was registered with addr=%p, lkey=0x%x, rkey=0x%x, flags=0x%x\n",
		res->buf, res->mr->lkey, res->mr->rkey, access);

	qp_init_attr.send_cq = res->cq;
	qp_init_attr.recv_cq = res->cq;
	res->qp = ibv_create_qp(res->pd, &qp_init_attr);
	if (!res->qp) {
		fprintf(stderr, "failed to create QP\n");
		return -1;
	}
	fprintf(stdout, "QP was created, QP number=0x%x\n", res->qp->qp_num);
	return 0;
}

/* 7.1.7 */
static int modify_qp_to_init(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_INIT,
		.port_num = config.ib_port,
		.pkey_index = 0,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_READ |
				   IBV_ACCESS_REMOTE_WRITE,
	};
	int err;

	err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				       IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		fprintf(stderr, "failed to modify QP state to INIT: %s\n",
			strerror(err));
	return err ? -1 : 0;
}

/* 7.1.10 */
static int modify_qp_to_rtr(struct ibv_qp *qp, uint32_t remote_qpn,
			    uint16_t dlid, const uint8_t *dgid)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = IBV_MTU_256,
		.dest_qp_num = remote_qpn,
		.rq_psn = 0,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 0x12,
		.ah_attr = {
			.is_global = 0,
			.dlid = dlid,
			.sl = 0,
			.src_path_bits = 0,
			.port_num = config.ib_port,
		},
	};
	int err;

	if (config.gid_idx >= 0) {
		attr.ah_attr.is_global = 1;
		memcpy(&attr.ah_attr.grh.dgid, dgid, 16);
		attr.ah_attr.grh.flow_label = 0;
		attr.ah_attr.grh.hop_limit = 1;
		attr.ah_attr.grh.sgid_index = config.gid_idx;
		attr.ah_attr.grh.traffic_class = 0;
	}

	err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_AV |
				       IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN |
				       IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER);
	if (err)
		fprintf(stderr, "failed to modify QP state to RTR: %s\n",
			strerror(err));
	return err ? -1 : 0;
}

/* 7.1.11 */
static int modify_qp_to_rts(struct ibv_qp *qp)
{
	struct ibv_qp_attr attr = {
		.qp_state = IBV_QPS_RTS,
		.timeout = 0x12,
		.retry_cnt = 6,
		.rnr_retry = 0,
		.sq_psn = 0,
		.max_rd_atomic = 1,
	};
	int err;

	err = ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_TIMEOUT |
				       IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				       IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		fprintf(stderr, "failed to modify QP state to RTS: %s\n",
			strerror(err));
	return err ? -1 : 0;
}

static void print_gid(const char *what, const uint8_t *gid)
{
	int i;

	fprintf(stdout, "%s = ", what);
	for (i = 0; i < 16; i += 2)
		fprintf(stdout, "%02x%02x%s", gid[i], gid[i + 1],
			i < 14 ? ":" : "\n");
}

/* 7.1.6 */
static int connect_qp(struct resources *res)
{
	struct cm_con_data local = { 0 }, remote;
	union ibv_gid my_gid = { .raw = { 0 } };

	if (config.gid_idx >= 0 &&
	    ibv_query_gid(res->ctx, config.ib_port, config.gid_idx, &my_gid)) {
		fprintf(stderr, "could not get GID %d of port %d\n",
			config.gid_idx, config.ib_port);
		return -1;
	}

	if (modify_qp_to_init(res->qp))
		return -1;
	/* The client receives the server's SEND: post before the peer can. */
	if (config.server_name && post_receive(res))
		return -1;

	local.addr = htobe64((uintptr_t)res->buf);
	local.rkey = htobe32(res->mr->rkey);
	local.qp_num = htobe32(res->qp->qp_num);
	local.lid = htobe16(res->port_attr.lid);
	memcpy(local.gid, my_gid.raw, 16);
	if (sock_sync_data(res->sock, sizeof(local), &local, &remote)) {
		fprintf(stderr, "failed to exchange connection data between sides\n");
		return -1;
	}
	res->remote.addr = be64toh(remote.addr);
	res->remote.rkey = be32toh(remote.rkey);
	res->remote.qp_num = be32toh(remote.qp_num);
	res->remote.lid = be16toh(remote.lid);
	memcpy(res->remote.gid, remote.gid, 16);

	fprintf(stdout, "Remote address = 0x%" PRIx64 "\n", res->remote.addr);
	fprintf(stdout, "Remote rkey = 0x%x\n", res->remote.rkey);
	fprintf(stdout, "Remote QP number = 0x%x\n", res->remote.qp_num);
	fprintf(stdout, "Remote LID = 0x%x\n", res->remote.lid);
	if (config.gid_idx >= 0)
		print_gid("Remote GID", res->remote.gid);

	if (modify_qp_to_rtr(res->qp, res->remote.qp_num, res->remote.lid,
			     res->remote.gid))
		return -1;
	fprintf(stdout, "QP state was changed to RTR\n");
	if (modify_qp_to_rts(res->qp))
		return -1;
	fprintf(stdout, "QP state was changed to RTS\n");

	/* Neither side sends before the other is ready to receive. */
	if (sock_sync(res->sock)) {
		fprintf(stderr, "sync error after QPs were moved to RTS\n");
		return -1;
	}
	return 0;
}

/* 7.1.14: release what resources_create() got, in reverse order. */
static int resources_destroy(struct resources *res)
{
	int rc = 0;

	if (res->qp && ibv_destroy_qp(res->qp)) {
		fprintf(stderr, "failed to destroy QP\n");
		rc = -1;
	}
	if (res->mr && ibv_dereg_mr(res->mr)) {
		fprintf(stderr, "failed to deregister MR\n");
		rc = -1;
	}
	free(res->buf);
	if (res->cq && ibv_destroy_cq(res->cq)) {
		fprintf(stderr, "failed to destroy CQ\n");
		rc = -1;
	}
	if (res->pd && ibv_dealloc_pd(res->pd)) {
		fprintf(stderr, "failed to deallocate PD\n");
		rc = -1;
	}
	if (res->ctx && ibv_close_device(res->ctx)) {
		fprintf(stderr, "failed to close device context\n");
		rc = -1;
	}
	if (res->sock >= 0 && close(res->sock)) {
		fprintf(stderr, "failed to close socket\n");
		rc = -1;
	}
	resources_init(res);
	return rc;
}

/* 7.1.2 */
static void print_config(void)
{
	fprintf(stdout, " ------------------------------------------------\n");
	fprintf(stdout, " Device name : \"%s\"\n",
		config.dev_name ? config.dev_name : "(first found)");
	fprintf(stdout, " IB port : %d\n", config.ib_port);
	if (config.server_name)
		fprintf(stdout, " IP : %s\n", config.server_name);
	fprintf(stdout, " TCP port : %u\n", config.tcp_port);
	if (config.gid_idx >= 0)
		fprintf(stdout, " GID index : %d\n", config.gid_idx);
	fprintf(stdout, " ------------------------------------------------\n\n");
}

static void usage(const char *argv0)
{
	fprintf(stdout, "Usage:\n");
	fprintf(stdout, " %s            start a server and wait for connection\n",
		argv0);
	fprintf(stdout, " %s <host>     connect to server at <host>\n", argv0);
	fprintf(stdout, "\nOptions:\n");
	fprintf(stdout, " -p, --port <port>         listen on/connect to TCP port <port> (default 19875)\n");
	fprintf(stdout, " -d, --ib-dev <dev>        use IB device <dev> (default first device found)\n");
	fprintf(stdout, " -i, --ib-port <port>      use port <port> of IB device (default 1)\n");
	fprintf(stdout, " -g, --gid-idx <gid index> GID index to be used in GRH (default not used)\n");
}

static int parse_int(const char *s, long min, long max, long *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 0);
	if (errno || end == s || *end || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

static int parse_args(int argc, char *argv[])
{
	static const struct option long_options[] = {
		{ .name = "port", .has_arg = 1, .val = 'p' },
		{ .name = "ib-dev", .has_arg = 1, .val = 'd' },
		{ .name = "ib-port", .has_arg = 1, .val = 'i' },
		{ .name = "gid-idx", .has_arg = 1, .val = 'g' },
		{ .name = "help", .has_arg = 0, .val = 'h' },
		{ 0 }
	};
	long v;
	int c;

	while ((c = getopt_long(argc, argv, "p:d:i:g:h", long_options,
				NULL)) != -1) {
		switch (c) {
		case 'p':
			if (parse_int(optarg, 1, 65535, &v))
				goto bad_value;
			config.tcp_port = (unsigned int)v;
			break;
		case 'd':
			config.dev_name = optarg;
			break;
		case 'i':
			if (parse_int(optarg, 1, 255, &v))
				goto bad_value;
			config.ib_port = (int)v;
			break;
		case 'g':
			if (parse_int(optarg, -1, 255, &v))
				goto bad_value;
			config.gid_idx = (int)v;
			break;
		case 'h':
			usage(argv[0]);
			exit(EXIT_SUCCESS);
		default:
			usage(argv[0]);
			return -1;
		}
	}

	if (optind == argc - 1) {
		config.server_name = argv[optind];
	} else if (optind < argc) {
		usage(argv[0]);
		return -1;
	}
	return 0;

bad_value:
	fprintf(stderr, "invalid value '%s' for -%c\n", optarg, c);
	usage(argv[0]);
	return -1;
}

/* 7.1.1: the server SENDs, the client READs and WRITEs the server's buffer. */
static int run(struct resources *res)
{
	if (resources_create(res)) {
		fprintf(stderr, "failed to create resources\n");
		return -1;
	}
	if (connect_qp(res)) {
		fprintf(stderr, "failed to connect QPs\n");
		return -1;
	}

	if (!config.server_name && post_send(res, IBV_WR_SEND))
		return -1;
	if (poll_completion(res))
		return -1;

	if (config.server_name) {
		fprintf(stdout, "Message is: '%s'\n", res->buf);
	} else {
		/* The buffer the client will now read. */
		strcpy(res->buf, MSG_RDMA_READ);
	}

	if (sock_sync(res->sock)) {
		fprintf(stderr, "sync error before RDMA ops\n");
		return -1;
	}

	/* Only the client acts; the server waits in the next TCP read. */
	if (config.server_name) {
		if (post_send(res, IBV_WR_RDMA_READ) || poll_completion(res))
			return -1;
		fprintf(stdout, "Contents of server's buffer: '%s'\n",
			res->buf);

		memset(res->buf, 0, MSG_SIZE);
		strcpy(res->buf, MSG_RDMA_WRITE);
		fprintf(stdout, "Now replacing it with: '%s'\n", res->buf);
		if (post_send(res, IBV_WR_RDMA_WRITE) || poll_completion(res))
			return -1;
	}

	if (sock_sync(res->sock)) {
		fprintf(stderr, "sync error after RDMA ops\n");
		return -1;
	}

	if (!config.server_name)
		fprintf(stdout, "Contents of server buffer: '%s'\n", res->buf);
	return 0;
}

int main(int argc, char *argv[])
{
	struct resources res;
	int rc;

	/* Keep the order of stdout and stderr lines when both go to a file. */
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (parse_args(argc, argv))
		return EXIT_FAILURE;

	print_config();
	resources_init(&res);
	rc = run(&res);
	if (resources_destroy(&res)) {
		fprintf(stderr, "failed to destroy resources\n");
		rc = -1;
	}
	fprintf(stdout, "\ntest result is %d\n", rc);
	return rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
