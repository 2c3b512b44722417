"""Bad input from clients: truncated, oversized and garbage messages, during a pgbench run.

neki must answer each broken client with an ErrorResponse (FATAL, 08P01) where the protocol
allows one, close only that client, stay up (no worker restart), and the concurrent pgbench
run must lose nothing. A second SSLRequest (or GSSENCRequest) on one connection gets the
error a Postgres server gives."""
import os
import random
import re
import socket
import ssl
import struct
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, errors_in  # noqa: E402
from test_tls_config import make_client_pki, tls_neki  # noqa: E402


SSL_REQUEST = struct.pack("!II", 8, 80877103)
GSSENC_REQUEST = struct.pack("!II", 8, 80877104)


class UnixWire(Wire):
    """Wire over a Unix socket (a Postgres server offers no TLS there: it answers 'N')."""

    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""


def run_pgbench(port, db, *args):
    return subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                           *args, db], capture_output=True, text=True, timeout=300)


def expect_fatal(w, message=None, codes=("08P01",)):
    errs = errors_in(w.read_all())
    assert errs, "no ErrorResponse"
    assert errs[0]["S"] == "FATAL" and errs[0]["C"] in codes, errs[0]
    if message:
        assert re.search(message, errs[0]["M"]), errs[0]
    w.close()


def logged_in(port, db):
    w = Wire(port)
    w.login(database=db)
    return w


def bad_clients(port, db, rng):
    # startup packet longer than Postgres allows, or below its minimum: FATAL, then close
    # (Postgres only logs it; the client is told why)
    for length in (20000, 70000, 4):
        w = Wire(port)
        w.raw(struct.pack("!II", length, 196608))
        expect_fatal(w, "^invalid length of startup packet$")
    # a second SSLRequest on one connection
    w = Wire(port)
    w.raw(SSL_REQUEST)
    assert w.read_byte() == b"N"
    w.raw(SSL_REQUEST)
    expect_fatal(w, r"^unsupported frontend protocol 1234\.5679: ", codes=("0A000",))
    # garbage instead of a startup packet
    w = Wire(port)
    w.raw(struct.pack("!I", 40) + bytes(rng.getrandbits(8) for _ in range(36)))
    expect_fatal(w, codes=("08P01", "0A000"))  # a random "version" is 0A000, as Postgres
    # a truncated startup packet, then the client goes away
    w = Wire(port)
    w.raw(struct.pack("!II", 100, 196608) + b"user\0")
    w.close()
    # oversized message after login (max_packet_size is 1 MB here)
    w = logged_in(port, db)
    w.raw(b"Q" + struct.pack("!I", 5 << 20) + b"select 1")
    expect_fatal(w, "too big packet")
    # message length below 4
    w = logged_in(port, db)
    w.raw(b"Q" + struct.pack("!I", 2))
    expect_fatal(w, "invalid message length")
    # unknown message type
    w = logged_in(port, db)
    w.send(b"z", b"abc")
    expect_fatal(w)
    # a truncated Query, then the client goes away
    w = logged_in(port, db)
    w.raw(b"Q" + struct.pack("!I", 100) + b"select")
    w.close()
    # random garbage after login
    for _ in range(20):
        w = logged_in(port, db)
        w.raw(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 64))))
        w.sock.settimeout(0.5)  # (a message cut short waits for its rest, as in Postgres)
        w.read_all() if rng.random() < 0.5 else None
        w.close()
    # a malformed Bind (parameter count says more than there is)
    w = logged_in(port, db)
    w.send(b"B", b"\0\0\0\0\0\x05\0\0\0\x10ab")
    w.send(b"S", b"")
    msgs = w.read_until("Z")
    assert errors_in(msgs)
    w.close()


