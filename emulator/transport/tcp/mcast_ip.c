// SPDX-License-Identifier: MIT
/*
 * UD multicast across nodes over IP multicast (doc/design.md §21,
 * "Multicast across nodes"): the engine's tp_mcast_ops (transport.h),
 * tp_mcast_ip_ops below.
 *
 * A real subnet replicates a multicast packet in its switches to every
 * port with a member (IBA 10.5); here the IP network does: the nodes of
 * one subnet (containers on a bridge, namespaces joined by veth) are the
 * ports, and a Linux bridge, or a switch, carries IPv4 multicast.
 *
 *  - The IP group of an MGID is 239.255.h.l (RFC 2365's organization
 *    local scope), h.l 16 bits of the MGID's FNV-1a hash: every node
 *    derives the same.  Two MGIDs may share an IP group: a receiver
 *    hands a datagram on only if its GRH names an MGID it joined.
 *  - Receiving: UDP sockets bound to the door port on any address,
 *    SO_REUSEADDR so that every process of the node can bind it,
 *    IP_MULTICAST_ALL off so that each gets only the groups it joined;
 *    the memberships are made on the node's interface and address.  A
 *    socket bound so also takes unicast datagrams to that port: each
 *    datagram's destination and interface (IP_PKTINFO) must be a group
 *    we joined, on the node's interface, and its source an address of
 *    the node's subnet (fabric_expected_lid, which also gives the SLID:
 *    the frame's own is not believed).  A
 *    socket holds as many as the kernel allows (igmp_max_memberships),
 *    further ones open further sockets.  One thread per process waits on
 *    them all (epoll; an idle process uses no CPU), started at the first
 *    join, stopped at engine_stop.
 *  - Sending: one unbound socket, IP_MULTICAST_IF the node's interface,
 *    TTL 1 (the subnet; IBEMU_MCAST_TTL for more), loop off: the
 *    processes of this node have their copies from the node's own
 *    fan-out (req.c), and a frame whose src_guid is ours is dropped too.
 *
 * With a fabric key (fabric_key.h) every datagram carries a MAC over
 * all of it (TP_FRAME_F_MAC, HMAC-SHA-256 truncated to 16 bytes, as
 * RFC 2104 section 5 allows), and one without it, or with a MAC of
 * another key, is dropped: no host without the key can send to a
 * group.  One that has the key and sees a datagram can send it again;
 * a UD datagram may arrive twice (IBA 9.8.3 makes UD unreliable), and
 * doc/ibemu.7 says so.  Without a key, a datagram with a MAC is
 * dropped, and a host of the subnet may send to any group, as on an
 * InfiniBand subnet without partitions.
 *
 * A received datagram is copied once into the thread's own buffer and
 * checked (tp_frame_check, a UD SEND to DestQP 0xFFFFFF with a multicast
 * DLID, an MGID we joined) before the engine sees it; it is then handed
 * to the engine under engine.lock as a packet of no process of this node
 * (src_proc -1, PKT_F_FOREIGN), whose group is the MGID alone: each node
 * gives a group its own MLID (node_mcast.c).
 *
 * Lock rule: struct mcast_ip's lock guards its group table and its
 * sockets; it is a leaf, taken under qp.lock (attach, detach, send) or
 * alone (the receiving thread, which releases it before it takes
 * engine.lock to deliver).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "check.h"
#include "engine.h"
#include "fabric.h"
#include "fabric_key.h"
#include "hmac.h"
#include "log.h"
#include "node.h"
#include "tp_frame.h"
#include "tp_tcp.h"

/* Receiving sockets a process opens at most: each holds the kernel's
 * igmp_max_memberships groups (20 by default), so this many cover
 * IBEMU_MAX_MCAST_GRP groups at that default. */
#define MCAST_IP_MAX_SOCKS 64
/* Datagrams taken from one socket before the thread looks at the others
 * (and at its stop event) again. */
#define MCAST_IP_BATCH 64
/* A receiving socket's buffer: a burst of datagrams waits there while
 * the thread is not scheduled (a sender has no flow control to slow
 * it); the kernel caps it at net.core.rmem_max unless we may force it. */
