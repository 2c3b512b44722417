"""
The master / worker / admin process model (issue 2): start-up, supervision, signals,
daemon mode, pidfile, unix socket, systemd notify and socket activation, and the reply a
client gets before the pooler exists.

Every neki runs through the `neki` fixture (test/conftest.py), which starts it as an
unprivileged user when the tests run as root and fails the test if any neki process is
left behind. All waits are bounded polls.
"""
import os
import re
import signal
import socket
import struct
import subprocess
import time

import pytest

from conftest import (IS_ROOT, children_of, descendants_of, free_port, make_private_dir,
                      neki_binary, pid_alive, port_accepts, proc_state, run_as_user,
                      wait_until)

try:
    import psycopg
except ImportError:
    psycopg = None

STARTED = re.compile(r"(worker|admin) (\d+) started \(pid (\d+)\)")
# what a worker's session answers a client when no [databases] entry matches (after auth)
ERROR_TEXT = "no such database: postgres"


def slots(inst):
    """{slot: (kind, pid)} from the log's latest 'started' line per slot."""
    out = {}
    for kind, slot, pid in STARTED.findall(inst.log()):
        out[int(slot)] = (kind, int(pid))
    return out


def wait_children(inst, n, timeout=5):
    """Bounded poll until the master has exactly n live children; return their pids."""
    return wait_until(lambda: (lambda k: k if len(k) == n else None)(sorted(inst.children())),
                      timeout, what=f"{n} children of neki")


def ssl_probe(port, host="127.0.0.1"):
    """Connect, send SSLRequest, return (socket, answer byte). Proves a worker accepted."""
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(struct.pack("!II", 8, 80877103))
    return s, s.recv(1)


def read_error_response(sock):
    """Send a v3 StartupMessage on <sock>, return the ErrorResponse fields as a dict."""
    body = struct.pack("!I", 196608) + b"user\0postgres\0database\0postgres\0\0"
    sock.sendall(struct.pack("!I", len(body) + 4) + body)
    head = b""
    while len(head) < 5:
        chunk = sock.recv(5 - len(head))
        assert chunk, "connection closed before the ErrorResponse"
        head += chunk
    assert head[:1] == b"E"
    (length,) = struct.unpack("!I", head[1:5])
    payload = b""
    while len(payload) < length - 4:
        chunk = sock.recv(length - 4 - len(payload))
        assert chunk
        payload += chunk
    fields = {}
    for part in payload.rstrip(b"\0").split(b"\0"):
        fields[chr(part[0])] = part[1:].decode()
    return fields


def assert_nothing_left(inst):
    wait_until(lambda: not inst.leftovers(), 3, what="every neki process to exit")


def run_neki(args, timeout=10, env=None):
    """Run the binary directly (not through the fixture) and return the CompletedProcess."""
    return subprocess.run([str(neki_binary())] + args, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout, env=env)


# --------------------------------------------------------------------------------------------
# command line

def test_no_config_file_is_an_error():
    res = run_neki([])
    assert res.returncode == 1
    assert "no configuration file specified" in res.stderr


def test_version_lists_libraries():
    res = run_neki(["-V"])
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert re.fullmatch(r"PgBouncer 1\.25\.2 \(neki \d+\.\d+\.\d+\)", lines[0])
    assert any(line.startswith("libevent ") for line in lines)
    assert any(line.startswith("adns: c-ares ") for line in lines)
    assert any(line.startswith("tls: OpenSSL ") for line in lines)
    assert any(line.startswith("libpg_query ") for line in lines)


def test_help_lists_options():
    res = run_neki(["--help"])
    assert res.returncode == 0
    for opt in ("--daemon", "--reboot", "--quiet", "--verbose", "--user", "--version", "--help"):
        assert opt in res.stdout


def test_reboot_without_old_process_starts_normally(neki):
    """-R (online restart, test/compat/test_compat_takeover.py) with nothing listening on the
    Unix socket: pgbouncer's line, then a normal start."""
    inst = neki(settings={"admin_users": "admin"}, start=False)
    inst.start(args=("-R",))
    assert "old process not found, try to continue normally" in inst.log()
    with inst.connect(dbname="pgbouncer", user="admin", port=inst.admin_port) as c:
        assert c.execute("SHOW VERSION").fetchone()


