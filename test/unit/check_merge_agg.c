/*
 * check_merge_agg.c - the aggregates merged across shards beyond the plain ones: the shard
 * query of aggregates with DISTINCT inside (array_agg(DISTINCT x) partials and the carrier
 * column computed WITH FILTER (WHERE false)), avg's sum((x) * 1::int2), the numeric partials
 * of stddev / variance, json_agg's structure flag, HAVING and expressions over GROUP BY items;
 * the refusals with their reasons; the router's combines (bit_and / bit_or / bit_xor,
 * json_agg / jsonb_agg / json_object_agg joined as Postgres writes them) and the final combine
 * SQL (the union of distinct values, Postgres' numeric variance, collected partials of xmlagg
 * and sum(interval), grouped values in HAVING) with binary results passed through.
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "merge_fixtures.h"
#include "neki/merge.h"
#include "neki/plan.h"
#include "suites.h"

/* ---- the shard query ---- */

struct agg_spec_case {
	const char *sql, *shard_sql;
	uint32_t nvisible, ncols;
};

static const struct agg_spec_case agg_spec_cases[] = {
	{ "SELECT g, sum(DISTINCT x) FILTER (WHERE y) AS s FROM t GROUP BY g",
	  "SELECT g, sum(DISTINCT x) FILTER (WHERE false) AS s, array_agg(DISTINCT x) FILTER "
	  "(WHERE y), g FROM t GROUP BY g", 2, 4 },
	{ "SELECT string_agg(DISTINCT s COLLATE \"C\", ',' ORDER BY s COLLATE \"C\" DESC) FROM t",
	  "SELECT string_agg(DISTINCT s COLLATE \"C\", ',' ORDER BY s COLLATE \"C\" DESC) FILTER "
	  "(WHERE false), array_agg(DISTINCT s COLLATE \"C\") FROM t", 1, 2 },
	{ "SELECT min(DISTINCT x), bit_or(DISTINCT x), count(x ORDER BY y) FROM t",
	  "SELECT min(DISTINCT x), bit_or(DISTINCT x), count(x ORDER BY y) FROM t", 3, 3 },
	{ "SELECT avg(x) FROM t",
	  "SELECT avg(x) FILTER (WHERE false), sum((x) * 1::int2), count(x) FROM t", 1, 3 },
	{ "SELECT stddev_pop(n) FILTER (WHERE f) FROM t",
	  "SELECT stddev_pop(n) FILTER (WHERE false), count(n) FILTER (WHERE f), "
	  "sum((n)::numeric) FILTER (WHERE f), sum((n)::numeric * (n)::numeric) FILTER (WHERE f) "
	  "FROM t", 1, 4 },
	{ "SELECT variance(n) + 1 FROM t",
	  "SELECT variance(n) + 1, count(n), sum((n)::numeric), sum((n)::numeric * (n)::numeric), "
	  "variance(n) FILTER (WHERE false) FROM t", 1, 5 },
	{ "SELECT g, count(*) FROM t GROUP BY g HAVING g > 1 AND count(*) > 2",
	  "SELECT g, count(*), g, count(*) FROM t GROUP BY g HAVING (g > 1 AND count(*) > 2) OR "
	  "true ", 2, 4 },
	{ "SELECT g, g * count(*) FROM t GROUP BY 1",
	  "SELECT g, g * count(*), count(*), g FROM t GROUP BY 1", 2, 4 },
	{ "SELECT lower(s), max(x) FROM t GROUP BY lower(s) HAVING lower(s) <> 'a'",
	  "SELECT lower(s), max(x), lower(s) FROM t GROUP BY lower(s) HAVING (lower(s) <> 'a') "
	  "OR true ", 2, 3 },
	{ "SELECT g FROM t GROUP BY g ORDER BY avg(x) DESC",
	  "SELECT g, g, avg(x) FILTER (WHERE false), sum((x) * 1::int2), count(x) FROM t GROUP BY g ",
	  1, 5 },
	{ "SELECT xmlagg(x), jsonb_object_agg(k, v) FROM t",
	  "SELECT xmlagg(x) FILTER (WHERE false), jsonb_object_agg(k, v) FILTER (WHERE false), "
	  "xmlagg(x), jsonb_object_agg(k, v) FROM t", 2, 4 },
	{ "SELECT t.id, count(*) FROM t GROUP BY t.id HAVING t.name <> 'x'",
	  "SELECT t.id, count(*), t.id, t.name FROM t GROUP BY t.id HAVING (t.name <> 'x') OR "
	  "true ", 2, 4 },
	{ "SELECT x + count(*) FROM t", "SELECT x + count(*), x, count(*) FROM t", 1, 3 },
	{ "SELECT x % 3 AS k, count(*) FROM t GROUP BY k",
	  "SELECT x % 3 AS k, count(*), x % 3 FROM t GROUP BY k", 2, 3 },
	{ "SELECT lower(s) AS s, count(*) FROM t GROUP BY s",
	  "SELECT lower(s) AS s, count(*), s FROM t GROUP BY s", 2, 3 },
	{ "SELECT json_agg(x ORDER BY id) FROM t",
	  "SELECT json_agg(x ORDER BY id) FILTER (WHERE false), array_agg((id) ORDER BY id), "
	  "array_agg((x) ORDER BY id) FROM t", 1, 3 },
};

