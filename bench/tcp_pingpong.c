// SPDX-License-Identifier: MIT
/*
 * The floor for a small message between two nodes over TCP: a client and
 * a server bounce an 8-byte message over one TCP connection (TCP_NODELAY),
 * either busy polling (recv with MSG_DONTWAIT in a loop) or blocking in
 * recv.  Half a round trip is the one-way latency; the median of several
 * runs is reported for each way of waiting.
 *
 *   tcp_pingpong -s [-p PORT]
 *       serve clients (one at a time) until killed
 *   tcp_pingpong -c HOST [-p PORT] [-r RUNS] [-n ITERS] [-q]
 *       measure, busy polling then blocking, RUNS runs (5) of ITERS
 *       round trips (20000) or a second, whichever is shorter; -q
 *       prints only the two medians of the one-way latency in us:
 *       "BUSY BLOCKING"
 *
 * Each connection starts with one byte from the client: 'b' (the server
 * busy polls too) or 'k' (it blocks).
 */
#include "config.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "median.h"

#define MSG 8
#define MAX_RUNS 101
#define RUN_NS 1e9 /* at most a second per run */

static double now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Move all len bytes; busy: poll with MSG_DONTWAIT.  0, or -1. */
static int xfer(int fd, char *buf, size_t len, bool out, bool busy)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		if (out)
			n = send(fd, buf + done, len - done, MSG_NOSIGNAL);
		else
			n = recv(fd, buf + done, len - done,
				 busy ? MSG_DONTWAIT : 0);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n <= 0)
			return -1;
		done += (size_t)n;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int serve(const char *port)
{
	struct sockaddr_in6 sin = { .sin6_family = AF_INET6,
				    .sin6_addr = IN6ADDR_ANY_INIT };
	int lfd, fd, one = 1;
	char buf[MSG], mode;

	sin.sin6_port = htons((unsigned short)atoi(port));
	lfd = socket(AF_INET6, SOCK_STREAM, 0);
	if (lfd < 0 ||
	    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) ||
	    listen(lfd, 4)) {
		fprintf(stderr, "tcp_pingpong: cannot listen on port %s: %s\n",
			port, strerror(errno));
		return 1;
	}
	for (;;) {
		fd = accept(lfd, NULL, NULL);
		if (fd < 0)
			continue;
		nodelay(fd);
		if (!xfer(fd, &mode, 1, false, false))
			while (!xfer(fd, buf, MSG, false, mode == 'b') &&
			       !xfer(fd, buf, MSG, true, false))
				;
		close(fd);
	}
}

static int dial(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai, *a;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &ai))
		return -1;
	for (a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, SOCK_STREAM, 0);
		if (fd >= 0 && !connect(fd, a->ai_addr, a->ai_addrlen))
			break;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd >= 0)
		nodelay(fd);
	return fd;
}

/* The median one-way latency in us over runs of iters round trips, or a
 * negative number on an error. */
static double measure(const char *host, const char *port, bool busy,
		      int runs, long iters)
{
	double v[MAX_RUNS], t0;
	char buf[MSG] = { 0 }, mode = busy ? 'b' : 'k';
	long i;
	int r, fd;

	fd = dial(host, port);
	if (fd < 0 || xfer(fd, &mode, 1, true, false))
		return -1;
	/* Warm up. */
	for (i = 0; i < iters / 10; i++)
		if (xfer(fd, buf, MSG, true, false) ||
		    xfer(fd, buf, MSG, false, busy))
			return -1;
	/* A run ends after iters round trips or RUN_NS, whichever comes
	 * first (a loaded machine can slow a busy poller a thousandfold). */
	for (r = 0; r < runs; r++) {
		t0 = now_ns();
		for (i = 0; i < iters; i++) {
			if (xfer(fd, buf, MSG, true, false) ||
			    xfer(fd, buf, MSG, false, busy))
				return -1;
			if ((i & 63) == 63 && now_ns() - t0 > RUN_NS) {
				i++;
				break;
			}
		}
		v[r] = (now_ns() - t0) / (double)i / 2 / 1000;
	}
	close(fd);
	return median(v, runs);
}

int main(int argc, char **argv)
{
	const char *host = NULL, *port = "47911";
	bool server = false, quiet = false;
	double busy, block;
	long iters = 20000;
	int runs = 5, c;

	while ((c = getopt(argc, argv, "sc:p:r:n:q")) != -1) {
		switch (c) {
		case 's':
			server = true;
			break;
		case 'c':
			host = optarg;
			break;
		case 'p':
			port = optarg;
			break;
		case 'r':
			runs = atoi(optarg);
			break;
		case 'n':
			iters = atol(optarg);
			break;
		case 'q':
			quiet = true;
			break;
		default:
			goto usage;
		}
	}
	if (server)
		return serve(port);
	if (!host || runs < 1 || runs > MAX_RUNS || iters < 10)
		goto usage;
	busy = measure(host, port, true, runs, iters);
	block = measure(host, port, false, runs, iters);
	if (busy < 0 || block < 0) {
		fprintf(stderr, "tcp_pingpong: cannot reach %s port %s: %s\n",
			host, port, strerror(errno));
		return 1;
	}
	if (quiet)
		printf("%.3f %.3f\n", busy, block);
	else
		printf("TCP 8-byte one-way latency, median of %d runs of %ld "
		       "round trips: busy polling %.3f us, blocking %.3f us\n",
		       runs, iters, busy, block);
	return 0;
usage:
	fprintf(stderr, "usage: %s -s [-p PORT]\n"
			"       %s -c HOST [-p PORT] [-r RUNS] [-n ITERS] "
			"[-q]\n", argv[0], argv[0]);
	return 2;
}
