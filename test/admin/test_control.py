"""
The console's pooling commands acting on sessions and links in every worker (issue 4,
"Commands"; issue 3, "Signals"): PAUSE / RESUME and SIGUSR1 / SIGUSR2 during a pgbench run,
RECONNECT, KILL, KILL_CLIENT, DISABLE / ENABLE, WAIT_CLOSE and SHUTDOWN WAIT_FOR_SERVERS, with
pgbouncer 1.25's texts. workers = 2 or 4, so every command crosses workers.
"""
import re
import signal
import subprocess
import threading
import time

import pytest

from conftest import port_accepts, wait_until

psycopg = pytest.importorskip("psycopg")

CLIENTS, TXNS = 8, 60


def pgbench(port, db, *args):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, db]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finished(proc, timeout=120):
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, f"{out}\n{err}"
    done = int(re.search(r"number of transactions actually processed: (\d+)", out).group(1))
    failed = re.search(r"number of failed transactions: (\d+)", out)
    return done, int(failed.group(1)) if failed else 0


PROBE = "neki-test-probe"   # application_name of the test's own connections to <db>


def backends(pg, db):
    """
    Backend pids connected to <db>: neki's links. The test's own history() connection to
    <db> is left out: its backend may still be listed for a moment after it disconnected.
    """
    return {r[0] for r in pg.sql("shard-a", "select pid from pg_stat_activity where datname = %s"
                                 " and application_name <> %s"
                                 " and backend_type = 'client backend'", (db, PROBE))}


def history(pg, db):
    with pg.connect("shard-a", db, application_name=PROBE) as conn:
        return conn.execute("select count(*) from pgbench_history").fetchone()[0]


def console(inst, sql):
    with inst.admin_connect(dbname="pgbouncer", user="admin") as conn:
        cur = conn.execute(sql)
        return cur.statusmessage


def console_error(inst, sql):
    with pytest.raises(psycopg.Error) as ei:
        console(inst, sql)
    return str(ei.value)


@pytest.fixture
def bench_db(pg_cluster, cluster_db):
    subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(pg_cluster.port("shard-a")),
                    "-U", "postgres", "-i", "-q", "-s", "1", cluster_db],
                   check=True, capture_output=True)
    return cluster_db


def start_neki(neki, pg, db, workers=2, mode="transaction", **settings):
    port = pg.port("shard-a")
    return neki(settings={"workers": workers, "pool_mode": mode, "default_pool_size": 4,
                          "admin_users": "admin", **settings},
                databases=f"{db} = host=127.0.0.1 port={port} dbname={db}\n"
                          f"other = host=127.0.0.1 port={port} dbname=postgres\n")


def hold_still(pg, db, rows, window=1.0):
    """While paused: for <window> seconds no link to <db> exists and no row is added."""
    end = time.monotonic() + window
    while time.monotonic() < end:
        assert backends(pg, db) == set(), "a link was opened while paused"
        assert history(pg, db) == rows, "a transaction reached Postgres while paused"
        time.sleep(0.05)


@pytest.mark.parametrize("how", ["console", "signals"])
def test_pause_holds_pgbench(pg_cluster, bench_db, neki, how):
    n = start_neki(neki, pg_cluster, bench_db)
    before = history(pg_cluster, bench_db)
    bench = pgbench(n.port, bench_db, "-n", "-c", str(CLIENTS), "-j", "2", "-t", str(TXNS))
    try:
        wait_until(lambda: history(pg_cluster, bench_db) - before > 50, 30, what="pgbench runs")
        if how == "console":
            assert console(n, "PAUSE") == "PAUSE"   # answers once every link is closed
            assert backends(pg_cluster, bench_db) == set()
        else:
            n.signal(signal.SIGUSR1)
            wait_until(lambda: not backends(pg_cluster, bench_db), 10, what="links closed")
        assert bench.poll() is None, "pgbench ended while paused"
        rows = history(pg_cluster, bench_db)
        hold_still(pg_cluster, bench_db, rows)
        if how == "console":
            assert console(n, "RESUME") == "RESUME"
        else:
            n.signal(signal.SIGUSR2)
        assert finished(bench) == (CLIENTS * TXNS, 0)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.communicate()
    assert history(pg_cluster, bench_db) - before == CLIENTS * TXNS
    assert "closing because: pause mode" in n.log()


