/*
 * check_router.c - unit tests of the router's pure part: literal normalisation, the
 * statement model translated from libpg_query trees, and (check_router_plan.c) plans over
 * the storefront topology, rejections with their exact NK013 texts, the plan cache and the
 * EXPLAIN (NEKI_PLAN) printer. Suite "router".
 */
#include "neki/base.h"

#include <check.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "neki/parse_kinds.h"
#include "router_fixtures.h"
#include "suites.h"

/* ---- normalisation ---- */

struct norm_case {
	const char *sql;
	const char *key;
	const char *lits[4];	/* values, NULL-terminated */
};

static const struct norm_case norm_cases[] = {
	{ "SELECT * FROM orders WHERE customer_id = 42",
	  "SELECT * FROM orders WHERE customer_id = $1", { "42" } },
	{ "select *  from orders\n where customer_id=7 -- trailing\n",
	  "select * from orders where customer_id=$1", { "7" } },
	{ "SELECT a FROM t WHERE id = -5 AND b IN (1, -2.5e3)",
	  "SELECT a FROM t WHERE id = $1 AND b IN ($2, $3)", { "-5", "1", "-2.5e3" } },
	{ "SELECT a - 1, a-2 FROM t", "SELECT a - $1, a-$2 FROM t", { "1", "2" } },
	{ "SELECT * FROM t WHERE s = 'it''s' AND n = $1",
	  "SELECT * FROM t WHERE s = $2 AND n = $1", { "it's" } },
	{ "SELECT E'a\\'b', $$x 1$$, x'0f', \"col 1\" FROM t /* c 2 */ WHERE t1.a = .5",
	  "SELECT E'a\\'b', $$x 1$$, x'0f', \"col 1\" FROM t WHERE t1.a = $1", { ".5" } },
	{ "SELECT 'a'\n'b'", "SELECT 'a'\n'b'", { NULL } },
	/* every item of a BY list that starts with a number is a position, whatever comes
	 * before it; the list ends at LIMIT, HAVING, ... or the ')' of its depth */
	{ "SELECT n FROM t ORDER BY n, 1, f(2), 3 LIMIT 7",
	  "SELECT n FROM t ORDER BY n, 1, f($1), 3 LIMIT $2", { "2", "7" } },
	{ "SELECT f(x) FROM t GROUP BY f(x), 2 HAVING count(*) > 3 ORDER BY 1, x + 1",
	  "SELECT f(x) FROM t GROUP BY f(x), 2 HAVING count(*) > $1 ORDER BY 1, x + $2",
	  { "3", "1" } },
	{ "SELECT DISTINCT ON (1, f(2)) a, b FROM t WHERE c = 5 ORDER BY 1",
	  "SELECT DISTINCT ON (1, f($1)) a, b FROM t WHERE c = $2 ORDER BY 1", { "2", "5" } },
	{ "SELECT rank() OVER (ORDER BY a, 2), 3 FROM t WHERE b = 4",
	  "SELECT rank() OVER (ORDER BY a, 2), $1 FROM t WHERE b = $2", { "3", "4" } },
	/* an escape string without a backslash is the standard string of its value */
	{ "INSERT INTO t VALUES (E'u1'::text, e'it''s', E'a\\nb')",
	  "INSERT INTO t VALUES ($1::text, $2, E'a\\nb')", { "u1", "it's" } },
	{ "SELECT E'a'\n'b', E''", "SELECT E'a'\n'b', $1", { "" } },
	{ "INSERT INTO t VALUES (1, 'x'), (2, NULL)", "INSERT INTO t VALUES ($1, $2), ($3, NULL)",
	  { "1", "x", "2" } },
	{ "SELECT * FROM t WHERE a = 1::int8", "SELECT * FROM t WHERE a = $1::int8", { "1" } },
	{ "SELECT a, b FROM t WHERE c = 3 GROUP BY 1, 2 ORDER BY 2 DESC, 1 + 1 LIMIT 5",
	  "SELECT a, b FROM t WHERE c = $1 GROUP BY 1, 2 ORDER BY 2 DESC, 1 + $2 LIMIT $3",
	  { "3", "1", "5" } },
};

