"""
The planner's randomized differential audit (plan_fuzz.py holds the generator): a fixed-seed
run of generated statements over the storefront schema through neki (4 data shards) and on
the reference server, plus the wrong-result shapes it found as fixed cases, each either
answered like the reference or refused with the code doc/router.md gives.

PLAN_FUZZ_N (default 4000) statements from PLAN_FUZZ_SEED (default 1); a larger run:
PLAN_FUZZ_N=5000 PLAN_FUZZ_SEED=7 /usr/bin/python3 -m pytest test/routing/test_plan_fuzz.py
"""
import contextlib
import os

import pytest

from plan_fuzz import Query, Runner, fuzz, load, tables_differ
from test_routing import SCHEMA, Store, create_schema, routing_neki, sharded_database, topology

try:
    import psycopg
except ImportError:
    psycopg = None


@contextlib.contextmanager
def fuzz_store(cluster, prefix):
    """A routed storefront database with the fuzz data set: yields (store, data)."""
    with sharded_database(cluster, prefix) as db, \
            routing_neki(cluster, db, topology(db), Store) as st:
        create_schema(st)
        data = load(st.run, lambda sql: st.ref().execute(sql),
                    lambda: st.placement("customers", "id"))
        yield st, data


@pytest.fixture(scope="module")
def fuzzed(pg_cluster):
    with fuzz_store(pg_cluster, "plan_fuzz") as pair:
        yield pair


def test_data_set_shape(fuzzed):
    """One shard holds one customer and no orders, one shard a single order."""
    st, data = fuzzed
    counts = {s: st.shard_rows(s, "SELECT (SELECT count(*) FROM customers), "
                                  "(SELECT count(*) FROM orders)")[0]
              for s in st.cluster.shards}
    assert sorted(counts.values())[0] == (1, 0), counts
    assert any(o == 1 for _, o in counts.values()), counts


def test_fixed_seed_run(fuzzed):
    st, data = fuzzed
    n = int(os.environ.get("PLAN_FUZZ_N", "4000"))
    seed = int(os.environ.get("PLAN_FUZZ_SEED", "1"))
    runner = Runner(st.connect, st.ref, seed=seed)
    try:
        secs = fuzz(runner, data, seed, n)
        diverged = tables_differ(runner)
    finally:
        runner.close()
    print(f"\n{n} statements (seed {seed}) in {secs:.1f}s\n{runner.summary()}")
    assert not runner.failures, runner.summary()
    assert not diverged, f"rolled-back writes left {diverged} different"
    # refusals must not hide everything: most statements are answered
    assert runner.answered() >= n // 2, runner.summary()


# ---- the shapes the audit found, fixed ------------------------------------------------

def ids_of(data, shard_index):
    """Customer ids of the data set on its <shard_index>-th shard (sorted by uid)."""
    return sorted(data["placement"][sorted(data["placement"])[shard_index]])


