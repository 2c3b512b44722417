"""
Distributed deadlocks: two transactions whose waits are on different shards (A waits on
shard 1 for B, B on shard 2 for A) form a cycle no Postgres server sees. neki's admin
process finds it from the shards' pg_locks and its workers' links and cancels one of the
statements: that client gets 40P01 "deadlock detected" with the cycle in the DETAIL, the
other goes on and commits. A cycle inside one shard stays Postgres's own (its 40P01 and
DETAIL). With distributed_deadlock_timeout = 0 nothing is canceled (a lock_timeout ends
the wait). The simple and the extended protocol, in and out of __neki.tx_mode atomic.
"""
import threading

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology
from test_savepoints import ids_on_shards


@pytest.fixture(scope="module")
def store(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    with sharded_database(pg_cluster, "dlock") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"distributed_deadlock_timeout": 0.3}) as st:
        create_schema(st)
        yield st


def reset(store, ids):
    store.run("DELETE FROM orders WHERE customer_id >= 9000")
    store.run("INSERT INTO orders (customer_id, id, total) VALUES " +
              ", ".join(f"({i}, 1, 100)" for i in ids))


def update(conn, cid, delta, extended):
    if extended:
        conn.execute("UPDATE orders SET total = total + %s WHERE customer_id = %s AND id = 1",
                     (delta, cid))
    else:
        conn.execute(f"UPDATE orders SET total = total + {delta} "
                     f"WHERE customer_id = {cid} AND id = 1")


def crossing(store, a, b, extended=False, setup=()):
    """Client 1 updates a then b, client 2 b then a, each in a transaction: returns what each
    client's second update raised (None when it went through) and commits the survivors."""
    conns = [store.connect() for _ in range(2)]
    out = [None, None]
    try:
        for conn in conns:
            for sql in setup:
                conn.execute(sql)
            conn.execute("BEGIN")
        update(conns[0], a, -1, extended)
        update(conns[1], b, -2, extended)

        def second(k, cid):
            try:
                update(conns[k], cid, 10 * (k + 1), extended)
                conns[k].execute("COMMIT")
            except psycopg.Error as e:
                out[k] = e
                conns[k].execute("ROLLBACK")
        threads = [threading.Thread(target=second, args=(0, b)),
                   threading.Thread(target=second, args=(1, a))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not any(t.is_alive() for t in threads), "the cycle was not broken"
    finally:
        for conn in conns:
            conn.close()
    return out


def totals(store, ids):
    return dict(store.run("SELECT customer_id, total FROM orders WHERE customer_id IN (" +
                          ", ".join(map(str, ids)) + ")"))


@pytest.mark.parametrize("extended", [False, True], ids=["simple", "extended"])
@pytest.mark.parametrize("mode", ["multi", "atomic"])
def test_a_cycle_across_shards_is_broken(store, mode, extended):
    a, b = ids_on_shards(store, 2, 9000)
    reset(store, [a, b])
    errs = crossing(store, a, b, extended, [f"SET __neki.tx_mode = '{mode}'"])
    failed = [k for k in (0, 1) if errs[k] is not None]
    assert len(failed) == 1, errs
    k = failed[0]
    e = errs[k]
    assert e.sqlstate == "40P01", (e.sqlstate, str(e))
    assert e.diag.message_primary == "deadlock detected"
    detail = e.diag.message_detail
    assert store.customer_shard(a) in detail and store.customer_shard(b) in detail, detail
    assert "waits on shard" in detail and "retry" in e.diag.message_hint
    # the survivor's transaction committed whole, the victim's not at all
    got = totals(store, [a, b])
    if k == 0:      # client 2 committed: b -2, a +20
        assert got == {a: 120, b: 98}, got
    else:           # client 1 committed: a -1, b +10
        assert got == {a: 99, b: 110}, got
    assert "distributed deadlock" in store.neki.log()


def test_a_cycle_in_one_shard_stays_postgres_own(store):
    ids = [i for i in range(9100, 9300) if store.customer_shard(i) == store.customer_shard(9100)]
    a, b = ids[:2]
    reset(store, [a, b])
    errs = crossing(store, a, b)
    failed = [e for e in errs if e is not None]
    assert len(failed) == 1 and failed[0].sqlstate == "40P01", errs
    assert failed[0].diag.message_detail.startswith("Process "), failed[0].diag.message_detail


def test_no_detection_when_the_timeout_is_zero(store):
    a, b = ids_on_shards(store, 2, 9400)
    reset(store, [a, b])
    with store.neki.admin_connect() as adm:
        adm.autocommit = True
        adm.execute("SET distributed_deadlock_timeout = 0")
    try:
        errs = crossing(store, a, b, setup=["SET lock_timeout = '3s'"])
    finally:
        with store.neki.admin_connect() as adm:
            adm.autocommit = True
            adm.execute("SET distributed_deadlock_timeout = 0.3")
    states = sorted(e.sqlstate for e in errs if e is not None)
    assert states and set(states) == {"55P03"}, errs     # lock_timeout, never 40P01


def test_waits_without_a_cycle_are_left_alone(store):
    """A transaction waiting long on another one that holds its lock (no cycle) is not
    canceled: it goes on once the holder commits."""
    a, b = ids_on_shards(store, 2, 9500)
    reset(store, [a, b])
    with store.connect() as holder, store.connect() as waiter:
        holder.execute("BEGIN")
        waiter.execute("BEGIN")
        update(holder, a, 1, False)
        update(holder, b, 1, False)
        done = []
        t = threading.Thread(target=lambda: (update(waiter, a, 5, False), waiter.execute("COMMIT"),
                                             done.append(True)))
        t.start()
        # the waiter waits longer than the detector's timeout, several passes
        wait_until(lambda: _waited(store, a, 1.5), 30, what="a long lock wait")
        assert not done
        holder.execute("COMMIT")
        t.join(30)
        assert done == [True]
    assert totals(store, [a, b]) == {a: 106, b: 101}


def _waited(store, cid, seconds):
    """A backend on customer <cid>'s shard has waited for a lock more than <seconds>."""
    return store.shard_rows(store.customer_shard(cid), "SELECT count(*) FROM pg_locks "
                            f"WHERE NOT granted AND waitstart < now() - interval '{seconds} s'"
                            )[0][0] > 0
