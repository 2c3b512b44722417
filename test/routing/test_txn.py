"""
Transactions, cancel, timeouts and shard failures of routed sessions (issues 6 and 7): the
storefront database of test_routing.py on its own neki (4 data shards + authoritative), every
behaviour compared with the reference server where Postgres defines it.
"""
import json
import os
import threading
import time

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import Neki, wait_until
from test_routing import SCHEMA, Store, lit, topology

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 21)]


@pytest.fixture(scope="module")
def store(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    db = f"txn_{os.getpid()}"
    for server in pg_cluster.servers:
        pg_cluster.sql(server, f'CREATE DATABASE "{db}"')
    auth = f"auth = host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"
    inst = Neki(settings={"workers": 2, "admin_users": "postgres", "pool_mode": "transaction"},
                databases={db: f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db} "
                               "topology=yes"},
                shards=pg_cluster.shards_section(dbname=db) + "\n" + auth)
    try:
        inst.start()
        with inst.admin_connect() as conn:
            conn.execute("SELECT * FROM __neki.set_data_topology("
                         f"{lit(json.dumps(topology(db)))}, true)")
        st = Store(pg_cluster, inst, db)

        def routed():
            try:
                with st.connect() as conn:
                    conn.execute("SET __neki.fanout = scatter")
                    return True
            except psycopg.Error:
                return False
        wait_until(routed, 30, what="neki routes the storefront database")
        for sql in SCHEMA:
            st.run(sql)
            with st.ref() as conn:
                conn.execute(sql)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " + ", ".join(
            f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        yield st
    finally:
        problems = inst.cleanup()
        for server in pg_cluster.servers:
            try:
                pg_cluster.sql(server, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            except Exception:
                pass
        assert not problems, "\n".join(problems)


_SHARD_OF = {}


def shard_of(store, cid):
    if (store.db, cid) in _SHARD_OF:
        return _SHARD_OF[store.db, cid]
    rows = store.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers WHERE id = {cid}")
    found = [s for s in store.cluster.shards if any(s in r[0] for r in rows)]
    assert len(found) == 1, rows
    _SHARD_OF[store.db, cid] = found[0]
    return found[0]


def two_shards(store, base):
    """Two new customer ids >= base on different shards."""
    a = base
    b = next(i for i in range(base + 1, base + 50) if shard_of(store, i) != shard_of(store, a))
    return a, b


def run_both(store, sql):
    """<sql> as one simple Query through neki and on the reference: (status or error
    SQLSTATE, warnings' SQLSTATEs, final transaction status) for each."""
    out = []
    for connect in (store.connect, store.ref):
        with connect() as conn:
            notes = []
            conn.add_notice_handler(lambda d: notes.append(d.sqlstate))
            cur = psycopg.ClientCursor(conn)
            try:
                cur.execute(sql)
                status = cur.statusmessage
            except psycopg.Error as e:
                status = "ERROR " + (e.diag.sqlstate or "")
            out.append((status, notes, conn.info.transaction_status.name))
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
    return out


def ids_both(store, ids):
    sql = f"SELECT id, name FROM customers WHERE id IN ({', '.join(map(str, ids))}) ORDER BY id"
    got = store.run(sql)
    with store.ref() as conn:
        want = conn.execute(sql).fetchall()
    assert got == want, (got, want)
    return got


def no_idle_in_transaction(store):
    """Every shard backend of the database is out of its transaction (bounded poll)."""
    def check():
        for server in store.cluster.shards + ["auth"]:
            rows = store.cluster.sql(server, "SELECT count(*) FROM pg_stat_activity WHERE "
                                     "datname = %s AND state LIKE 'idle in transaction%%'",
                                     (store.db,))
            if rows[0][0] != 0:
                return False
        return True
    wait_until(check, 10, what="no shard backend idle in transaction")


def cleanup_ids(store, ids):
    sql = f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})"
    store.run(sql)
    with store.ref() as conn:
        conn.execute(sql)


# ---- the implicit transaction of a multi-statement Query -------------------------------

IMPLICIT_CASES = [
    # an error in statement 3 rolls back 1 and 2 on both shards; 4 does not run
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0; "
    "INSERT INTO customers VALUES ({c}, 'z', 'FR')",
    # success: committed on both shards
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); INSERT INTO customers VALUES ({b}, 'y', 'DE'); "
    "SELECT count(*) FROM customers WHERE id IN ({a}, {b})",
    # COMMIT inside: what came before stays (with Postgres's warning), the rest is rolled back
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); COMMIT; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0",
    # ROLLBACK inside: what came before is gone, what follows is committed
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); ROLLBACK; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE')",
    # BEGIN inside: the statements before it join the block, left open
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE')",
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); COMMIT; "
    "INSERT INTO customers VALUES ({c}, 'z', 'FR')",
    # an error after BEGIN leaves the block aborted
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0",
    # a shard's error on the second shard
    "UPDATE customers SET name = 'u' WHERE id = 1; "
    "UPDATE customers SET name = NULL WHERE id = 2",
]


@pytest.mark.parametrize("case", range(len(IMPLICIT_CASES)))
def test_multi_statement_query_is_one_implicit_transaction(store, case):
    a, b = two_shards(store, 300)
    c = next(i for i in range(b + 1, b + 50) if shard_of(store, i) not in
             (shard_of(store, a), shard_of(store, b)))
    sql = IMPLICIT_CASES[case].format(a=a, b=b, c=c)
    try:
        got, want = run_both(store, sql)
        assert got == want, f"{sql}: neki {got} != reference {want}"
        ids_both(store, [1, 2, a, b, c])
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b, c])
        store.both("UPDATE customers SET name = 'customer ' || id WHERE id IN (1, 2)")


def test_router_error_rolls_the_implicit_transaction_back(store):
    a, b = two_shards(store, 350)
    try:
        with store.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            with pytest.raises(psycopg.Error) as ei:
                cur.execute(f"INSERT INTO customers VALUES ({a}, 'x', 'FR'); "
                            f"INSERT INTO customers VALUES ({b}, 'y', 'DE'); "
                            f"UPDATE customers SET id = 7 WHERE id = {a}")
            assert ei.value.diag.sqlstate == "NK013"
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.run(f"SELECT id FROM customers WHERE id IN ({a}, {b})") == []
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b])


def test_write_over_several_shards_is_atomic(store):
    """One INSERT split over two shards, one UPDATE over two shards: a failure on one shard
    rolls the other back (as one Postgres), with or without RETURNING."""
    a, b = two_shards(store, 400)
    try:
        for sql in (f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), ({b}, 'b', 'XX')",
                    f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), ({b}, 'b', 'XX') "
                    "RETURNING id",
                    "UPDATE customers SET name = CASE WHEN id = 2 THEN NULL ELSE 'z' END "
                    "WHERE id IN (1, 2)"):
            got, want = run_both(store, sql)
            assert got == want, f"{sql}: neki {got} != reference {want}"
            ids_both(store, [1, 2, a, b])
        got, want = run_both(store, f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), "
                                    f"({b}, 'b', 'DE')")
        assert got == want
        assert len(ids_both(store, [a, b])) == 2
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b])