#define MCAST_IP_RCVBUF (4 << 20)
/* What the MAC of a datagram starts from (fabric_key.h). */
#define MCAST_IP_MAC_LABEL "ibemu mcast datagram"

/* An MGID the process's QPs are attached to, and the IP group it maps
 * to; refs: the attachments (QPs, and MLIDs of one QP). */
struct mcast_ip_group {
	uint8_t mgid[16];
	uint32_t refs;
	uint32_t addr; /* network order */
	int sock; /* index in socks[] of the membership; -1: it failed */
};

/* A receiving socket: its memberships, and how many the kernel let it
 * hold when it last refused one (UINT_MAX: it never did). */
struct mcast_ip_sock {
	int fd;
	unsigned int nr, cap;
};

struct mcast_ip {
	struct engine *e;
	/* The node's fabric, copied once at open (node.h struct
	 * node_fabric; the segment is writable by every process). */
	uint32_t ip4; /* network order */
	int ifindex;
	uint16_t port; /* the door port, host order */
	int ttl;
	uint64_t port_guid; /* host order: our own frames */
	int32_t proc_slot;
	uint64_t token;
	struct fabric_key key; /* fixed at open */
	atomic_bool key_told; /* a datagram of another key: said once */

	pthread_mutex_t lock; /* everything below but send_fd's reads */
	struct mcast_ip_group *groups;
	unsigned int nr_groups, max_groups;
	struct mcast_ip_sock socks[MCAST_IP_MAX_SOCKS];
	unsigned int nr_socks;
	int epfd, stopfd; /* -1 until the thread starts */
	bool thread_on;
	pthread_t thread;
	_Atomic int send_fd; /* -1 until the first send; read unlocked */
	atomic_bool send_failed; /* said once in the log */

	/* The thread's own: one datagram, copied out of the socket. */
	_Alignas(8) uint8_t buf[sizeof(struct tp_frame_hdr) +
				TP_FRAME_MAX_LEN + TP_FRAME_MAC_LEN];
};

/* The state of e's multicast (engine.mcast_priv), NULL: none. */
static inline struct mcast_ip *mcast_ip_of(const struct engine *e)
{
	return e->mcast_priv;
}

static uint32_t mcast_ip_group_addr(const uint8_t mgid[16])
{
	uint32_t h = 0x811c9dc5u; /* FNV-1a, 32 bits */
	unsigned int i;

	for (i = 0; i < 16; i++) {
		h ^= mgid[i];
		h *= 0x01000193u;
	}
	h ^= h >> 16;
	return htonl(0xefff0000u | (h & 0xffffu)); /* 239.255.h.l */
}

static int mcast_ip_ttl(void)
{
	const char *s = getenv("IBEMU_MCAST_TTL");
	long v;
	char *end;

	if (!s || !*s)
		return 1;
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 255) {
		ibemu_log_warn("IBEMU_MCAST_TTL=%s: not 1..255, using 1", s);
		return 1;
	}
	return (int)v;
}

static int mcast_ip_open(struct engine *e)
{
	const struct node_seg *seg = e->hca->node.seg;
	struct node_fabric f;
	struct mcast_ip *m;
	char ifname[IF_NAMESIZE];

	e->mcast_priv = NULL;
	f = seg->fabric;
	/* Only in network mode (tp_tcp.h); IPv4 multicast: a node known
	 * by an IPv6 address alone keeps its groups to itself. */
	if (!tp_tcp_net_on() || !(f.flags & NODE_FABRIC_MULTI) ||
	    !(f.ip4[0] | f.ip4[1] | f.ip4[2] | f.ip4[3]))
		return 0;
	memcpy(ifname, f.ifname, sizeof(ifname) - 1);
	ifname[sizeof(ifname) - 1] = '\0';
	m = calloc(1, sizeof(*m));
	if (!m)
		return ENOMEM;
	/* A key setting that cannot be used refuses network mode (the
	 * TCP transport says so): no multicast across nodes either. */
	if (fabric_key_load(&m->key)) {
		free(m);
		return 0;
	}
	m->e = e;
	memcpy(&m->ip4, f.ip4, 4);
	m->ifindex = (int)if_nametoindex(ifname);
	m->port = f.door_port ? f.door_port : IBEMU_DEFAULT_DOOR_PORT;
	m->ttl = mcast_ip_ttl();
	m->port_guid = seg->port_guid;
	m->proc_slot = e->hca->node.proc_slot;
	m->token = e->hca->node.token;
	pthread_mutex_init(&m->lock, NULL);
	m->epfd = -1;
	m->stopfd = -1;
	atomic_init(&m->send_fd, -1);
	e->mcast_priv = m;
	return 0;
}

