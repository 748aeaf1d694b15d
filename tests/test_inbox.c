// SPDX-License-Identifier: MIT
/*
 * The shared-memory inbox ring (emulator/inbox.h) alone: a packet goes
 * through claim, publish, peek and release; a full ring refuses a claim;
 * and a ring a peer has scribbled on refuses a claim instead of making the
 * producer spin for good (nothing a peer writes may wedge another
 * process).
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "unit.h"

#include "inbox.h"
#include "shmfile.h"

static struct inbox *ib;
static char ib_name[160];

static void inbox_open(void)
{
	char node[64];

	snprintf(node, sizeof(node), "unit-inbox-%d", (int)getpid());
	CU_ASSERT_FATAL(inbox_create(node, &ib, ib_name, sizeof(ib_name)) ==
			0);
}

static void inbox_close(void)
{
	shmfile_unlink(ib_name);
	inbox_unmap(ib);
	ib = NULL;
}

static void test_roundtrip(void)
{
	struct inbox_slot *s;
	uint64_t pos;

	inbox_open();
	CU_ASSERT_PTR_NULL(inbox_peek(ib));
	s = inbox_claim(ib, &pos);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	s->hdr.len = 12;
	s->data[0] = 0x11;
	inbox_publish(ib, s, pos);
	s = inbox_peek(ib);
	CU_ASSERT_PTR_NOT_NULL_FATAL(s);
	CU_ASSERT_EQUAL(s->hdr.len, 12);
	CU_ASSERT_EQUAL(s->data[0], 0x11);
	inbox_release(ib, s);
	CU_ASSERT_PTR_NULL(inbox_peek(ib));
	inbox_close();
}

static void test_full(void)
{
	struct inbox_slot *s;
	uint64_t pos;
	unsigned int i;

	inbox_open();
	for (i = 0; i < INBOX_SLOTS; i++) {
		s = inbox_claim(ib, &pos);
		CU_ASSERT_PTR_NOT_NULL_FATAL(s);
		inbox_publish(ib, s, pos);
	}
	CU_ASSERT_PTR_NULL(inbox_claim(ib, &pos));
	/* One consumed: one more fits. */
	inbox_release(ib, inbox_peek(ib));
	CU_ASSERT_PTR_NOT_NULL(inbox_claim(ib, &pos));
	inbox_close();
}

/* A slot whose sequence number is ahead of the tail: no claim can
 * succeed there, and none may spin; SIGALRM ends a claim that hangs. */
static void test_scribbled(void)
{
	uint64_t pos, tail;

	inbox_open();
	tail = atomic_load(&ib->tail);
	atomic_store(&ib->slots[tail & (INBOX_SLOTS - 1)].seq, tail + 7);
	alarm(10);
	CU_ASSERT_PTR_NULL(inbox_claim(ib, &pos));
	alarm(0);
	inbox_close();
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "roundtrip", test_roundtrip },
		{ "full", test_full },
		{ "scribbled", test_scribbled },
		{ NULL, NULL },
	};

	return unit_run("inbox", tests);
}
