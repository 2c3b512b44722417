"""
A pgbouncer-style test bed for neki (issue 3: "a pgbouncer deployment works unchanged").

pgbouncer's own pytest suite starts the pooler as `pgbouncer --quiet test.ini` with a
configuration that sets only pgbouncer keys (no workers, no admin_listen_port), reaches the
console as user `pgbouncer` over the Unix socket without a password, stops it with SIGQUIT
and greps its logfile. The fixtures here do the same with ./neki, in our own words and with
our own cluster, so that the compat tests see neki exactly as such a suite would:

  pgb_pg   (session)   one server of pg_cluster (shard-a) prepared like pgbouncer's test
                       server: databases p0..p7, the roles the suite logs in as (bouncer,
                       pswcheck, someuser, muser1/2 with md5 secrets, puser1/2, scramuser1/3,
                       stats, maxedout*, ...), and pg_hba rules asking for a cleartext
                       password on p4, md5 on p5 and SCRAM on p6.
  bouncer  (function)  a Bouncer: neki started on a pgbouncer-only ini (BASE_INI below) with
                       the userlist USERLIST; helpers admin(), conn(), test(), sql_value(),
                       log_contains(), write_ini(), run_with_config(), stop/start.

Import both fixtures into a test module: `from pgbcompat import bouncer, pgb_pg  # noqa`.
Every wait is a bounded poll; no test asserts on speed.
"""
import contextlib
import os
import pwd
import re
import signal
import time

import pytest

from conftest import IS_ROOT, NekiStartError, free_port, run_as_user, wait_until

try:
    import psycopg
except ImportError:  # the module still imports; the tests that need it fail clearly
    psycopg = None

SERVER = "shard-a"
LONG_PASSWORD = "a" * 2047   # MAX_PASSWORD (2048) - 1, as pgbouncer's suite uses

# Roles of the test server: (name, options, password_encryption or None).
ROLES = [
    ("bouncer", "", None),
    ("pswcheck", "SUPERUSER CREATEDB PASSWORD 'pgbouncer-check'", None),
    ("pswcheck_not_in_auth_file", "SUPERUSER", None),
    ("someuser", "PASSWORD 'anypasswd'", None),
    ("stats", "PASSWORD 'stats'", None),
    ("maxedout", "", None), ("maxedout2", "", None), ("maxedout3", "", None),
    ("poolsize1", "", None), ("clientstate", "", None),
    ("longpass", f"PASSWORD '{LONG_PASSWORD}'", None),
    ("muser1", "PASSWORD 'foo'", "md5"), ("muser2", "PASSWORD 'wrong'", "md5"),
    ("puser1", "PASSWORD 'foo'", "md5"), ("puser2", "PASSWORD 'wrong'", "md5"),
    ("scramuser1", "PASSWORD 'SCRAM-SHA-256$4096:D76gvGUVj9Z4DNiGoabOBg==$"
                   "RukL0Xo3Ql/2F9FsD7mcQ3GATG2fD3PA71qY1JagGDs=:"
                   "BhKUwyyivFm7Tq2jDJVXSVRbRDgTWyBilZKgg6DDuYU='", "scram-sha-256"),
    ("scramuser3", "PASSWORD 'baz'", "scram-sha-256"),
]

# The auth_file: plain, md5 ("foo" for muser1, "bar" for muser2) and SCRAM secrets
# (scramuser1's is "foo"); a ';' line is a comment.
USERLIST = "\n".join([
    '"marko" "kama"',
    '"postgres" "asdasd"',
    '; a comment line',
    '"pgbouncer" "fake"',
    '"pswcheck" "pgbouncer-check"',
    '"maxedout" ""', '"maxedout2" ""', '"maxedout3" ""', '"poolsize1" ""',
    '"clientstate" ""',
    '"bouncer" "zzzz"',
    '"puser1" "foo"', '"puser2" "bar"',
    '"muser1" "md5ab8b744ff66bee42dc47bae34ca17959"',
    '"muser2" "md598455b3585818e23c2653a59f6d84551"',
    '"scramuser1" "SCRAM-SHA-256$4096:D76gvGUVj9Z4DNiGoabOBg==$'
    'RukL0Xo3Ql/2F9FsD7mcQ3GATG2fD3PA71qY1JagGDs=:BhKUwyyivFm7Tq2jDJVXSVRbRDgTWyBilZKgg6DDuYU="',
    '"scramuser2" "SCRAM-SHA-256$4096:BUYIT9YAsWf036OHLPfv2Q==$'
    'zuk7pzdEc5tvftsRIuwlStNxVc+wIE/xfDs7ahsKN0k=:Lov6mndE0DmlgtY60e1LyDsLctQyoH+Bvkm9K9njSa8="',
    '"scramuser3" "baz"',
    f'"longpass" "{LONG_PASSWORD}"',
]) + "\n"

