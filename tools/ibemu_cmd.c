// SPDX-License-Identifier: MIT
/*
 * The ibemu command (doc/design.md §17 "The ibemu command").
 *
 *   ibemu run [options] -- CMD [ARGS...]   run CMD with the emulated HCA
 *   ibemu status                          the node's device, address, LID,
 *                                         GIDs, processes, QPs
 *   ibemu top [-b] [-d SECONDS] [-n COUNT] a live view of the node's
 *                                         processes and QPs (ibemu_top.c)
 *   ibemu port down|up N                  take port N of the node's HCA
 *                                         down, or bring it back
 *   ibemu trace show FILE...              draw run traces as a ladder
 *                                         (tools/trace_show.c)
 *   ibemu pcap check FILE...              check the ICRC of every RoCEv2
 *                                         packet captured (ibemu_pcap.c)
 *
 * `run` only sets LD_PRELOAD (and LD_AUDIT, see provider/verbs/audit.c) and
 * ibemu's environment, then executes CMD:
 * everything it does can be done by hand with LD_PRELOAD=libibemu.so
 * (and LD_AUDIT=libibemu-audit.so).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>
#include <unistd.h>

#include "fabric.h"
#include "ibemu_top.h"
#include "ibemu_pcap.h"
#include "inbox.h"
#include "node.h"
#include "shmfile.h"
#include "tools/trace.h"

#define LIB_NAME "libibemu.so"
#define AUDIT_NAME "libibemu-audit.so"
#define CHECK_NAME "libibemu-check.so"

static void usage(FILE *out)
{
	fprintf(out,
		"usage: ibemu run [options] -- COMMAND [ARGS...]\n"
		"       ibemu status\n"
		"       ibemu top [-b] [-d SECONDS] [-n COUNT]\n"
		"       ibemu port down|up N\n"
		"       ibemu dir\n"
		"       ibemu trace -o FILE [-a] [run options] -- COMMAND [ARGS...]\n"
		"       ibemu trace show [-o OUT.html] [--text] [--qp QPN]...\n"
		"                        [--from NS] [--to NS] FILE...\n"
		"       ibemu pcap check FILE...\n"
		"       ibemu --help | --version\n"
		"\n"
		"Run a program written for libibverbs with ibemu's software\n"
		"InfiniBand device, %s, and no RDMA hardware.\n"
		"\n"
		"run options:\n"
		"  -n, --node NAME   join the emulated node NAME instead of the\n"
		"                    one of this user and network namespace\n"
		"  -N, --net         network mode: reach and be reached by the\n"
		"                    nodes of the IP fabric (IBEMU_NET=1)\n"
		"  -l, --lib PATH    the preload library to use\n"
		"  -d, --debug       log the provider's decisions to stderr\n"
		"  -q, --quiet       do not log warnings and errors\n"
		"      --check[=abort]  report misuse of the verbs (IBEMU_CHECK);\n"
		"                    abort: stop at the first\n"
		"\n"
		"Environment: IBEMU_LIB (library path), IBEMU_NODE, IBEMU_DEBUG,\n"
		"IBEMU_QUIET, IBEMU_CMA=0 (no requester-placed RDMA),\n"
		"IBEMU_PCAP=FILE (packets as RoCEv2 pcap, %%p = process ID),\n"
		"IBEMU_TRACE=FILE (the run as trace events, %%n = node),\n"
		"IBEMU_NET=1 (network mode; off: nothing another host can reach),\n"
		"IBEMU_IFACE, IBEMU_SUBNET, IBEMU_FABRIC, IBEMU_TCP_PORT (the\n"
		"node's address, LID and door on the IP fabric).\n"
		"See ibemu(1) and ibemu(7).\n",
		IBEMU_DEVICE_NAME);
}

static bool readable(const char *path)
{
	return access(path, R_OK) == 0;
}

static int join_path(char *buf, size_t len, const char *dir, const char *rel)
{
	size_t d = strlen(dir), r = strlen(rel);

	if (d + r + 1 > len)
		return -1;
	memcpy(buf, dir, d);
	memcpy(buf + d, rel, r + 1);
	return 0;
}

/* Append n bytes of s to buf, which holds *used of len; -1 if they do
 * not fit. */
