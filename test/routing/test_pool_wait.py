"""
A routed session waiting for a shard link that is idle in another worker. Pool limits are
global across workers (shm counters): with pool_size = 1 the only link a shard pool
(`<db>@<shard>`) may have can sit idle in one worker while a session of the other worker
waits for it. pgbouncer's single process would hand that link over at once; neki's workers
close their idle link of a pool whose clients wait elsewhere, so the wait must stay far
below query_wait_timeout. The sessions are put on both workers by the worker slot their
BackendKeyData encodes (session_cancel.c: pid = (slot + 1) << 20 | counter).
"""
import threading
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


def run_all(threads, seconds=60):
    """Start <threads>, then wait for each (at most <seconds> apiece)."""
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)


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


def two_keys_on_two_shards(st):
    """Two customer ids whose rows live on different shards."""
    st.run("INSERT INTO customers SELECT g, 'c' || g, NULL FROM generate_series(10, 40) g "
           "ON CONFLICT DO NOTHING")
    placement = {s: ids for s, ids in st.placement("customers", "id").items() if ids}
    (s1, ids1), (s2, ids2) = list(placement.items())[:2]
    return ids1[0], ids2[0]


def test_transactions_holding_each_others_shard_never_wait(tight):
    """pool_size = 1 per shard: X holds the link of k1's shard and needs k2's, Y the reverse.
    Waiting for each other's link would hold both until query_wait_timeout (20 s); a session
    that holds links of its transaction takes a link beyond pool_size instead."""
    k1, k2 = two_keys_on_two_shards(tight)
    x, y = tight.connect(autocommit=False), tight.connect(autocommit=False)
    try:
        x.execute("UPDATE customers SET name = name WHERE id = %s", (k1,))
        y.execute("UPDATE customers SET name = name WHERE id = %s", (k2,))
        errors = []

        def cross(c, key):
            try:
                # (a read: no row lock to wait for, only the other shard's link)
                c.execute("SELECT name FROM customers WHERE id = %s", (key,)).fetchall()
                c.commit()
            except psycopg.Error as e:      # (the failure this test is about)
                errors.append(e)
        t0 = time.monotonic()
        tx = threading.Thread(target=cross, args=(x, k2))
        ty = threading.Thread(target=cross, args=(y, k1))
        tx.start()
        ty.start()
        tx.join(30)
        ty.join(30)
        assert not errors, errors
        assert time.monotonic() - t0 < WAIT_BOUND
    finally:
        x.close()
        y.close()
    # the links beyond pool_size were closed when given back: one link per shard again
    wait_until(lambda: all(tight.cluster.sql(
        s, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND pid <> pg_backend_pid() AND application_name <> 'neki-setup'",
        dbname=tight.db)[0][0] <= 1 for s in ("shard-a", "shard-b", "shard-c", "shard-d")),
        10, what="one link per shard")


def test_concurrent_scatters_share_one_link_per_shard(tight):
    """Scatters from several sessions at once, one link per shard: each takes the shards'
    links in one order, so none holds a link another waits for while it waits for that
    one's (all of them finish; a cycle would last until query_wait_timeout)."""
    errors, done = [], []
    sessions = [tight.connect() for _ in range(6)]
    start = threading.Barrier(len(sessions))

    def loop(c):
        try:
            start.wait(10)
            for _ in range(3):
                c.execute("SELECT count(*) FROM customers").fetchall()
                c.execute("SELECT count(*) FROM orders").fetchall()
            done.append(1)
        except psycopg.Error as e:
            errors.append(e)
    t0 = time.monotonic()
    try:
        for _ in range(4):
            # cold pools every round: room in every pool is no promise to anyone
            with tight.neki.admin_connect() as adm:
                adm.execute("RECONNECT", prepare=False)
            start.reset()
            run_all([threading.Thread(target=loop, args=(c,)) for c in sessions])
    finally:
        for c in sessions:
            c.close()
    assert not errors, errors
    assert len(done) == 4 * len(sessions)
    assert time.monotonic() - t0 < 30


def test_rows_read_first_under_contention(tight):
    """Statements that read tables through the router first (a window over every shard, an
    ordered-set aggregate, a join off the key: several rounds each) from 8 sessions at
    once, one link per shard, with writers beside them: every statement finishes with the
    right rows, far below query_wait_timeout (a round holding a link while waiting for
    another's would stall them)."""
    with tight.connect() as c:
        c.execute("INSERT INTO orders SELECT g % 2 + 1, 1000 + g, 'new', g "
                  "FROM generate_series(1, 40) g")
    queries = {
        "SELECT id, row_number() OVER (ORDER BY id) FROM orders WHERE id <= 1040":
            [(1000 + g, g) for g in range(1, 41)],
        "SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY id) FROM orders "
        "WHERE id <= 1040": [(1020,)],
        "SELECT c.name, count(*) FROM customers c JOIN orders o ON o.id - 999 = c.id "
        "WHERE o.id <= 1040 AND c.id <= 2 GROUP BY 1 ORDER BY 1": [("two", 1)],
    }
    errors, done = [], []
    start = threading.Barrier(10)

    def reader(c):
        try:
            start.wait(10)
            for _ in range(4):
                for sql, want in queries.items():
                    got = c.execute(sql).fetchall()
                    assert sorted(got) == sorted(want), (sql, got)
            done.append(1)
        except (psycopg.Error, AssertionError) as e:
            errors.append(e)

    def writer(c, base):
        try:
            start.wait(10)
            for i in range(20):
                c.execute("INSERT INTO orders VALUES (%s, %s, 'w', 1)", (i % 2 + 1, base + i))
            done.append(1)
        except psycopg.Error as e:
            errors.append(e)
    sessions = [tight.connect() for _ in range(10)]
    threads = [threading.Thread(target=reader, args=(c,)) for c in sessions[:8]] + \
        [threading.Thread(target=writer, args=(c, 5000 + 100 * k))
         for k, c in enumerate(sessions[8:])]
    t0 = time.monotonic()
    try:
        run_all(threads)
    finally:
        for c in sessions:
            c.close()
    assert not errors, errors[:3]
    assert len(done) == 10
    assert time.monotonic() - t0 < 20
