// SPDX-License-Identifier: MIT
/* The slow path of struct emu_lock (lock.h). */
#include "config.h"

#include <sched.h>

#include "cpu.h"
#include "lock.h"

/* Looks at a held lock before its taker starts yielding between looks:
 * about a microsecond, longer than a message holds a lock. */
#define EMU_LOCK_SPINS 128

void emu_lock_wait(struct emu_lock *l)
{
	unsigned int i = 0;

	for (;;) {
		if (atomic_load_explicit(&l->word, memory_order_relaxed) == 0 &&
		    emu_lock_try(l))
			return;
		if (i < EMU_LOCK_SPINS) {
			i++;
			cpu_relax();
		} else {
			sched_yield();
		}
	}
}
