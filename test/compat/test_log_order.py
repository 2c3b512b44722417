"""
pgbouncer logs a closing connection before it sends the client its error: the C- line
`closing because: <reason> (age=Ns)`, then the S- line of the server link closed with it,
then the ErrorResponse. A test (or an operator) that reads the log as soon as the client
has its error finds both lines.

The log here is a FIFO that the test drains. To see the order, the test fills the pipe so
that neki's next log write blocks: a client closed with an error must then not get its error
until the log is drained again (with the error sent first, the client had it at once).
"""
import os
import socket
import threading
import time

import pytest

import compat  # noqa: F401 (makes test/clients/pgwire.py importable)
from conftest import make_private_dir, wait_until
from pgwire import Wire, error_fields


class FifoLog:
    """A logfile that is a FIFO: drained into .text by a thread, except while held full."""

    def __init__(self, path):
        os.mkfifo(path)
        os.chmod(path, 0o666)     # neki may run as another user (tests run as root)
        self.path = path
        self.rfd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)   # before neki opens it
        self.wfd = None
        self.text = ""
        self.lock = threading.Lock()
        self.holding = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drain_loop, daemon=True)
        self.thread.start()

    def _read_all(self):
        while True:
            try:
                data = os.read(self.rfd, 65536)
            except BlockingIOError:
                return
            if not data:
                return
            with self.lock:
                self.text += data.decode(errors="replace").replace("#", "")

    def _drain_loop(self):
        while not self.stop.is_set():
            if not self.holding.is_set():
                self._read_all()
            time.sleep(0.01)

    def hold_full(self):
        """Stop draining and fill the pipe: neki's next log write blocks."""
        self.holding.set()
        time.sleep(0.05)    # let a read in progress end (the loop checks every 10 ms)
        self.wfd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
        for chunk in (4096, 1):     # a write of up to PIPE_BUF bytes needs room for all of it
            while True:
                try:
                    os.write(self.wfd, b"#" * chunk)
                except BlockingIOError:
                    break

    def release(self):
        """Drain again (the filler bytes are dropped)."""
        os.close(self.wfd)
        self.wfd = None
        self._read_all()
        self.holding.clear()

    def contents(self):
        """What neki logged so far (everything it wrote into the pipe, when not held)."""
        if not self.holding.is_set():
            self._read_all()
        with self.lock:
            return self.text

    def close(self):
        self.stop.set()
        self.thread.join(2)
        os.close(self.rfd)


@pytest.fixture
def fifo_log():
    """(Request it before `neki`: neki stops first, while the log is still drained.)"""
    log = FifoLog(make_private_dir("neki-fifo.") / "neki.log")
    yield log
    log.close()


def _sleeping(pg_cluster, db):
    return pg_cluster.sql("shard-a", "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                          " AND query = 'SELECT pg_sleep(30)'", [db])[0][0] == 1


def test_closing_lines_are_logged_before_the_error(pg_cluster, cluster_db, fifo_log, neki):
    """query_timeout closes a client whose query runs: its C- line and its link's S- line are
    in the log before the client gets the bytes of its `query timeout` error."""
    port = pg_cluster.port("shard-a")
    n = neki(settings={"logfile": fifo_log.path, "log_connections": 0, "workers": 1,
                       "query_timeout": 2, "pool_mode": "session"},
             databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}")
    w = Wire(n.port)
    try:
        w.login(database=cluster_db)
        w.send(b"Q", b"SELECT pg_sleep(30)\0")
        wait_until(lambda: _sleeping(pg_cluster, cluster_db), 5, what="the query running")
        fifo_log.hold_full()
        try:
            w.sock.settimeout(4)    # query_timeout fires meanwhile: its log line waits
            with pytest.raises(socket.timeout):
                got = w.read_msg()
                pytest.fail(f"the client had {got} before the log line was written")
        finally:
            fifo_log.release()
        w.sock.settimeout(10)
        typ, body = w.read_msg()
    finally:
        w.close()
    assert typ == "E" and error_fields(body)["M"] == "query timeout", (typ, body)
    log = fifo_log.contents()       # written before the error was sent: all in the pipe
    c_at = log.find(f"{cluster_db}/postgres@127.0.0.1")
    s_at = log.find("closing because: client disconnect while server was not ready")
    assert "closing because: query timeout (age=" in log[c_at:], log
    assert log.rfind("S-0x", 0, s_at) > c_at >= 0, log
