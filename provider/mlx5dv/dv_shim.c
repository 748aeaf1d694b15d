// SPDX-License-Identifier: MIT
/*
 * libmlx5's direct-verbs entry points, interposed as the verbs face
 * interposes libibverbs' (doc/design.md §1): each carries the version
 * of the libmlx5 symbol it stands for (libibemu.map), answers for
 * ibemu's objects, and hands everything else to the stock libmlx5,
 * found however it was loaded (a program's dependency, or libibverbs'
 * dlopen of its provider).  A program that never loads libmlx5 never
 * calls these.
 *
 * Of libmlx5's other entry points none need interposing: each asks
 * the context's provider first and answers EOPNOTSUPP for a device
 * that is not an mlx5 one (rdma-core's mlx5_get_dv_ops()).
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>

#include "dv.h"
#include "log.h"

/* The stock libmlx5's definition of name@version, or NULL. */
static void *dv_real(const char *name, const char *version)
{
	void *h = dlopen("libmlx5.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *f;

	if (!h)
		return NULL;
	f = dlvsym(h, name, version);
	dlclose(h);
	return f;
}

/* Look the stock function up once into slot. */
#define DV_REAL(slot, name, version)                                           \
	({                                                                     \
		void *f_ = atomic_load_explicit(&(slot), memory_order_acquire); \
		if (!f_) {                                                     \
			f_ = dv_real(name, version);                           \
			atomic_store_explicit(&(slot), f_,                     \
					      memory_order_release);           \
		}                                                              \
		f_;                                                            \
	})

static bool dv_device_ours(struct ibv_device *device)
{
	return device && device == ibemu_device_get();
}

IBEMU_EXPORT bool mlx5dv_is_supported(struct ibv_device *device)
{
	static void *_Atomic real;
	bool (*f)(struct ibv_device *);

	if (dv_device_ours(device))
		return true;
	f = DV_REAL(real, "mlx5dv_is_supported", "MLX5_1.8");
	return f ? f(device) : false;
}

IBEMU_EXPORT struct ibv_context *
mlx5dv_open_device(struct ibv_device *device, struct dv_context_attr *attr)
{
	static void *_Atomic real;
	struct ibv_context *(*f)(struct ibv_device *,
				 struct dv_context_attr *);

	if (dv_device_ours(device))
		return ibemu_dv_open_device(device, attr);
	f = DV_REAL(real, "mlx5dv_open_device", "MLX5_1.7");
	if (!f) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return f(device, attr);
}

IBEMU_EXPORT int mlx5dv_query_device(struct ibv_context *context,
				     struct dv_context *attrs)
{
	static void *_Atomic real;
	int (*f)(struct ibv_context *, struct dv_context *);

	if (ibemu_is_ours(context))
		return ibemu_dv_query_device(context, attrs);
	f = DV_REAL(real, "mlx5dv_query_device", "MLX5_1.0");
	return f ? f(context, attrs) : EOPNOTSUPP;
}

IBEMU_EXPORT struct ibv_qp *
mlx5dv_create_qp(struct ibv_context *context, struct ibv_qp_init_attr_ex *attr,
		 struct dv_qp_init_attr *dv_attr)
{
	static void *_Atomic real;
	struct ibv_qp *(*f)(struct ibv_context *, struct ibv_qp_init_attr_ex *,
			    struct dv_qp_init_attr *);

	if (ibemu_is_ours(context))
		return ibemu_dv_create_qp(context, attr, dv_attr);
	f = DV_REAL(real, "mlx5dv_create_qp", "MLX5_1.3");
	if (!f) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	return f(context, attr, dv_attr);
}

IBEMU_EXPORT struct dv_qp_ex *mlx5dv_qp_ex_from_ibv_qp_ex(struct ibv_qp_ex *qpx)
{
	static void *_Atomic real;
	struct dv_qp_ex *(*f)(struct ibv_qp_ex *);

	if (qpx && ibemu_is_ours(qpx->qp_base.context))
		return ibemu_dv_qp_ex(qpx);
	f = DV_REAL(real, "mlx5dv_qp_ex_from_ibv_qp_ex", "MLX5_1.10");
	return f ? f(qpx) : NULL;
}

IBEMU_EXPORT struct dv_mkey *mlx5dv_create_mkey(struct dv_mkey_init_attr *attr)
{
	static void *_Atomic real;
	struct dv_mkey *(*f)(struct dv_mkey_init_attr *);

	if (attr && attr->pd && ibemu_is_ours(attr->pd->context))
		return ibemu_dv_create_mkey(attr);
	f = DV_REAL(real, "mlx5dv_create_mkey", "MLX5_1.10");
	if (!f || !attr) {
		errno = f ? EINVAL : EOPNOTSUPP;
		return NULL;
	}
	return f(attr);
}

IBEMU_EXPORT int mlx5dv_destroy_mkey(struct dv_mkey *mkey)
{
	static void *_Atomic real;
	int (*f)(struct dv_mkey *);
	int ret = ibemu_dv_destroy_mkey(mkey);

	if (ret != ENOENT)
		return ret;
	f = DV_REAL(real, "mlx5dv_destroy_mkey", "MLX5_1.10");
	return f ? f(mkey) : EOPNOTSUPP;
}
