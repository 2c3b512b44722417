"""pgbouncer's test_misc.py scenarios against neki: startup parameters and `options`, protocol
negotiation, the login NOTICE and queue NOTICE, tracked parameters per client in transaction
mode, host lists, auto-databases, shutdown and reload corner cases."""
import socket
import struct
import subprocess
import threading
import time

import psycopg
import pytest

from compat import admin, db_line, start
from conftest import wait_until
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
    admin(n, "SET ignore_startup_parameters = options")
    assert _value(n, db, "SHOW enable_seqscan", options="-c enable_seqscan=false") == "on"
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
