/*
 * check_router_gsi.c - what the planner asks of a statement on the owner of an enabled
 * global secondary index (src/router/plan_gsi.c): the storefront with its GSI orders_by_id
 * (orders by id -> customer_id, lookup sharded by id) enabled. The lookup read of a
 * scattered `id = v` / `id IN (...)`, the lookup INSERT of each VALUES row (bound values
 * in text and binary), the RETURNING list and lookup of a DELETE, the fields a COPY reads
 * for its lookup rows, the refusals, and the
 * shards plan_gsi_shards() picks from the keys a lookup returned. Added to the "router"
 * suite by router_add_gsi_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/plan_cache.h"
#include "neki/plan_gsi.h"
#include "topo_fixtures.h"
#include "router_fixtures.h"

static const struct plan_gsi *
planned(struct rt_fx *fx, const char *sql, const struct plan_param *params, uint32_t n,
	struct plan *p)
{
	struct nk_error err;

	ck_assert_msg(rt_plan_storefront(fx, sql, NULL, params, n, p, &err), "%s: %s", sql,
		      err.message);
	return p->gsi;
}

START_TEST(test_gsi_read)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "SELECT * FROM orders WHERE id = 5", NULL, 0,
					   &p);

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, PLAN_GSI_READ);
	ck_assert_str_eq(g->name, "orders_by_id");
	ck_assert_uint_eq(g->nfirst, 1);
	ck_assert_str_eq(g->first[0], "SELECT \"customer_id\" FROM \"public\".\"orders_by_id\" "
			 "WHERE \"id\" IN (E'5')");
	ck_assert_int_eq(p.kind, PLAN_SCATTER);
	ck_assert_int_eq(p.level, PLAN_FANOUT_MULTI);
	rt_fx_done(&fx);
	g = planned(&fx, "SELECT status FROM orders o WHERE o.id IN (7, -2) AND "
		    "status = 'x'", NULL, 0, &p);
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(g->first[0], "SELECT \"customer_id\" FROM \"public\".\"orders_by_id\" "
			 "WHERE \"id\" IN (E'7', E'-2')");
	rt_fx_done(&fx);
	/* a NULL in the list matches no row: the lookup reads the values */
	g = planned(&fx, "SELECT * FROM orders WHERE id IN (7, NULL, 8)", NULL, 0, &p);
	ck_assert_ptr_nonnull(g);
	ck_assert_str_eq(g->first[0], "SELECT \"customer_id\" FROM \"public\".\"orders_by_id\" "
			 "WHERE \"id\" IN (E'7', E'8')");
	rt_fx_done(&fx);
	/* the shard key routes already; a join, an OR, an expression: no lookup */
	ck_assert_ptr_null(planned(&fx, "SELECT * FROM orders WHERE customer_id = 3 AND id = 5",
				   NULL, 0, &p));
	rt_fx_done(&fx);
	ck_assert_ptr_null(planned(&fx, "SELECT * FROM orders WHERE id = 5 OR status = 'x'",
				   NULL, 0, &p));
	rt_fx_done(&fx);
	ck_assert_ptr_null(planned(&fx, "SELECT * FROM orders WHERE id + 0 = 5", NULL, 0, &p));
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_gsi_insert)
{
	static const uint8_t id_bin[8] = { 0, 0, 0, 0, 0, 0, 0x01, 0x00 };	/* 256 */
	struct plan_param params[2] = {
		{ (const uint8_t *)"9", 1, false, 0 }, { id_bin, 8, true, 20 },
	};
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "INSERT INTO orders (customer_id, id, status) "
					   "VALUES (1, 2, 'a'), (3, 4, 'it''s') RETURNING id",
					   NULL, 0, &p);

	/* with its own RETURNING: the lookup rows first, from the constants */
	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, PLAN_GSI_INSERT);
	ck_assert_uint_eq(g->nfirst, 1);
	ck_assert_str_eq(g->first[0], "INSERT INTO \"public\".\"orders_by_id\" (\"id\", "
			 "\"customer_id\") VALUES (E'2', E'1'), (E'4', E'3')");
	rt_fx_done(&fx);
	g = planned(&fx, "INSERT INTO orders (customer_id, id) VALUES ($1, $2) RETURNING 1",
		    params, 2, &p);
	ck_assert_str_eq(g->first[0], "INSERT INTO \"public\".\"orders_by_id\" (\"id\", "
			 "\"customer_id\") VALUES (E'256', E'9')");
	rt_fx_done(&fx);
	/* without: the rows written RETURNING their lookup values, then those */
	g = planned(&fx, "INSERT INTO orders AS o (customer_id) VALUES (1), (2)", NULL, 0, &p);
	ck_assert_int_eq(g->kind, PLAN_GSI_INSERT_AFTER);
	ck_assert_str_eq(g->returning, "RETURNING \"o\".\"id\", \"o\".\"customer_id\"");
	ck_assert_int_eq(g->inserted_pos, -1);
	ck_assert_uint_eq(g->nlookups, 1);
	ck_assert_uint_eq(g->lookups[0].nindexed, 1);
	rt_fx_done(&fx);
	g = planned(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT "
		    "(customer_id, id) DO UPDATE SET status = 'x'", NULL, 0, &p);
	ck_assert_str_eq(g->returning, "RETURNING \"orders\".\"id\", "
			 "\"orders\".\"customer_id\", \"orders\".xmax = 0");
	ck_assert_int_eq(g->inserted_pos, 2);
	rt_fx_done(&fx);
}
END_TEST

