"""
Operations as pgbouncer's test_operations.py exercises them (pgbcompat.py's test bed): PAUSE /
RESUME and SUSPEND / RESUME under a stream of clients, SUSPEND's errors and its automatic
RESUME when the console session that issued it goes away, DISABLE / ENABLE, the server
restarting under the pools, a database's dbname changed by RELOAD, RECONNECT, and reloads
that change (or do not change) the server TLS settings. The online restart (-R) has its
own module, test_compat_takeover.py.
"""
import threading
import time
from pathlib import Path

import pytest
from psycopg.rows import dict_row

from conftest import port_accepts, wait_until
from pgbcompat import bouncer, one_worker_bouncer, pgb_pg  # noqa: F401 (fixtures)

try:
    import psycopg
except ImportError:
    psycopg = None


class Stream:
    """Clients one after another (a new connection each), counting the queries that ran."""

    def __init__(self, bouncer, n=20, **kw):
        self.bouncer, self.n, self.kw, self.done, self.errors = bouncer, n, kw, 0, []
        self.thread = threading.Thread(target=self.run)
        self.thread.start()

    def run(self):
        for _ in range(self.n):
            try:
                self.bouncer.sql("SELECT pg_sleep(0.05)", connect_timeout=30, **self.kw)
                self.done += 1
            except psycopg.Error as e:
                self.errors.append(str(e))

    def join(self):
        self.thread.join(120)
        assert not self.thread.is_alive()
        assert self.errors == [] and self.done == self.n


def test_pause_resume_under_traffic(bouncer):
    stream = Stream(bouncer)
    for _ in range(3):
        bouncer.admin("PAUSE")
        time.sleep(0.3)
        bouncer.admin("RESUME")
        time.sleep(0.3)
    stream.join()


def _state(bouncer):
    return dict(bouncer.admin("SHOW STATE"))


def test_suspend_resume_under_traffic(bouncer):
    """SUSPEND answers once every client at rest stopped being read; clients connecting
    meanwhile wait in the listen queue and go on after RESUME (same console session)."""
    stream = Stream(bouncer)
    for _ in range(3):
        with bouncer.admin_conn() as admin:
            assert admin.execute("SUSPEND").statusmessage == "SUSPEND"
            # (new connections wait in the listen queue now: ask on this session)
            assert dict(admin.execute("SHOW STATE").fetchall()) == \
                {"active": "no", "paused": "no", "suspended": "yes"}
            time.sleep(0.3)
            assert admin.execute("RESUME").statusmessage == "RESUME"
        time.sleep(0.3)
    stream.join()
    assert _state(bouncer)["suspended"] == "no"


def test_suspend_holds_a_connected_client(bouncer):
    conn = bouncer.conn()
    with bouncer.admin_conn() as admin:
        admin.execute("SUSPEND")
        result = []
        t = threading.Thread(target=lambda: result.append(
            conn.execute("SELECT 42").fetchone()[0]))
        t.start()
        t.join(0.5)
        assert t.is_alive() and result == []     # not read while suspended
        admin.execute("RESUME")
        t.join(10)
        assert result == [42]
    conn.close()


def test_suspend_errors_and_auto_resume(bouncer):
    with bouncer.admin_conn() as admin:
        admin.execute("SUSPEND")
        with pytest.raises(psycopg.Error, match="already suspended/paused"):
            admin.execute("SUSPEND")
        with pytest.raises(psycopg.Error, match="already suspended/paused"):
            admin.execute("PAUSE")
    # the session that suspended is gone: neki resumes by itself
    wait_until(lambda: _state(bouncer)["suspended"] == "no", 10, what="the automatic RESUME")
    bouncer.test()
    bouncer.admin("PAUSE p0")
    with pytest.raises(psycopg.Error, match="cannot suspend with paused databases"):
        bouncer.admin("SUSPEND")
    bouncer.admin("RESUME p0")
    with pytest.raises(psycopg.Error, match="pooler is not paused/suspended"):
        bouncer.admin("RESUME")


def test_enable_disable(bouncer):
    bouncer.test()
    bouncer.admin("DISABLE p0")
    with pytest.raises(psycopg.OperationalError, match=r'database "p0" is disabled'):
        bouncer.test()
    bouncer.admin("ENABLE p0")
    bouncer.test()


def test_database_restart(bouncer):
    """The server restarts under open pools: clients in flight may fail, new ones work."""
    bouncer.admin("SET server_login_retry = 1")
    bouncer.test()
    bouncer.pg.stop_server("shard-a")
    bouncer.pg.start_server("shard-a")
    wait_until(lambda: _ok(bouncer, "p0") and _ok(bouncer, "p1"), 20,
               what="both pools to serve again")


def _ok(bouncer, db):
    try:
        bouncer.test(dbname=db)
        return True
    except psycopg.OperationalError:
        return False


