// SPDX-License-Identifier: MIT
/*
 * UD multicast across nodes (IBA 10.5; manual 3.6.13): one process per
 * role, each started in its node by tests/net/mcast-nodes.sh, which passes
 * the group's MGID and MLID on the command line (no CM, no unicast: the
 * nodes meet only through the group).  They coordinate through files in
 * a directory they share.
 *
 *   mcast_nodes [-n] recv DIR NAME MGID MLID COUNT [OTHER_MGID]
 *	A UD QP attached to (MGID, MLID) takes COUNT datagrams, each once,
 *	byte for byte, with the GRH naming the group, the sender's QPN as
 *	src_qp, its node's LID as slid and port GUID in the GRH's SGID (what
 *	ibv_create_ah_from_wc answers with), and the immediate data of
 *	those sent with one; then nothing
 *	more (no copy twice).  With OTHER_MGID, a second QP attached to that
 *	group (at the same MLID) gets none of them.  Writes DIR/NAME.ready
 *	once attached and DIR/NAME.got with its count as datagrams come.
 *   mcast_nodes [-n] send DIR MGID MLID COUNT NAME...
 *	Waits for every NAME.ready, then sends COUNT datagrams to the group
 *	in batches, each batch once every receiver has the one before (so a
 *	lost datagram is a failure, not a race).  Its QPN, LID and port
 *	GUID are in DIR/sender.{qpn,lid,guid}.
 *
 * With a GRH the MLIDs may differ between nodes: each node gives a group
 * its own, the MGID names it.  -n: the datagrams have no GRH, the MLID
 * alone names the group (the same on every node, then).
 * Exit 0 pass, 1 fail, 77 no device.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rc_pair.h"
#include "ud_qp.h"

#define MAX_MSG 2048
#define GRH_LEN 40
#define SLOT (GRH_LEN + MAX_MSG)
#define QKEY 0x11111111u
#define BATCH 16
#define WAIT_S 20.0
#define QUIET_S 0.5 /* nothing more after the last datagram */

static bool no_grh; /* -n */

static uint32_t msg_len(uint32_t k)
{
	return 4 + (k * 97u) % (MAX_MSG - 4);
}

static uint8_t msg_byte(uint32_t k, uint32_t i)
{
	return (uint8_t)(k * 31u + i * 7u + 1u);
}

static void pause_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* DIR/NAME.SUFFIX holds v (written whole: a rename). */
static int file_put(const char *dir, const char *name, const char *suffix,
		    unsigned long v)
{
	char path[512], tmp[520];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, suffix);
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%lu\n", v);
	if (fclose(f) || rename(tmp, path))
		return -1;
	return 0;
}

/* The number in DIR/NAME.SUFFIX, or -1 if it is not there yet. */
static long file_get(const char *dir, const char *name, const char *suffix)
{
	char path[512];
	unsigned long v;
	FILE *f;
	int n;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, suffix);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fscanf(f, "%lu", &v);
	fclose(f);
	return n == 1 ? (long)v : -1;
}

static int parse_gid(const char *s, union ibv_gid *gid)
{
	struct in6_addr a;

	if (inet_pton(AF_INET6, s, &a) != 1 || a.s6_addr[0] != 0xff) {
		say("%s: not a multicast GID", s);
		return -1;
	}
	memcpy(gid->raw, a.s6_addr, 16);
	return 0;
}

struct node_side {
	struct ibv_device **list;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq; /* sends, or the first QP's receives */
	struct ibv_port_attr pa;
	struct ibv_mr *mr;
	uint8_t *buf;
	size_t nr_slots;
};

/* Device, PD, CQ and a buffer of nr_slots receive slots. */
static int side_open(struct node_side *s, size_t nr_slots, int cq_depth)
{
	int ret = verbs_open(&s->list, &s->ctx, &s->pd, &s->cq, cq_depth,
			     &s->pa);

	if (ret)
		return ret;
	s->nr_slots = nr_slots;
	s->buf = calloc(nr_slots, SLOT);
	if (!s->buf)
		return -1;
	s->mr = ibv_reg_mr(s->pd, s->buf, nr_slots * SLOT,
			   IBV_ACCESS_LOCAL_WRITE);
	if (!s->mr) {
		say("reg_mr: %s", strerror(errno));
		return -1;
	}
	return 0;
}

/* Who sent: what the sender wrote in DIR/sender.*. */
struct sender_id {
	long qpn, lid;
	uint64_t guid; /* network order, as in a GID */
};

static int sender_id_get(const char *dir, struct sender_id *id)
{
	long hi = file_get(dir, "sender", "guid_hi");
	long lo = file_get(dir, "sender", "guid_lo");

	id->qpn = file_get(dir, "sender", "qpn");
	id->lid = file_get(dir, "sender", "lid");
	if (id->qpn < 0 || id->lid < 0 || hi < 0 || lo < 0) {
		say("the sender's files are missing");
		return -1;
	}
	id->guid = (uint64_t)hi << 32 | (uint64_t)lo;
	return 0;
}

