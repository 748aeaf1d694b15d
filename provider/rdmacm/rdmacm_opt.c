// SPDX-License-Identifier: MIT
/*
 * Options of the librdmacm face's ids (rdmacm.c): rdma_set_option and
 * the enhanced connection establishment calls.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "ibemu.h"
#include "cm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- options ---- */

IBEMU_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level,
				 int optname, void *optval, size_t optlen)
{
	FACE_DISPATCH(set_option, id, level, optname, optval, optlen);
	int ret = 0;

	if (!id || !optval)
		return face_err(EINVAL);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			if (optlen != sizeof(uint8_t))
				return face_err(EINVAL);
			return 0; /* no service levels */
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				return face_err(EINVAL);
			ret = emu_cm_set_ack_timeout(to_fid(id)->emu,
						     *(uint8_t *)optval);
			break;
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				return face_err(EINVAL);
			ret = emu_cm_set_reuseaddr(to_fid(id)->emu,
						   *(int *)optval != 0);
			break;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				return face_err(EINVAL);
			ret = emu_cm_set_afonly(to_fid(id)->emu,
						*(int *)optval != 0);
			break;
		default:
			ret = ENOSYS;
		}
	} else if (level == RDMA_OPTION_IB && optname == RDMA_OPTION_IB_PATH) {
		/* A path given by the application: on one node it is the
		 * path already known. */
		if (!optlen || optlen % sizeof(struct ibv_path_data))
			return face_err(EINVAL);
	} else {
		ret = ENOSYS;
	}
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	FACE_DISPATCH(set_local_ece, id, ece);
	if (!id || !ece || id->qp)
		return face_err(EINVAL);
	to_fid(id)->local_ece = *ece;
	return 0;
}

IBEMU_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id,
				     struct ibv_ece *ece)
{
	FACE_DISPATCH(get_remote_ece, id, ece);
	if (!id || !ece || id->qp)
		return face_err(EINVAL);
	/* Enhanced connection establishment is not negotiated. */
	memset(ece, 0, sizeof(*ece));
	return 0;
}
