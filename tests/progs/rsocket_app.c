// SPDX-License-Identifier: MIT
/*
 * rsockets (rsocket(7)) as an application sees them, run under the
 * preload (tests/debian/rsocket.sh): stream data intact across many sizes and
 * the protocol's message boundaries, O_NONBLOCK and MSG_DONTWAIT giving
 * EAGAIN, rpoll/rselect over rsockets and ordinary descriptors, end of
 * stream after the peer's rshutdown or rclose, riomap + riowrite, names,
 * connect errors.  Every wait is bounded.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <rdma/rsocket.h>

static int fails;
static int port = 7700;

#define CHECK(cond, ...)                                                       \
	do {                                                                   \
		if (cond) {                                                    \
			printf("ok: ");                                        \
		} else {                                                       \
			printf("FAIL (%s:%d): ", __FILE__, __LINE__);          \
			fails++;                                               \
		}                                                              \
		printf(__VA_ARGS__);                                           \
		printf("\n");                                                  \
		fflush(stdout);                                                \
	} while (0)

static struct sockaddr_in addr_of(int p)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)p);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	return a;
}

static int listener(int p, uint32_t iomaps)
{
	struct sockaddr_in a = addr_of(p);
	int l = rsocket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (l < 0)
		return -1;
	rsetsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (iomaps)
		rsetsockopt(l, SOL_RDMA, RDMA_IOMAPSIZE, &iomaps,
			    sizeof(iomaps));
	if (rbind(l, (struct sockaddr *)&a, sizeof(a)) || rlisten(l, 4)) {
		rclose(l);
		return -1;
	}
	return l;
}

/* A connected pair on 127.0.0.1, both blocking; 0 or -1. */
static int pair(int *srv, int *cli, uint32_t iomaps, int rcvbuf)
{
	struct sockaddr_in a;
	struct pollfd p[2];
	int l, c, s = -1, i, err = 0, ret;
	socklen_t len = sizeof(err);
	bool connected = false;

	port++;
	l = listener(port, iomaps);
	if (l < 0)
		return -1;
	a = addr_of(port);
	c = rsocket(AF_INET, SOCK_STREAM, 0);
	if (c < 0)
		goto err;
	if (rcvbuf)
		rsetsockopt(c, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
	if (iomaps)
		rsetsockopt(c, SOL_RDMA, RDMA_IOMAPSIZE, &iomaps,
			    sizeof(iomaps));
	rfcntl(l, F_SETFL, O_NONBLOCK);
	rfcntl(c, F_SETFL, O_NONBLOCK);
	ret = rconnect(c, (struct sockaddr *)&a, sizeof(a));
	if (ret && errno != EINPROGRESS)
		goto err;
	connected = !ret;
	for (i = 0; i < 500 && (s < 0 || !connected); i++) {
		p[0].fd = c;
		p[0].events = POLLOUT;
		p[1].fd = l;
		p[1].events = POLLIN;
		rpoll(p, 2, 20);
		if (p[0].revents & (POLLERR | POLLHUP))
			goto err;
		if (p[0].revents & POLLOUT)
			connected = true;
		if (s < 0 && (p[1].revents & POLLIN))
			s = raccept(l, NULL, NULL);
	}
	if (s < 0 || !connected ||
	    rgetsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len) || err)
		goto err;
	rfcntl(s, F_SETFL, 0);
	rfcntl(c, F_SETFL, 0);
	rclose(l);
	*srv = s;
	*cli = c;
	return 0;
err:
	if (s >= 0)
		rclose(s);
	if (c >= 0)
		rclose(c);
	rclose(l);
	return -1;
}

static uint8_t pat(size_t i, unsigned int seed)
{
	return (uint8_t)((i * 131 + seed * 7 + (i >> 11)) & 0xff);
}

static const size_t sizes[] = {1,
			       2,
			       15,
			       16,
			       63,
			       64,
			       1000,
			       4095,
			       4096,
			       16367,
			       16368,
			       16369,
			       16384,
			       32737,
			       65536,
			       100000,
			       262143,
			       1048576 + 7,
			       3 * 1048576 + 1};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

struct sender {
	int fd;
	int ok;
};

/* The client's side of the integrity test: every size, blocking, half
 * of them with rwritev over three pieces. */