START_TEST(test_agg_spec)
{
	const struct agg_spec_case *c = &agg_spec_cases[_i];
	struct plan_merge s;

	mfx_spec_of(c->sql, &s);
	ck_assert_str_eq(s.shard_sql, c->shard_sql);
	ck_assert_uint_eq(s.nvisible, c->nvisible);
	ck_assert_uint_eq(s.ncols, c->ncols);
	ck_assert(s.grouped);
}
END_TEST

START_TEST(test_agg_spec_finals)
{
	struct plan_merge s;

	mfx_spec_of("SELECT count(DISTINCT x), string_agg(DISTINCT s, $1 ORDER BY s DESC NULLS "
		    "FIRST), string_agg(s, ', ' ORDER BY id) FROM t", &s);
	ck_assert_uint_eq(s.naggs, 3);
	ck_assert_int_eq(s.aggs[0].kind, PLAN_AGG_DISTINCT);
	ck_assert_str_eq(s.aggs[0].final, "count(DISTINCT e)");
	ck_assert_str_eq(s.aggs[1].final, "string_agg(DISTINCT e, $1 ORDER BY e DESC NULLS FIRST)");
	ck_assert_uint_eq(s.aggs[0].carrier, 0);
	ck_assert_uint_eq(s.aggs[2].nkeys, 1);
	ck_assert_str_eq(s.aggs[2].final, "string_agg(v, ', ' ORDER BY k1)");
	mfx_spec_of("SELECT stddev(x), var_pop(x), stddev_pop(x), variance(x) FROM t", &s);
	ck_assert(s.aggs[0].sample && s.aggs[0].root);
	ck_assert(!s.aggs[1].sample && !s.aggs[1].root);
	ck_assert(!s.aggs[2].sample && s.aggs[2].root);
	ck_assert(s.aggs[3].sample && !s.aggs[3].root);
	mfx_spec_of("SELECT g, max(x) - g FROM t GROUP BY g HAVING g > 1", &s);
	ck_assert_int_eq(s.cols[1].kind, PLAN_MCOL_EXPR);
	ck_assert_uint_eq(s.cols[1].expr.agg[1], PLAN_MERGE_HOLE_COL | 3);	/* the group key */
	ck_assert_uint_eq(s.having.agg[0], PLAN_MERGE_HOLE_COL | 3);
}
END_TEST

struct agg_refuse_case {
	const char *sql, *sqlstate, *message, *detail;
};