static int append(char *buf, size_t len, size_t *used, const char *s,
		  size_t n)
{
	if (*used + n + 1 > len)
		return -1;
	memcpy(buf + *used, s, n);
	*used += n;
	buf[*used] = '\0';
	return 0;
}

/* The length of the next component of the path at *p, past its leading
 * slashes; 0 at the end. */
static size_t next_component(const char **p)
{
	while (**p == '/')
		(*p)++;
	return strcspn(*p, "/");
}

/*
 * libdir as seen from bindir, both as configured ("../lib/" by default,
 * "../lib/x86_64-linux-gnu/" in a Debian package), into buf with a
 * trailing '/' unless empty; -1 if it does not fit.  From where this
 * executable is, it names the libraries installed with it, also when the
 * whole tree was moved (DESTDIR, a copied prefix), and never those of
 * another install.
 */
static int libdir_from_bindir(char *buf, size_t len)
{
	const char *b = IBEMU_BINDIR, *l = IBEMU_LIBDIR;
	size_t bn, ln, used = 0;

	buf[0] = '\0';
	/* Past the components the two share... */
	for (;;) {
		bn = next_component(&b);
		ln = next_component(&l);
		if (!bn || bn != ln || memcmp(b, l, bn))
			break;
		b += bn;
		l += ln;
	}
	/* ...up out of each of bindir's others, down into libdir's. */
	for (; bn; b += bn, bn = next_component(&b))
		if (append(buf, len, &used, "../", 3))
			return -1;
	for (; ln; l += ln, ln = next_component(&l))
		if (append(buf, len, &used, l, ln) ||
		    append(buf, len, &used, "/", 1))
			return -1;
	return 0;
}

/* The preload: $IBEMU_LIB, the build tree (.libs beside the ibemu built
 * there), the libdir of the install we are part of, the configured one. */
static int find_library(char *buf, size_t len)
{
	const char *env = getenv("IBEMU_LIB");
	char exe[PATH_MAX], rel[PATH_MAX], *slash;
	ssize_t n;

	if (env && *env) {
		if (!readable(env)) {
			fprintf(stderr, "ibemu: IBEMU_LIB=%s: %s\n", env,
				strerror(errno));
			return -1;
		}
		snprintf(buf, len, "%s", env);
		return 0;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash) {
			slash[1] = '\0';
			if (join_path(buf, len, exe, ".libs/" LIB_NAME) == 0 &&
			    readable(buf))
				return 0;
			if (libdir_from_bindir(rel, sizeof(rel)) == 0 &&
			    snprintf(buf, len, "%s%s%s", exe, rel, LIB_NAME) <
				    (int)len &&
			    readable(buf) && realpath(buf, exe)) {
				snprintf(buf, len, "%s", exe);
				return 0;
			}
		}
	}
	snprintf(buf, len, "%s/%s", IBEMU_LIBDIR, LIB_NAME);
	if (readable(buf))
		return 0;
	fprintf(stderr,
		"ibemu: cannot find %s (looked in the build tree, in the "
		"libdir beside the ibemu command and in %s); set IBEMU_LIB\n",
		LIB_NAME, IBEMU_LIBDIR);
	return -1;
}

/* The library name beside lib (in its directory) into buf; false if
 * it does not fit or cannot be read. */
static bool beside(const char *lib, const char *name, char *buf, size_t len)
{
	const char *slash = strrchr(lib, '/');

	if (!slash || (size_t)(slash - lib) + 1 + strlen(name) + 1 > len)
		return false;
	memcpy(buf, lib, (size_t)(slash + 1 - lib));
	strcpy(buf + (slash + 1 - lib), name);
	return readable(buf);
}