START_TEST(test_normalize)
{
	const struct norm_case *c = &norm_cases[_i];
	struct rarena *a = rarena_new();
	struct parse_norm n;
	uint32_t k = 0;

	ck_assert(parse_normalize(a, c->sql, &n));
	ck_assert_str_eq(n.key, c->key);
	for (; k < 4 && c->lits[k]; k++) {
		ck_assert_uint_lt(k, n.nlits);
		ck_assert_str_eq(n.lits[k].value, c->lits[k]);
	}
	ck_assert_uint_eq(n.nlits, k);
	rarena_free(a);
}
END_TEST

START_TEST(test_normalize_shares_key)
{
	struct rarena *a = rarena_new();
	struct parse_norm n1, n2;

	ck_assert(parse_normalize(a, "SELECT * FROM orders WHERE customer_id = 1", &n1));
	ck_assert(parse_normalize(a, "SELECT  * FROM orders WHERE customer_id = 2", &n2));
	ck_assert_str_eq(n1.key, n2.key);
	ck_assert_str_ne(n1.lits[0].value, n2.lits[0].value);
	rarena_free(a);
}
END_TEST

/* ---- the statement model ---- */

/* An E'' literal the normaliser made a slot is a slot of the model too (its location is the
 * one libpg_query gives the constant): a cached model then routes by each execution's value. */
