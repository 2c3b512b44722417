"""
Subqueries in expressions the router evaluates first (issue 20's materialize step,
src/exec/route_subq.c): a subquery over sharded rows that is not correlated with its outer
query runs as a statement of its own (one shard, or every shard with the merge step), and
its rows replace it as constants before the statement runs. Each case gives the same rows,
column names and errors as the reference server holding every row; a correlated subquery
not joined on the shard key keeps the planner's refusal.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import loaded, store  # noqa: F401 (module fixtures)


def both(st, sql):
    """(status, column names, sorted rows) through neki and on the reference server; an
    error as ("ERROR <sqlstate> <message>", None, None)."""
    out = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            cur = psycopg.ClientCursor(conn)
            try:
                cur.execute(sql)
                names = [d.name for d in cur.description] if cur.description else None
                rows = sorted(cur.fetchall(), key=repr) if cur.description else None
                out.append((cur.statusmessage, names, rows))
            except psycopg.Error as e:
                out.append((f"ERROR {e.diag.sqlstate} {e.diag.message_primary}", None, None))
    return out


def same(st, sql):
    got, want = both(st, sql)
    assert got == want, f"{sql}:\n neki      {got}\n reference {want}"
    return got


@pytest.fixture(scope="module")
def st(loaded):  # noqa: F811
    # an order with no total: NULL in a subquery's result (NOT IN's three-valued logic)
    for connect in (loaded.connect, loaded.ref):
        with connect() as conn:
            conn.execute("INSERT INTO orders VALUES (3, 999, 'lost', NULL)")
    return loaded


@pytest.mark.parametrize("sql", [
    # scalar subqueries: their column names, merged aggregates, NULL when empty
    "SELECT (SELECT count(*) FROM orders)",
    "SELECT (SELECT max(total) FROM orders), (SELECT min(id) AS first FROM customers)",
    "SELECT (SELECT total FROM orders WHERE status = 'none')",
    "SELECT id, name FROM customers WHERE id > (SELECT avg(customer_id) FROM orders)",
    "SELECT count(*) FROM orders WHERE total >= (SELECT avg(total) FROM orders)",
    "SELECT g, (SELECT sum(qty) FROM order_items) * g FROM generate_series(1, 3) g",
    # EXISTS, true and false
    "SELECT exists(SELECT 1 FROM orders WHERE total > 79.99)",
    "SELECT exists(SELECT 1 FROM orders WHERE total > 80.01)",
    "SELECT code FROM countries WHERE NOT EXISTS (SELECT 1 FROM orders WHERE total > 1000)",
    # IN / NOT IN / ANY / ALL over another column than the shard key, NULLs included
    "SELECT customer_id, id FROM orders WHERE total IN "
    "(SELECT max(total) FROM orders GROUP BY status)",
    "SELECT count(*) FROM customers WHERE id NOT IN (SELECT total::bigint FROM orders)",
    "SELECT count(*) FROM customers WHERE id NOT IN "
    "(SELECT total::bigint FROM orders WHERE total IS NOT NULL)",
    "SELECT count(*) FROM customers WHERE id NOT IN (SELECT id FROM orders WHERE false)",
    "SELECT id FROM customers WHERE id > ALL (SELECT customer_id * 2 FROM orders "
    "WHERE total < 10)",
    "SELECT id FROM customers WHERE id = ANY (SELECT qty * 10 FROM order_items)",
    "SELECT code FROM countries WHERE (code, name) IN "
    "(SELECT country, 'France' FROM customers WHERE id < 4)",
    # a subquery inside the one evaluated; several in one statement
    "SELECT (SELECT count(*) FROM orders WHERE total > (SELECT avg(total) FROM orders))",
    "SELECT k.code, (SELECT count(*) FROM customers) AS n FROM countries k "
    "WHERE k.code IN (SELECT country FROM customers WHERE id > 30)",
    # values that need quoting, and types the catalog names
    "SELECT (SELECT string_agg(name || '''\\', ',' ORDER BY id) FROM customers "
    "WHERE id < 4)",
    "SELECT (SELECT max(status)::varchar FROM orders), (SELECT now()::date - now()::date)",
    # the subquery's errors are the statement's
    "SELECT (SELECT id FROM customers)",
    "SELECT (SELECT 1 / (count(*) - count(*)) FROM orders)",
    # WITH queries whose clauses need every shard's rows
    "WITH s AS (SELECT status, count(*) FROM orders GROUP BY status) SELECT * FROM s",
    "WITH w AS (SELECT DISTINCT status FROM orders) SELECT * FROM w",
    "WITH \"Totals\"(s, n) AS MATERIALIZED (SELECT status, count(*) FROM orders "
    "GROUP BY status) SELECT * FROM \"Totals\" WHERE n > 1",
    "WITH top AS (SELECT customer_id FROM orders ORDER BY total DESC NULLS LAST, customer_id "
    "LIMIT 5) SELECT c.id, c.name FROM customers c JOIN top ON top.customer_id = c.id",
    "WITH w AS (SELECT * FROM orders) SELECT count(*) FROM w a, w b WHERE a.id < b.id",
    "WITH u AS (SELECT id FROM orders UNION SELECT id FROM customers) SELECT count(*) FROM u",
    "WITH a AS (SELECT max(total) AS m FROM orders), b AS (SELECT m * 2 AS d FROM a) "
    "SELECT * FROM a, b",
    "WITH n AS (SELECT count(*) AS c FROM orders) "
    "SELECT id FROM customers WHERE id < (SELECT c FROM n) / 10",
    # derived tables whose clauses need every shard's rows
    "SELECT * FROM (SELECT status, count(*) FROM orders GROUP BY status) s",
    "SELECT * FROM ( /* ( */ SELECT status, count(*) AS n FROM orders GROUP BY status) AS s(a, b) "
    "WHERE b > 1",
    "SELECT s.customer_id, c.name FROM (SELECT customer_id FROM orders ORDER BY total DESC "
    "NULLS LAST, id LIMIT 3) s JOIN customers c ON c.id = s.customer_id",
    "SELECT * FROM ((SELECT id FROM orders) UNION (SELECT id FROM customers)) u WHERE id < 15",
    "SELECT count(*) FROM (SELECT DISTINCT status FROM orders) d, (SELECT max(id) FROM "
    "customers) m",
    "SELECT x.n + 1 FROM (SELECT (SELECT count(*) FROM orders) AS n) x",
    "SELECT * FROM customers c, LATERAL (SELECT count(*) FROM orders WHERE total > 70) o "
    "WHERE c.id < 3",
    # joins off the shard key: one side's rows read through the router, then joined
    "SELECT c.name, o.id FROM customers c JOIN orders o ON o.id = c.id * 10",
    "SELECT count(*) FROM customers c, orders o WHERE c.id = o.customer_id OR o.total > 30",
    "SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.id = c.id",
    "SELECT c.id, o.id FROM orders o RIGHT JOIN customers c ON o.id = c.id WHERE c.id < 20",
    "SELECT g, orders.id FROM generate_series(1, 50) g LEFT JOIN orders ON id = g",
    "SELECT k.code, count(c.id) FROM countries k FULL JOIN customers c ON c.country = k.code "
    "GROUP BY k.code",
    "SELECT i.sku, o.status FROM order_items i JOIN public.orders AS o ON o.id = i.order_id "
    "JOIN customers c ON c.id = i.qty",
])
def test_uncorrelated_subquery_equals_the_reference(st, sql):
    same(st, sql)


@pytest.mark.parametrize("sql", [
    # an arm of the top level's UNION ALL without a sharded table: the sharded arms are read
    # first, so the arm runs once (on one shard), not once per shard
    "SELECT id FROM orders UNION ALL SELECT 1",
    "SELECT id, status FROM orders WHERE total > 50 UNION ALL SELECT 0, 'none' "
    "ORDER BY 1 DESC LIMIT 4",
    "SELECT code FROM countries UNION ALL SELECT status FROM orders",
    "VALUES (1::bigint) UNION ALL SELECT id FROM orders WHERE id < 30 ORDER BY 1",
    "SELECT id FROM orders WHERE id < 40 UNION ALL SELECT '7' UNION ALL "
    "SELECT customer_id FROM order_items WHERE qty > 1",
    "(SELECT id FROM orders ORDER BY id LIMIT 3) UNION ALL (SELECT 42) ORDER BY 1",
    "WITH w AS (SELECT 5 AS n) SELECT n FROM w UNION ALL SELECT id FROM orders -- (\n",
    "/* UNION ( */ SELECT 'x' AS \"union\", id FROM customers UNION ALL SELECT 'y', 2",
    # an arm whose own clauses need every row of it (aggregates, GROUP BY, LIMIT, DISTINCT
    # under UNION ALL): read first, under UNION or UNION ALL
    "(SELECT status, count(*) FROM orders GROUP BY status) UNION "
    "(SELECT code, 1 FROM countries)",
    "(SELECT customer_id, count(*) FROM orders GROUP BY customer_id) UNION ALL "
    "(SELECT id, 0 FROM customers WHERE id < 3)",
    "SELECT DISTINCT status FROM orders UNION ALL SELECT DISTINCT sku FROM order_items",
    "(SELECT max(total) FROM orders) UNION ALL (SELECT min(total) FROM orders) ORDER BY 1",
    "TABLE orders",
    "VALUES (1::bigint, 2::bigint, 'a', 3) UNION ALL SELECT 2+2, 57, 'b', 4 UNION ALL TABLE orders",
])
def test_union_arms_evaluated_first_equal_the_reference(st, sql):
    same(st, sql)


def test_union_arm_evaluated_first_with_bound_values(st):
    """Over the extended protocol: the arm read first gets the values it reads written in."""
    sql = "SELECT id FROM orders WHERE id > %s UNION ALL SELECT %s::bigint ORDER BY 1"
    got = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            got.append(conn.execute(sql, (60, 7)).fetchall())
    assert got[0] == got[1] and (7,) in got[0], got


def test_explain_shows_the_union_arm_evaluated_first(st):
    with st.connect() as conn:
        lines = [r[0] for r in psycopg.ClientCursor(conn).execute(
            "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT id FROM orders UNION ALL "
            "SELECT 1 ORDER BY 1").fetchall()]
    assert lines[:2] == ["Router Evaluation", "  Evaluated First: SELECT id FROM orders"], lines
    assert any("Scatter" in line for line in lines[2:-1]), lines


def test_writes_with_an_evaluated_subquery(st):
    """UPDATE and DELETE over several shards with a subquery over sharded rows."""
    for sql in ["UPDATE orders SET status = 'big' WHERE total > (SELECT avg(total) FROM orders)",
                "DELETE FROM order_items WHERE qty < (SELECT max(qty) FROM order_items) "
                "AND customer_id > 38",
                "UPDATE orders o SET status = 'joined' FROM customers c "
                "WHERE c.id = o.id / 10 AND c.country = 'FR'",
                "DELETE FROM order_items i USING orders o WHERE o.id = i.qty * 10"]:
        got, want = both(st, sql)
        assert got == want, sql
    same(st, "SELECT customer_id, id, status FROM orders")
    same(st, "SELECT * FROM order_items")


def test_insert_select_is_not_evaluated_yet(st):
    """An INSERT ... SELECT source is planned apart (plan_insel.c): its refusal stands,
    nothing is written, and the session goes on."""
    with st.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as e:
            psycopg.ClientCursor(conn).execute(
                "INSERT INTO order_items SELECT customer_id, id, 7, 'avg', 1 FROM orders "
                "WHERE total > (SELECT avg(total) FROM orders)")
        assert e.value.diag.sqlstate == "NK013" and "[113]" in str(e.value)
        assert conn.execute("SELECT count(*) FROM order_items WHERE line = 7").fetchall() \
            == [(0,)]


def test_in_a_query_of_several_statements(st):
    """A Query of several statements: the evaluated one in the middle, each result in
    order, and an error in a later one after it (the implicit transaction rolls back)."""
    sql = ("SELECT 1; SELECT (SELECT count(*) FROM orders) AS n; "
           "SELECT c.id FROM customers c JOIN orders o ON o.id = c.id * 10 + 1 "
           "WHERE c.id < 3 ORDER BY 1")
    with st.connect(autocommit=True) as conn, st.ref() as ref:
        for c in (conn, ref):
            c.autocommit = True
        got, want = [], []
        for c, out in ((conn, got), (ref, want)):
            cur = psycopg.ClientCursor(c)
            cur.execute(sql)
            while True:
                out.append(cur.fetchall())
                if not cur.nextset():
                    break
        assert got == want and len(got) == 3, (got, want)
        with pytest.raises(psycopg.Error) as e:
            psycopg.ClientCursor(conn).execute(
                "UPDATE orders SET status = 'multi' WHERE total > (SELECT avg(total) FROM "
                "orders); SELECT 1 / 0")
        assert e.value.diag.sqlstate == "22012"
        assert conn.execute("SELECT count(*) FROM orders WHERE status = 'multi'").fetchall() \
            == [(0,)]


def test_explain_shows_what_is_evaluated_first(st):
    """EXPLAIN (NEKI_PLAN) of such a statement: the part read first with its own plan (text
    and JSON), nothing run."""
    with st.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        lines = [r[0] for r in cur.execute(
            "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT id FROM customers "
            "WHERE id > (SELECT avg(customer_id) FROM orders)").fetchall()]
        assert lines[0] == "Router Evaluation", lines
        assert lines[1] == "  Evaluated First: SELECT avg(customer_id) FROM orders", lines
        assert any("Scatter" in l for l in lines[2:-1]), lines
        assert lines[-1].startswith("  Then: the statement with its rows in its place"), lines
        doc = cur.execute("EXPLAIN (NEKI_PLAN) SELECT c.name FROM customers c "
                          "JOIN orders o ON o.id = c.id * 10").fetchone()[0]
        ev = doc[0]["Router Evaluation"]
        assert ev["Evaluated First"] == 'SELECT "id" FROM orders', doc
        assert ev["Plan"][0]["Plan"]["Node Type"] == "Collapse", doc


def test_in_a_transaction(st):
    """Inside a transaction block the subquery sees the transaction's own writes."""
    with st.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN")
        cur.execute("INSERT INTO orders VALUES (5, 777, 'x', 5000)")
        cur.execute("SELECT (SELECT max(total) FROM orders)")
        assert cur.fetchall() == [(5000,)]
        cur.execute("ROLLBACK")
        cur.execute("SELECT exists(SELECT 1 FROM orders WHERE total = 5000)")
        assert cur.fetchall() == [(False,)]


