// SPDX-License-Identifier: MIT
/*
 * Shared contexts (ibv_import_device(3), ibv_import_pd(3),
 * ibv_import_mr(3)): a context's cmd_fd, dup'd in the same process or
 * passed to another one over a unix socket (SCM_RIGHTS), is imported;
 * the PD and MR with the exporter's handles are found in it; the
 * imported PD makes QPs and MRs that carry traffic.  Skipped where
 * ibv_import_device is not offered (EOPNOTSUPP).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests.h"

#define IM_LEN 65536u
#define IM_WAIT_MS 5000

#define IM_ACCESS                                                              \
	(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |                    \
	 IBV_ACCESS_REMOTE_READ)

/*
 * An RC QP of c (on c->pd), connected to itself, WRITEs IM_LEN bytes from
 * buf under lkey to buf + IM_LEN under rkey; the data must arrive.  1 if
 * it did, 0 otherwise (with the reason in why).
 */
static int im_loop_write(struct cf_ctx *c, uint8_t *buf, uint32_t lkey,
			 uint32_t rkey, char *why, size_t why_len)
{
	struct ibv_send_wr wr = { 0 }, *bad;
	struct ibv_sge sge;
	struct ibv_qp *qp;
	struct ibv_wc wc;
	int got, ok = 0;
	long diff;

	qp = cf_create_qp(c, IBV_QPT_RC, NULL);
	if (!qp) {
		snprintf(why, why_len, "ibv_create_qp on the imported PD: %s",
			 cf_errname(errno));
		return 0;
	}
	if (cf_qp_to_state(c, qp, IBV_QPS_RTS)) {
		snprintf(why, why_len, "QP to RTS failed");
		goto out;
	}
	cf_pattern_fill(buf, IM_LEN, 42);
	memset(buf + IM_LEN, 0, IM_LEN);
	sge.addr = (uintptr_t)buf;
	sge.length = IM_LEN;
	sge.lkey = lkey;
	wr.wr_id = 7;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)buf + IM_LEN;
	wr.wr.rdma.rkey = rkey;
	if (ibv_post_send(qp, &wr, &bad)) {
		snprintf(why, why_len, "ibv_post_send failed");
		goto out;
	}
	got = cf_poll_cq_wait(c->cq, &wc, 1, IM_WAIT_MS);
	if (got != 1 || wc.status != IBV_WC_SUCCESS) {
		snprintf(why, why_len, "WRITE: %d completions, status %s", got,
			 got == 1 ? ibv_wc_status_str(wc.status) : "-");
		goto out;
	}
	diff = cf_pattern_check(buf + IM_LEN, IM_LEN, 42);
	if (diff >= 0)
		snprintf(why, why_len, "WRITE data differs at byte %ld", diff);
	ok = diff < 0;
out:
	ibv_destroy_qp(qp);
	return ok;
}

/*
 * In one process: ibv_import_device(dup(cmd_fd)) gives a second context
 * on the same device, ibv_import_pd the PD with that handle (the same
 * PD: a QP of the imported PD uses the original's MR), ibv_import_mr the
 * MR with the same keys and length.
 */
