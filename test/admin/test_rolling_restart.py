"""
Rolling restart (issue 4, Operations; doc/operations.md): two neki instances share one port
(so_reuseport), peered through [peers] with pgbouncer's cancel-key encoding; SIGTERM retires
the old one while its clients finish. Real Postgres and psycopg; every wait is a bounded poll.
"""
import signal
import socket
import struct
import threading
import time

import pytest

from conftest import wait_until

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
    common = {"so_reuseport": 1, "workers": 2, "pool_mode": "transaction", "verbose": 1}
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
    # the old Unix socket only takes cancel requests now
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
