// SPDX-License-Identifier: MIT
/*
 * `ibemu top`: a live view of the node (doc/man/ibemu.1): its ports, its
 * processes and one row per QP with the figures each QP's owner
 * publishes (struct node_qp_stats, emulator/hca/qp_stats.c), rates from
 * the difference of two samples.
 *
 * It watches without disturbing: the segment is mapped read-only
 * (shmfile_map_ro), no lock is taken, no dead process swept, nothing
 * made.  Every value is another process's, written while we read: each
 * is loaded once into a private sample, indexes are bounded before use,
 * and the figures are shown as the hints they are.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <infiniband/verbs.h>

#include "ibemu_top.h"
#include "node.h"
#include "shmfile.h"

#define TOP_MAX_DELAY_S 3600.0

/* One QP as one sample saw it, copied out of the segment. */
struct top_qp {
	bool used;
	int32_t owner; /* slot + 1, bounded */
	uint64_t token; /* its owner's then: a QPN that changed hands is
			 * not compared across samples */
	uint32_t type, state;
	uint32_t sq_psn, rq_psn, sq_wrs, rq_wrs, cq_depth;
	uint32_t errs; /* error completions + NAKs + resends; wraps */
	uint64_t tx, rx;
};

struct top_proc {
	uint64_t token; /* 0: free slot */
	pid_t pid;
	uint32_t refs;
	bool alive;
	unsigned int nr_qp;
};

struct top_sample {
	struct timespec at;
	unsigned int nr_qp, nr_procs;
	struct top_proc procs[IBEMU_MAX_PROCS];
	struct top_qp qps[IBEMU_MAX_QP];
};

struct top_opts {
	double delay_s;
	long count; /* frames; 0: until q */
	bool batch;
};

static volatile sig_atomic_t top_stop;

static void top_on_signal(int sig)
{
	(void)sig;
	top_stop = 1;
}

static const char *top_qp_type(uint32_t t)
{
	switch (t) {
	case IBV_QPT_RC: return "RC";
	case IBV_QPT_UC: return "UC";
	case IBV_QPT_UD: return "UD";
	case IBV_QPT_XRC_SEND: return "XRC_S";
	case IBV_QPT_XRC_RECV: return "XRC_R";
	case IBV_QPT_RAW_PACKET: return "RAW";
	default: return "?";
	}
}

static const char *top_qp_state(uint32_t s)
{
	static const char *const names[] = {
		[IBV_QPS_RESET] = "RESET", [IBV_QPS_INIT] = "INIT",
		[IBV_QPS_RTR] = "RTR",	   [IBV_QPS_RTS] = "RTS",
		[IBV_QPS_SQD] = "SQD",	   [IBV_QPS_SQE] = "SQE",
		[IBV_QPS_ERR] = "ERR",
	};

	return s < sizeof(names) / sizeof(names[0]) && names[s] ? names[s]
								 : "?";
}

static uint32_t top_load32(const _Atomic uint32_t *f)
{
	return atomic_load_explicit(f, memory_order_relaxed);
}

static uint64_t top_load64(const _Atomic uint64_t *f)
{
	return atomic_load_explicit(f, memory_order_relaxed);
}

/* QP entry i into q, each field read once; an owner out of range is no
 * owner. */
static void top_take_qp(struct node *node, unsigned int i, struct top_qp *q)
{
	const struct node_seg *seg = node->seg;
	const struct node_qp_stats *st = &seg->qp_stats[i];
	int32_t owner = atomic_load_explicit(&seg->qps[i].owner,
					     memory_order_relaxed);

	q->used = false;
	if (owner < 1 || owner > IBEMU_MAX_PROCS)
		return;
	q->type = seg->qps[i].qp_type;
	if (q->type == NODE_QPT_XRC_SRQ)
		return;
	q->owner = owner;
	q->token = atomic_load_explicit(&seg->procs[owner - 1].token,
					memory_order_relaxed);
	q->state = top_load32(&seg->qps[i].state);
	q->sq_psn = top_load32(&st->sq_psn) & 0xffffff;
	q->rq_psn = top_load32(&st->rq_psn) & 0xffffff;
	q->sq_wrs = top_load32(&st->sq_wrs);
	q->rq_wrs = top_load32(&st->rq_wrs);
	q->cq_depth = top_load32(&st->cq_depth);
	q->errs = top_load32(&st->err_cqes) + top_load32(&st->naks_sent) +
		  top_load32(&st->naks_rcvd) + top_load32(&st->retries);
	q->tx = top_load64(&st->tx_pkts);
	q->rx = top_load64(&st->rx_pkts);
	q->used = true;
}

