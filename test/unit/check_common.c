/*
 * check_common.c - unit tests for src/common: struct nk_error, the NK013 catalog and
 * interned strings.
 */
#include "neki/base.h"

#include <check.h>
#include <string.h>

#include <stdio.h>

#include "neki/error.h"
#include "neki/intern.h"
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
	suite_add_tcase(s, ti);
	return s;
}
