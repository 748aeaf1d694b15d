/* SPDX-License-Identifier: MIT */
/* Socket addresses: their length by family, and as 16 bytes. */
#ifndef IBEMU_SOCKADDR_H
#define IBEMU_SOCKADDR_H

#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
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

/* ss (AF_INET or AF_INET6) as 16 bytes: IPv6, or ::ffff:a.b.c.d
 * (RFC 4291 2.5.5.2); all zeros for any other family. */
static inline void sockaddr_addr16(const struct sockaddr_storage *ss,
				   uint8_t out[16])
{
	memset(out, 0, 16);
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;

		out[10] = out[11] = 0xff;
		memcpy(out + 12, &in->sin_addr, 4);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;

		memcpy(out, &in6->sin6_addr, 16);
	}
}

#endif /* IBEMU_SOCKADDR_H */