static void top_take(struct node *node, struct top_sample *s)
{
	const struct node_seg *seg = node->seg;
	struct top_proc *p;
	unsigned int i;

	clock_gettime(CLOCK_MONOTONIC, &s->at);
	s->nr_procs = 0;
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		p = &s->procs[i];
		p->token = atomic_load_explicit(&seg->procs[i].token,
						memory_order_acquire);
		p->pid = seg->procs[i].pid;
		p->refs = seg->procs[i].refs;
		p->nr_qp = 0;
		/* Tested, not taken: F_OFD_GETLK changes nothing. */
		p->alive = p->token && node_proc_alive(node, (int)i);
		if (p->token)
			s->nr_procs++;
	}
	s->nr_qp = 0;
	for (i = 0; i < IBEMU_MAX_QP; i++) {
		top_take_qp(node, i, &s->qps[i]);
		if (!s->qps[i].used)
			continue;
		s->nr_qp++;
		if (s->procs[s->qps[i].owner - 1].token == s->qps[i].token)
			s->procs[s->qps[i].owner - 1].nr_qp++;
	}
}

static double top_seconds(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) +
	       (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* A rate column: "-" without an earlier sample of the same QP. */
static void top_rate(char *buf, size_t len, bool known, double delta,
		     double dt)
{
	if (!known || dt <= 0)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.0f", delta / dt);
}

static void top_print_head(struct node *node, const struct top_sample *s,
			   const struct top_opts *o)
{
	const struct node_seg *seg = node->seg;
	char name[sizeof(seg->node_name)];
	unsigned int i, nr = node_nr_ports(seg);

	memcpy(name, seg->node_name, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	printf("ibemu top - node %s (%s), %u processes, %u QPs, every "
	       "%.1f s\n", name, node->name, s->nr_procs, s->nr_qp,
	       o->delay_s);
	for (i = 1; i <= nr; i++)
		printf("port %u  LID %#06x  %s\n", i,
		       (unsigned int)seg->ports[i - 1].lid,
		       node_port_state(seg, i) == IBV_PORT_ACTIVE ? "ACTIVE"
								  : "DOWN");
	printf("\n%8s %8s %4s\n", "PID", "CONTEXTS", "QPS");
	for (i = 0; i < IBEMU_MAX_PROCS; i++) {
		const struct top_proc *p = &s->procs[i];

		if (!p->token)
			continue;
		printf("%8d %8u %4u%s\n", (int)p->pid, p->refs, p->nr_qp,
		       p->alive ? "" : "  (gone)");
	}
}

static void top_print_qp(unsigned int i, const struct top_qp *q,
			 const struct top_sample *s,
			 const struct top_sample *prev)
{
	const struct top_qp *pq = prev ? &prev->qps[i] : NULL;
	bool known = pq && pq->used && pq->token == q->token &&
		     pq->owner == q->owner && q->tx >= pq->tx &&
		     q->rx >= pq->rx;
	double dt = prev ? top_seconds(&prev->at, &s->at) : 0;
	char out[24], in[24], err[24], rq[16];

	top_rate(out, sizeof(out), known, known ? (double)(q->tx - pq->tx) : 0,
		 dt);
	top_rate(in, sizeof(in), known, known ? (double)(q->rx - pq->rx) : 0,
		 dt);
	top_rate(err, sizeof(err), known,
		 known ? (double)(uint32_t)(q->errs - pq->errs) : 0, dt);
	if (q->rq_wrs == NODE_QP_STATS_SRQ)
		snprintf(rq, sizeof(rq), "srq");
	else
		snprintf(rq, sizeof(rq), "%u", q->rq_wrs);
	printf("%#8x %8d %-5s %-5s %#8x %#8x %6u %6s %5u %9s %9s %6s\n",
	       IBEMU_QPN_FIRST + i, (int)s->procs[q->owner - 1].pid,
	       top_qp_type(q->type), top_qp_state(q->state), q->sq_psn,
	       q->rq_psn, q->sq_wrs, rq, q->cq_depth, out, in, err);
}

static void top_print(struct node *node, const struct top_sample *s,
		      const struct top_sample *prev, const struct top_opts *o)
{
	unsigned int i;

	top_print_head(node, s, o);
	printf("\n%8s %8s %-5s %-5s %8s %8s %6s %6s %5s %9s %9s %6s\n", "QPN",
	       "PID", "TYPE", "STATE", "SQ_PSN", "RQ_PSN", "SQ_WR", "RQ_WR",
	       "CQ", "PKTS_OUT/s", "PKTS_IN/s", "ERR/s");
	for (i = 0; i < IBEMU_MAX_QP; i++)
		if (s->qps[i].used)
			top_print_qp(i, &s->qps[i], s, prev);
}

/*
 * Wait delay_s, or until q on a terminal: true to go on.  stdin is read
 * only in the interactive view, and only for q.
 */
static bool top_wait(const struct top_opts *o, bool keys)
{
	struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
	int ms = (int)(o->delay_s * 1000);
	struct timespec ts;
	char c;

	if (!keys) {
		ts.tv_sec = (time_t)o->delay_s;
		ts.tv_nsec = (long)((o->delay_s - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
		return !top_stop;
	}
	if (poll(&pfd, 1, ms) > 0 && read(STDIN_FILENO, &c, 1) == 1 &&
	    (c == 'q' || c == 'Q'))
		return false;
	return !top_stop;
}

static int top_parse(int argc, char **argv, struct top_opts *o)
{
	static const struct option longopts[] = {
		{ "delay", required_argument, NULL, 'd' },
		{ "count", required_argument, NULL, 'n' },
		{ "batch", no_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 },
	};
	char *end;
	int c;

	o->delay_s = 1.0;
	o->count = 0;
	o->batch = false;
	while ((c = getopt_long(argc, argv, "+d:n:b", longopts, NULL)) != -1) {
		switch (c) {
		case 'd':
			o->delay_s = strtod(optarg, &end);
			if (*end || !*optarg || !(o->delay_s >= 0.1) ||
			    o->delay_s > TOP_MAX_DELAY_S) {
				fprintf(stderr, "ibemu top: -d %s: seconds "
					"from 0.1 to 3600\n", optarg);
				return -1;
			}
			break;
		case 'n':
			o->count = strtol(optarg, &end, 10);
			if (*end || !*optarg || o->count < 1) {
				fprintf(stderr, "ibemu top: -n %s: a count "
					"of frames, 1 or more\n", optarg);
				return -1;
			}
			break;
		case 'b':
			o->batch = true;
			break;
		default:
			return -1;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "usage: ibemu top [-b] [-d SECONDS] "
			"[-n COUNT]\n");
		return -1;
	}
	return 0;
}

/* The node's segment, read-only, checked to be one of this layout.
 * 0, or 1 with the reason said. */
static int top_open(struct node *node)
{
	const void *map;
	const struct node_seg *seg;
	int ret;

	node->proc_slot = -1;
	node->token = 0;
	ret = node_default_name(node->name, sizeof(node->name));
	if (!ret)
		ret = shmfile_map_ro(node->name, sizeof(*seg), &map, &node->fd);
	if (ret == -ENOENT || ret == -EAGAIN) {
		fprintf(stderr, "ibemu top: no node: no process has opened "
			"%s on this node yet (no segment %s)\n",
			IBEMU_DEVICE_NAME, node->name);
		return 1;
	}
	if (ret) {
		fprintf(stderr, "ibemu top: cannot read the node segment %s: "
			"%s\n", node->name, strerror(-ret));
		return 1;
	}
	seg = map;
	if (!atomic_load_explicit(&seg->ready, memory_order_acquire) ||
	    seg->magic != IBEMU_NODE_MAGIC || seg->layout != IBEMU_NODE_LAYOUT ||
	    seg->size != sizeof(*seg)) {
		fprintf(stderr, "ibemu top: the node segment %s is not ready "
			"or not of this version of ibemu\n", node->name);
		munmap((void *)map, sizeof(*seg));
		close(node->fd);
		return 1;
	}
	/* Read-only mapping: any store through it would fault. */
	node->seg = (struct node_seg *)map;
	return 0;
}

static int top_loop(struct node *node, const struct top_opts *o, bool tty)
{
	struct top_sample *s[2];
	struct termios saved, raw;
	bool keys = tty && isatty(STDIN_FILENO);
	long frame;

	s[0] = malloc(sizeof(*s[0]));
	s[1] = malloc(sizeof(*s[1]));
	if (!s[0] || !s[1]) {
		fprintf(stderr, "ibemu top: out of memory\n");
		free(s[0]);
		free(s[1]);
		return 1;
	}
	if (keys && tcgetattr(STDIN_FILENO, &saved) == 0) {
		raw = saved;
		raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
		raw.c_cc[VMIN] = 0;
		raw.c_cc[VTIME] = 0;
		tcsetattr(STDIN_FILENO, TCSANOW, &raw);
	} else {
		keys = false;
	}
	for (frame = 0; !o->count || frame < o->count; frame++) {
		if (frame && !top_wait(o, keys))
			break;
		top_take(node, s[frame & 1]);
		if (tty)
			printf("\033[H\033[2J");
		else if (frame)
			printf("\n");
		top_print(node, s[frame & 1], frame ? s[!(frame & 1)] : NULL,
			  o);
		fflush(stdout);
	}
	if (keys)
		tcsetattr(STDIN_FILENO, TCSANOW, &saved);
	free(s[0]);
	free(s[1]);
	return 0;
}

int ibemu_top(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = top_on_signal };
	struct top_opts o;
	struct node node;
	int ret;

	if (top_parse(argc, argv, &o))
		return 2;
	if (top_open(&node))
		return 1;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	ret = top_loop(&node, &o, !o.batch && isatty(STDOUT_FILENO));
	munmap(node.seg, sizeof(*node.seg));
	close(node.fd);
	return ret;
}
