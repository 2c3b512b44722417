/*
 * check_common.c - unit tests for src/common: struct nk_error, the NK013 catalog,
 * interned strings, hashes, the SQL scanner and nk_memstream().
 */
#include "neki/base.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "neki/error.h"
#include "neki/hash.h"
#include "neki/sqlscan.h"
#include "neki/intern.h"
#include "neki/memstream.h"
#include "suites.h"

START_TEST(test_nk013_message_form)
{
	struct nk_error err;

	nk_error_clear(&err);
	ck_assert(!nk_error_is_set(&err));
	ck_assert(!nk_error_nk013(&err, 145));
	ck_assert(nk_error_is_set(&err));
	ck_assert_str_eq(err.sqlstate, "NK013");
	ck_assert_int_eq(err.code, 145);
	ck_assert_str_eq(err.message, "not implemented: [145] Updating an index column is unavailable.");
}
END_TEST

START_TEST(test_nk013_catalog_sorted_and_complete)
{
	size_t n = nk_nk013_count();

	/* 156 published codes minus 89, whose sentence is not published */
	ck_assert_uint_eq(n, 155);
	for (size_t i = 0; i < n; i++) {
		int code = nk_nk013_code_at(i);
		const char *s = nk_nk013_sentence(code);

		ck_assert_ptr_nonnull(s);
		ck_assert_int_gt((int)strlen(s), 10);
		ck_assert_msg(s[strlen(s) - 1] == '.', "code %d sentence ends with a period", code);
		if (i > 0)
			ck_assert_int_lt(nk_nk013_code_at(i - 1), code);
	}
	ck_assert_ptr_null(nk_nk013_sentence(89));
	ck_assert_ptr_null(nk_nk013_sentence(3));
	ck_assert_str_eq(nk_nk013_sentence(338),
			 "Temporary tables, views and sequences are unavailable.");
	ck_assert_str_eq(nk_nk013_sentence(44),
			 "COPY FROM cannot maintain this table\xe2\x80\x99s secondary index.");
}
END_TEST

START_TEST(test_error_detail_hint)
{
	struct nk_error err;

	ck_assert(!nk_error_set(&err, "22023", "bad value \"%s\"", "x"));
	nk_error_detail(&err, "detail %d", 1);
	nk_error_hint(&err, "hint");
	ck_assert_str_eq(err.message, "bad value \"x\"");
	ck_assert_str_eq(err.detail, "detail 1");
	ck_assert_str_eq(err.hint, "hint");
	ck_assert(!nk_error_set(NULL, "22023", "ignored"));
}
END_TEST

/* Equal texts share one pointer while referenced; the last unref frees; growth keeps
 * every entry findable. */
START_TEST(test_intern_shares_and_frees)
{
	size_t base = intern_count();
	char buf[32];
	const char *a = intern_ref("Europe/Rome"), *b, *utc, *many[500];

	strcpy(buf, "Europe/Rome");
	b = intern_ref(buf);
	ck_assert_ptr_nonnull(a);
	ck_assert_ptr_eq(a, b);
	ck_assert_str_eq(a, "Europe/Rome");
	utc = intern_ref("UTC");
	ck_assert_ptr_ne(utc, a);
	ck_assert_uint_eq(intern_count(), base + 2);
	ck_assert_ptr_null(intern_ref(NULL));
	intern_unref(NULL);
	for (int i = 0; i < 500; i++) {		/* several doublings of the table */
		snprintf(buf, sizeof(buf), "value %d", i);
		many[i] = intern_ref(buf);
		ck_assert_ptr_nonnull(many[i]);
	}
	for (int i = 0; i < 500; i++) {
		snprintf(buf, sizeof(buf), "value %d", i);
		ck_assert_ptr_eq(intern_ref(buf), many[i]);
		intern_unref(many[i]);
		intern_unref(many[i]);
	}
	intern_unref(a);
	ck_assert_ptr_eq(intern_ref("Europe/Rome"), b);	/* b still holds it */
	intern_unref(b);
	intern_unref(b);
	intern_unref(utc);
	ck_assert_uint_eq(intern_count(), base);
}
END_TEST

/* nk_hash64 is XXH3_64bits seed 0 (DESIGN.md's vector for ''); the keyed hash follows its
 * secret, and the split between its two parts is part of the input. */
