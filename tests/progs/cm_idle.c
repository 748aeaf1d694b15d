// SPDX-License-Identifier: MIT
/*
 * A process whose RDMA CM connection is idle sleeps, and still learns at
 * once that its peer died.
 *
 * Two processes connect an RC id through the RDMA CM (the child is the
 * client) and then do nothing.  Over one second the server's threads
 * must not wake: no periodic look at the peer (ibemu(7): an idle process
 * uses no CPU).  Then the child is killed, and the server must get
 * RDMA_CM_EVENT_DISCONNECTED within a second.
 *
 * Across nodes (tests/net/cm-net.sh), the same with the two ends as two
 * processes on different nodes: `cm_idle server ADDR` listens on ADDR,
 * says "listening", takes one connection, counts its wake-ups over the
 * idle second, says "idle measured" and waits for DISCONNECTED (the
 * caller kills the client then); `cm_idle client ADDR` connects to ADDR
 * and idles until killed.  With a third argument PEER_LID, each end
 * checks that the path its id reports and the address vector
 * rdma_init_qp_attr gives its QP name the peer's node: its LID
 * PEER_LID and, in a GRH, the GID of the peer's IPv4 address, from the
 * GID of our own address.
 *
 * Exit: 0 pass, 1 fail, 77 skip (no device).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <rdma/rdma_cma.h>

#define PORT 7791
/* wake-ups (voluntary context switches) of all threads in the quiet
 * second */
#define MAX_WAKEUPS 4

static int say_fail(const char *what)
{
	printf("FAIL: cm-idle: %s (%s)\n", what, strerror(errno));
	return 1;
}

/* The next event on ch within ms, of type want; 0 or -1. */
static int expect(struct rdma_event_channel *ch, enum rdma_cm_event_type want,
		  int ms, struct rdma_cm_id **id_p)
{
	struct pollfd p = { .fd = ch->fd, .events = POLLIN };
	struct rdma_cm_event *ev;
	int ok;

	if (poll(&p, 1, ms) != 1 || rdma_get_cm_event(ch, &ev))
		return -1;
	ok = ev->event == want;
	if (!ok)
		printf("cm-idle: got %s, wanted %s\n", rdma_event_str(ev->event),
		       rdma_event_str(want));
	if (id_p)
		*id_p = ev->id;
	rdma_ack_cm_event(ev);
	return ok ? 0 : -1;
}

/* Voluntary context switches of every thread of this process so far. */
static long switches(void)
{
	char path[300], line[128];
	struct dirent *d;
	long n = 0, v;
	DIR *dir = opendir("/proc/self/task");
	FILE *f;

	if (!dir)
		return -1;
	while ((d = readdir(dir))) {
		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status",
			 d->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		while (fgets(line, sizeof(line), f))
			/* Voluntary only: each wake-up ends in one (the
			 * thread sleeps again); an involuntary switch is
			 * another process taking the CPU from a thread that
			 * runs, which a loaded machine does at any time. */
			if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) ==
			    1)
				n += v;
		fclose(f);
	}
	closedir(dir);
	return n;
}

static struct ibv_qp_init_attr qp_attr = {
	.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
		 .max_recv_sge = 1 },
	.qp_type = IBV_QPT_RC,
};

/* The peer of id is on another node, at LID want_lid (see above); 0 if
 * its path and address vector say so. */
