// SPDX-License-Identifier: MIT
/*
 * The librdmacm face (doc/design.md, "The RDMA CM"): the public
 * librdmacm API (rdma_cma.h, and through it the inline helpers of
 * rdma_verbs.h) on top of the emulator's CM (emulator/cm.h).
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
 * Verbs are called through libibverbs (ibemu_verbs_sym): QPs made here
 * are ordinary QPs of the ibemu device.
 *
 * Lock rule: face_lock guards the device and its XRC domain (opened
 * once, kept for the process's life, as librdmacm keeps its devices);
 * each id's lock its event counts.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "ibemu.h"
#include "cm.h"
#include "hca.h"
#include "log.h"
#include "rdmacm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- libibverbs, found at run time ---- */

static struct {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe,
				    void *cq_context,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int mask);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*query_device)(struct ibv_context *ctx,
			    struct ibv_device_attr *attr);
} verbs;

static pthread_mutex_t face_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibv_context *face_verbs; /* ibemu0, kept open */
static struct ibv_pd *face_pd; /* its default PD (rdma_create_qp) */
static struct ibv_xrcd *face_xrcd; /* XRC ids' domain, opened when needed */
static struct emu_hca *face_hca;
static uint8_t face_max_rd_atom, face_max_init_rd_atom;

int face_err(int err)
{
	errno = err;
	return -1;
}

#define VSYM(field, name, ver)                                                 \
	do {                                                                   \
		*(void **)&verbs.field = ibemu_verbs_sym(name, ver);           \
		if (!verbs.field)                                              \
			goto out;                                              \
	} while (0)

/* Resolve libibverbs and open ibemu0 once; 0 or a positive errno. */
static int face_init(void)
{
	struct ibv_device **list;
	struct ibv_device_attr da;
	int i, n = 0, ret = ENODEV;

	pthread_mutex_lock(&face_lock);
	if (face_verbs) {
		ret = 0;
		goto out;
	}
	VSYM(get_device_list, "ibv_get_device_list", "IBVERBS_1.1");
	VSYM(free_device_list, "ibv_free_device_list", "IBVERBS_1.1");
	VSYM(open_device, "ibv_open_device", "IBVERBS_1.1");
	VSYM(alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1");
	VSYM(create_cq, "ibv_create_cq", "IBVERBS_1.1");
	VSYM(destroy_cq, "ibv_destroy_cq", "IBVERBS_1.1");
	VSYM(destroy_comp_channel, "ibv_destroy_comp_channel", "IBVERBS_1.0");
	VSYM(create_qp, "ibv_create_qp", "IBVERBS_1.1");
	VSYM(destroy_qp, "ibv_destroy_qp", "IBVERBS_1.1");
	VSYM(modify_qp, "ibv_modify_qp", "IBVERBS_1.1");
	VSYM(create_srq, "ibv_create_srq", "IBVERBS_1.1");
	VSYM(destroy_srq, "ibv_destroy_srq", "IBVERBS_1.1");
	VSYM(query_device, "ibv_query_device", "IBVERBS_1.1");
	/* Our own interposer: the list with ibemu0 in it. */
	list = ibv_get_device_list(&n);
	if (!list)
		goto out;
	for (i = 0; i < n && !face_verbs; i++) {
		struct ibv_context *ctx;

		if (strcmp(list[i]->name, IBEMU_DEVICE_NAME))
			continue;
		ctx = verbs.open_device(list[i]);
		if (ctx && ibemu_is_ours(ctx))
			face_verbs = ctx;
	}
	verbs.free_device_list(list);
	if (!face_verbs)
		goto out;
	face_hca = to_ectx(face_verbs)->hca;
	face_pd = verbs.alloc_pd(face_verbs);
	ret = emu_cm_open(face_hca);
	if (!verbs.query_device(face_verbs, &da)) {
		face_max_rd_atom = (uint8_t)(da.max_qp_rd_atom > 255
						     ? 255
						     : da.max_qp_rd_atom);
		face_max_init_rd_atom =
			(uint8_t)(da.max_qp_init_rd_atom > 255
					  ? 255
					  : da.max_qp_init_rd_atom);
	}
out:
	pthread_mutex_unlock(&face_lock);
	if (ret)
		ibemu_log_err("rdma_cm: no ibemu device: %s", strerror(ret));
	return ret;
}

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
	if (cm_real_inside())
		return cm_real.create_event_channel();
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
	if (cm_real_inside()) {
		cm_real.destroy_event_channel(ch);
		return;
	}
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

/* ---- ids ---- */

/* id's addresses and route as the emulator has them. */
static void face_sync_route(struct face_id *fid)
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
	if (cm_real_inside())
		return cm_real.create_id(channel, id, context, ps);
	return face_create_id(channel, id, context, ps, face_ps_qp_type(ps));
}