/* ---- the group table (lock held) ---- */

static struct mcast_ip_group *group_find_locked(struct mcast_ip *m,
						const uint8_t mgid[16])
{
	unsigned int i;

	for (i = 0; i < m->nr_groups; i++)
		if (!memcmp(m->groups[i].mgid, mgid, 16))
			return &m->groups[i];
	return NULL;
}

/* An MGID whose IP group, addr, is joined. */
static struct mcast_ip_group *group_by_addr_locked(struct mcast_ip *m,
						   uint32_t addr)
{
	unsigned int i;

	for (i = 0; i < m->nr_groups; i++)
		if (m->groups[i].addr == addr && m->groups[i].sock >= 0)
			return &m->groups[i];
	return NULL;
}

/* ---- sockets ---- */

static int sock_opt(int fd, int level, int name, const void *v,
		    socklen_t len, const char *what)
{
	if (!setsockopt(fd, level, name, v, len))
		return 0;
	ibemu_log_err("multicast across nodes: %s: %s", what, strerror(errno));
	return errno;
}

/* The thread's epoll set and stop event, at the first receiving socket. */
static int poll_open_locked(struct mcast_ip *m)
{
	struct epoll_event ev = { .events = EPOLLIN };

	if (m->epfd >= 0)
		return 0;
	m->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (m->epfd < 0)
		goto err;
	m->stopfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (m->stopfd < 0)
		goto err_ep;
	ev.data.fd = m->stopfd;
	if (epoll_ctl(m->epfd, EPOLL_CTL_ADD, m->stopfd, &ev))
		goto err_stop;
	return 0;

err_stop:
	close(m->stopfd);
	m->stopfd = -1;
err_ep:
	close(m->epfd);
	m->epfd = -1;
err:
	ibemu_log_err("multicast across nodes: epoll: %s", strerror(errno));
	return errno;
}

/* A non-blocking UDP socket over IPv4: its fd, or the negative errno
 * (reported). */
static int udp_sock_new(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int err;

	if (fd >= 0)
		return fd;
	err = errno;
	ibemu_log_err("multicast across nodes: socket: %s", strerror(err));
	return -err;
}

/* One more receiving socket: bound to the door port, in the epoll set. */
static int recv_sock_open_locked(struct mcast_ip *m, int *idx_p)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(m->port),
				   .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct epoll_event ev = { .events = EPOLLIN };
	int fd, one = 1, zero = 0, rcvbuf = MCAST_IP_RCVBUF, ret;

	if (m->nr_socks >= MCAST_IP_MAX_SOCKS)
		return ENOBUFS;
	ret = poll_open_locked(m);
	if (ret)
		return ret;
	fd = udp_sock_new();
	if (fd < 0)
		return -fd;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf,
		       sizeof(rcvbuf)))
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	ret = sock_opt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one),
		       "SO_REUSEADDR");
	if (!ret)
		ret = sock_opt(fd, IPPROTO_IP, IP_MULTICAST_ALL, &zero,
			       sizeof(zero), "IP_MULTICAST_ALL");
	if (!ret)
		ret = sock_opt(fd, IPPROTO_IP, IP_PKTINFO, &one, sizeof(one),
			       "IP_PKTINFO");
	if (!ret && bind(fd, (struct sockaddr *)&sin, sizeof(sin))) {
		ret = errno;
		ibemu_log_err("multicast across nodes: bind to UDP port %u: "
			      "%s", m->port, strerror(ret));
	}
	ev.data.fd = fd;
	if (!ret && epoll_ctl(m->epfd, EPOLL_CTL_ADD, fd, &ev))
		ret = errno;
	if (ret) {
		close(fd);
		return ret;
	}
	m->socks[m->nr_socks].fd = fd;
	m->socks[m->nr_socks].nr = 0;
	m->socks[m->nr_socks].cap = UINT_MAX;
	*idx_p = (int)m->nr_socks++;
	return 0;
}

