/*
 * fuzz.h - helpers shared by the libFuzzer targets of test/fuzz/ (one fuzz_<area>.c each,
 * built by test/fuzz/fuzz.mk with clang, ASan and UBSan; see test/fuzz/README).
 *
 * A target's input is cut into parts (at NUL bytes, or by a leading selector byte); each
 * part goes to the real module functions. FZ_CHECK states an invariant the module must
 * keep (a round trip, two ways of reading one value agreeing): a failure aborts, and
 * libFuzzer keeps the input as a crash.
 */
#ifndef NEKI_TEST_FUZZ_FUZZ_H
#define NEKI_TEST_FUZZ_FUZZ_H

#include "neki/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define FZ_CHECK(cond)                                                                   \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                  \
			abort();                                                         \
		}                                                                        \
	} while (0)

/* Drop the answer of a NK_MUSTCHECK function whose refusal is an expected outcome. */
static inline void
fz_ignore(bool ok)
{
	(void)ok;
}

/* A NUL-terminated copy of <d>/<n> (malloc'd; aborts on no memory: a fuzzer's limit). */
static inline char *
fz_strndup(const uint8_t *d, size_t n)
{
	char *s = malloc(n + 1);

	FZ_CHECK(s != NULL);
	memcpy(s, d, n);
	s[n] = '\0';
	return s;
}

/* True when SASL data <d>/<n> asks for few enough PBKDF2 iterations to run quickly. */
static inline bool
fz_cheap_iterations(const uint8_t *d, size_t n)
{
	for (size_t i = 0; i + 2 < n; i++) {
		if (d[i] == 'i' && d[i + 1] == '=') {
			size_t k = i + 2;

			while (k < n && d[k] >= '0' && d[k] <= '9')
				k++;
			if (k - (i + 2) > 2)
				return false;
		}
	}
	return true;
}

/* The next part of <*d>/<*n> up to a NUL byte (or the end); advances past it. */
static inline size_t
fz_part(const uint8_t **d, size_t *n, const uint8_t **part)
{
	const uint8_t *nul = memchr(*d, 0, *n);
	size_t len = nul ? (size_t)(nul - *d) : *n;

	*part = *d;
	*d += nul ? len + 1 : len;
	*n -= nul ? len + 1 : len;
	return len;
}

/* One byte of <*d>/<*n> (0 once it is used up). */
static inline uint8_t
fz_byte(const uint8_t **d, size_t *n)
{
	uint8_t b = *n ? **d : 0;

	if (*n) {
		(*d)++;
		(*n)--;
	}
	return b;
}

#endif /* NEKI_TEST_FUZZ_FUZZ_H */