IBEMU_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	if (cm_real_inside())
		return cm_real.destroy_id(id);
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

/* ---- events ---- */

static int face_modify_rtr(struct face_id *fid, uint8_t resp_res)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	/* INIT again: the access flags the connection allows. */
	attr.qp_state = IBV_QPS_INIT;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (!ret)
		ret = verbs.modify_qp(fid->id.qp, &attr, mask);
	if (ret)
		return ret;
	attr.qp_state = IBV_QPS_RTR;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (ret)
		return ret;
	if (resp_res != RDMA_MAX_RESP_RES)
		attr.max_dest_rd_atomic = resp_res;
	return verbs.modify_qp(fid->id.qp, &attr, mask);
}

static int face_modify_rts(struct face_id *fid, uint8_t init_depth)
{
	struct ibv_qp_attr attr;
	int mask, ret;

	attr.qp_state = IBV_QPS_RTS;
	ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
	if (ret)
		return ret;
	if (init_depth != RDMA_MAX_INIT_DEPTH)
		attr.max_rd_atomic = init_depth;
	return verbs.modify_qp(fid->id.qp, &attr, mask);
}

static int face_modify_err(struct face_id *fid)
{
	struct ibv_qp_attr attr = { .qp_state = IBV_QPS_ERR };

	if (!fid->id.qp)
		return 0;
	return verbs.modify_qp(fid->id.qp, &attr, IBV_QP_STATE);
}

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
	if (cm_real_inside())
		return cm_real.get_cm_event(channel, event);
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
	if (cm_real_inside())
		return cm_real.ack_cm_event(event);
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
static int face_complete(struct face_id *fid)
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
static int face_started(struct face_id *fid, int ret)
{
	return ret ? ret : face_complete(fid);
}

struct emu_cm_id *face_emu_id(struct rdma_cm_id *id)
{
	return to_fid(id)->emu;
}

int face_complete_id(struct rdma_cm_id *id)
{
	return face_complete(to_fid(id));
}

/* ---- addresses and routes ---- */

IBEMU_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	if (cm_real_inside())
		return cm_real.bind_addr(id, addr);
	int ret;

	if (!id || !addr)
		return face_err(EINVAL);
	face_real_route_local(to_fid(id), addr);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, bind_addr, addr);
	ret = emu_cm_bind(to_fid(id)->emu, addr);
	if (ret)
		return face_err(ret);
	face_sync_route(to_fid(id));
	/* any address: the real twin binds it too, or is given up */
	if (to_fid(id)->where == FACE_BOTH &&
	    CM_REAL(cm_real.bind_addr(to_fid(id)->real, addr)))
		face_real_keep(to_fid(id), FACE_EMU);
	return 0;
}

IBEMU_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id,
				   struct sockaddr *src_addr,
				   struct sockaddr *dst_addr, int timeout_ms)
{
	int ret;

	if (cm_real_inside())
		return cm_real.resolve_addr(id, src_addr, dst_addr, timeout_ms);
	if (!id || !dst_addr)
		return face_err(EINVAL);
	face_real_route_dst(to_fid(id), src_addr, dst_addr);
	if (face_is_real(id))
		return face_started(to_fid(id),
				    FACE_REAL_CALL(id, resolve_addr, src_addr,
						   dst_addr, timeout_ms));
	ret = emu_cm_resolve_addr(to_fid(id)->emu, src_addr, dst_addr,
				  timeout_ms);
	if (ret)
		return face_err(ret);
	memcpy(&id->route.addr.dst_storage, dst_addr,
	       dst_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					       : sizeof(struct sockaddr_in));
	return face_complete(to_fid(id));
}

IBEMU_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	int ret;

	if (cm_real_inside())
		return cm_real.resolve_route(id, timeout_ms);
	if (!id)
		return face_err(EINVAL);
	if (face_is_real(id))
		return face_started(to_fid(id),
				    FACE_REAL_CALL(id, resolve_route,
						   timeout_ms));
	ret = emu_cm_resolve_route(to_fid(id)->emu, timeout_ms);
	if (ret)
		return face_err(ret);
	return face_complete(to_fid(id));
}

IBEMU_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	if (cm_real_inside())
		return cm_real.listen(id, backlog);
	int ret;

	if (!id)
		return face_err(EINVAL);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, listen, backlog);
	ret = emu_cm_listen(to_fid(id)->emu, backlog);
	if (ret)
		return face_err(ret);
	face_sync_route(to_fid(id));
	/* a listener on any address takes the real device's requests too */
	if (to_fid(id)->where == FACE_BOTH &&
	    CM_REAL(cm_real.listen(to_fid(id)->real, backlog)))
		face_real_keep(to_fid(id), FACE_EMU);
	return 0;
}

