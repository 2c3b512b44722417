/*
 * keyspace.c - routing values (DESIGN.md section 4.1): type names, canonical bytes, XXH3,
 * modulo and range mapping, key-range bounds and lookup, and the Postgres binary input of
 * every routable type. Text input lives in pgtext.c.
 *
 * Entry points: ks_value_from_binary(), ks_routing_value(), ks_xxhash(), ks_bound_parse_*(),
 * ks_range_find().
 */
#include "neki/base.h"

#include "neki/byteorder.h"
#include "neki/keyspace.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "neki/hash.h"
#include "keyspace_int.h"

struct ks_type_name {
	const char *name;
	enum ks_type type;
};

/*
 * Every spelling of a routable type (pg_type names and SQL aliases); the first per type is
 * canonical. "char" is left out on purpose: as a pg_type name it is the one-byte internal
 * type, which has no routing rule.
 */
static const struct ks_type_name type_names[] = {
	{ "int2", KS_TYPE_INT2 },
	{ "int4", KS_TYPE_INT4 },
	{ "int8", KS_TYPE_INT8 },
	{ "text", KS_TYPE_TEXT },
	{ "varchar", KS_TYPE_VARCHAR },
	{ "bpchar", KS_TYPE_BPCHAR },
	{ "enum", KS_TYPE_ENUM },
	{ "bytea", KS_TYPE_BYTEA },
	{ "float4", KS_TYPE_FLOAT4 },
	{ "float8", KS_TYPE_FLOAT8 },
	{ "numeric", KS_TYPE_NUMERIC },
	{ "date", KS_TYPE_DATE },
	{ "timestamp", KS_TYPE_TIMESTAMP },
	{ "timestamptz", KS_TYPE_TIMESTAMPTZ },
	{ "uuid", KS_TYPE_UUID },
	{ "smallint", KS_TYPE_INT2 },
	{ "integer", KS_TYPE_INT4 },
	{ "int", KS_TYPE_INT4 },
	{ "bigint", KS_TYPE_INT8 },
	{ "character varying", KS_TYPE_VARCHAR },
	{ "character", KS_TYPE_BPCHAR },
	{ "real", KS_TYPE_FLOAT4 },
	{ "double precision", KS_TYPE_FLOAT8 },
	{ "decimal", KS_TYPE_NUMERIC },
	{ "timestamp without time zone", KS_TYPE_TIMESTAMP },
	{ "timestamp with time zone", KS_TYPE_TIMESTAMPTZ },
};

struct ks_type_oid {
	uint32_t oid;
	enum ks_type type;
};

/* Built-in type OIDs (pg_type.dat); enums have no fixed OID. */
static const struct ks_type_oid type_oids[] = {
	{ 17, KS_TYPE_BYTEA },
	{ 20, KS_TYPE_INT8 },
	{ 21, KS_TYPE_INT2 },
	{ 23, KS_TYPE_INT4 },
	{ 25, KS_TYPE_TEXT },
	{ 700, KS_TYPE_FLOAT4 },
	{ 701, KS_TYPE_FLOAT8 },
	{ 1042, KS_TYPE_BPCHAR },
	{ 1043, KS_TYPE_VARCHAR },
	{ 1082, KS_TYPE_DATE },
	{ 1114, KS_TYPE_TIMESTAMP },
	{ 1184, KS_TYPE_TIMESTAMPTZ },
	{ 1700, KS_TYPE_NUMERIC },
	{ 2950, KS_TYPE_UUID },
};

/* ks_type_from_name: see keyspace.h. Case-insensitive. */
bool
ks_type_from_name(const char *name, enum ks_type *out)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(type_names); i++) {
		if (strcasecmp(type_names[i].name, name) == 0) {
			*out = type_names[i].type;
			return true;
		}
	}
	return false;
}

/* ks_type_from_oid: see keyspace.h. */
bool
ks_type_from_oid(uint32_t oid, enum ks_type *out)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(type_oids); i++) {
		if (type_oids[i].oid == oid) {
			*out = type_oids[i].type;
			return true;
		}
	}
	return false;
}

