// SPDX-License-Identifier: MIT
/*
 * The example of mlx5dv_wr_post(3), made whole: one DCI writes to the
 * DCTs of other processes, naming each target per work request with
 * mlx5dv_wr_set_dc_addr(), and sends each a message.
 *
 *   dc_example [-p PORT] [-k KEY]                    a target (DCT)
 *   dc_example [-k KEY] [-r ROUNDS] HOST[:PORT]...   the initiator (DCI)
 *
 * A target listens on PORT (18520), tells each initiator that connects
 * its LID, DCT number, buffer and R_Key over TCP, and waits.  The
 * initiator posts, in one batch, ROUNDS rounds (4) of an RDMA WRITE of
 * 64 bytes and a SEND to every target in turn: one DCI serving many
 * targets, as scalable codes use it.  Then each target checks its buffer
 * and its receives byte for byte and answers "ok" or what was wrong.
 * With -k on the initiator a key other than the targets' (0x1ee7): the
 * first WRITE completes with IBV_WC_REM_ACCESS_ERR, the rest flushed,
 * and the targets must have received nothing.  Exit 0 when everything
 * was as it should be.
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <infiniband/mlx5dv.h>
#include <infiniband/verbs.h>

#define DC_KEY 0x1ee7ULL
#define MSG 64 /* bytes per WRITE and per SEND */
#define MAX_ROUNDS 16
#define MAX_TARGETS 8
#define BUF (MAX_ROUNDS * MSG)

/* What a target tells its initiator, in network order. */
struct dc_target_info {
	uint32_t dctn, rkey;
	uint16_t lid, index; /* index: the target's place in the list */
	uint32_t pad;
	uint64_t addr;
};

/* What the initiator tells a target once its batch is done. */
struct dc_done {
	uint32_t index, rounds, expect_data;
};

