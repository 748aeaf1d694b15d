// SPDX-License-Identifier: MIT
/*
 * libFuzzer harness of the TCP transport's door, both ways (tcp_door.c,
 * tcp_resolve.c, tcp_conn.c):
 *
 *  - asked: the bytes an asker writes to this node's door, read by the
 *    network thread (tcp_door_client_readable) and answered from the
 *    node segment (tcp_door_answer), where a QP and a CM listener of
 *    this process are to be found;
 *  - asking: a lookup of ours (tcp_lookup) at a fake door answering the
 *    input's bytes, and then, as tcp_resolve goes on, the connection to
 *    the process the reply names (tcp_conn_to), whose fake HELLO answer
 *    is the input's too.
 *
 * The transport is the real one in its loopback mode (fuzz_tcp.h); this
 * process holds its node's door on 127.0.0.1.  The fake door and the
 * fake process listen on 127.0.0.2 (the door port, and one of their
 * own), served by a thread of the harness, one connection at a time.
 *
 * Input: mode:u8, then
 *   mode bit 0: a fabric key on our side (and on the fake's)
 *        bit 1: asking; else asked
 *        bit 2: aim: the framing made right (magic, version, type,
 *               length, the key flag), and when asking the reply's port,
 *               slot and token the fake process's, and with a key the
 *               fake's proofs right
 *        bits 4-7: asking, the lookup and connection are made again this
 *               many times (what depends on timing is tried more)
 *   asked:  the bytes written to the door (a frame header and a LOOKUP);
 *           the door's answer is read to its end
 *   asking: our LOOKUP's body (struct tcp_lookup), the fake door's reply
 *           (a frame header and struct tcp_lookup_reply), the fake
 *           process's HELLO answer (a frame header and struct tcp_hello)
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <string.h>

#include "cm.h"
#include "fuzz_input.h"
#include "fuzz_tcp.h"
#include "hmac.h"

/* tcp_key.c's labels, which the fake door and process prove with. */
#define FZ_KEY_ACCEPT "ibemu tcp hello accept"
#define FZ_KEY_DOOR "ibemu tcp door reply"

#define FZ_MODE_KEY 1u
#define FZ_MODE_ASK 2u
#define FZ_MODE_AIM 4u
#define FZ_CM_PORT 7471
#define FZ_WAIT_MS 2000

#define FZ_REPLY_LEN (sizeof(struct tp_frame_hdr) + \
		      sizeof(struct tcp_lookup_reply))
#define FZ_HELLO_LEN (sizeof(struct tp_frame_hdr) + sizeof(struct tcp_hello))

static struct tp_tcp *t;
static struct emu_qp *qp;
static uint32_t qpn;
static struct emu_cm_id *listener;

/* The fake door and process: what they answer, set before each lookup
 * (under lock), and their listening sockets. */
static struct {
	pthread_mutex_t lock;
	pthread_t thread;
	int door_fd, proc_fd;
	uint16_t proc_port;
	bool aim, key;
	uint8_t reply[FZ_REPLY_LEN];
	uint8_t hello[FZ_HELLO_LEN];
} fake = { .lock = PTHREAD_MUTEX_INITIALIZER };

static void die(const char *what)
{
	fz_tcp_die(what);
}

/* ---- socket helpers (the harness's side) ---- */

static bool wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };

	return poll(&p, 1, FZ_WAIT_MS) == 1;
}

/* Read exactly len bytes, false at EOF, an error or the timeout. */
static bool read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	ssize_t n;

	while (len) {
		if (!wait_fd(fd, POLLIN))
			return false;
		n = recv(fd, p, len, MSG_DONTWAIT);
		if (n <= 0) {
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			return false;
		}
		p += n;
		len -= (size_t)n;
	}
	return true;
}

/* Read to EOF (bounded); up to len bytes kept in buf. */
static size_t read_to_end(int fd, uint8_t *buf, size_t len)
{
	uint8_t junk[512];
	size_t got = 0;
	ssize_t n;
	int i;

	for (i = 0; i < 64 && wait_fd(fd, POLLIN); i++) {
		n = recv(fd, got < len ? buf + got : junk,
			 got < len ? len - got : sizeof(junk), MSG_DONTWAIT);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			break;
		}
		if (got < len)
			got += (size_t)n;
	}
	return got;
}

static int listen_at(const char *ip, uint16_t port, uint16_t *port_p)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(port) };
	socklen_t len = sizeof(a);
	int one = 1, fd;

	inet_pton(AF_INET, ip, &a.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) || listen(fd, 4) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		die("cannot listen on 127.0.0.2");
	if (port_p)
		*port_p = ntohs(a.sin_port);
	return fd;
}

static void frame_fix(uint8_t *buf, uint8_t type, uint32_t len)
{
	struct tp_frame_hdr f;

	memcpy(&f, buf, sizeof(f));
	f.magic = htobe32(TP_FRAME_MAGIC);
	f.version = TP_FRAME_VERSION;
	f.type = type;
	f.len = htobe32(len);
	memcpy(buf, &f, sizeof(f));
}

