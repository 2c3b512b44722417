/*
 * saslprep.c - RFC 4013 SASLprep of passwords, as Postgres' pg_saslprep() does it.
 *
 * Steps: pure ASCII passes unchanged (Postgres' shortcut); otherwise decode UTF-8
 * (invalid -> INVALID_UTF8), map non-ASCII spaces (RFC 3454 C.1.2) to U+0020 and
 * drop "commonly mapped to nothing" characters (B.1), normalise to NFKC, refuse
 * prohibited output (C.1.2-C.9) and check the bidi rule (-> PROHIBITED).
 * NFKC and the bidi categories come from ICU (the only ICU user in neki).
 * Difference from Postgres, documented: Postgres also refuses code points that
 * were unassigned in Unicode 3.2 (RFC 3454 A.1) and takes bidi categories from
 * Unicode 3.2 tables; ICU's are newer. Both only matter for passwords with such
 * characters, and in either case the caller then falls back to the raw password.
 */
#include "neki/base.h"

#include "neki/scram.h"

#include <stdlib.h>
#include <string.h>

#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

struct cp_range {
	uint32_t lo, hi;
};

/* RFC 3454 C.1.2: non-ASCII space characters (mapped to U+0020, then prohibited). */
static const struct cp_range non_ascii_space[] = {
	{ 0x00A0, 0x00A0 }, { 0x1680, 0x1680 }, { 0x2000, 0x200B }, { 0x202F, 0x202F },
	{ 0x205F, 0x205F }, { 0x3000, 0x3000 },
};

/* RFC 3454 B.1: commonly mapped to nothing. */
static const struct cp_range mapped_to_nothing[] = {
	{ 0x00AD, 0x00AD }, { 0x034F, 0x034F }, { 0x1806, 0x1806 }, { 0x180B, 0x180D },
	{ 0x200B, 0x200D }, { 0x2060, 0x2060 }, { 0xFE00, 0xFE0F }, { 0xFEFF, 0xFEFF },
};

/* RFC 3454 C.1.2, C.2.1, C.2.2, C.3, C.5, C.6, C.7, C.8, C.9 (C.4 is checked apart). */
static const struct cp_range prohibited[] = {
	{ 0x0000, 0x001F }, { 0x007F, 0x009F }, { 0x00A0, 0x00A0 }, { 0x0340, 0x0341 },
	{ 0x06DD, 0x06DD }, { 0x070F, 0x070F }, { 0x1680, 0x1680 }, { 0x180E, 0x180E },
	{ 0x2000, 0x200F }, { 0x2028, 0x202F }, { 0x205F, 0x2063 }, { 0x206A, 0x206F },
	{ 0x2FF0, 0x2FFB }, { 0x3000, 0x3000 }, { 0xD800, 0xF8FF }, { 0xFDD0, 0xFDEF },
	{ 0xFEFF, 0xFEFF }, { 0xFFF9, 0xFFFD }, { 0x1D173, 0x1D17A }, { 0xE0001, 0xE0001 },
	{ 0xE0020, 0xE007F }, { 0xF0000, 0xFFFFD }, { 0x100000, 0x10FFFD },
};

static bool
in_table(uint32_t c, const struct cp_range *t, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (c >= t[i].lo && c <= t[i].hi)
			return true;
	return false;
}

static bool
is_prohibited(uint32_t c)
{
	/* C.4: the last two code points of every plane are non-characters */
	if ((c & 0xFFFE) == 0xFFFE)
		return true;
	return in_table(c, prohibited, NK_ARRAY_LEN(prohibited));
}

/*
 * Decode strict UTF-8 (no overlongs, surrogates or values above U+10FFFF) into
 * <out> (capacity strlen(in)); returns the count or -1.
 */
static ssize_t
utf8_decode(const char *in, uint32_t *out)
{
	const uint8_t *p = (const uint8_t *)in;
	ssize_t n = 0;

	while (*p) {
		uint32_t c = *p, min;
		int extra;

		if (c < 0x80) {
			extra = 0, min = 0;
		} else if ((c & 0xE0) == 0xC0) {
			extra = 1, min = 0x80, c &= 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			extra = 2, min = 0x800, c &= 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			extra = 3, min = 0x10000, c &= 0x07;
		} else {
			return -1;
		}
		p++;
		for (int i = 0; i < extra; i++, p++) {
			if ((*p & 0xC0) != 0x80)
				return -1;
			c = (c << 6) | (*p & 0x3F);
		}
		if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			return -1;
		out[n++] = c;
	}
	return n;
}

/* Encode <n> code points as UTF-8 into a new string. */
static char *
utf8_encode(const uint32_t *cp, size_t n)
{
	char *out = malloc(n * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint32_t c = cp[i];

		if (c < 0x80) {
			*o++ = (char)c;
		} else if (c < 0x800) {
			*o++ = (char)(0xC0 | (c >> 6));
			*o++ = (char)(0x80 | (c & 0x3F));
		} else if (c < 0x10000) {
			*o++ = (char)(0xE0 | (c >> 12));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3F));
			*o++ = (char)(0x80 | (c & 0x3F));
		} else {
			*o++ = (char)(0xF0 | (c >> 18));
			*o++ = (char)(0x80 | ((c >> 12) & 0x3F));
			*o++ = (char)(0x80 | ((c >> 6) & 0x3F));
			*o++ = (char)(0x80 | (c & 0x3F));
		}
	}
	*o = '\0';
	return out;
}

