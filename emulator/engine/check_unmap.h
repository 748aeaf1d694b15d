/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's record of the regions registered, for munmap and
 * free of memory still registered (check_unmap.c).  libibemu-check.so,
 * which `ibemu run --check` preloads, interposes munmap and free and
 * asks ibemu_check_unmap; the hooks here keep the record from
 * ibv_reg_mr to ibv_dereg_mr, one relaxed load while IBEMU_CHECK is off.
 */
#ifndef IBEMU_CHECK_UNMAP_H
#define IBEMU_CHECK_UNMAP_H

#include "check.h"
#include "hca.h"

void check_unmap_reg_slow(const struct emu_mr *mr);
void check_unmap_dereg_slow(const struct emu_mr *mr);

/* mr is registered (its address and length set); no lock held. */
static inline void check_unmap_reg(const struct emu_mr *mr)
{
	if (check_on())
		check_unmap_reg_slow(mr);
}

/* mr is being deregistered or moved, before its pages are let go of
 * (the provider's own munmap of them is no misuse); no lock held. */
static inline void check_unmap_dereg(const struct emu_mr *mr)
{
	if (check_on())
		check_unmap_dereg_slow(mr);
}

#endif /* IBEMU_CHECK_UNMAP_H */
