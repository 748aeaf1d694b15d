// SPDX-License-Identifier: MIT
/*
 * The device injection shim (doc/design.md §1 "The injection shim").
 *
 * libibverbs finds devices only through netlink/sysfs and opens them
 * through /dev/infiniband.  Loaded with LD_PRELOAD, this file interposes
 * the few stock entry points that either enumerate devices or read sysfs
 * for a device, and serves ibemu's device itself; every other verb reaches
 * the provider through the ops table that alloc_context installs.
 *
 * Each interposer carries the symbol version of the stock function it
 * stands for (libibemu.map), and falls through to that function, found
 * with dlvsym() in libibverbs's scope (verbs_scope_find), when the object
 * is not ibemu's.
 *
 * The private ABI is resolved at run time (pabi/select.c): if this
 * libibverbs has a layout ibemu does not carry, nothing is injected and
 * the program runs as if ibemu were absent, after one line on stderr
 * saying why.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <endian.h>

#include "ibemu.h"
#include "layout.h"
#include "log.h"

typedef struct ibv_device **(*get_device_list_fn)(int *num);
typedef struct ibv_comp_channel *(*create_comp_channel_fn)(
	struct ibv_context *context);
typedef struct ibv_context *(*import_device_fn)(int cmd_fd);
typedef struct ibv_context *(*open_device_fn)(struct ibv_device *device);
typedef int (*query_gid_fn)(struct ibv_context *context, uint8_t port_num,
			    int index, union ibv_gid *gid);
typedef int (*query_pkey_fn)(struct ibv_context *context, uint8_t port_num,
			     int index, __be16 *pkey);
typedef __be64 (*get_device_guid_fn)(struct ibv_device *device);
typedef int (*get_device_index_fn)(struct ibv_device *device);
typedef int (*query_gid_ex_fn)(struct ibv_context *context, uint32_t port_num,
			       uint32_t gid_index, struct ibv_gid_entry *entry,
			       uint32_t flags, size_t entry_size);
typedef ssize_t (*query_gid_table_fn)(struct ibv_context *context,
				      struct ibv_gid_entry *entries,
				      size_t max_entries, uint32_t flags,
				      size_t entry_size);

/* The stock functions the interposers stand for. */
static struct {
	get_device_list_fn get_device_list;
	create_comp_channel_fn create_comp_channel;
	import_device_fn import_device;
	open_device_fn open_device;
	query_gid_fn query_gid;
	query_pkey_fn query_pkey;
	get_device_guid_fn get_device_guid;
	get_device_index_fn get_device_index;
	query_gid_ex_fn query_gid_ex;
	query_gid_table_fn query_gid_table;
} real;

/*
 * Lock rule: shim_lock serializes shim_init.  real, pabi, verbs_scope and
 * shim_enabled are written only under it, before shim_resolved is set
 * (release), and only read after shim_resolved was seen set (acquire):
 * from then on they never change.  Until libibverbs is found every
 * interposer call looks again, for it may come into the process after the
 * first call (a program without it can reach the preload's functions by
 * dlsym(RTLD_DEFAULT), then dlopen a plug-in that has it).
 */
static pthread_mutex_t shim_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool shim_resolved;
static bool shim_enabled;
/* Set while ibv_import_device runs: it must see only real devices. */
static __thread bool shim_suppress;

/*
 * Where the stock functions are: next in the global scope when libibverbs
 * is linked or loaded RTLD_GLOBAL; otherwise it was loaded RTLD_LOCAL,
 * as a dependency of a dlopen'd plug-in (a Python extension, a UCX or
 * Open MPI component), and only a handle reaches it.  RTLD_NOLOAD finds
 * it wherever it is loaded and never loads it into a program without it;
 * an interposer runs only when verbs code calls it, so it is there.
 */
static void *verbs_scope = RTLD_NEXT;

