// SPDX-License-Identifier: MIT
/*
 * The librdmacm face (doc/design.md, "The RDMA CM"): the public
 * librdmacm API (rdma_cma.h, and through it the inline helpers of
 * rdma_verbs.h) on top of the emulator's CM (emulator/cm/cm.h).
 *
 * librdmacm cannot be extended: it talks to /dev/infiniband/rdma_cm.
 * libibemu therefore exports every public rdma_* function at librdmacm's
 * symbol versions (libibemu.map), so programs, and librdmacm's own
 * internal calls, bind to these.  With no rdma_cm device in the
 * process's view every id is ibemu's (ibemu(7)).
 *
 * Objects: an event channel wraps the emulator's channel (its
 * descriptor is the one the application polls); an id wraps the
 * emulator's id and counts the events reported and acknowledged, since
 * rdma_destroy_id waits for the acknowledgements as librdmacm's does.
 * An id made without a channel is synchronous: each call that starts
 * something waits for its event on a channel of the id's own.
 * Verbs are called through libibverbs (ibemu_verbs_sym): QPs made by
 * the face are ordinary QPs of the ibemu device.
 *
 * This file holds the ids (made, destroyed, moved to another channel),
 * the synchronous endpoints and the device list.  The rest of the face:
 * rdmacm_qp.c the device and the ids' QPs, SRQs and CQs; rdmacm_event.c
 * event channels and events; rdmacm_addr.c addresses, routes and
 * rdma_getaddrinfo; rdmacm_conn.c listening and connections;
 * rdmacm_opt.c options; rdmacm_mcast.c multicast; rdmacm_real.c the
 * kernel's devices' ids.
 *
 * Lock rule: each id's lock guards its event counts; face_lock
 * (rdmacm_qp.c) the device.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "ibemu.h"
#include "cm.h"
#include "rdmacm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

int face_err(int err)
{
	errno = err;
	return -1;
}

/* ---- ids ---- */

/* id's addresses and route as the emulator has them. */
void face_sync_route(struct face_id *fid)
{
	struct rdma_cm_id *id = &fid->id;
	struct sockaddr_storage src, dst;
	struct emu_cm_route r;

	emu_cm_addrs(fid->emu, &src, &dst);
	memcpy(&id->route.addr.src_storage, &src, sizeof(src));
	memcpy(&id->route.addr.dst_storage, &dst, sizeof(dst));
	if (!emu_cm_route(fid->emu, &r))
		return;
	id->verbs = face_verbs;
	id->port_num = r.port_num;
	/* librdmacm gives an id on a device that device's PD */
	if (!id->pd)
		id->pd = face_pd;
	id->route.addr.addr.ibaddr.sgid = r.sgid;
	id->route.addr.addr.ibaddr.dgid = r.dgid;
	id->route.addr.addr.ibaddr.pkey = htobe16(r.pkey);
	fid->path.sgid = r.sgid;
	fid->path.dgid = r.dgid;
	fid->path.slid = htobe16(r.slid);
	fid->path.dlid = htobe16(r.dlid);
	fid->path.pkey = htobe16(r.pkey);
	fid->path.reversible = 1;
	fid->path.numb_path = 1;
	fid->path.mtu_selector = 2; /* exactly */
	fid->path.mtu = (uint8_t)r.mtu;
	fid->path.rate_selector = 2;
	fid->path.rate = 7; /* 40 Gb/s */
	fid->path.packet_life_time_selector = 2;
	fid->path.packet_life_time = 14;
	id->route.path_rec = &fid->path;
}

struct face_id *face_id_new(struct face_chan *fch, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct face_id *fid = calloc(1, sizeof(*fid));

	if (!fid)
		return NULL;
	pthread_mutex_init(&fid->lock, NULL);
	pthread_cond_init(&fid->cond, NULL);
	fid->id.channel = &fch->ch;
	fid->id.context = context;
	fid->id.ps = ps;
	fid->id.qp_type = qp_type;
	return fid;
}

