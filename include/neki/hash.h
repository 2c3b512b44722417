/*
 * neki/hash.h - hashes for tables and for names that must be the same in every process
 * (src/common/hash.c, the xxhash adapter).
 *
 * nk_hash64 is XXH3_64bits with seed 0: fast, stable across runs and builds (the topology's
 * routing values are made with it; they must never change). nk_hash128_keyed is XXH3's
 * 128-bit hash with this neki's random secret: the same in every process of one neki (the
 * master draws the secret before it forks), unpredictable outside it, so that names derived
 * from it (the server-side names of prepared statements) cannot be made to collide by a
 * client that chooses the texts.
 */
#ifndef NEKI_HASH_H
#define NEKI_HASH_H

#include "neki/base.h"

#include <stddef.h>

struct nk_hash128 {
	uint64_t lo, hi;
};

/* XXH3_64bits (seed 0) of <len> bytes at <data>. */
uint64_t nk_hash64(const void *data, size_t len);
/* ... of the string <s>. */
uint64_t nk_hash64_str(const char *s);

/*
 * 64-bit FNV-1a of <len> bytes at <data>, continued from <h> (NK_FNV1A_BASIS to begin): for
 * a key hashed in parts as it is read (no buffer to join them into first).
 */
#define NK_FNV1A_BASIS UINT64_C(14695981039346656037)
static inline uint64_t
nk_fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * UINT64_C(1099511628211);
	return h;
}

/*
 * Draw this process's secret for nk_hash128_keyed (the master, before it forks: the
 * children inherit it). False when the system has no randomness to give (the secret then
 * stays the built-in default). Called again, it keeps the secret it has.
 */
NK_MUSTCHECK bool nk_hash_secret_init(void);

/* The keyed 128-bit hash of <alen> bytes at <a> followed by <blen> bytes at <b>. */
struct nk_hash128 nk_hash128_keyed(const void *a, size_t alen, const void *b, size_t blen);

#endif /* NEKI_HASH_H */
