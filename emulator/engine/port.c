// SPDX-License-Identifier: MIT
/*
 * The node's ports as this process's engine sees them change (`ibemu port
 * down|up`, node_port.c): each change raises IBV_EVENT_PORT_ERR or
 * IBV_EVENT_PORT_ACTIVE on every open context (unaffiliated events, IBA
 * 11.6.3.3; element: the port number), and a QP whose primary path
 * leads out of a port gone down migrates if it is armed (apm.c).
 *
 * Lock rule: e->port_gen and e->port_state are the engine thread's,
 * under engine.lock (engine_ports_watch_locked).
 */
#include "config.h"

#include <stdatomic.h>

#include "engine.h"
#include "log.h"
#include "node.h"

void engine_ports_init(struct engine *e)
{
	const struct node_seg *seg = e->hca->node.seg;
	unsigned int i;

	e->port_gen = atomic_load_explicit(&seg->port_gen,
					   memory_order_acquire);
	for (i = 0; i < IBEMU_MAX_PORTS; i++)
		e->port_state[i] = node_port_state(seg, i + 1);
}

static void engine_port_changed_locked(struct engine *e, unsigned int port,
				       bool up)
{
	struct emu_qp *qp;

	ibemu_log_dbg("port %u is %s", port, up ? "ACTIVE" : "DOWN");
	emu_port_event(e->hca, port,
		       up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR);
	for (qp = e->all_qps; qp; qp = qp->all_next) {
		emu_lock(&qp->lock);
		apm_port_changed_locked(qp, port, up);
		emu_unlock(&qp->lock);
	}
}

bool engine_ports_changed(const struct engine *e)
{
	return atomic_load_explicit(&e->hca->node.seg->port_gen,
				    memory_order_relaxed) != e->port_gen;
}

void engine_ports_watch_locked(struct engine *e)
{
	const struct node_seg *seg = e->hca->node.seg;
	uint32_t gen = atomic_load_explicit(&seg->port_gen,
					    memory_order_acquire);
	unsigned int i, n = node_nr_ports(seg);
	uint32_t now;

	if (gen == e->port_gen)
		return;
	e->port_gen = gen;
	for (i = 0; i < n; i++) {
		now = node_port_state(seg, i + 1);
		if (now == e->port_state[i])
			continue;
		e->port_state[i] = now;
		engine_port_changed_locked(e, i + 1, now == IBV_PORT_ACTIVE);
	}
}