@pytest.mark.parametrize("sockdir, message", [
    ("", "cannot reboot if unix dir not configured"),
    ("@neki-abstract-reboot", "cannot reboot with abstract Unix socket"),
])
def test_reboot_refusals(neki, sockdir, message):
    inst = neki(settings={"unix_socket_dir": sockdir}, start=False)
    res = run_neki(["-R"] + (["-u", run_as_user()] if IS_ROOT else []) + [str(inst.ini)])
    assert res.returncode == 1
    assert message in res.stderr


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_root_without_user_is_refused(neki):
    inst = neki(start=False)
    res = run_neki([str(inst.ini)])
    assert res.returncode == 1
    assert "should not run as root" in res.stderr
    assert not port_accepts(inst.port)


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_user_setting_allows_root(neki):
    """As pgbouncer: the `user` setting is as good as -u."""
    inst = neki(settings={"user": run_as_user()}, start=False)
    inst.command = lambda *extra: [str(inst.binary)] + list(extra) + [str(inst.ini)]
    inst.start()
    for pid in [inst.pid] + wait_children(inst, 3):
        uids = re.search(r"^Uid:\s+(.*)$", open(f"/proc/{pid}/status").read(), re.M).group(1)
        assert "0" not in uids.split(), f"pid {pid} still has uid 0: {uids}"



def test_bad_config_refuses_to_start(neki):
    inst = neki(settings={"no_such_setting": 1}, start=False)
    inst.start(wait=False)
    assert inst.proc.wait(5) == 1
    assert "no_such_setting" in inst.output()
    assert not port_accepts(inst.port)


# --------------------------------------------------------------------------------------------
# processes and supervision

def test_workers_and_admin_under_master(neki):
    inst = neki(settings={"workers": 3})
    kids = wait_children(inst, 4)
    started = wait_until(lambda: (lambda s: s if len(s) == 4 else None)(slots(inst)), 5,
                         what="4 started lines")
    kinds = sorted(kind for kind, _ in started.values())
    assert kinds == ["admin", "worker", "worker", "worker"]
    assert sorted(pid for _, pid in started.values()) == kids
    # nothing below the children
    assert sorted(descendants_of(inst.pid)) == kids
    inst.wait_log(r"3 workers and the admin process are running")


def test_killed_worker_is_replaced_others_stay(neki):
    inst = neki(settings={"workers": 3})
    wait_children(inst, 4)
    before = wait_until(lambda: (lambda s: s if len(s) == 4 else None)(slots(inst)), 5)
    victim_slot = next(s for s, (kind, _) in before.items() if kind == "worker")
    victim = before[victim_slot][1]
    others = {p for s, (_, p) in before.items() if s != victim_slot}
    os.kill(victim, signal.SIGKILL)
    t0 = time.monotonic()
    after = wait_until(lambda: (lambda k: k if len(k) == 4 and victim not in k else None)(
        set(inst.children())), 2, what="the killed worker to be replaced")
    assert time.monotonic() - t0 < 2
    assert others <= after, "the other processes must keep running"
    inst.wait_log(rf"worker {victim_slot} \(pid {victim}\) killed by signal 9 \(Killed\); "
                  r"restarting in")
    inst.wait_log(rf"worker {victim_slot} started \(pid {(after - others).pop()}\)")
    # the replacement serves clients
    for _ in range(4):
        s, answer = ssl_probe(inst.port)
        assert answer == b"N"
        assert read_error_response(s)["M"] == ERROR_TEXT
        s.close()


def test_killed_admin_is_replaced(neki):
    inst = neki(settings={"workers": 1})
    wait_children(inst, 2)
    admin = wait_until(lambda: next((p for k, p in slots(inst).values() if k == "admin"), None), 5)
    os.kill(admin, signal.SIGKILL)
    wait_until(lambda: len(inst.children()) == 2 and admin not in inst.children(), 2,
               what="a new admin process")
    wait_until(lambda: port_accepts(inst.admin_port), 2, what="the admin port")


def test_crash_loop_backs_off(neki):
    """A child that keeps dying young is restarted with growing delays (logged)."""
    inst = neki(settings={"workers": 1})
    wait_children(inst, 2)
    delays = []
    for _ in range(3):
        worker = wait_until(lambda: next((p for k, p in slots(inst).values()
                                          if k == "worker" and pid_alive(p)), None), 5)
        os.kill(worker, signal.SIGKILL)
        wait_until(lambda: worker not in inst.children() and
                   len(inst.children()) == 2, 5, what="restart")
    delays = [float(d) for d in re.findall(r"worker 0 \(pid \d+\) killed by signal 9 "
                                           r"\(Killed\); restarting in ([\d.]+) s", inst.log())]
    assert len(delays) == 3
    assert delays[0] < delays[1] < delays[2]


