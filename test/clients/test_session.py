"""The client session through neki with real clients (psql, psycopg, raw protocol): pool modes,
session state across links, prepared statements, global limits, cancel, timeouts, errors.

Every test runs neki (the `neki` fixture) in front of shard-a of the private cluster."""
import os
import signal
import subprocess
import threading
import time

import psycopg
import pytest

from conftest import wait_until
from pgwire import Wire, error_fields, errors_in


def db_line(pg, db, **extra):
    parts = [f"host=127.0.0.1", f"port={pg.port('shard-a')}", f"dbname={db}"]
    parts += [f"{k}={v}" for k, v in extra.items()]
    return f"{db} = {' '.join(parts)}"


def start(neki, pg, db, **settings):
    return neki(settings=settings, databases=db_line(pg, db))


def server_sql(pg, db, sql):
    return pg.sql("shard-a", sql, dbname=db)


# ---------------------------------------------------------------------------------------------
# basics


def test_psql_select_and_parameters(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    out = subprocess.run(
        ["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(n.port), "-U", "postgres",
         "-d", cluster_db, "-c", "select 40 + 2, current_setting('application_name')"],
        capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42|psql"
    log = n.log()
    assert f"login attempt: db={cluster_db} user=postgres tls=no" in log
    n.wait_log(r"C-0x[0-9a-f]+: \S+/postgres@127\.0\.0\.1:\d+ closing because: "
               r"client close request \(age=\d+s\)")


def test_welcome_parameters_and_key(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    w = Wire(n.port)
    msgs = w.login(database=cluster_db, extra={"application_name": "wire-app",
                                                "TimeZone": "Europe/Paris"})
    params = dict(b.rstrip(b"\0").split(b"\0") for t, b in msgs if t == "S")
    assert params[b"application_name"] == b"wire-app"
    assert params[b"TimeZone"] == b"Europe/Paris"
    assert params[b"server_version"].startswith(b"15")
    for name in (b"server_encoding", b"client_encoding", b"DateStyle", b"integer_datetimes",
                 b"standard_conforming_strings", b"IntervalStyle", b"is_superuser",
                 b"session_authorization"):
        assert name in params
    assert [t for t, _ in msgs][0] == "R" and [t for t, _ in msgs][-2:] == ["K", "Z"]
    rows = w.query("select current_setting('TimeZone')")
    assert any(t == "D" and b"Europe/Paris" in b for t, b in rows)
    w.close()


def test_unsupported_startup_parameter(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, ignore_startup_parameters="extra_float_digits")
    w = Wire(n.port)
    w.startup(database=cluster_db, extra={"bogus_param": "1"})
    errs = errors_in(w.read_all())
    assert errs and errs[0]["C"] == "08P01" and errs[0]["S"] == "FATAL"
    assert errs[0]["M"] == "unsupported startup parameter: bogus_param"
    w = Wire(n.port)
    msgs = w.login(database=cluster_db, extra={"extra_float_digits": "3"})
    assert msgs[-1][0] == "Z"
    w = Wire(n.port)
    w.startup(database=cluster_db, extra={"options": "-c geqo=off"})
    errs = errors_in(w.read_all())
    assert errs and errs[0]["M"] == "unsupported startup parameter in options: geqo"
    with n.connect(dbname=cluster_db, options="-c DateStyle=German") as c:
        assert c.execute("show DateStyle").fetchone()[0] == "German, DMY"


def test_ssl_and_gssenc_refused_then_login(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    for code in (80877103, 80877104):
        w = Wire(n.port)
        w.raw(b"\0\0\0\x08" + code.to_bytes(4, "big"))
        assert w.read_byte() == b"N"
        assert w.login(database=cluster_db)[-1][0] == "Z"
        w.close()
    with n.connect(dbname=cluster_db, sslmode="prefer") as c:
        assert c.execute("select 1").fetchone() == (1,)


def test_no_such_database_after_auth(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with pytest.raises(psycopg.OperationalError, match="no such database: nope"):
        n.connect(dbname="nope")


def test_auto_database(pg_cluster, cluster_db, neki):
    n = neki(databases=f"* = host=127.0.0.1 port={pg_cluster.port('shard-a')}")
    with n.connect(dbname=cluster_db) as c:
        assert c.execute("select current_database()").fetchone() == (cluster_db,)


def test_function_call_refused(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    w = Wire(n.port)
    w.login(database=cluster_db)
    w.send(b"F", (1598).to_bytes(4, "big") + b"\0\0\0\0\0\0")
    msgs = w.read_until("Z")
    errs = errors_in(msgs)
    assert errs[0]["C"] == "0A000" and "function call" in errs[0]["M"]
    assert any(t == "D" for t, _ in w.query("select 1"))


def test_max_client_conn(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, max_client_conn=2, workers=2)
    a = n.connect(dbname=cluster_db)
    b = n.connect(dbname=cluster_db)
    with pytest.raises(psycopg.OperationalError,
                       match=r"no more connections allowed \(max_client_conn\)"):
        n.connect(dbname=cluster_db)
    a.close()

    def can_connect():
        try:
            n.connect(dbname=cluster_db).close()
            return True
        except psycopg.OperationalError:
            return False
    wait_until(can_connect, 5, what="a free client slot")
    b.close()


# ---------------------------------------------------------------------------------------------
# pool modes


def test_session_mode_listen_notify(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="session", default_pool_size=4)
    got = []
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        a.add_notify_handler(lambda note: got.append((note.channel, note.payload)))
        a.execute("LISTEN chan")
        b.execute("NOTIFY chan, 'hello'")
        wait_until(lambda: a.execute("select 1") and got, 5, what="the notification")
    assert got == [("chan", "hello")]


def test_statement_mode_refuses_transactions(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="statement")
    with n.connect(dbname=cluster_db) as c:
        assert c.execute("select 1").fetchone() == (1,)
        with pytest.raises(psycopg.OperationalError,
                           match="transaction blocks not allowed in statement pooling mode"):
            c.execute("BEGIN")


def test_per_user_pool_mode_override(pg_cluster, cluster_db, neki):
    n = neki(settings={"pool_mode": "statement"}, databases=db_line(pg_cluster, cluster_db),
             users="postgres = pool_mode=session")
    with n.connect(dbname=cluster_db) as c:
        c.execute("BEGIN")
        c.execute("select 1")
        c.execute("COMMIT")


def test_transaction_mode_session_state_over_two_links(pg_cluster, cluster_db, neki):
    server_sql(pg_cluster, cluster_db, "create schema s1; create table s1.t(v text);"
               "insert into s1.t values ('from s1')")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=2,
              workers=1)
    a = n.connect(dbname=cluster_db)
    b = n.connect(dbname=cluster_db)
    a.execute("SET search_path TO s1, public")
    a.execute("SET TimeZone = 'Asia/Tokyo'")
    pids = set()
    for i in range(200):
        if i % 2:
            b.execute("BEGIN")          # b holds one link: a gets the other one
        pid, sp, tz, v = a.execute("select pg_backend_pid(), current_setting('search_path'),"
                                   " current_setting('TimeZone'), (select v from t)").fetchone()
        if i % 2:
            b.execute("COMMIT")
        pids.add(pid)
        assert (sp, tz, v) == ("s1, public", "Asia/Tokyo", "from s1")
        sp_b, tz_b = b.execute("select current_setting('search_path'),"
                               " current_setting('TimeZone')").fetchone()
        assert sp_b == '"$user", public' and tz_b != "Asia/Tokyo"
    assert len(pids) == 2
    a.execute("RESET search_path")
    assert a.execute("show search_path").fetchone()[0] == '"$user", public'
    a.close()
    b.close()


def test_transaction_mode_discard_all_resets_state(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              workers=1)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        a.execute("SET search_path TO pg_catalog")
        a.execute("DISCARD ALL")
        assert b.execute("show search_path").fetchone()[0] == '"$user", public'
        assert a.execute("show search_path").fetchone()[0] == '"$user", public'


def search_path_on_other_link(a, b):
    """a's search_path, read on a link b does not hold: b keeps its own busy meanwhile."""
    b.execute("BEGIN")
    b.execute("select 1")
    try:
        return a.execute("show search_path").fetchone()[0]
    finally:
        b.execute("COMMIT")


@pytest.mark.parametrize("protocol", ["simple", "extended-unnamed", "extended-named"])
def test_search_path_follows_commit_and_rollback(pg_cluster, cluster_db, neki, protocol):
    server_sql(pg_cluster, cluster_db, "create schema s1; create schema s2; create schema s3")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=2,
              workers=1)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        if protocol == "simple":
            def run(sql):
                psycopg.ClientCursor(a).execute(sql)
        else:
            def run(sql):       # Parse/Bind/Execute/Sync, unnamed or named statement
                a.execute(sql, prepare=protocol == "extended-named", binary=True)
        run("SET search_path TO s1")
        assert a.execute("show search_path").fetchone()[0] == "s1"
        assert search_path_on_other_link(a, b) == "s1"
        a.execute("BEGIN")
        run("SET search_path TO s2")
        assert a.execute("show search_path").fetchone()[0] == "s2"
        a.execute("ROLLBACK")                               # Postgres undoes the SET
        assert a.execute("show search_path").fetchone()[0] == "s1"
        assert search_path_on_other_link(a, b) == "s1"
        a.execute("BEGIN")
        run("SET search_path TO s3")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("select 1/0")
        a.execute("COMMIT")                                 # of a failed transaction: ROLLBACK
        assert search_path_on_other_link(a, b) == "s1"
        a.execute("BEGIN")
        run("SET search_path TO s2")
        a.execute("COMMIT")
        assert search_path_on_other_link(a, b) == "s2"
        assert a.execute("show search_path").fetchone()[0] == "s2"


def test_search_path_set_in_failed_implicit_transaction(pg_cluster, cluster_db, neki):
    server_sql(pg_cluster, cluster_db, "create schema s1; create schema s2")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=2,
              workers=1)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        a.execute("SET search_path TO s1")
        with pytest.raises(psycopg.errors.DivisionByZero):   # one implicit transaction
            psycopg.ClientCursor(a).execute("SET search_path TO s2; select 1/0")
        assert a.execute("show search_path").fetchone()[0] == "s1"
        assert search_path_on_other_link(a, b) == "s1"


@pytest.mark.parametrize("protocol", ["simple", "extended-unnamed", "extended-named"])
def test_search_path_savepoints_as_postgres(pg_cluster, cluster_db, neki, protocol):
    """ROLLBACK TO SAVEPOINT undoes a SET made after the savepoint, RELEASE keeps it (nested
    savepoints too); what commits is what another link serves next."""
    server_sql(pg_cluster, cluster_db, "create schema s1; create schema s2; create schema s3")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=2,
              workers=1)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        if protocol == "simple":
            def run(sql):
                psycopg.ClientCursor(a).execute(sql)
        else:
            def run(sql):
                a.execute(sql, prepare=protocol == "extended-named", binary=True)
        run("SET search_path TO s1")
        a.execute("BEGIN")
        run("SAVEPOINT p1")
        run("SET search_path TO s2")
        run("ROLLBACK TO SAVEPOINT p1")                     # s2 undone: back to s1
        assert a.execute("show search_path").fetchone()[0] == "s1"
        run("SET search_path TO s3")
        run("SAVEPOINT p2")
        run("SAVEPOINT p3")
        run("SET search_path TO s2")
        run("RELEASE SAVEPOINT p3")                         # s2 kept ...
        run("ROLLBACK TO p2")                               # ... until p2 is rolled back to
        a.execute("COMMIT")
        assert a.execute("show search_path").fetchone()[0] == "s3"
        assert search_path_on_other_link(a, b) == "s3"
        a.execute("BEGIN")
        run("SAVEPOINT p1")
        run("SET search_path TO s1")
        with pytest.raises(psycopg.errors.DivisionByZero):
            a.execute("select 1/0")
        run("ROLLBACK TO p1")                               # after an error, as ORMs do
        run("RELEASE p1")
        a.execute("COMMIT")
        assert search_path_on_other_link(a, b) == "s3"
        # one Query with several statements
        psycopg.ClientCursor(a).execute("BEGIN; SET search_path TO s2; SAVEPOINT x; "
                                        "SET search_path TO s1; ROLLBACK TO x; COMMIT")
        assert search_path_on_other_link(a, b) == "s2"


@pytest.mark.parametrize("protocol", ["simple", "extended-unnamed"])
def test_search_path_set_config(pg_cluster, cluster_db, neki, protocol):
    """SELECT set_config('search_path', v, false) is a session SET; with is_local true it
    ends with the transaction, as in Postgres."""
    server_sql(pg_cluster, cluster_db, 'create schema s1; create schema "S 2"')
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=2,
              workers=1)
    with n.connect(dbname=cluster_db) as a, n.connect(dbname=cluster_db) as b:
        if protocol == "simple":
            def run(sql):
                return psycopg.ClientCursor(a).execute(sql).fetchone()
        else:
            def run(sql):
                return a.execute(sql, binary=True).fetchone()
        assert run("SELECT set_config('search_path', 's1, public', false)") == ("s1, public",)
        assert search_path_on_other_link(a, b) == "s1, public"
        run("select pg_catalog.set_config('search_path', '\"S 2\"', false)")
        assert search_path_on_other_link(a, b) == '"S 2"'
        a.execute("BEGIN")
        run("select set_config('search_path', 's1', true)")   # local: not kept
        a.execute("COMMIT")
        assert search_path_on_other_link(a, b) == '"S 2"'
        a.execute("BEGIN")
        run("select set_config('search_path', 's1', false)")
        a.execute("ROLLBACK")
        assert search_path_on_other_link(a, b) == '"S 2"'


# ---------------------------------------------------------------------------------------------
# prepared statements


def test_psycopg_prepared_statements_transaction_mode(pg_cluster, cluster_db, neki):
    server_sql(pg_cluster, cluster_db, "create table kv(k int primary key, v int)")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=5,
              max_prepared_statements=10, workers=2)
    errors = []

    def client(idx):
        try:
            with n.connect(dbname=cluster_db, autocommit=False) as c:
                c.prepare_threshold = 0
                for i in range(100):
                    with c.transaction():
                        c.execute("insert into kv values (%s, %s)", (idx * 1000 + i, i))
                        r = c.execute("select v from kv where k = %s", (idx * 1000 + i,))
                        assert r.fetchone() == (i,)
                        c.execute("select count(*) from kv where v = %s and k > %s",
                                  (i, -1)).fetchone()
                    c.commit()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors[:3]
    assert server_sql(pg_cluster, cluster_db, "select count(*) from kv") == [(2000,)]
    stmts = server_sql(pg_cluster, "postgres",
                       "select count(*) from pg_stat_activity where datname = "
                       f"'{cluster_db}' and backend_type = 'client backend'")[0][0]
    assert 1 <= stmts <= 5


