// SPDX-License-Identifier: MIT
/*
 * Ids on the kernel's RDMA devices go to the real librdmacm
 * (rdmacm_real.h); ibemu's CM takes the rest.
 *
 * The rule: an address belongs to a kernel RDMA device when the kernel's
 * rdma_cm binds it to one (a real id bound to it gets id->verbs); such
 * an address is the real device's, as it is without ibemu.  Loopback
 * and every other address of the node are ibemu0's (ibemu(7)).  An id
 * is made on both sides and keeps one when an address decides: the
 * local address of rdma_bind_addr, or for rdma_resolve_addr the source
 * address (given, or the one the kernel's routing picks for the
 * destination).  A listener on any address stays on both and takes
 * requests from either.
 *
 * Only when /dev/infiniband/rdma_cm can be opened is the real library
 * looked for (dlopen of librdmacm.so.1: the one the program linked, or
 * loaded now); a node without kernel RDMA never loads it.
 *
 * The real library's ids and events are its own: a face id holds its
 * real twin (whose context is the face id) and copies the fields the
 * application reads after each call (face_real_mirror); a real event is
 * handed out as a face event that holds it until it is acknowledged.
 *
 * Lock rule: cm_real is written once under real_once; the rest is the
 * caller's, as for the face's ids (rdmacm.c).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "ibemu.h"
#include "log.h"
#include "rdmacm_real.h"
#include "sockaddr.h"

struct cm_real_ops cm_real;
__thread unsigned int cm_real_depth;

static pthread_once_t real_once = PTHREAD_ONCE_INIT;
static bool real_ok;

#define RSYM(field, name, ver)                                                 \
	do {                                                                   \
		*(void **)&cm_real.field = dlvsym(h, name, ver);               \
		if (!cm_real.field) {                                          \
			ibemu_log_err("rdma_cm: the real librdmacm has no "    \
				      "%s@%s; ids stay ibemu's", name, ver);   \
			return;                                                \
		}                                                              \
	} while (0)

static void real_load(void)
{
	void *h;

	if (getenv("IBEMU_NO_REAL_RDMACM") ||
	    access("/dev/infiniband/rdma_cm", R_OK | W_OK))
		return;
	h = dlopen("librdmacm.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		ibemu_log_err("rdma_cm: the kernel's rdma_cm is there but "
			      "librdmacm.so.1 is not: %s", dlerror());
		return;
	}
	RSYM(create_event_channel, "rdma_create_event_channel", "RDMACM_1.0");
	RSYM(destroy_event_channel, "rdma_destroy_event_channel",
	     "RDMACM_1.0");
	RSYM(create_id, "rdma_create_id", "RDMACM_1.0");
	RSYM(destroy_id, "rdma_destroy_id", "RDMACM_1.0");
	RSYM(bind_addr, "rdma_bind_addr", "RDMACM_1.0");
	RSYM(resolve_addr, "rdma_resolve_addr", "RDMACM_1.0");
	RSYM(resolve_route, "rdma_resolve_route", "RDMACM_1.0");
	RSYM(listen, "rdma_listen", "RDMACM_1.0");
	RSYM(get_cm_event, "rdma_get_cm_event", "RDMACM_1.0");
	RSYM(ack_cm_event, "rdma_ack_cm_event", "RDMACM_1.0");
	RSYM(init_qp_attr, "rdma_init_qp_attr", "RDMACM_1.2");
	RSYM(create_qp, "rdma_create_qp", "RDMACM_1.0");
	RSYM(create_qp_ex, "rdma_create_qp_ex", "RDMACM_1.0");
	RSYM(destroy_qp, "rdma_destroy_qp", "RDMACM_1.0");
	RSYM(create_srq, "rdma_create_srq", "RDMACM_1.0");
	RSYM(create_srq_ex, "rdma_create_srq_ex", "RDMACM_1.0");
	RSYM(destroy_srq, "rdma_destroy_srq", "RDMACM_1.0");
	RSYM(connect, "rdma_connect", "RDMACM_1.0");
	RSYM(accept, "rdma_accept", "RDMACM_1.0");
	RSYM(reject, "rdma_reject", "RDMACM_1.0");
	RSYM(reject_ece, "rdma_reject_ece", "RDMACM_1.3");
	RSYM(establish, "rdma_establish", "RDMACM_1.2");
	RSYM(notify, "rdma_notify", "RDMACM_1.0");
	RSYM(disconnect, "rdma_disconnect", "RDMACM_1.0");
	RSYM(get_request, "rdma_get_request", "RDMACM_1.0");
	RSYM(migrate_id, "rdma_migrate_id", "RDMACM_1.0");
	RSYM(set_option, "rdma_set_option", "RDMACM_1.0");
	RSYM(set_local_ece, "rdma_set_local_ece", "RDMACM_1.3");
	RSYM(get_remote_ece, "rdma_get_remote_ece", "RDMACM_1.3");
	RSYM(join_multicast, "rdma_join_multicast", "RDMACM_1.0");
	RSYM(join_multicast_ex, "rdma_join_multicast_ex", "RDMACM_1.1");
	RSYM(leave_multicast, "rdma_leave_multicast", "RDMACM_1.0");
	RSYM(get_devices, "rdma_get_devices", "RDMACM_1.0");
	RSYM(free_devices, "rdma_free_devices", "RDMACM_1.0");
	RSYM(getaddrinfo, "rdma_getaddrinfo", "RDMACM_1.0");
	RSYM(freeaddrinfo, "rdma_freeaddrinfo", "RDMACM_1.0");
	RSYM(create_ep, "rdma_create_ep", "RDMACM_1.0");
	RSYM(destroy_ep, "rdma_destroy_ep", "RDMACM_1.0");
	real_ok = true;
}

bool cm_real_open(void)
{
	pthread_once(&real_once, real_load);
	return real_ok;
}

/* ---- channels ---- */

