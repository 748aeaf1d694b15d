/* SPDX-License-Identifier: MIT */
/* The length of a socket address by its family. */
#ifndef IBEMU_SOCKADDR_H
#define IBEMU_SOCKADDR_H

#include <netinet/in.h>
#include <sys/socket.h>
#include <infiniband/ib.h>

/* As librdmacm gives it (its ucma_addrlen): 0 for a family that is
 * none of IPv4, IPv6 and AF_IB. */
static inline socklen_t sockaddr_len(const struct sockaddr *sa)
{
	switch (sa->sa_family) {
	case AF_INET:
		return sizeof(struct sockaddr_in);
	case AF_INET6:
		return sizeof(struct sockaddr_in6);
	case AF_IB:
		return sizeof(struct sockaddr_ib);
	default:
		return 0;
	}
}

#endif /* IBEMU_SOCKADDR_H */
