/*
 * check_admin.c - the pure parts of the admin process: the __neki call recognizer (literal
 * forms, casts, named arguments, comments, syntax errors), interval literals and the flat
 * JSON reader/writer used for set_data_topology options and the cache file.
 */
#include "neki/base.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "neki/admin.h"

#include "../../src/admin/admin_int.h"
#include "suites.h"

static enum adm_call_parse_result
parse(const char *sql, struct adm_call *c, struct nk_error *err)
{
	nk_error_clear(err);
	return adm_call_parse(sql, c, err);
}

START_TEST(call_forms)
{
	static const struct { const char *sql; const char *fn; size_t nargs; bool from; } cases[] = {
		{ "SELECT * FROM __neki.get_data_topology()", "get_data_topology", 0, true },
		{ "select * from __NEKI.Get_Data_Topology_Revision();", "get_data_topology_revision", 0,
		  true },
		{ "SELECT __neki.list_shards()", "list_shards", 0, false },
		{ "  SELECT\n*\tFROM \"__neki\".\"list_shards\" ( ) ; ", "list_shards", 0, true },
		{ "SELECT * FROM __neki.wait_for_data_topology(3, '1 second'::interval)",
		  "wait_for_data_topology", 2, true },
		{ "-- comment\nSELECT /* a /* nested */ one */ * FROM __neki.f(1) t", "f", 1, true },
		{ "SELECT success, revision FROM __neki.set_data_topology('{}', true)",
		  "set_data_topology", 2, true },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct adm_call c;
		struct nk_error err;

		ck_assert_int_eq(parse(cases[i].sql, &c, &err), ADM_CALL_OK);
		ck_assert_str_eq(c.fn, cases[i].fn);
		ck_assert_uint_eq(c.nargs, cases[i].nargs);
		ck_assert_int_eq(c.from_form, cases[i].from);
		adm_call_cleanup(&c);
	}
}
END_TEST

START_TEST(call_literals)
{
	struct adm_call c;
	struct nk_error err;

	ck_assert_int_eq(parse("SELECT * FROM __neki.f('it''s', E'a\\nb\\x41\\u00e9', $$x'y$$,"
			       " $t$a$$b$t$, -12, +3.5e2, TRUE, false, NULL)", &c, &err),
			 ADM_CALL_ERROR);	/* 9 arguments: more than ADM_CALL_MAX_ARGS */
	ck_assert_str_eq(err.sqlstate, "54023");
	ck_assert_int_eq(parse("SELECT * FROM __neki.f('it''s', E'a\\nb\\x41\\u00e9', $$x'y$$,"
			       " $t$a$$b$t$, -12, +3.5e2, TRUE, NULL::text)", &c, &err),
			 ADM_CALL_OK);
	ck_assert_uint_eq(c.nargs, 8);
	ck_assert_str_eq(c.args[0].text, "it's");
	ck_assert_str_eq(c.args[1].text, "a\nbA\xc3\xa9");
	ck_assert_str_eq(c.args[2].text, "x'y");
	ck_assert_str_eq(c.args[3].text, "a$$b");
	ck_assert_int_eq(c.args[4].kind, ADM_ARG_NUMBER);
	ck_assert_str_eq(c.args[4].text, "-12");
	ck_assert_str_eq(c.args[5].text, "+3.5e2");
	ck_assert_int_eq(c.args[6].kind, ADM_ARG_BOOL);
	ck_assert_str_eq(c.args[6].text, "true");
	ck_assert_int_eq(c.args[7].kind, ADM_ARG_NULL);
	ck_assert_str_eq(c.args[7].cast, "text");
	adm_call_cleanup(&c);
}
END_TEST

START_TEST(call_named_and_casts)
{
	struct adm_call c;
	struct nk_error err;

	ck_assert_int_eq(parse("SELECT * FROM __neki.set_data_topology(data_topology_json =>"
			       " '{}'::jsonb::text, overwrite := 'on'::boolean, options =>"
			       " '{\"force\": true}'::character varying(20))", &c, &err),
			 ADM_CALL_OK);
	ck_assert_str_eq(c.args[0].name, "data_topology_json");
	ck_assert_str_eq(c.args[0].cast, "text");
	ck_assert_str_eq(c.args[1].name, "overwrite");
	ck_assert_str_eq(c.args[1].text, "on");
	ck_assert_str_eq(c.args[2].cast, "character varying");
	ck_assert_str_eq(c.args[2].text, "{\"force\": true}");
	adm_call_cleanup(&c);
}
END_TEST

START_TEST(call_not_neki)
{
	static const char *const sqls[] = {
		"SHOW POOLS", "SELECT 1", "SELECT * FROM pg_class", "select * from neki.f()",
		"SELECT * FROM __nekix.f()", "", "SET x = 1",
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(sqls); i++) {
		struct adm_call c;
		struct nk_error err;

		ck_assert_int_eq(parse(sqls[i], &c, &err), ADM_CALL_NOT_NEKI);
	}
}
END_TEST

START_TEST(call_syntax_errors)
{
	static const struct { const char *sql; const char *msg; } cases[] = {
		{ "SELECT * FROM __neki.f", "syntax error at end of input" },
		{ "SELECT * FROM __neki.f(1", "syntax error at end of input" },
		{ "SELECT * FROM __neki.f('x)", "unterminated quoted string" },
		{ "SELECT * FROM __neki.f($a$x)", "unterminated dollar-quoted string" },
		{ "SELECT * FROM __neki.f(1) extra junk", "syntax error at or near \"junk\"" },
		{ "SELECT * FROM __neki.f(foo)", "syntax error at or near \"foo)\"" },
		{ "SELECT * FROM __neki.f(1); SELECT 2", "syntax error at or near \"SELECT\"" },
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(cases); i++) {
		struct adm_call c;
		struct nk_error err;

		ck_assert_int_eq(parse(cases[i].sql, &c, &err), ADM_CALL_ERROR);
		ck_assert_str_eq(err.message, cases[i].msg);
		ck_assert_str_eq(err.sqlstate, "42601");
	}
}
END_TEST