int face_real_chan_open(struct face_chan *fch)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct rdma_event_channel *rch;
	int ep, ret;

	rch = CM_REAL(cm_real.create_event_channel());
	if (!rch)
		return errno;
	ep = epoll_create1(EPOLL_CLOEXEC);
	ret = ep < 0 ? errno : 0;
	if (!ret)
		ret = ibemu_set_nonblock(rch->fd);
	if (!ret)
		ret = ibemu_set_nonblock(fch->emu_fd);
	if (!ret && epoll_ctl(ep, EPOLL_CTL_ADD, fch->emu_fd, &ev))
		ret = errno;
	if (!ret && epoll_ctl(ep, EPOLL_CTL_ADD, rch->fd, &ev))
		ret = errno;
	if (ret) {
		if (ep >= 0)
			close(ep);
		CM_REAL_VOID(cm_real.destroy_event_channel(rch));
		/* the emulator's descriptor blocks again */
		fcntl(fch->emu_fd, F_SETFL,
		      fcntl(fch->emu_fd, F_GETFL) & ~O_NONBLOCK);
		return ret;
	}
	fch->real = rch;
	fch->ch.fd = ep;
	return 0;
}

void face_real_chan_close(struct face_chan *fch)
{
	if (!fch->real)
		return;
	close(fch->ch.fd);
	fch->ch.fd = fch->emu_fd;
	CM_REAL_VOID(cm_real.destroy_event_channel(fch->real));
	fch->real = NULL;
}

int face_real_wait(struct face_chan *fch)
{
	struct pollfd p = { .fd = fch->ch.fd, .events = POLLIN };
	int fl = fcntl(fch->ch.fd, F_GETFL);

	if (fl >= 0 && (fl & O_NONBLOCK))
		return EAGAIN;
	while (poll(&p, 1, -1) < 0)
		if (errno != EINTR)
			return errno;
	return 0;
}

/* ---- ids ---- */

void face_real_id_create(struct face_id *fid, struct face_chan *fch)
{
	struct rdma_cm_id *rid;

	fid->where = FACE_EMU;
	if (!fch->real)
		return;
	if (CM_REAL(cm_real.create_id(fch->real, &rid, fid, fid->id.ps))) {
		ibemu_log_err("rdma_cm: the real librdmacm made no id (%s); "
			      "this one is ibemu's", strerror(errno));
		return;
	}
	fid->real = rid;
	fid->where = FACE_BOTH;
}

void face_real_keep(struct face_id *fid, enum face_where where)
{
	if (fid->where != FACE_BOTH || where == FACE_BOTH)
		return;
	if (where == FACE_REAL) {
		emu_cm_id_destroy(fid->emu); /* nothing delivered yet */
		fid->emu = NULL;
	} else {
		CM_REAL(cm_real.destroy_id(fid->real));
		fid->real = NULL;
	}
	fid->where = where;
}

static bool real_addr_any(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;

	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr ==
		       htonl(INADDR_ANY);
	return sa->sa_family == AF_INET6 &&
	       IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr);
}

static bool real_addr_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in6 *s6 = (const void *)sa;
	uint32_t a;

	if (sa->sa_family == AF_INET) {
		a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
		return (a >> 24) == 127;
	}
	if (sa->sa_family != AF_INET6)
		return false;
	if (IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr))
		return true;
	return IN6_IS_ADDR_V4MAPPED(&s6->sin6_addr) &&
	       s6->sin6_addr.s6_addr[12] == 127;
}

/* Whether the kernel's rdma_cm binds the local address sa to a device. */
static bool real_owns_local(const struct sockaddr *sa)
{
	struct sockaddr_storage a;
	struct rdma_cm_id *t;
	bool owns = false;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	if (real_addr_any(sa) || real_addr_loopback(sa))
		return false;
	memset(&a, 0, sizeof(a));
	memcpy(&a, sa, sockaddr_len(sa));
	((struct sockaddr_in *)&a)->sin_port = 0; /* same place in both */
	if (CM_REAL(cm_real.create_id(NULL, &t, NULL, RDMA_PS_TCP)))
		return false;
	if (!CM_REAL(cm_real.bind_addr(t, (struct sockaddr *)&a)) && t->verbs)
		owns = true;
	CM_REAL(cm_real.destroy_id(t));
	return owns;
}

