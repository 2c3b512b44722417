/*
 * hash.c - the xxhash adapter (neki/hash.h): the only file that includes xxhash.h (inlined:
 * XXH_INLINE_ALL compiles the functions used here into this file).
 *
 * The keyed hash uses XXH3's custom secret: NK_HASH_SECRET_LEN random bytes from
 * getrandom(2). Before nk_hash_secret_init() (unit tests, tools) the secret is a fixed
 * pattern, which keeps the names stable within the process and nothing more.
 */
#include "neki/base.h"
#include "neki/hash.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define XXH_INLINE_ALL	/* the state type complete (on the stack), and no ABI to match */
#include <xxhash.h>

#define NK_HASH_SECRET_LEN 192	/* XXH3 wants at least XXH3_SECRET_SIZE_MIN (136) */

_Static_assert(NK_HASH_SECRET_LEN >= XXH3_SECRET_SIZE_MIN, "the secret is long enough");

static unsigned char hash_secret[NK_HASH_SECRET_LEN];
static bool hash_secret_ready;		/* hash_secret holds something (random or default) */
static bool hash_secret_random;		/* ... drawn by nk_hash_secret_init() */

/* The default secret: a fixed non-repeating pattern (XXH3 refuses low-entropy secrets). */
static void
hash_secret_default(void)
{
	uint64_t x = UINT64_C(0x9e3779b97f4a7c15);

	for (size_t i = 0; i < sizeof(hash_secret); i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		hash_secret[i] = (unsigned char)(x >> 24);
	}
	hash_secret_ready = true;
}

uint64_t
nk_hash64(const void *data, size_t len)
{
	return XXH3_64bits(data, len);
}

uint64_t
nk_hash64_str(const char *s)
{
	return XXH3_64bits(s, strlen(s));
}

bool
nk_hash_secret_init(void)
{
	size_t got = 0;

	if (hash_secret_random)
		return true;
	while (got < sizeof(hash_secret)) {
		ssize_t n = getrandom(hash_secret + got, sizeof(hash_secret) - got, 0);

		if (n == -1 && errno == EINTR)
			continue;
		if (n <= 0) {
			hash_secret_default();
			return false;
		}
		got += (size_t)n;
	}
	hash_secret_ready = hash_secret_random = true;
	return true;
}

struct nk_hash128
nk_hash128_keyed(const void *a, size_t alen, const void *b, size_t blen)
{
	static XXH3_state_t st;		/* reused: one process, one thread (it is large) */
	XXH128_hash_t h;

	if (!hash_secret_ready)
		hash_secret_default();
	(void)XXH3_128bits_reset_withSecret(&st, hash_secret, sizeof(hash_secret));
	(void)XXH3_128bits_update(&st, a, alen);
	(void)XXH3_128bits_update(&st, b, blen);
	h = XXH3_128bits_digest(&st);
	return (struct nk_hash128){ h.low64, h.high64 };
}
