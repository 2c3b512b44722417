"""
A table the shards cannot join (a join off the shard key) is read through the router first
(route_subq.c, doc/router.md "Tables read through the router first"); the conjuncts of its
query level's WHERE and of its join's ON that read only that table go into that read
(route_pushdown.c), so only the rows the statement can keep come through the router. Each
statement equals the reference server holding every row, and EXPLAIN (NEKI_PLAN) shows what
the read took: a conjunct that reads another table, an outer query, a volatile call, or a
WHERE that is an OR, stays in the statement only; of the WHERE nothing goes into the
nullable side of an outer join, which takes the conjuncts of its own ON instead (as an
inner join's side does); the preserved side of a RIGHT JOIN takes nothing of its ON.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import loaded, store  # noqa: F401 (module fixtures)
from test_subquery_eval import same

@pytest.fixture(scope="module")
def st(loaded):  # noqa: F811
    return loaded


JOIN = "SELECT c.name, o.id, o.total FROM customers c JOIN orders o ON o.id = c.id * 10 "


def read_first(st, sql):
    """The text the router reads first for <sql> (EXPLAIN (NEKI_PLAN), nothing run)."""
    with st.connect() as conn:
        doc = psycopg.ClientCursor(conn).execute("EXPLAIN (NEKI_PLAN) " + sql).fetchone()[0]
    return doc[0]["Router Evaluation"]["Evaluated First"]


@pytest.mark.parametrize("where, taken", [
    # conjuncts of the read table only: qualified, unqualified, typed, called, BETWEEN, CASE
    ("WHERE o.total > 20 AND c.name <> 'x'", "(o.total > 20)"),
    ("WHERE total > 20 AND status = 'paid'", "(total > 20) AND (status = 'paid')"),
    ("WHERE o.total BETWEEN 10 AND 50 AND c.id > 1", "(o.total BETWEEN 10 AND 50)"),
    ("WHERE lower(o.status) IN ('paid', 'new') AND o.total::int >= 5",
     "(lower(o.status) IN ('paid', 'new')) AND (o.total::int >= 5)"),
    ("WHERE CAST(o.total AS numeric(10, 2)) > 20", "(CAST(o.total AS numeric(10, 2)) > 20)"),
    ("WHERE CASE WHEN o.total > 10 AND o.total < 50 THEN true ELSE false END",
     "(CASE WHEN o.total > 10 AND o.total < 50 THEN true ELSE false END)"),
    ("WHERE o.status = 'a AND b' /* AND c.id = 1 */ AND o.total IS NOT NULL",
     "(o.status = 'a AND b' /* AND c.id = 1 */) AND (o.total IS NOT NULL)"),
    ("WHERE (o.total > 20 OR o.status = 'new') AND c.id < 9",
     "((o.total > 20 OR o.status = 'new'))"),
    ("WHERE o.status COLLATE \"C\" > 'n' AND c.name COLLATE \"C\" > 'c'",
     "(o.status COLLATE \"C\" > 'n')"),
    # what stays in the statement only
    ("WHERE o.total > c.id", None),
    ("WHERE name <> 'x' AND o.status = 'new'", "(o.status = 'new')"),
    ("WHERE random() < 2 AND o.status = 'paid'", "(o.status = 'paid')"),
    ("WHERE o.total > 20 OR c.id = 1", None),
    ("WHERE o.total < extract(epoch from now())", None),
])
def test_join_conjuncts_go_with_the_table_read_first(st, where, taken):
    sql = JOIN + where
    same(st, sql)
    first = read_first(st, sql)
    cols = '"id", "status", "total"' if "status" in where else '"id", "total"'
    assert first == (f"SELECT {cols} FROM orders" if taken is None else
                     f"SELECT {cols} FROM orders AS \"o\" WHERE " + taken), first


def test_quoted_alias_and_no_alias(st):
    sql = ('SELECT c.name, "O".id FROM customers c JOIN orders "O" ON "O".id = c.id * 10 '
           'WHERE "O".total > 20')
    same(st, sql)
    assert read_first(st, sql) == ('SELECT "id", "total" FROM orders AS "O" '
                                   'WHERE ("O".total > 20)')
    sql = ("SELECT customers.name, orders.id FROM customers JOIN orders "
           "ON orders.id = customers.id * 10 WHERE orders.total > 20")
    same(st, sql)
    assert read_first(st, sql) == 'SELECT "id", "total" FROM orders WHERE (orders.total > 20)'


@pytest.mark.parametrize("where, cols", [
    ("WHERE o.status = 'paid'", '"id", "status"'), ("WHERE o.total IS NULL", '"id", "total"'),
    ("WHERE o.id IS NULL AND c.id > 2", '"id"'),
])
def test_nothing_goes_into_the_nullable_side(st, where, cols):
    """A WHERE over the nullable side also drops the NULL-extended rows: it stays."""
    sql = ("SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.id = c.id * 10 " +
           where)
    same(st, sql)
    assert read_first(st, sql) == f"SELECT {cols} FROM orders"


@pytest.mark.parametrize("sql, taken", [
    # the nullable side takes its ON's own conjuncts (they only decide which rows pair)
    ("SELECT c.id, o.id FROM customers c LEFT JOIN orders o ON o.id = c.id * 10 "
     "AND o.status = 'paid'", "\"id\", \"status\" FROM orders AS \"o\" WHERE (o.status = 'paid')"),
    ("SELECT c.id FROM customers c LEFT JOIN orders o ON o.id = c.id * 10 AND o.total > 20 "
     "WHERE o.id IS NULL", "\"id\", \"total\" FROM orders AS \"o\" WHERE (o.total > 20)"),
    # an inner join's ON and WHERE both
    (JOIN + "AND o.total > 20 WHERE o.status <> 'x'",
     "\"id\", \"status\", \"total\" FROM orders AS \"o\" WHERE (o.status <> 'x') AND "
     "(o.total > 20)"),
    # the preserved side of a RIGHT JOIN takes nothing of its ON (its rows all stay)
    ("SELECT c.id, o.id FROM customers c RIGHT JOIN orders o ON o.id = c.id * 10 "
     "AND o.total > 20", "\"id\", \"total\" FROM orders"),
])
def test_join_on_conjuncts(st, sql, taken):
    same(st, sql)
    assert read_first(st, sql) == "SELECT " + taken


@pytest.mark.parametrize("sql, cols", [
    # only the columns the statement names come through the router
    ("SELECT count(*) FROM customers c JOIN orders o ON o.id = c.id * 10", '"id"'),
    ("SELECT c.*, o.id * 2 FROM customers c JOIN orders o ON o.id = c.id * 10", '"id"'),
    ('SELECT c.name, o."total" FROM customers c JOIN orders o ON o.id = c.id * 10',
     '"id", "total"'),
    ("SELECT c.name FROM customers c JOIN orders o ON o.id = c.id * 10 WHERE EXISTS "
     "(SELECT * FROM order_items i WHERE i.order_id = o.id)", '"order_id" FROM order_items'),
    ("SELECT c.name, (SELECT max(o.total) FROM orders o WHERE o.id = c.id * 10) "
     "FROM customers c", '"id", "total"'),
    # every column: a star that may expand it, a whole-row value, NATURAL, renamed columns
    ("SELECT * FROM customers c JOIN orders o ON o.id = c.id * 10", "*"),
    ("SELECT c.name, o.* FROM customers c JOIN orders o ON o.id = c.id * 10", "*"),
    ("SELECT DISTINCT * FROM customers c JOIN orders o ON o.id = c.id * 10", "*"),
    ("SELECT c.name, row_to_json(o) FROM customers c JOIN orders o ON o.id = c.id * 10", "*"),
    ("SELECT c.name, o IS NULL FROM customers c LEFT JOIN orders o ON o.id = c.id * 10", "*"),
    ("SELECT c.name, o.a FROM customers c JOIN orders o (a, b, d, e) ON o.b = c.id * 10",
     "*"),
    ("SELECT c.name FROM customers c WHERE c.id * 10 IN (SELECT * FROM (SELECT o.id FROM "
     "orders o) s)", None),
])
def test_the_read_takes_the_named_columns(st, sql, cols):
    """The read of the table has the columns whose names the statement writes, or all of
    them when a star, a whole-row value or a column list could read the others; the rows
    equal the reference either way."""
    same(st, sql)
    if cols is not None:
        want = f"SELECT {cols}" + ("" if " FROM " in cols else " FROM orders")
        assert read_first(st, sql).startswith(want), read_first(st, sql)


@pytest.mark.parametrize("sql", [
    # in a derived table's level and in a WITH query
    "SELECT count(*) FROM (SELECT c.id FROM customers c JOIN orders o "
    "ON o.id = c.id * 10 WHERE o.status = 'paid' AND o.total > 5) s",
    "WITH j AS (SELECT o.id FROM customers c JOIN orders o ON o.id = c.id * 10 "
    "WHERE o.total > 5) SELECT count(*) FROM j",
    # with GROUP BY / ORDER BY / LIMIT after the WHERE
    JOIN + "WHERE o.total > 5 ORDER BY 2 LIMIT 3",
    "SELECT c.country, count(*) FROM customers c JOIN orders o ON o.id = c.id * 10 "
    "WHERE o.status <> 'lost' GROUP BY 1 ORDER BY 1",
    # an ambiguous column: the same error as the reference
    JOIN + "WHERE id > 5",
])
def test_other_levels_equal_the_reference(st, sql):
    same(st, sql)


@pytest.mark.parametrize("binary", [False, True])
def test_bound_values_go_in_as_constants(st, binary):
    """At an Execute the conjunct's bound values are written into the read."""
    sql = JOIN + "WHERE o.total > %s AND o.status = %s ORDER BY 2"
    got = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            cur = conn.cursor(binary=binary)
            got.append(cur.execute(sql, (20, "paid"), prepare=True).fetchall())
    assert got[0] == got[1]


