"""
Helpers of the fault tests (test/fault/test_kill.py, test_revisions.py, test_shard_faults.py):
a sharded database with one table `ledger (id bigint primary key, who int, note text)`
sharded by id over the cluster's four data shards (authority on `auth`), clients that record
every commit neki acknowledged, and the worker process that serves a given connection.
"""
import contextlib
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "routing"))
from test_routing import Store, routing_neki, sharded_database  # noqa: E402,F401

try:
    import psycopg
except ImportError:
    psycopg = None

LEDGER = "CREATE TABLE ledger (id bigint PRIMARY KEY, who int NOT NULL, note text)"
DATA_SHARDS = ("shard-a", "shard-b", "shard-c", "shard-d")


def ledger_topology(db, shards=DATA_SHARDS, extra_tables=()):
    """ledger sharded by id (xxhash) over <shards>; <extra_tables> are declared too (sharded
    by id), whether they exist or not."""
    n = len(shards)
    bounds = [None] + [format(i * 256 // n, "02x") for i in range(1, n)] + [None]
    ranges = []
    for i, uid in enumerate(shards):
        r = {"shard_uid": uid}
        if bounds[i]:
            r["start"] = bounds[i]
        if bounds[i + 1]:
            r["end"] = bounds[i + 1]
        ranges.append(r)
    tables = {t: {"shard_group": "data"} for t in ("ledger", *extra_tables)}
    return {
        "databases": {db: {"schemas": {"public": {"tables": tables}}}},
        "shard_groups": [{"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
                         {"uid": "data", "default_shard_index": "by_id", "key_ranges": ranges}],
        "shard_indexes": {"by_id": {"type": "xxhash", "columns": ["id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


@contextlib.contextmanager
def ledger_neki(cluster, prefix, settings=None, shards=DATA_SHARDS):
    """A sharded database <prefix>_<pid> with `ledger` created through neki (every shard),
    and the neki routing it: yields the Store."""
    with sharded_database(cluster, prefix) as db, \
            routing_neki(cluster, db, ledger_topology(db, shards), Store,
                         settings=settings) as st:
        st.run(LEDGER)
        yield st


def ledger_ids(st, servers=DATA_SHARDS):
    """Every id of ledger on the data shards, read directly: {id: server}."""
    out = {}
    for s in servers:
        for (i,) in st.cluster.sql(s, "SELECT id FROM ledger", dbname=st.db):
            assert i not in out, f"id {i} on {out[i]} and {s}"
            out[i] = s
    return out


def socket_inodes(pid):
    """The inodes of the sockets process <pid> holds."""
    out = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                m = re.fullmatch(r"socket:\[(\d+)\]", os.readlink(f"/proc/{pid}/fd/{fd}"))
            except OSError:
                continue
            if m:
                out.add(int(m.group(1)))
    except OSError:
        pass
    return out


def tcp_inode(local_port, remote_port):
    """The inode of the TCP socket 127.0.0.1:<local_port> <-> 127.0.0.1:<remote_port>."""
    want = f"0100007F:{local_port:04X} 0100007F:{remote_port:04X}"
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        f = line.split()
        if f"{f[1]} {f[2]}" == want:
            return int(f[9])
    return None


def worker_of(inst, conn):
    """The pid of the neki worker that serves the psycopg connection <conn> (the process
    holding the accepted end of its TCP socket)."""
    import socket
    sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
    try:
        client_port = sock.getsockname()[1]
    finally:
        sock.close()
    inode = tcp_inode(inst.port, client_port)
    assert inode is not None, "no accepted socket for the client"
    owners = [p for p in inst.children() if inode in socket_inodes(p)]
    assert len(owners) == 1, owners
    return owners[0]


class Recorder(threading.Thread):
    """A client that INSERTs ledger rows (autocommit: each INSERT is a commit) on one
    connection until stopped and records every id whose INSERT neki acknowledged. An error
    is recorded and the client connects again (at most <reconnects> times)."""

    def __init__(self, st, who, reconnects=20):
        super().__init__(daemon=True)
        self.st, self.who, self.reconnects = st, who, reconnects
        self.committed, self.errors, self.in_doubt = [], [], []
        self.stop = threading.Event()
        self.conn = st.connect()
        self.started_ok = threading.Event()

    def run(self):
        seq = 0
        while not self.stop.is_set():
            seq += 1
            rid = self.who * 10_000_000 + seq
            try:
                self.conn.execute("INSERT INTO ledger VALUES (%s, %s, 'r')", (rid, self.who))
                self.committed.append(rid)
                self.started_ok.set()
            except psycopg.Error as e:
                self.in_doubt.append(rid)
                self.errors.append((time.monotonic(), e))
                self.reconnect()

    def reconnect(self):
        with contextlib.suppress(Exception):
            self.conn.close()
        while not self.stop.is_set() and self.reconnects > 0:
            self.reconnects -= 1
            try:
                self.conn = self.st.connect()
                return
            except psycopg.Error as e:
                self.errors.append((time.monotonic(), e))
                self.stop.wait(0.05)

    def finish(self):
        self.stop.set()
        self.join(30)
        with contextlib.suppress(Exception):
            self.conn.close()


def wait_committing(recorders, timeout=10):
    """Until every recorder has had a commit acknowledged."""
    deadline = time.monotonic() + timeout
    for r in recorders:
        assert r.started_ok.wait(max(0.0, deadline - time.monotonic())), \
            f"client {r.who} committed nothing: {r.errors[:3]}"


def pgbench(port, db, script, clients=4, seconds=None, count=None, extra=()):
    """A pgbench process (not waited for) running <script> (text) through <port>."""
    d = Path(os.environ.get("TMPDIR", "/tmp"))
    path = d / f"faults-{os.getpid()}-{time.monotonic_ns()}.sql"
    path.write_text(script)
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-n",
           "-c", str(clients), "-j", "2", "-f", str(path), *extra, db]
    cmd[-1:-1] = ["-T", str(seconds)] if count is None else ["-t", str(count)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.script_path = path
    return proc


def pgbench_result(proc, timeout=120):
    """(returncode, transactions processed, failed transactions, output) of a pgbench."""
    out, err = proc.communicate(timeout=timeout)
    proc.script_path.unlink(missing_ok=True)
    done = re.search(r"number of transactions actually processed: (\d+)", out)
    failed = re.search(r"number of failed transactions: (\d+)", out)
    return (proc.returncode, int(done.group(1)) if done else 0,
            int(failed.group(1)) if failed else 0, out + err)


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of one server, owned by the test. <mode>:
    "pass" relays both ways, "stall" accepts and never answers (nor reads), "drop" accepts
    and closes at once, "reset" accepts and resets the connection (RST). freeze() stops the
    relaying of connections already open (bytes are held, nothing is closed). Every socket
    is closed by close()."""

    def __init__(self, target_port, mode="pass"):
        import socket
        self.target_port, self.mode = target_port, mode
        self.frozen = threading.Event()
        self.lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(64)
        self.lsock.settimeout(0.1)
        self.port = self.lsock.getsockname()[1]
        self.socks, self.lock = [], threading.Lock()
        self.accepted = 0
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self.accept_loop, daemon=True)
        self.thread.start()

    def keep(self, s):
        with self.lock:
            self.socks.append(s)
        return s

    def accept_loop(self):
        import socket
        import struct
        while not self.closing.is_set():
            try:
                c, _ = self.lsock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted += 1
            if self.mode == "drop":
                c.close()
            elif self.mode == "reset":
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()
            elif self.mode == "stall":
                self.keep(c)
            else:
                try:
                    s = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    c.close()
                    continue
                self.keep(c)
                self.keep(s)
                for a, b in ((c, s), (s, c)):
                    threading.Thread(target=self.relay, args=(a, b), daemon=True).start()

    def relay(self, src, dst):
        import socket
        src.settimeout(0.1)
        while not self.closing.is_set():
            if self.frozen.is_set():
                self.closing.wait(0.1)
                continue
            try:
                data = src.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            while self.frozen.is_set() and not self.closing.is_set():
                self.closing.wait(0.1)      # (read before the freeze: held too)
            try:
                dst.sendall(data)
            except OSError:
                return

    def freeze(self):
        self.frozen.set()

    def close(self):
        self.closing.set()
        self.thread.join(5)
        self.lsock.close()
        with self.lock:
            for s in self.socks:
                with contextlib.suppress(OSError):
                    s.close()


class ProxiedShard:
    """The cluster, with one shard's [shards] entry pointing at a FaultProxy's port."""

    def __init__(self, cluster, victim, proxy):
        self.cluster, self.victim, self.proxy = cluster, victim, proxy

    def __getattr__(self, name):
        return getattr(self.cluster, name)

    def shards_section(self, dbname=None, **extra):
        real = f"port={self.cluster.port(self.victim)}"
        return "\n".join(line.replace(real, f"port={self.proxy.port}")
                         if line.startswith(self.victim + " ") else line
                         for line in self.cluster.shards_section(dbname, **extra).splitlines())


def ids_by_shard(st, n=200):
    """{shard: [ids of 1..n that the router sends there]} (EXPLAIN (NEKI_PLAN) per id)."""
    out = {}
    with st.connect() as conn:
        for i in range(1, n + 1):
            rows = conn.execute("EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                                f"SELECT * FROM ledger WHERE id = {i}").fetchall()
            found = [s for s in DATA_SHARDS if any(s in r[0] for r in rows)]
            assert len(found) == 1, rows
            out.setdefault(found[0], []).append(i)
    return out
