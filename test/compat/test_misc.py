"""pgbouncer's test_misc.py scenarios against neki: startup parameters and `options`, protocol
negotiation, the login NOTICE and queue NOTICE, tracked parameters per client in transaction
mode, host lists, auto-databases, shutdown and reload corner cases."""
import re
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

from compat import admin, db_line, start
from conftest import wait_until
import pgwire
from pgwire import Wire, error_fields

PSQL = "/usr/lib/postgresql/15/bin/psql"


def psql(n, db, sql, user="postgres"):
    res = subprocess.run([PSQL, "-X", "-h", "127.0.0.1", "-p", str(n.port), "-U", user,
                          "-d", db, "-c", sql], capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "PGCONNECT_TIMEOUT": "10"})
    return res


def test_database_port_default(pg_cluster, neki):
    n = neki(settings={"admin_users": "postgres"}, databases="postgres = host=127.0.0.1")
    row = next(r for r in admin(n, "SHOW DATABASES", dicts=True) if r["name"] == "postgres")
    assert row["port"] == 5432


@pytest.mark.parametrize("message", [None, "You are now connected to pgbouncer"])
def test_login_notify_message(pg_cluster, cluster_db, neki, message):
    settings = {"login_notify_message": message} if message else {}
    n = start(neki, pg_cluster, cluster_db, mode="session", **settings)
    res = psql(n, cluster_db, "SELECT 1;")
    assert res.returncode == 0, res.stderr
    assert res.stderr == (f"NOTICE:  {message}\n" if message else "")
    assert res.stdout == " ?column? \n----------\n        1\n(1 row)\n\n"


def test_query_wait_notify(pg_cluster, cluster_db, neki):
    """A client queued longer than query_wait_notify gets pgbouncer's NOTICE, each time it
    waits; one that waits less gets none."""
    n = neki(settings={"admin_users": "postgres", "pool_mode": "statement",
                       "query_wait_notify": 1, "workers": 1},
             databases=db_line(pg_cluster, cluster_db),
             users="postgres = max_user_connections=1")
    notices = []
    with n.connect(cluster_db) as c2:
        c2.add_notice_handler(lambda d: notices.append(d.message_primary))
        for _ in range(2):
            t = threading.Thread(target=lambda: n.connect(cluster_db).execute(
                "SELECT pg_sleep(2.5)").close())
            t.start()
            wait_until(lambda: any(r["state"] == "active" and r["database"] == cluster_db
                                   for r in admin(n, "SHOW SERVERS", dicts=True)), 5)
            c2.execute("select 1")
            t.join()
        assert notices == [f"No server connection available in {cluster_db} backend, "
                           "client being queued"] * 2
        c2.execute("select 1")      # a free link: no notice
        assert len(notices) == 2


def _startup(n, params):
    payload = struct.pack("!I", 0x30000) + params
    with socket.create_connection(("127.0.0.1", n.port), timeout=10) as s:
        s.sendall(struct.pack("!I", len(payload) + 4) + payload)
        with s.makefile("rb") as f:
            t = f.read(1)
            (length,) = struct.unpack("!I", f.read(4))
            return t, f.read(length - 4)


