/*
 * check_router_insel.c - INSERT ... SELECT plans over the storefront fixture of
 * check_router_plan.c (plan_insel.c): forwarded unchanged when the rows meet their source,
 * otherwise PLAN_OP_INSERT_SELECT with the source planned as its own SELECT, the text parts
 * the executor writes its batches from, the key, the fills and the untyped entries; the
 * refusals (117, NK306) and EXPLAIN (NEKI_PLAN). Added to the "router" suite by
 * router_add_insel_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/plan_explain.h"
#include "router_fixtures.h"

#define ALL_CUST "shard-a,shard-b,shard-c,shard-d"

/* "a,b" of <p>'s shards. */
static void
shards_of(const struct plan *p, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < p->nshards; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", p->shards[i]);
}

struct insel_shape {
	const char *sql;
	enum plan_kind kind;
	enum plan_op op;
	const char *shards;	/* sorted uids */
};

static const struct insel_shape shapes[] = {
	/* the source's co-located shard key: each shard inserts its own rows */
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id FROM orders",
	  PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "INSERT INTO customers (id, name) SELECT o.customer_id, o.status FROM orders o",
	  PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "INSERT INTO order_items (customer_id, order_id) SELECT customer_id, id FROM orders "
	  "WHERE customer_id IN (1, 2)", PLAN_SHARD_SET, PLAN_OP_IN, NULL },
	/* a merge step, another group, a filled column, a reference or unsharded target: the
	 * router reads the rows */
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id FROM orders ORDER BY id "
	  "LIMIT 5", PLAN_SHARD_SET, PLAN_OP_INSERT_SELECT, ALL_CUST },
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, count(*) FROM orders GROUP "
	  "BY customer_id", PLAN_SHARD_SET, PLAN_OP_INSERT_SELECT, ALL_CUST },
	{ "INSERT INTO products (sku, name) SELECT status, status FROM orders", PLAN_SHARD_SET,
	  PLAN_OP_INSERT_SELECT, ALL_CUST },
	{ "INSERT INTO orders (customer_id) SELECT customer_id FROM orders WHERE customer_id = 1",
	  PLAN_SHARD_SET, PLAN_OP_INSERT_SELECT, ALL_CUST },
	{ "INSERT INTO countries (code, name) SELECT status, status FROM orders", PLAN_SHARD_SET,
	  PLAN_OP_INSERT_SELECT, ALL_CUST },
	{ "INSERT INTO countries (code, name, id) SELECT code, code, 1 FROM currencies",
	  PLAN_EVERY_COPY, PLAN_OP_REFERENCE_WRITE, ALL_CUST },
	{ "INSERT INTO countries (code, name, id) SELECT msg, msg, 1 FROM audit_log",
	  PLAN_SHARD_SET, PLAN_OP_INSERT_SELECT, "auth," ALL_CUST },
	{ "INSERT INTO audit_log (msg) SELECT 'x'", PLAN_SINGLE, PLAN_OP_UNSHARDED, "auth" },
	{ "INSERT INTO audit_log (msg) SELECT status FROM orders", PLAN_SHARD_SET,
	  PLAN_OP_INSERT_SELECT, "auth," ALL_CUST },
};

START_TEST(test_insel_shapes)
{
	const struct insel_shape *c = &shapes[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char got[256], want[256];

	ck_assert_msg(rt_plan_storefront(&fx, c->sql, NULL, NULL, 0, &p, &err), "%s: %s", c->sql,
		      err.message);
	ck_assert_msg(p.kind == c->kind && p.op == c->op, "%s: kind %s op %s", c->sql,
		      plan_kind_str(p.kind), plan_op_str(p.op));
	shards_of(&p, got, sizeof(got));
	if (c->shards == NULL)
		snprintf(want, sizeof(want), "%s", got);	/* (two keys: checked below) */
	else
		snprintf(want, sizeof(want), "%s", c->shards);
	ck_assert_msg(strcmp(got, want) == 0, "%s: shards %s, want %s", c->sql, got, want);
	ck_assert(p.op != PLAN_OP_INSERT_SELECT || p.insel != NULL);
	rt_fx_done(&fx);
}
END_TEST

/* A constant key: forwarded when it routes to the source's one shard. */
START_TEST(test_insel_constant_key)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char sql[160];

	for (int k = 1; k <= 9; k++) {
		char key[8];
		bool same;

		snprintf(key, sizeof(key), "c:%d", k);
		same = strcmp(rt_storefront_shard(key), rt_storefront_shard("c:5")) == 0;
		snprintf(sql, sizeof(sql), "INSERT INTO orders (customer_id, id) SELECT %d, id "
			 "FROM orders WHERE customer_id = 5", k);
		ck_assert_msg(rt_plan_storefront(&fx, sql, NULL, NULL, 0, &p, &err), "%s", sql);
		ck_assert_int_eq(p.op, same ? PLAN_OP_EQUAL_UNIQUE : PLAN_OP_INSERT_SELECT);
		ck_assert_int_eq(p.nshards, same ? 1 : 4);
		rt_fx_done(&fx);
	}
}
END_TEST

