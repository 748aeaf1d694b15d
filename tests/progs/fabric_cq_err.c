// SPDX-License-Identifier: MIT
/*
 * fabric_cq's error entries (see fabric_cq.c): a remote access error
 * and flushed or cancelled receives, read with fi_cq_readerr.
 *
 * fi_cq(3): a read meeting an error entry returns -FI_EAVAIL; readerr
 * returns 1 and the entry: op_context, flags, a positive err, and
 * prov_errno, which libfabric's verbs provider sets to the work
 * completion's ibv_wc_status (verbs_cq.c vrb_cq_readerr, which maps
 * IBV_WC_WR_FLUSH_ERR to FI_ECANCELED and every other status to FI_EIO);
 * RxM passes its MSG endpoint's entry on (rxm_cq.c rxm_handle_comp_error).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#include <infiniband/verbs.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fabric_link.h"
#include "rc_pair.h"

#define WRITE_LEN 64
#define NFLUSH 3

/* Where the server's target half is, as the client writes to it. */
struct target {
	uint64_t addr; /* virtual: the verbs domains' FI_MR_VIRT_ADDR */
	uint64_t key;
};

/* What a CQ holds now, one line per entry, as notes: what a device does
 * to the target of a failed write is its own. */
static void note_entries(struct session *s, struct fid_cq *cq,
			 const char *whose, int ms)
{
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	int count = 0;
	ssize_t n;

	while (count < 8 && (n = session_read(s, cq, &e, ms)) != -FI_EAGAIN) {
		count++;
		if (n == -FI_EAVAIL && session_read_err(cq, &err) == 1)
			note(s, "%s: an error entry: err %s, prov_errno %d (%s)",
			     whose, fi_strerror(err.err), err.prov_errno,
			     ibv_wc_status_str(err.prov_errno));
		else if (n == 1)
			note(s, "%s: an entry, flags 0x%llx", whose,
			     (unsigned long long)e.flags);
		else
			note(s, "%s: %s", whose, link_err_name(n));
	}
	if (!count)
		note(s, "%s: no entry", whose);
}

/* A write with the right key, then one whose key is wrong. */
static void client_writes(struct session *s, const struct target *t)
{
	static struct fi_context good, bad;
	struct link *l = s->l;
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	const char *why;
	ssize_t n;

	link_fill(l->buf, 3, WRITE_LEN);
	n = POST(s, fi_write(s->ep, l->buf, WRITE_LEN, l->desc, s->peer,
			     t->addr, t->key, &good));
	if (!n)
		n = session_read(s, s->tx, &e, READ_MS);
	if (n == 1 && e.op_context == &good &&
	    flags_have(e.flags, FI_RMA | FI_WRITE))
		ok(s, "fi_write with the peer's key: its entry (op_context, "
		   "FI_RMA|FI_WRITE)");
	else
		fail(s, "fi_write with the peer's key: %s%s", link_err_name(n),
		     n == 1 ? " with the wrong op_context or flags" : "");
	if (link_say(l, "wrote") || link_expect(l, "next"))
		return;

	/* The low byte of a verbs rkey is the key the consumer may vary
	 * (ibv_inc_rkey): the region is the peer's, the key is not. */
	n = POST(s, fi_write(s->ep, l->buf, WRITE_LEN, l->desc, s->peer,
			     t->addr, t->key ^ 0xff, &bad));
	if (!n)
		n = session_read(s, s->tx, &e, READ_MS);
	if (n != -FI_EAVAIL) {
		fail(s, "fi_write with a wrong key: the read returns %s, not "
		     "-FI_EAVAIL", link_err_name(n));
		return;
	}
	ok(s, "fi_write with a wrong key: the initiator's read returns "
	   "-FI_EAVAIL");
	n = session_read_err(s->tx, &err);
	why = n != 1 ? "fi_cq_readerr did not return 1" :
	      err.op_context != &bad ? "op_context is not the write's" :
	      !flags_have(err.flags, FI_RMA | FI_WRITE) ? "flags lack FI_RMA|FI_WRITE" :
	      err.err <= 0 ? "err is not a positive fabric errno" :
	      err.prov_errno != IBV_WC_REM_ACCESS_ERR ?
	      "prov_errno is not IBV_WC_REM_ACCESS_ERR (10)" : NULL;
	if (why)
		fail(s, "fi_cq_readerr after a wrong key: %s (returned %zd, "
		     "flags 0x%llx, err %d, prov_errno %d)", why, n,
		     (unsigned long long)err.flags, err.err, err.prov_errno);
	else
		ok(s, "fi_cq_readerr after a wrong key: op_context, "
		   "FI_RMA|FI_WRITE, err %d (%s), prov_errno %d (%s)",
		   err.err, fi_strerror(err.err), err.prov_errno,
		   fi_cq_strerror(s->tx, err.prov_errno, err.err_data, NULL, 0));
	n = fi_cq_readerr(s->tx, &err, 0);
	if (n == -FI_EAGAIN)
		ok(s, "fi_cq_readerr again: -FI_EAGAIN (one error, one entry)");
	else
		fail(s, "fi_cq_readerr again: %s, not -FI_EAGAIN",
		     link_err_name(n));
	link_say(l, "bad");
}

/* The server offers its target half, checks the good write, then shows
 * what its CQs hold after the bad one. */
