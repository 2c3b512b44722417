"""
A neki process SIGKILLed under a routed load (issue 21, faults). Clients INSERT into a table
sharded over four shards (autocommit: each acknowledged INSERT is a commit, and each client
records the ids it got acknowledged); pgbench runs single-shard reads beside them.

- A worker: only the clients of that worker lose their connections (the others see no
  error), the master forks its replacement within 2 s, a new connection works at once
  (at the first try), and every acknowledged commit is on the shards.
- The admin process: no client sees an error (workers keep serving); the console on the
  admin port and the __neki API (on the admin port and through the main port) come back
  within 2 s with the same revision.
- The admin process while a set_data_topology runs (held on the lock of the topology log,
  which the test takes on the authoritative shard): the caller loses its connection, the
  revision is not stored, the workers keep serving the revision they had, and a new admin
  applies the next revision.
"""
import json
import os
import signal
import threading
import time

import pytest

from conftest import pid_alive, port_accepts, wait_until
from faultlib import (Recorder, ledger_ids, ledger_neki, ledger_topology, pgbench,
                      pgbench_result, psycopg, wait_committing, worker_of)
from test_process import slots

READS = ("\\set id random(1, 100)\n"
         "SELECT note FROM ledger WHERE id = :id;\n")


@pytest.fixture(scope="module")
def ledger(pg_cluster):
    with ledger_neki(pg_cluster, "kill", settings={"workers": 2}) as st:
        st.run("INSERT INTO ledger SELECT g, 0, 'seed' FROM generate_series(1, 100) g")
        yield st


def recorders_on_both_workers(st, first_who, n=8, attempts=400):
    """<n> Recorders (not started), half on each of the two workers: {pid: []}. The kernel
    hands a connection to whichever worker accepts first, and a worker busy with the load
    beside may take few, so connections are tried (each closed when its worker has its
    half) up to <attempts> times."""
    recs, by_worker = [], {}
    for k in range(attempts):
        r = Recorder(st, first_who + k)
        pid = worker_of(st.neki, r.conn)
        if len(by_worker.get(pid, [])) >= n // 2:
            r.conn.close()
            continue
        by_worker.setdefault(pid, []).append(r)
        recs.append(r)
        if len(recs) == n:
            break
    assert len(by_worker) == 2, "the clients did not land on both workers"
    return recs, by_worker


def assert_committed_kept(st, recs):
    on_shards = ledger_ids(st)
    for r in recs:
        lost = [i for i in r.committed if i not in on_shards]
        assert not lost, f"client {r.who}: acknowledged commits lost: {lost[:10]}"


def admin_pid(inst):
    return next(pid for kind, pid in slots(inst).values() if kind == "admin")


def new_connection_works(st):
    with st.connect() as conn:
        return conn.execute("SELECT count(*) FROM ledger WHERE id = 1").fetchone() == (1,)


