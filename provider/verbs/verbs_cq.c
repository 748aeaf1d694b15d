// SPDX-License-Identifier: MIT
/*
 * Completion queues as libibverbs sees them (manual 3.3.7-3.3.9,
 * 3.6.7-3.6.10): argument checks, the completion channel's non-blocking
 * write end handed to the HCA, and the extended poll API
 * (ibv_create_cq_ex, ibv_start_poll) read from the HCA's CQ, completion
 * timestamps included (the HCA stamps each entry as it adds it).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "check_arm.h"
#include "check_verbs.h"
#include "check_life.h"
#include "ibemu.h"
#include "log.h"

/*
 * The readers ibv_create_cq_ex offers: the standard ones and both
 * completion timestamps.  Refused with EOPNOTSUPP: IBV_WC_EX_WITH_CVLAN
 * (an Ethernet VLAN of raw packet QPs; the link is InfiniBand),
 * IBV_WC_EX_WITH_FLOW_TAG (no flow steering) and IBV_WC_EX_WITH_TM_INFO
 * (no tag matching: max_num_tags is 0).
 */
#define CQ_WC_FLAGS_STAMPS                                                     \
	(IBV_WC_EX_WITH_COMPLETION_TIMESTAMP |                                 \
	 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
#define CQ_WC_FLAGS_SUPPORTED (IBV_WC_STANDARD_FLAGS | CQ_WC_FLAGS_STAMPS)
/* A hint that is honoured by not needing it: the CQ keeps its lock. */
#define CQ_CREATE_FLAGS_SUPPORTED IBV_CREATE_CQ_ATTR_SINGLE_THREADED

static int cq_check_attr(struct ibv_context *context, int cqe,
			 struct ibv_comp_channel *channel, int comp_vector)
{
	if (cqe < 1) {
		ibemu_log_dbg("create_cq: cqe %d < 1", cqe);
		return EINVAL;
	}
	if (comp_vector < 0 || comp_vector >= context->num_comp_vectors) {
		ibemu_log_dbg("create_cq: comp_vector %d >= %d", comp_vector,
			      context->num_comp_vectors);
		return EINVAL;
	}
	if (channel && channel->context != context)
		return EINVAL;
	return 0;
}

static struct ibemu_cq *cq_create(struct ibv_context *context, int cqe,
				  struct ibv_comp_channel *channel,
				  int comp_vector, bool stamped,
				  struct ibv_pd *parent)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct emu_owner owner;
	struct ibemu_cq *cq;
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO
				       : cq_check_attr(context, cqe, channel,
						       comp_vector);
	if (ret)
		goto err;
	ret = ENOMEM;
	if (atomic_fetch_add(&ctx->nr_cqs, 1) >= IBEMU_MAX_CQ)
		goto err_count;
	cq = calloc(1, sizeof(*cq));
	if (!cq)
		goto err_count;
	/* The HCA writes completion events without ever blocking. */
	cq->comp_wfd = channel ? ibemu_fd_nonblock_writer(channel->fd) : -1;
	if (channel && cq->comp_wfd < 0) {
		ret = errno;
		goto err_free;
	}
	owner = ibemu_owner(context, &cq->vcq.cq);
	ret = emu_cq_create(ctx->hca, (uint32_t)cqe, cq->comp_wfd, &owner,
			    stamped,
			    parent ? ibemu_pd_buf_alloc(parent,
							IBEMU_RES_TYPE_CQ,
							&cq->buf_alloc)
				   : NULL,
			    &cq->ecq);
	if (ret)
		goto err_fd;
	cq->vcq.cq.context = context;
	cq->vcq.cq.cqe = cqe;
	check_obj(CHECK_OBJ_CQ, 1);
	return cq;

err_fd:
	if (cq->comp_wfd >= 0)
		close(cq->comp_wfd);
err_free:
	free(cq);
err_count:
	atomic_fetch_sub(&ctx->nr_cqs, 1);
err:
	errno = ret;
	return NULL;
}

