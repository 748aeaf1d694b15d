// SPDX-License-Identifier: MIT
/* The index-plus-key table (key_table.h). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "key_table.h"

int key_table_init(struct key_table *t, uint32_t size)
{
	t->slot = calloc(size, sizeof(*t->slot));
	t->variant = calloc(size, sizeof(*t->variant));
	t->size = size;
	t->cursor = 0;
	t->used = 0;
	if (!t->slot || !t->variant) {
		key_table_fini(t);
		return ENOMEM;
	}
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
		   uint8_t *variant_p)
{
	uint32_t n, idx;

	for (n = 0; t->used < t->size && n < t->size; n++) {
		idx = (t->cursor + n) % t->size;
		if (atomic_load_explicit(&t->slot[idx], memory_order_relaxed))
			continue;
		*index_p = idx;
		*variant_p = t->variant[idx];
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
