/* SPDX-License-Identifier: MIT */
/*
 * The TCP transport of the harnesses that fuzz it (fuzz_tcp_stream.c,
 * fuzz_door.c): a node of the harness's own whose process opens the
 * transport in its loopback mode (IBEMU_TRANSPORT=tcp) with a fabric
 * key, on a door port of the run's own, so that no other node of the
 * machine finds this one's door or this one theirs.  Between inputs a
 * harness swaps t->key for the key or none: nothing else of the process
 * greets or asks meanwhile.
 */
#ifndef IBEMU_FUZZ_TCP_H
#define IBEMU_FUZZ_TCP_H

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine.h"
#include "hca.h"
#include "shmfile.h"
#include "tcp_int.h"

#define FZ_TCP_KEY "fuzz fabric key, at least 16 bytes"

static struct {
	struct emu_hca *hca;
	struct tp_tcp *t;
	struct fabric_key keyed, unkeyed;
	char node[64];
} fz_tcp;

static inline void fz_tcp_die(const char *what)
{
	fprintf(stderr, "fuzz: %s\n", what);
	abort();
}

static inline void fz_tcp_exit(void)
{
	fz_tcp.t->key = fz_tcp.keyed;
	emu_hca_put(fz_tcp.hca);
	shmfile_unlink_node(fz_tcp.node);
}

/* A loopback port nobody listens on now. */
static inline uint16_t fz_tcp_free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
	    getsockname(fd, (struct sockaddr *)&a, &len))
		fz_tcp_die("no free port");
	close(fd);
	return ntohs(a.sin_port);
}

static inline struct tp_tcp *fz_tcp_open(const char *name)
{
	char port[16];

	snprintf(fz_tcp.node, sizeof(fz_tcp.node), "%s-%d", name,
		 (int)getpid());
	setenv("IBEMU_NODE", fz_tcp.node, 1);
	setenv("IBEMU_TRANSPORT", "tcp", 1);
	setenv("IBEMU_FABRIC_KEY", FZ_TCP_KEY, 1);
	unsetenv("IBEMU_FABRIC_KEY_FILE");
	unsetenv("IBEMU_NET");
	if (!getenv("IBEMU_TCP_PORT")) {
		snprintf(port, sizeof(port), "%u", fz_tcp_free_port());
		setenv("IBEMU_TCP_PORT", port, 1);
	}
	if (emu_hca_get(&fz_tcp.hca))
		fz_tcp_die("cannot attach the HCA");
	fz_tcp.t = tp_tcp(fz_tcp.hca->engine);
	if (!fz_tcp.t || !fz_tcp.t->key.set)
		fz_tcp_die("no TCP transport with the key");
	fz_tcp.keyed = fz_tcp.t->key;
	atexit(fz_tcp_exit);
	return fz_tcp.t;
}

static inline void fz_tcp_key(bool on)
{
	fz_tcp.t->key = on ? fz_tcp.keyed : fz_tcp.unkeyed;
}

#endif /* IBEMU_FUZZ_TCP_H */
