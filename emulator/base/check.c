// SPDX-License-Identifier: MIT
/*
 * The checking mode's reporter (check.h): the table of what each kind
 * of misuse breaks, the reports, once per (kind, object), with call
 * stacks in the style of AddressSanitizer, and the summary at exit.
 *
 * A misuse that one of the HCA's own threads finds (the progress
 * engine retiring a WQE, the responder refusing an access) has no
 * program frame on its stack: its report waits in a short queue and is
 * printed by the program's next verbs call that the checking mode sees
 * (check_flush), whose stack is the program's, or at exit.
 *
 * Lock rule: report_lock serialises the seen set, the counts, the
 * queue of waiting reports and the log's lines; check_state, nwaiting
 * and the object counts are atomics read without it.
 */
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

struct check_rule {
	const char *name;  /* as reports and the summary name it */
	const char *rule;  /* what was broken, and where that is said */
	const char *setup; /* the label of the setup stack */
};

static const struct check_rule rules[CHECK_NR_KINDS] = {
	[CHECK_SEND_BUF_CHANGED] = {
		"send-buffer-changed",
		"the buffers of a work request may be reused only after its "
		"completion was polled (ibv_post_send(3))",
		"posted at" },
	[CHECK_DEREG_BUSY] = {
		"dereg-in-flight",
		"a memory region must stay registered until every work request "
		"that uses it has completed (ibv_reg_mr(3), ibv_dereg_mr(3))",
		"posted at" },
	[CHECK_DEREG_BOUND] = {
		"dereg-window-bound",
		"a memory region with memory windows bound to it cannot be "
		"deregistered: EBUSY on hardware (ibv_alloc_mw(3), IBA "
		"10.6.7)",
		"bound at" },
	[CHECK_REG_CONFLICT] = {
		"reg-conflict",
		"access rights are the region's (IBA 10.6.3.1): two regions "
		"over the same bytes with different rights hand the peers "
		"keys that grant what the other refuses (ibv_reg_mr(3))",
		NULL },
	[CHECK_RECV_BUF_WRITTEN] = {
		"recv-buffer-written",
		"a receive buffer, or the local buffer of an RDMA READ or an "
		"atomic, belongs to the HCA until its completion was polled: "
		"the program may not read or write it meanwhile "
		"(ibv_post_recv(3), ibv_post_send(3))",
		"posted at" },
	[CHECK_UNMAP_REGISTERED] = {
		"unmap-registered",
		"memory must stay mapped as long as a memory region is "
		"registered on it: deregister first, then unmap or free it "
		"(ibv_reg_mr(3), ibv_dereg_mr(3))",
		NULL },
	[CHECK_SQ_OVERFLOW] = {
		"sq-overflow",
		"a send queue holds max_send_wr work requests until their "
		"completions are polled; ibv_post_send fails with ENOMEM "
		"beyond (ibv_post_send(3))",
		NULL },
	[CHECK_RQ_OVERFLOW] = {
		"rq-overflow",
		"a receive queue holds max_recv_wr work requests; "
		"ibv_post_recv fails with ENOMEM beyond (ibv_post_recv(3))",
		NULL },
	[CHECK_UNSIGNALED_FULL] = {
		"unsignaled-full",
		"with sq_sig_all 0, a send queue's worth of unsignaled work "
		"requests and no signaled one: no completion ever says their "
		"slots are free (ibv_post_send(3), IBV_SEND_SIGNALED)",
		"first unsignaled post at" },
	[CHECK_SRQ_EMPTY] = {
		"srq-empty",
		"an SRQ ran out of receives with no limit armed: arm srq_limit "
		"to be told (IBV_EVENT_SRQ_LIMIT_REACHED, ibv_modify_srq(3))",
		NULL },
	[CHECK_CQ_OVERFLOW] = {
		"cq-overflow",
		"more completions waiting than the CQ was created for: an "
		"overrun, IBV_EVENT_CQ_ERR, on a device whose CQ has just the "
		"entries asked for (ibv_create_cq(3), manual 6.1)",
		"created at" },
	[CHECK_DESTROY_QP_BUSY] = {
		"destroy-qp-busy",
		"work requests outstanding when the QP is destroyed are lost "
		"with their completions: move it to ERR and poll their "
		"flushes first (ibv_destroy_qp(3), IBA 10.3.1)",
		"posted at" },
	[CHECK_DESTROY_CQ_EVENTS] = {
		"destroy-cq-events",
		"every completion event must be acknowledged before the CQ is "
		"destroyed; ibv_destroy_cq waits for them on hardware "
		"(ibv_get_cq_event(3), ibv_ack_cq_events)",
		NULL },
	[CHECK_DESTROY_ASYNC_EVENTS] = {
		"destroy-async-events",
		"every asynchronous event must be acknowledged before its QP, "
		"CQ or SRQ is destroyed; the destroy waits for them on "
		"hardware (ibv_get_async_event(3), ibv_ack_async_event)",
		NULL },
	[CHECK_DESTROY_BUSY] = {
		"destroy-busy",
		"objects created on it must be destroyed first: EBUSY on "
		"hardware (ibv_dealloc_pd(3), ibv_destroy_cq(3), "
		"ibv_destroy_srq(3), ibv_close_device(3))",
		NULL },
	[CHECK_CQ_NOT_ARMED] = {
		"cq-not-armed",
		"a CQ gives one event per ibv_req_notify_cq: re-arm it after "
		"each event, before polling it empty, or the next completion "
		"raises none (ibv_get_cq_event(3), IBA 11.4.2.2)",
		NULL },
	[CHECK_LEAK] = {
		"leak",
		"objects still alive at exit (destroy them, or the kernel "
		"reclaims them only when the process ends)",
		NULL },
	[CHECK_RNR] = {
		"rnr",
		"a SEND arrived with no receive posted: RNR NAK, the "
		"requester waits min_rnr_timer and retries rnr_retry times "
		"(IBA 9.7.5.2.8); post receives before the peer sends",
		NULL },
	[CHECK_REMOTE_ACCESS] = {
		"remote-access",
		"the responder refused an RDMA access: its R_Key, range or "
		"access flags do not allow it (IBA 9.7.5.2.5, ibv_reg_mr(3))",
		NULL },
	[CHECK_ATOMIC_ALIGN] = {
		"atomic-align",
		"an atomic operation's remote address must be 8-byte aligned "
		"(IBA 9.4.5, ibv_post_send(3))",
		NULL },
	[CHECK_INLINE_SIZE] = {
		"inline-size",
		"inline data is at most the QP's max_inline_data "
		"(ibv_create_qp(3), IBV_SEND_INLINE)",
		NULL },
	[CHECK_UD_AH_PD] = {
		"ud-ah-pd",
		"a UD send's address handle must belong to the QP's protection "
		"domain (ibv_post_send(3), IBA 10.2.3)",
		NULL },
	[CHECK_QKEY] = {
		"qkey",
		"a datagram whose Q_Key differs from the receiving QP's is "
		"dropped in silence (IBA 10.2.5)",
		NULL },
	[CHECK_THREADS_CQ] = {
		"threads-cq",
		"two threads polled one CQ at once: each takes some of the "
		"completions, in no order the program can rely on; a "
		"thread domain or one poller per CQ (ibv_create_td(3))",
		NULL },
	[CHECK_THREADS_QP] = {
		"threads-qp",
		"two threads posted to one QP at once: their work requests "
		"interleave in no order the program chose (ibv_create_td(3))",
		NULL },
};

