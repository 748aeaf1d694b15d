/* SPDX-License-Identifier: MIT */
/*
 * The checking mode (IBEMU_CHECK, `ibemu run --check`): misuse of the
 * verbs that a real HCA lets pass, reported once per object, with the
 * rule broken and the call stacks of the call that broke it and of the
 * call that set it up (check.c).  The layers above detect; this one
 * reports, counts and sums up at exit.
 *
 * IBEMU_CHECK=1 reports and goes on; IBEMU_CHECK=abort stops the process
 * at the first report; IBEMU_CHECK_LOG=FILE writes the reports there
 * instead of stderr ("%p": the process ID).
 */
#ifndef IBEMU_CHECK_H
#define IBEMU_CHECK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* What a report is about: each kind has its name, its rule and the
 * label of the setup stack in check.c's table. */
enum check_kind {
	/* memory */
	CHECK_SEND_BUF_CHANGED, /* a source changed before its completion */
	CHECK_DEREG_BUSY,	/* ibv_dereg_mr with work in flight on it */
	CHECK_DEREG_BOUND,	/* ibv_dereg_mr with a window bound to it */
	CHECK_REG_CONFLICT,	/* the same bytes registered with other rights */
	CHECK_RECV_BUF_WRITTEN,	/* a buffer the HCA writes, changed first */
	CHECK_UNMAP_REGISTERED,	/* munmap or free of registered memory */
	/* queues */
	CHECK_SQ_OVERFLOW,	 /* a post past the send queue's depth */
	CHECK_RQ_OVERFLOW,	 /* a post past the receive queue's depth */
	CHECK_UNSIGNALED_FULL,	 /* a queue's worth of unsignaled sends */
	CHECK_SRQ_EMPTY,	 /* an SRQ ran dry with no limit armed */
	CHECK_CQ_OVERFLOW,	 /* more completions than the CQ asked for */
	/* lifetimes */
	CHECK_DESTROY_QP_BUSY,	 /* ibv_destroy_qp with work outstanding */
	CHECK_DESTROY_CQ_EVENTS, /* ibv_destroy_cq, events not acked */
	CHECK_DESTROY_ASYNC_EVENTS, /* a destroy, async events not acked */
	CHECK_DESTROY_BUSY,	 /* destroy with objects still using it */
	CHECK_CQ_NOT_ARMED,	 /* a reader waits on a CQ not re-armed */
	CHECK_LEAK,		 /* objects alive at exit */
	/* protocol */
	CHECK_RNR,		 /* a SEND found no receive posted */
	CHECK_REMOTE_ACCESS,	 /* an RDMA access the target refused */
	CHECK_ATOMIC_ALIGN,	 /* an atomic not 8-byte aligned */
	CHECK_INLINE_SIZE,	 /* inline data past max_inline_data */
	CHECK_UD_AH_PD,		 /* a UD send to an AH of another PD */
	CHECK_QKEY,		 /* a datagram dropped for its Q_Key */
	/* threads */
	CHECK_THREADS_CQ,	 /* two threads poll one CQ at once */
	CHECK_THREADS_QP,	 /* two threads post to one QP at once */
	CHECK_NR_KINDS
};

/* A call stack: the return addresses of the program's frames, the
 * provider's own left out. */
#define CHECK_STACK_MAX 24
struct check_stack {
	uint8_t n;
	void *pc[CHECK_STACK_MAX];
};

/* 0: not read yet, 1: off, 2: report, 3: report and abort (check.c). */
extern atomic_int check_state;
int check_init(void);
static inline bool check_on(void)
{
	int st = atomic_load_explicit(&check_state, memory_order_relaxed);

	return st >= 2 || (st == 0 && check_init() >= 2);
}

/* The stack of the caller's caller and up, within the program. */
void check_stack_here(struct check_stack *st);

/*
 * Report kind about the object obj (its key: a QPN, an lkey, a handle),
 * once per (kind, obj): what fmt says, the stack of this call, and setup
 * (may be NULL), the stack of the call that set it up.  Returns whether
 * it was reported (false: already was, or checking is off).
 */
bool check_report(enum check_kind kind, uint64_t obj,
		  const struct check_stack *setup, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* This thread is one of the HCA's own (the progress engine, the CM's,
 * a transport's): what it reports waits for the program's next call. */
void check_thread_internal(void);
/* Whether this thread is one of them. */
bool check_thread_is_internal(void);

/* Print the reports found on the HCA's threads, with the stack of the
 * program's call that takes them; a verbs entry point calls it. */
extern atomic_uint nwaiting;
void check_flush_slow(void);
static inline void check_flush(void)
{
	if (atomic_load_explicit(&nwaiting, memory_order_relaxed))
		check_flush_slow();
}

/* check_report with at, the stack of the call the report is about,
 * taken earlier (a watcher's own stack names nothing of the program). */
bool check_report_at(enum check_kind kind, uint64_t obj,
		     const struct check_stack *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Objects the program holds, for the summary's leaks at exit. */
enum check_obj {
	CHECK_OBJ_PD,
	CHECK_OBJ_MR,
	CHECK_OBJ_CQ,
	CHECK_OBJ_QP,
	CHECK_OBJ_SRQ,
	CHECK_OBJ_AH,
	CHECK_OBJ_MW,
	CHECK_OBJ_CONTEXT,
	CHECK_OBJ_NR
};
void check_obj(enum check_obj obj, int delta);

/* A fast checksum of a buffer, for buffers that must not change. */
uint64_t check_sum(const void *buf, uint64_t len);
/* The sum the buffer checks take: whole up to 16 KiB, sampled beyond
 * (its edges and the start of every 4 KiB; check.c). */
uint64_t check_sum_buffer(const void *buf, uint64_t len);

#endif /* IBEMU_CHECK_H */
