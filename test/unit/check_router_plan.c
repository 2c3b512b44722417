/*
 * check_router_plan.c - plans over the storefront topology (etc/topology-storefront.json):
 * every plan shape, each NK013 code the planner raises with its exact message, NK306 and
 * 23502, text vs binary parameters, expression shard keys, the __neki settings, the plan
 * cache and EXPLAIN (NEKI_PLAN). Added to the "router" suite by router_add_plan_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/config.h"
#include "neki/parse_kinds.h"
#include "neki/plan.h"
#include "neki/plan_gsi.h"
#include "neki/plan_settings.h"
#include "neki/plan_explain.h"
#include "neki/plan_cache.h"
#include "neki/target.h"
#include "neki/topology.h"
#include "neki/topology_image.h"
#include "router_fixtures.h"
#include "topo_fixtures.h"

/* ---- fixture: the storefront image and its catalog ---- */

static void *img;

struct fx_col {
	const char *table, *column;
	uint32_t oid;
};

static const struct fx_col fx_cols[] = {
	{ "customers", "id", 20 }, { "customers", "name", 25 }, { "customers", "email", 25 },
	{ "orders", "customer_id", 20 }, { "orders", "id", 20 }, { "orders", "status", 25 },
	{ "orders", "note", 25 }, { "order_items", "customer_id", 20 },
	{ "order_items", "order_id", 20 }, { "order_items", "qty", 23 },
	{ "orders_by_id", "id", 20 }, { "orders_by_id", "customer_id", 20 },
	{ "products", "sku", 25 }, { "products", "name", 25 }, { "countries", "code", 25 },
	{ "countries", "name", 25 }, { "countries", "id", 20 }, { "currencies", "code", 25 },
	{ "audit_log", "msg", 25 }, { "audit_log", "id", 20 },
};

static uint32_t
fx_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	(void)schema;
	for (size_t i = 0; i < NK_ARRAY_LEN(fx_cols); i++)
		if (strcmp(fx_cols[i].table, table) == 0 && strcmp(fx_cols[i].column, column) == 0)
			return fx_cols[i].oid;
	return 0;
}

static const char *
fx_column_name(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	uint32_t n = 0;

	(void)arg;
	(void)schema;
	for (size_t i = 0; i < NK_ARRAY_LEN(fx_cols); i++)
		if (strcmp(fx_cols[i].table, table) == 0 && ++n == attnum)
			return fx_cols[i].column;
	return NULL;
}

static char
fx_relkind(void *arg, const char *schema, const char *table)
{
	(void)arg;
	(void)schema;
	if (strcmp(table, "orders_id_seq") == 0)
		return 'S';
	if (strcmp(table, "order_totals") == 0 || strcmp(table, "mv_counts") == 0)
		return 'm';
	if (strncmp(table, "v_", 2) == 0)
		return 'v';
	return 'r';
}

/* Views: v_orders and mv_counts read orders, v_v_orders reads v_orders, v_countries reads
 * countries (a reference table). */
static bool
fx_view_base(void *arg, const char *schema, const char *view, uint32_t i, const char **bs,
	     const char **bn)
{
	static const char *const views[][2] = {
		{ "v_orders", "orders" }, { "mv_counts", "orders" }, { "v_v_orders", "v_orders" },
		{ "v_countries", "countries" },
	};
	uint32_t n = 0;

	(void)arg;
	for (size_t k = 0; k < NK_ARRAY_LEN(views); k++) {
		if (strcmp(views[k][0], view) == 0 && n++ == i) {
			*bs = schema;
			*bn = views[k][1];
			return true;
		}
	}
	return false;
}

/* events has an inheritance child. */
static uint32_t
fx_inh_children(void *arg, const char *schema, const char *table)
{
	(void)arg;
	(void)schema;
	return strcmp(table, "events") == 0 ? 1 : 0;
}

/* Sequences: customers.id GENERATED ALWAYS AS IDENTITY, orders.id, countries.id and
 * audit_log.id serial. */
static bool
fx_column(void *arg, const char *schema, const char *table, uint32_t attnum,
	  struct cat_column *out)
{
	static const struct {
		const char *table, *column, *seq;
		char identity;
	} seqs[] = {
		{ "customers", "id", "customers_id_seq", 'a' }, { "orders", "id", "orders_id_seq", 0 },
		{ "countries", "id", "countries_id_seq", 0 }, { "audit_log", "id", "audit_log_id_seq", 0 },
	};

	memset(out, 0, sizeof(*out));
	out->name = fx_column_name(arg, schema, table, attnum);
	if (!out->name)
		return false;
	out->type_oid = fx_column_type(arg, schema, table, out->name);
	out->typmod = -1;
	for (size_t i = 0; i < NK_ARRAY_LEN(seqs); i++) {
		if (strcmp(seqs[i].table, table) != 0 || strcmp(seqs[i].column, out->name) != 0)
			continue;
		out->identity = seqs[i].identity ? CAT_IDENT_ALWAYS : CAT_IDENT_NONE;
		out->has_default = !seqs[i].identity;
		out->seq.schema = "public";
		out->seq.name = seqs[i].seq;
	}
	return true;
}

static int64_t
fx_seq_cache(void *arg, const char *schema, const char *name)
{
	(void)arg;
	(void)schema;
	return strcmp(name, "orders_id_seq") == 0 ? 50 : 1;
}

/* The tables of fx_cols, each once. */
static bool
fx_table_at(void *arg, uint32_t i, const char **schema, const char **name)
{
	uint32_t n = 0;

	(void)arg;
	for (size_t k = 0; k < NK_ARRAY_LEN(fx_cols); k++) {
		bool seen = false;

		for (size_t j = 0; j < k; j++)
			seen = seen || strcmp(fx_cols[j].table, fx_cols[k].table) == 0;
		if (!seen && n++ == i) {
			*schema = "public";
			*name = fx_cols[k].table;
			return true;
		}
	}
	return false;
}

/* Type names: the int8 keys play an enum public.customer_key (333), text is text. */
static bool
fx_type_name(void *arg, uint32_t oid, const char **schema, const char **name)
{
	(void)arg;
	*schema = oid == 20 ? "public" : "pg_catalog";
	*name = oid == 20 ? "customer_key" : oid == 25 ? "text" : "int4";
	return oid == 20 || oid == 25 || oid == 23;
}

/* User-defined aggregates: balk, and one named sum (an extension's sum(vector)). */
static bool
fx_is_aggregate(void *arg, const char *name)
{
	(void)arg;
	return strcmp(name, "balk") == 0 || strcmp(name, "sum") == 0;
}

static bool fx_orders_rewritten;	/* rt_storefront_rewrites_orders() */

/* A BEFORE INSERT trigger on orders, when the test says so. */
static bool
fx_rewrites_insert(void *arg, const char *schema, const char *table)
{
	(void)arg;
	(void)schema;
	return fx_orders_rewritten && strcmp(table, "orders") == 0;
}

static const struct plan_catalog fx_cat = { NULL, fx_column_type, fx_column_name, fx_relkind,
					    1, fx_column, fx_seq_cache, fx_inh_children,
					    fx_view_base, fx_table_at, fx_type_name,
					    fx_is_aggregate, NULL, NULL, fx_rewrites_insert };

static void
build_image(struct topo_model *m)
{
	size_t size = topo_image_size(m);

	ck_assert_uint_gt(size, 0);
	img = aligned_alloc(8, (size + 7) & ~(size_t)7);
	ck_assert_ptr_nonnull(img);
	ck_assert_int_eq(topo_image_build(m, 1, img, size), (ssize_t)size);
	topo_model_free(m);
}

static void
setup_image(void)
{
	build_image(fx_storefront());
}

static void
teardown_image(void)
{
	free(img);
	img = NULL;
}

/* Shard of key <v>: "c:<int8>" customer_data, "p:<text>" catalog through lower(),
 * "P:<text>" catalog with <text> as the expression's value. */
static const char *
shard_of(const char *v)
{
	bool cust = v[0] == 'c', direct = v[0] == 'P';
	uint32_t g = topo_image_find_group(img, cust ? "customer_data" : "catalog");
	uint32_t i = topo_image_find_index(img, cust ? "by_customer" : "by_lower_sku");
	struct ks_value kv, low;
	struct nk_error err;
	uint32_t r;

	ck_assert(ks_value_from_text(cust ? KS_TYPE_INT8 : KS_TYPE_TEXT, v + 2, strlen(v + 2),
				     NULL, &kv, &err));
	if (!cust && !direct) {
		ck_assert(ks_expr_eval(topo_image_index_expr(img, i), &kv, &low, &err));
		ck_assert(topo_image_route(img, g, i, &low, &r, &err));
		ks_value_cleanup(&low);
	} else {
		ck_assert(topo_image_route(img, g, i, &kv, &r, &err));
	}
	ks_value_cleanup(&kv);
	return topo_image_range_shard(img, g, r);
}

/* Expected shard list: comma-separated items, each a uid or a key ("c:42", "p:abc"). */
static void
expect_shards(const char *spec, char *out, size_t cap)
{
	const char *v[16];
	size_t n = 0, len = 0;
	char buf[256], *tok, *save;

	snprintf(buf, sizeof(buf), "%s", spec);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		const char *s = strchr(tok, ':') ? shard_of(tok) : tok;
		size_t k = 0;

		while (k < n && strcmp(v[k], s) < 0)
			k++;
		if (k < n && strcmp(v[k], s) == 0)
			continue;
		memmove(v + k + 1, v + k, (n - k) * sizeof(*v));
		v[k] = s;
		n++;
	}
	out[0] = '\0';
	for (size_t k = 0; k < n; k++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", k ? "," : "", v[k]);
}

static void
got_shards(const struct plan *p, char *out, size_t cap)
{
	size_t len = 0;

	out[0] = '\0';
	for (uint32_t i = 0; i < p->nshards; i++)
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", p->shards[i]);
}

/* Plan <sql> with session <sess> (NULL: defaults), params and catalog <cat>, the tables
 * <cat> lacks reported in <u> (may be NULL); false with <err> on refusal. */
static bool
plan_sql_cat(struct rt_fx *fx, const char *sql, const struct plan_session *sess,
	     const struct plan_param *params, uint32_t nparams, const struct plan_catalog *cat,
	     struct plan_unknown *u, struct plan *out, struct nk_error *err)
{
	struct plan_session def;
	struct plan_input in;

	plan_session_init(&def, "store");
	rt_parse(fx, sql);
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = cat;
	in.sess = sess ? sess : &def;
	in.params = params;
	in.nparams = nparams;
	in.norm = &fx->norm;
	in.sql = sql;
	in.unknown = u;
	nk_error_clear(err);
	return plan_build(fx->a, fx->s, &in, out, err);
}

/* Plan <sql> with session <sess> (NULL: defaults) and params; false with <err> on refusal. */
static bool
plan_sql(struct rt_fx *fx, const char *sql, const struct plan_session *sess,
	 const struct plan_param *params, uint32_t nparams, struct plan *out,
	 struct nk_error *err)
{
	return plan_sql_cat(fx, sql, sess, params, nparams, &fx_cat, NULL, out, err);
}

/* ---- plan shapes ---- */

struct shape_case {
	const char *sql;
	enum plan_kind kind;
	enum plan_op op;
	const char *shards;	/* expect_shards() spec */
};

#define ALL_CUST "shard-a,shard-b,shard-c,shard-d"

