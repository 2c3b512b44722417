"""
The online restart, `neki -R` (pgbouncer's takeover, PGBOUNCER-INTERFACE.md 3.5), on the
pgbouncer-style test bed (pgbcompat.py): a second neki started with -R on the same ini logs
in to the running one's console over the Unix socket, SUSPENDs it, takes every socket with
SHOW FDS (descriptors passed with each row), SHUTDOWNs it and goes on. Clients idle and
clients in the middle of a query continue without errors, with one worker and with two, in
transaction and session pooling; an open transaction stays open; a SCRAM client's pool
still logs in; cancel keys still reach their query; TLS clients cannot move and get a FATAL
saying why; SHOW FDS itself passes one descriptor per row on the local admin's console.
"""
import array
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import pid_alive, wait_until
from pgbcompat import Bouncer, as_neki_uid, pgb_pg  # noqa: F401 (fixture)

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "fault"))
from test_tls_config import make_client_pki  # noqa: E402

try:
    import psycopg
except ImportError:
    psycopg = None

PHRASES = ["Online restart is deprecated", "takeover_init: launching connection",
           "login OK, sending SUSPEND", "SUSPEND finished, sending SHOW FDS",
           "SHOW FDS finished", "sending SHUTDOWN;", "waiting for old pidfile to go away",
           "old process killed, resuming work"]


def start(neki, pg, workers, pool_mode="transaction", extra=""):
    """neki on the pgbouncer-style ini with <workers> workers, <pool_mode> and a pidfile (the
    new process waits for the old one's to go)."""
    inst = neki(start=False)
    inst.admin_port = 0
    b = Bouncer(inst, pg)
    b.write_base()
    # server_tls_sslmode: a TLS server connection cannot move either (no kernel TLS)
    b.write_ini(f"workers = {workers}\npool_mode = {pool_mode}\npidfile = {inst.pidfile}\n"
                "server_tls_sslmode = disable\n" + extra)
    b.default_db = "p1"     # forced user bouncer, pool_size 5
    b.start()
    return b


def reboot(b, timeout=30):
    """Start `neki -R` on the same ini and wait until it has taken over: the old master is
    gone, the new one logged that it resumes and its console answers."""
    old, old_proc = b.inst.pid, b.inst.proc
    b.inst.remember_pids()
    out = open(b.inst.stdout_file, "ab")
    try:
        proc = subprocess.Popen(b.inst.command("-R", "--quiet"), stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, cwd=str(b.inst.dir),
                                start_new_session=True)
    finally:
        out.close()
    b.inst.proc, b.inst.pid = proc, proc.pid
    b.inst._seen.add(proc.pid)
    old_proc.wait(timeout)
    wait_until(lambda: "old process killed, resuming work" in b.log(), timeout,
               what="the new process to resume")
    assert not pid_alive(old)
    b.wait_until_running()
    return proc


class Sleeper(threading.Thread):
    """A client that runs `SELECT pg_sleep(<secs>)` on its own connection (opened now)."""

    def __init__(self, b, secs, **kw):
        super().__init__()
        self.conn = b.conn(**kw)
        self.secs, self.result, self.error = secs, None, None
        self.started = threading.Event()

    def run(self):
        try:
            self.started.set()
            self.result = self.conn.execute(f"SELECT pg_sleep({self.secs}), 42").fetchone()[1]
        except Exception as e:      # the test reports it
            self.error = e


SERVER = "shard-a"


def wait_running(b, n):
    """Until <n> queries run on the server (pg_sleep)."""
    q = "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"
    wait_until(lambda: b.pg.sql(SERVER, q)[0][0] >= n, 10, what=f"{n} sleeping queries")


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("pool_mode", ["transaction", "session"])
def test_idle_and_busy_clients_survive(neki, pgb_pg, workers, pool_mode):
    b = start(neki, pgb_pg, workers, pool_mode)
    idle = [b.conn() for _ in range(2)]   # with 3 busy: pool_size 5 in session mode
    for c in idle:
        assert c.execute("SELECT 1").fetchone() == (1,)
    busy = [Sleeper(b, 2) for _ in range(3)]
    for t in busy:
        t.start()
    wait_running(b, 3)
    reboot(b)
    for t in busy:
        t.join(20)
        assert t.error is None and t.result == 42
    for c in idle:
        assert c.execute("SELECT 2").fetchone() == (2,)
        c.close()
    for t in busy:
        assert t.conn.execute("SELECT 3").fetchone() == (3,)
        t.conn.close()
    assert b.test() == [(1,)]
    log = b.log()
    for p in PHRASES:
        assert p in log, p


