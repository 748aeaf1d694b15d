// SPDX-License-Identifier: MIT
/*
 * Opening ibemu's device where the process's libibverbs cannot (a layout
 * row with open_needs_sysfs, pabi/layout.h): rdma-core 36's
 * ibv_open_device() opens the device's sysfs character device before it
 * asks the provider, and reads the device's sysfs description to find
 * it, which ibemu's device has not.  37 skips both for a device without
 * one (rdma-core commit 9b239d0e0).
 *
 * There ibemu opens its own device as 36's verbs_open_device() would,
 * less the character device (libibverbs/device.c at v36.0): the
 * provider's alloc_context with no command fd, then what set_lib_ops()
 * does to a new context.  That is the library's create_cq_ex (which
 * checks the flags and initializes the CQ's library part, verbs_init_cq)
 * and query_port (which hands the provider a whole ibv_port_attr), the
 * compat entry points of the legacy ops, and the flow-steering
 * placeholders of libibverbs 1.1.8.  The context's async_fd is ibemu's
 * own pipe, so no command allocates one.
 *
 * Its fields are reached from the context's struct ibv_context: struct
 * verbs_context grows in front (pabi.h), so a member 36 has sits at the
 * same place before it in every release's header.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "ibemu.h"
#include "layout.h"

/* The headers' view of the context whose libibverbs verbs_context
 * starts at lib: its ibv_context is the row's vctx_words after lib
 * (pabi_lib_vctx, the other way), whatever size these headers give. */
static struct verbs_context *open_own_vctx(struct verbs_context *lib)
{
	char *context = (char *)lib + pabi.layout->vctx_words * sizeof(void *);

	return (struct verbs_context *)(context -
					offsetof(struct verbs_context,
						 context));
}

/* 36's __lib_ibv_create_cq_ex, for ibemu's CQs. */
static struct ibv_cq_ex *open_own_create_cq_ex(struct ibv_context *context,
					       struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq_ex *cq;

	if (attr->wc_flags & ~(uint64_t)IBV_CREATE_CQ_SUP_WC_FLAGS) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cq = ibemu_create_cq_ex(context, attr);
	if (cq)
		pabi.init_cq(ibv_cq_ex_to_cq(cq), context, attr->channel,
			     attr->cq_context);
	return cq;
}

/* 36's __lib_query_port: the provider always fills a whole attribute. */
static int open_own_query_port(struct ibv_context *context, uint8_t port_num,
			       struct ibv_port_attr *attr, size_t len)
{
	struct ibv_port_attr whole;
	int ret;

	if (len >= sizeof(whole)) {
		memset(attr, 0, len);
		return ibemu_query_port(context, port_num, attr);
	}
	memset(&whole, 0, sizeof(whole));
	ret = ibemu_query_port(context, port_num, &whole);
	if (!ret)
		memcpy(attr, &whole, len);
	return ret;
}

struct ibv_context *ibemu_open_own(struct ibv_device *device)
{
	struct verbs_device *vdev = (struct verbs_device *)device;
	struct verbs_context *lib, *vctx;

	lib = vdev->ops->alloc_context(device, -1, NULL);
	if (!lib)
		return NULL;
	vctx = open_own_vctx(lib);
	vctx->create_cq_ex = open_own_create_cq_ex;
	vctx->query_port = open_own_query_port;
	vctx->context.ops._compat_query_port =
		(__typeof__(vctx->context.ops._compat_query_port))
			pabi.compat_query_port;
	vctx->context.ops._compat_query_device =
		(__typeof__(vctx->context.ops._compat_query_device))
			pabi.compat_query_device;
	vctx->ABI_placeholder1 = (void (*)(void))vctx->ibv_create_flow;
	vctx->ABI_placeholder2 = (void (*)(void))vctx->ibv_destroy_flow;
	return &vctx->context;
}