def test_prepared_statement_unknown_name(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction")
    w = Wire(n.port)
    w.login(database=cluster_db)
    bind = b"\0" + b"nosuch\0" + b"\0\0" + b"\0\0" + b"\0\0"
    w.send(b"B", bind)
    w.send(b"S", b"")
    errs = errors_in(w.read_all())
    assert errs and errs[0]["M"] == "prepared statement did not exist"


def test_prepared_lru_evicts_on_link(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              max_prepared_statements=3, workers=1)
    with n.connect(dbname=cluster_db) as c:
        c.prepare_threshold = 0
        for i in range(8):
            assert c.execute(f"select {i} + %s", (1,)).fetchone() == (i + 1,)
        count = c.execute("select count(*) from pg_prepared_statements").fetchone()[0]
        assert count <= 3
        for i in range(8):   # evicted ones are prepared again transparently
            assert c.execute(f"select {i} + %s", (2,)).fetchone() == (i + 2,)


# ---------------------------------------------------------------------------------------------
# limits, cancel, timeouts


def test_global_pool_size_across_workers(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=5,
              workers=4)
    stop = threading.Event()
    errors, peak = [], [0]

    def client():
        try:
            with n.connect(dbname=cluster_db) as c:
                for _ in range(5):
                    c.execute("select pg_sleep(0.05)")
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    def sampler():
        while not stop.is_set():
            # client backends only: an autovacuum worker of the database is listed too
            cnt = server_sql(pg_cluster, "postgres", "select count(*) from pg_stat_activity "
                             f"where datname = '{cluster_db}' "
                             "and backend_type = 'client backend'")[0][0]
            peak[0] = max(peak[0], cnt)
            time.sleep(0.02)

    s = threading.Thread(target=sampler)
    s.start()
    threads = [threading.Thread(target=client) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    s.join()
    assert not errors, errors[:3]
    assert 1 <= peak[0] <= 5


def sessions_by_worker(n, db, want):
    """Sessions of <n> until worker w has want[w] of them ({worker: [conn]}), the others
    closed. The worker is the slot the BackendKeyData encodes ((slot + 1) << 20 | counter)."""
    by = {w: [] for w in range(len(want))}
    deadline = time.monotonic() + 20	# (a worker still starting under load takes none)
    while not all(len(by[w]) == k for w, k in enumerate(want)):
        assert time.monotonic() < deadline, "no sessions on every worker"
        c = n.connect(dbname=db)
        w = (c.info.backend_pid >> 20) - 1
        if len(by[w]) < want[w]:
            by[w].append(c)
        else:
            c.close()
    return by


def test_idle_link_in_another_worker_is_given_up(pg_cluster, cluster_db, neki):
    """pool_size = 1 is global: the one link, idle in a worker, is closed for a client
    waiting in the other (pgbouncer's one process would hand it over at once), at once
    rather than at the janitor's next run, and far below query_wait_timeout."""
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              workers=2, query_wait_timeout=20)
    by = sessions_by_worker(n, cluster_db, [1, 1])
    worst = 0.0
    for i in range(12):
        t0 = time.monotonic()
        assert by[i % 2][0].execute("select 1").fetchone() == (1,)
        worst = max(worst, time.monotonic() - t0)
    for c in by[0] + by[1]:
        c.close()
    assert worst < 2.0, f"a query waited {worst:.2f} s"


def test_login_on_a_worker_without_links_takes_the_shared_welcome(pg_cluster, cluster_db, neki):
    """The server parameters of a pool's first login are shared by the workers (shm): a
    client landing on a worker that never had a link of the pool logs in at once while the
    pool's only link (pool_size = 1, global) is held in a transaction on the other worker,
    and its query waits for the link; pgbouncer's one process likewise has them once any
    server of the pool logged in. (Before, that login waited for a link of its own and ran
    into client_login_timeout.)"""
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              workers=2, client_login_timeout=3, query_wait_timeout=20)
    first = n.connect(dbname=cluster_db, autocommit=True)
    first_worker = (first.info.backend_pid >> 20) - 1
    first.execute("begin")
    first.execute("select 1")		# the pool's only link, held until the commit
    other, deadline = None, time.monotonic() + 20
    while other is None:
        assert time.monotonic() < deadline, "no session on the other worker"
        t0 = time.monotonic()
        c = n.connect(dbname=cluster_db, autocommit=True)
        assert time.monotonic() - t0 < 2.0, "a login waited for a link"
        if (c.info.backend_pid >> 20) - 1 == first_worker:
            c.close()
        else:
            other = c
    for name in ("server_version", "server_encoding", "integer_datetimes"):
        assert other.info.parameter_status(name) == first.info.parameter_status(name)
    got = []
    t = threading.Thread(target=lambda: got.append(other.execute("select 2").fetchone()))
    t.start()
    first.execute("commit")
    t.join(20)
    assert got == [(2,)]
    first.close()
    other.close()
    n.wait_log("closing because: idle link released for a client waiting in another worker")


