// SPDX-License-Identifier: MIT
#include "config.h"

#include <string.h>

#include "sha256.h"

/* §4.2.2: the first 32 bits of the fractional parts of the cube roots of
 * the first 64 primes. */
static const uint32_t sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/* §5.3.3: the first 32 bits of the fractional parts of the square roots
 * of the first 8 primes. */
static const uint32_t sha256_h0[8] = {
	0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
	0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
};

static uint32_t rotr(uint32_t x, unsigned int n)
{
	return (x >> n) | (x << (32 - n));
}

/* The functions of §4.1.2. */
static uint32_t ch(uint32_t x, uint32_t y, uint32_t z)
{
	return (x & y) ^ (~x & z);
}

static uint32_t maj(uint32_t x, uint32_t y, uint32_t z)
{
	return (x & y) ^ (x & z) ^ (y & z);
}

static uint32_t big_sigma0(uint32_t x)
{
	return rotr(x, 2) ^ rotr(x, 13) ^ rotr(x, 22);
}

static uint32_t big_sigma1(uint32_t x)
{
	return rotr(x, 6) ^ rotr(x, 11) ^ rotr(x, 25);
}

static uint32_t small_sigma0(uint32_t x)
{
	return rotr(x, 7) ^ rotr(x, 18) ^ (x >> 3);
}

static uint32_t small_sigma1(uint32_t x)
{
	return rotr(x, 17) ^ rotr(x, 19) ^ (x >> 10);
}

static uint32_t load_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void store_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* The message schedule W0..W63 of block m (§6.2.2 step 1). */
static void sha256_schedule(uint32_t w[64], const uint8_t *m)
{
	unsigned int t;

	for (t = 0; t < 16; t++)
		w[t] = load_be32(m + 4 * t);
	for (; t < 64; t++)
		w[t] = small_sigma1(w[t - 2]) + w[t - 7] +
		       small_sigma0(w[t - 15]) + w[t - 16];
}

/* One block into the hash value (§6.2.2 steps 2-4). */
static void sha256_block(uint32_t h[8], const uint8_t *m)
{
	uint32_t w[64], v[8], t1, t2;
	unsigned int t;

	sha256_schedule(w, m);
	memcpy(v, h, sizeof(v));
	for (t = 0; t < 64; t++) {
		t1 = v[7] + big_sigma1(v[4]) + ch(v[4], v[5], v[6]) +
		     sha256_k[t] + w[t];
		t2 = big_sigma0(v[0]) + maj(v[0], v[1], v[2]);
		memmove(v + 1, v, 7 * sizeof(v[0]));
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (t = 0; t < 8; t++)
		h[t] += v[t];
}

void sha256_init(struct sha256_ctx *c)
{
	memcpy(c->h, sha256_h0, sizeof(c->h));
	c->len = 0;
	c->fill = 0;
}

void sha256_update(struct sha256_ctx *c, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t n;

	if (!len)
		return;
	c->len += len;
	if (c->fill) {
		n = SHA256_BLOCK_LEN - c->fill;
		if (n > len)
			n = len;
		memcpy(c->buf + c->fill, p, n);
		c->fill += n;
		p += n;
		len -= n;
		if (c->fill < SHA256_BLOCK_LEN)
			return;
		sha256_block(c->h, c->buf);
		c->fill = 0;
	}
	for (; len >= SHA256_BLOCK_LEN; len -= SHA256_BLOCK_LEN) {
		sha256_block(c->h, p);
		p += SHA256_BLOCK_LEN;
	}
	memcpy(c->buf, p, len);
	c->fill = len;
}

/* §5.1.1: a 1 bit, zeros to 448 bits mod 512, the length in bits as a
 * 64-bit big-endian number. */
void sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_DIGEST_LEN])
{
	uint64_t bits = c->len * 8;
	unsigned int i;

	c->buf[c->fill++] = 0x80;
	if (c->fill > SHA256_BLOCK_LEN - 8) {
		memset(c->buf + c->fill, 0, SHA256_BLOCK_LEN - c->fill);
		sha256_block(c->h, c->buf);
		c->fill = 0;
	}
	memset(c->buf + c->fill, 0, SHA256_BLOCK_LEN - 8 - c->fill);
	for (i = 0; i < 8; i++)
		c->buf[SHA256_BLOCK_LEN - 1 - i] = (uint8_t)(bits >> (8 * i));
	sha256_block(c->h, c->buf);
	for (i = 0; i < 8; i++)
		store_be32(out + 4 * i, c->h[i]);
	explicit_bzero(c, sizeof(*c));
}

void sha256(const void *data, size_t len, uint8_t out[SHA256_DIGEST_LEN])
{
	struct sha256_ctx c;

	sha256_init(&c);
	sha256_update(&c, data, len);
	sha256_final(&c, out);
}