static const char *const obj_names[CHECK_OBJ_NR] = {
	[CHECK_OBJ_PD] = "PDs",	    [CHECK_OBJ_MR] = "MRs",
	[CHECK_OBJ_CQ] = "CQs",	    [CHECK_OBJ_QP] = "QPs",
	[CHECK_OBJ_SRQ] = "SRQs",   [CHECK_OBJ_AH] = "AHs",
	[CHECK_OBJ_MW] = "MWs",	    [CHECK_OBJ_CONTEXT] = "contexts",
};

#define SEEN_SLOTS 4096u

atomic_int check_state;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uint64_t key; /* kind + 1 in the top byte, the object below */
} seen[SEEN_SLOTS];
static unsigned long counts[CHECK_NR_KINDS];
static atomic_long objs[CHECK_OBJ_NR];
static FILE *log_file; /* NULL: stderr */
static _Thread_local bool internal_thread; /* one of the HCA's threads */

/* Reports found on an HCA thread, waiting for a program thread. */
#define WAITING_MAX 64u
#define WAITING_TEXT 512u
static struct waiting_report {
	enum check_kind kind;
	bool has_setup;
	struct check_stack setup;
	char text[WAITING_TEXT];
} waiting[WAITING_MAX];
static unsigned int nwaiting_locked;
atomic_uint nwaiting;
static const void *own_base; /* our shared object's load address */