static int membership(struct mcast_ip *m, int fd, uint32_t addr, int op)
{
	struct ip_mreqn mr = { .imr_multiaddr.s_addr = addr,
			       .imr_address.s_addr = m->ip4,
			       .imr_ifindex = m->ifindex };

	return setsockopt(fd, IPPROTO_IP, op, &mr, sizeof(mr)) ? errno : 0;
}

/* Join the IP group addr on a socket that has room; its index in
 * *idx_p. */
static int join_locked(struct mcast_ip *m, uint32_t addr, int *idx_p)
{
	struct mcast_ip_sock *sk;
	unsigned int i;
	int ret = ENOBUFS;

	for (i = 0; i <= m->nr_socks && ret == ENOBUFS; i++) {
		if (i == m->nr_socks &&
		    (ret = recv_sock_open_locked(m, idx_p)))
			break;
		sk = &m->socks[i];
		if (sk->nr >= sk->cap)
			continue; /* full when it was last tried */
		ret = membership(m, sk->fd, addr, IP_ADD_MEMBERSHIP);
		if (ret == ENOBUFS)
			sk->cap = sk->nr;
		*idx_p = (int)i;
	}
	if (!ret) {
		m->socks[*idx_p].nr++;
		return 0;
	}
	ibemu_log_err("multicast across nodes: joining the IP group "
		      "%u.%u.%u.%u: %s (the group stays on this node)",
		      ((uint8_t *)&addr)[0], ((uint8_t *)&addr)[1],
		      ((uint8_t *)&addr)[2], ((uint8_t *)&addr)[3],
		      strerror(ret));
	return ret;
}

/* ---- receiving ---- */

/* The MAC of a datagram made of pieces (fabric_key.h, TP_FRAME_F_MAC):
 * HMAC-SHA-256 under the fabric key, of the label and the pieces in
 * order, truncated to its first TP_FRAME_MAC_LEN bytes. */
static void datagram_mac(const struct mcast_ip *m, const struct iovec *iov,
			 size_t n, uint8_t out[TP_FRAME_MAC_LEN])
{
	struct hmac_sha256_ctx c;
	uint8_t full[HMAC_SHA256_LEN];
	size_t i;

	hmac_sha256_init(&c, m->key.key, sizeof(m->key.key));
	hmac_sha256_update(&c, MCAST_IP_MAC_LABEL, sizeof(MCAST_IP_MAC_LABEL));
	for (i = 0; i < n; i++)
		hmac_sha256_update(&c, iov[i].iov_base, iov[i].iov_len);
	hmac_sha256_final(&c, full);
	memcpy(out, full, TP_FRAME_MAC_LEN);
	explicit_bzero(full, sizeof(full));
}

/* Whether the n bytes in m->buf, a frame of len bytes after its header,
 * carry what the fabric key asks: a MAC of the key when one is set,
 * none when not.  A mismatch is said once. */
static bool datagram_keyed(struct mcast_ip *m, const struct tp_frame_hdr *f,
			   size_t n, uint32_t len)
{
	size_t body = sizeof(*f) + len;
	uint8_t mac[TP_FRAME_MAC_LEN];
	struct iovec iov = { .iov_base = m->buf, .iov_len = body };
	bool has = f->flags & TP_FRAME_F_MAC;

	if (!m->key.set && !has && n == body)
		return true;
	if (m->key.set && has && n == body + TP_FRAME_MAC_LEN) {
		datagram_mac(m, &iov, 1, mac);
		if (crypto_equal(mac, m->buf + body, sizeof(mac)))
			return true;
	}
	if (!atomic_exchange(&m->key_told, true))
		ibemu_log_warn("multicast across nodes: a datagram %s dropped; "
			       "every node of a fabric needs the same "
			       "IBEMU_FABRIC_KEY, or none",
			       m->key.set ? "without this fabric key"
					  : "with a fabric key");
	return false;
}