static void *send_all(void *arg)
{
	struct sender *sd = arg;
	size_t k, i, off;
	uint8_t *b;

	sd->ok = 1;
	for (k = 0; k < NSIZES && sd->ok; k++) {
		b = malloc(sizes[k]);
		if (!b) {
			sd->ok = 0;
			break;
		}
		for (i = 0; i < sizes[k]; i++)
			b[i] = pat(i, (unsigned int)k);
		if (k % 2 && sizes[k] >= 3) {
			struct iovec v[3] = {
				{b, 1},
				{b + 1, sizes[k] / 2},
				{b + 1 + sizes[k] / 2,
				 sizes[k] - 1 - sizes[k] / 2},
			};

			if (rwritev(sd->fd, v, 3) != (ssize_t)sizes[k])
				sd->ok = 0;
		} else {
			for (off = 0; off < sizes[k];) {
				ssize_t n = rsend(sd->fd, b + off,
						  sizes[k] - off, 0);

				if (n <= 0) {
					sd->ok = 0;
					break;
				}
				off += (size_t)n;
			}
		}
		free(b);
	}
	return NULL;
}

static void test_integrity(void)
{
	struct sender sd;
	pthread_t t;
	int s, c, bad = 0;
	size_t k, i, off, chunk;
	uint8_t *b;

	if (pair(&s, &c, 0, 0)) {
		CHECK(0, "integrity: connected pair");
		return;
	}
	sd.fd = c;
	pthread_create(&t, NULL, send_all, &sd);
	for (k = 0; k < NSIZES && !bad; k++) {
		b = malloc(sizes[k]);
		/* odd reads: across message boundaries and within them */
		chunk = 1 + (k * 7919) % 20000;
		for (off = 0; off < sizes[k];) {
			size_t want =
				sizes[k] - off < chunk ? sizes[k] - off : chunk;
			ssize_t n = k == 3 ? rrecv(s, b + off, sizes[k] - off,
						   MSG_WAITALL)
					   : rread(s, b + off, want);

			if (n <= 0) {
				bad = 1;
				break;
			}
			off += (size_t)n;
		}
		for (i = 0; i < sizes[k] && !bad; i++)
			if (b[i] != pat(i, (unsigned int)k)) {
				printf("size %zu: byte %zu differs\n", sizes[k],
				       i);
				bad = 1;
			}
		free(b);
	}
	pthread_join(t, NULL);
	CHECK(sd.ok && !bad,
	      "integrity: %zu sizes from 1 byte to 3 MiB arrive byte for byte",
	      NSIZES);
	rclose(s);
	rclose(c);
}

static void test_nonblock(void)
{
	char b[4096];
	ssize_t n = 0;
	size_t sent = 0, got = 0;
	int s, c, i, eagain = 0;
	struct pollfd p;

	if (pair(&s, &c, 0, 65536)) {
		CHECK(0, "nonblock: connected pair");
		return;
	}
	memset(b, 'x', sizeof(b));
	errno = 0;
	n = rrecv(s, b, sizeof(b), MSG_DONTWAIT);
	CHECK(n == -1 && errno == EAGAIN,
	      "rrecv MSG_DONTWAIT with nothing there: EAGAIN (%zd, %s)", n,
	      strerror(errno));
	rfcntl(s, F_SETFL, O_NONBLOCK);
	CHECK((rfcntl(s, F_GETFL) & O_NONBLOCK) != 0,
	      "rfcntl F_GETFL shows O_NONBLOCK");
	errno = 0;
	n = rrecv(s, b, sizeof(b), 0);
	CHECK(n == -1 && errno == EAGAIN,
	      "rrecv on an O_NONBLOCK rsocket with nothing there: EAGAIN");
	/* The peer does not read: the sender's credits run out. */
	rfcntl(c, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 100000; i++) {
		n = rsend(c, b, sizeof(b), 0);
		if (n < 0) {
			eagain = errno == EAGAIN;
			break;
		}
		sent += (size_t)n;
	}
	CHECK(eagain && sent > 0 && sent < 64 * 1048576,
	      "rsend without a reader: %zu bytes taken, then EAGAIN", sent);
	p.fd = c;
	p.events = POLLOUT;
	CHECK(rpoll(&p, 1, 0) == 0, "rpoll: no POLLOUT while out of credit");
	for (i = 0; i < 100000 && got < sent; i++) {
		n = rrecv(s, b, sizeof(b), 0);
		if (n > 0)
			got += (size_t)n;
		else if (n < 0 && errno == EAGAIN)
			rpoll(&(struct pollfd){.fd = s, .events = POLLIN}, 1,
			      100);
		else
			break;
	}
	CHECK(got == sent, "the reader gets all %zu bytes", sent);
	CHECK(rpoll(&p, 1, 2000) == 1 && (p.revents & POLLOUT),
	      "rpoll: POLLOUT once the reader has read");
	rclose(s);
	rclose(c);
}

