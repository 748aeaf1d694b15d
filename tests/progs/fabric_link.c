// SPDX-License-Identifier: MIT
/*
 * Fabric objects, control socket and connected endpoints for
 * tests/progs/fabric_cq.c (see fabric_link.h).
 */
#define _GNU_SOURCE
#include "fabric_link.h"

#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <rdma/fi_errno.h>

#include "rc_pair.h"

#define LINK_FI_VERSION FI_VERSION(1, 17)
#define LINK_WAIT_MS 20000
#define LINK_NAME_MAX 256

long long link_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void link_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static int fi_said(const char *what, int ret)
{
	say("FAIL: %s: %s (%d)", what, fi_strerror(-ret), ret);
	return -1;
}

/* The server's listening socket, one client accepted on it. */
static int ctl_accept(const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE }, *ai;
	struct pollfd pfd = { .events = POLLIN };
	int one = 1, fd = -1;

	if (getaddrinfo(NULL, port, &hints, &ai)) {
		say("FAIL: control port %s: cannot resolve", port);
		return -1;
	}
	pfd.fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (pfd.fd >= 0 &&
	    !setsockopt(pfd.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) &&
	    !bind(pfd.fd, ai->ai_addr, ai->ai_addrlen) &&
	    !listen(pfd.fd, 1) && poll(&pfd, 1, LINK_WAIT_MS) == 1)
		fd = accept(pfd.fd, NULL, NULL);
	if (fd < 0)
		say("FAIL: control port %s: no client: %s", port,
		    strerror(errno));
	if (pfd.fd >= 0)
		close(pfd.fd);
	freeaddrinfo(ai);
	return fd;
}

static int ctl_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int fd;

	if (getaddrinfo(host, port, &hints, &ai)) {
		say("FAIL: control connection: cannot resolve %s", host);
		return -1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM, 0);
	if (fd >= 0 && connect(fd, ai->ai_addr, ai->ai_addrlen)) {
		/* sc_pair runs the client again on this message. */
		say("couldn't connect to %s:%s: %s", host, port,
		    strerror(errno));
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	return fd;
}

int link_put(struct link *l, const void *buf, size_t len)
{
	if (rc_xfer(l->ctl, (void *)buf, len, 1) == 0)
		return 0;
	say("FAIL: %s: the control socket broke", l->tag);
	return -1;
}

int link_get(struct link *l, void *buf, size_t len)
{
	if (rc_xfer(l->ctl, buf, len, 0) == 0)
		return 0;
	say("FAIL: %s: the control socket broke (the peer ended)", l->tag);
	return -1;
}

int link_say(struct link *l, const char *token)
{
	char t[8] = { 0 };

	strncpy(t, token, sizeof(t) - 1);
	return link_put(l, t, sizeof(t));
}

int link_expect(struct link *l, const char *token)
{
	char t[8];

	if (link_get(l, t, sizeof(t)))
		return -1;
	t[7] = 0;
	if (strcmp(t, token) == 0)
		return 0;
	say("FAIL: %s: the peer said \"%s\", not \"%s\"", l->tag, t, token);
	return -1;
}

int session_expect(struct session *s, const char *token)
{
	struct pollfd pfd = { .fd = s->l->ctl, .events = POLLIN };
	long long end = link_now_ms() + LINK_WAIT_MS;

	while (poll(&pfd, 1, 1) == 0 && link_now_ms() < end) {
		fi_cq_read(s->tx, NULL, 0);
		fi_cq_read(s->rx, NULL, 0);
	}
	return link_expect(s->l, token);
}

/* An endpoint name, length first. */
static int name_put(struct link *l, const void *name, size_t len)
{
	uint32_t n = (uint32_t)len;

	return link_put(l, &n, sizeof(n)) || link_put(l, name, len) ? -1 : 0;
}

static int name_get(struct link *l, void *name, size_t *len_p)
{
	uint32_t n;

	if (link_get(l, &n, sizeof(n)))
		return -1;
	if (n == 0 || n > LINK_NAME_MAX) {
		say("FAIL: %s: the peer's endpoint name is %u bytes", l->tag, n);
		return -1;
	}
	*len_p = n;
	return link_get(l, name, n);
}