/* ---- the fake door and process ---- */

/* The fake door: the lookup read, the reply (made right when aimed). */
static void fake_door(int fd)
{
	uint8_t in[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
	uint8_t out[FZ_REPLY_LEN];
	struct tcp_lookup q;
	struct tcp_lookup_reply r;
	struct tp_frame_hdr f;

	if (!read_all(fd, in, sizeof(in)))
		return;
	memcpy(&q, in + sizeof(struct tp_frame_hdr), sizeof(q));
	pthread_mutex_lock(&fake.lock);
	memcpy(out, fake.reply, sizeof(out));
	if (fake.aim) {
		frame_fix(out, TP_FRAME_LOOKUP_REPLY, sizeof(r));
		memcpy(&f, out, sizeof(f));
		memcpy(&r, out + sizeof(f), sizeof(r));
		r.port = htobe16(fake.proc_port);
		f.src_slot = r.slot;
		f.src_token = r.token;
		memset(r.proof, 0, sizeof(r.proof));
		r.flags = fake.key ? TCP_F_KEY : 0;
		if (fake.key)
			fabric_key_proof(&fz_tcp.keyed, FZ_KEY_DOOR, q.nonce,
					 sizeof(q.nonce), &r, sizeof(r),
					 r.proof);
		memcpy(out, &f, sizeof(f));
		memcpy(out + sizeof(f), &r, sizeof(r));
	}
	pthread_mutex_unlock(&fake.lock);
	(void)!send(fd, out, sizeof(out), MSG_NOSIGNAL);
}

/* The fake process: our HELLO read, its answer (made right when
 * aimed: the reply's slot and token, the key's challenge and proof). */
static void fake_proc(int fd)
{
	uint8_t in[FZ_HELLO_LEN], out[FZ_HELLO_LEN];
	struct tcp_hello mine, h;
	struct tp_frame_hdr f;
	struct tcp_lookup_reply r;

	if (!read_all(fd, in, sizeof(in)))
		return;
	memcpy(&mine, in + sizeof(struct tp_frame_hdr), sizeof(mine));
	pthread_mutex_lock(&fake.lock);
	memcpy(out, fake.hello, sizeof(out));
	if (fake.aim) {
		frame_fix(out, TP_FRAME_HELLO, sizeof(h));
		memcpy(&f, out, sizeof(f));
		memcpy(&h, out + sizeof(f), sizeof(h));
		memcpy(&r, fake.reply + sizeof(f), sizeof(r));
		f.src_slot = r.slot;
		f.src_token = r.token;
		h.flags = fake.key ? TCP_F_KEY : 0;
		if (fake.key)
			fabric_key_proof(&fz_tcp.keyed, FZ_KEY_ACCEPT,
					 mine.nonce, sizeof(mine.nonce),
					 h.nonce, sizeof(h.nonce), h.proof);
		memcpy(out, &f, sizeof(f));
		memcpy(out + sizeof(f), &h, sizeof(h));
	}
	pthread_mutex_unlock(&fake.lock);
	memcpy(&h, out + sizeof(struct tp_frame_hdr), sizeof(h));
	(void)!send(fd, out, sizeof(out), MSG_NOSIGNAL);
	/* With a key, our proof follows; then the end, which the network
	 * thread reads (the connection is not awaited to close). */
	if (h.flags & TCP_F_KEY)
		read_all(fd, in, sizeof(in));
}

static void *fake_thread(void *arg)
{
	struct pollfd p[2] = { { .fd = fake.door_fd, .events = POLLIN },
			       { .fd = fake.proc_fd, .events = POLLIN } };
	int fd, i;

	for (;;) {
		if (poll(p, 2, -1) < 0)
			continue;
		for (i = 0; i < 2; i++) {
			if (!(p[i].revents & POLLIN))
				continue;
			fd = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			if (i == 0) {
				fake_door(fd);
				/* The asker closes once it has the reply. */
				shutdown(fd, SHUT_WR);
				read_to_end(fd, NULL, 0);
			} else {
				fake_proc(fd);
			}
			close(fd);
		}
	}
	return NULL;
}

/* ---- setup ---- */

/* A QP and a CM listener of this process, for the door to find. */
static void door_targets(void)
{
	struct emu_owner owner = { .handle = 1, .async_fd = -1 };
	struct emu_qp_init init = {
		.qp_type = IBV_QPT_UD,
		.pd_id = 1,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1,
			 .max_send_sge = 1, .max_recv_sge = 1 },
		.owner = owner,
	};
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(FZ_CM_PORT) };
	struct emu_cm_chan *chan;
	struct emu_cq *cq;
	int fd;

	if (emu_cq_create(fz_tcp.hca, 16, -1, &owner, false, NULL, &cq))
		die("emu_cq_create");
	init.send_cq = init.recv_cq = cq;
	if (emu_qp_create(fz_tcp.hca, &init, &qp, &qpn))
		die("emu_qp_create");
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (emu_cm_open(fz_tcp.hca) ||
	    emu_cm_chan_create(fz_tcp.hca, &chan, &fd) ||
	    emu_cm_id_create(fz_tcp.hca, chan, 1, EMU_CM_PS_TCP, IBV_QPT_RC,
			     &listener) ||
	    emu_cm_bind(listener, (struct sockaddr *)&a) ||
	    emu_cm_listen(listener, 8))
		die("CM listener");
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	t = fz_tcp_open("fuzz-door");
	if (t->door_fd < 0)
		die("this process does not hold its node's door");
	door_targets();
	fake.door_fd = listen_at("127.0.0.2", t->door_port, NULL);
	fake.proc_fd = listen_at("127.0.0.2", 0, &fake.proc_port);
	if (pthread_create(&fake.thread, NULL, fake_thread, NULL))
		die("pthread_create");
	return 0;
}

