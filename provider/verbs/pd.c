// SPDX-License-Identifier: MIT
/*
 * Protection domains (manual 3.3.5, 3.3.6; IBA 10.2.3), thread domains
 * (ibv_alloc_td(3)) and parent domains (ibv_alloc_parent_domain(3)).
 *
 * A thread domain promises that the objects of a parent domain made with
 * it are used by one thread at a time; a provider may then skip their
 * locks.  ibemu accepts it and does not exploit it: every object keeps
 * its lock.  A parent domain stands for its PD wherever a PD is accepted
 * (ibv_reg_mr, ibv_create_qp(_ex), ibv_create_srq, ibv_create_ah, and
 * ibv_create_cq_ex's parent_domain); its allocators, if any, give the
 * queue buffers of the QPs, SRQs and CQs made with it (emu.h
 * emu_buf_alloc; resource types in ibemu.h).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "check_life.h"
#include "ibemu.h"
#include "log.h"

static struct ibemu_pd *pd_new(struct ibv_context *context)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_pd *pd;

	if (ibemu_ctx_stale(context)) {
		errno = EIO;
		return NULL;
	}
	if (atomic_fetch_add(&ctx->nr_pds, 1) >= IBEMU_MAX_PD) {
		atomic_fetch_sub(&ctx->nr_pds, 1);
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		atomic_fetch_sub(&ctx->nr_pds, 1);
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv_pd.context = context;
	atomic_init(&pd->usecnt, 0);
	check_obj(CHECK_OBJ_PD, 1);
	return pd;
}

struct ibv_pd *ibemu_alloc_pd(struct ibv_context *context)
{
	struct ibemu_pd *pd = pd_new(context);

	if (!pd)
		return NULL;
	if (ibemu_pd_share_new(pd)) {
		atomic_fetch_sub(&to_ectx(context)->nr_pds, 1);
		check_obj(CHECK_OBJ_PD, -1);
		free(pd);
		errno = ENOMEM;
		return NULL;
	}
	return &pd->ibv_pd;
}

int ibemu_dealloc_pd(struct ibv_pd *ibpd)
{
	struct ibemu_pd *pd = to_epd(ibpd);

	/* A PD cannot be deallocated while MRs, QPs, SRQs, AHs or parent
	 * domains still use it (manual 3.3.6: fails if any other resource
	 * is still associated); nor can a parent domain while objects were
	 * created with it (ibv_alloc_parent_domain(3)). */
	if (atomic_load(&pd->usecnt)) {
		ibemu_log_dbg("dealloc_pd: %d objects still use it",
			      atomic_load(&pd->usecnt));
		check_life_pd_busy(ibpd, atomic_load(&pd->usecnt));
		return EBUSY;
	}
	if (pd->protection)
		atomic_fetch_sub(&pd->protection->usecnt, 1);
	if (pd->td)
		atomic_fetch_sub(&pd->td->usecnt, 1);
	/* A PD goes with its last handle (it may have imports); a parent
	 * domain has no share of its own. */
	if (pd->share && !ibemu_ctx_stale(ibpd->context))
		ibemu_share_put(pd->share, NULL);
	atomic_fetch_sub(&to_ectx(ibpd->context)->nr_pds, 1);
	check_obj(CHECK_OBJ_PD, -1);
	free(pd);
	return 0;
}

static void *pd_buf_alloc(void *priv, size_t size, size_t alignment,
			  uint64_t type)
{
	struct ibemu_pd *pd = priv;
	void *buf = pd->alloc(&pd->ibv_pd, pd->pd_context, size, alignment,
			      type);

	return buf == IBV_ALLOCATOR_USE_DEFAULT ? EMU_BUF_USE_DEFAULT : buf;
}

static void pd_buf_free(void *priv, void *ptr, uint64_t type)
{
	struct ibemu_pd *pd = priv;

	pd->free(&pd->ibv_pd, pd->pd_context, ptr, type);
}

const struct emu_buf_alloc *ibemu_pd_buf_alloc(struct ibv_pd *ibpd,
					       uint64_t type,
					       struct emu_buf_alloc *a)
{
	struct ibemu_pd *pd = to_epd(ibpd);

	if (!pd->alloc)
		return NULL;
	*a = (struct emu_buf_alloc){ .alloc = pd_buf_alloc,
				     .free = pd_buf_free,
				     .priv = pd,
				     .type = type };
	return a;
}

struct ibv_td *ibemu_alloc_td(struct ibv_context *context,
			      struct ibv_td_init_attr *attr)
{
	struct ibemu_td *td;

	if (ibemu_ctx_stale(context)) {
		errno = EIO;
		return NULL;
	}
	if (!attr || attr->comp_mask) {
		errno = attr ? EOPNOTSUPP : EINVAL;
		return NULL;
	}
	td = calloc(1, sizeof(*td));
	if (!td) {
		errno = ENOMEM;
		return NULL;
	}
	td->ibv_td.context = context;
	atomic_init(&td->usecnt, 0);
	return &td->ibv_td;
}

int ibemu_dealloc_td(struct ibv_td *ibtd)
{
	struct ibemu_td *td = to_etd(ibtd);

	/* In use by a parent domain (ibv_alloc_td(3)). */
	if (atomic_load(&td->usecnt))
		return EBUSY;
	free(td);
	return 0;
}

static int parent_domain_check(struct ibv_context *context,
			       const struct ibv_parent_domain_init_attr *attr)
{
	if (!attr || !attr->pd || attr->pd->context != context)
		return EINVAL;
	/* A parent domain is made of a PD, not of another parent domain. */
	if (ibemu_pd_is_parent(attr->pd))
		return EINVAL;
	if (attr->td && attr->td->context != context)
		return EINVAL;
	if (attr->comp_mask & ~(uint32_t)(IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS |
					  IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT))
		return EOPNOTSUPP;
	/* Allocators come in pairs (ibv_alloc_parent_domain(3)). */
	if ((attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) &&
	    (!attr->alloc || !attr->free))
		return EINVAL;
	return 0;
}

struct ibv_pd *ibemu_alloc_parent_domain(
	struct ibv_context *context, struct ibv_parent_domain_init_attr *attr)
{
	struct ibemu_pd *pd;
	int ret;

	ret = parent_domain_check(context, attr);
	if (ret) {
		ibemu_log_dbg("alloc_parent_domain: invalid attributes");
		errno = ret;
		return NULL;
	}
	pd = pd_new(context);
	if (!pd)
		return NULL;
	pd->protection = to_epd(attr->pd);
	/* The HCA checks the PD it was made of (IBA 10.2.3). */
	pd->id = pd->protection->id;
	pd->ibv_pd.handle = attr->pd->handle;
	atomic_fetch_add(&pd->protection->usecnt, 1);
	if (attr->td) {
		pd->td = to_etd(attr->td);
		atomic_fetch_add(&pd->td->usecnt, 1);
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS) {
		pd->alloc = attr->alloc;
		pd->free = attr->free;
	}
	if (attr->comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT)
		pd->pd_context = attr->pd_context;
	return &pd->ibv_pd;
}
