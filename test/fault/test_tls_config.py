"""
TLS settings in the process model (net/tls.c through main.c, worker/child.c, worker/reload.c):
a start-up with TLS settings that cannot be honoured is refused before binding, workers build
their contexts at start, and a RELOAD whose new key file is broken keeps the old pair with
pgbouncer's log line. Certificates come from the `openssl` command in a private directory.
"""
import os
import subprocess

import pytest

from conftest import make_private_dir, port_accepts
from test_process import ssl_probe


def make_pki():
    """A CA and a server key + certificate (EC P-256), readable by the neki user."""
    d = make_private_dir("neki-tls.")
    run = lambda cmd: subprocess.run(cmd, shell=True, cwd=str(d), check=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run("openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout ca.key -out ca.crt -days 2 -subj /CN=ca")
    run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout server.key -out server.csr -subj /CN=localhost")
    run("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out server.crt -days 2")
    for f in os.listdir(d):
        os.chmod(d / f, 0o644)
    return d


def refused_start(neki, settings):
    """Start neki with <settings>; it must exit 1 before listening. Its output."""
    inst = neki(settings=settings, start=False)
    inst.start(wait=False)
    assert inst.proc.wait(5) == 1
    assert not port_accepts(inst.port)
    return inst.output()


def test_missing_client_tls_files_refuse_to_start(neki):
    assert ("TLS setup failed: To allow TLS connections from clients, client_tls_key_file and "
            "client_tls_cert_file must be set.") in refused_start(neki, {"client_tls_sslmode":
                                                                         "require"})


def test_bad_protocols_refuse_to_start(neki):
    assert "TLS setup failed: invalid server_tls_protocols: tlsv9\n" in \
        refused_start(neki, {"server_tls_protocols": "tlsv9"})


NOFILE = "error:80000002:system library::No such file or directory"


@pytest.mark.parametrize("settings, reason", [
    ({"client_tls_cert_file": "{d}/none.crt"},
     'failed to load certificate file "{d}/none.crt": ' + NOFILE),
    ({"client_tls_key_file": "{d}/none.key"},
     'failed to load private key file "{d}/none.key": ' + NOFILE),
    ({"client_tls_key_file": "{d}/server.csr"},
     'failed to load private key file "{d}/server.csr": '
     "error:1E08010C:DECODER routines::unsupported"),
    ({"client_tls_key_file": "{d}/ca.key"}, 'failed to load private key file "{d}/ca.key": '
     "error:05800074:x509 certificate routines::key values mismatch"),
    ({"client_tls_sslmode": "verify-full", "client_tls_ca_file": "{d}/none.crt"},
     "failed to load CA: " + NOFILE),
    ({"client_tls13_ciphers": "NO-SUCH-SUITE"}, "failed to set the TLSv1.3 cipher suites"),
    ({"client_tls_ciphers": "NO-SUCH-CIPHER"}, "invalid client_tls_ciphers: NO-SUCH-CIPHER"),
    ({"server_tls_sslmode": "require", "server_tls13_ciphers": "NO-SUCH-SUITE"},
     "failed to set the TLSv1.3 cipher suites"),
])
def test_tls_setup_errors_in_pgbouncer_words(neki, settings, reason):
    """One line "TLS setup failed: <reason>", the reason in libtls's words (pgbouncer's TLS
    layer) with OpenSSL's first error for a file that does not load."""
    d = make_pki()
    s = {"client_tls_sslmode": "require", "client_tls_key_file": "{d}/server.key",
         "client_tls_cert_file": "{d}/server.crt"}
    s.update(settings)
    out = refused_start(neki, {k: v.format(d=d) for k, v in s.items()})
    assert f"TLS setup failed: {reason.format(d=d)}\n" in out, out
    assert out.count("TLS setup failed") == 1, out


def test_failed_tls_reload_keeps_old_configuration(neki):
    pki = make_pki()
    key = pki / "live.key"
    key.write_bytes((pki / "server.key").read_bytes())
    os.chmod(key, 0o644)
    inst = neki(settings={"workers": 1, "client_tls_sslmode": "require",
                          "client_tls_key_file": str(key),
                          "client_tls_cert_file": str(pki / "server.crt")})
    assert inst.alive()
    # the worker's loop answers only after its start-up (where it loaded the files)
    s, answer = ssl_probe(inst.port)
    s.close()
    assert answer in (b"N", b"S")
    key.write_text("not a key\n")
    inst.reload()
    inst.wait_log(r"TLS configuration could not be reloaded, keeping old configuration")
    assert inst.alive()


# ---------------------------------------------------------------------------------------------
# client TLS through the session (real Postgres behind neki)

def make_client_pki():
    """CA, server certificate for localhost / 127.0.0.1, client certificate CN=postgres."""
    d = make_pki()
    run = lambda cmd: subprocess.run(cmd, shell=True, cwd=str(d), check=True,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (d / "san.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run("openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out server.crt -days 2 -extfile san.cnf")
    run("openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout client.key -out client.csr -subj /CN=postgres")
    run("openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out client.crt -days 2")
    for f in os.listdir(d):
        os.chmod(d / f, 0o644)
    os.chmod(d / "client.key", 0o600)
    return d


def tls_neki(neki, pg, db, pki, **settings):
    s = {"client_tls_sslmode": "require", "client_tls_key_file": str(pki / "server.key"),
         "client_tls_cert_file": str(pki / "server.crt"), "workers": 1}
    s.update(settings)
    line = f"{db} = host=127.0.0.1 port={pg.port('shard-a')} dbname={db}"
    return neki(settings=s, databases=line)


def psql(port, db, sslmode, pki, host="127.0.0.1", cert=False):
    conn = (f"host={host} port={port} dbname={db} user=postgres sslmode={sslmode} "
            f"sslrootcert={pki / 'ca.crt'}")
    if cert:
        conn += f" sslcert={pki / 'client.crt'} sslkey={pki / 'client.key'}"
    else:
        conn += f" sslcert={pki / 'none.crt'} sslkey={pki / 'none.key'}"
    return subprocess.run(["psql", "-X", "-At", conn, "-c", "select 40 + 2"],
                          capture_output=True, text=True, timeout=20)


def test_client_verify_full_and_login_line(pg_cluster, cluster_db, neki):
    pki = make_client_pki()
    n = tls_neki(neki, pg_cluster, cluster_db, pki)
    out = psql(n.port, cluster_db, "verify-full", pki)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
    n.wait_log(rf"login attempt: db={cluster_db} user=postgres tls=TLSv1\.3/TLS_AES_256_GCM_"
               r"SHA384/ECDH=X25519")
    # verify-full against a name the certificate does not carry fails on the client
    out = psql(n.port, cluster_db, "verify-full", pki, host="127.0.0.2")
    assert out.returncode != 0


def test_client_require_refuses_plain(pg_cluster, cluster_db, neki):
    pki = make_client_pki()
    n = tls_neki(neki, pg_cluster, cluster_db, pki)
    out = psql(n.port, cluster_db, "disable", pki)
    assert out.returncode != 0
    assert "SSL required" in out.stderr


def test_client_cert_auth(pg_cluster, cluster_db, neki):
    pki = make_client_pki()
    n = tls_neki(neki, pg_cluster, cluster_db, pki, client_tls_sslmode="verify-full",
                 client_tls_ca_file=str(pki / "ca.crt"), auth_type="cert")
    out = psql(n.port, cluster_db, "verify-full", pki, cert=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
    out = psql(n.port, cluster_db, "verify-full", pki, cert=False)
    assert out.returncode != 0


def direct_tls(port, pki, alpn, db="postgres"):
    """A PG17-style direct TLS client: ClientHello first; returns the first reply type."""
    import socket
    import ssl
    import struct
    ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    if alpn:
        ctx.set_alpn_protocols(alpn)
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        s = ctx.wrap_socket(raw, server_hostname="localhost")
    except (ssl.SSLError, ConnectionError) as e:
        raw.close()
        return f"handshake failed: {e}"
    body = struct.pack("!i", 196608) + b"user\0postgres\0database\0" + db.encode() + b"\0\0"
    try:
        s.sendall(struct.pack("!i", len(body) + 4) + body)
        first = s.recv(1)
    except (ssl.SSLError, ConnectionError, OSError) as e:
        return f"closed: {e}"
    finally:
        s.close()
    return first.decode() if first else "eof"


def test_direct_tls_needs_alpn(pg_cluster, cluster_db, neki):
    pki = make_client_pki()
    n = tls_neki(neki, pg_cluster, cluster_db, pki)
    assert direct_tls(n.port, pki, ["postgresql"], cluster_db) == "R"
    assert direct_tls(n.port, pki, ["http/1.1"]).startswith("handshake failed")
    assert direct_tls(n.port, pki, None) in ("eof",) or \
        direct_tls(n.port, pki, None).startswith("closed")
    n.wait_log(r"received direct SSL connection request without ALPN protocol negotiation "
               r"extension")
