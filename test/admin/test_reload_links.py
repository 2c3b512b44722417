"""
RELOAD and server links (issue 4, TLS): new server-side TLS settings replace every server
link (as RECONNECT), a reload that changes nothing keeps them; the client stays connected.
Real Postgres with TLS on (the test cluster); every wait is a bounded poll.
"""
import pytest

from conftest import wait_until

psycopg = pytest.importorskip("psycopg")

SSL_Q = "SELECT version, pg_backend_pid() FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def test_server_tls_change_reconnects_links(neki, pg_cluster, cluster_db):
    port = pg_cluster.port("shard-a")
    inst = neki(settings={"workers": 1, "pool_mode": "transaction", "default_pool_size": 1,
                          "server_tls_sslmode": "require", "server_tls_protocols": "all"},
                databases={"app": f"host=127.0.0.1 port={port} dbname={cluster_db}"})
    with inst.connect(dbname="app") as conn:
        version, pid = conn.execute(SSL_Q).fetchone()
        assert version == "TLSv1.3"
        # a reload that changes nothing keeps the link
        inst.reload()
        inst.wait_log(r"configuration reloaded in every process")
        assert conn.execute(SSL_Q).fetchone() == (version, pid)
        # new server TLS settings: the link is replaced, the client stays
        inst.update({"server_tls_protocols": "tlsv1.2"})
        inst.reload()
        inst.wait_log(r"server TLS settings changed: reconnecting every server link")
        wait_until(lambda: conn.execute(SSL_Q).fetchone()[0] == "TLSv1.2", 10,
                   what="a TLSv1.2 link")
        assert conn.execute(SSL_Q).fetchone()[1] != pid
