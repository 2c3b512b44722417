"""
Failover of a shard with a standby (issue 22, NEKI-SPEC 6.6): when a shard's primary stops
answering and its standby is promoted, neki finds the new primary among the shard's
servers; meanwhile the shard's new statements wait (failover_hold_timeout) instead of
failing, then run there; other shards never notice; no acknowledged commit is lost. Each
test has its own cluster (a promotion cannot be undone).
"""
import os
import re
import signal
import threading
import time

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_replicas import key_on, replicated

STARTED = re.compile(r"(worker|admin) (\d+) started \(pid (\d+)\)")


def admin_pid(inst):
    """The admin process's pid, from the log's latest 'admin N started (pid P)' line."""
    pids = [int(pid) for kind, _, pid in STARTED.findall(inst.log()) if kind == "admin"]
    return pids[-1] if pids else None

TERMINATED = ("57P01", "08006", "08003", "08000", "57P02", "57P03", None)


@pytest.fixture
def rep():
    with replicated(settings={"failover_hold_timeout": "15"}) as r:
        yield r


def ids_on(rep, shard, n, start):
    """<n> ids from <start> whose rows live on <shard> (EXPLAIN (NEKI_PLAN), one session)."""
    out, i = [], start
    with rep.connect() as conn:
        while len(out) < n:
            plan = conn.execute(f"EXPLAIN (NEKI_PLAN) SELECT * FROM items WHERE id = {i}")
            if shard in " ".join(str(r[0]) for r in plan.fetchall()):
                out.append(i)
            i += 1
    return out


class Writer(threading.Thread):
    """Autocommit INSERTs of <ids> through neki, one at a time; records what was
    acknowledged, the errors (SQLSTATE, when) and each statement's latency."""

    def __init__(self, rep, ids):
        super().__init__(daemon=True)
        self.rep, self.ids = rep, ids
        self.acked, self.errors, self.latency = [], [], []
        self.stop = threading.Event()

    def run(self):
        conn = None
        for i in self.ids:
            if self.stop.is_set():
                break
            t0 = time.monotonic()
            try:
                if conn is None:
                    conn = self.rep.connect()
                conn.execute(f"INSERT INTO items VALUES ({i}, 'w')")
                self.acked.append(i)
            except psycopg.Error as e:
                self.errors.append((getattr(e, "sqlstate", None), str(e), time.monotonic()))
                try:
                    conn.close()
                except Exception:
                    pass
                conn = None
            self.latency.append((t0, time.monotonic() - t0))
            time.sleep(0.005)
        if conn is not None:
            conn.close()


def under_load(rep, switch):
    """Writers on shard-a and shard-b; once both wrote 50 rows, switch() runs (its result
    returned), then the load goes on until shard-a took 50 more. (wa, wb, t0, result)."""
    wa = Writer(rep, ids_on(rep, "shard-a", 1500, 1))
    wb = Writer(rep, ids_on(rep, "shard-b", 1500, 1))
    wa.start()
    wb.start()
    try:
        wait_until(lambda: len(wa.acked) > 50 and len(wb.acked) > 50, 20, what="writes")
        t0 = time.monotonic()
        result = switch()
        before = len(wa.acked)
        wait_until(lambda: len(wa.acked) > before + 50, 20, what="writes on the new primary")
    finally:
        wa.stop.set()
        wb.stop.set()
        wa.join(30)
        wb.join(30)
    return wa, wb, t0, result


def primary_of(rep, shard):
    rows = rep.shards()
    return [k[1] for k, r in rows.items() if k[0] == shard and r["primary"]]