void face_id_free(struct face_id *fid)
{
	pthread_mutex_destroy(&fid->lock);
	pthread_cond_destroy(&fid->cond);
	free(fid->qp_init_attr);
	free(fid);
}

static int face_create_id(struct rdma_event_channel *channel,
			  struct rdma_cm_id **id_p, void *context,
			  enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct rdma_event_channel *ch = channel;
	struct face_id *fid;
	int ret;

	if (!id_p)
		return face_err(EINVAL);
	ret = face_init();
	if (ret)
		return face_err(ret);
	if (!ch) {
		ch = rdma_create_event_channel();
		if (!ch)
			return -1;
	}
	fid = face_id_new(to_fch(ch), context, ps, qp_type);
	if (!fid) {
		ret = ENOMEM;
		goto err;
	}
	fid->sync = !channel;
	ret = emu_cm_id_create(face_hca, to_fch(ch)->emu, (uintptr_t)fid, ps,
			       qp_type, &fid->emu);
	if (ret) {
		face_id_free(fid);
		goto err;
	}
	face_real_id_create(fid, to_fch(ch));
	*id_p = &fid->id;
	return 0;
err:
	if (!channel)
		rdma_destroy_event_channel(ch);
	return face_err(ret);
}

static enum ibv_qp_type face_ps_qp_type(enum rdma_port_space ps)
{
	return ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB ? IBV_QPT_UD
							: IBV_QPT_RC;
}

IBEMU_EXPORT int rdma_create_id(struct rdma_event_channel *channel,
				struct rdma_cm_id **id, void *context,
				enum rdma_port_space ps)
{
	FACE_PASS(create_id, channel, id, context, ps);
	return face_create_id(channel, id, context, ps, face_ps_qp_type(ps));
}

IBEMU_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	FACE_PASS(destroy_id, id);
	struct face_id *fid = to_fid(id);
	struct rdma_event_channel *ch;
	unsigned int delivered;

	if (!id)
		return face_err(EINVAL);
	ch = id->channel;
	if (id->event) {
		rdma_ack_cm_event(id->event);
		id->event = NULL;
	}
	if (fid->emu)
		face_mcast_id_destroy(id);
	/* the real librdmacm waits for its own acknowledgements */
	if (fid->real)
		CM_REAL(cm_real.destroy_id(fid->real));
	/* As librdmacm, which destroys the kernel's id and then waits: no
	 * event comes after the close, and the events reported must be
	 * acknowledged first (counted as the emulator handed them out, so
	 * an event another thread is still turning into a struct
	 * rdma_cm_event counts).  That thread may still call on the
	 * emulator's id (face_sync_route, face_modify_rtr...): its memory
	 * goes only after the wait, and a closed id refuses those calls. */
	delivered = fid->emu ? emu_cm_id_close(fid->emu) : 0;
	pthread_mutex_lock(&fid->lock);
	while (fid->acked < delivered)
		pthread_cond_wait(&fid->cond, &fid->lock);
	pthread_mutex_unlock(&fid->lock);
	if (fid->emu)
		emu_cm_id_free(fid->emu);
	if (fid->sync)
		rdma_destroy_event_channel(ch);
	face_id_free(fid);
	return 0;
}

struct emu_cm_id *face_emu_id(struct rdma_cm_id *id)
{
	return to_fid(id)->emu;
}

IBEMU_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
				 struct rdma_event_channel *channel)
{
	FACE_PASS(migrate_id, id, channel);
	struct face_id *fid = to_fid(id);
	struct rdma_event_channel *old, *ch = channel;
	bool sync = !channel;
	unsigned int delivered;
	int ret;