IBEMU_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id,
				   struct ibv_qp_attr *qp_attr,
				   int *qp_attr_mask)
{
	if (cm_real_inside())
		return cm_real.init_qp_attr(id, qp_attr, qp_attr_mask);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, init_qp_attr, qp_attr, qp_attr_mask);
	int ret;

	if (!id || !qp_attr || !qp_attr_mask)
		return face_err(EINVAL);
	ret = emu_cm_init_qp_attr(to_fid(id)->emu, qp_attr, qp_attr_mask);
	return ret ? face_err(ret) : 0;
}

/* ---- QPs, SRQs and their CQs ---- */

/* The device's XRC domain for XRC receive ids that bring none, opened
 * on first use and kept, as librdmacm keeps one per device; NULL and
 * errno set when it cannot be opened. */
static struct ibv_xrcd *face_get_xrcd(void)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1,
		.oflags = O_CREAT,
	};
	struct ibv_xrcd *xrcd;

	pthread_mutex_lock(&face_lock);
	if (!face_xrcd)
		face_xrcd = ibv_open_xrcd(face_verbs, &xa);
	xrcd = face_xrcd;
	pthread_mutex_unlock(&face_lock);
	return xrcd;
}

static void face_destroy_cqs(struct rdma_cm_id *id)
{
	if (id->qp_type == IBV_QPT_XRC_RECV && id->srq)
		return;
	if (id->recv_cq) {
		verbs.destroy_cq(id->recv_cq);
		if (id->send_cq == id->recv_cq)
			id->send_cq = NULL;
		id->recv_cq = NULL;
	}
	if (id->recv_cq_channel) {
		verbs.destroy_comp_channel(id->recv_cq_channel);
		if (id->send_cq_channel == id->recv_cq_channel)
			id->send_cq_channel = NULL;
		id->recv_cq_channel = NULL;
	}
	if (id->send_cq) {
		verbs.destroy_cq(id->send_cq);
		id->send_cq = NULL;
	}
	if (id->send_cq_channel) {
		verbs.destroy_comp_channel(id->send_cq_channel);
		id->send_cq_channel = NULL;
	}
}

/* CQs with completion channels for the queues not given (librdmacm's
 * ucma_create_cqs: what rdma_get_send_comp/recv_comp wait on). */
static int face_create_cqs(struct rdma_cm_id *id, uint32_t send_size,
			   uint32_t recv_size)
{
	if (recv_size) {
		id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->recv_cq_channel)
			goto err;
		id->recv_cq = verbs.create_cq(id->verbs, (int)recv_size, id,
					      id->recv_cq_channel, 0);
		if (!id->recv_cq)
			goto err;
	}
	if (send_size) {
		id->send_cq_channel = ibv_create_comp_channel(id->verbs);
		if (!id->send_cq_channel)
			goto err;
		id->send_cq = verbs.create_cq(id->verbs, (int)send_size, id,
					      id->send_cq_channel, 0);
		if (!id->send_cq)
			goto err;
	}
	return 0;
err:
	face_destroy_cqs(id);
	return ENOMEM;
}

/* A new QP of the id moved as librdmacm moves it: INIT (connected
 * QPs), INIT, RTR and RTS (UD: no connection to wait for). */
static int face_init_qp(struct face_id *fid, struct ibv_qp *qp)
{
	struct ibv_qp_attr attr;
	enum ibv_qp_state s;
	int mask, ret;

	for (s = IBV_QPS_INIT; s <= IBV_QPS_RTS; s++) {
		attr.qp_state = s;
		ret = emu_cm_init_qp_attr(fid->emu, &attr, &mask);
		if (!ret)
			ret = verbs.modify_qp(qp, &attr, mask);
		if (ret)
			return ret;
		if (fid->id.qp_type != IBV_QPT_UD)
			break;
	}
	return 0;
}