struct late {
	int fd;
	int ms;
};

static void *send_late(void *arg)
{
	struct late *l = arg;

	usleep((useconds_t)l->ms * 1000);
	rsend(l->fd, "late", 4, 0);
	return NULL;
}

static void test_poll(void)
{
	struct pollfd p[2];
	int s, c, pp[2], n;
	struct late l;
	pthread_t t;
	fd_set rd;
	struct timeval tv;
	char b[16];

	if (pair(&s, &c, 0, 0) || pipe(pp)) {
		CHECK(0, "poll: connected pair and a pipe");
		return;
	}
	p[0].fd = s;
	p[0].events = POLLIN;
	p[1].fd = pp[0];
	p[1].events = POLLIN;
	n = rpoll(p, 2, 0);
	CHECK(n == 0, "rpoll: nothing ready yet (%d)", n);
	if (write(pp[1], "x", 1) != 1)
		n = -1;
	n = rpoll(p, 2, 1000);
	CHECK(n == 1 && !p[0].revents && (p[1].revents & POLLIN),
	      "rpoll: the pipe ready, the rsocket not");
	if (read(pp[0], b, 1) != 1)
		n = -1;
	rsend(c, "hello", 5, 0);
	n = rpoll(p, 2, 2000);
	CHECK(n == 1 && (p[0].revents & POLLIN) && !p[1].revents,
	      "rpoll: the rsocket readable after the peer's rsend");
	n = (int)rrecv(s, b, sizeof(b), 0);
	CHECK(n == 5 && !memcmp(b, "hello", 5), "rrecv: the 5 bytes");
	/* A sleeping rpoll wakes for data sent later by another thread. */
	l.fd = c;
	l.ms = 100;
	pthread_create(&t, NULL, send_late, &l);
	n = rpoll(p, 2, 5000);
	pthread_join(t, NULL);
	CHECK(n == 1 && (p[0].revents & POLLIN),
	      "rpoll asleep wakes for data sent meanwhile");
	rrecv(s, b, sizeof(b), 0);
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	FD_SET(pp[0], &rd);
	tv.tv_sec = 0;
	tv.tv_usec = 0;
	n = rselect((s > pp[0] ? s : pp[0]) + 1, &rd, NULL, NULL, &tv);
	CHECK(n == 0, "rselect: nothing ready (%d)", n);
	rsend(c, "x", 1, 0);
	FD_ZERO(&rd);
	FD_SET(s, &rd);
	FD_SET(pp[0], &rd);
	tv.tv_sec = 2;
	n = rselect((s > pp[0] ? s : pp[0]) + 1, &rd, NULL, NULL, &tv);
	CHECK(n == 1 && FD_ISSET(s, &rd) && !FD_ISSET(pp[0], &rd),
	      "rselect: the rsocket readable");
	close(pp[0]);
	close(pp[1]);
	rclose(s);
	rclose(c);
}

static void test_close(void)
{
	char b[16];
	ssize_t n, m;
	int s, c;

	/* rshutdown(SHUT_WR): end of stream one way, the other still goes */
	if (pair(&s, &c, 0, 0)) {
		CHECK(0, "close: connected pair");
		return;
	}
	rsend(c, "abc", 3, 0);
	CHECK(rshutdown(c, SHUT_WR) == 0, "rshutdown SHUT_WR");
	n = rrecv(s, b, sizeof(b), MSG_WAITALL);
	m = rrecv(s, b + 3, sizeof(b), 0);
	CHECK(n == 3 && m == 0 && !memcmp(b, "abc", 3),
	      "data, then 0 from rrecv after the peer's SHUT_WR (%zd, %zd)", n,
	      m);
	n = rsend(s, "back", 4, 0);
	m = rrecv(c, b, 4, MSG_WAITALL);
	CHECK(n == 4 && m == 4 && !memcmp(b, "back", 4),
	      "the other direction still carries data");
	rclose(s);
	rclose(c);

	/* rclose: the last data, then 0, again and again */
	if (pair(&s, &c, 0, 0)) {
		CHECK(0, "close: connected pair");
		return;
	}
	rsend(c, "bye", 3, 0);
	rclose(c);
	n = rrecv(s, b, sizeof(b), MSG_WAITALL);
	m = rrecv(s, b, sizeof(b), 0);
	CHECK(n == 3 && m == 0,
	      "close by peer: its data, then rrecv gives 0 (%zd, %zd)", n, m);
	m = rrecv(s, b, sizeof(b), 0);
	CHECK(m == 0, "rrecv gives 0 again");
	rclose(s);
}

