/* SPDX-License-Identifier: MIT */
/*
 * The librdmacm face's objects and what its files share (rdmacm.c and
 * the rdmacm_*.c beside it), shared too with the forwarding of ids on
 * the kernel's RDMA devices to the real librdmacm (rdmacm_real.c).
 */
#ifndef IBEMU_RDMACM_FACE_H
#define IBEMU_RDMACM_FACE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <rdma/rdma_cma.h>

#include "cm.h"

/*
 * An event channel.  With the kernel's rdma_cm in the process's view
 * (rdmacm_real.h) it is two: the emulator's and a real librdmacm
 * channel, and the descriptor the application polls is an epoll set of
 * both (emu_fd and real->fd, both non-blocking; whether the application
 * wants to block is the set's O_NONBLOCK).
 */
struct face_chan {
	struct rdma_event_channel ch;
	struct emu_cm_chan *emu;
	int emu_fd; /* the emulator channel's descriptor */
	struct rdma_event_channel *real; /* NULL: ibemu's only */
	/* under face_chan_lock (rdmacm_event.c): threads in rdma_get_cm_event;
	 * destroyed (rdma_get_cm_event fails with EBADF); whether the
	 * last reader out frees it (it left the kept destroyed ones) */
	unsigned int readers;
	bool dead, orphan;
};

/*
 * Where an id lives: ibemu's CM, the real librdmacm, or, until an
 * address decides (rdmacm_real.c face_real_route), both; a listener on
 * any address stays on both.
 */
enum face_where {
	FACE_EMU,
	FACE_BOTH,
	FACE_REAL,
};

struct face_id {
	struct rdma_cm_id id;
	struct emu_cm_id *emu; /* NULL when FACE_REAL */
	struct rdma_cm_id *real; /* the real librdmacm's; NULL: FACE_EMU */
	enum face_where where;
	bool sync; /* made without a channel: id.channel is its own */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned int acked; /* events acknowledged; under lock */
	/* from the connection request: what the peer allows */
	uint8_t resp_res, init_depth;
	struct ibv_sa_path_rec path;
	/* rdma_create_ep of a listener: the QP each request gets */
	struct ibv_qp_init_attr *qp_init_attr;
	struct ibv_ece local_ece;
};

struct face_event {
	struct rdma_cm_event ev;
	struct face_id *counted; /* whose count the ack settles */
	struct rdma_cm_event *real; /* the real librdmacm's event, or NULL */
	uint8_t private_data[EMU_CM_PRIVATE_MAX];
};

static inline struct face_id *to_fid(struct rdma_cm_id *id)
{
	return (struct face_id *)id;
}

static inline struct face_chan *to_fch(struct rdma_event_channel *ch)
{
	return (struct face_chan *)ch;
}

/* rdmacm.c */
struct face_id *face_id_new(struct face_chan *fch, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type);
void face_id_free(struct face_id *fid);
/* -1 with errno err. */
int face_err(int err);
/* id's addresses and route as the emulator has them. */
void face_sync_route(struct face_id *fid);

/* rdmacm_qp.c: the device, once face_init has opened it */
extern struct ibv_context *face_verbs;
extern struct ibv_pd *face_pd;
extern struct emu_hca *face_hca;
extern uint8_t face_max_rd_atom, face_max_init_rd_atom;
/* Resolve libibverbs and open ibemu0 once; 0 or a positive errno. */
int face_init(void);
/* The id's QP moved for a connection: 0 or the verb's error. */
int face_modify_rtr(struct face_id *fid, uint8_t resp_res);
int face_modify_rts(struct face_id *fid, uint8_t init_depth);
int face_modify_err(struct face_id *fid);

/* rdmacm_event.c: a synchronous id waits for the event of what it
 * started; a call that starts something on a real id, whose result is
 * ret, then waits as on ibemu's. */
int face_complete(struct face_id *fid);
int face_started(struct face_id *fid, int ret);

#endif /* IBEMU_RDMACM_FACE_H */
