"""
Rolling restart (issue 4, Operations; doc/operations.md): two neki instances share one port
(so_reuseport), peered through [peers] with pgbouncer's cancel-key encoding; SIGTERM retires
the old one while its clients finish. Real Postgres and psycopg; every wait is a bounded poll.
"""
import os
import signal
import socket
import struct
import threading
import time

import pytest

from conftest import make_private_dir, wait_until

psycopg = pytest.importorskip("psycopg")


def key_peer(pid):
    """The peer id in a BackendKeyData pid of pgbouncer's peering layout (bytes 1-2, LE)."""
    return ((pid >> 16) & 0xFF) | ((pid >> 8) & 0xFF) << 8


def cancel_request(port, pid, key):
    """Send a raw CancelRequest for pid/key to 127.0.0.1:<port>."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack("!iiII", 16, 80877102, pid, key))
        s.recv(1)   # the server closes without an answer


@pytest.fixture
def pair(neki, pg_cluster, cluster_db):
    """Two neki instances, peer 1 (old) and peer 2 (new), configured for one port; the old
    one started. Returns (old, new)."""
    port = pg_cluster.port("shard-a")
    common = {"so_reuseport": 1, "workers": 2, "pool_mode": "transaction", "verbose": 1,
              "admin_users": "admin"}
    dbs = {"app": f"host=127.0.0.1 port={port} dbname={cluster_db}"}
    old = neki(settings=dict(common, peer_id=1), databases=dbs, start=False)
    new = neki(settings=dict(common, peer_id=2, listen_port=old.port), databases=dbs,
               start=False)
    peers = (f"[peers]\n1 = host={old.sockdir} port={old.port}\n"
             f"2 = host={new.sockdir} port={old.port}\n")
    for inst in (old, new):
        inst.extra = peers
        inst.write_ini()
    old.start()
    return old, new


def test_peering_cancel_key_layout(pair):
    old, _ = pair
    with old.connect(dbname="app") as conn:
        pid = conn.info.backend_pid
        assert key_peer(pid) == 1
        assert pid & 0x80000000 == 0


def test_rolling_restart(pair):
    old, new = pair
    # a long query and an idle client on the old instance
    busy = old.connect(dbname="app")
    idle = old.connect(dbname="app")
    assert key_peer(busy.info.backend_pid) == 1
    result = {}

    def run_long():
        try:
            busy.execute("SELECT pg_sleep(60)")
            result["error"] = None
        except psycopg.Error as e:
            result["error"] = e

    t = threading.Thread(target=run_long)
    t.start()
    wait_until(lambda: "pg_sleep" in str(idle.execute(
        "SELECT array_agg(query) FROM pg_stat_activity WHERE state = 'active'").fetchone()[0]),
        10, what="the long query to run")
    # the new instance comes up on the same port, the old one is told to retire
    new.start()
    old.signal(signal.SIGTERM)
    old.wait_log(r"got SIGTERM, shutting down")
    # the old Unix socket only takes cancel requests now, and console logins (as pgbouncer),
    # once every worker has the master's word (bounded poll: the master logs first)
    with old.connect(dbname="pgbouncer", user="admin", host=str(old.sockdir)) as console:
        assert console.execute("SHOW VERSION").fetchone()[0].startswith("PgBouncer")
        wait_until(lambda: {r[2] for r in console.execute("SHOW WORKERS")} == {"stopping"},
                   10, what="every worker of the old instance stopping")
    with pytest.raises(psycopg.OperationalError, match="the database system is shutting down"):
        old.connect(dbname="app", host=str(old.sockdir))
    # new connections land on the new instance only
    def served_by_new():
        peers = []
        for _ in range(4):
            with new.connect(dbname="app") as c:
                peers.append(key_peer(c.info.backend_pid))
        return peers == [2, 2, 2, 2]

    wait_until(served_by_new, 10, what="new connections served by the new instance")
    # the cancel goes to the shared port, reaches the new instance, is forwarded to peer 1
    started = time.monotonic()
    busy.cancel()
    t.join(20)
    assert not t.is_alive(), "the cancel did not stop the query"
    assert isinstance(result["error"], psycopg.errors.QueryCanceled), result
    assert time.monotonic() - started < 15
    new.wait_log(r"forwarding cancellation request to peer 1")
    # the old instance still serves its clients (nobody is dropped)
    assert busy.execute("SELECT 1").fetchone() == (1,)
    assert idle.execute("SELECT 2").fetchone() == (2,)
    assert old.alive()
    busy.close()
    assert old.alive()
    idle.close()
    # its last client gone, the old instance exits; the new one goes on
    assert old.wait_exit(10) == 0
    with new.connect(dbname="app") as conn:
        assert conn.execute("SELECT 3").fetchone() == (3,)


def test_cancel_ttl_and_unknown_peer(pair):
    old, _ = pair
    with old.connect(dbname="app") as conn:
        pid = conn.info.backend_pid
    # a key naming peer 7 (not in [peers]) and one whose TTL is spent are dropped, logged
    cancel_request(old.port, (pid & 0xFF0000FF) | 7 << 16, 0x1234567B)
    old.wait_log(r"could not find peer to forward request to \(peer_id 7\)")
    cancel_request(old.port, (pid & 0xFF0000FF) | 2 << 16, 0x12345678)
    old.wait_log(r"failed to forward cancel request because its TTL was exhausted")


class HoldingPeer:
    """A fake [peers] entry on a Unix socket: accepts cancel forwards, records each request and
    keeps the connection open until release() (a real peer closes once it has read it)."""

    def __init__(self, sockdir, port):
        self.path = f"{sockdir}/.s.PGSQL.{port}"
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        os.chmod(self.path, 0o777)
        self.sock.listen(16)
        self.sock.settimeout(5)
        self.held = []
        self.got = []

    def accept(self):
        conn, _ = self.sock.accept()
        conn.settimeout(5)
        data = b""
        while len(data) < 16:
            data += conn.recv(16 - len(data))
        self.got.append(struct.unpack("!iiII", data))
        self.held.append(conn)

    def release(self):
        self.held.pop(0).close()

    def close(self):
        for c in self.held:
            c.close()
        self.sock.close()


def peered(neki, peer_host, peer_port, **settings):
    """A one-worker neki with peer_id 2 whose [peers] entry 1 (pool_size=1) is at
    <peer_host>:<peer_port>, started; and a function returning its SHOW PEER_POOLS rows."""
    inst = neki(settings={"workers": 1, "peer_id": 2, "admin_users": "admin", **settings},
                start=False)
    inst.extra = f"[peers]\n1 = host={peer_host} port={peer_port} pool_size=1\n"
    inst.write_ini()
    inst.start()

    def peer_pools():
        with inst.admin_connect(dbname="pgbouncer", user="admin") as c:
            return c.execute("SHOW PEER_POOLS").fetchall()
    return inst, peer_pools


def test_peer_cancel_forwards_queue_beyond_pool_size(neki):
    """[peers] pool_size bounds the forwards in flight to a peer; the others wait in order
    (nothing is dropped) and SHOW PEER_POOLS shows them as pgbouncer counts them."""
    sockdir = make_private_dir("peer.")
    peer = HoldingPeer(sockdir, 7432)
    inst, peer_pools = peered(neki, sockdir, 7432)
    try:
        keys = [(0x00010000 | i << 24, 0x1234560B + (i << 4)) for i in (1, 2, 3)]
        for pid, key in keys:                       # peer 1's keys, TTL 3
            cancel_request(inst.port, pid, key)
        peer.accept()                               # the first one is forwarded at once
        wait_until(lambda: peer_pools() == [(1, 1, 2, 1, 0)], 5,
                   what="one forward in flight, two waiting")
        for n in (2, 3):                            # each close lets the next one go
            peer.release()
            peer.accept()
            wait_until(lambda: peer_pools() == [(1, 1, 3 - n, 1, 0)], 5,
                       what=f"forward {n} in flight")
        peer.release()
        wait_until(lambda: peer_pools() == [(1, 0, 0, 0, 0)], 5, what="all forwards done")
        # in arrival order, TTL decreased by one
        assert peer.got == [(16, 80877102, pid, key - 1) for pid, key in keys]
    finally:
        peer.close()


def test_cancel_wait_timeout_drops_forwards_that_cannot_be_sent(neki):
    """cancel_wait_timeout bounds how long a cancel may wait to be sent, as pgbouncer's: a
    forward whose connect to the peer hangs (its listen queue is full) and the one queued
    behind it (pool_size=1) are both dropped once it has passed, not after neki's own
    connect bound."""
    timeout = 1
    hang = socket.socket()
    hang.bind(("127.0.0.1", 0))
    hang.listen(0)
    filler = socket.create_connection(hang.getsockname(), timeout=5)   # fills the queue
    inst, peer_pools = peered(neki, "127.0.0.1", hang.getsockname()[1],
                              cancel_wait_timeout=timeout)
    try:
        t0 = time.monotonic()
        for i in (1, 2):                            # peer 1's keys, TTL 3
            cancel_request(inst.port, 0x00010000 | i << 24, 0x1234560B + (i << 4))
        wait_until(lambda: peer_pools() == [(1, 1, 1, 0, 1)], 5,
                   what="one forward connecting, one waiting")
        wait_until(lambda: peer_pools() == [(1, 0, 0, 0, 0)], timeout + 2,
                   what="both forwards dropped")
        assert time.monotonic() - t0 >= timeout * 0.9
        inst.wait_log(r"cancel request to peer 1 dropped: cancel_wait_timeout")
    finally:
        filler.close()
        hang.close()