IBEMU_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id,
				   struct ibv_qp_init_attr_ex *attr)
{
	if (cm_real_inside())
		return cm_real.create_qp_ex(id, attr);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, create_qp_ex, attr);
	struct face_id *fid = to_fid(id);
	struct ibv_qp_init_attr a;
	struct verbs_context *vctx;
	struct ibv_qp *qp;
	int ret;

	if (!id || !attr || id->qp)
		return face_err(EINVAL);
	if (!id->verbs)
		return face_err(EINVAL);
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_PD) && attr->pd &&
	    attr->pd->context != id->verbs)
		return face_err(EINVAL);
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
		attr->pd = id->pd ? id->pd : face_pd;
		attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
	}
	if (id->qp_type == IBV_QPT_XRC_RECV &&
	    (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
		attr->xrcd = face_get_xrcd();
		if (!attr->xrcd)
			return -1;
		attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
	}
	if (!attr->srq && id->srq && id->qp_type != IBV_QPT_XRC_RECV)
		attr->srq = id->srq;
	ret = face_create_cqs(id, attr->send_cq ? 0 : attr->cap.max_send_wr,
			      attr->recv_cq || attr->srq
				      ? 0
				      : attr->cap.max_recv_wr);
	if (ret)
		return face_err(ret);
	if (!attr->send_cq)
		attr->send_cq = id->send_cq;
	if (!attr->recv_cq)
		attr->recv_cq = id->recv_cq ? id->recv_cq : id->send_cq;
	if (attr->comp_mask == IBV_QP_INIT_ATTR_PD) {
		memset(&a, 0, sizeof(a));
		a.qp_context = attr->qp_context;
		a.send_cq = attr->send_cq;
		a.recv_cq = attr->recv_cq;
		a.srq = attr->srq;
		a.cap = attr->cap;
		a.qp_type = attr->qp_type;
		a.sq_sig_all = attr->sq_sig_all;
		qp = verbs.create_qp(attr->pd, &a);
		attr->cap = a.cap;
	} else {
		vctx = verbs_get_ctx_op(id->verbs, create_qp_ex);
		qp = vctx ? vctx->create_qp_ex(id->verbs, attr) : NULL;
		if (!vctx)
			errno = EOPNOTSUPP;
	}
	if (!qp) {
		ret = errno ? errno : ENOMEM;
		goto err_cqs;
	}
	ret = face_init_qp(fid, qp);
	if (ret) {
		verbs.destroy_qp(qp);
		goto err_cqs;
	}
	id->qp = qp;
	id->pd = attr->pd;
	return 0;
err_cqs:
	face_destroy_cqs(id);
	return face_err(ret);
}

IBEMU_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	if (cm_real_inside())
		return cm_real.create_qp(id, pd, qp_init_attr);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, create_qp, pd, qp_init_attr);
	struct ibv_qp_init_attr_ex ax;
	int ret;

	if (!id || !qp_init_attr)
		return face_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.qp_context = qp_init_attr->qp_context;
	ax.send_cq = qp_init_attr->send_cq;
	ax.recv_cq = qp_init_attr->recv_cq;
	ax.srq = qp_init_attr->srq;
	ax.cap = qp_init_attr->cap;
	ax.qp_type = qp_init_attr->qp_type;
	ax.sq_sig_all = qp_init_attr->sq_sig_all;
	ax.comp_mask = IBV_QP_INIT_ATTR_PD;
	ax.pd = pd;
	ret = rdma_create_qp_ex(id, &ax);
	if (!ret) {
		qp_init_attr->cap = ax.cap;
		qp_init_attr->send_cq = ax.send_cq;
		qp_init_attr->recv_cq = ax.recv_cq;
	}
	return ret;
}

IBEMU_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	if (cm_real_inside()) {
		cm_real.destroy_qp(id);
		return;
	}
	if (face_is_real(id)) {
		CM_REAL_VOID(cm_real.destroy_qp(to_fid(id)->real));
		face_real_mirror(to_fid(id));
		return;
	}
	if (!id || !id->qp)
		return;
	verbs.destroy_qp(id->qp);
	id->qp = NULL;
	face_destroy_cqs(id);
}

/* An XRC SRQ as librdmacm makes it: in the device's domain unless one
 * is given, completing on the id's receive CQ (made here when there is
 * none, with its channel, for rdma_get_recv_comp). */
static int face_create_xrc_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
			       struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq *srq;
	bool own_cq = false;
	int ret;

	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
		attr->xrcd = face_get_xrcd();
		if (!attr->xrcd)
			return -1;
	}
	if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
		if (!id->recv_cq) {
			ret = face_create_cqs(id, 0, attr->attr.max_wr);
			if (ret)
				return face_err(ret);
			own_cq = true;
		}
		attr->cq = id->recv_cq;
	}
	attr->pd = pd;
	attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
			   IBV_SRQ_INIT_ATTR_CQ;
	srq = ibv_create_srq_ex(id->verbs, attr);
	if (!srq) {
		ret = errno;
		if (own_cq)
			face_destroy_cqs(id);
		return face_err(ret);
	}
	if (!id->pd)
		id->pd = pd;
	id->srq = srq;
	return 0;
}

IBEMU_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id,
				    struct ibv_srq_init_attr_ex *attr)
{
	if (cm_real_inside())
		return cm_real.create_srq_ex(id, attr);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, create_srq_ex, attr);
	struct ibv_srq_init_attr a;
	struct ibv_pd *pd;
	struct ibv_srq *srq;

	if (!id || !attr || !id->verbs || id->srq)
		return face_err(EINVAL);
	pd = (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) && attr->pd
		     ? attr->pd
		     : (id->pd ? id->pd : face_pd);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type == IBV_SRQT_XRC)
		return face_create_xrc_srq(id, pd, attr);
	if ((attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) &&
	    attr->srq_type != IBV_SRQT_BASIC)
		return face_err(EOPNOTSUPP);
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	srq = verbs.create_srq(pd, &a);
	if (!srq)
		return -1;
	attr->attr = a.attr;
	id->srq = srq;
	return 0;
}

