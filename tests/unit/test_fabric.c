// SPDX-License-Identifier: MIT
/*
 * Unit tests of the node's place on the IP fabric (emulator/node/fabric.c),
 * free of the host's interfaces: the LID derived from an address, the
 * choice of the node's address among interfaces built in memory, the GID
 * table, the fabric file's parser on a temporary file, and where
 * fabric_locate puts a LID or a GID for a node segment built in memory.
 */
#include "config.h"

#include "unit.h"
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <net/if.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fabric.h"
#include "node.h"

#define HASHED_LID 1234
#define PORT_GUID 0x02cf883d4cb75f01ull

static struct node_seg *seg;
static struct node node;

static void ip4(uint8_t out[4], const char *s)
{
	CU_ASSERT_FATAL(inet_pton(AF_INET, s, out) == 1);
}

/* An address of an interface: IPv4 or IPv6, by its text. */
static struct fabric_ifaddr ifa(const char *ifname, unsigned int ifindex,
				unsigned int flags, const char *addr,
				unsigned int prefix)
{
	struct fabric_ifaddr a;

	memset(&a, 0, sizeof(a));
	snprintf(a.ifname, sizeof(a.ifname), "%s", ifname);
	a.ifindex = ifindex;
	a.ifflags = flags;
	a.family = strchr(addr, ':') ? AF_INET6 : AF_INET;
	CU_ASSERT_FATAL(inet_pton(a.family, addr, a.addr) == 1);
	a.prefix = (uint8_t)prefix;
	return a;
}

/* The GID of an address in text: IPv4 mapped, or IPv6. */
static void gid(uint8_t out[16], const char *s)
{
	memset(out, 0, 16);
	if (inet_pton(AF_INET, s, out + 12) == 1) {
		out[10] = 0xff;
		out[11] = 0xff;
		return;
	}
	CU_ASSERT_FATAL(inet_pton(AF_INET6, s, out) == 1);
}

static bool gid_eq(const uint8_t g[16], const char *s)
{
	uint8_t want[16];

	gid(want, s);
	return !memcmp(g, want, 16);
}

/* A node being created: identity set, hashed LID, settings cleared. */
static void fresh_seg(void)
{
	if (!seg) {
		seg = calloc(1, sizeof(*seg));
		CU_ASSERT_PTR_NOT_NULL_FATAL(seg);
	}
	memset(seg, 0, sizeof(*seg));
	seg->port_guid = PORT_GUID;
	seg->gid_prefix = 0xfe80000000000000ull;
	seg->lid = HASHED_LID;
	seg->sm_lid = HASHED_LID;
	node.seg = seg;
	unsetenv("IBEMU_IFACE");
	unsetenv("IBEMU_SUBNET");
	unsetenv("IBEMU_TCP_PORT");
}

/* A node created on the interfaces a[0 .. n - 1] with the environment
 * variable var set to val. */
static void init_with(const char *var, const char *val,
		      const struct fabric_ifaddr *a, size_t n)
{
	fresh_seg();
	setenv(var, val, 1);
	fabric_init_from(seg, a, n);
}

#define UP IFF_UP
#define LO (IFF_UP | IFF_LOOPBACK)

/* A host: loopback, a down interface, then two in ifindex order other
 * than the list's, with IPv6 global and link-local addresses. */
static const struct fabric_ifaddr *host_ifaddrs(size_t *n)
{
	static struct fabric_ifaddr a[8];

	a[0] = ifa("lo", 1, LO, "127.0.0.1", 8);
	a[1] = ifa("lo", 1, LO, "::1", 128);
	a[2] = ifa("eth2", 4, UP, "172.16.0.9", 16);
	a[3] = ifa("eth2", 4, UP, "fe80::1", 64);
	a[4] = ifa("eth2", 4, UP, "fd00::5", 64);
	a[5] = ifa("eth0", 2, 0, "192.168.1.2", 24); /* down */
	a[6] = ifa("eth1", 3, UP, "10.47.0.5", 24);
	a[7] = ifa("eth1", 3, UP, "169.254.3.3", 16); /* link scope */
	*n = 8;
	return a;
}

