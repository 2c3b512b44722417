/*
 * check_session.c - unit tests for the session layer's pure parts: the query lexer that follows
 * SET/RESET search_path, set_config('search_path', ...), the savepoint statements, DISCARD ALL
 * and DEALLOCATE ALL (varcache_scan_query), the tracked
 * parameter table and values (varcache_set / varcache_index).
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../../src/worker/session_int.h"
#include "suites.h"

struct scan_case {
	const char *sql;
	bool discard, dealloc;
	const char *ops;		/* the search_path ops in order: "set=v|reset|sp=a|rel=a|rbto=a" */
};

static const struct scan_case scan_cases[] = {
	{ "SET search_path TO s1, public", false, false, "set=s1, public" },
	{ "set search_path = \"My Schema\";", false, false, "set=\"My Schema\"" },
	{ "SET SESSION search_path TO s2", false, false, "set=s2" },
	{ "  /* c */ -- x\n SET search_path TO s3 ; select 1", false, false, "set=s3" },
	{ "select 1; SET search_path TO 'a;b'", false, false, "set='a;b'" },
	{ "SET LOCAL search_path TO s4", false, false, "" },
	{ "SET search_path TO DEFAULT", false, false, "reset" },
	{ "RESET search_path", false, false, "reset" },
	{ "RESET ALL", false, false, "reset" },
	{ "SET search_path TO s5; RESET search_path", false, false, "set=s5|reset" },
	{ "DISCARD ALL", true, false, "reset" },
	{ "DEALLOCATE ALL", false, true, "" },
	{ "deallocate prepare all", false, true, "" },
	{ "DEALLOCATE p1", false, false, "" },
	{ "select 'SET search_path TO x'", false, false, "" },
	{ "select $$; SET search_path TO x$$", false, false, "" },
	{ "select $t$ $$ ; $t$; DISCARD ALL", true, false, "reset" },
	{ "select E'\\'; SET search_path TO x'", false, false, "" },
	{ "SET search_pathx TO y", false, false, "" },
	{ "/* unterminated", false, false, "" },
	{ "", false, false, "" },
	{ "SELECT set_config('search_path', 'a, \"B\"', false)", false, false, "set=a, \"B\"" },
	{ "select pg_catalog . set_config ( 'Search_Path' , 'it''s' , false ) ;", false, false,
	  "set=it's" },
	{ "select set_config('search_path', 'a', true)", false, false, "" },
	{ "select set_config('search_path', $1, false)", false, false, "" },
	{ "select set_config('work_mem', '1MB', false)", false, false, "" },
	{ "select 1, set_config('search_path', 'a', false)", false, false, "" },
	{ "BEGIN; SAVEPOINT a; SET search_path TO x; ROLLBACK TO SAVEPOINT a; RELEASE \"B c\"",
	  false, false, "sp=a|set=x|rbto=a|rel=B c" },
	{ "rollback work to Sp1; rollback transaction to savepoint sp2; release savepoint S3",
	  false, false, "rbto=sp1|rbto=sp2|rel=s3" },
	{ "ROLLBACK; ROLLBACK AND CHAIN", false, false, "" },
};

/* The ops of <fx> in the scan_cases notation. */
static void
ops_text(const struct query_effects *fx, char *out, size_t cap)
{
	static const char *const kinds[] = { "set=", "reset", "sp=", "rel=", "rbto=" };
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < fx->n_ops; i++)
		n += (size_t)snprintf(out + n, cap - n, "%s%s%s", i > 0 ? "|" : "",
				      kinds[fx->ops[i].kind], fx->ops[i].arg);
}

START_TEST(scan_query)
{
	const struct scan_case *c = &scan_cases[_i];
	struct query_effects fx;
	char got[1024];

	varcache_scan_query(c->sql, strlen(c->sql) + 1, &fx);
	ck_assert_msg(fx.discard_all == c->discard, "discard: %s", c->sql);
	ck_assert_msg(fx.deallocate_all == c->dealloc, "deallocate: %s", c->sql);
	ops_text(&fx, got, sizeof(got));
	ck_assert_msg(strcmp(got, c->ops) == 0, "%s: got [%s]", c->sql, got);
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