/*
 * Check a datagram (n bytes in m->buf, private memory) from the IPv4
 * address src4 (network order), whose LID is slid, and make it a packet
 * for the engine: a DATA frame of another node, keyed as we are
 * (datagram_keyed), a UD SEND or SEND with immediate to DestQP 0xFFFFFF
 * and a multicast DLID (IBA 10.5), to an MGID we joined when it has a
 * GRH, whose SGID, when an IPv4 one, is src4's.  False: dropped.
 */
static bool frame_accept(struct mcast_ip *m, size_t n, uint32_t src4,
			 uint16_t slid, struct pkt_hdr *hdr,
			 struct pkt_grh *grh, struct tp_pkt *in)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	struct tp_frame_hdr f;
	struct tp_frame_grh g;
	const struct opcode_info *op;
	const struct bth *bth;
	size_t off = sizeof(f);
	uint32_t len;
	bool known;

	if (n < sizeof(f))
		return false;
	memcpy(&f, m->buf, sizeof(f));
	len = be32toh(f.len);
	if (!tp_frame_check(&f) || f.type != TP_FRAME_DATA ||
	    len > n - sizeof(f) || be64toh(f.src_guid) == m->port_guid ||
	    !datagram_keyed(m, &f, n, len))
		return false;
	memset(hdr, 0, sizeof(*hdr));
	if (f.flags & TP_FRAME_F_GRH) {
		memcpy(&g, m->buf + off, sizeof(g));
		off += sizeof(g);
		if (g.next_hdr != TP_FRAME_GRH_NEXT_BTH || g.dgid[0] != 0xff)
			return false;
		if (!memcmp(g.sgid, v4mapped, sizeof(v4mapped)) &&
		    memcmp(g.sgid + 12, &src4, 4))
			return false; /* another node's IPv4 GID */
		pthread_mutex_lock(&m->lock);
		known = group_find_locked(m, g.dgid) != NULL;
		pthread_mutex_unlock(&m->lock);
		if (!known)
			return false;
		tp_frame_grh_get(grh, &g);
		hdr->flags |= PKT_F_GRH;
	}
	bth = (const struct bth *)(m->buf + off);
	op = opcode_get(bth->opcode);
	if (!(op->mask & OPM_UD) || bth_qpn(bth) != BTH_QPN_MULTICAST ||
	    !lid_is_multicast(be16toh(f.dlid)))
		return false;
	/* From no process of this node, with the LID of its address. */
	tp_frame_link_get(hdr, &f, len - (uint32_t)(off - sizeof(f)), -1,
			  hdr->flags | PKT_F_FOREIGN);
	hdr->slid = slid;
	memset(in, 0, sizeof(*in));
	in->hdr = hdr;
	in->grh = grh;
	in->data = m->buf + off;
	in->src_proc = -1;
	return true;
}

/*
 * Whether a datagram's envelope, as the kernel gives it, is one of the
 * fabric's: sent to an IP group we joined (not to an address of ours:
 * the socket is bound to any), on the node's interface, from an address
 * of the node's subnet; *slid_p its LID.
 */
static bool envelope_ok(struct mcast_ip *m, struct msghdr *msg,
			const struct sockaddr_in *src, uint16_t *slid_p)
{
	struct sockaddr_storage ss;
	struct in_pktinfo pi;
	struct cmsghdr *cm;
	bool joined = false;

	if (msg->msg_namelen != sizeof(*src) || src->sin_family != AF_INET)
		return false;
	for (cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level != IPPROTO_IP ||
		    cm->cmsg_type != IP_PKTINFO ||
		    cm->cmsg_len < CMSG_LEN(sizeof(pi)))
			continue;
		memcpy(&pi, CMSG_DATA(cm), sizeof(pi));
		if (m->ifindex && pi.ipi_ifindex != m->ifindex)
			return false;
		pthread_mutex_lock(&m->lock);
		joined = group_by_addr_locked(m, pi.ipi_addr.s_addr) != NULL;
		pthread_mutex_unlock(&m->lock);
	}
	if (!joined)
		return false;
	memset(&ss, 0, sizeof(ss));
	memcpy(&ss, src, sizeof(*src));
	*slid_p = fabric_expected_lid(&m->e->hca->node, &ss);
	return *slid_p != 0;
}

