// SPDX-License-Identifier: MIT
/*
 * SHA-256, HMAC-SHA-256 and the fabric key (emulator/base/sha256.[ch],
 * hmac.[ch], fabric_key.[ch]): the digests of FIPS 180-4's examples and
 * the MACs of RFC 4231's test cases, whole and fed in odd pieces; the
 * fabric key from the environment and from key files, each bad setting
 * refused with one line; proofs that change with the label and the key.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "unit.h"

#include "fabric_key.h"
#include "hmac.h"
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

/* The MAC of data under key, in one call and a byte at a time. */
static void check_hmac(const void *key, size_t keylen, const void *data,
		       size_t len, const char *hex)
{
	uint8_t out[HMAC_SHA256_LEN];
	struct hmac_sha256_ctx c;
	const uint8_t *p = data;
	size_t i;

	hmac_sha256(key, keylen, data, len, out);
	check_digest(out, hex);
	hmac_sha256_init(&c, key, keylen);
	for (i = 0; i < len; i++)
		hmac_sha256_update(&c, p + i, 1);
	hmac_sha256_final(&c, out);
	check_digest(out, hex);
}

/* RFC 4231 §4.2-4.5: keys shorter than the hash, data of bytes >= 0x80. */
static void test_hmac_rfc4231_short_keys(void)
{
	uint8_t key[25], data[50];
	size_t i;

	memset(key, 0x0b, 20);
	check_hmac(key, 20, "Hi There", 8,
		   "b0344c61d8db38535ca8afceaf0bf12b"
		   "881dc200c9833da726e9376c2e32cff7");
	check_hmac("Jefe", 4, "what do ya want for nothing?", 28,
		   "5bdcc146bf60754e6a042426089575c7"
		   "5a003f089d2739839dec58b964ec3843");
	memset(key, 0xaa, 20);
	memset(data, 0xdd, 50);
	check_hmac(key, 20, data, 50,
		   "773ea91e36800e46854db8ebd09181a7"
		   "2959098b3ef8c122d9635514ced565fe");
	for (i = 0; i < 25; i++)
		key[i] = (uint8_t)(i + 1);
	memset(data, 0xcd, 50);
	check_hmac(key, 25, data, 50,
		   "82558a389a443c0ea4cc819899f2083a"
		   "85f0faa3e578f8077a2e3ff46729665b");
}

/* RFC 4231 §4.7-4.8: a key longer than a block, which is hashed first,
 * and data longer than a block. */
static void test_hmac_rfc4231_long_key(void)
{
	static const char d6[] =
		"Test Using Larger Than Block-Size Key - Hash Key First";
	static const char d7[] =
		"This is a test using a larger than block-size key and a "
		"larger than block-size data. The key needs to be hashed "
		"before being used by the HMAC algorithm.";
	uint8_t key[131];

	memset(key, 0xaa, sizeof(key));
	check_hmac(key, sizeof(key), d6, strlen(d6),
		   "60e431591ee0b67f0d8a26aacbf5b77f"
		   "8e0bc6213728c5140546040f0ee37f54");
	check_hmac(key, sizeof(key), d7, strlen(d7),
		   "9b09ffa71b942fcb27635fbcd5b0e944"
		   "bfdc63644f0713938a7f51535c3a35e2");
}

static void test_crypto_equal(void)
{
	uint8_t a[32], b[32];

	memset(a, 0x5a, sizeof(a));
	memcpy(b, a, sizeof(b));
	CU_ASSERT_TRUE(crypto_equal(a, b, sizeof(a)));
	CU_ASSERT_TRUE(crypto_equal(a, b, 0));
	b[0] ^= 1;
	CU_ASSERT_FALSE(crypto_equal(a, b, sizeof(a)));
	b[0] ^= 1;
	b[31] ^= 0x80;
	CU_ASSERT_FALSE(crypto_equal(a, b, sizeof(a)));
	CU_ASSERT_TRUE(crypto_equal(a, b, 31));
}

static void test_crypto_random(void)
{
	uint8_t a[32], b[32], big[1000];

	memset(a, 0, sizeof(a));
	memset(b, 0, sizeof(b));
	CU_ASSERT_EQUAL(crypto_random(a, sizeof(a)), 0);
	CU_ASSERT_EQUAL(crypto_random(b, sizeof(b)), 0);
	CU_ASSERT(memcmp(a, b, sizeof(a)) != 0);
	CU_ASSERT_EQUAL(crypto_random(big, sizeof(big)), 0);
	CU_ASSERT_EQUAL(crypto_random(big, 0), 0);
}

/* The fabric key's tests work in a directory of their own. */
static char key_dir[64];
static char key_path[128];

static void key_dir_make(void)
{
	strcpy(key_dir, "/tmp/ibemu-test-crypto-XXXXXX");
	CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(key_dir));
	snprintf(key_path, sizeof(key_path), "%s/key", key_dir);
}

static void key_dir_remove(void)
{
	unlink(key_path);
	CU_ASSERT_EQUAL(rmdir(key_dir), 0);
}

