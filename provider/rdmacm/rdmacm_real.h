/* SPDX-License-Identifier: MIT */
/*
 * Ids on the kernel's RDMA devices go to the real librdmacm
 * (rdmacm_real.c); ibemu's CM takes the rest.
 *
 * The preload defines every rdma_* function, so the real librdmacm's
 * calls of its own exported functions (rdma_create_ep calling
 * rdma_create_id, ...) reach the preload too.  While the face is inside
 * a call of the real library, cm_real_depth is not 0 and every rdma_*
 * function of the preload passes straight to the real one: the thread
 * is in the real library's own code path.
 */
#ifndef IBEMU_RDMACM_REAL_H
#define IBEMU_RDMACM_REAL_H

#include <stdbool.h>
#include <rdma/rdma_cma.h>

#include "rdmacm_face.h"

/* The real librdmacm's functions (its symbol versions). */
struct cm_real_ops {
	struct rdma_event_channel *(*create_event_channel)(void);
	void (*destroy_event_channel)(struct rdma_event_channel *ch);
	int (*create_id)(struct rdma_event_channel *ch, struct rdma_cm_id **id,
			 void *context, enum rdma_port_space ps);
	int (*destroy_id)(struct rdma_cm_id *id);
	int (*bind_addr)(struct rdma_cm_id *id, struct sockaddr *addr);
	int (*resolve_addr)(struct rdma_cm_id *id, struct sockaddr *src,
			    struct sockaddr *dst, int timeout_ms);
	int (*resolve_route)(struct rdma_cm_id *id, int timeout_ms);
	int (*listen)(struct rdma_cm_id *id, int backlog);
	int (*get_cm_event)(struct rdma_event_channel *ch,
			    struct rdma_cm_event **event);
	int (*ack_cm_event)(struct rdma_cm_event *event);
	int (*init_qp_attr)(struct rdma_cm_id *id, struct ibv_qp_attr *attr,
			    int *mask);
	int (*create_qp)(struct rdma_cm_id *id, struct ibv_pd *pd,
			 struct ibv_qp_init_attr *attr);
	int (*create_qp_ex)(struct rdma_cm_id *id,
			    struct ibv_qp_init_attr_ex *attr);
	void (*destroy_qp)(struct rdma_cm_id *id);
	int (*create_srq)(struct rdma_cm_id *id, struct ibv_pd *pd,
			  struct ibv_srq_init_attr *attr);
	int (*create_srq_ex)(struct rdma_cm_id *id,
			     struct ibv_srq_init_attr_ex *attr);
	void (*destroy_srq)(struct rdma_cm_id *id);
	int (*connect)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*accept)(struct rdma_cm_id *id, struct rdma_conn_param *p);
	int (*reject)(struct rdma_cm_id *id, const void *data, uint8_t len);
	int (*reject_ece)(struct rdma_cm_id *id, const void *data,
			  uint8_t len);
	int (*establish)(struct rdma_cm_id *id);
	int (*notify)(struct rdma_cm_id *id, enum ibv_event_type event);
	int (*disconnect)(struct rdma_cm_id *id);
	int (*get_request)(struct rdma_cm_id *listen, struct rdma_cm_id **id);
	int (*migrate_id)(struct rdma_cm_id *id,
			  struct rdma_event_channel *ch);
	int (*set_option)(struct rdma_cm_id *id, int level, int optname,
			  void *optval, size_t optlen);
	int (*set_local_ece)(struct rdma_cm_id *id, struct ibv_ece *ece);
	int (*get_remote_ece)(struct rdma_cm_id *id, struct ibv_ece *ece);
	int (*join_multicast)(struct rdma_cm_id *id, struct sockaddr *addr,
			      void *context);
	int (*join_multicast_ex)(struct rdma_cm_id *id,
				 struct rdma_cm_join_mc_attr_ex *attr,
				 void *context);
	int (*leave_multicast)(struct rdma_cm_id *id, struct sockaddr *addr);
	struct ibv_context **(*get_devices)(int *num);
	void (*free_devices)(struct ibv_context **list);
	int (*getaddrinfo)(const char *node, const char *service,
			   const struct rdma_addrinfo *hints,
			   struct rdma_addrinfo **res);
	void (*freeaddrinfo)(struct rdma_addrinfo *res);
	int (*create_ep)(struct rdma_cm_id **id, struct rdma_addrinfo *res,
			 struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	void (*destroy_ep)(struct rdma_cm_id *id);
};

extern struct cm_real_ops cm_real;
extern __thread unsigned int cm_real_depth;

/* Whether the kernel's rdma_cm is in the process's view and the real
 * librdmacm was found (decided once). */
bool cm_real_open(void);

static inline bool cm_real_inside(void)
{
	return cm_real_depth != 0;
}