static FILE *out(void)
{
	return log_file ? log_file : stderr;
}

static void check_summary(void);

static void check_open_log(void)
{
	const char *tmpl = getenv("IBEMU_CHECK_LOG"), *p;
	char name[4096];
	int fd;

	if (!tmpl || !*tmpl)
		return;
	p = strstr(tmpl, "%p");
	if (p)
		snprintf(name, sizeof(name), "%.*s%d%s", (int)(p - tmpl), tmpl,
			 (int)getpid(), p + 2);
	else
		snprintf(name, sizeof(name), "%s", tmpl);
	fd = open(name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0)
		log_file = fdopen(fd, "a");
	if (!log_file) {
		if (fd >= 0)
			close(fd);
		fprintf(stderr, "ibemu: IBEMU_CHECK_LOG: cannot open %s: %s; "
				"reporting on stderr\n", name, strerror(errno));
	} else {
		setvbuf(log_file, NULL, _IOLBF, 0);
	}
}

/*
 * A child of fork(2) is a process of its own: it reports and sums up its
 * own misuse, in a log of its own when the name has %p, and begins with
 * no objects (a verbs object is not the child's to use or destroy,
 * ibv_fork_init(3)).  The lock may have been held by a thread that the
 * child does not have.
 */
static void check_child(void)
{
	unsigned int i;

	pthread_mutex_init(&report_lock, NULL);
	memset(seen, 0, sizeof(seen));
	memset(counts, 0, sizeof(counts));
	nwaiting_locked = 0;
	atomic_store(&nwaiting, 0);
	for (i = 0; i < CHECK_OBJ_NR; i++)
		atomic_store(&objs[i], 0);
	if (log_file) {
		const char *tmpl = getenv("IBEMU_CHECK_LOG");

		if (tmpl && strstr(tmpl, "%p")) {
			fclose(log_file);
			log_file = NULL;
			check_open_log();
		}
	}
}

__attribute__((noinline)) int check_init(void)
{
	static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;
	const char *env = getenv("IBEMU_CHECK");
	Dl_info info;
	int st;

	pthread_mutex_lock(&init_lock);
	st = atomic_load(&check_state);
	if (st) {
		pthread_mutex_unlock(&init_lock);
		return st;
	}
	if (!env || !*env || !strcmp(env, "0"))
		st = 1;
	else
		st = !strcmp(env, "abort") ? 3 : 2;
	if (st >= 2) {
		if (dladdr((void *)check_init, &info))
			own_base = info.dli_fbase;
		check_open_log();
		atexit(check_summary);
		pthread_atfork(NULL, NULL, check_child);
	}
	atomic_store(&check_state, st);
	pthread_mutex_unlock(&init_lock);
	return st;
}

/*
 * The stacks a thread took, so that a post from a call chain already seen
 * costs a look at the stack rather than an unwind (glibc's backtrace(3)
 * reads the DWARF call frame information of every frame: 2 us a post,
 * where the post itself is 0.1 us).  An entry keeps a stack's return
 * addresses and where each was found, as an offset from the frame of
 * check_stack_here; it is taken again only if every one of those words
 * is still in its place, and each return address fixes the size of the
 * frame above it (no alloca), so a full match is the same chain, to its
 * last recorded frame, as a chain the unwinder walked.  The words are
 * read only between our frame and the top of the thread's stack
 * (pthread_getattr_np(3)); a thread whose stack it cannot tell, or a call
 * off that stack (a signal stack, a coroutine's), unwinds every time.
 *
 * The entry is looked up by one word: the return address at a position
 * (a probe) where an earlier unwind found the program's first frame.
 * Each path through the provider to check_stack_here puts it at its own
 * depth, so a thread keeps a few probes.
 *
 * Lock rule: a thread's cache is its own (thread-local), allocated at its
 * first stack in checking mode and freed when it exits.
 */
#define STACK_ENTRIES 64u /* a power of 2 */
#define STACK_PROBES 4u
#define STACK_SCAN_MAX (256u << 10) /* how far one frame is looked for */

struct stack_entry {
	struct check_stack st;
	uint8_t key;			 /* the frame found at the probe */
	uint32_t off[CHECK_STACK_MAX]; /* where st.pc[i] was, from our frame */
};