def test_promotion_under_a_write_load(rep):
    rep.wait_roles({("shard-a", 0): "primary", ("shard-a", 1): "standby"})
    c = rep.cluster

    def fail_over():
        c.stop_server("shard-a", "fast")   # the standby gets every WAL record first
        wait_until(lambda: rep.shards()[("shard-a", 0)]["role"] == "down", 10,
                   what="the old primary seen down")
        assert primary_of(rep, "shard-a") == []
        time.sleep(1.0)     # the shard has no primary for a while: its writes wait
        c.promote("shard-a-r1")
        t_promoted = time.monotonic()
        wait_until(lambda: primary_of(rep, "shard-a") == [1], 10, what="the new primary")
        return t_promoted
    wa, wb, t_stop, t_promoted = under_load(rep, fail_over)
    # shard-a: at most the statement in flight at the stop failed, as a terminated session;
    # every later one waited and succeeded
    assert len(wa.errors) <= 1, wa.errors
    assert all(e[0] in TERMINATED and e[2] < t_stop + 1.0 for e in wa.errors), wa.errors
    stalls = [d for t0, d in wa.latency if t0 > t_stop]
    assert max(stalls) >= 0.9      # a write waited through the switch ...
    assert max(stalls) < (t_promoted - t_stop) + 5  # ... and no longer than needed
    # shard-b never noticed
    assert wb.errors == []
    assert max(d for t0, d in wb.latency if t0 > t_stop) < 0.5
    # no acknowledged commit is lost
    got_a = {r[0] for r in c.sql("shard-a-r1", "SELECT id FROM items", dbname=rep.db)}
    got_b = {r[0] for r in c.sql("shard-b", "SELECT id FROM items", dbname=rep.db)}
    assert set(wa.acked) <= got_a
    assert set(wb.acked) <= got_b
    # reads and writes go on through neki on the new primary
    assert rep.run("SELECT count(*) FROM items")[0][0] == len(got_a) + len(got_b)
    # a RELOAD that leaves the servers as they are keeps what the admin learned
    with rep.neki.admin_connect() as conn:
        conn.execute("RELOAD")
    assert primary_of(rep, "shard-a") == [1]
    late = key_on(rep, "shard-a", max(wa.ids) + 1)
    t0 = time.monotonic()
    rep.run(f"INSERT INTO items VALUES ({late}, 'after reload')")
    assert time.monotonic() - t0 < 0.5
    assert c.sql("shard-a-r1", f"SELECT v FROM items WHERE id = {late}",
                 dbname=rep.db) == [("after reload",)]
    # a restarted admin process keeps the choice too (the segment outlives it)
    old = admin_pid(rep.neki)
    os.kill(old, signal.SIGKILL)
    wait_until(lambda: admin_pid(rep.neki) != old, 10, what="a new admin process")
    wait_until(lambda: rep.shards()[("shard-a", 1)]["role"] == "primary", 10,
               what="the new admin's first answers")
    assert primary_of(rep, "shard-a") == [1]
    # (it started from server 1: it never had to choose it again)
    assert rep.neki.log().count("shard shard-a: its primary is server 1 now") == 1
    late = key_on(rep, "shard-a", late + 1)
    t0 = time.monotonic()
    rep.run(f"INSERT INTO items VALUES ({late}, 'after restart')")
    assert time.monotonic() - t0 < 0.5


def test_no_primary_within_the_hold_fails_only_that_shard(rep):
    """No standby is promoted: a statement for the shard waits failover_hold_timeout (set
    to 1 s on the console), then fails with NK205, or ends at once when cancelled; the other
    shard's statements run."""
    rep.wait_roles({("shard-a", 0): "primary", ("shard-a", 1): "standby"})
    a, b = key_on(rep, "shard-a", 1), key_on(rep, "shard-b", 1)
    rep.cluster.stop_server("shard-a", "fast")
    wait_until(lambda: rep.shards()[("shard-a", 0)]["role"] == "down", 10,
               what="the primary seen down")
    # a cancel ends the wait at once (failover_hold_timeout is 15 s here)
    with rep.connect() as conn:
        timer = threading.Timer(0.3, conn.cancel)
        timer.start()
        t0 = time.monotonic()
        with pytest.raises(psycopg.errors.QueryCanceled):
            conn.execute(f"INSERT INTO items VALUES ({a}, 'x')")
        assert time.monotonic() - t0 < 2
        timer.join()
    with rep.neki.admin_connect() as conn:
        conn.execute("SET failover_hold_timeout = 1")
    t0 = time.monotonic()
    with pytest.raises(psycopg.Error) as e:
        rep.run(f"INSERT INTO items VALUES ({a}, 'x')")
    waited = time.monotonic() - t0
    assert e.value.diag.sqlstate == "NK205"
    assert "shard shard-a with type SIDECAR_TYPE_PRIMARY" in e.value.diag.message_primary
    assert 0.9 <= waited < 5
    t0 = time.monotonic()
    rep.run(f"INSERT INTO items VALUES ({b}, 'x')")
    assert time.monotonic() - t0 < 0.5


