// SPDX-License-Identifier: MIT
/*
 * The ports of the node's HCA (doc/design.md §6, "Ports"): how many, each
 * port's GUID and LID, and its state, which `ibemu port down|up` changes
 * as a cable pulled and plugged back would (IBA 14.2.5.6 PortInfo,
 * PortState).
 *
 * The count is a property of the HCA, fixed by the process that makes the
 * node (IBEMU_PORTS=2; one port by default); a process that asks for
 * another count later gets the node's and one line saying so.
 *
 * Lock rule: node.h, struct node_port.
 */
#include "config.h"

#include <errno.h>
#include <infiniband/verbs.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "log.h"
#include "node.h"

unsigned int node_ports_wanted(void)
{
	static atomic_bool told;
	const char *env = getenv("IBEMU_PORTS");

	if (!env || !*env || !strcmp(env, "1"))
		return 1;
	if (!strcmp(env, "2"))
		return 2;
	if (!atomic_exchange(&told, true))
		ibemu_log_err("IBEMU_PORTS=%s: the HCA has 1 or %d ports; "
			      "taking 1", env, IBEMU_MAX_PORTS);
	return 1;
}

/* Port 2's LID: derived in the node's subnet when port 1's is
 * (fabric_port2_lid_for), else half the LID space away from port 1's,
 * which the node's own processes reach and other nodes do not (a node
 * known by the fabric file, or alone). */
static uint16_t node_port2_lid(const struct node_seg *seg)
{
	const struct node_fabric *f = &seg->fabric;
	uint16_t lid = 0;

	if (!(f->flags & NODE_FABRIC_FILE) && f->ip4[0] &&
	    seg->lid == fabric_lid_for(f->ip4, f->prefix4))
		lid = fabric_port2_lid_for(seg->lid, f->prefix4);
	if (!lid)
		lid = (uint16_t)((seg->lid - 1u + 0x6000u) %
					 IBEMU_LID_UNICAST_MAX +
				 1u);
	return lid;
}

void node_ports_init(struct node_seg *seg)
{
	unsigned int i;

	seg->nr_ports = node_ports_wanted();
	for (i = 0; i < IBEMU_MAX_PORTS; i++) {
		/* Port GUIDs: the node GUID's low bits count the ports. */
		seg->ports[i].guid = seg->node_guid | (i + 1);
		atomic_init(&seg->ports[i].state, i < seg->nr_ports
				    ? IBV_PORT_ACTIVE : IBV_PORT_NOP);
	}
	seg->ports[0].lid = seg->lid;
	if (seg->nr_ports > 1)
		seg->ports[1].lid = node_port2_lid(seg);
	atomic_init(&seg->port_gen, 0);
}

void node_ports_told(const struct node_seg *seg)
{
	static atomic_bool told;
	unsigned int want = node_ports_wanted(), have = node_nr_ports(seg);

	if (want == have || !getenv("IBEMU_PORTS") ||
	    atomic_exchange(&told, true))
		return;
	ibemu_log_err("IBEMU_PORTS=%u, but this node's HCA was made with %u "
		      "port%s (the ports are the node's, fixed by its first "
		      "process): using %u; to change it, end every process "
		      "of the node and remove its segment (`ibemu status` "
		      "names it)",
		      want, have, have == 1 ? "" : "s", have);
}

int node_port_set_state(struct node_seg *seg, unsigned int port,
			uint32_t state)
{
	if (port < 1 || port > node_nr_ports(seg) ||
	    (state != IBV_PORT_DOWN && state != IBV_PORT_ACTIVE))
		return EINVAL;
	if (atomic_exchange_explicit(&seg->ports[port - 1].state, state,
				     memory_order_relaxed) != state)
		atomic_fetch_add_explicit(&seg->port_gen, 1,
					  memory_order_release);
	return 0;
}