def test_worker_sigkill_under_load(ledger):
    st = ledger
    bench = pgbench(st.neki.port, st.db, READS, clients=4, seconds=3)
    recs, by_worker = recorders_on_both_workers(st, 1000)
    victim, survivor = sorted(by_worker)
    for r in recs:
        r.start()
    try:
        wait_committing(recs)
        os.kill(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        replaced = wait_until(lambda: (lambda k: k if len(k) == 3 and victim not in k
                                       else None)(set(st.neki.children())), 2,
                              what="the killed worker to be replaced")
        took = time.monotonic() - killed_at
        assert survivor in replaced
        # a new connection works at the first try, wherever it lands
        for _ in range(4):
            assert new_connection_works(st)
        committed = {r.who: len(r.committed) for r in recs}
        wait_until(lambda: all(len(r.committed) > committed[r.who] + 5 for r in recs), 10,
                   what="every client to commit again")
    finally:
        for r in recs:
            r.finish()
        rc, done, failed, out = pgbench_result(bench)
    assert took < 2, took
    for r in by_worker[survivor]:
        assert not r.errors, f"client {r.who} of the surviving worker: {r.errors[:3]}"
    for r in by_worker[victim]:
        assert r.errors, f"client {r.who} of the killed worker saw no error"
        assert all(isinstance(e, psycopg.OperationalError) for _, e in r.errors), r.errors
    assert_committed_kept(st, recs)
    assert done > 0, out        # (its clients on the killed worker are aborted)
    assert st.neki.alive()
    st.neki.wait_log(rf"worker \d \(pid {victim}\) killed by signal 9")


def test_admin_sigkill_under_load(ledger):
    st = ledger
    inst = st.neki
    rev = inst.admin_connect().execute(
        "SELECT * FROM __neki.get_data_topology_revision()").fetchone()[0]
    workers = set(inst.children()) - {admin_pid(inst)}
    bench = pgbench(inst.port, st.db, READS, clients=4, seconds=3)
    recs, _ = recorders_on_both_workers(st, 2000, n=4)
    for r in recs:
        r.start()
    try:
        wait_committing(recs)
        old = admin_pid(inst)
        os.kill(old, signal.SIGKILL)
        t0 = time.monotonic()
        wait_until(lambda: not pid_alive(old) and len(inst.children()) == 3, 2,
                   what="a new admin process")

        def api_back():
            try:
                with inst.admin_connect() as c:
                    return c.execute("SELECT * FROM __neki.get_data_topology_revision()"
                                     ).fetchone()[0]
            except psycopg.Error:
                return None
        assert wait_until(api_back, 2, interval=0.05, what="the __neki API") == rev
        took = time.monotonic() - t0
        with inst.admin_connect() as c:
            assert len(c.execute("SHOW WORKERS").fetchall()) == 2
        with inst.connect(dbname="neki") as c:       # the console through the main port
            assert c.execute("SELECT * FROM __neki.get_data_topology_revision()"
                             ).fetchone()[0] == rev
        committed = {r.who: len(r.committed) for r in recs}
        wait_until(lambda: all(len(r.committed) > committed[r.who] + 5 for r in recs), 10,
                   what="every client to commit again")
    finally:
        for r in recs:
            r.finish()
        rc, done, failed, out = pgbench_result(bench)
    assert took < 2, took
    assert workers <= set(inst.children()), "a worker was restarted"
    for r in recs:
        assert not r.errors, f"client {r.who}: {r.errors[:3]}"
    assert rc == 0 and failed == 0 and done > 0, out
    assert_committed_kept(st, recs)


def test_admin_sigkill_during_set_data_topology(ledger):
    st = ledger
    inst = st.neki
    with inst.admin_connect() as c:
        rev = c.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchone()[0]
    doc = json.dumps(ledger_topology(st.db, extra_tables=("ledger_more",)))
    recs, _ = recorders_on_both_workers(st, 3000, n=4)
    for r in recs:
        r.start()
    lock = st.cluster.connect("auth", dbname=st.db, autocommit=False)
    answer = {}

    def call():
        try:
            with inst.admin_connect() as c:
                answer["rows"] = psycopg.ClientCursor(c).execute(
                    "SELECT * FROM __neki.set_data_topology(%s, true)", (doc,)).fetchall()
        except psycopg.Error as e:
            answer["error"] = e
    caller = threading.Thread(target=call)
    try:
        wait_committing(recs)
        # hold the log's lock: the set waits in its store transaction
        lock.execute("LOCK TABLE __neki.data_topology_log IN ACCESS EXCLUSIVE MODE")
        caller.start()
        wait_until(lambda: st.cluster.sql(
            "auth", "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
            "'__neki.data_topology_log'::regclass", dbname=st.db)[0][0] > 0, 5,
            what="set_data_topology to wait for the log's lock")
        old = admin_pid(inst)
        os.kill(old, signal.SIGKILL)
        wait_until(lambda: not pid_alive(old) and len(inst.children()) == 3, 2,
                   what="a new admin process")
        lock.rollback()
        caller.join(10)
        # the caller's session was in the killed process
        assert isinstance(answer.get("error"), psycopg.OperationalError), answer
        wait_until(lambda: port_accepts(inst.admin_port), 2, what="the admin port")
        with inst.admin_connect() as c:
            assert c.execute("SELECT * FROM __neki.get_data_topology_revision()"
                             ).fetchone()[0] == rev
        assert st.cluster.sql("auth", "SELECT max(revision) FROM __neki.data_topology_log",
                              dbname=st.db) == [(rev,)]
        # the new admin applies the next revision
        with inst.admin_connect() as c:
            got = psycopg.ClientCursor(c).execute(
                "SELECT * FROM __neki.set_data_topology(%s, true)", (doc,)).fetchone()
        assert got == (True, rev + 1)
        committed = {r.who: len(r.committed) for r in recs}
        wait_until(lambda: all(len(r.committed) > committed[r.who] + 5 for r in recs), 10,
                   what="every client to commit again")
    finally:
        lock.close()
        if caller.is_alive():
            caller.join(10)
        for r in recs:
            r.finish()
    for r in recs:
        assert not r.errors, f"client {r.who}: {r.errors[:3]}"
    assert_committed_kept(st, recs)