IBEMU_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd,
				 struct ibv_srq_init_attr *attr)
{
	if (cm_real_inside())
		return cm_real.create_srq(id, pd, attr);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, create_srq, pd, attr);
	struct ibv_srq_init_attr_ex ax;
	int ret;

	if (!attr)
		return face_err(EINVAL);
	memset(&ax, 0, sizeof(ax));
	ax.srq_context = attr->srq_context;
	ax.attr = attr->attr;
	ax.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
	/* an XRC receive id's SRQ is an XRC SRQ (librdmacm) */
	ax.srq_type = IBV_SRQT_BASIC;
	if (id && id->qp_type == IBV_QPT_XRC_RECV)
		ax.srq_type = IBV_SRQT_XRC;
	ax.pd = pd;
	ret = rdma_create_srq_ex(id, &ax);
	if (!ret)
		attr->attr = ax.attr;
	return ret;
}

IBEMU_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	if (cm_real_inside()) {
		cm_real.destroy_srq(id);
		return;
	}
	if (face_is_real(id)) {
		CM_REAL_VOID(cm_real.destroy_srq(to_fid(id)->real));
		face_real_mirror(to_fid(id));
		return;
	}
	if (!id || !id->srq)
		return;
	verbs.destroy_srq(id->srq);
	id->srq = NULL;
	/* an XRC receive id's CQs outlive its QP for the SRQ */
	if (!id->qp)
		face_destroy_cqs(id);
}

/* ---- connections ---- */

/*
 * Connection parameters as the emulator takes them, as librdmacm makes
 * them: resources beyond the device's refused (port space TCP), the
 * RDMA_MAX_* values meaning "as many as allowed" (dflt_*: the device's
 * on connect, the requester's bounded by the device's on accept);
 * retries 7 without parameters.  limit: the consumer's share of the
 * message's private data.
 */
static int face_conn(struct face_id *fid, const struct rdma_conn_param *p,
		     struct emu_cm_conn *c, unsigned int limit,
		     uint8_t dflt_resp, uint8_t dflt_init)
{
	memset(c, 0, sizeof(*c));
	if (fid->id.ps == RDMA_PS_TCP) {
		if (!fid->id.qp && !p)
			return EINVAL;
		if (p && p->responder_resources != RDMA_MAX_RESP_RES &&
		    p->responder_resources > face_max_rd_atom)
			return EINVAL;
		if (p && p->initiator_depth != RDMA_MAX_INIT_DEPTH &&
		    p->initiator_depth > face_max_init_rd_atom)
			return EINVAL;
	}
	c->responder_resources = p && p->responder_resources !=
						      RDMA_MAX_RESP_RES
					 ? p->responder_resources
					 : dflt_resp;
	c->initiator_depth = p && p->initiator_depth != RDMA_MAX_INIT_DEPTH
				     ? p->initiator_depth
				     : dflt_init;
	c->retry_count = 7;
	c->rnr_retry_count = 7;
	if (p) {
		if (p->private_data_len > limit ||
		    (p->private_data_len && !p->private_data))
			return EINVAL;
		if (p->private_data_len)
			memcpy(c->private_data, p->private_data,
			       p->private_data_len);
		c->private_data_len = p->private_data_len;
		c->flow_control = p->flow_control;
		c->retry_count = p->retry_count & 7;
		c->rnr_retry_count = p->rnr_retry_count & 7;
		c->srq = p->srq;
		c->qp_num = p->qp_num;
	}
	if (fid->id.qp) {
		c->qp_num = fid->id.qp->qp_num;
		c->srq = fid->id.qp->srq != NULL;
	}
	return 0;
}

static uint8_t face_min(uint8_t a, uint8_t b)
{
	return a < b ? a : b;
}

IBEMU_EXPORT int rdma_connect(struct rdma_cm_id *id,
			      struct rdma_conn_param *conn_param)
{
	struct face_id *fid = to_fid(id);
	struct emu_cm_conn c;
	int ret;

	if (cm_real_inside())
		return cm_real.connect(id, conn_param);
	if (face_is_real(id))
		return face_started(fid,
				    FACE_REAL_CALL(id, connect, conn_param));
	if (!id)
		return face_err(EINVAL);
	/* IBA 12.6.5 and 12.11.1 less the IP CM header (A11.6): 56 bytes
	 * in a REQ, 180 in a SIDR_REQ */
	ret = face_conn(fid, conn_param, &c,
			id->qp_type == IBV_QPT_UD ? 180 : 56,
			face_max_rd_atom, face_max_init_rd_atom);
	if (!ret)
		ret = emu_cm_connect(fid->emu, &c);
	if (ret)
		return face_err(ret);
	return face_complete(fid);
}

