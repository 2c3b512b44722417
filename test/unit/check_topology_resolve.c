/*
 * check_topology_resolve.c - unit tests for resolution (spec 2.3: table -> group -> index,
 * sequences), key-range lookup in a group, and shard-key expressions (compile and evaluate).
 * Registered into the "topology" suite by topology_add_resolution_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "neki/keyspace.h"
#include "neki/topology.h"
#include "topo_fixtures.h"

#define GROUP1(uid, shard) "{'uid':'" uid "','key_ranges':[{'shard_uid':'" shard "'}]}"

static const char *const order_doc =
	"{'shard_groups':[" GROUP1("auth", "auth") "," GROUP1("g_s", "shard-b") ","
	GROUP1("g_d", "shard-c") ",{'uid':'g_t','default_shard_index':'h','key_ranges':["
	"{'shard_uid':'shard-a','end':'80'},{'shard_uid':'shard-d','start':'80'}]}],"
	"'shard_indexes':{'h':{'type':'xxhash','columns':['tenant_id']},"
	"'h2':{'type':'xxhash','columns':['id']}},"
	"'authoritative_shard_group':'auth','default_shard_group':'auth',"
	"'databases':{'db1':{'default_shard_group':'g_d','schemas':{"
	"'s1':{'default_shard_group':'g_s','tables':{'t_explicit':{'shard_group':'g_t'},"
	"'t_override':{'shard_group':'g_t','shard_index':'h2'},'t_listed':{}},"
	"'reference_tables':{'countries':{'shard_groups':['g_t','g_s']}}},"
	"'s2':{'tables':{}}}},'db2':{}}}";

struct order_case {
	const char *db, *schema, *table;
	enum topo_rel_kind kind;
	const char *group;	/* NULL: none */
	const char *from;
	const char *index;	/* NULL: unsharded */
};

static const struct order_case order_cases[] = {
	{ "db1", "s1", "t_explicit", TOPO_REL_TABLE, "g_t", "table", "h" },
	{ "db1", "s1", "t_override", TOPO_REL_TABLE, "g_t", "table", "h2" },
	{ "db1", "s1", "t_listed", TOPO_REL_TABLE, "g_s", "schema", NULL },
	{ "db1", "s1", "unlisted", TOPO_REL_TABLE, "g_s", "schema", NULL },
	{ "db1", "s2", "x", TOPO_REL_TABLE, "g_d", "database", NULL },
	{ "db1", "nosuch", "x", TOPO_REL_TABLE, "g_d", "database", NULL },
	{ "db2", "public", "x", TOPO_REL_TABLE, "auth", "topology", NULL },
	{ "nodb", "public", "x", TOPO_REL_TABLE, "auth", "topology", NULL },
	{ "db1", "s1", "countries", TOPO_REL_REFERENCE, NULL, NULL, NULL },
};

START_TEST(test_table_resolution_order)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(order_doc, NULL, &f);

	ck_assert_msg(f.n == 0, "%s: %s", f.n ? f.v[0].path : "", f.n ? f.v[0].message : "");
	for (size_t i = 0; i < NK_ARRAY_LEN(order_cases); i++) {
		const struct order_case *c = &order_cases[i];
		struct topo_resolution r;

		topo_resolve_table(m, c->db, c->schema, c->table, &r);
		ck_assert_msg(r.kind == c->kind, "case %zu kind %d", i, r.kind);
		if (c->group) {
			ck_assert_str_eq(r.group->uid, c->group);
			ck_assert_str_eq(r.group_from, c->from);
		}
		if (c->index)
			ck_assert_str_eq(r.index->name, c->index);
		else
			ck_assert_ptr_null(r.index);
	}
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

/* With no topology default, a table nothing else binds is not routable. */
START_TEST(test_unroutable)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate("{'shard_groups':[" GROUP1("auth", "auth") "],"
						 "'authoritative_shard_group':'auth'}", NULL, &f);
	struct topo_resolution r;

	topo_resolve_table(m, "postgres", "public", "t", &r);
	ck_assert_int_eq(r.kind, TOPO_REL_UNROUTABLE);
	ck_assert_ptr_null(r.group);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

