"""
The console as pgbouncer's test_admin.py exercises it, run against neki started the way that
suite starts pgbouncer (pgbcompat.py): RELOAD errors, every SHOW, socket ids (clients and
servers drawn from one counter, console sessions included), client states, KILL /
KILL_CLIENT and their errors, SHOW VERSION against `--version`, `--help`, and the SHOW STATS
/ STATS_TOTALS / TOTALS counts right after the traffic (console commands included).
"""
import subprocess
import threading

import pytest
from psycopg.rows import dict_row

from conftest import wait_until
from pgbcompat import bouncer, pgb_pg  # noqa: F401 (fixtures)

try:
    import psycopg
except ImportError:
    psycopg = None


def test_reload_error_is_config_file_error(bouncer):
    good = bouncer.config_block(f"p1 = host=127.0.0.1 port={bouncer.pg.port('shard-a')}",
                                "pool_mode = session\nserver_lifetime = 0")
    with bouncer.run_with_config(good):
        bouncer.write_config(good.replace("server_lifetime = 0",
                                          "server_lifetime = invalid_server_lifetime"))
        with pytest.raises(psycopg.errors.ConfigFileError,
                           match=r"RELOAD failed, see logs for additional details"):
            bouncer.admin("RELOAD")
        # pgbouncer's line for a failed reload, which operators grep for
        wait_until(lambda: "config file loading failed" in bouncer.log(), 5,
                   what="the failed-reload log line")


def test_every_show_answers(bouncer):
    for item in ["clients", "config", "databases", "help", "lists", "peers", "peer_pools",
                 "pools", "servers", "sockets", "active_sockets", "state", "stats",
                 "stats_totals", "stats_averages", "users", "totals", "mem", "dns_hosts",
                 "dns_zones", "version"]:
        bouncer.admin(f"SHOW {item}")


def _one_pool_config(bouncer, pool_mode):
    extra = "server_lifetime = 0" + (f"\npool_mode = {pool_mode}" if pool_mode else "")
    return bouncer.config_block(f"p1 = host=127.0.0.1 port={bouncer.pg.port('shard-a')}",
                                extra)


def _console_tcp(bouncer):
    """A console session over TCP as pgbouncer (admin_users), as the suite opens it."""
    return psycopg.connect(host="127.0.0.1", port=bouncer.port, dbname="pgbouncer",
                           user="pgbouncer", autocommit=True, connect_timeout=10,
                           row_factory=dict_row, prepare_threshold=None)


def test_socket_ids_interleave_clients_and_servers(bouncer):
    """Each client takes the next id and its new server link the one after: one counter for
    both kinds, the console session's own id included (SHOW SOCKETS)."""
    with bouncer.run_with_config(_one_pool_config(bouncer, "session")):
        with _console_tcp(bouncer) as admin:
            initial = max(r["id"] for r in admin.execute("SHOW SOCKETS").fetchall())
            for i in range(1, 4):
                c = bouncer.conn(dbname="p1")
                c.execute("SELECT 1")
                ids = {r["id"] for r in admin.execute("SHOW SOCKETS").fetchall()}
                assert ids == {initial, initial + 2 * i - 1, initial + 2 * i}
                c.close()
                # server_lifetime = 0: the link is closed when its session ends
                wait_until(lambda: len(admin.execute("SHOW SOCKETS").fetchall()) == 1, 10,
                           what="the client and its link to go")


def test_server_ids(bouncer):
    with bouncer.run_with_config(_one_pool_config(bouncer, None)):
        with _console_tcp(bouncer) as admin:
            initial = max(r["id"] for r in admin.execute("SHOW SOCKETS").fetchall())
            for i in range(1, 4):
                c = bouncer.conn(dbname="p1")
                c.execute("SELECT 1")
                assert [r["id"] for r in admin.execute("SHOW SERVERS").fetchall()] == \
                    [initial + 2 * i]
                c.close()
                wait_until(lambda: admin.execute("SHOW SERVERS").fetchall() == [], 10,
                           what="the link to close (server_lifetime = 0)")


