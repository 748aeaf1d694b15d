/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's registration check (check_reg.c): the same bytes
 * registered twice, in regions that grant different access.  The hook
 * costs one relaxed load while checking is off.
 */
#ifndef IBEMU_CHECK_REG_H
#define IBEMU_CHECK_REG_H

#include "check.h"

struct emu_mr;

void check_reg_slow(const struct emu_mr *mr);

/* A region just published in hca.mrs (registered or re-registered). */
static inline void check_reg(const struct emu_mr *mr)
{
	if (check_on())
		check_reg_slow(mr);
}

#endif /* IBEMU_CHECK_REG_H */