START_TEST(test_hashes)
{
	struct nk_hash128 a, b, c;

	ck_assert_uint_eq(nk_hash64("", 0), UINT64_C(0x2d06800538d394c2));
	a = nk_hash128_keyed("select 1", 9, "", 0);
	b = nk_hash128_keyed("select 1", 9, "", 0);
	ck_assert(a.lo == b.lo && a.hi == b.hi);
	c = nk_hash128_keyed("select 2", 9, "", 0);
	ck_assert(a.lo != c.lo || a.hi != c.hi);
	/* the concatenation is hashed: the same bytes, split elsewhere, hash the same */
	c = nk_hash128_keyed("select", 6, " 1", 3);
	ck_assert(a.lo == c.lo && a.hi == c.hi);
	ck_assert(nk_hash_secret_init());
	ck_assert(nk_hash_secret_init());	/* (kept) */
	c = nk_hash128_keyed("select 1", 9, "", 0);
	ck_assert(a.lo != c.lo || a.hi != c.hi);	/* a random secret now */
	b = nk_hash128_keyed("select 1", 9, "", 0);
	ck_assert(b.lo == c.lo && b.hi == c.hi);
}
END_TEST

/* sql_scan_item over every item kind, each at offset <at> of <sql>: its kind and the text it
 * spans. */
static const struct scan_case {
	const char *sql;
	size_t at;
	enum sql_item kind;
	const char *item;		/* NULL: none starts there */
} scan_cases[] = {
	{ "'it''s' x", 0, SQL_ITEM_STRING, "'it''s'" },
	{ "'a\\' x", 0, SQL_ITEM_STRING, "'a\\'" },	/* no backslash escapes */
	{ "E'a\\'b' x", 0, SQL_ITEM_STRING_PREFIXED, "E'a\\'b'" },
	{ "x e'\\\\' y", 2, SQL_ITEM_STRING_PREFIXED, "e'\\\\'" },
	{ "B'101' X'ff' N'n'", 0, SQL_ITEM_STRING_PREFIXED, "B'101'" },
	{ "B'101' X'ff' N'n'", 7, SQL_ITEM_STRING_PREFIXED, "X'ff'" },
	{ "U&'d\\0061' U&\"x\"", 0, SQL_ITEM_STRING_PREFIXED, "U&'d\\0061'" },
	{ "U&'d\\0061' U&\"x\"", 11, SQL_ITEM_QUOTED_IDENT, "U&\"x\"" },
	{ "type'x'", 3, SQL_ITEM_NONE, NULL },		/* 'e' inside an identifier */
	{ "type'x'", 4, SQL_ITEM_STRING, "'x'" },
	{ "\"a\"\"b\".c", 0, SQL_ITEM_QUOTED_IDENT, "\"a\"\"b\"" },
	{ "$$a'b$$ x", 0, SQL_ITEM_DOLLAR, "$$a'b$$" },
	{ "$fn$ $x$ $fn$;", 0, SQL_ITEM_DOLLAR, "$fn$ $x$ $fn$" },
	{ "$1 + $2", 0, SQL_ITEM_NONE, NULL },		/* a parameter */
	{ "a$b$ c", 1, SQL_ITEM_NONE, NULL },		/* inside an identifier */
	{ "$a", 0, SQL_ITEM_NONE, NULL },
	{ "-- c 'x\nSELECT", 0, SQL_ITEM_COMMENT, "-- c 'x" },
	{ "/* a /* b */ c */ d", 0, SQL_ITEM_COMMENT, "/* a /* b */ c */" },
	{ "a - b / c", 2, SQL_ITEM_NONE, NULL },
	{ "'open", 0, SQL_ITEM_STRING, "'open" },	/* unterminated: to the end */
	{ "/* open", 0, SQL_ITEM_COMMENT, "/* open" },
	{ "$q$ open", 0, SQL_ITEM_DOLLAR, "$q$ open" },
};

START_TEST(test_sql_scan_item)
{
	const struct scan_case *c = &scan_cases[_i];
	enum sql_item kind;
	size_t n = strlen(c->sql), e = sql_scan_item(c->sql, c->at, n, &kind);

	ck_assert_msg(kind == c->kind, "%s at %zu: kind %d, want %d", c->sql, c->at, kind, c->kind);
	if (c->item == NULL) {
		ck_assert_uint_eq(e, c->at);
		return;
	}
	ck_assert_msg(e - c->at == strlen(c->item) && memcmp(c->sql + c->at, c->item, e - c->at) == 0,
		      "%s at %zu: \"%.*s\", want \"%s\"", c->sql, c->at, (int)(e - c->at),
		      c->sql + c->at, c->item);
	ck_assert_ptr_eq(sql_skip_item(c->sql, c->sql + c->at), c->sql + e);
}
END_TEST

/* sql_skip_item() on items longer than the window it measures first: the same end as a
 * scan of the whole text, terminated or not, whatever follows. */
