/* SPDX-License-Identifier: MIT */
/* Packet capture as RoCEv2 pcap (see pcap.c). */
#ifndef IBEMU_PCAP_H
#define IBEMU_PCAP_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

/* Start capturing if IBEMU_PCAP is set; a no-op otherwise. */
void pcap_open(void);
void pcap_close(void);
void pcap_forget(void);
bool pcap_enabled(void);
/* Record one packet: the link header and the bytes from the BTH on. */
void pcap_write(const struct pkt_hdr *hdr, const uint8_t *bth_base);

#endif /* IBEMU_PCAP_H */