START_TEST(test_model_escape_string_slot)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "SELECT * FROM public.orders o WHERE "
					     "o.customer_id = E'42'::int8");
	const struct stmt_cond *w = s->scopes[0].where;

	ck_assert_int_eq(w->kind, STMT_C_PRED);
	ck_assert_str_eq(w->pred->lhs, "customer_id");
	ck_assert_int_eq(w->pred->vals[0].kind, STMT_V_SLOT);
	ck_assert_uint_eq(w->pred->vals[0].slot, 0);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_select_where)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "SELECT * FROM public.orders o WHERE "
					     "o.customer_id = 42 AND (id IN (1, 2) OR x = ANY($1))");
	const struct stmt_cond *w, *or;

	ck_assert_int_eq(s->kind, STMT_SELECT);
	ck_assert_uint_eq(s->nrels, 1);
	ck_assert_str_eq(s->rels[0].schema, "public");
	ck_assert_str_eq(s->rels[0].name, "orders");
	ck_assert_str_eq(s->rels[0].alias, "o");
	w = s->scopes[0].where;
	ck_assert_int_eq(w->kind, STMT_C_AND);
	ck_assert_uint_eq(w->nargs, 2);
	ck_assert_int_eq(w->args[0]->kind, STMT_C_PRED);
	ck_assert_str_eq(w->args[0]->pred->qual, "o");
	ck_assert_str_eq(w->args[0]->pred->lhs, "customer_id");
	ck_assert_int_eq(w->args[0]->pred->vals[0].kind, STMT_V_SLOT);
	ck_assert_uint_eq(w->args[0]->pred->vals[0].slot, 1);	/* after $1 */
	or = w->args[1];
	ck_assert_int_eq(or->kind, STMT_C_OR);
	ck_assert_int_eq(or->args[0]->pred->op, STMT_P_IN);
	ck_assert_uint_eq(or->args[0]->pred->nvals, 2);
	ck_assert_int_eq(or->args[1]->pred->op, STMT_P_ANY_PARAM);
	ck_assert(or->args[1]->pred->vals[0].is_param);
	ck_assert_uint_eq(s->nparams, 1);
	ck_assert_uint_eq(s->nslots, 4);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_expr_lhs_and_any_array)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "SELECT * FROM products p WHERE lower(p.sku) = 'ab' "
					     "AND id = ANY(ARRAY[3, -4]) AND 7 = k");
	const struct stmt_cond *w = s->scopes[0].where;

	ck_assert_int_eq(w->kind, STMT_C_AND);
	ck_assert_str_eq(w->args[0]->pred->lhs, "lower(sku)");
	ck_assert(w->args[0]->pred->lhs_is_expr);
	ck_assert_str_eq(w->args[0]->pred->column, "sku");
	ck_assert_str_eq(w->args[0]->pred->qual, "p");
	ck_assert_int_eq(w->args[1]->pred->op, STMT_P_IN);
	ck_assert_uint_eq(w->args[1]->pred->nvals, 2);
	ck_assert_str_eq(fx.norm.lits[w->args[1]->pred->vals[1].slot].value, "-4");
	ck_assert_str_eq(w->args[2]->pred->lhs, "k");
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_joins)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "SELECT * FROM orders o JOIN order_items i ON "
					     "i.customer_id = o.customer_id AND i.order_id = o.id "
					     "LEFT JOIN countries c USING (country) WHERE o.customer_id = 5");

	ck_assert_uint_eq(s->nrels, 3);
	ck_assert_uint_eq(s->njoins, 3);
	ck_assert_str_eq(s->joins[0].lqual, "i");
	ck_assert_str_eq(s->joins[0].rcol, "customer_id");
	ck_assert(s->rels[2].outer_join);
	ck_assert(s->flags & STMT_F_OUTER_JOIN);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_insert)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(
		&fx, "INSERT INTO orders (customer_id, id, note) OVERRIDING USER VALUE VALUES "
		     "(1, DEFAULT, now()), ($1, NULL, (SELECT 1)) ON CONFLICT (id, customer_id) "
		     "DO UPDATE SET note = 'x' RETURNING id");
	const struct stmt_insert *ins = s->insert;

	ck_assert_int_eq(s->kind, STMT_INSERT);
	ck_assert(s->rels[0].is_target);
	ck_assert_uint_eq(ins->ncols, 3);
	ck_assert_str_eq(ins->cols[2], "note");
	ck_assert_uint_eq(ins->nrows, 2);
	ck_assert_int_eq(ins->rows[0].cells[0].kind, STMT_V_SLOT);
	ck_assert_int_eq(ins->rows[0].cells[1].kind, STMT_V_DEFAULT);
	ck_assert_int_eq(ins->rows[0].cells[2].kind, STMT_V_EXPR);
	ck_assert(ins->rows[1].cells[0].is_param);
	ck_assert_int_eq(ins->rows[1].cells[1].kind, STMT_V_NULL);
	ck_assert(ins->rows[1].cells[2].has_subquery);
	ck_assert_uint_eq(ins->nconflict_cols, 2);
	ck_assert_str_eq(ins->conflict_cols[1], "customer_id");
	ck_assert_uint_eq(ins->nset_cols, 1);
	ck_assert(s->flags & STMT_F_RETURNING);
	ck_assert(s->flags & STMT_F_OVERRIDING_USER);
	ck_assert(s->flags & STMT_F_ON_CONFLICT_UPDATE);
	ck_assert(s->flags & STMT_F_FROM_VALUES);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_update_delete)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, "UPDATE customers SET name = $2, email = lower($3) "
					     "WHERE id = $1");

	ck_assert_int_eq(s->kind, STMT_UPDATE);
	ck_assert_uint_eq(s->nset_cols, 2);
	ck_assert_str_eq(s->set_cols[1], "email");
	ck_assert_uint_eq(s->scopes[0].where->pred->vals[0].slot, 0);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "DELETE FROM orders USING customers c WHERE orders.customer_id = c.id "
			  "AND c.id = 3 RETURNING *");
	ck_assert_int_eq(s->kind, STMT_DELETE);
	ck_assert_uint_eq(s->nrels, 2);
	ck_assert_uint_eq(s->njoins, 1);
	ck_assert(s->flags & STMT_F_RETURNING);
	rt_fx_done(&fx);
}
END_TEST

struct flag_case {
	const char *sql;
	uint32_t flags;
};

