// SPDX-License-Identifier: MIT
/*
 * Address handles: manual 3.4.4/3.4.5 (ibv_create_ah, ibv_destroy_ah);
 * IBA 11.2.2.1 (Create Address Handle) and 8.3 (GRH, SGID index).
 */
#include <string.h>

#include "tests.h"

CF_TEST_IMPL(ah, create_destroy)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	cf_fill_ah(&cf, &a);
	ah = ibv_create_ah(cf.pd, &a);
	CF_CHECK(ah != NULL, "ibv_create_ah(own %s): %s",
		 a.is_global ? "GID" : "LID", cf_errname(errno));
	if (!ah)
		return;
	CF_CHECK(ah->pd == cf.pd && ah->context == cf.ctx,
		 "ah fields not set");
	CF_EXPECT_OK(cf_rc(ibv_destroy_ah(ah)), "ibv_destroy_ah");
}

/* With a GRH the same address is valid too (IBA 8.3.1). */
CF_TEST_IMPL(ah, create_global)
{
	struct ibv_ah_attr a;
	struct ibv_ah *ah;

	cf_fill_ah(&cf, &a);
	a.is_global = 1;
	a.grh.dgid = cf.gid;
	a.grh.sgid_index = cf_gid_index;
	a.grh.hop_limit = 64;
	ah = ibv_create_ah(cf.pd, &a);
	CF_CHECK(ah != NULL, "ibv_create_ah(with GRH): %s", cf_errname(errno));
	if (ah)
		CF_EXPECT_OK(cf_rc(ibv_destroy_ah(ah)), "ibv_destroy_ah");
}

static void expect_ah_fails(struct ibv_ah_attr *a, const char *what)
{
	struct ibv_ah *ah;

	errno = 0;
	ah = ibv_create_ah(cf.pd, a);
	CF_CHECK(!ah && errno == EINVAL, "%s: expected NULL/EINVAL, got %s/%s",
		 what, ah ? "AH" : "NULL", cf_errname(errno));
	if (ah)
		ibv_destroy_ah(ah);
}

/* IBA 14.2.5.6: HCA ports are 1..phys_port_cnt. */
CF_TEST_IMPL(ah, bad_port)
{
	struct ibv_ah_attr a;

	cf_fill_ah(&cf, &a);
	a.port_num = 0;
	expect_ah_fails(&a, "ibv_create_ah(port 0)");
	cf_fill_ah(&cf, &a);
	a.port_num = cf.dev->phys_port_cnt + 1;
	expect_ah_fails(&a, "ibv_create_ah(port phys_port_cnt + 1)");
}

/* IBA 8.3.1 / 11.2.2.1: the SGID index names an entry of the GID table. */
CF_TEST_IMPL(ah, bad_sgid_index)
{
	struct ibv_ah_attr a;

	cf_fill_ah(&cf, &a);
	a.is_global = 1;
	a.grh.dgid = cf.gid;
	a.grh.hop_limit = 1;
	if (cf.port.gid_tbl_len > 255)
		SKIP("gid_tbl_len %d exceeds the 8-bit sgid_index",
		     cf.port.gid_tbl_len);
	a.grh.sgid_index = cf.port.gid_tbl_len;
	expect_ah_fails(&a, "ibv_create_ah(sgid_index gid_tbl_len)");
}

CF_TEST_IMPL(ah, many)
{
	struct ibv_ah *ahs[64];
	struct ibv_ah_attr a;
	int i, n = 0;

	cf_fill_ah(&cf, &a);
	for (i = 0; i < 64 && i < cf.dev->max_ah; i++) {
		ahs[i] = ibv_create_ah(cf.pd, &a);
		if (!ahs[i])
			break;
		n++;
	}
	CF_CHECK(n == (cf.dev->max_ah < 64 ? cf.dev->max_ah : 64),
		 "created %d AHs: %s", n, cf_errname(errno));
	for (i = 0; i < n; i++)
		CF_EXPECT_OK(cf_rc(ibv_destroy_ah(ahs[i])), "ibv_destroy_ah");
}