struct ibv_cq *ibemu_create_cq(struct ibv_context *context, int cqe,
			       struct ibv_comp_channel *channel,
			       int comp_vector)
{
	struct ibemu_cq *cq = cq_create(context, cqe, channel, comp_vector,
					false, NULL);

	return cq ? &cq->vcq.cq : NULL;
}

int ibemu_destroy_cq(struct ibv_cq *ibcq)
{
	struct ibemu_cq *cq = to_ecq(ibcq);
	int ret;

	if (ibemu_ctx_stale(ibcq->context))
		return EIO;
	check_life_cq_destroy(cq);
	check_arm_forget(cq);
	check_life_async_destroy("CQ", (uintptr_t)ibcq, ibcq,
				 &ibcq->async_events_completed);
	ret = emu_cq_destroy(cq->ecq);
	if (ret)
		return ret;
	if (cq->comp_wfd >= 0)
		close(cq->comp_wfd);
	if (cq->parent)
		atomic_fetch_sub(&cq->parent->usecnt, 1);
	atomic_fetch_sub(&to_ectx(ibcq->context)->nr_cqs, 1);
	check_obj(CHECK_OBJ_CQ, -1);
	free(cq);
	return 0;
}

int ibemu_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	int ret;

	if (cqe < 1)
		return EINVAL;
	ret = emu_cq_resize(to_ecq(ibcq)->ecq, (uint32_t)cqe);
	if (!ret)
		ibcq->cqe = cqe;
	return ret;
}

int ibemu_poll_cq(struct ibv_cq *ibcq, int num_entries, struct ibv_wc *wc)
{
	if (check_on())
		return check_verbs_poll_cq(ibcq, num_entries, wc);
	return emu_cq_poll(to_ecq(ibcq)->ecq, num_entries, wc);
}

int ibemu_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	emu_cq_arm(to_ecq(ibcq)->ecq, solicited_only != 0);
	return 0;
}

void ibemu_cq_event(struct ibv_cq *cq)
{
	/* Nothing to do: the arm was consumed when the event was sent. */
	check_life_cq_event(to_ecq(cq));
	check_arm_event(to_ecq(cq));
}

/* ---- extended CQ: ibv_start_poll / ibv_next_poll / ibv_end_poll ---- */

static int cq_ex_current(struct ibemu_cq *cq, const struct ibv_wc *wc)
{
	cq->cur = wc;
	if (!wc)
		return ENOENT;
	cq->vcq.cq_ex.wr_id = wc->wr_id;
	cq->vcq.cq_ex.status = wc->status;
	return 0;
}

static int cq_ex_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);

	if (attr && attr->comp_mask)
		return EINVAL;
	return cq_ex_current(cq, emu_cq_poll_start(cq->ecq));
}

static int cq_ex_next_poll(struct ibv_cq_ex *cqx)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);

	return cq_ex_current(cq, emu_cq_poll_next(cq->ecq));
}

static void cq_ex_end_poll(struct ibv_cq_ex *cqx)
{
	struct ibemu_cq *cq = to_ecq_ex(cqx);

	cq->cur = NULL;
	emu_cq_poll_end(cq->ecq);
}

static enum ibv_wc_opcode cq_ex_read_opcode(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->opcode;
}
static uint32_t cq_ex_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->vendor_err;
}
static uint32_t cq_ex_read_byte_len(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->byte_len;
}
/* Also the invalidated R_Key (host order, in the same union of struct
 * ibv_wc), which ibv_wc_read_invalidated_rkey() reads through it. */
static __be32 cq_ex_read_imm_data(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->imm_data;
}
static uint32_t cq_ex_read_qp_num(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->qp_num;
}
static uint32_t cq_ex_read_src_qp(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->src_qp;
}
static unsigned int cq_ex_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->wc_flags;
}
static uint32_t cq_ex_read_slid(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->slid;
}
static uint8_t cq_ex_read_sl(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->sl;
}
static uint8_t cq_ex_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return to_ecq_ex(cqx)->cur->dlid_path_bits;
}