/* ks_type_str: the canonical name; the table lists each type first in enum order. */
const char *
ks_type_str(enum ks_type type)
{
	if ((unsigned)type < KS_TYPE_COUNT)
		return type_names[type].name;
	return "unknown";
}

bool
ks_type_is_integer(enum ks_type type)
{
	return type == KS_TYPE_INT2 || type == KS_TYPE_INT4 || type == KS_TYPE_INT8;
}

bool
ks_type_is_text(enum ks_type type)
{
	return type == KS_TYPE_TEXT || type == KS_TYPE_VARCHAR || type == KS_TYPE_BPCHAR ||
	       type == KS_TYPE_ENUM;
}

static const char *const index_type_names[] = { "xxhash", "modulo", "range" };

/* ks_index_type_from_str: exact, case-sensitive names as the JSON spells them. */
bool
ks_index_type_from_str(const char *s, enum ks_index_type *out)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(index_type_names); i++) {
		if (strcmp(index_type_names[i], s) == 0) {
			*out = (enum ks_index_type)i;
			return true;
		}
	}
	return false;
}

const char *
ks_index_type_str(enum ks_index_type t)
{
	if ((unsigned)t < NK_ARRAY_LEN(index_type_names))
		return index_type_names[t];
	return "unknown";
}

/* ks_value_set_text: see keyspace.h. Copies, so the result does not depend on the input. */
bool
ks_value_set_text(struct ks_value *v, enum ks_type type, const char *s, size_t len)
{
	char *copy = malloc(len + 1);

	if (!copy)
		return false;
	memcpy(copy, s, len);
	copy[len] = '\0';
	ks_value_cleanup(v);
	v->type = type;
	v->owned = copy;
	v->bytes = copy;
	v->len = len;
	return true;
}

/* ks_value_cleanup: see keyspace.h. */
void
ks_value_cleanup(struct ks_value *v)
{
	free(v->owned);
	v->owned = NULL;
	v->bytes = NULL;
	v->len = 0;
}

