// SPDX-License-Identifier: MIT
/*
 * Contexts shared between processes and their PDs and MRs
 * (ibv_import_device(3), ibv_import_pd(3), ibv_import_mr(3)).
 *
 * On a real HCA a context's cmd_fd is the uverbs file; another process
 * that gets a dup of it (SCM_RIGHTS, fork) imports the context and finds
 * its objects by their kernel handles.  An ibemu context's cmd_fd is a
 * sealed memfd that says which HCA attachment made it: the node's GUID
 * and the attachment's token (emulator/node/node.c: random, never reused,
 * alive while its process holds the node).  ibv_import_device reads it
 * once, checks it, and opens a context of the calling process that names
 * that attachment's objects:
 *
 *  - the calling process's own attachment (a dup'd fd in the same
 *    process): the imported context reaches the very objects, so an
 *    imported PD is the same PD (same id to the HCA) and an imported MR
 *    the same region (same keys);
 *  - another live process's attachment (SCM_RIGHTS, or a forked child,
 *    whose parent's objects are not its own: ibemu_ctx_stale): the HCA
 *    state of each process is its own memory, so the imported context is
 *    this process's, on the same emulated HCA.  An imported PD is the
 *    exporter's PD by identity (one id for every import of that handle
 *    from that exporter), on which this process makes its own QPs, MRs,
 *    SRQs and AHs; an MR cannot be imported (EOPNOTSUPP): its memory is
 *    the exporter's, which this process's HCA cannot reach.
 *
 * A PD or MR of this process may have several handles (the original and
 * its same-process imports): the object lives until the last of them is
 * deallocated, deregistered or unimported.
 *
 * Lock rule: share_lock protects the share list, every share's refs and
 * next_pd_handle; it is a leaf (no HCA lock is taken under it).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ibemu.h"
#include "log.h"

#define CMD_MAGIC "ibemuctx"
#define CMD_VERSION 1

/* What a command fd holds (sealed: nobody can change it). */
struct ibemu_cmd_hdr {
	char magic[8];
	uint32_t version;
	uint32_t size;
	uint64_t token; /* the attachment that made the context */
	uint64_t node_guid;
};

enum share_kind { SHARE_PD, SHARE_MR };

struct ibemu_share {
	struct ibemu_share *prev, *next;
	enum share_kind kind;
	uint64_t exporter; /* token of the attachment whose object it is */
	bool foreign; /* another process's PD, imported here */
	uint32_t handle;
	uint64_t pd_id; /* SHARE_PD */
	struct emu_mr *emr; /* SHARE_MR */
	struct ibemu_dm_mem *dm; /* SHARE_MR on device memory (verbs_dm.c) */
	int refs; /* ibv_pd / ibv_mr handles on it */
};

static pthread_mutex_t share_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ibemu_share *shares;
static uint32_t next_pd_handle = 1;

/* The fd ibv_import_device hands to the context being opened. */
static __thread int import_fd = -1;

void ibemu_import_fork_child(void)
{
	/* The parent's shares name the parent's attachment, whose token
	 * no context of this process has: they are never matched. */
	pthread_mutex_init(&share_lock, NULL);
}

int ibemu_cmd_fd_open(void)
{
	int fd = memfd_create("ibemu-context", MFD_CLOEXEC | MFD_ALLOW_SEALING);

	return fd < 0 ? -errno : fd;
}

int ibemu_import_fd_take(void)
{
	int fd = import_fd;

	import_fd = -1;
	return fd;
}

/* Read and check a command fd's header, once, into hdr. */
static int cmd_fd_read(int fd, struct ibemu_cmd_hdr *hdr)
{
	ssize_t n = pread(fd, hdr, sizeof(*hdr), 0);

	if (n != (ssize_t)sizeof(*hdr) ||
	    memcmp(hdr->magic, CMD_MAGIC, sizeof(hdr->magic)) ||
	    hdr->version != CMD_VERSION || hdr->size != sizeof(*hdr) ||
	    !hdr->token)
		return EBADF;
	return 0;
}

/*
 * A new context's command fd: write and seal who made it; or, for an
 * imported one, check whose it is: the node must be ours and the
 * exporting attachment alive.
 */
