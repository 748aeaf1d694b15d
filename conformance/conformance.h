/* SPDX-License-Identifier: MIT */
/*
 * Shared fixture of the ibemu conformance suite.
 *
 * The suite tests any verbs device through the public libibverbs API only
 * (<infiniband/verbs.h>): it must pass on ibemu, rxe and real HCAs alike, so
 * nothing here may know about ibemu internals.  Rules are cited by the IBA
 * clause or by the section of the RDMA Aware Networks Programming User
 * Manual rev 1.7 ("manual") that states them.
 */
#ifndef IBEMU_CONFORMANCE_H
#define IBEMU_CONFORMANCE_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <CUnit/CUnit.h>
#include <infiniband/verbs.h>

/* Command line selection (main.c). */
extern const char *cf_dev_name;	/* NULL: first device */
extern int cf_port;
extern int cf_gid_index;
extern const char *cf_peer_netns; /* -n: the peer's network namespace */
extern const char *cf_cm_addr;	/* -a: the device's IP address, or NULL */
extern const char *cf_examples_dir; /* -X: the manual's example programs */

/* Everything a test needs about the device under test. */
struct cf_ctx {
	struct ibv_context *ctx;
	struct ibv_device_attr_ex dev_ex;
	struct ibv_device_attr *dev;	/* &dev_ex.orig_attr */
	struct ibv_port_attr port;
	union ibv_gid gid;		/* GID at cf_gid_index */
	struct ibv_pd *pd;
	struct ibv_cq *cq;
};

/* The suite fixture: opened by cf_suite_init, closed by cf_suite_cleanup. */
extern struct cf_ctx cf;

int cf_suite_init(void);
int cf_suite_cleanup(void);

/* Open the selected device; NULL (with a message) when it is absent. */
struct ibv_context *cf_open_device(void);
int cf_open(struct cf_ctx *c);
void cf_close(struct cf_ctx *c);

/* RoCE-style port: addresses need a GRH (IBA 17.6 / RoCE annex A16). */
bool cf_is_roce(const struct cf_ctx *c);

/*
 * Verbs that return an int return 0 or the errno value (man ibv_modify_qp:
 * "returns 0 on success, or the value of errno on failure").  Providers
 * that return -1 and set errno are accepted too.  Returns 0 or an errno.
 */
int cf_rc(int ret);

/* Name of an errno value for failure messages ("EINVAL", "success"). */
const char *cf_errname(int err);
const char *cf_state_name(int state);
const char *cf_qpt_name(enum ibv_qp_type type);

/*
 * Whether the 40 bytes in front of a received UD payload (IBA 11.4.1.2)
 * name sgid (NULL: not checked) and dgid: the GRH of IBA 8.3, or on
 * RoCE v2 over IPv4 the IPv4 header in their last 20 bytes.
 */
bool cf_grh_names(const uint8_t *grh, const uint8_t *sgid,
		  const uint8_t *dgid);

/* Address vector of our own port: own LID, plus own GID on RoCE. */
void cf_fill_ah(const struct cf_ctx *c, struct ibv_ah_attr *ah);

/* A memory region on a private buffer (freed by cf_free_mr). */
struct ibv_mr *cf_alloc_mr(struct cf_ctx *c, size_t len, int access);
void cf_free_mr(struct ibv_mr *mr);

/*
 * QP helpers.  cf_create_qp makes a QP on c->pd and c->cq with small caps;
 * init_p may override them (NULL: defaults) and receives the result.
 */
struct ibv_qp *cf_create_qp(struct cf_ctx *c, enum ibv_qp_type type,
			    struct ibv_qp_init_attr *init_p);
/* Current state from ibv_query_qp, or -1 if the query fails. */
int cf_qp_state(struct ibv_qp *qp);

/*
 * The QP state table of IBA 11.2.5 / manual 3.5 (the kernel's
 * ib_modify_qp_is_ok is the reference): whether cur -> next is a legal
 * Modify QP transition for the type, and its required / optional masks
 * (IBV_QP_STATE excluded).
 */
bool cf_qp_trans(enum ibv_qp_type type, enum ibv_qp_state cur,
		 enum ibv_qp_state next, int *req_p, int *opt_p);
/* Every attribute valid for cur -> next, connected to the QP itself. */
void cf_qp_fill_attr(const struct cf_ctx *c, struct ibv_qp *qp,
		     enum ibv_qp_state cur, enum ibv_qp_state next,
		     struct ibv_qp_attr *attr);
/*
 * The one QP state walker: Modify QP from state from to target along
 * RESET, INIT, RTR, RTS, SQD (ERR straight from INIT), each step with
 * exactly the required masks of cf_qp_trans and the values in attr (its
 * qp_state and cur_qp_state are set on the way).  Returns 0 or the errno
 * of the step that failed.
 */
int cf_qp_walk(struct ibv_qp *qp, struct ibv_qp_attr *attr,
	       enum ibv_qp_state from, enum ibv_qp_state target);
/*
 * Walk a RESET QP to target (INIT, RTR, RTS, SQD or ERR) with the
 * attributes of cf_qp_fill_attr.  0 or an errno, as cf_qp_walk.
 */