@pytest.mark.parametrize("sql", [
    # correlated off the shard key (qualified outer columns): the inner table's rows are
    # read through the router, then the subquery runs over them on each shard
    "SELECT k.code, (SELECT count(*) FROM customers c WHERE c.country = k.code) "
    "FROM countries k",
    "SELECT * FROM countries k WHERE NOT EXISTS (SELECT 1 FROM customers c "
    "WHERE c.country = k.code AND c.id > 39)",
    "SELECT c.id FROM customers c WHERE EXISTS (SELECT 1 FROM orders o "
    "WHERE o.id = c.id * 10 + 1 AND o.total > 70)",
    "SELECT * FROM countries k LEFT JOIN LATERAL (SELECT count(*) FROM customers c "
    "WHERE c.country = k.code) x ON true",
    "SELECT c.id, (SELECT max(o.total) FROM orders o WHERE o.id = c.id * 10) "
    "FROM customers c WHERE c.id < 6",
    # an unqualified outer column in an = (the catalog finds it outside the subquery)
    "SELECT code, (SELECT count(*) FROM customers c WHERE c.country = code) FROM countries",
    "SELECT k.code FROM countries k WHERE EXISTS (SELECT 1 FROM orders o, customers c "
    "WHERE o.customer_id = c.id AND country = code AND o.total > 30)",
])
def test_correlated_subquery_equals_the_reference(st, sql):
    same(st, sql)