/* One received datagram, checked: k in *k_p. */
static int check_datagram(struct node_side *s, const struct ibv_wc *wc,
			  const union ibv_gid *gid,
			  const struct sender_id *from, uint32_t count,
			  uint32_t *k_p)
{
	uint64_t guid;

	const uint8_t *p = s->buf + wc->wr_id * SLOT;
	const struct ibv_grh *g = (const void *)p;
	uint32_t k, n, len;

	if (wc->status != IBV_WC_SUCCESS || wc->opcode != IBV_WC_RECV) {
		say("datagram: %s", ibv_wc_status_str(wc->status));
		return -1;
	}
	if (no_grh ? !!(wc->wc_flags & IBV_WC_GRH)
		   : !(wc->wc_flags & IBV_WC_GRH) ||
			     memcmp(&g->dgid, gid, 16)) {
		say("datagram %s the group's GRH (flags %#x)",
		    no_grh ? "with" : "without", wc->wc_flags);
		return -1;
	}
	if (wc->byte_len < GRH_LEN + 4) {
		say("datagram of %u bytes", wc->byte_len);
		return -1;
	}
	memcpy(&k, p + GRH_LEN, 4);
	len = wc->byte_len - GRH_LEN;
	if (k >= count || len != msg_len(k)) {
		say("datagram %u of %u bytes, want %u", k, len,
		    k < count ? msg_len(k) : 0);
		return -1;
	}
	for (n = 4; n < len; n++) {
		if (p[GRH_LEN + n] != msg_byte(k, n)) {
			say("datagram %u: byte %u is %#x, not %#x", k, n,
			    p[GRH_LEN + n], msg_byte(k, n));
			return -1;
		}
	}
	if ((long)wc->src_qp != from->qpn || (long)wc->slid != from->lid) {
		say("datagram %u: src_qp %#x slid %u, the sender's are %#lx "
		    "%ld", k, wc->src_qp, wc->slid, from->qpn, from->lid);
		return -1;
	}
	memcpy(&guid, g->sgid.raw + 8, 8);
	if (!no_grh && guid != from->guid) {
		say("datagram %u: the GRH's SGID is not the sender's port's",
		    k);
		return -1;
	}
	if (!!(wc->wc_flags & IBV_WC_WITH_IMM) != (k & 1) ||
	    ((k & 1) && ntohl(wc->imm_data) != k)) {
		say("datagram %u: immediate data %s %#x", k,
		    wc->wc_flags & IBV_WC_WITH_IMM ? "present" : "absent",
		    ntohl(wc->imm_data));
		return -1;
	}
	*k_p = k;
	return 0;
}

/* Take datagrams on cq until count, each once, then QUIET_S of none. */
static int collect(struct node_side *s, const char *dir, const char *name,
		   const union ibv_gid *gid, uint32_t count)
{
	uint8_t *seen = calloc(count, 1);
	double end = now_s() + WAIT_S * 3, quiet = 0;
	struct sender_id from = { .qpn = -1 };
	uint32_t got = 0, k;
	struct ibv_wc wc;
	int n;

	if (!seen)
		return -1;
	while (now_s() < (got < count ? end : quiet)) {
		n = ibv_poll_cq(s->cq, 1, &wc);
		if (n < 0)
			goto err;
		if (!n) {
			pause_ms(1);
			continue;
		}
		if (got == count) {
			say("a datagram more than the %u sent", count);
			goto err;
		}
		if (from.qpn < 0 && sender_id_get(dir, &from))
			goto err;
		if (check_datagram(s, &wc, gid, &from, count, &k))
			goto err;
		if (seen[k]) {
			say("datagram %u twice", k);
			goto err;
		}
		seen[k] = 1;
		if (++got == count)
			quiet = now_s() + QUIET_S;
		if (file_put(dir, name, "got", got))
			goto err;
	}
	free(seen);
	if (got != count) {
		say("%u datagrams of %u", got, count);
		return -1;
	}
	return 0;
err:
	free(seen);
	return -1;
}