/* The checking mode is on (IBEMU_CHECK, as check.c reads it). */
static bool checking(void)
{
	const char *env = getenv("IBEMU_CHECK");

	return env && *env && strcmp(env, "0");
}

static int cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "node", required_argument, NULL, 'n' },
		{ "net", no_argument, NULL, 'N' },
		{ "lib", required_argument, NULL, 'l' },
		{ "debug", no_argument, NULL, 'd' },
		{ "quiet", no_argument, NULL, 'q' },
		{ "check", optional_argument, NULL, 'C' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char lib[PATH_MAX], audit[PATH_MAX], check[PATH_MAX], *preload;
	const char *old;
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "+n:Nl:dqh", opts, NULL)) != -1) {
		switch (c) {
		case 'n':
			if (!*optarg || strchr(optarg, '/')) {
				fprintf(stderr, "ibemu: bad node name '%s'\n",
					optarg);
				return 2;
			}
			setenv("IBEMU_NODE", optarg, 1);
			break;
		case 'N':
			setenv("IBEMU_NET", "1", 1);
			break;
		case 'l':
			setenv("IBEMU_LIB", optarg, 1);
			break;
		case 'd':
			setenv("IBEMU_DEBUG", "1", 1);
			break;
		case 'q':
			setenv("IBEMU_QUIET", "1", 1);
			break;
		case 'C':
			/* --check, or --check=abort: stop at the first */
			if (optarg && strcmp(optarg, "abort")) {
				fprintf(stderr, "ibemu: --check=%s: only "
						"--check or --check=abort\n",
					optarg);
				return 2;
			}
			setenv("IBEMU_CHECK", optarg ? optarg : "1", 1);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "ibemu run: no command given (ibemu run -- "
				"COMMAND [ARGS...])\n");
		return 2;
	}
	if (find_library(lib, sizeof(lib)))
		return 1;
	/* Checking, munmap and free are asked about first, by the library
	 * beside the preload (provider/verbs/check_preload.c). */
	if (!checking() || !beside(lib, CHECK_NAME, check, sizeof(check)))
		check[0] = '\0';
	old = getenv("LD_PRELOAD");
	if (asprintf(&preload, "%s%s%s%s%s", lib, *check ? ":" : "", check,
		     old && *old ? ":" : "", old && *old ? old : "") < 0)
		return 1;
	setenv("LD_PRELOAD", preload, 1);
	free(preload);
	/* The audit module beside the preload serves programs that dlopen
	 * libibverbs and dlsym() its functions themselves (audit.c). */
	if (beside(lib, AUDIT_NAME, audit, sizeof(audit)) && !getenv("LD_AUDIT"))
		setenv("LD_AUDIT", audit, 1);
	execvp(argv[optind], &argv[optind]);
	fprintf(stderr, "ibemu: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}

/* The MRs a process published in its inbox (at most INBOX_PUB_MRS). */
static const char *mr_count(struct node *node, const struct node_proc *p)
{
	static char buf[32];
	struct inbox *ib;
	unsigned int i, n = 0;

	if (inbox_map(node->name, p->token, &ib))
		return "?";
	for (i = 0; i < INBOX_PUB_MRS; i++)
		if (atomic_load_explicit(&ib->mrs[i].key,
					 memory_order_relaxed))
			n++;
	inbox_unmap(ib);
	snprintf(buf, sizeof(buf), "%u", n);
	return buf;
}

/* The RDMA CM's listeners (node_seg.lock held): port space, address,
 * port and process, one line each, as rdma_listen made them. */
static void print_cm_listeners_locked(struct node *node)
{
	struct node_cm_port c;
	char addr[INET6_ADDRSTRLEN];
	const char *ps;
	unsigned int i;
	int32_t pid;

	for (i = 0; i < IBEMU_MAX_CM_PORTS; i++) {
		if (!node_cm_entry_locked(node, i, &c) ||
		    !(c.flags & NODE_CM_LISTEN))
			continue;
		if (c.flags & NODE_CM_WILDCARD)
			snprintf(addr, sizeof(addr), "%s",
				 c.flags & NODE_CM_V4 ? "0.0.0.0" : "[::]");
		else if (c.flags & NODE_CM_V4)
			inet_ntop(AF_INET, c.addr + 12, addr, sizeof(addr));
		else
			inet_ntop(AF_INET6, c.addr, addr, sizeof(addr));
		ps = c.ps == RDMA_PS_TCP ? "tcp" :
		     c.ps == RDMA_PS_UDP ? "udp" :
		     c.ps == RDMA_PS_IPOIB ? "ipoib" :
		     c.ps == RDMA_PS_IB ? "ib" : "?";
		pid = node->seg->procs[c.owner - 1].pid;
		printf("  listen %-5s %s port %u, pid %d\n", ps, addr,
		       (unsigned int)c.port, (int)pid);
	}
}

/* The node's place on the IP fabric (emulator/node/fabric.h): its address,
 * where its LID comes from, its GID table and its door. */
static void print_fabric(const struct node_seg *seg)
{
	struct node_fabric fab;
	char a[INET6_ADDRSTRLEN];
	unsigned int i, nr;
	const char *from;

	memcpy(&fab, &seg->fabric, sizeof(fab)); /* once, then bounded */
	fab.ifname[sizeof(fab.ifname) - 1] = '\0';
	nr = fab.nr_gids < IBEMU_GID_TBL_LEN ? fab.nr_gids : IBEMU_GID_TBL_LEN;
	if (fab.ip4[0]) {
		inet_ntop(AF_INET, fab.ip4, a, sizeof(a));
		printf("address     %s/%u on %s\n", a, fab.prefix4, fab.ifname);
	} else if (fab.flags & NODE_FABRIC_MULTI) {
		printf("address     no IPv4 address; IPv6 on %s\n", fab.ifname);
	} else {
		printf("address     none: the node is alone (no address of "
		       "global scope on an interface that is up)\n");
	}
	if (fab.flags & NODE_FABRIC_FILE)
		from = "from the fabric file";
	else if (fab.ip4[0] && seg->lid == fabric_lid_for(fab.ip4, fab.prefix4))
		from = "derived from the address";
	else
		from = "hashed from the node's identity";
	printf("LID         %u (%#06x), %s\n", seg->lid, seg->lid, from);
	for (i = 0; i < nr; i++) {
		inet_ntop(AF_INET6, fab.gids[i], a, sizeof(a));
		printf("GID[%2u]     %s\n", i, a);
	}
	printf("door        TCP port %u\n", fab.door_port);
}

/* The door's holder, and the TCP connections of the node's processes
 * to processes of other nodes with their traffic (tcp_door.c and
 * tcp_status.c publish them in the node segment; a hint, read once per
 * entry). */
static void print_tcp_peers(struct node *node)
{
	const struct node_seg *seg = node->seg;
	struct node_net_peer p;
	char a[INET6_ADDRSTRLEN];
	uint32_t owner, door;
	unsigned int i;

	door = atomic_load_explicit(&seg->door_owner, memory_order_relaxed);
	if (door && door <= IBEMU_MAX_PROCS)
		printf("door holder pid %d\n", (int)seg->procs[door - 1].pid);
	else
		printf("door holder none: no process of this node listens on "
		       "the door port (with another node in this network "
		       "namespace holding it, this node is not reachable from "
		       "other hosts)\n");
	for (i = 0; i < IBEMU_MAX_NET_PEERS; i++) {
		owner = atomic_load_explicit(&seg->net_peers[i].owner,
					     memory_order_relaxed);
		if (!owner || owner > IBEMU_MAX_PROCS)
			continue;
		memcpy(&p, &seg->net_peers[i], sizeof(p));
		if (p.addr[10] == 0xff && p.addr[11] == 0xff &&
		    !memcmp(p.addr, "\0\0\0\0\0\0\0\0\0\0", 10))
			inet_ntop(AF_INET, p.addr + 12, a, sizeof(a));
		else
			inet_ntop(AF_INET6, p.addr, a, sizeof(a));
		printf("  tcp pid %d -> %s port %u (LID %u, slot %d) %s: "
		       "tx %llu pkts %llu B, rx %llu pkts %llu B\n",
		       (int)seg->procs[owner - 1].pid, a, (unsigned int)p.port,
		       (unsigned int)p.lid, (int)p.rslot,
		       atomic_load(&p.state) == NODE_NET_UP ? "up" : "down",
		       (unsigned long long)atomic_load(&p.tx_pkts),
		       (unsigned long long)atomic_load(&p.tx_bytes),
		       (unsigned long long)atomic_load(&p.rx_pkts),
		       (unsigned long long)atomic_load(&p.rx_bytes));
	}
}

static int cmd_status(void)
{
	struct node node;
	struct node_seg *seg;
	unsigned int i, nqp = 0;
	struct stat ns;
	char path[256];
	int ret;

	ret = node_open(&node);
	if (ret) {
		fprintf(stderr, "ibemu: cannot open the node: %s\n",
			strerror(-ret));
		return 1;
	}
	if (stat("/proc/self/ns/pid", &ns))
		ns.st_ino = 0;
	seg = node.seg;
	if (shmfile_path(path, sizeof(path), node.name))
		snprintf(path, sizeof(path), "%s", node.name);
	node_lock(&node);
	node_sweep_dead_locked(&node);
	printf("node        %s (%s)\n", seg->node_name, path);
	printf("device      %s\n", IBEMU_DEVICE_NAME);
	printf("node_guid   %04x:%04x:%04x:%04x\n",
	       (unsigned int)(seg->node_guid >> 48) & 0xffff,
	       (unsigned int)(seg->node_guid >> 32) & 0xffff,
	       (unsigned int)(seg->node_guid >> 16) & 0xffff,
	       (unsigned int)seg->node_guid & 0xffff);
	for (i = 0; i < node_nr_ports(seg); i++)
		printf("port %u      LID %#06x, %s, InfiniBand\n", i + 1,
		       seg->ports[i].lid,
		       node_port_state(seg, i + 1) == IBV_PORT_ACTIVE
			       ? "PORT_ACTIVE"
			       : "PORT_DOWN");
	print_fabric(seg);
	printf("processes   %u\n", seg->nr_procs);
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		unsigned int q, n = 0;

		const struct node_proc *p = &seg->procs[i];

		if (!p->token)
			continue;
		for (q = 0; q < IBEMU_MAX_QP; q++)
			if (seg->qps[q].owner == (int32_t)i + 1 &&
			    seg->qps[q].qp_type != NODE_QPT_XRC_SRQ)
				n++;
		nqp += n;
		printf("  pid %-8d contexts %u, QPs %u, published MRs %s%s\n",
		       p->pid, p->refs, n, mr_count(&node, p),
		       ns.st_ino && p->pidns_ino == (uint64_t)ns.st_ino &&
				       p->pidns_dev == (uint64_t)ns.st_dev
			       ? ""
			       : " (pid in another pid namespace)");
	}
	printf("QPs         %u\n", nqp);
	print_cm_listeners_locked(&node);
	node_unlock(&node);
	print_tcp_peers(&node);
	node_close(&node);
	return 0;
}

