/* SPDX-License-Identifier: MIT */
/*
 * Communication Management MADs as IBA chapter 12 lays them out, in
 * network byte order: the 24-byte MAD common header (IBA 13.4.3) and
 * the 232 bytes of CM message data (IBA 12.6, 12.11).  CM messages go
 * as UD SENDs to QP1 of the target's port with the GSI Q_Key
 * (IBA 13.4.1, 12.6.1), so that any transport carries them unchanged
 * and a capture shows them as CM traffic.
 *
 * Fields are read and written at their offsets (cm_put*, cm_get*): the
 * IBA tables give bit fields that C bit fields would not lay out
 * portably.
 */
#ifndef IBEMU_CM_WIRE_H
#define IBEMU_CM_WIRE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

#define CM_MAD_LEN 256 /* IBA 13.4.2: every MAD is 256 bytes */
#define CM_MAD_HDR 24 /* IBA 13.4.3: the common MAD header */
#define CM_QP1_QKEY 0x80010000u /* IBA 10.2.4.1: the GSI's Q_Key */
#define CM_QPN 1 /* QP1, the General Services Interface (IBA 3.5.5) */

/* MAD common header (IBA 13.4.3, table 145). */
#define MAD_BASE_VERSION 0 /* 1 byte: 1 */
#define MAD_MGMT_CLASS 1 /* 1 byte: 0x07 for CM (IBA 13.4.4) */
#define MAD_CLASS_VERSION 2 /* 1 byte: 2 (IBA 12.6.1) */
#define MAD_METHOD 3 /* 1 byte: R:1 Method:7; CM sends use Send */
#define MAD_STATUS 4
#define MAD_TID 8 /* 8 bytes: TransactionID */
#define MAD_ATTR_ID 16 /* 2 bytes */
#define MAD_ATTR_MOD 20 /* 4 bytes */

#define MAD_CLASS_CM 0x07
#define MAD_METHOD_SEND 0x03

/* CM attribute IDs, IBA 12.6.1 (table 98). */
#define CM_ATTR_REQ 0x0010
#define CM_ATTR_MRA 0x0011
#define CM_ATTR_REJ 0x0012
#define CM_ATTR_REP 0x0013
#define CM_ATTR_RTU 0x0014
#define CM_ATTR_DREQ 0x0015
#define CM_ATTR_DREP 0x0016
#define CM_ATTR_SIDR_REQ 0x0017
#define CM_ATTR_SIDR_REP 0x0018

/* Offsets in the CM message data (after the MAD header). */
/* REQ, IBA 12.6.5 (table 99) */
#define REQ_LOCAL_COMM_ID 0
#define REQ_SERVICE_ID 8
#define REQ_LOCAL_CA_GUID 16
#define REQ_LOCAL_QKEY 28
#define REQ_LOCAL_QPN 32 /* QPN:24 ResponderResources:8 */
#define REQ_LOCAL_EECN 36 /* EECN:24 InitiatorDepth:8 */
#define REQ_REMOTE_EECN 40 /* EECN:24 RemoteCMTimeout:5 TST:2 EEFC:1 */
#define REQ_START_PSN 44 /* PSN:24 LocalCMTimeout:5 RetryCount:3 */
#define REQ_PKEY 48 /* PKey:16 */
#define REQ_MTU_RNR 50 /* PathMTU:4 RDC:1 RNRRetryCount:3 */
#define REQ_MAX_RETRIES 51 /* MaxCMRetries:4 SRQ:1 ExtTST:3 */
#define REQ_PRI_LOCAL_LID 52
#define REQ_PRI_REMOTE_LID 54
#define REQ_PRI_LOCAL_GID 56
#define REQ_PRI_REMOTE_GID 72
#define REQ_PRI_HOP_LIMIT 93
#define REQ_PRI_SL 94 /* SL:4 SubnetLocal:1 resv:3 */
#define REQ_SUBNET_LOCAL 0x08
#define REQ_PRI_ACK_TIMEOUT 95 /* LocalACKTimeout:5 resv:3 */
#define REQ_PRIVATE 140
#define REQ_PRIVATE_LEN 92

/* REP, IBA 12.6.8 (table 103) */
#define REP_LOCAL_COMM_ID 0
#define REP_REMOTE_COMM_ID 4
#define REP_LOCAL_QKEY 8
#define REP_LOCAL_QPN 12 /* QPN:24 resv:8 */
#define REP_START_PSN 20 /* PSN:24 resv:8 */
#define REP_RESP_RES 24
#define REP_INIT_DEPTH 25
#define REP_FLAGS 26 /* TargetAckDelay:5 FailoverAccepted:2 EEFC:1 */
#define REP_RNR_SRQ 27 /* RNRRetryCount:3 SRQ:1 resv:4 */
#define REP_LOCAL_CA_GUID 28
#define REP_PRIVATE 36
#define REP_PRIVATE_LEN 196

/* RTU, IBA 12.6.9 (table 104) */
#define RTU_LOCAL_COMM_ID 0
#define RTU_REMOTE_COMM_ID 4
#define RTU_PRIVATE 8
#define RTU_PRIVATE_LEN 224

