// SPDX-License-Identifier: MIT
/*
 * fork() after ibv_open_device: the child's queries on the inherited
 * context answer as the parent's do and it can allocate device memory on
 * it (as on a real HCA: rdma-core's test_multi_process_alloc_dm), its
 * verbs on the parent's objects fail with EIO instead of crashing or
 * disturbing the parent, the child can open a context of its own, and the
 * parent carries on.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "FAIL: " __VA_ARGS__);                 \
			fprintf(stderr, "\n");                                 \
			return 1;                                              \
		}                                                              \
	} while (0)

static struct ibv_qp *make_qp(struct ibv_pd *pd, struct ibv_cq *cq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq,
		.recv_cq = cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};

	return ibv_create_qp(pd, &ia);
}

static int child(struct ibv_device *dev, struct ibv_context *ctx,
		 struct ibv_pd *pd, struct ibv_cq *cq,
		 const struct ibv_device_attr *parent_attr,
		 const struct ibv_port_attr *parent_port)
{
	struct ibv_alloc_dm_attr dm_attr = { .length = 4096 };
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *own;
	struct ibv_dm *dm;
	struct ibv_pd *own_pd;
	struct ibv_cq *own_cq;
	struct ibv_qp *qp;
	static char buf[64];

	CHECK(ibv_query_device(ctx, &attr) == 0,
	      "child: query_device on the parent's context fails");
	CHECK(attr.node_guid == parent_attr->node_guid &&
		      attr.max_qp == parent_attr->max_qp,
	      "child: query_device differs from the parent's");
	CHECK(ibv_query_port(ctx, 1, &port) == 0 &&
		      port.lid == parent_port->lid &&
		      port.state == parent_port->state,
	      "child: query_port on the parent's context differs");
	dm = ibv_alloc_dm(ctx, &dm_attr);
	CHECK(dm, "child: alloc_dm on the parent's context fails");
	CHECK(ibv_free_dm(dm) == 0, "child: free_dm");
	errno = 0;
	CHECK(!make_qp(pd, cq) && errno == EIO,
	      "child: create_qp on the parent's PD: %s", "not EIO");
	errno = 0;
	CHECK(!ibv_reg_mr(pd, buf, sizeof(buf), IBV_ACCESS_LOCAL_WRITE) &&
		      errno == EIO,
	      "child: reg_mr on the parent's PD is not EIO");
	own = ibv_open_device(dev);
	CHECK(own, "child: cannot open a context of its own");
	own_pd = ibv_alloc_pd(own);
	own_cq = ibv_create_cq(own, 4, NULL, NULL, 0);
	CHECK(own_pd && own_cq, "child: own PD/CQ");
	qp = make_qp(own_pd, own_cq);
	CHECK(qp, "child: create_qp on its own context");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(own_cq);
	ibv_dealloc_pd(own_pd);
	ibv_close_device(own);
	return 0;
}

int main(void)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_device_attr attr;
	struct ibv_port_attr port;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	int status;
	pid_t pid;

	CHECK(list && list[0], "no device");
	ctx = ibv_open_device(list[0]);
	CHECK(ctx, "open");
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	CHECK(pd && cq, "PD/CQ");
	CHECK(!ibv_query_device(ctx, &attr) && !ibv_query_port(ctx, 1, &port),
	      "parent: query");
	fflush(NULL);
	pid = fork();
	CHECK(pid >= 0, "fork");
	if (pid == 0)
		_exit(child(list[0], ctx, pd, cq, &attr, &port));
	CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child %s %d", WIFSIGNALED(status) ? "killed by signal" : "exit",
	      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
	qp = make_qp(pd, cq);
	CHECK(qp, "parent: create_qp after the fork");
	ibv_destroy_qp(qp);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	printf("ok: fork: the child queries the inherited context, gets EIO "
	       "on inherited objects and works with its own; the parent "
	       "carries on\n");
	return 0;
}