/* The LID is the host part within the subnet, a unicast LID (IBA 4.1.3). */
static void test_lid_for(void)
{
	static const struct {
		const char *addr;
		unsigned int prefix;
		uint16_t lid;
	} c[] = {
		{"10.47.0.5", 24, 5},
		{"10.0.0.5", 8, 5},
		{"10.47.191.255", 16, 0xbfff},
		{"10.47.192.0", 16, 0}, /* beyond the unicast LIDs */
		{"10.1.0.5", 8, 0},	/* host part 0x10005 */
		{"10.47.0.0", 24, 0},	/* host part 0 */
		{"10.47.0.255", 24, 0}, /* broadcast */
		{"10.9.9.9", 32, 0},	/* no host bits */
		{"10.0.0.0", 31, 0},
		{"10.0.0.1", 31, 1}, /* RFC 3021: no broadcast */
		{"10.0.0.2", 30, 2},
		{"10.0.0.3", 30, 0},
		{"0.0.0.5", 24, 0},
		{"224.0.0.5", 24, 0},
		{"10.47.0.5", 33, 0},
	};
	uint8_t a[4];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ip4(a, c[i].addr);
		if (fabric_lid_for(a, c[i].prefix) != c[i].lid)
			fprintf(stderr, "%s/%u: LID %u, expected %u\n",
				c[i].addr, c[i].prefix,
				fabric_lid_for(a, c[i].prefix), c[i].lid);
		CU_ASSERT_EQUAL(fabric_lid_for(a, c[i].prefix), c[i].lid);
	}
}

/* A LID names subnet prefix | LID, inside the host bits, neither the
 * network nor the broadcast address. */
static void test_ip4_for_lid(void)
{
	uint8_t a[4], out[4], want[4];

	ip4(a, "10.47.0.5");
	CU_ASSERT_TRUE(fabric_ip4_for_lid(a, 24, 9, out));
	ip4(want, "10.47.0.9");
	CU_ASSERT_EQUAL(memcmp(out, want, 4), 0);
	CU_ASSERT_FALSE(fabric_ip4_for_lid(a, 24, 255, out));
	CU_ASSERT_FALSE(fabric_ip4_for_lid(a, 24, 256, out));
	CU_ASSERT_FALSE(fabric_ip4_for_lid(a, 24, 0, out));
	CU_ASSERT_FALSE(fabric_ip4_for_lid(a, 32, 1, out));
	CU_ASSERT_FALSE(fabric_ip4_for_lid(a, 16, 0xc000, out));
	CU_ASSERT_TRUE(fabric_ip4_for_lid(a, 16, 0xbfff, out));
	ip4(want, "10.47.191.255");
	CU_ASSERT_EQUAL(memcmp(out, want, 4), 0);
	CU_ASSERT_TRUE(fabric_ip4_for_lid(a, 31, 1, out));
	ip4(want, "10.47.0.5");
	CU_ASSERT_EQUAL(memcmp(out, want, 4), 0);
}

static enum fabric_where where(uint16_t dlid, const char *dgid, char *out,
			       size_t len)
{
	struct sockaddr_storage ss;
	enum fabric_where w;
	uint8_t g[16];

	memset(&ss, 0xa5, sizeof(ss));
	if (dgid)
		gid(g, dgid);
	w = fabric_locate(&node, dlid, dgid ? g : NULL, &ss);
	out[0] = '\0';
	if (w != FABRIC_THERE)
		return w;
	if (ss.ss_family == AF_INET) {
		CU_ASSERT_EQUAL(((struct sockaddr_in *)&ss)->sin_port, 0);
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out,
			  (socklen_t)len);
	} else {
		CU_ASSERT_EQUAL(ss.ss_family, AF_INET6);
		CU_ASSERT_EQUAL(((struct sockaddr_in6 *)&ss)->sin6_port, 0);
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr,
			  out, (socklen_t)len);
	}
	return w;
}

#define CHECK_THERE(dlid, dgid, want)                                          \
	do {                                                                   \
		char at_[INET6_ADDRSTRLEN];                                    \
		CU_ASSERT_EQUAL(where(dlid, dgid, at_, sizeof(at_)),           \
				FABRIC_THERE);                                 \
		CU_ASSERT_STRING_EQUAL(at_, want);                             \
	} while (0)
#define CHECK_WHERE(dlid, dgid, w)                                             \
	do {                                                                   \
		char at_[INET6_ADDRSTRLEN];                                    \
		CU_ASSERT_EQUAL(where(dlid, dgid, at_, sizeof(at_)), w);       \
	} while (0)

