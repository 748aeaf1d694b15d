// SPDX-License-Identifier: MIT
/*
 * fi_cq(3)'s contract as libfabric's verbs provider keeps it over the
 * device it runs on: FI_EP_MSG (provider "verbs", one RC QP through the
 * RDMA CM) and FI_EP_RDM ("verbs;ofi_rxm", RxM over such QPs).
 *
 *   blocking reads  fi_cq_sread on a CQ with FI_WAIT_FD and one with
 *       FI_WAIT_UNSPEC (and FI_WAIT_MUTEX_COND and FI_WAIT_YIELD where
 *       the provider offers them; a note where it refuses them with
 *       -FI_ENOSYS): a receive the peer's fi_senddata completes after
 *       a delay wakes the reader with the entry whole (op_context,
 *       FI_RECV|FI_MSG|FI_REMOTE_CQ_DATA, len, data, the bytes); a read
 *       with nothing to come returns -FI_EAGAIN once its timeout passed;
 *       fi_cq_signal wakes a thread blocked with no timeout, which
 *       returns -FI_EAGAIN ("the calling thread is signaled and no data is
 *       available"); a send made before the peer posts its receive
 *       completes once it does (verbs connects with rnr_retry_count 7,
 *       IBA's infinite RNR retry: verbs_cm.c, so RNR retry exhaustion,
 *       IBV_WC_RNR_RETRY_EXC_ERR, cannot happen through it).
 *       FI_WAIT_NONE: fi_cq(3) forbids fi_cq_sread; what verbs returns
 *       is printed (RxM's CQ is not asked: ofi_cq_sreadfrom assumes a
 *       wait object).
 *   error entries  fi_write with the key of the peer's buffer wrong: the
 *       initiator's read returns -FI_EAVAIL and fi_cq_readerr an entry
 *       with the write's op_context, FI_RMA|FI_WRITE, a positive err
 *       (verbs: FI_EIO) and prov_errno IBV_WC_REM_ACCESS_ERR (10: the
 *       responder's NAK Remote Access Error, IBA 9.7.4.1.5, C9-88);
 *       receives posted, then the endpoint shut down (MSG): one
 *       FI_ECANCELED entry per receive, in order, prov_errno
 *       IBV_WC_WR_FLUSH_ERR (5: a QP in the error state flushes its WRs,
 *       IBA 10.3.1).  RxM keeps application receives in software, so
 *       there fi_cancel: FI_ECANCELED entries too.
 *
 * The server is the peer of the client's checks; both print "ok:",
 * "FAIL:" and "note:" lines (notes: what is the device's or the
 * provider's to choose).  Usage: fabric_cq msg|rdm -p PORT [-a ADDR]
 * [SERVER]: with SERVER the client, else the server; ADDR (the server's
 * IP address, both sides) is where libfabric's endpoints live.  Exit 0
 * pass, 1 fail, 77 skip.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>

#include "fabric_link.h"
#include "rc_pair.h"

#define DELAY_MS 200	/* the peer's wait before it completes one */
#define TIMEOUT_MS 300	/* the read that times out */
#define SEND_LEN 48
#define DATA 0x5eed0000u

/* The client's receive, completed by the server's fi_senddata DELAY_MS
 * after the client is blocked. */
