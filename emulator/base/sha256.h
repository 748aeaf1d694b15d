/* SPDX-License-Identifier: MIT */
/*
 * SHA-256 (FIPS 180-4 §6.2), streaming and one-shot, for the fabric key
 * (fabric_key.h) and HMAC-SHA-256 (hmac.h).  Words are loaded and stored
 * a byte at a time, big-endian as §3.1 fixes them, so the result is the
 * same whatever the host's byte order.  Not constant-time: it hashes
 * nothing whose timing could leak a secret a peer can probe (the MAC
 * compares in constant time, crypto_equal in hmac.h).
 *
 * Lock rule: a context belongs to its caller; nothing is shared.
 */
#ifndef IBEMU_SHA256_H
#define IBEMU_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_LEN 32
#define SHA256_BLOCK_LEN 64

struct sha256_ctx {
	uint32_t h[8]; /* the hash value H(i), §6.2.2 */
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[SHA256_BLOCK_LEN]; /* the partial block */
	size_t fill; /* bytes in buf, < SHA256_BLOCK_LEN */
};

void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);
/* Pads (§5.1.1), writes the digest and wipes c. */
void sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN]);
void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN]);

#endif /* IBEMU_SHA256_H */
