// SPDX-License-Identifier: MIT
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fabric_key.h"
#include "hmac.h"
#include "log.h"
#include "sha256.h"

#define FABRIC_KEY_ENV "IBEMU_FABRIC_KEY"
#define FABRIC_KEY_FILE_ENV "IBEMU_FABRIC_KEY_FILE"
#define FABRIC_KEY_FILE_PREFIX "file:"

/* read calls that key_file_slurp makes at most (a signal may cut one). */
#define KEY_FILE_READS 64

_Static_assert(FABRIC_KEY_LEN == HMAC_SHA256_LEN, "a proof is one MAC");
_Static_assert(FABRIC_KEY_LEN == SHA256_DIGEST_LEN, "the key is one hash");

/* The key file's buffer: one byte more than allowed, to see a longer
 * file. */
struct key_buf {
	uint8_t b[FABRIC_KEY_FILE_MAX + 1];
	size_t len;
};

/* A regular file of ours that no one else may read or write. */
static int key_file_check(const char *var, const char *path, int fd)
{
	struct stat st;
	int err;

	if (fstat(fd, &st)) {
		err = errno;
		ibemu_log_err("%s: key file %s: %s", var, path, strerror(err));
		return err;
	}
	if (!S_ISREG(st.st_mode)) {
		ibemu_log_err("%s: key file %s is not a regular file", var,
			      path);
		return EINVAL;
	}
	if (st.st_uid != geteuid()) {
		ibemu_log_err("%s: key file %s belongs to uid %u, not to "
			      "this user (uid %u)", var, path,
			      (unsigned int)st.st_uid, (unsigned int)geteuid());
		return EACCES;
	}
	if (st.st_mode & 077) {
		ibemu_log_err("%s: key file %s has mode %04o: others may "
			      "read or write it (chmod 600 it)", var, path,
			      (unsigned int)(st.st_mode & 0777));
		return EACCES;
	}
	return 0;
}

/* All of fd into kb, at most FABRIC_KEY_FILE_MAX bytes. */
static int key_file_slurp(const char *var, const char *path, int fd,
			  struct key_buf *kb)
{
	unsigned int reads;
	ssize_t n = 1;
	int err;

	kb->len = 0;
	for (reads = 0; n && reads < KEY_FILE_READS; reads++) {
		n = read(fd, kb->b + kb->len, sizeof(kb->b) - kb->len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno;
			ibemu_log_err("%s: key file %s: %s", var, path,
				      strerror(err));
			return err;
		}
		kb->len += (size_t)n;
		if (kb->len > FABRIC_KEY_FILE_MAX) {
			ibemu_log_err("%s: key file %s is longer than %d bytes",
				      var, path, FABRIC_KEY_FILE_MAX);
			return EFBIG;
		}
	}
	if (n) {
		ibemu_log_err("%s: key file %s: interrupted %u times", var,
			      path, reads);
		return EINTR;
	}
	return 0;
}

/* The key file path names, checked and read, less one final line end. */
static int key_file_read(const char *var, const char *path,
			 struct key_buf *kb)
{
	int fd, err;

	if (!*path) {
		ibemu_log_err("%s names no key file", var);
		return EINVAL;
	}
	/* O_NONBLOCK: a FIFO is refused by key_file_check, not waited on. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		err = errno;
		ibemu_log_err("%s: key file %s: %s", var, path, strerror(err));
		return err;
	}
	err = key_file_check(var, path, fd);
	if (!err)
		err = key_file_slurp(var, path, fd, kb);
	close(fd);
	if (!err && kb->len && kb->b[kb->len - 1] == '\n') {
		kb->len--;
		if (kb->len && kb->b[kb->len - 1] == '\r')
			kb->len--;
	}
	return err;
}

/* Hash the key, if it is long enough, into k. */
static int key_take(struct fabric_key *k, const char *var, const char *what,
		    const void *key, size_t len)
{
	if (len < FABRIC_KEY_MIN) {
		ibemu_log_err("%s: %s holds %zu bytes; a key needs at least %d",
			      var, what, len, FABRIC_KEY_MIN);
		return EINVAL;
	}
	sha256(key, len, k->key);
	k->set = true;
	return 0;
}

static int key_from_file(struct fabric_key *k, const char *var,
			 const char *path)
{
	struct key_buf *kb;
	int err;

	kb = malloc(sizeof(*kb));
	if (!kb) {
		ibemu_log_err("%s: no memory to read key file %s", var, path);
		return ENOMEM;
	}
	err = key_file_read(var, path, kb);
	if (!err)
		err = key_take(k, var, "the key file", kb->b, kb->len);
	explicit_bzero(kb, sizeof(*kb));
	free(kb);
	return err;
}

int fabric_key_load(struct fabric_key *k)
{
	const char *text = getenv(FABRIC_KEY_ENV);
	const char *path = getenv(FABRIC_KEY_FILE_ENV);
	size_t plen = strlen(FABRIC_KEY_FILE_PREFIX);

	fabric_key_clear(k);
	if (text && path) {
		ibemu_log_err("%s and %s are both set: set one", FABRIC_KEY_ENV,
			      FABRIC_KEY_FILE_ENV);
		return EINVAL;
	}
	if (path)
		return key_from_file(k, FABRIC_KEY_FILE_ENV, path);
	if (!text)
		return 0;
	if (!strncmp(text, FABRIC_KEY_FILE_PREFIX, plen))
		return key_from_file(k, FABRIC_KEY_ENV, text + plen);
	return key_take(k, FABRIC_KEY_ENV, "the key", text, strlen(text));
}

void fabric_key_proof(const struct fabric_key *k, const char *label,
		      const void *a, size_t alen, const void *b, size_t blen,
		      uint8_t out[FABRIC_KEY_LEN])
{
	struct hmac_sha256_ctx c;

	hmac_sha256_init(&c, k->key, sizeof(k->key));
	hmac_sha256_update(&c, label, strlen(label) + 1);
	hmac_sha256_update(&c, a, alen);
	hmac_sha256_update(&c, b, blen);
	hmac_sha256_final(&c, out);
}

void fabric_key_clear(struct fabric_key *k)
{
	explicit_bzero(k, sizeof(*k));
}