/* The first global IPv4 address of an up, non-loopback interface by
 * interface index; GID 0 = fe80::/64 + port GUID (IBA 4.1.1), then the
 * chosen address, the other IPv4 addresses, the global IPv6 ones. */
static void test_init_default(void)
{
	const struct fabric_ifaddr *a;
	uint64_t be;
	size_t n;

	fabric_file_use(NULL);
	fresh_seg();
	a = host_ifaddrs(&n);
	CU_ASSERT_EQUAL(fabric_init_from(seg, a, n), 0);
	CU_ASSERT_EQUAL(seg->lid, 5);
	CU_ASSERT_EQUAL(seg->sm_lid, 5);
	CU_ASSERT_EQUAL(seg->fabric.flags, NODE_FABRIC_MULTI);
	CU_ASSERT_STRING_EQUAL(seg->fabric.ifname, "eth1");
	CU_ASSERT_EQUAL(seg->fabric.prefix4, 24);
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[1], "10.47.0.5"));
	CU_ASSERT_EQUAL(seg->fabric.nr_gids, 4);
	be = htobe64(0xfe80000000000000ull);
	CU_ASSERT_EQUAL(memcmp(seg->fabric.gids[0], &be, 8), 0);
	be = htobe64(PORT_GUID);
	CU_ASSERT_EQUAL(memcmp(seg->fabric.gids[0] + 8, &be, 8), 0);
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[2], "172.16.0.9"));
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[3], "fd00::5"));
	CU_ASSERT_EQUAL(seg->fabric.door_port, IBEMU_DEFAULT_DOOR_PORT);
}

/* IBEMU_IFACE and IBEMU_SUBNET choose; an explicit loopback is taken. */
static void test_init_settings(void)
{
	const struct fabric_ifaddr *a;
	size_t n;

	fabric_file_use(NULL);
	a = host_ifaddrs(&n);

	init_with("IBEMU_IFACE", "eth2", a, n);
	CU_ASSERT_EQUAL(seg->lid, 9);
	CU_ASSERT_STRING_EQUAL(seg->fabric.ifname, "eth2");
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[1], "172.16.0.9"));
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[2], "10.47.0.5"));

	init_with("IBEMU_SUBNET", "172.16.0.0/12", a, n);
	CU_ASSERT_EQUAL(seg->lid, 9);

	/* Nodes of one host may meet on loopback addresses. */
	init_with("IBEMU_IFACE", "lo", a, n);
	CU_ASSERT_EQUAL(seg->lid, 1);
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[1], "127.0.0.1"));
	CHECK_THERE(9, NULL, "127.0.0.9");
	CHECK_THERE(1, "127.0.0.9", "127.0.0.9");
	CHECK_WHERE(1, "127.0.0.1", FABRIC_HERE);
	CHECK_WHERE(1, "169.254.0.1", FABRIC_NOWHERE);

	/* No such interface: alone, the hashed LID, the node's GIDs. */
	init_with("IBEMU_IFACE", "eth9", a, n);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, 0);

	/* A bad IBEMU_SUBNET is ignored (reported). */
	init_with("IBEMU_SUBNET", "10.47.0.0", a, n);
	CU_ASSERT_EQUAL(seg->lid, 5);

	init_with("IBEMU_TCP_PORT", "5000", a, n);
	CU_ASSERT_EQUAL(seg->fabric.door_port, 5000);
	fresh_seg();
}

/* Odd interfaces: none, IPv6 only, /32, a subnet larger than the LIDs,
 * a bad prefix: no crash, the hashed LID where no LID derives. */