@pytest.mark.parametrize("write, taken", [
    ("UPDATE orders o SET status = 'joined' FROM customers c "
     "WHERE c.id = o.id / 10 AND c.country = 'FR' RETURNING o.id",
     "\"id\", \"country\" FROM customers AS \"c\" WHERE (c.country = 'FR')"),
    ("DELETE FROM order_items i USING orders o WHERE o.id = i.qty * 10 AND o.total > 2",
     "\"id\", \"total\" FROM orders AS \"o\" WHERE (o.total > 2)"),
])
def test_writes_joined_off_the_key(st, write, taken):
    """UPDATE ... FROM and DELETE ... USING: their WHERE joins too; in a transaction rolled
    back on both servers, the write's answer and the rows after it equal the reference."""
    assert read_first(st, write) == "SELECT " + taken
    got = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute("BEGIN")
            cur.execute(write)
            out = [cur.statusmessage, sorted(cur.fetchall()) if cur.description else None]
            for table in ("orders", "order_items"):
                out.append(sorted(cur.execute(f"SELECT * FROM {table}").fetchall()))
            cur.execute("ROLLBACK")
            got.append(out)
    assert got[0] == got[1]
    assert got[0][0] != "UPDATE 0" and got[0][0] != "DELETE 0", got[0][0]