static int check_path(struct rdma_cm_id *id, int want_lid)
{
	struct sockaddr_in *peer = (void *)rdma_get_peer_addr(id);
	struct sockaddr_in *self = (void *)rdma_get_local_addr(id);
	struct ibv_sa_path_rec *path = id->route.path_rec;
	union ibv_gid pgid, sgid, ogid;
	struct ibv_port_attr pa;
	struct ibv_qp_attr a;
	char buf[INET6_ADDRSTRLEN];
	int mask;

	if (peer->sin_family != AF_INET || self->sin_family != AF_INET)
		return say_fail("path: not IPv4 addresses");
	memset(&pgid, 0, sizeof(pgid));
	pgid.raw[10] = pgid.raw[11] = 0xff;
	memcpy(pgid.raw + 12, &peer->sin_addr, 4);
	memset(&ogid, 0, sizeof(ogid));
	ogid.raw[10] = ogid.raw[11] = 0xff;
	memcpy(ogid.raw + 12, &self->sin_addr, 4);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	if (rdma_init_qp_attr(id, &a, &mask) ||
	    ibv_query_port(id->verbs, id->port_num, &pa))
		return say_fail("path: rdma_init_qp_attr");
	if (!(mask & IBV_QP_AV) || a.ah_attr.dlid != want_lid ||
	    a.ah_attr.dlid == pa.lid || !a.ah_attr.is_global ||
	    memcmp(a.ah_attr.grh.dgid.raw, pgid.raw, 16) ||
	    ibv_query_gid(id->verbs, id->port_num, a.ah_attr.grh.sgid_index,
			  &sgid) ||
	    memcmp(sgid.raw, ogid.raw, 16)) {
		inet_ntop(AF_INET6, a.ah_attr.grh.dgid.raw, buf, sizeof(buf));
		printf("FAIL: cm-idle: RTR address vector: DLID %u (want %d, "
		       "ours %u), GRH %d, DGID %s, SGID index %u\n",
		       a.ah_attr.dlid, want_lid, pa.lid, a.ah_attr.is_global,
		       buf, a.ah_attr.grh.sgid_index);
		return 1;
	}
	if (!path || be16toh(path->dlid) != want_lid ||
	    be16toh(path->slid) != pa.lid ||
	    memcmp(path->dgid.raw, pgid.raw, 16) ||
	    memcmp(path->sgid.raw, ogid.raw, 16)) {
		printf("FAIL: cm-idle: the route's path: SLID %u DLID %u\n",
		       path ? be16toh(path->slid) : 0,
		       path ? be16toh(path->dlid) : 0);
		return 1;
	}
	inet_ntop(AF_INET6, pgid.raw, buf, sizeof(buf));
	printf("cm-idle: path and address vector to LID %d, GID %s\n",
	       want_lid, buf);
	return 0;
}

/* Connect an RC id to addr:PORT; 0 once established (and its path
 * checked, want_lid > 0). */
static int connect_to(const char *addr, int want_lid)
{
	struct rdma_event_channel *ch;
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PORT) };
	struct rdma_conn_param cp = { .retry_count = 7 };
	struct rdma_cm_id *id;

	ch = rdma_create_event_channel();
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1)
		return -1;
	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_resolve_addr(id, NULL, (struct sockaddr *)&sin, 2000) ||
	    expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED, 3000, NULL) ||
	    rdma_resolve_route(id, 2000) ||
	    expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED, 3000, NULL) ||
	    rdma_create_qp(id, NULL, &qp_attr) || rdma_connect(id, &cp) ||
	    expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL))
		return -1;
	return want_lid > 0 ? check_path(id, want_lid) : 0;
}

static void client(int ready_fd)
{
	char c;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (read(ready_fd, &c, 1) != 1) /* the server listens */
		_exit(1);
	if (connect_to("127.0.0.1", 0))
		_exit(1);
	for (;;)
		pause(); /* idle until killed */
}