def test_sigkill_of_master_leaves_no_process(neki):
    inst = neki(settings={"workers": 3})
    kids = wait_children(inst, 4)
    inst.remember_pids()
    os.kill(inst.pid, signal.SIGKILL)
    wait_until(lambda: not any(pid_alive(p) for p in kids + [inst.pid]), 2,
               what="children to die with the master")
    assert_nothing_left(inst)


def test_restart_after_sigkill_cleans_stale_files(neki):
    """The pidfile and unix socket left by a SIGKILLed master do not block a new start."""
    inst = neki(settings={"workers": 1})
    wait_children(inst, 2)
    inst.remember_pids()
    os.kill(inst.pid, signal.SIGKILL)
    assert_nothing_left(inst)
    assert inst.pidfile.exists()
    assert (inst.sockdir / f".s.PGSQL.{inst.port}").exists()
    inst.start()
    inst.wait_log(r"removing stale unix socket")
    assert inst.read_pidfile() == inst.pid


def test_pidfile_of_an_unreaped_sigkilled_master_is_stale(neki):
    """A SIGKILLed master stays a zombie until its parent (systemd, a shell, here the test)
    reaps it, and kill(pid, 0) still succeeds for it: the pidfile naming it is stale all
    the same, so the restart that systemd's Restart= makes at once succeeds."""
    inst = neki(settings={"workers": 1})
    wait_children(inst, 2)
    inst.remember_pids()
    old, pid = inst.proc, inst.pid
    os.kill(pid, signal.SIGKILL)
    assert_nothing_left(inst)
    assert proc_state(pid) == "Z"          # dead, not reaped: old.wait() has not run
    assert inst.read_pidfile() == pid
    try:
        inst.start()
        inst.wait_log(r"stale pidfile, removing")
        assert inst.read_pidfile() == inst.pid != pid
    finally:
        old.wait(5)


# --------------------------------------------------------------------------------------------
# shutdown signals

def test_sigterm_without_clients_exits_and_removes_files(neki):
    inst = neki(settings={"workers": 3})
    wait_children(inst, 4)
    inst.signal(signal.SIGTERM)
    assert inst.wait_exit(5) == 0
    assert_nothing_left(inst)
    assert not inst.pidfile.exists()
    assert not (inst.sockdir / f".s.PGSQL.{inst.port}").exists()
    assert "got SIGTERM, shutting down" in inst.log()


def test_sigterm_waits_for_clients(neki):
    inst = neki(settings={"workers": 2})
    wait_children(inst, 3)
    client, answer = ssl_probe(inst.port)
    assert answer == b"N"
    inst.signal(signal.SIGTERM)
    inst.wait_log(r"got SIGTERM, shutting down, waiting for all clients")
    # stops listening at once ...
    wait_until(lambda: not port_accepts(inst.port), 3, what="the listener to close")
    # ... but keeps running while the client is connected
    with pytest.raises(TimeoutError):
        wait_until(lambda: not inst.alive(), 0.7)
    # only the worker holding the client is left, and the admin, which serves the console
    # (on the worker's Unix socket, as pgbouncer) until the last worker has exited
    assert len(inst.children()) == 2, "the worker holding the client and the admin"
    client.close()
    assert inst.wait_exit(5) == 0
    assert_nothing_left(inst)
    assert not inst.pidfile.exists()


@pytest.mark.parametrize("defer", [0, 1])
def test_tcp_defer_accept(neki, defer):
    """With tcp_defer_accept, a TCP client that sends nothing never reaches a worker, so
    SIGTERM does not wait for it; without, it is a client like any other."""
    inst = neki(settings={"workers": 1, "tcp_defer_accept": defer})
    wait_children(inst, 2)
    silent = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
    probe, _ = ssl_probe(inst.port)     # accepted after the silent one, if that was accepted
    probe.close()
    inst.signal(signal.SIGTERM)
    if defer:
        assert inst.wait_exit(5) == 0
    else:
        with pytest.raises(TimeoutError):
            wait_until(lambda: not inst.alive(), 0.7)
        silent.close()
        assert inst.wait_exit(5) == 0
    silent.close()


