"""An idle server link serves the next client of its pool whichever worker holds the client
(src/worker/linkmove.c): with pool_size below the clients, the link itself moves to the
worker whose client waits (its socket over SCM_RIGHTS with its state), as pgbouncer's one
process hands its idle link to the next client: the same backend, no new server login, its
prepared statements kept. A link over TLS cannot move (no kernel TLS here): it is closed for
that client and the slot goes there, as before."""
import os
import re
import signal
import threading
import time

import psycopg

from conftest import wait_until
from test_session import db_line, sessions_by_worker


def start(neki, pg, db, tls=False, **settings):
    base = {"pool_mode": "transaction", "workers": 2, "query_wait_timeout": 20,
            "admin_users": "postgres",
            "server_tls_sslmode": "prefer" if tls else "disable"}
    base.update(settings)
    return neki(settings=base, databases=db_line(pg, db))


def backend(c):
    return c.execute("select pg_backend_pid()").fetchone()[0]


def server_logins(n):
    """Server logins so far (the LOG line of each; DEBUG adds a "launching" line)."""
    return len(re.findall(r" LOG S-0x[0-9a-f]+: \S+ new connection to server", n.log()))


def test_one_backend_serves_both_workers(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, default_pool_size=1)
    by = sessions_by_worker(n, cluster_db, [1, 1])
    try:
        pids = {backend(c) for _ in range(5) for c in (by[0][0], by[1][0])}
        assert len(pids) == 1, pids            # one server session throughout
        assert server_logins(n) == 1
        assert "idle link released" not in n.log()
        # a transaction on one worker, then the other one's turn, several times
        for _ in range(3):
            for c in (by[0][0], by[1][0]):
                with c.transaction():
                    assert backend(c) in pids
        assert server_logins(n) == 1
    finally:
        for cs in by.values():
            for c in cs:
                c.close()


def test_prepared_statements_move_with_the_link(pg_cluster, cluster_db, neki):
    """Worker 0's client prepares a statement on the only link; worker 1's client prepares
    the same text: the link came with its statements (same server-side name in every worker),
    so nothing is parsed again (a second Parse of that name would fail on the server)."""
    n = start(neki, pg_cluster, cluster_db, default_pool_size=1, max_prepared_statements=10)
    by = sessions_by_worker(n, cluster_db, [1, 1])
    a, b = by[0][0], by[1][0]
    try:
        for c, name in ((a, b"mine"), (b, b"theirs")):
            res = c.pgconn.prepare(name, b"select $1::int + 1")
            assert res.status == psycopg.pq.ExecStatus.COMMAND_OK, res.error_message
            res = c.pgconn.exec_prepared(name, [b"41"])
            assert res.get_value(0, 0) == b"42", res.error_message
        on_server = a.execute("select name from pg_prepared_statements").fetchall()
        assert len(on_server) == 1 and on_server[0][0].startswith("NEKI_"), on_server
        with n.admin_connect() as adm:
            cur = adm.execute("SHOW STATS", prepare=False)
            cols = [d.name for d in cur.description]
            row = [dict(zip(cols, r)) for r in cur.fetchall() if r[0] == cluster_db][0]
        assert row["total_server_parse_count"] == 1
        assert row["total_client_parse_count"] >= 2
        assert server_logins(n) == 1
    finally:
        a.close()
        b.close()


def test_moved_link_outlives_a_password_change(pg_cluster, cluster_db, neki):
    """The established server session keeps working after the role's password changed: the
    other worker's client gets it rather than a new login, which would now fail."""
    pg = pg_cluster
    role = "nk_move_pw"
    pg.sql("shard-a", f"drop role if exists {role}")
    pg.sql("shard-a", f"create role {role} login password 'first'")
    try:
        n = neki(settings={"pool_mode": "transaction", "workers": 2, "default_pool_size": 1,
                           "server_tls_sslmode": "disable", "query_wait_timeout": 20},
                 databases=f"{cluster_db} = host=127.0.0.1 port={pg.port('shard-a')} "
                           f"dbname={cluster_db} user={role} password=first")
        by = sessions_by_worker(n, cluster_db, [1, 1])
        a, b = by[0][0], by[1][0]
        pid = backend(a)
        pg.sql("shard-a", f"alter role {role} password 'second'")
        assert backend(b) == pid
        assert backend(a) == pid
        a.close()
        b.close()
    finally:
        pg.sql("shard-a", "select pg_terminate_backend(pid) from pg_stat_activity "
                          f"where usename = '{role}'")
        wait_until(lambda: pg.sql("shard-a", "select count(*) from pg_stat_activity "
                                             f"where usename = '{role}'")[0][0] == 0, 10)
        pg.sql("shard-a", f"drop role {role}")