/* Write len bytes to the key file, mode mode. */
static void key_file_write(const void *data, size_t len, mode_t mode)
{
	FILE *f;

	unlink(key_path);
	f = fopen(key_path, "w");
	CU_ASSERT_PTR_NOT_NULL_FATAL(f);
	CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
	CU_ASSERT_EQUAL(fclose(f), 0);
	CU_ASSERT_EQUAL_FATAL(chmod(key_path, mode), 0);
}

static void key_env(const char *text, const char *path)
{
	unsetenv("IBEMU_QUIET");
	if (text)
		setenv("IBEMU_FABRIC_KEY", text, 1);
	else
		unsetenv("IBEMU_FABRIC_KEY");
	if (path)
		setenv("IBEMU_FABRIC_KEY_FILE", path, 1);
	else
		unsetenv("IBEMU_FABRIC_KEY_FILE");
}

/* fabric_key_load, with what it writes to stderr in log; returns its
 * result, and the number of lines written in *lines_p. */
static int key_load(struct fabric_key *k, char *log, size_t size,
		    int *lines_p)
{
	FILE *tmp = tmpfile();
	int saved, err, c;
	size_t n = 0;

	CU_ASSERT_PTR_NOT_NULL_FATAL(tmp);
	fflush(stderr);
	saved = dup(STDERR_FILENO);
	CU_ASSERT_FATAL(saved >= 0);
	CU_ASSERT_FATAL(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	memset(k, 0xee, sizeof(*k));
	err = fabric_key_load(k);
	fflush(stderr);
	dup2(saved, STDERR_FILENO);
	close(saved);
	rewind(tmp);
	*lines_p = 0;
	while ((c = fgetc(tmp)) != EOF) {
		if (c == '\n')
			(*lines_p)++;
		if (n + 1 < size)
			log[n++] = (char)c;
	}
	log[n] = '\0';
	fclose(tmp);
	return err;
}

/* The setting loads the key whose SHA-256 hex names, logging nothing. */
static void check_loads(const char *text)
{
	struct fabric_key k;
	uint8_t want[SHA256_DIGEST_LEN];
	char log[512];
	int lines;

	sha256(text, strlen(text), want);
	CU_ASSERT_EQUAL(key_load(&k, log, sizeof(log), &lines), 0);
	CU_ASSERT_TRUE(k.set);
	CU_ASSERT(memcmp(k.key, want, sizeof(want)) == 0);
	CU_ASSERT_EQUAL(lines, 0);
}

/* The setting is refused with err and one line that holds what. */
static void check_refused(int err, const char *what)
{
	struct fabric_key k;
	char log[512];
	int lines;

	CU_ASSERT_EQUAL(key_load(&k, log, sizeof(log), &lines), err);
	CU_ASSERT_FALSE(k.set);
	CU_ASSERT_EQUAL(lines, 1);
	CU_ASSERT_PTR_NOT_NULL(strstr(log, what));
	CU_ASSERT_PTR_NOT_NULL(strstr(log, "error"));
}

static const char key_text[] = "a fabric key of 28 bytes ...";

static void test_fabric_key_env(void)
{
	struct fabric_key k;
	char log[512];
	int lines;

	key_env(NULL, NULL);
	CU_ASSERT_EQUAL(key_load(&k, log, sizeof(log), &lines), 0);
	CU_ASSERT_FALSE(k.set);
	CU_ASSERT_EQUAL(lines, 0);
	key_env(key_text, NULL);
	check_loads(key_text);
	key_env("0123456789abcdef", NULL);
	check_loads("0123456789abcdef");
	key_env("0123456789abcde", NULL); /* 15 bytes */
	check_refused(EINVAL, "at least 16");
	key_env("", NULL);
	check_refused(EINVAL, "IBEMU_FABRIC_KEY");
	key_env("file:", NULL);
	check_refused(EINVAL, "names no key file");
	key_env(NULL, "");
	check_refused(EINVAL, "names no key file");
}

/* Mode 0600 (or 0400, 0700) is ours alone; the content less one final
 * line end is the key, so a file written with echo holds the same key. */
static void test_fabric_key_file(void)
{
	char spec[160];
	char big[FABRIC_KEY_FILE_MAX + 1];

	key_dir_make();
	snprintf(spec, sizeof(spec), "file:%s", key_path);
	key_file_write(key_text, strlen(key_text), 0600);
	key_env(NULL, key_path);
	check_loads(key_text);
	key_env(spec, NULL);
	check_loads(key_text);
	key_file_write("a fabric key of 28 bytes ...\n", 29, 0400);
	check_loads(key_text);
	key_file_write("a fabric key of 28 bytes ...\r\n", 30, 0700);
	check_loads(key_text);
	key_file_write("a fabric key of 28 bytes ...\n\n", 30, 0600);
	check_loads("a fabric key of 28 bytes ...\n");
	memset(big, 'k', sizeof(big));
	key_file_write(big, FABRIC_KEY_FILE_MAX, 0600);
	big[FABRIC_KEY_FILE_MAX] = '\0';
	check_loads(big);
	key_dir_remove();
}

static void test_fabric_key_file_refused(void)
{
	static const mode_t open_modes[] = { 0644, 0640, 0604, 0602, 0620,
					     0610, 0601 };
	char big[FABRIC_KEY_FILE_MAX + 1];
	size_t i;

	key_dir_make();
	key_env(NULL, key_path);
	for (i = 0; i < sizeof(open_modes) / sizeof(open_modes[0]); i++) {
		key_file_write(key_text, strlen(key_text), open_modes[i]);
		check_refused(EACCES, key_path);
	}
	key_file_write("0123456789abcde\n", 16, 0600); /* 15 bytes of key */
	check_refused(EINVAL, "at least 16");
	memset(big, 'k', sizeof(big));
	key_file_write(big, sizeof(big), 0600);
	check_refused(EFBIG, "longer than 4096");
	if (geteuid() == 0) { /* a file of another user */
		key_file_write(key_text, strlen(key_text), 0600);
		CU_ASSERT_EQUAL(chown(key_path, 65534, 65534), 0);
		check_refused(EACCES, "uid 65534");
	}
	unlink(key_path);
	check_refused(ENOENT, key_path);
	key_env(NULL, key_dir); /* a directory */
	check_refused(EINVAL, "not a regular file");
	key_env(key_text, key_path); /* which one? */
	check_refused(EINVAL, "both set");
	key_dir_remove();
}

static void key_of(struct fabric_key *k, const char *text)
{
	char log[512];
	int lines;

	key_env(text, NULL);
	CU_ASSERT_EQUAL_FATAL(key_load(k, log, sizeof(log), &lines), 0);
	CU_ASSERT_FATAL(k->set);
}

/* A proof is HMAC(key, label NUL a b): another label, another key or
 * another challenge gives another proof. */
static void test_fabric_key_proof(void)
{
	static const uint8_t a[16] = { 1, 2, 3 }, b[16] = { 4, 5, 6 };
	uint8_t p1[FABRIC_KEY_LEN], p2[FABRIC_KEY_LEN], want[HMAC_SHA256_LEN];
	struct fabric_key k1, k2;
	struct hmac_sha256_ctx c;

	key_of(&k1, key_text);
	key_of(&k2, "another fabric key of 32 bytes..");
	fabric_key_proof(&k1, "server", a, sizeof(a), b, sizeof(b), p1);
	hmac_sha256_init(&c, k1.key, sizeof(k1.key));
	hmac_sha256_update(&c, "server", 7);
	hmac_sha256_update(&c, a, sizeof(a));
	hmac_sha256_update(&c, b, sizeof(b));
	hmac_sha256_final(&c, want);
	CU_ASSERT(memcmp(p1, want, sizeof(want)) == 0);
	fabric_key_proof(&k1, "server", a, sizeof(a), b, sizeof(b), p2);
	CU_ASSERT(crypto_equal(p1, p2, sizeof(p1)));
	fabric_key_proof(&k1, "client", a, sizeof(a), b, sizeof(b), p2);
	CU_ASSERT_FALSE(crypto_equal(p1, p2, sizeof(p1)));
	fabric_key_proof(&k2, "server", a, sizeof(a), b, sizeof(b), p2);
	CU_ASSERT_FALSE(crypto_equal(p1, p2, sizeof(p1)));
	fabric_key_proof(&k1, "server", b, sizeof(b), a, sizeof(a), p2);
	CU_ASSERT_FALSE(crypto_equal(p1, p2, sizeof(p1)));
	/* "serve" with a challenge starting "r" is not "server" */
	fabric_key_proof(&k1, "serve", "r", 1, a, sizeof(a), p1);
	fabric_key_proof(&k1, "server", NULL, 0, a, sizeof(a), p2);
	CU_ASSERT_FALSE(crypto_equal(p1, p2, sizeof(p1)));
	fabric_key_clear(&k1);
	CU_ASSERT_FALSE(k1.set);
	key_env(NULL, NULL);
}

int main(void)
{
	static const struct unit_test tests[] = {
		{ "sha256_short", test_sha256_short },
		{ "sha256_million", test_sha256_million },
		{ "sha256_padding", test_sha256_padding },
		{ "hmac_rfc4231_short_keys", test_hmac_rfc4231_short_keys },
		{ "hmac_rfc4231_long_key", test_hmac_rfc4231_long_key },
		{ "crypto_equal", test_crypto_equal },
		{ "crypto_random", test_crypto_random },
		{ "fabric_key_env", test_fabric_key_env },
		{ "fabric_key_file", test_fabric_key_file },
		{ "fabric_key_file_refused", test_fabric_key_file_refused },
		{ "fabric_key_proof", test_fabric_key_proof },
		{ NULL, NULL },
	};

	return unit_run("crypto", tests);
}