int ibemu_cmd_fd_bind(struct ibemu_context *ctx, int cmd_fd, bool imported)
{
	uint64_t own = emu_hca_token(ctx->hca);
	struct ibemu_cmd_hdr hdr;
	int ret;

	if (imported) {
		ret = cmd_fd_read(cmd_fd, &hdr);
		if (ret) {
			ibemu_log_err("import_device: fd %d is no ibemu "
				      "context's command fd", cmd_fd);
			return ret;
		}
		if (hdr.node_guid != emu_node_guid()) {
			ibemu_log_err("import_device: the context is of "
				      "another emulated node");
			return ENODEV;
		}
		if (hdr.token != own &&
		    !emu_hca_token_alive(ctx->hca, hdr.token)) {
			ibemu_log_err("import_device: the process that made "
				      "the context no longer holds it");
			return ENODEV;
		}
		ctx->exporter = hdr.token;
		ctx->foreign = hdr.token != own;
		return 0;
	}
	memset(&hdr, 0, sizeof(hdr));
	memcpy(hdr.magic, CMD_MAGIC, sizeof(hdr.magic));
	hdr.version = CMD_VERSION;
	hdr.size = sizeof(hdr);
	hdr.token = own;
	hdr.node_guid = emu_node_guid();
	if (pwrite(cmd_fd, &hdr, sizeof(hdr), 0) != (ssize_t)sizeof(hdr) ||
	    fcntl(cmd_fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK |
					       F_SEAL_GROW | F_SEAL_WRITE))
		return errno ? errno : EIO;
	ctx->exporter = own;
	ctx->foreign = false;
	return 0;
}

/*
 * ibv_import_device(3) of an ibemu command fd (the shim calls it when
 * the fd is one): the stock open of ibemu's device makes the context,
 * which takes cmd_fd as its own (closed by ibv_close_device).  NULL with
 * errno EBADF when cmd_fd is not one of ours.
 */
struct ibv_context *ibemu_import_device(int cmd_fd,
				       struct ibv_context *(*open)(
					       struct ibv_device *))
{
	struct ibv_device *dev = ibemu_device_get();
	struct ibemu_cmd_hdr hdr;
	struct ibv_context *ctx;

	if (!dev || !open || cmd_fd_read(cmd_fd, &hdr)) {
		errno = EBADF;
		return NULL;
	}
	import_fd = cmd_fd;
	ctx = open(dev);
	import_fd = -1;
	return ctx;
}

static struct ibemu_share *share_find_locked(enum share_kind kind,
					     uint64_t exporter, bool foreign,
					     uint32_t handle)
{
	struct ibemu_share *s;

	for (s = shares; s; s = s->next)
		if (s->kind == kind && s->exporter == exporter &&
		    s->foreign == foreign && s->handle == handle)
			return s;
	return NULL;
}

static void share_link_locked(struct ibemu_share *s)
{
	s->prev = NULL;
	s->next = shares;
	if (shares)
		shares->prev = s;
	shares = s;
}

/* Drop one handle; true (and the MR to deregister) when it was the last. */
bool ibemu_share_put(struct ibemu_share *s, struct emu_mr **emr_p)
{
	bool last;

	if (!s)
		return true;
	pthread_mutex_lock(&share_lock);
	last = --s->refs == 0;
	if (last) {
		if (s->prev)
			s->prev->next = s->next;
		else
			shares = s->next;
		if (s->next)
			s->next->prev = s->prev;
	}
	pthread_mutex_unlock(&share_lock);
	if (last) {
		if (emr_p)
			*emr_p = s->emr;
		free(s);
	}
	return last;
}

int ibemu_pd_share_new(struct ibemu_pd *pd)
{
	struct ibemu_share *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->kind = SHARE_PD;
	s->exporter = to_ectx(pd->ibv_pd.context)->exporter;
	s->pd_id = (uintptr_t)s;
	s->refs = 1;
	pthread_mutex_lock(&share_lock);
	do
		s->handle = next_pd_handle++;
	while (!s->handle || share_find_locked(SHARE_PD, s->exporter, false,
					       s->handle));
	share_link_locked(s);
	pthread_mutex_unlock(&share_lock);
	pd->share = s;
	pd->id = s->pd_id;
	pd->ibv_pd.handle = s->handle;
	return 0;
}

/* One handle of a region fewer: the region goes with the last, and
 * then its device memory has one region fewer. */
void ibemu_mr_share_put(struct ibemu_share *s)
{
	struct ibemu_dm_mem *dm = s->dm; /* set once, at registration */
	struct emu_mr *emr = NULL;

	if (ibemu_share_put(s, &emr) && emr) {
		emu_mr_dereg(emr);
		if (dm)
			ibemu_dm_region_gone(dm);
	}
}

void ibemu_mr_share_set_dm(struct ibemu_share *s, struct ibemu_dm_mem *dm)
{
	s->dm = dm;
}

int ibemu_mr_share_new(struct ibemu_mr *mr)
{
	struct ibemu_share *s = calloc(1, sizeof(*s));

	if (!s)
		return ENOMEM;
	s->kind = SHARE_MR;
	s->exporter = to_ectx(mr->vmr.ibv_mr.context)->exporter;
	s->handle = mr->vmr.ibv_mr.handle;
	s->emr = mr->emr;
	s->refs = 1;
	pthread_mutex_lock(&share_lock);
	share_link_locked(s);
	pthread_mutex_unlock(&share_lock);
	mr->share = s;
	return 0;
}

