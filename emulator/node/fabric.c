// SPDX-License-Identifier: MIT
/*
 * The node's place on the IP fabric (fabric.h, doc/design.md §6, "The
 * node's place on the IP fabric"): the address a node is known by, its
 * LID, its GID table, and where a destination named by LID or GID is.
 *
 * Lock rule: seg->fabric is written by the segment's creator before the
 * segment is ready and only read after; a reader copies each field once
 * and bounds it (nr_gids) before use, as anything another process could
 * write.  The fabric file's table is private to the process: built once
 * under fabric_file_mutex, published by an atomic pointer, immutable
 * after (fabric_file_use replaces it, for tests).
 */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fabric.h"
#include "log.h"
#include "node.h"

/* ::ffff:0:0/96, the IPv4-mapped IPv6 addresses (RFC 4291 2.5.5.2). */
static const uint8_t v4mapped_prefix[12] = {
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff,
};

static bool gid_is_v4mapped(const uint8_t gid[16])
{
	return !memcmp(gid, v4mapped_prefix, sizeof(v4mapped_prefix));
}

static void gid_from_ip4(uint8_t gid[16], const uint8_t ip4[4])
{
	memcpy(gid, v4mapped_prefix, sizeof(v4mapped_prefix));
	memcpy(gid + 12, ip4, 4);
}

/* fe80::/64, the link-local prefix of GID 0 (IBA 4.1.1). */
static bool gid_is_link_local(const uint8_t gid[16])
{
	static const uint8_t ll[8] = {0xfe, 0x80};

	return !memcmp(gid, ll, sizeof(ll));
}

static uint32_t ip4_host(const uint8_t ip4[4])
{
	return (uint32_t)ip4[0] << 24 | (uint32_t)ip4[1] << 16 |
	       (uint32_t)ip4[2] << 8 | ip4[3];
}

static void ip4_net(uint8_t ip4[4], uint32_t h)
{
	ip4[0] = (uint8_t)(h >> 24);
	ip4[1] = (uint8_t)(h >> 16);
	ip4[2] = (uint8_t)(h >> 8);
	ip4[3] = (uint8_t)h;
}

static uint32_t prefix_mask(unsigned int prefix)
{
	return prefix == 0    ? 0
	       : prefix >= 32 ? UINT32_MAX
			      : ~(UINT32_MAX >> prefix);
}

/* An IPv4 address a node can be reached at: not 0.0.0.0/8, multicast
 * or reserved (224.0.0.0/3). */
static bool ip4_unicast(const uint8_t ip4[4])
{
	return ip4[0] != 0 && ip4[0] < 224;
}

/* The address classes the kernel gives host or link scope by default:
 * 127.0.0.0/8 (host) and 169.254.0.0/16 (link, RFC 3927). */
static bool ip4_global(const uint8_t ip4[4])
{
	return ip4_unicast(ip4) && ip4[0] != 127 &&
	       !(ip4[0] == 169 && ip4[1] == 254);
}

/* An IPv6 address a node can be reached at: not ::, not multicast
 * (ff00::/8), not IPv4-mapped. */
static bool ip6_unicast(const uint8_t a[16])
{
	static const uint8_t zero[16];

	return memcmp(a, zero, 16) && a[0] != 0xff && !gid_is_v4mapped(a);
}

/* Global scope as the kernel gives it: not ::1 (host), fe80::/10
 * (link) or fec0::/10 (site); unique local fc00::/7 is global. */
static bool ip6_global(const uint8_t a[16])
{
	static const uint8_t loop[16] = {[15] = 1};

	return ip6_unicast(a) && memcmp(a, loop, 16) &&
	       !(a[0] == 0xfe && (a[1] & 0xc0) == 0x80) &&
	       !(a[0] == 0xfe && (a[1] & 0xc0) == 0xc0);
}

uint16_t fabric_lid_for(const uint8_t ip4[4], unsigned int prefix)
{
	uint32_t mask, host;

	if (prefix > 32 || !ip4_unicast(ip4))
		return 0;
	mask = prefix_mask(prefix);
	host = ip4_host(ip4) & ~mask;
	/* The broadcast address names no node; a /31 has none. */
	if (prefix <= 30 && host == ~mask)
		return 0;
	if (host < 1 || host > IBEMU_LID_UNICAST_MAX)
		return 0;
	return (uint16_t)host;
}

