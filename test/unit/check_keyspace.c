/*
 * check_keyspace.c - unit tests for routing values (src/topology/keyspace.c, pgtext.c,
 * pgtime.c): every DESIGN.md 4.1 test vector, text/binary agreement for every type, the
 * canonical forms, modulo and range mapping, key-range bounds and lookup, and the
 * distribution of sequential keys over equal ranges.
 */
#include "neki/base.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "neki/keyspace.h"
#include "suites.h"

/* Routing value (xxhash) of the text form <s> of <type>; fails the test on a parse error. */
static uint64_t
hash_text(enum ks_type type, const char *s)
{
	struct ks_value v;
	struct nk_error err;
	uint64_t h;

	nk_error_clear(&err);
	ck_assert_msg(ks_value_from_text(type, s, strlen(s), NULL, &v, &err),
		      "%s '%s': %s", ks_type_str(type), s, err.message);
	h = ks_xxhash(&v);
	ks_value_cleanup(&v);
	return h;
}

static size_t
unhex(const char *hex, uint8_t *out)
{
	size_t n = 0;

	for (; hex[0] && hex[1]; hex += 2) {
		unsigned b;

		ck_assert(sscanf(hex, "%2x", &b) == 1);
		out[n++] = (uint8_t)b;
	}
	return n;
}

static uint64_t
hash_binary(enum ks_type type, const char *hex)
{
	uint8_t buf[256];
	size_t n = unhex(hex, buf);
	struct ks_value v;
	struct nk_error err;
	uint64_t h;

	ck_assert_msg(ks_value_from_binary(type, buf, n, &v, &err), "%s %s: %s",
		      ks_type_str(type), hex, err.message);
	h = ks_xxhash(&v);
	ks_value_cleanup(&v);
	return h;
}

struct vector {
	enum ks_type type;
	const char *text;
	uint64_t expect;
};

/* DESIGN.md section 4.1, all of them. */
static const struct vector vectors[] = {
	{ KS_TYPE_INT8, "0", UINT64_C(0xc77b3abb6f87acd9) },
	{ KS_TYPE_INT8, "1", UINT64_C(0xf36b4a1a44f78bf3) },
	{ KS_TYPE_INT8, "-1", UINT64_C(0x5111c7e47d784413) },
	{ KS_TYPE_INT8, "42", UINT64_C(0x2e4fe982b68910ac) },
	{ KS_TYPE_INT8, "1000", UINT64_C(0xebba01233d3b56df) },
	{ KS_TYPE_INT8, "9223372036854775807", UINT64_C(0xf832fc1d899fe591) },
	{ KS_TYPE_TEXT, "", UINT64_C(0x2d06800538d394c2) },
	{ KS_TYPE_TEXT, "hello", UINT64_C(0x9555e8555c62dcfd) },
	{ KS_TYPE_TEXT, "alice@example.com", UINT64_C(0x76eb895512bf35ff) },
	{ KS_TYPE_TEXT, "h\xc3\xa9llo", UINT64_C(0x6a45b79a7b549b1f) },
	{ KS_TYPE_FLOAT8, "1.5", UINT64_C(0x63df53725e097d8e) },
	{ KS_TYPE_NUMERIC, "1.5", UINT64_C(0x3d006affbf7f50ee) },
	{ KS_TYPE_NUMERIC, "1.50", UINT64_C(0x3d006affbf7f50ee) },
	{ KS_TYPE_NUMERIC, "-12.34", UINT64_C(0x6223f6720993abef) },
	{ KS_TYPE_DATE, "2024-01-01", UINT64_C(0x6fd47346439de533) },
	{ KS_TYPE_TIMESTAMP, "2024-01-01 00:00:00", UINT64_C(0x160e631d061b982c) },
	{ KS_TYPE_UUID, "018f3c5e-7a2b-7c00-8000-000000000001", UINT64_C(0x230019f5360da296) },
};

START_TEST(test_design_vectors)
{
	const struct vector *v = &vectors[_i];

	ck_assert_msg(hash_text(v->type, v->text) == v->expect, "%s '%s': got %016llx",
		      ks_type_str(v->type), v->text,
		      (unsigned long long)hash_text(v->type, v->text));
}
END_TEST