# The [databases] and [users] a pgbouncer test configuration uses; PGPORT is replaced with
# the server's port. p0z (min_pool_size with a forced user) and the "*" auto-database stay
# commented out unless a test enables them.
BASE_INI = """\
[databases]
p0 = port=PGPORT host=127.0.0.1 dbname=p0 user=bouncer pool_size=2
p0a = port=PGPORT host=127.0.0.1 dbname=p0 pool_size=2
p0x = port=PGPORT host=127.0.0.1 dbname=p0 min_pool_size=5 pool_size=5
p0y = port=PGPORT host=127.0.0.1 dbname=p0 min_pool_size=5 pool_size=5 max_db_connections=2
;p0z = port=PGPORT host=127.0.0.1 dbname=p0 min_pool_size=3 user=pswcheck
p1 = port=PGPORT host=127.0.0.1 dbname=p1 user=bouncer
p2 = port=PGPORT host=127.0.0.1 dbname=p0 max_db_connections=4
p3 = port=PGPORT host=127.0.0.1 dbname=p0 user=bouncer pool_mode=session
p3x = port=PGPORT host=127.0.0.1 dbname=p0 pool_mode=session
p4 = port=PGPORT host=127.0.0.1 dbname=p4 user=puser1 password=foo
p4x = port=PGPORT host=127.0.0.1 dbname=p4 user=puser1 password=wrong
p4y = port=PGPORT host=127.0.0.1 dbname=p4 user=puser1
p4z = port=PGPORT host=127.0.0.1 dbname=p4 user=puser2
p4l = port=PGPORT host=127.0.0.1 dbname=p4 user=longpass
p5 = port=PGPORT host=127.0.0.1 dbname=p5 user=muser1 password=foo
p5x = port=PGPORT host=127.0.0.1 dbname=p5 user=muser1 password=wrong
p5y = port=PGPORT host=127.0.0.1 dbname=p5 user=muser1
p5z = port=PGPORT host=127.0.0.1 dbname=p5 user=muser2
p6 = port=PGPORT host=127.0.0.1 dbname=p6 user=scramuser1 password=foo
p6x = port=PGPORT host=127.0.0.1 dbname=p6 user=scramuser1 password=wrong
p6y = port=PGPORT host=127.0.0.1 dbname=p6 user=scramuser1
p6z = port=PGPORT host=127.0.0.1 dbname=p6 user=scramuser2
p61 = port=PGPORT host=127.0.0.1 dbname=p6 user=scramuser3
p62 = port=PGPORT host=127.0.0.1 dbname=p6
p7a = port=PGPORT host=127.0.0.1 dbname=p7
p7b = port=PGPORT host=127.0.0.1 dbname=p7
p7c = port=PGPORT host=127.0.0.1 dbname=p7
p9 = port=PGPORT host=127.0.0.1 dbname=postgres server_lifetime=2 user=bouncer
pauthz = port=PGPORT host=127.0.0.1 dbname=p7 auth_user=pswcheck auth_dbname=authdb
authdb = port=PGPORT host=127.0.0.1 dbname=p1 auth_user=pswcheck
non_existing_pg_db = port=PGPORT host=127.0.0.1 dbname=non_existing_pg_db
;* = port=PGPORT host=127.0.0.1

[users]
maxedout = max_user_connections=3
maxedout2 = max_user_connections=2 max_user_client_connections=2
maxedout3 = max_user_client_connections=2
poolsize1 = pool_size=1
pswcheck_not_in_auth_file = max_user_client_connections=2

[pgbouncer]
listen_addr = 127.0.0.1
auth_type = trust
pool_mode = statement
server_check_delay = 10
max_client_conn = 10
default_pool_size = 5
server_lifetime = 120
server_idle_timeout = 60
tcp_defer_accept = 0
tcp_keepalive = 0
tcp_socket_buffer = 4096
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
client_login_timeout = 5
"""


def _server_sql(cluster, query, dbname="postgres"):
    return cluster.sql(SERVER, query, dbname=dbname)