static const struct shape_case shape_cases[] = {
	{ "SELECT * FROM orders WHERE customer_id = 42", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE,
	  "c:42" },
	{ "SELECT * FROM orders o WHERE o.customer_id = 42 AND status = 'new'", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "SELECT * FROM orders WHERE 7 = customer_id", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:7" },
	{ "SELECT * FROM orders WHERE customer_id = '42'::bigint", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "SELECT * FROM orders WHERE customer_id = -3", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE,
	  "c:-3" },
	{ "SELECT * FROM orders WHERE customer_id IN (1, 2, 3, 4, 5, 6)", PLAN_SHARD_SET,
	  PLAN_OP_IN, "c:1,c:2,c:3,c:4,c:5,c:6" },
	{ "SELECT * FROM orders WHERE customer_id = ANY(ARRAY[1, 2, 3, 4, 5, 6])",
	  PLAN_SHARD_SET, PLAN_OP_IN, "c:1,c:2,c:3,c:4,c:5,c:6" },
	{ "SELECT * FROM orders WHERE customer_id = 1 OR customer_id = 2 OR customer_id = 3 "
	  "OR customer_id = 4 OR customer_id = 5", PLAN_SHARD_SET, PLAN_OP_IN,
	  "c:1,c:2,c:3,c:4,c:5" },
	{ "SELECT * FROM orders WHERE customer_id = 1 OR status = 'x'", PLAN_SCATTER,
	  PLAN_OP_SCATTER, ALL_CUST },
	{ "SELECT * FROM orders WHERE customer_id IN (1, 2, 3, 4, 5, 6) AND customer_id = 4",
	  PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:4" },
	{ "SELECT count(*) FROM orders", PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "SELECT * FROM orders WHERE customer_id = 1.5", PLAN_SCATTER, PLAN_OP_SCATTER,
	  ALL_CUST },
	{ "SELECT * FROM orders WHERE customer_id IN (2, 1e30)", PLAN_SCATTER, PLAN_OP_SCATTER,
	  ALL_CUST },
	{ "SELECT * FROM orders WHERE NOT (customer_id = 1)", PLAN_SCATTER, PLAN_OP_SCATTER,
	  ALL_CUST },
	{ "SELECT * FROM customers WHERE id = 42", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "SELECT * FROM products WHERE sku = 'ABC-1'", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE,
	  "p:abc-1" },
	{ "SELECT * FROM products WHERE lower(sku) = 'abc-1'", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "p:abc-1" },
	{ "SELECT * FROM products WHERE lower(sku) = 'ABC-1'", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "P:ABC-1" },
	{ "SELECT * FROM products WHERE upper(sku) = 'ABC-1'", PLAN_SCATTER, PLAN_OP_SCATTER,
	  "shard-c,shard-d" },
	{ "SELECT * FROM countries", PLAN_SINGLE, PLAN_OP_REFERENCE, "shard-a" },
	{ "SELECT * FROM audit_log", PLAN_SINGLE, PLAN_OP_UNSHARDED, "auth" },
	{ "SELECT now()", PLAN_SINGLE, PLAN_OP_ANY, "auth" },
	{ "SELECT o.id, i.qty FROM orders o JOIN order_items i ON i.customer_id = o.customer_id "
	  "WHERE o.customer_id = 42", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "SELECT o.id FROM orders o JOIN order_items i ON i.customer_id = o.customer_id",
	  PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "SELECT * FROM order_items i, orders o WHERE o.customer_id = i.customer_id AND "
	  "i.customer_id IN (1, 2)", PLAN_SHARD_SET, PLAN_OP_IN, "c:1,c:2" },
	{ "SELECT * FROM orders JOIN order_items USING (customer_id) WHERE orders.customer_id = 9",
	  PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:9" },
	{ "SELECT * FROM customers c JOIN orders o ON o.customer_id = c.id WHERE c.id = 5",
	  PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:5" },
	{ "SELECT * FROM orders o JOIN countries c ON c.code = o.status WHERE o.customer_id = 8",
	  PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:8" },
	{ "SELECT * FROM orders o JOIN countries c ON c.code = o.status", PLAN_SCATTER,
	  PLAN_OP_SCATTER, ALL_CUST },
	{ "SELECT * FROM orders WHERE customer_id = 3 AND id IN (SELECT order_id FROM "
	  "order_items WHERE customer_id = 3)", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:3" },
	{ "SELECT * FROM orders o WHERE o.customer_id = 3 AND EXISTS (SELECT 1 FROM order_items i "
	  "WHERE i.customer_id = o.customer_id)", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:3" },
	{ "WITH x AS (SELECT * FROM orders WHERE customer_id = 11) SELECT * FROM x", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:11" },
	{ "UPDATE orders SET status = 'paid' WHERE customer_id = 42 AND id = 7", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "UPDATE orders SET status = 'paid' WHERE id = 7", PLAN_SCATTER, PLAN_OP_SCATTER,
	  ALL_CUST },
	{ "DELETE FROM orders WHERE customer_id IN (1, 2)", PLAN_SHARD_SET, PLAN_OP_IN,
	  "c:1,c:2" },
	{ "DELETE FROM countries WHERE code = 'fr'", PLAN_EVERY_COPY, PLAN_OP_REFERENCE_WRITE,
	  "shard-a,shard-b,shard-c,shard-d" },
	{ "UPDATE currencies SET code = 'x'", PLAN_EVERY_COPY, PLAN_OP_REFERENCE_WRITE,
	  "shard-a,shard-b,shard-c,shard-d" },
	{ "INSERT INTO countries VALUES ('fr', 'France')", PLAN_EVERY_COPY,
	  PLAN_OP_REFERENCE_WRITE, "shard-a,shard-b,shard-c,shard-d" },
	{ "INSERT INTO orders (customer_id, id) VALUES (42, 1)", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "INSERT INTO orders VALUES (42, 1, 'new')", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "INSERT INTO orders (id, customer_id) VALUES (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)",
	  PLAN_SHARD_SET, PLAN_OP_INSERT_SPLIT, "c:1,c:2,c:3,c:4,c:5" },
	{ "INSERT INTO products (sku, name) VALUES ('AbC', 'x')", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "p:abc" },
	{ "INSERT INTO orders (customer_id, id) VALUES (5, 1) ON CONFLICT (customer_id, id) DO "
	  "UPDATE SET status = 'dup'", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:5" },
	{ "INSERT INTO orders (customer_id, id) SELECT customer_id, id + 1 FROM orders WHERE "
	  "customer_id = 5", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:5" },
	{ "INSERT INTO order_items (customer_id, order_id) SELECT 5, id FROM orders WHERE "
	  "customer_id = 5", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:5" },
	{ "INSERT INTO audit_log (msg) VALUES ('x')", PLAN_SINGLE, PLAN_OP_UNSHARDED, "auth" },
	{ "UPDATE orders o SET status = 'x' FROM order_items i WHERE i.customer_id = o.customer_id "
	  "AND o.customer_id = 77", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:77" },
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id WHEN MATCHED "
	  "THEN DELETE", PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "SELECT * FROM orders o, products p WHERE o.customer_id = 1 AND lower(p.sku) = 'x'",
	  PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:1" },
	{ "SELECT * FROM orders o JOIN countries c ON true JOIN currencies u ON true WHERE "
	  "o.customer_id IN (3, 4)", PLAN_SHARD_SET, PLAN_OP_IN, "c:3,c:4" },

	{ "CREATE TABLE t (a int)", PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS,
	  "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "VACUUM ANALYZE orders", PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS,
	  "auth,shard-a,shard-b,shard-c,shard-d" },
	/* 67 only when the router would process the statement (several shards) */
	{ "UPDATE orders SET note[1:2] = '{a}' WHERE customer_id = 42", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	/* 333 only for an enum a shard key uses, and only RENAME VALUE */
	{ "ALTER TYPE mood RENAME VALUE 'a' TO 'b'", PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS,
	  "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "ALTER TYPE other.customer_key RENAME VALUE 'a' TO 'b'", PLAN_ALL_SHARDS,
	  PLAN_OP_ALL_SHARDS, "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "ALTER TYPE customer_key ADD VALUE 'c'", PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS,
	  "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "COPY customers FROM STDIN", PLAN_SCATTER, PLAN_OP_COPY, ALL_CUST },
	{ "COPY order_items (order_id, customer_id) FROM STDIN (FORMAT csv)", PLAN_SCATTER,
	  PLAN_OP_COPY, ALL_CUST },
	{ "COPY audit_log FROM STDIN", PLAN_SINGLE, PLAN_OP_UNSHARDED, "auth" },
	{ "SELECT customer_id FROM orders WHERE customer_id = 1 UNION SELECT customer_id FROM "
	  "order_items WHERE customer_id = 1", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:1" },
	{ "SELECT customer_id FROM orders WHERE customer_id = 1 UNION ALL SELECT customer_id FROM "
	  "order_items WHERE customer_id = 2", PLAN_SHARD_SET, PLAN_OP_IN, "c:1,c:2" },
	{ "SELECT id FROM orders UNION SELECT id FROM customers", PLAN_SCATTER, PLAN_OP_SCATTER,
	  ALL_CUST },
	{ "COPY orders TO STDOUT", PLAN_SCATTER, PLAN_OP_SCATTER, ALL_CUST },
	{ "COPY countries FROM STDIN", PLAN_EVERY_COPY, PLAN_OP_REFERENCE_WRITE,
	  "shard-a,shard-b,shard-c,shard-d" },
	{ "EXPLAIN SELECT * FROM orders WHERE customer_id = 42", PLAN_SINGLE,
	  PLAN_OP_EQUAL_UNIQUE, "c:42" },
	{ "SELECT * FROM v_countries", PLAN_SINGLE, PLAN_OP_REFERENCE, "shard-a" },
	/* shapes the router would process are fine when one shard does it all */
	{ "SELECT ARRAY(SELECT 1), (VALUES (2)) FROM orders WHERE customer_id = 1 ORDER BY "
	  "(SELECT 1), generate_series(1, 2)", PLAN_SINGLE, PLAN_OP_EQUAL_UNIQUE, "c:1" },
	{ "SELECT pg_advisory_xact_lock(7) FROM audit_log", PLAN_SINGLE, PLAN_OP_UNSHARDED,
	  "auth" },
	{ "SELECT pg_advisory_lock(1)", PLAN_SINGLE, PLAN_OP_FUNCTION, "auth" },
	{ "ALTER TABLE orders ALTER COLUMN note DROP EXPRESSION", PLAN_ALL_SHARDS,
	  PLAN_OP_ALL_SHARDS, "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "CREATE DATABASE d LOCALE_PROVIDER icu ICU_LOCALE 'en' LOCALE 'xx_NOPE.UTF-8'",
	  PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS, "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "CREATE DATABASE d LOCALE 'C'", PLAN_ALL_SHARDS, PLAN_OP_ALL_SHARDS,
	  "auth,shard-a,shard-b,shard-c,shard-d" },
	{ "SELECT * FROM ONLY events", PLAN_SINGLE, PLAN_OP_UNSHARDED, "auth" },
	{ "BEGIN", PLAN_ROUTER, PLAN_OP_NONE, "" },
	{ "SET work_mem = '4MB'", PLAN_ROUTER, PLAN_OP_NONE, "" },
};

START_TEST(test_plan_shapes)
{
	const struct shape_case *c = &shape_cases[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char want[256], got[256];

	ck_assert_msg(plan_sql(&fx, c->sql, NULL, NULL, 0, &p, &err), "%s: %s", c->sql,
		      err.message);
	expect_shards(c->shards, want, sizeof(want));
	got_shards(&p, got, sizeof(got));
	ck_assert_msg(p.kind == c->kind && p.op == c->op, "%s: %s/%s, want %s/%s", c->sql,
		      plan_kind_str(p.kind), plan_op_str(p.op), plan_kind_str(c->kind),
		      plan_op_str(c->op));
	ck_assert_msg(strcmp(want, got) == 0, "%s: shards %s, want %s", c->sql, got, want);
	rt_fx_done(&fx);
}
END_TEST

/* A caller's error left over from an earlier statement does not leak into this plan. */
START_TEST(test_plan_ignores_stale_error)
{
	static const char *const sqls[] = { "ALTER TABLE orders ALTER COLUMN note DROP EXPRESSION",
					    "SELECT * FROM orders WHERE customer_id = 1" };
	struct plan_session def;
	struct plan_input in;
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	plan_session_init(&def, "store");
	rt_parse(&fx, sqls[_i]);
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = &def;
	in.norm = &fx.norm;
	nk_error_set(&err, "XX000", "left over from an earlier statement");
	ck_assert_msg(plan_build(fx.a, fx.s, &in, &p, &err), "%s: %s", sqls[_i], err.message);
	ck_assert(!nk_error_is_set(&err));
	rt_fx_done(&fx);
}
END_TEST

/* ---- refusals ---- */

struct reject_case {
	const char *sql;
	const char *sqlstate;
	const char *message;
};

#define NK(code, sentence) "NK013", "not implemented: [" #code "] " sentence

static const struct reject_case reject_cases[] = {
	{ "SELECT * INTO t2 FROM orders", NK(1, "SELECT INTO statements are unavailable.") },
	{ "SELECT balk(total) FROM orders", NK(212, "User-defined aggregate transition functions "
					       "are unavailable in the evaluation engine.") },
	{ "SELECT customer_id, (SELECT balk(id)) FROM orders",
	  NK(212, "User-defined aggregate transition functions are unavailable in the "
	     "evaluation engine.") },
	{ "SELECT * FROM events", NK(21, "Reading an inheritance parent without ONLY is "
				     "unavailable.") },
	{ "DELETE FROM events WHERE true", NK(21, "Reading an inheritance parent without ONLY is "
						  "unavailable.") },
	{ "UPDATE v_orders SET status = 'x' WHERE customer_id = 1",
	  NK(122, "This view cannot be routed safely.") },
	{ "SELECT * FROM v_v_orders", NK(122, "This view cannot be routed safely.") },
	{ "SELECT * FROM mv_counts", NK(123, "This materialized view cannot be routed safely.") },
	{ "ALTER SYSTEM SET work_mem = '1MB'", NK(20, "This statement type is unavailable.") },
	{ "DO $$ BEGIN END $$", NK(20, "This statement type is unavailable.") },
	/* PL/pgSQL limits of router-side execution: the DO body's first one */
	{ "DO $$ DECLARE r record; a int[]; BEGIN FOREACH r IN ARRAY a LOOP END LOOP; END $$",
	  NK(80, "Composite FOREACH targets are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE t int[]; a int[]; BEGIN FOREACH t SLICE 1 IN ARRAY a LOOP END LOOP; "
	  "END $$", NK(81, "This FOREACH target type is unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE a int[]; BEGIN a[1:2] := ARRAY[1, 2]; END $$",
	  NK(82, "Nested and array-slice assignment targets are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE a int[]; BEGIN a[1][2] := 3; END $$",
	  NK(82, "Nested and array-slice assignment targets are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE r record; BEGIN r := ROW(1, 2); END $$",
	  NK(83, "Non-scalar assignment targets are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE r orders%ROWTYPE; BEGIN PERFORM r.id; END $$",
	  NK(84, "Record-field references in embedded SQL are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE r record; BEGIN SELECT 1 AS a INTO r; END $$",
	  NK(85, "Composite INTO targets are unavailable in PL/pgSQL.") },
	{ "DO $$ DECLARE t text; BEGIN PERFORM 1; EXCEPTION WHEN others THEN GET STACKED "
	  "DIAGNOSTICS t = MESSAGE_TEXT; END $$",
	  NK(90, "This PL/pgSQL statement is unavailable.") },
	{ "DO $$ BEGIN <<b>> BEGIN EXIT b; END; END $$",
	  NK(91, "EXIT to a block label is unavailable in PL/pgSQL.") },
	{ "DO $$ BEGIN RAISE; END $$", NK(92, "A bare RAISE is unavailable in PL/pgSQL.") },
	{ "DO $$ BEGIN RAISE NOTICE 'x' USING HINT = 'h'; END $$",
	  NK(93, "RAISE USING is unavailable in PL/pgSQL.") },
	{ "DO LANGUAGE plpgsql $$ DECLARE t int; BEGIN <<l>> LOOP EXIT l; END LOOP; "
	  "RAISE NOTICE 'x %', 1; SELECT 1 INTO t; t := 2; END $$",
	  NK(20, "This statement type is unavailable.") },
	{ "DO LANGUAGE plperl $$ die; $$", NK(20, "This statement type is unavailable.") },
	{ "COMMIT AND CHAIN", NK(22, "AND CHAIN is unavailable for this transaction command.") },
	{ "ROLLBACK AND CHAIN", NK(22, "AND CHAIN is unavailable for this transaction command.") },
	{ "PREPARE TRANSACTION 'x'", NK(23, "This transaction command is unavailable.") },
	{ "COMMIT PREPARED 'x'", NK(23, "This transaction command is unavailable.") },
	{ "BEGIN ISOLATION LEVEL SERIALIZABLE",
	  NK(24, "This transaction isolation level is unavailable.") },
	{ "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
	  NK(24, "This transaction isolation level is unavailable.") },
	{ "BEGIN READ ONLY, DEFERRABLE", NK(25, "This transaction option is unavailable.") },
	{ "SET SESSION AUTHORIZATION 'bob'", NK(27, "This SET statement variant is unavailable.") },
	{ "SET work_mem FROM CURRENT", NK(28, "SET FROM CURRENT is unavailable.") },
	{ "ALTER DATABASE store SET work_mem FROM CURRENT",
	  NK(28, "SET FROM CURRENT is unavailable.") },
	{ "SET TRANSACTION SNAPSHOT '00000003-1'", NK(29, "SET TRANSACTION SNAPSHOT is unavailable.") },
	{ "EXPLAIN (NEKI_PLAN) EXECUTE p", NK(30, "This statement cannot be analyzed with EXPLAIN "
					     "neki_plan.") },
	{ "EXPLAIN (NEKI_PLAN) WITH d AS (DELETE FROM orders RETURNING *) SELECT * FROM d",
	  NK(31, "Data-modifying CTEs cannot be analyzed with EXPLAIN neki_plan.") },
	{ "EXPLAIN (BUFFERS) SELECT 1", NK(32, "This EXPLAIN option is unavailable.") },
	{ "EXPLAIN (NEKI_PLAN, FORMAT YAML) SELECT 1", NK(33, "This EXPLAIN format is "
							     "unavailable.") },
	{ "COPY orders FROM '/tmp/x.csv'", NK(41, "File COPY is unavailable for sharded tables.") },
	{ "COPY countries TO '/tmp/x.csv'", NK(43, "File COPY is unavailable for reference "
					       "tables.") },
	{ "COPY orders TO PROGRAM 'cat'", NK(47, "COPY TO PROGRAM is unavailable.") },
	{ "COPY (SELECT 1) TO STDOUT", NK(49, "COPY of a SELECT result is unavailable.") },
	{ "COPY orders FROM STDIN WHERE id > 1", NK(50, "COPY FROM with a WHERE clause is "
						    "unavailable.") },
	{ "COPY orders FROM STDIN (ON_ERROR ignore)", NK(52, "This COPY option is unavailable for "
							     "sharded COPY.") },
	{ "COPY orders FROM STDIN (ENCODING 'LATIN1')", NK(53, "This input encoding is "
							       "unavailable for sharded COPY.") },
	{ "COPY orders FROM STDIN; SELECT 1", NK(54, "COPY is unavailable in a multi-statement "
						     "query.") },
	{ "COPY order_totals FROM STDIN", NK(56, "COPY FROM a materialized view is unavailable.") },
	{ "COPY countries (code, name) FROM STDIN", NK(46, "COPY FROM cannot evaluate this "
							  "reference-table default consistently.") },
	{ "COPY customers (name, email) FROM STDIN", NK(51, "COPY FROM cannot evaluate this column "
							    "default on the router.") },
	{ "SELECT pg_advisory_lock(1), pg_advisory_xact_lock(2)",
	  NK(61, "Mixing session and transaction advisory locks is unavailable.") },
	{ "SELECT pg_advisory_lock(id) FROM orders",
	  NK(11, "This shard index cannot route advisory locks.") },
	{ "SELECT pg_advisory_lock(1) FROM orders",
	  NK(62, "Advisory locks are unavailable in this evaluation context.") },
	{ "UPDATE orders o SET status = (SELECT name FROM countries LIMIT 1) FROM order_items i "
	  "WHERE i.customer_id = o.customer_id",
	  NK(100, "Subqueries are unavailable in this DML clause.") },
	{ "WITH a AS (SELECT code FROM countries), b AS (SELECT * FROM a) DELETE FROM orders "
	  "USING b WHERE orders.status = b.code",
	  NK(105, "This CTE execution shape is unavailable on the router.") },
	{ "SELECT date_trunc('day', now()), count(*) FROM orders GROUP BY date_trunc('day', now())",
	  NK(107, "Expression extraction is unavailable in this clause.") },
	{ "SELECT * FROM orders ORDER BY (SELECT 1)",
	  NK(108, "This subquery shape is unavailable in ORDER BY.") },
	{ "SELECT * FROM orders WHERE (id, customer_id) > ALL (SELECT 1, 2)",
	  NK(109, "This quantified-subquery shape is unavailable.") },
	{ "SELECT * FROM orders o, LATERAL (VALUES (o.id)) v",
	  NK(111, "This lateral or range-function shape is unavailable.") },
	{ "CREATE TABLE t AS SELECT pg_advisory_lock(1)",
	  NK(139, "Advisory locks are unavailable in this plan position.") },
	{ "SELECT * FROM orders ORDER BY generate_series(1, 2)",
	  NK(140, "Set-returning functions are unavailable in router-side ORDER BY.") },
	{ "INSERT INTO orders (customer_id, note[$1]) VALUES (1, 'x')",
	  NK(142, "Parameterized subscripts are unavailable in INSERT targets.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (customer_id, id) DO "
	  "NOTHING RETURNING old.id", NK(143, "OLD and NEW references are unavailable in sharded "
					   "INSERT ON CONFLICT RETURNING.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (customer_id, id) DO "
	  "NOTHING RETURNING now()", NK(144, "Router-only expressions are unavailable in sharded "
					 "INSERT ON CONFLICT RETURNING.") },
	{ "SELECT * FROM orders WHERE id IN (SELECT 1 INTERSECT SELECT 2)",
	  NK(151, "INTERSECT and EXCEPT subqueries are unavailable.") },
	{ "SELECT (VALUES (1)), * FROM orders",
	  NK(152, "This subquery statement type is unavailable.") },
	{ "SELECT ARRAY(SELECT 1), * FROM orders", NK(153, "ARRAY subqueries are unavailable.") },
	{ "CREATE DATABASE d LOCALE 'xx_NOPE.UTF-8'",
	  NK(332, "This database locale is unavailable to the router.") },
	{ "ALTER TABLE orders ALTER COLUMN customer_id DROP EXPRESSION",
	  NK(336, "Changing a routing column\xe2\x80\x99s generated expression is unavailable.") },
	{ "UPDATE orders SET note[1:2] = '{a}' WHERE customer_id IN (1, 2)",
	  NK(67, "Array-slice and multidimensional array assignment are unavailable.") },
	{ "UPDATE orders SET note[1][2] = 'a'",
	  NK(67, "Array-slice and multidimensional array assignment are unavailable.") },
	{ "MERGE INTO orders o USING (SELECT customer_id FROM order_items) i ON o.customer_id = "
	  "i.customer_id WHEN MATCHED THEN DELETE", NK(121, "This MERGE shape is unavailable.") },
	{ "DELETE FROM order_items i USING products p WHERE i.sku = p.sku",
	  NK(103, "This DML source join cannot be planned safely.") },
	{ "UPDATE order_items i SET qty = 1 FROM products p WHERE p.sku = i.sku",
	  NK(103, "This DML source join cannot be planned safely.") },
	{ "UPDATE orders SET id = 5 WHERE customer_id = 1",
	  NK(145, "Updating an index column is unavailable.") },
	{ "INSERT INTO customers (id, name) VALUES (1, 'a'), (2, 'b') ORDER BY 2 DESC",
	  NK(150, "This ORDER BY expression is unavailable for VALUES.") },
	{ "ALTER TYPE customer_key RENAME VALUE 'a' TO 'b'",
	  NK(333, "Renaming an enum label used as a sharding key is unavailable.") },
	{ "ALTER TYPE public.customer_key RENAME VALUE 'a' TO 'b'",
	  NK(333, "Renaming an enum label used as a sharding key is unavailable.") },
	{ "SELECT o.id FROM orders o JOIN products p ON p.name = o.status",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "SELECT * FROM orders o JOIN customers c ON c.name = o.status",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "SELECT * FROM orders WHERE customer_id = ANY($1)",
	  NK(115, "Multiple routing-parameter values are unavailable.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, (SELECT 1))",
	  NK(69, "Subqueries in VALUES are unavailable.") },
	{ "ALTER FOREIGN DATA WRAPPER w OPTIONS (ADD a '1')",
	  NK(312, "Foreign data wrappers are unavailable.") },
	{ "ALTER FOREIGN TABLE ft ALTER COLUMN a OPTIONS (ADD b '1')",
	  NK(314, "Foreign tables are unavailable.") },
	{ "DROP SERVER s", NK(313, "Creating a foreign server is unavailable.") },
	{ "COPY orders FROM PROGRAM 'cat x'", NK(41, "File COPY is unavailable for sharded "
						  "tables.") },
	{ "SELECT * FROM orders o, products p WHERE o.customer_id = 1",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "SELECT * FROM orders o WHERE id IN (SELECT order_id FROM order_items)",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "SELECT * FROM countries JOIN audit_log ON true",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "SELECT * FROM orders o JOIN audit_log a ON true",
	  NK(113, "This cross-shard join expression cannot be assigned to one input.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, (SELECT 1) + 1)",
	  NK(116, "This INSERT subquery shape is unavailable.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, generate_series(1, 3))",
	  NK(118, "These INSERT values cannot be materialized on the router.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (id) DO NOTHING",
	  NK(119, "This ON CONFLICT shape is unavailable.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (DEFAULT, 2)",
	  NK(120, "This column default cannot be materialized on the router.") },
	{ "SELECT id FROM orders INTERSECT SELECT id FROM customers",
	  NK(124, "This set-operation shape is unavailable.") },
	{ "SELECT status FROM orders GROUP BY CUBE (status)",
	  NK(125, "This grouping-set form is unavailable.") },
	{ "SELECT * FROM orders TABLESAMPLE bernoulli (10)", NK(126, "TABLESAMPLE is unavailable.") },
	{ "UPDATE orders SET status = 'x' WHERE CURRENT OF c",
	  NK(128, "WHERE CURRENT OF is unavailable for DML.") },
	{ "TRUNCATE orders RESTART IDENTITY CASCADE",
	  NK(131, "TRUNCATE RESTART IDENTITY with CASCADE is unavailable.") },
	{ "SELECT * FROM orders_id_seq", NK(137, "Reading a sequence or index as a relation is "
					      "unavailable.") },
	{ "SELECT * FROM orders ORDER BY id FETCH FIRST 3 ROWS WITH TIES",
	  NK(138, "FETCH FIRST WITH TIES is unavailable across shards.") },
	{ "INSERT INTO orders (customer_id, id) OVERRIDING USER VALUE VALUES (1, 2)",
	  NK(141, "INSERT OVERRIDING USER VALUE is unavailable.") },
	{ "UPDATE orders SET customer_id = 5 WHERE customer_id = 5",
	  NK(145, "Updating an index column is unavailable.") },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 2) ON CONFLICT (customer_id, id) DO "
	  "UPDATE SET customer_id = 1", NK(145, "Updating an index column is unavailable.") },
	{ "SELECT nextval('orders_id_seq') FROM orders",
	  NK(101, "Per-row router-only expression evaluation is unavailable here.") },
	{ "SELECT nextval(current_schema() || '.s')",
	  NK(101, "Per-row router-only expression evaluation is unavailable here.") },
	{ "INSERT INTO customers DEFAULT VALUES",
	  NK(120, "This column default cannot be materialized on the router.") },
	{ "DELETE FROM orders WHERE customer_id = 1 AND id < nextval('orders_id_seq')",
	  NK(146, "This volatile router-only WHERE expression is unavailable.") },
	{ "UPDATE orders SET note = nextval('orders_id_seq') WHERE customer_id = 1",
	  NK(147, "This volatile router-only UPDATE assignment is unavailable.") },
	{ "SELECT count(*), row_number() OVER () FROM orders",
	  NK(149, "Window functions inside aggregates are unavailable.") },
	{ "CREATE OPERATOR CLASS c FOR TYPE int4 USING btree AS OPERATOR 1 <",
	  NK(300, "Creating an operator class is unavailable.") },
	{ "CREATE OPERATOR FAMILY f USING btree", NK(301, "Creating an operator family is "
						     "unavailable.") },
	{ "CREATE TEXT SEARCH CONFIGURATION c (COPY = english)",
	  NK(302, "Creating a text search configuration is unavailable.") },
	{ "CREATE TEXT SEARCH DICTIONARY d (TEMPLATE = simple)",
	  NK(303, "Creating a text search dictionary is unavailable.") },
	{ "CREATE EVENT TRIGGER e ON ddl_command_start EXECUTE FUNCTION f()",
	  NK(304, "Event triggers are unavailable.") },
	{ "ALTER EVENT TRIGGER e DISABLE", NK(304, "Event triggers are unavailable.") },
	{ "CREATE RULE r AS ON INSERT TO orders DO INSTEAD NOTHING",
	  NK(305, "Rewrite rules are unavailable.") },
	{ "SELECT lo_create(0)", NK(306, "Large objects are unavailable.") },
	{ "COMMENT ON LARGE OBJECT 1 IS 'x'", NK(306, "Large objects are unavailable.") },
	{ "CREATE LANGUAGE plperl", NK(307, "Creating a procedural language is unavailable.") },
	{ "CREATE TABLESPACE ts LOCATION '/x'", NK(308, "Creating a tablespace is unavailable.") },
	{ "CREATE TABLE t (a int) TABLESPACE ts", NK(308, "Creating a tablespace is unavailable.") },
	{ "CREATE ACCESS METHOD am TYPE INDEX HANDLER h",
	  NK(309, "Creating an access method is unavailable.") },
	{ "CREATE COLLATION c (locale = 'C')", NK(310, "Creating a collation is unavailable.") },
	{ "CREATE CONVERSION c FOR 'LATIN1' TO 'UTF8' FROM f",
	  NK(311, "Creating a conversion is unavailable.") },
	{ "CREATE FOREIGN DATA WRAPPER w", NK(312, "Foreign data wrappers are unavailable.") },
	{ "CREATE SERVER s FOREIGN DATA WRAPPER w", NK(313, "Creating a foreign server is "
							    "unavailable.") },
	{ "CREATE FOREIGN TABLE ft (a int) SERVER s", NK(314, "Foreign tables are unavailable.") },
	{ "CREATE USER MAPPING FOR bob SERVER s", NK(315, "User mappings are unavailable.") },
	{ "DROP USER MAPPING FOR bob SERVER s", NK(315, "User mappings are unavailable.") },
	{ "CREATE TEXT SEARCH PARSER p (START = a, GETTOKEN = b, END = c, LEXTYPES = d)",
	  NK(316, "Creating a text search parser is unavailable.") },
	{ "CREATE TEXT SEARCH TEMPLATE t (LEXIZE = l)",
	  NK(317, "Creating a text search template is unavailable.") },
	{ "CREATE TRANSFORM FOR int LANGUAGE sql (FROM SQL WITH FUNCTION f(internal))",
	  NK(318, "Creating a transform is unavailable.") },
	{ "ALTER TYPE ct ADD ATTRIBUTE b int", NK(319, "Changing composite-type attributes is "
						   "unavailable.") },
	{ "LOAD 'auto_explain'", NK(320, "Shared library loading is unavailable.") },
	{ "IMPORT FOREIGN SCHEMA s FROM SERVER srv INTO public",
	  NK(321, "IMPORT FOREIGN SCHEMA is unavailable.") },
	{ "ALTER TABLE orders ALTER COLUMN status SET STATISTICS 100",
	  NK(323, "Per-column statistics overrides are unavailable.") },
	{ "CREATE FUNCTION f() RETURNS int LANGUAGE plpython3u AS 'return 1'",
	  NK(325, "This function language is unavailable.") },
	{ "CREATE PROCEDURE p() LANGUAGE c AS 'x', 'y'",
	  NK(326, "This procedure language is unavailable.") },
	{ "CREATE LANGUAGE pl HANDLER h", NK(327, "CREATE LANGUAGE with a handler is "
					      "unavailable.") },
	{ "ALTER DOMAIN d RENAME CONSTRAINT a TO b",
	  NK(328, "Renaming a domain constraint is unavailable.") },
	{ "ALTER DOMAIN d SET DEFAULT 1", NK(329, "ALTER DOMAIN is unavailable.") },
	{ "CREATE DATABASE d IS_TEMPLATE true", NK(330, "The IS_TEMPLATE database option is "
						       "unavailable.") },
	{ "CREATE DATABASE d TABLESPACE ts", NK(331, "Database tablespace selection is "
						 "unavailable.") },
	{ "ALTER TABLE orders ALTER COLUMN note SET STORAGE EXTERNAL",
	  NK(334, "Column storage selection is unavailable.") },
	{ "ALTER TABLE orders ALTER COLUMN note SET COMPRESSION lz4",
	  NK(335, "Column compression selection is unavailable.") },
	{ "CREATE TEMP TABLE tt (a int)", NK(338, "Temporary tables, views and sequences are "
					      "unavailable.") },
	{ "CREATE TEMPORARY VIEW v AS SELECT 1", NK(338, "Temporary tables, views and sequences "
						       "are unavailable.") },
	{ "CREATE TEMP SEQUENCE s", NK(338, "Temporary tables, views and sequences are "
					"unavailable.") },
	{ "CREATE TABLE pg_temp.x AS SELECT 1", NK(338, "Temporary tables, views and sequences "
						       "are unavailable.") },
	{ "SELECT * FROM pg_temp.x", NK(338, "Temporary tables, views and sequences are "
				       "unavailable.") },
	{ "INSERT INTO orders (id, status) VALUES (1, 'x')", "NK306",
	  "shard-key column \"customer_id\" of primary index 0 is required but missing from "
	  "INSERT" },
	{ "INSERT INTO orders (customer_id, id) VALUES (1, 1), (NULL, 2)", "23502",
	  "null value in column \"customer_id\" of relation \"orders\" violates not-null "
	  "constraint" },
	{ "SELECT * FROM orders WHERE customer_id = 'abc'", "22P02",
	  "invalid input syntax for type bigint: \"abc\"" },
	{ "EXPLAIN SELECT * FROM orders", "NK017", "This statement requires Neki router "
						   "processing" },
	{ "SET __neki.fanout = 'wide'", "22023", "invalid value for parameter \"__neki.fanout\": "
						  "\"wide\"" },
	{ "SET __neki.shard = 'nope'", "22023", "invalid value for parameter \"__neki.shard\": "
						"\"nope\"" },
};

START_TEST(test_plan_rejects)
{
	const struct reject_case *c = &reject_cases[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(!plan_sql(&fx, c->sql, NULL, NULL, 0, &p, &err), "%s: planned", c->sql);
	ck_assert_msg(strcmp(err.sqlstate, c->sqlstate) == 0 && strcmp(err.message, c->message) == 0,
		      "%s: %s %s, want %s %s", c->sql, err.sqlstate, err.message, c->sqlstate,
		      c->message);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_copy_extended)
{
	struct rt_fx fx;
	struct plan_session sess;
	struct plan_input in;
	struct plan p;
	struct nk_error err;

	plan_session_init(&sess, "store");
	rt_parse(&fx, "COPY customers FROM STDIN");
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = &sess;
	in.extended = true;
	ck_assert(!plan_build(fx.a, fx.s, &in, &p, &err));
	ck_assert_str_eq(err.message, "not implemented: [55] COPY is unavailable in the extended "
				      "query protocol.");
	in.extended = false;
	ck_assert(plan_build(fx.a, fx.s, &in, &p, &err));
	ck_assert(p.has_key);
	ck_assert_int_eq(p.key.col_pos, 0);
	{
		const char *shard;

		ck_assert(plan_route_text(&in, &p, "42", 2, &shard, &err));
		ck_assert_str_eq(shard, shard_of("c:42"));
	}
	rt_fx_done(&fx);
}
END_TEST

/* ---- parameters: text and binary route the same ---- */

/* Plan fx's statement again with other parameters. */
static bool
plan_again(struct rt_fx *fx, const struct plan_param *params, uint32_t n, struct plan *out,
	   struct nk_error *err)
{
	struct plan_session def;
	struct plan_input in;

	plan_session_init(&def, "store");
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = &def;
	in.params = params;
	in.nparams = n;
	in.norm = &fx->norm;
	return plan_build(fx->a, fx->s, &in, out, err);
}

static const char *const param_sqls[] = {
	"SELECT * FROM orders WHERE customer_id = $1",
	"UPDATE orders SET status = 'x' WHERE customer_id = $1",
	"INSERT INTO orders (customer_id, id) VALUES ($1, 1)",
	"DELETE FROM orders WHERE customer_id IN ($1, $1)",
};

START_TEST(test_params_text_binary)
{
	static const int32_t keys[] = { 1, 42, -7, 1000000007 };

	for (size_t k = 0; k < NK_ARRAY_LEN(keys); k++) {
		struct rt_fx fx;
		struct plan pt, pb, p4;
		struct nk_error err;
		char text[32], want[64];
		uint8_t be8[8], be4[4];
		uint64_t u = (uint64_t)(int64_t)keys[k];
		struct plan_param tp = { (const uint8_t *)text, 0, false, 0 };
		struct plan_param bp = { be8, 8, true, 20 };
		struct plan_param b4 = { be4, 4, true, 23 };

		snprintf(text, sizeof(text), "%d", keys[k]);
		tp.len = (int32_t)strlen(text);
		for (int i = 0; i < 8; i++)
			be8[i] = (uint8_t)(u >> (56 - 8 * i));
		for (int i = 0; i < 4; i++)
			be4[i] = (uint8_t)((uint32_t)keys[k] >> (24 - 8 * i));
		ck_assert(plan_sql(&fx, param_sqls[_i], NULL, &tp, 1, &pt, &err));
		ck_assert_msg(plan_again(&fx, &bp, 1, &pb, &err), "%s", err.message);
		ck_assert_msg(plan_again(&fx, &b4, 1, &p4, &err), "%s", err.message);
		snprintf(want, sizeof(want), "c:%d", keys[k]);
		ck_assert_uint_eq(pt.nshards, 1);
		ck_assert_str_eq(pt.shards[0], shard_of(want));
		ck_assert_str_eq(pb.shards[0], pt.shards[0]);
		ck_assert_str_eq(p4.shards[0], pt.shards[0]);
		rt_fx_done(&fx);
	}
}
END_TEST

START_TEST(test_params_missing_and_null)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_param null = { NULL, -1, false, 0 };

	ck_assert(!plan_sql(&fx, "SELECT * FROM orders WHERE customer_id = $1", NULL, NULL, 0, &p,
			    &err));
	ck_assert_str_eq(err.sqlstate, "08P01");
	ck_assert(plan_again(&fx, &null, 1, &p, &err));	/* = NULL matches nothing: any shard */
	rt_fx_done(&fx);
	ck_assert(!plan_sql(&fx, "INSERT INTO orders (customer_id, id) VALUES ($1, 1)", NULL,
			    &null, 1, &p, &err));
	ck_assert_str_eq(err.sqlstate, "23502");
	rt_fx_done(&fx);
}
END_TEST

/* ---- EXPLAIN (NEKI_PLAN) ---- */

static char *
explain_of(const char *sql, bool json)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char *out;

	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s: %s", sql, err.message);
	ck_assert_int_eq(p.action, PLAN_ACT_EXPLAIN);
	out = plan_explain(p.inner, json);
	rt_fx_done(&fx);
	return out;
}

START_TEST(test_explain_text_json)
{
	char *t = explain_of("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders WHERE "
			     "customer_id = 42", false);
	char want[512];

	snprintf(want, sizeof(want), "Route [EqualUnique]\n"
		 "  Query: SELECT * FROM orders WHERE customer_id = $1\n"
		 "  ShardGroup: customer_data\n"
		 "  Values: 42\n"
		 "  Shards: %s", shard_of("c:42"));
	ck_assert_str_eq(t, want);
	free(t);
	t = explain_of("EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) SELECT status, count(*) FROM "
		       "orders GROUP BY status ORDER BY 2 LIMIT 3", false);
	ck_assert_str_eq(t, "Limit\n"
			    "  ->  Sort [Merge]\n"
			    "        ->  Aggregate [Ordered]\n"
			    "              ->  Collapse\n"
			    "                    ->  Route [Scatter]\n"
			    "                          Query: SELECT status, count(*) FROM orders "
			    "GROUP BY status ORDER BY 2 LIMIT $1\n"
			    "                          ShardGroup: customer_data\n"
			    "                          Shards: shard-a, shard-b, shard-c, shard-d");
	free(t);
	t = explain_of("EXPLAIN (NEKI_PLAN) SELECT * FROM orders ORDER BY id", true);
	ck_assert_str_eq(t, "[{\"Plan\": {\"Node Type\": \"Sort [Merge]\", \"Plans\": [{\"Node "
			    "Type\": \"Collapse\", \"Plans\": [{\"Node Type\": \"Route\", "
			    "\"Operator\": \"Scatter\", \"Query\": \"SELECT * FROM orders ORDER BY "
			    "id\", \"ShardGroup\": \"customer_data\", \"Values\": [], \"Shards\": "
			    "[\"shard-a\", \"shard-b\", \"shard-c\", \"shard-d\"]}]}]}}]");
	free(t);
}
END_TEST

/* DECLARE plans its query (plan.inner); FETCH / MOVE / CLOSE are the router's. The fan-out
 * limit applies to the cursor's query. */
START_TEST(test_cursor_plans)
{
	struct plan_session sess;
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char got[256];

	ck_assert(plan_sql(&fx, "DECLARE c CURSOR WITH HOLD FOR SELECT * FROM orders WHERE "
			   "customer_id = 42", NULL, NULL, 0, &p, &err));
	ck_assert(p.kind == PLAN_ROUTER && p.action == PLAN_ACT_CURSOR && p.inner != NULL);
	ck_assert_int_eq(p.inner->kind, PLAN_SINGLE);
	got_shards(p.inner, got, sizeof(got));
	ck_assert_str_eq(got, shard_of("c:42"));
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "DECLARE c SCROLL CURSOR FOR SELECT id FROM orders ORDER BY id",
			   NULL, NULL, 0, &p, &err));
	ck_assert_int_eq(p.inner->kind, PLAN_SCATTER);
	ck_assert_uint_eq(p.inner->nshards, 4);
	ck_assert(p.inner->merge & STMT_F_ORDER);
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "FETCH FORWARD 5 FROM c", NULL, NULL, 0, &p, &err));
	ck_assert(p.kind == PLAN_ROUTER && p.action == PLAN_ACT_CURSOR && p.inner == NULL);
	rt_fx_done(&fx);
	plan_session_init(&sess, "store");
	sess.fanout = PLAN_FANOUT_SINGLE;
	ck_assert(!plan_sql(&fx, "DECLARE c CURSOR FOR SELECT id FROM orders", &sess, NULL, 0,
			    &p, &err));
	ck_assert_str_eq(err.message, "statement's fan-out (scatter) exceeds __neki.fanout "
			 "(single)");
	rt_fx_done(&fx);
}
END_TEST

/* ANALYZE: actual rows on the top node, one line per shard, the execution time. */
START_TEST(test_explain_analyze_actuals)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const struct plan_actual_shard sa[] = { { "shard-a", 3, 0.5 }, { "shard-b", 0, 1.25 } };
	const struct plan_actual act = { sa, 2, 2, 2.5 };
	char *t;

	ck_assert(plan_sql(&fx, "EXPLAIN (NEKI_PLAN, ANALYZE) SELECT * FROM orders ORDER BY id "
			   "LIMIT 2", NULL, NULL, 0, &p, &err));
	t = plan_explain_analyze(p.inner, false, &act);
	ck_assert_str_eq(t, "Limit (actual rows=2)\n"
			    "  ->  Sort [Merge]\n"
			    "        ->  Collapse\n"
			    "              ->  Route [Scatter]\n"
			    "                    Query: SELECT * FROM orders ORDER BY id LIMIT $1\n"
			    "                    ShardGroup: customer_data\n"
			    "                    Shards: shard-a, shard-b, shard-c, shard-d\n"
			    "                    Shard shard-a: actual rows=3 time=0.500 ms\n"
			    "                    Shard shard-b: actual rows=0 time=1.250 ms\n"
			    "Execution Time: 2.500 ms");
	free(t);
	t = plan_explain_analyze(p.inner, true, &act);
	ck_assert_str_eq(t, "[{\"Plan\": {\"Node Type\": \"Limit\", \"Actual Rows\": 2, "
			    "\"Plans\": [{\"Node Type\": \"Sort [Merge]\", \"Plans\": [{\"Node "
			    "Type\": \"Collapse\", \"Plans\": [{\"Node Type\": \"Route\", "
			    "\"Operator\": \"Scatter\", \"Query\": \"SELECT * FROM orders ORDER BY "
			    "id LIMIT $1\", \"ShardGroup\": \"customer_data\", \"Values\": [], "
			    "\"Shards\": [\"shard-a\", \"shard-b\", \"shard-c\", \"shard-d\"], "
			    "\"Actual\": [{\"Shard\": \"shard-a\", \"Actual Rows\": 3, \"Actual "
			    "Total Time\": 0.500}, {\"Shard\": \"shard-b\", \"Actual Rows\": 0, "
			    "\"Actual Total Time\": 1.250}]}]}]}]}, \"Execution Time\": 2.500}]");
	free(t);
	rt_fx_done(&fx);
	ck_assert_str_eq(plan_explained_text("EXPLAIN (NEKI_PLAN, ANALYZE)\n SELECT (1)"),
			 "SELECT (1)");
	ck_assert_str_eq(plan_explained_text("SELECT 1"), "SELECT 1");
}
END_TEST

START_TEST(test_explain_nk017_hint)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert(!plan_sql(&fx, "EXPLAIN SELECT count(*) FROM orders", NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "NK017");
	ck_assert_str_eq(err.hint, "Use `EXPLAIN (NEKI_PLAN)` (with ANALYZE to execute) to see "
				   "Neki's plan");
	rt_fx_done(&fx);
}
END_TEST

/* ---- INSERT split keeps row numbers ---- */

START_TEST(test_insert_parts)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	uint32_t seen = 0;

	ck_assert(plan_sql(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, 10), (2, 20), "
				"(3, 30), (1, 11), (4, 40) RETURNING id", NULL, NULL, 0, &p, &err));
	ck_assert(p.merge & STMT_F_RETURNING);
	for (uint32_t k = 0; k < p.nparts; k++) {
		for (uint32_t r = 0; r < p.parts[k].nrows; r++) {
			static const char *const keys[] = { "c:1", "c:2", "c:3", "c:1", "c:4" };
			uint32_t row = p.parts[k].rows[r];

			ck_assert_str_eq(p.parts[k].shard, shard_of(keys[row]));
			if (r > 0)
				ck_assert_uint_gt(row, p.parts[k].rows[r - 1]);
			seen |= 1u << row;
		}
	}
	ck_assert_uint_eq(seen, 0x1f);
	rt_fx_done(&fx);
}
END_TEST

/* ---- sequence values: fills and nextval() (spec 6.1) ---- */

START_TEST(test_fill_omitted_serial)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const char *sql = "INSERT INTO orders (customer_id, status) VALUES (1, 'a'), (2, 'b'), "
			  "(1, 'c') RETURNING id";
	static const int64_t vals[] = { 501, 502, 503 };
	char want[512];

	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nfills, 1);
	ck_assert_str_eq(p.fills[0].column, "id");
	ck_assert_str_eq(p.fills[0].seq_schema, "public");
	ck_assert_str_eq(p.fills[0].seq_name, "orders_id_seq");
	ck_assert_str_eq(p.fills[0].home, "auth");	/* sharded owner: authoritative group */
	ck_assert_int_eq(p.fills[0].cache, 50);
	ck_assert(!p.fills[0].is_key && !p.route_by_fill);
	ck_assert_uint_eq(p.nrows, 3);
	ck_assert_uint_eq(p.nparts, strcmp(shard_of("c:1"), shard_of("c:2")) ? 2 : 1);
	for (uint32_t k = 0; k < p.nparts; k++) {
		char *text = plan_rewrite(fx.a, sql, &p, &p.parts[k], vals, NULL, &err);

		ck_assert_ptr_nonnull(text);
		if (strcmp(p.parts[k].shard, shard_of("c:1")) == 0)
			snprintf(want, sizeof(want), "INSERT INTO orders (customer_id, status, \"id\") "
				 "OVERRIDING SYSTEM VALUE VALUES (1, 'a', 501), (1, 'c', 503) "
				 "RETURNING id");
		else
			snprintf(want, sizeof(want), "INSERT INTO orders (customer_id, status, \"id\") "
				 "OVERRIDING SYSTEM VALUE VALUES (2, 'b', 502) RETURNING id");
		ck_assert_str_eq(text, want);
	}
	rt_fx_done(&fx);
}
END_TEST

/* DEFAULT in a given serial column's cell takes the router's value (not the shard's). */
START_TEST(test_fill_default_cells)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	const char *sql = "INSERT INTO orders (customer_id, id, status) VALUES (1, DEFAULT, "
			  "'a'), (1, 7, 'b'), (1, default, coalesce(NULL, 'c'))";
	static const int64_t vals[] = { 501, 502, 503 };

	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nfills, 1);
	ck_assert_str_eq(p.fills[0].column, "id");
	ck_assert_int_eq(p.fills[0].cell, 1);
	ck_assert_str_eq(plan_rewrite(fx.a, sql, &p, NULL, vals, NULL, &err),
			 "INSERT INTO orders (customer_id, id, status) OVERRIDING SYSTEM VALUE "
			 "VALUES (1, 501, 'a'), (1, 7, 'b'), (1, 503, coalesce(NULL, 'c'))");
	rt_fx_done(&fx);
	/* no DEFAULT cell: nothing to fill */
	ck_assert_msg(plan_sql(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, 2)", NULL,
			       NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nfills, 0);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_fill_positional_and_reference)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	static const int64_t v7 = 7;
	char *text;

	/* positional VALUES stop before orders.id: the columns are written out */
	ck_assert(plan_sql(&fx, "insert into public.orders as o values (42) -- x", NULL, NULL, 0,
			   &p, &err));
	ck_assert_uint_eq(p.nfills, 1);
	ck_assert_int_eq(p.kind, PLAN_SINGLE);
	text = plan_rewrite(fx.a, "insert into public.orders as o values (42) -- x", &p, NULL,
			    &v7, NULL, &err);
	ck_assert_str_eq(text, "insert into public.orders as o (\"customer_id\", \"id\") "
			       "OVERRIDING SYSTEM VALUE VALUES (42, 7) -- x");
	rt_fx_done(&fx);
	/* reference-table copies get the same ids */
	ck_assert(plan_sql(&fx, "INSERT INTO countries VALUES ('fr', 'France')", NULL, NULL, 0, &p,
			   &err));
	ck_assert_int_eq(p.kind, PLAN_EVERY_COPY);
	ck_assert_uint_eq(p.nfills, 1);
	ck_assert_str_eq(p.fills[0].seq_name, "countries_id_seq");
	text = plan_rewrite(fx.a, "INSERT INTO countries VALUES ('fr', 'France')", &p, NULL, &v7,
			    NULL, &err);
	ck_assert_str_eq(text, "INSERT INTO countries (\"code\", \"name\", \"id\") OVERRIDING "
			       "SYSTEM VALUE VALUES ('fr', 'France', 7)");
	rt_fx_done(&fx);
	/* an unsharded table's own shard holds its sequence: nothing to fill */
	ck_assert(plan_sql(&fx, "INSERT INTO audit_log (msg) VALUES ('x')", NULL, NULL, 0, &p,
			   &err));
	ck_assert_uint_eq(p.nfills, 0);
	rt_fx_done(&fx);
	/* given columns are not filled */
	ck_assert(plan_sql(&fx, "INSERT INTO orders (customer_id, id) VALUES (1, 2)", NULL, NULL, 0,
			   &p, &err));
	ck_assert_uint_eq(p.nfills, 0);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_fill_shard_key)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_session sess;
	struct plan_input in;
	const char *sql = "INSERT INTO customers (name, email) VALUES ('a', 'x'), ('b', 'y')";
	int64_t vals[2] = { 1, 0 };
	char key[32];

	/* a second id on another shard than id 1 */
	for (int64_t k = 2; !vals[1]; k++) {
		snprintf(key, sizeof(key), "c:%lld", (long long)k);
		if (strcmp(shard_of(key), shard_of("c:1")) != 0)
			vals[1] = k;
	}
	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert(p.route_by_fill);
	ck_assert(p.fills[0].is_key);
	ck_assert_str_eq(p.fills[0].seq_name, "customers_id_seq");
	ck_assert_uint_eq(p.nshards, 0);	/* known once the values are */
	plan_session_init(&sess, "store");
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = &sess;
	ck_assert_msg(plan_fill_route(fx.a, &in, &p, vals, &err), "%s", err.message);
	ck_assert_int_eq(p.kind, PLAN_SHARD_SET);
	ck_assert_uint_eq(p.nparts, 2);
	ck_assert_str_eq(p.parts[0].shard, shard_of("c:1"));
	ck_assert_uint_eq(p.parts[0].rows[0], 0);
	ck_assert_uint_eq(p.parts[1].rows[0], 1);
	snprintf(key, sizeof(key), "c:%lld", (long long)vals[1]);
	ck_assert_str_eq(p.parts[1].shard, shard_of(key));
	ck_assert_str_eq(plan_rewrite(fx.a, sql, &p, &p.parts[0], vals, NULL, &err),
			 "INSERT INTO customers (name, email, \"id\") OVERRIDING SYSTEM VALUE "
			 "VALUES ('a', 'x', 1)");
	/* __neki.tx_mode = single applies once the shards are known */
	sess.in_transaction = true;
	sess.tx_mode = PLAN_TX_SINGLE;
	sess.tx_shard = shard_of("c:1");
	ck_assert(!plan_fill_route(fx.a, &in, &p, vals, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_nextval_calls)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	static const int64_t nv[] = { 900, 901 };
	const char *sql = "SELECT nextval('orders_id_seq'), pg_catalog.nextval("
			  "'\"public\".\"customers_id_seq\"'::regclass) + 1, 'nextval(''x'')'";
	const char *ins = "INSERT INTO orders (customer_id, id) VALUES (3, nextval('orders_id_seq'))";

	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nnextvals, 2);
	ck_assert_str_eq(p.nextvals[0].seq_name, "orders_id_seq");
	ck_assert_str_eq(p.nextvals[0].home, "auth");
	ck_assert_int_eq(p.nextvals[0].cache, 50);
	ck_assert_str_eq(p.nextvals[1].seq_schema, "public");
	ck_assert_str_eq(p.nextvals[1].seq_name, "customers_id_seq");
	ck_assert_str_eq(plan_rewrite(fx.a, sql, &p, NULL, NULL, nv, &err),
			 "SELECT (SELECT 900::int8 AS nextval), (SELECT 901::int8 AS nextval) + 1, "
			 "'nextval(''x'')'");
	rt_fx_done(&fx);
	ck_assert_msg(plan_sql(&fx, ins, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nnextvals, 1);
	ck_assert_str_eq(plan_rewrite(fx.a, ins, &p, NULL, NULL, nv, &err),
			 "INSERT INTO orders (customer_id, id) VALUES (3, (SELECT 900::int8 AS "
			 "nextval))");
	rt_fx_done(&fx);
}
END_TEST

/* ---- session settings ---- */

/* currval('seq') and lastval() are the router's too: replaced by the session's values. */
START_TEST(test_currval_lastval_calls)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	static const int64_t nv[] = { 900, 901, 902 };
	const char *sql = "SELECT nextval('orders_id_seq'), currval('orders_id_seq'), lastval()";

	ck_assert_msg(plan_sql(&fx, sql, NULL, NULL, 0, &p, &err), "%s", err.message);
	ck_assert_uint_eq(p.nnextvals, 3);
	ck_assert_int_eq(p.nextvals[0].fn, PLAN_SEQ_NEXTVAL);
	ck_assert_int_eq(p.nextvals[1].fn, PLAN_SEQ_CURRVAL);
	ck_assert_str_eq(p.nextvals[1].seq_name, "orders_id_seq");
	ck_assert_int_eq(p.nextvals[2].fn, PLAN_SEQ_LASTVAL);
	ck_assert_str_eq(plan_rewrite(fx.a, sql, &p, NULL, NULL, nv, &err),
			 "SELECT (SELECT 900::int8 AS nextval), (SELECT 901::int8 AS currval), "
			 "(SELECT 902::int8 AS lastval)");
	rt_fx_done(&fx);
	/* a non-literal argument cannot be evaluated by the router */
	ck_assert(!plan_sql(&fx, "SELECT currval(name::regclass) FROM customers WHERE id = 1",
			    NULL, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "NK013");
	rt_fx_done(&fx);
}
END_TEST

/* Read targeting (spec 3.5): one server as the admin publishes it. */
static struct target_server
tsrv(uint32_t index, int declared, enum shm_srv_role role, unsigned flags, int64_t lag_ms)
{
	struct target_server v;

	memset(&v, 0, sizeof(v));
	v.index = index;
	v.declared = (uint8_t)declared;
	v.st.index = index;
	v.st.role = role;
	v.st.flags = flags;
	v.st.lag_ms = lag_ms;
	return v;
}

START_TEST(test_target_pick)
{
	struct target_server v[4] = {
		tsrv(0, CFG_SRV_PRIMARY, SHM_SRV_PRIMARY, SHM_SRV_F_CHOSEN | SHM_SRV_F_LAG, 0),
		tsrv(1, CFG_SRV_REPLICA, SHM_SRV_STANDBY, SHM_SRV_F_LAG, 40000),	/* 40 s */
		tsrv(2, CFG_SRV_REPLICA, SHM_SRV_STANDBY, SHM_SRV_F_LAG, 100),
		tsrv(3, CFG_SRV_RDONLY, SHM_SRV_STANDBY, 0, 0),			/* lag unknown */
	};
	struct target_policy p;
	struct nk_error err;
	uint32_t k = 99;

	target_policy_from(&p, "primary", "prefer", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_OK);
	ck_assert_uint_eq(k, 0);
	/* prefer: the recency tier first, whatever the spread */
	target_policy_from(&p, "replica", "prefer", "prefer", "none", 30, 900);
	for (uint64_t spread = 0; spread < 4; spread++) {
		ck_assert_int_eq(target_pick(&p, v, 4, -1, spread, &k), TARGET_OK);
		ck_assert_uint_eq(k, 2);
	}
	/* off: both within the max, spread per statement */
	target_policy_from(&p, "replica", "off", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_OK);
	ck_assert_uint_eq(k, 1);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 1, &k), TARGET_OK);
	ck_assert_uint_eq(k, 2);
	/* session affinity: the last one while it is a candidate */
	target_policy_from(&p, "replica", "off", "prefer", "session", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, 1, 1, &k), TARGET_OK);
	ck_assert_uint_eq(k, 1);
	/* require: the tier only; none within it: NK205 */
	v[2].st.lag_ms = 31000;
	target_policy_from(&p, "replica", "require", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_NONE);
	/* beyond the max: not read */
	target_policy_from(&p, "replica", "off", "prefer", "none", 30, 35);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_OK);
	ck_assert_uint_eq(k, 2);
	/* rdonly: its lag is unknown, so none */
	target_policy_from(&p, "rdonly", "prefer", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_NONE);
	ck_assert(!target_error(&err, "s1", TARGET_RDONLY));
	ck_assert_str_eq(err.sqlstate, "NK205");
	ck_assert_str_eq(err.message, "no healthy sidecars available for shard s1 with type "
			 "SIDECAR_TYPE_RDONLY");
	/* no chosen primary answering: a failover, hold */
	v[0].st.role = SHM_SRV_DOWN;
	target_policy_from(&p, "primary", "prefer", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 4, -1, 0, &k), TARGET_HOLD);
	/* a former primary answering as a standby serves as a replica */
	v[0] = tsrv(0, CFG_SRV_PRIMARY, SHM_SRV_STANDBY, SHM_SRV_F_LAG, 10);
	v[1].st.flags |= SHM_SRV_F_CHOSEN;
	v[1].st.role = SHM_SRV_PRIMARY;
	target_policy_from(&p, "replica", "prefer", "prefer", "none", 30, 900);
	ck_assert_int_eq(target_pick(&p, v, 2, -1, 0, &k), TARGET_OK);
	ck_assert_uint_eq(k, 0);
}
END_TEST

START_TEST(test_neki_settings)
{
	struct plan_session s;
	struct nk_error err;

	plan_session_init(&s, "store");
	ck_assert_str_eq(plan_neki_show(&s, "__neki.fanout"), "scatter");
	ck_assert_str_eq(plan_neki_show(&s, "__neki.tx_mode"), "multi");
	ck_assert_str_eq(plan_neki_show(&s, "__neki.target"), "primary");
	ck_assert(plan_neki_apply(&s, "__neki.fanout", "SINGLE", &err));
	ck_assert_str_eq(plan_neki_show(&s, "__neki.fanout"), "single");
	/* replica targets (served by the shards' standbys, route_target.c) */
	ck_assert(plan_neki_apply(&s, "__neki.target", "REPLICA", &err));
	ck_assert_str_eq(plan_neki_show(&s, "__neki.target"), "replica");
	ck_assert(plan_neki_apply(&s, "__neki.target", "rdonly", &err));
	ck_assert_str_eq(plan_neki_show(&s, "__neki.target"), "rdonly");
	ck_assert(plan_neki_apply(&s, "__neki.target", "Primary", &err));
	ck_assert_str_eq(plan_neki_show(&s, "__neki.target"), "primary");
	ck_assert(!plan_neki_apply(&s, "__neki.target", "standby", &err));
	ck_assert_str_eq(err.sqlstate, "22023");
	ck_assert(plan_neki_apply(&s, "__neki.replica_recency", "require", &err));
	ck_assert(plan_neki_apply(&s, "__neki.fanout", NULL, &err));	/* RESET */
	ck_assert_str_eq(plan_neki_show(&s, "__neki.fanout"), "scatter");
	ck_assert(plan_neki_apply(&s, "__neki.transaction_mode", "atomic", &err)); /* custom */
	ck_assert_ptr_null(plan_neki_show(&s, "__neki.transaction_mode"));
	ck_assert(plan_neki_apply(&s, "__neki.tx_mode", "ATOMIC", &err));	/* route_2pc.c */
	ck_assert_int_eq(s.tx_mode, PLAN_TX_ATOMIC);
	ck_assert_str_eq(plan_neki_show(&s, "__neki.tx_mode"), "atomic");
	ck_assert(!plan_neki_apply(&s, "__neki.tx_mode", "two-phase", &err));
	ck_assert_str_eq(err.hint, "Available values: multi, single, atomic.");
	ck_assert(plan_neki_apply(&s, "__neki.tx_mode", NULL, &err));
	ck_assert(!plan_neki_apply(&s, "__neki.replica_affinity", "sticky", &err));
	ck_assert_str_eq(err.hint, "Available values: none, session.");
	s.in_transaction = true;
	ck_assert(!plan_neki_apply(&s, "__neki.tx_mode", "single", &err));
	ck_assert_str_eq(err.sqlstate, "25001");
	ck_assert_str_eq(err.message, "parameter \"__neki.tx_mode\" cannot be changed inside a "
				      "transaction");
}
END_TEST

START_TEST(test_neki_statements)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_session s;

	plan_session_init(&s, "store");
	ck_assert(plan_sql(&fx, "SHOW __neki.fanout", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.action, PLAN_ACT_NEKI_SHOW);
	ck_assert_str_eq(p.show_value, "scatter");
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "SHOW __neki.custom_thing", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.action, PLAN_ACT_SHOW);
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "SET __neki.shard = 'shard-b'", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.action, PLAN_ACT_NEKI_SET);
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "RESET __neki.fanout", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.action, PLAN_ACT_NEKI_SET);
	rt_fx_done(&fx);
	s.in_transaction = true;
	ck_assert(!plan_sql(&fx, "SET __neki.fanout = 'multi'", &s, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "25001");
	rt_fx_done(&fx);
}
END_TEST

struct fanout_case {
	const char *sql;
	enum plan_fanout level;
	const char *message;	/* NULL: planned */
};

static const struct fanout_case fanout_cases[] = {
	{ "SELECT * FROM orders WHERE customer_id = 1", PLAN_FANOUT_SINGLE, NULL },
	{ "SELECT * FROM orders WHERE customer_id IN (1, 2, 3, 4, 5)", PLAN_FANOUT_SINGLE,
	  "statement's fan-out (multi) exceeds __neki.fanout (single)" },
	{ "SELECT * FROM orders WHERE customer_id IN (1, 2, 3, 4, 5)", PLAN_FANOUT_MULTI, NULL },
	{ "SELECT * FROM orders", PLAN_FANOUT_MULTI,
	  "statement's fan-out (scatter) exceeds __neki.fanout (multi)" },
	{ "DELETE FROM orders", PLAN_FANOUT_SINGLE,
	  "statement's fan-out (scatter) exceeds __neki.fanout (single)" },
	{ "EXPLAIN (NEKI_PLAN, ANALYZE) SELECT * FROM orders", PLAN_FANOUT_SINGLE,
	  "statement's fan-out (scatter) exceeds __neki.fanout (single)" },
	{ "EXPLAIN (NEKI_PLAN) SELECT * FROM orders", PLAN_FANOUT_SINGLE, NULL },
	{ "INSERT INTO countries VALUES ('fr', 'France')", PLAN_FANOUT_SINGLE, NULL },
	{ "CREATE INDEX ON orders (status)", PLAN_FANOUT_SINGLE, NULL },
	{ "SELECT * FROM orders", PLAN_FANOUT_SCATTER, NULL },
	{ "SELECT * FROM v_countries", PLAN_FANOUT_SINGLE, NULL },
};

START_TEST(test_fanout_limit)
{
	const struct fanout_case *c = &fanout_cases[_i];
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_session s;
	bool ok;

	plan_session_init(&s, "store");
	s.fanout = c->level;
	ok = plan_sql(&fx, c->sql, &s, NULL, 0, &p, &err);
	if (c->message)
		ck_assert_msg(!ok && strcmp(err.message, c->message) == 0, "%s: %s", c->sql,
			      ok ? "planned" : err.message);
	else
		ck_assert_msg(ok, "%s: %s", c->sql, err.message);
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_tx_mode_single_and_prefer)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_session s;
	const char *a = shard_of("c:1"), *other = NULL;
	char sql[128];

	plan_session_init(&s, "store");
	s.in_transaction = true;
	s.tx_mode = PLAN_TX_SINGLE;
	s.tx_shard = a;
	ck_assert(plan_sql(&fx, "SELECT * FROM orders WHERE customer_id = 1", &s, NULL, 0, &p,
			   &err));
	rt_fx_done(&fx);
	for (int k = 2; k < 50 && !other; k++) {
		char key[16];

		snprintf(key, sizeof(key), "c:%d", k);
		if (strcmp(shard_of(key), a) != 0) {
			other = shard_of(key);
			snprintf(sql, sizeof(sql), "SELECT * FROM orders WHERE customer_id = %d", k);
		}
	}
	ck_assert_ptr_nonnull(other);
	ck_assert(!plan_sql(&fx, sql, &s, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	ck_assert_ptr_nonnull(strstr(err.message, "__neki.tx_mode is single"));
	rt_fx_done(&fx);
	/* a reference read prefers the shard the transaction already uses */
	s.tx_mode = PLAN_TX_MULTI;
	s.tx_shard = "shard-c";
	ck_assert(plan_sql(&fx, "SELECT * FROM countries", &s, NULL, 0, &p, &err));
	ck_assert_str_eq(p.shards[0], "shard-c");
	rt_fx_done(&fx);
}
END_TEST

START_TEST(test_direct_shard)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	struct plan_session s;

	plan_session_init(&s, "store");
	strcpy(s.shard, "shard-b");
	ck_assert(plan_sql(&fx, "SELECT a FROM orders INTERSECT SELECT a FROM customers", &s, NULL,
			   0, &p, &err));
	ck_assert_int_eq(p.op, PLAN_OP_DIRECT);
	ck_assert_str_eq(p.shards[0], "shard-b");
	rt_fx_done(&fx);
	ck_assert(!plan_sql(&fx, "SELECT nextval('s')", &s, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	rt_fx_done(&fx);
	ck_assert(!plan_sql(&fx, "CREATE TABLE x (a int)", &s, NULL, 0, &p, &err));
	ck_assert_str_eq(err.sqlstate, "0A000");
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "VACUUM orders", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.kind, PLAN_ALL_SHARDS);
	ck_assert_str_eq(p.shards[0], "auth");
	rt_fx_done(&fx);
	ck_assert(plan_sql(&fx, "BEGIN", &s, NULL, 0, &p, &err));
	ck_assert_int_eq(p.action, PLAN_ACT_TX);
	rt_fx_done(&fx);
	/* savepoints are the router's (route_svp.c), not refused with NK013 23 */
	for (int i = 0; i < 3; i++) {
		static const char *const sql[] = { "SAVEPOINT s", "RELEASE SAVEPOINT s",
						   "ROLLBACK TO SAVEPOINT s" };

		ck_assert(plan_sql(&fx, sql[i], &s, NULL, 0, &p, &err));
		ck_assert_int_eq(p.action, PLAN_ACT_TX);
		rt_fx_done(&fx);
	}
}
END_TEST

/* ---- a sharded table the catalog lacks ---- */

/* The fixture catalog without table orders (created through another router, say). */
static uint32_t
fx_column_type_no_orders(void *arg, const char *schema, const char *table, const char *column)
{
	return strcmp(table, "orders") == 0 ? 0 : fx_column_type(arg, schema, table, column);
}

static const char *
fx_column_name_no_orders(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	return strcmp(table, "orders") == 0 ? NULL : fx_column_name(arg, schema, table, attnum);
}

static char
fx_relkind_no_orders(void *arg, const char *schema, const char *table)
{
	return strcmp(table, "orders") == 0 ? 0 : fx_relkind(arg, schema, table);
}

/* Is <sql> planned (*planned) and reported with orders (true) or nothing as unknown? */
static bool
unknown_of(const char *sql, bool *planned)
{
	struct plan_catalog cat = fx_cat;
	struct plan_unknown u = { NULL, NULL };
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	cat.column_type = fx_column_type_no_orders;
	cat.column_name = fx_column_name_no_orders;
	cat.relkind = fx_relkind_no_orders;
	*planned = plan_sql_cat(&fx, sql, NULL, NULL, 0, &cat, &u, &p, &err);
	if (u.table != NULL) {	/* (the names live in the statement's arena) */
		ck_assert_str_eq(u.schema, "public");
		ck_assert_str_eq(u.table, "orders");
	}
	rt_fx_done(&fx);
	return u.table != NULL;
}

START_TEST(test_unknown_sharded_table)
{
	struct plan_unknown u = { NULL, NULL };
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	bool planned;

	/* values of orders are refused (never routed by their text), and reported */
	ck_assert(unknown_of("INSERT INTO orders VALUES (7, 1, 'new')", &planned));
	ck_assert(!planned);
	ck_assert(unknown_of("INSERT INTO orders (customer_id, id) VALUES ('7', 1)", &planned));
	ck_assert(!planned);
	ck_assert(unknown_of("UPDATE orders SET status = 'x' WHERE customer_id = '7'", &planned));
	ck_assert(!planned);
	/* a number key compares as numeric: a scatter, reported too (a load routes it) */
	ck_assert(unknown_of("SELECT * FROM orders WHERE customer_id = 42", &planned));
	ck_assert(planned);
	ck_assert(unknown_of("SELECT * FROM customers c JOIN orders o ON o.customer_id = c.id "
			     "WHERE c.id = 1", &planned));
	ck_assert(unknown_of("COPY orders FROM STDIN", &planned));
	/* known tables, unsharded ones and DDL: nothing to load */
	ck_assert(!unknown_of("SELECT * FROM customers WHERE id = 42", &planned));
	ck_assert(planned);
	ck_assert(!unknown_of("SELECT * FROM audit_log", &planned));
	ck_assert(!unknown_of("ALTER TABLE orders ALTER COLUMN note DROP EXPRESSION", &planned));
	ck_assert(planned);
	ck_assert(!unknown_of("CREATE INDEX ON orders (status)", &planned));
	/* the whole catalog: orders is known */
	ck_assert(plan_sql_cat(&fx, "INSERT INTO orders VALUES (7, 1, 'new')", NULL, NULL, 0,
			       &fx_cat, &u, &p, &err));
	ck_assert_ptr_null(u.table);
	rt_fx_done(&fx);
}
END_TEST

/* ---- the plan cache ---- */

static const struct stmt *
cache_lookup(struct plan_cache *pc, struct rarena *a, const char *sql, uint64_t rev,
	     struct parse_norm *n)
{
	const struct stmt *s;
	struct nk_error err;

	ck_assert(parse_normalize(a, sql, n));
	s = plan_cache_get(pc, n, rev, 1);
	if (!s)
		s = plan_cache_put(pc, sql, n, rev, 1, &err);
	ck_assert_ptr_nonnull(s);
	return s;
}

START_TEST(test_plan_cache)
{
	struct plan_cache *pc = plan_cache_new(2);
	struct rarena *a = rarena_new();
	struct plan_cache_stats st;
	struct parse_norm n1, n2;
	const struct stmt *s1, *s2;
	struct plan_session sess;
	struct plan_input in;
	struct plan p1, p2;
	struct nk_error err;

	s1 = cache_lookup(pc, a, "SELECT * FROM orders WHERE customer_id = 1", 1, &n1);
	s2 = cache_lookup(pc, a, "SELECT * FROM orders WHERE customer_id = 2", 1, &n2);
	ck_assert_ptr_eq(s1, s2);	/* one analysis for both */
	plan_session_init(&sess, "store");
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = &sess;
	in.norm = &n1;
	ck_assert(plan_build(a, s1, &in, &p1, &err));
	in.norm = &n2;
	ck_assert(plan_build(a, s2, &in, &p2, &err));
	ck_assert_str_eq(p1.shards[0], shard_of("c:1"));
	ck_assert_str_eq(p2.shards[0], shard_of("c:2"));
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.hits, 1);
	ck_assert_uint_eq(st.misses, 1);
	/* another topology revision: not the same analysis */
	(void)cache_lookup(pc, a, "SELECT * FROM orders WHERE customer_id = 3", 2, &n1);
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.misses, 2);
	/* LRU bound */
	(void)cache_lookup(pc, a, "SELECT name FROM customers WHERE id = 1", 2, &n1);
	(void)cache_lookup(pc, a, "SELECT email FROM customers WHERE id = 1", 2, &n1);
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.entries, 2);
	ck_assert_uint_eq(st.evictions, 1);
	/* utility statements are never shared: their literals are their meaning */
	(void)cache_lookup(pc, a, "SET __neki.fanout = 'single'", 2, &n1);
	s1 = cache_lookup(pc, a, "SET __neki.fanout = 'multi'", 2, &n2);
	ck_assert_str_eq(s1->set->value, "multi");
	rarena_free(a);
	plan_cache_free(pc);
}
END_TEST

/* ---- plan memo: a kept plan gives what planning the execution afresh gives ---- */

/* Statements with a hole for a key value, and whether their plan is kept. */
static const struct {
	const char *sql;
	bool kept;
} memo_sqls[] = {
	{ "SELECT * FROM orders WHERE customer_id = %s", true },
	{ "SELECT * FROM orders o WHERE o.customer_id = %s AND status = 'new'", true },
	{ "SELECT count(*) FROM orders WHERE customer_id = %s", true },
	{ "SELECT * FROM orders WHERE customer_id IN (%s) LIMIT 3", true },
	{ "SELECT * FROM orders WHERE customer_id = %s FOR UPDATE", true },
	{ "UPDATE orders SET status = 'x' WHERE customer_id = %s", true },
	{ "DELETE FROM orders WHERE customer_id = %s", true },
	{ "SELECT * FROM products WHERE lower(sku) = %s", true },
	{ "INSERT INTO orders (customer_id, id) VALUES (%s, 1)", true },
	{ "INSERT INTO order_items (customer_id, order_id, qty) VALUES (%s, 1, 2) RETURNING qty",
	  true },
	{ "UPDATE orders SET customer_id = 1 WHERE customer_id = %s", false },	/* 145 */
	{ "SELECT * FROM orders WHERE customer_id = %s OR customer_id = 7", false },
	{ "SELECT * FROM orders o JOIN order_items i ON i.customer_id = o.customer_id "
	  "WHERE o.customer_id = %s", false },
	{ "SELECT * FROM customers WHERE id = %s AND pg_advisory_xact_lock(1) IS NOT NULL",
	  false },
	{ "INSERT INTO order_items (customer_id, order_id, qty) VALUES (%s, 1, 2), (7, 1, 2)",
	  false },
	{ "INSERT INTO orders (customer_id) VALUES (%s)", false },	/* id: a fill */
};

/* Values of a key, in the order executions bind them (quoted: text literals). */
static const char *const memo_values[] = {
	"42", "1", "-7", "NULL", "1000000007", "'x'", "1.5", "'42'", "9223372036854775807",
	"'abc'", "'ABC'", "42",
};

/* Session variants the kept plan meets: defaults, another schema, __neki.shard, a
 * single-shard transaction on some shard, fan-out single. */
static void
memo_session(struct plan_session *s, int variant)
{
	plan_session_init(s, "store");
	if (variant == 1)
		s->schema = "other";
	if (variant == 2)
		snprintf(s->shard, sizeof(s->shard), "%s", "shard-b");
	if (variant == 3) {
		s->in_transaction = true;
		s->tx_mode = PLAN_TX_SINGLE;
		s->tx_shard = "shard-a";
	}
	if (variant == 4)
		s->fanout = PLAN_FANOUT_SINGLE;
}

static void
expect_same_plan(const char *sql, bool ok1, const struct plan *p1, const struct nk_error *e1,
		 bool ok2, const struct plan *p2, const struct nk_error *e2)
{
	char s1[256], s2[256];

	ck_assert_msg(ok1 == ok2, "%s: kept plan %d, planned %d (%s%s)", sql, ok1, ok2,
		      e1->message, e2->message);
	if (!ok1) {
		ck_assert_str_eq(e1->sqlstate, e2->sqlstate);
		ck_assert_str_eq(e1->message, e2->message);
		ck_assert_int_eq(p1->bad_param, p2->bad_param);
		return;
	}
	ck_assert_int_eq(p1->kind, p2->kind);
	ck_assert_int_eq(p1->op, p2->op);
	ck_assert_int_eq(p1->level, p2->level);
	ck_assert_uint_eq(p1->merge, p2->merge);
	got_shards(p1, s1, sizeof(s1));
	got_shards(p2, s2, sizeof(s2));
	ck_assert_msg(strcmp(s1, s2) == 0, "%s: shards %s, planned %s", sql, s1, s2);
	ck_assert_uint_eq(p1->nvalues, p2->nvalues);
	for (uint32_t i = 0; i < p1->nvalues; i++)
		ck_assert_str_eq(p1->values[i], p2->values[i]);
	ck_assert_str_eq(p1->group ? p1->group : "-", p2->group ? p2->group : "-");
	ck_assert_str_eq(p1->query, p2->query);
	ck_assert_int_eq(p1->stmt != NULL, p2->stmt != NULL);
	ck_assert_uint_eq(p1->nparts, p2->nparts);
	for (uint32_t i = 0; i < p1->nparts; i++) {
		ck_assert_str_eq(p1->parts[i].shard, p2->parts[i].shard);
		ck_assert_uint_eq(p1->parts[i].nrows, p2->parts[i].nrows);
		for (uint32_t k = 0; k < p1->parts[i].nrows; k++)
			ck_assert_uint_eq(p1->parts[i].rows[k], p2->parts[i].rows[k]);
	}
	ck_assert_uint_eq(p1->nfills, p2->nfills);
}

/* Plan <sql> through cache <pc> with its memo (into <kept> in <a>, when given), and
 * afresh; both must agree. */
static void
memo_plan(struct plan_cache *pc, const char *sql, const struct plan_session *sess,
	  struct rarena *keep, struct plan *kept)
{
	struct rarena *a = keep != NULL ? keep : rarena_new(), *b = rarena_new();
	struct parse_norm n1, n2;
	struct plan_input in;
	struct plan p1, p2;
	struct nk_error e1, e2;
	const struct stmt *s1, *s2;
	bool ok1, ok2;

	ck_assert(a && b && parse_normalize(a, sql, &n1) && parse_normalize(b, sql, &n2));
	s1 = plan_cache_get(pc, &n1, 1, 1);
	if (!s1)
		s1 = plan_cache_put(pc, sql, &n1, 1, 1, &e1);
	s2 = parse_statement(b, sql, &n2, &e2);
	ck_assert_msg(s1 && s2, "%s", sql);
	memset(&in, 0, sizeof(in));
	in.topo = img;
	in.cat = &fx_cat;
	in.sess = sess;
	in.norm = &n1;
	ok1 = plan_build_memo(a, s1, &in, plan_cache_memo(pc), &p1, &e1);
	in.norm = &n2;
	ok2 = plan_build(b, s2, &in, &p2, &e2);
	expect_same_plan(sql, ok1, &p1, &e1, ok2, &p2, &e2);
	ck_assert_int_eq(p1.gsi != NULL, p2.gsi != NULL);
	if (p1.gsi != NULL) {
		ck_assert_int_eq(p1.gsi->kind, p2.gsi->kind);
		ck_assert_str_eq(p1.gsi->returning ? p1.gsi->returning : "-",
				 p2.gsi->returning ? p2.gsi->returning : "-");
		ck_assert_uint_eq(p1.gsi->nlookups, p2.gsi->nlookups);
		for (uint32_t i = 0; i < p1.gsi->nlookups; i++) {
			ck_assert_str_eq(p1.gsi->lookups[i].table, p2.gsi->lookups[i].table);
			ck_assert_uint_eq(p1.gsi->lookups[i].ncols, p2.gsi->lookups[i].ncols);
			for (uint32_t k = 0; k < p1.gsi->lookups[i].ncols; k++) {
				ck_assert_str_eq(p1.gsi->lookups[i].cols[k],
						 p2.gsi->lookups[i].cols[k]);
				ck_assert_uint_eq(p1.gsi->lookups[i].pos[k],
						  p2.gsi->lookups[i].pos[k]);
			}
		}
	}
	if (kept != NULL)
		*kept = p1;
	else
		rarena_free(a);
	rarena_free(b);
}

static void
memo_vs_fresh(struct plan_cache *pc, const char *sql, const struct plan_session *sess)
{
	memo_plan(pc, sql, sess, NULL, NULL);
}

/* rt_plan_memo_vs_fresh: see router_fixtures.h. */
void
rt_plan_memo_vs_fresh(struct plan_cache *pc, const char *sql, bool gsi_step, struct rarena *a,
		      struct plan *kept)
{
	struct plan_session sess;

	plan_session_init(&sess, "store");
	sess.gsi_step = gsi_step;
	memo_plan(pc, sql, &sess, a, kept);
}

START_TEST(test_plan_memo_matches_planning)
{
	struct plan_cache *pc = plan_cache_new(4);
	struct plan_cache_stats st;
	struct plan_session sess;
	char sql[512];

	ck_assert_ptr_nonnull(pc);
	for (int variant = 0; variant < 5; variant++) {
		memo_session(&sess, variant);
		for (size_t v = 0; v < NK_ARRAY_LEN(memo_values); v++) {
			const char *t = memo_sqls[_i].sql, *hole = strstr(t, "%s");

			snprintf(sql, sizeof(sql), "%.*s%s%s", (int)(hole - t), t, memo_values[v],
				 hole + 2);
			memo_vs_fresh(pc, sql, &sess);
		}
	}
	plan_cache_stats(pc, &st);
	if (memo_sqls[_i].kept)		/* one table, one routing value */
		ck_assert_msg(st.memo_replays > 0, "%s: not kept", memo_sqls[_i].sql);
	else
		ck_assert_msg(st.memo_replays == 0, "%s: kept", memo_sqls[_i].sql);
	plan_cache_free(pc);
}
END_TEST

/* Parameters: text and binary of one prepared statement, and a NULL, share the memo. */
START_TEST(test_plan_memo_params)
{
	struct plan_cache *pc = plan_cache_new(4);
	struct plan_cache_stats st;
	struct plan_session sess;
	static const int64_t keys[] = { 42, 1, -7, 1000000007, 5 };
	const char *sql = "SELECT * FROM orders WHERE customer_id = $1";

	ck_assert_ptr_nonnull(pc);
	plan_session_init(&sess, "store");
	for (size_t k = 0; k < NK_ARRAY_LEN(keys) * 3; k++) {
		struct rarena *a = rarena_new();
		struct parse_norm n;
		const struct stmt *s;
		struct plan_input in;
		struct plan p;
		struct nk_error err;
		char text[32], want[40];
		uint8_t be8[8];
		uint64_t u = (uint64_t)keys[k % NK_ARRAY_LEN(keys)];
		struct plan_param tp = { (const uint8_t *)text, 0, false, 0 };
		struct plan_param bp = { be8, 8, true, 20 };
		struct plan_param np = { NULL, -1, false, 0 };

		snprintf(text, sizeof(text), "%lld", (long long)keys[k % NK_ARRAY_LEN(keys)]);
		tp.len = (int32_t)strlen(text);
		for (int i = 0; i < 8; i++)
			be8[i] = (uint8_t)(u >> (56 - 8 * i));
		ck_assert(parse_normalize(a, sql, &n));
		if (!(s = plan_cache_get(pc, &n, 1, 1)))
			s = plan_cache_put(pc, sql, &n, 1, 1, &err);
		memset(&in, 0, sizeof(in));
		in.topo = img;
		in.cat = &fx_cat;
		in.sess = &sess;
		in.norm = &n;
		in.extended = true;
		in.params = k / NK_ARRAY_LEN(keys) == 0 ? &tp : k / NK_ARRAY_LEN(keys) == 1 ? &bp
											 : &np;
		in.nparams = 1;
		ck_assert_msg(plan_build_memo(a, s, &in, plan_cache_memo(pc), &p, &err), "%s",
			      err.message);
		snprintf(want, sizeof(want), "c:%s", text);
		if (in.params != &np)
			ck_assert_str_eq(p.shards[0], shard_of(want));
		else	/* = NULL: no routing value, planned afresh (any shard answers) */
			ck_assert_uint_eq(p.nvalues, 0);
		rarena_free(a);
	}
	plan_cache_stats(pc, &st);
	ck_assert_uint_eq(st.memo_replays, 2 * NK_ARRAY_LEN(keys) - 1);
	plan_cache_free(pc);
}
END_TEST

/* ---- robustness: every prefix of every statement above plans or fails cleanly ---- */

static void
plan_prefixes(const char *sql)
{
	size_t len = strlen(sql);
	char *buf = malloc(len + 1);
	struct plan_session sess;

	ck_assert_ptr_nonnull(buf);
	plan_session_init(&sess, "store");
	for (size_t k = 0; k <= len; k++) {
		struct rarena *a = rarena_new();
		struct parse_norm n;
		struct nk_error err;
		struct plan_input in;
		struct plan p;
		const struct stmt *s;

		memcpy(buf, sql, k);
		buf[k] = '\0';
		ck_assert(parse_normalize(a, buf, &n));
		s = parse_statement(a, buf, &n, &err);
		memset(&in, 0, sizeof(in));
		in.topo = img;
		in.cat = &fx_cat;
		in.sess = &sess;
		in.norm = &n;
		if (s && !plan_build(a, s, &in, &p, &err))
			ck_assert(err.sqlstate[0] != '\0' && err.message[0] != '\0');
		rarena_free(a);
	}
	free(buf);
}

START_TEST(test_prefixes)
{
	for (size_t i = 0; i < NK_ARRAY_LEN(shape_cases); i++)
		plan_prefixes(shape_cases[i].sql);
	for (size_t i = 0; i < NK_ARRAY_LEN(reject_cases); i++)
		plan_prefixes(reject_cases[i].sql);
}
END_TEST

/* ---- for the other router test files (router_fixtures.h) ---- */

bool
rt_plan_storefront(struct rt_fx *fx, const char *sql, const struct plan_session *sess,
		   const struct plan_param *params, uint32_t nparams, struct plan *out,
		   struct nk_error *err)
{
	return plan_sql(fx, sql, sess, params, nparams, out, err);
}

const char *
rt_storefront_shard(const char *key)
{
	return shard_of(key);
}

void
rt_storefront_rewrites_orders(bool on)
{
	fx_orders_rewritten = on;
}

const void *
rt_storefront_image(void)
{
	return img;
}

void
rt_storefront_setup(void)
{
	setup_image();
}

void
rt_storefront_teardown(void)
{
	teardown_image();
}

/* rt_storefront_gsi_setup: see router_fixtures.h. */
void
rt_storefront_gsi_setup(void)
{
	char *text = fx_read_file("etc/topology-storefront.json"), *at;
	struct nk_error err;
	struct topo_model *m;

	ck_assert_ptr_nonnull(text);
	at = strstr(text, "\"enabled\": false");
	ck_assert_ptr_nonnull(at);
	memcpy(at, "\"enabled\": true ", strlen("\"enabled\": false"));
	m = topo_check(text, strlen(text), fx_input(NULL), false, NULL, &err);
	ck_assert_msg(m != NULL, "storefront with its GSI enabled: %s", err.message);
	free(text);
	build_image(m);
}

/* router_add_plan_tests: see router_fixtures.h. */
void
router_add_plan_tests(Suite *s)
{
	TCase *tc = tcase_create("plan");

	tcase_set_timeout(tc, 60);
	tcase_add_unchecked_fixture(tc, setup_image, teardown_image);
	tcase_add_loop_test(tc, test_plan_shapes, 0, NK_ARRAY_LEN(shape_cases));
	tcase_add_loop_test(tc, test_plan_rejects, 0, NK_ARRAY_LEN(reject_cases));
	tcase_add_test(tc, test_copy_extended);
	tcase_add_loop_test(tc, test_params_text_binary, 0, NK_ARRAY_LEN(param_sqls));
	tcase_add_test(tc, test_params_missing_and_null);
	tcase_add_loop_test(tc, test_plan_ignores_stale_error, 0, 2);
	tcase_add_test(tc, test_explain_text_json);
	tcase_add_test(tc, test_cursor_plans);
	tcase_add_test(tc, test_explain_nk017_hint);
	tcase_add_test(tc, test_explain_analyze_actuals);
	tcase_add_test(tc, test_insert_parts);
	tcase_add_test(tc, test_fill_omitted_serial);
	tcase_add_test(tc, test_fill_default_cells);
	tcase_add_test(tc, test_currval_lastval_calls);
	tcase_add_test(tc, test_fill_positional_and_reference);
	tcase_add_test(tc, test_fill_shard_key);
	tcase_add_test(tc, test_nextval_calls);
	tcase_add_test(tc, test_neki_settings);
	tcase_add_test(tc, test_target_pick);
	tcase_add_test(tc, test_neki_statements);
	tcase_add_loop_test(tc, test_fanout_limit, 0, NK_ARRAY_LEN(fanout_cases));
	tcase_add_test(tc, test_tx_mode_single_and_prefer);
	tcase_add_test(tc, test_direct_shard);
	tcase_add_test(tc, test_unknown_sharded_table);
	tcase_add_test(tc, test_plan_cache);
	tcase_add_loop_test(tc, test_plan_memo_matches_planning, 0, NK_ARRAY_LEN(memo_sqls));
	tcase_add_test(tc, test_plan_memo_params);
	tcase_add_test(tc, test_prefixes);
	suite_add_tcase(s, tc);
}
