/* SPDX-License-Identifier: MIT */
/* Packet capture as RoCEv2 pcap (see pcap.c). */
#ifndef IBEMU_PCAP_H
#define IBEMU_PCAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "wire.h"

/* Start capturing if IBEMU_PCAP is set; a no-op otherwise. */
void pcap_open(void);
void pcap_close(void);
void pcap_forget(void);
/* Whether packets are captured: one relaxed load (every packet asks). */
extern FILE *_Atomic pcap_file;
static inline bool pcap_enabled(void)
{
	return atomic_load_explicit(&pcap_file, memory_order_relaxed) != NULL;
}
/* Record one packet: the link header and the bytes from the BTH on. */
void pcap_write(const struct pkt_hdr *hdr, const uint8_t *bth_base);

#endif /* IBEMU_PCAP_H */
