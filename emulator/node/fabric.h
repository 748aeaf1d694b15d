/* SPDX-License-Identifier: MIT */
/*
 * The node's place on the IP fabric (doc/design.md §6, "The node's place on
 * the IP fabric"): which of the node's IP addresses it is known by, the LID
 * derived from it, the GID table, and where a destination named by LID or
 * GID is.
 *
 * Addressing without configuration: the node takes the first IPv4
 * address of global scope on an interface that is up and not loopback
 * (or the one IBEMU_IFACE names, or the one inside IBEMU_SUBNET); its
 * LID is the address's host part within its subnet, so the nodes of one
 * subnet (containers on a bridge, namespaces joined by veth) have
 * distinct LIDs and a LID names an address: subnet prefix | LID.  A
 * node with no such address is alone (NODE_FABRIC_MULTI clear) and
 * keeps the LID hashed from its identity.  Where derivation cannot work
 * (a subnet larger than the LID space, addresses spread over subnets),
 * the fabric file (IBEMU_FABRIC) lists "LID address" pairs, one per
 * line, and a node listed there takes its LID from it.
 *
 * GID 0 is fe80::/64 + port GUID (IBA 4.1.1); GIDs 1.. are the node's
 * IP addresses, ::ffff:a.b.c.d for IPv4 and IPv6 as is, so a GRH names
 * the node across routed subnets.
 *
 * Lock rule: what fabric_init writes lives in the node segment and is
 * immutable once the segment is ready; the fabric file is read once per
 * process under a private mutex.
 */
#ifndef IBEMU_FABRIC_H
#define IBEMU_FABRIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct node;
struct node_seg;

/* Fill seg->fabric, seg->lid and seg->sm_lid for a node being created
 * (seg->port_guid and seg->gid_prefix are set, seg->lid holds the LID
 * hashed from the node's identity, kept when no address gives one):
 * 0 or a positive errno (said in the log; the node is then alone). */
int fabric_init(struct node_seg *seg);

enum fabric_where {
	FABRIC_HERE, /* this node */
	FABRIC_THERE, /* another node, at *addr */
	FABRIC_NOWHERE, /* no node the fabric knows */
};

/*
 * Where the destination named by dlid, or by dgid when it is not NULL
 * (a GRH), is.  For FABRIC_THERE, *addr gets the node's IP address
 * (AF_INET or AF_INET6, port 0).  A link-local GID (fe80::/64) names a
 * node of this subnet and is located by dlid.
 */
enum fabric_where fabric_locate(struct node *node, uint16_t dlid,
				const uint8_t *dgid,
				struct sockaddr_storage *addr);

/* Where a destination is, and which port of that node it names: port
 * 1 or 2, and lid, the LID of that node's port 1 (what its door answers
 * with: tp_net_ops.resolve_qpn's want_lid).  addr as fabric_locate's. */
struct fabric_port_at {
	struct sockaddr_storage addr;
	unsigned int port;
	uint16_t lid;
};

enum fabric_where fabric_locate_port(struct node *node, uint16_t dlid,
				     const uint8_t *dgid,
				     struct fabric_port_at *at);

/*
 * Port 2's LID (doc/design.md §6, "Ports"): on a node whose port 1 has
 * the LID its address derives in a subnet of prefix bits, port 1's LID
 * plus the subnet's size, 2^(32-prefix): above every host part of the
 * subnet, so no node's port-1 LID and no other node's port-2 LID, and a
 * LID any node of the subnet maps back (fabric_port1_lid_of).  0 when
 * it would pass 0xbfff (IBA 4.1.3) or the subnet is larger than /17.
 */
uint16_t fabric_port2_lid_for(uint16_t lid, unsigned int prefix);
/* The port-1 LID whose port 2 is lid in such a subnet, 0 if none. */
uint16_t fabric_port1_lid_of(uint16_t lid, unsigned int prefix);

/* Whether addr (16 bytes: IPv6, or IPv4 mapped ::ffff:a.b.c.d) is one
 * of this node's GIDs. */
bool fabric_gid_is_local(struct node *node, const uint8_t gid[16]);

/* The LID the fabric expects at addr (derived or from the fabric file),
 * 0 if none: to tell a node that answers with another LID (a
 * collision, reported, never routed to). */
uint16_t fabric_expected_lid(struct node *node,
			     const struct sockaddr_storage *addr);

/* The node's door port: IBEMU_TCP_PORT, or IBEMU_DEFAULT_DOOR_PORT. */
uint16_t fabric_door_port(void);

/*
 * The rules themselves, free of the host's interfaces and environment
 * where they can be (fabric_init and fabric_locate are built on them;
 * the unit tests call them directly).
 */

/* The LID an IPv4 address (network order) derives in its subnet of
 * prefix bits: its host part when that is a unicast LID (IBA 4.1.3:
 * 0x0001..0xbfff) and not the subnet's broadcast address; 0 if none. */
uint16_t fabric_lid_for(const uint8_t ip4[4], unsigned int prefix);

/* The IPv4 address that lid names in the subnet of ip4/prefix: the
 * subnet's prefix | lid, when lid is a unicast LID that fits in the
 * host bits and names neither the network nor the broadcast address
 * (both are usable in a /31, RFC 3021).  false if none. */
bool fabric_ip4_for_lid(const uint8_t ip4[4], unsigned int prefix,
			uint16_t lid, uint8_t out[4]);

/* One address of one interface, as fabric_init reads them. */
struct fabric_ifaddr {
	char ifname[16];
	unsigned int ifindex;
	unsigned int ifflags; /* IFF_* of the interface */
	int family; /* AF_INET or AF_INET6 */
	uint8_t addr[16]; /* network order; IPv4 in the first 4 bytes */
	uint8_t prefix; /* prefix length of its subnet */
};

/* fabric_init on these addresses in place of the host's: 0 or a
 * positive errno.  Reads IBEMU_IFACE, IBEMU_SUBNET, IBEMU_TCP_PORT and
 * the process's fabric file. */
int fabric_init_from(struct node_seg *seg, const struct fabric_ifaddr *ifa,
		     size_t n);

/* Read the fabric file at path (NULL: none) in place of $IBEMU_FABRIC,
 * for the rest of the process: the number of entries kept, or a
 * negative errno (the table is then empty).  For tests and tools; not
 * while another thread of the process locates. */
int fabric_file_use(const char *path);

#endif /* IBEMU_FABRIC_H */
