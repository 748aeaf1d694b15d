// SPDX-License-Identifier: MIT
/*
 * The RDMA CM's event channels (cm.h): the events queued on an id's
 * channel, the eventfd that counts them, and emu_cm_get_event, which
 * takes them off.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "cm.h"
#include "cm_int.h"
#include "hca.h"
#include "log.h"

/* ---- the event channels ---- */

/* Queue ev on the id's channel; caller holds cm.lock. */
void cm_queue_locked(struct emu_cm_id *id, struct emu_cm_event *ev)
{
	struct emu_cm_chan *chan = id->chan;
	struct cm_ev_node *n;
	uint64_t one = 1;

	n = calloc(1, sizeof(*n));
	if (!n) {
		ibemu_log_err("rdma_cm: no memory for an event; dropped");
		return;
	}
	ev->id = id;
	ev->handle = id->handle;
	n->ev = *ev;
	*chan->tail = n;
	chan->tail = &n->next;
	if (write(chan->fd, &one, sizeof(one)) != sizeof(one))
		ibemu_log_err("rdma_cm: event channel: %s", strerror(errno));
}

void cm_event_locked(struct emu_cm_id *id, enum emu_cm_event_type type,
		     int status)
{
	struct emu_cm_event ev;

	memset(&ev, 0, sizeof(ev));
	ev.event = type;
	ev.status = status;
	cm_queue_locked(id, &ev);
}

/*
 * The connection is over: DISCONNECTED now, and after the time wait
 * (IBA 12.9.6: no message of the old connection can still arrive) the
 * id reports TIMEWAIT_EXIT, as the kernel's rdma_cm does.  ev: the
 * DISCONNECTED event to queue (NULL: one without data).
 */
void cm_disconnected_locked(struct emu_cm_id *id, struct emu_cm_event *ev)
{
	struct emu_cm_event plain;

	if (!ev) {
		memset(&plain, 0, sizeof(plain));
		ev = &plain;
	}
	ev->event = EMU_CM_DISCONNECTED;
	id->state = CM_DISCONNECTED;
	id->has_last = false;
	id->deadline = clock_now_ns() + CM_TIMEWAIT_MS * 1000000ull;
	cm_queue_locked(id, ev);
	cm_wake(id->cm);
}

int emu_cm_chan_create(struct emu_hca *hca, struct emu_cm_chan **chan_p,
		       int *fd_p)
{
	struct emu_cm_chan *chan;

	if (!hca->cm)
		return EINVAL;
	chan = calloc(1, sizeof(*chan));
	if (!chan)
		return ENOMEM;
	chan->fd = eventfd(0, EFD_SEMAPHORE | EFD_CLOEXEC);
	if (chan->fd < 0) {
		free(chan);
		return errno;
	}
	chan->cm = hca->cm;
	chan->tail = &chan->head;
	*chan_p = chan;
	*fd_p = chan->fd;
	return 0;
}

int emu_cm_chan_destroy(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	struct cm_ev_node *n;
	bool busy;

	pthread_mutex_lock(&cm->lock);
	if (chan->nr_ids) {
		pthread_mutex_unlock(&cm->lock);
		return EBUSY;
	}
	while ((n = chan->head)) {
		chan->head = n->next;
		free(n);
	}
	chan->tail = &chan->head;
	chan->destroyed = true;
	busy = chan->readers != 0;
	pthread_mutex_unlock(&cm->lock);
	/* A thread still in emu_cm_get_event keeps the channel and stays
	 * blocked, as on a closed rdma_cm descriptor (no event can come:
	 * no id is left); the last one out closes and frees it. */
	if (!busy) {
		close(chan->fd);
		free(chan);
	}
	return 0;
}

int emu_cm_chan_hold(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	int ret = 0;

	pthread_mutex_lock(&cm->lock);
	if (chan->destroyed)
		ret = EBADF;
	else
		chan->readers++;
	pthread_mutex_unlock(&cm->lock);
	return ret;
}

void emu_cm_chan_put(struct emu_cm_chan *chan)
{
	struct emu_cm *cm = chan->cm;
	bool last;

	pthread_mutex_lock(&cm->lock);
	last = --chan->readers == 0 && chan->destroyed;
	pthread_mutex_unlock(&cm->lock);
	if (last) {
		close(chan->fd);
		free(chan);
	}
}

int emu_cm_get_event(struct emu_cm_chan *chan, struct emu_cm_event *ev)
{
	struct emu_cm *cm = chan->cm;
	struct cm_ev_node *n = NULL;
	uint64_t count;
	ssize_t r;
	int ret;

	/* The channel stays while this thread is in here, even when
	 * another destroys it (rping 44's exit path): see
	 * emu_cm_chan_destroy. */
	ret = emu_cm_chan_hold(chan);
	if (ret)
		return ret;
	for (;;) {
		r = read(chan->fd, &count, sizeof(count));
		if (r < 0) {
			ret = errno;
			break;
		}
		if (r != sizeof(count)) {
			ret = EIO;
			break;
		}
		pthread_mutex_lock(&cm->lock);
		n = chan->head;
		if (n) {
			chan->head = n->next;
			if (!chan->head)
				chan->tail = &chan->head;
			n->ev.id->delivered++;
		}
		pthread_mutex_unlock(&cm->lock);
		if (n) {
			*ev = n->ev;
			free(n);
			ret = 0;
			break;
		}
		/* the count of an event dropped with its id, or with the
		 * channel: read on */
	}
	/* destroyed under us: the caller must not touch its channel */
	pthread_mutex_lock(&cm->lock);
	if (chan->destroyed && ret)
		ret = EBADF;
	pthread_mutex_unlock(&cm->lock);
	emu_cm_chan_put(chan);
	return ret;
}