def test_second_sigterm_exits_at_once(neki):
    inst = neki(settings={"workers": 2})
    wait_children(inst, 3)
    client, _ = ssl_probe(inst.port)
    inst.signal(signal.SIGTERM)
    inst.wait_log(r"got SIGTERM, shutting down")
    inst.signal(signal.SIGTERM)
    assert inst.wait_exit(3) == 0
    assert "got SIGTERM during shutdown, exiting immediately" in inst.log()
    assert_nothing_left(inst)
    assert not inst.pidfile.exists()
    client.close()


def test_sigint_exits_once_server_links_are_released(neki):
    """SIGINT waits for server links only; there are none, so neki exits with a client on."""
    inst = neki(settings={"workers": 2})
    wait_children(inst, 3)
    client, _ = ssl_probe(inst.port)
    inst.signal(signal.SIGINT)
    assert inst.wait_exit(3) == 0
    assert_nothing_left(inst)
    assert "got SIGINT, shutting down" in inst.log()
    assert client.recv(1) == b""        # the client was disconnected
    client.close()


def test_sigquit_exits_immediately(neki):
    inst = neki(settings={"workers": 3})
    kids = wait_children(inst, 4)
    client, _ = ssl_probe(inst.port)
    inst.signal(signal.SIGQUIT)
    assert inst.wait_exit(3) == 0
    wait_until(lambda: not any(pid_alive(p) for p in kids), 2, what="children to exit")
    assert_nothing_left(inst)
    assert not inst.pidfile.exists()
    assert "got SIGQUIT, fast exit" in inst.log()
    client.close()


def test_terminal_signals_to_children_are_ignored(neki):
    """Ctrl-C reaches the whole process group: only the master acts on it."""
    inst = neki(settings={"workers": 2})
    kids = wait_children(inst, 3)
    for pid in kids:
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGHUP)
        os.kill(pid, signal.SIGUSR1)
    s, answer = ssl_probe(inst.port)   # a round trip through a worker after the signals
    assert answer == b"N"
    s.close()
    assert sorted(inst.children()) == kids


def test_pause_resume_signals_are_logged(neki):
    inst = neki(settings={"workers": 1})
    wait_children(inst, 2)
    inst.signal(signal.SIGUSR1)
    inst.wait_log(r"got SIGUSR1, pausing all activity")
    inst.signal(signal.SIGUSR2)
    inst.wait_log(r"got SIGUSR2, continuing from PAUSE")
    client, _ = ssl_probe(inst.port)        # keeps the shutdown waiting
    inst.signal(signal.SIGTERM)
    inst.wait_log(r"got SIGTERM")
    inst.signal(signal.SIGUSR2)
    inst.wait_log(r"got SIGUSR2 while shutting down, ignoring")
    client.close()
    inst.wait_exit(5)


# --------------------------------------------------------------------------------------------
# reload

def test_sighup_with_broken_ini_keeps_old_config(neki):
    inst = neki(settings={"workers": 2})
    kids = wait_children(inst, 3)
    good = inst.ini_text()
    inst.write_ini(good + "\nthis is not an ini line\n")
    inst.reload()
    inst.wait_log(r"could not reload configuration: .*neki\.ini:\d+")
    inst.wait_log(r"keeping the previous configuration")
    assert inst.alive()
    assert sorted(inst.children()) == kids
    s, answer = ssl_probe(inst.port)
    assert answer == b"N"
    assert read_error_response(s)["M"] == ERROR_TEXT
    s.close()


def test_sighup_with_good_ini_reloads_every_process(neki):
    """client_login_timeout comes from the reloaded file in the workers, too."""
    # tcp_defer_accept = 0: silent connections must reach a worker for this test
    inst = neki(settings={"workers": 2, "client_login_timeout": 60, "tcp_defer_accept": 0})
    kids = wait_children(inst, 3)
    inst.update({"client_login_timeout": 1, "listen_port": free_port()})
    inst.reload()
    inst.wait_log(r"got SIGHUP, re-reading config")
    inst.wait_log(r"configuration reloaded in every process")
    inst.wait_log(r"listen_port.*not reloadable")
    old_port = int(re.search(r"listening on 127\.0\.0\.1:(\d+)", inst.log()).group(1))
    assert sorted(inst.children()) == kids
    # a client that sends nothing is dropped after the new timeout, by whichever worker
    # took it; both workers got the RELOAD command before acknowledging it
    t0 = time.monotonic()
    conns = [socket.create_connection(("127.0.0.1", old_port), timeout=5) for _ in range(4)]
    for c in conns:
        c.settimeout(5)
        assert c.recv(1) == b""
        c.close()
    assert time.monotonic() - t0 < 4


