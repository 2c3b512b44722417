"""pgbouncer's test_ssl.py, test_ssl_eof.py and test_ssl_pending.py scenarios against neki:
TLS settings changed on the console take effect for the next connection, a client that drops
the TCP connection without close_notify is a quiet EOF, and TLS to the server with a pkt_buf
far smaller than the login response and the results does not stall."""
import os
import shutil
import socket
import ssl
import struct
import sys
from pathlib import Path

import pytest

from compat import admin, start

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
