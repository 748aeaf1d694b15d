// SPDX-License-Identifier: MIT
/*
 * Event channels and events of the librdmacm face (rdmacm.c):
 * rdma_create_event_channel, rdma_get_cm_event (the emulator's events
 * made into librdmacm's, a connection request's new id made) and
 * rdma_ack_cm_event, and a synchronous id's wait for its event.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/rdma_cma.h>

#include "ibemu.h"
#include "cm.h"
#include "log.h"
#include "rdmacm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- event channels ---- */

/*
 * A destroyed channel's memory is kept for a while: a program may still
 * call rdma_get_cm_event on it from another thread (rping of rdma-core
 * 44 does on its exit path, fixed upstream in commit f3ae6534a).  The
 * real librdmacm then reads a closed descriptor and fails with EBADF;
 * here the channel is marked dead and the late call fails the same way
 * instead of reading freed memory.  The last FACE_CHAN_KEPT destroyed
 * channels are kept, the oldest freed as a new one comes, so the memory
 * stays bounded (about 50 bytes each) while a late call shortly after a
 * destroy, the case seen, is caught.  A channel still being read when it
 * leaves the kept ones is freed by its last reader.
 *
 * Lock rule: face_chan_lock guards every channel's readers, dead and
 * orphan, and face_chan_kept; taken before cm.lock (emu_cm_chan_hold).
 */
#define FACE_CHAN_KEPT 64
static pthread_mutex_t face_chan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct face_chan *face_chan_kept[FACE_CHAN_KEPT];
static unsigned int face_chan_kept_next;

IBEMU_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	FACE_PASS(create_event_channel);
	struct face_chan *fch;
	int ret;

	ret = face_init();
	if (ret) {
		errno = ret;
		return NULL;
	}
	fch = calloc(1, sizeof(*fch));
	if (!fch) {
		errno = ENOMEM;
		return NULL;
	}
	ret = emu_cm_chan_create(face_hca, &fch->emu, &fch->ch.fd);
	if (ret) {
		free(fch);
		errno = ret;
		return NULL;
	}
	fch->emu_fd = fch->ch.fd;
	if (cm_real_open()) {
		ret = face_real_chan_open(fch);
		if (ret)
			ibemu_log_err("rdma_create_event_channel: no real "
				      "librdmacm channel (%s): ibemu's only",
				      strerror(ret));
	}
	return &fch->ch;
}

IBEMU_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *ch)
{
	FACE_PASS_VOID(destroy_event_channel, ch);
	struct face_chan *fch = to_fch(ch);

	struct face_chan *old;
	unsigned int slot;

	if (!ch)
		return;
	pthread_mutex_lock(&face_chan_lock);
	if (fch->dead || emu_cm_chan_destroy(fch->emu)) {
		pthread_mutex_unlock(&face_chan_lock);
		ibemu_log_err("rdma_destroy_event_channel: %s",
			      fch->dead ? "destroyed already"
					: "ids still use it");
		return;
	}
	fch->dead = true;
	slot = face_chan_kept_next++ % FACE_CHAN_KEPT;
	old = face_chan_kept[slot];
	face_chan_kept[slot] = fch;
	if (old && old->readers) {
		old->orphan = true;
		old = NULL;
	}
	pthread_mutex_unlock(&face_chan_lock);
	face_real_chan_close(fch);
	free(old);
}

/* A thread starts reading fch: EBADF if it is destroyed. */
static int face_chan_enter(struct face_chan *fch)
{
	int ret = EBADF;

	pthread_mutex_lock(&face_chan_lock);
	if (!fch->dead)
		ret = emu_cm_chan_hold(fch->emu);
	if (!ret)
		fch->readers++;
	pthread_mutex_unlock(&face_chan_lock);
	return ret;
}

static void face_chan_leave(struct face_chan *fch)
{
	struct emu_cm_chan *emu = fch->emu;
	bool gone;

	pthread_mutex_lock(&face_chan_lock);
	gone = --fch->readers == 0 && fch->orphan;
	pthread_mutex_unlock(&face_chan_lock);
	emu_cm_chan_put(emu);
	if (gone)
		free(fch);
}