/* A one-row INSERT whose lookup values are all given writes its lookup row beside it: the
 * lookup INSERT over the statement's slots ($k: slot k - 1; a negative number is one
 * literal); not when a value is an expression, a default, a cast literal, several rows,
 * ON CONFLICT, a WITH query, or a trigger may change the row stored. */
START_TEST(test_gsi_insert_alongside)
{
	static const char *const not_beside[] = {
		"INSERT INTO orders (customer_id, id) VALUES (1, 2), (3, 4)",
		"INSERT INTO orders (customer_id, id) VALUES (1, 2 + 1)",
		"INSERT INTO orders (customer_id) VALUES (1)",
		"INSERT INTO orders (customer_id, id) VALUES (1, '2'::int8)",
		"INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (customer_id, id) "
		"DO NOTHING",
		"WITH x AS (SELECT 1) INSERT INTO orders (customer_id, id) VALUES (1, 2)",
	};
	struct plan_param params[2] = {
		{ (const uint8_t *)"9", 1, false, 0 }, { (const uint8_t *)"10", 2, false, 0 },
	};
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "INSERT INTO orders (customer_id, status, id) "
					   "VALUES (1, 'a', 2)", NULL, 0, &p);

	ck_assert_int_eq(g->kind, PLAN_GSI_INSERT_AFTER);
	ck_assert_uint_eq(g->nalongside, 1);
	ck_assert_str_eq(g->alongside[0], "INSERT INTO \"public\".\"orders_by_id\" (\"id\", "
			 "\"customer_id\") VALUES ($3, $1)");
	ck_assert_ptr_nonnull(g->returning);	/* (the rows still counted by it) */
	rt_fx_done(&fx);
	g = planned(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, - 2)", NULL, 0, &p);
	ck_assert_str_eq(g->alongside[0], "INSERT INTO \"public\".\"orders_by_id\" (\"id\", "
			 "\"customer_id\") VALUES ($2, $1)");
	rt_fx_done(&fx);
	g = planned(&fx, "INSERT INTO orders (customer_id, id) VALUES ($1, $2)", params, 2, &p);
	ck_assert_str_eq(g->alongside[0], "INSERT INTO \"public\".\"orders_by_id\" (\"id\", "
			 "\"customer_id\") VALUES ($2, $1)");
	rt_fx_done(&fx);
	for (size_t i = 0; i < NK_ARRAY_LEN(not_beside); i++) {
		g = planned(&fx, not_beside[i], NULL, 0, &p);
		ck_assert_ptr_nonnull(g);
		ck_assert_msg(g->nalongside == 0 && g->alongside == NULL, "%s", not_beside[i]);
		rt_fx_done(&fx);
	}
	rt_storefront_rewrites_orders(true);
	g = planned(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, 2)", NULL, 0, &p);
	rt_storefront_rewrites_orders(false);
	ck_assert_uint_eq(g->nalongside, 0);
	rt_fx_done(&fx);
}
END_TEST

/* The estimate of a non-unique GSI: unknown, used; its lookups leading to every shard, the
 * scatter planned instead, but every 16th read measures again (and so do the reads after
 * it until its lookup reports); a lookup leading to one shard of four brings it back. An
 * EXPLAIN's look counts nothing. */