void face_real_route_local(struct face_id *fid, const struct sockaddr *addr)
{
	if (fid->where != FACE_BOTH || !addr || real_addr_any(addr))
		return;
	face_real_keep(fid, real_owns_local(addr) ? FACE_REAL : FACE_EMU);
}

void face_real_route_dst(struct face_id *fid, const struct sockaddr *src,
			 const struct sockaddr *dst)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	bool owns = false;
	int s;

	if (fid->where != FACE_BOTH || !dst)
		return;
	if (src && !real_addr_any(src)) {
		owns = real_owns_local(src);
	} else if (!real_addr_loopback(dst) &&
		   (dst->sa_family == AF_INET || dst->sa_family == AF_INET6)) {
		/* The source the kernel's routing picks for dst. */
		s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
		if (s >= 0 && !connect(s, dst, sockaddr_len(dst)) &&
		    !getsockname(s, (struct sockaddr *)&local, &len))
			owns = real_owns_local((struct sockaddr *)&local);
		if (s >= 0)
			close(s);
	}
	face_real_keep(fid, owns ? FACE_REAL : FACE_EMU);
}

void face_real_mirror(struct face_id *fid)
{
	struct rdma_cm_id *r = fid->real, *id = &fid->id;

	if (!r || fid->where != FACE_REAL)
		return;
	id->verbs = r->verbs;
	id->route = r->route;
	id->port_num = r->port_num;
	id->qp = r->qp;
	id->pd = r->pd;
	id->qp_type = r->qp_type;
	id->send_cq_channel = r->send_cq_channel;
	id->send_cq = r->send_cq;
	id->recv_cq_channel = r->recv_cq_channel;
	id->recv_cq = r->recv_cq;
	id->srq = r->srq;
}

/* ---- events ---- */

int face_real_get_event(struct face_chan *fch, struct rdma_cm_event **event)
{
	struct rdma_cm_event *rev;
	struct face_id *fid, *l = NULL;
	struct face_event *fe;

	if (CM_REAL(cm_real.get_cm_event(fch->real, &rev)))
		return errno == EAGAIN || errno == EWOULDBLOCK ? EAGAIN : errno;
	fe = calloc(1, sizeof(*fe));
	if (!fe) {
		CM_REAL(cm_real.ack_cm_event(rev));
		return ENOMEM;
	}
	if (rev->listen_id)
		l = rev->listen_id->context;
	if (rev->event == RDMA_CM_EVENT_CONNECT_REQUEST && l) {
		/* A new real id, with its listener's context (librdmacm):
		 * it gets a face id of its own. */
		fid = face_id_new(to_fch(l->id.channel), l->id.context,
				  l->id.ps, rev->id->qp_type);
		if (!fid) {
			CM_REAL(cm_real.reject(rev->id, NULL, 0));
			CM_REAL(cm_real.ack_cm_event(rev));
			CM_REAL(cm_real.destroy_id(rev->id));
			free(fe);
			return EAGAIN;
		}
		fid->real = rev->id;
		fid->where = FACE_REAL;
		rev->id->context = fid;
		if (l->sync && rdma_migrate_id(&fid->id, NULL))
			ibemu_log_err("rdma_get_request: %s", strerror(errno));
	} else {
		fid = rev->id->context;
	}
	face_real_mirror(fid);
	fe->ev = *rev;
	fe->ev.id = &fid->id;
	fe->ev.listen_id = l ? &l->id : NULL;
	fe->real = rev;
	*event = &fe->ev;
	return 0;
}

/* ---- devices ---- */

struct ibv_context **face_real_devices(struct ibv_context **list, int *n)
{
	struct ibv_context **rl, **out;
	int rn = 0, i, k = 0;

	rl = CM_REAL(cm_real.get_devices(&rn));
	out = calloc((size_t)(*n + (rl ? rn : 0) + 2), sizeof(*out));
	if (!out) {
		if (rl)
			CM_REAL_VOID(cm_real.free_devices(rl));
		free(list);
		errno = ENOMEM;
		return NULL;
	}
	/* out[0] keeps the real list for face_real_free_devices */
	out[k++] = (struct ibv_context *)rl;
	for (i = 0; i < *n; i++)
		out[k++] = list[i];
	for (i = 0; rl && i < rn; i++)
		if (rl[i] && !ibemu_is_ours(rl[i]))
			out[k++] = rl[i];
	*n = k - 1;
	free(list);
	return out + 1;
}

void face_real_free_devices(struct ibv_context **list)
{
	struct ibv_context **rl = (struct ibv_context **)list[-1];

	if (rl)
		CM_REAL_VOID(cm_real.free_devices(rl));
	free(list - 1);
}