/* Every integer width co-locates: the value is hashed as int64. */
START_TEST(test_int_widths_colocate)
{
	ck_assert(hash_text(KS_TYPE_INT2, "42") == UINT64_C(0x2e4fe982b68910ac));
	ck_assert(hash_text(KS_TYPE_INT4, "42") == UINT64_C(0x2e4fe982b68910ac));
	ck_assert(hash_text(KS_TYPE_INT4, " -1 ") == UINT64_C(0x5111c7e47d784413));
	ck_assert(hash_text(KS_TYPE_INT2, "+1") == UINT64_C(0xf36b4a1a44f78bf3));
}
END_TEST

struct pair {
	enum ks_type type;
	const char *text;
	const char *binary_hex;
};

/* The same value as text and as Postgres binary send format: must agree, for every type. */
static const struct pair pairs[] = {
	{ KS_TYPE_INT2, "-2", "fffe" },
	{ KS_TYPE_INT2, "32767", "7fff" },
	{ KS_TYPE_INT4, "42", "0000002a" },
	{ KS_TYPE_INT4, "-2147483648", "80000000" },
	{ KS_TYPE_INT8, "9223372036854775807", "7fffffffffffffff" },
	{ KS_TYPE_INT8, "-9223372036854775808", "8000000000000000" },
	{ KS_TYPE_TEXT, "hello", "68656c6c6f" },
	{ KS_TYPE_VARCHAR, "h\xc3\xa9llo", "68c3a96c6c6f" },
	{ KS_TYPE_BPCHAR, "ab  ", "6162" },
	{ KS_TYPE_BPCHAR, "ab", "61622020" },
	{ KS_TYPE_ENUM, "active", "616374697665" },
	{ KS_TYPE_BYTEA, "\\xdeadBEEF", "deadbeef" },
	{ KS_TYPE_BYTEA, "\\x de ad", "dead" },
	{ KS_TYPE_BYTEA, "a\\\\b\\001", "615c6201" },
	{ KS_TYPE_BYTEA, "", "" },
	{ KS_TYPE_FLOAT4, "1.5", "3fc00000" },
	{ KS_TYPE_FLOAT4, "0.1", "3dcccccd" },
	{ KS_TYPE_FLOAT4, "-0", "00000000" },
	{ KS_TYPE_FLOAT8, "1.5", "3ff8000000000000" },
	{ KS_TYPE_FLOAT8, "-0", "0000000000000000" },
	{ KS_TYPE_FLOAT8, "NaN", "7ff8000000000001" },
	{ KS_TYPE_FLOAT8, "-Infinity", "fff0000000000000" },
	{ KS_TYPE_FLOAT4, "Infinity", "7f800000" },
	{ KS_TYPE_NUMERIC, "1.5", "0002000000000001" "00011388" },
	{ KS_TYPE_NUMERIC, "1.50", "0002000000000002" "00011388" },
	{ KS_TYPE_NUMERIC, "-12.34", "0002000040000002" "000c0d48" },
	{ KS_TYPE_NUMERIC, "0", "0000000000000000" },
	{ KS_TYPE_NUMERIC, "0.000", "0000000000000003" },
	{ KS_TYPE_NUMERIC, "123456789.0001", "0004000200000004" "0001" "0929" "1a85" "0001" },
	{ KS_TYPE_NUMERIC, "0.00012", "0002ffff00000005" "0001" "07d0" },
	{ KS_TYPE_NUMERIC, "1e8", "0001000200000000" "0001" },
	{ KS_TYPE_NUMERIC, "NaN", "00000000c0000000" },
	{ KS_TYPE_NUMERIC, "-inf", "00000000f0000000" },
	{ KS_TYPE_DATE, "2024-01-01", "0000223e" },
	{ KS_TYPE_DATE, "1999-12-31", "ffffffff" },
	{ KS_TYPE_DATE, "infinity", "7fffffff" },
	{ KS_TYPE_TIMESTAMP, "2024-01-01 00:00:00", "0002b0d5d4e94000" },
	{ KS_TYPE_TIMESTAMP, "2000-01-01T00:00:01.5", "000000000016e360" },
	{ KS_TYPE_TIMESTAMP, "2000-01-01 00:00:00+05", "0000000000000000" },
	{ KS_TYPE_TIMESTAMP, "-infinity", "8000000000000000" },
	{ KS_TYPE_TIMESTAMPTZ, "2024-01-01 00:00:00Z", "0002b0d5d4e94000" },
	{ KS_TYPE_TIMESTAMPTZ, "2024-01-01 02:00:00+02", "0002b0d5d4e94000" },
	{ KS_TYPE_TIMESTAMPTZ, "2023-12-31 19:00:00-05:00", "0002b0d5d4e94000" },
	{ KS_TYPE_TIMESTAMPTZ, "2024-01-01 05:30:00 +0530", "0002b0d5d4e94000" },
	{ KS_TYPE_TIMESTAMPTZ, "2024-01-01 00:00:00 UTC", "0002b0d5d4e94000" },
	{ KS_TYPE_UUID, "018f3c5e-7a2b-7c00-8000-000000000001",
	  "018f3c5e7a2b7c008000000000000001" },
	{ KS_TYPE_UUID, "{018F3C5E7A2B7C00-8000-0000-0000-0001}",
	  "018f3c5e7a2b7c008000000000000001" },
};