def test_open_transaction_continues(neki, pgb_pg):
    """A client inside a transaction keeps it, on the same server backend: what it wrote
    before the restart is there after it, and COMMIT ends it."""
    b = start(neki, pgb_pg, 2)
    c = b.conn(autocommit=False)
    pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
    c.execute("CREATE TEMP TABLE takeover_t (x int) ON COMMIT DROP")
    c.execute("INSERT INTO takeover_t VALUES (1)")
    reboot(b)
    c.execute("INSERT INTO takeover_t VALUES (2)")
    assert c.execute("SELECT count(*), pg_backend_pid() FROM takeover_t").fetchone() == (2, pid)
    assert c.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    c.commit()
    c.autocommit = True
    assert c.execute("SELECT to_regclass('pg_temp.takeover_t') IS NULL").fetchone() == (True,)
    c.close()


def key_slot(conn):
    """The worker slot + 1 neki encoded in a client's BackendKeyData pid."""
    return conn.info.backend_pid >> 20


def test_cancel_reaches_the_query_after_restart(neki, pgb_pg):
    """A cancel key names the worker that had the client; after a restart with fewer workers
    the client is in the worker that number maps to, and a CancelRequest sent to any worker
    still stops its query (the server's own key travelled in the SHOW FDS row)."""
    b = start(neki, pgb_pg, 2)
    conns = []

    def client_of_worker_1():	# (the others closed: max_client_conn is 10, and a worker
        c = b.conn()		# still starting under load takes no client for a while)
        if key_slot(c) == 2:
            conns.append(c)
            return True
        c.close()
        return False

    wait_until(client_of_worker_1, 10, what="a client of worker 1")
    victim = conns[0]
    busy = threading.Thread(target=lambda: setattr(busy, "error", run_sleep(victim)))
    busy.start()
    wait_running(b, 1)
    b.write_ini("workers = 1")
    reboot(b)
    victim.cancel()
    busy.join(10)
    assert not busy.is_alive()
    assert isinstance(busy.error, psycopg.errors.QueryCanceled), busy.error
    assert victim.execute("SELECT 1").fetchone() == (1,)
    for c in conns:
        c.close()


def run_sleep(conn):
    try:
        conn.execute("SELECT pg_sleep(30)")
    except psycopg.Error as e:
        return e
    return None


def test_scram_client_pool_logs_in_again(neki, pgb_pg):
    """A SCRAM-authenticated client's pool logs in with the client's SCRAM keys (the auth_file
    holds only a SCRAM secret): the keys travel in the SHOW FDS rows, so the new process's
    pool can still open links for it."""
    b = start(neki, pgb_pg, 1, extra="auth_type = scram-sha-256\n")
    c = b.conn(dbname="p62", user="scramuser1", password="foo")
    assert c.execute("SELECT current_user").fetchone() == ("scramuser1",)
    reboot(b)
    b.admin("RECONNECT p62")    # the links close: the next query needs a new login
    wait_until(lambda: b.connection_count("p6", users=("scramuser1",)) == 0, 10,
               what="the old links of p62 to close")
    assert c.execute("SELECT current_user").fetchone() == ("scramuser1",)
    c.close()


def test_tls_client_is_closed_with_the_reason(neki, pgb_pg):
    """A TLS client cannot move (no kernel TLS): the old process closes it with a FATAL that
    says so and logs it, while a plain client goes on in the new process."""
    pki = make_client_pki()
    b = start(neki, pgb_pg, 1, extra=f"client_tls_sslmode = allow\n"
                                      f"client_tls_key_file = {pki / 'server.key'}\n"
                                      f"client_tls_cert_file = {pki / 'server.crt'}\n")
    tls = b.conn(sslmode="require")
    assert tls.pgconn.ssl_in_use
    plain = b.conn(sslmode="disable")
    reboot(b)
    with pytest.raises(psycopg.OperationalError) as e:
        tls.execute("SELECT 1")
    assert "terminating connection for the online restart" in str(e.value)
    assert "TLS connections cannot be handed over without kernel TLS" in str(e.value)
    assert "online restart: closing the connection: TLS connections cannot be handed over" \
        in b.log()
    assert plain.execute("SELECT 1").fetchone() == (1,)
    with b.conn(sslmode="require") as again:     # the new process accepts TLS as usual
        assert again.execute("SELECT 1").fetchone() == (1,)
    plain.close()


