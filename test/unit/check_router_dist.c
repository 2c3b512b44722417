/*
 * check_router_dist.c - the shapes of the planner's differential audit (plan_dist.c and the
 * co-location links of plan.c; test/routing/test_plan_fuzz.py runs them against the
 * reference server): statements over several shards whose rows would not each come from
 * one shard are refused with their code and exact message, correlated subqueries do not
 * narrow their outer query, outer-join ON predicates pin a nullable sharded table, and the
 * co-located shapes keep their plans. Storefront topology (etc/topology-storefront.json).
 * Added to the "router" suite by router_add_dist_tests().
 */
#include "neki/base.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "neki/plan.h"
#include "neki/plan_explain.h"
#include "neki/topology.h"
#include "neki/topology_image.h"
#include "router_fixtures.h"
#include "topo_fixtures.h"

static void *dimg;

/* The columns of test/routing's storefront schema (int8 20, text 25, int4 23, numeric). */
static const struct {
	const char *table, *column;
	uint32_t oid;
} dcols[] = {
	{ "customers", "id", 20 }, { "customers", "name", 25 }, { "customers", "country", 25 },
	{ "orders", "customer_id", 20 }, { "orders", "id", 20 }, { "orders", "status", 25 },
	{ "orders", "total", 1700 }, { "order_items", "customer_id", 20 },
	{ "order_items", "order_id", 20 }, { "order_items", "line", 23 },
	{ "order_items", "sku", 25 }, { "order_items", "qty", 23 }, { "products", "sku", 25 },
	{ "products", "name", 25 }, { "products", "price", 1700 }, { "countries", "code", 25 },
	{ "countries", "name", 25 },
};

static uint32_t
d_column_type(void *arg, const char *schema, const char *table, const char *column)
{
	(void)arg;
	(void)schema;
	for (size_t i = 0; i < NK_ARRAY_LEN(dcols); i++)
		if (strcmp(dcols[i].table, table) == 0 && strcmp(dcols[i].column, column) == 0)
			return dcols[i].oid;
	return 0;
}

/* Columns in table order (positional INSERT of MERGE). */
static const char *
d_column_name(void *arg, const char *schema, const char *table, uint32_t attnum)
{
	uint32_t n = 0;

	(void)arg;
	(void)schema;
	for (size_t i = 0; i < NK_ARRAY_LEN(dcols); i++)
		if (strcmp(dcols[i].table, table) == 0 && ++n == attnum)
			return dcols[i].column;
	return NULL;
}

static const struct plan_catalog dcat = { NULL, d_column_type, d_column_name, NULL, 1, NULL,
					  NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL };

static void
setup_dist_image(void)
{
	struct topo_model *m = fx_storefront();
	size_t size = topo_image_size(m);

	dimg = aligned_alloc(8, (size + 7) & ~(size_t)7);
	ck_assert_ptr_nonnull(dimg);
	ck_assert_int_eq(topo_image_build(m, 1, dimg, size), (ssize_t)size);
	topo_model_free(m);
}

static void
teardown_dist_image(void)
{
	free(dimg);
	dimg = NULL;
}

static bool
dplan(struct rt_fx *fx, const char *sql, struct plan *out, struct nk_error *err)
{
	struct plan_session sess;
	struct plan_input in;

	plan_session_init(&sess, "store");
	rt_parse(fx, sql);
	memset(&in, 0, sizeof(in));
	in.topo = dimg;
	in.cat = &dcat;
	in.sess = &sess;
	in.norm = &fx->norm;
	return plan_build(fx->a, fx->s, &in, out, err);
}

/* ---- refused: each row would not come from exactly one shard ---- */

#define NK(code, sentence) "NK013", "not implemented: [" #code "] " sentence
#define J113 NK(113, "This cross-shard join expression cannot be assigned to one input.")
#define SUBQ(t) "0A000", "subquery over sharded table \"" t "\" is not joined to its outer " \
		"query by the shard key"
#define OP(w, t) "0A000", w " in a subquery over sharded table \"" t "\" cannot be applied " \
		 "across shards"

