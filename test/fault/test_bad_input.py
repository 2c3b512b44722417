"""Bad input from clients: truncated, oversized and garbage messages, during a pgbench run.

neki must answer each broken client with an ErrorResponse (FATAL, 08P01) where the protocol
allows one, close only that client, stay up (no worker restart), and the concurrent pgbench
run must lose nothing."""
import os
import random
import re
import struct
import subprocess
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, errors_in  # noqa: E402


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
    # startup packet longer than Postgres allows: closed without a reply, as Postgres does
    w = Wire(port)
    w.raw(struct.pack("!II", 20000, 196608))
    assert w.read_all() == []
    # startup packet length below its minimum
    w = Wire(port)
    w.raw(struct.pack("!II", 4, 196608))
    w.read_all()
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
