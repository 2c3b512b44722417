"""Replication connections through neki (pgbouncer 1.23's test_replication.py): logical
(replication=database) and physical (replication=true) clients get a walsender of their own,
opened with their startup parameters, session-pooled and closed with the client; the same
database's ordinary clients are unaffected; pg_basebackup, pg_receivewal and pg_recvlogical
work through the pooler."""
import subprocess
import threading
import time

import psycopg
import pytest

from compat import admin, db_line, start
from conftest import IS_ROOT, make_private_dir, run_as_user, wait_until

PGBIN = "/usr/lib/postgresql/15/bin"


def repl_connect(n, db, kind="database", **kw):
    return n.connect(db, replication=kind, **kw)


def walsenders(pg):
    return pg.sql("shard-a", "select count(*) from pg_stat_replication "
                  "where application_name <> 'walreceiver'")[0][0]


@pytest.mark.parametrize("mode", ["session", "transaction"])
def test_logical_replication_connection(pg_cluster, cluster_db, neki, mode):
    n = start(neki, pg_cluster, cluster_db, mode=mode)
    args = {"application_name": "abc", "options": "-c enable_seqscan=off"}
    with repl_connect(n, cluster_db, **args) as c:
        assert c.execute("select 1").fetchone() == (1,)
        assert c.execute("SHOW application_name").fetchone() == ("abc",)
        assert c.execute("SHOW enable_seqscan").fetchone() == ("off",)
        row = c.execute("IDENTIFY_SYSTEM").fetchone()
        assert len(row) == 4 and row[3] == cluster_db
        clients = [r for r in admin(n, "SHOW CLIENTS", dicts=True)
                   if r["database"] == cluster_db]
        assert [r["replication"] for r in clients] == ["logical"]
        servers = [r for r in admin(n, "SHOW SERVERS", dicts=True)
                   if r["database"] == cluster_db]
        assert [r["replication"] for r in servers] == ["logical"]
    with n.connect(cluster_db) as c:      # an ordinary client of the same database
        assert c.execute("SHOW enable_seqscan").fetchone() == ("on",)
    with repl_connect(n, cluster_db) as c:
        assert c.execute("IDENTIFY_SYSTEM").fetchone()[3] == cluster_db
    # walsenders are never reused: none is left once the clients are gone
    wait_until(lambda: all(r["replication"] == "none" for r in
                           admin(n, "SHOW SERVERS", dicts=True)), 5)
    n.wait_log("closing because: replication client disconnected")


