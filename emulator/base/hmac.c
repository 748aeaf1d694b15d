// SPDX-License-Identifier: MIT
#include "config.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "hmac.h"
#include "log.h"

/* RFC 2104 §2. */
#define HMAC_IPAD 0x36
#define HMAC_OPAD 0x5c

/* getrandom calls one crypto_random makes at most: a call for up to 256
 * bytes returns them all once the pool is ready; a longer one may be cut
 * short by a signal. */
#define CRYPTO_RANDOM_TRIES 64

void hmac_sha256_init(struct hmac_sha256_ctx *c, const void *key,
		      size_t keylen)
{
	uint8_t k0[SHA256_BLOCK_LEN] = { 0 };
	uint8_t ikey[SHA256_BLOCK_LEN];
	unsigned int i;

	/* §2: K0 is the key, or its hash if longer than B, padded with
	 * zeros to B bytes. */
	if (keylen > SHA256_BLOCK_LEN)
		sha256(key, keylen, k0);
	else if (keylen)
		memcpy(k0, key, keylen);
	for (i = 0; i < SHA256_BLOCK_LEN; i++) {
		ikey[i] = k0[i] ^ HMAC_IPAD;
		c->okey[i] = k0[i] ^ HMAC_OPAD;
	}
	sha256_init(&c->inner);
	sha256_update(&c->inner, ikey, sizeof(ikey));
	explicit_bzero(k0, sizeof(k0));
	explicit_bzero(ikey, sizeof(ikey));
}

void hmac_sha256_update(struct hmac_sha256_ctx *c, const void *data,
			size_t len)
{
	sha256_update(&c->inner, data, len);
}

/* §2: H((K0 ^ opad) || H((K0 ^ ipad) || text)). */
void hmac_sha256_final(struct hmac_sha256_ctx *c,
		       uint8_t out[HMAC_SHA256_LEN])
{
	uint8_t ihash[SHA256_DIGEST_LEN];
	struct sha256_ctx outer;

	sha256_final(&c->inner, ihash);
	sha256_init(&outer);
	sha256_update(&outer, c->okey, sizeof(c->okey));
	sha256_update(&outer, ihash, sizeof(ihash));
	sha256_final(&outer, out);
	explicit_bzero(ihash, sizeof(ihash));
	explicit_bzero(c, sizeof(*c));
}

void hmac_sha256(const void *key, size_t keylen, const void *data,
		 size_t len, uint8_t out[HMAC_SHA256_LEN])
{
	struct hmac_sha256_ctx c;

	hmac_sha256_init(&c, key, keylen);
	hmac_sha256_update(&c, data, len);
	hmac_sha256_final(&c, out);
}

/* Every byte is looked at whatever the earlier ones were; the volatile
 * accumulator keeps the compiler from stopping at the first difference. */
bool crypto_equal(const void *a, const void *b, size_t len)
{
	const volatile uint8_t *pa = a, *pb = b;
	volatile uint8_t diff = 0;
	size_t i;

	for (i = 0; i < len; i++)
		diff |= pa[i] ^ pb[i];
	return diff == 0;
}

int crypto_random(void *buf, size_t len)
{
	uint8_t *p = buf;
	unsigned int tries;
	ssize_t n;
	int err;

	for (tries = 0; len && tries < CRYPTO_RANDOM_TRIES; tries++) {
		n = getrandom(p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			err = errno;
			ibemu_log_err("getrandom: %s", strerror(err));
			return err;
		}
		p += n;
		len -= (size_t)n;
	}
	if (len) {
		ibemu_log_err("getrandom: interrupted %u times, %zu bytes "
			      "short", tries, len);
		return EINTR;
	}
	return 0;
}