@pytest.fixture(scope="session")
def pgb_pg(pg_cluster):
    """shard-a prepared as pgbouncer's test server (idempotent: safe to run twice)."""
    have = {r[0] for r in _server_sql(pg_cluster, "SELECT datname FROM pg_database")}
    for db in [f"p{i}" for i in range(8)] + ["unconfigured_auth_database"]:
        if db not in have:
            _server_sql(pg_cluster, f'CREATE DATABASE "{db}"')
    roles = {r[0] for r in _server_sql(pg_cluster, "SELECT rolname FROM pg_roles")}
    with pg_cluster.connect(SERVER) as conn:
        for name, options, enc in ROLES:
            if name in roles:
                continue
            conn.execute(f"SET password_encryption = '{enc or 'scram-sha-256'}'")
            conn.execute(f'CREATE ROLE "{name}" LOGIN {options}')
        hba = conn.execute("SHOW hba_file").fetchone()[0]
    with open(hba) as f:
        text = f.read()
    if "# pgbouncer compat" not in text:
        rules = "# pgbouncer compat: p4 cleartext, p5 md5, p6 SCRAM\n"
        for db, method in (("p4", "password"), ("p5", "md5"), ("p6", "scram-sha-256")):
            rules += f"local {db} all {method}\nhost {db} all 127.0.0.1/32 {method}\n"
        with open(hba, "w") as f:
            f.write(rules + text)
        _server_sql(pg_cluster, "SELECT pg_reload_conf()")
    _server_sql(pg_cluster, "GRANT ALL ON SCHEMA public TO PUBLIC", dbname="p0")
    return pg_cluster