/* ---- the inputs ---- */

/* Ask our door with the input's bytes; read its answer. */
static void asked(struct input *in, bool aim)
{
	uint8_t buf[sizeof(struct tp_frame_hdr) + sizeof(struct tcp_lookup)];
	uint8_t ans[FZ_REPLY_LEN];
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(t->door_port) };
	struct tcp_lookup q;
	struct tcp_lookup_reply r;
	size_t n = in->n, got;
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)))
		die("cannot reach our door");
	if (aim) {
		take(in, buf, sizeof(buf));
		frame_fix(buf, TP_FRAME_LOOKUP, sizeof(q));
		memcpy(&q, buf + sizeof(struct tp_frame_hdr), sizeof(q));
		q.flags = t->key.set ? TCP_F_KEY : 0;
		memcpy(buf + sizeof(struct tp_frame_hdr), &q, sizeof(q));
		n = sizeof(buf);
		(void)!send(fd, buf, n, MSG_NOSIGNAL);
	} else {
		(void)!send(fd, in->p, n, MSG_NOSIGNAL);
	}
	shutdown(fd, SHUT_WR);
	got = read_to_end(fd, ans, sizeof(ans));
	close(fd);
	/* A keyed door proves its answer to a keyed lookup. */
	if (aim && t->key.set && got == sizeof(ans)) {
		memcpy(&r, ans + sizeof(struct tp_frame_hdr), sizeof(r));
		if (!tcp_key_reply_ok(t, (struct sockaddr_storage *)&a, &q,
				      &r))
			die("the door's answer does not prove the key");
	}
}

/*
 * A connection tcp_conn_to made to the fake process, which closes its
 * end once it has greeted (and read our proof): nothing here uses the
 * connection, and the network thread must see its end and give it back
 * (tcp_reap).  One it never reads again stays UP for ever.
 */
static void wait_closed(int32_t slot)
{
	struct tcp_conn *c;
	bool up = true;
	int i;

	for (i = 0; i < 20000 && up; i++) {
		pthread_mutex_lock(&t->lock);
		c = tcp_conn_at(t, slot);
		if (c)
			atomic_store(&c->used, false);
		up = c && atomic_load(&c->state) == TCP_CONN_UP;
		pthread_mutex_unlock(&t->lock);
		if (up)
			usleep(100);
	}
	if (up)
		die("a connection whose peer closed is never read");
}

/* Our lookup at the fake door, then the connection tcp_resolve would
 * make to the process it names. */
static void asking(struct input *in, bool aim)
{
	struct sockaddr_storage node = { 0 };
	struct sockaddr_in *a = (struct sockaddr_in *)&node;
	struct tcp_lookup q;
	struct tcp_lookup_reply r;
	int err;
	int32_t slot;

	a->sin_family = AF_INET;
	inet_pton(AF_INET, "127.0.0.2", &a->sin_addr);
	take(in, &q, sizeof(q));
	memset(q.nonce, 0, sizeof(q.nonce));
	q.flags = 0;
	pthread_mutex_lock(&fake.lock);
	take(in, fake.reply, sizeof(fake.reply));
	take(in, fake.hello, sizeof(fake.hello));
	fake.aim = aim;
	fake.key = t->key.set;
	pthread_mutex_unlock(&fake.lock);
	err = tcp_lookup(t, &node, &q, &r, tcp_now_ms() + FZ_WAIT_MS);
	if (err)
		return;
	/* tcp_resolve's next step, at the node asked. */
	slot = tcp_conn_to(t, &node, (int32_t)be32toh(r.slot),
			   be64toh(r.token), be16toh(r.port), be16toh(r.lid),
			   tcp_now_ms() + FZ_WAIT_MS);
	if (aim && slot < 0 && be16toh(r.port) == fake.proc_port)
		die("an aimed connection failed");
	if (slot >= 0)
		wait_closed(slot);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	uint8_t mode;
	int i;

	take(&in, &mode, 1);
	fz_tcp_key(mode & FZ_MODE_KEY);
	if (mode & FZ_MODE_ASK) {
		for (i = 0; i <= mode >> 4; i++) {
			struct input again = in;

			asking(&again, mode & FZ_MODE_AIM);
		}
	} else
		asked(&in, mode & FZ_MODE_AIM);
	return 0;
}