def test_busy_worker_hands_its_link_over(pg_cluster, cluster_db, neki):
    """Two clients of one worker take turns on the only link (pool_size = 1) without pause,
    so it is never idle there; a client of the other worker still gets it within a bounded
    time (it waited longest), not at query_wait_timeout."""
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              workers=2, query_wait_timeout=10)
    by = sessions_by_worker(n, cluster_db, [2, 1])
    stop, errors = threading.Event(), []

    def hammer(c):
        try:
            while not stop.is_set():
                c.execute("select pg_sleep(0.01)")
        except psycopg.Error as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=hammer, args=(c,)) for c in by[0]]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: server_sql(pg_cluster, "postgres", "select count(*) from "
                                      "pg_stat_activity where query like 'select pg_sleep%' "
                                      f"and datname = '{cluster_db}'")[0][0] > 0, 5,
                   what="the busy worker's queries")
        for _ in range(3):
            t0 = time.monotonic()
            assert by[1][0].execute("select 1").fetchone() == (1,)
            assert time.monotonic() - t0 < 2.0
    finally:
        stop.set()
        for t in threads:
            t.join(20)
    assert not errors, errors[:3]
    for c in by[0] + by[1]:
        c.close()


@pytest.mark.parametrize("attempt", range(4))
def test_cancel_from_another_connection(pg_cluster, cluster_db, neki, attempt):
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", workers=4)
    with n.connect(dbname=cluster_db) as c:
        result = {}

        def run():
            t0 = time.monotonic()
            try:
                c.execute("select pg_sleep(30)")
            except psycopg.errors.QueryCanceled as e:
                result["err"] = e
            result["t"] = time.monotonic() - t0

        t = threading.Thread(target=run)
        t.start()
        wait_until(lambda: server_sql(pg_cluster, "postgres",
                                      "select 1 from pg_stat_activity where query like "
                                      "'select pg_sleep(30)%'"), 5, what="the query")
        t0 = time.monotonic()
        c.cancel()
        t.join(10)
        assert "err" in result and result["err"].sqlstate == "57014"
        assert time.monotonic() - t0 < 1.0
        assert c.execute("select 1").fetchone() == (1,)