# --------------------------------------------------------------------------------------------
# daemon mode, pidfile, sockets

def test_daemon_mode_writes_master_pid(neki):
    inst = neki(settings={"workers": 2}, daemon=True)
    assert inst.read_pidfile() == inst.pid
    assert inst.proc.wait(5) == 0          # the foreground process returned
    assert inst.pid != inst.proc.pid
    # a session of its own: neither ours nor the one the foreground process led
    assert os.getsid(inst.pid) not in (os.getsid(0), inst.proc.pid)
    wait_children(inst, 3)
    inst.signal(signal.SIGTERM)
    inst.wait_exit(5)
    assert_nothing_left(inst)
    assert not inst.pidfile.exists()


def test_daemon_mode_needs_pidfile(neki):
    inst = neki(settings={"pidfile": None}, start=False)
    inst.start(wait=False, daemon=True)
    assert inst.proc.wait(5) == 1
    assert "pidfile setting is required" in inst.log() + inst.output()


def test_live_pidfile_refuses_second_instance(neki):
    first = neki(settings={"workers": 1})
    second = neki(settings={"workers": 1, "pidfile": first.pidfile}, start=False)
    second.start(wait=False)
    assert second.proc.wait(5) == 1
    assert "pidfile exists, another instance running?" in second.output()
    assert first.read_pidfile() == first.pid


def test_unix_socket_in_use_refuses_to_start(neki):
    first = neki(settings={"workers": 1})
    second = neki(settings={"workers": 1, "listen_addr": None, "listen_port": first.port,
                            "unix_socket_dir": first.sockdir}, start=False)
    second.start(wait=False)
    assert second.proc.wait(5) == 1
    assert "unix socket is in use, cannot continue" in second.output()
    assert (first.sockdir / f".s.PGSQL.{first.port}").exists()


def test_unix_socket_only_when_listen_addr_unset(neki):
    inst = neki(settings={"workers": 1, "listen_addr": None}, wait=False)
    path = inst.sockdir / f".s.PGSQL.{inst.port}"
    wait_until(lambda: path.exists(), 5, what="the unix socket")
    assert not port_accepts(inst.port)
    s = socket.socket(socket.AF_UNIX)
    s.connect(str(path))
    assert read_error_response(s)["M"] == ERROR_TEXT
    s.close()


def test_unix_socket_mode(neki):
    inst = neki(settings={"workers": 1, "unix_socket_mode": "0700"})
    assert oct(os.stat(inst.sockdir / f".s.PGSQL.{inst.port}").st_mode & 0o777) == "0o700"


def test_so_reuseport_lets_two_instances_share_a_port(neki):
    first = neki(settings={"workers": 1, "so_reuseport": 1, "unix_socket_dir": ""})
    second = neki(settings={"workers": 1, "so_reuseport": 1, "unix_socket_dir": "",
                            "listen_port": first.port})
    assert first.alive() and second.alive()


# --------------------------------------------------------------------------------------------
# clients

def test_client_gets_error_response_and_worker_stays(neki):
    inst = neki(settings={"workers": 2})
    kids = wait_children(inst, 3)
    s = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
    fields = read_error_response(s)
    s.close()
    assert fields["S"] == "FATAL" and fields["V"] == "FATAL"
    assert fields["C"] == "08P01"
    assert fields["M"] == ERROR_TEXT
    # psql shows it
    res = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(inst.port), "-U", "postgres",
                          "-c", "select 1"], capture_output=True, text=True, timeout=10,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 2
    assert f"FATAL:  {ERROR_TEXT}" in res.stderr
    if psycopg is not None:
        with pytest.raises(psycopg.OperationalError, match=ERROR_TEXT):
            inst.connect(sslmode="prefer")
    assert sorted(inst.children()) == kids