/* The parts the executor writes its batches from, and the source planned on its own. */
START_TEST(test_insel_parts)
{
	static const char sql[] = "INSERT INTO orders AS o (customer_id, id, status, note) "
				  "SELECT customer_id + 1, 7, 'x', NULL FROM orders WHERE status = "
				  "'new' ON CONFLICT (customer_id, id) DO NOTHING RETURNING o.id;";
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const struct plan_insel *is;

	ck_assert_msg(rt_plan_storefront(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_int_eq(p.op, PLAN_OP_INSERT_SELECT);
	is = p.insel;
	ck_assert_int_eq(is->target, PLAN_INSEL_SHARDED);
	ck_assert_str_eq(is->table, "orders");
	ck_assert_str_eq(is->head, "INSERT INTO orders AS o (customer_id, id, status, note");
	ck_assert(is->cols_paren && !is->overriding && is->returning);
	ck_assert_str_eq(is->source_sql, "SELECT customer_id + 1, 7, 'x', NULL FROM orders WHERE "
			 "status = 'new'");
	ck_assert_str_eq(is->tail, "ON CONFLICT (customer_id, id) DO NOTHING RETURNING o.id");
	ck_assert_str_eq(is->tail_noret, "ON CONFLICT (customer_id, id) DO NOTHING ");
	ck_assert_uint_eq(is->ncols, 4);
	ck_assert_int_eq(is->key_col, 0);
	ck_assert_uint_eq(is->nfills, 0);
	ck_assert_uint_eq(is->ntargets, 4);
	ck_assert_uint_eq(is->nuntyped, 4);
	ck_assert(!is->untyped[0] && !is->untyped[1] && is->untyped[2] && is->untyped[3]);
	ck_assert_int_eq(is->source->kind, PLAN_SCATTER);
	ck_assert_str_eq(is->source->query, "SELECT customer_id + $1, $2, $3, NULL FROM orders "
			 "WHERE status = $4");
	ck_assert_uint_eq(p.nfills, 0);
	rt_fx_done(&fx);
}
END_TEST

/* WITH of the INSERT goes to the source; an omitted serial column is filled per row. */
START_TEST(test_insel_with_and_fills)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const struct plan_insel *is;

	ck_assert(rt_plan_storefront(&fx, "WITH w AS (SELECT 3 AS a) INSERT INTO orders "
				     "(customer_id) SELECT a FROM w", NULL, NULL, 0, &p, &err));
	ck_assert_int_eq(p.op, PLAN_OP_INSERT_SELECT);
	is = p.insel;
	ck_assert_str_eq(is->source_sql, "WITH w AS (SELECT 3 AS a) SELECT a FROM w");
	ck_assert_str_eq(is->head, "INSERT INTO orders (customer_id");
	ck_assert_str_eq(is->tail, "");
	ck_assert(!is->returning);
	ck_assert_uint_eq(is->nfills, 1);
	ck_assert_str_eq(is->fills[0].column, "id");
	ck_assert_str_eq(is->fills[0].seq_name, "orders_id_seq");
	ck_assert(!is->fills[0].is_key);
	ck_assert_int_eq(is->key_col, 0);
	ck_assert_uint_eq(p.nfills, 0);		/* (taken per source row by the executor) */
	rt_fx_done(&fx);
	/* positional: the table's columns for the executor; the identity key may be filled */
	ck_assert(rt_plan_storefront(&fx, "INSERT INTO customers SELECT customer_id, status FROM "
				     "orders", NULL, NULL, 0, &p, &err));
	ck_assert_int_eq(p.op, PLAN_OP_INSERT_SELECT);
	is = p.insel;
	ck_assert_uint_eq(is->ncols, 0);
	ck_assert_uint_eq(is->ntable_cols, 3);
	ck_assert_str_eq(is->table_cols[2], "email");
	ck_assert_int_eq(is->key_col, 0);
	ck_assert_uint_eq(is->key_attnum, 1);
	ck_assert_uint_eq(is->nfills, 1);
	ck_assert(is->fills[0].is_key);
	ck_assert_uint_eq(is->fills[0].attnum, 1);
	ck_assert(!is->cols_paren);
	ck_assert_str_eq(is->head, "INSERT INTO customers");
	rt_fx_done(&fx);
	/* the key filled: the rows route by their new values */
	ck_assert(rt_plan_storefront(&fx, "INSERT INTO customers (name) OVERRIDING SYSTEM VALUE "
				     "SELECT status FROM orders", NULL, NULL, 0, &p, &err));
	is = p.insel;
	ck_assert_int_eq(is->key_col, -1);
	ck_assert(is->overriding && is->fills[0].is_key);
	ck_assert_str_eq(is->source_sql, "SELECT status FROM orders");
	rt_fx_done(&fx);
	/* a comment ending the source stays out of it (the merge appends to the text) */
	ck_assert(rt_plan_storefront(&fx, "INSERT INTO products (sku) SELECT status FROM orders "
				     "ORDER BY 1 -- last\n RETURNING sku", NULL, NULL, 0, &p,
				     &err));
	ck_assert_str_eq(p.insel->source_sql, "SELECT status FROM orders ORDER BY 1");
	ck_assert_str_eq(p.insel->tail, "RETURNING sku");
	rt_fx_done(&fx);
	/* a reference target: every copy, the first copy's RETURNING */
	ck_assert(rt_plan_storefront(&fx, "INSERT INTO countries (code, name) SELECT status, "
				     "status FROM orders RETURNING id", NULL, NULL, 0, &p, &err));
	is = p.insel;
	ck_assert_int_eq(is->target, PLAN_INSEL_REFERENCE);
	ck_assert_uint_eq(is->ntargets, 4);
	ck_assert_uint_eq(is->nfills, 1);
	ck_assert_str_eq(is->tail, "RETURNING id");
	ck_assert_str_eq(is->tail_noret, "");
	ck_assert(p.group == NULL);
	rt_fx_done(&fx);
}
END_TEST

struct insel_reject {
	const char *sql;
	const char *sqlstate, *message;
};

static const struct insel_reject rejects[] = {
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id FROM orders ON CONFLICT "
	  "(customer_id, id) DO UPDATE SET status = 'x'", "NK013",
	  "not implemented: [117] This INSERT SELECT shape is unavailable." },
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id FROM orders WHERE "
	  "customer_id = 1 ON CONFLICT (customer_id, id) DO UPDATE SET status = 'x'", "NK013",
	  "not implemented: [117] This INSERT SELECT shape is unavailable." },
	{ "WITH d AS (DELETE FROM audit_log RETURNING msg) INSERT INTO products (sku) SELECT msg "
	  "FROM d", "NK013", "not implemented: [117] This INSERT SELECT shape is unavailable." },
	{ "WITH a AS (SELECT 1) INSERT INTO products (sku) WITH b AS (SELECT 2) SELECT 'x'",
	  "NK013", "not implemented: [117] This INSERT SELECT shape is unavailable." },
	{ "INSERT INTO orders (id) SELECT id FROM orders", "NK306",
	  "shard-key column \"customer_id\" of primary index 0 is required but missing from "
	  "INSERT" },
	{ "INSERT INTO products (sku) SELECT o.status FROM orders o JOIN customers c ON c.name = "
	  "o.status", "NK013", "not implemented: [113] This cross-shard join expression cannot "
	  "be assigned to one input." },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ORDER BY 1", "NK013",
	  "not implemented: [150] This ORDER BY expression is unavailable for VALUES." },
};