/*
 * `ibemu port down|up N`: port N's state, as a cable pulled or plugged
 * back (node_port.c); every process of the node is woken so that its
 * engine tells its contexts (IBV_EVENT_PORT_ERR / PORT_ACTIVE) and
 * moves its armed QPs (engine/port.c).
 */
static int cmd_port(int argc, char **argv)
{
	uint32_t state;
	struct inbox *ib;
	struct node node;
	unsigned long port;
	uint64_t token;
	char *end;
	int i, ret;

	if (argc != 3 || (strcmp(argv[1], "down") && strcmp(argv[1], "up"))) {
		fprintf(stderr, "usage: ibemu port down|up N\n");
		return 2;
	}
	state = strcmp(argv[1], "down") ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	port = strtoul(argv[2], &end, 10);
	ret = node_open(&node);
	if (ret) {
		fprintf(stderr, "ibemu: cannot open the node: %s\n",
			strerror(-ret));
		return 1;
	}
	if (*end || !*argv[2] || port < 1 || port > node_nr_ports(node.seg)) {
		fprintf(stderr, "ibemu: %s: no such port (the HCA has %u; "
			"IBEMU_PORTS=2 when the node is made gives two)\n",
			argv[2], node_nr_ports(node.seg));
		node_close(&node);
		return 1;
	}
	node_port_set_state(node.seg, (unsigned int)port, state);
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		token = atomic_load(&node.seg->procs[i].token);
		if (!token || inbox_map(node.name, token, &ib))
			continue;
		inbox_wake(ib);
		inbox_unmap(ib);
	}
	printf("port %lu %s\n", port, state == IBV_PORT_ACTIVE ? "ACTIVE"
								 : "DOWN");
	node_close(&node);
	return 0;
}

