// SPDX-License-Identifier: MIT
/*
 * ibemu0: the device libibverbs lists, its contexts, and the ops table.
 *
 * The device is created once per process and carries one permanent
 * reference, so stock ibv_free_device_list() (which drops one reference per
 * entry) never frees it.  A context attaches the process to its node
 * segment; the last context detaches it.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "pcap.h"
#include "ibemu.h"
#include "log.h"

struct ibemu_process ibemu_process = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
};

static struct verbs_context *ibemu_alloc_context(struct ibv_device *device,
						 int cmd_fd,
						 void *private_data);
static void ibemu_free_context(struct ibv_context *context);
static void ibemu_uninit_device(struct verbs_device *vdev);

static const struct verbs_device_ops ibemu_dev_ops = {
	.name = "ibemu",
	.match_min_abi_version = 0,
	.match_max_abi_version = INT32_MAX,
	.alloc_context = ibemu_alloc_context,
	.uninit_device = ibemu_uninit_device,
};

static struct ibemu_device ibemu_dev;
static pthread_once_t ibemu_dev_once = PTHREAD_ONCE_INIT;

/*
 * A forked child must not use its parent's verbs objects (as with an HCA
 * without fork support): above all it must not drain the parent's inbox.
 * It starts unattached and may open contexts of its own; its copies of the
 * parent's engine and key table are freed (the shared mappings stay, they
 * are the parent's).
 */
static void ibemu_atfork_child(void)
{
	pthread_mutex_init(&ibemu_process.lock, NULL);
	ibemu_process.pid = getpid();
	ibemu_process.refs = 0;
	engine_forget(&ibemu_process);
	pcap_forget();
	ibemu_mr_table_fini(&ibemu_process);
	ibemu_process.nr_mrs = 0;
	ibemu_process.mr_cursor = 0;
	ibemu_process.node.seg = NULL;
	ibemu_process.node.proc_slot = -1;
}

static void ibemu_device_init(void)
{
	struct ibv_device *dev = &ibemu_dev.vdev.device;

	dev->node_type = IBV_NODE_CA;
	dev->transport_type = IBV_TRANSPORT_IB;
	snprintf(dev->name, sizeof(dev->name), "%s", IBEMU_DEVICE_NAME);
	snprintf(dev->dev_name, sizeof(dev->dev_name), "uverbs-%s",
		 IBEMU_DEVICE_NAME);
	/* No sysfs and no character device: ibv_open_device() then calls
	 * alloc_context with cmd_fd -1 (DESIGN.md section 1). */
	dev->dev_path[0] = '\0';
	dev->ibdev_path[0] = '\0';
	ibemu_dev.vdev.ops = &ibemu_dev_ops;
	ibemu_dev.vdev.sysfs = NULL;
	ibemu_dev.vdev.core_support = 0;
	ibemu_dev.port_count = IBEMU_NUM_PORTS;
	/* The permanent reference. */
	atomic_store(&ibemu_dev.vdev.refcount, 1);
	pthread_atfork(NULL, NULL, ibemu_atfork_child);
}

struct ibv_device *ibemu_device_get(void)
{
	if (!ibemu_shim_enabled())
		return NULL;
	pthread_once(&ibemu_dev_once, ibemu_device_init);
	return &ibemu_dev.vdev.device;
}

static void ibemu_uninit_device(struct verbs_device *vdev)
{
	/* Static storage; the permanent reference keeps us from here. */
}

/* Attach the process to its node; the first context opens the segment. */
static int ibemu_process_get(void)
{
	struct ibemu_process *proc = &ibemu_process;
	int ret = 0;

	pthread_mutex_lock(&proc->lock);
	if (proc->refs++ == 0) {
		proc->pid = getpid();
		ret = node_open(&proc->node);
		if (ret)
			goto err;
		ret = node_proc_attach(&proc->node);
		if (ret)
			goto err_close;
		ret = ibemu_mr_table_init(proc);
		if (ret)
			goto err_detach;
		ret = engine_start(proc);
		if (ret)
			goto err_mr;
	}
	pthread_mutex_unlock(&proc->lock);
	return 0;

err_mr:
	ibemu_mr_table_fini(proc);
err_detach:
	node_proc_detach(&proc->node);
err_close:
	node_close(&proc->node);
err:
	proc->refs--;
	pthread_mutex_unlock(&proc->lock);
	return ret;
}

static void ibemu_process_put(void)
{
	struct ibemu_process *proc = &ibemu_process;

	pthread_mutex_lock(&proc->lock);
	if (--proc->refs == 0) {
		engine_stop(proc);
		ibemu_mr_table_fini(proc);
		node_proc_detach(&proc->node);
		node_close(&proc->node);
	}
	pthread_mutex_unlock(&proc->lock);
}

