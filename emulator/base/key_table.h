/* SPDX-License-Identifier: MIT */
/*
 * A table of objects named by index plus key, as an HCA names memory
 * regions and windows (IBA 10.6.3.1, 10.6.7.2.3): each entry has an
 * index and a variant that changes each time the index is reused, the
 * low 8 bits of the next key there, so a stale key never names the
 * object that took its place.  The caller builds its keys from the two.
 *
 * Lock rule: the owner's lock serialises every call but key_table_get,
 * which may run without it (an acquire load of an entry stored with
 * release order); find and take are one step under that lock.
 */
#ifndef IBEMU_KEY_TABLE_H
#define IBEMU_KEY_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

struct key_table {
	void *_Atomic *slot; /* size entries, by index */
	uint8_t *variant; /* per index: low 8 bits of the next key */
	uint32_t size;
	uint32_t cursor; /* where the search for a free index starts */
	uint32_t used; /* entries in use */
};

/* 0 or ENOMEM. */
int key_table_init(struct key_table *t, uint32_t size);
void key_table_fini(struct key_table *t);
/* A free index, the next one on from the last taken, and its variant:
 * 0, or ENOMEM when all are used.  The caller names obj's key from them,
 * then takes the index: obj is stored last, for lockless lookups. */
int key_table_find(const struct key_table *t, uint32_t *index_p,
		   uint8_t *variant_p);
void key_table_take(struct key_table *t, uint32_t index, void *obj);
/* Put obj (or NULL) at index, which stays in use. */
void key_table_put(struct key_table *t, uint32_t index, void *obj);
/* Give index back: its entry goes and its variant moves on. */
void key_table_free(struct key_table *t, uint32_t index);

/* The object at index, or NULL (index out of range included). */
static inline void *key_table_get(const struct key_table *t, uint32_t index)
{
	if (index >= t->size || !t->slot)
		return NULL;
	return atomic_load_explicit(&t->slot[index], memory_order_acquire);
}

#endif /* IBEMU_KEY_TABLE_H */
