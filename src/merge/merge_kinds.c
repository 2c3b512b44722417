/*
 * merge_kinds.c - order of interval, time, timetz, inet/cidr and bit/varbit values as
 * Postgres' btree operators give it, text or binary format:
 *   interval  interval_cmp: months as 30 days, days as 24 hours, so '1 day' = '24 hours'
 *             (text in IntervalStyle postgres, the default; other styles are refused)
 *   time      microseconds; timetz: the UTC time, then the zone (timetz_cmp)
 *   inet/cidr network_cmp: family, the common network bits, the mask length, the address
 *   bit       bit_cmp: the bits, a shorter string before a longer one with the same start
 *   "char"    one unsigned byte (text: the byte, \ooo for one with the high bit, '' for 0)
 *   money     cash_cmp: the int8 count of the smallest unit (text: its digits, whatever
 *             lc_monetary writes around them; '-' or '(' makes it negative)
 *   enum      enum_cmp: the labels' positions in the catalog's sort order
 * Entry point: mv_cmp_kind().
 */
#include "neki/base.h"

#include "merge_int.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USECS_PER_DAY 86400000000LL

static uint64_t
get_be(const uint8_t *p, uint32_t n)
{
	uint64_t u = 0;

	for (uint32_t i = 0; i < n; i++)
		u = u << 8 | p[i];
	return u;
}

/* Copy of <v> as a C string in <buf> (false when it does not fit). */
static bool
cstr(const struct proto_value *v, char *buf, size_t size)
{
	if (v->len >= size)
		return false;
	memcpy(buf, v->p, v->len);
	buf[v->len] = '\0';
	return true;
}

/* "[-+]H:MM:SS[.ffffff]" at <s> -> microseconds; *<end> past it. */
static bool
clock_us(const char *s, int64_t *out, const char **end)
{
	long long h, mi;
	double sec;
	int n = 0, sign = *s == '-' ? -1 : 1;

	if (*s == '-' || *s == '+')
		s++;
	if (sscanf(s, "%lld:%lld:%lf%n", &h, &mi, &sec, &n) != 3)
		return false;
	*out = sign * ((h * 3600 + mi * 60) * 1000000LL + (int64_t)(sec * 1e6 + 0.5));
	*end = s + n;
	return true;
}

/* IntervalStyle postgres: "1 year 2 mons -3 days +04:05:06.5", "00:00:00". */
static bool
interval_text(const struct proto_value *v, __int128 *span)
{
	char buf[160];
	const char *p = buf;
	int64_t months = 0, days = 0, us = 0;

	if (!cstr(v, buf, sizeof(buf)))
		return false;
	while (*p) {
		char unit[8];
		long long n;
		int k = 0;

		if (sscanf(p, "%lld %7[a-z]%n", &n, unit, &k) != 2) {
			if (!clock_us(p, &us, &p) || *p)
				return false;	/* the time part comes last */
			break;
		}
		if (strncmp(unit, "year", 4) == 0)
			months += n * 12;
		else if (strncmp(unit, "mon", 3) == 0)
			months += n;
		else if (strncmp(unit, "day", 3) == 0)
			days += n;
		else
			return false;
		p += k;
		while (*p == ' ')
			p++;
	}
	*span = ((__int128)months * 30 + days) * USECS_PER_DAY + us;
	return true;
}

static bool
interval_span(const struct mv_type *t, const struct proto_value *v, __int128 *span)
{
	if (!t->binary)
		return interval_text(v, span);
	if (v->len != 16)
		return false;
	*span = ((__int128)(int32_t)get_be(v->p + 12, 4) * 30 + (int32_t)get_be(v->p + 8, 4)) *
		USECS_PER_DAY + (int64_t)get_be(v->p, 8);
	return true;
}