static const struct flag_case flag_cases[] = {
	{ "SELECT count(*) FROM t GROUP BY a HAVING sum(b) > 1 ORDER BY 1 LIMIT 3 OFFSET 1",
	  STMT_F_AGG | STMT_F_GROUP | STMT_F_HAVING | STMT_F_ORDER | STMT_F_LIMIT | STMT_F_OFFSET },
	{ "SELECT DISTINCT a FROM t", STMT_F_DISTINCT },
	{ "SELECT a FROM t UNION ALL SELECT a FROM u", STMT_F_UNION },
	{ "SELECT a FROM t EXCEPT SELECT a FROM u", STMT_F_INTERSECT },
	{ "SELECT row_number() OVER () FROM t", STMT_F_WINDOW },
	{ "SELECT * FROM t WHERE a IN (SELECT b FROM u)", STMT_F_SUBQUERY },
	{ "WITH x AS (SELECT 1) SELECT * FROM x", STMT_F_CTE },
	{ "WITH x AS (DELETE FROM t RETURNING *) SELECT * FROM x",
	  STMT_F_CTE | STMT_F_WRITING_CTE },
	{ "SELECT * FROM t TABLESAMPLE system (1)", STMT_F_SAMPLE },
	{ "SELECT a FROM t GROUP BY ROLLUP (a)", STMT_F_GROUP | STMT_F_GROUPING_SETS },
	{ "SELECT * FROM t FOR UPDATE", STMT_F_LOCKING },
	{ "SELECT * FROM t ORDER BY a FETCH FIRST 3 ROWS WITH TIES",
	  STMT_F_ORDER | STMT_F_LIMIT | STMT_F_WITH_TIES },
	{ "SELECT * INTO x FROM t", STMT_F_INTO },
	{ "SELECT lo_create(0)", STMT_F_LO_CALL },
	{ "UPDATE t SET a = 1 WHERE CURRENT OF c", STMT_F_CURRENT_OF },
};

START_TEST(test_model_flags)
{
	struct rt_fx fx;
	const struct stmt *s = rt_parse(&fx, flag_cases[_i].sql);

	ck_assert_msg(s->flags == flag_cases[_i].flags, "%s: flags %x, want %x",
		      flag_cases[_i].sql, s->flags, flag_cases[_i].flags);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_model_utility)
{
	struct rt_fx fx;
	const struct stmt *s;

	s = rt_parse(&fx, "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY, NOT DEFERRABLE");
	ck_assert_int_eq(s->kind, STMT_TX);
	ck_assert_int_eq(s->tx->kind, STMT_TX_BEGIN);
	ck_assert_int_eq(s->tx->isolation, STMT_ISO_REPEATABLE_READ);
	ck_assert_int_eq(s->tx->read_only, 1);
	ck_assert_int_eq(s->tx->deferrable, 0);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "COMMIT AND CHAIN");
	ck_assert(s->tx->chain);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "SET LOCAL search_path = a, 'b'");
	ck_assert_int_eq(s->kind, STMT_SET);
	ck_assert(s->set->is_local);
	ck_assert_str_eq(s->set->value, "a, b");
	rt_fx_done(&fx);
	s = rt_parse(&fx, "SET __neki.fanout = 'single'");
	ck_assert(s->set->is_neki);
	ck_assert_str_eq(s->set->name, "__neki.fanout");
	ck_assert_str_eq(s->set->value, "single");
	rt_fx_done(&fx);
	s = rt_parse(&fx, "RESET ALL");
	ck_assert_int_eq(s->kind, STMT_RESET);
	ck_assert_int_eq(s->set->kind, STMT_SET_RESET_ALL);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "SHOW __neki.shard");
	ck_assert_int_eq(s->kind, STMT_SHOW);
	ck_assert(s->set->is_neki);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "COPY orders (customer_id, id) FROM STDIN (FORMAT CSV, HEADER)");
	ck_assert_int_eq(s->kind, STMT_COPY);
	ck_assert(s->copy->is_from);
	ck_assert_str_eq(s->copy->format, "csv");
	ck_assert(s->copy->header);
	ck_assert_uint_eq(s->copy->ncols, 2);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) SELECT * FROM orders");
	ck_assert_int_eq(s->kind, STMT_EXPLAIN);
	ck_assert(s->explain->neki_plan && s->explain->analyze && s->explain->format_text);
	ck_assert_int_eq(s->explain->inner->kind, STMT_SELECT);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "VACUUM ANALYZE orders");
	ck_assert_int_eq(s->kind, STMT_MAINT);
	rt_fx_done(&fx);
	s = rt_parse(&fx, "CREATE INDEX ON orders (created_at)");
	ck_assert_int_eq(s->kind, STMT_DDL);
	ck_assert_int_eq(s->reject, 0);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_parse_error)
{
	struct rarena *a = rarena_new();
	struct nk_error err;

	nk_error_clear(&err);
	ck_assert_ptr_null(parse_statement(a, "SELEC 1", NULL, &err));
	ck_assert_str_eq(err.sqlstate, "42601");
	ck_assert_str_eq(err.message, "syntax error at or near \"SELEC\"");
	rarena_free(a);
}
END_TEST