static int receiver(int argc, char **argv)
{
	const char *dir = argv[2], *name = argv[3];
	uint32_t count = (uint32_t)strtoul(argv[6], NULL, 0);
	uint16_t mlid = (uint16_t)strtoul(argv[5], NULL, 0);
	union ibv_gid gid, other;
	struct node_side s = { 0 };
	struct ibv_cq *other_cq = NULL;
	struct ibv_qp *qp, *other_qp = NULL;
	struct ibv_wc wc;
	int ret;

	if (parse_gid(argv[4], &gid) || !count ||
	    (argc > 7 && parse_gid(argv[7], &other)))
		return 1;
	ret = side_open(&s, count * 2, (int)count * 2);
	if (ret)
		return ret > 0 ? 77 : 1;
	qp = ud_qp_open(s.pd, s.cq, s.cq, BATCH, count * 2, QKEY);
	if (!qp || ud_post_recvs(qp, s.mr, s.buf, SLOT, 0, count))
		return 1;
	if (argc > 7) {
		other_cq = ibv_create_cq(s.ctx, (int)count, NULL, NULL, 0);
		other_qp = other_cq ? ud_qp_open(s.pd, s.cq, other_cq, BATCH,
						 count, QKEY) :
				      NULL;
		if (!other_qp ||
		    ud_post_recvs(other_qp, s.mr, s.buf, SLOT, count, count))
			return 1;
		if ((ret = ibv_attach_mcast(other_qp, &other, mlid))) {
			say("attach_mcast: %s", strerror(ret));
			return 1;
		}
	}
	if ((ret = ibv_attach_mcast(qp, &gid, mlid))) {
		say("attach_mcast: %s", strerror(ret));
		return 1;
	}
	if (file_put(dir, name, "ready", 1) || collect(&s, dir, name, &gid,
						       count))
		return 1;
	if (other_cq && (ret = ibv_poll_cq(other_cq, 1, &wc))) {
		say("the QP of another group got a datagram");
		return 1;
	}
	ibv_detach_mcast(qp, &gid, mlid);
	if (other_qp)
		ibv_detach_mcast(other_qp, &other, mlid);
	printf("%s: %u datagrams, each once, byte for byte%s\n", name, count,
	       other_qp ? "; none on the QP of another group" : "");
	return 0;
}

/* Wait until every receiver's SUFFIX file says at least v. */
static int wait_all(const char *dir, char **names, int nr,
		    const char *suffix, long v)
{
	double end = now_s() + WAIT_S;
	int i;

	for (i = 0; i < nr; i++) {
		while (file_get(dir, names[i], suffix) < v) {
			if (now_s() > end) {
				say("%s: %s %ld, want %ld", names[i], suffix,
				    file_get(dir, names[i], suffix), v);
				return -1;
			}
			pause_ms(2);
		}
	}
	return 0;
}

static int send_one(struct node_side *s, struct ibv_qp *qp,
		    struct ibv_ah *ah, uint32_t k)
{
	uint32_t n;

	memcpy(s->buf, &k, 4);
	for (n = 4; n < msg_len(k); n++)
		s->buf[n] = msg_byte(k, n);
	return ud_send_mcast(qp, s->cq, s->mr, s->buf, msg_len(k), ah, QKEY, k,
			     k & 1, WAIT_S);
}

static int sender(int argc, char **argv)
{
	const char *dir = argv[2];
	uint16_t mlid = (uint16_t)strtoul(argv[4], NULL, 0);
	uint32_t count = (uint32_t)strtoul(argv[5], NULL, 0), k;
	char **names = argv + 6;
	int nr = argc - 6, ret;
	struct node_side s = { 0 };
	struct ibv_ah_attr aa = { .port_num = 1, .is_global = !no_grh };
	union ibv_gid gid0;
	struct ibv_ah *ah;
	struct ibv_qp *qp;
	uint64_t guid;

	if ((!no_grh && parse_gid(argv[3], &aa.grh.dgid)) || !count)
		return 1;
	aa.dlid = mlid;
	aa.grh.hop_limit = 1;
	ret = side_open(&s, 1, BATCH * 2);
	if (ret)
		return ret > 0 ? 77 : 1;
	qp = ud_qp_open(s.pd, s.cq, s.cq, BATCH, 1, QKEY);
	ah = ibv_create_ah(s.pd, &aa);
	if (!qp || !ah) {
		say("create_qp or create_ah: %s", strerror(errno));
		return 1;
	}
	if (ibv_query_gid(s.ctx, 1, 0, &gid0)) {
		say("query_gid: %s", strerror(errno));
		return 1;
	}
	memcpy(&guid, gid0.raw + 8, 8);
	if (file_put(dir, "sender", "guid_hi", (unsigned long)(guid >> 32)) ||
	    file_put(dir, "sender", "guid_lo", guid & 0xffffffffu) ||
	    file_put(dir, "sender", "lid", s.pa.lid) ||
	    file_put(dir, "sender", "qpn", qp->qp_num) ||
	    wait_all(dir, names, nr, "ready", 1))
		return 1;
	for (k = 0; k < count; k++) {
		if (send_one(&s, qp, ah, k))
			return 1;
		if (((k + 1) % BATCH == 0 || k + 1 == count) &&
		    wait_all(dir, names, nr, "got", k + 1))
			return 1;
	}
	printf("sender: %u datagrams to the group, every receiver has them\n",
	       count);
	return 0;
}

int main(int argc, char **argv)
{
	alarm(120);
	if (argc > 1 && !strcmp(argv[1], "-n")) {
		no_grh = true;
		argc--;
		argv++;
	}
	if (argc >= 7 && !strcmp(argv[1], "recv"))
		return receiver(argc, argv);
	if (argc >= 7 && !strcmp(argv[1], "send"))
		return sender(argc, argv);
	fprintf(stderr, "usage: mcast_nodes [-n] recv DIR NAME MGID MLID COUNT "
			"[OTHER_MGID]\n"
			"       mcast_nodes [-n] send DIR MGID MLID COUNT "
			"NAME...\n");
	return 1;
}