static void test_init_odd(void)
{
	struct fabric_ifaddr a[2];

	fabric_file_use(NULL);
	fresh_seg();
	CU_ASSERT_EQUAL(fabric_init_from(seg, NULL, 0), 0);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, 0);
	CU_ASSERT_EQUAL(seg->fabric.nr_gids, 1);

	fresh_seg();
	a[0] = ifa("eth0", 2, UP, "fe80::7", 64);
	a[1] = ifa("eth0", 2, UP, "2001:db8::7", 64);
	fabric_init_from(seg, a, 2);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, NODE_FABRIC_MULTI);
	CU_ASSERT_EQUAL(seg->fabric.nr_gids, 2);
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[1], "2001:db8::7"));
	CU_ASSERT_STRING_EQUAL(seg->fabric.ifname, "eth0");

	fresh_seg();
	a[0] = ifa("eth0", 2, UP, "10.9.9.9", 32);
	fabric_init_from(seg, a, 1);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, NODE_FABRIC_MULTI);

	fresh_seg();
	a[0] = ifa("eth0", 2, UP, "10.200.3.4", 8);
	fabric_init_from(seg, a, 1);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);

	fresh_seg();
	a[0] = ifa("eth0", 2, UP, "10.0.0.1", 31);
	fabric_init_from(seg, a, 1);
	CU_ASSERT_EQUAL(seg->lid, 1);

	fresh_seg();
	a[0] = ifa("eth0", 2, UP, "10.0.0.1", 200);
	a[1] = ifa("eth0", 2, UP, "2001:db8::7", 250);
	fabric_init_from(seg, a, 2);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, 0);
}

static uint16_t expected(const char *addr)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) ==
	    1)
		ss.ss_family = AF_INET;
	else if (inet_pton(AF_INET6, addr,
			   &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1)
		ss.ss_family = AF_INET6;
	return fabric_expected_lid(&node, &ss);
}

/* Without a fabric file: by LID through the subnet, by GID at its
 * address; loopback, multicast, broadcast: nowhere. */
static void test_locate_derived(void)
{
	const struct fabric_ifaddr *a;
	char gid0[INET6_ADDRSTRLEN];
	size_t n;

	fabric_file_use(NULL);
	fresh_seg();
	a = host_ifaddrs(&n);
	fabric_init_from(seg, a, n);
	inet_ntop(AF_INET6, seg->fabric.gids[0], gid0, sizeof(gid0));

	CHECK_WHERE(5, NULL, FABRIC_HERE);
	CHECK_THERE(7, NULL, "10.47.0.7");
	CHECK_THERE(254, NULL, "10.47.0.254");
	CHECK_WHERE(255, NULL, FABRIC_NOWHERE);	   /* broadcast */
	CHECK_WHERE(256, NULL, FABRIC_NOWHERE);	   /* beyond the /24 */
	CHECK_WHERE(0xc001, NULL, FABRIC_NOWHERE); /* multicast LID */
	CHECK_WHERE(0, NULL, FABRIC_NOWHERE);

	CHECK_WHERE(7, gid0, FABRIC_HERE);
	CHECK_WHERE(7, "10.47.0.5", FABRIC_HERE);
	CHECK_WHERE(7, "172.16.0.9", FABRIC_HERE);
	CHECK_WHERE(7, "fd00::5", FABRIC_HERE);
	CHECK_THERE(5, "10.9.8.7", "10.9.8.7");
	CHECK_THERE(5, "2001:db8::9", "2001:db8::9");
	CHECK_THERE(7, "fe80::2cf:883d:4cb7:aaaa", "10.47.0.7");
	CHECK_WHERE(5, "fe80::2cf:883d:4cb7:aaaa", FABRIC_HERE);
	CHECK_WHERE(255, "fe80::2cf:883d:4cb7:aaaa", FABRIC_NOWHERE);
	CHECK_WHERE(7, "127.0.0.1", FABRIC_NOWHERE);
	CHECK_WHERE(7, "::1", FABRIC_NOWHERE);
	CHECK_WHERE(7, "ff02::1", FABRIC_NOWHERE);
	CHECK_WHERE(7, "::", FABRIC_NOWHERE);

	CU_ASSERT_EQUAL(expected("10.47.0.9"), 9);
	CU_ASSERT_EQUAL(expected("10.47.0.255"), 0);
	CU_ASSERT_EQUAL(expected("10.48.0.9"), 0);
	CU_ASSERT_EQUAL(expected("fd00::9"), 0);
}

/* Port 2's LID is port 1's plus the subnet's size: every node of the
 * subnet maps it back to the node and its port (doc/design.md §6,
 * "Ports"). */