IBEMU_EXPORT int rdma_accept(struct rdma_cm_id *id,
			     struct rdma_conn_param *conn_param)
{
	struct face_id *fid = to_fid(id);
	struct emu_cm_conn c;
	int ret;

	if (cm_real_inside())
		return cm_real.accept(id, conn_param);
	if (face_is_real(id))
		return face_started(fid,
				    FACE_REAL_CALL(id, accept, conn_param));
	if (!id)
		return face_err(EINVAL);
	/* IBA 12.6.8: 196 bytes in a REP; 12.11.2: 136 in a SIDR_REP */
	ret = face_conn(fid, conn_param, &c,
			id->qp_type == IBV_QPT_UD ? 136 : 196,
			face_min(fid->resp_res, face_max_rd_atom),
			face_min(fid->init_depth, face_max_init_rd_atom));
	if (ret)
		return face_err(ret);
	if (id->qp_type == IBV_QPT_UD) {
		if (id->qp) {
			struct ibv_qp_attr qa;
			int mask;

			qa.qp_state = IBV_QPS_INIT;
			if (!emu_cm_init_qp_attr(fid->emu, &qa, &mask))
				c.qkey = qa.qkey;
		}
		ret = emu_cm_accept(fid->emu, &c);
		return ret ? face_err(ret) : 0;
	}
	/* The QP is ready to receive before the REP leaves (librdmacm). */
	if (id->qp) {
		ret = face_modify_rtr(fid, c.responder_resources);
		if (!ret)
			ret = face_modify_rts(fid, c.initiator_depth);
		if (ret)
			return face_err(ret);
	}
	ret = emu_cm_accept(fid->emu, &c);
	if (ret) {
		face_modify_err(fid);
		return face_err(ret);
	}
	return face_complete(fid);
}

IBEMU_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data,
			     uint8_t private_data_len)
{
	if (cm_real_inside())
		return cm_real.reject(id, private_data, private_data_len);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, reject, private_data,
				      private_data_len);
	int ret;

	if (!id || (private_data_len && !private_data))
		return face_err(EINVAL);
	ret = emu_cm_reject(to_fid(id)->emu, private_data, private_data_len);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_reject_ece(struct rdma_cm_id *id,
				 const void *private_data,
				 uint8_t private_data_len)
{
	if (cm_real_inside())
		return cm_real.reject_ece(id, private_data, private_data_len);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, reject_ece, private_data,
				      private_data_len);
	return rdma_reject(id, private_data, private_data_len);
}

IBEMU_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	if (cm_real_inside())
		return cm_real.establish(id);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, establish);
	struct face_id *fid = to_fid(id);
	int ret = 0;

	if (!id)
		return face_err(EINVAL);
	if (id->qp) {
		ret = face_modify_rtr(fid, RDMA_MAX_RESP_RES);
		if (!ret)
			ret = face_modify_rts(fid, RDMA_MAX_INIT_DEPTH);
	}
	if (!ret)
		ret = emu_cm_establish(fid->emu);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	if (cm_real_inside())
		return cm_real.notify(id, event);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, notify, event);
	if (!id)
		return face_err(EINVAL);
	/* Only communication established means anything to the CM. */
	if (event != IBV_EVENT_COMM_EST)
		return 0;
	return emu_cm_notify(to_fid(id)->emu) ? face_err(EINVAL) : 0;
}

IBEMU_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	if (cm_real_inside())
		return cm_real.disconnect(id);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, disconnect);
	int ret;

	if (!id)
		return face_err(EINVAL);
	/* As librdmacm on InfiniBand: the QP goes to the error state. */
	face_modify_err(to_fid(id));
	ret = emu_cm_disconnect(to_fid(id)->emu);
	return ret ? face_err(ret) : 0;
}

IBEMU_EXPORT int rdma_get_request(struct rdma_cm_id *listen,
				  struct rdma_cm_id **id)
{
	if (cm_real_inside())
		return cm_real.get_request(listen, id);
	struct face_id *l = to_fid(listen);
	struct rdma_cm_event *event;
	struct ibv_qp_init_attr attr;
	int ret, err;

	if (!listen || !id)
		return face_err(EINVAL);
	if (!l->sync)
		return face_err(EINVAL);
	if (listen->event) {
		rdma_ack_cm_event(listen->event);
		listen->event = NULL;
	}
	ret = rdma_get_cm_event(listen->channel, &event);
	if (ret)
		return ret;
	if (event->status) {
		ret = face_err(event->status < 0 ? -event->status
						 : event->status);
		goto err;
	}
	if (event->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		ret = face_err(EINVAL);
		goto err;
	}
	if (l->qp_init_attr) {
		attr = *l->qp_init_attr;
		ret = rdma_create_qp(event->id, listen->pd, &attr);
		if (ret)
			goto err_id;
	}
	*id = event->id;
	(*id)->event = event;
	return 0;
err_id:
	err = errno;
	rdma_destroy_id(event->id);
	errno = err;
err:
	err = errno;
	rdma_ack_cm_event(event);
	errno = err;
	return ret;
}