START_TEST(test_gsi_cost_estimate)
{
	ck_assert(!plan_gsi_cost_scatter("db", "by_status", true));
	plan_gsi_cost_observe("db", "by_status", 4, 4);
	ck_assert(!plan_gsi_cost_scatter("other_db", "by_status", true));
	for (int i = 0; i < 40; i++)
		ck_assert(plan_gsi_cost_scatter("db", "by_status", false));
	for (int i = 1; i < 16; i++)
		ck_assert_msg(plan_gsi_cost_scatter("db", "by_status", true), "read %d", i);
	ck_assert(!plan_gsi_cost_scatter("db", "by_status", true));	/* the 16th: a probe */
	ck_assert(!plan_gsi_cost_scatter("db", "by_status", true));	/* (planned again) */
	plan_gsi_cost_observe("db", "by_status", 4, 4);
	ck_assert(plan_gsi_cost_scatter("db", "by_status", true));
	plan_gsi_cost_observe("db", "by_status", 1, 4);
	ck_assert(!plan_gsi_cost_scatter("db", "by_status", true));
	plan_gsi_cost_observe("db", "by_status", 3, 4);	/* (an average below every shard) */
	ck_assert(!plan_gsi_cost_scatter("db", "by_status", true));
}
END_TEST

/* An INSERT into the owner is kept in its statement's memo with its GSI part: the next
 * executions (other values) replay it and get what planning them afresh gives. */
START_TEST(test_gsi_insert_memo)
{
	struct plan_cache *pc = plan_cache_new(16);
	struct plan_cache_stats st;
	char sql[160];

	ck_assert_ptr_nonnull(pc);
	for (int i = 1; i <= 6; i++) {
		struct rarena *a = rarena_new();
		struct plan p;

		snprintf(sql, sizeof(sql), "INSERT INTO orders (customer_id, id, status) "
			 "VALUES (%d, %d, 'new')", i * 7, i * 100);
		rt_plan_memo_vs_fresh(pc, sql, false, a, &p);
		ck_assert_ptr_nonnull(p.gsi);
		ck_assert_int_eq(p.gsi->kind, PLAN_GSI_INSERT_AFTER);
		ck_assert_str_eq(p.gsi->returning, "RETURNING \"orders\".\"id\", "
				 "\"orders\".\"customer_id\"");
		ck_assert_str_eq(p.shards[0], rt_storefront_shard(i == 1 ? "c:7" :
				 i == 2 ? "c:14" : i == 3 ? "c:21" : i == 4 ? "c:28" :
				 i == 5 ? "c:35" : "c:42"));
		rarena_free(a);
	}
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.memo_replays, 5);
	/* a step's plan of a lookup-table INSERT is kept for steps only: a client's statement
	 * of the same text is still refused (0A000), as planning it afresh says */
	for (int i = 0; i < 3; i++) {
		struct rarena *a = rarena_new();
		struct plan p;

		snprintf(sql, sizeof(sql), "INSERT INTO orders_by_id (id, customer_id) VALUES "
			 "(%d, %d)", i + 500, i + 3);
		rt_plan_memo_vs_fresh(pc, sql, i < 2, a, &p);
		rarena_free(a);
	}
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.memo_replays, 6);
	plan_cache_free(pc);
}
END_TEST

START_TEST(test_gsi_delete)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "DELETE FROM orders o WHERE o.status = 'x'",
					   NULL, 0, &p);

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, PLAN_GSI_DELETE);
	ck_assert_str_eq(g->returning, "RETURNING \"o\".\"id\", \"o\".\"customer_id\"");
	ck_assert_uint_eq(g->nlookups, 1);
	ck_assert_str_eq(g->lookups[0].table, "\"public\".\"orders_by_id\"");
	ck_assert_uint_eq(g->lookups[0].ncols, 2);
	ck_assert_str_eq(g->lookups[0].cols[1], "\"customer_id\"");
	ck_assert_uint_eq(g->lookups[0].pos[1], 1);
	ck_assert(!g->client_returning);
	rt_fx_done(&fx);
	g = planned(&fx, "DELETE FROM orders WHERE customer_id = 4 RETURNING *", NULL, 0, &p);
	ck_assert(g->client_returning);		/* (the executor's 104) */
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_gsi_copy)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "COPY orders (status, id, customer_id) FROM STDIN",
					   NULL, 0, &p);

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, PLAN_GSI_COPY);
	ck_assert_int_eq(p.op, PLAN_OP_COPY);
	ck_assert_uint_eq(g->nlookups, 1);
	ck_assert_str_eq(g->lookups[0].table, "\"public\".\"orders_by_id\"");
	ck_assert_uint_eq(g->nfields, 2);	/* id, customer_id: fields 1 and 2 of a row */
	ck_assert_str_eq(g->fields[0].column, "id");
	ck_assert_uint_eq(g->fields[0].field, 1);
	ck_assert_str_eq(g->fields[1].column, "customer_id");
	ck_assert_uint_eq(g->fields[1].field, 2);
	ck_assert_uint_eq(g->lookups[0].pos[0], 0);
	ck_assert_uint_eq(g->lookups[0].pos[1], 1);
	ck_assert_int_eq(g->inserted_pos, -1);
	rt_fx_done(&fx);
}
END_TEST