@contextlib.contextmanager
def as_neki_uid():
    """Connect as the Unix user neki runs as (the console's peer check): when the tests run
    as root and neki as `postgres`, switch the effective uid for the connect only."""
    if not IS_ROOT:
        yield
        return
    pw = pwd.getpwnam(run_as_user())
    os.setegid(pw.pw_gid)
    os.seteuid(pw.pw_uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


class Bouncer:
    """neki run the way pgbouncer's suite runs pgbouncer (see the module docstring)."""

    def __init__(self, inst, pg):
        self.inst = inst          # the conftest Neki (dir, process, log, cleanup)
        self.pg = pg
        self.port = inst.port
        self.host = "127.0.0.1"
        self.admin_host = str(inst.sockdir)
        self.ini_path = inst.ini
        self.log_path = inst.logfile
        self.auth_path = inst.dir / "userlist.txt"
        self.config_dir = inst.dir
        self.default_db = "p0"
        self.default_user = "postgres"

    # --- configuration

    def base_ini(self):
        pgport = self.pg.port(SERVER)
        return BASE_INI.replace("PGPORT", str(pgport)) + "\n".join([
            f"logfile = {self.log_path}",
            f"auth_file = {self.auth_path}",
            "pidfile = ",
            f"unix_socket_dir = {self.admin_host}",
            f"listen_port = {self.port}",
        ]) + "\n"

    def write_base(self):
        self.auth_path.write_text(USERLIST)
        os.chmod(self.auth_path, 0o644)
        self.write_config(self.base_ini())

    def write_config(self, text):
        self.ini_path.write_text(text)
        os.chmod(self.ini_path, 0o644)

    def config_text(self):
        return self.ini_path.read_text()

    def write_ini(self, line):
        """Append one line to the ini (a RELOAD applies it)."""
        with self.ini_path.open("a") as f:
            f.write(line + "\n")

    @contextlib.contextmanager
    def run_with_config(self, text):
        """Run with <text> as the whole ini (RELOAD), then restore the old one (RELOAD)."""
        old = self.config_text()
        self.write_config(text)
        try:
            self.admin("RELOAD")
            yield self
        finally:
            self.write_config(old)
            self.admin("RELOAD")

    def config_block(self, databases, extra="", users=""):
        """A small complete ini in the style of the suite's run_with_config configs."""
        text = f"[databases]\n{databases}\n\n"
        if users:
            text += f"[users]\n{users}\n\n"
        return text + "\n".join([
            "[pgbouncer]",
            f"listen_addr = {self.host}",
            f"listen_port = {self.port}",
            "auth_type = trust",
            "admin_users = pgbouncer",
            f"logfile = {self.log_path}",
            f"auth_file = {self.auth_path}",
            extra,
        ]) + "\n"

    def pg_dsn(self, **kw):
        return self.pg.dsn(SERVER, **kw)

    # --- running

    def start(self):
        self.inst.start(args=("--quiet",), wait=False)
        self.wait_until_running()

    def wait_until_running(self, timeout=15):
        def up():
            if self.inst.proc.poll() is not None:
                raise NekiStartError(self.inst._failure("neki exited"))
            try:
                self.admin("SHOW VERSION")
                return True
            except psycopg.Error:
                return False
        wait_until(up, timeout, interval=0.05, what="the console to answer SHOW VERSION")
        self.inst.remember_pids()

    def stop(self):
        """SIGQUIT and wait, as the suite stops pgbouncer."""
        self.inst.signal(signal.SIGQUIT)
        self.inst.wait_exit(10)

    def restart(self):
        self.stop()
        self.start()

    # --- clients

    def _opts(self, kw, host=None, dbname=None, user=None):
        kw.setdefault("dbname", dbname or self.default_db)
        kw.setdefault("user", user or self.default_user)
        kw.setdefault("host", host or self.host)
        kw.setdefault("port", self.port)
        kw.setdefault("connect_timeout", 10)
        kw.setdefault("client_encoding", "UTF8")
        return kw

    def conn(self, autocommit=True, **kw):
        return psycopg.connect(autocommit=autocommit, **self._opts(kw))

    def sql(self, query, params=None, **kw):
        with self.conn(**kw) as c:
            cur = c.execute(query, params)
            return cur.fetchall() if cur.description is not None else None

    def sql_value(self, query, **kw):
        rows = self.sql(query, **kw)
        assert len(rows) == 1 and len(rows[0]) == 1, rows
        return rows[0][0]

    def test(self, **kw):
        return self.sql("select 1", **kw)

    def admin_conn(self, **kw):
        """A console session as user pgbouncer over the Unix socket (no password)."""
        opts = self._opts(kw, host=self.admin_host, dbname="pgbouncer", user="pgbouncer")
        with as_neki_uid():
            return psycopg.connect(autocommit=True, **opts)

    def admin(self, query, **kw):
        row_factory = kw.pop("row_factory", None)
        with self.admin_conn(**kw) as c:
            cur = c.cursor(row_factory=row_factory) if row_factory else c.cursor()
            cur.execute(query)
            return cur.fetchall() if cur.description is not None else None

    def admin_value(self, query):
        rows = self.admin(query)
        assert len(rows) == 1 and len(rows[0]) == 1, rows
        return rows[0][0]

    def config_value(self, key):
        return next(r[1] for r in self.admin("SHOW CONFIG") if r[0] == key)

    # --- the log

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    @contextlib.contextmanager
    def log_contains(self, pattern, times=None, timeout=5):
        """The block must make the log match <pattern> (<times> times exactly, when given).
        Lines are written by neki's processes as events happen: wait (bounded) for them."""
        start = len(self.log())
        yield
        def new():
            return self.log()[start:]
        if times is None:
            wait_until(lambda: re.search(pattern, new(), re.M), timeout,
                       what=f"log line /{pattern}/")
            return
        if times > 0:
            wait_until(lambda: len(re.findall(pattern, new(), re.M)) >= times, timeout,
                       what=f"{times} log lines /{pattern}/")
        found = len(re.findall(pattern, new(), re.M))
        assert found == times, f"/{pattern}/ logged {found} times, not {times}:\n{new()}"

    # --- the server

    def connection_count(self, dbname=None, users=("bouncer",)):
        """Backends of <users> (in <dbname>) on the test server, as pg_stat_activity sees."""
        query = "SELECT count(*) FROM pg_stat_activity WHERE usename = ANY(%s)"
        params = [list(users)]
        if dbname:
            query += " AND datname = %s"
            params.append(dbname)
        return self.pg.sql(SERVER, query, params)[0][0]


def start_bouncer(neki, pg, extra=""):
    """A started Bouncer; <extra> lines go at the end of the ini (e.g. "workers = 1")."""
    inst = neki(start=False)
    inst.admin_port = 0   # the ini sets no admin_listen_port: do not wait for one
    b = Bouncer(inst, pg)
    b.write_base()
    if extra:
        b.write_ini(extra)
    b.start()
    return b


@pytest.fixture
def bouncer(neki, pgb_pg):
    """neki on the pgbouncer-style ini, started as `neki --quiet test.ini` and ready when its
    console answers SHOW VERSION."""
    yield start_bouncer(neki, pgb_pg)


@pytest.fixture
def one_worker_bouncer(neki, pgb_pg):
    """The same with `workers = 1`: for what depends on one process holding every server
    link (pgbouncer is one process; neki's links belong to the worker that opened them)."""
    yield start_bouncer(neki, pgb_pg, "workers = 1")


__all__ = ["Bouncer", "bouncer", "one_worker_bouncer", "start_bouncer", "pgb_pg", "as_neki_uid", "LONG_PASSWORD", "SERVER",
           "free_port"]
