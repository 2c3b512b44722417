"""
Data shards that fail while routed loads run (issue 21, faults); a table `ledger` sharded by
id over the four data shards.

- A shard stopped during three loops (a scatter count, single-shard reads on the other
  shards, single-shard reads on it): only the statements that need it fail, each with an
  error that names it; the loop on the other shards never notices; once the server is back
  neki uses it again without a restart.
- A shard behind a test-owned proxy on 127.0.0.1 that accepts TCP but never answers, closes
  at once, or resets: a statement that needs it fails after server_connect_timeout (stall)
  or at once (close, reset) naming the shard, while statements on the other shards go on
  at full speed meanwhile; a link that stops answering mid-session: query_timeout fires
  as configured (pgbouncer's FATAL) and the other sessions go on.
"""
import contextlib
import threading
import time

import pytest

from conftest import wait_until
from faultlib import (DATA_SHARDS, LEDGER, FaultProxy, ProxiedShard, Store, ids_by_shard,
                      ledger_neki, ledger_topology, psycopg, routing_neki, sharded_database)

VICTIM = "shard-b"


class Loop(threading.Thread):
    """Runs <sql> with the ids of <ids> in turn on one connection until stopped; every
    outcome is recorded as (time.monotonic(), None or the error)."""

    def __init__(self, st, sql, ids=(None,)):
        super().__init__(daemon=True)
        self.st, self.sql, self.ids = st, sql, list(ids)
        self.outcomes = []
        self.stop = threading.Event()
        self.conn = st.connect()

    def run(self):
        k = 0
        while not self.stop.is_set():
            i = self.ids[k % len(self.ids)]
            k += 1
            try:
                self.conn.execute(self.sql, None if i is None else (i,)).fetchall()
                self.outcomes.append((time.monotonic(), None))
            except psycopg.Error as e:
                self.outcomes.append((time.monotonic(), e))
                if self.conn.closed:
                    self.conn = self.st.connect()
            self.stop.wait(0.01)

    def errors(self, since=0.0):
        return [e for t, e in self.outcomes if e is not None and t >= since]

    def ok_since(self, since):
        return any(e is None and t >= since for t, e in self.outcomes)

    def finish(self):
        self.stop.set()
        self.join(30)
        self.conn.close()


def names_victim(e):
    text = f"{e.diag.message_primary} {e.diag.message_detail or ''}"
    return f'"{VICTIM}"' in text or f"shard {VICTIM}" in text


@pytest.fixture(scope="module")
def ledger(pg_cluster):
    with ledger_neki(pg_cluster, "sfault", settings={"server_login_retry": 1,
                                                      "query_wait_timeout": 60}) as st:
        st.run("INSERT INTO ledger SELECT g, 0, 'n' FROM generate_series(1, 200) g")
        yield st


def test_shard_stopped_during_scatter_and_single_shard_loops(ledger):
    st = ledger
    ids = ids_by_shard(st)
    others = [i for s, v in ids.items() if s != VICTIM for i in v]
    loops = {"scatter": Loop(st, "SELECT count(*) FROM ledger"),
             "others": Loop(st, "SELECT note FROM ledger WHERE id = %s", others),
             "victim": Loop(st, "SELECT note FROM ledger WHERE id = %s", ids[VICTIM])}
    for lp in loops.values():
        lp.start()
    try:
        wait_until(lambda: all(lp.ok_since(0) for lp in loops.values()), 10,
                   what="every loop to run")
        st.cluster.stop_server(VICTIM)
        stopped = time.monotonic()
        wait_until(lambda: len(loops["scatter"].errors(stopped)) >= 3 and
                   len(loops["victim"].errors(stopped)) >= 3, 20,
                   what="the loops that need the stopped shard to fail")
        st.cluster.start_server(VICTIM)
        started = time.monotonic()
        wait_until(lambda: loops["scatter"].ok_since(started) and
                   loops["victim"].ok_since(started), 20, interval=0.05,
                   what="neki to use the shard again")
    finally:
        for lp in loops.values():
            lp.finish()
        if st.cluster.status().get(VICTIM) != "running":
            st.cluster.start_server(VICTIM)
    assert loops["others"].errors() == [], loops["others"].errors()[:3]
    assert len(loops["others"].outcomes) > 20
    for name in ("scatter", "victim"):
        errs = loops[name].errors()
        assert errs and all(names_victim(e) for e in errs), \
            [(e.diag.sqlstate, str(e)) for e in errs if not names_victim(e)][:5]
    with st.connect() as conn:
        assert conn.execute("SELECT count(*) FROM ledger").fetchone() == (200,)
    assert st.neki.alive()


@contextlib.contextmanager
def proxied_neki(cluster, mode, settings):
    """A database whose `ledger` exists on every server (made directly: the victim may not
    answer neki) routed by a neki whose [shards] entry of VICTIM is a FaultProxy."""
    proxy = FaultProxy(cluster.port(VICTIM), mode)
    try:
        with sharded_database(cluster, f"px_{mode}") as db:
            for server in cluster.servers:
                cluster.sql(server, LEDGER, dbname=db)
            with routing_neki(ProxiedShard(cluster, VICTIM, proxy), db, ledger_topology(db),
                              Store, settings=settings) as st:
                yield st, proxy
    finally:
        proxy.close()