def server_states(n, db):
    with n.admin_connect() as adm:
        cur = adm.execute("SHOW SERVERS", prepare=False)
        cols = [d.name for d in cur.description]
        return [r[cols.index("state")] for r in cur.fetchall() if r[cols.index("database")] == db]


def test_link_idle_past_check_delay_moves(pg_cluster, cluster_db, neki):
    """A link idle longer than server_check_delay waits in the 'used' state for its check; it
    must still go to a client of the other worker (it once stayed: that client waited for
    query_wait_timeout while the link sat idle in the first worker)."""
    n = start(neki, pg_cluster, cluster_db, default_pool_size=1, server_check_delay=1,
              query_wait_timeout=5)
    by = sessions_by_worker(n, cluster_db, [1, 1])
    a, b = by[0][0], by[1][0]
    try:
        pid = backend(a)
        wait_until(lambda: server_states(n, cluster_db) == ["used"], 10,
                   what="the idle link to be marked for a check")
        assert backend(b) == pid            # the same server session, checked, then used
        assert server_logins(n) == 1
    finally:
        a.close()
        b.close()


def test_tls_link_is_closed_for_the_other_worker(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, tls=True, default_pool_size=1)
    by = sessions_by_worker(n, cluster_db, [1, 1])
    try:
        assert backend(by[0][0]) != backend(by[1][0])
        n.wait_log("closing because: idle link released for a client waiting in another "
                   "worker")
        n.wait_log("server links over TLS cannot move to another worker")
    finally:
        for cs in by.values():
            for c in cs:
                c.close()


def worker_pid(n, slot):
    """The pid of worker <slot>'s current process (its last "started" line)."""
    found = re.findall(rf"worker {slot} started \(pid (\d+)\)", n.log())
    return int(found[-1]) if found else None


def test_limits_hold_when_a_worker_dies_after_moves(pg_cluster, cluster_db, neki):
    """The two links of a pool move back and forth between two workers (each round, two
    transactions at once on one worker, then on the other), then a worker is SIGKILLed: the
    master gives back exactly what it held (the slots moved with the links), so the pool
    still has room for pool_size links and never more."""
    n = start(neki, pg_cluster, cluster_db, default_pool_size=2, verbose=1)
    by = sessions_by_worker(n, cluster_db, [2, 2])
    links = ("select count(*) from pg_stat_activity where datname = current_database() "
             "and pid <> pg_backend_pid() and backend_type = 'client backend'")
    try:
        for _ in range(3):
            for w in (0, 1):
                for c in by[w]:
                    c.execute("begin")
                    c.execute("select 1")
                for c in by[w]:
                    c.execute("commit")
        assert n.log().count("handed to another worker for a client waiting there") >= 4
        assert "idle link released" not in n.log()
        assert server_logins(n) == 2
        assert pg_cluster.sql("shard-a", links, dbname=cluster_db)[0][0] == 2
    finally:
        for cs in by.values():
            for c in cs:
                c.close()
    victim = worker_pid(n, 1)
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: worker_pid(n, 1) not in (None, victim), 10, what="worker 1 restarted")
    # two transactions at once get two links (no slot lost), a third waits (none gained)
    cs = [n.connect(dbname=cluster_db, autocommit=False) for _ in range(3)]
    try:
        for c in cs[:2]:
            c.execute("select 1")
        got = []
        t = threading.Thread(target=lambda: got.append(cs[2].execute("select 3").fetchone()))
        t.start()
        wait_until(lambda: pool_row(n, cluster_db)["cl_waiting"] == 1, 10,
                   what="the third client waiting")
        assert pg_cluster.sql("shard-a", links, dbname=cluster_db)[0][0] <= 2
        cs[0].commit()
        t.join(10)
        assert got == [(3,)]
    finally:
        for c in cs:
            c.close()


def pool_row(n, db):
    """SHOW POOLS of <db>, summed over the workers' rows."""
    with n.admin_connect() as adm:
        cur = adm.execute("SHOW POOLS", prepare=False)
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall() if r[0] == db]
    return {k: sum(r[k] for r in rows) for k in ("cl_active", "cl_waiting", "sv_active",
                                                 "sv_idle")}
