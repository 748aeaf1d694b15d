// SPDX-License-Identifier: MIT
/*
 * The process's attachment to its node's HCA (doc/design.md §4, "Device
 * and contexts"): the first open context attaches the process to the node
 * segment, builds its key tables and starts its engine; the last one
 * undoes it.  One attachment per process, as one process opens one
 * uverbs device file.
 *
 * Lock rule: hca.lock protects refs and the attach/detach sequence.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "check.h"
#include "hca.h"
#include "log.h"
#include "pcap.h"

static struct emu_hca emu_hca_instance = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.ctx_lock = PTHREAD_MUTEX_INITIALIZER,
	.node = { .fd = -1, .proc_slot = -1 },
};

/* The node's port count, once attached (node_nr_ports); 0 before.  The
 * process has one HCA. */
static _Atomic unsigned int hca_nr_ports;

unsigned int emu_nr_ports(void)
{
	unsigned int n = atomic_load_explicit(&hca_nr_ports,
					      memory_order_relaxed);

	return n ? n : node_ports_wanted();
}

bool emu_port_valid(unsigned int port_num)
{
	return port_num >= 1 && port_num <= emu_nr_ports();
}

static int hca_attach_locked(struct emu_hca *hca)
{
	int ret;

	hca->pid = getpid();
	ret = -node_open(&hca->node);
	if (ret)
		return ret;
	ret = -node_proc_attach(&hca->node);
	if (ret)
		goto err_close;
	node_ports_told(hca->node.seg);
	atomic_store(&hca_nr_ports, node_nr_ports(hca->node.seg));
	ret = mr_table_init(hca);
	if (ret)
		goto err_detach;
	ret = mw_table_init(hca);
	if (ret)
		goto err_mr;
	ret = engine_start(hca);
	if (ret)
		goto err_mw;
	return 0;

err_mw:
	mw_table_fini(hca);
err_mr:
	mr_table_fini(hca);
err_detach:
	node_proc_detach(&hca->node);
err_close:
	node_close(&hca->node);
	return ret;
}

int emu_hca_get(struct emu_hca **hca_p)
{
	struct emu_hca *hca = &emu_hca_instance;
	int ret = 0;

	/* IBEMU_CHECK is read once, before the first object (check.h). */
	check_on();
	pthread_mutex_lock(&hca->lock);
	if (hca->refs == 0)
		ret = hca_attach_locked(hca);
	if (!ret) {
		hca->refs++;
		*hca_p = hca;
	}
	pthread_mutex_unlock(&hca->lock);
	return ret;
}

void emu_hca_put(struct emu_hca *hca)
{
	pthread_mutex_lock(&hca->lock);
	if (--hca->refs == 0) {
		engine_stop(hca);
		ah_table_fini(hca);
		mw_table_fini(hca);
		mr_table_fini(hca);
		node_proc_detach(&hca->node);
		node_close(&hca->node);
	}
	pthread_mutex_unlock(&hca->lock);
}

/*
 * A forked child must not use its parent's verbs objects (as with an HCA
 * without fork support): above all it must not drain the parent's inbox.
 * It starts unattached and may open contexts of its own; its copies of
 * the parent's engine and tables are freed (the shared mappings stay,
 * they are the parent's).
 */
void emu_hca_fork_child(void)
{
	struct emu_hca *hca = &emu_hca_instance;

	/* First: what the transports share (transport.h, fork_child). */
	engine_fork_child();
	pthread_mutex_init(&hca->lock, NULL);
	pthread_mutex_init(&hca->ctx_lock, NULL);
	/* The parent's contexts are not the child's. */
	hca->nr_ctx_fds = 0;
	hca->pid = getpid();
	hca->refs = 0;
	engine_forget(hca);
	/* The parent's CM (its thread is not here) is left behind. */
	atomic_store(&hca->cm, NULL);
	pcap_forget();
	ah_table_fini(hca);
	mw_table_fini(hca);
	mr_table_fini(hca);
	node_forget(&hca->node);
}

uint64_t emu_hca_token(const struct emu_hca *hca)
{
	return hca->node.token;
}

bool emu_hca_token_alive(struct emu_hca *hca, uint64_t token)
{
	int i;

	if (!token)
		return false;
	for (i = 0; i < IBEMU_MAX_PROCS; i++)
		if (atomic_load_explicit(&hca->node.seg->procs[i].token,
					 memory_order_acquire) == token)
			return node_proc_alive(&hca->node, i);
	return false;
}

void emu_hca_port_info(struct emu_hca *hca, unsigned int port,
		       struct emu_port_info *info)
{
	const struct node_seg *seg = hca->node.seg;