CF_TEST_IMPL(import, dup_fd)
{
	uint8_t *buf = calloc(1, 2 * IM_LEN);
	struct ibv_mr *mr = NULL, *mr2 = NULL;
	struct cf_ctx c2 = cf;
	struct ibv_context *ctx2;
	struct ibv_pd *pd2 = NULL;
	char why[160] = "";
	int fd;

	CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
	/* Every context has a command fd (ibv_import_device(3)). */
	fd = dup(cf.ctx->cmd_fd);
	CF_CHECK(fd >= 0, "dup(cmd_fd %d): %s", cf.ctx->cmd_fd,
		 cf_errname(errno));
	if (fd < 0) {
		free(buf);
		return;
	}
	errno = 0;
	ctx2 = ibv_import_device(fd);
	if (!ctx2 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		close(fd);
		free(buf);
		SKIP("ibv_import_device: %s", cf_errname(errno));
	}
	CF_CHECK(ctx2 != NULL, "ibv_import_device(dup(cmd_fd)): %s",
		 cf_errname(errno));
	if (!ctx2) {
		close(fd);
		free(buf);
		return;
	}
	CF_CHECK(ctx2->device == cf.ctx->device ||
		 !strcmp(ibv_get_device_name(ctx2->device),
			 ibv_get_device_name(cf.ctx->device)),
		 "the imported context is of another device");
	pd2 = ibv_import_pd(ctx2, cf.pd->handle);
	CF_CHECK(pd2 && pd2->handle == cf.pd->handle &&
			 pd2->context == ctx2,
		 "ibv_import_pd(handle %u): %s", cf.pd->handle,
		 pd2 ? "wrong handle or context" : cf_errname(errno));
	if (!pd2)
		goto out;
	mr = ibv_reg_mr(cf.pd, buf, 2 * IM_LEN, IM_ACCESS);
	CF_CHECK(mr != NULL, "ibv_reg_mr: %s", cf_errname(errno));
	if (!mr)
		goto out;
	mr2 = ibv_import_mr(pd2, mr->handle);
	CF_CHECK(mr2 && mr2->lkey == mr->lkey && mr2->rkey == mr->rkey &&
			 mr2->length == mr->length && mr2->pd == pd2 &&
			 mr2->handle == mr->handle &&
			 (!mr2->addr || mr2->addr == mr->addr),
		 "ibv_import_mr(handle %u): %s", mr->handle,
		 mr2 ? "keys, length, handle or address differ" :
		       cf_errname(errno));
	if (!mr2)
		goto out;
	c2.ctx = ctx2;
	c2.pd = pd2;
	c2.cq = ibv_create_cq(ctx2, 16, NULL, NULL, 0);
	CF_CHECK(c2.cq != NULL, "ibv_create_cq on the imported context: %s",
		 cf_errname(errno));
	if (c2.cq) {
		/* The imported MR's lkey, the original's rkey: one region
		 * of one PD. */
		CF_CHECK(im_loop_write(&c2, buf, mr2->lkey, mr->rkey, why,
				       sizeof(why)),
			 "traffic on the imported PD: %s", why);
		ibv_destroy_cq(c2.cq);
	}
	ibv_unimport_mr(mr2);
	/* The original is untouched by the unimport. */
	CF_CHECK(im_loop_write(&cf, buf, mr->lkey, mr->rkey, why, sizeof(why)),
		 "the original MR after unimport: %s", why);
out:
	if (mr)
		CF_EXPECT_OK(cf_rc(ibv_dereg_mr(mr)), "ibv_dereg_mr");
	if (pd2)
		ibv_unimport_pd(pd2);
	CF_EXPECT_OK(cf_rc(ibv_close_device(ctx2)), "ibv_close_device");
	free(buf);
}

/* Send fd with one byte over sock (SCM_RIGHTS). */
static int im_send_fd(int sock, int fd)
{
	char byte = 'F', cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { 0 };
	struct cmsghdr *cm;

	memset(cbuf, 0, sizeof(cbuf));
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	cm = CMSG_FIRSTHDR(&msg);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	return sendmsg(sock, &msg, MSG_NOSIGNAL) == 1 ? 0 : -1;
}

static int im_recv_fd(int sock)
{
	char byte, cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	struct msghdr msg = { 0 };
	struct cmsghdr *cm;
	int fd = -1;

	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	msg.msg_control = cbuf;
	msg.msg_controllen = sizeof(cbuf);
	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
		return -1;
	cm = CMSG_FIRSTHDR(&msg);
	if (cm && cm->cmsg_level == SOL_SOCKET &&
	    cm->cmsg_type == SCM_RIGHTS)
		memcpy(&fd, CMSG_DATA(cm), sizeof(int));
	return fd;
}

/*
 * Another process gets the parent's cmd_fd over the unix socket
 * (SCM_RIGHTS) and imports it: the context, the PD with the parent's
 * handle, which makes a QP, CQ and MR that carry an RDMA WRITE, and the
 * MR with the parent's handle (same keys and length; where the device
 * cannot reach another process's memory from an imported context it
 * refuses with EOPNOTSUPP, which is reported as a skip).
 */