struct stack_cache {
	uintptr_t lo, hi; /* the thread's stack; 0, 0: not known */
	uint32_t probe[STACK_PROBES];
	unsigned int nprobe;
	struct stack_entry e[STACK_ENTRIES];
};

static _Thread_local struct stack_cache *stack_cache;
static _Thread_local bool stack_cache_failed;
static pthread_key_t stack_cache_key;
static pthread_once_t stack_cache_once = PTHREAD_ONCE_INIT;

/* At the thread's exit (the key's destructor, on that thread). */
static void stack_cache_free(void *c)
{
	free(c);
	stack_cache = NULL;
	stack_cache_failed = true;
}

static void stack_cache_key_make(void)
{
	if (pthread_key_create(&stack_cache_key, stack_cache_free))
		stack_cache_failed = true;
}

/* This thread's cache; NULL if it has none (no memory, stack unknown). */
static struct stack_cache *stack_cache_get(void)
{
	struct stack_cache *c = stack_cache;
	pthread_attr_t attr;
	void *lo;
	size_t size;

	if (c || stack_cache_failed)
		return c;
	stack_cache_failed = true;
	pthread_once(&stack_cache_once, stack_cache_key_make);
	if (pthread_getattr_np(pthread_self(), &attr))
		return NULL;
	if (pthread_attr_getstack(&attr, &lo, &size) || !size) {
		pthread_attr_destroy(&attr);
		return NULL;
	}
	pthread_attr_destroy(&attr);
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	if (pthread_setspecific(stack_cache_key, c)) {
		free(c);
		return NULL;
	}
	c->lo = (uintptr_t)lo;
	c->hi = (uintptr_t)lo + size;
	stack_cache_failed = false;
	stack_cache = c;
	return c;
}

static unsigned int stack_hash(uintptr_t word, uint32_t probe)
{
	return (unsigned int)(((word ^ probe) * 0x9e3779b97f4a7c15ull) >> 58) &
	       (STACK_ENTRIES - 1);
}

/* The word at offset off from frame, if it is on the thread's stack.
 * It may lie in another frame's AddressSanitizer redzone: not checked. */
__attribute__((no_sanitize_address)) static bool
stack_word(const struct stack_cache *c, uintptr_t frame, uint32_t off,
	   uintptr_t *word)
{
	if (frame + off + sizeof(*word) > c->hi)
		return false;
	*word = *(const uintptr_t *)(frame + off);
	return true;
}

/* Whether every return address of e is where it was found. */
static bool stack_entry_holds(const struct stack_cache *c,
			      const struct stack_entry *e, uintptr_t frame)
{
	uintptr_t w;
	unsigned int i;

	for (i = 0; i < e->st.n; i++)
		if (!stack_word(c, frame, e->off[i], &w) ||
		    w != (uintptr_t)e->st.pc[i])
			return false;
	return true;
}

static bool stack_lookup(struct stack_cache *c, uintptr_t frame,
			 struct check_stack *st)
{
	const struct stack_entry *e;
	unsigned int i, j, slot;
	uintptr_t w;
	uint32_t p;

	for (i = 0; i < c->nprobe; i++) {
		p = c->probe[i];
		if (!stack_word(c, frame, p, &w))
			continue;
		slot = stack_hash(w, p);
		for (j = 0; j < 4; j++) {
			e = &c->e[(slot + j) & (STACK_ENTRIES - 1)];
			if (!e->st.n || e->off[e->key] != p ||
			    (uintptr_t)e->st.pc[e->key] != w ||
			    !stack_entry_holds(c, e, frame))
				continue;
			st->n = e->st.n;
			memcpy(st->pc, e->st.pc, e->st.n * sizeof(st->pc[0]));
			return true;
		}
	}
	return false;
}

/* Whether pc is the provider's own (own_base: check_init). */
static bool stack_pc_own(void *pc)
{
	Dl_info info;

	return own_base && dladdr(pc, &info) && info.dli_fbase == own_base;
}

/* Remember st, just unwound from frame: find each return address on the
 * stack, each above the one before; a frame not found is not kept. */