static int xfer(int fd, void *p, size_t n, int out)
{
	char *c = p;

	while (n) {
		ssize_t r = out ? send(fd, c, n, MSG_NOSIGNAL) : recv(fd, c, n, 0);

		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			return -1;
		}
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The byte at offset i of round r's message to target t. */
static uint8_t pattern(unsigned int t, unsigned int r, unsigned int i,
		       int send)
{
	return (uint8_t)(t * 53 + r * 17 + i * 3 + (send ? 101 : 0) + 1);
}

struct dc_dev {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_port_attr port;
};

static int dev_open(struct dc_dev *d)
{
	int n;

	d->list = ibv_get_device_list(&n);
	if (!d->list || !n) {
		fprintf(stderr, "no RDMA device\n");
		return -1;
	}
	if (!mlx5dv_is_supported(d->list[0])) {
		fprintf(stderr, "%s offers no mlx5 direct verbs\n",
			ibv_get_device_name(d->list[0]));
		return -1;
	}
	d->ctx = mlx5dv_open_device(d->list[0],
				    &(struct mlx5dv_context_attr){ 0 });
	if (!d->ctx || ibv_query_port(d->ctx, 1, &d->port)) {
		perror("mlx5dv_open_device");
		return -1;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	d->cq = d->pd ? ibv_create_cq(d->ctx, 4 * MAX_ROUNDS * MAX_TARGETS + 8,
				      NULL, NULL, 0)
		      : NULL;
	if (!d->cq) {
		perror("ibv_alloc_pd/ibv_create_cq");
		return -1;
	}
	return 0;
}

static int modify(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
		  const char *what)
{
	int ret = ibv_modify_qp(qp, a, mask);

	if (ret)
		fprintf(stderr, "modify to %s: %s\n", what, strerror(ret));
	return ret ? -1 : 0;
}

/* The wait for a completion: 5 s at most. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (long i = 0; i < 5000000; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n < 0 ? -1 : 0;
		if (i > 1000)
			usleep(1);
	}
	fprintf(stderr, "no completion\n");
	return -1;
}

static int target(const char *port, uint64_t key)
{
	struct addrinfo hints = { .ai_flags = AI_PASSIVE,
				  .ai_socktype = SOCK_STREAM }, *ai;
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = 64, .max_sge = 1 } };
	struct dc_target_info info;
	struct dc_done done;
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	struct dc_dev d = { 0 };
	struct ibv_srq *srq;
	struct ibv_qp *dct;
	struct ibv_mr *mr, *rmr;
	uint8_t *buf, *rbuf;
	char answer[64] = "ok";
	int ls, fd, one = 1;
	unsigned int r, i;

	if (dev_open(&d))
		return 1;
	buf = calloc(1, BUF);
	rbuf = calloc(64, MSG);
	mr = ibv_reg_mr(d.pd, buf, BUF,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	rmr = ibv_reg_mr(d.pd, rbuf, 64 * MSG, IBV_ACCESS_LOCAL_WRITE);
	srq = ibv_create_srq(d.pd, &sa);
	if (!mr || !rmr || !srq) {
		perror("ibv_reg_mr/ibv_create_srq");
		return 1;
	}
	for (i = 0; i < 64; i++) {
		struct ibv_sge sge = { (uintptr_t)rbuf + i * MSG, MSG,
				       rmr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge,
					  .num_sge = 1 }, *bad;

		if (ibv_post_srq_recv(srq, &wr, &bad)) {
			perror("ibv_post_srq_recv");
			return 1;
		}
	}
	/* The DCT, on the SRQ, with its key (mlx5dv_create_qp(3)). */
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_DRIVER,
		.send_cq = d.cq,
		.recv_cq = d.cq,
		.srq = srq,
		.pd = d.pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
	};
	struct mlx5dv_qp_init_attr dv = {
		.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC,
		.dc_init_attr = { .dc_type = MLX5DV_DCTYPE_DCT,
				  .dct_access_key = key },
	};
	dct = mlx5dv_create_qp(d.ctx, &ia, &dv);
	if (!dct) {
		perror("mlx5dv_create_qp DCT");
		return 1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
	if (modify(dct, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			    IBV_QP_ACCESS_FLAGS, "INIT"))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.min_rnr_timer = 12;
	a.ah_attr.port_num = 1;
	if (modify(dct, &a, IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_AV |
			    IBV_QP_MIN_RNR_TIMER, "RTR"))
		return 1;

	if (getaddrinfo(NULL, port, &hints, &ai)) {
		fprintf(stderr, "port %s?\n", port);
		return 1;
	}
	ls = socket(ai->ai_family, SOCK_STREAM, 0);
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ls < 0 || bind(ls, ai->ai_addr, ai->ai_addrlen) || listen(ls, 1)) {
		perror("listen");
		return 1;
	}
	freeaddrinfo(ai);
	printf("DCT %#x listening on port %s\n", dct->qp_num, port);
	fflush(stdout);
	fd = accept(ls, NULL, NULL);
	if (fd < 0 || xfer(fd, &info.index, sizeof(info.index), 0)) {
		perror("accept");
		return 1;
	}
	info.dctn = htobe32(dct->qp_num);
	info.rkey = htobe32(mr->rkey);
	info.lid = htobe16(d.port.lid);
	info.addr = htobe64((uintptr_t)buf);
	if (xfer(fd, &info, sizeof(info), 1) ||
	    xfer(fd, &done, sizeof(done), 0)) {
		fprintf(stderr, "initiator gone\n");
		return 1;
	}
	done.index = be32toh(done.index);
	done.rounds = be32toh(done.rounds);
	if (done.rounds > MAX_ROUNDS)
		done.rounds = MAX_ROUNDS;
	/* What the WRITEs left, and the SENDs in order on the SRQ. */
	for (r = 0; r < MAX_ROUNDS && answer[0] == 'o'; r++)
		for (i = 0; i < MSG; i++) {
			uint8_t want = done.expect_data && r < done.rounds
					       ? pattern(done.index, r, i, 0)
					       : 0;

			if (buf[r * MSG + i] != want) {
				snprintf(answer, sizeof(answer),
					 "byte %u of write %u: %#x, not %#x", i,
					 r, buf[r * MSG + i], want);
				break;
			}
		}
	for (r = 0; done.expect_data && r < done.rounds && answer[0] == 'o';
	     r++) {
		if (poll_one(d.cq, &wc) || wc.status != IBV_WC_SUCCESS ||
		    wc.opcode != IBV_WC_RECV || wc.byte_len != MSG ||
		    wc.qp_num != dct->qp_num) {
			snprintf(answer, sizeof(answer),
				 "receive %u: status %d opcode %d len %u", r,
				 wc.status, wc.opcode, wc.byte_len);
			break;
		}
		for (i = 0; i < MSG; i++)
			if (rbuf[wc.wr_id * MSG + i] !=
			    pattern(done.index, r, i, 1)) {
				snprintf(answer, sizeof(answer),
					 "byte %u of send %u differs", i, r);
				break;
			}
	}
	if (!done.expect_data && ibv_poll_cq(d.cq, 1, &wc) != 0)
		snprintf(answer, sizeof(answer), "a receive completed");
	xfer(fd, answer, sizeof(answer), 1);
	printf("target %u: %s\n", done.index, answer);
	close(fd);
	close(ls);
	ibv_destroy_qp(dct);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(rmr);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(d.cq);
	ibv_dealloc_pd(d.pd);
	ibv_close_device(d.ctx);
	ibv_free_device_list(d.list);
	return strcmp(answer, "ok") != 0;
}

