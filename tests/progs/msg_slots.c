// SPDX-License-Identifier: MIT
/*
 * Checked messages in the slots of an RC test's buffer (see msg_slots.h).
 */
#include <stddef.h>
#include <time.h>

#include "msg_slots.h"

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000ll + ts.tv_nsec / 1000000;
}

struct rc_pair_attr msg_pair_attr(uint8_t timeout, uint8_t retry_cnt)
{
	return (struct rc_pair_attr){
		.buf_len = MSG_BUF_LEN,
		.mr_access = IBV_ACCESS_LOCAL_WRITE,
		.cq_depth = 4 * MSG_DEPTH,
		.max_send_wr = MSG_DEPTH,
		.max_recv_wr = MSG_DEPTH,
		.path_mtu = IBV_MTU_4096,
		.timeout = timeout,
		.retry_cnt = retry_cnt,
		.rnr_retry = 7,
	};
}

static uint64_t pattern(uint32_t round, uint32_t dir, uint32_t seq)
{
	return (((uint64_t)round << 40) | ((uint64_t)dir << 32) | seq) *
	       0x9e3779b97f4a7c15ull;
}

void msg_fill(void *buf, uint32_t round, uint32_t dir, uint32_t seq)
{
	uint64_t *w = buf, x = pattern(round, dir, seq);
	size_t k;

	for (k = 0; k < MSG_LEN / 8; k++)
		w[k] = x + k;
}

bool msg_check(const void *buf, uint32_t round, uint32_t dir, uint32_t seq)
{
	const uint64_t *w = buf;
	uint64_t x = pattern(round, dir, seq);
	size_t k;

	for (k = 0; k < MSG_LEN / 8; k++)
		if (w[k] != x + k)
			return false;
	return true;
}

static void *send_slot(const struct rc_side *s, uint32_t seq)
{
	return (uint8_t *)s->buf + (size_t)(seq % MSG_DEPTH) * MSG_LEN;
}

void *msg_recv_slot(const struct rc_side *s, uint32_t seq)
{
	return (uint8_t *)s->buf +
	       (size_t)(MSG_DEPTH + seq % MSG_DEPTH) * MSG_LEN;
}

int msg_post_recv(struct rc_side *s, uint32_t *seq_p)
{
	uint32_t seq = *seq_p;
	struct ibv_recv_wr wr = { 0 }, *bad;
	struct ibv_sge sge = {
		.addr = (uintptr_t)msg_recv_slot(s, seq),
		.length = MSG_LEN,
		.lkey = s->mr->lkey,
	};

	wr.wr_id = seq;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ibv_post_recv(s->qp, &wr, &bad))
		return -1;
	*seq_p = seq + 1;
	return 0;
}

int msg_post_send(struct rc_side *s, uint32_t round, uint32_t dir,
		  uint32_t *seq_p, uint64_t wr_flags)
{
	uint32_t seq = *seq_p;
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge = {
		.addr = (uintptr_t)send_slot(s, seq),
		.length = MSG_LEN,
		.lkey = s->mr->lkey,
	};

	msg_fill(send_slot(s, seq), round, dir, seq);
	wr.wr_id = wr_flags | seq;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(s->qp, &wr, &bad))
		return -1;
	*seq_p = seq + 1;
	return 0;
}
