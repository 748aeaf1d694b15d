// SPDX-License-Identifier: MIT
/*
 * Device and port queries: manual 3.2 (ibv_get_device_list,
 * ibv_get_device_guid, ibv_open_device) and 3.3 (ibv_query_device,
 * ibv_query_port, ibv_query_gid, ibv_query_pkey); IBA 11.2.1 (Query HCA).
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "tests.h"

/* manual 3.2.1: the list holds the device, named, with a node GUID. */
CF_TEST_IMPL(device, device_list)
{
	struct ibv_device **list;
	int n = -1, i, found = -1;

	list = ibv_get_device_list(&n);
	CF_CHECK(list != NULL, "ibv_get_device_list: NULL, errno %s",
		 cf_errname(errno));
	if (!list)
		return;
	CF_CHECK(n >= 1, "ibv_get_device_list: %d devices", n);
	CF_CHECK(list[n > 0 ? n : 0] == NULL, "list not NULL-terminated");
	for (i = 0; i < n; i++) {
		const char *name = ibv_get_device_name(list[i]);

		CF_CHECK(name && *name, "device %d has no name", i);
		if (name && !strcmp(name, cf_dev_name))
			found = i;
	}
	CF_CHECK(found >= 0, "device %s not in the list", cf_dev_name);
	if (found >= 0) {
		struct ibv_device *d = list[found];

		CF_CHECK(ibv_get_device_guid(d) != 0,
			 "ibv_get_device_guid is 0");
		/* IBA 17.2.1: an HCA is a channel adapter on IB transport. */
		CF_CHECK(d->node_type == IBV_NODE_CA,
			 "node_type %d, expected IBV_NODE_CA", d->node_type);
		CF_CHECK(d->transport_type == IBV_TRANSPORT_IB,
			 "transport_type %d, expected IBV_TRANSPORT_IB",
			 d->transport_type);
	}
	ibv_free_device_list(list);
}

/* IBA 11.2.1.2 Query HCA: the limits a consumer sizes its resources by. */
CF_TEST_IMPL(device, query_device)
{
	struct ibv_device_attr a;
	struct ibv_device_attr_ex ax;
	struct ibv_device **list;
	__be64 guid = 0;
	int n, i;

	memset(&a, 0, sizeof(a));
	CF_EXPECT_OK(cf_rc(ibv_query_device(cf.ctx, &a)), "ibv_query_device");
	CF_CHECK(a.max_qp > 0, "max_qp %d", a.max_qp);
	CF_CHECK(a.max_qp_wr > 0, "max_qp_wr %d", a.max_qp_wr);
	CF_CHECK(a.max_sge > 0, "max_sge %d", a.max_sge);
	CF_CHECK(a.max_cq > 0, "max_cq %d", a.max_cq);
	CF_CHECK(a.max_cqe > 0, "max_cqe %d", a.max_cqe);
	CF_CHECK(a.max_mr > 0, "max_mr %d", a.max_mr);
	CF_CHECK(a.max_mr_size > 0, "max_mr_size %llu",
		 (unsigned long long)a.max_mr_size);
	CF_CHECK(a.max_pd > 0, "max_pd %d", a.max_pd);
	CF_CHECK(a.max_ah > 0, "max_ah %d", a.max_ah);
	CF_CHECK(a.max_srq >= 0, "max_srq %d", a.max_srq);
	if (a.max_srq > 0)
		CF_CHECK(a.max_srq_wr > 0 && a.max_srq_sge > 0,
			 "max_srq %d but max_srq_wr %d max_srq_sge %d",
			 a.max_srq, a.max_srq_wr, a.max_srq_sge);
	CF_CHECK(a.atomic_cap == IBV_ATOMIC_NONE ||
		 a.atomic_cap == IBV_ATOMIC_HCA ||
		 a.atomic_cap == IBV_ATOMIC_GLOB,
		 "atomic_cap %d", a.atomic_cap);
	CF_CHECK(a.phys_port_cnt >= 1, "phys_port_cnt %d", a.phys_port_cnt);
	CF_CHECK(a.node_guid != 0, "node_guid 0");

	list = ibv_get_device_list(&n);
	for (i = 0; list && i < n; i++)
		if (!strcmp(ibv_get_device_name(list[i]), cf_dev_name))
			guid = ibv_get_device_guid(list[i]);
	if (list)
		ibv_free_device_list(list);
	CF_CHECK(a.node_guid == guid,
		 "node_guid %016llx != ibv_get_device_guid %016llx",
		 (unsigned long long)be64toh(a.node_guid),
		 (unsigned long long)be64toh(guid));

	/* The extended query embeds the same legacy attributes. */
	memset(&ax, 0, sizeof(ax));
	CF_EXPECT_OK(cf_rc(ibv_query_device_ex(cf.ctx, NULL, &ax)),
		     "ibv_query_device_ex");
	CF_CHECK(ax.orig_attr.node_guid == a.node_guid &&
		 ax.orig_attr.max_qp == a.max_qp &&
		 ax.orig_attr.max_qp_wr == a.max_qp_wr &&
		 ax.orig_attr.max_sge == a.max_sge &&
		 ax.orig_attr.max_cqe == a.max_cqe &&
		 ax.orig_attr.max_mr_size == a.max_mr_size &&
		 ax.orig_attr.phys_port_cnt == a.phys_port_cnt,
		 "ibv_query_device_ex.orig_attr differs from ibv_query_device");
}

