"""
Shared pytest fixtures for neki's integration tests (run with /usr/bin/python3 -m pytest test/).

pg_cluster  (session)   a private cluster of real PostgreSQL 15 servers started by
                        test/harness/cluster: data shards shard-a..shard-d, `auth`, `reference`.
                        Stopped and removed at the end of the session, also on failure, Ctrl-C
                        or SIGTERM.
cluster_db  (function)  a fresh database with a unique name on every server of pg_cluster,
                        dropped afterwards.
neki        (function)  factory: neki(settings={...}, databases=..., shards=...) writes a
                        neki.ini into a private temp dir, starts ./neki (env NEKI_BIN overrides,
                        e.g. NEKI_BIN=./neki-asan) and waits until its ports accept connections.
                        Every instance is stopped at the end of the test (SIGQUIT, then SIGKILL)
                        and the test errors if any neki process is left behind.

Helpers importable from tests:  from conftest import free_port, start_cluster, NekiStartError
"""
import atexit
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:  # the harness itself still works; tests that need SQL will fail clearly
    psycopg = None

REPO = Path(__file__).resolve().parent.parent
CLUSTER_SCRIPT = REPO / "test" / "harness" / "cluster"
IS_ROOT = os.geteuid() == 0


def run_as_user():
    """The unprivileged user servers and neki run as when the tests run as root."""
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            pass
    raise RuntimeError("no postgres or nobody user to run servers as")


def tmp_base():
    """Where temp dirs go: the same choice as `test/harness/cluster tmpbase`."""
    if os.environ.get("NEKI_TMPDIR"):
        return os.environ["NEKI_TMPDIR"]
    try:
        if os.access("/dev/shm", os.W_OK) and shutil.disk_usage("/dev/shm").free >= 2 << 30:
            return "/dev/shm"
    except OSError:
        pass
    return tempfile.gettempdir()


_private_dirs = []


def _remove_private_dirs():
    for d in _private_dirs:
        shutil.rmtree(d, ignore_errors=True)


atexit.register(_remove_private_dirs)


def make_private_dir(prefix):
    """A temp dir that the unprivileged run-as user can use (when root). Removed at the end
    of the test session at the latest, so no test leaves it behind."""
    d = tempfile.mkdtemp(prefix=prefix, dir=tmp_base())
    _private_dirs.append(d)
    os.chmod(d, 0o755)
    if IS_ROOT:
        pw = pwd.getpwnam(run_as_user())
        os.chown(d, pw.pw_uid, pw.pw_gid)
    return Path(d)


def wait_until(predicate, timeout, interval=0.02, what="condition"):
    """Bounded poll: return predicate()'s first truthy value, or raise TimeoutError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


_handed_out = set()


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on right now (bind to 0, close).
    Ports already handed out in this process are not handed out again."""
    for _ in range(100):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port")


def port_accepts(port, host="127.0.0.1", timeout=0.5):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


# --------------------------------------------------------------------------------------------
# The Postgres cluster

_live_clusters = set()