START_TEST(test_sql_skip_long_items)
{
	static const char *const shapes[][2] = { { "'", "' x" }, { "'", "" },
						 { "$t$", "$t$ x" }, { "/* ", " */ x" },
						 { "E'", "\\'' x" }, { "\"", "\" x" } };
	static const size_t lens[] = { 4090, 4094, 4095, 4096, 4097, 10000 };
	static char sql[10100];

	for (size_t l = 0; l < NK_ARRAY_LEN(lens); l++)
		for (size_t k = 0; k < NK_ARRAY_LEN(shapes); k++) {
			size_t a = strlen(shapes[k][0]), e;
			enum sql_item kind;

			memcpy(sql, shapes[k][0], a);
			memset(sql + a, 'a', lens[l]);
			strcpy(sql + a + lens[l], shapes[k][1]);
			e = sql_scan_item(sql, 0, strlen(sql), &kind);
			ck_assert_msg(e > lens[l], "%zu %s", lens[l], shapes[k][0]);
			ck_assert_ptr_eq(sql_skip_item(sql, sql), sql + e);
		}
}
END_TEST

/* nk_memstream(): open_memstream()'s contract (the string and its size after each flush and
 * at the close, NUL-terminated, the caller's to free), empty and past many doublings. */
/* sql_put_literal(): an E'' constant of any bytes, each quote and backslash doubled (at
 * either end, side by side, none at all). */
START_TEST(test_sql_put_literal)
{
	static const char *const cases[][2] = {
		{ "", "E''" }, { "abc", "E'abc'" }, { "it's", "E'it''s'" },
		{ "'", "E''''" }, { "''", "E''''''" }, { "a\\b", "E'a\\\\b'" },
		{ "\\'x'\\", "E'\\\\''x''\\\\'" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = nk_memstream(&buf, &len);

		ck_assert_ptr_nonnull(f);
		sql_put_literal(f, cases[i][0], strlen(cases[i][0]));
		ck_assert_int_eq(fclose(f), 0);
		ck_assert_str_eq(buf, cases[i][1]);
		free(buf);
	}
}
END_TEST

/* sql_put_ident(): a quoted identifier, each '"' doubled. */
START_TEST(test_sql_put_ident)
{
	static const char *const cases[][2] = {
		{ "", "\"\"" }, { "orders", "\"orders\"" }, { "a\"b", "\"a\"\"b\"" },
		{ "\"", "\"\"\"\"" }, { "\"x\"\"", "\"\"\"x\"\"\"\"\"" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = nk_memstream(&buf, &len);

		ck_assert_ptr_nonnull(f);
		sql_put_ident(f, cases[i][0]);
		ck_assert_int_eq(fclose(f), 0);
		ck_assert_str_eq(buf, cases[i][1]);
		free(buf);
	}
}
END_TEST

START_TEST(test_memstream)
{
	char *buf = NULL, big[5000];
	size_t len = 99;
	FILE *f = nk_memstream(&buf, &len);

	ck_assert_ptr_nonnull(f);
	ck_assert(fclose(f) == 0);
	ck_assert_ptr_nonnull(buf);
	ck_assert_str_eq(buf, "");
	ck_assert_uint_eq(len, 0);
	free(buf);
	f = nk_memstream(&buf, &len);
	fprintf(f, "INSERT %d", 42);
	ck_assert(fflush(f) == 0);
	ck_assert_str_eq(buf, "INSERT 42");
	ck_assert_uint_eq(len, 9);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	for (int i = 0; i < 20; i++)
		fputs(big, f);
	fputc('!', f);
	ck_assert(fclose(f) == 0);
	ck_assert_uint_eq(len, 9 + 20 * (sizeof(big) - 1) + 1);
	ck_assert_uint_eq(strlen(buf), len);
	ck_assert_int_eq(buf[len - 1], '!');
	ck_assert_int_eq(buf[9], 'x');
	free(buf);
}
END_TEST

Suite *
common_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("error");
	TCase *ti = tcase_create("intern");

	tcase_add_test(tc, test_nk013_message_form);
	tcase_add_test(tc, test_nk013_catalog_sorted_and_complete);
	tcase_add_test(tc, test_error_detail_hint);
	suite_add_tcase(s, tc);
	tcase_add_test(ti, test_intern_shares_and_frees);
	tcase_add_test(ti, test_hashes);
	tcase_add_loop_test(ti, test_sql_scan_item, 0, (int)NK_ARRAY_LEN(scan_cases));
	tcase_add_test(ti, test_sql_skip_long_items);
	tcase_add_test(ti, test_sql_put_literal);
	tcase_add_test(ti, test_sql_put_ident);
	tcase_add_test(ti, test_memstream);
	suite_add_tcase(s, ti);
	return s;
}
