// SPDX-License-Identifier: MIT
/*
 * Multicast joins of the RDMA CM (cm.h emu_cm_join): what the kernel's
 * rdma_cm does for rdma_join_multicast on an InfiniBand port.  The
 * kernel maps the IP address to an MGID (cma_set_mgid), asks the subnet
 * administrator to join the port to that group (an MCMemberRecord
 * SubnAdmSet, IBA 15.2.5.17) and reports the SA's answer as
 * MULTICAST_JOIN, whose address vector reaches the group (MGID, MLID)
 * and whose Q_Key is the group's.  On one node the SA is the node's
 * membership table (node.h struct node_cm_mcast): it gives each group
 * one MLID for every process, and a group lives while it has members.
 * The QP is attached by the librdmacm face when it hands out the event,
 * as librdmacm attaches its user QPs (provider/rdmacm_mcast.c).
 *
 * Lock rule: mc_lock guards mc_list (the memberships of this process's
 * ids); see cm_mcast.h for its order against cm.lock.  The node table is
 * under node_seg.lock (node_mcast.c).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/ib.h>

#include "cm_mcast.h"
#include "node.h"
#include "params.h"
#include "sockaddr.h"

/*
 * The Q_Key of a partition's IPoIB broadcast group, which the kernel's
 * rdma_cm gives RDMA_PS_IPOIB ids (cma_set_qkey reads it from the SA):
 * the value subnet managers configure by default (OpenSM's partition
 * default qkey=0x0B1B).  Other port spaces use RDMA_UDP_QKEY.
 */
#define CM_IPOIB_QKEY 0x00000b1bu
#define CM_UDP_QKEY 0x01234567u /* rdma_cma.h RDMA_UDP_QKEY */

/* The IPoIB broadcast address's scope, which cma_set_mgid copies into
 * every MGID it maps (ip_ib_mc_map): link-local (2), IBA 4.1.1. */
#define CM_MGID_SCOPE 0x2

struct cm_mc {
	struct cm_mc *next;
	struct emu_cm_id *id;
	struct sockaddr_storage addr; /* as joined, for rdma_leave */
	socklen_t addr_len;
	struct node *node;
	int node_idx; /* node membership, -1: the join failed */
	uint64_t cookie;
	struct emu_cm_mc_info info;
};

static pthread_mutex_t mc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cm_mc *mc_list;
static uint64_t mc_next_cookie = 1;

uint32_t cm_mc_ps_qkey(uint16_t ps)
{
	return ps == EMU_CM_PS_IPOIB ? CM_IPOIB_QKEY : CM_UDP_QKEY;
}

bool emu_cm_addr_is_multicast(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return IN_MULTICAST(
			ntohl(((const struct sockaddr_in *)(const void *)sa)
				      ->sin_addr.s_addr));
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_MULTICAST(
			&((const struct sockaddr_in6 *)(const void *)sa)
				 ->sin6_addr);
	return false;
}

/*
 * The kernel's cma_set_mgid for an InfiniBand port:
 *  - the unspecified address: a zero MGID, for the SA to assign one;
 *  - an IPv6 address ff1x:a01b:...: an SA-assigned MGID, used as is;
 *  - AF_IB: the MGID given;
 *  - IPv6: ipv6_ib_mc_map, ff1<scope>:601b:<pkey> and the address's
 *    last 80 bits;
 *  - IPv4: ip_ib_mc_map, ff1<scope>:401b:<pkey>::<low 28 bits>;
 * with the signature's second byte 0x01 instead of 0x1b for
 * RDMA_PS_UDP ("RDMA CM signature"), so those groups are not IPoIB's.
 * The scope and P_Key are those of the IPoIB broadcast address.
 */