def timed_error(conn, sql, params=None):
    t0 = time.monotonic()
    with pytest.raises(psycopg.Error) as ei:
        conn.execute(sql, params).fetchall()
    return ei.value, time.monotonic() - t0


def others_run_meanwhile(st, ids, busy):
    """While <busy> (a thread) waits, statements on the other shards answer at once."""
    with st.connect() as conn:
        worst = 0.0
        for i in ids[:20]:
            t0 = time.monotonic()
            conn.execute("SELECT count(*) FROM ledger WHERE id = %s", (i,)).fetchall()
            worst = max(worst, time.monotonic() - t0)
        assert busy.is_alive(), "the statement on the victim ended before the others ran"
    return worst


@pytest.mark.parametrize("mode", ["stall", "drop", "reset"])
def test_shard_that_accepts_tcp_and_never_answers(pg_cluster, mode):
    connect_timeout = 2
    with proxied_neki(pg_cluster, mode, {"server_connect_timeout": connect_timeout,
                                         "server_login_retry": 1}) as (st, proxy):
        ids = ids_by_shard(st)
        others = [i for s, v in ids.items() if s != VICTIM for i in v]
        outcome = {}

        def victim_statement():
            with st.connect() as conn:
                outcome["error"], outcome["took"] = timed_error(
                    conn, "SELECT count(*) FROM ledger WHERE id = %s", (ids[VICTIM][0],))
        t = threading.Thread(target=victim_statement)
        t.start()
        try:
            if mode == "stall":
                wait_until(lambda: proxy.accepted > 0, 5, what="neki to connect")
                worst = others_run_meanwhile(st, others, t)
                assert worst < 0.5, worst
        finally:
            t.join(connect_timeout + 20)
        e, took = outcome["error"], outcome["took"]
        assert names_victim(e), (e.diag.sqlstate, str(e))
        assert e.diag.sqlstate == "08001", (e.diag.sqlstate, str(e))
        if mode == "stall":
            assert connect_timeout - 0.3 <= took < connect_timeout + 3, took
        else:
            assert took < 1.5, took
        with st.connect() as conn:  # the session and the other shards go on
            assert conn.execute("SELECT count(*) FROM ledger WHERE id = %s",
                                (others[0],)).fetchone() == (0,)


def test_shard_link_that_stops_answering_hits_query_timeout(pg_cluster):
    timeout = 1
    with proxied_neki(pg_cluster, "pass", {"query_timeout": timeout}) as (st, proxy):
        ids = ids_by_shard(st)
        others = [i for s, v in ids.items() if s != VICTIM for i in v]
        conn = st.connect()
        sql = "SELECT count(*) FROM ledger WHERE id = %s"
        assert conn.execute(sql, (ids[VICTIM][0],)).fetchone() == (0,)
        proxy.freeze()
        outcome = {}

        def victim_statement():
            outcome["error"], outcome["took"] = timed_error(conn, sql, (ids[VICTIM][0],))
        t = threading.Thread(target=victim_statement)
        t.start()
        try:
            worst = others_run_meanwhile(st, others, t)
        finally:
            t.join(timeout + 20)
            conn.close()
        assert worst < 0.5, worst
        e, took = outcome["error"], outcome["took"]
        assert "query timeout" in str(e), str(e)     # pgbouncer's FATAL
        assert timeout - 0.2 <= took < timeout + 2, took
        with st.connect() as other:
            assert other.execute(sql, (others[0],)).fetchone() == (0,)


def test_shard_backend_terminated_during_a_single_shard_statement(ledger):
    """A shard's FATAL (here pg_terminate_backend: 57P01) during a single-shard statement
    ends the link, not the session: the client gets it as an ERROR naming the shard (it was
    forwarded as the server's FATAL, which a client takes for the end of its connection),
    and the same connection goes on."""
    st = ledger
    ids = ids_by_shard(st)
    other = next(i for s, v in ids.items() if s != VICTIM for i in v)
    conn = st.connect()
    outcome = {}

    def sleeper():
        try:
            conn.execute("SELECT pg_sleep(30), note FROM ledger WHERE id = %s",
                         (ids[VICTIM][0],)).fetchall()
        except psycopg.Error as e:
            outcome["error"] = e
    t = threading.Thread(target=sleeper)
    t.start()
    try:
        pid = wait_until(lambda: st.cluster.sql(
            VICTIM, "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' "
            "AND pid <> pg_backend_pid()", dbname=st.db), 10, what="the statement on the shard")
        st.cluster.sql(VICTIM, f"SELECT pg_terminate_backend({pid[0][0]})")
    finally:
        t.join(40)
    e = outcome["error"]
    assert e.diag.sqlstate == "57P01" and e.diag.severity == "ERROR", (e.diag.severity, str(e))
    assert names_victim(e), str(e)
    assert not conn.closed
    assert conn.execute("SELECT note FROM ledger WHERE id = %s", (other,)).fetchone() == ("n",)
    assert conn.execute("SELECT count(*) FROM ledger WHERE id = %s",
                        (ids[VICTIM][0],)).fetchone() == (1,)
    conn.close()