def test_sigterm_during_takeover_dies_and_old_one_resumes(neki, pgb_pg):
    """SIGTERM while the new process waits for SUSPEND (a client still logging in holds it
    up) ends the new process at once; the old one resumes when its console session goes."""
    b = start(neki, pgb_pg, 1)
    idle = b.conn()
    half = socket.create_connection(("127.0.0.1", b.port))     # no startup packet: not at rest
    out = open(b.inst.stdout_file, "ab")
    proc = subprocess.Popen(b.inst.command("-R", "--quiet"), stdin=subprocess.DEVNULL,
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    out.close()
    try:
        wait_until(lambda: "login OK, sending SUSPEND" in b.log(), 10, what="the takeover")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(5) == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    wait_until(lambda: "takeover was in progress, going down immediately" in b.log(), 5,
               what="the new process's last line")
    wait_until(lambda: "went away: resuming" in b.log(), 5, what="the old process to resume")
    assert b.inst.alive()
    assert idle.execute("SELECT 1").fetchone() == (1,)
    half.close()
    idle.close()


def test_sigterm_while_suspended_exits_at_once(neki, pgb_pg):
    b = start(neki, pgb_pg, 2)
    with b.admin_conn() as console:
        console.execute("SUSPEND")
        b.inst.signal(signal.SIGTERM)
        b.inst.wait_exit(5)
    assert "suspend was in progress, going down immediately" in b.log()


class RawConsole:
    """A console session as the local user pgbouncer on the Unix socket that receives the
    descriptors SHOW FDS sends with its rows (SCM_RIGHTS), as a new pgbouncer would."""

    def __init__(self, b):
        with as_neki_uid():
            self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.s.connect(f"{b.admin_host}/.s.PGSQL.{b.port}")
        body = struct.pack("!I", 196608) + b"user\0pgbouncer\0database\0pgbouncer\0\0"
        self.s.sendall(struct.pack("!I", len(body) + 4) + body)
        self.buf, self.fds = b"", []
        while self.message()[0] != b"Z":
            pass

    def message(self):
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!I", self.buf[1:5])[0]:
            data, anc, _, _ = self.s.recvmsg(65536, socket.CMSG_SPACE(16 * 4))
            assert data, "the console closed the connection"
            for level, kind, fds in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    a = array.array("i")
                    a.frombytes(fds[:len(fds) - len(fds) % a.itemsize])
                    self.fds += list(a)
            self.buf += data
        n = struct.unpack("!I", self.buf[1:5])[0]
        msg, self.buf = self.buf[:1 + n], self.buf[1 + n:]
        return msg[:1], msg[5:]

    def show_fds(self):
        """The rows (lists of text or None) of SHOW FDS, each with the descriptor it brought."""
        q = b"SHOW FDS;\0"
        self.s.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)
        rows = []
        while True:
            kind, body = self.message()
            if kind == b"D":
                rows.append(parse_row(body))
            elif kind == b"E":
                raise AssertionError(body)
            elif kind == b"Z":
                return rows, self.fds

    def close(self):
        self.s.close()


def parse_row(body):
    n, pos, vals = struct.unpack("!H", body[:2])[0], 2, []
    for _ in range(n):
        ln = struct.unpack("!i", body[pos:pos + 4])[0]
        pos += 4
        vals.append(None if ln < 0 else body[pos:pos + ln].decode())
        pos += max(ln, 0)
    return vals


def test_show_fds_passes_a_descriptor_per_row(neki, pgb_pg):
    """SHOW FDS on the local admin's console brings one descriptor per row, in row order, from
    every worker: the listeners (pooler), each client and its server connection (link pairs
    the rows), idle server connections; fd numbers are unique. Without SUSPEND it is only a
    look: the clients go on in this process."""
    b = start(neki, pgb_pg, 2)
    clients = [b.conn() for _ in range(4)]
    in_tx = b.conn(autocommit=False)
    in_tx.execute("SELECT 1")
    console = RawConsole(b)
    rows, fds = console.show_fds()
    console.close()
    try:
        assert len(fds) == len(rows)
        by_fd = {int(r[0]): (r, fd) for r, fd in zip(rows, fds)}
        assert len(by_fd) == len(rows)
        tasks = [r[1] for r in rows]
        # the main port on TCP and its Unix socket (and the admin port when 6433 was free)
        poolers = [(r[4], int(r[5])) for r in rows if r[1] == "pooler"]
        assert ("unix", b.port) in poolers and ("127.0.0.1", b.port) in poolers
        assert tasks.count("client") == 5
        for r, fd in zip(rows, fds):
            sock = socket.socket(fileno=os.dup(fd))
            if r[1] == "client":
                assert sock.getsockname()[1] == b.port and r[2] == "postgres" and r[3] == "p1"
            elif r[1] == "server":
                assert sock.getpeername()[1] == b.pg.port(SERVER) and r[2] == "bouncer"
            sock.close()
        tx_row = [r for r in rows if r[1] == "client" and r[7] != "0"]
        assert len(tx_row) == 1
        linked = by_fd[int(tx_row[0][7])][0]
        assert linked[1] == "server" and linked[7] == tx_row[0][0]
    finally:
        for fd in fds:
            os.close(fd)
    for c in clients + [in_tx]:
        assert c.execute("SELECT 1").fetchone() == (1,)
        c.close()