static const char *const seq_doc =
	"{'shard_groups':[" GROUP1("auth", "auth") "," GROUP1("one", "shard-a") ","
	GROUP1("two", "shard-b") ",{'uid':'sh','default_shard_index':'h','key_ranges':["
	"{'shard_uid':'shard-c','end':'80'},{'shard_uid':'shard-d','start':'80'}]}],"
	"'shard_indexes':{'h':{'type':'xxhash','columns':['k']}},"
	"'authoritative_shard_group':'auth','databases':{'db':{'schemas':{'s':{'tables':{"
	"'a':{'shard_group':'one'},'b':{'shard_group':'one'},'c':{'shard_group':'two'},"
	"'d':{'shard_group':'sh'}},'sequences':{'q_explicit':{'shard_group':'two'},"
	"'q_listed':{}}}}}}}";

START_TEST(test_sequence_resolution)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(seq_doc, NULL, &f);
	const struct topo_seq_owner ab[] = { { "s", "a" }, { "s", "b" } };
	const struct topo_seq_owner ac[] = { { "s", "a" }, { "s", "c" } };
	const struct topo_seq_owner d[] = { { "s", "d" } };

	ck_assert_uint_eq(f.n, 0);
	/* 1. explicit shard_group overrides everything */
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "q_explicit", ab, 2)->uid, "two");
	/* 2. unsharded owners in one single-shard group */
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "q_listed", ab, 2)->uid, "one");
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "other", ab, 1)->uid, "one");
	/* 3. owners in different groups, a sharded owner, no owner: authoritative */
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "q_listed", ac, 2)->uid, "auth");
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "q_listed", d, 1)->uid, "auth");
	ck_assert_str_eq(topo_resolve_sequence(m, "db", "s", "q_listed", NULL, 0)->uid, "auth");
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

/* Start inclusive, end exclusive, with full 16-digit bounds and short ones. */
START_TEST(test_group_range_boundaries)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(
		"{'shard_groups':[" GROUP1("auth", "auth") ",{'uid':'g','default_shard_index':'h',"
		"'key_ranges':[{'shard_uid':'shard-a','end':'4'},{'shard_uid':'shard-b','start':"
		"'40','end':'8000000000000001'},{'shard_uid':'shard-c','start':'8000000000000001',"
		"'end':'ffffffffffffffff'},{'shard_uid':'shard-d','start':'ffffffffffffffff'}]}],"
		"'shard_indexes':{'h':{'type':'xxhash','columns':['k']}},"
		"'authoritative_shard_group':'auth'}", NULL, &f);
	const struct topo_shard_group *g = topo_find_group(m, "g");

	ck_assert_msg(f.n == 0, "%s", f.n ? f.v[0].message : "");
	ck_assert_uint_eq(topo_group_find_range(g, 0), 0);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_C(0x3fffffffffffffff)), 0);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_C(0x4000000000000000)), 1);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_C(0x8000000000000000)), 1);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_C(0x8000000000000001)), 2);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_C(0xfffffffffffffffe)), 2);
	ck_assert_uint_eq(topo_group_find_range(g, UINT64_MAX), 3);
	ck_assert_uint_eq(topo_group_shard_count(g), 4);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

/* Range groups: decimal bounds, routing value v XOR 2^63. */
START_TEST(test_range_group)
{
	struct topo_findings f;
	struct topo_model *m = fx_parse_validate(
		"{'shard_groups':[" GROUP1("auth", "auth") ",{'uid':'g','default_shard_index':'r',"
		"'key_ranges':[{'shard_uid':'shard-a','end':'-100'},{'shard_uid':'shard-b','start':"
		"'-100','end':1000},{'shard_uid':'shard-c','start':'1000'}]}],"
		"'shard_indexes':{'r':{'type':'range','columns':['k']}},"
		"'authoritative_shard_group':'auth'}", NULL, &f);
	const struct topo_shard_group *g = topo_find_group(m, "g");

	ck_assert_msg(f.n == 0, "%s", f.n ? f.v[0].message : "");
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(INT64_MIN)), 0);
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(-101)), 0);
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(-100)), 1);
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(999)), 1);
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(1000)), 2);
	ck_assert_uint_eq(topo_group_find_range(g, ks_range_value(INT64_MAX)), 2);
	topo_findings_cleanup(&f);
	topo_model_free(m);
}
END_TEST

static struct ks_expr
compile(const char *text)
{
	struct ks_expr e;
	struct nk_error err;

	ck_assert_msg(ks_expr_parse(text, &e, &err), "%s: %s", text, err.message);
	return e;
}

/* Evaluate <text> over one column value given as text of <type>; returns the result. */
static bool
eval1(const char *text, enum ks_type type, const char *value, struct ks_value *out,
      struct nk_error *err)
{
	struct ks_expr e = compile(text);
	struct ks_value col;
	bool ok;

