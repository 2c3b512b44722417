"""pgbouncer's test_ssl.py, test_ssl_eof.py and test_ssl_pending.py scenarios against neki:
TLS settings changed on the console take effect for the next connection, a client that drops
the TCP connection without close_notify is a quiet EOF, and TLS to the server with a pkt_buf
far smaller than the login response and the results does not stall; TLS settings that cannot
be set up keep the old contexts, with pgbouncer's log line and answers (RELOAD, console SET;
these run unchanged against pgbouncer 1.25.2 with NEKI_BIN)."""
import os
import shutil
import socket
import ssl
import struct
import sys
from pathlib import Path

import psycopg
import pytest

from compat import admin, start
from pgbcompat import bouncer, pgb_pg  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fault"))
from test_tls_config import make_client_pki, psql  # noqa: E402


@pytest.fixture(scope="module")
def pki():
    return make_client_pki()


def tls_on(n, pki, mode="require"):
    # pytest's certificate paths are long: a SET value of 150 bytes must reach the workers
    deep = pki / ("d" * 100)
    if not deep.exists():
        deep.mkdir()
        for f in ("server.key", "server.crt"):
            shutil.copy(pki / f, deep / f)
            os.chmod(deep / f, 0o644)
        os.chmod(deep, 0o755)
    admin(n, f"SET client_tls_key_file = '{deep / 'server.key'}'")
    admin(n, f"SET client_tls_cert_file = '{deep / 'server.crt'}'")
    admin(n, f"SET client_tls_ca_file = '{pki / 'ca.crt'}'")
    admin(n, f"SET client_tls_sslmode = {mode}")


def test_client_tls_set_on_the_console(pg_cluster, cluster_db, neki, pki):
    n = start(neki, pg_cluster, cluster_db, workers=1)
    tls_on(n, pki)
    out = psql(n.port, cluster_db, "verify-full", pki, host="localhost")
    assert out.returncode == 0 and out.stdout.strip() == "42", out.stderr
    out = psql(n.port, cluster_db, "disable", pki)
    assert out.returncode != 0 and "SSL required" in out.stderr
    admin(n, "SET client_tls_sslmode = disable")
    out = psql(n.port, cluster_db, "disable", pki)
    assert out.returncode == 0, out.stderr


def test_abrupt_tls_close_is_a_quiet_eof(pg_cluster, cluster_db, neki, pki):
    """A TLS client that closes TCP without close_notify (OpenSSL 3's 'unexpected eof while
    reading') is an ordinary client EOF: no warning in the log."""
    n = start(neki, pg_cluster, cluster_db, workers=1)
    tls_on(n, pki)
    for during_login in (False, True):
        s = socket.create_connection(("127.0.0.1", n.port), timeout=10)
        s.sendall(struct.pack("!II", 8, 80877103))
        assert s.recv(1) == b"S"
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.check_hostname = False
        tls = ctx.wrap_socket(s, server_hostname="localhost")
        if during_login:    # half a startup packet, then gone
            tls.sendall(struct.pack("!I", 64))
        tls.close()         # no unwrap(): no close_notify
    n.wait_log(r"closing because: client unexpected eof")
    out = psql(n.port, cluster_db, "require", pki)    # a later client is served
    assert out.returncode == 0, out.stderr
    log = n.log()
    assert "unexpected eof while reading" not in log
    assert "WARNING" not in log.replace("WARNING could not listen", "")


@pytest.mark.parametrize("pkt_buf", [128, 1024])
def test_server_tls_with_small_pkt_buf(pg_cluster, cluster_db, neki, pkt_buf):
    """TLS to the server with the login response and results spanning many buffers: data
    OpenSSL has already decrypted must be processed without waiting for the socket."""
    if not pg_cluster.ssl:
        pytest.skip("the cluster has no server TLS")
    pg_cluster.sql("shard-a", f"ALTER ROLE postgres IN DATABASE \"{cluster_db}\" "
                   f"SET application_name = '{'a' * 60}'")
    n = start(neki, pg_cluster, cluster_db, mode="transaction", pkt_buf=pkt_buf,
              server_tls_sslmode="require", server_connect_timeout=5)
    with n.connect(cluster_db, connect_timeout=8) as c:
        assert c.execute("select 1").fetchone() == (1,)
        assert c.execute("select ssl from pg_stat_ssl where pid = pg_backend_pid()"
                         ).fetchone() == (True,)
        rows = c.execute("select g, repeat('z', 300) from generate_series(1, 2000) g"
                         ).fetchall()
        assert len(rows) == 2000
        big = "q" * 100000
        assert c.execute("select %s::text", (big,)).fetchone()[0] == big


# ---------------------------------------------------------------------------------------------
# TLS settings that cannot be set up (pgbouncer's sbuf_tls_setup): the old contexts stay

def _notices(bouncer, sql):
    """Run <sql> on the console; (command tag, NOTICE texts)."""
    got = []
    with bouncer.admin_conn() as c:
        c.add_notice_handler(lambda d: got.append(d.message_primary))
        cur = c.execute(sql)
        return cur.statusmessage, got


def _tls_works(bouncer):
    with bouncer.conn(sslmode="require") as c:
        assert c.execute("select 1").fetchone() == (1,)
        return c.pgconn.ssl_in_use


def test_console_set_that_cannot_be_applied(bouncer, pki):
    bouncer.admin(f"SET client_tls_key_file = '{pki / 'server.key'}'")
    bouncer.admin(f"SET client_tls_cert_file = '{pki / 'server.crt'}'")
    assert _notices(bouncer, "SET client_tls_sslmode = allow")[1] == []
    assert _tls_works(bouncer)
    missing = pki / "missing.key"
    with bouncer.log_contains(rf'TLS setup failed: failed to load private key file "{missing}": '
                              r"error:80000002:system library::No such file or directory$",
                              times=1):
        tag, notices = _notices(bouncer, f"SET client_tls_key_file = '{missing}'")
    assert tag.startswith("SET")
    assert notices == ["TLS settings could not be applied, still using old configuration"]
    assert bouncer.config_value("client_tls_key_file") == str(missing)   # set, not applied
    assert _tls_works(bouncer)


def test_reload_with_tls_that_cannot_be_set_up(bouncer, pki):
    broken = pki / "broken.key"
    broken.write_text("not a key\n")
    os.chmod(broken, 0o644)
    bouncer.write_ini(f"client_tls_key_file = {pki / 'server.key'}\n"
                      f"client_tls_cert_file = {pki / 'server.crt'}\nclient_tls_sslmode = allow")
    bouncer.admin("RELOAD")
    assert _tls_works(bouncer)
    bouncer.write_ini(f"client_tls_key_file = {broken}\ndefault_pool_size = 7")
    with bouncer.log_contains(rf'TLS setup failed: failed to load private key file "{broken}": '
                              r"error:1E08010C:DECODER routines::unsupported$", times=1), \
            bouncer.log_contains(r"TLS configuration could not be reloaded, keeping old "
                                 r"configuration$", times=1):
        with pytest.raises(psycopg.Error) as ei:
            bouncer.admin("RELOAD")
    assert ei.value.sqlstate == "F0000"
    assert ei.value.diag.message_primary == "RELOAD failed, see logs for additional details"
    assert bouncer.config_value("default_pool_size") == "7"     # the rest applies
    assert _tls_works(bouncer)