static void deliver(struct mcast_ip *m, struct tp_pkt *in)
{
	struct engine *e = m->e;

	emu_lock(&e->lock);
	engine_recv_locked(e, in);
	engine_flush_acks_locked(e);
	emu_unlock(&e->lock);
}

/* Take what one socket holds (up to a batch) and deliver it. */
static void sock_drain(struct mcast_ip *m, int fd)
{
	union {
		struct cmsghdr align;
		uint8_t b[CMSG_SPACE(sizeof(struct in_pktinfo)) * 2];
	} ctl;
	struct sockaddr_in src;
	struct iovec iov = { .iov_base = m->buf, .iov_len = sizeof(m->buf) };
	struct msghdr msg;
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	struct tp_pkt in;
	unsigned int i;
	uint16_t slid;
	ssize_t n;

	for (i = 0; i < MCAST_IP_BATCH; i++) {
		memset(&msg, 0, sizeof(msg));
		msg.msg_name = &src;
		msg.msg_namelen = sizeof(src);
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		msg.msg_control = &ctl;
		msg.msg_controllen = sizeof(ctl);
		n = recvmsg(fd, &msg, MSG_DONTWAIT);
		if (n < 0)
			return;
		if ((msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
		    !envelope_ok(m, &msg, &src, &slid) ||
		    !frame_accept(m, (size_t)n, src.sin_addr.s_addr, slid,
				  &hdr, &grh, &in))
			continue;
		deliver(m, &in);
	}
}

#ifdef IBEMU_FUZZ
/*
 * For fuzz/fuzz_mcast_ip.c alone: IBEMU_FUZZ is defined by fuzz/run-fuzz,
 * never by the library's build.  The receiving thread's work on the
 * datagrams waiting on fd (a local datagram socket: no envelope, taken
 * as from src4 at slid), for e, as if this process had joined the n
 * groups of mgids; no socket joins anything.  One thread at a time.
 */
void mcast_ip_fuzz_drain(struct engine *e, const uint8_t (*mgids)[16],
			 unsigned int n, int fd, uint32_t src4, uint16_t slid);

void mcast_ip_fuzz_drain(struct engine *e, const uint8_t (*mgids)[16],
			 unsigned int n, int fd, uint32_t src4, uint16_t slid)
{
	static struct mcast_ip *m;
	struct pkt_hdr hdr;
	struct pkt_grh grh;
	struct tp_pkt in;
	unsigned int i;
	ssize_t len;

	if (!m) {
		m = calloc(1, sizeof(*m));
		if (!m)
			abort();
		pthread_mutex_init(&m->lock, NULL);
		m->epfd = m->stopfd = -1;
		atomic_init(&m->send_fd, -1);
		m->groups = calloc(IBEMU_MAX_MCAST_GRP, sizeof(*m->groups));
		if (!m->groups)
			abort();
	}
	m->e = e;
	m->port_guid = e->hca->node.seg->port_guid;
	m->proc_slot = e->hca->node.proc_slot;
	m->nr_groups = n < IBEMU_MAX_MCAST_GRP ? n : IBEMU_MAX_MCAST_GRP;
	for (i = 0; i < m->nr_groups; i++) {
		memcpy(m->groups[i].mgid, mgids[i], 16);
		m->groups[i].refs = 1;
		m->groups[i].addr = mcast_ip_group_addr(mgids[i]);
		m->groups[i].sock = 0;
	}
	for (i = 0; i < MCAST_IP_BATCH; i++) {
		len = recv(fd, m->buf, sizeof(m->buf), MSG_DONTWAIT | MSG_TRUNC);
		if (len < 0)
			return;
		if ((size_t)len <= sizeof(m->buf) &&
		    frame_accept(m, (size_t)len, src4, slid, &hdr, &grh, &in))
			deliver(m, &in);
	}
}
#endif

static void *mcast_ip_thread(void *arg)
{
	struct mcast_ip *m = arg;
	struct epoll_event ev[8];
	int n, i;
	check_thread_internal();

	for (;;) {
		n = epoll_wait(m->epfd, ev, 8, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		for (i = 0; i < n; i++) {
			if (ev[i].data.fd == m->stopfd)
				return NULL;
			sock_drain(m, ev[i].data.fd);
		}
	}
	ibemu_log_err("multicast across nodes: epoll_wait: %s",
		      strerror(errno));
	return NULL;
}

/* ---- joining and leaving ---- */

static int mcast_ip_join(struct engine *e, const uint8_t mgid[16])
{
	struct mcast_ip *m = mcast_ip_of(e);
	struct mcast_ip_group *g, *grown;
	uint32_t addr;
	int idx = -1, ret = 0;

	if (!m)
		return 0;
	pthread_mutex_lock(&m->lock);
	g = group_find_locked(m, mgid);
	if (g) {
		g->refs++;
		goto out;
	}
	if (m->nr_groups == m->max_groups) {
		grown = realloc(m->groups,
				(m->max_groups + 8) * sizeof(*grown));
		if (!grown) {
			ret = ENOMEM;
			goto out;
		}
		m->groups = grown;
		m->max_groups += 8;
	}
	addr = mcast_ip_group_addr(mgid);
	g = group_by_addr_locked(m, addr);
	if (g)
		idx = g->sock; /* another MGID of the same IP group */
	else if ((ret = join_locked(m, addr, &idx)))
		idx = -1; /* counted all the same, for the leaves */
	g = &m->groups[m->nr_groups++];
	memcpy(g->mgid, mgid, 16);
	g->refs = 1;
	g->addr = addr;
	g->sock = idx;
	if (!ret && !m->thread_on) {
		ret = pthread_create(&m->thread, NULL, mcast_ip_thread, m);
		if (ret)
			ibemu_log_err("multicast across nodes: thread: %s",
				      strerror(ret));
		m->thread_on = !ret;
	}
out:
	pthread_mutex_unlock(&m->lock);
	return ret;
}

static void mcast_ip_leave(struct engine *e, const uint8_t mgid[16])
{
	struct mcast_ip *m = mcast_ip_of(e);
	struct mcast_ip_group *g, gone;

	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	g = group_find_locked(m, mgid);
	if (!g || --g->refs)
		goto out;
	gone = *g;
	*g = m->groups[--m->nr_groups];
	if (gone.sock >= 0 && !group_by_addr_locked(m, gone.addr) &&
	    !membership(m, m->socks[gone.sock].fd, gone.addr,
			IP_DROP_MEMBERSHIP))
		m->socks[gone.sock].nr--;
out:
	pthread_mutex_unlock(&m->lock);
}

/* ---- sending ---- */

static int send_sock_open(struct mcast_ip *m)
{
	struct ip_mreqn mr = { .imr_address.s_addr = m->ip4,
			       .imr_ifindex = m->ifindex };
	int fd, zero = 0, ret;

	pthread_mutex_lock(&m->lock);
	fd = atomic_load(&m->send_fd);
	if (fd >= 0)
		goto out;
	fd = udp_sock_new();
	if (fd < 0) {
		fd = -1;
		goto out;
	}
	ret = sock_opt(fd, IPPROTO_IP, IP_MULTICAST_IF, &mr, sizeof(mr),
		       "IP_MULTICAST_IF");
	if (!ret)
		ret = sock_opt(fd, IPPROTO_IP, IP_MULTICAST_TTL, &m->ttl,
			       sizeof(m->ttl), "IP_MULTICAST_TTL");
	if (!ret)
		ret = sock_opt(fd, IPPROTO_IP, IP_MULTICAST_LOOP, &zero,
			       sizeof(zero), "IP_MULTICAST_LOOP");
	if (ret) {
		close(fd);
		fd = -1;
		goto out;
	}
	atomic_store(&m->send_fd, fd);
out:
	pthread_mutex_unlock(&m->lock);
	return fd;
}

static void mcast_ip_send(struct engine *e, const uint8_t mgid[16],
			  const struct tp_pkt *pkt)
{
	struct mcast_ip *m = mcast_ip_of(e);
	const struct pkt_hdr *h = pkt->hdr;
	struct sockaddr_in to = { .sin_family = AF_INET };
	struct tp_frame_grh g;
	struct tp_frame_hdr f;
	uint8_t mac[TP_FRAME_MAC_LEN];
	struct iovec iov[4];
	struct msghdr msg = { .msg_name = &to, .msg_namelen = sizeof(to),
			      .msg_iov = iov };
	uint32_t grh_len = 0;
	int fd, err;

	if (!m)
		return;
	fd = atomic_load_explicit(&m->send_fd, memory_order_acquire);
	if (fd < 0 && (fd = send_sock_open(m)) < 0)
		return;
	to.sin_addr.s_addr = mcast_ip_group_addr(mgid);
	to.sin_port = htons(m->port);
	memset(&f, 0, sizeof(f));
	f.magic = htobe32(TP_FRAME_MAGIC);
	f.version = TP_FRAME_VERSION;
	f.type = TP_FRAME_DATA;
	tp_frame_link_put(&f, h);
	f.src_guid = htobe64(m->port_guid);
	f.src_slot = htobe32((uint32_t)m->proc_slot);
	f.dst_slot = htobe32(UINT32_MAX); /* every member: by the GRH */
	f.src_token = htobe64(m->token);
	iov[0].iov_base = &f;
	iov[0].iov_len = sizeof(f);
	msg.msg_iovlen = 1;
	if (h->flags & PKT_F_GRH) {
		f.flags = TP_FRAME_F_GRH;
		tp_frame_grh_put(&g, pkt->grh, h->len);
		grh_len = sizeof(g);
		iov[msg.msg_iovlen].iov_base = &g;
		iov[msg.msg_iovlen++].iov_len = grh_len;
	}
	iov[msg.msg_iovlen].iov_base = pkt->data;
	iov[msg.msg_iovlen++].iov_len = h->len;
	f.len = htobe32(grh_len + h->len);
	if (m->key.set) {
		f.flags |= TP_FRAME_F_MAC;
		datagram_mac(m, iov, msg.msg_iovlen, mac);
		iov[msg.msg_iovlen].iov_base = mac;
		iov[msg.msg_iovlen++].iov_len = sizeof(mac);
	}
	if (sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0)
		return;
	/* A full buffer: the datagram is lost, as a UD datagram may be
	 * (IBA 9.8).  Anything else is said once, and lost too. */
	err = errno;
	if (err != EAGAIN && err != ENOBUFS &&
	    !atomic_exchange(&m->send_failed, true))
		ibemu_log_err("multicast across nodes: send: %s (the group's "
			      "datagrams stay on this node)", strerror(err));
}

/* ---- the end ---- */

static void mcast_ip_free(struct mcast_ip *m, bool fds)
{
	unsigned int i;
	int fd = atomic_load(&m->send_fd);

	if (fds) {
		for (i = 0; i < m->nr_socks; i++)
			close(m->socks[i].fd);
		if (m->epfd >= 0)
			close(m->epfd);
		if (m->stopfd >= 0)
			close(m->stopfd);
		if (fd >= 0)
			close(fd);
	}
	fabric_key_clear(&m->key);
	free(m->groups);
	free(m);
}

static void mcast_ip_close(struct engine *e)
{
	struct mcast_ip *m = mcast_ip_of(e);
	uint64_t one = 1;

	if (!m)
		return;
	e->mcast_priv = NULL;
	if (m->thread_on) {
		if (write(m->stopfd, &one, sizeof(one)) != sizeof(one))
			ibemu_log_err("multicast across nodes: stop: %s",
				      strerror(errno));
		pthread_join(m->thread, NULL);
	}
	pthread_mutex_destroy(&m->lock);
	/* Closing the sockets leaves their IP groups. */
	mcast_ip_free(m, true);
}

static void mcast_ip_forget(struct engine *e)
{
	struct mcast_ip *m = mcast_ip_of(e);

	if (!m)
		return;
	e->mcast_priv = NULL;
	/* The child's copies of the descriptors: closed, so the parent's
	 * memberships end with the parent (the lock may be held by a
	 * thread that is not here: not touched). */
	mcast_ip_free(m, true);
}

static bool mcast_ip_active(const struct engine *e)
{
	return mcast_ip_of(e) != NULL;
}

const struct tp_mcast_ops tp_mcast_ip_ops = {
	.name = "ip",
	.open = mcast_ip_open,
	.close = mcast_ip_close,
	.forget = mcast_ip_forget,
	.join = mcast_ip_join,
	.leave = mcast_ip_leave,
	.send = mcast_ip_send,
	.active = mcast_ip_active,
};
