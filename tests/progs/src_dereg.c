// SPDX-License-Identifier: MIT
/*
 * A SEND whose source region is deregistered before its data has left
 * does not complete successfully (IBA 10.6.3.5: once ibv_dereg_mr()
 * returns, the region's L_Key is invalid; a WQE that then reads through
 * it fails with a local protection error, IBA 10.8.3.1), and nothing of
 * it is delivered as a successful receive.
 *
 * Two RC QPs of one process, connected to each other.  The receiver has
 * no receive posted, so the 16 MiB SEND is answered with RNR NAKs
 * (IBA 9.7.5.2.8) and the requester keeps retrying (rnr_retry 7).  The
 * requester's region is then deregistered, a receive is posted, and the
 * SEND's next attempt must end in IBV_WC_LOC_PROT_ERR.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define MSG_LEN (16u << 20)
#define WAIT_MS 5000

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The first completion of cq within ms; 1 if one came, 0 if none. */
static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc, int ms)
{
	long long end = now_ms() + ms;
	int n;

	do {
		n = ibv_poll_cq(cq, 1, wc);
		if (n)
			return n > 0;
		usleep(100);
	} while (now_ms() < end);
	return 0;
}

int main(void)
{
	struct rc_pair_attr attr = {
		.buf_len = MSG_LEN,
		.mr_access = IBV_ACCESS_LOCAL_WRITE,
		.cq_depth = 4,
		.max_send_wr = 2,
		.max_recv_wr = 2,
		.path_mtu = IBV_MTU_4096,
		.timeout = 14,
		.retry_cnt = 7,
		.rnr_retry = 7,
	};
	struct rc_side req = { 0 }, tgt = { 0 };
	struct ibv_send_wr swr = { 0 }, *bad_s;
	struct ibv_recv_wr rwr = { 0 }, *bad_r;
	struct ibv_sge ssge, rsge;
	struct ibv_wc wc;
	int ret, rc = 1;

	ret = rc_pair_open(&req, &attr);
	if (!ret)
		ret = rc_pair_open(&tgt, &attr);
	if (ret) {
		say("cannot open the device: %s", ret > 0 ? "none" : "error");
		rc = ret > 0 ? 77 : 1;
		goto out;
	}
	if (rc_pair_connect(&req, &tgt.me) || rc_pair_connect(&tgt, &req.me))
		goto out;
	memset(req.buf, 0x5a, MSG_LEN);
	memset(tgt.buf, 0, MSG_LEN);

	ssge = (struct ibv_sge){ .addr = (uintptr_t)req.buf,
				 .length = MSG_LEN,
				 .lkey = req.mr->lkey };
	swr.wr_id = 1;
	swr.sg_list = &ssge;
	swr.num_sge = 1;
	swr.opcode = IBV_WR_SEND;
	swr.send_flags = IBV_SEND_SIGNALED;
	if (ibv_post_send(req.qp, &swr, &bad_s)) {
		say("ibv_post_send failed");
		goto out;
	}
	/* The SEND meets an empty receive queue: RNR NAKs, retries. */
	usleep(20000);
	if (ibv_dereg_mr(req.mr)) {
		say("ibv_dereg_mr failed");
		goto out;
	}
	req.mr = NULL;

	rsge = (struct ibv_sge){ .addr = (uintptr_t)tgt.buf,
				 .length = MSG_LEN,
				 .lkey = tgt.mr->lkey };
	rwr.wr_id = 2;
	rwr.sg_list = &rsge;
	rwr.num_sge = 1;
	if (ibv_post_recv(tgt.qp, &rwr, &bad_r)) {
		say("ibv_post_recv failed");
		goto out;
	}

	if (!poll_one(req.cq, &wc, WAIT_MS)) {
		say("FAIL: the SEND did not complete within %d ms", WAIT_MS);
		goto out;
	}
	if (wc.status != IBV_WC_LOC_PROT_ERR) {
		say("FAIL: the SEND completed with %s, not %s",
		    ibv_wc_status_str(wc.status),
		    ibv_wc_status_str(IBV_WC_LOC_PROT_ERR));
		goto out;
	}
	if (poll_one(tgt.cq, &wc, 200) && wc.status == IBV_WC_SUCCESS) {
		say("FAIL: the receive completed successfully with %u bytes "
		    "of a SEND whose source was deregistered", wc.byte_len);
		goto out;
	}
	say("PASS: the SEND ended in %s; no receive succeeded",
	    ibv_wc_status_str(IBV_WC_LOC_PROT_ERR));
	rc = 0;
out:
	rc_pair_close(&tgt);
	rc_pair_close(&req);
	return rc;
}
