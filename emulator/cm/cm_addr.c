// SPDX-License-Identifier: MIT
/*
 * The RDMA CM's addresses (cm.h): the socket address helpers, which
 * addresses are this node's, the path to a peer on another node (its
 * LID, the GIDs of the two ends, the address vector), and an id's bind,
 * address and route resolution.
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "cm.h"
#include "cm_int.h"
#include "cm_mcast.h"
#include "fabric.h"
#include "hca.h"
#include "node.h"
#include "params.h"
#include "engine.h"
#include "sockaddr.h"

/* ---- addresses ---- */

/* addr as 16 bytes: IPv6, or IPv4 mapped; *v4 says which. */
void cm_addr16(const struct sockaddr *sa, uint8_t out[16], bool *v4)
{
	const struct sockaddr_in *s4 = (const void *)sa;

	memset(out, 0, 16);

	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &s4->sin_addr, 4);
		*v4 = true;
	} else {
		memcpy(out,
		       &((const struct sockaddr_in6 *)(const void *)sa)
				->sin6_addr,
		       16);
		*v4 = IN6_IS_ADDR_V4MAPPED(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	}
}

uint16_t cm_port_of(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)(const void *)ss)
				     ->sin_port);
	if (ss->ss_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)(const void *)ss)
				     ->sin6_port);
	return 0;
}

static void cm_set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)(void *)ss)->sin_port = htons(port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)(void *)ss)->sin6_port = htons(port);
}

bool cm_addr_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)(const void *)sa)
			       ->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(
		&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr);
}

static bool cm_addr_loopback(const struct sockaddr *sa)
{
	const struct in6_addr *a6;

	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)(const void *)sa)
				      ->sin_addr.s_addr) >>
			24) == 127;
	a6 = &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(a6))
		return a6->s6_addr[12] == 127;
	return IN6_IS_ADDR_LOOPBACK(a6);
}

/*
 * Every address of the node resolves to ibemu0 port 1: loopback and
 * each address of the node's interfaces (getifaddrs).
 */
bool emu_cm_addr_is_local(const struct sockaddr *sa)
{
	struct ifaddrs *ifa, *i;
	uint8_t want[16], have[16];
	bool v4, v4b, found = false;

	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	if (cm_addr_loopback(sa))
		return true;
	if (getifaddrs(&ifa))
		return false;
	cm_addr16(sa, want, &v4);
	for (i = ifa; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		cm_addr16(i->ifa_addr, have, &v4b);
		found = !memcmp(want, have, 16);
	}
	freeifaddrs(ifa);
	return found;
}

/* ---- other nodes ---- */

/* The index of gid in the port's GID table; 0 (GID 0) if not there. */
static uint8_t cm_gid_index(struct emu_cm *cm, const uint8_t gid[16])
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	unsigned int i, nr = f->nr_gids;

	for (i = 0; i < nr && i < IBEMU_GID_TBL_LEN; i++)
		if (!memcmp(f->gids[i], gid, 16))
			return (uint8_t)i;
	return 0;
}

/* The port's GID for our address src: src itself when it is one of the
 * port's GIDs, else the node's address (the one its LID comes from),
 * else GID 0. */
void cm_own_gid(struct emu_cm *cm, const struct sockaddr *src, uint8_t gid[16])
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	bool v4;

	cm_addr16(src, gid, &v4);
	if (fabric_gid_is_local(&cm->hca->node, gid))
		return;
	if (f->ip4[0]) {
		memset(gid, 0, 16);
		gid[10] = gid[11] = 0xff;
		memcpy(gid + 12, f->ip4, 4);
	} else {
		memcpy(gid, f->gids[0], 16);
	}
}

/*
 * Whether dst is on another node: the fabric places it there (the
 * network is up) and a node answers at that address within timeout_ms
 * (its door, as a neighbour answers address resolution).  *node_addr:
 * that node's address; *lid_p: its LID.  Blocks up to timeout_ms (at
 * most the transport's resolution time); call without cm.lock.
 */
static bool cm_locate_remote(struct emu_cm *cm, const struct sockaddr *dst,
			     int timeout_ms, struct sockaddr_storage *node_addr,
			     uint16_t *lid_p)
{
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	uint8_t gid[16];
	bool v4;

	if (!net)
		return false;
	cm_addr16(dst, gid, &v4);
	return fabric_locate(&cm->hca->node, 0, gid, node_addr) ==
		       FABRIC_THERE &&
	       !net->probe_node(e, node_addr, timeout_ms, lid_p);
}