	ck_assert(ks_value_from_text(type, value, strlen(value), NULL, &col, err));
	ok = ks_expr_eval(&e, &col, out, err);
	if (ok && out->bytes && out->bytes != col.bytes) {
		/* keep results independent of col, which is cleaned up below */
		if (!out->owned && col.owned)
			ck_assert(ks_value_set_text(out, out->type, out->bytes, out->len));
	}
	ks_value_cleanup(&col);
	return ok;
}

static void
expect_text(const char *text, const char *value, const char *want)
{
	struct ks_value v;
	struct nk_error err;

	ck_assert_msg(eval1(text, KS_TYPE_TEXT, value, &v, &err), "%s", err.message);
	ck_assert_int_eq(v.type, KS_TYPE_TEXT);
	ck_assert_uint_eq(v.len, strlen(want));
	ck_assert_msg(memcmp(v.bytes, want, v.len) == 0, "%s(%s) = %.*s", text, value,
		      (int)v.len, v.bytes);
	ks_value_cleanup(&v);
}

static void
expect_int(const char *text, enum ks_type type, const char *value, enum ks_type want_type,
	   int64_t want)
{
	struct ks_value v;
	struct nk_error err;

	ck_assert_msg(eval1(text, type, value, &v, &err), "%s: %s", text, err.message);
	ck_assert_int_eq(v.type, want_type);
	ck_assert_int_eq(v.i, want);
}

static void
expect_eval_error(const char *text, enum ks_type type, const char *value, const char *sqlstate,
		  const char *message)
{
	struct ks_value v;
	struct nk_error err;

	ck_assert_msg(!eval1(text, type, value, &v, &err), "%s should fail", text);
	ck_assert_str_eq(err.sqlstate, sqlstate);
	ck_assert_str_eq(err.message, message);
}

START_TEST(test_expr_eval)
{
	struct ks_expr e = compile("customer_id");
	struct ks_value v;
	struct nk_error err;

	ck_assert(ks_expr_is_column(&e));
	ck_assert_str_eq(e.columns[0], "customer_id");
	expect_text("lower(email)", "Alice@Example.COM", "alice@example.com");
	ck_assert(eval1("lower(email)", KS_TYPE_VARCHAR, "Alice@Example.COM", &v, &err));
	ck_assert(ks_xxhash(&v) == UINT64_C(0x76eb895512bf35ff));
	ks_value_cleanup(&v);
	expect_text("lower(name)", "H\xc3\x89LLO", "h\xc3\xa9llo");
	expect_text("upper(name)", "h\xc3\xa9llo", "H\xc3\x89LLO");
	expect_text("left(sku, 3)", "abcdef", "abc");
	expect_text("left(sku, -2)", "abcdef", "abcd");
	expect_text("left(sku, -9)", "abcdef", "");
	expect_text("left(sku, 2)", "h\xc3\xa9llo", "h\xc3\xa9");
	expect_text("lower(left(sku, 4))", "ABCDEF", "abcd");
	expect_text("sku::text", "x", "x");
	expect_text("(n)::text", "x", "x");
	expect_int("tenant_id * 1000 + -5", KS_TYPE_INT4, "7", KS_TYPE_INT4, 6995);
	expect_int("tenant_id * 1000", KS_TYPE_INT8, "2147483647", KS_TYPE_INT8,
		   INT64_C(2147483647000));
	expect_int("tenant_id * 10000000000", KS_TYPE_INT2, "3", KS_TYPE_INT8,
		   INT64_C(30000000000));
	expect_int("-id", KS_TYPE_INT8, "5", KS_TYPE_INT8, -5);
	expect_int("id / 2", KS_TYPE_INT4, "-7", KS_TYPE_INT4, -3);
	expect_int("id - 0", KS_TYPE_INT4, "-7", KS_TYPE_INT4, -7);
	expect_int("id::int8", KS_TYPE_INT2, "12", KS_TYPE_INT8, 12);
	expect_int("CAST(code AS bigint)", KS_TYPE_TEXT, " 123 ", KS_TYPE_INT8, 123);
	ck_assert(eval1("id::text", KS_TYPE_INT8, "-42", &v, &err));
	ck_assert_int_eq(v.type, KS_TYPE_TEXT);
	ck_assert_uint_eq(v.len, 3);
	ck_assert(memcmp(v.bytes, "-42", 3) == 0);
	ks_value_cleanup(&v);
	expect_eval_error("tenant_id * 1000", KS_TYPE_INT4, "2147483647", "22003",
			  "integer out of range");
	expect_eval_error("id::int2", KS_TYPE_INT4, "40000", "22003", "smallint out of range");
	expect_eval_error("id / 0", KS_TYPE_INT4, "1", "22012", "division by zero");
	expect_eval_error("lower(id)", KS_TYPE_INT4, "1", "42883",
			  "function lower(int4) does not exist");
	expect_eval_error("id + 1", KS_TYPE_TEXT, "1", "42883",
			  "operator does not exist: text + int4");
}
END_TEST