static const struct {
	const char *sql, *sqlstate, *message;
} refused[] = {
	/* the sharded table on the nullable side, the preserved side everywhere */
	{ "SELECT g FROM generate_series(1, 500) g LEFT JOIN orders ON id = g", J113 },
	{ "SELECT * FROM countries k LEFT JOIN customers c ON c.country = k.code", J113 },
	{ "SELECT * FROM customers c RIGHT JOIN countries k ON c.country = k.code", J113 },
	{ "SELECT count(*) FROM (VALUES (1), (2)) v(x) LEFT JOIN orders o ON o.customer_id = v.x",
	  J113 },
	{ "SELECT * FROM countries k FULL JOIN customers c ON c.country = k.code",
	  NK(63, "This join type is unavailable.") },
	{ "SELECT * FROM countries k FULL JOIN customers c ON c.country > k.code",
	  NK(112, "This full outer join has no usable equality key.") },
	{ "SELECT * FROM countries k LEFT JOIN LATERAL (SELECT * FROM customers c WHERE "
	  "c.country = k.code) x ON true", J113 },
	/* subqueries over sharded rows in a statement whose FROM has none */
	{ "SELECT (SELECT count(*) FROM orders)", SUBQ("orders") },
	{ "SELECT g, (SELECT max(id) FROM orders) FROM generate_series(1, 3) g", SUBQ("orders") },
	{ "SELECT * FROM countries k WHERE EXISTS (SELECT 1 FROM customers c WHERE "
	  "c.country = k.code)", SUBQ("customers") },
	{ "SELECT * FROM countries k WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE "
	  "c.country = k.code)", SUBQ("customers") },
	{ "SELECT * FROM countries WHERE code IN (SELECT country FROM customers)",
	  SUBQ("customers") },
	{ "SELECT k.code, (SELECT count(*) FROM customers c WHERE c.country = k.code) FROM "
	  "countries k", SUBQ("customers") },
	{ "SELECT * FROM countries k WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id IN "
	  "(1, 2, 3, 4, 5, 6) AND c.country = k.code)", SUBQ("customers") },
	/* per-shard clauses of subqueries over partitioned rows */
	{ "SELECT * FROM (SELECT * FROM orders ORDER BY id LIMIT 3) s", OP("LIMIT or OFFSET",
									     "orders") },
	{ "SELECT * FROM (SELECT status, count(*) FROM orders GROUP BY status) s",
	  OP("an aggregate or GROUP BY", "orders") },
	{ "SELECT * FROM (SELECT count(*) FROM orders) s", OP("an aggregate or GROUP BY",
							       "orders") },
	/* the key of a nullable side: its NULL group gathers rows of every shard */
	{ "WITH w AS (SELECT o.customer_id, count(*) FROM orders o RIGHT JOIN customers c ON "
	  "o.customer_id = c.id GROUP BY o.customer_id) SELECT * FROM w",
	  OP("an aggregate or GROUP BY", "customers") },
	{ "WITH s AS (SELECT DISTINCT status FROM orders) SELECT * FROM s", OP("DISTINCT",
										"orders") },
	{ "SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) FROM orders) s",
	  NK(106, "This window-function shape is unavailable across shards.") },
	/* the top level needs every row in one place: the router reads the tables first */
	{ "SELECT id, row_number() OVER (ORDER BY id) FROM orders",
	  NK(106, "This window-function shape is unavailable across shards.") },
	{ "SELECT o.id, rank() OVER (PARTITION BY c.country ORDER BY o.total) FROM orders o "
	  "JOIN customers c ON c.id = o.customer_id",
	  NK(106, "This window-function shape is unavailable across shards.") },
	{ "SELECT id, row_number() OVER (ORDER BY id) FROM orders FOR UPDATE",
	  NK(106, "This window-function shape is unavailable across shards.") },
	{ "SELECT count(*), row_number() OVER () FROM orders",
	  NK(149, "Window functions inside aggregates are unavailable.") },
	{ "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM orders", "0A000",
	  "aggregate percentile_cont() cannot be combined across shards" },
	{ "SELECT status, corr(total, id) FROM orders GROUP BY status", "0A000",
	  "aggregate corr() cannot be combined across shards" },
	{ "SELECT my_agg(DISTINCT total) FROM orders", NK(212, "User-defined aggregate transition "
	  "functions are unavailable in the evaluation engine.") },
	{ "SELECT * FROM (SELECT id FROM orders UNION SELECT id FROM customers) s",
	  OP("UNION", "orders") },
	{ "(SELECT id FROM customers ORDER BY id LIMIT 2) UNION ALL (SELECT id FROM customers)",
	  OP("LIMIT or OFFSET", "customers") },
	/* arms and statements without sharded rows */
	{ "SELECT id FROM customers UNION ALL SELECT 1", "0A000", "UNION ALL arm without a "
	  "sharded table cannot be combined with arms over several shards" },
	{ "SELECT id FROM customers UNION ALL SELECT 1 FROM countries", "0A000", "UNION ALL arm "
	  "without a sharded table cannot be combined with arms over several shards" },
	{ "WITH w AS (SELECT * FROM orders) SELECT 1", "0A000", "statement over several shards "
	  "reads no sharded table in its FROM clause" },
	{ "WITH d AS (DELETE FROM orders WHERE total > 10) SELECT 1", "0A000", "statement over "
	  "several shards reads no sharded table in its FROM clause" },
	{ "WITH w AS (SELECT * FROM orders) SELECT * FROM w a, w b", J113 },
	{ "WITH RECURSIVE r(n) AS (SELECT customer_id FROM orders UNION ALL SELECT n + 1 FROM r "
	  "WHERE n < 3) SELECT * FROM r", "0A000", "WITH RECURSIVE over sharded table \"orders\" "
	  "is unavailable across shards" },
	{ "WITH i AS (INSERT INTO orders VALUES (5, 77) RETURNING *) SELECT * FROM i", "0A000",
	  "INSERT in a WITH query of a statement over several shards is unavailable" },
	/* NULL NOT IN (<empty>) is true: the tested key must not come from a nullable side */
	{ "SELECT a.name FROM order_items i FULL JOIN customers a ON i.customer_id = a.id WHERE "
	  "i.customer_id NOT IN (SELECT customer_id FROM order_items)", J113 },
	/* join equalities that do not hold for every row */
	{ "SELECT * FROM customers c, orders o WHERE c.id = o.customer_id OR o.id > 3", J113 },
	{ "SELECT * FROM (customers c CROSS JOIN orders o) LEFT JOIN countries k ON "
	  "c.id = o.customer_id", J113 },
	/* the merge cannot combine a set-returning function beside aggregates */
	{ "SELECT generate_series(1, 2), count(*) FROM orders", "0A000", "set-returning function "
	  "in the select list of an aggregate query is unavailable across shards" },
	/* reference copies written from a part of a sharded table */
	{ "UPDATE countries SET name = 'x' WHERE code IN (SELECT country FROM customers WHERE "
	  "id = 5)", "0A000", "write to reference table \"countries\" cannot read sharded table "
	  "\"customers\"" },
	{ "DELETE FROM countries k WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE "
	  "c.country = k.code)", "0A000", "write to reference table \"countries\" cannot read "
	  "sharded table \"customers\"" },
	{ "WITH u AS (UPDATE countries SET name = 'x' RETURNING *) SELECT * FROM u", "0A000",
	  "data-modifying WITH on reference table \"countries\" is unavailable" },
	{ "WITH u AS (DELETE FROM countries WHERE code = 'x') INSERT INTO orders VALUES (5, 1)",
	  "0A000", "data-modifying WITH on reference table \"countries\" is unavailable" },
	/* MERGE INSERT: the row is written on the source row's shard whatever its key */
	{ "MERGE INTO orders o USING countries k ON o.status = k.code WHEN NOT MATCHED THEN "
	  "INSERT VALUES (5, 777, k.code, 1)", NK(121, "This MERGE shape is unavailable.") },
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id AND o.id = "
	  "i.order_id WHEN NOT MATCHED THEN INSERT (customer_id, id) VALUES (i.order_id, i.line)",
	  NK(121, "This MERGE shape is unavailable.") },
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id WHEN NOT "
	  "MATCHED THEN INSERT DEFAULT VALUES", NK(121, "This MERGE shape is unavailable.") },
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id WHEN MATCHED "
	  "THEN UPDATE SET customer_id = 3", NK(145, "Updating an index column is unavailable.") },
	/* DML with the same subqueries */
	{ "UPDATE orders o SET status = 'x' WHERE o.total > (SELECT avg(total) FROM orders)",
	  J113 },
};

