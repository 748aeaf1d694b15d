// SPDX-License-Identifier: MIT
/*
 * rpoll and rselect (rsocket.c): rsockets and other descriptors
 * watched together, an rsocket through its CM channel and completion
 * channel.
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/select.h>
#include <rdma/rsocket.h>

#include "ibemu.h"
#include "rsocket.h"

/* ---- rpoll and rselect ---- */

/* rs's readiness for events, after taking in what there is. */
static short rs_revents(struct rsock *rs, short events)
{
	struct pollfd p;
	short r = 0;

	if (rs->state == RS_LISTENING) {
		p.fd = rs->ch->fd;
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, 0) > 0 && (p.revents & POLLIN))
			r |= POLLIN;
		return r & events;
	}
	rs_progress(rs);
	switch (rs->state) {
	case RS_ACCEPTING:
	case RS_CONNECTED:
		if (rs_has_data(rs) || rs->peer_fin || rs->rd_shut ||
		    rs->peer_gone)
			r |= POLLIN;
		if (rs->state == RS_CONNECTED && !rs->wr_shut &&
		    !rs->iomap_pending && rs_can_send(rs))
			r |= POLLOUT;
		/* Hung up only when nothing is left to read: what the peer
		 * sent before it went is still POLLIN, as on TCP. */
		if (rs->peer_gone && !rs_has_data(rs)) {
			r |= POLLHUP;
			if (rs->err)
				r |= POLLERR;
		}
		break;
	case RS_FAILED:
		r |= POLLOUT | POLLERR | POLLHUP;
		break;
	default:
		break;
	}
	return r & (events | POLLERR | POLLHUP);
}

static int poll_left(int timeout, int64_t end)
{
	int64_t left;

	if (timeout < 0)
		return -1;
	left = end - now_ms();
	return left > 0 ? (int)left : 0;
}

IBEMU_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	struct pollfd *p;
	struct rsock *rs;
	int64_t end = now_ms() + (timeout > 0 ? timeout : 0);
	nfds_t i, np;
	int ready, n, wait;

	if (nfds && !fds) {
		errno = EFAULT;
		return -1;
	}
	p = calloc(nfds * 2 + 1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (;;) {
		/* Arm, then look: nothing that comes after the look goes
		 * unseen by the poll below. */
		ready = 0;
		np = 0;
		for (i = 0; i < nfds; i++) {
			fds[i].revents = 0;
			rs = fds[i].fd >= 0 ? tab_find(fds[i].fd, false) : NULL;
			if (!rs) {
				p[np++] = fds[i];
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			rs_arm_cq(rs);
			fds[i].revents = rs_revents(rs, fds[i].events);
			np += rs_pollfds(rs, p + np);
			pthread_mutex_unlock(&rs->lock);
			if (fds[i].revents)
				ready++;
		}
		wait = ready ? 0 : poll_left(timeout, end);
		n = poll(p, np, wait);
		if (n < 0) {
			free(p);
			return ready ? ready : -1;
		}
		np = 0;
		for (i = 0; i < nfds; i++) {
			rs = fds[i].fd >= 0 ? tab_find(fds[i].fd, false) : NULL;
			if (!rs) {
				fds[i].revents = p[np++].revents;
				if (fds[i].revents)
					ready++;
				continue;
			}
			pthread_mutex_lock(&rs->lock);
			np += rs->cc ? 2 : 1;
			rs_take_cq_events(rs);
			if (!fds[i].revents) {
				fds[i].revents = rs_revents(rs, fds[i].events);
				if (fds[i].revents)
					ready++;
			}
			pthread_mutex_unlock(&rs->lock);
		}
		if (ready || !wait) {
			free(p);
			return ready;
		}
	}
}

IBEMU_EXPORT int rselect(int nfds, fd_set *r, fd_set *w, fd_set *x,
			 struct timeval *timeout)
{
	struct pollfd *p;
	int i, n = 0, ret, ms = -1;

	if (nfds < 0 || nfds > FD_SETSIZE) {
		errno = EINVAL;
		return -1;
	}
	if (timeout)
		ms = (int)(timeout->tv_sec * 1000 +
			   (timeout->tv_usec + 999) / 1000);
	p = calloc((size_t)nfds + 1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return -1;
	}
	for (i = 0; i < nfds; i++) {
		short ev = 0;

		if (r && FD_ISSET(i, r))
			ev |= POLLIN;
		if (w && FD_ISSET(i, w))
			ev |= POLLOUT;
		if (x && FD_ISSET(i, x))
			ev |= POLLPRI;
		if (!ev)
			continue;
		p[n].fd = i;
		p[n++].events = ev;
	}
	ret = rpoll(p, (nfds_t)n, ms);
	if (ret < 0) {
		free(p);
		return -1;
	}
	if (r)
		FD_ZERO(r);
	if (w)
		FD_ZERO(w);
	if (x)
		FD_ZERO(x);
	ret = 0;
	for (i = 0; i < n; i++) {
		short rev = p[i].revents;

		if (r && (rev & (POLLIN | POLLHUP | POLLERR)) &&
		    (p[i].events & POLLIN)) {
			FD_SET(p[i].fd, r);
			ret++;
		}
		if (w && (rev & (POLLOUT | POLLERR)) &&
		    (p[i].events & POLLOUT)) {
			FD_SET(p[i].fd, w);
			ret++;
		}
		if (x && (rev & POLLPRI)) {
			FD_SET(p[i].fd, x);
			ret++;
		}
	}
	free(p);
	return ret;
}