/* A foreign PD's id: never an address of this process (bit 63 set). */
static uint64_t foreign_pd_id(uint64_t exporter, uint32_t handle)
{
	return 1ull << 63 | (exporter & 0x7fffffffull) << 32 | handle;
}

struct ibv_pd *ibemu_import_pd(struct ibv_context *context,
			       uint32_t pd_handle)
{
	struct ibemu_context *ctx = to_ectx(context);
	struct ibemu_share *s;
	struct ibemu_pd *pd;
	int ret = ENOMEM;

	if (ibemu_ctx_stale(context)) {
		errno = EIO;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd)
		goto err;
	pthread_mutex_lock(&share_lock);
	s = share_find_locked(SHARE_PD, ctx->exporter, ctx->foreign,
			      pd_handle);
	if (!s && ctx->foreign) {
		/* Another process's PD: its identity is made here, once. */
		s = calloc(1, sizeof(*s));
		if (s) {
			s->kind = SHARE_PD;
			s->exporter = ctx->exporter;
			s->foreign = true;
			s->handle = pd_handle;
			s->pd_id = foreign_pd_id(ctx->exporter, pd_handle);
			share_link_locked(s);
		}
	} else if (!s) {
		ret = EINVAL;
		ibemu_log_dbg("import_pd: no PD with handle %u", pd_handle);
	}
	if (s)
		s->refs++;
	pthread_mutex_unlock(&share_lock);
	if (!s)
		goto err_free;
	atomic_fetch_add(&ctx->nr_pds, 1);
	pd->ibv_pd.context = context;
	pd->ibv_pd.handle = pd_handle;
	pd->share = s;
	pd->id = s->pd_id;
	atomic_init(&pd->usecnt, 0);
	return &pd->ibv_pd;

err_free:
	free(pd);
err:
	errno = ret;
	return NULL;
}

void ibemu_unimport_pd(struct ibv_pd *ibpd)
{
	struct ibemu_pd *pd = to_epd(ibpd);

	if (atomic_load(&pd->usecnt)) {
		ibemu_log_err("unimport_pd: %d objects still use the PD; it "
			      "is kept", atomic_load(&pd->usecnt));
		return;
	}
	if (!ibemu_ctx_stale(ibpd->context))
		ibemu_share_put(pd->share, NULL);
	atomic_fetch_sub(&to_ectx(ibpd->context)->nr_pds, 1);
	free(pd);
}

struct ibv_mr *ibemu_import_mr(struct ibv_pd *pd, uint32_t mr_handle)
{
	struct ibemu_context *ctx = to_ectx(pd->context);
	struct emu_mr_attr attr;
	struct ibemu_share *s;
	struct ibemu_mr *mr;

	if (ibemu_ctx_stale(pd->context)) {
		errno = EIO;
		return NULL;
	}
	if (ctx->foreign) {
		ibemu_log_err("import_mr: the region is in the memory of the "
			      "process that registered it, which this "
			      "process's emulated HCA cannot reach");
		errno = EOPNOTSUPP;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&share_lock);
	s = share_find_locked(SHARE_MR, ctx->exporter, false, mr_handle);
	if (s) {
		s->refs++;
		mr->emr = s->emr;
		/* The region cannot go while we hold a reference. */
		emu_mr_attr(s->emr, &attr);
	}
	pthread_mutex_unlock(&share_lock);
	if (!s) {
		ibemu_log_dbg("import_mr: no MR with handle %u", mr_handle);
		free(mr);
		errno = EINVAL;
		return NULL;
	}
	mr->share = s;
	mr->vmr.mr_type = PABI_MR_TYPE_IMPORTED_MR;
	mr->vmr.access = attr.access;
	mr->vmr.ibv_mr.context = pd->context;
	mr->vmr.ibv_mr.pd = pd;
	/* A region on device memory is zero based (verbs_dm.c). */
	mr->vmr.ibv_mr.addr = s->dm ? NULL : attr.addr;
	mr->vmr.ibv_mr.length = attr.length;
	mr->vmr.ibv_mr.lkey = attr.key;
	mr->vmr.ibv_mr.rkey = attr.key;
	mr->vmr.ibv_mr.handle = mr_handle;
	atomic_fetch_add(&to_epd(pd)->usecnt, 1);
	return &mr->vmr.ibv_mr;
}

void ibemu_unimport_mr(struct ibv_mr *ibmr)
{
	struct ibemu_mr *mr = to_emr(ibmr);

	if (!ibemu_ctx_stale(ibmr->context))
		ibemu_mr_share_put(mr->share);
	atomic_fetch_sub(&to_epd(ibmr->pd)->usecnt, 1);
	free(mr);
}
