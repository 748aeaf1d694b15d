// SPDX-License-Identifier: MIT
/*
 * SHA-256 (emulator/base/sha256.[ch]): the digests of FIPS 180-4's
 * examples, whole and fed in odd pieces.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "unit.h"

#include "sha256.h"

/* hex, 2 digits a byte, into out. */
static void unhex(const char *hex, uint8_t *out, size_t len)
{
	unsigned int v;
	size_t i;

	CU_ASSERT_EQUAL_FATAL(strlen(hex), 2 * len);
	for (i = 0; i < len; i++) {
		CU_ASSERT_EQUAL_FATAL(sscanf(hex + 2 * i, "%2x", &v), 1);
		out[i] = (uint8_t)v;
	}
}

static void check_digest(const uint8_t *got, const char *hex)
{
	uint8_t want[SHA256_DIGEST_LEN];

	unhex(hex, want, sizeof(want));
	CU_ASSERT(memcmp(got, want, sizeof(want)) == 0);
}

/* The digest of msg, in one call and in pieces of chunk bytes. */
static void check_sha256(const void *msg, size_t len, size_t chunk,
			 const char *hex)
{
	uint8_t out[SHA256_DIGEST_LEN];
	struct sha256_ctx c;
	const uint8_t *p = msg;
	size_t n, off;

	sha256(msg, len, out);
	check_digest(out, hex);
	sha256_init(&c);
	for (off = 0; off < len; off += n) {
		n = len - off < chunk ? len - off : chunk;
		sha256_update(&c, p + off, n);
	}
	sha256_final(&c, out);
	check_digest(out, hex);
}

/* FIPS 180-4's examples (the NIST examples of SHA-256): one block, two
 * blocks, and the empty message. */
static void test_sha256_short(void)
{
	static const char two[] =
		"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
	size_t chunk;

	check_sha256("", 0, 1, "e3b0c44298fc1c149afbf4c8996fb924"
			       "27ae41e4649b934ca495991b7852b855");
	for (chunk = 1; chunk <= 4; chunk++) {
		check_sha256("abc", 3, chunk,
			     "ba7816bf8f01cfea414140de5dae2223"
			     "b00361a396177a9cb410ff61f20015ad");
		check_sha256(two, strlen(two), chunk * 7,
			     "248d6a61d20638b8e5c026930c3e6039"
			     "a33ce45964ff2167f6ecedd419db06c1");
	}
}

/* One million 'a's, whole and in pieces of odd sizes that straddle the
 * 64-byte blocks every way. */
static void test_sha256_million(void)
{
	static const char hex[] = "cdc76e5c9914fb9281a1c7e284d73e67"
				  "f1809a48a497200e046d39ccc7112cd0";
	static const size_t chunks[] = { 1, 3, 55, 63, 65, 127, 1000003 };
	size_t len = 1000000, i;
	uint8_t *m = malloc(len);

	CU_ASSERT_PTR_NOT_NULL_FATAL(m);
	memset(m, 'a', len);
	for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++)
		check_sha256(m, len, chunks[i], hex);
	free(m);
}

/* The padding's edges (§5.1.1): 55 bytes leave room for the length in
 * the block, 56 do not, 64 fill it; the digests are OpenSSL's. */
static void test_sha256_padding(void)
{
	static const struct {
		size_t len;
		const char *hex;
	} v[] = {
		{ 55, "9f4390f8d30c2dd92ec9f095b65e2b9a"
		      "e9b0a925a5258e241c9f1e910f734318" },
		{ 56, "b35439a4ac6f0948b6d6f9e3c6af0f5f"
		      "590ce20f1bde7090ef7970686ec6738a" },
		{ 63, "7d3e74a05d7db15bce4ad9ec0658ea98"
		      "e3f06eeecf16b4c6fff2da457ddc2f34" },
		{ 64, "ffe054fe7ae0cb6dc65c3af9b61d5209"
		      "f439851db43d0ba5997337df154668eb" },
		{ 65, "635361c48bb9eab14198e76ea8ab7f1a"
		      "41685d6ad62aa9146d301d4f17eb0ae0" },
		{ 119, "31eba51c313a5c08226adf18d4a359cf"
		       "dfd8d2e816b13f4af952f7ea6584dcfb" },
		{ 120, "2f3d335432c70b580af0e8e1b3674a7c"
		       "020d683aa5f73aaaedfdc55af904c21c" },
	};
	uint8_t m[128];
	size_t i;

	memset(m, 'a', sizeof(m));
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		check_sha256(m, v[i].len, 1, v[i].hex);
		check_sha256(m, v[i].len, 54, v[i].hex);
	}
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "sha256_short", test_sha256_short },
		{ "sha256_million", test_sha256_million },
		{ "sha256_padding", test_sha256_padding },
		{ NULL, NULL },
	};

	return unit_run("crypto", tests);
}