def regression_cases(data):
    """(sql, None) must equal the reference; (sql, (sqlstate, text)) must be refused so."""
    a, = ids_of(data, 0)            # the only customer of the first shard (no orders)
    c = ids_of(data, 2)             # customers of the third shard
    d = ids_of(data, 3)
    return [
        # the reported one: the nullable side's ON pins it to one shard
        (f"WITH s AS MATERIALIZED (SELECT 1) SELECT g FROM s, generate_series(1, 500) g "
         f"LEFT JOIN orders ON customer_id = {c[0]} AND customer_id = g", None),
        (f"SELECT k.code, c.id FROM countries k LEFT JOIN customers c ON c.country = k.code "
         f"AND c.id = {d[0]}", None),
        # (the nullable side read through the router, then joined)
        ("SELECT g FROM generate_series(1, 500) g LEFT JOIN orders ON id = g", None),
        ("SELECT count(*) FROM countries k LEFT JOIN customers c ON c.country = k.code",
         None),
        ("SELECT * FROM countries k FULL JOIN customers c ON c.country = k.code", None),
        (f"SELECT k.code, c.id FROM countries k LEFT JOIN customers c ON c.country = k.code "
         f"WHERE c.id IN ({a}, {c[0]}, {d[0]})", None),
        # subqueries over sharded rows in a statement whose FROM has none: the router
        # evaluates an uncorrelated one first, the table of a correlated one
        ("SELECT (SELECT count(*) FROM orders)", None),
        ("SELECT g, (SELECT max(id) FROM orders) FROM generate_series(1, 3) g", None),
        ("SELECT * FROM countries k WHERE NOT EXISTS (SELECT 1 FROM customers c WHERE "
         "c.country = k.code)", None),
        ("SELECT k.code, (SELECT count(*) FROM customers c WHERE c.country = k.code) FROM "
         "countries k", None),
        (f"SELECT (SELECT count(*) FROM orders WHERE customer_id = {c[0]})", None),
        # a correlated subquery's key predicate does not narrow the outer query
        (f"SELECT c.id, (SELECT count(*) FROM orders o WHERE o.customer_id = c.id AND "
         f"o.customer_id = {c[1]}) FROM customers c", None),
        (f"SELECT id FROM customers c WHERE NOT EXISTS (SELECT 1 FROM orders o WHERE "
         f"o.customer_id = c.id AND o.customer_id IN ({c[0]}, {d[0]}))", None),
        # key IN (SELECT key ...): a co-located semi-join
        ("SELECT id, name FROM customers c WHERE c.id IN (SELECT customer_id FROM orders "
         "WHERE total > 5)", None),
        ("SELECT count(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders "
         "GROUP BY customer_id HAVING count(*) > 1)", None),
        ("SELECT a.name FROM order_items i FULL JOIN customers a ON i.customer_id = a.id "
         "WHERE i.customer_id NOT IN (SELECT customer_id FROM order_items)", None),
        ("SELECT a.name FROM order_items i FULL JOIN customers a ON i.customer_id = a.id "
         "WHERE i.customer_id NOT IN (SELECT customer_id FROM order_items WHERE qty > 1)",
         None),
        # clauses of subqueries over partitioned rows
        ("SELECT * FROM (SELECT customer_id, count(*) FROM orders GROUP BY customer_id) s",
         None),
        # (a derived table's: evaluated by the router first)
        ("SELECT * FROM (SELECT customer_id, id FROM orders ORDER BY 1, 2 LIMIT 3) s", None),
        ("SELECT * FROM (SELECT status, count(*) FROM orders GROUP BY status) s", None),
        # (a WITH query's: evaluated by the router first)
        ("WITH w AS (SELECT DISTINCT status FROM orders) SELECT * FROM w", None),
        ("WITH w AS (SELECT o.customer_id, count(*) FROM orders o RIGHT JOIN customers c ON "
         "o.customer_id = c.id GROUP BY o.customer_id) SELECT * FROM w", None),
        ("SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) FROM orders) s", None),
        ("SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) FROM ONLY orders) s",
         ("NK013", "[106]")),
        ("SELECT * FROM (SELECT id, sum(total) OVER (PARTITION BY customer_id) FROM orders) s",
         None),
        # set operations and statements without sharded rows in FROM
        ("SELECT id FROM customers UNION ALL SELECT 1", None),   # (its arm read first)
        ("SELECT status FROM orders UNION SELECT 'x'", None),
        ("WITH d AS (DELETE FROM orders WHERE total > 1000) SELECT 1",
         ("0A000", "reads no sharded table in its FROM clause")),
        (f"WITH i AS (INSERT INTO orders VALUES ({c[0]}, 99999) RETURNING *) SELECT * FROM i",
         ("0A000", "INSERT in a WITH query")),
        # equalities under OR, set-returning functions beside aggregates
        ("SELECT * FROM customers c, orders o WHERE c.id = o.customer_id OR o.total > 30",
         None),
        ("SELECT generate_series(1, 2), count(*) FROM orders",
         ("0A000", "set-returning function in the select list of an aggregate query")),
        # reference copies written from a part of a sharded table
        ("UPDATE countries k SET name = name || '!' WHERE NOT EXISTS (SELECT 1 FROM "
         "customers c WHERE c.country = k.code)", ("0A000", "write to reference table")),
        # MERGE INSERT rows went to the source row's shard whatever their key
        ("MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id AND "
         "o.id = i.order_id + 1000 WHEN NOT MATCHED THEN INSERT VALUES (i.order_id, "
         "i.line + 5000, 'm', 1)", ("NK013", "[121]")),
        ("MERGE INTO orders o USING countries k ON o.status = k.code WHEN NOT MATCHED THEN "
         f"INSERT VALUES ({c[0]}, 7000 + ascii(k.code), k.code, 1)", ("NK013", "[121]")),
    ]


def test_fixed_regressions(fuzzed):
    st, data = fuzzed
    runner = Runner(st.connect, st.ref, extended_share=0)
    try:
        for sql, refusal in regression_cases(data):
            if refusal is None:
                why = runner.check(Query(sql, [], ordered=False))
                assert why is None, f"{sql}: {why}"
                assert not runner.refusals, f"{sql}: refused {runner.refusals}"
                continue
            with st.connect() as conn, pytest.raises(psycopg.Error) as ei:
                psycopg.ClientCursor(conn).execute(sql)
            assert ei.value.diag.sqlstate == refusal[0], (sql, str(ei.value))
            assert refusal[1] in str(ei.value), (sql, str(ei.value))
            with st.ref() as conn:          # a valid statement on one server
                conn.execute("BEGIN")
                conn.execute(sql)
                conn.execute("ROLLBACK")
            runner.refusals.clear()
        # the refused INSERT in WITH inserted nothing anywhere
        assert st.run("SELECT count(*) FROM orders WHERE id = 99999") == [(0,)]
        assert not tables_differ(runner)
    finally:
        runner.close()


def test_fixed_writes(fuzzed):
    """Writes compared by their effect, in a transaction rolled back after."""
    st, data = fuzzed
    runner = Runner(st.connect, st.ref, extended_share=0)
    try:
        for sql, target in [
                ("DELETE FROM orders WHERE customer_id IN (SELECT id FROM customers WHERE "
                 "name = 'ann')", "orders"),
                ("UPDATE orders o SET total = (SELECT max(qty) FROM order_items i WHERE "
                 "i.customer_id = o.customer_id AND i.order_id = o.id) RETURNING o.id, o.total",
                 "orders"),
                ("UPDATE customers c SET name = c.name || '+' WHERE c.id NOT IN (SELECT "
                 "customer_id FROM orders) RETURNING c.id, c.name", "customers"),
                ("MERGE INTO orders o USING order_items i ON o.customer_id = i.customer_id "
                 "AND o.id = i.order_id * 10 + i.line WHEN NOT MATCHED THEN INSERT VALUES "
                 "(i.customer_id, i.order_id * 10 + i.line, 'm', i.qty) WHEN MATCHED THEN "
                 "UPDATE SET status = 'x'", "orders")]:
            why = runner.check(Query(sql, [], kind="dml", target=target))
            assert why is None and not runner.refusals, f"{sql}: {why} {runner.refusals}"
            assert runner.last[0][0] == "ok", (sql, runner.last)
    finally:
        runner.close()