static const struct agg_refuse_case agg_refuse_cases[] = {
	{ "SELECT corr(a, b) FROM t", "0A000", "aggregate corr() cannot be combined across shards",
	  "Its double precision transition state cannot be read from the shards, and combining "
	  "rounded results would not give what one server gives." },
	{ "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY a) FROM t", "0A000",
	  "aggregate percentile_cont() cannot be combined across shards",
	  "It needs every value of a group in one place." },
	{ "SELECT sum(a ORDER BY b) FROM t", "0A000",
	  "ORDER BY inside sum() is not merged across shards", "" },
	{ "SELECT json_object_agg(DISTINCT a, b) FROM t", "0A000",
	  "json_object_agg() with DISTINCT is not merged across shards", "" },
	{ "SELECT string_agg(DISTINCT a, b) FROM t", "0A000",
	  "string_agg() across shards needs constant arguments after the first", "" },
	{ "SELECT array_agg(DISTINCT a ORDER BY a USING <) FROM t", "0A000",
	  "ORDER BY ... USING inside an aggregate is not merged across shards", "" },
	{ "SELECT a % 2, count(*) FROM t GROUP BY a % 2 HAVING a > 1", "0A000",
	  "HAVING conditions over columns that are not GROUP BY items are not merged across "
	  "shards", "" },
	{ "SELECT mode() WITHIN GROUP (ORDER BY a) FROM t", "0A000",
	  "aggregate mode() cannot be combined across shards", "" },
	{ "SELECT my_agg(a ORDER BY b) FROM t", "NK013", NULL, NULL },
};

START_TEST(test_agg_refused)
{
	const struct agg_refuse_case *c = &agg_refuse_cases[_i];
	struct plan_merge s;
	struct nk_error err;

	nk_error_clear(&err);
	ck_assert_msg(!plan_merge_build(mfx_arena(), c->sql, &s, &err), "%s", c->sql);
	ck_assert_str_eq(err.sqlstate, c->sqlstate);
	if (c->message)
		ck_assert_str_eq(err.message, c->message);
	if (c->detail && c->detail[0])
		ck_assert_str_eq(err.detail, c->detail);
}
END_TEST

/* ---- combines and the final SQL ---- */

/* The merge of <sql> over two shards fed <rows0> / <rows1> (text, types <oids>). */
static struct merge *
two_shards(const char *sql, struct plan_merge *s, uint32_t n, const uint32_t *oids,
	   const char *const *rows0, uint32_t n0, const char *const *rows1, uint32_t n1)
{
	struct merge *m;

	mfx_spec_of(sql, s);
	ck_assert_uint_eq(s->ncols, n);
	m = mfx_new_merge(s, 2, -1, 0);
	mfx_feed_all_text(m, 0, n, oids, rows0, n0);
	mfx_feed_all_text(m, 1, n, oids, rows1, n1);
	return m;
}

static void
result(struct merge *m, struct mfx_out *o, bool hex)
{
	struct pktbuf pb;

	pktbuf_init(&pb, 1024);
	mfx_pull(m, &pb);
	memset(o, 0, sizeof(*o));
	mfx_read_out(&pb, o, hex);
	pktbuf_cleanup(&pb);
}

START_TEST(test_bits_and_json_combine)
{
	static const uint32_t oids[] = { 23, 23, 23, 114, 3802, 114, 16 };
	/* bit_and(x), bit_or(x), bit_xor(x), json_agg(s), jsonb_agg(s), json_object_agg(k, v),
	 * json_agg's flag */
	static const char *const r0[] = { "6", "6", "6", "[\"a\", \"b\"]", "[\"a\", \"b\"]",
					  "{ \"k\" : 1 }", "f" };
	static const char *const r1[] = { "3", "3", "3", "[\"c\"]", "[\"c\"]", NULL, "f" };
	struct plan_merge s;
	struct mfx_out o;
	struct merge *m = two_shards("SELECT bit_and(x), bit_or(x), bit_xor(x), json_agg(s), "
				     "jsonb_agg(s), json_object_agg(k, v) FROM t", &s, 7, oids,
				     r0, 1, r1, 1);

	ck_assert_int_eq(merge_state(m), MERGE_NEED_ROWS);	/* no final query */
	result(m, &o, false);
	ck_assert_str_eq(o.rows, "2|7|5|[\"a\", \"b\", \"c\"]|[\"a\", \"b\", \"c\"]|{ \"k\" : 1 }");
	merge_free(m);
}
END_TEST