uint64_t ibemu_process_node_guid(void)
{
	struct node node;
	uint64_t guid;

	/* Without an open context, read the identity from the segment. */
	pthread_mutex_lock(&ibemu_process.lock);
	if (ibemu_process.refs) {
		guid = ibemu_process.node.seg->node_guid;
		pthread_mutex_unlock(&ibemu_process.lock);
		return guid;
	}
	pthread_mutex_unlock(&ibemu_process.lock);
	if (node_open(&node))
		return 0;
	guid = node.seg->node_guid;
	node_close(&node);
	return guid;
}

static const struct verbs_context_ops ibemu_ctx_ops = {
	.alloc_pd = ibemu_alloc_pd,
	.attach_mcast = ibemu_attach_mcast,
	.cq_event = ibemu_cq_event,
	.create_ah = ibemu_create_ah,
	.create_cq = ibemu_create_cq,
	.create_cq_ex = ibemu_create_cq_ex,
	.create_qp = ibemu_create_qp,
	.create_qp_ex = ibemu_create_qp_ex,
	.create_srq = ibemu_create_srq,
	.dealloc_pd = ibemu_dealloc_pd,
	.dereg_mr = ibemu_dereg_mr,
	.destroy_ah = ibemu_destroy_ah,
	.destroy_cq = ibemu_destroy_cq,
	.destroy_qp = ibemu_destroy_qp,
	.destroy_srq = ibemu_destroy_srq,
	.detach_mcast = ibemu_detach_mcast,
	.free_context = ibemu_free_context,
	.modify_qp = ibemu_modify_qp,
	.modify_srq = ibemu_modify_srq,
	.poll_cq = ibemu_poll_cq,
	.post_recv = ibemu_post_recv,
	.post_send = ibemu_post_send,
	.post_srq_recv = ibemu_post_srq_recv,
	.query_device_ex = ibemu_query_device_ex,
	.query_port = ibemu_query_port,
	.query_qp = ibemu_query_qp,
	.query_srq = ibemu_query_srq,
	.reg_mr = ibemu_reg_mr,
	.req_notify_cq = ibemu_req_notify_cq,
	.rereg_mr = ibemu_rereg_mr,
	.resize_cq = ibemu_resize_cq,
};

static int ibemu_async_fd_open(struct ibemu_context *ctx)
{
	char path[64];
	int fd, ret;

	ret = ibemu_pipe_rdwr(&fd);
	if (ret)
		return ret;
	/* A second, non-blocking description of the same pipe: an
	 * application that never reads its async events must not stall
	 * the emulated HCA. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ctx->async_wfd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (ctx->async_wfd < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ctx->vctx.context.async_fd = fd;
	return 0;
}

static struct verbs_context *ibemu_alloc_context(struct ibv_device *device,
						 int cmd_fd,
						 void *private_data)
{
	struct ibemu_context *ctx;
	int ret;

	ctx = pabi.init_and_alloc_context(device, cmd_fd, sizeof(*ctx),
					  &((struct ibemu_context *)NULL)->vctx,
					  0 /* RDMA_DRIVER_UNKNOWN */);
	if (!ctx)
		return NULL;
	ctx->async_wfd = -1;
	ret = ibemu_process_get();
	if (ret)
		goto err_uninit;
	ctx->node = &ibemu_process.node;
	ctx->pid = ibemu_process.pid;
	ret = ibemu_async_fd_open(ctx);
	if (ret) {
		ibemu_log_err("cannot create the async event queue: %s",
			      strerror(-ret));
		goto err_put;
	}
	ctx->vctx.context.num_comp_vectors = IBEMU_NUM_COMP_VECTORS;
	pabi.set_ops(&ctx->vctx, &ibemu_ctx_ops);
	return &ctx->vctx;

err_put:
	ibemu_process_put();
err_uninit:
	pabi.uninit_context(&ctx->vctx);
	free(ctx);
	errno = -ret;
	return NULL;
}

static void ibemu_free_context(struct ibv_context *context)
{
	struct ibemu_context *ctx = to_ectx(context);

	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	/* A forked child closing its parent's context: nothing of ours. */
	if (!ibemu_ctx_stale(context))
		ibemu_process_put();
	/* Closes async_fd and drops the device reference. */
	pabi.uninit_context(&ctx->vctx);
	free(ctx);
}

/*
 * Queue an affiliated or unaffiliated async event (IBA 11.6.3) for stock
 * ibv_get_async_event().  element is the CQ/QP/SRQ pointer or port number.
 */
void ibemu_async_event(struct ibemu_context *ctx, enum ibv_event_type type,
		       uint64_t element)
{
	struct pabi_async_event_desc desc = {
		.element = element,
		.event_type = type,
	};

	if (write(ctx->async_wfd, &desc, sizeof(desc)) != sizeof(desc))
		ibemu_log_warn("async event %d dropped: queue full (%s)",
			       (int)type, strerror(errno));
}