static uint64_t
get_be(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/* The IEEE bits hashed for a float: -0 as +0, every NaN as the one canonical quiet NaN. */
static uint64_t
float_canonical_bits(double f)
{
	uint64_t bits;

	if (isnan(f))
		return UINT64_C(0x7ff8000000000000);
	if (f == 0.0)
		f = 0.0;
	memcpy(&bits, &f, sizeof(bits));
	return bits;
}

/* ks_canonical_bytes: see keyspace.h. */
size_t
ks_canonical_bytes(const struct ks_value *v, uint8_t buf[16], const uint8_t **data)
{
	*data = buf;
	switch (v->type) {
	case KS_TYPE_INT2:
	case KS_TYPE_INT4:
	case KS_TYPE_INT8:
	case KS_TYPE_TIMESTAMP:
	case KS_TYPE_TIMESTAMPTZ:
		nk_put_be64(buf, (uint64_t)v->i);
		return 8;
	case KS_TYPE_FLOAT4:
	case KS_TYPE_FLOAT8:
		nk_put_be64(buf, float_canonical_bits(v->f));
		return 8;
	case KS_TYPE_DATE: {
		nk_put_be32(buf, (uint32_t)(int32_t)v->i);
		return 4;
	}
	case KS_TYPE_UUID:
		memcpy(buf, v->uuid, 16);
		return 16;
	default:
		*data = (const uint8_t *)v->bytes;
		return v->len;
	}
}

/* ks_xxhash: see keyspace.h. */
uint64_t
ks_xxhash(const struct ks_value *v)
{
	uint8_t buf[16];
	const uint8_t *data;
	size_t len = ks_canonical_bytes(v, buf, &data);

	return nk_hash64(len ? data : buf, len);
}

/* ks_modulo_value: see keyspace.h. 128-bit product, so every bucket gets an equal slice. */
uint64_t
ks_modulo_value(int64_t v, int64_t modulus)
{
	int64_t bucket = v % modulus;

	NK_ASSERT(modulus > 0);
	if (bucket < 0)
		bucket += modulus;
	return (uint64_t)(((unsigned __int128)(uint64_t)bucket << 64) / (uint64_t)modulus);
}

/* ks_range_value: see keyspace.h. */
uint64_t
ks_range_value(int64_t v)
{
	return (uint64_t)v ^ (UINT64_C(1) << 63);
}

/* ks_routing_value: see keyspace.h. */
bool
ks_routing_value(enum ks_index_type itype, int64_t modulus, const struct ks_value *v,
		 uint64_t *out, struct nk_error *err)
{
	if (itype == KS_INDEX_XXHASH) {
		*out = ks_xxhash(v);
		return true;
	}
	if (!ks_type_is_integer(v->type))
		return nk_error_set(err, ERRCODE_DATATYPE_MISMATCH,
				    "shard index of type \"%s\" cannot route a value of type %s",
				    ks_index_type_str(itype), ks_type_str(v->type));
	if (itype == KS_INDEX_RANGE) {
		*out = ks_range_value(v->i);
		return true;
	}
	if (modulus <= 0)
		return nk_error_set(err, ERRCODE_INVALID_PARAMETER_VALUE,
				    "modulo shard index needs a positive modulus");
	*out = ks_modulo_value(v->i, modulus);
	return true;
}

/* ks_bound_parse_hex: see keyspace.h. */
bool
ks_bound_parse_hex(const char *s, uint64_t *out)
{
	size_t n = strlen(s);
	uint64_t v = 0;

	if (n < 1 || n > 16)
		return false;
	for (size_t i = 0; i < n; i++) {
		int d = ksi_hex_digit(s[i]);

		if (d < 0)
			return false;
		v = (v << 4) | (uint64_t)d;
	}
	*out = n == 16 ? v : v << (4 * (16 - n));
	return true;
}

/* ks_bound_parse_decimal: see keyspace.h. Optional '-', 1-19 digits, no spaces. */
bool
ks_bound_parse_decimal(const char *s, uint64_t *out)
{
	bool neg = *s == '-';
	const char *p = neg ? s + 1 : s;
	uint64_t mag = 0;
	uint64_t limit = neg ? (UINT64_C(1) << 63) : (UINT64_C(1) << 63) - 1;

	if (*p == '\0')
		return false;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		if (mag > (limit - (uint64_t)(*p - '0')) / 10)
			return false;
		mag = mag * 10 + (uint64_t)(*p - '0');
	}
	*out = ks_range_value(neg ? (int64_t)(0 - mag) : (int64_t)mag);
	return true;
}