/* REJ, IBA 12.6.7 (table 106) */
#define REJ_LOCAL_COMM_ID 0
#define REJ_REMOTE_COMM_ID 4
#define REJ_MSG_REJECTED 8 /* MessageREJected:2 resv:6 */
#define REJ_INFO_LEN 9 /* RejectInfoLength:7 resv:1 */
#define REJ_REASON 10
#define REJ_ARI 12
#define REJ_PRIVATE 84
#define REJ_PRIVATE_LEN 148
/* MessageREJected (IBA 12.6.7.1) */
#define REJ_MSG_REQ 0
#define REJ_MSG_REP 1
#define REJ_MSG_OTHER 2
/* Reasons, IBA 12.6.7.2 (table 107) */
#define REJ_NO_RESOURCES 3
#define REJ_TIMEOUT 4
#define REJ_INVALID_COMM_ID 6
#define REJ_INVALID_SERVICE_ID 8
#define REJ_STALE_CONN 10
#define REJ_CONSUMER 28

/* DREQ, IBA 12.6.10 (table 108) */
#define DREQ_LOCAL_COMM_ID 0
#define DREQ_REMOTE_COMM_ID 4
#define DREQ_REMOTE_QPN 8 /* QPN:24 resv:8 */
#define DREQ_PRIVATE 12
#define DREQ_PRIVATE_LEN 220

/* DREP, IBA 12.6.11 (table 109) */
#define DREP_LOCAL_COMM_ID 0
#define DREP_REMOTE_COMM_ID 4
#define DREP_PRIVATE 8
#define DREP_PRIVATE_LEN 224

/* SIDR_REQ, IBA 12.11.1 (table 115) */
#define SIDR_REQ_REQUEST_ID 0
#define SIDR_REQ_PKEY 4
#define SIDR_REQ_SERVICE_ID 8
#define SIDR_REQ_PRIVATE 16
#define SIDR_REQ_PRIVATE_LEN 216

/* SIDR_REP, IBA 12.11.2 (table 116) */
#define SIDR_REP_REQUEST_ID 0
#define SIDR_REP_STATUS 4
#define SIDR_REP_QPN 8 /* QPN:24 resv:8 */
#define SIDR_REP_SERVICE_ID 12
#define SIDR_REP_QKEY 20
#define SIDR_REP_PRIVATE 96
#define SIDR_REP_PRIVATE_LEN 136
/* Status (IBA 12.11.2, table 117) */
#define SIDR_STATUS_OK 0
#define SIDR_STATUS_NO_SERVICE 1 /* service ID not supported */
#define SIDR_STATUS_REJECTED 2
#define SIDR_STATUS_NO_QP 3

/*
 * The IP CM service (IBA Annex A11): the service ID carries the port
 * space and port (A11.3.1), and the first 36 bytes of a REQ's or
 * SIDR_REQ's private data the addresses (A11.6, table 357).
 */
#define CM_IP_SERVICE_ID(ps, port)                                             \
	(0x0000000001000000ull | ((uint64_t)(ps) << 16) | (uint64_t)(port))
#define CM_IP_HDR_LEN 36
#define CM_IP_HDR_VERSION 0 /* MajV:4 MinV:4 = 0.0 */
#define CM_IP_HDR_IPV 1 /* IPV:4 resv:4 */
#define CM_IP_HDR_SPORT 2
#define CM_IP_HDR_SIP 4
#define CM_IP_HDR_DIP 20

/* What the consumer may put in each message: the message's private data
 * less the IP CM header where one is carried. */
#define CM_REQ_USER_PRIVATE (REQ_PRIVATE_LEN - CM_IP_HDR_LEN)
#define CM_SIDR_REQ_USER_PRIVATE (SIDR_REQ_PRIVATE_LEN - CM_IP_HDR_LEN)

/* The CM message data of a MAD. */
static inline uint8_t *cm_data(uint8_t *mad)
{
	return mad + CM_MAD_HDR;
}

static inline void cm_put8(uint8_t *d, unsigned int off, uint8_t v)
{
	d[off] = v;
}
static inline void cm_put16(uint8_t *d, unsigned int off, uint16_t v)
{
	v = htobe16(v);
	memcpy(d + off, &v, 2);
}
static inline void cm_put32(uint8_t *d, unsigned int off, uint32_t v)
{
	v = htobe32(v);
	memcpy(d + off, &v, 4);
}
static inline void cm_put64(uint8_t *d, unsigned int off, uint64_t v)
{
	v = htobe64(v);
	memcpy(d + off, &v, 8);
}
static inline uint8_t cm_get8(const uint8_t *d, unsigned int off)
{
	return d[off];
}
static inline uint16_t cm_get16(const uint8_t *d, unsigned int off)
{
	uint16_t v;

	memcpy(&v, d + off, 2);
	return be16toh(v);
}
static inline uint32_t cm_get32(const uint8_t *d, unsigned int off)
{
	uint32_t v;

	memcpy(&v, d + off, 4);
	return be32toh(v);
}
static inline uint64_t cm_get64(const uint8_t *d, unsigned int off)
{
	uint64_t v;

	memcpy(&v, d + off, 8);
	return be64toh(v);
}

#endif /* IBEMU_CM_WIRE_H */