/* A call of the real library, marked as inside it. */
#define CM_REAL(call)                                                          \
	({                                                                     \
		__typeof__(call) r_;                                           \
		cm_real_depth++;                                               \
		r_ = (call);                                                   \
		cm_real_depth--;                                               \
		r_;                                                            \
	})
#define CM_REAL_VOID(call)                                                     \
	do {                                                                   \
		cm_real_depth++;                                               \
		(call);                                                        \
		cm_real_depth--;                                               \
	} while (0)

static inline bool face_is_real(struct rdma_cm_id *id)
{
	return id && to_fid(id)->where == FACE_REAL;
}

void face_real_mirror(struct face_id *fid);

/* The result of a real call on fid's twin, after the mirror. */
static inline int face_real_int(struct face_id *fid, int ret)
{
	face_real_mirror(fid);
	return ret;
}

/* id's real twin does fn (the twin first, then args), mirrored after. */
#define FACE_REAL_CALL(id, fn, ...)                                            \
	face_real_int(to_fid(id),                                              \
		      CM_REAL(cm_real.fn(to_fid(id)->real, ##__VA_ARGS__)))

/*
 * The dispatch every rdma_* function opens with; each returns from the
 * function it is used in when the call is not ibemu's.  A thread inside
 * the real library passes straight to the real fn with the function's
 * own arguments (FACE_PASS, FACE_PASS_VOID).  FACE_DISPATCH goes on to
 * hand an id that lives on the real side to its twin (FACE_REAL_CALL:
 * fn's arguments are id and the rest); FACE_DISPATCH_STARTED does so
 * for a call that starts something, for which a synchronous id then
 * waits (face_started); FACE_DISPATCH_VOID for fn(id) returning
 * nothing.  What is left after them is ibemu's.
 */
#define FACE_PASS(fn, ...)                                                     \
	do {                                                                   \
		if (cm_real_inside())                                          \
			return cm_real.fn(__VA_ARGS__);                        \
	} while (0)
#define FACE_PASS_VOID(fn, ...)                                                \
	do {                                                                   \
		if (cm_real_inside()) {                                        \
			cm_real.fn(__VA_ARGS__);                               \
			return;                                                \
		}                                                              \
	} while (0)
#define FACE_DISPATCH(fn, id, ...)                                             \
	do {                                                                   \
		FACE_PASS(fn, id, ##__VA_ARGS__);                              \
		if (face_is_real(id))                                          \
			return FACE_REAL_CALL(id, fn, ##__VA_ARGS__);          \
	} while (0)
#define FACE_DISPATCH_STARTED(fn, id, ...)                                     \
	do {                                                                   \
		FACE_PASS(fn, id, ##__VA_ARGS__);                              \
		if (face_is_real(id))                                          \
			return face_started(                                   \
				to_fid(id),                                    \
				FACE_REAL_CALL(id, fn, ##__VA_ARGS__));        \
	} while (0)
#define FACE_DISPATCH_VOID(fn, id)                                             \
	do {                                                                   \
		FACE_PASS_VOID(fn, id);                                        \
		if (face_is_real(id)) {                                        \
			CM_REAL_VOID(cm_real.fn(to_fid(id)->real));            \
			face_real_mirror(to_fid(id));                          \
			return;                                                \
		}                                                              \
	} while (0)

/* A channel gets its real twin (0, or errno: the channel stays ibemu's
 * only); the twin goes with the channel. */
int face_real_chan_open(struct face_chan *fch);
void face_real_chan_close(struct face_chan *fch);
/* An id gets its real twin on its channel's (where becomes FACE_BOTH);
 * without one it stays FACE_EMU. */
void face_real_id_create(struct face_id *fid, struct face_chan *fch);
/* Which side an id of FACE_BOTH takes for a local address (bind, listen)
 * or for a destination (resolve); the other side is destroyed.  Any
 * address keeps both. */
void face_real_route_local(struct face_id *fid, const struct sockaddr *addr);
void face_real_route_dst(struct face_id *fid, const struct sockaddr *src,
			 const struct sockaddr *dst);
/* The real id's fields the application reads are copied to the face's
 * by face_real_mirror.  Keep one side of an id of FACE_BOTH. */
void face_real_keep(struct face_id *fid, enum face_where where);
/* The next real event of fch as a face event: 0, EAGAIN (none), or an
 * errno. */
int face_real_get_event(struct face_chan *fch, struct rdma_cm_event **event);
/* Wait until either side of fch has an event: 0, or EAGAIN when the
 * application made the channel non-blocking. */
int face_real_wait(struct face_chan *fch);
/* The kernel's devices beside ibemu0 for rdma_get_devices: list (n
 * entries, NULL-terminated, room for extra more) gets them appended. */
struct ibv_context **face_real_devices(struct ibv_context **list, int *n);
void face_real_free_devices(struct ibv_context **list);

#endif /* IBEMU_RDMACM_REAL_H */
