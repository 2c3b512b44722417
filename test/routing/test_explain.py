"""
EXPLAIN through neki on the storefront (4 data shards + authoritative, fixtures of
test_routing.py): EXPLAIN (NEKI_PLAN [, ANALYZE] [, FORMAT TEXT|JSON]) with the spec's
operator names and fields, ANALYZE running the statement and reporting each shard's actual
rows and time, plain EXPLAIN of a single-route statement answered by that shard, NK017 for
the others, and the refusals 30-33; then NK013 codes of the planner that reach a session
(67, 103, 121, 145 for a GSI column, 150, 333, PL/pgSQL limits of DO).
"""
import json
import re

import pytest

from test_routing import psycopg, store, loaded  # noqa: F401  (fixtures)


def plan_text(store, sql):
    return "\n".join(r[0] for r in store.run(sql))


def shard_of(store, cid):
    return [s for s, ids in store.placement("customers", "id").items() if cid in ids][0]


def nk_error(store, sql):
    with pytest.raises(psycopg.Error) as ei:
        store.run(sql)
    return ei.value


def test_neki_plan_operators_and_fields(loaded):
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                             "SELECT name FROM customers WHERE id = 7")
    lines = text.split("\n")
    assert lines[0] == "Route [EqualUnique]"
    assert lines[1] == "  Query: SELECT name FROM customers WHERE id = $1"
    assert lines[2].startswith("  ShardGroup: ") and lines[3] == "  Values: 7"
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                             "SELECT id FROM customers WHERE id IN (1, 2, 3)")
    assert text.startswith("Collapse\n  ->  Route [IN]\n") and "Values: 1, 2, 3" in text
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT country, count(*) "
                             "FROM customers GROUP BY country ORDER BY 1 LIMIT 1")
    assert [l.strip() for l in text.split("\n")[:5]] == [
        "Limit", "->  Sort [Merge]", "->  Aggregate [Ordered]", "->  Collapse",
        "->  Route [Scatter]"]
    # JSON is the default
    (doc,), = loaded.run("EXPLAIN (NEKI_PLAN) SELECT * FROM customers WHERE id = 7")
    doc = doc if isinstance(doc, list) else json.loads(doc)
    route = doc[0]["Plan"]
    assert route["Node Type"] == "Route" and route["Operator"] == "EqualUnique"
    assert route["Values"] == ["7"] and len(route["Shards"]) == 1


def test_neki_plan_analyze_runs_and_reports_actuals(loaded):
    where = shard_of(loaded, 7)
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) "
                             "SELECT * FROM orders WHERE customer_id = 7")
    assert text.startswith("Route [EqualUnique] (actual rows=2)\n"), text
    assert re.search(rf"^  Shard {where}: actual rows=2 time=\d+\.\d{{3}} ms$", text, re.M), text
    assert re.search(r"\nExecution Time: \d+\.\d{3} ms$", text), text
    # scatter with a merge step: each shard's partial row, one row out
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) "
                             "SELECT count(*) FROM customers")
    assert text.startswith("Aggregate [Ordered] (actual rows=1)\n"), text
    assert len(re.findall(r"Shard \S+: actual rows=1 ", text)) == len(loaded.cluster.shards)
    # JSON: per-shard rows add up to the table
    (doc,), = loaded.run("EXPLAIN (NEKI_PLAN, ANALYZE) SELECT id FROM customers")
    doc = doc if isinstance(doc, list) else json.loads(doc)
    top = doc[0]["Plan"]
    route = top["Plans"][0]
    assert top["Node Type"] == "Collapse" and top["Actual Rows"] == 40
    assert sum(a["Actual Rows"] for a in route["Actual"]) == 40
    assert {a["Shard"] for a in route["Actual"]} == set(route["Shards"])
    assert doc[0]["Execution Time"] >= 0
    # ANALYZE executes: the UPDATE happened, its count is the shard's
    text = plan_text(loaded, "EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) "
                             "UPDATE orders SET status = 'analyzed' WHERE customer_id = 7")
    assert f"Shard {where}: actual rows=2 " in text, text
    assert loaded.run("SELECT DISTINCT status FROM orders WHERE customer_id = 7") == \
        [("analyzed",)]
    loaded.run("UPDATE orders SET status = CASE WHEN id % 10 = 0 THEN 'paid' ELSE 'new' END "
               "WHERE customer_id = 7")
    # the fan-out limit applies to ANALYZE only
    with loaded.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SET __neki.fanout = single")
        cur.execute("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT id FROM customers")
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("EXPLAIN (NEKI_PLAN, ANALYZE, FORMAT TEXT) SELECT id FROM customers")
        assert "exceeds __neki.fanout (single)" in str(ei.value)
    # a shard's error is the statement's error
    err = nk_error(loaded, "EXPLAIN (NEKI_PLAN, ANALYZE) SELECT 1 / 0 FROM customers "
                           "WHERE id = 7")
    assert err.diag.sqlstate == "22012"


def test_plain_explain_goes_to_the_shard(loaded):
    where = shard_of(loaded, 9)
    sql = "EXPLAIN (COSTS OFF) SELECT * FROM orders WHERE customer_id = 9"
    direct = loaded.shard_rows(where, sql)
    assert loaded.run(sql) == direct
    assert any("orders" in r[0] for r in direct)
    rows = loaded.run("EXPLAIN ANALYZE SELECT * FROM orders WHERE customer_id = 9")
    assert "actual time=" in rows[0][0] and rows[-1][0].startswith("Execution Time:")
    # a reference read goes to one copy
    assert "countries" in plan_text(loaded, "EXPLAIN SELECT * FROM countries")
    for sql in ("EXPLAIN SELECT * FROM orders",
                "EXPLAIN SELECT id FROM customers WHERE id IN (1, 2, 3)",
                "EXPLAIN ANALYZE UPDATE countries SET name = name"):
        err = nk_error(loaded, sql)
        assert err.diag.sqlstate == "NK017", sql
        assert err.diag.message_primary == "This statement requires Neki router processing"
        assert err.diag.message_hint == \
            "Use `EXPLAIN (NEKI_PLAN)` (with ANALYZE to execute) to see Neki's plan"


