// SPDX-License-Identifier: MIT
/*
 * Process lifecycle of the peer harness: the fork (before any device is
 * opened), the run of the body on both sides, the child's verdict, and
 * the bounds on everything: the child dies with its parent and at its
 * deadline, the parent reaps it or kills it by PID, and a watchdog alarm
 * ends the whole run when a verb never returns.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "peer_int.h"

/* The child the watchdog kills; 0 when no run is under way. */
static volatile pid_t cf_watchdog_child;

/*
 * Last resort when a verb itself never returns: the parent's alarm kills
 * the child and ends the run (a hang must not stall make check).
 */
static void cf_watchdog_fire(int sig)
{
	static const char msg[] = "\nibemu-conformance: an RC test overstayed "
				  "its deadline in a verb; child killed, "
				  "exiting\n";

	(void)sig;
	if (cf_watchdog_child > 0)
		kill(cf_watchdog_child, SIGKILL);
	if (write(STDERR_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void cf_watchdog_arm(pid_t child, int seconds, struct sigaction *old)
{
	struct sigaction sa;

	cf_watchdog_child = child;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = cf_watchdog_fire;
	sigaction(SIGALRM, &sa, old);
	alarm((unsigned int)seconds);
}

static void cf_watchdog_disarm(const struct sigaction *old)
{
	alarm(0);
	sigaction(SIGALRM, old, NULL);
	cf_watchdog_child = 0;
}

/* The socketpair, then the fork: the child's PID, 0 in the child, -1. */
static pid_t cf_peer_fork(int sv[2])
{
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
		CF_CHECK(0, "socketpair: %s", strerror(errno));
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	/* Fork before any device is opened (see peer.h). */
	pid = fork();
	if (pid < 0) {
		CF_CHECK(0, "fork: %s", strerror(errno));
		close(sv[0]);
		close(sv[1]);
	}
	return pid;
}

static void cf_ep_init(struct cf_ep *ep, const struct cf_peer_params *p,
		       long arg, enum cf_side side, int sock)
{
	memset(ep, 0, sizeof(*ep));
	ep->p = p;
	ep->arg = arg;
	ep->side = side;
	ep->sock = sock;
}

/* One side: set up, connect, run the body, send the verdict. */
static void cf_ep_run(struct cf_ep *ep, cf_peer_body body)
{
	bool ok = cf_ep_setup(ep) == 0 && !ep->skipped;

	if (ok && ep->p->connect)
		ok = cf_ep_connect(ep, IBV_QPS_RTS) == 0;
	if (ok)
		body(ep);
	cf_ep_send_done(ep);
}

/* The child's side of the run; it never returns. */
static void cf_peer_child(struct cf_ep *ep, cf_peer_body body)
{
	long long deadline;

	/* Never outlive the parent or the deadline. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	signal(SIGALRM, SIG_DFL);
	alarm((unsigned int)ep->p->deadline_s + 20);
	deadline = cf_now_ms() + ep->p->deadline_s * 1000LL;
	cf_ep_run(ep, body);
	cf_ep_wait_done(ep, deadline);
	cf_ep_teardown(ep);
	close(ep->sock);
	_exit(ep->nfail ? 1 : 0);
}

/* Wait until deadline for pid to exit: 1 (and its status) or 0. */
static int cf_peer_wait_exit(pid_t pid, long long deadline, int *status_p)
{
	while (cf_now_ms() < deadline) {
		if (waitpid(pid, status_p, WNOHANG) == pid)
			return 1;
		usleep(1000);
	}
	return 0;
}

/*
 * Reap the child, killing it by PID when it overstays the deadline, and
 * check how it ended: by a signal only when p allows it, with a failing
 * exit status only when it reported failures.
 */
static void cf_peer_reap(pid_t pid, const struct cf_peer_params *p,
			 long long deadline, unsigned int child_fails)
{
	int status = 0;

	if (!cf_peer_wait_exit(pid, deadline + 5000, &status)) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		CF_CHECK(0, "the child did not exit in time; killed");
	} else if (WIFSIGNALED(status)) {
		CF_CHECK(p->child_may_die, "the child died of signal %d",
			 WTERMSIG(status));
	} else {
		CF_CHECK(!WEXITSTATUS(status) || child_fails,
			 "the child exited with status %d without a report",
			 WEXITSTATUS(status));
	}
}

int cf_peer_run(const struct cf_peer_params *p, cf_peer_body body, long arg)
{
	long long deadline = cf_now_ms() + p->deadline_s * 1000LL;
	unsigned int child_fails = 0;
	struct sigaction old_sa;
	struct cf_ep ep;
	int sv[2];
	pid_t pid;

	CU_ASSERT_FATAL(p->nqp >= 1 && p->nqp <= CF_PEER_MAX_QP);
	pid = cf_peer_fork(sv);
	if (pid < 0)
		return -1;
	if (pid == 0) {
		close(sv[0]);
		cf_ep_init(&ep, p, arg, CF_CHILD, sv[1]);
		cf_peer_child(&ep, body);
	}
	close(sv[1]);
	cf_ep_init(&ep, p, arg, CF_PARENT, sv[0]);
	cf_watchdog_arm(pid, p->deadline_s + 30, &old_sa);
	cf_ep_run(&ep, body);
	if (cf_ep_wait_done(&ep, deadline) && !p->child_may_die &&
	    !ep.skipped)
		CF_CHECK(0, "the child sent no verdict within %d s",
			 p->deadline_s);
	if (ep.peer_done)
		child_fails = cf_ep_report_assert(ep.peer_done);
	cf_ep_teardown(&ep);
	close(ep.sock);
	cf_peer_reap(pid, p, deadline, child_fails);
	cf_watchdog_disarm(&old_sa);
	free(ep.report);
	free(ep.peer_done);
	return ep.nfail || child_fails ? -1 : 0;
}