static void verbs_scope_find(void)
{
	void *h;

	if (dlvsym(RTLD_NEXT, "ibv_get_device_list", "IBVERBS_1.1"))
		return;
	h = dlopen("libibverbs.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (h)
		verbs_scope = h; /* held for the life of the process */
}

static void *real_sym(const char *name, const char *version)
{
	return dlvsym(verbs_scope, name, version);
}

static void shim_init(void)
{
	verbs_scope_find();
	real.get_device_list = real_sym("ibv_get_device_list", "IBVERBS_1.1");
	real.create_comp_channel =
		real_sym("ibv_create_comp_channel", "IBVERBS_1.0");
	real.import_device = real_sym("ibv_import_device", "IBVERBS_1.10");
	real.open_device = real_sym("ibv_open_device", "IBVERBS_1.1");
	real.query_gid = real_sym("ibv_query_gid", "IBVERBS_1.1");
	real.query_pkey = real_sym("ibv_query_pkey", "IBVERBS_1.1");
	real.get_device_guid = real_sym("ibv_get_device_guid", "IBVERBS_1.1");
	real.get_device_index = real_sym("ibv_get_device_index", "IBVERBS_1.9");
	real.query_gid_ex = real_sym("_ibv_query_gid_ex", "IBVERBS_1.11");
	real.query_gid_table = real_sym("_ibv_query_gid_table", "IBVERBS_1.11");
	if (!real.get_device_list)
		return; /* libibverbs is not in this process */
	shim_enabled = pabi_select(real_sym, (void *)real.get_device_list);
}

/* Whether libibverbs is in the process (real and pabi are then set). */
static bool shim_ensure_init(void)
{
	if (atomic_load_explicit(&shim_resolved, memory_order_acquire))
		return true;
	pthread_mutex_lock(&shim_lock);
	if (!atomic_load_explicit(&shim_resolved, memory_order_relaxed)) {
		shim_init();
		if (real.get_device_list)
			atomic_store_explicit(&shim_resolved, true,
					      memory_order_release);
	}
	pthread_mutex_unlock(&shim_lock);
	return atomic_load_explicit(&shim_resolved, memory_order_relaxed);
}

void *ibemu_verbs_sym(const char *name, const char *version)
{
	if (!shim_ensure_init())
		return NULL;
	return real_sym(name, version);
}

bool ibemu_is_ours(const struct ibv_context *context)
{
	return context && context->device &&
	       context->device == ibemu_device_get();
}

IBEMU_EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **list, **out;
	struct ibv_device *ours;
	int n = 0, i;

	if (!shim_ensure_init()) {
		errno = ENOSYS;
		return NULL;
	}
	list = real.get_device_list(&n);
	if (!shim_enabled || shim_suppress)
		goto real_only;
	ours = ibemu_device_get();
	if (!ours)
		goto real_only;
	/* Without RDMA hardware or kernel modules, stock libibverbs fails
	 * (ENOSYS: no uverbs ABI in sysfs); ibemu's device is then the only
	 * one.  Stock ibv_free_device_list frees the array with free() and
	 * drops one reference per entry: hand it a malloc'd array whose
	 * entries each hold one. */
	if (!list)
		n = 0;
	out = calloc((size_t)n + 2, sizeof(*out));
	if (!out)
		goto real_only;
	for (i = 0; i < n; i++)
		out[i] = list[i];
	free(list);
	atomic_fetch_add(&to_edev(ours)->vdev.refcount, 1);
	out[n++] = ours;
	ibemu_devnode_offer();
	if (num)
		*num = n;
	return out;

real_only:
	if (num)
		*num = list ? n : 0;
	return list;
}

/*
 * ibv_open_device: ibemu's device is opened by libibverbs, except where
 * the process's libibverbs cannot open a device without sysfs (rdma-core
 * 36, open_own.c).
 */
static struct ibv_context *shim_open(struct ibv_device *device)
{
	if (shim_enabled && pabi.layout->open_needs_sysfs && device &&
	    device == ibemu_device_get())
		return ibemu_open_own(device);
	if (!real.open_device) {
		errno = ENOSYS;
		return NULL;
	}
	return real.open_device(device);
}

IBEMU_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	if (!shim_ensure_init()) {
		errno = ENOSYS;
		return NULL;
	}
	return shim_open(device);
}

/* rdma-core 36 reads the index from the device's sysfs description;
 * 37 on answer -1 for a device without one, as here. */
IBEMU_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	if (!shim_ensure_init())
		return -1;
	if (device && device == ibemu_device_get())
		return -1;
	return real.get_device_index ? real.get_device_index(device) : -1;
}

IBEMU_EXPORT struct ibv_context *ibv_import_device(int cmd_fd)
{
	struct ibv_context *ctx;

	if (!shim_ensure_init()) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* An ibemu context's command fd (provider/import.c). */
	if (shim_enabled) {
		ctx = ibemu_import_device(cmd_fd, shim_open);
		if (ctx || errno != EBADF)
			return ctx;
	}
	if (!real.import_device) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	/* Stock import matches the fd against every device's sysfs cdev,
	 * which ibemu's device does not have: it is hidden meanwhile. */
	shim_suppress = true;
	ctx = real.import_device(cmd_fd);
	shim_suppress = false;
	return ctx;
}

/*
 * A completion channel is a pipe reopened O_RDWR through /proc/self/fd:
 * one fd that ibv_get_cq_event() reads 8-byte CQ handles from, that the
 * provider writes to, and that stock ibv_destroy_comp_channel() closes.
 */
int ibemu_pipe_rdwr(int *fd_p)
{
	char path[64];
	int p[2], fd;

	if (pipe2(p, O_CLOEXEC))
		return -errno;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", p[0]);
	fd = open(path, O_RDWR | O_CLOEXEC);
	close(p[0]);
	close(p[1]);
	if (fd < 0)
		return -errno;
	*fd_p = fd;
	return 0;
}

