"""
A table sharded by an expression over two columns (spec 2.5 V3: `"columns": ["a + b"]`,
stored but not routable) through neki: INSERT ... VALUES is NK013 10 (simple and extended
protocol), INSERT ... SELECT 117, `=` on one base column scatters and finds the rows of
every shard, `=` on both base columns is 115, UPDATE assigning a base column is 145 (even
without WHERE), and none of them costs the session (the ASan build once overflowed a stack
buffer here and the worker died with all its clients: run with NEKI_BIN=./neki-asan).

The storefront topology plus `pairs` (group customer_data, shard index by_pair over a + b);
its rows are written on the shards directly, as neki refuses to place them.
"""
import json
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import create_schema, routing_neki, sharded_database

REPO = Path(__file__).resolve().parent.parent.parent

SCHEMA = ["CREATE TABLE pairs (a bigint, b bigint, v text)"]

NK = "not implemented: [{}] {}"
SENTENCES = {
    10: "Multi-column partitioning indexes are unavailable.",
    115: "Multiple routing-parameter values are unavailable.",
    117: "This INSERT SELECT shape is unavailable.",
    145: "Updating an index column is unavailable.",
}


def topology(db):
    doc = json.loads((REPO / "etc" / "topology-storefront.json").read_text())
    d = doc["databases"]["store"]
    d["schemas"]["public"]["tables"]["pairs"] = {"shard_group": "customer_data",
                                                 "shard_index": "by_pair"}
    doc["shard_indexes"]["by_pair"] = {"type": "xxhash", "columns": ["a + b"]}
    doc["databases"] = {db: d}
    return doc


class Store:
    def __init__(self, cluster, inst, db):
        self.cluster, self.neki, self.db = cluster, inst, db

    def connect(self, **kw):
        return self.neki.connect(dbname=self.db, **kw)

    def run(self, sql):
        with self.connect() as conn:
            cur = psycopg.ClientCursor(conn).execute(sql)
            return cur.fetchall() if cur.description is not None else None

    def shard_rows(self, server, sql):
        return self.cluster.sql(server, sql, dbname=self.db)


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "multikey") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st, SCHEMA, reference=False)
        yield st


@pytest.fixture
def placed(store):
    """Rows with a = 1 on every data shard (one each, b = the shard's number), written
    directly; removed after."""
    shards = store.cluster.shards
    for n, s in enumerate(shards):
        store.cluster.sql(s, f"INSERT INTO pairs VALUES (1, {n}, '{s}'), (2, {n}, 'x')",
                          dbname=store.db)
    yield shards
    for s in shards:
        store.cluster.sql(s, "TRUNCATE pairs", dbname=store.db)


def refused(conn, sql, code, params=None):
    """<sql> on <conn> fails with NK013 <code> and its sentence; the session goes on."""
    with pytest.raises(psycopg.Error) as ei:
        conn.execute(sql, params)
    assert ei.value.diag.sqlstate == "NK013", (sql, str(ei.value))
    assert ei.value.diag.message_primary == NK.format(code, SENTENCES[code]), sql
    assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_insert_is_refused_with_10_and_the_session_goes_on(store):
    with store.connect(autocommit=True) as conn:
        cur = psycopg.ClientCursor(conn)
        for sql in ("INSERT INTO pairs VALUES (1, 2, 'x')",
                    "INSERT INTO pairs (a, b) VALUES (1, 2), (3, 4)",
                    "INSERT INTO pairs (v) VALUES ('only v')"):
            with pytest.raises(psycopg.Error) as ei:
                cur.execute(sql)
            assert ei.value.diag.sqlstate == "NK013", (sql, str(ei.value))
            assert ei.value.diag.message_primary == NK.format(10, SENTENCES[10]), sql
        # the extended protocol (bound parameters) gives the same answer
        refused(conn, "INSERT INTO pairs (a, b, v) VALUES (%s, %s, %s)", 10, (1, 2, "x"))
        refused(conn, "INSERT INTO pairs SELECT 1, 2, 'x'", 117)
    assert all(store.shard_rows(s, "SELECT count(*) FROM pairs") == [(0,)]
               for s in store.cluster.shards)


def test_one_base_column_scatters(store, placed):
    with store.connect(autocommit=True) as conn:
        rows = conn.execute("SELECT b, v FROM pairs WHERE a = 1 ORDER BY b").fetchall()
        assert rows == [(n, s) for n, s in enumerate(placed)]
        rows = conn.execute("SELECT v FROM pairs WHERE a = %s ORDER BY v", (1,)).fetchall()
        assert rows == [(s,) for s in sorted(placed)]
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM pairs WHERE a = 1").fetchall())
        assert all(s in plan for s in placed), plan
        # UPDATE and DELETE by one base column reach every shard too
        conn.execute("UPDATE pairs SET v = 'seen' WHERE a = 1")
        conn.execute("DELETE FROM pairs WHERE a = 2")
    for s in placed:
        assert store.shard_rows(s, "SELECT a, v FROM pairs") == [(1, "seen")], s


def test_both_base_columns_are_115(store, placed):
    with store.connect(autocommit=True) as conn:
        refused(conn, "SELECT * FROM pairs WHERE a = 1 AND b = 0", 115)
        refused(conn, "SELECT * FROM pairs WHERE b = %s AND a = %s", 115, (0, 1))
        refused(conn, "DELETE FROM pairs WHERE a = 1 AND b = 0", 115)
        refused(conn, "UPDATE pairs SET v = 'y' WHERE a = 1 AND b = 0", 115)
    assert sum(store.shard_rows(s, "SELECT count(*) FROM pairs")[0][0]
               for s in placed) == 2 * len(placed)


def test_update_of_a_base_column_is_145(store, placed):
    with store.connect(autocommit=True) as conn:
        refused(conn, "UPDATE pairs SET b = 5", 145)
        refused(conn, "UPDATE pairs SET a = a + 1 WHERE v = 'x'", 145)
        refused(conn, "UPDATE pairs SET v = 'y', b = %s WHERE a = 1", 145, (7,))
    for n, s in enumerate(placed):
        assert sorted(store.shard_rows(s, "SELECT a, b FROM pairs")) == [(1, n), (2, n)], s