/* IBA 11.2.1.3 Query HCA port attributes (manual 3.3.2). */
CF_TEST_IMPL(device, query_port)
{
	struct ibv_port_attr p;

	memset(&p, 0, sizeof(p));
	CF_EXPECT_OK(cf_rc(ibv_query_port(cf.ctx, cf_port, &p)),
		     "ibv_query_port");
	CF_CHECK(p.state == IBV_PORT_ACTIVE, "port state %s, expected ACTIVE",
		 ibv_port_state_str(p.state));
	if (p.link_layer != IBV_LINK_LAYER_ETHERNET)
		CF_CHECK(p.lid != 0, "IB port with LID 0 (IBA 4.1: LID 0 is "
			 "reserved)");
	CF_CHECK(p.max_mtu >= IBV_MTU_256 && p.max_mtu <= IBV_MTU_4096,
		 "max_mtu %d", p.max_mtu);
	CF_CHECK(p.active_mtu >= IBV_MTU_256 && p.active_mtu <= p.max_mtu,
		 "active_mtu %d, max_mtu %d", p.active_mtu, p.max_mtu);
	CF_CHECK(p.gid_tbl_len > 0, "gid_tbl_len %d", p.gid_tbl_len);
	CF_CHECK(p.pkey_tbl_len > 0, "pkey_tbl_len %d", p.pkey_tbl_len);
	CF_CHECK(p.max_msg_sz > 0, "max_msg_sz %u", p.max_msg_sz);
}

/* Port numbers are 1..phys_port_cnt for an HCA (IBA 14.2.5.6). */
CF_TEST_IMPL(device, query_port_invalid)
{
	struct ibv_port_attr p;
	int bad[] = { 0, cf.dev->phys_port_cnt + 1 };
	size_t i;

	for (i = 0; i < CF_ARRAY_SIZE(bad); i++) {
		char what[64];

		errno = 0;
		snprintf(what, sizeof(what), "ibv_query_port(port %d)",
			 bad[i]);
		CF_EXPECT_ERR(cf_rc(ibv_query_port(cf.ctx, bad[i], &p)),
			      EINVAL, what);
	}
}

static bool gid_is_zero(const union ibv_gid *g)
{
	static const union ibv_gid zero;

	return !memcmp(g, &zero, sizeof(zero));
}

/* IBA 4.1.1: GID 0 of an IB port is the link-local fe80::/64 + port GUID. */
CF_TEST_IMPL(device, query_gid)
{
	static const uint8_t ll[8] = { 0xfe, 0x80 };
	union ibv_gid g;

	memset(&g, 0, sizeof(g));
	CF_CHECK(ibv_query_gid(cf.ctx, cf_port, 0, &g) == 0,
		 "ibv_query_gid(index 0) failed");
	if (cf.port.link_layer != IBV_LINK_LAYER_ETHERNET) {
		CF_CHECK(!memcmp(g.raw, ll, sizeof(ll)),
			 "GID 0 prefix %02x%02x:%02x%02x:..., expected "
			 "fe80::/64", g.raw[0], g.raw[1], g.raw[2], g.raw[3]);
		CF_CHECK(g.global.interface_id != 0,
			 "GID 0 has a zero interface id");
	} else {
		CF_CHECK(!gid_is_zero(&g), "GID 0 is empty on RoCE");
	}
	CF_CHECK(ibv_query_gid(cf.ctx, cf_port, cf.port.gid_tbl_len, &g) != 0,
		 "ibv_query_gid(index gid_tbl_len %d) succeeded",
		 cf.port.gid_tbl_len);
}