bool emu_cm_mgid(uint16_t ps, const struct sockaddr *sa, uint16_t pkey,
		 uint8_t mgid[16])
{
	const struct sockaddr_in6 *s6 = (const void *)sa;
	uint32_t a;

	memset(mgid, 0, 16);
	switch (sa->sa_family) {
	case AF_INET:
		a = ntohl(((const struct sockaddr_in *)(const void *)sa)
				  ->sin_addr.s_addr);
		if (!a)
			return true;
		mgid[2] = 0x40;
		mgid[12] = (uint8_t)((a >> 24) & 0x0f);
		mgid[13] = (uint8_t)(a >> 16);
		mgid[14] = (uint8_t)(a >> 8);
		mgid[15] = (uint8_t)a;
		break;
	case AF_INET6:
		if (IN6_IS_ADDR_UNSPECIFIED(&s6->sin6_addr))
			return true;
		if (s6->sin6_addr.s6_addr[0] == 0xff &&
		    (s6->sin6_addr.s6_addr[1] & 0xf0) == 0x10 &&
		    s6->sin6_addr.s6_addr[2] == 0xa0 &&
		    s6->sin6_addr.s6_addr[3] == 0x1b) {
			memcpy(mgid, &s6->sin6_addr, 16);
			return true;
		}
		mgid[2] = 0x60;
		memcpy(mgid + 6, s6->sin6_addr.s6_addr + 6, 10);
		break;
	case AF_IB:
		memcpy(mgid,
		       &((const struct sockaddr_ib *)(const void *)sa)
				->sib_addr,
		       16);
		return true;
	default:
		return false;
	}
	mgid[0] = 0xff;
	mgid[1] = 0x10 | CM_MGID_SCOPE;
	mgid[3] = ps == EMU_CM_PS_UDP ? 0x01 : 0x1b;
	mgid[4] = (uint8_t)(pkey >> 8);
	mgid[5] = (uint8_t)pkey;
	return true;
}

/*
 * The source address of an id resolved to a multicast group and not
 * bound: the address of the interface the group is routed through,
 * which on a node is its first non-loopback interface that is up (the
 * default route's, usually), else loopback.
 */
void cm_mc_source(int family, struct sockaddr_storage *out)
{
	struct ifaddrs *ifa, *i;

	memset(out, 0, sizeof(*out));
	out->ss_family = (sa_family_t)family;
	if (!getifaddrs(&ifa)) {
		for (i = ifa; i; i = i->ifa_next) {
			if (!i->ifa_addr || i->ifa_addr->sa_family != family ||
			    (i->ifa_flags & IFF_LOOPBACK) ||
			    !(i->ifa_flags & IFF_UP))
				continue;
			if (family == AF_INET6 &&
			    IN6_IS_ADDR_LINKLOCAL(
				    &((struct sockaddr_in6 *)(void *)
					      i->ifa_addr)
					     ->sin6_addr))
				continue;
			memcpy(out, i->ifa_addr,
			       family == AF_INET ? sizeof(struct sockaddr_in)
						 : sizeof(struct sockaddr_in6));
			freeifaddrs(ifa);
			return;
		}
		freeifaddrs(ifa);
	}
	if (family == AF_INET)
		((struct sockaddr_in *)(void *)out)->sin_addr.s_addr =
			htonl(INADDR_LOOPBACK);
	else
		((struct sockaddr_in6 *)(void *)out)->sin6_addr =
			in6addr_loopback;
}