static void stack_learn(struct stack_cache *c, uintptr_t frame,
			const struct check_stack *st)
{
	struct stack_entry e = {.st = *st};
	unsigned int i, j, slot;
	uintptr_t w;
	uint32_t off = 0, end;

	for (i = 0; i < st->n; i++) {
		for (end = off + STACK_SCAN_MAX; off < end; off += sizeof(w)) {
			if (!stack_word(c, frame, off, &w))
				return;
			if (w == (uintptr_t)st->pc[i])
				break;
		}
		if (off >= end)
			return;
		e.off[i] = off;
		off += sizeof(w);
	}
	/* The key: the program's first frame, past the provider's. */
	for (i = 0; i < st->n && stack_pc_own(st->pc[i]); i++)
		;
	if (i == st->n)
		return;
	e.key = (uint8_t)i;
	for (j = 0; j < c->nprobe && c->probe[j] != e.off[i]; j++)
		;
	if (j == c->nprobe) {
		if (c->nprobe < STACK_PROBES)
			c->nprobe++;
		else
			j = STACK_PROBES - 1; /* the last one goes */
		c->probe[j] = e.off[i];
	}
	slot = stack_hash((uintptr_t)st->pc[i], e.off[i]);
	for (j = 0; j < 4; j++)
		if (!c->e[(slot + j) & (STACK_ENTRIES - 1)].st.n)
			break;
	c->e[(slot + (j & 3)) & (STACK_ENTRIES - 1)] = e;
}

/* The raw return addresses, cheap enough for every post: the
 * provider's own frames are left out when a stack is printed. */
__attribute__((noinline)) void check_stack_here(struct check_stack *st)
{
	void *pc[CHECK_STACK_MAX + 1];
	uintptr_t frame = (uintptr_t)__builtin_frame_address(0);
	struct stack_cache *c = stack_cache_get();
	int n;

	if (c && (frame < c->lo || frame >= c->hi))
		c = NULL;
	if (c && stack_lookup(c, frame, st))
		return;
	n = backtrace(pc, CHECK_STACK_MAX + 1);
	/* Frame 0 is ourselves. */
	st->n = n > 1 ? (uint8_t)(n - 1) : 0;
	memcpy(st->pc, pc + 1, st->n * sizeof(pc[0]));
	if (c)
		stack_learn(c, frame, st);
}

static void print_stack(FILE *f, const char *label,
			const struct check_stack *st)
{
	Dl_info info;
	unsigned int i, k;

	fprintf(f, "==%d==   %s:\n", (int)getpid(), label);
	for (i = 0, k = 0; i < st->n; i++) {
		const char *obj = "?", *sym = NULL;
		uintptr_t off = 0;

		/* The provider's own frames: the program's first is the
		 * call that broke the rule. */
		if (own_base && dladdr(st->pc[i], &info) &&
		    info.dli_fbase == own_base)
			continue;
		if (dladdr(st->pc[i], &info)) {
			obj = info.dli_fname ? info.dli_fname : "?";
			sym = info.dli_sname;
			off = (uintptr_t)st->pc[i] -
			      (uintptr_t)(sym ? info.dli_saddr : info.dli_fbase);
		}
		if (sym)
			fprintf(f, "==%d==     #%u %p in %s+%#lx (%s)\n",
				(int)getpid(), k++, st->pc[i], sym,
				(unsigned long)off, obj);
		else
			fprintf(f, "==%d==     #%u %p (%s+%#lx)\n",
				(int)getpid(), k++, st->pc[i], obj,
				(unsigned long)off);
	}
	if (!k)
		fprintf(f, "==%d==     (no frame of the program)\n",
			(int)getpid());
}

/* Whether (kind, obj) is new; it is remembered.  Under report_lock. */
static bool seen_first_locked(enum check_kind kind, uint64_t obj)
{
	uint64_t key = ((uint64_t)kind + 1) << 56 | (obj & ((1ull << 56) - 1));
	uint64_t h = key * 0x9e3779b97f4a7c15ull;
	unsigned int i, slot;

	for (i = 0; i < 16; i++) {
		slot = ((unsigned int)(h >> 52) + i) & (SEEN_SLOTS - 1);
		if (seen[slot].key == key)
			return false;
		if (!seen[slot].key) {
			seen[slot].key = key;
			return true;
		}
	}
	return true; /* the set is full here: said again, never lost */
}

void check_thread_internal(void)
{
	internal_thread = true;
}

bool check_thread_is_internal(void)
{
	return internal_thread;
}