def test_pause_one_database(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db, workers=4)
    with n.connect(dbname=bench_db) as a, n.connect(dbname="other") as b:
        a.execute("select 1")
        assert console(n, f"PAUSE {bench_db}") == "PAUSE"
        assert backends(pg_cluster, bench_db) == set()
        assert b.execute("select 2").fetchone() == (2,)     # another database goes on
        got = []
        t = threading.Thread(target=lambda: got.append(a.execute("select 3").fetchone()))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not got, "a query ran in a paused database"
        assert console(n, f"RESUME {bench_db}") == "RESUME"
        t.join(10)
        assert got == [(3,)]


def test_pause_waits_for_the_transaction(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db)
    with n.connect(dbname=bench_db) as a:
        a.execute("begin")
        a.execute("select 1")
        answer = []
        t = threading.Thread(target=lambda: answer.append(console(n, "PAUSE")))
        t.start()
        t.join(0.5)
        assert t.is_alive(), "PAUSE answered while a transaction held a link"
        a.execute("select 2")              # the transaction goes on while PAUSE waits
        a.execute("commit")
        t.join(10)
        assert answer == ["PAUSE"]
        assert backends(pg_cluster, bench_db) == set()
        assert console(n, "RESUME") == "RESUME"
        assert a.execute("select 4").fetchone() == (4,)


def test_reconnect_replaces_every_link(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db, workers=4)
    conns = [n.connect(dbname=bench_db) for _ in range(4)]
    try:
        for c in conns:            # four open transactions: four links, on several workers
            c.execute("begin")
            c.execute("select 1")
        old = backends(pg_cluster, bench_db)
        assert len(old) == 4
        assert console(n, f"RECONNECT {bench_db}") == "RECONNECT"
        assert backends(pg_cluster, bench_db) == old     # busy links close at release
        for c in conns:
            c.execute("commit")
        wait_until(lambda: not (backends(pg_cluster, bench_db) & old), 10,
                   what="old links closed")
        for c in conns:
            pid = c.execute("select pg_backend_pid()").fetchone()[0]
            assert pid not in old
        assert console(n, "WAIT_CLOSE") == "WAIT_CLOSE"
    finally:
        for c in conns:
            c.close()
    assert "closing because: close_needed" in n.log() or \
        "closing because: database configuration changed" in n.log()


def test_kill_database(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db, workers=4)
    victims = [n.connect(dbname=bench_db) for _ in range(4)]
    other = n.connect(dbname="other")
    try:
        victims[0].execute("begin")
        victims[0].execute("select 1")
        for v in victims[1:]:
            v.execute("select 1")
        assert console(n, f"KILL {bench_db}") == "KILL"
        for v in victims:
            with pytest.raises(psycopg.OperationalError, match="database removed"):
                v.execute("select 1")
        assert backends(pg_cluster, bench_db) == set()
        assert other.execute("select 5").fetchone() == (5,)
        # the database stays paused: a new client waits until RESUME
        got = []
        t = threading.Thread(target=lambda: got.append(
            n.connect(dbname=bench_db).execute("select 6").fetchone()))
        t.start()
        t.join(0.5)
        assert not got
        assert console(n, f"RESUME {bench_db}") == "RESUME"
        t.join(10)
        assert got == [(6,)]
    finally:
        for c in victims + [other]:
            c.close()
    assert "closing because: database removed" in n.log()