@pytest.mark.parametrize("sql, sqlstate, message", [
    # an unqualified outer column other than in an = is not seen: the subquery fails on
    # its own
    ("SELECT code, (SELECT count(*) FROM customers c WHERE c.country < code) "
     "FROM countries", "0A000", "is not joined to its outer query by the shard key"),
    ("SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) FROM ONLY orders) s",
     "NK013", "[106]"),
])
def test_what_cannot_be_evaluated_keeps_the_refusal(st, sql, sqlstate, message):
    """A subquery that fails on its own as correlated keeps the planner's refusal; one that
    cannot be routed on its own either gives that refusal. The session goes on, its next
    statements answered as usual (over both protocols)."""
    with st.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as e:
            psycopg.ClientCursor(conn).execute(sql)
        assert e.value.diag.sqlstate == sqlstate
        assert message in str(e.value)
        assert conn.execute("SELECT count(*) FROM customers").fetchall() == [(40,)]
        assert psycopg.ClientCursor(conn).execute("SELECT 1").fetchall() == [(1,)]


def ext_rows(connect, sql, params, binary=False, prepare=None):
    with connect() as conn:
        cur = conn.cursor(binary=binary)
        cur.execute(sql, params, prepare=prepare)
        return [d.name for d in cur.description], sorted(cur.fetchall(), key=repr)


