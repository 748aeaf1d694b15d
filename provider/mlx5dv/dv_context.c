// SPDX-License-Identifier: MIT
/*
 * Opening and querying ibemu's device through libmlx5's entry points
 * (mlx5dv_open_device(3), mlx5dv_query_device(3)).  ibemu has no DevX:
 * its device has no firmware command interface to pass commands to.
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "dv.h"
#include "log.h"

struct ibv_context *ibemu_dv_open_device(struct ibv_device *device,
					 struct dv_context_attr *attr)
{
	/* Opening with DevX asks for mlx5's firmware interface, which
	 * is not emulated (ibemu(7)); unknown flags or members are not
	 * offered either. */
	if (attr && (attr->flags || attr->comp_mask)) {
		ibemu_log_dbg("mlx5dv_open_device: flags %#x comp_mask %#llx "
			      "not offered (no DevX)",
			      attr->flags, (unsigned long long)attr->comp_mask);
		errno = EOPNOTSUPP;
		return NULL;
	}
	return ibv_open_device(device);
}

/*
 * The members of struct mlx5dv_context a caller has are the ones its
 * comp_mask asks for; ibemu answers DC_ODP_CAPS (DC takes on-demand
 * regions as RC does) and clears every other bit: no CQE compression,
 * striding RQ, tunnel offloads, signature or crypto offloads, DCI
 * streams or DMA memcpy.  The fixed members say: no direct access to
 * queues or CQEs is offered (flags 0).
 */
int ibemu_dv_query_device(struct ibv_context *context,
			  struct dv_context *attrs)
{
	struct ibv_device_attr_ex dev;
	uint64_t asked;
	int ret;

	if (!attrs)
		return EINVAL;
	if (ibemu_ctx_stale(context))
		return EIO;
	asked = attrs->comp_mask;
	attrs->version = 1;
	attrs->flags = 0;
	attrs->comp_mask = 0;
	if (asked & DV_CONTEXT_MASK_DC_ODP_CAPS) {
		memset(&dev, 0, sizeof(dev));
		ret = ibemu_query_device_ex(context, NULL, &dev, sizeof(dev));
		if (ret)
			return ret;
		attrs->dc_odp_caps = dev.odp_caps.per_transport_caps.rc_odp_caps;
		attrs->comp_mask |= DV_CONTEXT_MASK_DC_ODP_CAPS;
	}
	return 0;
}
