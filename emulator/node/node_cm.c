// SPDX-License-Identifier: MIT
/*
 * The node's RDMA CM addresses (node.h struct node_cm_port): which
 * process holds which port of which port space on which address, and
 * who listens.  The kernel's rdma_cm keeps these per network namespace;
 * here one table serves the node, and a connection request is sent to
 * the process this table names (cm_conn.c).
 *
 * Lock rule: every entry is read and written under node_seg.lock.  Any
 * process of the node can write the segment, so an entry is copied and
 * checked before it counts: its owner must be a slot of the table whose
 * token is still the one recorded and whose process lives; anything
 * else is a free entry.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "node.h"

/* Ephemeral ports, as Linux's ip_local_port_range defaults. */
#define CM_PORT_EPHEMERAL_LO 32768
#define CM_PORT_EPHEMERAL_HI 60999

/* Whether entry i (copied into *c) is held by a live process. */
static bool cm_entry_live_locked(struct node *node, unsigned int i,
				 struct node_cm_port *c)
{
	*c = node->seg->cm_ports[i];
	return c->owner && c->owner <= IBEMU_MAX_PROCS &&
	       node_proc_holds(node, (int32_t)c->owner - 1, c->token);
}

static bool cm_addr_wild(const struct node_cm_port *c)
{
	return (c->flags & NODE_CM_WILDCARD) != 0;
}

/* Whether two bindings of one port overlap (the same address, or one
 * of them any address; an IPv6-only wildcard leaves IPv4 alone). */
static bool cm_overlap(const struct node_cm_port *a,
		       const struct node_cm_port *b)
{
	if (cm_addr_wild(a) && cm_addr_wild(b))
		return !((a->flags ^ b->flags) & NODE_CM_V4) ||
		       !((a->flags | b->flags) & NODE_CM_AFONLY);
	if (cm_addr_wild(a) || cm_addr_wild(b)) {
		const struct node_cm_port *w = cm_addr_wild(a) ? a : b;
		const struct node_cm_port *s = cm_addr_wild(a) ? b : a;

		if ((w->flags & NODE_CM_V4) && !(s->flags & NODE_CM_V4))
			return false;
		if (!(w->flags & NODE_CM_V4) && (s->flags & NODE_CM_V4) &&
		    (w->flags & NODE_CM_AFONLY))
			return false;
		return true;
	}
	return !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* Whether c (ps, port) can be bound beside every live entry. */
static bool cm_port_free_locked(struct node *node,
				const struct node_cm_port *c)
{
	struct node_cm_port e;
	unsigned int i;

	for (i = 0; i < IBEMU_MAX_CM_PORTS; i++) {
		if (!cm_entry_live_locked(node, i, &e))
			continue;
		if (e.ps != c->ps || e.port != c->port || !cm_overlap(&e, c))
			continue;
		/* SO_REUSEADDR: two bindings that do not listen may share
		 * a port when both ask for it. */
		if ((e.flags & c->flags & NODE_CM_REUSE) &&
		    !(e.flags & NODE_CM_LISTEN))
			continue;
		return false;
	}
	return true;
}

int node_cm_bind(struct node *node, uint16_t ps, const uint8_t addr[16],
		 uint32_t flags, uint16_t *port_p, int *index_p)
{
	struct node_cm_port c = { 0 }, e;
	unsigned int i, span, tries, start;
	int free_idx = -1, ret = 0;

	if (node->proc_slot < 0 || !node->token)
		return -EINVAL;
	c.owner = (uint32_t)node->proc_slot + 1;
	c.token = node->token;
	c.ps = ps;
	c.flags = flags & ~NODE_CM_LISTEN;
	memcpy(c.addr, addr, sizeof(c.addr));

	node_lock(node);
	for (i = 0; i < IBEMU_MAX_CM_PORTS; i++) {
		if (!cm_entry_live_locked(node, i, &e)) {
			free_idx = (int)i;
			break;
		}
	}
	if (free_idx < 0) {
		ret = -ENOMEM;
		goto out;
	}
	if (*port_p) {
		c.port = *port_p;
		if (!cm_port_free_locked(node, &c))
			ret = -EADDRINUSE;
		goto out;
	}
	span = CM_PORT_EPHEMERAL_HI - CM_PORT_EPHEMERAL_LO + 1;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = (unsigned int)random();
	for (tries = 0; tries < span; tries++) {
		c.port = (uint16_t)(CM_PORT_EPHEMERAL_LO +
				    (start + tries) % span);
		if (cm_port_free_locked(node, &c))
			goto out;
	}
	ret = -EADDRINUSE;
out:
	if (!ret) {
		node->seg->cm_ports[free_idx] = c;
		*port_p = c.port;
		*index_p = free_idx;
	}
	node_unlock(node);
	return ret;
}

int node_cm_listen(struct node *node, int index)
{
	struct node_cm_port c, e;
	unsigned int i;
	int ret = 0;

	if (index < 0 || index >= IBEMU_MAX_CM_PORTS)
		return -EINVAL;
	node_lock(node);
	if (!cm_entry_live_locked(node, (unsigned int)index, &c) ||
	    c.token != node->token) {
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < IBEMU_MAX_CM_PORTS; i++) {
		if (i == (unsigned int)index ||
		    !cm_entry_live_locked(node, i, &e))
			continue;
		if ((e.flags & NODE_CM_LISTEN) && e.ps == c.ps &&
		    e.port == c.port && cm_overlap(&e, &c) &&
		    !memcmp(e.addr, c.addr, sizeof(c.addr)) &&
		    !((e.flags ^ c.flags) & NODE_CM_WILDCARD)) {
			ret = -EADDRINUSE;
			goto out;
		}
	}
	node->seg->cm_ports[index].flags |= NODE_CM_LISTEN;
out:
	node_unlock(node);
	return ret;
}

void node_cm_release(struct node *node, int index)
{
	struct node_cm_port *c;

	if (index < 0 || index >= IBEMU_MAX_CM_PORTS)
		return;
	node_lock(node);
	c = &node->seg->cm_ports[index];
	if (c->token == node->token &&
	    c->owner == (uint32_t)node->proc_slot + 1)
		memset(c, 0, sizeof(*c));
	node_unlock(node);
}

int node_cm_lookup(struct node *node, uint16_t ps, const uint8_t addr[16],
		   bool v4, uint16_t port, int32_t *slot_p, uint64_t *token_p)
{
	struct node_cm_port e, want = { 0 }, best = { 0 };
	unsigned int i;
	bool found = false;

	want.ps = ps;
	want.port = port;
	want.flags = v4 ? NODE_CM_V4 : 0;
	memcpy(want.addr, addr, sizeof(want.addr));
	node_lock(node);
	for (i = 0; i < IBEMU_MAX_CM_PORTS; i++) {
		if (!cm_entry_live_locked(node, i, &e) ||
		    !(e.flags & NODE_CM_LISTEN) || e.ps != ps ||
		    e.port != port || !cm_overlap(&e, &want))
			continue;
		if (!found || cm_addr_wild(&best)) {
			best = e;
			found = true;
		}
		if (!cm_addr_wild(&e))
			break;
	}
	node_unlock(node);
	if (!found)
		return -ENOENT;
	*slot_p = (int32_t)best.owner - 1;
	*token_p = best.token;
	return 0;
}

bool node_cm_entry_locked(struct node *node, unsigned int i,
			  struct node_cm_port *c)
{
	return i < IBEMU_MAX_CM_PORTS && cm_entry_live_locked(node, i, c);
}
