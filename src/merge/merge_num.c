/*
 * merge_num.c - exact decimals for the merge step: Postgres numeric (and integer) values read
 * from text or binary, compared, added with Postgres' scale rule (the larger display scale),
 * and printed back in text or binary exactly as the server would.
 */
#include "neki/base.h"

#include "neki/byteorder.h"

#include "merge_int.h"

#include <stdlib.h>
#include <string.h>

#define NUMERIC_POS 0x0000
#define NUMERIC_NEG 0x4000
#define NUMERIC_NAN 0xC000
#define NUMERIC_PINF 0xD000
#define NUMERIC_NINF 0xF000

void
mdec_free(struct mdec *d)
{
	free(d->digits);
	memset(d, 0, sizeof(*d));
}

/* Drop leading zeros of the integer part (keeps at least the fraction digits). */
static void
mdec_trim(struct mdec *d)
{
	uint32_t lead = 0;

	while (d->ndigits - lead > d->scale && d->digits[lead] == '0')
		lead++;
	memmove(d->digits, d->digits + lead, d->ndigits - lead);
	d->ndigits -= lead;
	bool zero = true;

	for (uint32_t i = 0; i < d->ndigits; i++)
		zero = zero && d->digits[i] == '0';
	if (zero)
		d->neg = false;
}

static bool
mdec_special_text(struct mdec *d, const char *s, uint32_t len)
{
	static const struct {
		const char *text;
		enum mdec_special sp;
	} names[] = { { "NaN", MDEC_NAN }, { "Infinity", MDEC_PINF }, { "-Infinity", MDEC_NINF } };

	for (size_t i = 0; i < NK_ARRAY_LEN(names); i++)
		if (strlen(names[i].text) == len && memcmp(names[i].text, s, len) == 0) {
			d->special = names[i].sp;
			return true;
		}
	return false;
}

/* mdec_from_text: see merge_int.h. */
bool
mdec_from_text(struct mdec *d, const uint8_t *p, uint32_t len)
{
	const char *s = (const char *)p;
	uint32_t i = 0;
	bool dot = false;

	memset(d, 0, sizeof(*d));
	if (mdec_special_text(d, s, len))
		return true;
	d->digits = malloc(len + 1);
	if (!d->digits)
		return false;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		d->neg = s[i++] == '-';
	for (; i < len; i++) {
		if (s[i] == '.' && !dot) {
			dot = true;
		} else if (s[i] >= '0' && s[i] <= '9') {
			d->digits[d->ndigits++] = s[i];
			d->scale += dot;
		} else {
			mdec_free(d);
			return false;
		}
	}
	mdec_trim(d);
	return true;
}

/* Append the 4 decimal digits of base-10000 digit <g>. */
static void
put_group(char *out, int g)
{
	for (int k = 3; k >= 0; k--) {
		out[k] = (char)('0' + g % 10);
		g /= 10;
	}
}