START_TEST(test_json_agg_structured)
{
	static const uint32_t oids[] = { 114, 16 };
	static const char *const r0[] = { "[[1], \n [2]]", "t" };
	static const char *const r1[] = { "[null, \n [3]]", "t" };
	static const char *const r2[] = { "[[4]]", NULL };
	struct plan_merge s;
	struct mfx_out o;
	struct merge *m = two_shards("SELECT json_agg(a) FROM t", &s, 2, oids, r0, 1, r1, 1);

	result(m, &o, false);	/* ", \n " before a non-null element, ", " before null */
	ck_assert_str_eq(o.rows, "[[1], \n [2], null, \n [3]]");
	merge_free(m);
	m = two_shards("SELECT json_agg(a) FROM t", &s, 2, oids, r2, 1, r0, 1);
	result(m, &o, false);
	ck_assert_str_eq(o.rows, "[[4], \n [1], \n [2]]");
	merge_free(m);
}
END_TEST

START_TEST(test_bits_binary)
{
	static const uint32_t oids[] = { 21, 20, 3802 };
	struct plan_merge s;
	struct mfx_out o;
	struct merge *m;

	mfx_spec_of("SELECT bit_or(a), bit_xor(b), jsonb_agg(c) FROM t", &s);
	m = mfx_new_merge(&s, 2, -1, 0);
	mfx_feed_desc(m, 0, 3, oids, 1);
	mfx_feed_desc(m, 1, 3, oids, 1);
	mfx_feed_row(m, 0, 3, (const struct mfx_val[]){ { "\x00\x05", 2 },
						       { "\0\0\0\0\0\0\0\x0f", 8 },
						       { "\x01[1]", 4 } });
	mfx_feed_row(m, 1, 3, (const struct mfx_val[]){ { "\x01\x00", 2 },
						       { "\0\0\0\0\0\0\0\x03", 8 },
						       { "\x01[2, 3]", 7 } });
	mfx_feed_done(m, 0, "SELECT 1");
	mfx_feed_done(m, 1, "SELECT 1");
	result(m, &o, true);	/* int2 stays 2 bytes; jsonb: version 1 + "[1, 2, 3]" */
	ck_assert_str_eq(o.rows, "0105|000000000000000c|015b312c20322c20335d");
	merge_free(m);
}
END_TEST

START_TEST(test_distinct_final)
{
	static const uint32_t oids[] = { 23, 20, 1007, 23 };
	/* g, sum(DISTINCT x) carrier, array_agg(DISTINCT x), g */
	static const char *const r0[] = { "1", NULL, "{1,2}", "1", "2", NULL, "{NULL}", "2" };
	static const char *const r1[] = { "1", NULL, "{2,5}", "1" };
	struct plan_merge s;
	struct merge *m = two_shards("SELECT g, sum(DISTINCT x) FROM t GROUP BY g", &s, 4, oids,
				     r0, 2, r1, 1);

	ck_assert_int_eq(merge_state(m), MERGE_NEED_FINAL);
	ck_assert_str_eq(merge_final_sql(m),
			 "SELECT ( (SELECT sum(DISTINCT e) FROM unnest(__neki_v.c2) AS e) ) FROM "
			 "(VALUES (1, '{1,2,2,5}'::int4[]), (2, '{NULL}'::int4[])) AS "
			 "__neki_v(n, c2) ORDER BY __neki_v.n");
	merge_free(m);
}
END_TEST