static struct fi_info *link_hints(bool rdm)
{
	struct fi_info *h = fi_allocinfo();

	if (!h)
		return NULL;
	h->ep_attr->type = rdm ? FI_EP_RDM : FI_EP_MSG;
	h->caps = FI_MSG | FI_RMA;
	h->mode = FI_CONTEXT | FI_RX_CQ_DATA;
	h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
				  FI_MR_ALLOCATED | FI_MR_PROV_KEY;
	h->domain_attr->cq_data_size = 4;
	h->fabric_attr->prov_name = strdup(rdm ? "verbs;ofi_rxm" : "verbs");
	return h;
}

/* MSG client: the server's passive endpoint name, then the info that
 * leads there. */
static int msg_client_info(struct link *l, struct fi_info *hints)
{
	uint8_t name[LINK_NAME_MAX];
	uint32_t format;
	size_t len;

	if (link_get(l, &format, sizeof(format)) || name_get(l, name, &len))
		return -1;
	hints->addr_format = format;
	hints->dest_addr = malloc(len);
	if (!hints->dest_addr)
		return -1;
	memcpy(hints->dest_addr, name, len);
	hints->dest_addrlen = len;
	return fi_getinfo(LINK_FI_VERSION, NULL, NULL, 0, hints, &l->info);
}

/* MSG server: a passive endpoint listening on host, its name sent. */
static int msg_server_listen(struct link *l)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	uint8_t name[LINK_NAME_MAX];
	size_t len = sizeof(name);
	uint32_t format = l->info->addr_format;
	int ret;

	ret = fi_passive_ep(l->fabric, l->info, &l->pep, NULL);
	if (ret)
		return fi_said("fi_passive_ep", ret);
	ret = fi_eq_open(l->fabric, &eq_attr, &l->eq, NULL);
	if (!ret)
		ret = fi_pep_bind(l->pep, &l->eq->fid, 0);
	if (!ret)
		ret = fi_listen(l->pep);
	if (!ret)
		ret = fi_getname(&l->pep->fid, name, &len);
	if (ret)
		return fi_said("listening passive endpoint", ret);
	return link_put(l, &format, sizeof(format)) ||
	       name_put(l, name, len) ? -1 : 0;
}

int link_open(struct link *l, bool rdm, const char *ctl_host,
	      const char *addr, const char *port)
{
	struct fi_eq_attr eq_attr = { .wait_obj = FI_WAIT_UNSPEC };
	struct fi_info *hints;
	int ret;

	l->rdm = rdm;
	l->tag = rdm ? "FI_EP_RDM" : "FI_EP_MSG";
	l->ctl = l->server ? ctl_accept(port) : ctl_connect(ctl_host, port);
	if (l->ctl < 0)
		return -1;
	hints = link_hints(rdm);
	if (!hints)
		return -1;
	if (l->server || rdm)
		ret = fi_getinfo(LINK_FI_VERSION, addr, NULL,
				 addr ? FI_SOURCE : 0, hints, &l->info);
	else
		ret = msg_client_info(l, hints);
	fi_freeinfo(hints);
	if (ret == -FI_ENODATA) {
		say("SKIP: %s: fi_getinfo finds no provider %s", l->tag,
		    rdm ? "verbs;ofi_rxm" : "verbs");
		return 77;
	}
	if (ret)
		return fi_said("fi_getinfo", ret);
	ret = fi_fabric(l->info->fabric_attr, &l->fabric, NULL);
	if (ret)
		return fi_said("fi_fabric", ret);
	if (!rdm && l->server && msg_server_listen(l))
		return -1;
	if (!rdm && !l->server) {
		ret = fi_eq_open(l->fabric, &eq_attr, &l->eq, NULL);
		if (ret)
			return fi_said("fi_eq_open", ret);
	}
	ret = fi_domain(l->fabric, l->info, &l->domain, NULL);
	if (ret)
		return fi_said("fi_domain", ret);
	l->buf = aligned_alloc(4096, LINK_BUF_LEN);
	if (!l->buf)
		return -1;
	memset(l->buf, 0, LINK_BUF_LEN);
	ret = fi_mr_reg(l->domain, l->buf, LINK_BUF_LEN,
			FI_SEND | FI_RECV | FI_READ | FI_WRITE |
			FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0, 0, &l->mr, NULL);
	if (ret)
		return fi_said("fi_mr_reg", ret);
	l->desc = fi_mr_desc(l->mr);
	say("note: %s: provider %s, domain %s", l->tag,
	    l->info->fabric_attr->prov_name, l->info->domain_attr->name);
	return 0;
}

