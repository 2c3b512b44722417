"""
A routed session waiting for a shard link that is idle in another worker. Pool limits are
global across workers (shm counters): with pool_size = 1 the only link a shard pool
(`<db>@<shard>`) may have can sit idle in one worker while a session of the other worker
waits for it. pgbouncer's single process would hand that link over at once; neki's workers
close their idle link of a pool whose clients wait elsewhere, so the wait must stay far
below query_wait_timeout. The sessions are put on both workers by the worker slot their
BackendKeyData encodes (session_cancel.c: pid = (slot + 1) << 20 | counter).
"""
import time

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology

WAIT_BOUND = 2.0		# seconds; query_wait_timeout below is 20


def worker_of(conn):
    return (conn.info.backend_pid >> 20) - 1


def one_per_worker(connect, workers=2, seconds=20):
    """Sessions from <connect>() until one lands on each worker: those, the others closed.
    Polls until a deadline: a worker still starting under load takes no connection."""
    found = {}
    deadline = time.monotonic() + seconds
    while len(found) < workers:
        assert time.monotonic() < deadline, "no session on every worker"
        c = connect()
        w = worker_of(c)
        if w in found:
            c.close()
        else:
            found[w] = c
    return [found[w] for w in sorted(found)]


def alternate(sessions, sql, rounds=6):
    """Run <sql> on each session in turn, <rounds> times; the longest statement's seconds."""
    worst = 0.0
    for _ in range(rounds):
        for c in sessions:
            t0 = time.monotonic()
            c.execute(sql).fetchall()
            worst = max(worst, time.monotonic() - t0)
    return worst


@pytest.fixture(scope="module")
def tight(pg_cluster):
    """The storefront routed by 2 workers with a pool of one link per shard."""
    settings = {"default_pool_size": 1, "query_wait_timeout": 20}
    with sharded_database(pg_cluster, "poolwait") as db, \
            routing_neki(pg_cluster, db, topology(db), Store, settings=settings) as st:
        create_schema(st)
        st.run("INSERT INTO customers VALUES (1, 'one', NULL), (2, 'two', NULL)")
        yield st


def test_routed_sessions_on_two_workers_share_one_link(tight):
    sessions = one_per_worker(tight.connect)
    try:
        worst = alternate(sessions, "SELECT name FROM customers WHERE id = 1")
        assert worst < WAIT_BOUND, f"a statement waited {worst:.2f} s"
        # a transaction on one worker, then a statement on the other, several times
        for _ in range(3):
            for c in sessions:
                t0 = time.monotonic()
                with c.transaction():
                    c.execute("UPDATE customers SET name = name WHERE id = 1")
                    c.execute("SELECT name FROM customers WHERE id = 1").fetchall()
                assert time.monotonic() - t0 < WAIT_BOUND
    finally:
        for c in sessions:
            c.close()
    # pool_size = 1 held: the pool's one link (a link closed for the other worker may take
    # a moment to leave pg_stat_activity; the admin's own "neki-setup" session is not pooled)
    wait_until(lambda: tight.cluster.sql(
        "shard-d", "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND application_name <> 'neki-setup'",
        dbname=tight.db)[0][0] <= 1, 5, what="one link on shard-d")


def test_routed_scatter_on_two_workers(tight):
    """A statement reaching every shard needs each shard's one link: those idle in the other
    worker are all given up."""
    sessions = one_per_worker(tight.connect)
    try:
        worst = alternate(sessions, "SELECT count(*) FROM customers", rounds=4)
        assert worst < WAIT_BOUND, f"a statement waited {worst:.2f} s"
    finally:
        for c in sessions:
            c.close()
