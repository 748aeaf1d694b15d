// SPDX-License-Identifier: MIT
/*
 * ibv_query_gid_type(): private to libibverbs, yet called by programs of
 * rdma-core (ibv_devinfo, pyverbs), which bind it at their release's
 * private version; stock reads the GID's type from sysfs, which ibemu's
 * device has not.  The preload defines it at every private version it
 * carries (layout.h), each falling through to libibverbs' own at the
 * same version for a context that is not ibemu's.
 */
#include "config.h"

#include <errno.h>

#include "ibemu.h"

typedef int (*query_gid_type_fn)(struct ibv_context *context,
				 uint8_t port_num, unsigned int index,
				 int *type);

/* type is enum ibv_gid_type_sysfs (driver.h). */
static int query_gid_type(const char *node, struct ibv_context *context,
			  uint8_t port_num, unsigned int index, int *type)
{
	struct ibv_gid_entry e;
	query_gid_type_fn real;
	int ret;

	if (!ibemu_is_ours(context)) {
		real = ibemu_verbs_sym("ibv_query_gid_type", node);
		if (!real) {
			errno = ENOSYS;
			return -1;
		}
		return real(context, port_num, index, type);
	}
	ret = ibemu_query_gid_entry(context, port_num, index, &e);
	if (ret == ENODATA) {
		*type = 0;
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	/* IBV_GID_TYPE_SYSFS_IB_ROCE_V1 (0) for IB and RoCE v1 GIDs */
	*type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? 1 : 0;
	return 0;
}

/* One definition per private version node (libibemu.map declares them). */
#define PABI_GID_TYPE_AT(tag, node)                                            \
	IBEMU_EXPORT int pabi_query_gid_type_##tag(                            \
		struct ibv_context *context, uint8_t port_num,                 \
		unsigned int index, int *type);                                \
	int pabi_query_gid_type_##tag(struct ibv_context *context,            \
				      uint8_t port_num, unsigned int index,    \
				      int *type)                               \
	{                                                                      \
		return query_gid_type(node, context, port_num, index, type);   \
	}                                                                      \
	__asm__(".symver pabi_query_gid_type_" #tag                            \
		", ibv_query_gid_type@" node);

PABI_GID_TYPE_AT(34, "IBVERBS_PRIVATE_34")
PABI_GID_TYPE_AT(57, "IBVERBS_PRIVATE_57")
PABI_GID_TYPE_AT(59, "IBVERBS_PRIVATE_59")
PABI_GID_TYPE_AT(64, "IBVERBS_PRIVATE_64")
PABI_GID_TYPE_AT(65, "IBVERBS_PRIVATE_65")
