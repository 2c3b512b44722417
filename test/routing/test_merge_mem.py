"""
router_work_mem (issue 20): a merge over shards that holds rows until every shard completed
(GROUP BY, DISTINCT, aggregates) may hold at most router_work_mem bytes of shard rows; past it
the statement fails with 53400 naming the setting, the session goes on, other sessions are
not disturbed and the worker gives the memory back. Streaming merges (ORDER BY) are not
bounded by it (they hold a few rows per shard). The rows of a subquery or table the router
reads first (route_subq.c) are bounded the same way. The storefront database of test_routing.py
on its own neki with router_work_mem = 1MB; results compared with the reference server.
"""
import threading

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology

NROWS = 4000
WIDTH = 1000        # bytes of each customer name: 4 MB of rows in all


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "wmem") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"router_work_mem": "1MB"}) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        for lo in range(1, NROWS + 1, 500):
            st.both("INSERT INTO customers VALUES " + ", ".join(
                f"({i}, '{i:06d}' || repeat('x', {WIDTH - 6}), 'FR')"
                for i in range(lo, min(lo + 500, NROWS + 1))))
        yield st


def refused(conn, sql):
    with pytest.raises(psycopg.Error) as exc:
        conn.execute(sql)
    return exc.value.diag


def worker_rss_kb(inst):
    total = 0
    for pid in inst.children():
        try:
            with open(f"/proc/{pid}/status") as f:
                total += next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        except (OSError, StopIteration):
            pass
    return total


OVER = [
    "SELECT name, count(*) FROM customers GROUP BY name",
    "SELECT DISTINCT name FROM customers",
    "SELECT country, max(name) FROM customers GROUP BY country, name",
]


@pytest.mark.parametrize("sql", OVER)
def test_merge_over_the_bound_fails_cleanly(store, sql):
    with store.connect() as conn:
        d = refused(conn, sql)
        assert d.sqlstate == "53400", d.message_primary
        assert "router_work_mem" in d.message_primary
        assert "router_work_mem is 1048576 bytes" in d.message_detail
        assert "Raise router_work_mem" in d.message_hint
        # the session goes on, in and out of a transaction
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (NROWS,)
        conn.execute("BEGIN")
        d = refused(conn, sql)
        assert d.sqlstate == "53400"
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        conn.execute("ROLLBACK")
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (NROWS,)


@pytest.mark.parametrize("sql, ordered", [
    ("SELECT name, count(*) FROM customers WHERE id <= 300 GROUP BY name ORDER BY name", True),
    ("SELECT DISTINCT left(name, 6) FROM customers", False),
    ("SELECT count(*), min(name), max(name) FROM customers", True),
    # streaming: 4 MB through the router, a few rows per shard held at a time
    ("SELECT id, name FROM customers ORDER BY id", True),
])
def test_merge_under_the_bound_equals_reference(store, sql, ordered):
    store.compare(sql, ordered=ordered)


def test_other_sessions_are_not_disturbed(store):
    errors, stop = [], threading.Event()

    def big():
        with store.connect() as conn:
            while not stop.is_set():
                try:
                    conn.execute(OVER[0])
                    errors.append("no error")
                except psycopg.Error as e:
                    if e.diag.sqlstate != "53400":
                        errors.append(e.diag.sqlstate)
    t = threading.Thread(target=big)
    t.start()
    try:
        with store.connect() as conn:
            conn.execute("BEGIN")
            for i in range(1, 60):
                assert conn.execute(f"SELECT id FROM customers WHERE id = {i}").fetchone() == (i,)
                got = conn.execute("SELECT left(name, 6), count(*) FROM customers "
                                   "WHERE id <= 40 GROUP BY 1 ORDER BY 1").fetchall()
                assert got == [(f"{k:06d}", 1) for k in range(1, 41)]
            conn.execute("COMMIT")
    finally:
        stop.set()
        t.join(30)
    assert not errors, errors


def test_memory_is_given_back(store):
    inst = store.neki
    inst.update({"router_work_mem": "64MB"})
    inst.reload()
    sql = ("SELECT name || repeat(name, 4) AS k, count(*) FROM customers GROUP BY k "
           "ORDER BY k LIMIT 3")           # 20 MB of rows held, under 64 MB

    def raised():        # 2.5 MB: over 1MB, under 64MB
        with store.connect() as conn:
            try:
                conn.execute("SELECT DISTINCT name FROM customers WHERE id <= 2500").fetchall()
                return True
            except psycopg.Error:
                return False
    try:
        wait_until(raised, 10, what="router_work_mem raised by RELOAD")
        before = worker_rss_kb(inst)
        for _ in range(3):
            store.compare(sql, ordered=True)
        after = worker_rss_kb(inst)
        print(f"workers' RSS: {before} kB before, {after} kB after 3 x 20 MB merges")
        assert after < before + 16 * 1024, (before, after)
    finally:
        inst.update({"router_work_mem": "1MB"})
        inst.reload()

    def lowered():
        with store.connect() as conn:
            try:
                conn.execute(sql)
                return False
            except psycopg.Error as e:
                return e.diag.sqlstate == "53400"
    wait_until(lowered, 10, what="router_work_mem back to 1MB")


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM countries WHERE name IN (SELECT name FROM customers)",
    "SELECT count(*) FROM customers a JOIN customers b ON a.name = b.name",
    # a window or an aggregate without a combine: the table read first
    "SELECT id, row_number() OVER (ORDER BY name) FROM customers",
    "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY name) FROM customers",
])
def test_rows_read_through_the_router_are_bounded(store, sql):
    """A subquery evaluated first, or a table read through the router for a join off the
    key (route_subq.c), may hold router_work_mem bytes of literal rows at most: past it
    53400 naming the setting, and the session goes on."""
    with store.connect() as conn:
        d = refused(conn, sql)
        assert d.sqlstate == "53400", d.message_primary
        assert "router_work_mem" in d.message_primary
        assert "router_work_mem is 1048576 bytes" in d.message_detail
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (NROWS,)
    store.compare("SELECT count(*) FROM customers WHERE left(name, 6) IN "
                  "(SELECT left(name, 6) FROM customers WHERE id < 100)")
    # (a WHERE that keeps few rows goes with the read: under the bound)
    store.compare("SELECT id, row_number() OVER (ORDER BY name DESC) FROM customers "
                  "WHERE id < 200")
