// SPDX-License-Identifier: MIT
/*
 * Where a packet goes: an address vector names a port by LID, or by GID
 * when it has a GRH (IBA 8.3.1, 7.7.3); fabric.c says which node that
 * is, and the node's own table (this node) or its door (another node,
 * through the network transport's tp_net_ops) says which process owns
 * the QPN.  With IBEMU_TRANSPORT=tcp
 * this node's processes are reached through its door too.
 *
 * Lock rule: none of its own; may block as the network transport's
 * resolution does (transport.h, tp_net_ops).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <string.h>

#include "engine.h"
#include "fabric.h"
#include "log.h"
#include "route.h"
#include "sockaddr.h"

/* A destination located by its LID: no GRH, or a link-local GID, which
 * names a port of the sender's subnet (IBA 4.1.1). */
static bool route_by_lid(const struct ibv_ah_attr *av)
{
	const uint8_t *g = av->grh.dgid.raw;

	return !av->is_global || (g[0] == 0xfe && (g[1] & 0xc0) == 0x80);
}

/* This node's own address, to reach its door over TCP. */
static void route_self_addr(struct emu_hca *hca, struct sockaddr_storage *ss)
{
	const struct node_fabric *f = &hca->node.seg->fabric;
	struct sockaddr_in *in = (struct sockaddr_in *)ss;

	memset(ss, 0, sizeof(*ss));
	in->sin_family = AF_INET;
	if (f->flags & NODE_FABRIC_MULTI)
		memcpy(&in->sin_addr, f->ip4, 4);
	else
		in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

/* A destination on another node while this process is not in network
 * mode: said once a process, at warning level, as the cause of the
 * RETRY_EXC_ERR or the lost datagrams that follow. */
static void route_tell_net_off(uint16_t dlid,
			       const struct sockaddr_storage *addr)
{
	static atomic_bool told;
	char a[INET6_ADDRSTRLEN] = "?";
	const void *ip = addr->ss_family == AF_INET
		? (const void *)&((const struct sockaddr_in *)(const void *)addr)->sin_addr
		: (const void *)&((const struct sockaddr_in6 *)(const void *)addr)->sin6_addr;

	if (atomic_exchange(&told, true))
		return;
	inet_ntop(addr->ss_family, ip, a, sizeof(a));
	ibemu_log_warn("LID %u is a node at %s, and network mode is off: "
		       "nothing is sent there (IBEMU_NET=1 on every node, "
		       "or `ibemu run --net`)", dlid, a);
}

int route_qpn(struct emu_hca *hca, const struct ibv_ah_attr *av,
	      uint32_t qpn, int32_t *slot_p)
{
	struct engine *e = hca->engine;
	const struct tp_net_ops *net = engine_net(e);
	struct fabric_port_at at;
	enum fabric_where where;

	where = fabric_locate_port(&hca->node, av->dlid,
				   av->is_global ? av->grh.dgid.raw : NULL,
				   &at);
	if (where == FABRIC_NOWHERE)
		return EHOSTUNREACH;
	if (where == FABRIC_HERE) {
		if (!net || !net->forced(e)) {
			*slot_p = node_qpn_owner_slot(&hca->node, qpn);
			return *slot_p < 0 ? ENOENT : 0;
		}
		route_self_addr(hca, &at.addr);
	}
	if (!net) {
		route_tell_net_off(av->dlid, &at.addr);
		return ENETDOWN;
	}
	/* The node's door answers with its port 1's LID (fabric.h). */
	return net->resolve_qpn(e, &at.addr, route_by_lid(av) ? at.lid : 0,
				qpn, slot_p);
}

void route_publish_peer_locked(struct emu_qp *qp)
{
	const struct ibv_ah_attr *av = &qp->attr.ah_attr;
	struct emu_hca *hca = qp->hca;
	struct sockaddr_storage addr;
	uint8_t a16[16];

	if (fabric_locate(&hca->node, av->dlid,
			  av->is_global ? av->grh.dgid.raw : NULL,
			  &addr) == FABRIC_HERE)
		route_self_addr(hca, &addr);
	sockaddr_addr16(&addr, a16);
	node_qp_publish_peer(&hca->node, qp->qpn, a16);
}

/*
 * A connected QP has one peer, the QP its address vector and
 * dest_qp_num name (IBA 9.6, the transport header checks; 9.7.1): a
 * packet of any other process is not its, whatever QPN and PSN it
 * carries.  src_proc is what the transport knows of the sender (a node
 * slot, or the connection it came by, never a field of the packet), so
 * an off-path host that learnt the QPN and PSN still cannot inject.
 */
bool route_from_peer_slow_locked(struct emu_qp *qp, int32_t src_proc)
{
	struct engine *e = qp->hca->engine;
	const struct tp_net_ops *net;

	if (qp->peer_proc < 0 && req_resolve_peer_locked(qp) == 0 &&
	    src_proc == qp->peer_proc)
		return true;
	net = engine_net(e);
	return qp->peer_proc >= 0 && net && net->same_process &&
	       net->same_process(e, src_proc, qp->peer_proc);
}