class Cluster:
    """A running cluster: ports, socket dir, SQL helpers."""

    def __init__(self, env):
        self.env = env
        self.dir = env["NEKI_CLUSTER_DIR"]
        self.sockdir = env["PGHOST_SOCK"]
        self.ports = {}
        for key, value in env.items():
            if key.endswith("_PORT"):
                name = key[: -len("_PORT")].lower().replace("_", "-")
                self.ports[name] = int(value)
        self.shards = [item.split(":")[0] for item in env["SHARDS"].split()]
        self.servers = list(self.shards) + ["auth", "reference"]
        self.replicas = {}   # standby name -> its primary (add_replica)
        self.test_user = env["NEKI_TEST_USER"]
        self.test_password = env["NEKI_TEST_PASSWORD"]
        self.md5_user = env["NEKI_MD5_USER"]
        self.md5_password = env["NEKI_MD5_PASSWORD"]
        self.plain_user = env["NEKI_PLAIN_USER"]
        self.plain_password = env["NEKI_PLAIN_PASSWORD"]
        self.ssl = env.get("CLUSTER_SSL") == "on"
        self.stopped = False

    def port(self, name):
        return self.ports[name]

    def dsn(self, name, dbname="postgres", user="postgres", password=None, host="127.0.0.1",
            **extra):
        """A libpq connection string for one server (TCP by default; host=self.sockdir for
        the unix socket)."""
        parts = {"host": host, "port": self.ports[name], "dbname": dbname, "user": user}
        if password is not None:
            parts["password"] = password
        parts.update(extra)
        return " ".join(f"{k}={_quote_conninfo(v)}" for k, v in parts.items())

    def connect(self, name, dbname="postgres", user="postgres", password=None, autocommit=True,
                **extra):
        """A psycopg 3 connection to one server (autocommit by default)."""
        if psycopg is None:
            raise RuntimeError("python3-psycopg is not installed")
        extra.setdefault("connect_timeout", 10)
        return psycopg.connect(self.dsn(name, dbname, user, password, **extra),
                               autocommit=autocommit)

    def sql(self, name, query, params=None, dbname="postgres", user="postgres", password=None):
        """Run one statement on one server; return its rows (list of tuples) or None."""
        with self.connect(name, dbname, user, password) as conn:
            cur = conn.execute(query, params)
            return cur.fetchall() if cur.description is not None else None

    def sql_all(self, query, params=None, servers=None, dbname="postgres"):
        """Run one statement on every server (or the given ones); {name: rows}."""
        return {name: self.sql(name, query, params, dbname) for name in (servers or self.servers)}

    def shards_section(self, dbname=None, **extra):
        """Lines for a neki.ini [shards] section: `shard-a = host=127.0.0.1 port=...`."""
        lines = []
        for name in self.shards:
            parts = [f"host=127.0.0.1", f"port={self.ports[name]}"]
            if dbname:
                parts.append(f"dbname={dbname}")
            parts += [f"{k}={v}" for k, v in extra.items()]
            lines.append(f"{name} = {' '.join(parts)}")
        return "\n".join(lines)

    def stop_server(self, name, mode="fast"):
        _run_script("stop-server", self.dir, name, mode)

    def add_replica(self, primary, name):
        """Start NAME as a streaming standby of PRIMARY (pg_basebackup -R); its port is
        self.port(NAME). Standbys are not in self.servers (no CREATE DATABASE there)."""
        out = _run_script("add-replica", self.dir, primary, name).stdout
        self.ports[name] = int(out.strip().splitlines()[-1].partition("=")[2])
        self.replicas[name] = primary

    def promote(self, name):
        """Promote standby NAME (pg_ctl promote -w)."""
        _run_script("promote", self.dir, name)

    def wait_replayed(self, name, timeout=20):
        """Bounded poll: standby NAME has replayed everything its primary has written."""
        primary = self.replicas[name]
        want = self.sql(primary, "SELECT pg_current_wal_insert_lsn()")[0][0]
        wait_until(lambda: self.sql(name, "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn",
                                    (want,))[0][0], timeout, interval=0.05,
                   what=f"{name} to replay {primary}'s WAL up to {want}")

    def start_server(self, name):
        _run_script("start-server", self.dir, name)

    def status(self):
        out = _run_script("status", self.dir).stdout
        return {line.split()[0]: line.split()[2] for line in out.splitlines() if line.strip()}

    def stop(self):
        if not self.stopped:
            stop_cluster_dir(self.dir)
            self.stopped = True
            _live_clusters.discard(self)


