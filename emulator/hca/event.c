// SPDX-License-Identifier: MIT
/*
 * Async events (IBA 11.6.3, manual 6.1): one record per event, written to
 * the descriptor the object's owner handed in.  The descriptor is
 * non-blocking: an application that never reads its events loses them
 * (with a warning) and never stalls the HCA, which writes them while
 * holding its locks.
 */
#include "config.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "hca.h"
#include "hca_trace.h"
#include "log.h"

void emu_event(const struct emu_owner *owner, enum ibv_event_type type)
{
	struct emu_event_desc desc = {
		.element = owner->handle,
		.event_type = type,
	};

	hca_trace_async(type, owner->handle);
	if (owner->async_fd < 0)
		return;
	if (write(owner->async_fd, &desc, sizeof(desc)) != sizeof(desc))
		ibemu_log_warn("async event %d dropped: queue full (%s)",
			       (int)type, strerror(errno));
}

void emu_port_event(struct emu_hca *hca, unsigned int port,
		    enum ibv_event_type type)
{
	struct emu_owner owner = { .handle = port };
	unsigned int i;

	pthread_mutex_lock(&hca->ctx_lock);
	for (i = 0; i < hca->nr_ctx_fds; i++) {
		owner.async_fd = hca->ctx_fds[i];
		emu_event(&owner, type);
	}
	pthread_mutex_unlock(&hca->ctx_lock);
}