static bool
mdec_from_int(struct mdec *d, int64_t v)
{
	char buf[24];
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
	int n = 0;

	do {
		buf[n++] = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	memset(d, 0, sizeof(*d));
	d->digits = malloc((size_t)n);
	if (!d->digits)
		return false;
	for (int i = 0; i < n; i++)
		d->digits[i] = buf[n - 1 - i];
	d->ndigits = (uint32_t)n;
	d->neg = v < 0;
	return true;
}

/* mdec_from_binary: see merge_int.h. */
bool
mdec_from_binary(struct mdec *d, uint32_t oid, const uint8_t *p, uint32_t len)
{
	uint64_t v = 0;

	if (oid != 1700) {
		if (len != 2 && len != 4 && len != 8)
			return false;
		for (uint32_t i = 0; i < len; i++)
			v = v << 8 | p[i];
		if (len < 8 && (p[0] & 0x80))
			v |= ~(uint64_t)0 << (len * 8);
		return mdec_from_int(d, (int64_t)v);
	}
	if (len < 8)
		return false;
	uint16_t ndig = nk_get_be16(p), sign = nk_get_be16(p + 4), dscale = nk_get_be16(p + 6);
	int16_t weight = (int16_t)nk_get_be16(p + 2);

	memset(d, 0, sizeof(*d));
	if (len != 8u + 2u * ndig)
		return false;
	if (sign == NUMERIC_NAN || sign == NUMERIC_PINF || sign == NUMERIC_NINF) {
		d->special = sign == NUMERIC_NAN ? MDEC_NAN : sign == NUMERIC_PINF ? MDEC_PINF
										 : MDEC_NINF;
		return true;
	}
	/* integer groups: weight+1 (at least 0); fraction digits: dscale */
	int32_t intg = weight >= 0 ? weight + 1 : 0;
	size_t cap = (size_t)intg * 4 + dscale + 8;

	d->digits = calloc(1, cap);
	if (!d->digits)
		return false;
	memset(d->digits, '0', cap);
	for (int32_t g = 0; g < ndig; g++) {
		int32_t pos = weight - g;	/* power of 10000 */
		int64_t at = (int64_t)(intg - 1 - pos) * 4;
		char tmp[4];

		put_group(tmp, nk_get_be16(p + 8 + 2 * g));
		for (int k = 0; k < 4; k++)
			if (at + k >= 0 && (size_t)(at + k) < (size_t)intg * 4 + dscale)
				d->digits[at + k] = tmp[k];
	}
	d->ndigits = (uint32_t)intg * 4 + dscale;
	d->scale = dscale;
	d->neg = sign == NUMERIC_NEG;
	mdec_trim(d);
	return true;
}

static int
special_rank(const struct mdec *d)
{
	return d->special == MDEC_NINF ? -1 : d->special == MDEC_PINF ? 1
	       : d->special == MDEC_NAN ? 2 : 0;
}

/* Compare magnitudes of finite <a> and <b>. */
static int
mag_cmp(const struct mdec *a, const struct mdec *b)
{
	uint32_t ai = a->ndigits - a->scale, bi = b->ndigits - b->scale;
	uint32_t fs = a->scale > b->scale ? a->scale : b->scale;

	if (ai != bi)
		return ai < bi ? -1 : 1;
	for (uint32_t k = 0; k < ai + fs; k++) {
		char ca = k < a->ndigits ? a->digits[k] : '0';
		char cb = k < b->ndigits ? b->digits[k] : '0';

		if (ca != cb)
			return ca < cb ? -1 : 1;
	}
	return 0;
}

/* mdec_cmp: see merge_int.h (NaN above +Infinity, as Postgres sorts). */
int
mdec_cmp(const struct mdec *a, const struct mdec *b)
{
	int ra = special_rank(a), rb = special_rank(b);

	if (ra || rb)
		return ra == rb ? 0 : ra < rb ? -1 : 1;
	if (a->neg != b->neg)
		return a->neg ? -1 : 1;
	return a->neg ? -mag_cmp(a, b) : mag_cmp(a, b);
}

/* Digit <k> (0 = most significant) of <d> aligned to <intd> integer and <fs> fraction digits. */
static int
digit_at(const struct mdec *d, uint32_t intd, uint32_t k)
{
	uint32_t dint = d->ndigits - d->scale;
	int64_t idx = (int64_t)k - (int64_t)(intd - dint);

	if (idx < 0 || idx >= d->ndigits)
		return 0;
	return d->digits[idx] - '0';
}

static bool
add_special(struct mdec *acc, const struct mdec *b)
{
	int ra = special_rank(acc), rb = special_rank(b);

	if (ra == 2 || rb == 2 || (ra && rb && ra != rb))
		acc->special = MDEC_NAN;
	else if (rb)
		acc->special = b->special;
	return true;
}

/* mdec_add: see merge_int.h. */
bool
mdec_add(struct mdec *acc, const struct mdec *b)
{
	if (acc->special || b->special)
		return add_special(acc, b);
	uint32_t ai = acc->ndigits - acc->scale, bi = b->ndigits - b->scale;
	uint32_t intd = (ai > bi ? ai : bi) + 1;
	uint32_t fs = acc->scale > b->scale ? acc->scale : b->scale;
	uint32_t n = intd + fs;
	char *out = malloc(n + 1);
	bool sub = acc->neg != b->neg;
	const struct mdec *big = acc, *small = b;
	int carry = 0;

	if (!out)
		return false;
	if (sub && mag_cmp(acc, b) < 0) {
		big = b;
		small = acc;
	}
	for (uint32_t k = n; k-- > 0;) {
		int v = sub ? digit_at(big, intd, k) - digit_at(small, intd, k) - carry
			    : digit_at(big, intd, k) + digit_at(small, intd, k) + carry;

		carry = sub ? v < 0 : v >= 10;
		v = sub ? (v + 10) % 10 : v % 10;
		out[k] = (char)('0' + v);
	}
	acc->neg = big->neg;
	free(acc->digits);
	acc->digits = out;
	acc->ndigits = n;
	acc->scale = fs;
	mdec_trim(acc);
	return true;
}

/* mdec_text: see merge_int.h. */
char *
mdec_text(const struct mdec *d)
{
	static const char *const sp[] = { "", "NaN", "Infinity", "-Infinity" };
	uint32_t intd = d->ndigits - d->scale;
	char *s = malloc(d->ndigits + 12);
	size_t n = 0;

	if (!s)
		return NULL;
	if (d->special) {
		strcpy(s, sp[d->special]);
		return s;
	}
	if (d->neg)
		s[n++] = '-';
	if (intd == 0)
		s[n++] = '0';
	memcpy(s + n, d->digits, intd);
	n += intd;
	if (d->scale) {
		s[n++] = '.';
		memcpy(s + n, d->digits + intd, d->scale);
		n += d->scale;
	}
	s[n] = '\0';
	return s;
}

/* mdec_put_binary: see merge_int.h. */
void
mdec_put_binary(const struct mdec *d, struct pktbuf *pb)
{
	uint32_t intd = d->ndigits - d->scale;
	uint32_t ig = (intd + 3) / 4, fg = (d->scale + 3) / 4;
	uint32_t total = ig + fg, first = 0, last = total;
	int groups[total ? total : 1];

	if (d->special) {
		static const uint16_t sign[] = { 0, NUMERIC_NAN, NUMERIC_PINF, NUMERIC_NINF };

		pktbuf_put_int32(pb, 8);
		pktbuf_put_int16(pb, 0);
		pktbuf_put_int16(pb, 0);
		pktbuf_put_int16(pb, (int16_t)sign[d->special]);
		pktbuf_put_int16(pb, 0);
		return;
	}
	for (uint32_t g = 0; g < total; g++) {
		int v = 0;

		for (uint32_t k = 0; k < 4; k++) {
			int64_t pos = (int64_t)g * 4 + k - (int64_t)(ig * 4 - intd);

			v = v * 10 + (pos >= 0 && pos < d->ndigits ? d->digits[pos] - '0' : 0);
		}
		groups[g] = v;
	}
	while (first < total && groups[first] == 0)
		first++;
	while (last > first && groups[last - 1] == 0)
		last--;
	pktbuf_put_int32(pb, (int32_t)(8 + 2 * (last - first)));
	pktbuf_put_int16(pb, (int16_t)(last - first));
	pktbuf_put_int16(pb, (int16_t)(last > first ? (int32_t)ig - 1 - (int32_t)first : 0));
	pktbuf_put_int16(pb, (int16_t)(d->neg ? NUMERIC_NEG : NUMERIC_POS));
	pktbuf_put_int16(pb, (int16_t)d->scale);
	for (uint32_t g = first; g < last; g++)
		pktbuf_put_int16(pb, (int16_t)groups[g]);
}