/* time: microseconds; timetz: also the zone in seconds west of UTC. */
static bool
time_of(const struct mv_type *t, const struct proto_value *v, int64_t *us, int64_t *zone)
{
	char buf[64];
	const char *end;
	int64_t off = 0;

	*zone = 0;
	if (t->binary) {
		if (v->len != (t->kind == MV_TIMETZ ? 12u : 8u))
			return false;
		*us = (int64_t)get_be(v->p, 8);
		if (t->kind == MV_TIMETZ)
			*zone = (int32_t)get_be(v->p + 8, 4);
		return true;
	}
	if (!cstr(v, buf, sizeof(buf)) || buf[0] == '-' || !clock_us(buf, us, &end))
		return false;
	if (t->kind != MV_TIMETZ)
		return *end == '\0';
	if (*end != '+' && *end != '-')
		return false;
	long long h = 0, mi = 0, s = 0;

	if (sscanf(end + 1, "%lld:%lld:%lld", &h, &mi, &s) < 1)
		return false;
	off = (h * 3600 + mi * 60 + s) * (*end == '-' ? -1 : 1);
	*zone = -off;
	return true;
}

struct inet_v {
	uint8_t family;		/* 2 IPv4, 3 IPv6 (Postgres' PGSQL_AF_INET, _INET6) */
	uint8_t bits;
	uint8_t addr[16];
};

static bool
inet_of(const struct mv_type *t, const struct proto_value *v, struct inet_v *x)
{
	char buf[64], *slash;

	memset(x, 0, sizeof(*x));
	if (t->binary) {
		if (v->len < 4 || (v->p[0] != 2 && v->p[0] != 3) ||
		    v->p[3] != (v->p[0] == 2 ? 4 : 16) || v->len != 4u + v->p[3])
			return false;
		x->family = v->p[0];
		x->bits = v->p[1];
		memcpy(x->addr, v->p + 4, v->p[3]);
		return true;
	}
	if (!cstr(v, buf, sizeof(buf)))
		return false;
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	x->family = strchr(buf, ':') ? 3 : 2;
	if (inet_pton(x->family == 2 ? AF_INET : AF_INET6, buf, x->addr) != 1)
		return false;
	x->bits = x->family == 2 ? 32 : 128;
	if (slash)
		x->bits = (uint8_t)atoi(slash + 1);
	return true;
}

/* The first <n> bits of <a> and <b> (Postgres' bitncmp). */
static int
bitncmp(const uint8_t *a, const uint8_t *b, int n)
{
	int c = memcmp(a, b, (size_t)(n / 8));

	if (c || n % 8 == 0)
		return c < 0 ? -1 : c > 0;
	uint8_t mask = (uint8_t)(0xff << (8 - n % 8));

	return (a[n / 8] & mask) < (b[n / 8] & mask) ? -1 : (a[n / 8] & mask) > (b[n / 8] & mask);
}

static int
inet_cmp(const struct inet_v *a, const struct inet_v *b)
{
	int c;

	if (a->family != b->family)
		return a->family < b->family ? -1 : 1;
	if ((c = bitncmp(a->addr, b->addr, a->bits < b->bits ? a->bits : b->bits)) != 0)
		return c;
	if (a->bits != b->bits)
		return a->bits < b->bits ? -1 : 1;
	return bitncmp(a->addr, b->addr, a->family == 2 ? 32 : 128);
}

static int
cmp_mem(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? (c < 0 ? -1 : 1) : alen < blen ? -1 : alen > blen;
}

/* Binary bit strings: the bytes (zero-padded) compared, then the bit length. Text: the
 * '0'/'1' characters give the same order byte-wise. */
static bool
bit_cmp(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	int *out)
{
	if (!t->binary) {
		*out = cmp_mem(a->p, a->len, b->p, b->len);
		return true;
	}
	if (a->len < 4 || b->len < 4)
		return false;
	uint32_t la = a->len - 4, lb = b->len - 4;
	int c = memcmp(a->p + 4, b->p + 4, la < lb ? la : lb);
	uint32_t na = (uint32_t)get_be(a->p, 4), nb = (uint32_t)get_be(b->p, 4);

	*out = c ? (c < 0 ? -1 : 1) : na < nb ? -1 : na > nb;
	return true;
}