/* The completion's timestamps: the HCA clock's ticks
 * (ibv_query_device_ex hca_core_clock kHz) and real time in ns. */
static uint64_t cq_ex_read_completion_ts(struct ibv_cq_ex *cqx)
{
	return emu_cq_poll_stamp(to_ecq_ex(cqx)->ecq)->raw;
}
static uint64_t cq_ex_read_completion_wallclock_ns(struct ibv_cq_ex *cqx)
{
	return emu_cq_poll_stamp(to_ecq_ex(cqx)->ecq)->wall_ns;
}

static int cq_ex_check_attr(struct ibv_context *context,
			    const struct ibv_cq_init_attr_ex *attr)
{
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					  IBV_CQ_INIT_ATTR_MASK_PD)) {
		ibemu_log_dbg("create_cq_ex: comp_mask %#x not offered",
			      attr->comp_mask);
		return EOPNOTSUPP;
	}
	/* IGNORE_OVERRUN is refused: an overrun always puts the CQ in
	 * error (manual 6.1.1). */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)CQ_CREATE_FLAGS_SUPPORTED)) {
		ibemu_log_dbg("create_cq_ex: flags %#x not offered",
			      attr->flags);
		return EOPNOTSUPP;
	}
	/* The CQ's parent domain must be one (ibv_create_cq_ex(3)). */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) &&
	    (!attr->parent_domain || attr->parent_domain->context != context ||
	     !ibemu_pd_is_parent(attr->parent_domain))) {
		ibemu_log_dbg("create_cq_ex: parent_domain is not a parent "
			      "domain of this context");
		return EINVAL;
	}
	if (attr->wc_flags & ~(uint64_t)CQ_WC_FLAGS_SUPPORTED) {
		ibemu_log_dbg("create_cq_ex: wc_flags %#llx not offered",
			      (unsigned long long)(attr->wc_flags &
						   ~(uint64_t)CQ_WC_FLAGS_SUPPORTED));
		return EOPNOTSUPP;
	}
	if (attr->cqe > INT32_MAX)
		return EINVAL;
	return 0;
}

/* The readers the application asked for (ibv_create_cq_ex(3)). */
static void cq_ex_set_readers(struct ibv_cq_ex *cqx, uint64_t wc_flags)
{
	cqx->start_poll = cq_ex_start_poll;
	cqx->next_poll = cq_ex_next_poll;
	cqx->end_poll = cq_ex_end_poll;
	cqx->read_opcode = cq_ex_read_opcode;
	cqx->read_vendor_err = cq_ex_read_vendor_err;
	cqx->read_wc_flags = cq_ex_read_wc_flags;
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = cq_ex_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = cq_ex_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = cq_ex_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = cq_ex_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = cq_ex_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = cq_ex_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = cq_ex_read_dlid_path_bits;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
		cqx->read_completion_ts = cq_ex_read_completion_ts;
	if (wc_flags & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
		cqx->read_completion_wallclock_ns =
			cq_ex_read_completion_wallclock_ns;
}

struct ibv_cq_ex *ibemu_create_cq_ex(struct ibv_context *context,
				     struct ibv_cq_init_attr_ex *attr)
{
	struct ibemu_cq *cq;
	int ret;

	ret = ibemu_ctx_stale(context) ? EIO : cq_ex_check_attr(context, attr);
	if (ret) {
		errno = ret;
		return NULL;
	}
	cq = cq_create(context, (int)attr->cqe, attr->channel,
		       (int)attr->comp_vector,
		       (attr->wc_flags & CQ_WC_FLAGS_STAMPS) != 0,
		       (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
			       ? attr->parent_domain
			       : NULL);
	if (!cq)
		return NULL;
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) {
		cq->parent = to_epd(attr->parent_domain);
		atomic_fetch_add(&cq->parent->usecnt, 1);
	}
	cq_ex_set_readers(&cq->vcq.cq_ex, attr->wc_flags);
	return &cq->vcq.cq_ex;
}