IBEMU_EXPORT struct ibv_comp_channel *
ibv_create_comp_channel(struct ibv_context *context)
{
	struct ibv_comp_channel *channel;
	int ret;

	if (!shim_ensure_init()) {
		errno = ENOSYS;
		return NULL;
	}
	if (!ibemu_is_ours(context)) {
		if (!real.create_comp_channel) {
			errno = ENOSYS;
			return NULL;
		}
		return real.create_comp_channel(context);
	}
	/* Stock ibv_destroy_comp_channel() frees it with free(). */
	channel = malloc(sizeof(*channel));
	if (!channel) {
		errno = ENOMEM;
		return NULL;
	}
	ret = ibemu_pipe_rdwr(&channel->fd);
	if (ret) {
		ibemu_log_err("completion channel: %s", strerror(-ret));
		free(channel);
		errno = -ret;
		return NULL;
	}
	channel->context = context;
	channel->refcnt = 0;
	return channel;
}

IBEMU_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	if (!shim_ensure_init())
		return 0;
	if (device && device == ibemu_device_get())
		return htobe64(emu_node_guid());
	return real.get_device_guid ? real.get_device_guid(device) : 0;
}

IBEMU_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num,
			       int index, union ibv_gid *gid)
{
	struct ibv_gid_entry entry;
	int ret;

	if (!shim_ensure_init()) {
		errno = ENOSYS;
		return -1;
	}
	if (!ibemu_is_ours(context)) {
		if (!real.query_gid) {
			errno = ENOSYS;
			return -1;
		}
		return real.query_gid(context, port_num, index, gid);
	}
	if (index < 0) {
		errno = EINVAL;
		return -1;
	}
	ret = ibemu_query_gid_entry(context, port_num, (uint32_t)index, &entry);
	if (ret == ENODATA) {
		/* An empty entry reads as the zero GID, as stock does. */
		memset(gid, 0, sizeof(*gid));
		return 0;
	}
	if (ret) {
		errno = ret;
		return -1;
	}
	memcpy(gid, &entry.gid, sizeof(*gid));
	return 0;
}

IBEMU_EXPORT int ibv_query_pkey(struct ibv_context *context, uint8_t port_num,
				int index, __be16 *pkey)
{
	uint16_t val;
	int ret;

	if (!shim_ensure_init()) {
		errno = ENOSYS;
		return -1;
	}
	if (!ibemu_is_ours(context)) {
		if (!real.query_pkey) {
			errno = ENOSYS;
			return -1;
		}
		return real.query_pkey(context, port_num, index, pkey);
	}
	ret = ibemu_query_pkey_value(context, port_num, index, &val);
	if (ret) {
		errno = ret;
		return -1;
	}
	*pkey = htobe16(val);
	return 0;
}

/* ibv_query_gid_ex() is an inline wrapper around this one. */
IBEMU_EXPORT int _ibv_query_gid_ex(struct ibv_context *context,
				   uint32_t port_num, uint32_t gid_index,
				   struct ibv_gid_entry *entry, uint32_t flags,
				   size_t entry_size)
{
	struct ibv_gid_entry e;
	int ret;

	if (!shim_ensure_init()) {
		return ENOSYS;
	}
	if (!ibemu_is_ours(context))
		return real.query_gid_ex ? real.query_gid_ex(context, port_num,
							     gid_index, entry,
							     flags, entry_size)
					 : ENOSYS;
	if (flags || !entry || entry_size < sizeof(e))
		return EINVAL;
	ret = ibemu_query_gid_entry(context, port_num, gid_index, &e);
	if (ret)
		return ret;
	memset(entry, 0, entry_size);
	memcpy(entry, &e, sizeof(e));
	return 0;
}

/* ibv_query_gid_table() is an inline wrapper around this one. */
IBEMU_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *context,
					  struct ibv_gid_entry *entries,
					  size_t max_entries, uint32_t flags,
					  size_t entry_size)
{
	struct ibv_port_attr pattr;
	struct ibv_gid_entry e;
	ssize_t n = 0;
	uint8_t port;
	int idx;

	if (!shim_ensure_init()) {
		return -ENOSYS;
	}
	if (!ibemu_is_ours(context))
		return real.query_gid_table
			       ? real.query_gid_table(context, entries,
						      max_entries, flags,
						      entry_size)
			       : -ENOSYS;
	if (flags || (!entries && max_entries) || entry_size < sizeof(e))
		return -EINVAL;
	for (port = 1; port <= emu_nr_ports(); port++) {
		if (ibemu_query_port(context, port, &pattr))
			return -EINVAL;
		for (idx = 0; idx < pattr.gid_tbl_len; idx++) {
			if (ibemu_query_gid_entry(context, port, idx, &e))
				continue; /* empty entry */
			if ((size_t)n >= max_entries)
				return -EINVAL;
			memset((char *)entries + n * entry_size, 0, entry_size);
			memcpy((char *)entries + n * entry_size, &e, sizeof(e));
			n++;
		}
	}
	return n;
}

bool ibemu_shim_enabled(void)
{
	return shim_ensure_init() && shim_enabled;
}

int ibemu_set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	return 0;
}
