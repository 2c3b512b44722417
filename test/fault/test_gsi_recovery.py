"""
Global secondary index writes under failure (issue 19's crash matrix): in __neki.tx_mode
atomic an owner row and its lookup rows commit with two-phase commit, so a worker killed at
each step of that commit (the failpoints of test_atomic_recovery.py) leaves, once the
recovery ran, the owners and the lookups equal: both written or neither. A lookup shard
stopped before the write fails the statement with nothing written anywhere, in either mode.
A shard stopped during __neki.gsi_build fails the call, leaves the index write-only, and a
new call builds it.
"""
import sys
import threading
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import make_private_dir, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "routing"))
from test_routing import Store, routing_neki, sharded_database, SCHEMA  # noqa: E402
from test_gsi import LOOKUPS, assert_lookups_match, gsi_topology  # noqa: E402
from test_gsi_build import assert_exact, build, building_store, declared  # noqa: E402
from test_atomic_recovery import env, prepared, routed_again  # noqa: E402


@pytest.fixture(scope="module")
def store(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    fp = Path(make_private_dir("neki-fp.")) / "failpoint"
    with sharded_database(pg_cluster, "gsirec") as db, env(NEKI_TEST_FAILPOINT=fp), \
            routing_neki(pg_cluster, db, gsi_topology(db), Store,
                         settings={"atomic_recovery_grace": 2}) as st:
        for sql in SCHEMA + LOOKUPS:
            st.run(sql)
        st.failpoint = fp
        yield st


def owner_far_from_lookup(store, start):
    """(customer, order id) whose owner row and id lookup row are on different shards."""
    for n in range(start, start + 500):
        cid, oid = n, n * 7 + 1
        plan = "\n".join(r[0] for r in store.run(
            f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders_by_id WHERE id = {oid}"))
        if store.customer_shard(cid) not in plan:
            return cid, oid
    raise AssertionError("no owner placed away from its lookup row")


CASES = [("prepare:1", False), ("decision", True), ("commit_prepared:1", True)]


@pytest.mark.parametrize("failpoint,committed", CASES)
def test_worker_killed_during_a_gsi_write(store, failpoint, committed):
    cid, oid = owner_far_from_lookup(store, 100 + 50 * [c[0] for c in CASES].index(failpoint))
    try:
        with store.connect(autocommit=True) as conn:
            conn.execute("SET __neki.tx_mode = 'atomic'")
            store.failpoint.write_text(failpoint + "\n")
            with pytest.raises(psycopg.OperationalError):
                conn.execute(f"INSERT INTO orders VALUES ({cid}, {oid}, 'new', 1)")
        assert not store.failpoint.exists()
        wait_until(lambda: prepared(store) == {}, 30, what="recovery")
        routed_again(store)
        owners = assert_lookups_match(store)
        assert [(i, c) for i, c, _ in owners] == ([(oid, cid)] if committed else [])
    finally:
        store.failpoint.unlink(missing_ok=True)
        routed_again(store)
        store.run("DELETE FROM orders")
    assert assert_lookups_match(store) == []


def session_reaching_every_shard(store, mode):
    """A session in tx mode <mode> whose worker reaches every shard: SET __neki.tx_mode =
    atomic checks every shard, and a worker's pool holds off a server that failed for
    server_login_retry, so each try is a new session (it may land on another worker)."""
    held = []

    def ok():
        conn = store.connect(autocommit=True)
        try:
            conn.execute("SET __neki.tx_mode = 'atomic'")
            conn.execute(f"SET __neki.tx_mode = '{mode}'")
            held.append(conn)
            return True
        except psycopg.Error:
            conn.close()
            return False
    wait_until(ok, 40, what="a session reaching every shard")
    return held[0]


@pytest.mark.parametrize("mode", ["multi", "atomic"])
def test_a_stopped_lookup_shard_fails_the_write_whole(store, mode):
    cid, oid = owner_far_from_lookup(store, 300 if mode == "multi" else 400)
    plan = "\n".join(r[0] for r in store.run(
        f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders_by_id WHERE id = {oid}"))
    down = [s for s in store.cluster.shards if s in plan][0]
    with session_reaching_every_shard(store, mode) as conn:
        store.cluster.stop_server(down, mode="fast")
        try:
            with pytest.raises(psycopg.Error):
                conn.execute(f"INSERT INTO orders VALUES ({cid}, {oid}, 'new', 1)")
        finally:
            store.cluster.start_server(down)
    routed_again(store)
    wait_until(lambda: prepared(store) == {}, 30, what="nothing left prepared")
    assert assert_lookups_match(store) == []

    def written():
        # (each worker's pool may still hold off the shard for server_login_retry: until
        # the write goes through, every failed attempt leaves nothing behind)
        try:
            with store.connect() as conn:
                conn.execute(f"INSERT INTO orders VALUES ({cid}, {oid}, 'new', 1)")
            return True
        except psycopg.Error:
            assert assert_lookups_match(store) == []
            return False
    wait_until(written, 40, what=f"the write through {down} once it is back")
    assert [(i, c) for i, c, _ in assert_lookups_match(store)] == [(oid, cid)]

    def cleaned():      # (another worker may still hold off the restarted shard)
        try:
            store.run("DELETE FROM orders")
            return True
        except psycopg.Error:
            return False
    wait_until(cleaned, 40, what="the rows deleted")


@pytest.fixture(scope="module")
def building(pg_cluster):
    with building_store(pg_cluster, "gsibf") as st:
        yield st


def test_a_shard_stopped_during_a_gsi_build(building):
    """The build waits on a shard for a transaction older than its write-only revision; the
    shard stops meanwhile: the call fails naming it, the index stays write-only (maintained),
    nothing crashes, and a new call once the shard is back builds it exactly."""
    st = building
    rows = ", ".join(f"({i % 97 + 1}, {i}, 'new', 1)" for i in range(1, 3001))
    st.run(f"INSERT INTO orders VALUES {rows}")
    down = st.customer_shard(2)
    old = st.cluster.connect(down, dbname=st.db, autocommit=False)
    old.execute("SELECT 1 FROM orders LIMIT 1")      # (its transaction stays open)
    result = {}

    def call():
        try:
            result["row"] = build(st, "'orders_by_id'", "timeout => '60 s'")
        except psycopg.Error as e:
            result["error"] = e

    t = threading.Thread(target=call)
    t.start()
    stopped = False
    try:
        wait_until(lambda: declared(st).get("write_only") is True, 30,
                   what="the index write-only")
        st.cluster.stop_server(down, mode="fast")
        stopped = True
        t.join(60)
    finally:
        old.close()
        if stopped:
            st.cluster.start_server(down)
    e = result.get("error")
    assert e is not None and "row" not in result, result
    assert e.diag.sqlstate.startswith("08") or e.diag.sqlstate == "57P01", e.diag.sqlstate
    assert down in (e.diag.message_detail or ""), e.diag.message_detail
    assert declared(st).get("write_only") is True
    routed_again(st)
    out = build(st)
    assert out["rows_verified"] == 3000
    assert len(assert_exact(st)) == 3000
    assert declared(st)["enabled"] is True and "write_only" not in declared(st)