def test_physical_replication_connection(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    args = {"application_name": "abc", "options": "-c enable_seqscan=off"}
    with repl_connect(n, cluster_db, "true", **args) as c:
        with pytest.raises(psycopg.errors.FeatureNotSupported,
                           match="cannot execute SQL commands in WAL sender for physical "
                                 "replication"):
            c.execute("select 1")
    with repl_connect(n, cluster_db, "yes", **args) as c:
        # a physical walsender answers SHOW without type information: bytes in psycopg
        assert c.execute("SHOW application_name").fetchone()[0] in ("abc", b"abc")
        assert c.execute("SHOW enable_seqscan").fetchone()[0] in ("off", b"off")
        assert len(c.execute("IDENTIFY_SYSTEM").fetchone()) == 4
        assert [r["replication"] for r in admin(n, "SHOW CLIENTS", dicts=True)
                if r["database"] == cluster_db] == ["physical"]
    with n.connect(cluster_db) as c:
        assert c.execute("select 1").fetchone() == (1,)


def test_replication_refused_by_the_server(pg_cluster, cluster_db, neki):
    """A role without REPLICATION: the client gets pgbouncer's "login failed", the server's
    own error goes to the log (test_compat_pooling.py has the details)."""
    pg_cluster.sql("shard-a", "DROP ROLE IF EXISTS neki_norepl")
    pg_cluster.sql("shard-a", "CREATE ROLE neki_norepl LOGIN")
    try:
        n = start(neki, pg_cluster, cluster_db)
        n.allow_users("neki_norepl")
        n.reload()
        wait_until(lambda: "configuration reloaded in every process" in n.log(), 10)
        with pytest.raises(psycopg.OperationalError, match="FATAL:  login failed"):
            repl_connect(n, cluster_db, user="neki_norepl")
        n.wait_log("S: login failed: FATAL: must be superuser or replication role")
        with n.connect(cluster_db, user="neki_norepl") as c:   # not a replication login
            assert c.execute("select current_user").fetchone() == ("neki_norepl",)
    finally:
        pg_cluster.sql("shard-a", "DROP ROLE IF EXISTS neki_norepl")


def test_replication_counts_against_pool_size(pg_cluster, cluster_db, neki):
    """pool_size 2: ten replication clients at once never hold more than two walsenders."""
    n = neki(settings={"admin_users": "postgres", "workers": 1},
             databases=db_line(pg_cluster, cluster_db, pool_size=2))
    peak = []
    stop = threading.Event()

    def watch():
        while not stop.is_set():
            peak.append(walsenders(pg_cluster))
            time.sleep(0.05)

    def client():
        with repl_connect(n, cluster_db, connect_timeout=30) as c:
            c.execute("select pg_sleep(0.3)")

    w = threading.Thread(target=watch)
    w.start()
    threads = [threading.Thread(target=client) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    w.join()
    assert max(peak) <= 2
    wait_until(lambda: walsenders(pg_cluster) == 0, 10, what="walsenders to close")


def test_replication_evicts_idle_ordinary_links(pg_cluster, cluster_db, neki):
    """The pool is full of idle ordinary links: a replication client gets room."""
    n = neki(settings={"admin_users": "postgres", "workers": 1},
             databases=db_line(pg_cluster, cluster_db, pool_size=2))
    with n.connect(cluster_db) as a, n.connect(cluster_db) as b:
        a.execute("select 1")
        b.execute("select 1")
    with repl_connect(n, cluster_db, connect_timeout=15) as c:
        assert c.execute("IDENTIFY_SYSTEM").fetchone()[3] == cluster_db


def _as_owner(cmd):
    return (["runuser", "-u", run_as_user(), "--"] if IS_ROOT else []) + cmd


def test_pg_basebackup_and_pg_receivewal(pg_cluster, cluster_db, neki):
    """libpq names the database `replication` for a physical connection: the entry of that
    name (as in pgbouncer's test.ini) serves pg_basebackup and pg_receivewal."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"admin_users": "postgres", "pool_mode": "transaction"},
             databases=f"{db_line(pg_cluster, cluster_db)}\n"
                       f"replication = host=127.0.0.1 port={port} dbname=replication")
    d = make_private_dir("neki-basebackup.")
    dsn = f"host=127.0.0.1 port={n.port} user=postgres dbname={cluster_db}"
    res = subprocess.run(_as_owner([f"{PGBIN}/pg_basebackup", "--dbname", dsn,
                                    "--checkpoint=fast", "--pgdata", str(d / "data"),
                                    "--no-sync"]),
                         capture_output=True, text=True, timeout=120,
                         env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    assert res.returncode == 0, res.stderr
    assert (d / "data" / "PG_VERSION").exists()
    slot = f"neki_{cluster_db}"[:60]
    pg_cluster.sql("shard-a", f"SELECT pg_create_physical_replication_slot('{slot}')")
    try:
        wal = d / "wal"
        wal.mkdir()
        subprocess.run(["chown", run_as_user(), str(wal)], check=IS_ROOT)
        proc = subprocess.Popen(_as_owner([f"{PGBIN}/pg_receivewal", "--dbname", dsn,
                                           f"--slot={slot}", "--directory", str(wal)]),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
        def received():
            # pg_receivewal writes a file with the first WAL it gets: a fresh cluster may sit
            # at a segment's start with nothing to stream, so each poll commits a transaction
            pg_cluster.sql("shard-a", "SELECT txid_current()")
            return any(wal.iterdir()) or proc.poll() is not None

        try:
            wait_until(received, 20, interval=0.2, what="WAL received through neki")
        finally:
            proc.terminate()
            err = proc.communicate(timeout=10)[1]
        assert any(wal.iterdir()), f"pg_receivewal ended: {err}"
    finally:
        pg_cluster.sql("shard-a", f"SELECT pg_drop_replication_slot('{slot}')")


def test_pg_recvlogical(pg_cluster, cluster_db, neki):
    if pg_cluster.sql("shard-a", "SHOW wal_level")[0][0] != "logical":
        pytest.skip("the test cluster runs wal_level=replica: no logical decoding")
    n = start(neki, pg_cluster, cluster_db)
    slot = f"neki_l_{cluster_db}"[:60]
    with pg_cluster.connect("shard-a", dbname=cluster_db) as c:
        c.execute("CREATE TABLE t(a int)")
        c.execute(f"SELECT pg_create_logical_replication_slot('{slot}', 'test_decoding')")
    try:
        proc = subprocess.Popen([f"{PGBIN}/pg_recvlogical", "--dbname", cluster_db, "--host",
                                 "127.0.0.1", "--port", str(n.port), "--user", "postgres",
                                 f"--slot={slot}", "--file=-", "--no-loop", "--start"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_until(lambda: any(r["replication"] == "logical" and r["state"] == "active"
                                   for r in admin(n, "SHOW CLIENTS", dicts=True)), 10)
            with n.connect(cluster_db) as c:
                c.execute("INSERT INTO t VALUES (1)")
            assert proc.stdout.readline().startswith(b"BEGIN ")
            assert proc.stdout.readline() == b'table public.t: INSERT: a[integer]:1\n'
            assert proc.stdout.readline().startswith(b"COMMIT ")
        finally:
            proc.kill()
            proc.communicate(timeout=5)
    finally:
        pg_cluster.sql("shard-a", f"SELECT pg_drop_replication_slot('{slot}')",
                       dbname=cluster_db)