def test_protocol_extension_negotiation(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    ext = b"_pq_.test_protocol_negotiation"
    t, msg = _startup(n, b"\0".join((b"user", b"postgres", b"database", cluster_db.encode(),
                                     ext, b"", b"")) + b"\0")
    assert t == b"v"
    assert struct.unpack("!II", msg[:8]) == (0x30000, 1)
    assert msg[8:] == ext + b"\0"
    t, msg = _startup(n, b"\0".join((b"user", b"postgres", ext, b"", b"unsupported",
                                     b"value", b"")) + b"\0")
    assert t == b"E"
    assert b"unsupported startup parameter: unsupported\0" in msg


def _value(n, db, sql, **kw):
    with n.connect(db, **kw) as c:
        return c.execute(sql).fetchone()[0]


def test_options_startup_parameter(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, ignore_startup_parameters="extra_float_digits")
    db = cluster_db
    assert _value(n, db, "SHOW datestyle", options="  -c    datestyle=German,\\ YMD") == \
        "German, YMD"
    two = "-c timezone=Europe/Lisbon  -c    datestyle=German,\\ YMD"
    assert _value(n, db, "SHOW datestyle", options=two) == "German, YMD"
    assert _value(n, db, "SHOW timezone", options=two) == "Europe/Lisbon"
    assert _value(n, db, "SHOW timezone",
                  options="-ctimezone=Europe/Lisbon  -cdatestyle=German,\\ YMD") == \
        "Europe/Lisbon"
    assert _value(n, db, "SHOW timezone",
                  options="--timezone=Europe/Lisbon  --datestyle=German,\\ YMD") == \
        "Europe/Lisbon"
    assert _value(n, db, "SHOW timezone",
                  options="-c t\\imezone=\\E\\u\\r\\o\\pe/Lisbon  "
                          "-c    dat\\estyle\\=\\Ge\\rman,\\ YMD") == "Europe/Lisbon"
    assert _value(n, db, "SHOW extra_float_digits", options="-c extra_float_digits=2") == "1"
    for bad in ("-d", "-c timezone"):
        with pytest.raises(psycopg.OperationalError,
                           match="unsupported options startup parameter: only '-c "
                                 "config=val' and '--config=val' are allowed"):
            n.connect(db, options=bad)
    with pytest.raises(psycopg.OperationalError,
                       match="unsupported startup parameter in options: enable_seqscan"):
        n.connect(db, options="-c enable_seqscan=false")
    # neki's own settings are for sharded databases (test_session_state.py): refused here
    with pytest.raises(psycopg.OperationalError,
                       match="unsupported startup parameter in options: __neki.tx_mode"):
        n.connect(db, options="-c __neki.tx_mode=single")
    admin(n, "SET ignore_startup_parameters = options")
    assert _value(n, db, "SHOW enable_seqscan", options="-c enable_seqscan=false") == "on"
    assert _value(n, db, "SHOW enable_seqscan", options="-c __neki.tx_mode=single") == "on"
    assert _value(n, db, "SHOW timezone",
                  options="-ctimezone=Europe/Lisbon  -cdatestyle=German,\\ YMD") == \
        "Europe/Lisbon"


def test_startup_message_larger_than_pkt_buf(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, ignore_startup_parameters="extra_float_digits")
    assert _value(n, cluster_db, "select 1",
                  options=f"-c extra_float_digits={'1' * 4096}") == 1


def test_empty_application_name(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, mode="transaction")
    for _ in range(2):
        with n.connect(cluster_db, application_name="") as c:
            assert c.execute("SHOW application_name").fetchone()[0] == ""
            c.execute("SET application_name = test")
            assert c.execute("SHOW application_name").fetchone()[0] == "test"


def test_tracked_parameters_per_client(pg_cluster, cluster_db, neki):
    """Transaction mode, two clients sharing links: each SET of a tracked parameter stays
    with its client (pgbouncer 1.25's list plus IntervalStyle)."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction", default_pool_size=1,
              workers=1)
    sets = {
        "intervalstyle": (["sql_standard", "postgres"], ["sql_standard", "postgres"]),
        "standard_conforming_strings": (["ON", "OFF"], ["on", "off"]),
        "timezone": (["'Europe/Amsterdam'", "'Europe/Rome'"],
                     ["Europe/Amsterdam", "Europe/Rome"]),
        "datestyle": (["PostgreSQL,European", "ISO,US"], ["Postgres, DMY", "ISO, MDY"]),
        "application_name": (["client1", "client2"], ["client1", "client2"]),
        "client_encoding": (["LATIN1", "LATIN5"], ["LATIN1", "LATIN5"]),
    }
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        for key, (values, shown) in sets.items():
            c1.execute(f"SET {key} TO {values[0]}")
            c2.execute(f"SET {key} TO {values[1]}")
            assert c1.execute(f"SHOW {key}").fetchone()[0] == shown[0], key
            assert c2.execute(f"SHOW {key}").fetchone()[0] == shown[1], key


def test_host_list_dummy(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    n = neki(databases=f"hl = host=127.0.0.1,127.0.0.1 port={port} dbname={cluster_db}")
    with n.connect("hl") as c1, n.connect("hl") as c2:
        c1.execute("select 1")
        c2.execute("select 1")
    n.wait_log(r"(?s)new connection to server \(from 127\.0\.0\.1.*"
               r"new connection to server \(from 127\.0\.0\.1")


def test_auto_database_is_logged(pg_cluster, cluster_db, neki):
    n = neki(databases=f"* = host=127.0.0.1 port={pg_cluster.port('shard-a')}")
    assert _value(n, cluster_db, "select current_database()") == cluster_db
    n.wait_log(rf"registered new auto-database: db={cluster_db}")


def _pools(n):
    """(database, user) of the pools SHOW POOLS lists."""
    return {(r["database"], r["user"]) for r in admin(n, "SHOW POOLS", dicts=True)}


def test_pool_idle_timeout_frees_unused_pools(pg_cluster, cluster_db, neki):
    """pool_idle_timeout: a pool with no client and no server connection for that long is
    freed, with pgbouncer's log line; one a client still uses stays."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"admin_users": "postgres", "workers": 1, "pool_idle_timeout": 1,
                       "server_idle_timeout": 0.2},
             databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}\n"
                       f"held = host=127.0.0.1 port={port} dbname={cluster_db}")
    with n.connect("held") as held:
        held.execute("select 1")
        assert _value(n, cluster_db, "select 1") == 1
        assert {(cluster_db, "postgres"), ("held", "postgres")} <= _pools(n)
        n.wait_log(rf"cleaning up idle pool for user postgres on db {cluster_db} because: "
                   r"pool idle timeout \(age= \d+s\)", timeout=5)
        assert (cluster_db, "postgres") not in _pools(n)
        assert ("held", "postgres") in _pools(n)     # in use as long: kept
        assert held.execute("select 2").fetchone()[0] == 2
    assert _value(n, cluster_db, "select 3") == 3      # a new client gets a new pool