def test_cancel_request_and_garbage_are_dropped(neki):
    """A cancel request for no one is dropped silently; garbage is refused; no process restarts."""
    inst = neki(settings={"workers": 1})
    kids = wait_children(inst, 2)
    c = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
    c.sendall(struct.pack("!IIII", 16, 80877102, 1, 2))
    assert c.recv(1) == b""
    c.close()
    g = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
    g.sendall(struct.pack("!I", 3) + b"xxxx")
    # a length below the minimum: told why (FATAL 08P01, as pgbouncer), then closed
    answer = b""
    while True:
        part = g.recv(4096)
        if not part:
            break
        answer += part
    assert answer[:1] == b"E" and b"C08P01\0" in answer, answer
    g.close()
    assert sorted(inst.children()) == kids


def test_admin_port_is_served_by_the_admin_process(neki):
    """The admin port reaches the admin process (its console), not a worker."""
    inst = neki(settings={"workers": 1})
    s = socket.create_connection(("127.0.0.1", inst.admin_port), timeout=5)
    body = struct.pack("!I", 196608) + b"user\0postgres\0database\0pgbouncer\0\0"
    s.sendall(struct.pack("!I", len(body) + 4) + body)
    data = b""
    while len(data) < 512:
        chunk = s.recv(512)
        if not chunk:
            break
        data += chunk
        if data[:1] == b"R":
            break
    s.close()
    # a worker would refuse the console database; the admin process serves it
    assert b"no such database: pgbouncer" not in data


def test_many_clients_on_the_shared_socket(neki):
    """Several workers accept on one socket (EAGAIN in the losers is normal)."""
    inst = neki(settings={"workers": 3})
    wait_children(inst, 4)
    for _ in range(30):
        s = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
        assert read_error_response(s)["C"] == "08P01"
        s.close()
    assert len(inst.children()) == 4


# --------------------------------------------------------------------------------------------
# systemd

