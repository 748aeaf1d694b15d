// SPDX-License-Identifier: MIT
/*
 * The TCP transport at the process's exit (tcp_int.h): the ACKs held
 * back for the application's next call (tcp_send.c) go to their sockets
 * when the process exits without closing the device, as a program does
 * that calls exit() right after its last receive completion.  The peer
 * waits for them: lost, it would retry its executed SENDs until
 * RETRY_EXC_ERR (IBA 9.7.6.1.3), for a message the responder took.
 *
 * Lock rule: tcp_exit_lock protects the list of the process's open
 * transports (tcp_exit_list, linked by exit_next); a leaf, taken by
 * tcp_open and tcp_close (no lock of theirs held) and at exit.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "tcp_int.h"

#define TCP_EXIT_TRIES 1000

static pthread_mutex_t tcp_exit_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t tcp_exit_once = PTHREAD_ONCE_INIT;
static struct tp_tcp *tcp_exit_list;

/* Other threads still run at exit and may hold the locks a flush takes:
 * try a while, never wait on them (one of them may wait for this
 * thread). */
static void tcp_exit_flush(void)
{
	unsigned int tries;
	struct tp_tcp *t;

	pthread_mutex_lock(&tcp_exit_lock);
	for (t = tcp_exit_list; t; t = t->exit_next) {
		for (tries = 0; tries < TCP_EXIT_TRIES &&
				atomic_load(&t->deferred);
		     tries++) {
			tcp_flush_deferred(t->e, false);
			if (atomic_load(&t->deferred))
				sched_yield();
		}
	}
	pthread_mutex_unlock(&tcp_exit_lock);
}

static void tcp_exit_register(void)
{
	atexit(tcp_exit_flush);
}

void tcp_exit_add(struct tp_tcp *t)
{
	pthread_once(&tcp_exit_once, tcp_exit_register);
	pthread_mutex_lock(&tcp_exit_lock);
	t->exit_next = tcp_exit_list;
	tcp_exit_list = t;
	pthread_mutex_unlock(&tcp_exit_lock);
}

void tcp_exit_remove(struct tp_tcp *t)
{
	struct tp_tcp *p, *prev = NULL;

	pthread_mutex_lock(&tcp_exit_lock);
	for (p = tcp_exit_list; p && p != t; p = p->exit_next)
		prev = p;
	if (p && prev)
		prev->exit_next = p->exit_next;
	else if (p)
		tcp_exit_list = p->exit_next;
	pthread_mutex_unlock(&tcp_exit_lock);
}

/* In a forked child, which has one thread and none of its parent's
 * transports: the list and its lock, which a thread of the parent may
 * have held at the fork, start afresh. */
void tcp_exit_forget(void)
{
	pthread_mutex_init(&tcp_exit_lock, NULL);
	tcp_exit_list = NULL;
}
