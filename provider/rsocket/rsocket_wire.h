/* SPDX-License-Identifier: MIT */
/*
 * The wire format of ibemu's rsockets (doc/rsocket.md): the connection's
 * private data and the messages' header and payloads, all big-endian.
 * Only ibemu's rsockets speak it; it is not librdmacm's.
 */
#ifndef IBEMU_RSOCKET_WIRE_H
#define IBEMU_RSOCKET_WIRE_H

#include <stdint.h>

/* Every message, header included, fits one receive buffer of this size;
 * both ends use it, so it is part of the protocol. */
#define RS_MSG_SIZE 16384u
#define RS_HDR_SIZE 16u
#define RS_PAYLOAD_MAX (RS_MSG_SIZE - RS_HDR_SIZE)
/* Receive buffers reserved for credit messages (RS_CREDIT) and for the
 * one end-of-stream message (RS_FIN), on top of the data window. */
#define RS_CTRL_SLOTS 4u
#define RS_FIN_SLOTS 1u

/* What each side offers in the connection's private data. */
struct rs_conn_data {
	uint8_t version;
	uint8_t reserved[3];
	uint32_t rq_size;  /* big-endian: receive buffers for data */
	uint32_t msg_size; /* big-endian: RS_MSG_SIZE */
};
#define RS_VERSION 1

/* Message types (rs_hdr.type). */
enum {
	RS_DATA = 1,
	RS_CREDIT = 2,
	RS_IOMAP = 3,
	RS_FIN = 4,
};

/* Header, big-endian on the wire. */
struct rs_hdr {
	uint8_t type;
	uint8_t version;
	uint16_t reserved;
	uint32_t data_freed;
	uint32_t ctrl_polled;
	uint32_t reserved2;
};
_Static_assert(sizeof(struct rs_hdr) == RS_HDR_SIZE, "rsocket header");

/* RS_IOMAP payload, big-endian. */
struct rs_iomap_msg {
	uint32_t index;
	uint32_t rkey;
	uint64_t offset;
	uint64_t addr;
	uint64_t len;
};

#endif