/* ks_range_find: see keyspace.h. Last range whose start is <= value. */
size_t
ks_range_find(const uint64_t *starts, size_t n, uint64_t value)
{
	size_t lo = 0, hi = n;	/* answer in [lo, hi) */

	NK_ASSERT(n >= 1);
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (starts[mid] <= value)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* Binary integer of <len> bytes: 2, 4 or 8 as the type says. */
static bool
binary_int(enum ks_type type, const uint8_t *p, size_t len, struct ks_value *out,
	   struct nk_error *err)
{
	size_t want = type == KS_TYPE_INT2 ? 2 : type == KS_TYPE_INT4 ? 4 : 8;
	uint64_t raw;

	if (len != want)
		return nk_error_set(err, ERRCODE_INVALID_BINARY_REPRESENTATION,
				    "incorrect binary data format for type %s",
				    ks_type_str(type));
	raw = get_be(p, len);
	if (want == 2)
		out->i = (int16_t)raw;
	else if (want == 4)
		out->i = (int32_t)raw;
	else
		out->i = (int64_t)raw;
	return true;
}

static bool
binary_float(enum ks_type type, const uint8_t *p, size_t len, struct ks_value *out,
	     struct nk_error *err)
{
	if (type == KS_TYPE_FLOAT4 && len == 4) {
		uint32_t bits = (uint32_t)get_be(p, 4);
		float f;

		memcpy(&f, &bits, sizeof(f));
		out->f = f;
		return true;
	}
	if (type == KS_TYPE_FLOAT8 && len == 8) {
		uint64_t bits = get_be(p, 8);

		memcpy(&out->f, &bits, sizeof(out->f));
		return true;
	}
	return nk_error_set(err, ERRCODE_INVALID_BINARY_REPRESENTATION,
			    "incorrect binary data format for type %s",
			    ks_type_str(type));
}

/* Text-like binary forms are the raw bytes; bpchar drops its padding. */
static void
binary_bytes(enum ks_type type, const uint8_t *p, size_t len, struct ks_value *out)
{
	if (type == KS_TYPE_BPCHAR)
		while (len > 0 && p[len - 1] == ' ')
			len--;
	out->bytes = (const char *)p;
	out->len = len;
}

/* Postgres numeric send format: ndigits, weight, sign, dscale, then base-10000 digits. */
static bool
binary_numeric(const uint8_t *p, size_t len, struct ks_value *out, struct nk_error *err)
{
	size_t ndigits;
	int16_t weight;
	uint16_t sign;
	char *dec;
	bool ok;

	if (len < 8)
		goto bad;
	ndigits = (size_t)(uint16_t)get_be(p, 2);
	weight = (int16_t)get_be(p + 2, 2);
	sign = (uint16_t)get_be(p + 4, 2);
	if (sign == 0xC000 || sign == 0xD000 || sign == 0xF000) {
		ksi_numeric_special(out, sign == 0xC000 ? "NaN" :
					 sign == 0xD000 ? "Infinity" : "-Infinity");
		return true;
	}
	if ((sign != 0 && sign != 0x4000) || ndigits > 0x7fff || len != 8 + 2 * ndigits)
		goto bad;
	dec = malloc(4 * ndigits + 1);
	if (!dec)
		return nk_error_oom(err);
	for (size_t k = 0; k < ndigits; k++) {
		unsigned d = (unsigned)get_be(p + 8 + 2 * k, 2);

		if (d > 9999) {
			free(dec);
			goto bad;
		}
		for (int j = 3; j >= 0; j--, d /= 10)
			dec[4 * k + (size_t)j] = (char)('0' + d % 10);
	}
	ok = ksi_numeric_canonical(sign == 0x4000, dec, 4 * ndigits,
				   ((int64_t)weight + 1) * 4, out, err);
	free(dec);
	return ok;
bad:
	return nk_error_set(err, ERRCODE_INVALID_BINARY_REPRESENTATION,
			    "invalid binary data for type numeric");
}

static bool
binary_fixed(enum ks_type type, const uint8_t *p, size_t len, struct ks_value *out,
	     struct nk_error *err)
{
	if (type == KS_TYPE_DATE && len == 4) {
		out->i = (int32_t)(uint32_t)get_be(p, 4);
		return true;
	}
	if ((type == KS_TYPE_TIMESTAMP || type == KS_TYPE_TIMESTAMPTZ) && len == 8) {
		out->i = (int64_t)get_be(p, 8);
		return true;
	}
	if (type == KS_TYPE_UUID && len == 16) {
		memcpy(out->uuid, p, 16);
		return true;
	}
	return nk_error_set(err, ERRCODE_INVALID_BINARY_REPRESENTATION,
			    "incorrect binary data format for type %s",
			    ks_type_str(type));
}

/* ks_value_from_binary: see keyspace.h. Text-like and bytea values borrow <p>. */
bool
ks_value_from_binary(enum ks_type type, const uint8_t *p, size_t len, struct ks_value *out,
		     struct nk_error *err)
{
	memset(out, 0, sizeof(*out));
	out->type = type;
	switch (type) {
	case KS_TYPE_INT2:
	case KS_TYPE_INT4:
	case KS_TYPE_INT8:
		return binary_int(type, p, len, out, err);
	case KS_TYPE_FLOAT4:
	case KS_TYPE_FLOAT8:
		return binary_float(type, p, len, out, err);
	case KS_TYPE_NUMERIC:
		return binary_numeric(p, len, out, err);
	case KS_TYPE_DATE:
	case KS_TYPE_TIMESTAMP:
	case KS_TYPE_TIMESTAMPTZ:
	case KS_TYPE_UUID:
		return binary_fixed(type, p, len, out, err);
	default:
		binary_bytes(type, p, len, out);
		return true;
	}
}
