"""
DNS (issue 4, "DNS"): a [databases] host name resolved by c-ares from a test-owned hosts file
(CARES_HOSTS), shown by SHOW DNS_HOSTS / DNS_ZONES; when the name's address changes, idle links
to the gone address close at once ("database configuration changed"), busy ones at their release, and
new links use the new address.
"""
import os
import socket
import threading

import pytest

from conftest import wait_until

NAME = "neki-dns-db.test"
NEW_IP = "127.0.0.2"


class Forwarder:
    """TCP relay NEW_IP:port -> 127.0.0.1:port (the cluster listens on 127.0.0.1 only)."""

    def __init__(self, port):
        self.port = port
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((NEW_IP, port))
        self.lsock.listen(16)
        self.socks = [self.lsock]
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.port))
            self.socks += [c, s]
            threading.Thread(target=self._pump, args=(c, s), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.closed = True
        for s in self.socks:
            try:
                s.close()
            except OSError:
                pass


def show(inst, what):
    with inst.admin_connect(dbname="pgbouncer", user="admin") as conn:
        cur = conn.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def server_addrs(inst, db):
    return sorted(r["addr"] for r in show(inst, "SERVERS") if r["database"] == db)


def test_dns_hosts_and_address_change(pg_cluster, cluster_db, neki, monkeypatch):
    port = pg_cluster.port("shard-a")
    db = f"host={NAME} port={port} dbname={cluster_db}"
    n = neki(settings={"workers": 1, "admin_users": "admin", "dns_max_ttl": 1},
             databases=f"a = {db}\nb = {db}\n", start=False)
    hosts_file = n.dir / "hosts"           # in the instance dir: readable by neki's user
    hosts_file.write_text(f"127.0.0.1 {NAME}\n")
    hosts_file.chmod(0o644)
    monkeypatch.setenv("CARES_HOSTS", str(hosts_file))
    n.start()
    c1, c2 = n.connect(dbname="a"), n.connect(dbname="a")      # two links of a
    for c in (c1, c2):
        c.execute("select 1")
    c1.close()                                                 # one idle, one busy
    wait_until(lambda: sorted(r["state"] for r in show(n, "SERVERS") if r["database"] == "a")
               == ["active", "idle"], 5, what="a: one idle and one active link")
    assert server_addrs(n, "a") == ["127.0.0.1", "127.0.0.1"]
    hosts = show(n, "DNS_HOSTS")
    assert [(h["hostname"], h["addrs"]) for h in hosts] == [(NAME, "127.0.0.1")]
    assert 0 <= hosts[0]["ttl"] <= 1
    assert [(z["zonename"], z["count"]) for z in show(n, "DNS_ZONES")] == [("test", 1)]

    fwd = Forwarder(port)
    try:
        hosts_file.write_text(f"{NEW_IP} {NAME}\n")

        def b_uses_new_address():
            # a fresh link of b resolves the name (once the 1 s TTL ran out)
            with n.admin_connect(dbname="pgbouncer", user="admin") as adm:
                adm.execute("RECONNECT b")
            with n.connect(dbname="b") as cb:
                cb.execute("select 1")
            return server_addrs(n, "b") == [NEW_IP]

        wait_until(b_uses_new_address, 10, interval=0.2, what="b's new link at the new address")
        n.wait_log(f'DNS: address 127.0.0.1 of host "{NAME}" is gone')
        # the idle link to the gone address closed at once, the busy one still works
        wait_until(lambda: server_addrs(n, "a") == ["127.0.0.1"], 5,
                   what="a's idle link to the gone address closed")
        n.wait_log("closing because: database configuration changed")
        assert c2.execute("select 2").fetchone() == (2,)
        c2.close()                                             # released: closed too
        wait_until(lambda: server_addrs(n, "a") == [], 5, what="a's busy link closed at release")
        with n.connect(dbname="a") as c3:                      # new links: the new address
            assert c3.execute("select 3").fetchone() == (3,)
        assert server_addrs(n, "a") == [NEW_IP]
        assert [(h["hostname"], h["addrs"]) for h in show(n, "DNS_HOSTS")] == [(NAME, NEW_IP)]
    finally:
        fwd.close()
        for c in (c1, c2):
            c.close()
