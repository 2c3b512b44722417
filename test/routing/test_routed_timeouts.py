"""
query_timeout, idle_transaction_timeout and transaction_timeout on routed sessions: a
session in a transaction over two shards is closed with pgbouncer's FATAL (the same
severity, SQLSTATE and message as a pass-through session of the same neki gets), nothing
stays open on the shards (pg_stat_activity, bounded poll), its writes are rolled back, and
another session goes on. Each test sets its timeout on the admin console and resets it.
"""
import contextlib
import re
import sys
import time
from pathlib import Path

import pytest

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, error_fields  # noqa: E402

CUSTOMERS = [(i, f"customer {i}", "FR") for i in range(1, 21)]
TIMEOUT = 1     # seconds: the janitor looks every 100 ms


@pytest.fixture(scope="module")
def timed(pg_cluster):
    """The storefront database routed, and <db>_plain: the same database of `auth`
    passed through (no topology)."""
    with sharded_database(pg_cluster, "tmo") as db:
        plain = f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"
        with routing_neki(pg_cluster, db, topology(db), Store,
                          databases={f"{db}_plain": plain}) as st:
            create_schema(st, reference=False)
            st.run("INSERT INTO countries VALUES ('FR', 'France')")
            st.run("INSERT INTO customers VALUES " + ", ".join(
                f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
            yield st


@contextlib.contextmanager
def setting(store, name, value):
    """<name> = <value> on every worker for the sessions opened inside the block."""
    with store.neki.admin_connect() as conn:
        conn.execute(f"SET {name} = {value}")
    try:
        yield
    finally:
        with store.neki.admin_connect() as conn:
            conn.execute(f"SET {name} = 0")


def two_shards(store):
    """Two customer ids on different shards, and those shards."""
    a = CUSTOMERS[0][0]
    sa = store.customer_shard(a)
    for b, _, _ in CUSTOMERS[1:]:
        sb = store.customer_shard(b)
        if sb != sa:
            return (a, b), (sa, sb)
    raise AssertionError("every customer on one shard")


def open_on(store, server):
    """States of the database's backends on <server> other than idle (this query's excluded)."""
    rows = store.cluster.sql(server, "SELECT state FROM pg_stat_activity WHERE datname = %s "
                             "AND backend_type = 'client backend' AND state <> 'idle' AND "
                             "pid <> pg_backend_pid()", (store.db,))
    return sorted(r[0] for r in rows)


def wire(store, db):
    w = Wire(store.neki.port)
    w.login(database=db)
    return w


def fatal_of(w):
    """The ErrorResponse the client gets before neki closes the connection."""
    msgs = w.read_all()
    errors = [error_fields(body) for typ, body in msgs if typ == "E"]
    assert len(errors) == 1 and msgs[-1][0] == "E", msgs
    return {k: errors[0][k] for k in "SCM"}


def ok(msgs):
    assert not [t for t, _ in msgs if t == "E"], msgs
    return msgs


# what the client does inside its transaction until the timeout: nothing, or a slow query
IDLE = None
SLOW = "SELECT count(*) FROM customers WHERE pg_sleep(5) IS NULL"   # 5 s a row, every shard


def nothing_open(store):
    for server in store.cluster.shards:
        wait_until(lambda: open_on(store, server) == [], 10,
                   what=f"nothing left open on {server}")


def routed_case(store, slow):
    """A routed client writes on two shards in a transaction, then idles or runs <slow>:
    the FATAL it gets; the shards have nothing open after, the writes are undone."""
    ids, servers = two_shards(store)
    nothing_open(store)
    other = wire(store, store.db)
    w = wire(store, store.db)
    try:
        ok(w.query("BEGIN"))
        ok(w.query(f"UPDATE customers SET name = 'x' WHERE id IN {ids}"))
        for server in servers:
            assert open_on(store, server) == ["idle in transaction"], server
        if slow is not None:
            w.send(b"Q", slow.encode() + b"\0")
        err = fatal_of(w)
        nothing_open(store)
        rows = ok(other.query(f"SELECT name FROM customers WHERE id IN {ids} ORDER BY id"))
        assert [body for t, body in rows if t == "D"] == \
            [b"\0\x01\0\0\0\x0a" + f"customer {i}".encode() for i in ids]
        return err
    finally:
        w.close()
        other.close()


def plain_case(store, slow):
    """The same on the pass-through database: the FATAL a pooled client gets."""
    w = wire(store, store.db + "_plain")
    try:
        ok(w.query("BEGIN"))
        ok(w.query("SELECT 1"))
        if slow is not None:
            w.send(b"Q", b"SELECT pg_sleep(5)\0")
        return fatal_of(w)
    finally:
        w.close()


@pytest.mark.parametrize("name,slow,message", [
    ("idle_transaction_timeout", IDLE, "idle transaction timeout"),
    ("transaction_timeout", IDLE, "transaction timeout"),
    ("transaction_timeout", SLOW, "transaction timeout"),
    ("query_timeout", SLOW, "query timeout"),
])
def test_timeout_closes_a_routed_transaction_over_two_shards(timed, name, slow, message):
    want = {"S": "FATAL", "C": "08P01", "M": message}
    with setting(timed, name, TIMEOUT):
        start = time.monotonic()
        assert routed_case(timed, slow) == want
        assert TIMEOUT <= time.monotonic() - start < 5, "not stopped by the timeout"
        assert plain_case(timed, slow) == want
    assert timed.run("SELECT count(*) FROM customers") == [(len(CUSTOMERS),)]



def test_pool_idle_timeout_spares_the_pools_a_routed_session_holds(pg_cluster):
    """A routed session borrows each shard's pool for its whole life, though its links go
    back at every transaction end: pool_idle_timeout frees those pools only once it has
    gone. A pass-through pool emptied after them is freed first, so the janitor did look."""
    idle = r"cleaning up idle pool for user postgres on db {} because: pool idle timeout"
    with sharded_database(pg_cluster, "pidle") as db:
        plain = f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"
        with routing_neki(pg_cluster, db, topology(db), Store, databases={"plain": plain},
                          settings={"workers": 1, "server_idle_timeout": 0.2,
                                    "pool_idle_timeout": TIMEOUT}) as st:
            create_schema(st, reference=False)
            w = wire(st, db)
            try:
                ok(w.query("SELECT count(*) FROM customers"))       # every shard
                wait_until(lambda: servers_of(st, db + "@") == [], 5,
                           what="the shard links closed")
                with st.neki.connect(dbname="plain") as conn:
                    conn.execute("SELECT 1")
                st.neki.wait_log(idle.format("plain"), timeout=5)
                for shard in pg_cluster.shards:     # the pools the session's route holds
                    assert not re.search(idle.format(f"{db}@{shard}"), st.neki.log())
                rows = ok(w.query("SELECT count(*) FROM customers"))
                assert ("D", b"\0\x01\0\0\0\x010") in rows
            finally:
                w.close()
            for shard in pg_cluster.shards:
                st.neki.wait_log(idle.format(f"{db}@{shard}"), timeout=5)


def servers_of(store, prefix):
    """SHOW SERVERS rows of the pools whose database starts with <prefix>."""
    with store.neki.admin_connect(dbname="pgbouncer") as conn:
        cur = conn.execute("SHOW SERVERS")
        col = [d.name for d in cur.description].index("database")
        return [r for r in cur.fetchall() if r[col].startswith(prefix)]
