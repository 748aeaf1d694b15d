/* SPDX-License-Identifier: MIT */
/*
 * The fabric key: an optional secret the nodes of a fabric share, with
 * which they prove to each other, by challenge and response, that they
 * belong to it.  Where it comes from, in the environment:
 *
 *   IBEMU_FABRIC_KEY=TEXT        the key itself, at least 16 bytes;
 *   IBEMU_FABRIC_KEY=file:PATH   the key is the content of PATH;
 *   IBEMU_FABRIC_KEY_FILE=PATH   the same.
 *
 * Setting both variables is an error, as neither could be the one meant.
 * A key file must be a regular file of this user that no one else may
 * read or write (mode & 077 == 0), as ssh asks of a private key; its
 * content, at most 4096 bytes, is the key, less one final line end ("\n"
 * or "\r\n") so that a key written with echo is the same key as the text
 * given in IBEMU_FABRIC_KEY.  The key, of whatever length, is hashed with
 * SHA-256 into the 32 bytes the MACs use.
 *
 * Lock rule: a struct fabric_key is written once by fabric_key_load and
 * read only after; the caller publishes it to other threads.
 */
#ifndef IBEMU_FABRIC_KEY_H
#define IBEMU_FABRIC_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FABRIC_KEY_LEN 32 /* the hashed key, and a proof */
#define FABRIC_KEY_MIN 16 /* the shortest key accepted, in bytes */
#define FABRIC_KEY_FILE_MAX 4096 /* the longest key file */

struct fabric_key {
	bool set; /* a key is configured */
	uint8_t key[FABRIC_KEY_LEN]; /* SHA-256 of the key */
};

/*
 * Load the key the environment names into k.  0 with k->set false when
 * none is configured, 0 with k->set true when it is loaded; a positive
 * errno, with one line logged, for a setting that cannot be used (a key
 * too short, a key file missing, not a regular file, not ours, open to
 * others, too long, unreadable): k->set is then false, and the caller
 * should refuse to run rather than run without the key meant.
 */
int fabric_key_load(struct fabric_key *k);
/*
 * The proof of the key for one exchange: HMAC-SHA-256(key, label || NUL
 * || a || b).  label names the step (which side proves, and what), and
 * its NUL keeps one label from being the prefix of another; a and b are
 * the exchange's fields, of lengths fixed by the protocol (the two
 * challenges).  k must be set.
 */
void fabric_key_proof(const struct fabric_key *k, const char *label,
		      const void *a, size_t alen, const void *b, size_t blen,
		      uint8_t out[FABRIC_KEY_LEN]);
/* Forget the key: k->set false, the key wiped. */
void fabric_key_clear(struct fabric_key *k);

#endif /* IBEMU_FABRIC_KEY_H */