	if (port < 1 || port > node_nr_ports(seg))
		port = 1;
	info->node_guid = seg->node_guid;
	info->port_guid = seg->ports[port - 1].guid;
	info->gid_prefix = seg->gid_prefix;
	info->lid = seg->ports[port - 1].lid;
	info->sm_lid = seg->sm_lid;
	info->state = node_port_state(seg, port);
}

int emu_hca_gid(struct emu_hca *hca, unsigned int port, unsigned int index,
		uint8_t gid[16])
{
	const struct node_seg *seg = hca->node.seg;
	const struct node_fabric *fab = &seg->fabric;
	unsigned int nr = fab->nr_gids; /* immutable; bounded all the same */
	uint64_t be;

	if (index >= IBEMU_GID_TBL_LEN)
		return EINVAL;
	/* Port 2 has its GID 0 alone: the node's addresses name port 1. */
	if (port > 1 && node_port_num(seg, port) == port) {
		if (index)
			return ENODATA;
		be = htobe64(seg->gid_prefix);
		memcpy(gid, &be, 8);
		be = htobe64(node_port_at(seg, port)->guid);
		memcpy(gid + 8, &be, 8);
		return 0;
	}
	if (index >= nr)
		return ENODATA;
	memcpy(gid, fab->gids[index], 16);
	return 0;
}

int emu_hca_ctx_add(struct emu_hca *hca, int async_fd)
{
	unsigned int max;
	int *fds, ret = 0;

	pthread_mutex_lock(&hca->ctx_lock);
	if (hca->nr_ctx_fds == hca->max_ctx_fds) {
		max = hca->max_ctx_fds ? 2 * hca->max_ctx_fds : 4;
		fds = realloc(hca->ctx_fds, max * sizeof(*fds));
		if (!fds) {
			ret = ENOMEM;
			goto out;
		}
		hca->ctx_fds = fds;
		hca->max_ctx_fds = max;
	}
	hca->ctx_fds[hca->nr_ctx_fds++] = async_fd;
out:
	pthread_mutex_unlock(&hca->ctx_lock);
	return ret;
}

void emu_hca_ctx_remove(struct emu_hca *hca, int async_fd)
{
	unsigned int i;

	pthread_mutex_lock(&hca->ctx_lock);
	for (i = 0; i < hca->nr_ctx_fds; i++)
		if (hca->ctx_fds[i] == async_fd) {
			hca->ctx_fds[i] = hca->ctx_fds[--hca->nr_ctx_fds];
			break;
		}
	pthread_mutex_unlock(&hca->ctx_lock);
}

uint16_t emu_hca_pkey(struct emu_hca *hca, unsigned int index)
{
	return index < IBEMU_PKEY_TBL_LEN ? hca->node.seg->pkeys[index] : 0;
}

uint64_t emu_node_guid(void)
{
	struct emu_hca *hca = &emu_hca_instance;
	struct node node;
	uint64_t guid;

	/* Without an attachment, read the identity from the segment. */
	pthread_mutex_lock(&hca->lock);
	if (hca->refs) {
		guid = hca->node.seg->node_guid;
		pthread_mutex_unlock(&hca->lock);
		return guid;
	}
	pthread_mutex_unlock(&hca->lock);
	if (node_open(&node))
		return 0;
	guid = node.seg->node_guid;
	node_close(&node);
	return guid;
}

/* The fabric part of the node segment, copied once (immutable once the
 * segment is ready, emulator/node/node.h), attached or not. */
static int emu_node_fabric(struct node_fabric *fab)
{
	struct emu_hca *hca = &emu_hca_instance;
	struct node node;
	int ret;

	pthread_mutex_lock(&hca->lock);
	if (hca->refs) {
		memcpy(fab, &hca->node.seg->fabric, sizeof(*fab));
		pthread_mutex_unlock(&hca->lock);
		return 0;
	}
	pthread_mutex_unlock(&hca->lock);
	ret = node_open(&node);
	if (ret)
		return ret;
	memcpy(fab, &node.seg->fabric, sizeof(*fab));
	node_close(&node);
	return 0;
}

int emu_node_ifname(char *buf, size_t len)
{
	struct node_fabric fab;
	int ret;

	ret = emu_node_fabric(&fab);
	if (ret)
		return ret;
	fab.ifname[sizeof(fab.ifname) - 1] = '\0';
	if (!fab.ifname[0])
		return -ENODEV;
	if (strlen(fab.ifname) >= len)
		return -ENAMETOOLONG;
	strcpy(buf, fab.ifname);
	return 0;
}