/* The msghdr, vector, address and peek forms carry the same stream. */
static void test_forms(void)
{
	char a[8], b[8], c3[8];
	struct iovec sv[2] = {{(void *)"abc", 3}, {(void *)"defgh", 5}};
	struct iovec rv[2] = {{a, 5}, {b, 3}};
	struct msghdr sm, rm;
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	ssize_t n, m;
	int s, c;

	if (pair(&s, &c, 0, 0)) {
		CHECK(0, "forms: connected pair");
		return;
	}
	memset(&sm, 0, sizeof(sm));
	sm.msg_iov = sv;
	sm.msg_iovlen = 2;
	memset(&rm, 0, sizeof(rm));
	rm.msg_iov = rv;
	rm.msg_iovlen = 2;
	rm.msg_name = &from;
	rm.msg_namelen = sizeof(from);
	n = rsendmsg(c, &sm, 0);
	m = rrecvmsg(s, &rm, MSG_WAITALL);
	CHECK(n == 8 && m == 8 && !memcmp(a, "abcde", 5) &&
		      !memcmp(b, "fgh", 3) && rm.msg_namelen == sizeof(from) &&
		      from.sin_family == AF_INET,
	      "rsendmsg/rrecvmsg: 8 bytes over two iovecs each, the peer "
	      "named");
	n = rsendto(s, "xyz", 3, 0, NULL, 0);
	memset(&from, 0, sizeof(from));
	m = rrecvfrom(c, c3, 3, MSG_PEEK, (struct sockaddr *)&from, &fl);
	CHECK(n == 3 && m >= 1 && !memcmp(c3, "xyz", (size_t)m) &&
		      from.sin_port == htons(port),
	      "rsendto, rrecvfrom MSG_PEEK: the bytes and the peer's port");
	rv[0].iov_len = 1;
	rv[1].iov_len = 2;
	m = rreadv(c, rv, 2);
	if (m == 1)
		m += rread(c, b, 2);
	CHECK(m == 3 && a[0] == 'x' && !memcmp(b, "yz", 2),
	      "rreadv after the peek: the same bytes, once");
	rclose(s);
	rclose(c);
}

/* --die PORT: connect, send, and end the process without rclose. */
static int die_child(int p)
{
	struct sockaddr_in a = addr_of(p);
	int c = rsocket(AF_INET, SOCK_STREAM, 0);

	if (c < 0 || rconnect(c, (struct sockaddr *)&a, sizeof(a)))
		return 2;
	rsend(c, "dying", 5, 0);
	_exit(0);
}

/* A peer process that ends without rclose: the reader sees the end of
 * the stream (its CM sees DISCONNECTED), not a hang. */
static void test_peer_death(void)
{
	struct pollfd p;
	char b[16], arg[16];
	int l, s = -1, i, st;
	ssize_t n = 1;
	pid_t pid;

	port++;
	l = listener(port, 0);
	if (l < 0) {
		CHECK(0, "peer death: listener");
		return;
	}
	snprintf(arg, sizeof(arg), "%d", port);
	fflush(stdout);
	pid = fork();
	if (!pid) {
		execl("/proc/self/exe", "rsocket_app", "--die", arg,
		      (char *)NULL);
		_exit(127);
	}
	rfcntl(l, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 200 && s < 0; i++) {
		p.fd = l;
		p.events = POLLIN;
		rpoll(&p, 1, 100);
		s = raccept(l, NULL, NULL);
	}
	rfcntl(s, F_SETFL, O_NONBLOCK);
	for (i = 0; i < 300 && s >= 0 && n != 0; i++) {
		p.fd = s;
		p.events = POLLIN;
		rpoll(&p, 1, 100);
		n = rrecv(s, b, sizeof(b), 0);
		if (n < 0 && errno != EAGAIN)
			break;
	}
	waitpid(pid, &st, 0);
	CHECK(s >= 0 && (n == 0 || (n < 0 && errno == ECONNRESET)),
	      "a peer process that exits without rclose: the stream ends (%zd)",
	      n);
	if (s >= 0)
		rclose(s);
	rclose(l);
}