/* ---- events ---- */

/* An event of fid's settled: acknowledged, or dropped by the face. */
static void face_ack(struct face_id *fid)
{
	pthread_mutex_lock(&fid->lock);
	fid->acked++;
	pthread_cond_broadcast(&fid->cond);
	pthread_mutex_unlock(&fid->lock);
}

/* A CONNECT_REQUEST's new id; NULL (the request refused) without memory. */
static struct face_id *face_conn_req(struct face_id *l,
				     struct emu_cm_event *eev)
{
	struct face_id *fid;

	fid = face_id_new(to_fch(l->id.channel), l->id.context, l->id.ps,
			  l->id.qp_type);
	if (!fid) {
		emu_cm_id_destroy(eev->new_id);
		return NULL;
	}
	fid->emu = eev->new_id;
	emu_cm_id_set_handle(fid->emu, (uintptr_t)fid);
	fid->resp_res = eev->param.responder_resources;
	fid->init_depth = eev->param.initiator_depth;
	face_sync_route(fid);
	if (l->sync && rdma_migrate_id(&fid->id, NULL)) {
		emu_cm_id_destroy(fid->emu);
		face_id_free(fid);
		return NULL;
	}
	return fid;
}

static int face_get_event(struct rdma_event_channel *channel,
			  struct rdma_cm_event **event);

IBEMU_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel,
				   struct rdma_cm_event **event)
{
	FACE_PASS(get_cm_event, channel, event);
	int ret, err;

	if (!channel || !event)
		return face_err(EINVAL);
	ret = face_chan_enter(to_fch(channel));
	if (ret)
		return face_err(ret);
	ret = face_get_event(channel, event);
	err = errno;
	face_chan_leave(to_fch(channel));
	errno = err;
	return ret;
}

static int face_get_event(struct rdma_event_channel *channel,
			  struct rdma_cm_event **event)
{
	struct face_event *fe;
	struct emu_cm_event eev;
	struct face_id *fid, *nfid;
	int ret;

again:
	ret = emu_cm_get_event(to_fch(channel)->emu, &eev);
	if (ret == EAGAIN && to_fch(channel)->real) {
		/* both sides non-blocking: the real one, then wait */
		ret = face_real_get_event(to_fch(channel), event);
		if (ret != EAGAIN)
			return ret ? face_err(ret) : 0;
		ret = face_real_wait(to_fch(channel));
		if (!ret)
			goto again;
	}
	if (ret)
		return face_err(ret);
	fid = (struct face_id *)(uintptr_t)eev.handle;
	if (!fid)
		goto again;
	fe = calloc(1, sizeof(*fe));
	if (!fe) {
		if (eev.new_id)
			emu_cm_id_destroy(eev.new_id);
		face_ack(fid);
		return face_err(ENOMEM);
	}
	fe->ev.id = &fid->id;
	fe->ev.event = (enum rdma_cm_event_type)eev.event;
	fe->ev.status = eev.status;
	fe->counted = fid;
	memcpy(fe->private_data, eev.param.private_data,
	       sizeof(fe->private_data));
	fe->ev.param.conn.private_data =
		eev.param.private_data_len ? fe->private_data : NULL;
	fe->ev.param.conn.private_data_len = eev.param.private_data_len;
	fe->ev.param.conn.responder_resources = eev.param.responder_resources;
	fe->ev.param.conn.initiator_depth = eev.param.initiator_depth;
	fe->ev.param.conn.flow_control = eev.param.flow_control;
	fe->ev.param.conn.retry_count = eev.param.retry_count;
	fe->ev.param.conn.rnr_retry_count = eev.param.rnr_retry_count;
	fe->ev.param.conn.srq = eev.param.srq;
	fe->ev.param.conn.qp_num = eev.param.qp_num;