/* Our address toward dst on another node, port 0: the one the host's
 * routing picks (as the kernel's rdma_cm takes the route's source), or
 * the node's own address if that is none of ours. */
static void cm_source_toward(struct emu_cm *cm, const struct sockaddr *dst,
			     struct sockaddr_storage *src)
{
	const struct node_fabric *f = &cm->hca->node.seg->fabric;
	socklen_t len = sizeof(*src);
	struct sockaddr_in *in = (struct sockaddr_in *)(void *)src;
	int s;

	memset(src, 0, sizeof(*src));
	s = socket(dst->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s >= 0 && !connect(s, dst, sockaddr_len(dst)) &&
	    !getsockname(s, (struct sockaddr *)src, &len) &&
	    emu_cm_addr_is_local((struct sockaddr *)src)) {
		close(s);
		cm_set_port(src, 0);
		return;
	}
	if (s >= 0)
		close(s);
	memset(src, 0, sizeof(*src));
	src->ss_family = dst->sa_family;
	if (dst->sa_family == AF_INET && f->ip4[0])
		memcpy(&in->sin_addr, f->ip4, 4);
}

/* What the transport knows of the remote slot's process: its node's
 * LID, address (as a GID) and token; false if the slot names none. */
bool cm_remote_peer(struct emu_cm *cm, int32_t slot, uint16_t *lid,
		    uint8_t gid[16], struct sockaddr_storage *node_addr,
		    uint64_t *token)
{
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	struct tp_peer_info info;
	bool v4;

	if (!net || !tp_slot_is_remote(slot) || !net->peer_info(e, slot, &info))
		return false;
	*lid = info.lid;
	cm_set_port(&info.addr, 0);
	cm_addr16((struct sockaddr *)&info.addr, gid, &v4);
	*node_addr = info.addr;
	*token = info.token;
	return true;
}

/*
 * The address vector to the id's peer (rdma_init_qp_attr's for RC and
 * UC, the UD peer's): on this node, the port's own LID; on another, its
 * port's LID and, in a GRH, the GID of its address, from ours
 * (IBA 8.3.1), which route.c follows to its node.  Caller holds cm.lock.
 */
void cm_ah_locked(struct emu_cm_id *id, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->port_num = 1;
	if (!id->remote) {
		ah->dlid = id->cm->hca->node.seg->lid;
		return;
	}
	ah->dlid = id->rlid;
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, id->rgid, 16);
	ah->grh.sgid_index = cm_gid_index(id->cm, id->lgid);
	ah->grh.hop_limit = CM_HOP_LIMIT;
}

/* ---- addresses and routes ---- */

/* Bind id to addr (port 0: an ephemeral one); caller holds cm.lock. */
int cm_bind_locked(struct emu_cm_id *id, const struct sockaddr *addr)
{
	uint8_t a16[16];
	uint32_t flags = 0;
	uint16_t port;
	bool v4;
	int idx, ret;

	if (id->port_idx >= 0 || id->state != CM_IDLE)
		return cm_wrong_state_locked(id);
	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	if (!cm_addr_any(addr) && !emu_cm_addr_is_local(addr))
		return EADDRNOTAVAIL;
	cm_addr16(addr, a16, &v4);
	if (v4)
		flags |= NODE_CM_V4;
	if (cm_addr_any(addr))
		flags |= NODE_CM_WILDCARD;
	if (id->reuse)
		flags |= NODE_CM_REUSE;
	if (id->afonly)
		flags |= NODE_CM_AFONLY;
	memset(&id->src, 0, sizeof(id->src));
	memcpy(&id->src, addr, sockaddr_len(addr));
	port = cm_port_of(&id->src);
	ret = node_cm_bind(&id->cm->hca->node, id->ps, a16, flags, &port,
			   &idx);
	if (ret)
		return -ret;
	cm_set_port(&id->src, port);
	id->port_idx = idx;
	id->state = CM_ADDR_BOUND;
	return 0;
}