bool fabric_ip4_for_lid(const uint8_t ip4[4], unsigned int prefix, uint16_t lid,
			uint8_t out[4])
{
	uint32_t mask;

	if (prefix > 32 || lid < 1 || lid > IBEMU_LID_UNICAST_MAX)
		return false;
	mask = prefix_mask(prefix);
	if ((uint32_t)lid & mask)
		return false; /* more than the host bits */
	if (prefix <= 30 && (uint32_t)lid == ~mask)
		return false; /* the broadcast address */
	ip4_net(out, (ip4_host(ip4) & mask) | lid);
	return ip4_unicast(out);
}

uint16_t fabric_door_port(void)
{
	static atomic_bool reported;
	const char *v = getenv("IBEMU_TCP_PORT");
	unsigned long port;
	char *end;

	if (!v || !*v)
		return IBEMU_DEFAULT_DOOR_PORT;
	errno = 0;
	port = strtoul(v, &end, 10);
	if (!errno && !*end && *v != '-' && port >= 1 && port <= 65535)
		return (uint16_t)port;
	if (!atomic_exchange(&reported, true))
		ibemu_log_err(
			"IBEMU_TCP_PORT=%s is not a port (1..65535); using %u",
			v, IBEMU_DEFAULT_DOOR_PORT);
	return IBEMU_DEFAULT_DOOR_PORT;
}

/*
 * The fabric file: "LID address" per line, '#' to the end of a line a
 * comment.  A line that is not such a pair, and a LID or an address
 * listed on an earlier line, is reported (file:line) and ignored, so
 * every node that reads the same file keeps the same table.
 */
struct fabric_entry {
	uint8_t addr[16]; /* IPv6, or IPv4 as ::ffff:a.b.c.d */
	uint16_t lid;
	bool dropped;
	unsigned int line;
};

struct fabric_file {
	size_t n;
	struct fabric_entry *by_lid;  /* sorted by LID */
	struct fabric_entry *by_addr; /* the same entries by address */
};

static pthread_mutex_t fabric_file_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Atomic(struct fabric_file *) fabric_file_cur;
static struct fabric_file fabric_file_empty;

static int entry_cmp_lid(const void *a, const void *b)
{
	const struct fabric_entry *x = a, *y = b;

	if (x->lid != y->lid)
		return x->lid < y->lid ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int entry_cmp_addr(const void *a, const void *b)
{
	const struct fabric_entry *x = a, *y = b;
	int c = memcmp(x->addr, y->addr, 16);

	if (c)
		return c;
	return x->line < y->line ? -1 : x->line > y->line;
}

static void addr_str(const uint8_t addr[16], char *buf, size_t len)
{
	if (gid_is_v4mapped(addr))
		inet_ntop(AF_INET, addr + 12, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, addr, buf, (socklen_t)len);
}

/* One line (comment already cut): 0 and *e, or the reason it is bad. */
static const char *fabric_parse_line(char *line, struct fabric_entry *e)
{
	char *save, *lid_s, *addr_s;
	unsigned long lid;
	uint8_t ip4[4];
	char *end;

	lid_s = strtok_r(line, " \t\r\n", &save);
	addr_s = lid_s ? strtok_r(NULL, " \t\r\n", &save) : NULL;
	if (!addr_s)
		return "not \"LID address\"";
	if (strtok_r(NULL, " \t\r\n", &save))
		return "more than \"LID address\"";
	errno = 0;
	lid = strtoul(lid_s, &end, 0);
	if (errno || *end || *lid_s == '-' || lid < 1 ||
	    lid > IBEMU_LID_UNICAST_MAX)
		return "the LID is not a unicast LID (1..0xbfff, IBA 4.1.3)";
	e->lid = (uint16_t)lid;
	if (inet_pton(AF_INET, addr_s, ip4) == 1) {
		gid_from_ip4(e->addr, ip4);
		if (!ip4_unicast(ip4))
			return "the address is not a unicast address";
	} else if (inet_pton(AF_INET6, addr_s, e->addr) == 1) {
		if (gid_is_v4mapped(e->addr) ? !ip4_unicast(e->addr + 12)
					     : !ip6_unicast(e->addr))
			return "the address is not a unicast address";
	} else {
		return "the address is not an IPv4 or IPv6 address";
	}
	return NULL;
}

/* Mark the later of entries that share a key (sorted by key, then line
 * number), skipping entries already dropped. */
static void fabric_drop_dups(const char *path, struct fabric_entry *e, size_t n,
			     bool by_lid)
{
	const struct fabric_entry *kept = NULL;
	char a[INET6_ADDRSTRLEN];
	size_t i;

	for (i = 0; i < n; i++) {
		if (e[i].dropped)
			continue;
		if (kept && (by_lid ? kept->lid == e[i].lid
				    : !memcmp(kept->addr, e[i].addr, 16))) {
			e[i].dropped = true;
			addr_str(e[i].addr, a, sizeof(a));
			if (by_lid)
				ibemu_log_err("%s:%u: LID %u is listed at line "
					      "%u already; line ignored",
					      path, e[i].line, e[i].lid,
					      kept->line);
			else
				ibemu_log_err("%s:%u: address %s is listed at "
					      "line %u already; line ignored",
					      path, e[i].line, a, kept->line);
			continue;
		}
		kept = &e[i];
	}
}

static void fabric_file_free(struct fabric_file *ff)
{
	if (!ff || ff == &fabric_file_empty)
		return;
	free(ff->by_lid);
	free(ff->by_addr);
	free(ff);
}

/* Read the lines of f into *e_p (grown as needed): the number read. */
static size_t fabric_read_lines(FILE *f, const char *path,
				struct fabric_entry **e_p, int *err_p)
{
	struct fabric_entry *e = NULL, *ne;
	size_t n = 0, cap = 0, len = 0;
	unsigned int lineno = 0;
	char *line = NULL, *hash;
	const char *why;

	while (getline(&line, &len, f) >= 0) {
		lineno++;
		hash = strchr(line, '#');
		if (hash)
			*hash = '\0';
		if (!line[strspn(line, " \t\r\n")])
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 64;
			ne = reallocarray(e, cap, sizeof(*e));
			if (!ne) {
				*err_p = ENOMEM;
				break;
			}
			e = ne;
		}
		memset(&e[n], 0, sizeof(e[n]));
		e[n].line = lineno;
		why = fabric_parse_line(line, &e[n]);
		if (why) {
			ibemu_log_err("%s:%u: %s; line ignored", path, lineno,
				      why);
			continue;
		}
		n++;
	}
	free(line);
	*e_p = e;
	return n;
}