IBEMU_EXPORT int rdma_migrate_id(struct rdma_cm_id *id,
				 struct rdma_event_channel *channel)
{
	if (cm_real_inside())
		return cm_real.migrate_id(id, channel);
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

/* ---- options ---- */

IBEMU_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level,
				 int optname, void *optval, size_t optlen)
{
	if (cm_real_inside())
		return cm_real.set_option(id, level, optname, optval, optlen);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, set_option, level, optname, optval,
				      optlen);
	int ret = 0;

	if (!id || !optval)
		return face_err(EINVAL);
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != sizeof(uint8_t))
				return face_err(EINVAL);
			return 0; /* one node: no service levels, no loss */
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
	if (cm_real_inside())
		return cm_real.set_local_ece(id, ece);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, set_local_ece, ece);
	if (!id || !ece || id->qp)
		return face_err(EINVAL);
	to_fid(id)->local_ece = *ece;
	return 0;
}

IBEMU_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id,
				     struct ibv_ece *ece)
{
	if (cm_real_inside())
		return cm_real.get_remote_ece(id, ece);
	if (face_is_real(id))
		return FACE_REAL_CALL(id, get_remote_ece, ece);
	if (!id || !ece || id->qp)
		return face_err(EINVAL);
	/* Enhanced connection establishment is not negotiated. */
	memset(ece, 0, sizeof(*ece));
	return 0;
}

/* ---- devices, strings, ports ---- */

IBEMU_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;
	int n = 0;

	if (cm_real_inside())
		return cm_real.get_devices(num_devices);
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
	if (cm_real_inside()) {
		cm_real.free_devices(list);
		return;
	}
	if (!list)
		return;
	if (cm_real_open())
		face_real_free_devices(list);
	else
		free(list);
}

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

static __be16 face_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)->sin_port;
	if (sa->sa_family == AF_INET6)
		return ((const struct sockaddr_in6 *)(const void *)sa)
			->sin6_port;
	return 0;
}

IBEMU_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? face_port(&id->route.addr.src_addr) : 0;
}

IBEMU_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? face_port(&id->route.addr.dst_addr) : 0;
}

/* ---- rdma_getaddrinfo ---- */

static void face_free_ai(struct rdma_addrinfo *ai)
{
	free(ai->ai_src_addr);
	free(ai->ai_dst_addr);
	free(ai->ai_src_canonname);
	free(ai->ai_dst_canonname);
	free(ai->ai_route);
	free(ai->ai_connect);
	free(ai);
}

IBEMU_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	if (cm_real_inside()) {
		cm_real.freeaddrinfo(res);
		return;
	}
	struct rdma_addrinfo *next;

	for (; res; res = next) {
		next = res->ai_next;
		face_free_ai(res);
	}
}

static struct sockaddr *face_sa_dup(const struct sockaddr *sa,
				    socklen_t len)
{
	struct sockaddr *c = malloc(len);

	if (c)
		memcpy(c, sa, len);
	return c;
}

/* The socket hints an rdma_getaddrinfo's hints stand for, as librdmacm
 * converts them: stream sockets for connected QP types, datagrams for
 * UD; TCP for port space TCP, UDP for UDP and IPoIB, either for IB as
 * the QP type says. */
