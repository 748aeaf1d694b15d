// SPDX-License-Identifier: MIT
/*
 * Addresses of the librdmacm face (rdmacm.c): rdma_bind_addr,
 * rdma_resolve_addr and rdma_resolve_route, an id's ports, and
 * rdma_getaddrinfo.
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

#include "ibemu.h"
#include "cm.h"
#include "rdmacm_face.h"
#include "rdmacm_real.h"

/* ---- addresses and routes ---- */

IBEMU_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	FACE_PASS(bind_addr, id, addr);
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

	FACE_PASS(resolve_addr, id, src_addr, dst_addr, timeout_ms);
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

	FACE_DISPATCH_STARTED(resolve_route, id, timeout_ms);
	if (!id)
		return face_err(EINVAL);
	ret = emu_cm_resolve_route(to_fid(id)->emu, timeout_ms);
	if (ret)
		return face_err(ret);
	return face_complete(to_fid(id));
}

/* ---- ports ---- */

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
	FACE_PASS_VOID(freeaddrinfo, res);
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

	FACE_PASS(getaddrinfo, node, service, hints, res);
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