def test_a_table_read_twice_the_same_way_is_read_once(st):
    """A statement that reads the same table with the same columns and conditions in two
    places (TPC-H Q17's lineitem) reads it from the shards once: in a transaction (no
    statistics flush inside one), each shard's count of scans of orders grows by the
    statement's one read and the second count's own scan; the rows equal the reference."""
    sql = ("SELECT c.name, o.total FROM customers c JOIN orders o ON o.id = c.id * 10 "
           "WHERE o.total >= (SELECT avg(o2.total) FROM orders o2 WHERE o2.id <= c.id * 10)")
    same(st, sql)
    count = ("SELECT DISTINCT inet_server_port(), pg_stat_get_xact_numscans('orders'::regclass) "
             "FROM orders")
    with st.connect() as conn:
        conn.execute("BEGIN")
        before = dict(conn.execute(count).fetchall())
        conn.execute(sql).fetchall()
        after = dict(conn.execute(count).fetchall())
        conn.execute("ROLLBACK")
    assert len(after) > 1 and after.keys() == before.keys(), (before, after)
    assert {port: after[port] - before[port] for port in after} == \
        {port: 2 for port in after}, (before, after)


def test_a_later_statement_reads_again(st):
    """The rows of a table read are the statement's own: a later statement of the same
    transaction (after an UPDATE of that table, and one composed over a __neki call's rows)
    reads the table again and sees the new values."""
    read = ("SELECT c.id, o.total FROM customers c JOIN orders o ON o.id = c.id * 10 "
            "ORDER BY 1, 2")
    with st.connect() as conn:
        conn.execute("BEGIN")
        first = conn.execute(read).fetchall()
        conn.execute("UPDATE orders SET total = total + 1")
        again = conn.execute(read).fetchall()
        composed = conn.execute(
            "SELECT c.id, o.total, r IS NOT NULL FROM customers c JOIN orders o "
            "ON o.id = c.id * 10, __neki.get_data_topology_revision() r ORDER BY 1, 2").fetchall()
        conn.execute("ROLLBACK")
    assert first and len(first) == len(again)
    assert [(i, t + 1) for i, t in first] == again
    assert [(i, t, True) for i, t in again] == composed