def test_database_change_on_reload(bouncer):
    bouncer.admin("SET server_lifetime = 2")
    bouncer.default_db = "p1"
    assert bouncer.sql_value("select current_database()") == "p1"
    bouncer.write_config(bouncer.config_text().replace("dbname=p1", "dbname=p0"))
    bouncer.admin("RELOAD")
    assert bouncer.sql_value("select current_database()") == "p0"


def test_reconnect(bouncer):
    pid1 = bouncer.sql_value("select pg_backend_pid()")
    bouncer.admin("RECONNECT")
    pid2 = bouncer.sql_value("select pg_backend_pid()")
    assert pid1 != pid2


def _txn_pool_ini(bouncer, extra=""):
    return bouncer.config_text() + "\n[databases]\npTxnPool = port=%d host=127.0.0.1 " \
        "dbname=p0 pool_mode=transaction\n[pgbouncer]\n%s\n" % (bouncer.pg.port("shard-a"),
                                                                 extra)


def test_reload_without_tls_change_keeps_links(bouncer):
    bouncer.write_config(_txn_pool_ini(bouncer))
    bouncer.admin("RELOAD")
    bouncer.default_db = "pTxnPool"
    with bouncer.conn() as c:
        c.execute("SELECT 1")
        with bouncer.log_contains(r"pTxnPool.*closing because: database configuration "
                                  r"changed", times=0):
            bouncer.admin("RELOAD")
            time.sleep(0.5)


def test_reload_with_tls_change_closes_links(bouncer):
    bouncer.write_config(_txn_pool_ini(bouncer, "server_tls_protocols = tlsv1.2"))
    bouncer.admin("RELOAD")
    bouncer.default_db = "pTxnPool"
    with bouncer.conn() as c:
        c.execute("SELECT 1")
        bouncer.write_ini("server_tls_protocols = secure")
        with bouncer.log_contains(r"pTxnPool.*closing because: database configuration "
                                  r"changed", times=1):
            bouncer.admin("RELOAD")


def test_wait_for_servers_keeps_the_unix_socket(bouncer):
    """SHUTDOWN WAIT_FOR_SERVERS closes the TCP listeners at once (pgbouncer's
    cleanup_tcp_sockets) but keeps the Unix socket: the console stays reachable there until
    the last server link is gone; then neki exits and removes the socket."""
    sock = Path(bouncer.admin_host) / f".s.PGSQL.{bouncer.port}"
    with bouncer.conn(dbname="p3") as c:    # session mode: the link stays with the client
        c.execute("BEGIN")
        c.execute("SELECT 1")
        bouncer.admin("SHUTDOWN WAIT_FOR_SERVERS")
        wait_until(lambda: not port_accepts(bouncer.port), 10, what="the TCP listeners closed")
        assert bouncer.admin_value("SHOW VERSION").startswith("PgBouncer")
        c.execute("COMMIT")
    bouncer.inst.wait_exit(10)
    assert not sock.exists()


def test_database_removed_on_reload(bouncer):
    """A database gone from the file is dropped at RELOAD, as pgbouncer: its clients get
    "database removed", its links close, and new clients "no such database"."""
    conn = bouncer.conn(dbname="p1")
    conn.execute("SELECT 1")
    lines = [l for l in bouncer.config_text().splitlines() if not l.startswith("p1 ")]
    bouncer.write_config("\n".join(lines) + "\n")
    with bouncer.log_contains(r"dropping database 'p1' as it does not exist anymore"):
        bouncer.admin("RELOAD")
    with pytest.raises(psycopg.OperationalError, match="database removed"):
        conn.execute("SELECT 1")
    with pytest.raises(psycopg.OperationalError, match="no such database: p1"):
        bouncer.test(dbname="p1")
    wait_until(lambda: bouncer.connection_count("p1") == 0, 10, what="p1's links to close")
    bouncer.test()   # the others go on


def test_set_takes_effect_for_queued_clients(one_worker_bouncer):
    """A console SET reaches the pools at once: clients queued for a full pool get in when
    SET default_pool_size makes room (no new client needed to notice). One worker: a client
    of another worker would wait for that worker's first link instead."""
    bouncer = one_worker_bouncer
    bouncer.admin("SET default_pool_size = 1")
    bouncer.admin("SET pool_mode = transaction")
    bouncer.default_db = "p1"
    holder = bouncer.conn(autocommit=False)
    holder.execute("SELECT 1")        # holds p1's only link
    done = []
    t = threading.Thread(target=lambda: done.append(bouncer.sql_value("SELECT 7")))
    t.start()
    wait_until(lambda: sum(r[3] for r in bouncer.admin("SHOW POOLS") if r[0] == "p1") == 1,
               10, what="the queued client")
    bouncer.admin("SET default_pool_size = 2")
    t.join(10)
    assert done == [7]
    holder.rollback()
    holder.close()