static void print_head(FILE *f, enum check_kind kind, const char *text)
{
	fprintf(f, "==%d== ibemu check: %s: %s\n==%d==   rule: %s\n",
		(int)getpid(), rules[kind].name, text, (int)getpid(),
		rules[kind].rule);
}

static void print_setup(FILE *f, enum check_kind kind,
			const struct check_stack *setup)
{
	if (setup && rules[kind].setup)
		print_stack(f, rules[kind].setup, setup);
}

static void maybe_abort(void)
{
	if (atomic_load(&check_state) != 3)
		return;
	fprintf(out(), "==%d== ibemu check: IBEMU_CHECK=abort: stopping at "
		       "the first report\n", (int)getpid());
	abort();
}

/* Print the waiting reports; here is the stack of the program's call
 * that takes them, or NULL at exit.  Under report_lock. */
static unsigned int flush_locked(const struct check_stack *here)
{
	unsigned int i, n = nwaiting_locked;
	FILE *f = out();

	for (i = 0; i < n; i++) {
		const struct waiting_report *w = &waiting[i];

		print_head(f, w->kind, w->text);
		if (here)
			print_stack(f, "at (found by the HCA, reported at the "
				       "program's next verbs call)", here);
		else
			fprintf(f, "==%d==   at: (found by the HCA; the program "
				   "made no verbs call after)\n",
				(int)getpid());
		print_setup(f, w->kind, w->has_setup ? &w->setup : NULL);
	}
	nwaiting_locked = 0;
	atomic_store(&nwaiting, 0);
	fflush(f);
	return n;
}

void check_flush_slow(void)
{
	struct check_stack here;
	unsigned int n;

	if (internal_thread)
		return;
	check_stack_here(&here);
	pthread_mutex_lock(&report_lock);
	n = flush_locked(&here);
	pthread_mutex_unlock(&report_lock);
	if (n)
		maybe_abort();
}

/* Keep a report found on an HCA thread; under report_lock.  A full queue
 * prints it now, with the HCA's stack. */
static bool wait_locked(enum check_kind kind, const struct check_stack *setup,
			const char *text)
{
	struct waiting_report *w;

	if (nwaiting_locked == WAITING_MAX)
		return false;
	w = &waiting[nwaiting_locked++];
	w->kind = kind;
	w->has_setup = setup != NULL;
	if (setup)
		w->setup = *setup;
	snprintf(w->text, sizeof(w->text), "%s", text);
	atomic_store(&nwaiting, nwaiting_locked);
	return true;
}

/* Count a report of kind about obj and say it the first time, worded
 * by fmt and ap: at, the call it is about, or NULL for this one (then,
 * found on an HCA thread, it waits for the program's next call); setup,
 * the call that set it up (may be NULL). */
static __attribute__((format(printf, 5, 0))) bool
report_v(enum check_kind kind, uint64_t obj, const struct check_stack *at,
	 const struct check_stack *setup, const char *fmt, va_list ap)
{
	struct check_stack here;
	char text[WAITING_TEXT];
	FILE *f;
	bool first, waits = false;

	if (!check_on() || (unsigned int)kind >= CHECK_NR_KINDS)
		return false;
	vsnprintf(text, sizeof(text), fmt, ap);
	if (!at) {
		check_stack_here(&here);
		at = &here;
	}
	pthread_mutex_lock(&report_lock);
	counts[kind]++;
	first = seen_first_locked(kind, obj);
	if (first && at == &here && internal_thread)
		waits = wait_locked(kind, setup, text);
	if (first && !waits) {
		f = out();
		print_head(f, kind, text);
		print_stack(f, "at", at);
		print_setup(f, kind, setup);
		fflush(f);
	}
	pthread_mutex_unlock(&report_lock);
	if (first && !waits)
		maybe_abort();
	return first;
}

bool check_report(enum check_kind kind, uint64_t obj,
		  const struct check_stack *setup, const char *fmt, ...)
{
	va_list ap;
	bool first;

	va_start(ap, fmt);
	first = report_v(kind, obj, NULL, setup, fmt, ap);
	va_end(ap);
	return first;
}

bool check_report_at(enum check_kind kind, uint64_t obj,
		     const struct check_stack *at, const char *fmt, ...)
{
	va_list ap;
	bool first;

	va_start(ap, fmt);
	first = report_v(kind, obj, at, NULL, fmt, ap);
	va_end(ap);
	return first;
}

