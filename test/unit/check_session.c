/*
 * check_session.c - unit tests for the session layer's pure parts: the query lexer that follows
 * SET/RESET search_path, DISCARD ALL and DEALLOCATE ALL (varcache_scan_query), the tracked
 * parameter table and values (varcache_set / varcache_index).
 */
#include "neki/base.h"

#include <check.h>
#include <string.h>

#include "../../src/worker/session_int.h"
#include "suites.h"

struct scan_case {
	const char *sql;
	bool set, reset, discard, dealloc;
	const char *value;		/* expected search_path text when set */
};

static const struct scan_case scan_cases[] = {
	{ "SET search_path TO s1, public", true, false, false, false, "s1, public" },
	{ "set search_path = \"My Schema\";", true, false, false, false, "\"My Schema\"" },
	{ "SET SESSION search_path TO s2", true, false, false, false, "s2" },
	{ "  /* c */ -- x\n SET search_path TO s3 ; select 1", true, false, false, false, "s3" },
	{ "select 1; SET search_path TO 'a;b'", true, false, false, false, "'a;b'" },
	{ "SET LOCAL search_path TO s4", false, false, false, false, NULL },
	{ "SET search_path TO DEFAULT", false, true, false, false, NULL },
	{ "RESET search_path", false, true, false, false, NULL },
	{ "RESET ALL", false, true, false, false, NULL },
	{ "SET search_path TO s5; RESET search_path", false, true, false, false, NULL },
	{ "DISCARD ALL", false, true, true, false, NULL },
	{ "DEALLOCATE ALL", false, false, false, true, NULL },
	{ "deallocate prepare all", false, false, false, true, NULL },
	{ "DEALLOCATE p1", false, false, false, false, NULL },
	{ "select 'SET search_path TO x'", false, false, false, false, NULL },
	{ "select $$; SET search_path TO x$$", false, false, false, false, NULL },
	{ "select $t$ $$ ; $t$; DISCARD ALL", false, true, true, false, NULL },
	{ "select E'\\'; SET search_path TO x'", false, false, false, false, NULL },
	{ "SET search_pathx TO y", false, false, false, false, NULL },
	{ "/* unterminated", false, false, false, false, NULL },
	{ "", false, false, false, false, NULL },
};

START_TEST(scan_query)
{
	const struct scan_case *c = &scan_cases[_i];
	struct query_effects fx;

	varcache_scan_query(c->sql, strlen(c->sql) + 1, &fx);
	ck_assert_msg(fx.set_search_path == c->set, "set: %s", c->sql);
	ck_assert_msg(fx.reset_search_path == c->reset, "reset: %s", c->sql);
	ck_assert_msg(fx.discard_all == c->discard, "discard: %s", c->sql);
	ck_assert_msg(fx.deallocate_all == c->dealloc, "deallocate: %s", c->sql);
	if (c->value != NULL)
		ck_assert_str_eq(fx.search_path, c->value);
}
END_TEST

START_TEST(tracked_names)
{
	struct varcache vc;

	memset(&vc, 0, sizeof(vc));
	varcache_configure(NULL);
	ck_assert_int_eq((int)varcache_count(), 6);
	ck_assert_int_ge(varcache_index("datestyle"), 0);
	ck_assert_int_ge(varcache_index("IntervalStyle"), 0);
	ck_assert_int_eq(varcache_index("search_path"), -1);
	ck_assert(varcache_set(&vc, "TimeZone", "UTC"));
	ck_assert(varcache_set(&vc, "timezone", "Asia/Tokyo"));
	ck_assert_str_eq(vc.val[varcache_index("TimeZone")], "Asia/Tokyo");
	ck_assert(!varcache_set(&vc, "geqo", "off"));
	varcache_cleanup(&vc);
}
END_TEST

Suite *
session_suite(void)
{
	Suite *s = suite_create("session");
	TCase *tc = tcase_create("varcache");

	tcase_add_loop_test(tc, scan_query, 0, (int)NK_ARRAY_LEN(scan_cases));
	tcase_add_test(tc, tracked_names);
	suite_add_tcase(s, tc);
	return s;
}