def test_cancel_in_flight_keeps_link_out_of_pool(pg_cluster, cluster_db, neki):
    """A cancel sent late (the query ended first) must not hit the next query on that link:
    the link waits out of the pool until the server has closed the cancel connection. The
    postmaster is stopped so that the cancel connection stays open meanwhile."""
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              admin_users="postgres", workers=1)
    a = n.connect(dbname=cluster_db)
    b = n.connect(dbname=cluster_db)
    adm = n.admin_connect()
    pidfile = os.path.join(pg_cluster.dir, "shard-a", "postmaster.pid")
    with open(pidfile) as f:
        postmaster = int(f.readline())
    result = {}

    def run(conn, key, sql):
        try:
            conn.execute(sql)
            result[key] = "ok"
        except psycopg.Error as e:
            result[key] = e

    ta = threading.Thread(target=run, args=(a, "a", "select pg_sleep(1)"))
    ta.start()
    wait_until(lambda: server_sql(pg_cluster, cluster_db, "select 1 from pg_stat_activity "
                                  "where query = 'select pg_sleep(1)'"), 5, what="A's query")
    os.kill(postmaster, signal.SIGSTOP)
    try:
        a.cancel()              # neki's cancel connection waits in the postmaster's backlog
        ta.join(10)
        assert result.get("a") == "ok"      # the query ended before the cancel was served
        tb = threading.Thread(target=run, args=(b, "b", "select pg_sleep(0.5)"))
        tb.start()

        def b_waiting():        # the only link waits for its cancel (sv_being_canceled), B waits
            cur = adm.execute("show pools", prepare=False)
            names = [d.name for d in cur.description]
            return any(r[names.index("database")] == cluster_db and
                       r[names.index("sv_being_canceled")] == 1 and
                       r[names.index("sv_active")] == 0 and r[names.index("cl_waiting")] == 1
                       for r in cur.fetchall())
        wait_until(b_waiting, 5, what="B to wait for the link being cancelled")
        cur = adm.execute("show servers", prepare=False)
        names = [d.name for d in cur.description]
        assert [r[names.index("state")] for r in cur.fetchall()
                if r[names.index("database")] == cluster_db] == ["being_canceled"]
    finally:
        os.kill(postmaster, signal.SIGCONT)
    tb.join(10)
    assert result.get("b") == "ok"      # the late cancel did not stop B's query
    for c in (a, b, adm):
        c.close()