START_TEST(test_variance_final)
{
	static const uint32_t oids[] = { 23, 1700, 20, 1700, 1700, 23 };
	/* g, stddev(n) carrier, count, sum, sum of squares, g */
	static const char *const r0[] = { "1", NULL, "2", "1.5", "3.25", "1",
					  "2", NULL, "1", "NaN", "NaN", "2",
					  "3", NULL, "1", "4", "16", "3" };
	static const char *const r1[] = { "1", NULL, "1", "2", "4", "1",
					  "2", NULL, "1", "1", "1", "2" };
	struct plan_merge s;
	struct merge *m = two_shards("SELECT g, stddev(n) FROM t GROUP BY g", &s, 6, oids, r0, 3,
				     r1, 2);

	ck_assert_int_eq(merge_state(m), MERGE_NEED_FINAL);
	ck_assert_str_eq(merge_final_sql(m),
			 "SELECT ( (SELECT CASE WHEN v = 'NaN' THEN v WHEN s * s > v AND round(s, r) "
			 "- s = s - trunc(s, r) AND s <> trunc(s, r) THEN trunc(s, r) ELSE "
			 "round(s, r) END FROM (SELECT v, sqrt(v) AS s, scale(v) AS r FROM (SELECT "
			 "(SELECT CASE WHEN q <= 0 THEN 0::numeric ELSE q / d END FROM (SELECT "
			 "__neki_v.c2 * __neki_v.c4 - __neki_v.c3 * __neki_v.c3 AS q, __neki_v.c2 "
			 "* (__neki_v.c2 - 1) AS d) AS s) AS v) AS a) AS b) ) FROM (VALUES "
			 "(1, '3'::numeric, '7.25'::numeric, '3.5'::numeric), "
			 "(2, '2'::numeric, 'NaN'::numeric, 'NaN'::numeric), "
			 "(3, NULL::numeric, '16'::numeric, '4'::numeric)) AS __neki_v(n, c2, c4, "
			 "c3) ORDER BY __neki_v.n");
	merge_free(m);
}
END_TEST