static void test_locate_port2(void)
{
	const struct fabric_ifaddr *a;
	struct fabric_port_at at;
	uint8_t g[16];
	size_t n;

	CU_ASSERT_EQUAL(fabric_port2_lid_for(5, 24), 5 + 256);
	CU_ASSERT_EQUAL(fabric_port1_lid_of(5 + 256, 24), 5);
	CU_ASSERT_EQUAL(fabric_port2_lid_for(0x3fff, 18), 0x7fff);
	CU_ASSERT_EQUAL(fabric_port2_lid_for(0x7fff, 17), 0); /* past 0xbfff */
	CU_ASSERT_EQUAL(fabric_port2_lid_for(5, 16), 0); /* no room */
	CU_ASSERT_EQUAL(fabric_port1_lid_of(200, 24), 0);

	fabric_file_use(NULL);
	fresh_seg();
	a = host_ifaddrs(&n);
	fabric_init_from(seg, a, n);
	setenv("IBEMU_PORTS", "2", 1);
	node_ports_init(seg);
	unsetenv("IBEMU_PORTS");
	CU_ASSERT_EQUAL(node_nr_ports(seg), 2);
	CU_ASSERT_EQUAL(seg->ports[0].lid, 5);
	CU_ASSERT_EQUAL(seg->ports[1].lid, 5 + 256);
	CU_ASSERT_EQUAL(node_port_of_lid(seg, 5 + 256), 2);
	CU_ASSERT_EQUAL(node_port_state(seg, 2), IBV_PORT_ACTIVE);
	/* A port number the HCA has names its port; another, port 1. */
	CU_ASSERT_EQUAL(node_port_num(seg, 2), 2);
	CU_ASSERT_EQUAL(node_port_at(seg, 2)->lid, 5 + 256);
	CU_ASSERT_EQUAL(node_port_num(seg, 3), 1);
	CU_ASSERT_EQUAL(node_port_num(seg, 0), 1);
	seg->nr_ports = 1;
	CU_ASSERT_EQUAL(node_port_num(seg, 2), 1);
	CU_ASSERT_EQUAL(node_port_at(seg, 2)->lid, 5);
	seg->nr_ports = 2;

	/* Our own port 2, by LID and by its GID 0. */
	CU_ASSERT_EQUAL(fabric_locate_port(&node, 5 + 256, NULL, &at),
			FABRIC_HERE);
	CU_ASSERT_EQUAL(at.port, 2);
	memcpy(g, seg->fabric.gids[0], 8);
	memcpy(g + 8, &(uint64_t){ htobe64(seg->ports[1].guid) }, 8);
	CU_ASSERT_EQUAL(fabric_locate_port(&node, 0, g, &at), FABRIC_HERE);
	CU_ASSERT_EQUAL(at.port, 2);
	/* Another node's port 2: its address, and its port 1's LID, which
	 * its door answers with. */
	CU_ASSERT_EQUAL(fabric_locate_port(&node, 7 + 256, NULL, &at),
			FABRIC_THERE);
	CU_ASSERT_EQUAL(at.port, 2);
	CU_ASSERT_EQUAL(at.lid, 7);
	CU_ASSERT_EQUAL(fabric_locate_port(&node, 255 + 256, NULL, &at),
			FABRIC_NOWHERE); /* the broadcast address's */
	/* Port state: what `ibemu port` sets. */
	CU_ASSERT_EQUAL(node_port_set_state(seg, 2, IBV_PORT_DOWN), 0);
	CU_ASSERT_EQUAL(node_port_state(seg, 2), IBV_PORT_DOWN);
	CU_ASSERT_EQUAL(atomic_load(&seg->port_gen), 1);
	CU_ASSERT_EQUAL(node_port_set_state(seg, 3, IBV_PORT_DOWN), EINVAL);
	CU_ASSERT_EQUAL(node_port_set_state(seg, 1, IBV_PORT_INIT), EINVAL);
	/* A state no process of ibemu writes (the segment is any of the
	 * user's processes' to scribble on) is DOWN. */
	atomic_store(&seg->ports[0].state, 0xdead);
	CU_ASSERT_EQUAL(node_port_state(seg, 1), IBV_PORT_DOWN);
	atomic_store(&seg->ports[0].state, IBV_PORT_ARMED);
	CU_ASSERT_EQUAL(node_port_state(seg, 1), IBV_PORT_DOWN);
}