/* Parse the file at path into a new table: 0, or a positive errno. */
static int fabric_file_parse(const char *path, struct fabric_file **ff_p)
{
	struct fabric_entry *e = NULL;
	struct fabric_file *ff;
	size_t n, i, k;
	int err = 0;
	FILE *f;

	f = fopen(path, "re");
	if (!f) {
		err = errno;
		ibemu_log_err("fabric file %s: %s", path, strerror(err));
		return err;
	}
	n = fabric_read_lines(f, path, &e, &err);
	fclose(f);
	ff = calloc(1, sizeof(*ff));
	if (err || !ff)
		goto fail;
	qsort(e, n, sizeof(*e), entry_cmp_lid);
	fabric_drop_dups(path, e, n, true);
	qsort(e, n, sizeof(*e), entry_cmp_addr);
	fabric_drop_dups(path, e, n, false);
	for (i = k = 0; i < n; i++)
		if (!e[i].dropped)
			e[k++] = e[i];
	ff->n = k;
	ff->by_addr = e;
	ff->by_lid = calloc(k ? k : 1, sizeof(*e));
	if (!ff->by_lid)
		goto fail;
	memcpy(ff->by_lid, e, k * sizeof(*e));
	qsort(ff->by_lid, k, sizeof(*e), entry_cmp_lid);
	*ff_p = ff;
	return 0;
fail:
	ibemu_log_err("fabric file %s: out of memory", path);
	if (ff) {
		ff->by_addr = e;
		fabric_file_free(ff);
	} else {
		free(e);
	}
	return ENOMEM;
}

int fabric_file_use(const char *path)
{
	struct fabric_file *ff = &fabric_file_empty, *old;
	int err = 0;

	if (path && *path)
		err = fabric_file_parse(path, &ff);
	if (err)
		ff = &fabric_file_empty;
	pthread_mutex_lock(&fabric_file_mutex);
	old = atomic_exchange_explicit(&fabric_file_cur, ff,
				       memory_order_acq_rel);
	pthread_mutex_unlock(&fabric_file_mutex);
	fabric_file_free(old);
	return err ? -err : (int)ff->n;
}

/* The process's table: $IBEMU_FABRIC, read on first use. */
static const struct fabric_file *fabric_file_get(void)
{
	struct fabric_file *ff;
	const char *path;

	ff = atomic_load_explicit(&fabric_file_cur, memory_order_acquire);
	if (ff)
		return ff;
	pthread_mutex_lock(&fabric_file_mutex);
	ff = atomic_load_explicit(&fabric_file_cur, memory_order_acquire);
	if (!ff) {
		path = getenv("IBEMU_FABRIC");
		if (!path || !*path || fabric_file_parse(path, &ff))
			ff = &fabric_file_empty;
		atomic_store_explicit(&fabric_file_cur, ff,
				      memory_order_release);
	}
	pthread_mutex_unlock(&fabric_file_mutex);
	return ff;
}