static void test_iomap(void)
{
	size_t len = 200000, i;
	uint8_t *dst, *src;
	char b[8];
	off_t off;
	int s, c, same = 1;

	if (pair(&s, &c, 1, 0)) {
		CHECK(0, "iomap: connected pair");
		return;
	}
	dst = calloc(1, len);
	src = malloc(len);
	for (i = 0; i < len; i++)
		src[i] = pat(i, 99);
	off = riomap(s, dst, len, PROT_WRITE, 0, 4096);
	CHECK(off == 4096, "riomap at offset 4096 (%lld)", (long long)off);
	/* the announcement travels with the stream, before this byte */
	rsend(s, "m", 1, 0);
	rrecv(c, b, 1, MSG_WAITALL);
	CHECK(riowrite(c, src, 1000, 4096, 0) == 1000 &&
		      riowrite(c, src + 1000, len - 1000, 4096 + 1000, 0) ==
			      len - 1000,
	      "riowrite of %zu bytes in two pieces", len);
	errno = 0;
	CHECK(riowrite(c, src, 16, 4096 + (off_t)len, 0) == (size_t)-1 &&
		      errno == EINVAL,
	      "riowrite past the iomap: EINVAL");
	rsend(c, "d", 1, 0);
	rrecv(s, b, 1, MSG_WAITALL);
	for (i = 0; i < len; i++)
		if (dst[i] != src[i])
			same = 0;
	CHECK(same, "riowrite's data arrived in the mapped buffer");
	CHECK(riounmap(s, dst, len) == 0, "riounmap");
	rclose(s);
	rclose(c);
	free(dst);
	free(src);
}

static void test_names_errors(void)
{
	struct sockaddr_in a, b, want;
	socklen_t la = sizeof(a), lb = sizeof(b);
	int s, c, x, ret, err;

	if (pair(&s, &c, 0, 0)) {
		CHECK(0, "names: connected pair");
		return;
	}
	CHECK(!rgetpeername(c, (struct sockaddr *)&a, &la) &&
		      !rgetsockname(s, (struct sockaddr *)&b, &lb) &&
		      a.sin_family == AF_INET && a.sin_port == htons(port) &&
		      a.sin_addr.s_addr == htonl(INADDR_LOOPBACK) &&
		      b.sin_port == htons(port),
	      "rgetpeername/rgetsockname: 127.0.0.1 port %d", port);
	rclose(s);
	rclose(c);

	want = addr_of(port + 500); /* nobody listens there */
	x = rsocket(AF_INET, SOCK_STREAM, 0);
	ret = rconnect(x, (struct sockaddr *)&want, sizeof(want));
	err = errno;
	CHECK(ret == -1 && (err == ECONNREFUSED || err == ETIMEDOUT ||
			    err == EHOSTUNREACH),
	      "rconnect to a port nobody listens on: %s", strerror(err));
	rclose(x);
	errno = 0;
	x = rsocket(AF_INET, SOCK_DGRAM, 0);
	CHECK(x == -1 && errno == ESOCKTNOSUPPORT,
	      "SOCK_DGRAM rsocket: ESOCKTNOSUPPORT");
	errno = 0;
	CHECK(rrecv(12345, &x, 1, 0) == -1 && errno == EBADF,
	      "a number that is no rsocket: EBADF");
}

int main(int argc, char **argv)
{
	int x;

	if (argc > 2 && !strcmp(argv[1], "--die"))
		return die_child(atoi(argv[2]));
	if (argc > 1)
		port = atoi(argv[1]);
	x = rsocket(AF_INET, SOCK_STREAM, 0);
	if (x < 0) {
		printf("FAIL: rsocket: %s\n", strerror(errno));
		return 1;
	}
	rclose(x);
	test_integrity();
	test_nonblock();
	test_poll();
	test_close();
	test_forms();
	test_peer_death();
	test_iomap();
	test_names_errors();
	if (fails)
		printf("%d check(s) failed\n", fails);
	return fails ? 1 : 0;
}