static void check_delayed(struct session *s)
{
	static struct fi_context rctx, sctx;
	struct link *l = s->l;
	uint8_t *rbuf = l->buf + LINK_RX_OFF;
	uint32_t data = DATA | (uint32_t)s->wait;
	struct fi_cq_data_entry e;
	long long t0;
	ssize_t n;

	if (l->server) {
		if (link_expect(l, "go"))
			return;
		link_sleep_ms(DELAY_MS);
		link_fill(l->buf, s->wait, SEND_LEN);
		n = POST(s, fi_senddata(s->ep, l->buf, SEND_LEN, l->desc, data,
					s->peer, &sctx));
		if (n) {
			fail(s, "fi_senddata: %s", link_err_name(n));
			return;
		}
		n = session_read(s, s->tx, &e, READ_MS);
		if (n == 1 && e.op_context == &sctx &&
		    flags_have(e.flags, FI_SEND | FI_MSG))
			ok(s, "the sender's fi_cq_sread: its send's entry "
			   "(op_context, FI_SEND|FI_MSG)");
		else
			fail(s, "the sender's fi_cq_sread: %s, op_context %s, "
			     "flags 0x%llx", link_err_name(n),
			     e.op_context == &sctx ? "right" : "wrong",
			     (unsigned long long)e.flags);
		return;
	}
	memset(rbuf, 0, SEND_LEN);
	n = POST(s, fi_recv(s->ep, rbuf, 256, l->desc, s->peer, &rctx));
	if (n) {
		fail(s, "fi_recv: %s", link_err_name(n));
		return;
	}
	t0 = link_now_ms();
	if (link_say(l, "go"))
		return;
	n = fi_cq_sread(s->rx, &e, 1, NULL, READ_MS);
	if (n != 1) {
		fail(s, "fi_cq_sread(%d ms) for a send the peer made after "
		     "%d ms: %s", READ_MS, DELAY_MS, link_err_name(n));
		return;
	}
	if (e.op_context == &rctx &&
	    flags_have(e.flags, FI_RECV | FI_MSG | FI_REMOTE_CQ_DATA) &&
	    e.len == SEND_LEN && e.data == data &&
	    link_same(rbuf, s->wait, SEND_LEN))
		ok(s, "fi_cq_sread woke after %lld ms (the peer sent after "
		   "%d ms): op_context, FI_RECV|FI_MSG|FI_REMOTE_CQ_DATA, "
		   "len %zu, data 0x%llx, the bytes intact",
		   link_now_ms() - t0, DELAY_MS, e.len,
		   (unsigned long long)e.data);
	else
		fail(s, "fi_cq_sread's entry: op_context %s, flags 0x%llx, "
		     "len %zu (%d), data 0x%llx (0x%x), bytes %s",
		     e.op_context == &rctx ? "right" : "wrong",
		     (unsigned long long)e.flags, e.len, SEND_LEN,
		     (unsigned long long)e.data, data,
		     link_same(rbuf, s->wait, SEND_LEN) ? "right" : "wrong");
}

/* Nothing is coming: -FI_EAGAIN once TIMEOUT_MS passed. */
static void check_timeout(struct session *s)
{
	struct fi_cq_data_entry e;
	long long t0, ms;
	ssize_t n;

	if (s->l->server)
		return;
	t0 = link_now_ms();
	n = fi_cq_sread(s->rx, &e, 1, NULL, TIMEOUT_MS);
	ms = link_now_ms() - t0;
	if (n == -FI_EAGAIN && ms >= TIMEOUT_MS - 1)
		ok(s, "fi_cq_sread(%d ms) with nothing to come: -FI_EAGAIN "
		   "after %lld ms", TIMEOUT_MS, ms);
	else
		fail(s, "fi_cq_sread(%d ms) with nothing to come: %s after "
		     "%lld ms", TIMEOUT_MS, link_err_name(n), ms);
}

struct blocked {
	struct fid_cq *cq;
	ssize_t ret;
};

static void *blocked_read(void *arg)
{
	struct blocked *b = arg;
	struct fi_cq_data_entry e;

	b->ret = fi_cq_sread(b->cq, &e, 1, NULL, -1);
	return NULL;
}

/* fi_cq_signal wakes a thread in fi_cq_sread with no timeout. */
static void check_signal(struct session *s)
{
	struct blocked b = { .cq = s->rx };
	struct timespec until;
	pthread_t t;
	int ret;

	if (s->l->server)
		return;
	if (pthread_create(&t, NULL, blocked_read, &b)) {
		fail(s, "pthread_create");
		return;
	}
	link_sleep_ms(DELAY_MS);
	ret = fi_cq_signal(s->rx);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += READ_MS / 1000;
	if (pthread_timedjoin_np(t, NULL, &until)) {
		fail(s, "fi_cq_signal returned %d; the thread in "
		     "fi_cq_sread(-1) did not wake within %d ms", ret, READ_MS);
		fflush(stderr);
		_exit(1);
	}
	if (ret == 0 && b.ret == -FI_EAGAIN)
		ok(s, "fi_cq_signal (0) woke the thread in fi_cq_sread(-1): "
		   "-FI_EAGAIN");
	else
		fail(s, "fi_cq_signal returned %d; the woken fi_cq_sread: %s",
		     ret, link_err_name(b.ret));
}