@pytest.mark.parametrize("sql,code,sentence", [
    ("EXPLAIN (NEKI_PLAN, BUFFERS) SELECT * FROM customers WHERE id = 1", 32,
     "This EXPLAIN option is unavailable."),
    ("EXPLAIN (BUFFERS) SELECT * FROM customers WHERE id = 1", 32,
     "This EXPLAIN option is unavailable."),
    # a shard's Postgres plan beside neki's is not built: refused, never ignored
    ("EXPLAIN (NEKI_PLAN, NEKI_PG_PLAN) SELECT * FROM customers WHERE id = 1", 32,
     "This EXPLAIN option is unavailable."),
    ("EXPLAIN (NEKI_PLAN, FORMAT YAML) SELECT 1", 33, "This EXPLAIN format is unavailable."),
    ("EXPLAIN (FORMAT XML) SELECT * FROM customers WHERE id = 1", 33,
     "This EXPLAIN format is unavailable."),
    ("EXPLAIN (NEKI_PLAN) EXECUTE p", 30,
     "This statement cannot be analyzed with EXPLAIN neki_plan."),
    ("EXPLAIN (NEKI_PLAN) WITH d AS (DELETE FROM orders WHERE customer_id = 1 RETURNING *) "
     "SELECT * FROM d", 31, "Data-modifying CTEs cannot be analyzed with EXPLAIN neki_plan."),
])
def test_explain_refusals(store, sql, code, sentence):
    err = nk_error(store, sql)
    assert err.diag.sqlstate == "NK013"
    assert err.diag.message_primary == f"not implemented: [{code}] {sentence}"


def test_renaming_an_enum_label_of_a_shard_key_is_333(store):
    """orders_by_id is sharded by its column id (topology-storefront.json): with id an enum,
    renaming one of its labels would move rows (enums hash by label). One session: after
    DDL it waits for the catalog refresh."""
    with store.connect(autocommit=True) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("CREATE TYPE order_ref AS ENUM ('a', 'b')")
        cur.execute("CREATE TYPE mood AS ENUM ('x', 'y')")
        cur.execute("CREATE TABLE orders_by_id (id order_ref NOT NULL, customer_id bigint)")
        try:
            for sql in ("ALTER TYPE order_ref RENAME VALUE 'a' TO 'z'",
                        "ALTER TYPE public.order_ref RENAME VALUE 'b' TO 'z'"):
                with pytest.raises(psycopg.Error) as ei:
                    cur.execute(sql)
                assert ei.value.diag.sqlstate == "NK013"
                assert ei.value.diag.message_primary == "not implemented: [333] Renaming " \
                    "an enum label used as a sharding key is unavailable."
            cur.execute("ALTER TYPE mood RENAME VALUE 'x' TO 'z'")   # not a shard key's
            cur.execute("ALTER TYPE order_ref ADD VALUE 'c'")        # adding is fine
            for server in store.cluster.shards:
                assert store.shard_rows(server, "SELECT enum_range(NULL::mood)::text") == \
                    [("{z,y}",)]
        finally:
            cur.execute("DROP TABLE orders_by_id")
            cur.execute("DROP TYPE order_ref, mood")


@pytest.mark.parametrize("sql,code,sentence", [
    # (ONLY: not read through the router, doc/router.md "Tables read through the router")
    ("DELETE FROM order_items i USING ONLY products p WHERE i.sku = p.sku", 103,
     "This DML source join cannot be planned safely."),
    ("UPDATE order_items i SET qty = 1 FROM ONLY products p WHERE p.sku = i.sku", 103,
     "This DML source join cannot be planned safely."),
    # orders owns the (disabled) GSI orders_by_id (topology-storefront.json)
    ("UPDATE orders SET id = 5 WHERE customer_id = 1", 145,
     "Updating an index column is unavailable."),
    ("INSERT INTO customers (id, name) VALUES (1, 'a'), (2, 'b') ORDER BY 2 DESC", 150,
     "This ORDER BY expression is unavailable for VALUES."),
    ("UPDATE customers SET name[1:2] = 'x'", 67,
     "Array-slice and multidimensional array assignment are unavailable."),
    ("MERGE INTO orders o USING (SELECT customer_id FROM order_items) i "
     "ON o.customer_id = i.customer_id WHEN MATCHED THEN DELETE", 121,
     "This MERGE shape is unavailable."),
    # DO: the PL/pgSQL limit its body hits, else 20 (the router runs no PL/pgSQL)
    ("DO $$ BEGIN RAISE; END $$", 92, "A bare RAISE is unavailable in PL/pgSQL."),
    ("DO $$ DECLARE r record; BEGIN r := ROW(1, 2); END $$", 83,
     "Non-scalar assignment targets are unavailable in PL/pgSQL."),
    ("DO $$ BEGIN PERFORM 1; END $$", 20, "This statement type is unavailable."),
])
def test_planner_refusals_reach_the_client(store, sql, code, sentence):
    err = nk_error(store, sql)
    assert err.diag.sqlstate == "NK013"
    assert err.diag.message_primary == f"not implemented: [{code}] {sentence}"