static const struct fabric_entry *ff_by_lid(const struct fabric_file *ff,
					    uint16_t lid)
{
	size_t lo = 0, hi = ff->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ff->by_lid[mid].lid == lid)
			return &ff->by_lid[mid];
		if (ff->by_lid[mid].lid < lid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static const struct fabric_entry *ff_by_addr(const struct fabric_file *ff,
					     const uint8_t addr[16])
{
	size_t lo = 0, hi = ff->n, mid;
	int c;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		c = memcmp(ff->by_addr[mid].addr, addr, 16);
		if (!c)
			return &ff->by_addr[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Choosing the node's address.  The node's addresses are those of
 * global scope (ip4_global, ip6_global) on interfaces that are up and
 * not loopback, in the order of their interface index, then of the
 * kernel's list (the order `ip addr` shows).  IBEMU_IFACE and
 * IBEMU_SUBNET narrow the choice to one interface or one IPv4 subnet;
 * an address they name explicitly may be a loopback one (tests).
 */
struct fabric_settings {
	const char *iface; /* IBEMU_IFACE, or NULL */
	bool subnet_set;
	uint8_t subnet[4]; /* IBEMU_SUBNET, masked */
	unsigned int subnet_prefix;
};

static void fabric_settings_read(struct fabric_settings *s)
{
	const char *v = getenv("IBEMU_SUBNET");
	char buf[32], *slash, *end;
	unsigned long prefix;

	memset(s, 0, sizeof(*s));
	s->iface = getenv("IBEMU_IFACE");
	if (s->iface && !*s->iface)
		s->iface = NULL;
	if (!v || !*v)
		return;
	snprintf(buf, sizeof(buf), "%s", v);
	slash = strchr(buf, '/');
	if (!slash)
		goto bad;
	*slash = '\0';
	errno = 0;
	prefix = strtoul(slash + 1, &end, 10);
	if (errno || *end || !slash[1] || prefix > 32 ||
	    inet_pton(AF_INET, buf, s->subnet) != 1 || strlen(v) >= sizeof(buf))
		goto bad;
	s->subnet_prefix = (unsigned int)prefix;
	ip4_net(s->subnet, ip4_host(s->subnet) & prefix_mask(s->subnet_prefix));
	s->subnet_set = true;
	return;
bad:
	ibemu_log_err("IBEMU_SUBNET=%s is not a.b.c.d/n; ignored", v);
}

static bool ifa_usable(const struct fabric_ifaddr *a)
{
	if (!(a->ifflags & IFF_UP))
		return false;
	if (a->family == AF_INET)
		return ip4_unicast(a->addr) && a->prefix <= 32;
	if (a->family == AF_INET6)
		return ip6_unicast(a->addr) && a->prefix <= 128 &&
		       !(a->addr[0] == 0xfe && (a->addr[1] & 0xc0) == 0x80);
	return false;
}

/* One of the node's addresses by the default rule. */
static bool ifa_global(const struct fabric_ifaddr *a)
{
	if (!ifa_usable(a) || (a->ifflags & IFF_LOOPBACK))
		return false;
	return a->family == AF_INET ? ip4_global(a->addr) : ip6_global(a->addr);
}

/* Whether a may be the node's address under the settings. */
static bool ifa_selected(const struct fabric_ifaddr *a,
			 const struct fabric_settings *s)
{
	uint32_t mask;

	if (!s->iface && !s->subnet_set)
		return ifa_global(a);
	if (!ifa_usable(a))
		return false;
	if (s->iface && strcmp(a->ifname, s->iface))
		return false;
	if (s->subnet_set) {
		mask = prefix_mask(s->subnet_prefix);
		if (a->family != AF_INET ||
		    (ip4_host(a->addr) & mask) != ip4_host(s->subnet))
			return false;
	}
	return true;
}

static void ifa_gid(const struct fabric_ifaddr *a, uint8_t gid[16])
{
	if (a->family == AF_INET)
		gid_from_ip4(gid, a->addr);
	else
		memcpy(gid, a->addr, 16);
}

static void ifa_str(const struct fabric_ifaddr *a, char *buf, size_t len)
{
	uint8_t gid[16];

	ifa_gid(a, gid);
	addr_str(gid, buf, len);
}

/* Add a's address to the GID table unless it is there or full. */
static void fabric_add_gid(struct node_fabric *fab,
			   const struct fabric_ifaddr *a)
{
	uint8_t gid[16];
	unsigned int i;
	char buf[INET6_ADDRSTRLEN];

	ifa_gid(a, gid);
	for (i = 0; i < fab->nr_gids; i++)
		if (!memcmp(fab->gids[i], gid, 16))
			return;
	if (fab->nr_gids >= IBEMU_GID_TBL_LEN) {
		ifa_str(a, buf, sizeof(buf));
		ibemu_log_dbg("fabric: GID table full, %s left out", buf);
		return;
	}
	memcpy(fab->gids[fab->nr_gids++], gid, 16);
}

/* The order of the choice: interface index, then the kernel's list. */
static size_t *fabric_order(const struct fabric_ifaddr *ifa, size_t n)
{
	size_t *ord = calloc(n ? n : 1, sizeof(*ord));
	size_t i, j, t;

	if (!ord)
		return NULL;
	for (i = 0; i < n; i++)
		ord[i] = i;
	/* Insertion sort: stable, and a host has few addresses. */
	for (i = 1; i < n; i++)
		for (j = i;
		     j > 0 && ifa[ord[j - 1]].ifindex > ifa[ord[j]].ifindex;
		     j--) {
			t = ord[j];
			ord[j] = ord[j - 1];
			ord[j - 1] = t;
		}
	return ord;
}

/* The chosen address: the first selected one the fabric file lists
 * (IPv4 before IPv6), else the first selected IPv4 one; NULL if none.
 * *listed_p gets its fabric file entry, or NULL. */
static const struct fabric_ifaddr *
fabric_choose(const struct fabric_ifaddr *ifa, const size_t *ord, size_t n,
	      const struct fabric_settings *s, const struct fabric_file *ff,
	      const struct fabric_entry **listed_p)
{
	const struct fabric_ifaddr *first4 = NULL;
	const struct fabric_entry *e;
	int pass, fam;
	uint8_t gid[16];
	size_t i;

	*listed_p = NULL;
	for (pass = 0; pass < 2; pass++) {
		fam = pass ? AF_INET6 : AF_INET;
		for (i = 0; i < n; i++) {
			const struct fabric_ifaddr *a = &ifa[ord[i]];

			if (a->family != fam || !ifa_selected(a, s))
				continue;
			if (!first4 && fam == AF_INET)
				first4 = a;
			ifa_gid(a, gid);
			e = ff_by_addr(ff, gid);
			if (e) {
				*listed_p = e;
				return a;
			}
		}
	}
	return first4;
}

/* The LID of the chosen address a (file entry e, or derived), and the
 * flags; 0 keeps the hashed LID (said in the log). */
static uint16_t fabric_choose_lid(const struct fabric_ifaddr *a,
				  const struct fabric_entry *e,
				  const struct fabric_file *ff,
				  uint32_t *flags_p)
{
	const struct fabric_entry *other;
	char buf[INET6_ADDRSTRLEN], obuf[INET6_ADDRSTRLEN];
	uint16_t lid;

	ifa_str(a, buf, sizeof(buf));
	if (e) {
		*flags_p |= NODE_FABRIC_FILE;
		return e->lid;
	}
	lid = fabric_lid_for(a->addr, a->prefix);
	if (!lid) {
		ibemu_log_warn(
			"fabric: %s/%u on %s gives no LID (its host part is 0, "
			"the broadcast address or above 0xbfff); the node "
			"keeps a hashed LID, which only the fabric file "
			"(IBEMU_FABRIC) makes reachable by LID",
			buf, a->prefix, a->ifname);
		return 0;
	}
	other = ff_by_lid(ff, lid);
	if (other) {
		addr_str(other->addr, obuf, sizeof(obuf));
		ibemu_log_err("fabric: LID %u derived from %s is the fabric "
			      "file's LID for %s (line %u): a collision; the "
			      "node keeps a hashed LID",
			      lid, buf, obuf, other->line);
		return 0;
	}
	return lid;
}

int fabric_init_from(struct node_seg *seg, const struct fabric_ifaddr *ifa,
		     size_t n)
{
	struct node_fabric *fab = &seg->fabric;
	const struct fabric_file *ff = fabric_file_get();
	const struct fabric_ifaddr *chosen, *v6 = NULL;
	const struct fabric_entry *listed;
	struct fabric_settings s;
	uint64_t be;
	uint16_t lid = 0;
	size_t *ord, i;
	char buf[INET6_ADDRSTRLEN];

	memset(fab, 0, sizeof(*fab));
	fab->door_port = fabric_door_port();
	/* GID 0: the link-local prefix and the port GUID (IBA 4.1.1). */
	be = htobe64(seg->gid_prefix);
	memcpy(fab->gids[0], &be, 8);
	be = htobe64(seg->port_guid);
	memcpy(fab->gids[0] + 8, &be, 8);
	fab->nr_gids = 1;
	fabric_settings_read(&s);
	ord = fabric_order(ifa, n);
	if (!ord) {
		ibemu_log_err("fabric: out of memory; the node is alone");
		return ENOMEM;
	}
	chosen = fabric_choose(ifa, ord, n, &s, ff, &listed);
	for (i = 0; i < n && !v6; i++)
		if (ifa[ord[i]].family == AF_INET6 &&
		    ifa_selected(&ifa[ord[i]], &s))
			v6 = &ifa[ord[i]];
	if (chosen) {
		lid = fabric_choose_lid(chosen, listed, ff, &fab->flags);
		fabric_add_gid(fab, chosen);
		snprintf(fab->ifname, sizeof(fab->ifname), "%s",
			 chosen->ifname);
		if (chosen->family == AF_INET) {
			memcpy(fab->ip4, chosen->addr, 4);
			fab->prefix4 = chosen->prefix;
		}
	} else if (v6) {
		snprintf(fab->ifname, sizeof(fab->ifname), "%s", v6->ifname);
	}
	/* The node's addresses: IPv4, then IPv6 (link-local ones are not
	 * GIDs: GID 0 is the port's link-local GID). */
	for (i = 0; i < n; i++)
		if (ifa[ord[i]].family == AF_INET &&
		    (ifa_global(&ifa[ord[i]]) ||
		     ifa_selected(&ifa[ord[i]], &s)))
			fabric_add_gid(fab, &ifa[ord[i]]);
	for (i = 0; i < n; i++)
		if (ifa[ord[i]].family == AF_INET6 &&
		    (ifa_global(&ifa[ord[i]]) ||
		     ifa_selected(&ifa[ord[i]], &s)))
			fabric_add_gid(fab, &ifa[ord[i]]);
	free(ord);
	if (chosen || v6)
		fab->flags |= NODE_FABRIC_MULTI;
	if (lid) {
		seg->lid = lid;
		seg->sm_lid = lid;
	}
	if (chosen) {
		ifa_str(chosen, buf, sizeof(buf));
		ibemu_log_dbg("fabric: address %s/%u on %s, LID %u (%s)", buf,
			      chosen->prefix, chosen->ifname, seg->lid,
			      fab->flags & NODE_FABRIC_FILE ? "fabric file"
			      : lid			    ? "derived"
							    : "hashed");
	} else if (s.iface || s.subnet_set) {
		ibemu_log_err("fabric: no address of the node is on %s%s%s; it "
			      "keeps a hashed LID",
			      s.iface ? "interface " : "",
			      s.iface ? s.iface : "",
			      s.subnet_set ? (s.iface ? " in IBEMU_SUBNET"
						      : "IBEMU_SUBNET")
					   : "");
	}
	return 0;
}

/* The address in sa, of family AF_INET or AF_INET6 (a netmask's own
 * sa_family is not always set): its bytes, *len of them. */
static const uint8_t *ip_bytes(const struct sockaddr *sa, int family,
			       unsigned int *len)
{
	if (family == AF_INET) {
		*len = 4;
		return (const uint8_t *)&((const struct sockaddr_in *)sa)
			->sin_addr;
	}
	*len = 16;
	return (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
}

int fabric_init(struct node_seg *seg)
{
	struct fabric_ifaddr *list = NULL, *nl;
	struct ifaddrs *ifa = NULL, *p;
	size_t n = 0, cap = 0;
	int ret;

	if (getifaddrs(&ifa)) {
		ret = errno;
		ibemu_log_err("fabric: getifaddrs: %s; the node is alone",
			      strerror(ret));
		fabric_init_from(seg, NULL, 0);
		return ret;
	}
	for (p = ifa; p; p = p->ifa_next) {
		struct fabric_ifaddr *a;
		const uint8_t *v, *m;
		unsigned int bits = 0, i, len;

		if (!p->ifa_addr || !p->ifa_name ||
		    (p->ifa_addr->sa_family != AF_INET &&
		     p->ifa_addr->sa_family != AF_INET6))
			continue;
		if (n == cap) {
			cap = cap ? 2 * cap : 16;
			nl = reallocarray(list, cap, sizeof(*list));
			if (!nl)
				break;
			list = nl;
		}
		a = &list[n++];
		memset(a, 0, sizeof(*a));
		snprintf(a->ifname, sizeof(a->ifname), "%s", p->ifa_name);
		a->ifindex = if_nametoindex(p->ifa_name);
		a->ifflags = p->ifa_flags;
		a->family = p->ifa_addr->sa_family;
		v = ip_bytes(p->ifa_addr, a->family, &len);
		memcpy(a->addr, v, len);
		m = p->ifa_netmask ? ip_bytes(p->ifa_netmask, a->family, &len) :
				     NULL;
		for (i = 0; m && i < len * 8 && (m[i / 8] & (0x80 >> i % 8));
		     i++)
			bits++;
		a->prefix = (uint8_t)(m ? bits : len * 8);
	}
	freeifaddrs(ifa);
	ret = fabric_init_from(seg, list, n);
	free(list);
	return ret;
}

/* The seg's fabric fields a reader uses, copied once and bounded. */
struct fabric_view {
	uint32_t flags;
	uint16_t lid;
	uint16_t port2_lid; /* 0: the node has one port */
	uint64_t port2_guid;
	uint8_t ip4[4];
	unsigned int prefix4;
	unsigned int nr_gids;
};

static void fabric_view(const struct node_seg *seg, struct fabric_view *v)
{
	v->flags = seg->fabric.flags;
	v->lid = seg->lid;
	v->port2_lid = 0;
	v->port2_guid = 0;
	if (node_nr_ports(seg) > 1) {
		v->port2_lid = seg->ports[1].lid;
		v->port2_guid = seg->ports[1].guid;
	}
	memcpy(v->ip4, seg->fabric.ip4, 4);
	v->prefix4 = seg->fabric.prefix4;
	if (v->prefix4 > 32)
		v->prefix4 = 32;
	v->nr_gids = seg->fabric.nr_gids;
	if (v->nr_gids > IBEMU_GID_TBL_LEN)
		v->nr_gids = IBEMU_GID_TBL_LEN;
}

static bool view_gid_is_local(const struct node_seg *seg,
			      const struct fabric_view *v,
			      const uint8_t gid[16])
{
	unsigned int i;
	uint64_t be;

	for (i = 0; i < v->nr_gids; i++)
		if (!memcmp(seg->fabric.gids[i], gid, 16))
			return true;
	/* Port 2's only GID: fe80::/64 + its port GUID (IBA 4.1.1). */
	be = htobe64(v->port2_guid);
	return v->port2_lid && !memcmp(seg->fabric.gids[0], gid, 8) &&
	       !memcmp(gid + 8, &be, 8);
}

/* An IPv4 address another node may have: of global scope, or in the
 * node's own subnet (a loopback one that IBEMU_IFACE or IBEMU_SUBNET
 * chose, where nodes of one host meet). */
static bool ip4_reachable(const struct fabric_view *v, const uint8_t ip4[4])
{
	uint32_t mask = prefix_mask(v->prefix4);

	if (ip4_global(ip4))
		return true;
	return v->ip4[0] && ip4_unicast(ip4) &&
	       (ip4_host(ip4) & mask) == (ip4_host(v->ip4) & mask);
}

bool fabric_gid_is_local(struct node *node, const uint8_t gid[16])
{
	struct fabric_view v;

	fabric_view(node->seg, &v);
	return view_gid_is_local(node->seg, &v, gid);
}

static void addr_out(const uint8_t gid[16], struct sockaddr_storage *addr)
{
	memset(addr, 0, sizeof(*addr));
	if (gid_is_v4mapped(gid)) {
		struct sockaddr_in *sin = (struct sockaddr_in *)addr;

		sin->sin_family = AF_INET;
		memcpy(&sin->sin_addr, gid + 12, 4);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)addr;

		sin6->sin6_family = AF_INET6;
		memcpy(&sin6->sin6_addr, gid, 16);
	}
}

/* Where dlid is: the fabric file first, then derivation in the node's
 * subnet (an address the file lists under another LID, or one of our
 * own, answers to another LID: nowhere). */
static enum fabric_where locate_lid(const struct node_seg *seg,
				    const struct fabric_view *v, uint16_t dlid,
				    struct fabric_port_at *at)
{
	const struct fabric_file *ff = fabric_file_get();
	const struct fabric_entry *e;
	uint8_t ip4[4], gid[16];
	uint16_t base;

	e = ff_by_lid(ff, dlid);
	if (e) {
		if (view_gid_is_local(seg, v, e->addr))
			return FABRIC_NOWHERE; /* we answer to another LID */
		addr_out(e->addr, &at->addr);
		return FABRIC_THERE;
	}
	if (!v->ip4[0])
		return FABRIC_NOWHERE;
	/* Port 1's LID, or port 2's: port 1's plus the subnet's size
	 * (fabric_port2_lid_for). */
	if (!fabric_ip4_for_lid(v->ip4, v->prefix4, dlid, ip4)) {
		base = fabric_port1_lid_of(dlid, v->prefix4);
		if (!base || !fabric_ip4_for_lid(v->ip4, v->prefix4, base, ip4))
			return FABRIC_NOWHERE;
		at->port = 2;
		at->lid = base;
	}
	gid_from_ip4(gid, ip4);
	if (ff_by_addr(ff, gid) || view_gid_is_local(seg, v, gid))
		return FABRIC_NOWHERE;
	addr_out(gid, &at->addr);
	return FABRIC_THERE;
}

/* Which of the node's own ports a destination names: by its GID when
 * it has one (port 2 has GID 0 alone; the node's addresses are port
 * 1's), else by its LID; 0 for none. */
static unsigned int view_local_port(const struct node_seg *seg,
				    const struct fabric_view *v,
				    uint16_t dlid, const uint8_t *dgid)
{
	uint64_t be = htobe64(v->port2_guid);

	if (dgid) {
		if (v->port2_lid && !memcmp(dgid, seg->fabric.gids[0], 8) &&
		    !memcmp(dgid + 8, &be, 8))
			return 2;
		return view_gid_is_local(seg, v, dgid) ? 1 : 0;
	}
	if (dlid && dlid == v->lid)
		return 1;
	if (dlid && dlid == v->port2_lid)
		return 2;
	return 0;
}

enum fabric_where fabric_locate_port(struct node *node, uint16_t dlid,
				     const uint8_t *dgid,
				     struct fabric_port_at *at)
{
	const struct node_seg *seg = node->seg;
	struct fabric_view v;
	unsigned int here;

	fabric_view(seg, &v);
	memset(at, 0, sizeof(*at));
	at->port = 1;
	at->lid = dlid;
	here = view_local_port(seg, &v, dlid, dgid);
	/* A link-local GID that is none of ours names a port of this
	 * subnet by its DLID (IBA 4.1.1). */
	if (!here && dgid && gid_is_link_local(dgid) &&
	    (v.flags & NODE_FABRIC_MULTI))
		here = view_local_port(seg, &v, dlid, NULL);
	if (here) {
		at->port = here;
		at->lid = v.lid;
		return FABRIC_HERE;
	}
	if (!(v.flags & NODE_FABRIC_MULTI))
		return FABRIC_NOWHERE;
	if (!dgid || gid_is_link_local(dgid))
		return locate_lid(seg, &v, dlid, at);
	if (gid_is_v4mapped(dgid) ? !ip4_reachable(&v, dgid + 12)
				  : !ip6_global(dgid))
		return FABRIC_NOWHERE; /* loopback, multicast, unspecified */
	addr_out(dgid, &at->addr);
	return FABRIC_THERE;
}

enum fabric_where fabric_locate(struct node *node, uint16_t dlid,
				const uint8_t *dgid,
				struct sockaddr_storage *addr)
{
	struct fabric_port_at at;
	enum fabric_where w = fabric_locate_port(node, dlid, dgid, &at);

	*addr = at.addr;
	return w;
}

uint16_t fabric_port2_lid_for(uint16_t lid, unsigned int prefix)
{
	uint32_t size;

	if (!lid || prefix > 32 || prefix < 17)
		return 0;
	size = prefix == 32 ? 1u : 1u << (32 - prefix);
	return lid + size <= IBEMU_LID_UNICAST_MAX ? (uint16_t)(lid + size)
						   : 0;
}

uint16_t fabric_port1_lid_of(uint16_t lid, unsigned int prefix)
{
	uint32_t size;

	if (prefix > 32 || prefix < 17)
		return 0;
	size = prefix == 32 ? 1u : 1u << (32 - prefix);
	return lid > size ? (uint16_t)(lid - size) : 0;
}

uint16_t fabric_expected_lid(struct node *node,
			     const struct sockaddr_storage *addr)
{
	const struct fabric_file *ff = fabric_file_get();
	const struct fabric_entry *e;
	struct fabric_view v;
	uint8_t gid[16], ip4[4];
	uint16_t lid;

	if (addr->ss_family == AF_INET)
		gid_from_ip4(gid, (const uint8_t *)&(
					  (const struct sockaddr_in *)addr)
					  ->sin_addr);
	else if (addr->ss_family == AF_INET6)
		memcpy(gid, &((const struct sockaddr_in6 *)addr)->sin6_addr,
		       16);
	else
		return 0;
	e = ff_by_addr(ff, gid);
	if (e)
		return e->lid;
	if (!gid_is_v4mapped(gid))
		return 0;
	fabric_view(node->seg, &v);
	if (!v.ip4[0])
		return 0;
	lid = fabric_lid_for(gid + 12, v.prefix4);
	/* Derivation names addresses of the node's own subnet only. */
	if (!lid || !fabric_ip4_for_lid(v.ip4, v.prefix4, lid, ip4) ||
	    memcmp(ip4, gid + 12, 4) || ff_by_lid(ff, lid))
		return 0;
	return lid;
}
