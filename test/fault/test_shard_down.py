"""
A data shard whose server is down (issue 6/7): a routed statement that needs a link to it
fails as soon as the pool's attempt to connect fails, with 08001 `could not connect to shard
"x": ...` and `DETAIL: Raised on shard x.`, instead of waiting for query_wait_timeout and
closing the client. The session stays usable, the other shards and sessions are not
disturbed, a transaction that touched the dead shard is aborted (25P02 until ROLLBACK),
nothing committed is lost, and once the server is back (and server_login_retry has passed)
statements on it work again. A pass-through database keeps pgbouncer's behaviour.
"""
import sys
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "routing"))
from test_routing import Store, create_schema, routing_neki, sharded_database, topology  # noqa

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 25)]
RETRY = 2       # server_login_retry of this neki (seconds)


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "down") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"server_login_retry": RETRY,
                                   "query_wait_timeout": 120}) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " + ", ".join(
            f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        yield st


def victim_and_other(store):
    by_shard = {}
    for cid, _, _ in CUSTOMERS:
        by_shard.setdefault(store.customer_shard(cid), []).append(cid)
    victim = "shard-b" if "shard-b" in by_shard else sorted(by_shard)[0]
    other = next(s for s in sorted(by_shard) if s != victim)
    return victim, by_shard[victim][0], by_shard[other][0]


def assert_unreachable(e, victim):
    assert e.diag.sqlstate == "08001", (e.diag.sqlstate, str(e))
    assert e.diag.message_primary.startswith(f'could not connect to shard "{victim}": '), \
        e.diag.message_primary
    assert e.diag.message_detail == f"Raised on shard {victim}.", e.diag.message_detail


def timed_error(conn, sql):
    start = time.monotonic()
    with pytest.raises(psycopg.Error) as ei:
        conn.execute(sql).fetchall()
    return ei.value, time.monotonic() - start


def test_dead_shard_fails_fast_and_comes_back(store):
    cluster = store.cluster
    victim, vid, oid = victim_and_other(store)
    pids = set(store.neki.children())
    conn = store.connect()
    spare = store.connect()
    try:
        # a transaction holding a link to the victim, another one only on the other shard
        tx = store.connect()
        tx.execute("BEGIN")
        tx.execute(f"UPDATE customers SET name = 'in tx' WHERE id = {vid}")
        committed = store.connect()
        committed.execute(f"UPDATE customers SET name = 'kept' WHERE id = {oid}")
        cluster.stop_server(victim)

        # single-shard statement on the victim: an error at once, not query_wait_timeout
        e, took = timed_error(conn, f"SELECT name FROM customers WHERE id = {vid}")
        assert_unreachable(e, victim)
        assert took < 30, took
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        # within server_login_retry: the cached reason, at once, for every session
        for c in (conn, spare):
            e, took = timed_error(c, f"SELECT name FROM customers WHERE id = {vid}")
            assert_unreachable(e, victim)
        # a scatter names the victim; the session stays usable on the other shards
        e, _ = timed_error(conn, "SELECT count(*) FROM customers")
        assert_unreachable(e, victim)
        e, _ = timed_error(conn, "SELECT id FROM customers ORDER BY id")
        assert_unreachable(e, victim)
        # an INSERT ... SELECT reading it: nothing written anywhere
        e, _ = timed_error(conn, "INSERT INTO products (sku, name) SELECT 'p' || id, name "
                                 "FROM customers RETURNING sku")
        assert_unreachable(e, victim)
        for s in ("shard-c", "shard-d"):
            if s != victim:
                assert store.cluster.sql(s, "SELECT count(*) FROM products",
                                         dbname=store.db) == [(0,)]
        for c in (conn, spare):
            assert c.execute(f"SELECT name FROM customers WHERE id = {oid}").fetchall() == \
                [("kept",)]
        # a write in a transaction that needs the victim aborts the transaction
        conn.execute("BEGIN")
        conn.execute(f"SELECT name FROM customers WHERE id = {oid}")
        e, _ = timed_error(conn, f"UPDATE customers SET name = 'x' WHERE id = {vid}")
        assert_unreachable(e, victim)
        e, _ = timed_error(conn, f"SELECT name FROM customers WHERE id = {oid}")
        assert e.diag.sqlstate == "25P02"
        conn.execute("ROLLBACK")
        # the transaction that had the victim's link lost it: aborted until ROLLBACK
        e, _ = timed_error(tx, f"SELECT name FROM customers WHERE id = {oid}")
        assert e.diag.sqlstate in ("25P02", "08006"), e
        e, _ = timed_error(tx, "SELECT 1")
        assert e.diag.sqlstate == "25P02", e
        tx.execute("ROLLBACK")
        assert tx.execute(f"SELECT name FROM customers WHERE id = {oid}").fetchall() == \
            [("kept",)]
        assert store.neki.alive() and set(store.neki.children()) == pids
    finally:
        if cluster.status().get(victim) != "running":
            cluster.start_server(victim)

    def works(c):
        def probe():
            try:
                return c.execute(f"SELECT name FROM customers WHERE id = {vid}").fetchall()
            except psycopg.Error as e:
                assert e.diag.sqlstate == "08001", e
                return None
        return probe
    # back once the server is up and server_login_retry has passed, in every session
    for c in (conn, spare):
        assert wait_until(works(c), 30, interval=0.2, what="the victim through neki") == \
            [(f"customer {vid}",)]
    assert conn.execute("SELECT count(*) FROM customers").fetchall() == [(len(CUSTOMERS),)]
    # nothing committed was lost, the rolled-back update is gone
    assert store.cluster.sql(victim, f"SELECT name FROM customers WHERE id = {vid}",
                             dbname=store.db) == [(f"customer {vid}",)]
    for c in (conn, spare, tx, committed):
        c.close()


