/* SPDX-License-Identifier: MIT */
/*
 * HMAC-SHA-256 (RFC 2104 §2, with SHA-256 as H: B = 64, L = 32), one-shot
 * and streaming, and what a challenge-response needs beside it: a
 * comparison whose time does not depend on where two MACs differ, and
 * random challenges from the kernel.
 *
 * Lock rule: a context belongs to its caller; nothing is shared.
 */
#ifndef IBEMU_HMAC_H
#define IBEMU_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sha256.h"

#define HMAC_SHA256_LEN SHA256_DIGEST_LEN

struct hmac_sha256_ctx {
	struct sha256_ctx inner; /* H((K0 ^ ipad) || text ...) */
	uint8_t okey[SHA256_BLOCK_LEN]; /* K0 ^ opad */
};

/* A key of any length: one longer than a block is hashed first (§2). */
void hmac_sha256_init(struct hmac_sha256_ctx *c, const void *key,
		      size_t keylen);
void hmac_sha256_update(struct hmac_sha256_ctx *c, const void *data,
			size_t len);
/* Writes the MAC and wipes c. */
void hmac_sha256_final(struct hmac_sha256_ctx *c,
		       uint8_t out[HMAC_SHA256_LEN]);
void hmac_sha256(const void *key, size_t keylen, const void *data,
		 size_t len, uint8_t out[HMAC_SHA256_LEN]);

/* Whether the len bytes at a and b are equal, in a time that depends on
 * len only. */
bool crypto_equal(const void *a, const void *b, size_t len);
/* len random bytes from getrandom(2): 0, or a positive errno, logged. */
int crypto_random(void *buf, size_t len);

#endif /* IBEMU_HMAC_H */
