// SPDX-License-Identifier: MIT
/* The index-plus-key table (key_table.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>
#include <unistd.h>

#include "clock.h"
#include "key_table.h"

/* splitmix64's step and finaliser: every bit of the state moves every
 * bit of the result. */
static uint64_t key_mix(uint64_t *state)
{
	uint64_t x = (*state += 0x9e3779b97f4a7c15ull);

	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/*
 * Fill buf with random bytes from getrandom(); where it fails (a kernel
 * without it, a seccomp filter), from the clocks, the pid and a counter
 * mixed: not secret from whoever sees the process, but no longer the
 * same in every process and run.
 */
static void key_random(void *buf, size_t len)
{
	static _Atomic uint64_t calls;
	uint8_t *p = buf;
	size_t done = 0;
	uint64_t state, x;
	ssize_t n;
	int tries;

	for (tries = 0; done < len && tries < 8; tries++) {
		n = getrandom(p + done, len - done, GRND_NONBLOCK);
		if (n > 0)
			done += (size_t)n;
		else if (n < 0 && errno != EINTR)
			break;
	}
	if (done == len)
		return;
	state = clock_now_ns() ^ clock_ns(CLOCK_REALTIME) << 17 ^
		(uint64_t)getpid() << 40 ^ atomic_fetch_add(&calls, 1) ^
		(uintptr_t)buf;
	while (done < len) {
		x = key_mix(&state);
		for (n = 0; n < 8 && done < len; n++, x >>= 8)
			p[done++] = (uint8_t)x;
	}
}

int key_table_init(struct key_table *t, uint32_t size)
{
	t->slot = calloc(size, sizeof(*t->slot));
	t->variant = malloc(size);
	t->size = size;
	t->cursor = 0;
	t->used = 0;
	if (!t->slot || !t->variant || !size) {
		key_table_fini(t);
		return ENOMEM;
	}
	/* Where the keys start is nobody's guess (key_table.h). */
	key_random(t->variant, size);
	key_random(&t->cursor, sizeof(t->cursor));
	t->cursor %= size;
	return 0;
}

void key_table_fini(struct key_table *t)
{
	free((void *)t->slot);
	free(t->variant);
	t->slot = NULL;
	t->variant = NULL;
	t->size = 0;
	t->cursor = 0;
	t->used = 0;
}

int key_table_find(const struct key_table *t, uint32_t *index_p,
		   uint32_t *part_p)
{
	uint32_t n, idx, tag;

	for (n = 0; t->used < t->size && n < t->size; n++) {
		idx = (t->cursor + n) % t->size;
		if (atomic_load_explicit(&t->slot[idx], memory_order_relaxed))
			continue;
		key_random(&tag, sizeof(tag));
		*index_p = idx;
		*part_p = tag << KEY_TAG_SHIFT | t->variant[idx];
		return 0;
	}
	return ENOMEM;
}

void key_table_take(struct key_table *t, uint32_t index, void *obj)
{
	t->cursor = (index + 1) % t->size;
	t->used++;
	atomic_store_explicit(&t->slot[index], obj, memory_order_release);
}

void key_table_put(struct key_table *t, uint32_t index, void *obj)
{
	atomic_store_explicit(&t->slot[index], obj, memory_order_release);
}

void key_table_free(struct key_table *t, uint32_t index)
{
	atomic_store_explicit(&t->slot[index], NULL, memory_order_release);
	t->variant[index]++;
	t->used--;
}