def test_dead_shard_extended_protocol_and_other_sessions(store):
    """Parameters over the extended protocol: the same error; a session that only uses the
    other shards never notices."""
    cluster = store.cluster
    victim, vid, oid = victim_and_other(store)
    conn = store.connect()
    bystander = store.connect()
    try:
        cluster.stop_server(victim)
        start = time.monotonic()
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT name FROM customers WHERE id = %s", (vid,)).fetchall()
        assert_unreachable(ei.value, victim)
        assert time.monotonic() - start < 30
        assert conn.execute("SELECT name FROM customers WHERE id = %s", (oid,)).fetchall()
        for _ in range(5):
            assert bystander.execute("SELECT id FROM customers WHERE id = %s",
                                     (oid,)).fetchall() == [(oid,)]
    finally:
        if cluster.status().get(victim) != "running":
            cluster.start_server(victim)

    def back():
        try:
            return conn.execute("SELECT name FROM customers WHERE id = %s", (vid,)).fetchall()
        except psycopg.Error:
            return None
    assert wait_until(back, 30, interval=0.2, what="the victim again")
    conn.close()
    bystander.close()


def test_pass_through_keeps_pgbouncer_behaviour(pg_cluster, neki):
    """No topology: a client of a pool whose server is down waits (and is then refused with
    pgbouncer's errors), it is not failed at the first refused connect; nor is the next one
    that waits for its welcome: the cached login error (server_login_retry) is only for
    logged-in clients (test_compat_pooling.py)."""
    port = pg_cluster.port("shard-d")
    inst = neki(settings={"query_wait_timeout": 2, "server_login_retry": 30, "workers": 1},
                databases={"pt": f"host=127.0.0.1 port={port} dbname=postgres"})
    pg_cluster.stop_server("shard-d")
    try:
        start = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as ei:
            inst.connect(dbname="pt").execute("SELECT 1")
        waited = time.monotonic() - start
        assert "query_wait_timeout" in str(ei.value), str(ei.value)
        assert waited >= 1.5, waited      # it waited for query_wait_timeout
        start = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as ei:
            inst.connect(dbname="pt").execute("SELECT 1")
        assert "query_wait_timeout" in str(ei.value), str(ei.value)
        assert time.monotonic() - start >= 1.5
    finally:
        if pg_cluster.status().get("shard-d") != "running":
            pg_cluster.start_server("shard-d")


class BrokenShard:
    """The cluster, with one shard's connection string naming a database it lacks."""

    def __init__(self, cluster, victim):
        self.cluster, self.victim = cluster, victim

    def __getattr__(self, name):
        return getattr(self.cluster, name)

    def shards_section(self, dbname=None, **extra):
        lines = self.cluster.shards_section(dbname=dbname, **extra).splitlines()
        return "\n".join(line.replace(f"dbname={dbname}", "dbname=neki_no_such_db")
                         if line.startswith(self.victim + " ") else line for line in lines)


def test_login_error_fails_fast(store):
    """The shard's server refuses the login (its database does not exist): the statement gets
    the server's reason at once, the other shards work."""
    victim, vid, oid = victim_and_other(store)
    with routing_neki(BrokenShard(store.cluster, victim), store.db, topology(store.db), Store,
                      settings={"server_login_retry": RETRY}) as broken:
        with broken.connect() as conn:
            e, took = timed_error(conn, f"SELECT name FROM customers WHERE id = {vid}")
            assert_unreachable(e, victim)
            assert e.diag.message_primary == f'could not connect to shard "{victim}": ' \
                'database "neki_no_such_db" does not exist', e.diag.message_primary
            assert took < 30, took
            assert conn.execute(f"SELECT name FROM customers WHERE id = {oid}").fetchall()