/* A read of only the unique GSI's columns runs on its lookup table; another column, a star
 * or FOR UPDATE: the lookup first, then the owner. */
START_TEST(test_gsi_cover)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "SELECT o.customer_id FROM ONLY orders o "
					   "WHERE o.id = 5", NULL, 0, &p);

	ck_assert_ptr_nonnull(g);
	ck_assert_ptr_nonnull(g->cover);
	ck_assert_str_eq(g->cover, "SELECT o.customer_id FROM ONLY \"public\".\"orders_by_id\" "
			 "o WHERE o.id = 5");
	rt_fx_done(&fx);
	g = planned(&fx, "SELECT count(*) FROM public.orders WHERE id IN (5, 6)", NULL, 0, &p);
	ck_assert_str_eq(g->cover, "SELECT count(*) FROM \"public\".\"orders_by_id\" AS "
			 "\"orders\" WHERE id IN (5, 6)");
	rt_fx_done(&fx);
	g = planned(&fx, "SELECT customer_id, status FROM orders WHERE id = 5", NULL, 0, &p);
	ck_assert_ptr_null(g->cover);
	rt_fx_done(&fx);
	g = planned(&fx, "SELECT * FROM orders WHERE id = 5", NULL, 0, &p);
	ck_assert_ptr_null(g->cover);
	rt_fx_done(&fx);
	g = planned(&fx, "SELECT customer_id FROM orders WHERE id = 5 FOR UPDATE", NULL, 0, &p);
	ck_assert_ptr_null(g->cover);
	rt_fx_done(&fx);
}
END_TEST

/* A plain EXPLAIN may name a lookup table (it reads no row); the statement itself not. */
START_TEST(test_gsi_lookup_explained)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(rt_plan_storefront(&fx, "EXPLAIN (NEKI_PLAN) SELECT * FROM orders_by_id "
					 "WHERE id = 3", NULL, NULL, 0, &p, &err), "%s",
		      err.message);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_gsi_update)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "UPDATE orders o SET id = o.id + 1, note = 'x' "
					   "WHERE customer_id = 7;", NULL, 0, &p);

	ck_assert_ptr_nonnull(g);
	ck_assert_int_eq(g->kind, PLAN_GSI_UPDATE);
	ck_assert_uint_eq(g->nkey, 1);
	ck_assert_str_eq(g->lock, "SELECT \"o\".ctid, \"o\".\"customer_id\", \"o\".\"id\" FROM "
			 "orders o WHERE customer_id = 7 FOR UPDATE OF \"o\"");
	ck_assert_str_eq(g->update, "UPDATE orders o SET id = o.id + 1, note = 'x' FROM (VALUES ");
	ck_assert_str_eq(g->update_tail, ") AS __neki_v(__neki_ctid, __neki_k0, __neki_n) WHERE "
			 "(customer_id = 7) AND \"o\".ctid = __neki_v.__neki_ctid AND "
			 "\"o\".\"customer_id\" = __neki_v.__neki_k0\nRETURNING __neki_v.__neki_n, "
			 "\"o\".\"customer_id\", \"o\".\"id\"");
	rt_fx_done(&fx);
	/* not assigning an indexed column: no step */
	ck_assert_ptr_null(planned(&fx, "UPDATE orders SET note = 'x' WHERE id = 1", NULL, 0, &p));
	rt_fx_done(&fx);
}
END_TEST

