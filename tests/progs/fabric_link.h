/* SPDX-License-Identifier: MIT */
/*
 * The libfabric side of tests/progs/fabric_cq.c: a server and a client
 * joined by a TCP control socket (tokens, addresses, keys), one fabric,
 * domain and registered buffer each, and "sessions": one endpoint with a
 * transmit and a receive CQ of a given wait object, connected to the
 * peer's.  FI_EP_MSG (provider "verbs"): the server listens on a passive
 * endpoint whose name it sends over the socket, the client connects to
 * it through the RDMA CM.  FI_EP_RDM (provider "verbs;ofi_rxm"): each
 * side sends its endpoint's name and inserts the other's into its AV;
 * RxM connects on the first transfer.
 */
#ifndef IBEMU_TESTS_FABRIC_LINK_H
#define IBEMU_TESTS_FABRIC_LINK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>

/* The registered buffer: a send half and a receive/target half. */
#define LINK_BUF_LEN 8192
#define LINK_RX_OFF 4096

/* One process's fabric objects, for the whole run. */
struct link {
	bool server;
	bool rdm;	    /* FI_EP_RDM over ofi_rxm, else FI_EP_MSG */
	const char *tag;    /* "FI_EP_MSG" or "FI_EP_RDM", for the output */
	int ctl;	    /* the TCP control socket */
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_eq *eq;  /* MSG: CM events of the pep and of every ep */
	struct fid_pep *pep; /* MSG server */
	struct fid_mr *mr;
	void *desc;	    /* fi_mr_desc(mr) */
	uint8_t *buf;	    /* LINK_BUF_LEN bytes */
};

/* One connected endpoint and its two CQs. */
struct session {
	struct link *l;
	enum fi_wait_obj wait;
	const char *wait_name;
	struct fid_ep *ep;
	struct fid_cq *tx;
	struct fid_cq *rx;
	struct fid_av *av;  /* RDM */
	fi_addr_t peer;	    /* RDM: the peer in av; MSG: FI_ADDR_UNSPEC */
	bool down;	    /* MSG: fi_shutdown called or FI_SHUTDOWN seen */
};

long long link_now_ms(void);
void link_sleep_ms(int ms);

/* The control socket and the fabric objects: PORT is the TCP port the
 * server listens on, CTL_HOST the server's host for the client; ADDR,
 * where given, the address this side's endpoints are bound to (the
 * server's listen there).  0; 77 when libfabric finds no such provider;
 * -1 on an error, said. */
int link_open(struct link *l, bool rdm, const char *ctl_host,
	      const char *addr, const char *port);
void link_close(struct link *l);

/* A token of up to 7 characters to the peer, or one awaited from it
 * (anything else is an error, said).  0 or -1. */
int link_say(struct link *l, const char *token);
int link_expect(struct link *l, const char *token);
/* link_expect, the session's endpoint progressing meanwhile (reads of
 * no entry, fi_cq(3)): RxM connects and accepts as its CQs are read. */
struct session;
int session_expect(struct session *s, const char *token);
/* LEN bytes to or from the peer: 0 or -1. */
int link_put(struct link *l, const void *buf, size_t len);
int link_get(struct link *l, void *buf, size_t len);

/* A session with CQs of wait object WAIT, connected to the peer's
 * (which opens its own at the same time): 0, -1 (said), or 1 where the
 * provider does not offer the wait object (a note said). */
int session_open(struct session *s, struct link *l, enum fi_wait_obj wait,
		 const char *wait_name);
/* MSG: disconnect (if not yet); then close it all.  The peers meet
 * first over the socket, so no transfer is in flight. */
void session_close(struct session *s);
/* MSG: fi_shutdown now (the peer sees FI_SHUTDOWN on its EQ). */
int session_shutdown(struct session *s);

/* The checks' verdicts: one line each to stderr (rc_pair.c's say()),
 * prefixed with the endpoint type and the session's wait object; fail()
 * counts in link_fails. */
extern int link_fails;
#define ok(s, fmt, ...) \
	say("ok: %s %s: " fmt, (s)->l->tag, (s)->wait_name, ##__VA_ARGS__)
#define note(s, fmt, ...) \
	say("note: %s %s: " fmt, (s)->l->tag, (s)->wait_name, ##__VA_ARGS__)
#define fail(s, fmt, ...)                                                  \
	(link_fails++, say("FAIL: %s %s: " fmt, (s)->l->tag, (s)->wait_name, \
			   ##__VA_ARGS__))

/* How long a completion that is coming may take to come. */
#define READ_MS 10000

/* A post (an expression yielding ssize_t), again while the provider says
 * -FI_EAGAIN (RxM connecting, a queue full), reading the transmit CQ to
 * drive its progress, for READ_MS at most. */
#define POST(s, call)                                                   \
	({                                                              \
		long long end_ = link_now_ms() + READ_MS;               \
		ssize_t r_;                                             \
		while ((r_ = (call)) == -FI_EAGAIN &&                   \
		       link_now_ms() < end_)                            \
			fi_cq_read((s)->tx, NULL, 0);                   \
		r_;                                                     \
	})

static inline bool flags_have(uint64_t flags, uint64_t want)
{
	return (flags & want) == want;
}

/* Bytes of a pattern SEED writes, and whether they are there. */
void link_fill(uint8_t *p, unsigned int seed, size_t len);
bool link_same(const uint8_t *p, unsigned int seed, size_t len);
/* "an entry" for n >= 0, else the fabric error's text. */
const char *link_err_name(ssize_t n);
/* One entry of CQ: fi_cq_sread for MS where the session's CQs have a
 * wait object, else fi_cq_read until there is something or MS passed. */
ssize_t session_read(struct session *s, struct fid_cq *cq,
		     struct fi_cq_data_entry *e, int ms);
/* fi_cq_readerr into a zeroed ERR (err_data_size 0: the provider's
 * buffer). */
ssize_t session_read_err(struct fid_cq *cq, struct fi_cq_err_entry *err);

/* The error-entry sessions (fabric_cq_err.c). */
void run_error_session(struct link *l);
void run_flush_session(struct link *l);

#endif