def test_console_sessions_take_consecutive_ids(bouncer):
    """Each console session over the main port's Unix socket takes one id (the worker's
    relay to the admin process takes none) and sees only itself in SHOW CLIENTS."""
    first = bouncer.admin("SHOW CLIENTS", row_factory=dict_row)
    assert len(first) == 1
    for i in range(1, 4):
        rows = bouncer.admin("SHOW CLIENTS", row_factory=dict_row)
        assert [r["id"] for r in rows] == [first[0]["id"] + i]


def test_unix_console_client_row(bouncer):
    """A Unix-socket client shows pgbouncer's values: addr unix, port and local_port the
    listen port, remote_pid the peer's pid."""
    with bouncer.admin_conn() as c:
        rows = c.cursor(row_factory=dict_row).execute("SHOW CLIENTS").fetchall()
        pid = c.pgconn.backend_pid   # the console's BackendKeyData pid is neki's, not ours
        assert pid
    (row,) = rows
    assert (row["addr"], row["port"], row["local_addr"], row["local_port"]) == \
        ("unix", bouncer.port, "unix", bouncer.port)
    assert row["remote_pid"] == __import__("os").getpid()


def _state(bouncer, db, user):
    rows = bouncer.admin("SHOW CLIENTS", row_factory=dict_row)
    return [r["state"] for r in rows if r["database"] == db and r["user"] == user][0]


def test_client_states(bouncer):
    conn = bouncer.conn(dbname="p3x", user="clientstate")
    cur = conn.cursor()
    assert _state(bouncer, "p3x", "clientstate") == "idle"
    bouncer.admin("PAUSE p3x")
    done = threading.Event()

    def blocked():
        cur.execute("SELECT 1")
        cur.fetchone()
        done.set()

    t = threading.Thread(target=blocked)
    t.start()
    try:
        wait_until(lambda: _state(bouncer, "p3x", "clientstate") == "waiting", 10,
                   what="the client to wait for the paused database")
    finally:
        bouncer.admin("RESUME p3x")
    t.join(10)
    assert done.is_set()
    cur.execute("BEGIN; SELECT 1;")
    assert _state(bouncer, "p3x", "clientstate") == "active"
    cur.execute("ROLLBACK")
    conn.close()


def test_kill_db_and_all(bouncer):
    c1 = bouncer.conn(dbname="p0", user="maxedout")
    c2 = bouncer.conn(dbname="p0", user="maxedout")
    assert len(bouncer.admin("SHOW CLIENTS")) == 3
    bouncer.admin("KILL p0")
    assert len(bouncer.admin("SHOW CLIENTS")) == 1
    bouncer.admin("RESUME p0")
    c3 = bouncer.conn(dbname="p0", user="maxedout")
    c4 = bouncer.conn(dbname="p1", user="maxedout")
    assert len(bouncer.admin("SHOW CLIENTS")) == 3
    bouncer.admin("KILL")
    assert len(bouncer.admin("SHOW CLIENTS")) == 1
    for c in (c1, c2, c3, c4):
        c.close()


@pytest.mark.parametrize("cmd,message", [
    ("KILL dne", "no such database: dne"),
    ("KILL_CLIENT 1000000", "client not found"),
    ("KILL_CLIENT non_existant_client_id", "invalid client pointer supplied"),
])
def test_kill_errors_leave_clients_alone(bouncer, cmd, message):
    c = bouncer.conn(dbname="p0", user="maxedout")
    assert len(bouncer.admin("SHOW CLIENTS")) == 2
    with pytest.raises(psycopg.errors.ProtocolViolation, match=message):
        bouncer.admin(cmd)
    assert len(bouncer.admin("SHOW CLIENTS")) == 2
    c.close()


def test_kill_client(bouncer):
    c = bouncer.conn(dbname="p0", user="maxedout")
    rows = bouncer.admin("SHOW CLIENTS", row_factory=dict_row)
    cid = [r for r in rows if r["database"] == "p0"][0]["id"]
    bouncer.admin(f"KILL_CLIENT {cid}")
    assert len(bouncer.admin("SHOW CLIENTS")) == 1
    c.close()


