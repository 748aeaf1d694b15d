// SPDX-License-Identifier: MIT
/*
 * Misuse for the checking mode's registration and lifetime checks
 * (tests/local/check-life.sh), one process, one device.  Each subcommand
 * commits one; SUBCOMMAND-ok does the same work correctly and must be
 * reported clean:
 *   reg-conflict  the same buffer registered twice, local write only and
 *                 then remote write (-ok: the same rights twice)
 *   async-unacked  an RC QP on an SRQ moved to ERR raises
 *                 IBV_EVENT_QP_LAST_WQE_REACHED, which is taken with
 *                 ibv_get_async_event and never acknowledged before
 *                 ibv_destroy_qp (-ok: ibv_ack_async_event first)
 *   srq-busy      ibv_destroy_srq of an SRQ a QP still uses: EBUSY (-ok:
 *                 the QP goes first)
 * Every object is released at the end, so a correct run has no leaks.
 * Exit: 0 done, 1 a verb failed unexpectedly, 2 usage, 77 no device.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <infiniband/verbs.h>

#include "rc_pair.h"

#define NOINLINE __attribute__((noinline))
#define BUF_LEN 4096

static struct ibv_device **list;
static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static char buf[BUF_LEN];

/* Not static: the stacks name them (dladdr sees exported symbols). */
int reg_twice(int ok);
int destroy_qp_unacked(int ok);
int destroy_srq_busy(int ok);

static int fail(const char *what)
{
	say("check_life: %s failed", what);
	return 1;
}

NOINLINE int reg_twice(int ok)
{
	struct ibv_mr *a, *b;
	int rights = ok ? IBV_ACCESS_LOCAL_WRITE
			: IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	a = ibv_reg_mr(pd, buf, BUF_LEN, IBV_ACCESS_LOCAL_WRITE);
	if (!a)
		return fail("ibv_reg_mr");
	b = ibv_reg_mr(pd, buf, BUF_LEN, rights);
	if (!b) {
		ibv_dereg_mr(a);
		return fail("ibv_reg_mr (second)");
	}
	return ibv_dereg_mr(b) || ibv_dereg_mr(a) ? fail("ibv_dereg_mr") : 0;
}

static struct ibv_srq *make_srq(void)
{
	struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};

	return ibv_create_srq(pd, &sa);
}

static struct ibv_qp *make_qp(struct ibv_srq *srq)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .srq = srq,
		.qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 4, .max_send_sge = 1},
	};

	return ibv_create_qp(pd, &ia);
}

/* The QP's next async event, within five seconds: 0, or -1. */
static int take_event(struct ibv_qp *qp, struct ibv_async_event *ev)
{
	struct pollfd p = {.fd = ctx->async_fd, .events = POLLIN};

	if (poll(&p, 1, 5000) != 1 || ibv_get_async_event(ctx, ev))
		return -1;
	if (ev->event_type != IBV_EVENT_QP_LAST_WQE_REACHED ||
	    ev->element.qp != qp) {
		say("check_life: event %d, not LAST_WQE_REACHED of the QP",
		    ev->event_type);
		ibv_ack_async_event(ev);
		return -1;
	}
	return 0;
}

NOINLINE int destroy_qp_unacked(int ok)
{
	struct ibv_qp_attr attr = {.qp_state = IBV_QPS_ERR};
	struct ibv_async_event ev;
	struct ibv_srq *srq = make_srq();
	struct ibv_qp *qp = srq ? make_qp(srq) : NULL;
	int ret = 0;

	if (!qp) {
		if (srq)
			ibv_destroy_srq(srq);
		return fail("ibv_create_srq/qp");
	}
	/* IBA 10.3.1: an SRQ-attached QP in ERR raises LAST_WQE_REACHED. */
	if (ibv_modify_qp(qp, &attr, IBV_QP_STATE) || take_event(qp, &ev))
		ret = fail("the LAST_WQE_REACHED event");
	else if (ok)
		ibv_ack_async_event(&ev);
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		ret = fail("ibv_destroy_qp/srq");
	return ret;
}

NOINLINE int destroy_srq_busy(int ok)
{
	struct ibv_srq *srq = make_srq();
	struct ibv_qp *qp = srq ? make_qp(srq) : NULL;
	int ret = 0;

	if (!qp) {
		if (srq)
			ibv_destroy_srq(srq);
		return fail("ibv_create_srq/qp");
	}
	if (!ok && ibv_destroy_srq(srq) != EBUSY)
		ret = fail("ibv_destroy_srq of a busy SRQ: not EBUSY");
	if (ibv_destroy_qp(qp) || ibv_destroy_srq(srq))
		ret = fail("ibv_destroy_qp/srq");
	return ret;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*run)(int ok);
	} cmds[] = {
		{"reg-conflict", reg_twice},
		{"async-unacked", destroy_qp_unacked},
		{"srq-busy", destroy_srq_busy},
	};
	const char *cmd = argc == 2 ? argv[1] : "";
	struct ibv_port_attr pa;
	size_t n = strlen(cmd), i;
	int ok = n > 3 && !strcmp(cmd + n - 3, "-ok"), ret;

	if (ok)
		n -= 3;
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strlen(cmds[i].name) == n && !strncmp(cmds[i].name, cmd, n))
			break;
	if (i == sizeof(cmds) / sizeof(cmds[0])) {
		fprintf(stderr, "usage: check_life SUBCOMMAND[-ok]\n");
		return 2;
	}
	ret = verbs_open(&list, &ctx, &pd, &cq, 16, &pa);
	if (ret == 1)
		return 77;
	ret = ret ? fail("setup") : cmds[i].run(ok);
	verbs_release(NULL, NULL, cq, pd, ctx, list);
	return ret;
}