static void server_target(struct session *s)
{
	static struct fi_context rctx[2];
	struct link *l = s->l;
	uint8_t *tbuf = l->buf + LINK_RX_OFF;
	struct target t = { (uintptr_t)tbuf, fi_mr_key(l->mr) };
	ssize_t n = 0;

	memset(tbuf, 0, WRITE_LEN);
	/* Two receives, to show whether the failed write flushes them. */
	for (int i = 0; i < 2 && !n; i++)
		n = POST(s, fi_recv(s->ep, tbuf + 1024 + i * 256, 256, l->desc,
				    s->peer, &rctx[i]));
	if (n)
		fail(s, "fi_recv: %s", link_err_name(n));
	if (link_put(l, &t, sizeof(t)) || session_expect(s, "wrote"))
		return;
	if (link_same(tbuf, 3, WRITE_LEN))
		ok(s, "the target's buffer holds the write's bytes");
	else
		fail(s, "the target's buffer lacks the write's bytes");
	if (link_say(l, "next") || session_expect(s, "bad"))
		return;
	note_entries(s, s->rx, "the target's receive CQ after the bad "
		     "write", 500);
}

/* The CQs have no wait object: FI_WAIT_NONE. */
void run_error_session(struct link *l)
{
	struct fi_cq_data_entry e;
	struct session s;
	struct target t;
	ssize_t n;

	if (session_open(&s, l, FI_WAIT_NONE, "FI_WAIT_NONE")) {
		link_fails++;
		session_close(&s);
		return;
	}
	if (l->server) {
		server_target(&s);
	} else if (link_get(l, &t, sizeof(t)) == 0) {
		if (l->rdm) {
			note(&s, "fi_cq_sread not called: fi_cq(3) forbids it "
			     "here, and RxM's CQ (util_cq.c "
			     "ofi_cq_sreadfrom) waits on a wait object it "
			     "does not have");
		} else {
			n = fi_cq_sread(s.rx, &e, 1, NULL, 100);
			if (n < 0 && n != -FI_EAGAIN)
				ok(&s, "fi_cq_sread, which fi_cq(3) forbids "
				   "here, is refused: %s (%zd)",
				   link_err_name(n), n);
			else
				fail(&s, "fi_cq_sread on a CQ without a wait "
				     "object: %s", link_err_name(n));
		}
		client_writes(&s, &t);
	}
	if (link_say(l, "end") == 0)
		link_expect(l, "end");
	session_close(&s);
}

/* The client's NFLUSH receives complete in error, in order: MSG after
 * fi_shutdown, FI_ECANCELED with IBV_WC_WR_FLUSH_ERR; RDM after
 * fi_cancel, FI_ECANCELED (RxM's prov_errno is -FI_ECANCELED,
 * rxm_ep.c rxm_ep_cancel_recv). */
static void client_flush(struct session *s)
{
	static struct fi_context rctx[NFLUSH];
	struct link *l = s->l;
	struct fi_cq_data_entry e;
	struct fi_cq_err_entry err;
	const char *why = NULL;
	int i, prov_errno = 0;
	ssize_t n = 0;

	for (i = 0; i < NFLUSH && !n; i++)
		n = POST(s, fi_recv(s->ep, l->buf + LINK_RX_OFF + i * 256, 256,
				    l->desc, s->peer, &rctx[i]));
	if (n) {
		fail(s, "fi_recv: %s", link_err_name(n));
		return;
	}
	if (l->rdm) {
		for (i = 0; i < NFLUSH && !n; i++)
			n = fi_cancel(&s->ep->fid, &rctx[i]);
		if (n)
			fail(s, "fi_cancel: %s", link_err_name(n));
	} else if (session_shutdown(s)) {
		link_fails++;
		return;
	}
	for (i = 0; i < NFLUSH && !why; i++) {
		n = session_read(s, s->rx, &e, READ_MS);
		if (n != -FI_EAVAIL) {
			why = "the read does not return -FI_EAVAIL";
			break;
		}
		n = session_read_err(s->rx, &err);
		why = n != 1 ? "fi_cq_readerr did not return 1" :
		      err.op_context != &rctx[i] ?
		      "op_context is not the next receive's" :
		      !flags_have(err.flags, FI_RECV | FI_MSG) ?
		      "flags lack FI_RECV|FI_MSG" :
		      err.err != FI_ECANCELED ? "err is not FI_ECANCELED" :
		      !l->rdm && err.prov_errno != IBV_WC_WR_FLUSH_ERR ?
		      "prov_errno is not IBV_WC_WR_FLUSH_ERR (5)" : NULL;
		prov_errno = err.prov_errno;
	}
	if (why)
		fail(s, "receive %d of %d after %s: %s (%s; err %d, "
		     "prov_errno %d, flags 0x%llx)", i + 1, NFLUSH,
		     l->rdm ? "fi_cancel" : "fi_shutdown", why,
		     link_err_name(n), err.err, err.prov_errno,
		     (unsigned long long)err.flags);
	else
		ok(s, "%d receives after %s: -FI_EAVAIL, then each one's "
		   "entry in order: FI_RECV|FI_MSG, FI_ECANCELED, "
		   "prov_errno %d", NFLUSH,
		   l->rdm ? "fi_cancel" : "fi_shutdown", prov_errno);
	n = session_read(s, s->rx, &e, 200);
	if (n == -FI_EAGAIN)
		ok(s, "nothing more in the receive CQ");
	else
		fail(s, "after the %d receives the CQ still gives %s", NFLUSH,
		     link_err_name(n));
}

/* The CQs wait on file descriptors: the error entries wake fi_cq_sread
 * too. */
void run_flush_session(struct link *l)
{
	struct session s;

	if (session_open(&s, l, FI_WAIT_FD, "FI_WAIT_FD") == 0 &&
	    !l->server)
		client_flush(&s);
	else if (!s.ep)
		link_fails++;
	if (link_say(l, "end") == 0)
		link_expect(l, "end");
	session_close(&s);
}