def test_a_read_only_primary_takes_reads_and_refuses_writes(rep):
    rep.wait_roles({("shard-a", 0): "primary"})
    c = rep.cluster
    a = key_on(rep, "shard-a", 1)
    rep.run(f"INSERT INTO items VALUES ({a}, 'x')")
    c.sql("shard-a", "ALTER SYSTEM SET default_transaction_read_only = on")
    c.sql("shard-a", "SELECT pg_reload_conf()")
    try:
        wait_until(lambda: rep.shards()[("shard-a", 0)]["state"] == "read-only", 10,
                   what="the primary seen read-only")
        # new links read the new default; the pool's idle ones are reset per transaction
        with rep.neki.admin_connect() as conn:
            conn.execute(f"RECONNECT {rep.db}")
        assert rep.run(f"SELECT v FROM items WHERE id = {a}") == [("x",)]
        with pytest.raises(psycopg.Error) as e:
            rep.run(f"UPDATE items SET v = 'y' WHERE id = {a}")
        assert e.value.diag.sqlstate == "25006"
        assert "read-only transaction" in e.value.diag.message_primary
    finally:
        c.sql("shard-a", "ALTER SYSTEM RESET default_transaction_read_only")
        c.sql("shard-a", "SELECT pg_reload_conf()")


def test_switchover_under_a_write_load(rep):
    """SWITCHOVER "shard-a" on the console: the shard's new statements wait while the old
    primary turns read-only, the standby catches up and is promoted; then they run on the
    new primary. Nothing fails, nothing acknowledged is lost, shard-b never waits."""
    rep.wait_roles({("shard-a", 0): "primary", ("shard-a", 1): "standby"})
    c = rep.cluster
    notes = []

    def switch_over():
        with rep.neki.admin_connect() as conn:
            conn.add_notice_handler(lambda d: notes.append(d.message_primary))
            conn.execute('SWITCHOVER "shard-a"')
        return time.monotonic()
    wa, wb, t0, t_done = under_load(rep, switch_over)
    took = t_done - t0
    assert notes == ['shard "shard-a": server 1 is the primary now']
    assert primary_of(rep, "shard-a") == [1]
    assert wa.errors == [] and wb.errors == [], (wa.errors, wb.errors)
    assert took < 5
    assert max(d for t, d in wb.latency if t > t0) < 0.5
    got_a = {r[0] for r in c.sql("shard-a-r1", "SELECT id FROM items", dbname=rep.db)}
    assert set(wa.acked) <= got_a
    assert rep.shards()[("shard-a", 0)]["state"] == "read-only"
    # a second one has no standby to go to (the old primary is not one)
    with rep.neki.admin_connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute('SWITCHOVER "shard-a"')
    assert "no standby of shard" in str(e.value)
    with rep.neki.admin_connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute('SWITCHOVER "auth-x"')
    assert 'shard "auth-x" has no standbys' in str(e.value)


def test_a_read_only_primary_yields_to_a_writable_one(rep):
    """The chosen primary is sticky while it answers as one, but a read-only one gives way
    to a writable primary of the same shard: a standby promoted while the old primary is
    only read-only (as after a SWITCHOVER whose new primary the poller saw last) takes the
    writes."""
    rep.wait_roles({("shard-a", 0): "primary", ("shard-a", 1): "standby"})
    c = rep.cluster
    c.sql("shard-a", "ALTER SYSTEM SET default_transaction_read_only = on")
    c.sql("shard-a", "SELECT pg_reload_conf()")
    wait_until(lambda: rep.shards()[("shard-a", 0)]["state"] == "read-only", 10,
               what="the primary seen read-only")
    assert primary_of(rep, "shard-a") == [0]    # read-only, but the only primary
    c.wait_replayed("shard-a-r1")      # (the standby has the table before it is promoted)
    c.promote("shard-a-r1")
    wait_until(lambda: primary_of(rep, "shard-a") == [1], 10, what="the writable primary")
    a = key_on(rep, "shard-a", 1)
    rep.run(f"INSERT INTO items VALUES ({a}, 'on the writable one')")
    assert c.sql("shard-a-r1", f"SELECT v FROM items WHERE id = {a}",
                 dbname=rep.db) == [("on the writable one",)]
    assert rep.neki.log().count("shard shard-a: its primary is server 1 now") == 1
