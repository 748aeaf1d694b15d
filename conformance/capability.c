// SPDX-License-Identifier: MIT
/*
 * The capability matrix of the device under test (-C FILE): what it
 * offers by its attributes (ibv_query_device_ex, ibv_query_port, the GID
 * table; manual 3.3), what the run observed it lacks (every skip,
 * grouped by its reason) and the choices it made where the spec leaves
 * them to it (choice.c), as "key: value" lines a CI system can diff
 * between devices and runs.
 *
 * Lock rule: none; written once after the run, on its one thread.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

#include <infiniband/verbs.h>

#include "conformance.h"

static const char *cf_yes(uint64_t flags, uint64_t bit)
{
	return (flags & bit) ? "yes" : "no";
}

static const char *cf_atomic_name(enum ibv_atomic_cap cap)
{
	switch (cap) {
	case IBV_ATOMIC_NONE:
		return "none";
	case IBV_ATOMIC_HCA:
		return "hca";
	case IBV_ATOMIC_GLOB:
		return "global";
	default:
		return "?";
	}
}

static void cf_cap_device(FILE *out, struct ibv_context *ctx)
{
	struct ibv_device_attr_ex ax;
	const struct ibv_device_attr *a = &ax.orig_attr;
	uint64_t f;

	memset(&ax, 0, sizeof(ax));
	if (ibv_query_device_ex(ctx, NULL, &ax) &&
	    ibv_query_device(ctx, &ax.orig_attr)) {
		fprintf(out, "device.query: failed\n");
		return;
	}
	f = a->device_cap_flags;
	fprintf(out, "device.fw_ver: %s\n", a->fw_ver);
	fprintf(out, "device.vendor_id: 0x%x\n", a->vendor_id);
	fprintf(out, "device.vendor_part_id: %u\n", a->vendor_part_id);
	fprintf(out, "device.phys_port_cnt: %u\n", a->phys_port_cnt);
	/* One line per limit, named as in struct ibv_device_attr. */
#define CF_LIMIT(field)                                                        \
	fprintf(out, "limits." #field ": %llu\n",                             \
		(unsigned long long)a->field)
	CF_LIMIT(max_qp);
	CF_LIMIT(max_qp_wr);
	CF_LIMIT(max_sge);
	CF_LIMIT(max_sge_rd);
	CF_LIMIT(max_cq);
	CF_LIMIT(max_cqe);
	CF_LIMIT(max_mr);
	CF_LIMIT(max_mr_size);
	CF_LIMIT(max_pd);
	CF_LIMIT(max_mw);
	CF_LIMIT(max_srq);
	CF_LIMIT(max_srq_wr);
	CF_LIMIT(max_qp_rd_atom);
	CF_LIMIT(max_qp_init_rd_atom);
	CF_LIMIT(max_mcast_grp);
	CF_LIMIT(max_mcast_qp_attach);
	CF_LIMIT(max_ah);
	CF_LIMIT(max_pkeys);
#undef CF_LIMIT
	fprintf(out, "cap.atomic: %s\n", cf_atomic_name(a->atomic_cap));
	/* One line per capability flag (IBV_DEVICE_*). */
#define CF_FLAG(key, bit) fprintf(out, "cap." key ": %s\n", cf_yes(f, bit))
	CF_FLAG("rc_rnr_nak_gen", IBV_DEVICE_RC_RNR_NAK_GEN);
	CF_FLAG("auto_path_mig", IBV_DEVICE_AUTO_PATH_MIG);
	CF_FLAG("srq_resize", IBV_DEVICE_SRQ_RESIZE);
	CF_FLAG("xrc", IBV_DEVICE_XRC);
	CF_FLAG("mem_window", IBV_DEVICE_MEM_WINDOW);
	CF_FLAG("mem_window_type_2a", IBV_DEVICE_MEM_WINDOW_TYPE_2A);
	CF_FLAG("mem_window_type_2b", IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	CF_FLAG("mem_mgt_extensions", IBV_DEVICE_MEM_MGT_EXTENSIONS);
	CF_FLAG("ud_av_port_enforce", IBV_DEVICE_UD_AV_PORT_ENFORCE);
#undef CF_FLAG
	fprintf(out, "cap.completion_timestamp: %s\n",
		ax.completion_timestamp_mask ? "yes" : "no");
	fprintf(out, "cap.odp: %s\n",
		ax.odp_caps.general_caps ? "yes" : "no");
	fprintf(out, "cap.packet_pacing: %s\n",
		ax.packet_pacing_caps.qp_rate_limit_max ? "yes" : "no");
	fprintf(out, "cap.max_dm_size: %llu\n",
		(unsigned long long)ax.max_dm_size);
}

static void cf_cap_port(FILE *out, struct ibv_context *ctx)
{
	struct ibv_port_attr p;
	struct ibv_gid_entry g;
	char gid[INET6_ADDRSTRLEN];
	int i;

	if (ibv_query_port(ctx, (uint8_t)cf_port, &p)) {
		fprintf(out, "port.query: failed\n");
		return;
	}
	fprintf(out, "port.number: %d\n", cf_port);
	fprintf(out, "port.state: %s\n", ibv_port_state_str(p.state));
	fprintf(out, "port.link_layer: %s\n",
		p.link_layer == IBV_LINK_LAYER_ETHERNET	    ? "Ethernet"
		: p.link_layer == IBV_LINK_LAYER_INFINIBAND ? "InfiniBand"
							    : "unspecified");
	fprintf(out, "port.active_mtu: %d\n", 128 << p.active_mtu);
	fprintf(out, "port.lid: %u\n", p.lid);
	fprintf(out, "port.gid_tbl_len: %d\n", p.gid_tbl_len);
	for (i = 0; i < p.gid_tbl_len && i < 64; i++) {
		if (ibv_query_gid_ex(ctx, (uint32_t)cf_port, (uint32_t)i, &g,
				     0))
			continue;
		if (!inet_ntop(AF_INET6, g.gid.raw, gid, sizeof(gid)))
			strcpy(gid, "?");
		fprintf(out, "port.gid[%d]: %s %s\n", i, gid,
			g.gid_type == IBV_GID_TYPE_IB	       ? "IB"
			: g.gid_type == IBV_GID_TYPE_ROCE_V1 ? "RoCEv1"
							     : "RoCEv2");
	}
}

int cf_capability_write(const char *path)
{
	struct ibv_device **list;
	struct ibv_context *ctx = NULL;
	FILE *out;
	int n, i;

	out = fopen(path, "w");
	if (!out) {
		fprintf(stderr, "ibemu-conformance: %s: %m\n", path);
		return -1;
	}
	fprintf(out, "device: %s\n", cf_dev_name);
	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), cf_dev_name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	if (ctx) {
		cf_cap_device(out, ctx);
		cf_cap_port(out, ctx);
		ibv_close_device(ctx);
	} else {
		fprintf(out, "device.open: failed\n");
	}
	/* What the run found missing: each skip reason, how many tests. */
	cf_report_skips_by_reason(out);
	/* What the tests observed where the spec lets the device choose. */
	cf_choices_print(out, NULL, NULL, "choice: ", "\n");
	return fclose(out) ? -1 : 0;
}
