/*
 * merge_val.c - typed comparison of result values as shards send them (text or binary format),
 * giving the order Postgres' btree operators give: integers, numeric (NaN last), floats (NaN
 * above every number, -0 = 0), text in byte order or under a libc collation (strcoll_l with a
 * byte-order tie-break, as Postgres does for deterministic collations), bpchar without trailing
 * blanks, bytea, bool, date and timestamps (ISO DateStyle in text; infinities), uuid; arrays
 * (merge_arr.c), interval, time, timetz, inet/cidr and bit strings (merge_kinds.c).
 */
#include "neki/base.h"

#include "merge_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Built-in types: how they compare here, their SQL name (casts in the final combine SQL)
 * and their array type (array_agg partials). */
static const struct {
	uint32_t oid;
	enum mv_kind kind;
	const char *name;
	uint32_t array;
	const char *array_name;
} mv_types[] = {
	{ 16, MV_BOOL, "bool", 1000, "bool[]" },
	{ 17, MV_BYTEA, "bytea", 1001, "bytea[]" },
	{ 18, MV_CHAR, "\"char\"", 1002, "\"char\"[]" },
	{ 19, MV_TEXT, "name", 1003, "name[]" },
	{ 20, MV_INT, "int8", 1016, "int8[]" },
	{ 21, MV_INT, "int2", 1005, "int2[]" },
	{ 23, MV_INT, "int4", 1007, "int4[]" },
	{ 25, MV_TEXT, "text", 1009, "text[]" },
	{ 26, MV_INT, "oid", 1028, "oid[]" },
	{ 27, MV_UNSUPPORTED, "tid", 1010, "tid[]" },	/* (a ctid the router writes back) */
	{ 114, MV_UNSUPPORTED, "json", 199, "json[]" },
	{ 142, MV_UNSUPPORTED, "xml", 143, "xml[]" },
	{ 650, MV_INET, "cidr", 651, "cidr[]" },
	{ 700, MV_FLOAT4, "float4", 1021, "float4[]" },
	{ 701, MV_FLOAT8, "float8", 1022, "float8[]" },
	{ 774, MV_MACADDR, "macaddr8", 775, "macaddr8[]" },
	{ 790, MV_MONEY, "money", 791, "money[]" },
	{ 829, MV_MACADDR, "macaddr", 1040, "macaddr[]" },
	{ 869, MV_INET, "inet", 1041, "inet[]" },
	{ 1042, MV_BPCHAR, "bpchar", 1014, "bpchar[]" },
	{ 1043, MV_TEXT, "varchar", 1015, "varchar[]" },
	{ 1082, MV_DATE, "date", 1182, "date[]" },
	{ 1083, MV_TIME, "time", 1183, "time[]" },
	{ 1114, MV_TIMESTAMP, "timestamp", 1115, "timestamp[]" },
	{ 1184, MV_TIMESTAMPTZ, "timestamptz", 1185, "timestamptz[]" },
	{ 1186, MV_INTERVAL, "interval", 1187, "interval[]" },
	{ 1266, MV_TIMETZ, "timetz", 1270, "timetz[]" },
	{ 1560, MV_BIT, NULL, 1561, NULL },	/* (no name: '...'::bit would be bit(1)) */
	{ 1562, MV_BIT, "varbit", 1563, "varbit[]" },
	{ 1700, MV_NUMERIC, "numeric", 1231, "numeric[]" },
	{ 2950, MV_UUID, "uuid", 2951, "uuid[]" },
	{ 3802, MV_UNSUPPORTED, "jsonb", 3807, "jsonb[]" },
	{ 3904, MV_RANGE, "int4range", 3905, "int4range[]" },
	{ 3906, MV_RANGE, "numrange", 3907, "numrange[]" },
	{ 3908, MV_RANGE, "tsrange", 3909, "tsrange[]" },
	{ 3910, MV_RANGE, "tstzrange", 3911, "tstzrange[]" },
	{ 3912, MV_RANGE, "daterange", 3913, "daterange[]" },
	{ 3926, MV_RANGE, "int8range", 3927, "int8range[]" },
	{ 4451, MV_UNSUPPORTED, "int4multirange", 6150, "int4multirange[]" },
	{ 4532, MV_UNSUPPORTED, "nummultirange", 6151, "nummultirange[]" },
	{ 4533, MV_UNSUPPORTED, "tsmultirange", 6152, "tsmultirange[]" },
	{ 4534, MV_UNSUPPORTED, "tstzmultirange", 6153, "tstzmultirange[]" },
	{ 4535, MV_UNSUPPORTED, "datemultirange", 6155, "datemultirange[]" },
	{ 4536, MV_UNSUPPORTED, "int8multirange", 6157, "int8multirange[]" },
};

/* mv_kind_of: see merge_int.h. An array of a comparable element type is MV_ARRAY. */
enum mv_kind
mv_kind_of(uint32_t oid)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(mv_types); i++) {
		if (mv_types[i].oid == oid)
			return mv_types[i].kind;
		if (mv_types[i].array == oid)
			return mv_types[i].kind == MV_UNSUPPORTED ? MV_UNSUPPORTED : MV_ARRAY;
	}
	return MV_UNSUPPORTED;
}

