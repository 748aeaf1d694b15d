// SPDX-License-Identifier: MIT
/* The slow paths of struct emu_lock (lock.h). */
#include "config.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu.h"
#include "lock.h"

/* Rounds a contended lock is watched before its taker sleeps: about a
 * microsecond, longer than a message holds a lock. */
#define EMU_LOCK_SPINS 128

void emu_lock_wait(struct emu_lock *l)
{
	uint32_t w;
	int i;

	for (i = 0; i < EMU_LOCK_SPINS; i++) {
		cpu_relax();
		w = atomic_load_explicit(&l->word, memory_order_relaxed);
		if (w == 0 && emu_lock_try(l))
			return;
		if (w == 2)
			break; /* others sleep already: join them */
	}
	/* From here the word says 2 while we may sleep, so the holder's
	 * release wakes one of us; taking it at 0 we leave 2, which costs
	 * at most one wake-up nobody needed. */
	while (atomic_exchange_explicit(&l->word, 2, memory_order_acquire))
		syscall(SYS_futex, &l->word, FUTEX_WAIT_PRIVATE, 2, NULL, NULL,
			0);
}

void emu_lock_wake(struct emu_lock *l)
{
	syscall(SYS_futex, &l->word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}
