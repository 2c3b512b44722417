"""
TLS settings in the process model (net/tls.c through main.c, worker/child.c, worker/reload.c):
a start-up with TLS settings that cannot be honoured is refused before binding, workers build
their contexts at start, and a RELOAD whose new key file is broken keeps the old pair with
pgbouncer's log line. Certificates come from the `openssl` command in a private directory.
"""
import os
import subprocess

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


def test_missing_client_tls_files_refuse_to_start(neki):
    inst = neki(settings={"client_tls_sslmode": "require"}, start=False)
    inst.start(wait=False)
    assert inst.proc.wait(5) == 1
    assert ("TLS setup failed: client_tls_sslmode requires client_tls_key_file and "
            "client_tls_cert_file") in inst.output()
    assert not port_accepts(inst.port)


def test_bad_protocols_refuse_to_start(neki):
    inst = neki(settings={"server_tls_protocols": "tlsv9"}, start=False)
    inst.start(wait=False)
    assert inst.proc.wait(5) == 1
    assert 'TLS setup failed: invalid server_tls_protocols: "tlsv9"' in inst.output()


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