def _quote_conninfo(value):
    value = str(value)
    if value and re.fullmatch(r"[^\s'\\]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _run_script(*args, check=True):
    res = subprocess.run([str(CLUSTER_SCRIPT), *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, timeout=120)
    if check and res.returncode != 0:
        raise RuntimeError(f"cluster {' '.join(args)} failed ({res.returncode}):\n{res.stderr}")
    return res


def parse_env(text):
    """Parse the KEY=value lines that `cluster start` prints."""
    env = {}
    for line in text.splitlines():
        if "=" not in line:
            continue
        key, _, value = line.partition("=")
        words = shlex.split(value)
        env[key.strip()] = words[0] if len(words) == 1 else " ".join(words)
    return env


def start_cluster(shards=4):
    """Start a cluster in a fresh temp dir; the caller must call .stop() (also on error)."""
    d = tempfile.mkdtemp(prefix="neki-cluster.", dir=tmp_base())
    try:
        res = _run_script("start", "--dir", d, "--shards", str(shards), check=False)
        if res.returncode != 0:
            raise RuntimeError(f"cluster start failed ({res.returncode}):\n{res.stderr}")
        cluster = Cluster(parse_env(res.stdout))
    except BaseException:
        stop_cluster_dir(d)
        raise
    _live_clusters.add(cluster)
    return cluster


def stop_cluster_dir(d):
    if os.path.exists(d):
        if os.path.exists(os.path.join(d, ".neki-cluster")):
            _run_script("stop", d)
        else:  # start never got as far as creating the marker
            shutil.rmtree(d, ignore_errors=True)


@atexit.register
def _stop_leftover_clusters():
    for cluster in list(_live_clusters):
        try:
            cluster.stop()
        except Exception:
            pass


def pytest_configure(config):
    # SIGTERM / SIGHUP: unwind like Ctrl-C, so that every fixture's teardown runs
    def interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, interrupt)


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster_db(pg_cluster):
    """A database with a unique name, created on every server, dropped after the test."""
    name = f"t_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    for server in pg_cluster.servers:
        pg_cluster.sql(server, f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        for server in pg_cluster.servers:
            try:
                pg_cluster.sql(server, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except Exception:
                pass


# --------------------------------------------------------------------------------------------
# neki

def neki_binary():
    return Path(os.environ.get("NEKI_BIN", REPO / "neki")).resolve()


class NekiStartError(Exception):
    """neki exited, or did not accept connections in time, during start()."""


def _read_proc(pid, what):
    try:
        with open(f"/proc/{pid}/{what}", "rb") as f:
            return f.read()
    except OSError:
        return None


def proc_state(pid):
    """The /proc state letter of a process (R, S, Z, ...), or None when it is gone."""
    stat = _read_proc(pid, "stat")
    if stat is None:
        return None
    return stat[stat.rindex(b")") + 2:].split()[0].decode()


def proc_ppid(pid):
    stat = _read_proc(pid, "stat")
    if stat is None:
        return None
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def pid_alive(pid):
    """True when the process exists and is not a zombie."""
    state = proc_state(pid)
    return state is not None and state != "Z"


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def children_of(pid):
    return [p for p in all_pids() if proc_ppid(p) == pid and pid_alive(p)]


def descendants_of(pid):
    out, todo = [], [pid]
    while todo:
        kids = children_of(todo.pop())
        out += kids
        todo += kids
    return out


def _section(name, body):
    if body is None:
        return ""
    if isinstance(body, dict):
        body = "\n".join(f"{k} = {v}" for k, v in body.items())
    return f"[{name}]\n{body.strip()}\n\n" if body.strip() else f"[{name}]\n\n"


# The users the default auth_file lists: under auth_type trust pgbouncer (and neki) let in
# only users the auth_file (or auth_query) knows.
DEFAULT_AUTH_USERS = ("postgres", "neki_test", "neki_md5", "neki_plain", "admin", "viewer",
                      "stats", "op", "someone", "stranger")


class Neki:
    """One neki instance with its own dir, ini, ports, log and pidfile."""

    def __init__(self, settings=None, databases=None, shards=None, users=None, extra="",
                 section="pgbouncer", binary=None):
        self.dir = make_private_dir("neki.")
        self.ini = self.dir / "neki.ini"
        self.logfile = self.dir / "neki.log"
        self.pidfile = self.dir / "neki.pid"
        self.stdout_file = self.dir / "neki.stdout"
        self.binary = Path(binary) if binary else neki_binary()
        self.port = free_port()
        self.admin_port = free_port()
        self.sockdir = self.dir
        self.section = section
        self.databases = databases if databases is not None else ""
        self.shards = shards
        self.users = users
        self.extra = extra
        self.userlist = self.dir / "fixture-userlist.txt"
        self.auth_users = list(DEFAULT_AUTH_USERS)
        self.settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": self.port,
            "unix_socket_dir": self.dir,
            "admin_listen_addr": "127.0.0.1",
            "admin_listen_port": self.admin_port,
            "pidfile": self.pidfile,
            "logfile": self.logfile,
            "auth_type": "trust",
            "auth_file": self.userlist,
            "workers": 2,
        }
        self.update(settings or {})
        self.proc = None
        self.pid = None         # the master's pid
        self.daemon = False
        self._seen = set()      # every neki pid ever observed (master and children)

    # --- configuration

    def update(self, settings):
        """Change settings (a value of None removes the key) and rewrite the ini file.
        Follow with .reload() to make a running neki pick it up."""
        for key, value in settings.items():
            if value is None:
                self.settings.pop(key, None)
            else:
                self.settings[key] = value
        if "listen_port" in self.settings:
            self.port = int(self.settings["listen_port"])
        if "admin_listen_port" in self.settings:
            self.admin_port = int(self.settings["admin_listen_port"])
        self.write_ini()

    def listed_users(self):
        """Who the default auth_file lists: auth_users, admin_users, stats_users and the
        [users] section's names."""
        names = list(self.auth_users)
        for key in ("admin_users", "stats_users"):
            names += [u.strip() for u in str(self.settings.get(key, "")).split(",")]
        users = self.users
        if isinstance(users, str):
            users = {line.split("=", 1)[0].strip(): None for line in users.splitlines()
                     if "=" in line}
        names += list(users or {})
        return [n for i, n in enumerate(names) if n and n not in names[:i]]

    def allow_users(self, *names):
        """List more users in the default auth_file (rewritten at once; reload to apply)."""
        self.auth_users += [n for n in names if n not in self.auth_users]
        self.write_ini()

    def write_ini(self, text=None):
        """Write the ini from the current settings (or the given raw text); when auth_file is
        the default one, write it too (empty passwords: trust needs none)."""
        if str(self.settings.get("auth_file")) == str(self.userlist):
            self.userlist.write_text("".join(f'"{u}" ""\n' for u in self.listed_users()))
            os.chmod(self.userlist, 0o644)
        if text is None:
            text = _section("databases", self.databases)
            if self.users is not None:
                text += _section("users", self.users)
            if self.shards is not None:
                text += _section("shards", self.shards)
            text += _section(self.section,
                             "\n".join(f"{k} = {v}" for k, v in self.settings.items()))
            text += self.extra
        self.ini.write_text(text)
        os.chmod(self.ini, 0o644)

    # --- running

    def command(self, *extra_args):
        cmd = [str(self.binary)]
        if IS_ROOT:
            cmd += ["-u", run_as_user()]
        return cmd + list(extra_args) + [str(self.ini)]

    def start(self, wait=True, daemon=False, args=(), timeout=10):
        """Start neki (in the foreground unless daemon=True) and, with wait, poll until the
        listen port and admin port accept connections and the pidfile (when set) is written."""
        if not self.binary.exists():
            raise NekiStartError(f"no neki binary at {self.binary} (build it: make)")
        self.daemon = daemon
        extra = list(args) + (["-d"] if daemon else [])
        out = open(self.stdout_file, "ab")
        try:
            self.proc = subprocess.Popen(self.command(*extra), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT,
                                         cwd=str(self.dir), start_new_session=True)
        finally:
            out.close()
        self.pid = None if daemon else self.proc.pid
        if self.pid:
            self._seen.add(self.pid)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=10):
        def ready():
            if self.daemon:
                if self.pid is None:
                    pid = self.read_pidfile()
                    if pid is None:
                        if self.proc.poll() not in (None, 0):
                            raise NekiStartError(self._failure("neki -d exited with "
                                                               f"{self.proc.returncode}"))
                        return False
                    self.pid = pid
                    self._seen.add(pid)
                if not pid_alive(self.pid):
                    raise NekiStartError(self._failure("the daemonized neki died"))
            elif self.proc.poll() is not None:
                raise NekiStartError(self._failure(f"neki exited with {self.proc.returncode}"))
            self.remember_pids()
            if "pidfile" in self.settings and self.read_pidfile() is None:
                return False
            ports = [self.port] + ([self.admin_port] if self.admin_port else [])
            return all(port_accepts(p) for p in ports)

        try:
            wait_until(ready, timeout, what=f"neki on ports {self.port}/{self.admin_port}")
        except TimeoutError as e:
            raise NekiStartError(self._failure(str(e))) from None
        return self

    def read_pidfile(self):
        try:
            return int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None

    def _failure(self, why):
        return f"{why}\ncommand: {' '.join(self.command())}\n--- ini:\n{self.ini_text()}" \
               f"--- log:\n{self.log()}--- stdout/stderr:\n{self.output()}"

    def ini_text(self):
        try:
            return self.ini.read_text()
        except OSError:
            return ""

    def log(self):
        """The logfile's contents so far ('' when there is none)."""
        try:
            return self.logfile.read_text(errors="replace")
        except OSError:
            return ""

    def output(self):
        """What neki wrote to stdout/stderr."""
        try:
            return self.stdout_file.read_text(errors="replace")
        except OSError:
            return ""

    def wait_log(self, pattern, timeout=5):
        """Bounded poll until the log matches the regex; return the match."""
        return wait_until(lambda: re.search(pattern, self.log(), re.M), timeout,
                          what=f"log line /{pattern}/")

    def remember_pids(self):
        if self.pid:
            for p in [self.pid] + descendants_of(self.pid):
                self._seen.add(p)

    def children(self):
        """Live child pids of the master."""
        return children_of(self.pid) if self.pid else []

    def signal(self, sig):
        self.remember_pids()
        os.kill(self.pid, sig)

    def reload(self):
        self.signal(signal.SIGHUP)

    def alive(self):
        return self.pid is not None and pid_alive(self.pid)

    def wait_exit(self, timeout=5):
        """Bounded poll until the master has exited; its exit status when it was our child."""
        if self.proc is not None and not self.daemon:
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                raise TimeoutError(f"neki (pid {self.pid}) still running after {timeout}s")
        wait_until(lambda: not self.alive(), timeout, what=f"neki pid {self.pid} to exit")
        return None

    def kill_all(self, timeout=10):
        """SIGKILL the whole process group (master, workers, admin) and poll until every
        process of it is gone, so that a start after it finds its ports free."""
        self.remember_pids()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout)
        wait_until(lambda: not self.leftovers(), timeout, what="every neki process to exit")

    def leftovers(self):
        """Live processes that belong to this instance: any pid seen as master or child,
        or anything whose command line names this instance's ini file."""
        ini = str(self.ini).encode()
        found = {p for p in self._seen if pid_alive(p)}
        for p in all_pids():
            cmdline = _read_proc(p, "cmdline")
            if cmdline and ini in cmdline and pid_alive(p) and p != os.getpid():
                found.add(p)
        return sorted(found)

    def stop(self, timeout=3):
        """SIGQUIT (immediate exit), then SIGKILL for anything left; return what had to be
        SIGKILLed (empty when neki exited cleanly)."""
        if self.proc is None:
            return []
        self.remember_pids()
        if self.alive():
            try:
                os.kill(self.pid, signal.SIGQUIT)
            except ProcessLookupError:
                pass
        try:
            wait_until(lambda: not self.leftovers(), timeout, what="neki to exit")
            killed = []
        except TimeoutError:
            killed = self.leftovers()
            for p in killed:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            wait_until(lambda: not self.leftovers(), 5, what="SIGKILLed neki processes")
        if self.proc.poll() is None:
            try:
                self.proc.wait(2)
            except subprocess.TimeoutExpired:
                pass
        return killed

    def connect(self, dbname="postgres", user="postgres", password=None, autocommit=True,
                port=None, host="127.0.0.1", **extra):
        """A psycopg 3 connection through neki's listen port (or another of its ports)."""
        if psycopg is None:
            raise RuntimeError("python3-psycopg is not installed")
        parts = {"host": host, "port": port or self.port, "dbname": dbname, "user": user,
                 "connect_timeout": 10}
        if password is not None:
            parts["password"] = password
        parts.update(extra)
        dsn = " ".join(f"{k}={_quote_conninfo(v)}" for k, v in parts.items())
        return psycopg.connect(dsn, autocommit=autocommit)

    def admin_connect(self, dbname="neki", user="postgres", **kw):
        """A connection to the admin port."""
        return self.connect(dbname=dbname, user=user, port=self.admin_port, **kw)

    def cleanup(self):
        """Stop and remove; return a list of problems (processes that needed SIGKILL,
        processes still alive)."""
        problems = []
        killed = self.stop()
        if killed:
            problems.append(f"neki processes ignored SIGQUIT and were SIGKILLed: {killed}")
        left = self.leftovers()
        if left:
            problems.append(f"neki processes still alive: {left}")
        if not problems:
            shutil.rmtree(self.dir, ignore_errors=True)
        else:
            problems.append(f"kept {self.dir} (log: {self.logfile})")
        return problems


@pytest.fixture
def neki():
    """Factory: neki(settings=None, databases=None, shards=None, users=None, extra='',
    section='pgbouncer', start=True, wait=True, daemon=False, args=(), timeout=10) -> Neki.

    `databases`, `shards` and `users` are the section bodies (text or a dict); `settings`
    override the defaults (listen_addr 127.0.0.1, free listen_port and admin_listen_port,
    unix_socket_dir/pidfile/logfile in the instance dir, auth_type trust, workers 2, and
    auth_file = <dir>/userlist.txt listing Neki.listed_users(): DEFAULT_AUTH_USERS, the
    admin_users / stats_users names and the [users] names, more with inst.allow_users(); a
    value of None removes a default)."""
    instances = []

    def factory(settings=None, databases=None, shards=None, users=None, extra="",
                section="pgbouncer", start=True, wait=True, daemon=False, args=(), timeout=10,
                binary=None):
        inst = Neki(settings, databases, shards, users, extra, section, binary)
        instances.append(inst)
        if start:
            inst.start(wait=wait, daemon=daemon, args=args, timeout=timeout)
        return inst

    yield factory
    problems = []
    for inst in instances:
        problems += inst.cleanup()
    assert not problems, "\n".join(problems)