START_TEST(test_variance_of_floats_refused)
{
	static const uint32_t oids[] = { 701, 20, 1700, 1700 };
	struct plan_merge s;
	struct merge *m;
	struct pktbuf pb;
	struct proto_column cols[4];
	struct nk_error err;

	mfx_spec_of("SELECT var_pop(f) FROM t", &s);
	m = mfx_new_merge(&s, 2, -1, 0);
	memset(cols, 0, sizeof(cols));
	for (int i = 0; i < 4; i++) {
		cols[i].name = "c";
		cols[i].type_oid = oids[i];
		cols[i].typmod = -1;
	}
	pktbuf_init(&pb, 256);
	pktbuf_write_row_description(&pb, cols, 4);
	ck_assert(!merge_feed(m, 0, 'T', pb.buf + 5, pb.len - 5, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert_str_eq(err.message, "stddev and variance of real or double precision values "
				      "cannot be combined across shards");
	pktbuf_cleanup(&pb);
	merge_free(m);
}
END_TEST

START_TEST(test_collected_partials)
{
	static const uint32_t oids[] = { 142, 1186, 142, 1186, 20 };
	/* xmlagg carrier, avg(interval) carrier, xmlagg partial, sum, count */
	static const char *const r0[] = { NULL, NULL, "<e>1</e>", "1 day", "2" };
	static const char *const r1[] = { NULL, NULL, "<e a=\"x\"/>", "-02:00:00", "1" };
	struct plan_merge s;
	struct merge *m = two_shards("SELECT xmlagg(x), avg(i) FROM t", &s, 5, oids, r0, 1, r1,
				     1);

	ck_assert_int_eq(merge_state(m), MERGE_NEED_FINAL);
	ck_assert_str_eq(merge_final_sql(m),
			 "SELECT ( (SELECT xmlagg(e) FROM unnest(__neki_v.c2) AS e) ), ( ((SELECT "
			 "sum(e) FROM unnest(__neki_v.c3) AS e) / __neki_v.c4) ) FROM (VALUES (1, "
			 "'{\"<e>1</e>\",\"<e a=\\\"x\\\"/>\"}'::xml[], "
			 "'{\"1 day\",\"-02:00:00\"}'::interval[], '3'::float8)) AS "
			 "__neki_v(n, c2, c3, c4) ORDER BY __neki_v.n");
	merge_free(m);
}
END_TEST

START_TEST(test_having_grouped_and_binary_final)
{
	static const uint32_t oids[] = { 23, 1700, 1700, 20, 23 };
	/* g, avg(x) carrier, sum, count, g (group key, text) */
	struct plan_merge s;
	struct merge *m;
	struct mfx_out o;
	struct pktbuf pb;
	int16_t fmt[4];

	mfx_spec_of("SELECT g, avg(x) FROM t GROUP BY g HAVING g <> 2", &s);
	m = mfx_new_merge(&s, 1, -1, 0);
	mfx_feed_desc(m, 0, 5, oids, 1);	/* (the hidden columns are text in neki) */
	mfx_feed_row(m, 0, 5, (const struct mfx_val[]){ { "\0\0\0\1", 4 }, { NULL, 0 },
						       { "\x00\x01\x00\x00\x00\x00\x00\x00\x00\x03",
							 10 },
						       { "\0\0\0\0\0\0\0\2", 8 },
						       { "\0\0\0\1", 4 } });
	mfx_feed_done(m, 0, "SELECT 1");
	ck_assert_int_eq(merge_state(m), MERGE_NEED_FINAL);
	ck_assert_str_eq(merge_final_sql(m), "SELECT ( (__neki_v.c2 / __neki_v.c3) ), ( "
					     "__neki_v.c4 <> 2) FROM (VALUES (1, '3'::numeric, "
					     "'2'::numeric, '1'::int4)) AS __neki_v(n, c2, c3, c4) "
					     "ORDER BY __neki_v.n");
	ck_assert_uint_eq(merge_final_formats(m, fmt, 4), 2);
	ck_assert_int_eq(fmt[0], 1);	/* the client's binary: passed on as Postgres sends it */
	ck_assert_int_eq(fmt[1], 0);	/* HAVING: read here */
	pktbuf_init(&pb, 256);
	pktbuf_write_data_row(&pb, (const struct proto_value[]){
		{ (const uint8_t *)"\x00\x02\x00\x00\x00\x00\x00\x10\x00\x01\x13\x88", 12 },
		{ (const uint8_t *)"t", 1 } }, 2);
	mfx_feed_msg(m, MERGE_FINAL, &pb);
	pktbuf_write_command_complete(&pb, "SELECT 1");
	mfx_feed_msg(m, MERGE_FINAL, &pb);
	pktbuf_cleanup(&pb);
	result(m, &o, true);
	ck_assert_str_eq(o.rows, "00000001|000200000000001000011388");
	merge_free(m);
}
END_TEST

Suite *
merge_agg_suite(void)
{
	Suite *s = suite_create("merge_agg");
	TCase *tc = tcase_create("merge_agg");

	tcase_add_checked_fixture(tc, NULL, mfx_free_arena);
	tcase_add_loop_test(tc, test_agg_spec, 0, NK_ARRAY_LEN(agg_spec_cases));
	tcase_add_test(tc, test_agg_spec_finals);
	tcase_add_loop_test(tc, test_agg_refused, 0, NK_ARRAY_LEN(agg_refuse_cases));
	tcase_add_test(tc, test_bits_and_json_combine);
	tcase_add_test(tc, test_json_agg_structured);
	tcase_add_test(tc, test_bits_binary);
	tcase_add_test(tc, test_distinct_final);
	tcase_add_test(tc, test_variance_final);
	tcase_add_test(tc, test_variance_of_floats_refused);
	tcase_add_test(tc, test_collected_partials);
	tcase_add_test(tc, test_having_grouped_and_binary_final);
	suite_add_tcase(s, tc);
	return s;
}
