// SPDX-License-Identifier: MIT
/*
 * Built by tests/unit/pabi-headers.sh against the headers of a build of
 * rdma-core release PABI_RELEASE (its include/infiniband/driver.h, which
 * distributions do not install): each member PABI_CONTEXT_OPS
 * (provider/verbs/pabi/ops.h) gives that release is where driver.h has
 * it, and no other is there.  Prints the figures the script compares with
 * ibemu's row for the release:
 *
 *   ops N vctx_words W qp_ex_wr_ops Q
 *
 * or "slot NAME: driver.h S, ops.h T" for each member out of place, and
 * exits 1.
 */
#include <stdio.h>

#include <infiniband/driver.h>

#include "ops.h"

#define WORD sizeof(void (*)(void))
#define AT_35(x) x
#if PABI_RELEASE >= 36
#define AT_36(x) x
#else
#define AT_36(x)
#endif
#if PABI_RELEASE >= 59
#define AT_59(x) x
#else
#define AT_59(x)
#endif
#if PABI_RELEASE >= 62
#define AT_62(x) x
#else
#define AT_62(x)
#endif
#if PABI_RELEASE >= 64
#define AT_64(x) x
#else
#define AT_64(x)
#endif
#if PABI_RELEASE >= 65
#define AT_65(x) x
#else
#define AT_65(x)
#endif

static int bad;

static void check_slot(const char *name, size_t offset, size_t slot)
{
	if (offset != slot * WORD) {
		printf("slot %s: driver.h %zu, ops.h %zu\n", name,
		       offset / WORD, slot);
		bad = 1;
	}
}

#define CHECK_OP(name, release)                                                \
	AT_##release(check_slot(#name,                                         \
				offsetof(struct verbs_context_ops, name),      \
				slot++);)

int main(void)
{
	size_t slot = 0;

	PABI_CONTEXT_OPS(CHECK_OP)
	if (sizeof(struct verbs_context_ops) != slot * WORD) {
		printf("ops: driver.h %zu, ops.h %zu\n",
		       sizeof(struct verbs_context_ops) / WORD, slot);
		bad = 1;
	}
	printf("ops %zu vctx_words %zu qp_ex_wr_ops %zu\n", slot,
	       offsetof(struct verbs_context, context) / WORD,
	       (sizeof(struct ibv_qp_ex) -
		offsetof(struct ibv_qp_ex, wr_atomic_cmp_swp)) / WORD);
	return bad;
}