def test_cancel_of_idle_or_unknown_key_does_nothing(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, workers=2)
    with n.connect(dbname=cluster_db) as c:
        c.cancel()
        w = Wire(n.port)
        w.raw(b"\0\0\0\x10" + (80877102).to_bytes(4, "big") + b"\x7f\0\0\x01\0\0\0\x02")
        assert w.read_all() == []
        assert c.execute("select 1").fetchone() == (1,)


def test_query_timeout(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, query_timeout=1)
    with n.connect(dbname=cluster_db) as c:
        t0 = time.monotonic()
        with pytest.raises(psycopg.OperationalError, match="query timeout"):
            c.execute("select pg_sleep(10)")
        assert time.monotonic() - t0 < 3
    n.wait_log("closing because: query timeout")


def test_client_idle_timeout(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, client_idle_timeout=1)
    w = Wire(n.port)
    w.login(database=cluster_db)
    t0 = time.monotonic()
    errs = errors_in(w.read_all())
    assert errs and errs[0]["M"] == "client_idle_timeout"
    assert time.monotonic() - t0 < 3


def test_idle_transaction_timeout(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, idle_transaction_timeout=1)
    w = Wire(n.port)
    w.login(database=cluster_db)
    w.query("BEGIN")
    errs = errors_in(w.read_all())
    assert errs and errs[0]["M"] == "idle transaction timeout"