/* Refused above with nothing the executor could evaluate first: every other refusal names
 * a scope to evaluate (plan.materialize) or a table to read through the router
 * (plan.broadcast), route_subq.c. */
static const char *const not_evaluated[] = {
	"WITH w AS (SELECT * FROM orders) SELECT 1",
	"WITH d AS (DELETE FROM orders WHERE total > 10) SELECT 1",
	"WITH RECURSIVE r(n) AS (SELECT customer_id FROM orders UNION ALL SELECT n + 1 "
	"FROM r WHERE n < 3) SELECT * FROM r",
	"WITH i AS (INSERT INTO orders VALUES (5, 77) RETURNING *) SELECT * FROM i",
	"SELECT generate_series(1, 2), count(*) FROM orders",
	"SELECT id, row_number() OVER (ORDER BY id) FROM orders FOR UPDATE",
	"UPDATE countries SET name = 'x' WHERE code IN (SELECT country FROM customers "
	"WHERE id = 5)",
	"DELETE FROM countries k WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE "
	"c.country = k.code)",
	"WITH u AS (UPDATE countries SET name = 'x' RETURNING *) SELECT * FROM u",
	"WITH u AS (DELETE FROM countries WHERE code = 'x') INSERT INTO orders VALUES "
	"(5, 1)",
	"MERGE INTO orders o USING countries k ON o.status = k.code WHEN NOT MATCHED "
	"THEN INSERT VALUES (5, 777, k.code, 1)",
	"MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id AND "
	"o.id = i.order_id WHEN NOT MATCHED THEN INSERT (customer_id, id) VALUES "
	"(i.order_id, i.line)",
	"MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id WHEN "
	"NOT MATCHED THEN INSERT DEFAULT VALUES",
	"MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id WHEN "
	"MATCHED THEN UPDATE SET customer_id = 3",
};