START_TEST(intervals)
{
	static const struct { const char *text; double secs; } ok[] = {
		{ "5", 5 }, { "120 seconds", 120 }, { "1.5s", 1.5 }, { "250 ms", 0.25 },
		{ "2 min", 120 }, { "1 hour 2 minutes", 3720 }, { "00:01:30", 90 }, { "1 day", 86400 },
	};
	static const char *const bad[] = { "", "soon", "5 fortnights", "-3 s", "1:2" };
	double v;

	for (size_t i = 0; i < NK_ARRAY_LEN(ok); i++) {
		ck_assert_msg(adm_parse_interval(ok[i].text, &v), "%s", ok[i].text);
		ck_assert_double_eq_tol(v, ok[i].secs, 1e-9);
	}
	for (size_t i = 0; i < NK_ARRAY_LEN(bad); i++)
		ck_assert_msg(!adm_parse_interval(bad[i], &v), "%s", bad[i]);
}
END_TEST

START_TEST(json_flat)
{
	struct adm_json_obj o;
	struct nk_error err;

	ck_assert(adm_json_parse(" {\"comment\": \"a \\\"b\\\" \\u00e9\\ud83d\\ude00\", "
				 "\"expected_revision\": 12, \"force\": true, \"x\": null,"
				 " \"nested\": {\"k\": [1, \"]\"]}} ", &o, &err));
	ck_assert_uint_eq(o.n, 5);
	ck_assert_str_eq(adm_json_get(&o, "comment")->text, "a \"b\" \xc3\xa9\xf0\x9f\x98\x80");
	ck_assert_int_eq(adm_json_get(&o, "expected_revision")->kind, ADM_JSON_NUMBER);
	ck_assert_str_eq(adm_json_get(&o, "expected_revision")->text, "12");
	ck_assert_str_eq(adm_json_get(&o, "force")->text, "true");
	ck_assert_int_eq(adm_json_get(&o, "x")->kind, ADM_JSON_NULL);
	ck_assert_str_eq(adm_json_get(&o, "nested")->text, "{\"k\": [1, \"]\"]}");
	ck_assert_ptr_null(adm_json_get(&o, "missing"));
	adm_json_cleanup(&o);
	ck_assert(adm_json_parse("{}", &o, &err));
	ck_assert_uint_eq(o.n, 0);
}
END_TEST

START_TEST(json_bad)
{
	static const char *const bad[] = {
		"", "[]", "{", "{\"a\"}", "{\"a\": }", "{\"a\": 1,}", "{\"a\": tru}", "{\"a\": 1} x",
		"{\"a\": \"\\q\"}", "{\"a\": \"\\ud800\"}", "{a: 1}",
	};

	for (size_t i = 0; i < NK_ARRAY_LEN(bad); i++) {
		struct adm_json_obj o;
		struct nk_error err;

		ck_assert_msg(!adm_json_parse(bad[i], &o, &err), "%s", bad[i]);
		ck_assert_str_eq(err.sqlstate, "22P02");
	}
}
END_TEST

START_TEST(json_write_round_trip)
{
	const char *text = "line1\n\"quoted\"\t\\ \x01 \xc3\xa9";
	char *buf = NULL;
	size_t len = 0, cap = 0;
	struct adm_json_obj o;
	struct nk_error err;

	ck_assert(adm_json_put_raw(&buf, &len, &cap, "{\"t\": "));
	ck_assert(adm_json_put_string(&buf, &len, &cap, text));
	ck_assert(adm_json_put_raw(&buf, &len, &cap, "}"));
	ck_assert_uint_eq(len, strlen(buf));
	ck_assert(adm_json_parse(buf, &o, &err));
	ck_assert_str_eq(adm_json_get(&o, "t")->text, text);
	adm_json_cleanup(&o);
	free(buf);
}
END_TEST

START_TEST(forward_entry_points)
{
	struct sockaddr_un sa;
	socklen_t len = admin_forward_address(6432, &sa);
	const char name[] = "neki-admin/.s.PGSQL.6432";

	ck_assert(admin_is_neki_call("SELECT * FROM __neki.get_data_topology()"));
	/* not a whole call: the router's grammar (42601) or its store guard (42501) answers */
	ck_assert(!admin_is_neki_call("select __neki.list_shards("));
	ck_assert(!admin_is_neki_call("SELECT * FROM __neki.data_topology_log"));
	ck_assert(!admin_is_neki_call("SELECT * FROM orders"));
	ck_assert(!admin_is_neki_call("SHOW POOLS"));
	ck_assert_int_eq(sa.sun_family, AF_UNIX);
	ck_assert_int_eq(sa.sun_path[0], 0);
	ck_assert_int_eq(memcmp(sa.sun_path + 1, name, sizeof(name) - 1), 0);
	ck_assert_uint_eq(len, offsetof(struct sockaddr_un, sun_path) + sizeof(name));
}
END_TEST

Suite *
admin_suite(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");

	tcase_add_test(tc, call_forms);
	tcase_add_test(tc, call_literals);
	tcase_add_test(tc, call_named_and_casts);
	tcase_add_test(tc, call_not_neki);
	tcase_add_test(tc, call_syntax_errors);
	tcase_add_test(tc, intervals);
	tcase_add_test(tc, json_flat);
	tcase_add_test(tc, json_bad);
	tcase_add_test(tc, json_write_round_trip);
	tcase_add_test(tc, forward_entry_points);
	suite_add_tcase(s, tc);
	return s;
}