/* The __neki store guard (parse_guard.c): refused spellings, and what passes. */
static const struct guard_case {
	const char *sql;
	const char *neki_fn;	/* NULL: refused with 42501; "": passes, no call; else the call */
} guard_cases[] = {
	{ "SELECT * FROM __neki.routers", NULL },
	{ "SELECT * FROM U&\"\\005f_neki\".routers", NULL },
	{ "SELECT * FROM \"__neki\".\"routers\"", NULL },
	{ "WITH x AS (DELETE FROM __neki.data_topology_log RETURNING 1) SELECT 1", NULL },
	{ "SELECT NULL::__neki.routers", NULL },
	{ "DROP SCHEMA __neki", NULL },
	{ "ALTER ROLE r SET search_path = '__neki'", NULL },
	{ "SELECT pg_catalog.set_config('search_path', 'x, __NEKI', true)", NULL },
	{ "DO $$BEGIN PERFORM 1 FROM __neki.routers; END$$", NULL },
	{ "SELECT '__neki.routers'", "" },
	{ "SELECT 1 AS __neki_a FROM t __neki_b", "" },
	{ "SET search_path = public, __neki_x", "" },
	{ "SELECT count(*) FROM __neki.list_shards() WHERE has_writable_primary", "list_shards" },
	{ "SELECT __neki.nope(1)", "nope" },
};

START_TEST(test_guard)
{
	const struct guard_case *c = &guard_cases[_i];
	struct rarena *a = rarena_new();
	struct nk_error err;
	const struct stmt *st;

	nk_error_clear(&err);
	st = parse_statement(a, c->sql, NULL, &err);
	if (c->neki_fn == NULL) {
		ck_assert_msg(st == NULL, "%s", c->sql);
		ck_assert_str_eq(err.sqlstate, "42501");
		ck_assert_str_eq(err.message, "permission denied for schema __neki");
	} else {
		ck_assert_msg(st != NULL, "%s: %s", c->sql, err.message);
		ck_assert_str_eq(st->neki_fn ? st->neki_fn : "", c->neki_fn);
	}
	rarena_free(a);
}
END_TEST

START_TEST(test_split)
{
	static const char sql[] = "SELECT ';' ; /* ; */ INSERT INTO t VALUES ($$;$$);;COPY t FROM STDIN";
	struct rarena *a = rarena_new();
	struct parse_span *v;
	struct nk_error err;
	uint32_t n;

	ck_assert(parse_split(a, sql, &v, &n, &err));
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(v[0].len, strlen("SELECT ';'"));
	ck_assert_int_eq(strncmp(sql + v[0].start, "SELECT ';'", v[0].len), 0);
	ck_assert_uint_eq(v[1].len, strlen("/* ; */ INSERT INTO t VALUES ($$;$$)"));
	ck_assert_int_eq(strncmp(sql + v[1].start, "/* ; */ INSERT INTO t VALUES ($$;$$)",
				 v[1].len), 0);
	ck_assert_uint_eq(v[2].len, strlen("COPY t FROM STDIN"));
	ck_assert_int_eq(strncmp(sql + v[2].start, "COPY t FROM STDIN", v[2].len), 0);
	rarena_free(a);
}
END_TEST