START_TEST(test_dist_refused)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	bool evaluable = true;

	ck_assert_msg(!dplan(&fx, refused[_i].sql, &p, &err), "%s: planned (%s, %u shards)",
		      refused[_i].sql, plan_kind_str(p.kind), p.nshards);
	ck_assert_msg(strcmp(err.sqlstate, refused[_i].sqlstate) == 0 &&
		      strcmp(err.message, refused[_i].message) == 0, "%s: %s %s, want %s %s",
		      refused[_i].sql, err.sqlstate, err.message, refused[_i].sqlstate,
		      refused[_i].message);
	for (size_t k = 0; k < NK_ARRAY_LEN(not_evaluated); k++)
		evaluable = evaluable && strcmp(refused[_i].sql, not_evaluated[k]) != 0;
	ck_assert_msg((p.materialize > 0 || p.broadcast > 0) == evaluable,
		      "%s: materialize %u, broadcast %u", refused[_i].sql, p.materialize,
		      p.broadcast);
	if (strstr(refused[_i].message, "not joined to its outer") != NULL &&
	    strstr(refused[_i].sql, "= k.code)") != NULL)	/* correlated: its table's rows */
		ck_assert_msg(p.materialize == 0 && p.broadcast > 0, "%s: materialize %u",
			      refused[_i].sql, p.materialize);
	rt_fx_done(&fx);
}
END_TEST

/* ---- planned: one shard, or each row from one shard ---- */

#define ALL4 "shard-a,shard-b,shard-c,shard-d"