START_TEST(test_text_binary_agree)
{
	const struct pair *p = &pairs[_i];
	uint64_t t = hash_text(p->type, p->text), b = hash_binary(p->type, p->binary_hex);

	ck_assert_msg(t == b, "%s '%s' text %016llx binary %016llx", ks_type_str(p->type),
		      p->text, (unsigned long long)t, (unsigned long long)b);
}
END_TEST

/* Canonical text of numerics, and the special float / numeric values. */
START_TEST(test_canonical_forms)
{
	static const struct {
		const char *in, *canon;
	} nums[] = {
		{ "1.50", "1.5" }, { "-0.0", "0" }, { "007", "7" }, { ".5", "0.5" },
		{ "1e3", "1000" }, { "-1.2E-3", "-0.0012" }, { " +12.3400 ", "12.34" },
		{ "1000", "1000" }, { "Infinity", "Infinity" }, { "nan", "NaN" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(nums); i++) {
		ck_assert_msg(hash_text(KS_TYPE_NUMERIC, nums[i].in) ==
			      hash_text(KS_TYPE_TEXT, nums[i].canon), "numeric %s", nums[i].in);
	}
	ck_assert(hash_text(KS_TYPE_FLOAT8, "-0") == hash_text(KS_TYPE_FLOAT8, "0"));
	ck_assert(hash_text(KS_TYPE_FLOAT4, "1.5") == hash_text(KS_TYPE_FLOAT8, "1.5"));
	ck_assert(hash_binary(KS_TYPE_FLOAT8, "7ff8000000000000") ==
		  hash_binary(KS_TYPE_FLOAT8, "fff0000000000001"));
	ck_assert(hash_text(KS_TYPE_BPCHAR, "x   ") == hash_text(KS_TYPE_TEXT, "x"));
	ck_assert(hash_text(KS_TYPE_TEXT, "x ") != hash_text(KS_TYPE_TEXT, "x"));
}
END_TEST

struct bad_input {
	enum ks_type type;
	const char *text;
	const char *sqlstate;
	const char *message;
};

static const struct bad_input bad_inputs[] = {
	{ KS_TYPE_INT4, "12x", "22P02", "invalid input syntax for type integer: \"12x\"" },
	{ KS_TYPE_INT2, "40000", "22003", "value \"40000\" is out of range for type smallint" },
	{ KS_TYPE_INT8, "9223372036854775808", "22003",
	  "value \"9223372036854775808\" is out of range for type bigint" },
	{ KS_TYPE_INT4, "", "22P02", "invalid input syntax for type integer: \"\"" },
	{ KS_TYPE_FLOAT8, "1.5.", "22P02",
	  "invalid input syntax for type double precision: \"1.5.\"" },
	{ KS_TYPE_FLOAT8, "1e400", "22003", "\"1e400\" is out of range for type double precision" },
	{ KS_TYPE_NUMERIC, "1-2", "22P02", "invalid input syntax for type numeric: \"1-2\"" },
	{ KS_TYPE_BYTEA, "\\xabc", "22023", "invalid hexadecimal data: odd number of digits" },
	{ KS_TYPE_BYTEA, "\\xzz", "22023", "invalid hexadecimal digit: \"z\"" },
	{ KS_TYPE_BYTEA, "a\\9", "22P02", "invalid input syntax for type bytea: \"a\\9\"" },
	{ KS_TYPE_UUID, "018f3c5e-7a2b", "22P02",
	  "invalid input syntax for type uuid: \"018f3c5e-7a2b\"" },
	{ KS_TYPE_DATE, "2024-02-30", "22008",
	  "date/time field value out of range: \"2024-02-30\"" },
	{ KS_TYPE_DATE, "tomorrow", "22023",
	  "shard key value \"tomorrow\" is not a constant and cannot be routed" },
	{ KS_TYPE_TIMESTAMP, "2024-01-01 25:00", "22008",
	  "date/time field value out of range: \"2024-01-01 25:00\"" },
	{ KS_TYPE_TIMESTAMPTZ, "2024-01-01 00:00 Mars/Base", "22023",
	  "time zone \"Mars/Base\" not recognized" },
	{ KS_TYPE_TIMESTAMP, "2024-01-01 00:00 ../etc/passwd", "22P02",
	  "invalid input syntax for type timestamp without time zone: "
	  "\"2024-01-01 00:00 ../etc/passwd\"" },
};

START_TEST(test_bad_text_input)
{
	const struct bad_input *b = &bad_inputs[_i];
	struct ks_value v;
	struct nk_error err;

	nk_error_clear(&err);
	ck_assert(!ks_value_from_text(b->type, b->text, strlen(b->text), NULL, &v, &err));
	ck_assert_str_eq(err.sqlstate, b->sqlstate);
	ck_assert_str_eq(err.message, b->message);
}
END_TEST

START_TEST(test_bad_binary_input)
{
	struct ks_value v;
	struct nk_error err;
	static const uint8_t three[3] = { 0, 0, 1 };
	static const uint8_t badnum[10] = { 0, 1, 0, 0, 0, 0, 0, 0, 0x27, 0x10 };	/* 10000 */

	ck_assert(!ks_value_from_binary(KS_TYPE_INT4, three, 3, &v, &err));
	ck_assert_str_eq(err.sqlstate, "22P03");
	ck_assert(!ks_value_from_binary(KS_TYPE_UUID, three, 3, &v, &err));
	ck_assert(!ks_value_from_binary(KS_TYPE_NUMERIC, badnum, sizeof(badnum), &v, &err));
	ck_assert_str_eq(err.message, "invalid binary data for type numeric");
}
END_TEST

/* The session offset applies to timestamptz text without a zone, never to timestamp. */
/* local text in <zone> must be the UTC instant <utc> (both "YYYY-MM-DD HH:MM:SS"). */
static void
expect_zone(const char *local, const char *session_zone, const char *utc)
{
	struct ks_text_ctx ctx = { .tz_name = session_zone };
	struct ks_value a, b;
	struct nk_error err;

	ck_assert_msg(ks_value_from_text(KS_TYPE_TIMESTAMPTZ, local, strlen(local), &ctx, &a, &err),
		      "%s: %s", local, err.message);
	ck_assert(ks_value_from_text(KS_TYPE_TIMESTAMPTZ, utc, strlen(utc), NULL, &b, &err));
	ck_assert_msg(a.i == b.i, "%s in %s: off by %lld s", local, session_zone ? session_zone : "-",
		      (long long)((a.i - b.i) / 1000000));
}

/* Named zones: DST, the gap and overlap rules of Postgres, the footer rule past 2037. */
START_TEST(test_named_zones)
{
	expect_zone("2024-07-01 12:00:00 America/New_York", NULL, "2024-07-01 16:00:00");
	expect_zone("2024-01-15 12:00:00 America/New_York", NULL, "2024-01-15 17:00:00");
	expect_zone("2024-07-01 12:00:00", "Europe/Berlin", "2024-07-01 10:00:00");
	expect_zone("2024-07-01 12:00:00+00", "Europe/Berlin", "2024-07-01 12:00:00");
	expect_zone("2024-03-10 02:30:00", "America/New_York", "2024-03-10 07:30:00");	/* gap */
	expect_zone("2024-11-03 01:30:00", "America/New_York", "2024-11-03 06:30:00");	/* overlap */
	expect_zone("2024-10-27 02:30:00 Europe/Berlin", NULL, "2024-10-27 01:30:00");
	expect_zone("2050-07-01 12:00:00", "America/New_York", "2050-07-01 16:00:00");
	expect_zone("2050-12-01 12:00:00", "America/New_York", "2050-12-01 17:00:00");
	expect_zone("2060-03-26 12:00:00", "Australia/Sydney", "2060-03-26 01:00:00");
	expect_zone("2060-06-26 12:00:00", "Australia/Sydney", "2060-06-26 02:00:00");
	expect_zone("2024-06-01 00:00:00", "Asia/Tokyo", "2024-05-31 15:00:00");
	expect_zone("2024-06-01 00:00:00 Etc/UTC", "Asia/Tokyo", "2024-06-01 00:00:00");
	expect_zone("2024-06-01 00:00:00", "UTC", "2024-06-01 00:00:00");
	{
		struct ks_text_ctx ctx = { .tz_name = "../../etc/passwd" };
		struct ks_value v;
		struct nk_error err;
		const char *s = "2024-06-01 00:00:00";

		ck_assert(!ks_value_from_text(KS_TYPE_TIMESTAMPTZ, s, strlen(s), &ctx, &v, &err));
		ck_assert_str_eq(err.message, "time zone \"../../etc/passwd\" not recognized");
	}
}
END_TEST

START_TEST(test_timestamptz_session_zone)
{
	struct ks_text_ctx ctx = { .tz_offset_secs = 3600 };
	struct ks_value v;
	struct nk_error err;
	const char *s = "2024-01-01 01:00:00";

	ck_assert(ks_value_from_text(KS_TYPE_TIMESTAMPTZ, s, strlen(s), &ctx, &v, &err));
	ck_assert(ks_xxhash(&v) == hash_binary(KS_TYPE_TIMESTAMPTZ, "0002b0d5d4e94000"));
	ck_assert(ks_value_from_text(KS_TYPE_TIMESTAMP, s, strlen(s), &ctx, &v, &err));
	ck_assert(v.i == INT64_C(0x0002b0d5d4e94000) + INT64_C(3600000000));
	s = "2024-01-01 01:00:00+01";
	ck_assert(ks_value_from_text(KS_TYPE_TIMESTAMPTZ, s, strlen(s), NULL, &v, &err));
	ck_assert(v.i == INT64_C(0x0002b0d5d4e94000));
	s = "0001-01-01 00:00:00 BC";
	ck_assert(ks_value_from_text(KS_TYPE_TIMESTAMP, s, strlen(s), NULL, &v, &err));
	ck_assert(v.i == INT64_C(-730485) * INT64_C(86400000000));
}
END_TEST

/* modulo: bucket i of modulus 4 lands at i * 2^62, i.e. range i of 00/40/80/c0. */
START_TEST(test_modulo_mapping)
{
	uint64_t starts[4] = { 0, UINT64_C(0x4000000000000000), UINT64_C(0x8000000000000000),
			       UINT64_C(0xc000000000000000) };

	ck_assert(ks_modulo_value(0, 4) == 0);
	ck_assert(ks_modulo_value(1, 4) == UINT64_C(0x4000000000000000));
	ck_assert(ks_modulo_value(6, 4) == UINT64_C(0x8000000000000000));
	ck_assert(ks_modulo_value(-1, 4) == UINT64_C(0xc000000000000000));
	ck_assert(ks_modulo_value(INT64_MIN, 3) == ks_modulo_value(1, 3));
	ck_assert(ks_modulo_value(2, 3) == UINT64_C(0xaaaaaaaaaaaaaaaa));
	for (int64_t v = -100; v < 100; v++)
		ck_assert_uint_eq(ks_range_find(starts, 4, ks_modulo_value(v, 4)),
				  (size_t)(((v % 4) + 4) % 4));
}
END_TEST

START_TEST(test_range_mapping)
{
	struct ks_value v = { .type = KS_TYPE_INT4, .i = -5 };
	struct nk_error err;
	uint64_t rv, b;

	ck_assert(ks_range_value(INT64_MIN) == 0);
	ck_assert(ks_range_value(0) == UINT64_C(0x8000000000000000));
	ck_assert(ks_range_value(-1) < ks_range_value(0));
	ck_assert(ks_range_value(INT64_MAX) == UINT64_MAX);
	ck_assert(ks_routing_value(KS_INDEX_RANGE, 0, &v, &rv, &err));
	ck_assert(rv == ks_range_value(-5));
	ck_assert(ks_bound_parse_decimal("-5", &b) && b == rv);
	ck_assert(ks_bound_parse_decimal("1000", &b) && b == ks_range_value(1000));
	ck_assert(ks_bound_parse_decimal("-9223372036854775808", &b) && b == 0);
	ck_assert(!ks_bound_parse_decimal("9223372036854775808", &b));
	ck_assert(!ks_bound_parse_decimal("1e3", &b));
	ck_assert(!ks_bound_parse_decimal("", &b));
	ck_assert(!ks_bound_parse_decimal("-", &b));
	v.type = KS_TYPE_TEXT;
	ck_assert(!ks_routing_value(KS_INDEX_RANGE, 0, &v, &rv, &err));
	ck_assert_str_eq(err.sqlstate, "42804");
	ck_assert_str_eq(err.message, "shard index of type \"range\" cannot route a value of type text");
	ck_assert(!ks_routing_value(KS_INDEX_MODULO, 4, &v, &rv, &err));
	v.type = KS_TYPE_INT8;
	v.i = 5;
	ck_assert(ks_routing_value(KS_INDEX_MODULO, 4, &v, &rv, &err));
	ck_assert(rv == UINT64_C(0x4000000000000000));
	ck_assert(ks_routing_value(KS_INDEX_XXHASH, 0, &v, &rv, &err));
	ck_assert(rv == ks_xxhash(&v));
}
END_TEST

/* Hex bounds are high-order digits; start inclusive, end exclusive. */
START_TEST(test_bounds_and_lookup)
{
	uint64_t b, starts[3];

	ck_assert(ks_bound_parse_hex("4", &b) && b == UINT64_C(0x4000000000000000));
	ck_assert(ks_bound_parse_hex("40", &b) && b == UINT64_C(0x4000000000000000));
	ck_assert(ks_bound_parse_hex("C0", &b) && b == UINT64_C(0xc000000000000000));
	ck_assert(ks_bound_parse_hex("0123456789abcdef", &b) && b == UINT64_C(0x0123456789abcdef));
	ck_assert(ks_bound_parse_hex("ffffffffffffffff", &b) && b == UINT64_MAX);
	ck_assert(!ks_bound_parse_hex("10000000000000000", &b));
	ck_assert(!ks_bound_parse_hex("", &b));
	ck_assert(!ks_bound_parse_hex("4g", &b));
	ck_assert(!ks_bound_parse_hex("0x40", &b));
	starts[0] = 0;
	ck_assert(ks_bound_parse_hex("8000000000000001", &starts[1]));
	ck_assert(ks_bound_parse_hex("ffffffffffffffff", &starts[2]));
	ck_assert_uint_eq(ks_range_find(starts, 3, 0), 0);
	ck_assert_uint_eq(ks_range_find(starts, 3, UINT64_C(0x8000000000000000)), 0);
	ck_assert_uint_eq(ks_range_find(starts, 3, UINT64_C(0x8000000000000001)), 1);
	ck_assert_uint_eq(ks_range_find(starts, 3, UINT64_C(0xfffffffffffffffe)), 1);
	ck_assert_uint_eq(ks_range_find(starts, 3, UINT64_MAX), 2);
	ck_assert_uint_eq(ks_range_find(starts, 1, UINT64_MAX), 0);
}
END_TEST

/* Share of <n> sequential int8 keys (from 1) per range of <nranges> equal ranges. */
static void
check_distribution(size_t nranges, double tolerance)
{
	uint64_t starts[16];
	size_t counts[16] = { 0 };
	const size_t n = 1000000;

	for (size_t i = 0; i < nranges; i++)
		starts[i] = (uint64_t)(((unsigned __int128)i << 64) / nranges);
	for (size_t k = 1; k <= n; k++) {
		struct ks_value v = { .type = KS_TYPE_INT8, .i = (int64_t)k };

		counts[ks_range_find(starts, nranges, ks_xxhash(&v))]++;
	}
	for (size_t i = 0; i < nranges; i++) {
		double share = (double)counts[i] / (double)n, want = 1.0 / (double)nranges;

		ck_assert_msg(fabs(share - want) <= tolerance * want,
			      "range %zu of %zu holds %.4f%%", i, nranges, share * 100);
	}
}

START_TEST(test_distribution_4_and_16)
{
	check_distribution(4, 0.01);
	check_distribution(16, 0.02);
}
END_TEST

START_TEST(test_type_names)
{
	enum ks_type t;
	enum ks_index_type it;

	ck_assert(ks_type_from_name("character varying", &t) && t == KS_TYPE_VARCHAR);
	ck_assert(ks_type_from_name("BIGINT", &t) && t == KS_TYPE_INT8);
	ck_assert(!ks_type_from_name("jsonb", &t));
	ck_assert(!ks_type_from_name("char", &t));
	ck_assert(ks_type_from_name("character", &t) && t == KS_TYPE_BPCHAR);
	ck_assert(ks_type_from_oid(1184, &t) && t == KS_TYPE_TIMESTAMPTZ);
	ck_assert(ks_type_from_oid(17, &t) && t == KS_TYPE_BYTEA);
	ck_assert(!ks_type_from_oid(3802, &t));
	for (int i = 0; i < KS_TYPE_COUNT; i++) {
		ck_assert(ks_type_from_name(ks_type_str((enum ks_type)i), &t));
		ck_assert_int_eq(t, i);
	}
	ck_assert(ks_index_type_from_str("modulo", &it) && it == KS_INDEX_MODULO);
	ck_assert(!ks_index_type_from_str("XXHASH", &it));
	ck_assert_str_eq(ks_index_type_str(KS_INDEX_RANGE), "range");
}
END_TEST

Suite *
keyspace_suite(void)
{
	Suite *s = suite_create("keyspace");
	TCase *tc = tcase_create("routing");

	tcase_set_timeout(tc, 30);
	tcase_add_loop_test(tc, test_design_vectors, 0, NK_ARRAY_LEN(vectors));
	tcase_add_test(tc, test_int_widths_colocate);
	tcase_add_loop_test(tc, test_text_binary_agree, 0, NK_ARRAY_LEN(pairs));
	tcase_add_test(tc, test_canonical_forms);
	tcase_add_loop_test(tc, test_bad_text_input, 0, NK_ARRAY_LEN(bad_inputs));
	tcase_add_test(tc, test_bad_binary_input);
	tcase_add_test(tc, test_timestamptz_session_zone);
	tcase_add_test(tc, test_named_zones);
	tcase_add_test(tc, test_modulo_mapping);
	tcase_add_test(tc, test_range_mapping);
	tcase_add_test(tc, test_bounds_and_lookup);
	tcase_add_test(tc, test_distribution_4_and_16);
	tcase_add_test(tc, test_type_names);
	suite_add_tcase(s, tc);
	return s;
}