def test_autodb_idle_timeout_frees_unused_auto_databases(pg_cluster, cluster_db, neki):
    """autodb_idle_timeout: an auto-database ("*") unused for that long is dropped with
    pgbouncer's warning, and registered again for the next client."""
    n = neki(settings={"admin_users": "postgres", "workers": 1, "autodb_idle_timeout": 1,
                       "server_idle_timeout": 0.2},
             databases=f"* = host=127.0.0.1 port={pg_cluster.port('shard-a')}")
    registered = rf"registered new auto-database: db={cluster_db}"
    assert _value(n, cluster_db, "select 1") == 1
    n.wait_log(registered)
    assert (cluster_db, "postgres") in _pools(n)
    n.wait_log(rf"WARNING dropping database '{cluster_db}' as it does not exist anymore or "
               r"inactive auto-database", timeout=5)
    assert (cluster_db, "postgres") not in _pools(n)
    assert _value(n, cluster_db, "select 2") == 2
    wait_until(lambda: len(re.findall(registered, n.log())) == 2, 5,
               what="the auto-database registered again")


def test_resume_during_shutdown(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c, n.admin_connect(dbname="pgbouncer") as a:
        c.execute("SELECT 1")
        a.execute("SHUTDOWN WAIT_FOR_CLIENTS")
        with pytest.raises(psycopg.Error, match="pooler is shutting down"):
            a.execute("RESUME")


def test_newly_paused_client_during_wait_for_servers(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, mode="transaction")
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        c1.execute("BEGIN")
        c1.execute("SELECT 1")
        admin(n, "SHUTDOWN WAIT_FOR_SERVERS")
        c1.execute("SELECT 1")          # the transaction goes on
        with pytest.raises(psycopg.OperationalError):
            c2.execute("SELECT 1")
        n.wait_log("closing because: server shutting down")
        c1.execute("COMMIT")


def test_reload_of_many_forced_user_databases(pg_cluster, neki):
    """pgbouncer #1104: reloads that add and drop many forced-user databases."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"admin_users": "postgres"}, databases="")
    for i in range(1, 8):
        n.databases = "\n".join(f"testdb_{i}_{j} = host=127.0.0.1 port={port} "
                                f"user=dummy_user_{i}_{j}" for j in range(1, 10 * i))
        n.write_ini()
        admin(n, "RELOAD")
        assert len(admin(n, "SHOW DATABASES")) == 10 * i   # + the admin database


def test_server_login_with_a_tiny_pkt_buf(pg_cluster, cluster_db, neki):
    """pkt_buf = 75 (pgbouncer's test): every login packet is larger than the buffer."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction", pkt_buf=75)
    assert _value(n, cluster_db, "select 1") == 1
    with n.connect(cluster_db) as c:
        long = "x" * 5000
        assert c.execute("select %s::text", (long,), prepare=True).fetchone()[0] == long
        assert c.execute(f"select '{long}'").fetchone()[0] == long
        rows = c.execute("select g, repeat('y', 100) from generate_series(1, 500) g").fetchall()
        assert len(rows) == 500


def test_peer_default_port(neki):
    n = neki(settings={"admin_users": "postgres", "peer_id": 1},
             databases="postgres = host=127.0.0.1", extra="[peers]\n1 = host=localhost\n")
    peer = next(r for r in admin(n, "SHOW PEERS", dicts=True) if r["peer_id"] == 1)
    assert peer["port"] == 6432 and peer["host"] == "localhost"


def test_disable_pqexec_refuses_the_simple_query_protocol(pg_cluster, cluster_db, neki):
    """disable_pqexec = 1: a Query message ends the session with pgbouncer's FATAL (08P01
    "PQexec disallowed", logged as "client used "Query" packet type"); the extended protocol
    is served, and so is the console (pgbouncer exempts it)."""
    n = start(neki, pg_cluster, cluster_db, disable_pqexec=1)
    w = Wire(n.port)
    w.login(database=cluster_db)
    w.raw(pgwire.parse("", "select 41 + 1") + pgwire.bind("", "") + pgwire.execute() +
          pgwire.sync())
    assert ("D", ["42"]) in pgwire.summary(w.read_until("Z"))
    w.send(b"Q", b"select 1\0")
    msgs = w.read_all()
    w.close()
    assert [{k: error_fields(b).get(k) for k in "SCM"} for t, b in msgs if t == "E"] == [
        {"S": "FATAL", "C": "08P01", "M": "PQexec disallowed"}]
    n.wait_log(r'client used "Query" packet type')
    n.wait_log(r"closing because: PQexec disallowed")
    assert admin(n, "SHOW VERSION")[0][0].startswith("PgBouncer")


@pytest.mark.parametrize("on", [1, 0])
def test_log_pooler_errors(pg_cluster, cluster_db, neki, on):
    """log_pooler_errors (default 1): each error neki itself sends a client is logged as
    pgbouncer logs it, "pooler error: <message>" at WARNING; 0 logs none."""
    n = start(neki, pg_cluster, cluster_db, log_pooler_errors=on)
    with pytest.raises(psycopg.OperationalError, match="no such database: nowhere"):
        n.connect("nowhere")
    n.wait_log(r"closing because: no such database: nowhere")
    with pytest.raises(psycopg.Error) as ei:      # the console's errors too
        admin(n, "SHOW NOTHING_HERE")
    console = ei.value.diag.message_primary
    pooler = r"WARNING C-0x[0-9a-f]+: nowhere/postgres@127\.0\.0\.1:\d+ pooler error: " \
             r"no such database: nowhere"
    if on:
        n.wait_log(pooler)
        n.wait_log(r"WARNING pooler error: " + re.escape(console))
    else:
        assert "pooler error" not in n.log()
