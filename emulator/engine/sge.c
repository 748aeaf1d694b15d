// SPDX-License-Identifier: MIT
/*
 * Local data segments: checking a scatter/gather list against the memory
 * regions its lkeys name (IBA 10.6.3.2 memory access checks: key valid,
 * same PD, range inside the region, access right) and copying a message
 * to or from it.
 */
#include "config.h"

#include <string.h>

#include "engine.h"

enum ibv_wc_status sge_check_iov(struct emu_qp *qp, const struct ibv_sge *sge,
				 uint32_t num_sge, bool write_access,
				 struct iovec *iov, int *nr_p)
{
	int access = write_access ? IBV_ACCESS_LOCAL_WRITE : 0;
	bool indirect = false;
	struct emu_mr *mr;
	uint8_t *p;
	uint32_t i;
	int nr = 0;

	for (i = 0; i < num_sge; i++) {
		/* A zero-length SGE names no memory (IBA 10.7.2.1). */
		if (!sge[i].length)
			continue;
		mr = mr_lookup(qp->hca, sge[i].lkey);
		if (mr && mr->mkey) {
			/* Its pieces are checked, copied later. */
			if (!mkey_check(qp, mr->mkey, sge[i].addr,
					sge[i].length, access))
				return IBV_WC_LOC_PROT_ERR;
			indirect = true;
			continue;
		}
		p = sge_mr_local(qp, mr, &sge[i], write_access);
		if (!p)
			return IBV_WC_LOC_PROT_ERR;
		if (iov) {
			iov[nr].iov_base = p;
			iov[nr].iov_len = sge[i].length;
		}
		nr++;
	}
	if (nr_p)
		*nr_p = indirect ? -1 : nr;
	return IBV_WC_SUCCESS;
}

enum ibv_wc_status sge_check(struct emu_qp *qp, const struct ibv_sge *sge,
			     uint32_t num_sge, bool write_access)
{
	return sge_check_iov(qp, sge, num_sge, write_access, NULL, NULL);
}

void iov_scatter(const struct iovec *iov, int nr, const void *buf,
		 uint32_t len)
{
	const uint8_t *p = buf;
	size_t n;
	int i;

	for (i = 0; i < nr && len; i++) {
		n = iov[i].iov_len < len ? iov[i].iov_len : len;
		memcpy(iov[i].iov_base, p, n);
		p += n;
		len -= (uint32_t)n;
	}
}

/*
 * The local memory of bytes [offset, offset+len) of the message an SGE
 * list describes, as iovecs (at most num_sge).  Returns their count, or
 * -1 if the SGEs are too short or a key went away, or SGE_SPAN_INDIRECT
 * if the range is good and goes through an mkey (engine.h).  The regions stay
 * registered while the caller holds the QP lock (mr.c).
 */
int sge_span(struct emu_qp *qp, const struct ibv_sge *sge, uint32_t num_sge,
	     uint32_t offset, uint32_t len, bool write, struct iovec *iov)
{
	bool indirect = false;
	struct emu_mr *mr;
	uint32_t i, n;
	int nr = 0;

	for (i = 0; i < num_sge && len; i++) {
		if (offset >= sge[i].length) {
			offset -= sge[i].length;
			continue;
		}
		n = sge[i].length - offset;
		if (n > len)
			n = len;
		mr = mr_lookup(qp->hca, sge[i].lkey);
		if (mr && mr->mkey) {
			if (!mkey_check(qp, mr->mkey, sge[i].addr + offset, n,
					write ? IBV_ACCESS_LOCAL_WRITE : 0))
				return -1;
			indirect = true;
			len -= n;
			offset = 0;
			continue;
		}
		iov[nr].iov_base = mr ? sge_mr_addr(mr, sge[i].addr + offset, n,
						      write)
				      : NULL;
		if (!iov[nr].iov_base)
			return -1;
		iov[nr++].iov_len = n;
		len -= n;
		offset = 0;
	}
	if (len)
		return -1;
	return indirect ? SGE_SPAN_INDIRECT : nr;
}

/* Gather iovecs into buf. */
void iov_gather(void *buf, const struct iovec *iov, int nr)
{
	uint8_t *p = buf;
	int i;

	for (i = 0; i < nr; i++) {
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
}

/*
 * Copy len bytes between buf and the message position offset of the SGE
 * list (to_sge: into local memory).  Returns 0, or -1 if the SGEs are too
 * short or their keys went away; then nothing was copied (through an
 * mkey whose layout another QP's UMR changed meanwhile, some may be).
 */
int sge_copy(struct emu_qp *qp, const struct ibv_sge *sge,
	     uint32_t num_sge, uint32_t offset, void *buf, uint32_t len,
	     bool to_sge)
{
	struct iovec iov[IBEMU_MAX_SGE];
	uint8_t *p = buf;
	int i, nr;

	if (num_sge > IBEMU_MAX_SGE)
		return -1;
	nr = sge_span(qp, sge, num_sge, offset, len, to_sge, iov);
	if (nr == SGE_SPAN_INDIRECT)
		return sge_copy_indirect(qp, sge, num_sge, offset, buf, len,
					 to_sge);
	if (nr < 0)
		return -1;
	if (!to_sge) {
		iov_gather(buf, iov, nr);
		return 0;
	}
	for (i = 0; i < nr; i++) {
		memcpy(iov[i].iov_base, p, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	return 0;
}

/*
 * The local iovecs of an SGE list whose keys were checked; zero-length
 * SGEs are left out.  Returns the count, or -1 if a key went away.
 */
int sge_iov(struct emu_qp *qp, const struct ibv_sge *sge, uint32_t num_sge,
	    bool write, struct iovec *iov)
{
	struct emu_mr *mr;
	uint32_t i;
	int n = 0;

	for (i = 0; i < num_sge; i++) {
		if (!sge[i].length)
			continue;
		mr = mr_lookup(qp->hca, sge[i].lkey);
		iov[n].iov_base = mr ? sge_mr_addr(mr, sge[i].addr,
						   sge[i].length, write)
				     : NULL;
		if (!iov[n].iov_base)
			return -1;
		iov[n].iov_len = sge[i].length;
		n++;
	}
	return n;
}
