// SPDX-License-Identifier: MIT
/* Other processes' registered memory mapped here (see peer_map.h). */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mr_memfd.h"
#include "peer_map.h"

/* Mappings kept while no QP uses them. */
#define PEER_MAP_IDLE 16

static pthread_mutex_t peer_map_lock = PTHREAD_MUTEX_INITIALIZER;
static struct peer_map *peer_maps; /* most recently used first */
static unsigned int peer_maps_idle;

/* Open the memfd fd of pid if it is the one named after id. */
static int peer_map_open(pid_t pid, uint64_t id, int32_t fd)
{
	char path[64], want[64], got[80];
	ssize_t n;
	int mfd;

	if (pid <= 0 || fd < 0 || !id)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, (int)fd);
	mfd = open(path, O_RDWR | O_CLOEXEC);
	if (mfd < 0)
		return -1;
	/* What we opened, not what the path named a moment before. */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", mfd);
	n = readlink(path, got, sizeof(got) - 1);
	mr_memfd_name(id, want, sizeof(want));
	if (n <= 0 || (size_t)n != strlen(want) || memcmp(got, want, (size_t)n)) {
		close(mfd);
		return -1;
	}
	return mfd;
}

static void peer_map_trim_locked(void)
{
	struct peer_map **pm = &peer_maps, *m;
	unsigned int idle = 0;

	while ((m = *pm)) {
		if (!m->refs && ++idle > PEER_MAP_IDLE) {
			*pm = m->next;
			munmap(m->base, m->len);
			free(m);
			peer_maps_idle--;
			continue;
		}
		pm = &m->next;
	}
}

struct peer_map *peer_map_get(pid_t pid, uint64_t id, int32_t fd,
			      uint64_t off, uint64_t len)
{
	struct peer_map **pm, *m;
	struct stat st;
	void *base;
	int mfd;

	pthread_mutex_lock(&peer_map_lock);
	for (pm = &peer_maps; (m = *pm); pm = &m->next) {
		if (m->id != id || m->off != off || m->len != len)
			continue;
		if (!m->refs++)
			peer_maps_idle--;
		*pm = m->next;
		m->next = peer_maps;
		peer_maps = m;
		pthread_mutex_unlock(&peer_map_lock);
		return m;
	}
	pthread_mutex_unlock(&peer_map_lock);

	mfd = peer_map_open(pid, id, fd);
	if (mfd < 0)
		return NULL;
	/* A window past the end of the file would fault when touched. */
	if (fstat(mfd, &st) || off + len < off ||
	    (uint64_t)st.st_size < off + len || len > SIZE_MAX) {
		close(mfd);
		return NULL;
	}
	base = mmap(NULL, (size_t)len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd,
		    (off_t)off);
	close(mfd);
	if (base == MAP_FAILED)
		return NULL;
	m = calloc(1, sizeof(*m));
	if (!m) {
		munmap(base, (size_t)len);
		return NULL;
	}
	m->id = id;
	m->off = off;
	m->len = len;
	m->base = base;
	m->refs = 1;
	pthread_mutex_lock(&peer_map_lock);
	m->next = peer_maps;
	peer_maps = m;
	pthread_mutex_unlock(&peer_map_lock);
	return m;
}

void peer_map_put(struct peer_map *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&peer_map_lock);
	if (!--m->refs && ++peer_maps_idle > PEER_MAP_IDLE)
		peer_map_trim_locked();
	pthread_mutex_unlock(&peer_map_lock);
}

void peer_map_fork_child(void)
{
	struct peer_map *m;

	pthread_mutex_init(&peer_map_lock, NULL);
	while ((m = peer_maps)) {
		peer_maps = m->next;
		munmap(m->base, m->len);
		free(m);
	}
	peer_maps_idle = 0;
}