	switch (eev.event) {
	case EMU_CM_CONNECT_REQUEST:
		nfid = face_conn_req(fid, &eev);
		if (!nfid) {
			free(fe);
			face_ack(fid);
			goto again;
		}
		fe->ev.listen_id = &fid->id;
		fe->ev.id = &nfid->id;
		if (fid->id.qp_type == IBV_QPT_UD) {
			memset(&fe->ev.param.ud, 0, sizeof(fe->ev.param.ud));
			fe->ev.param.ud.private_data = fe->private_data;
			fe->ev.param.ud.private_data_len =
				eev.param.private_data_len;
		}
		break;
	case EMU_CM_CONNECT_RESPONSE:
		face_sync_route(fid);
		if (!fid->id.qp)
			break;
		/* As librdmacm: a QP of the id is moved to RTR and RTS and
		 * the RTU sent; the application sees ESTABLISHED. */
		ret = face_modify_rtr(fid, RDMA_MAX_RESP_RES);
		if (!ret)
			ret = face_modify_rts(fid, RDMA_MAX_INIT_DEPTH);
		if (!ret)
			ret = emu_cm_establish(fid->emu);
		if (ret) {
			emu_cm_reject(fid->emu, NULL, 0);
			face_modify_err(fid);
			fe->ev.event = RDMA_CM_EVENT_CONNECT_ERROR;
			fe->ev.status = -ret;
		} else {
			fe->ev.event = RDMA_CM_EVENT_ESTABLISHED;
		}
		break;
	case EMU_CM_ESTABLISHED:
		face_sync_route(fid);
		if (fid->id.qp_type == IBV_QPT_UD) {
			memset(&fe->ev.param.ud, 0, sizeof(fe->ev.param.ud));
			fe->ev.param.ud.private_data =
				eev.param.private_data_len ? fe->private_data
							   : NULL;
			fe->ev.param.ud.private_data_len =
				eev.param.private_data_len;
			fe->ev.param.ud.ah_attr = eev.param.ah_attr;
			fe->ev.param.ud.qp_num = eev.param.qp_num;
			fe->ev.param.ud.qkey = eev.param.qkey;
		}
		break;
	case EMU_CM_MULTICAST_JOIN:
	case EMU_CM_MULTICAST_ERROR:
		face_mcast_event(&fid->id, &fe->ev, &eev);
		break;
	case EMU_CM_REJECTED:
		/* as librdmacm: a refused connection's QP is done */
		face_modify_err(fid);
		break;
	default:
		face_sync_route(fid);
		break;
	}
	*event = &fe->ev;
	return 0;
}

IBEMU_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	FACE_PASS(ack_cm_event, event);
	struct face_event *fe = (struct face_event *)event;
	struct face_id *fid;

	if (!event)
		return face_err(EINVAL);
	if (fe->real) {
		CM_REAL(cm_real.ack_cm_event(fe->real));
		free(fe);
		return 0;
	}
	fid = fe->counted;
	free(fe);
	face_ack(fid);
	return 0;
}

/* A synchronous id waits for the event of what it started (librdmacm's
 * ucma_complete); the event stays in id->event until the next. */
int face_complete(struct face_id *fid)
{
	struct rdma_cm_event *ev;

	if (!fid->sync)
		return 0;
	if (fid->id.event) {
		rdma_ack_cm_event(fid->id.event);
		fid->id.event = NULL;
	}
	if (rdma_get_cm_event(fid->id.channel, &fid->id.event))
		return -1;
	ev = fid->id.event;
	if (!ev->status)
		return 0;
	if (ev->event == RDMA_CM_EVENT_REJECTED)
		return face_err(ECONNREFUSED);
	return face_err(ev->status < 0 ? -ev->status : ev->status);
}

/* A call that starts something on a real id, whose result ret is:
 * a synchronous id then waits for the event, as on ibemu's. */
int face_started(struct face_id *fid, int ret)
{
	return ret ? ret : face_complete(fid);
}

int face_complete_id(struct rdma_cm_id *id)
{
	return face_complete(to_fid(id));
}

/* ---- strings ---- */

IBEMU_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const names[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED",
		"RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED",
		"RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST",
		"RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR",
		"RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED",
		"RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED",
		"RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN",
		"RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE",
		"RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};

	if ((unsigned int)event < sizeof(names) / sizeof(names[0]))
		return names[event];
	return "UNKNOWN EVENT";
}
