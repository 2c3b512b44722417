/*
 * check_common.c - unit tests for src/common: struct nk_error and the NK013 catalog.
 */
#include "neki/base.h"

#include <check.h>
#include <string.h>

#include "neki/error.h"
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

Suite *
common_suite(void)
{
	Suite *s = suite_create("common");
	TCase *tc = tcase_create("error");

	tcase_add_test(tc, test_nk013_message_form);
	tcase_add_test(tc, test_nk013_catalog_sorted_and_complete);
	tcase_add_test(tc, test_error_detail_hint);
	suite_add_tcase(s, tc);
	return s;
}
