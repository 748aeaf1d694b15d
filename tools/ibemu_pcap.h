/* SPDX-License-Identifier: MIT */
/* `ibemu pcap`: checking RoCEv2 captures (see ibemu_pcap.c). */
#ifndef IBEMU_TOOLS_PCAP_H
#define IBEMU_TOOLS_PCAP_H

/* argv[0] is "pcap"; the exit status of the command. */
int cmd_pcap(int argc, char **argv);

#endif /* IBEMU_TOOLS_PCAP_H */