/* A node alone knows itself only. */
static void test_locate_alone(void)
{
	char gid0[INET6_ADDRSTRLEN];

	fabric_file_use(NULL);
	fresh_seg();
	fabric_init_from(seg, NULL, 0);
	inet_ntop(AF_INET6, seg->fabric.gids[0], gid0, sizeof(gid0));
	CHECK_WHERE(HASHED_LID, NULL, FABRIC_HERE);
	CHECK_WHERE(7, NULL, FABRIC_NOWHERE);
	CHECK_WHERE(7, gid0, FABRIC_HERE);
	CHECK_WHERE(HASHED_LID, "10.9.8.7", FABRIC_NOWHERE);
	CHECK_WHERE(HASHED_LID, "fe80::1", FABRIC_NOWHERE);
	CU_ASSERT_TRUE(fabric_gid_is_local(&node, seg->fabric.gids[0]));
	CU_ASSERT_EQUAL(expected("10.47.0.9"), 0);
}

static const char fabric_text[] = "# the fabric of the tests\n"
				  "77 10.47.0.5   # this node\n"
				  "78 10.47.0.6\n"
				  "\n"
				  "bogus\n"
				  "0x10 fd00::9\n"
				  "79 10.47.0.6\n"
				  "78 10.47.0.99\n"
				  "70000 10.0.0.1\n"
				  "80 300.1.1.1\n"
				  "81 10.47.0.10 extra\n"
				  "82 224.0.0.1\n"
				  "\t83\t::ffff:10.47.0.20\t\n"
				  "0 10.47.0.21\n";

/* Write text to a temporary file; its path in path. */
static void write_temp(char *path, size_t len, const char *text)
{
	int fd;

	snprintf(path, len, "/tmp/ibemu-fabric-XXXXXX");
	fd = mkstemp(path);
	CU_ASSERT_FATAL(fd >= 0);
	CU_ASSERT_FATAL(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
}

/* Run fabric_file_use(path) with stderr into a file; its text in log. */
static int use_capturing(const char *path, char *log, size_t len)
{
	char lpath[64];
	int fd, saved, ret;
	ssize_t r;

	snprintf(lpath, sizeof(lpath), "/tmp/ibemu-fabric-log-XXXXXX");
	fd = mkstemp(lpath);
	CU_ASSERT_FATAL(fd >= 0);
	fflush(stderr);
	saved = dup(2);
	dup2(fd, 2);
	ret = fabric_file_use(path);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	lseek(fd, 0, SEEK_SET);
	r = read(fd, log, len - 1);
	log[r > 0 ? r : 0] = '\0';
	close(fd);
	unlink(lpath);
	return ret;
}

static bool logged(const char *log, const char *path, unsigned int line)
{
	char want[128];

	snprintf(want, sizeof(want), "%s:%u: ", path, line);
	return strstr(log, want) != NULL;
}

/* "LID address" lines; a bad line, a LID or an address listed twice
 * are reported with file:line and ignored (the first line wins). */
static void test_file_parse(void)
{
	char path[64], log[4096];
	unsigned int line;

	write_temp(path, sizeof(path), fabric_text);
	unsetenv("IBEMU_QUIET");
	CU_ASSERT_EQUAL(use_capturing(path, log, sizeof(log)), 4);
	/* Reported: 5 bogus, 7 address again, 8 LID again, 9 LID range,
	 * 10 address, 11 extra field, 12 multicast, 14 LID 0. */
	for (line = 1; line <= 14; line++) {
		bool bad = (line >= 5 && line <= 12 && line != 6) || line == 14;

		if (logged(log, path, line) != bad)
			fprintf(stderr, "line %u: reported %d\n", line, !bad);
		CU_ASSERT_EQUAL(logged(log, path, line), bad);
	}
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "listed at line 3"));

	fresh_seg();
	CU_ASSERT_EQUAL(expected("10.47.0.6"), 78);
	/* Line 8 was ignored, and this node has no subnet to derive in. */
	CU_ASSERT_EQUAL(expected("10.47.0.99"), 0);
	unlink(path);
	CU_ASSERT_EQUAL(fabric_file_use("/nonexistent/ibemu-fabric"), -ENOENT);
	fabric_file_use(NULL);
}

/* A node the file lists takes its LID; locate asks the file first, and
 * an address the file lists answers to the file's LID only. */
