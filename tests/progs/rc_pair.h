/* SPDX-License-Identifier: MIT */
/*
 * Connection setup for the two-process RC tests: each process opens the
 * ibemu device and builds one RC QP over a registered buffer, the two
 * trade their QPN, LID, PSN, address and rkey over a socket, and each
 * moves its QP through INIT, RTR and RTS towards the other.  What differs
 * between tests (buffer size, access, queue depths, path MTU, transport
 * timeout and retries) comes in a struct rc_pair_attr.
 */
#ifndef IBEMU_TESTS_RC_PAIR_H
#define IBEMU_TESTS_RC_PAIR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <infiniband/verbs.h>

/* What one side tells the other, as is, over the socket. */
struct rc_conn {
	uint32_t qpn;
	uint32_t psn;
	uint16_t lid;
	uint64_t addr; /* the registered buffer */
	uint32_t rkey;
};

struct rc_pair_attr {
	size_t buf_len; /* mapped anonymous, then registered */
	int mr_access;	/* ibv_reg_mr() access flags */
	int cq_depth;	/* one CQ for sends and receives */
	uint32_t max_send_wr;
	uint32_t max_recv_wr;
	unsigned int qp_access; /* remote access the QP grants, at INIT */
	enum ibv_mtu path_mtu;
	uint8_t timeout; /* 4.096 us * 2^timeout; 0 is infinite */
	uint8_t retry_cnt;
	uint8_t rnr_retry;
};

/* One end of the pair.  Zero it before rc_pair_open(). */
struct rc_side {
	struct rc_pair_attr attr;
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	struct ibv_qp *qp;
	struct rc_conn me;
	void *buf; /* attr.buf_len bytes */
};

/* One line to stderr. */
void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write (out) or read all len bytes of buf on fd, a socket or a pipe.
 * 0, or -1 on error or end of file; a write to a socket whose other side
 * has gone fails with EPIPE rather than raising SIGPIPE. */
int rc_xfer(int fd, void *buf, size_t len, int out);

/* Fork the other side of a two-process test, joined to this one by a
 * socket pair, before any verb (each side opens its own device).  In the
 * parent: the child's pid, *fd_p its end of the pair; in the child (which
 * dies with the parent): 0, *fd_p the child's end.  -1 on an error. */
pid_t rc_pair_fork(int *fd_p);

/* Device, PD, CQ, MR over a fresh mapping, one RC QP (every WR
 * signaled); fills s->me.  0, 1: no device, -1: error.  Whatever was
 * made is left for rc_pair_close(). */
int rc_pair_open(struct rc_side *s, const struct rc_pair_attr *attr);

/* The first device, its port 1 attributes, a PD and a CQ: 0, 1 when
 * there is no device, -1 on an error. */
int verbs_open(struct ibv_device ***list_p, struct ibv_context **ctx_p,
	       struct ibv_pd **pd_p, struct ibv_cq **cq_p, int cq_depth,
	       struct ibv_port_attr *pa);
/* Release what a test side opened, innermost first; NULLs are skipped. */
void verbs_release(struct ibv_qp *qp, struct ibv_mr *mr, struct ibv_cq *cq,
		   struct ibv_pd *pd, struct ibv_context *ctx,
		   struct ibv_device **list);
/* Undo rc_pair_open(), as far as it went; an MR the caller deregistered
 * itself must be NULL. */
void rc_pair_close(struct rc_side *s);

/* INIT, RTR, RTS towards the other side, addressed by LID on port 1 (no
 * GRH).  0, or -1. */
int rc_pair_connect(struct rc_side *s, const struct rc_conn *to);

/* rc_pair_open(), then s->me sent and the other side's rc_conn read on
 * the socket fd, then rc_pair_connect() to it.  0, 1: no device, -1. */
int rc_pair_join(struct rc_side *s, const struct rc_pair_attr *attr, int fd);

/* The misuse programs' subcommands (check_mem, check_life): the command
 * line's one argument, NAME or NAME-ok, found in table (n entries of
 * struct misuse_cmd).  Its entry, *ok_p whether it ended in -ok; NULL
 * (after a usage line naming prog on stderr) if it is none of them. */
struct misuse_cmd {
	const char *name;
	int (*run)(int ok);
};
const struct misuse_cmd *misuse_cmd_find(const char *prog, int argc,
					 char **argv,
					 const struct misuse_cmd *table,
					 size_t n, int *ok_p);

#endif