class RawClient:
    """A plain protocol client over TCP (trust), to pipeline simple queries."""

    def __init__(self, b, dbname="p1", user="postgres"):
        self.s = socket.create_connection(("127.0.0.1", b.port), timeout=20)
        body = struct.pack("!I", 196608) + f"user\0{user}\0database\0{dbname}\0\0".encode()
        self.s.sendall(struct.pack("!I", len(body) + 4) + body)
        self.buf = b""
        while self.message()[0] != b"Z":
            pass

    def message(self):
        while len(self.buf) < 5 or len(self.buf) < 1 + struct.unpack("!I", self.buf[1:5])[0]:
            data = self.s.recv(65536)
            assert data, "neki closed the connection"
            self.buf += data
        n = struct.unpack("!I", self.buf[1:5])[0]
        msg, self.buf = self.buf[:1 + n], self.buf[1 + n:]
        return msg[:1], msg[5:]

    def send_query(self, sql):
        q = sql.encode() + b"\0"
        self.s.sendall(b"Q" + struct.pack("!I", len(q) + 4) + q)

    def results(self):
        """The first column of every DataRow up to the next ReadyForQuery."""
        out = []
        while True:
            kind, body = self.message()
            if kind == b"D":
                out.append(parse_row(body)[0])
            elif kind == b"E":
                raise AssertionError(body)
            elif kind == b"Z":
                return out


def test_query_sent_while_one_runs_across_restart(neki, pgb_pg):
    """A client whose query runs during the restart sends the next one before the first
    answer came: the new process does not know how many answers the server still owes, so
    its fence (an empty query of its own) tells which ReadyForQuery ends what: both answers
    reach the client, in order, and the link stays usable."""
    b = start(neki, pgb_pg, 1)
    c = RawClient(b)
    c.send_query("SELECT pg_sleep(4), 'first'")
    wait_running(b, 1)
    reboot(b)
    wait_running(b, 1)      # still running: the second query goes out before its answer
    c.send_query("SELECT 'second', pg_sleep(0.5)")    # its answer comes well after the first
    assert c.results() == [""]           # pg_sleep's void, the first row's first column
    assert c.results() == ["second"]
    c.send_query("SELECT 'third'")
    assert c.results() == ["third"]
    c.s.close()


def test_prepared_statements_after_restart_do_not_collide(neki, pgb_pg):
    """In transaction pooling neki prepares the clients' statements on the server under names
    of its own (NEKI_ and a keyed hash of the text): a client whose transaction crosses the
    restart prepares a statement on the same server connection, which still has the old
    process's; the new process's names (its own key) do not meet them."""
    b = start(neki, pgb_pg, 1)
    c = b.conn(autocommit=False)
    assert c.execute("SELECT %s::int", [1], prepare=True).fetchone() == (1,)
    reboot(b)
    assert c.execute("SELECT %s::int + 1", [1], prepare=True).fetchone() == (2,)
    c.commit()
    c.close()


def test_idle_server_connection_is_reset_before_reuse(neki, pgb_pg):
    """The session state a client left on an idle server connection (search_path here) is
    not in the SHOW FDS row: the new process resets the connection (DISCARD ALL) before
    another client gets it."""
    b = start(neki, pgb_pg, 1, extra="[databases]\n"
              f"p1s = port={pgb_pg.port(SERVER)} host=127.0.0.1 dbname=p1 user=bouncer "
              "pool_size=1\n")
    with b.conn(dbname="p1s") as a:
        a.execute("SET search_path TO pg_catalog")
        assert a.execute("SHOW search_path").fetchone() == ("pg_catalog",)
        a.execute("SELECT 1")       # released in transaction pooling, search_path set on it
        reboot(b)
    with b.conn(dbname="p1s") as other:
        assert other.execute("SHOW search_path").fetchone() == ('"$user", public',)