static const struct {
	const char *sql, *sqlstate;
	int code;
	const char *text;
} refusals[] = {
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT DO NOTHING", "0A000",
	  0, "without a conflict target" },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (customer_id, id) "
	  "DO UPDATE SET id = 3", "NK013", 145, NULL },
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id FROM orders RETURNING 1",
	  "0A000", 0, "INSERT ... SELECT ... RETURNING into \"orders\"" },
	{ "INSERT INTO orders (customer_id, status) VALUES (1, 'x') RETURNING 1", "NK306", 0,
	  "column \"id\" of global secondary index \"orders_by_id\" is required" },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, NULL) RETURNING 1", "23502", 0,
	  "null value in column \"id\"" },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2 * 3) RETURNING 1", "0A000", 0,
	  "is not a constant or a parameter" },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, DEFAULT) RETURNING 1", "0A000", 0,
	  "is not a constant or a parameter" },
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id "
	  "WHEN MATCHED THEN DELETE", "NK013", 104, NULL },
	{ "UPDATE orders SET customer_id = 3 WHERE id = 1", "NK013", 145, NULL },
	{ "UPDATE orders SET id = 3 WHERE customer_id = 1 RETURNING id", "NK013", 104, NULL },
	{ "UPDATE orders o SET id = 3 FROM order_items i WHERE i.customer_id = o.customer_id",
	  "0A000", 0, "reading other tables" },
	{ "WITH w AS (SELECT 1) UPDATE orders SET id = 3", "0A000", 0, NULL },
	{ "COPY orders (customer_id, status) FROM STDIN", "NK013", 44, NULL },
	{ "EXPLAIN ANALYZE DELETE FROM orders WHERE customer_id = 1", "0A000", 0,
	  "EXPLAIN ANALYZE of a write" },
	{ "WITH d AS (DELETE FROM orders WHERE customer_id = 1 RETURNING 1) SELECT * FROM d",
	  "NK013", 104, NULL },
	{ "TRUNCATE orders", "0A000", 0, "must also truncate \"orders_by_id\"" },
	{ "TRUNCATE orders_by_id", "0A000", 0, "must also truncate \"orders\", the owner" },
	{ "SELECT * FROM orders_by_id WHERE id = 3", "0A000", 0,
	  "\"orders_by_id\" is the lookup table of global secondary index" },
	{ "DELETE FROM orders_by_id", "0A000", 0, "is the lookup table" },
	{ "SELECT * FROM orders o JOIN orders_by_id l USING (id)", "0A000", 0,
	  "is the lookup table" },
	{ "COPY orders_by_id TO STDOUT", "0A000", 0, "is the lookup table" },
	{ "EXPLAIN ANALYZE SELECT * FROM orders_by_id", "0A000", 0, "is the lookup table" },
};

START_TEST(test_gsi_refusals)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(!rt_plan_storefront(&fx, refusals[_i].sql, NULL, NULL, 0, &p, &err), "%s",
		      refusals[_i].sql);
	ck_assert_msg(strcmp(err.sqlstate, refusals[_i].sqlstate) == 0, "%s: %s %s",
		      refusals[_i].sql, err.sqlstate, err.message);
	if (refusals[_i].code)
		ck_assert_int_eq(err.code, refusals[_i].code);
	if (refusals[_i].text)
		ck_assert_msg(strstr(err.message, refusals[_i].text) != NULL, "%s: %s",
			      refusals[_i].sql, err.message);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_gsi_shards)
{
	struct rt_fx fx;
	struct plan p;
	const struct plan_gsi *g = planned(&fx, "SELECT * FROM orders WHERE id = 5", NULL, 0,
					   &p);
	const char *a = rt_storefront_shard("c:1"), *b = rt_storefront_shard("c:2");
	const char *vals[3] = { "1", NULL, "2" }, *uids[4];
	uint32_t n;

	n = plan_gsi_shards(rt_storefront_image(), g, NULL, vals, 3, p.shards, p.nshards,
			    uids, 4);
	ck_assert_uint_eq(n, strcmp(a, b) == 0 ? 1 : 2);
	ck_assert(strcmp(uids[0], a) == 0 || strcmp(uids[0], b) == 0);
	ck_assert_uint_eq(plan_gsi_shards(rt_storefront_image(), g, NULL, vals + 1, 1, p.shards,
					  p.nshards, uids, 4), 0);
	vals[1] = "not a number";	/* (a key that does not route: every shard, no guess) */
	ck_assert_uint_eq(plan_gsi_shards(rt_storefront_image(), g, NULL, vals, 3, p.shards,
					  p.nshards, uids, 4), p.nshards);
	rt_fx_done(&fx);
}
END_TEST

/* router_add_gsi_tests: see router_fixtures.h. */
void
router_add_gsi_tests(Suite *s)
{
	TCase *tc = tcase_create("gsi");

	tcase_add_unchecked_fixture(tc, rt_storefront_gsi_setup, rt_storefront_teardown);
	tcase_add_test(tc, test_gsi_read);
	tcase_add_test(tc, test_gsi_insert);
	tcase_add_test(tc, test_gsi_insert_memo);
	tcase_add_test(tc, test_gsi_insert_alongside);
	tcase_add_test(tc, test_gsi_cost_estimate);
	tcase_add_test(tc, test_gsi_delete);
	tcase_add_test(tc, test_gsi_copy);
	tcase_add_test(tc, test_gsi_lookup_explained);
	tcase_add_test(tc, test_gsi_cover);
	tcase_add_test(tc, test_gsi_update);
	tcase_add_loop_test(tc, test_gsi_refusals, 0, NK_ARRAY_LEN(refusals));
	tcase_add_test(tc, test_gsi_shards);
	suite_add_tcase(s, tc);
}