/* merge_orders_type: see neki/merge.h. */
bool
merge_orders_type(uint32_t oid)
{
	return mv_kind_of(oid) != MV_UNSUPPORTED;
}

/* mv_elem_of: see merge_int.h. */
uint32_t
mv_elem_of(uint32_t oid)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(mv_types); i++)
		if (mv_types[i].array == oid)
			return mv_types[i].oid;
	return 0;
}

/* mv_type_name: see merge_int.h. */
const char *
mv_type_name(uint32_t oid)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(mv_types); i++)
		if (mv_types[i].oid == oid || mv_types[i].array == oid)
			return mv_types[i].oid == oid ? mv_types[i].name : mv_types[i].array_name;
	return NULL;
}

/* mv_sql_name: see merge_int.h. */
const char *
mv_sql_name(const struct mv_type *t)
{
	return t->en != NULL ? t->en->sql_name : mv_type_name(t->oid);
}

/* merge_type_sql: see neki/merge.h. */
const char *
merge_type_sql(uint32_t oid)
{
	return mv_type_name(oid);
}

/* mv_array_of: see merge_int.h. */
uint32_t
mv_array_of(uint32_t oid)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(mv_types); i++)
		if (mv_types[i].oid == oid)
			return mv_types[i].array;
	return 0;
}

static bool
bad_value(struct nk_error *err, const struct mv_type *t)
{
	return nk_error_set(err, ERRCODE_INTERNAL_ERROR,
			    "cannot merge a result value of type %u: unexpected %s "
			    "form", t->oid, t->binary ? "binary" : "text");
}

static int
cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

/* An integer's text form (Postgres' output: an optional '-', digits) without copying it:
 * read at every comparison of a sort key. */
static bool
mv_int_text(const uint8_t *p, uint32_t len, int64_t *out)
{
	const uint8_t *e = p + len;
	bool neg = len > 0 && (*p == '-' || *p == '+') ? *p++ == '-' : false;
	uint64_t u = 0;

	if (p == e)
		return false;
	for (; p < e; p++) {
		uint64_t d = (uint64_t)(*p - '0');

		if (*p < '0' || *p > '9' || u > (UINT64_MAX - d) / 10)
			return false;
		u = u * 10 + d;
	}
	if (u > (uint64_t)INT64_MAX + (neg ? 1 : 0))
		return false;
	*out = neg ? (int64_t)(0 - u) : (int64_t)u;
	return true;
}

bool
mv_int(const struct mv_type *t, const struct proto_value *v, int64_t *out)
{
	uint64_t u = 0;

	if (t->binary) {
		if (v->len != 2 && v->len != 4 && v->len != 8)
			return false;
		for (uint32_t i = 0; i < v->len; i++)
			u = u << 8 | v->p[i];
		if (v->len < 8 && (v->p[0] & 0x80) && t->oid != 26)
			u |= ~(uint64_t)0 << (v->len * 8);
		*out = (int64_t)u;
		return true;
	}
	return mv_int_text(v->p, v->len, out);
}

bool
mv_float(const struct mv_type *t, const struct proto_value *v, double *out)
{
	char buf[64];
	char *end;

	if (t->binary) {
		uint64_t u = 0;

		for (uint32_t i = 0; i < v->len; i++)
			u = u << 8 | v->p[i];
		if (v->len == 4) {
			uint32_t w = (uint32_t)u;
			float f;

			memcpy(&f, &w, sizeof(f));
			*out = f;
		} else if (v->len == 8) {
			memcpy(out, &u, sizeof(*out));
		} else {
			return false;
		}
		return true;
	}
	if (v->len == 0 || v->len >= sizeof(buf))
		return false;
	memcpy(buf, v->p, v->len);
	buf[v->len] = '\0';
	*out = strtod(buf, &end);
	return *end == '\0';
}

/* Postgres float order: NaN equals NaN and sorts above everything. */
static int
cmp_double(double a, double b)
{
	if (isnan(a) || isnan(b))
		return isnan(a) && isnan(b) ? 0 : isnan(a) ? 1 : -1;
	return a < b ? -1 : a > b;
}

static int
cmp_bytes(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? (c < 0 ? -1 : 1) : alen < blen ? -1 : alen > blen;
}

static int
cmp_text(const struct mv_type *t, const uint8_t *a, uint32_t alen, const uint8_t *b,
	 uint32_t blen)
{
	if (t->kind == MV_BPCHAR) {
		while (alen && a[alen - 1] == ' ')
			alen--;
		while (blen && b[blen - 1] == ' ')
			blen--;
	}
	if (!t->loc)
		return cmp_bytes(a, alen, b, blen);
	char *sa = strndup((const char *)a, alen), *sb = strndup((const char *)b, blen);
	int c = sa && sb ? strcoll_l(sa, sb, t->loc) : 0;

	free(sa);
	free(sb);
	return c ? (c < 0 ? -1 : 1) : cmp_bytes(a, alen, b, blen);
}