	if (!id || (fid->sync && !channel))
		return face_err(EINVAL);
	if (fid->where == FACE_BOTH)
		face_real_keep(fid, FACE_EMU); /* nothing decided it yet */
	if (!ch) {
		ch = rdma_create_event_channel();
		if (!ch)
			return -1;
	}
	old = id->channel;
	if (fid->where == FACE_REAL) {
		/* the real library waits for its own acknowledgements */
		delivered = 0;
		ret = !to_fch(ch)->real ? EINVAL
		      : CM_REAL(cm_real.migrate_id(fid->real, to_fch(ch)->real))
			      ? errno
			      : 0;
	} else {
		ret = emu_cm_id_migrate(fid->emu, to_fch(ch)->emu, &delivered);
	}
	if (ret) {
		if (sync)
			rdma_destroy_event_channel(ch);
		return face_err(ret);
	}
	if (fid->sync) {
		if (id->event) {
			rdma_ack_cm_event(id->event);
			id->event = NULL;
		}
		rdma_destroy_event_channel(old);
	}
	/* As librdmacm: the events already reported on the old channel are
	 * acknowledged before the id is the new channel's. */
	pthread_mutex_lock(&fid->lock);
	fid->sync = sync;
	id->channel = ch;
	while (fid->acked < delivered)
		pthread_cond_wait(&fid->cond, &fid->lock);
	pthread_mutex_unlock(&fid->lock);
	return 0;
}

/* ---- devices ---- */

IBEMU_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int n = 0;

	FACE_PASS(get_devices, num_devices);
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	if (!face_init())
		list[n++] = face_verbs;
	/* and the kernel's devices, as the real librdmacm lists them */
	if (cm_real_open())
		list = face_real_devices(list, &n);
	if (num_devices)
		*num_devices = list ? n : 0;
	return list;
}

IBEMU_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	FACE_PASS_VOID(free_devices, list);
	if (!list)
		return;
	if (cm_real_open())
		face_real_free_devices(list);
	else
		free(list);
}

/* ---- endpoints (synchronous) ---- */

IBEMU_EXPORT int rdma_create_ep(struct rdma_cm_id **id,
				struct rdma_addrinfo *res, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	FACE_PASS(create_ep, id, res, pd, qp_init_attr);
	struct rdma_cm_id *cm_id;
	struct face_id *fid;
	int ret;

	if (!id || !res)
		return face_err(EINVAL);
	ret = face_create_id(NULL, &cm_id, NULL,
			     (enum rdma_port_space)res->ai_port_space,
			     (enum ibv_qp_type)res->ai_qp_type);
	if (ret)
		return ret;
	fid = to_fid(cm_id);
	if (res->ai_flags & RAI_PASSIVE) {
		ret = rdma_bind_addr(cm_id, res->ai_src_addr);
		if (ret)
			goto err;
		if (qp_init_attr) {
			fid->qp_init_attr = malloc(sizeof(*qp_init_attr));
			if (!fid->qp_init_attr) {
				ret = face_err(ENOMEM);
				goto err;
			}
			*fid->qp_init_attr = *qp_init_attr;
			fid->qp_init_attr->qp_type =
				(enum ibv_qp_type)res->ai_qp_type;
		}
		if (pd)
			cm_id->pd = pd;
		*id = cm_id;
		return 0;
	}
	ret = rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr,
				2000);
	if (ret)
		goto err;
	ret = rdma_resolve_route(cm_id, 2000);
	if (ret)
		goto err;
	if (qp_init_attr) {
		qp_init_attr->qp_type = (enum ibv_qp_type)res->ai_qp_type;
		ret = rdma_create_qp(cm_id, pd, qp_init_attr);
		if (ret)
			goto err;
	}
	if (pd)
		cm_id->pd = pd;
	*id = cm_id;
	return 0;
err:
	{
		int e = errno;

		rdma_destroy_ep(cm_id);
		errno = e;
	}
	return ret;
}

IBEMU_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	FACE_PASS_VOID(destroy_ep, id);
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