static const struct {
	const char *sql;
	enum plan_kind kind;
	const char *shards;	/* a uid list, or "c:<id>" for customer <id>'s shard */
} planned[] = {
	/* the colleague's report: the nullable side's ON pins it to one shard */
	{ "WITH s AS MATERIALIZED (SELECT 1) SELECT g FROM s, generate_series(1, 500) g LEFT "
	  "JOIN orders ON customer_id = 5 AND customer_id = g", PLAN_SINGLE, "c:5" },
	{ "SELECT * FROM countries k LEFT JOIN customers c ON c.country = k.code AND c.id = 7",
	  PLAN_SINGLE, "c:7" },
	{ "SELECT * FROM customers c RIGHT JOIN countries k ON c.country = k.code AND c.id = 7",
	  PLAN_SINGLE, "c:7" },
	/* a WHERE key predicate on the nullable side rejects its NULL-extended rows */
	{ "SELECT * FROM countries k LEFT JOIN customers c ON c.country = k.code WHERE c.id IN "
	  "(1, 2, 3, 4, 5, 6)", PLAN_SHARD_SET, ALL4 },
	{ "SELECT * FROM countries k FULL JOIN customers c ON c.country = k.code WHERE "
	  "c.id = ANY(ARRAY[1, 2, 3, 4, 5, 6])", PLAN_SHARD_SET, ALL4 },
	/* ... but not a preserved side co-located with it */
	{ "SELECT * FROM customers c LEFT JOIN orders o ON o.customer_id = c.id AND "
	  "o.customer_id = 5", PLAN_SCATTER, ALL4 },
	/* co-located outer joins and reference tables on the preserved or the inner side */
	{ "SELECT * FROM customers c LEFT JOIN orders o ON o.customer_id = c.id", PLAN_SCATTER,
	  ALL4 },
	{ "SELECT * FROM customers c FULL JOIN orders o ON o.customer_id = c.id", PLAN_SCATTER,
	  ALL4 },
	{ "SELECT * FROM customers c LEFT JOIN countries k ON k.code = c.country", PLAN_SCATTER,
	  ALL4 },
	{ "SELECT count(*) FROM countries k JOIN customers c ON c.country = k.code",
	  PLAN_SCATTER, ALL4 },
	/* a NULL in an IN list matches no row (and the list is still the key's) */
	{ "SELECT * FROM customers WHERE id IN (5, NULL)", PLAN_SINGLE, "c:5" },
	{ "SELECT * FROM customers WHERE id = ANY (ARRAY[NULL, 5])", PLAN_SINGLE, "c:5" },
	/* windows partitioned by the shard key: each shard runs them */
	{ "SELECT id, sum(total) OVER (PARTITION BY customer_id) FROM orders ORDER BY 2",
	  PLAN_SCATTER, ALL4 },
	{ "SELECT o.id, rank() OVER w FROM orders o JOIN customers c ON c.id = o.customer_id "
	  "WINDOW w AS (PARTITION BY c.id ORDER BY o.total)", PLAN_SCATTER, ALL4 },
	/* ... and on one shard anything goes */
	{ "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total), row_number() OVER () "
	  "FROM orders WHERE customer_id = 5", PLAN_SINGLE, "c:5" },
	{ "SELECT * FROM countries k, LATERAL (SELECT * FROM customers c WHERE "
	  "c.country = k.code) x", PLAN_SCATTER, ALL4 },
	/* a correlated subquery's own key predicate does not narrow the outer query */
	{ "SELECT c.id, (SELECT count(*) FROM orders o WHERE o.customer_id = c.id AND "
	  "o.customer_id = 5) FROM customers c", PLAN_SCATTER, ALL4 },
	{ "SELECT * FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE "
	  "o.customer_id = c.id AND o.customer_id IN (1, 2))", PLAN_SCATTER, ALL4 },
	{ "SELECT * FROM customers c WHERE c.id = 5 AND EXISTS (SELECT 1 FROM orders o WHERE "
	  "o.customer_id = c.id)", PLAN_SINGLE, "c:5" },
	/* correlated on the key: any clause inside is exact for the outer row */
	{ "SELECT * FROM customers c, LATERAL (SELECT * FROM orders o WHERE o.customer_id = c.id "
	  "ORDER BY id LIMIT 1) x", PLAN_SCATTER, ALL4 },
	{ "SELECT * FROM customers c WHERE 2 < (SELECT count(*) FROM orders o WHERE "
	  "o.customer_id = c.id)", PLAN_SCATTER, ALL4 },
	/* key IN (SELECT key ...): a co-located semi-join (also in DML) */
	{ "SELECT * FROM customers c WHERE c.id IN (SELECT customer_id FROM orders WHERE "
	  "total > 5)", PLAN_SCATTER, ALL4 },
	{ "SELECT count(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders GROUP "
	  "BY customer_id HAVING count(*) > 1)", PLAN_SCATTER, ALL4 },
	{ "DELETE FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE name = 'x')",
	  PLAN_SCATTER, ALL4 },
	/* subquery clauses that keep rows of one key together */
	{ "SELECT * FROM (SELECT customer_id, count(*) FROM orders GROUP BY customer_id) s",
	  PLAN_SCATTER, ALL4 },
	{ "SELECT * FROM (SELECT DISTINCT customer_id, status FROM orders) s", PLAN_SCATTER,
	  ALL4 },
	{ "SELECT * FROM (SELECT id, sum(total) OVER (PARTITION BY customer_id) FROM orders) s",
	  PLAN_SCATTER, ALL4 },
	{ "SELECT * FROM (SELECT id FROM orders UNION ALL SELECT id FROM customers) s",
	  PLAN_SCATTER, ALL4 },
	{ "SELECT DISTINCT status FROM orders UNION SELECT 'x'", PLAN_SCATTER, ALL4 },
	{ "SELECT id FROM customers UNION (SELECT customer_id FROM orders UNION ALL SELECT 7)",
	  PLAN_SCATTER, ALL4 },
	/* pinned: whatever the shape, one shard has every row */
	{ "SELECT * FROM countries k WHERE EXISTS (SELECT 1 FROM customers c WHERE c.id = 9 AND "
	  "c.country = k.code)", PLAN_SINGLE, "c:9" },
	{ "SELECT (SELECT count(*) FROM orders WHERE customer_id = 3)", PLAN_SINGLE, "c:3" },
	{ "WITH d AS (DELETE FROM orders RETURNING *) SELECT count(*) FROM d", PLAN_SCATTER,
	  ALL4 },
	{ "UPDATE orders o SET total = (SELECT max(qty) FROM order_items i WHERE i.customer_id = "
	  "o.customer_id AND i.order_id = o.id)", PLAN_SCATTER, ALL4 },
	{ "UPDATE countries SET name = 'x' WHERE code IN (SELECT code FROM countries)",
	  PLAN_EVERY_COPY, ALL4 },
	/* MERGE INSERT of the co-located source's key: each row on its key's shard */
	{ "MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id AND o.id = "
	  "i.order_id WHEN NOT MATCHED THEN INSERT (customer_id, id) VALUES (i.customer_id, "
	  "i.order_id) WHEN MATCHED THEN UPDATE SET status = 'm'", PLAN_SCATTER, ALL4 },
	{ "MERGE INTO orders o USING countries k ON o.status = k.code WHEN MATCHED THEN DELETE",
	  PLAN_SCATTER, ALL4 },
	{ "MERGE INTO orders o USING (SELECT 1) s ON o.customer_id = 7 WHEN NOT MATCHED THEN "
	  "INSERT VALUES (7, 1)", PLAN_SINGLE, "c:7" },
};