/* Days from 0000-03-01-based civil date (proleptic Gregorian, astronomical years). */
static int64_t
days_from_civil(int64_t y, int64_t m, int64_t d)
{
	y -= m <= 2;
	int64_t era = (y >= 0 ? y : y - 399) / 400;
	int64_t yoe = y - era * 400;
	int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;

	return era * 146097 + doe;
}

/* ISO text date/timestamp[tz] -> microseconds (days for date); infinities at the ends. */
static bool
time_value(const struct mv_type *t, const struct proto_value *v, int64_t *out)
{
	char buf[80];
	long long y = 0;
	int mo = 0, d = 0, h = 0, mi = 0, n = 0;
	double sec = 0;
	size_t len = v->len;
	bool bc = false;

	if (t->binary) {
		struct mv_type it = { .oid = 20, .kind = MV_INT, .binary = true };

		return mv_int(&it, v, out);
	}
	if (len >= sizeof(buf))
		return false;
	memcpy(buf, v->p, len);
	buf[len] = '\0';
	if (strcmp(buf, "infinity") == 0 || strcmp(buf, "-infinity") == 0) {
		*out = buf[0] == '-' ? INT64_MIN : INT64_MAX;
		return true;
	}
	if (len > 3 && strcmp(buf + len - 3, " BC") == 0) {
		bc = true;
		buf[len -= 3] = '\0';
	}
	if (sscanf(buf, "%lld-%d-%d%n", &y, &mo, &d, &n) != 3)
		return false;
	int64_t days = days_from_civil(bc ? 1 - y : y, mo, d);

	if (t->kind == MV_DATE) {
		*out = days;
		return buf[n] == '\0';
	}
	const char *p = buf + n;
	int m2 = 0;

	if (sscanf(p, " %d:%d:%lf%n", &h, &mi, &sec, &m2) != 3)
		return false;
	p += m2;
	int64_t us = (int64_t)llround(sec * 1e6);

	*out = days * 86400000000LL + ((int64_t)h * 3600 + mi * 60) * 1000000LL + us;
	if (t->kind == MV_TIMESTAMPTZ) {
		int oh = 0, om = 0, os = 0, sign = *p == '-' ? -1 : 1;

		if (*p != '+' && *p != '-')
			return false;
		if (sscanf(p + 1, "%d:%d:%d", &oh, &om, &os) < 1)
			return false;
		*out -= sign * ((int64_t)oh * 3600 + om * 60 + os) * 1000000LL;
	}
	return true;
}

static bool
cmp_numeric(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
	    int *out)
{
	struct mdec x, y;
	bool ok = t->binary ? mdec_from_binary(&x, t->oid, a->p, a->len)
			    : mdec_from_text(&x, a->p, a->len);

	if (!ok)
		return false;
	ok = t->binary ? mdec_from_binary(&y, t->oid, b->p, b->len)
		       : mdec_from_text(&y, b->p, b->len);
	if (ok)
		*out = mdec_cmp(&x, &y);
	mdec_free(&x);
	if (ok)
		mdec_free(&y);
	return ok;
}

/* mv_cmp: see merge_int.h. */
bool
mv_cmp(const struct mv_type *t, const struct proto_value *a, const struct proto_value *b,
       int *out, struct nk_error *err)
{
	int64_t x = 0, y = 0;
	double f = 0, g = 0;
	bool ok = true;

	switch (t->kind) {
	case MV_INT:
		ok = mv_int(t, a, &x) && mv_int(t, b, &y);
		*out = cmp_i64(x, y);
		break;
	case MV_NUMERIC:
		ok = cmp_numeric(t, a, b, out);
		break;
	case MV_FLOAT4:
	case MV_FLOAT8:
		ok = mv_float(t, a, &f) && mv_float(t, b, &g);
		*out = cmp_double(f, g);
		break;
	case MV_TEXT:
	case MV_BPCHAR:
		*out = cmp_text(t, a->p, a->len, b->p, b->len);
		break;
	case MV_BYTEA:
	case MV_BOOL:
	case MV_UUID:
	case MV_MACADDR:
		*out = cmp_bytes(a->p, a->len, b->p, b->len);
		break;
	case MV_DATE:
	case MV_TIMESTAMP:
	case MV_TIMESTAMPTZ:
		ok = time_value(t, a, &x) && time_value(t, b, &y);
		*out = cmp_i64(x, y);
		break;
	case MV_ARRAY:
		return mv_cmp_array(t, a, b, out, err);
	case MV_INTERVAL:
	case MV_TIME:
	case MV_TIMETZ:
	case MV_INET:
	case MV_BIT:
	case MV_CHAR:
	case MV_MONEY:
	case MV_ENUM:
		return mv_cmp_kind(t, a, b, out, err);
	case MV_RANGE:
		return mv_cmp_range(t, a, b, out, err);
	default:
		return nk_error_set(err, ERRCODE_FEATURE_NOT_SUPPORTED,
				    "merging values of type %u across shards is not "
				    "supported", t->oid);
	}
	return ok || bad_value(err, t);
}
