// SPDX-License-Identifier: MIT
/*
 * Multicast through the librdmacm face (rdma_cma.h): rdma_join_multicast,
 * rdma_join_multicast_ex and rdma_leave_multicast for ibemu ids, on the
 * emulator's joins (emulator/cm/cm_mcast.c).  As librdmacm does for its
 * user QPs, the id's QP is attached to the group when the application
 * reads MULTICAST_JOIN (ucma_process_join; not for a send-only member),
 * and detached when it leaves the group (or destroys the id).
 *
 * Lock rule: none of its own; the emulator guards the memberships.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "ibemu.h"
#include "cm.h"
#include "rdmacm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

typedef int (*face_mcast_fn)(struct ibv_qp *qp, const union ibv_gid *gid,
			     uint16_t lid);

static int face_mcast_verb(const char *name, struct ibv_qp *qp,
			   const union ibv_gid *gid, uint16_t lid)
{
	face_mcast_fn fn;

	*(void **)&fn = ibemu_verbs_sym(name, "IBVERBS_1.1");
	if (!fn)
		return ENOSYS;
	return fn(qp, gid, lid);
}

static int face_join(struct rdma_cm_id *id, struct sockaddr *addr,
		     int join_flags, void *context)
{
	int ret;

	ret = emu_cm_join(face_emu_id(id), addr, join_flags,
			  (uintptr_t)context);
	if (ret)
		return face_err(ret);
	return face_complete_id(id);
}

IBEMU_EXPORT int rdma_join_multicast(struct rdma_cm_id *id,
				     struct sockaddr *addr, void *context)
{
	FACE_DISPATCH(join_multicast, id, addr, context);
	if (!id || !addr)
		return face_err(EINVAL);
	return face_join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context);
}

IBEMU_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id,
					struct rdma_cm_join_mc_attr_ex *attr,
					void *context)
{
	FACE_DISPATCH(join_multicast_ex, id, attr, context);
	if (!id || !attr)
		return face_err(EINVAL);
	/* librdmacm's checks, in its order: unknown attributes ENOTSUP,
	 * no address or no (or an unknown) join flag EINVAL. */
	if (attr->comp_mask >= RDMA_CM_JOIN_MC_ATTR_RESERVED)
		return face_err(ENOTSUP);
	if (!(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_ADDRESS) || !attr->addr ||
	    !(attr->comp_mask & RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS) ||
	    attr->join_flags >= RDMA_MC_JOIN_FLAG_RESERVED)
		return face_err(EINVAL);
	return face_join(id, attr->addr, (int)attr->join_flags, context);
}

/* Detach id's QP from a group it left, if it was attached. */
static void face_mcast_detach(struct rdma_cm_id *id,
			      const struct emu_cm_mc_info *info)
{
	if (!id->qp || !info->mlid ||
	    info->join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return;
	/* not attached if the join's event was never read: nothing to do */
	(void)face_mcast_verb("ibv_detach_mcast", id->qp, &info->mgid,
			      info->mlid);
}

IBEMU_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id,
				      struct sockaddr *addr)
{
	struct emu_cm_mc_info info;
	int ret;

	FACE_DISPATCH(leave_multicast, id, addr);
	if (!id || !addr)
		return face_err(EINVAL);
	ret = emu_cm_leave(face_emu_id(id), addr, &info);
	if (ret) /* EADDRNOTAVAIL: not joined, as librdmacm */
		return face_err(ret);
	face_mcast_detach(id, &info);
	return 0;
}

void face_mcast_id_destroy(struct rdma_cm_id *id)
{
	struct emu_cm_mc_info info;

	while (!emu_cm_leave(face_emu_id(id), NULL, &info))
		face_mcast_detach(id, &info);
}

void face_mcast_event(struct rdma_cm_id *id, struct rdma_cm_event *ev,
		      const struct emu_cm_event *eev)
{
	int ret;

	memset(&ev->param.ud, 0, sizeof(ev->param.ud));
	/* librdmacm: the join's context in private_data, for both events */
	ev->param.ud.private_data = (void *)(uintptr_t)eev->mc_context;
	if (eev->event != EMU_CM_MULTICAST_JOIN)
		return;
	ev->param.ud.ah_attr = eev->param.ah_attr;
	ev->param.ud.qp_num = eev->param.qp_num;
	ev->param.ud.qkey = eev->param.qkey;
	if (!id->qp ||
	    eev->mc_join_flags == RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
		return;
	ret = face_mcast_verb("ibv_attach_mcast", id->qp,
			      &eev->param.ah_attr.grh.dgid,
			      eev->param.ah_attr.dlid);
	if (ret) {
		/* librdmacm: the event becomes MULTICAST_ERROR, its status
		 * rdma_seterrno's -1 with errno set */
		errno = ret;
		ev->event = RDMA_CM_EVENT_MULTICAST_ERROR;
		ev->status = -1;
	}
}