START_TEST(test_expr_types_and_columns)
{
	struct ks_expr e = compile("a + b * a");
	enum ks_type types[2] = { KS_TYPE_INT2, KS_TYPE_INT8 }, t;
	struct nk_error err;

	ck_assert_uint_eq(e.ncolumns, 2);
	ck_assert(!ks_expr_is_column(&e));
	ck_assert(ks_expr_result_type(&e, types, &t, &err));
	ck_assert_int_eq(t, KS_TYPE_INT8);
	e = compile("lower(email)");
	types[0] = KS_TYPE_VARCHAR;
	ck_assert(ks_expr_result_type(&e, types, &t, &err));
	ck_assert_int_eq(t, KS_TYPE_TEXT);
	types[0] = KS_TYPE_UUID;
	ck_assert(!ks_expr_result_type(&e, types, &t, &err));
	ck_assert_str_eq(err.message, "function lower(uuid) does not exist");
	e = compile("lower(email)");
	types[0] = KS_TYPE_TEXT;
	ck_assert(ks_index_accepts(KS_INDEX_XXHASH, &e, types, &t, &err));
	ck_assert(!ks_index_accepts(KS_INDEX_MODULO, &e, types, &t, &err));
	ck_assert_str_eq(err.message, "shard index of type \"modulo\" needs an integer key, not text");
	e = compile("id * 2");
	types[0] = KS_TYPE_INT2;
	ck_assert(ks_index_accepts(KS_INDEX_RANGE, &e, types, &t, &err));
	ck_assert_int_eq(t, KS_TYPE_INT4);
	e = compile("\"Tenant Id\"");
	ck_assert_str_eq(e.columns[0], "Tenant Id");
}
END_TEST

static const char *const rejected_exprs[] = {
	"md5(x)", "t.col", "(SELECT 1)", "'abc'", "x AS y", "x; SELECT 1", "x FROM t",
	"x::numeric", "x::varchar(10)", "1.5 * x", "x || 'a'", "", "count(*)", "left(x, y)",
	"lower(DISTINCT x)", "x % 4", "now()", "public.lower(x)", "99999999999999999999 + x",
	"5", "-1 * 3", "1::text", /* no column (found by test/fuzz/fuzz_keyexpr) */
};

START_TEST(test_expr_rejected)
{
	struct ks_expr e;
	struct nk_error err;

	ck_assert_msg(!ks_expr_parse(rejected_exprs[_i], &e, &err), "'%s' accepted",
		      rejected_exprs[_i]);
	ck_assert_str_eq(err.sqlstate, "22023");
}
END_TEST

START_TEST(test_expr_messages)
{
	struct ks_expr e;
	struct nk_error err;

	ck_assert(!ks_expr_parse("t.col", &e, &err));
	ck_assert_str_eq(err.message,
			 "unsupported shard key expression \"t.col\": columns must be unqualified");
	ck_assert(!ks_expr_parse("x::numeric", &e, &err));
	ck_assert_str_eq(err.message, "unsupported shard key expression \"x::numeric\": only casts "
			 "to int2, int4, int8, text and varchar are supported");
	ck_assert(!ks_expr_parse("2 + 3", &e, &err));
	ck_assert_str_eq(err.message, "unsupported shard key expression \"2 + 3\": it names no "
			 "column");
	ck_assert(!ks_expr_parse("lower(", &e, &err));
	ck_assert(strncmp(err.message, "invalid shard key expression \"lower(\": syntax error",
			  51) == 0);
}
END_TEST

void
topology_add_resolution_tests(TCase *tc)
{
	tcase_add_test(tc, test_table_resolution_order);
	tcase_add_test(tc, test_unroutable);
	tcase_add_test(tc, test_sequence_resolution);
	tcase_add_test(tc, test_group_range_boundaries);
	tcase_add_test(tc, test_range_group);
	tcase_add_test(tc, test_expr_eval);
	tcase_add_test(tc, test_expr_types_and_columns);
	tcase_add_loop_test(tc, test_expr_rejected, 0, NK_ARRAY_LEN(rejected_exprs));
	tcase_add_test(tc, test_expr_messages);
}