int emu_cm_bind(struct emu_cm_id *id, const struct sockaddr *addr)
{
	int ret;

	pthread_mutex_lock(&id->cm->lock);
	ret = cm_bind_locked(id, addr);
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_set_reuseaddr(struct emu_cm_id *id, bool on)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_IDLE)
		ret = cm_wrong_state_locked(id);
	else
		id->reuse = on;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_set_afonly(struct emu_cm_id *id, bool on)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_IDLE)
		ret = cm_wrong_state_locked(id);
	else
		id->afonly = on;
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

/* As the kernel's rdma_set_ack_timeout: only the requesters that wait
 * for ACKs, RC and the XRC initiator, take one (rdma-core's
 * rdma_set_option(3)); any state, the QP's next move to RTS uses it. */
int emu_cm_set_ack_timeout(struct emu_cm_id *id, uint8_t timeout)
{
	int ret = 0;

	pthread_mutex_lock(&id->cm->lock);
	if (id->qp_type != IBV_QPT_RC && id->qp_type != IBV_QPT_XRC_SEND) {
		ret = EINVAL;
	} else {
		id->ack_timeout = timeout;
		id->ack_timeout_set = true;
	}
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_resolve_addr(struct emu_cm_id *id, const struct sockaddr *src,
			const struct sockaddr *dst, int timeout_ms)
{
	struct sockaddr_storage any, dss, node_addr, toward;
	bool local, mcast, remote = false;
	uint64_t start = clock_now_ns();
	uint16_t rlid = 0;
	int ret = 0;

	if (!dst || (dst->sa_family != AF_INET && dst->sa_family != AF_INET6))
		return EAFNOSUPPORT;
	if (src && src->sa_family != AF_INET && src->sa_family != AF_INET6)
		return EAFNOSUPPORT;
	memset(&dss, 0, sizeof(dss));
	memcpy(&dss, dst, sockaddr_len(dst));
	/* Connecting to the unspecified address means this host, as the
	 * kernel's rdma_cm takes it. */
	if (cm_addr_any(dst)) {
		if (dss.ss_family == AF_INET)
			((struct sockaddr_in *)(void *)&dss)->sin_addr.s_addr =
				htonl(INADDR_LOOPBACK);
		else
			((struct sockaddr_in6 *)(void *)&dss)->sin6_addr =
				in6addr_loopback;
	}
	/* A multicast destination resolves at once, as the kernel's
	 * address resolution maps it to a multicast hardware address
	 * without asking a neighbour (ip_ib_mc_map); the id is then ready
	 * to join it (rdma_join_multicast). */
	mcast = emu_cm_addr_is_multicast((struct sockaddr *)&dss);
	local = mcast || emu_cm_addr_is_local((struct sockaddr *)&dss);
	/* Another node's address: resolved when a node answers there, as
	 * a neighbour answers (the caller waits for that, at most its
	 * timeout). */
	if (!local)
		remote = cm_locate_remote(id->cm, (struct sockaddr *)&dss,
					  timeout_ms, &node_addr, &rlid);
	if (remote)
		cm_source_toward(id->cm, (struct sockaddr *)&dss, &toward);
	pthread_mutex_lock(&id->cm->lock);
	if (id->state == CM_IDLE) {
		memset(&any, 0, sizeof(any));
		if (src) {
			memcpy(&any, src, sockaddr_len(src));
		} else if (mcast) {
			cm_mc_source(dss.ss_family, &any);
		} else if (local) {
			/* The source is the address the destination is
			 * reached from: on this node, itself. */
			memcpy(&any, &dss, sizeof(dss));
			cm_set_port(&any, 0);
		} else if (remote) {
			any = toward;
		} else {
			any.ss_family = dss.ss_family;
		}
		ret = cm_bind_locked(id, (struct sockaddr *)&any);
	} else if (id->state != CM_ADDR_BOUND) {
		ret = cm_wrong_state_locked(id);
	}
	if (ret)
		goto out;
	if (cm_addr_any((struct sockaddr *)&id->src) && local) {
		uint16_t port = cm_port_of(&id->src);

		if (id->src.ss_family == dss.ss_family) {
			if (mcast)
				cm_mc_source(dss.ss_family, &id->src);
			else
				memcpy(&id->src, &dss, sizeof(dss));
			cm_set_port(&id->src, port);
		}
	}
	if (cm_addr_any((struct sockaddr *)&id->src) && remote &&
	    id->src.ss_family == toward.ss_family) {
		uint16_t port = cm_port_of(&id->src);

		id->src = toward;
		cm_set_port(&id->src, port);
	}
	id->dst = dss;
	id->remote = remote;
	if (remote) {
		bool v4;

		id->node_addr = node_addr;
		/* the node's LID, as it answered */
		id->rlid = rlid;
		cm_own_gid(id->cm, (struct sockaddr *)&id->src, id->lgid);
		cm_addr16((struct sockaddr *)&dss, id->rgid, &v4);
	}
	if (local || remote) {
		id->state = CM_ADDR_RESOLVED;
		cm_event_locked(id, EMU_CM_ADDR_RESOLVED, 0);
	} else {
		/* No device of this node reaches it: the query times out
		 * (ADDR_ERROR), as a neighbour that never answers. */
		id->state = CM_ADDR_QUERY;
		id->deadline = start +
			       (uint64_t)(timeout_ms > 0 ? timeout_ms : 1) *
				       1000000ull;
		cm_wake(id->cm);
	}
out:
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

int emu_cm_resolve_route(struct emu_cm_id *id, int timeout_ms)
{
	int ret = 0;

	(void)timeout_ms; /* the path is the node's own port */
	pthread_mutex_lock(&id->cm->lock);
	if (id->state != CM_ADDR_RESOLVED) {
		ret = cm_wrong_state_locked(id);
	} else {
		id->state = CM_ROUTE_RESOLVED;
		cm_event_locked(id, EMU_CM_ROUTE_RESOLVED, 0);
	}
	pthread_mutex_unlock(&id->cm->lock);
	return ret;
}

void emu_cm_addrs(struct emu_cm_id *id, struct sockaddr_storage *src,
		  struct sockaddr_storage *dst)
{
	pthread_mutex_lock(&id->cm->lock);
	*src = id->src;
	*dst = id->dst;
	pthread_mutex_unlock(&id->cm->lock);
}

bool emu_cm_route(struct emu_cm_id *id, struct emu_cm_route *r)
{
	const struct node_seg *seg = id->cm->hca->node.seg;
	uint64_t prefix = htobe64(seg->gid_prefix);
	uint64_t guid = htobe64(seg->port_guid);
	bool on_dev;

	memset(r, 0, sizeof(*r));
	memcpy(r->sgid.raw, &prefix, 8);
	memcpy(r->sgid.raw + 8, &guid, 8);
	r->dgid = r->sgid;
	r->slid = r->dlid = seg->lid;
	pthread_mutex_lock(&id->cm->lock);
	/* On the device once its address is one of the node's: resolved,
	 * or bound (listening or not) to an address other than "any". */
	on_dev = id->state != CM_IDLE && id->state != CM_ADDR_QUERY &&
		 !((id->state == CM_ADDR_BOUND || id->state == CM_LISTEN) &&
		   cm_addr_any((struct sockaddr *)&id->src));
	if (id->remote) {
		/* the two nodes' ports */
		memcpy(r->sgid.raw, id->lgid, 16);
		memcpy(r->dgid.raw, id->rgid, 16);
		r->dlid = id->rlid;
	}
	pthread_mutex_unlock(&id->cm->lock);
	r->pkey = IBEMU_DEFAULT_PKEY;
	r->mtu = IBEMU_MAX_MTU;
	r->port_num = 1;
	return on_dev;
}

uint16_t emu_cm_src_port(struct emu_cm_id *id)
{
	return cm_port_of(&id->src);
}

uint16_t emu_cm_dst_port(struct emu_cm_id *id)
{
	return cm_port_of(&id->dst);
}

/* The process that slot names on another node owns qpn (its REQ, REP or
 * SIDR REP said so): the network transport learns the route, and the
 * QP's move to RTR or an address handle toward it asks no door
 * (tp_net_ops.seed_qpn, which takes only the transport's lock). */
void cm_route_learn(struct emu_cm *cm, int32_t slot, uint32_t qpn)
{
	struct engine *e = cm->hca->engine;
	const struct tp_net_ops *net = engine_net(e);

	if (net && net->seed_qpn && tp_slot_is_remote(slot))
		net->seed_qpn(e, slot, qpn);
}
