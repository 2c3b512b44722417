"""
Statements whose top level needs every row in one place (issue 20): window functions not
partitioned by the shard key, ordered-set and hypothetical-set aggregates, the float
statistics (corr, covar_*, regr_*), user-defined aggregates, a window beside aggregates. The
router reads their sharded tables first (route_subq.c, "Tables read through the router
first"; the top level's WHERE goes with the table when it is the only FROM item) and the
statement runs on one shard over those rows, so every value is Postgres' own. Windows
partitioned by the shard key run on each shard. Each case equals the reference server
holding every row, over the simple and the extended protocol, text and binary.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import loaded, store  # noqa: F401 (module fixtures)
from test_subquery_eval import same


GATHERED = [
    # windows over every row
    "SELECT id, row_number() OVER (ORDER BY id) FROM orders",
    "SELECT id, rank() OVER (ORDER BY total DESC), dense_rank() OVER (ORDER BY status) "
    "FROM orders",
    "SELECT id, lag(total) OVER w, lead(id, 2, -1) OVER w, first_value(id) OVER w "
    "FROM orders WINDOW w AS (ORDER BY total, id)",
    "SELECT id, sum(total) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) "
    "FROM orders",
    "SELECT status, id, ntile(3) OVER (PARTITION BY status ORDER BY id), "
    "percent_rank() OVER (PARTITION BY status ORDER BY total) FROM orders",
    "SELECT id, count(*) OVER () FROM orders ORDER BY id DESC LIMIT 5",
    "SELECT * FROM (SELECT id, row_number() OVER (ORDER BY total, id) AS n FROM orders) s "
    "WHERE n <= 3",
    "WITH r AS (SELECT customer_id, id, rank() OVER (ORDER BY total) AS k FROM orders) "
    "SELECT * FROM r WHERE k < 4",
    # over a join (each table read first), and a window beside aggregates
    "SELECT o.id, c.name, rank() OVER (PARTITION BY c.country ORDER BY o.total DESC, o.id) "
    "FROM orders o JOIN customers c ON c.id = o.customer_id",
    "SELECT status, count(*), row_number() OVER (ORDER BY status) FROM orders GROUP BY status",
    "SELECT count(*), sum(count(*)) OVER () FROM orders",
    # the top level's WHERE moves into the table's read, aliases and quoting kept
    "SELECT id, row_number() OVER (ORDER BY id) FROM orders WHERE customer_id IN (1, 2, 3)",
    "SELECT id, row_number() OVER (ORDER BY id) FROM orders AS \"o\" WHERE \"o\".total > 10 "
    "AND (o.status = 'paid' OR o.id < 300) ORDER BY 2 DESC LIMIT 4",
    "SELECT o.id, cume_dist() OVER (ORDER BY o.total) FROM orders o WHERE o.status <> "
    "'group by' /* order */ ORDER BY 1",
    "SELECT id, row_number() OVER (ORDER BY id) FROM public.orders WHERE public.orders.total "
    "BETWEEN 3 AND 9 -- a comment\nORDER BY id",
    "SELECT id, cume_dist() OVER (ORDER BY total) FROM orders WHERE id IN "
    "(SELECT id FROM orders WHERE total > 5)",
    # ordered-set and hypothetical-set aggregates, the float statistics
    "SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM orders",
    "SELECT status, percentile_disc(0.25) WITHIN GROUP (ORDER BY id), "
    "mode() WITHIN GROUP (ORDER BY customer_id), "
    "percentile_cont(ARRAY[0.1, 0.9]) WITHIN GROUP (ORDER BY total) "
    "FROM orders GROUP BY status HAVING count(*) > 1",
    "SELECT rank(20) WITHIN GROUP (ORDER BY total), "
    "cume_dist(7.5) WITHIN GROUP (ORDER BY total) FROM orders",
    # (double precision sums depend on the order rows are added in, on one server too:
    # the router's read has its own order, so these compare rounded)
    "SELECT round(corr(total, id)::numeric, 9), round(covar_pop(total, id)::numeric, 6), "
    "round(regr_slope(total, id)::numeric, 9), "
    "round(regr_intercept(total, customer_id)::numeric, 9) FROM orders",
    "SELECT c.country, percentile_cont(0.5) WITHIN GROUP (ORDER BY o.total) "
    "FROM orders o JOIN customers c ON c.id = o.customer_id GROUP BY c.country",
    "SELECT (SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY total) FROM orders) AS m, "
    "count(*) FROM customers",
    # what the shard refuses, it refuses as one server does
    "SELECT percentile_cont(2) WITHIN GROUP (ORDER BY total) FROM orders",
    "SELECT id, ntile(0) OVER (ORDER BY id) FROM orders",
]


@pytest.mark.parametrize("sql", GATHERED)
def test_gathered_statement_equals_the_reference(loaded, sql):  # noqa: F811
    same(loaded, sql)


PER_SHARD = [
    "SELECT id, sum(total) OVER (PARTITION BY customer_id) FROM orders",
    "SELECT customer_id, id, row_number() OVER (PARTITION BY customer_id ORDER BY id DESC) "
    "AS n FROM orders ORDER BY n, 1, 2 LIMIT 7",
    "SELECT o.id, rank() OVER w FROM orders o JOIN customers c ON c.id = o.customer_id "
    "WINDOW w AS (PARTITION BY c.id ORDER BY o.total)",
    "SELECT * FROM (SELECT customer_id, id, row_number() OVER (PARTITION BY customer_id "
    "ORDER BY id) AS n FROM orders) s WHERE n = 1 ORDER BY 1",
]


@pytest.mark.parametrize("sql", PER_SHARD)
def test_window_partitioned_by_the_key_runs_on_each_shard(loaded, sql):  # noqa: F811
    same(loaded, sql)
    with loaded.connect(autocommit=True) as conn:
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (NEKI_PLAN, FORMAT TEXT) " + sql).fetchall())
    assert "Router Evaluation" not in plan, plan
    assert "Scatter" in plan, plan


def explain(conn, sql):
    return "\n".join(r[0] for r in conn.execute(
        "EXPLAIN (NEKI_PLAN, FORMAT TEXT) " + sql).fetchall())


def test_explain_shows_the_read_with_its_where(loaded):  # noqa: F811
    with loaded.connect(autocommit=True) as conn:
        plan = explain(conn, "SELECT id, row_number() OVER (ORDER BY id) FROM orders o "
                             "WHERE o.total > 10 ORDER BY id")
        assert "Router Evaluation" in plan, plan
        assert ('Evaluated First: SELECT "id", "total" FROM orders AS "o" WHERE o.total > 10'
                in plan), plan
        assert "Route [Scatter]" in plan, plan
        # of a join's WHERE the table's read takes the conjuncts over its own columns
        # (route_pushdown.c; the statement keeps them too)
        plan = explain(conn, "SELECT o.id, rank() OVER (ORDER BY c.name) FROM orders o "
                             "JOIN customers c ON c.id = o.customer_id WHERE o.total > 10 "
                             "AND c.name <> ''")
        assert ('Evaluated First: SELECT "customer_id", "id", "total" FROM orders AS "o" '
                'WHERE (o.total > 10)\n' in plan + "\n"), plan


@pytest.mark.parametrize("binary", [False, True])
def test_extended_protocol_with_bound_values(loaded, binary):  # noqa: F811
    """A bound value in the WHERE stays in the statement (the table is read whole); the
    results equal the reference in text and binary."""
    sqls = [("SELECT id, row_number() OVER (ORDER BY total, id) FROM orders WHERE total > %s",
             (10,)),
            ("SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY total) FROM orders "
             "WHERE status = %s", (0.5, "paid")),
            ("SELECT id, lag(id) OVER (ORDER BY id) FROM orders ORDER BY id LIMIT %s", (4,))]
    for sql, args in sqls:
        got = []
        for connect in (loaded.connect, loaded.ref):
            with connect() as conn:
                cur = conn.cursor(binary=binary)
                got.append(sorted(cur.execute(sql, args, prepare=True).fetchall(), key=repr))
                got.append(sorted(cur.execute(sql, args, prepare=True).fetchall(), key=repr))
        assert got[0] == got[1] == got[2] == got[3], sql
        assert got[0], sql


def test_in_a_transaction_sees_its_own_writes(loaded):  # noqa: F811
    """The tables are read in the session's transaction: rows it wrote count, and are gone
    after its rollback."""
    with loaded.connect(autocommit=False) as conn:
        conn.execute("INSERT INTO orders VALUES (7, 9007, 'gather', 1000000)")
        top = conn.execute("SELECT id, rank() OVER (ORDER BY total DESC) FROM orders "
                           "ORDER BY 2 LIMIT 1").fetchone()
        assert top == (9007, 1)
        conn.rollback()
        top = conn.execute("SELECT id, rank() OVER (ORDER BY total DESC) FROM orders "
                           "ORDER BY 2 LIMIT 1").fetchone()
        assert top[0] != 9007


def test_user_defined_aggregate_across_shards(loaded):  # noqa: F811
    """A user-defined aggregate has no combine: the router reads the rows and the shard
    runs it (212 before)."""
    ddl = ("CREATE AGGREGATE gather_product(numeric) (SFUNC = numeric_mul, STYPE = numeric, "
           "INITCOND = '1')")
    with loaded.connect(autocommit=True) as conn:
        conn.execute(ddl)
    with loaded.ref() as conn:
        conn.execute(ddl)
        conn.commit()
    try:
        same(loaded, "SELECT status, gather_product(total / 10) FROM orders "
                     "WHERE total < 30 GROUP BY status")
        same(loaded, "SELECT gather_product(DISTINCT customer_id) FROM orders "
                     "WHERE customer_id < 12")
    finally:
        with loaded.connect(autocommit=True) as conn:
            conn.execute("DROP AGGREGATE gather_product(numeric)")
        with loaded.ref() as conn:
            conn.execute("DROP AGGREGATE gather_product(numeric)")
            conn.commit()


@pytest.mark.parametrize("sql, sqlstate, message", [
    # ONLY (or TABLESAMPLE, FOR UPDATE) keeps the table from being read first
    ("SELECT id, row_number() OVER (ORDER BY id) FROM ONLY orders", "NK013", "[106]"),
    ("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY total) FROM ONLY orders", "0A000",
     "aggregate percentile_cont() cannot be combined across shards"),
])
def test_what_cannot_be_read_first_keeps_the_refusal(loaded, sql, sqlstate, message):  # noqa: F811
    with loaded.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as e:
            psycopg.ClientCursor(conn).execute(sql)
        assert e.value.diag.sqlstate == sqlstate
        assert message in str(e.value)
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("query", [
    "SELECT id, row_number() OVER (ORDER BY total, id) FROM orders WHERE total > 5",
    "SELECT c.name, o.id FROM customers c JOIN orders o ON o.id = c.id * 10 ORDER BY 2",
    "SELECT status, percentile_disc(0.5) WITHIN GROUP (ORDER BY id) FROM orders "
    "GROUP BY status ORDER BY 1",
])
def test_cursor_over_rows_read_first(loaded, query):  # noqa: F811
    """DECLARE CURSOR of such a query reads the tables first too; FETCH returns the
    reference's rows, in parts."""
    got = []
    for connect in (loaded.connect, loaded.ref):
        with connect() as conn:		# (autocommit: the block is the statements')
            cur = psycopg.ClientCursor(conn)
            cur.execute("BEGIN")
            cur.execute(f"DECLARE gather_c CURSOR FOR {query}")
            rows = []
            while True:
                cur.execute("FETCH 7 FROM gather_c")
                part = cur.fetchall()
                rows.extend(part)
                if len(part) < 7:
                    break
            cur.execute("ROLLBACK")
            got.append(rows)
    assert got[0] == got[1] and got[0], query


def test_float_variance_reads_the_rows_first(loaded):  # noqa: F811
    """stddev / variance of a double precision column over several shards: the shards'
    float states cannot be combined, so the table is read first and one shard aggregates
    (0A000 before). Compared rounded: a float sum depends on the order rows are added in."""
    for connect in (loaded.connect, loaded.ref):
        with connect() as conn:
            conn.execute("ALTER TABLE order_items ADD COLUMN weight float8")
            conn.execute("UPDATE order_items SET weight = qty * 1.5 + customer_id / 7.0")
    try:
        same(loaded, "SELECT round(stddev(weight)::numeric, 9), "
                     "round(var_pop(weight)::numeric, 9) FROM order_items")
        same(loaded, "SELECT sku, round(variance(weight)::numeric, 9) FROM order_items "
                     "WHERE qty > 0 GROUP BY sku")
    finally:
        for connect in (loaded.connect, loaded.ref):
            with connect() as conn:
                conn.execute("ALTER TABLE order_items DROP COLUMN weight")