/* Semicolons inside a statement's body stay in it: the grammar splits such a text. */
START_TEST(test_split_bodies)
{
	static const char fn[] = "CREATE FUNCTION f() RETURNS int LANGUAGE sql "
				 "BEGIN ATOMIC SELECT 1; SELECT 2; END";
	static const char rule[] = "CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b)";
	char sql[256];
	struct rarena *a = rarena_new();
	struct parse_span *v;
	struct nk_error err;
	uint32_t n;

	snprintf(sql, sizeof(sql), "%s; %s;SELECT 3", fn, rule);
	ck_assert(parse_split(a, sql, &v, &n, &err));
	ck_assert_uint_eq(n, 3);
	ck_assert_uint_eq(v[0].len, strlen(fn));
	ck_assert_int_eq(strncmp(sql + v[0].start, fn, v[0].len), 0);
	ck_assert_uint_eq(v[1].len, strlen(rule));
	ck_assert_int_eq(strncmp(sql + v[1].start, rule, v[1].len), 0);
	ck_assert_int_eq(strncmp(sql + v[2].start, "SELECT 3", v[2].len), 0);
	ck_assert(parse_split(a, fn, &v, &n, &err));
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(v[0].len, strlen(fn));
	rarena_free(a);
}
END_TEST

/*
 * A text of several statements is parsed whole (as Postgres, before any of it runs): a
 * syntax error anywhere fails the split, its position counted in characters of the whole
 * text; so does text the scanner split cannot end as a statement.
 */
static const struct {
	const char *sql;
	const char *message;	/* NULL: splits without error */
	const char *where;	/* the error's position */
} split_error_cases[] = {
	{ "SELECT (1", "syntax error at end of input", "10" },
	{ "SELECT 1; SELECT (1", "syntax error at end of input", "20" },
	{ "SELECT (1; SELECT 2", "syntax error at or near \";\"", "10" },
	{ "SELECT 1; SELEC 2; SELECT 3", "syntax error at or near \"SELEC\"", "11" },
	{ "SELEC 1; SELECT 2", "syntax error at or near \"SELEC\"", "1" },
	{ "SELECT 1; SELECT 2 FORM t", "syntax error at or near \"t\"", "25" },
	{ "SELECT '\xc3\xa9'; SELEC 2", "syntax error at or near \"SELEC\"", "13" },
	{ "SELECT 1; -- done\n /* a /* nested */ one */ ;", NULL, "" },
	{ "  ;; ", NULL, "" },
	{ "SELECT 1; SELECT 2", NULL, "" },
};

START_TEST(test_split_errors)
{
	struct rarena *a = rarena_new();
	struct parse_span *v;
	struct nk_error err;
	uint32_t n;
	bool ok;

	nk_error_clear(&err);
	ok = parse_split(a, split_error_cases[_i].sql, &v, &n, &err);
	if (split_error_cases[_i].message) {
		ck_assert(!ok);
		ck_assert_str_eq(err.sqlstate, "42601");
		ck_assert_str_eq(err.message, split_error_cases[_i].message);
		ck_assert_str_eq(err.where, split_error_cases[_i].where);
	} else {
		ck_assert(ok);
		ck_assert_uint_le(n, 2);
	}
	rarena_free(a);
}
END_TEST

Suite *
router_suite(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("parse");

	tcase_add_loop_test(tc, test_normalize, 0, NK_ARRAY_LEN(norm_cases));
	tcase_add_test(tc, test_normalize_shares_key);
	tcase_add_test(tc, test_model_select_where);
	tcase_add_test(tc, test_model_escape_string_slot);
	tcase_add_test(tc, test_model_expr_lhs_and_any_array);
	tcase_add_test(tc, test_model_joins);
	tcase_add_test(tc, test_model_insert);
	tcase_add_test(tc, test_model_update_delete);
	tcase_add_loop_test(tc, test_model_flags, 0, NK_ARRAY_LEN(flag_cases));
	tcase_add_test(tc, test_model_utility);
	tcase_add_test(tc, test_split_bodies);
	tcase_add_test(tc, test_parse_error);
	tcase_add_loop_test(tc, test_guard, 0, NK_ARRAY_LEN(guard_cases));
	tcase_add_test(tc, test_split);
	tcase_add_loop_test(tc, test_split_errors, 0, NK_ARRAY_LEN(split_error_cases));
	suite_add_tcase(s, tc);
	router_add_plan_tests(s);
	router_add_insel_tests(s);
	router_add_seq_tests(s);
	router_add_fn_tests(s);
	router_add_cursor_tests(s);
	router_add_dist_tests(s);
	router_add_multikey_tests(s);
	router_add_gsi_tests(s);
	return s;
}