@pytest.mark.parametrize("binary", [False, True])
def test_over_the_extended_protocol(st, binary):
    """A driver's statement with bound parameters elsewhere than in the subquery: the
    subquery runs on its own, then the Execute with its rows in place; also as a named
    prepared statement executed again and again."""
    cases = [
        ("SELECT id, name FROM customers WHERE id > (SELECT avg(customer_id) FROM orders) "
         "AND id < %s", (37,)),
        ("SELECT %s::int AS k, exists(SELECT 1 FROM orders WHERE total > 79.99)", (5,)),
        ("SELECT * FROM (SELECT status, count(*) FROM orders GROUP BY status) s "
         "WHERE count > %s", (1,)),
    ]
    for sql, params in cases:
        want = ext_rows(st.ref, sql, params, binary)
        assert ext_rows(st.connect, sql, params, binary) == want, sql
    sql, params = cases[0]
    with st.connect() as conn:
        for i in range(8):          # (psycopg prepares it by name from the 5th on)
            cur = conn.cursor(binary=binary)
            cur.execute(sql, (30 + i,), prepare=True)
            with st.ref() as ref:
                want = ref.execute(sql, (30 + i,)).fetchall()
            assert sorted(cur.fetchall()) == sorted(want)


@pytest.mark.parametrize("binary", [False, True])
def test_a_subquery_with_bound_parameters(st, binary):
    """Bound values inside the subquery the router evaluates first are written into its
    text as typed constants (numbers, text the driver sends untyped, NULL); the values the
    statement no longer reads are declared text at its Parse; a lone table read first with a
    bound value in the statement's WHERE takes a copy of it. Named prepared statements run
    again with other values give those values' rows."""
    cases = [
        ("SELECT (SELECT count(*) FROM orders WHERE total > %s)", (5,)),
        ("SELECT (SELECT count(*) FROM orders WHERE status = %s) AS n, %s::text AS t",
         ("paid", "x")),
        ("SELECT id FROM customers WHERE id > (SELECT avg(customer_id) FROM orders "
         "WHERE status <> %s) AND name <> %s", ("void", "nobody")),
        ("SELECT exists(SELECT 1 FROM orders WHERE total > %s OR status = %s)", (None, "new")),
        ("SELECT o.id, c.name FROM orders o JOIN customers c ON c.name = o.status "
         "WHERE o.status = %s", ("paid",)),
        ("SELECT c.name, o.id FROM customers c JOIN orders o ON o.id = c.id "
         "WHERE o.total > %s", (10,)),
        # (the table read first, its WHERE copied in with the value)
        ("SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY total) FROM orders "
         "WHERE status <> %s", ("void",)),
        ("SELECT id, rank() OVER (ORDER BY total, id) FROM orders o WHERE o.total > %s "
         "AND o.status = %s", (10, "paid")),
    ]
    for sql, params in cases:
        want = ext_rows(st.ref, sql, params, binary)
        assert ext_rows(st.connect, sql, params, binary) == want, sql
    sql = "SELECT (SELECT count(*) FROM orders WHERE total > %s)"
    with st.connect() as conn:
        for i in range(8):          # (psycopg prepares it by name from the 5th on)
            cur = conn.cursor(binary=binary)
            cur.execute(sql, (i * 10,), prepare=True)
            with st.ref() as ref:
                want = ref.execute(sql, (i * 10,)).fetchall()
            assert cur.fetchall() == want


def test_in_over_a_text_column(st):
    """Every customer's name, evaluated on the router, read back through IN."""
    with st.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT count(*) FROM customers WHERE name IN "
                    "(SELECT name FROM customers)")
        assert cur.fetchall() == [(40,)]
