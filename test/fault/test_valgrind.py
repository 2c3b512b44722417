"""
neki under valgrind memcheck (issue 21, scale): a short run with every process of neki
(master, workers, admin) under memcheck - a routed database (the ledger table over four
shards: set_data_topology, DDL on every shard, single-shard INSERTs and UPDATEs, scatter
reads with a merge, a cross-shard transaction, a shard's backend terminated mid-statement)
and a pass-through database (pgbench) - then a shutdown: every process's memcheck report
says 0 errors (invalid reads and writes, uses of uninitialised values, bad frees, and
definitely lost blocks). Skipped when valgrind is not installed.
"""
import os
import re
import shutil
import signal
import subprocess
import threading
import time

import pytest

from conftest import make_private_dir, wait_until
from faultlib import DATA_SHARDS, LEDGER, ledger_topology, psycopg, sharded_database
from test_routing import Store, routing_instance, set_topology

VALGRIND = shutil.which("valgrind")


def memcheck_wrapper(logdir):
    """A script that runs neki under memcheck, one log per process in <logdir>."""
    path = logdir / "neki-memcheck"
    path.write_text(
        "#!/bin/sh\n"
        f"exec {VALGRIND} --tool=memcheck --quiet --leak-check=full "
        "--errors-for-leak-kinds=definite --show-leak-kinds=definite "
        f"--child-silent-after-fork=no --log-file={logdir}/vg.%p "
        f"{os.path.abspath(os.environ.get('NEKI_BIN', 'neki'))} \"$@\"\n")
    path.chmod(0o755)
    return path


@pytest.mark.skipif(VALGRIND is None, reason="valgrind is not installed")
@pytest.mark.timeout(600)
def test_memcheck_clean_on_a_short_run(pg_cluster, cluster_db):
    logdir = make_private_dir("memcheck.")
    with sharded_database(pg_cluster, "vg") as db:
        inst = routing_instance(pg_cluster, db, settings={"workers": 2},
                                databases={"pt": f"host=127.0.0.1 port="
                                           f"{pg_cluster.port('shard-a')} dbname={cluster_db}"})
        inst.binary = memcheck_wrapper(logdir)
        try:
            inst.start(timeout=120)
            set_topology(inst, ledger_topology(db))
            st = Store(pg_cluster, inst, db)
            wait_until(lambda: routed(st), 120, interval=0.5, what="neki routes the database")
            routed_work(st)
            passthrough_work(pg_cluster, inst, cluster_db)
        finally:
            stop(inst)
    reports = sorted(logdir.glob("vg.*"))
    assert len(reports) >= 4, reports      # master, 2 workers, admin
    bad = {}
    for r in reports:
        text = r.read_text(errors="replace")
        if re.search(r"^==\d+== (Invalid|Conditional jump|Use of uninitialised|Syscall param|"
                     r"Mismatched free|.*definitely lost)", text, re.M):
            bad[r.name] = text[:4000]
    assert not bad, "\n".join(f"--- {k}\n{v}" for k, v in bad.items())


def routed(st):
    try:
        with st.connect() as conn:
            conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
            return True
    except psycopg.Error:
        return False


def routed_work(st):
    st.run(LEDGER)
    with st.connect() as conn:
        for i in range(1, 41):
            conn.execute("INSERT INTO ledger VALUES (%s, 0, 'n')", (i,))
        conn.execute("UPDATE ledger SET who = who + 1 WHERE id = 7")
        assert conn.execute("SELECT count(*), sum(who) FROM ledger").fetchone() == (40, 1)
        assert len(conn.execute("SELECT id FROM ledger ORDER BY note, id LIMIT 5").fetchall()) == 5
        with conn.transaction():
            conn.execute("UPDATE ledger SET who = 2 WHERE id IN (1, 2, 3, 4, 5)")
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT note FROM ledger WHERE id = %s", (3,))
        assert cur.fetchall() == [("n",)]
    terminated_mid_statement(st)


def terminated_mid_statement(st):
    conn = st.connect()
    done = {}

    def sleeper():
        try:
            conn.execute("SELECT pg_sleep(30), note FROM ledger WHERE id = 1").fetchall()
        except psycopg.Error as e:
            done["e"] = e
    t = threading.Thread(target=sleeper)
    t.start()
    try:
        pid = wait_until(lambda: next((row for s in DATA_SHARDS for row in st.cluster.sql(
            s, "SELECT pid FROM pg_stat_activity WHERE query LIKE '%pg_sleep(30)%' AND pid "
            "<> pg_backend_pid()", dbname=st.db)), None), 60, interval=0.2,
            what="the sleeping statement on its shard")
        for s in DATA_SHARDS:
            st.cluster.sql(s, f"SELECT pg_terminate_backend({pid[0]}) FROM pg_stat_activity "
                              f"WHERE pid = {pid[0]}", dbname=st.db)
    finally:
        t.join(60)
    assert "e" in done
    conn.close()


def passthrough_work(cluster, inst, db):
    port = cluster.port("shard-a")
    subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-i",
                    "-q", "-s", "1", db], check=True, capture_output=True, timeout=120)
    res = subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(inst.port), "-U", "postgres",
                          "-n", "-c", "2", "-j", "2", "-t", "20", "pt"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "number of failed transactions: 0" in res.stdout, res.stdout


def stop(inst):
    """SIGTERM-free shutdown that lets memcheck write every report: SIGQUIT (each process
    exits), then wait for them; SIGKILL only past the bound."""
    if inst.proc is None:
        return
    inst.remember_pids()
    if inst.alive():
        os.kill(inst.pid, signal.SIGQUIT)
    try:
        wait_until(lambda: not inst.leftovers(), 60, interval=0.2, what="neki under memcheck")
    finally:
        problems = inst.cleanup()
    assert not problems, problems
