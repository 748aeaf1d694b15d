/* SPDX-License-Identifier: MIT */
/*
 * The checking mode's watch over completion channels (check_arm.c): a
 * CQ with completions waiting, not re-armed since its last event, while
 * a thread of the process blocks in ibv_get_cq_event on its channel.
 */
#ifndef IBEMU_CHECK_ARM_H
#define IBEMU_CHECK_ARM_H

#include "check.h"
#include "ibemu.h"

void check_arm_event_slow(struct ibemu_cq *cq);
void check_arm_forget_slow(struct ibemu_cq *cq);

/* ibv_get_cq_event returned an event of cq: it is watched from now on. */
static inline void check_arm_event(struct ibemu_cq *cq)
{
	if (check_on())
		check_arm_event_slow(cq);
}

/* cq is about to be destroyed. */
static inline void check_arm_forget(struct ibemu_cq *cq)
{
	if (check_on())
		check_arm_forget_slow(cq);
}

#endif /* IBEMU_CHECK_ARM_H */