/* The client sends before the server posts its receive (DELAY_MS
 * later): with the verbs provider's rnr_retry_count of 7 the device
 * retries until it is there (IBA 9.7.5.2.8), RxM buffers it. */
static void check_late_recv(struct session *s)
{
	static struct fi_context rctx, sctx;
	struct link *l = s->l;
	uint8_t *rbuf = l->buf + LINK_RX_OFF;
	struct fi_cq_data_entry e;
	ssize_t n;

	if (l->server) {
		if (link_expect(l, "late"))
			return;
		link_sleep_ms(DELAY_MS);
		memset(rbuf, 0, SEND_LEN);
		n = POST(s, fi_recv(s->ep, rbuf, 256, l->desc, s->peer, &rctx));
		if (!n)
			n = session_read(s, s->rx, &e, READ_MS);
		if (n == 1 && e.op_context == &rctx && e.len == SEND_LEN &&
		    link_same(rbuf, 7, SEND_LEN))
			ok(s, "a receive posted %d ms after the peer's send "
			   "got it whole", DELAY_MS);
		else
			fail(s, "a receive posted %d ms after the peer's send: "
			     "%s, len %zu", DELAY_MS, link_err_name(n), e.len);
		return;
	}
	if (link_say(l, "late"))
		return;
	link_fill(l->buf, 7, SEND_LEN);
	n = POST(s, fi_send(s->ep, l->buf, SEND_LEN, l->desc, s->peer, &sctx));
	if (!n)
		n = session_read(s, s->tx, &e, READ_MS);
	if (n == 1 && e.op_context == &sctx)
		ok(s, "a send made before the peer's receive completed");
	else
		fail(s, "a send made before the peer's receive: %s", link_err_name(n));
	if (l->rdm)
		note(s, "RNR retry exhaustion not tried: RxM posts its own "
		     "receive buffers and queues unmatched messages, so an "
		     "application send meets no RNR NAK");
	else
		note(s, "RNR retry exhaustion not tried: the verbs provider "
		     "connects with rnr_retry_count 7 (infinite, IBA "
		     "9.7.5.2.8), so IBV_WC_RNR_RETRY_EXC_ERR cannot occur");
}

static void run_wait_session(struct link *l, enum fi_wait_obj wait,
			     const char *name)
{
	struct session s;
	int ret = session_open(&s, l, wait, name);

	if (ret == 0) {
		check_delayed(&s);
		check_timeout(&s);
		check_signal(&s);
		if (wait == FI_WAIT_FD)
			check_late_recv(&s);
		if (link_say(l, "end") == 0)
			link_expect(l, "end");
	} else if (ret < 0) {
		link_fails++;
	}
	session_close(&s);
}

static int run(struct link *l)
{
	run_wait_session(l, FI_WAIT_FD, "FI_WAIT_FD");
	run_wait_session(l, FI_WAIT_UNSPEC, "FI_WAIT_UNSPEC");
	run_wait_session(l, FI_WAIT_MUTEX_COND, "FI_WAIT_MUTEX_COND");
	run_wait_session(l, FI_WAIT_YIELD, "FI_WAIT_YIELD");
	run_error_session(l);
	run_flush_session(l);
	return link_fails ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct link l = { .ctl = -1, .server = true };
	const char *port = NULL, *addr = NULL;
	bool rdm;
	int opt, ret;

	setvbuf(stderr, NULL, _IOLBF, 0);
	if (argc < 2 || (strcmp(argv[1], "msg") && strcmp(argv[1], "rdm"))) {
		say("usage: fabric_cq msg|rdm -p PORT [-a ADDR] [SERVER]");
		return 2;
	}
	rdm = strcmp(argv[1], "rdm") == 0;
	optind = 2;
	while ((opt = getopt(argc, argv, "p:a:")) != -1) {
		if (opt == 'p')
			port = optarg;
		else if (opt == 'a')
			addr = optarg;
		else
			return 2;
	}
	if (!port) {
		say("fabric_cq: -p PORT is needed");
		return 2;
	}
	if (optind < argc)
		l.server = false;
	ret = link_open(&l, rdm, l.server ? NULL : argv[optind], addr, port);
	if (ret == 0)
		ret = run(&l);
	else if (ret != 77)
		ret = 1;
	link_close(&l);
	return ret;
}
