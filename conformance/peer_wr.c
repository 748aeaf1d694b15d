// SPDX-License-Identifier: MIT
/*
 * Work requests of the peer harness: one-SGE sends and receives on the
 * side's registered buffer, posted with the failure checked.
 */
#include <string.h>

#include "peer_int.h"

/* One SGE of len bytes at offset off of ep's buffer. */
static void cf_ep_sge(struct cf_ep *ep, struct ibv_sge *sge, size_t off,
		      uint32_t len)
{
	sge->addr = (uintptr_t)ep->buf + off;
	sge->length = len;
	sge->lkey = ep->mr->lkey;
}

void cf_ep_send_wr(struct cf_ep *ep, struct ibv_send_wr *wr,
		   struct ibv_sge *sge, enum ibv_wr_opcode op, size_t off,
		   uint32_t len, uint64_t wr_id)
{
	memset(wr, 0, sizeof(*wr));
	cf_ep_sge(ep, sge, off, len);
	wr->wr_id = wr_id;
	wr->sg_list = sge;
	wr->num_sge = 1;
	wr->opcode = op;
	wr->send_flags = IBV_SEND_SIGNALED;
}

int cf_ep_post_recv(struct cf_ep *ep, struct ibv_qp *qp, size_t off,
		    uint32_t len, uint64_t wr_id)
{
	struct ibv_recv_wr wr, *bad;
	struct ibv_sge sge;

	cf_ep_sge(ep, &sge, off, len);
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	if (ep->srq)
		return cf_rc(ibv_post_srq_recv(ep->srq, &wr, &bad));
	return cf_rc(ibv_post_recv(qp, &wr, &bad));
}

int cf_ep_post_send(struct cf_ep *ep, struct ibv_qp *qp,
		    struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int ret = cf_rc(ibv_post_send(qp, wr, &bad));

	return EP_CHECK(ep, !ret, "%s: ibv_post_send(opcode %d, wr_id %llu): "
			"%s", cf_side_name(ep), wr->opcode,
			(unsigned long long)wr->wr_id, cf_errname(ret)) ?
		       0 : -1;
}

int cf_ep_post1(struct cf_ep *ep, enum ibv_wr_opcode op, size_t loff,
		uint32_t len, uint64_t roff, uint64_t wr_id, unsigned int flags)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;

	cf_ep_send_wr(ep, &wr, &sge, op, loff, len, wr_id);
	wr.send_flags = flags;
	wr.wr.rdma.remote_addr = ep->peer.addr + roff;
	wr.wr.rdma.rkey = ep->peer.rkey;
	return cf_ep_post_send(ep, ep->qp, &wr);
}
