// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the TCP transport's receiving side (tcp_recv.c):
 * the bytes a peer writes on a data connection, from the first one, as
 * the accepting side reads them: the HELLO and its answer
 * (tcp_reply_hello), with the fabric key the connecting side's proof
 * (tcp_hello_proof), then DATA frames (tcp_parse) to the engine or the
 * inbox.
 *
 * The transport is the real one, opened in its loopback mode
 * (IBEMU_TRANSPORT=tcp, on a door port of this run's own), with its
 * network thread.  Each input gets a connection as tcp_accept makes one
 * (tcp_conn_new_locked, state HELLO), on one end of a socket pair whose
 * other end is the peer; it is not registered with epoll, so the
 * harness's thread alone reads it (tcp_conn_readable, as an
 * application's poll does), after each write of the peer.  The reply
 * the transport sends comes back on the pair.  Once the peer's end is
 * shut the connection dies, and the network thread gives it back
 * (tcp_reap), kicked at the end of each input; the harness counts as a
 * poller (t->pollers) while it holds the entry, so it is not freed under
 * it.
 *
 * Input: mode:u8, then the stream.
 *   mode bit 0: the transport has a fabric key (t->key, swapped between
 *               inputs: nothing else of this process greets or asks)
 *        bit 1: the harness greets first: a HELLO frame (its link header
 *               and body from the next 48 + 56 bytes, with magic,
 *               version, type, length and the key flag made right), and
 *               with a key the connecting side's proof of the answer's
 *               challenge (tcp_key_connected), so the rest reaches an UP
 *               connection; else the stream is raw from the start
 *        bits 4-7: the stream is written in pieces of 1 << (bits 4-7)
 *               bytes (the parser sees frames split anywhere)
 */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "fuzz_tcp.h"

#define FZ_MODE_KEY 1u
#define FZ_MODE_GREET 2u

static struct tp_tcp *t;

static void die(const char *what)
{
	fz_tcp_die(what);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	t = fz_tcp_open("fuzz-tcp");
	return 0;
}

/* A connection as tcp_accept makes one, its socket fd. */
static struct tcp_conn *conn_new(int fd)
{
	struct sockaddr_in *a;
	struct tcp_conn *c = NULL;
	int i;

	/* The network thread gives dead entries back when kicked. */
	for (i = 0; i < 1000 && !c; i++) {
		pthread_mutex_lock(&t->lock);
		c = tcp_conn_new_locked(t);
		if (c) {
			/* A new entry is DEAD: the network thread, which
			 * gives dead entries back without tcp.lock, must
			 * not find it DEAD with our socket (tcp_accept
			 * runs on that thread; the harness does not). */
			pthread_mutex_lock(&c->rx_lock);
			atomic_store(&c->state, TCP_CONN_HELLO);
			memset(&c->addr, 0, sizeof(c->addr));
			a = (struct sockaddr_in *)&c->addr;
			a->sin_family = AF_INET;
			a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
			c->fd = fd;
			pthread_mutex_unlock(&c->rx_lock);
		}
		pthread_mutex_unlock(&t->lock);
		if (!c) {
			tcp_room(t->e);
			usleep(1000);
		}
	}
	if (!c)
		die("no connection entry");
	return c;
}

/* What the transport sent the peer: up to len bytes into buf. */
static size_t peer_read(int fd, void *buf, size_t len)
{
	uint8_t junk[4096];
	ssize_t n;

	if (!buf) {
		while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT) > 0)
			;
		return 0;
	}
	n = recv(fd, buf, len, MSG_DONTWAIT);
	return n > 0 ? (size_t)n : 0;
}

/* Write p[0..n) as the peer, in pieces, the transport reading each. */
static void peer_write(struct tcp_conn *c, int fd, const uint8_t *p,
		       size_t n, size_t piece)
{
	ssize_t w;
	size_t k;

	while (n) {
		k = n < piece ? n : piece;
		w = send(fd, p, k, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (w <= 0) {
			if (w < 0 && errno != EAGAIN)
				return; /* the transport closed its end */
			w = 0;
		}
		p += w;
		n -= (size_t)w;
		tcp_conn_readable(t, c, NULL);
		peer_read(fd, NULL, 0);
		if (!tcp_conn_live(c))
			return;
	}
}

static void frame_hdr(struct tp_frame_hdr *f, uint32_t len)
{
	f->magic = htobe32(TP_FRAME_MAGIC);
	f->version = TP_FRAME_VERSION;
	f->type = TP_FRAME_HELLO;
	f->len = htobe32(len);
}

/*
 * The connecting side's greeting (tcp_conn_to's, made from the input),
 * and with a key its proof; the bytes of the input it took.
 */
static size_t greet(struct tcp_conn *c, int fd, const uint8_t *p, size_t n)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_hello)];
	struct tcp_hello mine, theirs, proof;
	struct tp_frame_hdr f, rf;
	size_t k = n < sizeof(buf) ? n : sizeof(buf);

	memset(buf, 0, sizeof(buf));
	memcpy(buf, p, k);
	memcpy(&f, buf, sizeof(f));
	memcpy(&mine, buf + sizeof(f), sizeof(mine));
	frame_hdr(&f, sizeof(mine));
	if (t->key.set)
		mine.flags |= TCP_F_KEY;
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), &mine, sizeof(mine));
	if (send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(buf)) {
		fprintf(stderr, "send HELLO: %s, c->fd %d state %d\n",
			strerror(errno), c->fd, atomic_load(&c->state));
		die("send HELLO");
	}
	tcp_conn_readable(t, c, NULL);
	if (peer_read(fd, buf, sizeof(buf)) != sizeof(buf) ||
	    !t->key.set)
		return k;
	memcpy(&rf, buf, sizeof(rf));
	memcpy(&theirs, buf + sizeof(rf), sizeof(theirs));
	if (!tcp_key_connected(t, &c->addr, &mine, &theirs, &proof))
		die("the answer does not prove the key");
	memcpy(buf, &f, sizeof(f));
	memcpy(buf + sizeof(f), &proof, sizeof(proof));
	if (send(fd, buf, sizeof(buf), MSG_DONTWAIT | MSG_NOSIGNAL) !=
	    (ssize_t)sizeof(buf))
		die("send proof");
	tcp_conn_readable(t, c, NULL);
	if (atomic_load(&c->state) != TCP_CONN_UP)
		die("a proven connection is not UP");
	return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tcp_conn *c;
	uint8_t mode;
	size_t k;
	int sv[2];

	if (!size)
		return 0;
	mode = data[0];
	data++;
	size--;
	fz_tcp_key(mode & FZ_MODE_KEY);
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0,
		       sv))
		die("socketpair");
	atomic_fetch_add(&t->pollers, 1);
	c = conn_new(sv[0]);
	if (mode & FZ_MODE_GREET) {
		k = greet(c, sv[1], data, size);
		data += k;
		size -= k;
	}
	peer_write(c, sv[1], data, size, (size_t)1 << (mode >> 4));
	/* The peer's end: what is left is read to it, and c dies. */
	shutdown(sv[1], SHUT_WR);
	tcp_conn_readable(t, c, NULL);
	pthread_mutex_lock(&c->rx_lock);
	pthread_mutex_lock(&c->tx_lock);
	if (tcp_conn_live(c))
		tcp_conn_drop_locked(c, ECONNRESET); /* a stalled reader */
	pthread_mutex_unlock(&c->tx_lock);
	pthread_mutex_unlock(&c->rx_lock);
	close(sv[1]);
	atomic_fetch_sub(&t->pollers, 1);
	tcp_room(t->e); /* the network thread gives c back */
	return 0;
}