int emu_cm_join(struct emu_cm_id *id, const struct sockaddr *addr,
		int join_flags, uint64_t context)
{
	struct emu_cm_event ev;
	struct ibv_ah_attr *ah;
	struct cm_mc *mc;
	struct node *node;
	uint8_t mgid[16];
	uint32_t qkey;
	uint16_t ps, mlid = 0;
	socklen_t len;
	int ret;

	if (!addr)
		return EINVAL;
	/* librdmacm: an address family it does not know, or join flags
	 * other than FULLMEMBER and SENDONLY_FULLMEMBER (the JoinState
	 * bits 0 and 3 of the MCMemberRecord, IBA 15.2.5.17), are EINVAL.
	 * The node's SA takes send-only full members. */
	len = sockaddr_len(addr);
	if (!len || (join_flags != EMU_CM_JOIN_FULLMEMBER &&
		     join_flags != EMU_CM_JOIN_SENDONLY_FULLMEMBER))
		return EINVAL;
	/* The kernel (rdma_join_multicast): a UD id on a device, its
	 * address bound or resolved, else EINVAL. */
	ret = cm_mc_id_check(id, &ps, &qkey, &node);
	if (ret)
		return ret;
	if (!emu_cm_mgid(ps, addr, IBEMU_DEFAULT_PKEY, mgid))
		return EINVAL;
	mc = calloc(1, sizeof(*mc));
	if (!mc)
		return ENOMEM;
	mc->id = id;
	memcpy(&mc->addr, addr, len);
	mc->addr_len = len;
	mc->node = node;
	mc->info.join_flags = join_flags;
	/* The SA's answer: the group's MLID, assigned on its first join. */
	ret = -node_mcast_member_add(node, mgid, &mlid, &mc->node_idx);
	if (ret)
		mc->node_idx = -1;
	memcpy(mc->info.mgid.raw, mgid, 16);
	mc->info.mlid = mlid;

	pthread_mutex_lock(&mc_lock);
	mc->cookie = mc_next_cookie++;
	mc->next = mc_list;
	mc_list = mc;
	pthread_mutex_unlock(&mc_lock);

	memset(&ev, 0, sizeof(ev));
	ev.mc_context = context;
	ev.mc_cookie = mc->cookie;
	ev.mc_join_flags = join_flags;
	if (ret) {
		/* The SA refused the join (no room for the group): the
		 * kernel reports MULTICAST_ERROR with the join's status. */
		ev.event = EMU_CM_MULTICAST_ERROR;
		ev.status = -ret;
		cm_mc_queue(id, &ev);
		return 0;
	}
	/* ib_init_ah_from_mcmember: the group's MGID in a GRH, its MLID,
	 * SL and port; QPN 0xFFFFFF (IBA 10.5.2.2), the group's Q_Key. */
	ev.event = EMU_CM_MULTICAST_JOIN;
	ah = &ev.param.ah_attr;
	ah->is_global = 1;
	memcpy(ah->grh.dgid.raw, mgid, 16);
	ah->grh.sgid_index = 0;
	ah->grh.hop_limit = 1; /* link-local scope: the subnet */
	ah->dlid = mlid;
	ah->sl = 0;
	ah->port_num = 1;
	ev.param.qp_num = EMU_CM_MC_QPN;
	ev.param.qkey = qkey;
	cm_mc_queue(id, &ev);
	return 0;
}

/* Unlink id's first membership of addr (NULL: any); caller holds
 * mc_lock. */
static struct cm_mc *mc_unlink_locked(struct emu_cm_id *id,
				      const struct sockaddr *addr,
				      socklen_t len)
{
	struct cm_mc **pp, *mc;

	for (pp = &mc_list; (mc = *pp); pp = &mc->next) {
		if (mc->id != id)
			continue;
		/* librdmacm compares the address as given, byte for byte */
		if (addr &&
		    (mc->addr_len != len || memcmp(&mc->addr, addr, len)))
			continue;
		*pp = mc->next;
		return mc;
	}
	return NULL;
}

static void mc_free(struct cm_mc *mc)
{
	if (mc->node_idx >= 0)
		node_mcast_member_del(mc->node, mc->node_idx);
	free(mc);
}

int emu_cm_leave(struct emu_cm_id *id, const struct sockaddr *addr,
		 struct emu_cm_mc_info *info)
{
	struct cm_mc *mc;
	socklen_t len = 0;

	if (addr) {
		len = sockaddr_len(addr);
		if (!len)
			return EINVAL;
	}
	pthread_mutex_lock(&mc_lock);
	mc = mc_unlink_locked(id, addr, len);
	pthread_mutex_unlock(&mc_lock);
	if (!mc)
		return EADDRNOTAVAIL;
	/* An answer not yet read is void once the group is left. */
	cm_mc_purge(id, mc->cookie);
	*info = mc->info;
	mc_free(mc);
	return 0;
}

void cm_mc_id_gone(struct emu_cm_id *id)
{
	struct cm_mc *mc;

	for (;;) {
		pthread_mutex_lock(&mc_lock);
		mc = mc_unlink_locked(id, NULL, 0);
		pthread_mutex_unlock(&mc_lock);
		if (!mc)
			return;
		mc_free(mc);
	}
}