static void test_file_locate(void)
{
	const struct fabric_ifaddr *a;
	char path[64], log[4096];
	size_t n;

	write_temp(path, sizeof(path), fabric_text);
	setenv("IBEMU_QUIET", "1", 1);
	use_capturing(path, log, sizeof(log));
	unsetenv("IBEMU_QUIET");
	unlink(path);
	fresh_seg();
	a = host_ifaddrs(&n);
	fabric_init_from(seg, a, n);
	CU_ASSERT_EQUAL(seg->lid, 77);
	CU_ASSERT_EQUAL(seg->fabric.flags,
			NODE_FABRIC_MULTI | NODE_FABRIC_FILE);
	CU_ASSERT_TRUE(gid_eq(seg->fabric.gids[1], "10.47.0.5"));

	CHECK_WHERE(77, NULL, FABRIC_HERE);
	CHECK_THERE(78, NULL, "10.47.0.6");
	CHECK_THERE(16, NULL, "fd00::9");
	CHECK_THERE(83, NULL, "10.47.0.20");
	CHECK_THERE(9, NULL, "10.47.0.9");     /* derived */
	CHECK_WHERE(6, NULL, FABRIC_NOWHERE);  /* 10.47.0.6 is LID 78 */
	CHECK_WHERE(5, NULL, FABRIC_NOWHERE);  /* ours, LID 77 */
	CHECK_WHERE(20, NULL, FABRIC_NOWHERE); /* LID 83's */
	CU_ASSERT_EQUAL(expected("10.47.0.5"), 77);
	CU_ASSERT_EQUAL(expected("10.47.0.6"), 78);
	CU_ASSERT_EQUAL(expected("fd00::9"), 16);
	CU_ASSERT_EQUAL(expected("10.47.0.9"), 9);
	CU_ASSERT_EQUAL(expected("10.47.0.20"), 83);
	fabric_file_use(NULL);
}

/* A LID derived for this node that the file gives another address is a
 * collision: reported, the node keeps its hashed LID. */
static void test_file_collision(void)
{
	const struct fabric_ifaddr *a;
	char path[64], log[4096];
	size_t n;

	write_temp(path, sizeof(path), "5 10.47.0.200\n");
	use_capturing(path, log, sizeof(log));
	unlink(path);
	fresh_seg();
	a = host_ifaddrs(&n);
	fabric_init_from(seg, a, n);
	CU_ASSERT_EQUAL(seg->lid, HASHED_LID);
	CU_ASSERT_EQUAL(seg->fabric.flags, NODE_FABRIC_MULTI);
	CHECK_THERE(5, NULL, "10.47.0.200");
	CHECK_WHERE(HASHED_LID, NULL, FABRIC_HERE);
	CU_ASSERT_EQUAL(expected("10.47.0.5"), 0);
	fabric_file_use(NULL);
}

/* IBEMU_TCP_PORT: 1..65535, else the default (reported). */
static void test_door_port(void)
{
	static const char *bad[] = {"0", "65536", "-1", "abc", "12x"};
	size_t i;

	unsetenv("IBEMU_TCP_PORT");
	CU_ASSERT_EQUAL(fabric_door_port(), IBEMU_DEFAULT_DOOR_PORT);
	setenv("IBEMU_TCP_PORT", "65535", 1);
	CU_ASSERT_EQUAL(fabric_door_port(), 65535);
	setenv("IBEMU_QUIET", "1", 1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setenv("IBEMU_TCP_PORT", bad[i], 1);
		CU_ASSERT_EQUAL(fabric_door_port(), IBEMU_DEFAULT_DOOR_PORT);
	}
	unsetenv("IBEMU_QUIET");
	unsetenv("IBEMU_TCP_PORT");
}

int main(void)
{
	static const struct unit_test tests[] = {
		{"LID from address", test_lid_for},
		{"address from LID", test_ip4_for_lid},
		{"default address and GID table", test_init_default},
		{"IBEMU_IFACE, IBEMU_SUBNET, IBEMU_TCP_PORT",
		 test_init_settings},
		{"odd interfaces", test_init_odd},
		{"locate by derivation", test_locate_derived},
		{"port 2's LID and locate", test_locate_port2},
		{"locate when alone", test_locate_alone},
		{"fabric file parser", test_file_parse},
		{"fabric file LIDs and locate", test_file_locate},
		{"fabric file collision", test_file_collision},
		{"door port", test_door_port},
		{NULL, NULL},
	};
	int ret = unit_run("fabric", tests);

	free(seg);
	return ret;
}