/* Step 1: map spaces to U+0020 and drop B.1 characters, in place; returns the new count. */
static size_t
sasl_map(uint32_t *cp, size_t n)
{
	size_t w = 0;

	for (size_t i = 0; i < n; i++) {
		if (in_table(cp[i], non_ascii_space, NK_ARRAY_LEN(non_ascii_space)))
			cp[w++] = 0x20;
		else if (!in_table(cp[i], mapped_to_nothing, NK_ARRAY_LEN(mapped_to_nothing)))
			cp[w++] = cp[i];
	}
	return w;
}

/*
 * Step 2: NFKC of <n> code points through ICU. Returns a malloc'd array (count in
 * *<nout>), NULL on failure.
 */
static uint32_t *
sasl_nfkc(const uint32_t *cp, size_t n, size_t *nout)
{
	UErrorCode st = U_ZERO_ERROR;
	const UNormalizer2 *nfkc = unorm2_getNFKCInstance(&st);
	int32_t cap16 = (int32_t)(n * 2 + 1), len16 = 0, cap_out, len_out, len32;
	UChar *u16 = NULL, *norm = NULL;
	uint32_t *out = NULL;

	if (U_FAILURE(st) || !(u16 = malloc((size_t)cap16 * sizeof(UChar))))
		goto out;
	for (size_t i = 0; i < n; i++)
		U16_APPEND_UNSAFE(u16, len16, (UChar32)cp[i]);
	cap_out = len16 * 18 + 1;	/* NFKC expands at most 18x in UTF-16 */
	norm = malloc((size_t)cap_out * sizeof(UChar));
	if (!norm)
		goto out;
	len_out = unorm2_normalize(nfkc, u16, len16, norm, cap_out, &st);
	if (U_FAILURE(st))
		goto out;
	out = malloc(((size_t)len_out + 1) * sizeof(uint32_t));
	if (!out)
		goto out;
	u_strToUTF32((UChar32 *)out, len_out + 1, &len32, norm, len_out, &st);
	if (U_FAILURE(st)) {
		free(out);
		out = NULL;
		goto out;
	}
	*nout = (size_t)len32;
out:
	free(u16);
	free(norm);
	return out;
}

/* Steps 3 and 4: prohibited output and the bidi rule of RFC 3454 section 6. */
static bool
sasl_check(const uint32_t *cp, size_t n)
{
	bool has_ral = false, has_l = false;

	for (size_t i = 0; i < n; i++) {
		UCharDirection d = u_charDirection((UChar32)cp[i]);

		if (is_prohibited(cp[i]))
			return false;
		if (d == U_RIGHT_TO_LEFT || d == U_RIGHT_TO_LEFT_ARABIC)
			has_ral = true;
		else if (d == U_LEFT_TO_RIGHT)
			has_l = true;
	}
	if (!has_ral)
		return true;
	if (has_l)
		return false;
	for (size_t k = 0; k < 2; k++) {
		UCharDirection d = u_charDirection((UChar32)cp[k == 0 ? 0 : n - 1]);

		if (d != U_RIGHT_TO_LEFT && d != U_RIGHT_TO_LEFT_ARABIC)
			return false;
	}
	return true;
}

static bool
is_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return false;
	return true;
}

/* RFC 4013 SASLprep; *<out> is malloc'd on OK only. */
enum scram_saslprep_result
scram_saslprep(const char *in, char **out)
{
	uint32_t *cp, *norm;
	size_t n, nn = 0;
	ssize_t dn;
	enum scram_saslprep_result r = SCRAM_SASLPREP_OOM;

	*out = NULL;
	if (is_ascii(in)) {
		*out = strdup(in);
		return *out ? SCRAM_SASLPREP_OK : SCRAM_SASLPREP_OOM;
	}
	cp = malloc((strlen(in) + 1) * sizeof(*cp));
	if (!cp)
		return SCRAM_SASLPREP_OOM;
	dn = utf8_decode(in, cp);
	if (dn < 0) {
		free(cp);
		return SCRAM_SASLPREP_INVALID_UTF8;
	}
	n = sasl_map(cp, (size_t)dn);
	norm = sasl_nfkc(cp, n, &nn);
	if (norm && !sasl_check(norm, nn))
		r = SCRAM_SASLPREP_PROHIBITED;
	else if (norm && (*out = utf8_encode(norm, nn)) != NULL)
		r = SCRAM_SASLPREP_OK;
	free(norm);
	free(cp);
	return r;
}

/* SASLprep with Postgres' fallback to the raw password; caller frees. */
char *
scram_prepare_password(const char *password)
{
	char *out = NULL;

	switch (scram_saslprep(password, &out)) {
	case SCRAM_SASLPREP_OK:
		return out;
	case SCRAM_SASLPREP_INVALID_UTF8:
	case SCRAM_SASLPREP_PROHIBITED:
		return strdup(password);	/* Postgres uses the raw password then */
	case SCRAM_SASLPREP_OOM:
	default:
		return NULL;
	}
}