/* A "char" value: its byte. */
static bool
char_of(const struct mv_type *t, const struct proto_value *v, int64_t *out)
{
	const uint8_t *p = (const uint8_t *)v->p;

	if (v->len == 0 || (t->binary && v->len == 1) || (!t->binary && v->len == 1)) {
		*out = v->len ? p[0] : 0;
		return true;
	}
	if (v->len == 4 && p[0] == '\\' && p[1] >= '0' && p[1] <= '3' && p[2] >= '0' &&
	    p[2] <= '7' && p[3] >= '0' && p[3] <= '7') {	/* (charout's \ooo) */
		*out = (p[1] - '0') * 64 + (p[2] - '0') * 8 + (p[3] - '0');
		return true;
	}
	return false;
}

/* A money value as its int8 count. */
static bool
money_of(const struct mv_type *t, const struct proto_value *v, int64_t *out)
{
	uint64_t u = 0;
	bool neg = false, digits = false;

	if (t->binary) {
		if (v->len != 8)
			return false;
		*out = (int64_t)get_be((const uint8_t *)v->p, 8);
		return true;
	}
	for (uint32_t i = 0; i < v->len; i++) {
		char c = v->p[i];

		if (c >= '0' && c <= '9') {
			if (u > (UINT64_MAX - 9) / 10)
				return false;
			u = u * 10 + (uint64_t)(c - '0');
			digits = true;
		}
		neg = neg || c == '-' || c == '(';
	}
	if (!digits || u > (uint64_t)INT64_MAX + neg)
		return false;
	*out = neg ? (int64_t)(0 - u) : (int64_t)u;
	return true;
}

/* An enum value's position among its type's labels; false when it is none of them. */
static bool
enum_pos(const struct mv_type *t, const struct proto_value *v, int64_t *out)
{
	for (uint32_t i = 0; t->en != NULL && i < t->en->nlabels; i++)
		if (strlen(t->en->labels[i]) == v->len &&
		    memcmp(t->en->labels[i], v->p, v->len) == 0) {
			*out = i;
			return true;
		}
	return false;
}

static int
cmp_wide(__int128 a, __int128 b)
{
	return a < b ? -1 : a > b;
}

/* mv_cmp_kind: see merge_int.h. */
bool
mv_cmp_kind(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	    int *out, struct nk_error *err)
{
	__int128 x, y;
	int64_t za, zb, ua, ub;
	struct inet_v ia, ib;
	bool ok = false;

	switch (t->kind) {
	case MV_INTERVAL:
		if ((ok = interval_span(t, a, &x) && interval_span(t, b, &y)))
			*out = cmp_wide(x, y);
		else if (!t->binary) {
			nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				     "cannot merge interval values across shards in "
				     "this IntervalStyle");
			nk_error_hint(err, "Use IntervalStyle postgres (the default) or read the "
				      "column in binary format.");
			return false;
		}
		break;
	case MV_TIME:
	case MV_TIMETZ:
		if ((ok = time_of(t, a, &ua, &za) && time_of(t, b, &ub, &zb)))
			*out = ua + za * 1000000 != ub + zb * 1000000
				       ? cmp_wide(ua + za * 1000000, ub + zb * 1000000)
				       : cmp_wide(za, zb);
		break;
	case MV_INET:
		if ((ok = inet_of(t, a, &ia) && inet_of(t, b, &ib)))
			*out = inet_cmp(&ia, &ib);
		break;
	case MV_BIT:
		ok = bit_cmp(t, a, b, out);
		break;
	case MV_CHAR:
	case MV_MONEY:
		if ((ok = t->kind == MV_CHAR ? char_of(t, a, &ua) && char_of(t, b, &ub)
					     : money_of(t, a, &ua) && money_of(t, b, &ub)))
			*out = cmp_wide(ua, ub);
		break;
	case MV_ENUM:
		if (enum_pos(t, a, &ua) && enum_pos(t, b, &ub)) {
			*out = cmp_wide(ua, ub);
			return true;
		}
		nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED, "cannot merge values of enum "
			     "type %s across shards: a label is not in the router's catalog",
			     t->en != NULL ? t->en->sql_name : "?");
		nk_error_hint(err, "A label added on the shards directly, not through neki, is "
			      "known after the next DDL through neki.");
		return false;
	default:
		break;
	}
	return ok || nk_error_set(err, ERRCODE_INTERNAL_ERROR,
				  "cannot merge a result value of type %u: "
				  "unexpected %s form", t->oid, t->binary ? "binary" : "text");
}
