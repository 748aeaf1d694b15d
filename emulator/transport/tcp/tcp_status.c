// SPDX-License-Identifier: MIT
/*
 * The TCP transport's publication for `ibemu status` (tcp_int.h): each
 * connection's entry in the node's net_peers, and its counters.
 */
#include "config.h"

#include <netinet/in.h>

#include "tcp_int.h"

void tcp_publish(struct tp_tcp *t, struct tcp_conn *c)
{
	struct node *node = &t->e->hca->node;
	struct node_net_peer *p;
	int i;

	if (c->pub < 0) {
		node_lock(node);
		for (i = 0; i < IBEMU_MAX_NET_PEERS; i++) {
			p = &node->seg->net_peers[i];
			if (atomic_load_explicit(&p->owner,
						 memory_order_relaxed))
				continue;
			atomic_store_explicit(&p->owner,
					      (uint32_t)node->proc_slot + 1,
					      memory_order_relaxed);
			p->token = node->token;
			c->pub = i;
			break;
		}
		node_unlock(node);
		if (c->pub < 0)
			return;
	}
	p = &node->seg->net_peers[c->pub];
	sockaddr_addr16(&c->addr, p->addr);
	p->port = ntohs(c->addr.ss_family == AF_INET
				? ((struct sockaddr_in *)&c->addr)->sin_port
				: ((struct sockaddr_in6 *)&c->addr)->sin6_port);
	p->lid = c->lid;
	p->rslot = c->rslot;
	p->guid = c->guid;
	atomic_store_explicit(&p->state,
			      atomic_load(&c->state) == TCP_CONN_UP
				      ? NODE_NET_UP
				      : NODE_NET_DOWN,
			      memory_order_relaxed);
}

struct node_net_peer *tcp_pub(struct tcp_conn *c)
{
	return c->pub < 0 ? NULL
			  : &c->t->e->hca->node.seg->net_peers[c->pub];
}

void tcp_count(_Atomic uint64_t *ctr, uint64_t n)
{
	/* One writer (the owner): no read-modify-write needed. */
	atomic_store_explicit(ctr,
			      atomic_load_explicit(ctr, memory_order_relaxed) +
				      n,
			      memory_order_relaxed);
}