static int dial(const char *target_arg, unsigned int index,
		struct dc_target_info *info)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	char host[256], *colon;
	const char *port = "18520";
	uint16_t idx = htobe16((uint16_t)index); /* dc_target_info.index */
	int fd;

	snprintf(host, sizeof(host), "%s", target_arg);
	colon = strrchr(host, ':');
	if (colon) {
		*colon = 0;
		port = colon + 1;
	}
	for (int tries = 0; tries < 100; tries++) {
		if (getaddrinfo(host, port, &hints, &ai))
			return -1;
		fd = socket(ai->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			freeaddrinfo(ai);
			if (xfer(fd, &idx, sizeof(idx), 1) ||
			    xfer(fd, info, sizeof(*info), 0))
				return -1;
			return fd;
		}
		if (fd >= 0)
			close(fd);
		freeaddrinfo(ai);
		usleep(100000);
	}
	return -1;
}

static int initiator(int n, char **targets, uint64_t key, unsigned int rounds)
{
	struct dc_target_info info[MAX_TARGETS];
	int fds[MAX_TARGETS];
	struct ibv_ah *ah[MAX_TARGETS];
	struct dc_dev d = { 0 };
	struct ibv_qp_attr a;
	struct ibv_wc wc;
	struct ibv_mr *mr;
	uint8_t *buf;
	int t, failed = 0, expect_err = key != DC_KEY;
	unsigned int r, i, completions = 0;

	if (dev_open(&d))
		return 1;
	buf = calloc(2 * MAX_TARGETS * MAX_ROUNDS, MSG);
	mr = ibv_reg_mr(d.pd, buf, 2 * MAX_TARGETS * MAX_ROUNDS * MSG,
			IBV_ACCESS_LOCAL_WRITE);
	if (!mr) {
		perror("ibv_reg_mr");
		return 1;
	}
	/* The DCI of the man page: IBV_QPT_DRIVER, with its send ops. */
	struct ibv_qp_init_attr_ex ia = {
		.qp_type = IBV_QPT_DRIVER,
		.send_cq = d.cq,
		.recv_cq = d.cq,
		.cap = { .max_send_wr = 2 * MAX_TARGETS * MAX_ROUNDS,
			 .max_send_sge = 1 },
		.pd = d.pd,
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE |
				  IBV_QP_EX_WITH_SEND,
	};
	struct mlx5dv_qp_init_attr dv = {
		.comp_mask = MLX5DV_QP_INIT_ATTR_MASK_DC,
		.dc_init_attr = { .dc_type = MLX5DV_DCTYPE_DCI },
	};
	struct ibv_qp *qp = mlx5dv_create_qp(d.ctx, &ia, &dv);

	if (!qp) {
		perror("mlx5dv_create_qp DCI");
		return 1;
	}
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_INIT;
	a.port_num = 1;
	if (modify(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT,
		   "INIT"))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	if (modify(qp, &a, IBV_QP_STATE | IBV_QP_PATH_MTU, "RTR"))
		return 1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (modify(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			    IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			    IBV_QP_MAX_QP_RD_ATOMIC, "RTS"))
		return 1;
	for (t = 0; t < n; t++) {
		fds[t] = dial(targets[t], (unsigned int)t, &info[t]);
		if (fds[t] < 0) {
			fprintf(stderr, "target %s: no answer\n", targets[t]);
			return 1;
		}
		ah[t] = ibv_create_ah(d.pd, &(struct ibv_ah_attr){
				.dlid = be16toh(info[t].lid), .port_num = 1 });
		if (!ah[t]) {
			perror("ibv_create_ah");
			return 1;
		}
	}

	struct ibv_qp_ex *qpx = ibv_qp_to_qp_ex(qp);
	struct mlx5dv_qp_ex *mqpx = mlx5dv_qp_ex_from_ibv_qp_ex(qpx);

	ibv_wr_start(qpx);
	for (r = 0; r < rounds; r++)
		for (t = 0; t < n; t++) {
			uint8_t *w = buf + (2 * (r * n + t)) * MSG;

			for (i = 0; i < MSG; i++) {
				w[i] = pattern(t, r, i, 0);
				w[MSG + i] = pattern(t, r, i, 1);
			}
			qpx->wr_id = 2 * (r * n + t);
			qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_rdma_write(qpx, be32toh(info[t].rkey),
					  be64toh(info[t].addr) + r * MSG);
			ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)w, MSG);
			mlx5dv_wr_set_dc_addr(mqpx, ah[t],
					      be32toh(info[t].dctn), key);
			qpx->wr_id = 2 * (r * n + t) + 1;
			ibv_wr_send(qpx);
			ibv_wr_set_sge(qpx, mr->lkey, (uintptr_t)w + MSG, MSG);
			mlx5dv_wr_set_dc_addr(mqpx, ah[t],
					      be32toh(info[t].dctn), key);
		}
	if (ibv_wr_complete(qpx)) {
		perror("ibv_wr_complete");
		return 1;
	}
	/* In order: all succeed, or (a wrong key) the first is an access
	 * error and the rest are flushed. */
	for (completions = 0; completions < 2 * rounds * (unsigned int)n;
	     completions++) {
		enum ibv_wc_status want =
			!expect_err	   ? IBV_WC_SUCCESS
			: completions == 0 ? IBV_WC_REM_ACCESS_ERR
					   : IBV_WC_WR_FLUSH_ERR;

		if (poll_one(d.cq, &wc))
			return 1;
		if (wc.status != want || wc.wr_id != completions) {
			fprintf(stderr, "completion %u: wr_id %llu %s, not %s\n",
				completions, (unsigned long long)wc.wr_id,
				ibv_wc_status_str(wc.status),
				ibv_wc_status_str(want));
			failed = 1;
			break;
		}
	}
	for (t = 0; t < n; t++) {
		struct dc_done done = { htobe32((uint32_t)t), htobe32(rounds),
					!expect_err };
		char answer[64];

		if (xfer(fds[t], &done, sizeof(done), 1) ||
		    xfer(fds[t], answer, sizeof(answer), 0)) {
			fprintf(stderr, "target %d: gone\n", t);
			failed = 1;
			continue;
		}
		answer[sizeof(answer) - 1] = 0;
		printf("target %d (DCT %#x): %s\n", t, be32toh(info[t].dctn),
		       answer);
		failed |= strcmp(answer, "ok") != 0;
		ibv_destroy_ah(ah[t]);
		close(fds[t]);
	}
	printf("%u completions, %s\n", completions,
	       failed ? "FAILED" : expect_err ? "access error as expected"
					       : "all data checked");
	ibv_destroy_qp(qp);
	ibv_dereg_mr(mr);
	ibv_destroy_cq(d.cq);
	ibv_dealloc_pd(d.pd);
	ibv_close_device(d.ctx);
	ibv_free_device_list(d.list);
	return failed;
}

int main(int argc, char **argv)
{
	const char *port = "18520";
	uint64_t key = DC_KEY;
	unsigned int rounds = 4;
	int c;

	while ((c = getopt(argc, argv, "p:k:r:")) != -1) {
		switch (c) {
		case 'p':
			port = optarg;
			break;
		case 'k':
			key = strtoull(optarg, NULL, 0);
			break;
		case 'r':
			rounds = (unsigned int)atoi(optarg);
			if (!rounds || rounds > MAX_ROUNDS)
				rounds = 4;
			break;
		default:
			fprintf(stderr, "usage: %s [-p PORT] [-k KEY] | "
					"[-k KEY] [-r ROUNDS] HOST[:PORT]...\n",
				argv[0]);
			return 2;
		}
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (optind == argc)
		return target(port, key);
	if (argc - optind > MAX_TARGETS) {
		fprintf(stderr, "at most %d targets\n", MAX_TARGETS);
		return 2;
	}
	return initiator(argc - optind, argv + optind, key, rounds);
}