/* IBA 10.9.1.2: P_Key index 0 holds the default partition 0xffff. */
CF_TEST_IMPL(device, query_pkey)
{
	__be16 pkey = 0;

	CF_CHECK(ibv_query_pkey(cf.ctx, cf_port, 0, &pkey) == 0,
		 "ibv_query_pkey(index 0) failed");
	CF_CHECK(ntohs(pkey) == 0xffff, "P_Key[0] = 0x%04x, expected 0xffff",
		 ntohs(pkey));
	CF_CHECK(ibv_query_pkey(cf.ctx, cf_port, cf.port.pkey_tbl_len,
				&pkey) != 0,
		 "ibv_query_pkey(index pkey_tbl_len %d) succeeded",
		 cf.port.pkey_tbl_len);
	CF_CHECK(ibv_get_pkey_index(cf.ctx, cf_port, htons(0xffff)) == 0,
		 "ibv_get_pkey_index(0xffff) != 0");
}

/* ibv_query_gid_ex(3), ibv_query_gid_table(3): same data as ibv_query_gid. */
CF_TEST_IMPL(device, query_gid_ex)
{
	struct ibv_gid_entry e, *tab;
	union ibv_gid g;
	ssize_t n, i;
	int ret, found = 0;

	memset(&e, 0, sizeof(e));
	ibv_query_gid(cf.ctx, cf_port, 0, &g);
	ret = ibv_query_gid_ex(cf.ctx, cf_port, 0, &e, 0);
	CF_EXPECT_OK(cf_rc(ret), "ibv_query_gid_ex(index 0)");
	CF_CHECK(!memcmp(&e.gid, &g, sizeof(g)),
		 "ibv_query_gid_ex GID differs from ibv_query_gid");
	CF_CHECK(e.gid_index == 0 && e.port_num == (uint32_t)cf_port,
		 "entry index %u port %u", e.gid_index, e.port_num);
	if (cf.port.link_layer != IBV_LINK_LAYER_ETHERNET)
		CF_CHECK(e.gid_type == IBV_GID_TYPE_IB,
			 "gid_type %u on an IB port", e.gid_type);
	CF_CHECK(ibv_query_gid_ex(cf.ctx, cf_port, cf.port.gid_tbl_len, &e,
				  0) != 0,
		 "ibv_query_gid_ex(index gid_tbl_len) succeeded");

	tab = calloc(cf.port.gid_tbl_len * cf.dev->phys_port_cnt + 1,
		     sizeof(*tab));
	CU_ASSERT_PTR_NOT_NULL_FATAL(tab);
	n = ibv_query_gid_table(cf.ctx, tab,
				cf.port.gid_tbl_len * cf.dev->phys_port_cnt +
				1, 0);
	CF_CHECK(n >= 1, "ibv_query_gid_table returned %zd", n);
	for (i = 0; i < n; i++) {
		if (tab[i].port_num != (uint32_t)cf_port ||
		    tab[i].gid_index != 0)
			continue;
		found = 1;
		CF_CHECK(!memcmp(&tab[i].gid, &g, sizeof(g)),
			 "ibv_query_gid_table GID 0 differs");
	}
	CF_CHECK(found, "ibv_query_gid_table lacks port %d index 0", cf_port);
	free(tab);
}

/* manual 3.2.3/3.2.4: contexts open and close repeatedly and in parallel. */
CF_TEST_IMPL(device, open_close)
{
	struct ibv_context *a, *b;
	struct ibv_pd *pa, *pb;
	struct ibv_device_attr da, db;
	int i;

	for (i = 0; i < 50; i++) {
		a = cf_open_device();
		CF_CHECK(a != NULL, "open #%d failed: %s", i,
			 cf_errname(errno));
		if (!a)
			return;
		CF_EXPECT_OK(cf_rc(ibv_close_device(a)), "ibv_close_device");
	}

	a = cf_open_device();
	b = cf_open_device();
	CU_ASSERT_PTR_NOT_NULL_FATAL(a);
	CU_ASSERT_PTR_NOT_NULL_FATAL(b);
	CU_ASSERT(a != b);
	pa = ibv_alloc_pd(a);
	pb = ibv_alloc_pd(b);
	CF_CHECK(pa && pb, "ibv_alloc_pd on two contexts failed");
	CF_EXPECT_OK(cf_rc(ibv_query_device(a, &da)), "query context a");
	CF_EXPECT_OK(cf_rc(ibv_query_device(b, &db)), "query context b");
	CF_CHECK(da.node_guid == db.node_guid, "contexts disagree on GUID");
	if (pa)
		CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pa)), "dealloc pd a");
	CF_EXPECT_OK(cf_rc(ibv_close_device(a)), "close context a");
	/* Closing one context leaves the other working. */
	CF_EXPECT_OK(cf_rc(ibv_query_device(b, &db)), "query after close a");
	if (pb)
		CF_EXPECT_OK(cf_rc(ibv_dealloc_pd(pb)), "dealloc pd b");
	CF_EXPECT_OK(cf_rc(ibv_close_device(b)), "close context b");
}