/* "c:<id>": the shard of customer <id>; else the list itself. */
static void
want_shards(const char *spec, char *out, size_t cap)
{
	uint32_t g = topo_image_find_group(dimg, "customer_data");
	uint32_t i = topo_image_find_index(dimg, "by_customer");
	struct ks_value kv;
	struct nk_error err;
	uint32_t r;

	if (strncmp(spec, "c:", 2) != 0) {
		snprintf(out, cap, "%s", spec);
		return;
	}
	ck_assert(ks_value_from_text(KS_TYPE_INT8, spec + 2, strlen(spec + 2), NULL, &kv, &err));
	ck_assert(topo_image_route(dimg, g, i, &kv, &r, &err));
	ks_value_cleanup(&kv);
	snprintf(out, cap, "%s", topo_image_range_shard(dimg, g, r));
}

START_TEST(test_dist_planned)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;
	char want[128], got[128] = "";
	size_t len = 0;

	ck_assert_msg(dplan(&fx, planned[_i].sql, &p, &err), "%s: %s %s", planned[_i].sql,
		      err.sqlstate, err.message);
	want_shards(planned[_i].shards, want, sizeof(want));
	for (uint32_t k = 0; k < p.nshards; k++)
		len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", k ? "," : "",
					p.shards[k]);
	ck_assert_msg(p.kind == planned[_i].kind && strcmp(got, want) == 0,
		      "%s: %s on %s, want %s on %s", planned[_i].sql, plan_kind_str(p.kind), got,
		      plan_kind_str(planned[_i].kind), want);
	rt_fx_done(&fx);
}
END_TEST

