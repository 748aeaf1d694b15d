// SPDX-License-Identifier: MIT
/*
 * Address vectors (IBA 10.2.2.1; manual 3.6.11-3.6.12).  An address
 * handle is a slot of the HCA's table holding a copy of its vector; a UD
 * work request names it by handle and the HCA copies the vector into the
 * WQE at post time, so destroying the AH afterwards cannot change or
 * break a queued datagram.
 *
 * Lock rule: hca.lock protects ah_table and ah_cursor; ah_copy() reads an
 * entry under it too (UD posting is not the fast path).
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>

#include "hca.h"
#include "log.h"

/* Shared by create_ah and modify_qp(IBV_QP_AV); returns 0 or EINVAL. */
int emu_av_check(const struct ibv_ah_attr *attr)
{
	if (!emu_port_valid(attr->port_num)) {
		ibemu_log_dbg("ah_attr: port_num %u", attr->port_num);
		return EINVAL;
	}
	if (attr->is_global && attr->grh.sgid_index >= IBEMU_GID_TBL_LEN) {
		ibemu_log_dbg("ah_attr: sgid_index %u", attr->grh.sgid_index);
		return EINVAL;
	}
	/* 4-bit service level (IBA 7.6.5). */
	if (attr->sl > 15) {
		ibemu_log_dbg("ah_attr: sl %u", attr->sl);
		return EINVAL;
	}
	return 0;
}

/* Handles are 1..IBEMU_MAX_AH: 0 names no AH. */
int emu_ah_create(struct emu_hca *hca, const struct ibv_ah_attr *attr,
		  uint32_t *handle_p)
{
	struct ibv_ah_attr *av;
	uint32_t n, idx;
	int ret;

	ret = emu_av_check(attr);
	if (ret)
		return ret;
	av = malloc(sizeof(*av));
	if (!av)
		return ENOMEM;
	*av = *attr;
	pthread_mutex_lock(&hca->lock);
	if (!hca->ah_table)
		hca->ah_table = calloc(IBEMU_MAX_AH, sizeof(*hca->ah_table));
	for (n = 0; hca->ah_table && n < IBEMU_MAX_AH; n++) {
		idx = (hca->ah_cursor + n) % IBEMU_MAX_AH;
		if (hca->ah_table[idx])
			continue;
		hca->ah_table[idx] = av;
		hca->ah_cursor = (idx + 1) % IBEMU_MAX_AH;
		pthread_mutex_unlock(&hca->lock);
		*handle_p = idx + 1;
		return 0;
	}
	pthread_mutex_unlock(&hca->lock);
	free(av);
	return ENOMEM;
}

void emu_ah_destroy(struct emu_hca *hca, uint32_t handle)
{
	struct ibv_ah_attr *av = NULL;

	pthread_mutex_lock(&hca->lock);
	if (hca->ah_table && handle >= 1 && handle <= IBEMU_MAX_AH) {
		av = hca->ah_table[handle - 1];
		hca->ah_table[handle - 1] = NULL;
	}
	pthread_mutex_unlock(&hca->lock);
	free(av);
}

bool ah_copy(struct emu_hca *hca, uint32_t handle, struct ibv_ah_attr *av)
{
	bool found = false;

	pthread_mutex_lock(&hca->lock);
	if (hca->ah_table && handle >= 1 && handle <= IBEMU_MAX_AH &&
	    hca->ah_table[handle - 1]) {
		*av = *hca->ah_table[handle - 1];
		found = true;
	}
	pthread_mutex_unlock(&hca->lock);
	return found;
}

void ah_table_fini(struct emu_hca *hca)
{
	unsigned int i;

	if (!hca->ah_table)
		return;
	for (i = 0; i < IBEMU_MAX_AH; i++)
		free(hca->ah_table[i]);
	free(hca->ah_table);
	hca->ah_table = NULL;
}
