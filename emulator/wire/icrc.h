/* SPDX-License-Identifier: MIT */
/* The invariant CRC of a RoCEv2 packet (see icrc.c). */
#ifndef IBEMU_ICRC_H
#define IBEMU_ICRC_H

#include <stddef.h>
#include <stdint.h>

#define ICRC_LEN 4

/*
 * The ICRC of the RoCEv2 packet whose IP header is at ip and which is len
 * bytes long from there up to, not including, its ICRC: IP and UDP
 * headers, BTH, the other headers, payload and pad.  0 with *icrc_p set,
 * or -1 when those bytes are no IPv4 or IPv6 packet carrying UDP and a
 * BTH (nothing past ip + len is read).
 */
int icrc_compute(const uint8_t *ip, size_t len, uint32_t *icrc_p);
/* The ICRC as the wire carries it (see icrc.c). */
void icrc_put(uint8_t *p, uint32_t icrc);
uint32_t icrc_get(const uint8_t *p);

#endif /* IBEMU_ICRC_H */