/*
 * ibemu trace -o FILE [-a] [run options] -- COMMAND: COMMAND under
 * `ibemu run` with IBEMU_TRACE=FILE (doc/trace.md), FILE emptied first
 * unless -a appends to it; `ibemu trace show` draws traces
 * (tools/trace_show.c).
 */
static int cmd_trace(int argc, char **argv)
{
	const char *file = NULL;
	bool append = false;
	int i, fd;

	if (argc >= 2 && !strcmp(argv[1], "show"))
		return trace_show_main(argc - 1, argv + 1);
	/* Its own options first, then run's from the first other one. */
	for (i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
			if (++i == argc)
				break;
			file = argv[i];
		} else if (!strcmp(argv[i], "-a") ||
			   !strcmp(argv[i], "--append")) {
			append = true;
		} else {
			break;
		}
	}
	if (!file || !*file) {
		fprintf(stderr, "usage: ibemu trace -o FILE [-a] [run options] "
				"-- COMMAND [ARGS...]\n"
				"       ibemu trace show [options] FILE...\n");
		return 2;
	}
	/* %n and %p name a file per node or process: each opens its own. */
	if (!strstr(file, "%n") && !strstr(file, "%p")) {
		fd = open(file,
			  O_WRONLY | O_CREAT | O_CLOEXEC | (append ? 0 : O_TRUNC),
			  0600);
		if (fd < 0) {
			fprintf(stderr, "ibemu trace: %s: %s\n", file,
				strerror(errno));
			return 1;
		}
		close(fd);
	}
	setenv("IBEMU_TRACE", file, 1);
	/* run's options and the command, after argv[i - 1] as its name */
	return cmd_run(argc - i + 1, argv + i - 1);
}

/* Where this user's node files are, or would be made (shmfile.h). */
static int cmd_dir(void)
{
	char path[PATH_MAX];

	if (shmfile_dir(path, sizeof(path))) {
		fprintf(stderr, "ibemu: IBEMU_SHM_DIR is too long\n");
		return 1;
	}
	printf("%s\n", path);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
	    !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("ibemu %s (built against rdma-core %s)\n",
		       PACKAGE_VERSION, IBEMU_BUILT_RDMA_CORE);
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "status"))
		return cmd_status();
	if (!strcmp(argv[1], "top"))
		return ibemu_top(argc - 1, argv + 1);
	if (!strcmp(argv[1], "dir"))
		return cmd_dir();
	if (!strcmp(argv[1], "port"))
		return cmd_port(argc - 1, argv + 1);
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc - 1, argv + 1);
	if (!strcmp(argv[1], "pcap"))
		return cmd_pcap(argc - 1, argv + 1);
	fprintf(stderr, "ibemu: unknown command '%s' (try ibemu --help)\n",
		argv[1]);
	return 2;
}