/* What the executor is told to read first (plan.broadcast, 1-based in stmt.rels; or the
 * scope plan.materialize): the lone table beside co-located ones, a correlated subquery's
 * table when the correlation is an unqualified outer column in an =, a join's tables rather
 * than a derived table that would need reads of its own. */
static const struct {
	const char *sql;
	const char *broadcast;	/* the table's name; NULL: none */
	uint32_t materialize;
} reads_first[] = {
	{ "SELECT * FROM customers c JOIN orders o ON c.id = o.id JOIN order_items i "
	  "ON i.customer_id = o.customer_id AND i.order_id = o.id", "customers", 0 },
	{ "SELECT * FROM orders o JOIN order_items i ON i.customer_id = o.customer_id "
	  "JOIN customers c ON c.id = o.id", "customers", 0 },
	{ "SELECT code, (SELECT count(*) FROM customers c WHERE c.country = code) "
	  "FROM countries", "customers", 0 },
	{ "SELECT count(*) FROM (SELECT o.id FROM orders o JOIN customers c ON c.id = o.id) s",
	  "customers", 0 },
	{ "SELECT count(*) FROM (SELECT o.id FROM orders o JOIN order_items i ON "
	  "i.customer_id = o.customer_id ORDER BY 1 LIMIT 3) s", NULL, 1 },
};

START_TEST(test_dist_reads_first)
{
	struct rt_fx fx;
	struct plan p;
	struct nk_error err;

	ck_assert_msg(!dplan(&fx, reads_first[_i].sql, &p, &err), "%s: planned",
		      reads_first[_i].sql);
	const char *got = p.broadcast > 0 ? p.stmt->rels[p.broadcast - 1].name : NULL;

	ck_assert_msg((got && reads_first[_i].broadcast ? strcmp(got, reads_first[_i].broadcast)
							 == 0 : got == reads_first[_i].broadcast) &&
		      p.materialize == reads_first[_i].materialize,
		      "%s: broadcast %s materialize %u (%s)", reads_first[_i].sql,
		      got ? got : "-", p.materialize, err.message);
	rt_fx_done(&fx);
}
END_TEST

/* router_add_dist_tests: see router_fixtures.h. */
void
router_add_dist_tests(Suite *s)
{
	TCase *tc = tcase_create("dist");

	tcase_add_unchecked_fixture(tc, setup_dist_image, teardown_dist_image);
	tcase_add_loop_test(tc, test_dist_refused, 0, NK_ARRAY_LEN(refused));
	tcase_add_loop_test(tc, test_dist_planned, 0, NK_ARRAY_LEN(planned));
	tcase_add_loop_test(tc, test_dist_reads_first, 0, NK_ARRAY_LEN(reads_first));
	suite_add_tcase(s, tc);
}