int cf_qp_to_state(const struct cf_ctx *c, struct ibv_qp *qp,
		   enum ibv_qp_state target);
/* The same, connected (UC, RC) to dest_qpn instead of the QP itself. */
int cf_qp_to_state_dest(const struct cf_ctx *c, struct ibv_qp *qp,
			enum ibv_qp_state target, uint32_t dest_qpn);

/* Poll ibv_query_qp until the state is want or timeout; the last state. */
int cf_qp_wait_state(struct ibv_qp *qp, int want, int timeout_ms);

/*
 * Wait up to timeout_ms for an async event of type on ctx->async_fd
 * (made non-blocking; poll, get, ack: manual 6.1); other events are
 * acked and named in seen (may be NULL).  0, or -1 on timeout or error.
 */
int cf_wait_async(struct ibv_context *ctx, enum ibv_event_type type,
		  int timeout_ms, struct ibv_async_event *ev_p, char *seen,
		  size_t seen_len);

/* Milliseconds of CLOCK_MONOTONIC. */
long long cf_now_ms(void);
/* Poll up to n completions, waiting up to timeout_ms; returns the count. */
int cf_poll_cq_wait(struct ibv_cq *cq, struct ibv_wc *wc, int n,
		    int timeout_ms);
/* Post n one-SGE receives on mr, wr_ids first_wr_id...; 0 or errno. */
int cf_post_recvs(struct ibv_qp *qp, struct ibv_mr *mr, int n,
		  uint64_t first_wr_id);

/* Deterministic data (pattern.c): fill, and the first offset that
 * differs (-1: none). */
void cf_pattern_fill(void *buf, size_t len, uint64_t seed);
long cf_pattern_check(const void *buf, size_t len, uint64_t seed);
/* First byte of buf[0..len) that is not c, or -1. */
long cf_bytes_check(const void *buf, size_t len, uint8_t c);

/* Skips: CUnit 2.1-3 has none, so they are printed and counted here. */
extern unsigned int cf_skip_count;
void cf_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A line said of a test (a skip's reason, a device choice), in a list. */
struct cf_note {
	char *suite, *test, *text;
	struct cf_note *next;
};
/* Append a copy of suite/test/text at the list's tail *tail_p (report.c);
 * NULL when out of memory. */
struct cf_note *cf_note_append(struct cf_note ***tail_p, const char *suite,
			       const char *test, const char *text);

/* report.c: TAP and JUnit XML files of the run, for CI systems. */
void cf_report_skip(const char *suite, const char *test, const char *why);
int cf_report_tap(const char *path);
int cf_report_junit(const char *path);
/* Every failed test: what the list says of it (or new), what it did. */
int cf_report_deviations(const char *path);
/* The run's verdict against the known deviations: the number of failed
 * tests not listed; says each known deviation and each listed test that
 * passed. */
unsigned int cf_report_judge(void);
/* Every skip reason of the run with the tests it covers (capability.c). */
void cf_report_skips_by_reason(FILE *out);

/* capability.c: the device's capability matrix (-C FILE). */
int cf_capability_write(const char *path);

/* expect.c: the known deviations of a device kind (-E FILE). */
int cf_expect_load(const char *path);
const char *cf_expect_reason(const char *name);
const char *cf_expect_reason2(const char *suite, const char *test);
#define SKIP(...)				\
	do {					\
		cf_skip(__VA_ARGS__);		\
		return;				\
	} while (0)

/*
 * Device choices (choice.c): what the IBA and the verbs man pages leave
 * to the device, observed and reported, never failed.  CF_CHECK is for
 * what they require (cite the clause), SKIP for a missing capability.
 */
void cf_choice(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cf_choice_add(const char *text);
#define CF_CHOICE(...) cf_choice(__VA_ARGS__)
/* The choices of suite/test (suite NULL: all, each prefixed with its
 * test), each between before and after, on one line. */
void cf_choices_print(FILE *out, const char *suite, const char *test,
		      const char *before, const char *after);

/* An assertion whose failure message is formatted with the values seen. */
void cf_check(int ok, unsigned int line, const char *file, const char *func,
	      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define CF_CHECK(cond, ...)						\
	cf_check(!!(cond), __LINE__, __FILE__, __func__, __VA_ARGS__)
/* got and want are errno values (0 = success); got is evaluated once. */
void cf_expect_err(int got, int want, const char *what, unsigned int line,
		   const char *file, const char *func);
#define CF_EXPECT_ERR(got, want, what)					\
	cf_expect_err((got), (want), (what), __LINE__, __FILE__, __func__)
#define CF_EXPECT_OK(got, what) CF_EXPECT_ERR(got, 0, what)

/*
 * Register every suite and test of test-list.h (registry.c) whose suite
 * name contains suite_filter (NULL: all), leaving out the -x ones.
 */
void cf_tests_register(const char *suite_filter);
/* The rule test-list.h gives SUITE/TEST (what it holds the device to,
 * with its clause), or NULL for no such test. */
const char *cf_test_rule(const char *suite, const char *test);
/* Leave SUITE/TEST out of the run (-x); -1 if malformed or too many. */
int cf_exclude(const char *suite_test);

#define CF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif /* IBEMU_CONFORMANCE_H */