def test_client_login_timeout(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, client_login_timeout=1)
    w = Wire(n.port)
    w.raw(b"\0\0")   # half a startup packet, then nothing
    t0 = time.monotonic()
    w.read_all()
    assert time.monotonic() - t0 < 3


def test_application_name_add_host(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, application_name_add_host=1)
    with n.connect(dbname=cluster_db, application_name="app1") as c:
        name = c.execute("show application_name").fetchone()[0]
    assert name.startswith("app1 - 127.0.0.1:")


def test_copy_in_and_out(pg_cluster, cluster_db, neki):
    server_sql(pg_cluster, cluster_db, "create table cp(a int, b text)")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction")
    with n.connect(dbname=cluster_db) as c:
        with c.cursor().copy("copy cp from stdin") as cp:
            for i in range(1000):
                cp.write_row((i, f"row {i}"))
        out = bytearray()
        with c.cursor().copy("copy cp to stdout") as cp:
            for chunk in cp:
                out += chunk
        assert out.count(b"\n") == 1000
        assert c.execute("select count(*) from cp").fetchone() == (1000,)


def test_jdbc_prepared_statements_transaction_mode(pg_cluster, cluster_db, neki):
    jar = "/usr/share/java/postgresql.jar"
    src = __import__("pathlib").Path(__file__).resolve().parent / "jdbc" / "PreparedTx.java"
    server_sql(pg_cluster, cluster_db, "create table jt(k int primary key, v int)")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=5,
              workers=2, ignore_startup_parameters="extra_float_digits")
    url = (f"jdbc:postgresql://127.0.0.1:{n.port}/{cluster_db}?user=postgres"
           "&prepareThreshold=1&sslmode=disable")
    res = subprocess.run(["java", "-cp", jar, str(src), url, "20", "100"],
                         capture_output=True, text=True, timeout=170)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "errors=0 rows=2000", res.stdout + res.stderr[-2000:]
    assert server_sql(pg_cluster, cluster_db, "select count(*) from jt") == [(2000,)]