def test_disable_enable(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db, workers=4)
    with n.connect(dbname=bench_db) as old:
        assert console(n, f"DISABLE {bench_db}") == "DISABLE"
        for _ in range(4):          # whichever worker accepts it
            with pytest.raises(psycopg.OperationalError,
                               match=f'database "{bench_db}" is disabled'):
                n.connect(dbname=bench_db)
        assert old.execute("select 1").fetchone() == (1,)   # connected clients go on
        assert console(n, f"ENABLE {bench_db}") == "ENABLE"
        with n.connect(dbname=bench_db) as new:
            assert new.execute("select 2").fetchone() == (2,)
    assert "a database is required" in console_error(n, "DISABLE")
    assert "cannot disable admin db: pgbouncer" in console_error(n, "DISABLE pgbouncer")


def test_kill_client(pg_cluster, cluster_db, neki):
    bench_db = cluster_db
    n = start_neki(neki, pg_cluster, bench_db, workers=4)
    assert "invalid client pointer supplied" in console_error(n, "KILL_CLIENT abc")
    assert "client not found" in console_error(n, "KILL_CLIENT 999999")
    with n.connect(dbname=bench_db) as victim, n.connect(dbname=bench_db) as bystander:
        victim.execute("select 1")
        bystander.execute("select 1")
        # ids are global and consecutive; find the victim's by trying them in order
        killed = None
        for cid in range(1, 200):
            try:
                console(n, f"KILL_CLIENT {cid}")
            except psycopg.Error as e:
                assert "client not found" in str(e)
                continue
            killed = cid
            break
        assert killed is not None
        with pytest.raises(psycopg.OperationalError, match="admin forced disconnect"):
            victim.execute("select 1")
        assert bystander.execute("select 2").fetchone() == (2,)
        assert "client not found" in console_error(n, f"KILL_CLIENT {killed}")


def test_shutdown_wait_for_servers(pg_cluster, cluster_db, neki):
    n = start_neki(neki, pg_cluster, cluster_db)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        a.execute("begin")
        a.execute("select 1")
        b.execute("select 1")               # logged in, no link between transactions
        assert console(n, "SHUTDOWN WAIT_FOR_SERVERS") == "SHUTDOWN"
        # every worker has begun the shutdown once none of them listens any more
        wait_until(lambda: not port_accepts(n.port), 10, what="listeners closed")
        with pytest.raises(psycopg.OperationalError, match="server shutting down"):
            b.execute("select 2")           # no link will come any more
        assert n.alive(), "neki exited while a transaction held a link"
        a.execute("select 2")               # the transaction in progress finishes
        a.execute("commit")
        n.wait_exit(10)
    assert backends(pg_cluster, cluster_db) == set()


@pytest.mark.parametrize("fast", [0, 1])
def test_server_fast_close_session_mode(pg_cluster, cluster_db, neki, fast):
    n = start_neki(neki, pg_cluster, cluster_db, mode="session", server_fast_close=fast)
    with n.connect(dbname=cluster_db) as idle, n.connect(dbname=cluster_db) as busy:
        pid = idle.execute("select pg_backend_pid()").fetchone()[0]
        busy.execute("begin")
        busy.execute("select 1")
        assert console(n, "RECONNECT") == "RECONNECT"
        if not fast:    # session mode keeps the link until the client leaves
            assert idle.execute("select pg_backend_pid()").fetchone()[0] == pid
            busy.execute("commit")
            assert busy.execute("select 2").fetchone() == (2,)
            return
        # the idle session's link is closed between transactions, and the client with it
        wait_until(lambda: pid not in backends(pg_cluster, cluster_db), 10,
                   what="fast close of the idle session's link")
        with pytest.raises(psycopg.OperationalError, match="database configuration changed"):
            idle.execute("select 1")
        busy.execute("select 2")        # a transaction in progress finishes first
        busy.execute("commit")
        wait_until(lambda: len(backends(pg_cluster, cluster_db)) == 0, 10,
                   what="fast close after commit")
        with pytest.raises(psycopg.OperationalError, match="database configuration changed"):
            busy.execute("select 3")