void check_obj(enum check_obj obj, int delta)
{
	if ((unsigned int)obj < CHECK_OBJ_NR)
		atomic_fetch_add_explicit(&objs[obj], delta,
					  memory_order_relaxed);
}

/* The summary at exit: each kind's count, and the objects left alive. */
static void check_summary(void)
{
	char left[256] = "";
	size_t used = 0;
	unsigned long total = 0;
	unsigned int i;
	FILE *f;

	for (i = 0; i < CHECK_OBJ_NR; i++) {
		long n = atomic_load(&objs[i]);

		if (n > 0 && used < sizeof(left))
			used += (size_t)snprintf(left + used,
						 sizeof(left) - used, "%s%ld %s",
						 used ? ", " : "", n,
						 obj_names[i]);
	}
	pthread_mutex_lock(&report_lock);
	i = flush_locked(NULL);
	pthread_mutex_unlock(&report_lock);
	if (i)
		maybe_abort();
	if (*left)
		check_report(CHECK_LEAK, 0, NULL, "%s not destroyed", left);
	pthread_mutex_lock(&report_lock);
	f = out();
	for (i = 0; i < CHECK_NR_KINDS; i++)
		total += counts[i];
	if (!total) {
		fprintf(f, "==%d== ibemu check: no misuse found\n",
			(int)getpid());
	} else {
		fprintf(f, "==%d== ibemu check: summary:", (int)getpid());
		for (i = 0; i < CHECK_NR_KINDS; i++)
			if (counts[i])
				fprintf(f, " %s %lu", rules[i].name, counts[i]);
		fprintf(f, "\n");
	}
	fflush(f);
	pthread_mutex_unlock(&report_lock);
}

/*
 * 64-bit FNV-1a over the bytes, in four lanes of eight bytes that are
 * folded into one at the end: four multiplications in flight rather than
 * one chain of them (0.06 rather than 0.16 ns a byte).  Each step is a
 * bijection of its lane, and so is the fold of each lane, so a change of
 * any one word always changes the sum.
 */
#define FNV_PRIME 0x100000001b3ull
uint64_t check_sum(const void *buf, uint64_t len)
{
	const unsigned char *p = buf;
	uint64_t h0 = 0xcbf29ce484222325ull, h1 = h0 + 1, h2 = h0 + 2,
		 h3 = h0 + 3, w[4];

	for (; len >= sizeof(w); len -= sizeof(w), p += sizeof(w)) {
		memcpy(w, p, sizeof(w));
		h0 = (h0 ^ w[0]) * FNV_PRIME;
		h1 = (h1 ^ w[1]) * FNV_PRIME;
		h2 = (h2 ^ w[2]) * FNV_PRIME;
		h3 = (h3 ^ w[3]) * FNV_PRIME;
	}
	h0 = (h0 ^ h1) * FNV_PRIME;
	h0 = (h0 ^ h2) * FNV_PRIME;
	h0 = (h0 ^ h3) * FNV_PRIME;
	for (; len >= 8; len -= 8, p += 8) {
		memcpy(w, p, 8);
		h0 = (h0 ^ w[0]) * FNV_PRIME;
	}
	for (; len; len--, p++)
		h0 = (h0 ^ *p) * FNV_PRIME;
	return h0;
}

/*
 * A buffer's sum as the checks take it: whole up to 16 KiB; beyond, its
 * first and last 4 KiB and the first 64 bytes of every 4 KiB between, so
 * that a large message costs a few KiB of reading rather than all of it
 * (a program's write into a buffer it gave the HCA, a header, a memset, a
 * new message, touches its start or whole pages).  A change elsewhere in
 * a large buffer is not seen.
 */
#define SUM_WHOLE 16384u
#define SUM_EDGE 4096u
#define SUM_STEP 4096u
#define SUM_PROBE 64u
uint64_t check_sum_buffer(const void *buf, uint64_t len)
{
	const unsigned char *p = buf;
	uint64_t h, off;

	if (len <= SUM_WHOLE)
		return check_sum(buf, len);
	h = check_sum(p, SUM_EDGE);
	for (off = SUM_EDGE; off + SUM_PROBE <= len - SUM_EDGE;
	     off += SUM_STEP)
		h = (h ^ check_sum(p + off, SUM_PROBE)) * FNV_PRIME;
	return (h ^ check_sum(p + len - SUM_EDGE, SUM_EDGE)) * FNV_PRIME;
}