static void fid_close(void *fidp)
{
	struct fid **f = fidp;

	if (*f)
		fi_close(*f);
	*f = NULL;
}

void link_close(struct link *l)
{
	fid_close(&l->mr);
	fid_close(&l->pep);
	fid_close(&l->domain);
	fid_close(&l->eq);
	fid_close(&l->fabric);
	if (l->info)
		fi_freeinfo(l->info);
	l->info = NULL;
	free(l->buf);
	l->buf = NULL;
	if (l->ctl >= 0)
		close(l->ctl);
	l->ctl = -1;
}

/* The next CM event EVENT for FID (others, such as a closed session's
 * FI_SHUTDOWN, are passed over); a CONNREQ's info to *info_p. */
static int eq_wait(struct link *l, uint32_t event, struct fid *fid,
		   struct fi_info **info_p)
{
	union {
		struct fi_eq_cm_entry cm;
		uint8_t bytes[sizeof(struct fi_eq_cm_entry) + 256];
	} e;
	long long end = link_now_ms() + LINK_WAIT_MS;
	struct fi_eq_err_entry err = { 0 };
	uint32_t got;
	ssize_t n;

	while (link_now_ms() < end) {
		n = fi_eq_sread(l->eq, &got, &e, sizeof(e), 1000, 0);
		if (n == -FI_EAGAIN)
			continue;
		if (n == -FI_EAVAIL) {
			fi_eq_readerr(l->eq, &err, 0);
			say("FAIL: %s: CM error event: %s (prov_errno %d)",
			    l->tag, fi_strerror(err.err), err.prov_errno);
			return -1;
		}
		if (n < 0)
			return fi_said("fi_eq_sread", (int)n);
		if (got == event && (!fid || e.cm.fid == fid)) {
			if (info_p)
				*info_p = e.cm.info;
			return 0;
		}
		if (got == FI_CONNREQ)
			fi_freeinfo(e.cm.info);
	}
	say("FAIL: %s: no CM event %u within %d ms", l->tag, event,
	    LINK_WAIT_MS);
	return -1;
}

static int session_bind(struct session *s)
{
	struct link *l = s->l;
	int ret = 0;

	if (l->eq)
		ret = fi_ep_bind(s->ep, &l->eq->fid, 0);
	if (!ret && s->av)
		ret = fi_ep_bind(s->ep, &s->av->fid, 0);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->tx->fid, FI_TRANSMIT);
	if (!ret)
		ret = fi_ep_bind(s->ep, &s->rx->fid, FI_RECV);
	return ret ? fi_said("fi_ep_bind", ret) : 0;
}

static int msg_session_connect(struct session *s)
{
	struct link *l = s->l;
	struct fi_info *info = l->info;
	int ret;

	if (l->server && eq_wait(l, FI_CONNREQ, &l->pep->fid, &info))
		return -1;
	ret = fi_endpoint(l->domain, info, &s->ep, NULL);
	if (l->server)
		fi_freeinfo(info);
	if (ret)
		return fi_said("fi_endpoint", ret);
	if (session_bind(s))
		return -1;
	if (l->server)
		ret = fi_accept(s->ep, NULL, 0);
	else
		ret = fi_connect(s->ep, l->info->dest_addr, NULL, 0);
	if (ret)
		return fi_said(l->server ? "fi_accept" : "fi_connect", ret);
	return eq_wait(l, FI_CONNECTED, &s->ep->fid, NULL);
}