static void face_ai_hints(const struct rdma_addrinfo *hints, struct addrinfo *h)
{
	memset(h, 0, sizeof(*h));
	if (!hints)
		return;
	if (hints->ai_flags & RAI_PASSIVE)
		h->ai_flags |= AI_PASSIVE;
	if (hints->ai_flags & RAI_NUMERICHOST)
		h->ai_flags |= AI_NUMERICHOST;
	if (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
		h->ai_family = hints->ai_family;
	switch (hints->ai_qp_type) {
	case IBV_QPT_RC:
	case IBV_QPT_UC:
	case IBV_QPT_XRC_SEND:
	case IBV_QPT_XRC_RECV:
		h->ai_socktype = SOCK_STREAM;
		break;
	case IBV_QPT_UD:
		h->ai_socktype = SOCK_DGRAM;
		break;
	default:
		break;
	}
	switch (hints->ai_port_space) {
	case RDMA_PS_TCP:
		h->ai_protocol = IPPROTO_TCP;
		break;
	case RDMA_PS_UDP:
	case RDMA_PS_IPOIB:
		h->ai_protocol = IPPROTO_UDP;
		break;
	case RDMA_PS_IB:
		if (h->ai_socktype)
			h->ai_protocol = h->ai_socktype == SOCK_STREAM
						 ? IPPROTO_TCP
						 : IPPROTO_UDP;
		break;
	default:
		break;
	}
}

/* node and service resolved into r (librdmacm's ucma_getaddrinfo): the
 * QP type and port space the hints give, else those of the socket
 * found; the address as the source of a passive lookup, else as the
 * destination.  0, getaddrinfo's error (EAI_*, negative) or a positive
 * errno. */
static int face_ai_lookup(const char *node, const char *service,
			  const struct rdma_addrinfo *hints,
			  struct rdma_addrinfo *r)
{
	struct addrinfo h, *ai = NULL;
	bool passive = hints && (hints->ai_flags & RAI_PASSIVE);
	struct sockaddr **sa;
	socklen_t *len;
	char **canon;
	int gai, ret = 0;

	face_ai_hints(hints, &h);
	gai = getaddrinfo(node, service, &h, &ai);
	if (gai)
		return gai;
	r->ai_qp_type = ai->ai_socktype == SOCK_DGRAM ? IBV_QPT_UD : IBV_QPT_RC;
	if (hints && hints->ai_qp_type)
		r->ai_qp_type = hints->ai_qp_type;
	r->ai_port_space =
		ai->ai_protocol == IPPROTO_UDP ? RDMA_PS_UDP : RDMA_PS_TCP;
	if (hints && hints->ai_port_space)
		r->ai_port_space = hints->ai_port_space;
	r->ai_family = ai->ai_family;
	r->ai_flags = passive ? RAI_PASSIVE : 0;
	sa = passive ? &r->ai_src_addr : &r->ai_dst_addr;
	len = passive ? &r->ai_src_len : &r->ai_dst_len;
	canon = passive ? &r->ai_src_canonname : &r->ai_dst_canonname;
	*sa = face_sa_dup(ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	if (ai->ai_canonname)
		*canon = strdup(ai->ai_canonname);
	if (!*sa || (ai->ai_canonname && !*canon))
		ret = ENOMEM;
	freeaddrinfo(ai);
	return ret;
}

/*
 * As librdmacm's: node and service looked up, or without either the
 * hints taken as they are (their flags, family, QP type, port space
 * and destination); a source address of the hints kept when the lookup
 * gave none.  No AF_IB on one node.
 */
IBEMU_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
				  const struct rdma_addrinfo *hints,
				  struct rdma_addrinfo **res)
{
	struct rdma_addrinfo *r;
	int ret = 0;

	if (cm_real_inside())
		return cm_real.getaddrinfo(node, service, hints, res);
	if (!res || (!node && !service && !hints))
		return face_err(EINVAL);
	if (hints && hints->ai_family == AF_IB)
		return face_err(EAFNOSUPPORT);
	r = calloc(1, sizeof(*r));
	if (!r)
		return face_err(ENOMEM);
	if (node || service) {
		ret = face_ai_lookup(node, service, hints, r);
	} else {
		r->ai_flags = hints->ai_flags;
		r->ai_family = hints->ai_family;
		r->ai_qp_type = hints->ai_qp_type;
		r->ai_port_space = hints->ai_port_space;
		if (hints->ai_dst_addr && hints->ai_dst_len) {
			r->ai_dst_addr = face_sa_dup(hints->ai_dst_addr,
						     hints->ai_dst_len);
			r->ai_dst_len = hints->ai_dst_len;
			if (!r->ai_dst_addr)
				ret = ENOMEM;
		}
	}
	if (!ret && !r->ai_src_len && hints && hints->ai_src_addr &&
	    hints->ai_src_len) {
		r->ai_src_addr = face_sa_dup(hints->ai_src_addr,
					     hints->ai_src_len);
		r->ai_src_len = hints->ai_src_len;
		if (!r->ai_src_addr)
			ret = ENOMEM;
	}
	if (ret) {
		face_free_ai(r);
		/* as librdmacm: a lookup's failure is getaddrinfo's code */
		if (ret < 0)
			return ret;
		return face_err(ret);
	}
	*res = r;
	return 0;
}

/* ---- endpoints (synchronous) ---- */

IBEMU_EXPORT int rdma_create_ep(struct rdma_cm_id **id,
				struct rdma_addrinfo *res, struct ibv_pd *pd,
				struct ibv_qp_init_attr *qp_init_attr)
{
	if (cm_real_inside())
		return cm_real.create_ep(id, res, pd, qp_init_attr);
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
	if (cm_real_inside()) {
		cm_real.destroy_ep(id);
		return;
	}
	if (!id)
		return;
	if (id->qp)
		rdma_destroy_qp(id);
	if (id->srq)
		rdma_destroy_srq(id);
	rdma_destroy_id(id);
}