def test_show_version_is_the_first_line_of_version_flag(bouncer):
    out = subprocess.run([str(bouncer.inst.binary), "--version"], capture_output=True,
                         text=True, check=True).stdout
    assert bouncer.admin_value("SHOW VERSION") == out.split("\n")[0]
    assert out.startswith("PgBouncer 1.25.2")


def test_help_exits_zero(bouncer):
    subprocess.run([str(bouncer.inst.binary), "--help"], capture_output=True, check=True)


def test_show_stats_counts_at_once(bouncer):
    """Counts are current as soon as the traffic is done (no publication delay): 5 server
    assignments (session mode: one per connection), 6 transactions, 15 queries (psycopg's
    BEGIN / COMMIT included); SHOW TOTALS adds the console's commands, one transaction and
    one query per console session (pgbouncer counts a console session's first command)."""
    bouncer.default_db = "p3"
    for _ in range(4):
        bouncer.test()
    with bouncer.conn() as c:
        for _ in range(2):
            with c.transaction():
                for _ in range(3):
                    c.execute("SELECT 1")
    stats = bouncer.admin("SHOW STATS", row_factory=dict_row)
    p3 = next(s for s in stats if s["database"] == "p3")
    assert (p3["total_server_assignment_count"], p3["total_xact_count"],
            p3["total_query_count"]) == (5, 6, 15)
    totals = bouncer.admin("SHOW STATS_TOTALS", row_factory=dict_row)
    p3 = next(s for s in totals if s["database"] == "p3")
    assert (p3["server_assignment_count"], p3["xact_count"], p3["query_count"]) == (5, 6, 15)
    totals = dict(bouncer.admin("SHOW TOTALS"))
    # 4 console sessions so far: the start's SHOW VERSION, SHOW STATS, STATS_TOTALS, TOTALS
    assert totals["total_server_assignment_count"] == 5
    assert totals["total_xact_count"] == 10
    assert totals["total_query_count"] == 19


def test_client_logins_are_counted(bouncer):
    """pgbouncer 1.25's client_login_count: one per login that passed authentication (a
    refused one is not counted), console logins in the pgbouncer row (the session reading
    the figures included); SHOW TOTALS adds them up."""
    def console_logins():
        rows = bouncer.admin("SHOW STATS_TOTALS", row_factory=dict_row)
        return next(r for r in rows if r["database"] == "pgbouncer")["client_login_count"]
    before = console_logins()
    for _ in range(3):
        bouncer.test(dbname="p3")
    with pytest.raises(psycopg.OperationalError, match='"trust" authentication failed'):
        bouncer.test(dbname="p3", user="nosuchuser")
    stats = {r["database"]: r for r in bouncer.admin("SHOW STATS", row_factory=dict_row)}
    assert stats["p3"]["total_client_login_count"] == 3
    assert stats["pgbouncer"]["total_client_login_count"] == before + 1
    assert "avg_client_login_count" in stats["p3"]
    averages = bouncer.admin("SHOW STATS_AVERAGES", row_factory=dict_row)
    assert "avg_client_login_count" in averages[0]
    totals = dict(bouncer.admin("SHOW TOTALS"))
    assert totals["total_client_login_count"] == 3 + before + 3   # STATS, AVERAGES, TOTALS
    assert "avg_client_login_count" in totals


def test_console_session_end_is_logged_as_pgbouncer_does(bouncer):
    """A console session that sends Terminate logs `closing because: client close request`,
    with pgbouncer's prefix for a Unix peer: unix(<the peer's pid>):<listen port>."""
    pid = __import__("os").getpid()
    with bouncer.log_contains(rf"C-0x[0-9a-f]+: pgbouncer/pgbouncer@unix\({pid}\):"
                              rf"{bouncer.port} closing because: client close request"):
        bouncer.admin("SHOW VERSION")