def node_pg_path():
    """Where the npm `pg` module is (NEKI_NODE_PATH, or a node_modules some test set up)."""
    import os
    from pathlib import Path
    for cand in (os.environ.get("NEKI_NODE_PATH"), "/tmp/nodepg/node_modules",
                 "/usr/lib/node_modules", "/usr/share/nodejs"):
        if cand and (Path(cand) / "pg").is_dir():
            return cand
    return None


def test_node_postgres_named_queries_transaction_mode(pg_cluster, cluster_db, neki):
    path = node_pg_path()
    if path is None:
        pytest.skip("node-postgres (npm pg) is not installed; set NEKI_NODE_PATH")
    import os
    src = __import__("pathlib").Path(__file__).resolve().parent / "node" / "prepared_tx.js"
    server_sql(pg_cluster, cluster_db, "create table nt(k int primary key, v int)")
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=5,
              workers=2)
    res = subprocess.run(["node", str(src), str(n.port), cluster_db, "20", "100"],
                         capture_output=True, text=True, timeout=170,
                         env={**os.environ, "NODE_PATH": path})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "errors=0 rows=2000", res.stdout + res.stderr[-2000:]


def test_prepared_statements_survive_server_reset_query_always(pg_cluster, cluster_db, neki):
    # DISCARD ALL after every transaction drops the server's statements: neki must re-prepare
    n = start(neki, pg_cluster, cluster_db, pool_mode="transaction", default_pool_size=1,
              server_reset_query_always=1, workers=1)
    with n.connect(dbname=cluster_db) as c:
        c.prepare_threshold = 0
        for i in range(20):
            assert c.execute("select %s::int + 1", (i,)).fetchone() == (i + 1,)
