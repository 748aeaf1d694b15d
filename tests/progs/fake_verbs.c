// SPDX-License-Identifier: MIT
/*
 * A stand-in libibverbs.so.1 for tests/local/pabi-select.sh: it lists no
 * device, and defines the version nodes its version script names
 * (fake_verbs_*.map), so that the preload can be shown which libibverbs
 * it is in.  Its private functions abort: the preload must choose, from
 * the nodes alone, whether to call them, and a program whose preload
 * refused the layout must run as it would without it.
 *
 * ibv_qp_to_qp_ex() answers as libibverbs' does for a struct ibv_qp_ex of
 * FAKE_VERBS_QP_EX_WR_OPS wr_* members (default 22, rdma-core 45 on).
 */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/verbs.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

FAKE_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	if (num)
		*num = 0;
	return calloc(1, sizeof(struct ibv_device *));
}

FAKE_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

FAKE_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	return device->name;
}

FAKE_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	(void)device;
	return 0;
}

FAKE_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	const char *env = getenv("FAKE_VERBS_QP_EX_WR_OPS");
	size_t wr_ops = env ? strtoul(env, NULL, 0) : 22;
	size_t size = offsetof(struct ibv_qp_ex, wr_atomic_cmp_swp) +
		      wr_ops * sizeof(void (*)(void));
	uint32_t comp_mask;

	memcpy(&comp_mask, (char *)qp + size, sizeof(comp_mask));
	return comp_mask & 2 /* VERBS_QP_EX */ ? (struct ibv_qp_ex *)qp : NULL;
}

static void fake_called(const char *name)
{
	fprintf(stderr, "fake libibverbs: %s called\n", name);
	abort();
}

/* The private functions, at the private node of the version script. */
FAKE_EXPORT void *_verbs_init_and_alloc_context(void);
FAKE_EXPORT void verbs_set_ops(void);
FAKE_EXPORT void verbs_uninit_context(void);
FAKE_EXPORT void __verbs_log(void);
FAKE_EXPORT void verbs_init_cq(void);
/* Named so under other C names: <infiniband/verbs.h> declares both. */
FAKE_EXPORT void fake_query_port(void) __asm__("ibv_query_port");
FAKE_EXPORT void fake_query_device(void) __asm__("ibv_query_device");

FAKE_EXPORT void *_verbs_init_and_alloc_context(void)
{
	fake_called("_verbs_init_and_alloc_context");
	return NULL;
}

FAKE_EXPORT void verbs_set_ops(void)
{
	fake_called("verbs_set_ops");
}

FAKE_EXPORT void verbs_uninit_context(void)
{
	fake_called("verbs_uninit_context");
}

FAKE_EXPORT void __verbs_log(void)
{
	fake_called("__verbs_log");
}

FAKE_EXPORT void verbs_init_cq(void)
{
	fake_called("verbs_init_cq");
}

FAKE_EXPORT void fake_query_port(void)
{
	fake_called("ibv_query_port");
}

FAKE_EXPORT void fake_query_device(void)
{
	fake_called("ibv_query_device");
}
