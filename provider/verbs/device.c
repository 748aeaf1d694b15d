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

#include "check_life.h"
#include "ibemu.h"
#include "log.h"

pid_t ibemu_pid;

/* The HCA's async event record is what stock ibv_get_async_event reads. */
_Static_assert(sizeof(struct emu_event_desc) ==
		       sizeof(struct pabi_async_event_desc),
	       "async event record");

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

/* A forked child's contexts are its parent's (see ibemu_ctx_stale). */
static void ibemu_atfork_child(void)
{
	ibemu_pid = getpid();
	emu_hca_fork_child();
	ibemu_import_fork_child();
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
	 * alloc_context with cmd_fd -1 (doc/design.md §4 "Device and
	 * contexts"). */
	dev->dev_path[0] = '\0';
	dev->ibdev_path[0] = '\0';
	ibemu_dev.vdev.ops = &ibemu_dev_ops;
	ibemu_dev.vdev.sysfs = NULL;
	ibemu_dev.vdev.core_support = 0;
	ibemu_dev.port_count = emu_nr_ports();
	/* The permanent reference. */
	atomic_store(&ibemu_dev.vdev.refcount, 1);
	ibemu_pid = getpid();
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

/* Laid out as the process's libibverbs has them by pabi_set_ops(). */
static const struct pabi_ops ibemu_ctx_ops = {
	.advise_mr = ibemu_advise_mr,
	.alloc_dm = ibemu_alloc_dm,
	.alloc_mw = ibemu_alloc_mw,
	.alloc_parent_domain = ibemu_alloc_parent_domain,
	.alloc_pd = ibemu_alloc_pd,
	.alloc_td = ibemu_alloc_td,
	.async_event = ibemu_async_event,
	.bind_mw = ibemu_bind_mw,
	.attach_mcast = ibemu_attach_mcast,
	.close_xrcd = ibemu_close_xrcd,
	.cq_event = ibemu_cq_event,
	.create_ah = ibemu_create_ah,
	.create_cq = ibemu_create_cq,
	.create_cq_ex = ibemu_create_cq_ex,
	.create_qp = ibemu_create_qp,
	.create_qp_ex = ibemu_create_qp_ex,
	.create_srq = ibemu_create_srq,
	.dealloc_mw = ibemu_dealloc_mw,
	.create_srq_ex = ibemu_create_srq_ex,
	.dealloc_pd = ibemu_dealloc_pd,
	.dealloc_td = ibemu_dealloc_td,
	.dereg_mr = ibemu_dereg_mr,
	.destroy_ah = ibemu_destroy_ah,
	.destroy_cq = ibemu_destroy_cq,
	.destroy_qp = ibemu_destroy_qp,
	.destroy_srq = ibemu_destroy_srq,
	.detach_mcast = ibemu_detach_mcast,
	.free_context = ibemu_free_context,
	.free_dm = ibemu_free_dm,
	.import_dm = ibemu_import_dm,
	.import_mr = ibemu_import_mr,
	.import_pd = ibemu_import_pd,
	.get_srq_num = ibemu_get_srq_num,
	.modify_qp = ibemu_modify_qp,
	.modify_srq = ibemu_modify_srq,
	.open_qp = ibemu_open_qp,
	.open_xrcd = ibemu_open_xrcd,
	.poll_cq = ibemu_poll_cq,
	.post_recv = ibemu_post_recv,
	.post_send = ibemu_post_send,
	.post_srq_recv = ibemu_post_srq_recv,
	.query_device_ex = ibemu_query_device_ex,
	.query_port = ibemu_query_port,
	.query_qp = ibemu_query_qp,
	.query_rt_values = ibemu_query_rt_values,
	.query_srq = ibemu_query_srq,
	.reg_dm_mr = ibemu_reg_dm_mr,
	.reg_mr = ibemu_reg_mr,
	.req_notify_cq = ibemu_req_notify_cq,
	.rereg_mr = ibemu_rereg_mr,
	.resize_cq = ibemu_resize_cq,
	.unimport_dm = ibemu_unimport_dm,
	.unimport_mr = ibemu_unimport_mr,
	.unimport_pd = ibemu_unimport_pd,
};

int ibemu_fd_nonblock_writer(int fd)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	return open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
}

static int ibemu_async_fd_open(struct ibemu_context *ctx)
{
	int fd, ret;

	ret = ibemu_pipe_rdwr(&fd);
	if (ret)
		return ret;
	/* A second, non-blocking description of the same pipe: an
	 * application that never reads its async events must not stall
	 * the emulated HCA. */
	ctx->async_wfd = ibemu_fd_nonblock_writer(fd);
	if (ctx->async_wfd < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	ctx->pctx.vctx.context.async_fd = fd;
	return 0;
}

struct emu_owner ibemu_owner(struct ibv_context *context, void *object)
{
	struct emu_owner owner = {
		.handle = (uintptr_t)object,
		.async_fd = to_ectx(context)->async_wfd,
	};

	return owner;
}

static struct verbs_context *ibemu_alloc_context(struct ibv_device *device,
						 int cmd_fd,
						 void *private_data)
{
	int import_fd = ibemu_import_fd_take();
	struct ibemu_context *ctx;
	int ret;

	/* The command fd: ibv_import_device's, or a new one that names
	 * this context's HCA attachment (provider/import.c). */
	cmd_fd = import_fd >= 0 ? import_fd : ibemu_cmd_fd_open();
	if (cmd_fd < 0) {
		errno = -cmd_fd;
		return NULL;
	}
	/* libibverbs lays its verbs_context out from that offset, as large
	 * as its release has it, within ctx->pctx (pabi.h). */
	ctx = pabi.init_and_alloc_context(
		device, cmd_fd, sizeof(*ctx),
		(struct verbs_context *)(uintptr_t)pabi_vctx_offset(
			offsetof(struct ibemu_context, pctx)),
		0 /* RDMA_DRIVER_UNKNOWN */);
	if (!ctx) {
		if (import_fd < 0)
			close(cmd_fd);
		return NULL;
	}
	ctx->async_wfd = -1;
	ret = -emu_hca_get(&ctx->hca);
	if (ret)
		goto err_uninit;
	ctx->pid = ibemu_pid;
	ret = -ibemu_cmd_fd_bind(ctx, cmd_fd, import_fd >= 0);
	if (ret)
		goto err_put;
	ret = ibemu_async_fd_open(ctx);
	if (ret) {
		ibemu_log_err("cannot create the async event queue: %s",
			      strerror(-ret));
		goto err_put;
	}
	/* Port events reach every open context (IBA 11.6.3.3). */
	ret = -emu_hca_ctx_add(ctx->hca, ctx->async_wfd);
	if (ret)
		goto err_put;
	ctx->pctx.vctx.context.num_comp_vectors = IBEMU_NUM_COMP_VECTORS;
	pabi_set_ops(pabi_lib_vctx(&ctx->pctx), &ibemu_ctx_ops);
	check_obj(CHECK_OBJ_CONTEXT, 1);
	return pabi_lib_vctx(&ctx->pctx);

err_put:
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	emu_hca_put(ctx->hca);
err_uninit:
	/* A failed import leaves the caller's fd open. */
	if (import_fd >= 0)
		ctx->pctx.vctx.context.cmd_fd = -1;
	pabi.uninit_context(pabi_lib_vctx(&ctx->pctx));
	free(ctx);
	errno = -ret;
	return NULL;
}

static void ibemu_free_context(struct ibv_context *context)
{
	struct ibemu_context *ctx = to_ectx(context);

	check_life_close(ctx);
	check_obj(CHECK_OBJ_CONTEXT, -1);
	/* A forked child closing its parent's context: nothing of ours. */
	if (!ibemu_ctx_stale(context))
		emu_hca_ctx_remove(ctx->hca, ctx->async_wfd);
	if (ctx->async_wfd >= 0)
		close(ctx->async_wfd);
	if (!ibemu_ctx_stale(context))
		emu_hca_put(ctx->hca);
	/* Closes async_fd and drops the device reference. */
	pabi.uninit_context(pabi_lib_vctx(&ctx->pctx));
	free(ctx);
}