static int rdm_session_connect(struct session *s)
{
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE, .count = 4 };
	uint8_t name[LINK_NAME_MAX], peer[LINK_NAME_MAX];
	size_t len = sizeof(name), peer_len;
	struct link *l = s->l;
	int ret;

	ret = fi_av_open(l->domain, &av_attr, &s->av, NULL);
	if (ret)
		return fi_said("fi_av_open", ret);
	ret = fi_endpoint(l->domain, l->info, &s->ep, NULL);
	if (ret)
		return fi_said("fi_endpoint", ret);
	if (session_bind(s))
		return -1;
	ret = fi_enable(s->ep);
	if (!ret)
		ret = fi_getname(&s->ep->fid, name, &len);
	if (ret)
		return fi_said("fi_enable/fi_getname", ret);
	if (name_put(l, name, len) || name_get(l, peer, &peer_len))
		return -1;
	if (fi_av_insert(s->av, peer, 1, &s->peer, 0, NULL) != 1) {
		say("FAIL: %s: fi_av_insert of the peer", l->tag);
		return -1;
	}
	return 0;
}

int session_open(struct session *s, struct link *l, enum fi_wait_obj wait,
		 const char *wait_name)
{
	struct fi_cq_attr attr = {
		.size = 0, /* the provider's default: room for the ep's queues */
		.format = FI_CQ_FORMAT_DATA,
		.wait_obj = wait,
		.wait_cond = FI_CQ_COND_NONE,
	};
	int ret;

	memset(s, 0, sizeof(*s));
	s->l = l;
	s->wait = wait;
	s->wait_name = wait_name;
	s->peer = FI_ADDR_UNSPEC;
	ret = fi_cq_open(l->domain, &attr, &s->tx, NULL);
	if (!ret)
		ret = fi_cq_open(l->domain, &attr, &s->rx, NULL);
	/* fi_cq(3): a provider need not offer every wait object; one it
	 * does not offer is refused at open, the same on both peers, which
	 * then leave the session out.  verbs says -FI_ENOSYS, RxM's util
	 * CQ -FI_EINVAL; the attributes are those FI_WAIT_FD opened with,
	 * but for the wait object. */
	if ((ret == -FI_ENOSYS || ret == -FI_EINVAL) && wait != FI_WAIT_FD &&
	    wait != FI_WAIT_UNSPEC) {
		fid_close(&s->tx);
		say("note: %s %s: fi_cq_open: %s (%d): the provider does not "
		    "offer it", l->tag, wait_name, fi_strerror(-ret), ret);
		return 1;
	}
	if (ret) {
		say("FAIL: %s %s: fi_cq_open: %s (%d)", l->tag, wait_name,
		    fi_strerror(-ret), ret);
		return -1;
	}
	return l->rdm ? rdm_session_connect(s) : msg_session_connect(s);
}

int session_shutdown(struct session *s)
{
	int ret;

	s->down = true;
	ret = fi_shutdown(s->ep, 0);
	return ret ? fi_said("fi_shutdown", ret) : 0;
}

void session_close(struct session *s)
{
	if (s->ep && !s->l->rdm && !s->down)
		fi_shutdown(s->ep, 0);
	fid_close(&s->ep);
	fid_close(&s->av);
	fid_close(&s->tx);
	fid_close(&s->rx);
}

int link_fails;

static uint8_t pattern(unsigned int seed, unsigned int i)
{
	return (uint8_t)(seed * 29 + i * 7 + 1);
}

void link_fill(uint8_t *p, unsigned int seed, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, (unsigned int)i);
}

bool link_same(const uint8_t *p, unsigned int seed, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, (unsigned int)i))
			return false;
	return true;
}

const char *link_err_name(ssize_t n)
{
	return n < 0 ? fi_strerror((int)-n) : "an entry";
}

ssize_t session_read(struct session *s, struct fid_cq *cq,
		     struct fi_cq_data_entry *e, int ms)
{
	long long end = link_now_ms() + ms;
	ssize_t n;

	memset(e, 0, sizeof(*e));
	if (s->wait != FI_WAIT_NONE)
		return fi_cq_sread(cq, e, 1, NULL, ms);
	while ((n = fi_cq_read(cq, e, 1)) == -FI_EAGAIN &&
	       link_now_ms() < end)
		link_sleep_ms(1);
	return n;
}

ssize_t session_read_err(struct fid_cq *cq, struct fi_cq_err_entry *err)
{
	memset(err, 0, sizeof(*err));
	return fi_cq_readerr(cq, err, 0);
}
