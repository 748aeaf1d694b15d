// SPDX-License-Identifier: MIT
/*
 * Whom the TCP transport believes at a node's door (tcp_int.h): checks
 * that need no fabric key (tcp_key.c does the rest).
 *
 *  - A door on this host held by another user's socket is not this
 *    node's (tcp_door_ours).
 *  - Two nodes in one network namespace (IBEMU_NODE, or two users)
 *    share its address and derive one LID: only one holds the door, and
 *    a process of the other that talks to us greets with that LID and
 *    its own port GUID.  A door that answers for a LID with another
 *    port GUID than a greeted process of that address and LID has is
 *    then not believed, so nothing meant for one node reaches the
 *    other (tcp_door_one_node).
 *
 * Lock rule: the one-shot warnings are atomic flags; conns[] is read
 * under tcp.lock.
 */
#include "config.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "tcp_int.h"

/* Whether hex (as /proc/net/tcp{,6} print an address: the raw 32-bit
 * words, each as %08X) is the address a (16 bytes, IPv4 mapped), or a
 * wildcard. */
static bool tcp_proc_addr_is(const char *hex, const uint8_t a[16])
{
	uint8_t got[16] = { 0 }, any[16] = { 0 };
	size_t n = strlen(hex), i;
	char w[9] = { 0 };
	uint32_t v;

	if (n != 8 && n != 32)
		return false;
	for (i = 0; i < n / 8; i++) {
		memcpy(w, hex + 8 * i, 8);
		v = (uint32_t)strtoul(w, NULL, 16);
		memcpy(got + (n == 8 ? 12 : 4 * i), &v, 4);
	}
	if (n == 8) {
		got[10] = got[11] = 0xff;
		any[10] = any[11] = 0xff;
	}
	return !memcmp(got, a, 16) || !memcmp(got, any, 16);
}

/* The user of the socket that listens on TCP port at a in this network
 * namespace, or -1 if none does. */
static long tcp_listener_uid(const char *file, const uint8_t a[16],
			     uint16_t port)
{
	char line[256], hex[40];
	unsigned int lport, st;
	unsigned long uid;
	long found = -1;
	FILE *f = fopen(file, "r");

	if (!f)
		return -1;
	while (found < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, " %*u: %39[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x "
				 "%x %*x:%*x %*x:%*x %*x %lu",
			   hex, &lport, &st, &uid) == 4 &&
		    st == 0x0a && lport == port && tcp_proc_addr_is(hex, a))
			found = (long)uid;
	fclose(f);
	return found;
}

/*
 * A door on this host (this node's address, or loopback) held by a
 * socket of another user is not this node's: whoever bound the port
 * first in the namespace would answer for it.  Not believed, said once.
 * Doors of other hosts cannot be told apart so: the fabric key does.
 */
bool tcp_door_ours(struct tp_tcp *t, const struct sockaddr_storage *door)
{
	char a[INET6_ADDRSTRLEN];
	uint8_t a16[16];
	long uid;

	if (!tcp_same_node(door, &t->bind_addr))
		return true;
	sockaddr_addr16(door, a16);
	uid = tcp_listener_uid(door->ss_family == AF_INET ? "/proc/net/tcp"
							  : "/proc/net/tcp6",
			       a16, t->door_port);
	if (uid < 0 && door->ss_family == AF_INET)
		uid = tcp_listener_uid("/proc/net/tcp6", a16, t->door_port);
	if (uid < 0 || (uid_t)uid == getuid())
		return true;
	if (!atomic_exchange(&t->door_told, true))
		ibemu_log_warn("tcp: the door at %s port %u is held by uid %ld, "
			       "not by this user: not believed",
			       tcp_addr_str(door, a, sizeof(a)), t->door_port,
			       uid);
	return false;
}


/* Whether the door at node_addr that answered with lid and port GUID
 * guid is the node our greeted connections from that address with
 * that LID are of. */
bool tcp_door_one_node(struct tp_tcp *t,
		       const struct sockaddr_storage *node_addr, uint16_t lid,
		       uint64_t guid)
{
	char a[INET6_ADDRSTRLEN];
	uint64_t other = 0;
	struct tcp_conn *c;
	unsigned int i;

	pthread_mutex_lock(&t->lock);
	for (i = 0; i < t->nr_conns && !other; i++) {
		c = t->conns[i];
		if (c && atomic_load(&c->state) == TCP_CONN_UP &&
		    c->lid == lid && c->guid != guid &&
		    tcp_same_node(&c->addr, node_addr))
			other = c->guid;
	}
	pthread_mutex_unlock(&t->lock);
	if (!other)
		return true;
	if (!atomic_exchange(&t->twin_told, true))
		ibemu_log_warn("tcp: two nodes at %s have LID %u (port GUIDs "
			       "%016llx, whose door answers, and %016llx): "
			       "two nodes in one network namespace?  Nothing "
			       "is sent there; give each its own namespace",
			       tcp_addr_str(node_addr, a, sizeof(a)), lid,
			       (unsigned long long)guid,
			       (unsigned long long)other);
	return false;
}