/* The server end on its own (the client on another node). */
static int net_server(const char *addr, int want_lid)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PORT) };
	struct rdma_conn_param cp = { .retry_count = 7 };
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *lid, *cid;
	long before, after;

	if (!ch) {
		printf("SKIP: cm-idle: no RDMA CM (%s)\n", strerror(errno));
		return 77;
	}
	if (inet_pton(AF_INET, addr, &sin.sin_addr) != 1 ||
	    rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin) ||
	    rdma_listen(lid, 1))
		return say_fail("listen");
	printf("cm-idle: listening\n");
	fflush(stdout);
	if (expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 20000, &cid))
		return say_fail("connect");
	if (want_lid > 0 && check_path(cid, want_lid))
		return 1;
	if (rdma_create_qp(cid, NULL, &qp_attr) || rdma_accept(cid, &cp) ||
	    expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL))
		return say_fail("connect");
	usleep(200 * 1000); /* the client reaches pause() */
	before = switches();
	sleep(1);
	after = switches();
	printf("cm-idle: %ld context switches in 1 s of an idle connection\n"
	       "cm-idle: idle measured\n",
	       after - before);
	fflush(stdout);
	if (expect(ch, RDMA_CM_EVENT_DISCONNECTED, 20000, NULL)) {
		printf("FAIL: cm-idle: no DISCONNECTED after the peer died\n");
		return 1;
	}
	printf("cm-idle: DISCONNECTED\n");
	if (after - before > MAX_WAKEUPS) {
		printf("FAIL: cm-idle: the idle process woke %ld times\n",
		       after - before);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(PORT) };
	struct rdma_event_channel *ch;
	struct rdma_cm_id *lid, *cid;
	struct rdma_conn_param cp = { .retry_count = 7 };
	struct timespec t0, t1;
	long before, after, ms;
	pid_t child;
	int st, ready[2];

	if (argc >= 3 && !strcmp(argv[1], "server"))
		return net_server(argv[2], argc > 3 ? atoi(argv[3]) : 0);
	if (argc >= 3 && !strcmp(argv[1], "client")) {
		if (connect_to(argv[2], argc > 3 ? atoi(argv[3]) : 0))
			return say_fail("connect");
		printf("cm-idle: connected\n");
		fflush(stdout);
		for (;;)
			pause(); /* idle until killed */
	}

	/* The child is made before any RDMA resource (a forked child may
	 * not use its parent's, ibv_fork_init(3)). */
	if (pipe(ready))
		return say_fail("pipe");
	child = fork();
	if (child == 0)
		client(ready[0]);
	if (child < 0)
		return say_fail("fork");
	ch = rdma_create_event_channel();
	if (!ch) {
		printf("SKIP: cm-idle: no RDMA CM (%s)\n", strerror(errno));
		kill(child, SIGKILL);
		return 77;
	}
	inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr);
	if (rdma_create_id(ch, &lid, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(lid, (struct sockaddr *)&sin) ||
	    rdma_listen(lid, 1) || write(ready[1], "l", 1) != 1) {
		kill(child, SIGKILL);
		return say_fail("listen");
	}
	if (expect(ch, RDMA_CM_EVENT_CONNECT_REQUEST, 5000, &cid) ||
	    rdma_create_qp(cid, NULL, &qp_attr) || rdma_accept(cid, &cp) ||
	    expect(ch, RDMA_CM_EVENT_ESTABLISHED, 5000, NULL)) {
		kill(child, SIGKILL);
		return say_fail("connect");
	}
	usleep(200 * 1000); /* the child reaches pause() */
	before = switches();
	sleep(1);
	after = switches();
	printf("cm-idle: %ld context switches in 1 s of an idle connection\n",
	       after - before);
	kill(child, SIGKILL);
	waitpid(child, &st, 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (expect(ch, RDMA_CM_EVENT_DISCONNECTED, 3000, NULL)) {
		printf("FAIL: cm-idle: no DISCONNECTED after the peer died\n");
		return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 +
	     (t1.tv_nsec - t0.tv_nsec) / 1000000;
	printf("cm-idle: DISCONNECTED %ld ms after the peer died\n", ms);
	if (after - before > MAX_WAKEUPS) {
		printf("FAIL: cm-idle: the idle process woke %ld times\n",
		       after - before);
		return 1;
	}
	rdma_destroy_qp(cid);
	rdma_destroy_id(cid);
	rdma_destroy_id(lid);
	rdma_destroy_event_channel(ch);
	return 0;
}