class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET."""

    def __init__(self, directory, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"neki-notify-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.env = "@" + name
        else:
            path = str(directory / "notify.sock")
            self.sock.bind(path)
            os.chmod(path, 0o777)
            self.env = path
        self.messages = []

    def wait_for(self, text, timeout=5):
        deadline = time.monotonic() + timeout
        while True:
            for i, m in enumerate(self.messages):
                if text in m:
                    del self.messages[: i + 1]
                    return m
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no notify message with {text!r}")
            self.sock.settimeout(left)
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except socket.timeout:
                pass

    def close(self):
        self.sock.close()


@pytest.mark.parametrize("abstract", [False, True])
def test_notify_socket(neki, monkeypatch, abstract):
    notify_dir = make_private_dir("neki-notify.")
    ns = NotifySocket(notify_dir, abstract)
    monkeypatch.setenv("NOTIFY_SOCKET", ns.env)
    try:
        inst = neki(settings={"workers": 2})
        ready = ns.wait_for("READY=1")
        assert "STATUS=2 workers and the admin process are running" in ready
        assert len(inst.children()) == 3        # READY comes after the children are up
        inst.reload()
        reloading = ns.wait_for("RELOADING=1")
        usec = int(re.search(r"MONOTONIC_USEC=(\d+)", reloading).group(1))
        assert abs(usec / 1e6 - time.clock_gettime(time.CLOCK_MONOTONIC)) < 10
        ns.wait_for("READY=1")
        inst.signal(signal.SIGTERM)
        ns.wait_for("STOPPING=1")
        inst.wait_exit(5)
    finally:
        ns.close()
        subprocess.run(["rm", "-rf", str(notify_dir)])


def test_socket_activation(neki):
    """LISTEN_FDS/LISTEN_PID: the passed socket replaces listen_addr and the unix socket."""
    inst = neki(settings={"workers": 2}, start=False)
    port = free_port()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind(("127.0.0.1", port))
    lsock.listen(16)
    fd = lsock.fileno()
    cmd = " ".join(inst.command())
    inst.command = lambda *extra: ["sh", "-c", f"LISTEN_PID=$$ LISTEN_FDS=1 exec {cmd}"]

    def put_fd_3():
        os.dup2(fd, 3)
        os.set_inheritable(3, True)

    out = open(inst.stdout_file, "ab")
    inst.proc = subprocess.Popen(inst.command(), stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.STDOUT, preexec_fn=put_fd_3, pass_fds=(3,)
                                 if fd == 3 else (), close_fds=False, start_new_session=True)
    out.close()
    lsock.close()
    inst.pid = inst.proc.pid
    inst.wait_log(r"listening on 127\.0\.0\.1:\d+ \(systemd\)")
    inst.wait_log(r"listen_addr is ignored")
    wait_children(inst, 3)
    assert not port_accepts(inst.port)
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    assert read_error_response(s)["M"] == ERROR_TEXT
    s.close()


def test_abstract_unix_socket(neki):
    name = f"@neki-test-{os.getpid()}-{time.monotonic_ns()}"
    inst = neki(settings={"workers": 1, "listen_addr": None, "unix_socket_dir": name},
                wait=False)
    inst.wait_log(rf"listening on unix:{re.escape(name)}/\.s\.PGSQL\.{inst.port}")
    s = socket.socket(socket.AF_UNIX)
    s.connect("\0" + name[1:] + f"/.s.PGSQL.{inst.port}")
    assert read_error_response(s)["M"] == ERROR_TEXT
    s.close()


def test_quiet_and_verbose_flags(neki):
    quiet = neki(settings={"workers": 1}, args=("-q",))
    quiet.wait_log(r"process up: PgBouncer 1\.25\.2 \(neki ")
    assert "process up" not in quiet.output()
    loud = neki(settings={"workers": 1}, args=("-v",))
    s, _ = ssl_probe(loud.port)
    s.close()
    loud.wait_log(r"DEBUG accepted a connection on 127\.0\.0\.1:")
    assert "process up: PgBouncer" in loud.output()


def test_out_of_file_descriptors_pauses_accepting(neki):
    """EMFILE in accept(): the worker stops accepting for a second instead of spinning,
    stays up, and serves again once descriptors are free."""
    inst = neki(settings={"workers": 1}, start=False)
    plain = inst.command
    inst.command = lambda *extra: ["prlimit", "--nofile=40:40"] + plain(*extra)
    inst.start()
    kids = wait_children(inst, 2)
    conns = []
    for _ in range(60):
        c = socket.create_connection(("127.0.0.1", inst.port), timeout=5)
        c.sendall(struct.pack("!II", 8, 80877103))
        conns.append(c)
    warning = (r"^\S+ (\d\d):(\d\d):(\d\d\.\d+) \S+ \[\d+\] WARNING accept on "
               r"127\.0\.0\.1:\d+ failed: Too many open files; not accepting new connections "
               r"for 1 s$")
    # hold the connections until the worker has tried again once
    wait_until(lambda: len(re.findall(warning, inst.log(), re.M)) >= 2, 5,
               what="a second accept attempt")
    stamps = [int(h) * 3600 + int(m) * 60 + float(sec)
              for h, m, sec in re.findall(warning, inst.log(), re.M)]
    assert stamps[1] - stamps[0] >= 0.9, "it must pause, not spin on the listener"
    for c in conns:
        c.close()

    def served():
        try:
            s, answer = ssl_probe(inst.port)
        except OSError:
            return False
        s.close()
        return answer == b"N"

    wait_until(served, 5, what="the worker to accept again")
    assert sorted(inst.children()) == kids


def test_stuck_worker_is_reported_not_killed(neki):
    inst = neki(settings={"workers": 2})
    kids = wait_children(inst, 3)
    victim = next(p for k, p in slots(inst).values() if k == "worker")
    os.kill(victim, signal.SIGSTOP)
    try:
        inst.wait_log(rf"worker \d \(pid {victim}\) has not run its loop for [\d.]+ s", 10)
    finally:
        os.kill(victim, signal.SIGCONT)
    inst.wait_log(rf"worker \d \(pid {victim}\) runs its loop again", 5)
    assert sorted(inst.children()) == kids


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_unknown_user_is_an_error(neki):
    inst = neki(start=False)
    res = run_neki(["-u", "no-such-user-neki", str(inst.ini)])
    assert res.returncode == 1
    assert 'user "no-such-user-neki" does not exist' in res.stderr
    assert not inst.pidfile.exists()
    assert not (inst.sockdir / f".s.PGSQL.{inst.port}").exists()


@pytest.mark.skipif(not IS_ROOT, reason="needs root")
def test_unix_socket_group(neki):
    import grp
    group = grp.getgrgid(os.getgid()).gr_name          # root's group; neki runs as another user
    inst = neki(settings={"workers": 1, "unix_socket_group": group, "unix_socket_mode": "0770"})
    st = os.stat(inst.sockdir / f".s.PGSQL.{inst.port}")
    assert st.st_gid == os.getgid()
    assert oct(st.st_mode & 0o777) == "0o770"