START_TEST(test_insel_rejects)
{
	const struct insel_reject *c = &rejects[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(!rt_plan_storefront(&fx, c->sql, NULL, NULL, 0, &p, &err), "%s: planned",
		      c->sql);
	ck_assert_msg(strcmp(err.sqlstate, c->sqlstate) == 0 &&
		      strcmp(err.message, c->message) == 0, "%s: %s %s", c->sql, err.sqlstate,
		      err.message);
	rt_fx_done(&fx);
}
END_TEST

/* __neki.fanout and tx_mode single see the source's and the targets' shards. */
START_TEST(test_insel_session_limits)
{
	struct plan_session sess;
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	plan_session_init(&sess, "store");
	sess.fanout = PLAN_FANOUT_MULTI;
	ck_assert(!rt_plan_storefront(&fx, "INSERT INTO products (sku) SELECT status FROM orders",
				      &sess, NULL, 0, &p, &err));
	ck_assert_str_eq(err.message,
			 "statement's fan-out (scatter) exceeds __neki.fanout (multi)");
	rt_fx_done(&fx);
	ck_assert(rt_plan_storefront(&fx, "INSERT INTO products (sku) SELECT status FROM orders "
				     "WHERE customer_id = 1", &sess, NULL, 0, &p, &err));
	ck_assert_int_eq(p.level, PLAN_FANOUT_MULTI);
	rt_fx_done(&fx);
	sess.fanout = PLAN_FANOUT_SINGLE;
	ck_assert(!rt_plan_storefront(&fx, "INSERT INTO products (sku) SELECT status FROM orders "
				      "WHERE customer_id = 1", &sess, NULL, 0, &p, &err));
	ck_assert_str_eq(err.message, "statement's fan-out (multi) exceeds __neki.fanout (single)");
	rt_fx_done(&fx);
	plan_session_init(&sess, "store");
	sess.tx_mode = PLAN_TX_SINGLE;
	sess.in_transaction = true;
	ck_assert(!rt_plan_storefront(&fx, "INSERT INTO audit_log (msg) SELECT status FROM orders "
				      "WHERE customer_id = 1", &sess, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert(strstr(err.message, "but __neki.tx_mode is single") != NULL);
	rt_fx_done(&fx);
}
END_TEST

/* EXPLAIN (NEKI_PLAN): the route of the writes, the source's own plan below it. */
START_TEST(test_insel_explain)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char *t;

	ck_assert(rt_plan_storefront(&fx, "EXPLAIN (NEKI_PLAN, FORMAT TEXT) INSERT INTO products "
				     "(sku, name) SELECT status, status FROM orders ORDER BY "
				     "status", NULL, NULL, 0, &p, &err));
	t = plan_explain(p.inner, false);
	ck_assert_str_eq(t, "Route [InsertSelect]\n"
			    "  Query: INSERT INTO products (sku, name) SELECT status, status FROM "
			    "orders ORDER BY status\n"
			    "  ShardGroup: catalog\n"
			    "  Shards: shard-c, shard-d\n"
			    "  ->  Sort [Merge]\n"
			    "        ->  Collapse\n"
			    "              ->  Route [Scatter]\n"
			    "                    Query: SELECT status, status FROM orders ORDER BY "
			    "status\n"
			    "                    ShardGroup: customer_data\n"
			    "                    Shards: shard-a, shard-b, shard-c, shard-d");
	free(t);
	t = plan_explain(p.inner, true);
	ck_assert_str_eq(t, "[{\"Plan\": {\"Node Type\": \"Route\", \"Operator\": "
			    "\"InsertSelect\", \"Query\": \"INSERT INTO products (sku, name) "
			    "SELECT status, status FROM orders ORDER BY status\", \"ShardGroup\": "
			    "\"catalog\", \"Values\": [], \"Shards\": [\"shard-c\", "
			    "\"shard-d\"], \"Plans\": [{\"Node Type\": \"Sort [Merge]\", "
			    "\"Plans\": [{\"Node Type\": \"Collapse\", \"Plans\": [{\"Node "
			    "Type\": \"Route\", \"Operator\": \"Scatter\", \"Query\": \"SELECT "
			    "status, status FROM orders ORDER BY status\", \"ShardGroup\": "
			    "\"customer_data\", \"Values\": [], \"Shards\": [\"shard-a\", "
			    "\"shard-b\", \"shard-c\", \"shard-d\"]}]}]}]}}]");
	free(t);
	rt_fx_done(&fx);
}
END_TEST

/* router_add_insel_tests: see router_fixtures.h. */
void
router_add_insel_tests(Suite *s)
{
	TCase *tc = tcase_create("insel");

	tcase_add_unchecked_fixture(tc, rt_storefront_setup, rt_storefront_teardown);
	tcase_add_loop_test(tc, test_insel_shapes, 0, NK_ARRAY_LEN(shapes));
	tcase_add_test(tc, test_insel_constant_key);
	tcase_add_test(tc, test_insel_parts);
	tcase_add_test(tc, test_insel_with_and_fills);
	tcase_add_loop_test(tc, test_insel_rejects, 0, NK_ARRAY_LEN(rejects));
	tcase_add_test(tc, test_insel_session_limits);
	tcase_add_test(tc, test_insel_explain);
	suite_add_tcase(s, tc);
}