CF_BODY_IMPL(import_peer, scm_rights)
{
	uint64_t pd_handle, mr_handle, lkey, len, verdict;
	struct ibv_context *ctx2;
	struct ibv_mr *mr2, *own;
	struct ibv_pd *pd2;
	struct cf_ctx c2;
	char why[160] = "";
	int fd, ok;

	/* A descriptor of the device passes between processes of one host
	 * only. */
	if (cf_peer_netns) {
		if (ep->side == CF_PARENT)
			cf_ep_skip(ep, "the peer runs in another network "
				   "namespace (-n): no device to share with it");
		return 0;
	}
	if (ep->side == CF_PARENT) {
		if (cf_ep_send_val(ep, ep->pd->handle) ||
		    cf_ep_send_val(ep, ep->mr->handle) ||
		    cf_ep_send_val(ep, ep->mr->lkey) ||
		    cf_ep_send_val(ep, ep->mr->length) ||
		    cf_ep_sync(ep, IM_WAIT_MS))
			return -1;
		EP_REQUIRE(ep, !im_send_fd(ep->sock, ep->ctx->cmd_fd),
			   "sendmsg(SCM_RIGHTS): %s", strerror(errno));
		/* 0: passed, 1: import not offered, 2: MR import refused. */
		if (cf_ep_recv_val(ep, &verdict, 4 * IM_WAIT_MS))
			return -1;
		if (verdict == 1)
			cf_ep_skip(ep, "ibv_import_device in another process: "
				   "EOPNOTSUPP");
		else if (verdict == 2)
			cf_ep_skip(ep, "ibv_import_mr in another process: "
				   "EOPNOTSUPP (the PD was imported and used)");
		return cf_ep_sync(ep, IM_WAIT_MS);
	}
	if (cf_ep_recv_val(ep, &pd_handle, IM_WAIT_MS) ||
	    cf_ep_recv_val(ep, &mr_handle, IM_WAIT_MS) ||
	    cf_ep_recv_val(ep, &lkey, IM_WAIT_MS) ||
	    cf_ep_recv_val(ep, &len, IM_WAIT_MS) ||
	    cf_ep_sync(ep, IM_WAIT_MS))
		return -1;
	fd = im_recv_fd(ep->sock);
	EP_REQUIRE(ep, fd >= 0, "recvmsg(SCM_RIGHTS) gave no fd");
	verdict = 0;
	errno = 0;
	ctx2 = ibv_import_device(fd);
	if (!ctx2 && (errno == EOPNOTSUPP || errno == ENOSYS)) {
		close(fd);
		verdict = 1;
		goto done;
	}
	if (!EP_CHECK(ep, ctx2, "ibv_import_device(fd from SCM_RIGHTS): %s",
		      cf_errname(errno))) {
		close(fd);
		goto done;
	}
	pd2 = ibv_import_pd(ctx2, (uint32_t)pd_handle);
	if (!EP_CHECK(ep, pd2 && pd2->handle == pd_handle,
		      "ibv_import_pd(%u): %s", (unsigned int)pd_handle,
		      pd2 ? "wrong handle" : cf_errname(errno)))
		goto close;
	/* The imported PD makes objects that work. */
	c2.ctx = ctx2;
	c2.pd = pd2;
	c2.dev = &c2.dev_ex.orig_attr;
	c2.dev_ex = ep->dev_ex;
	c2.dev = &c2.dev_ex.orig_attr;
	c2.port = ep->port;
	c2.gid = ep->gid;
	c2.cq = ibv_create_cq(ctx2, 16, NULL, NULL, 0);
	if (EP_CHECK(ep, c2.cq, "ibv_create_cq on the imported context: %s",
		     cf_errname(errno))) {
		own = ibv_reg_mr(pd2, ep->buf, 2 * IM_LEN, IM_ACCESS);
		if (EP_CHECK(ep, own, "ibv_reg_mr on the imported PD: %s",
			     cf_errname(errno))) {
			ok = im_loop_write(&c2, ep->buf, own->lkey, own->rkey,
					   why, sizeof(why));
			EP_CHECK(ep, ok, "traffic on the imported PD: %s",
				 why);
			ibv_dereg_mr(own);
		}
		ibv_destroy_cq(c2.cq);
	}
	errno = 0;
	mr2 = ibv_import_mr(pd2, (uint32_t)mr_handle);
	if (!mr2 && errno == EOPNOTSUPP) {
		verdict = 2;
	} else if (EP_CHECK(ep, mr2, "ibv_import_mr(%u): %s",
			    (unsigned int)mr_handle, cf_errname(errno))) {
		EP_CHECK(ep, mr2->lkey == lkey && mr2->length == len &&
				     mr2->pd == pd2,
			 "the imported MR's lkey 0x%x length %zu, expected "
			 "0x%x %llu", mr2->lkey, mr2->length,
			 (unsigned int)lkey, (unsigned long long)len);
		ibv_unimport_mr(mr2);
	}
	ibv_unimport_pd(pd2);
close:
	EP_CHECK(ep, !ibv_close_device(ctx2), "ibv_close_device");
done:
	if (cf_ep_send_val(ep, verdict))
		return -1;
	return cf_ep_sync(ep, IM_WAIT_MS);
}