def test_bad_input_during_pgbench(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    res = run_pgbench(port, cluster_db, "-i", "-q", "-s", "1")
    assert res.returncode == 0, res.stderr
    n = neki(settings={"pool_mode": "transaction", "default_pool_size": 10, "workers": 2,
                       "max_packet_size": 1 << 20},
             databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}")
    result = {}

    def bench():
        result["res"] = run_pgbench(n.port, cluster_db, "-n", "-c", "10", "-j", "2", "-t", "200")

    t = threading.Thread(target=bench)
    t.start()
    rng = random.Random(int(os.environ.get("NEKI_FUZZ_SEED", "12345")))
    for _ in range(3):
        bad_clients(n.port, cluster_db, rng)
    t.join(300)
    out = result["res"]
    assert out.returncode == 0, out.stdout + out.stderr
    assert "number of transactions actually processed: 2000/2000" in out.stdout
    assert "number of failed transactions: 0" in out.stdout
    rows = pg_cluster.sql("shard-a", "select count(*) from pgbench_history", dbname=cluster_db)
    assert rows == [(2000,)]
    assert "killed by signal" not in n.log() and "exited with" not in n.log()
    with n.connect(dbname=cluster_db) as c:
        assert c.execute("select 1").fetchone() == (1,)


def negotiate_twice(w, first, second):
    """Send the requests of <first> (each answered 'N'), then <second>; the FATAL fields."""
    for req in first:
        w.raw(req)
        assert w.read_byte() == b"N"
    w.raw(second)
    errs = errors_in(w.read_all())
    w.close()
    assert len(errs) == 1, errs
    return {k: errs[0][k] for k in "SCM"}


def test_second_negotiation_request_is_refused_as_postgres_does(pg_cluster, neki):
    n = neki(databases=f"postgres = host=127.0.0.1 port={pg_cluster.port('shard-a')}")
    pg_sock = f"{pg_cluster.sockdir}/.s.PGSQL.{pg_cluster.port('shard-a')}"
    cases = [((SSL_REQUEST,), SSL_REQUEST), ((GSSENC_REQUEST,), GSSENC_REQUEST),
             ((SSL_REQUEST, GSSENC_REQUEST), SSL_REQUEST),
             ((GSSENC_REQUEST, SSL_REQUEST), GSSENC_REQUEST)]
    for first, second in cases:
        want = negotiate_twice(UnixWire(pg_sock), first, second)
        assert want["C"] == "0A000" and want["M"].startswith("unsupported frontend protocol")
        assert negotiate_twice(Wire(n.port), first, second) == want, (first, second)
    # one of each kind is fine: SSL and GSS refused, then a login
    w = Wire(n.port)
    for req in (SSL_REQUEST, GSSENC_REQUEST):
        w.raw(req)
        assert w.read_byte() == b"N"
    assert w.login()[-1][0] == "Z"
    w.close()


def test_ssl_request_inside_tls_is_refused_as_postgres_does(pg_cluster, cluster_db, neki):
    """An SSLRequest sent inside the TLS session it started: the same FATAL, over TLS
    (compared with the Postgres server when the cluster runs TLS)."""
    n = tls_neki(neki, pg_cluster, cluster_db, make_client_pki())
    servers = [n.port] + ([pg_cluster.port("shard-a")] if pg_cluster.ssl else [])
    answers = []
    for port in servers:
        w = Wire(port)
        w.raw(SSL_REQUEST)
        assert w.read_byte() == b"S"
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        w.sock = ctx.wrap_socket(w.sock)
        w.raw(SSL_REQUEST)
        msgs = []
        try:
            msgs = w.read_all()
        except ssl.SSLError:
            pass
        errs = errors_in(msgs)
        w.close()
        assert len(errs) == 1, (port, msgs)
        answers.append({k: errs[0][k] for k in "SCM"})
    assert answers[0] == {"S": "FATAL", "C": "0A000", "M": "unsupported frontend protocol "
                          "1234.5679: server supports 3.0 to 3.0"}
    assert all(a == answers[0] for a in answers), answers
