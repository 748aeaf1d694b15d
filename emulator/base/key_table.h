/* SPDX-License-Identifier: MIT */
/*
 * A table of objects named by index plus key, as an HCA names memory
 * regions and windows (IBA 10.6.3.1, 10.6.7.2.3).  A key is 32 bits:
 *
 *   bits 0-7    the variant, the consumer-owned "key" of IBA 10.6.7.2.3:
 *               per index, changed each time the index is reused, so a
 *               stale key never names the object that took its place
 *               until the index has been reused 256 times; a window's
 *               binds change it (ibv_inc_rkey, type 2's consumer key)
 *   bits 8-25   the number: which object (the caller's, from the index)
 *   bits 26-31  the tag, drawn at random for each key handed out
 *
 * Variants start at random, the search for a free index too, and the tag
 * is new each time, so that no key can be told in advance (the first
 * region of a process has no fixed key); a lookup compares the whole key,
 * so a key with the right number and another tag or variant names
 * nothing.  The caller builds its keys with key_table_key().
 *
 * Lock rule: the owner's lock serialises every call but key_table_get,
 * which may run without it (an acquire load of an entry stored with
 * release order); find and take are one step under that lock.
 */
#ifndef IBEMU_KEY_TABLE_H
#define IBEMU_KEY_TABLE_H

#include <stdatomic.h>
#include <stdint.h>

#define KEY_VARIANT_MASK 0xffu
#define KEY_NUM_SHIFT 8
#define KEY_NUM_BITS 18
#define KEY_NUM_MASK ((1u << KEY_NUM_BITS) - 1)
#define KEY_TAG_SHIFT (KEY_NUM_SHIFT + KEY_NUM_BITS)

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
/* A free index, the next one on from the last taken, and the key part of
 * its next key (its variant and a fresh random tag): 0, or ENOMEM when
 * all are used.  The caller names obj's key from them (key_table_key),
 * then takes the index: obj is stored last, for lockless lookups. */
int key_table_find(const struct key_table *t, uint32_t *index_p,
		   uint32_t *part_p);
void key_table_take(struct key_table *t, uint32_t index, void *obj);
/* Put obj (or NULL) at index, which stays in use. */
void key_table_put(struct key_table *t, uint32_t index, void *obj);
/* Give index back: its entry goes and its variant moves on. */
void key_table_free(struct key_table *t, uint32_t index);

/* The key of number num (below 1 << KEY_NUM_BITS) with key part part. */
static inline uint32_t key_table_key(uint32_t num, uint32_t part)
{
	return part | (num & KEY_NUM_MASK) << KEY_NUM_SHIFT;
}

/* The number a key carries. */
static inline uint32_t key_num(uint32_t key)
{
	return key >> KEY_NUM_SHIFT & KEY_NUM_MASK;
}

/* The object at index, or NULL (index out of range included). */
static inline void *key_table_get(const struct key_table *t, uint32_t index)
{
	if (index >= t->size || !t->slot)
		return NULL;
	return atomic_load_explicit(&t->slot[index], memory_order_acquire);
}

#endif /* IBEMU_KEY_TABLE_H */
