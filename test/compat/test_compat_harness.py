"""pgbouncer's own test harness, run with neki in pgbouncer's place: a pgbouncer test.ini
(forced users, an empty `pidfile =`, no admin port of neki's), `neki --quiet test.ini`, then
waiting for `SHOW VERSION` as user pgbouncer over the Unix socket, several instances at once."""
import socket
import subprocess

import pytest

from compat import db_line
from conftest import IS_ROOT, run_as_user

PSQL = "/usr/lib/postgresql/15/bin/psql"


def pgbouncer_ini(n, pg, db):
    """The shape of pgbouncer's test/test.ini, pointed at shard-a, with the lines its
    harness appends (logfile, auth_file, an empty pidfile, unix_socket_dir, listen_port)."""
    port = pg.port("shard-a")
    return f"""[databases]
p0 = port={port} host=127.0.0.1 dbname={db} user=postgres pool_size=2
p3 = port={port} host=127.0.0.1 dbname={db} user=postgres pool_mode=session
hostlist2 = port={port} host=127.0.0.1,127.0.0.1 dbname={db} user=postgres
hostlist_good_first = port={port} host=127.0.0.1,127.0.0.3 dbname={db} user=postgres load_balance_hosts=disable
varcache_change = port={port} host=127.0.0.1 dbname={db} client_encoding=SQL_ASCII
p8 = port={port} host=127.0.0.1 dbname={db} connect_query='set enable_seqscan=off; set enable_nestloop=off'
primary_first = port={port} host=127.0.0.1,127.0.0.2 dbname={db} user=postgres target_session_attrs=primary
standby_second = port={port} host=127.0.0.1,127.0.0.2 dbname={db} user=postgres target_session_attrs=standby
;* = port={port} host=127.0.0.1

[users]
maxedout = max_user_connections=3
poolsize1 = pool_size=1

[pgbouncer]
logfile = test.log
pidfile = test.pid
listen_addr = 127.0.0.1
listen_port = 6667
unix_socket_dir = /tmp
auth_type = trust
auth_file = userlist.txt
pool_mode = statement
server_check_delay = 10
max_client_conn = 10
default_pool_size = 5
server_lifetime = 120
server_idle_timeout = 60
tcp_defer_accept = 0
tcp_keepalive = 0
tcp_socket_buffer = 4096
track_extra_parameters = search_path, intervalstyle
ignore_startup_parameters = extra_float_digits
server_login_retry = 1
client_login_timeout = 5

logfile = {n.logfile}
auth_file = {n.userlist}
pidfile = 
unix_socket_dir = {n.sockdir}
listen_port = {n.port}
"""


def console(n, sql):
    """psql as user pgbouncer over the Unix socket, under neki's own uid (no password)."""
    cmd = [PSQL, "-X", "-At", "-h", str(n.sockdir), "-p", str(n.port), "-U", "pgbouncer",
           "-d", "pgbouncer", "-c", sql]
    if IS_ROOT:
        cmd = ["runuser", "-u", run_as_user(), "--"] + cmd
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                         env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
                              "PGCONNECT_TIMEOUT": "10"})
    return res.returncode, res.stdout.strip(), res.stderr.strip()


def start_like_pgbouncer(neki, pg, db):
    n = neki(start=False)
    n.settings.pop("pidfile")         # the ini has `pidfile =`: no pidfile to wait for
    n.write_ini(pgbouncer_ini(n, pg, db))
    n.admin_port = 0                  # the harness only knows the main port
    n.start(args=("--quiet",))
    return n


@pytest.fixture
def default_admin_port_taken():
    """Hold 127.0.0.1:6433 (neki's default admin port) if nobody else does already."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", 6433))
        s.listen(1)
    except OSError:
        pass          # taken by someone else: just as good
    yield
    s.close()


def test_pgbouncer_test_ini_runs_unchanged(pg_cluster, cluster_db, neki,
                                           default_admin_port_taken):
    """Two instances from pgbouncer-style files at once: neither names an admin port, the
    default one is taken, both start (a warning) and serve the console on the main port."""
    first = start_like_pgbouncer(neki, pg_cluster, cluster_db)
    second = start_like_pgbouncer(neki, pg_cluster, cluster_db)
    for n in (first, second):
        rc, out, err = console(n, "show version")
        assert rc == 0, err + n.log()
        assert out.startswith("PgBouncer 1.25.2")
        n.wait_log(r"WARNING could not listen on 127\.0\.0\.1:6433: Address already in use "
                   r"\(the default admin_listen_port\); the admin console is served on the "
                   r"main port only")
        assert "\n" not in n.output().strip()      # --quiet: nothing on stderr
        with n.connect("p0") as c:
            assert c.execute("select current_user").fetchone() == ("postgres",)
        with n.connect("p8") as c:
            assert c.execute("show enable_seqscan").fetchone() == ("off",)
    assert not (first.dir / "test.pid").exists()


def test_explicit_admin_port_in_use_is_still_fatal(pg_cluster, cluster_db, neki):
    """An admin_listen_port the file names must be had: that stays a start-up error."""
    first = neki(databases=db_line(pg_cluster, cluster_db))
    second = neki(settings={"admin_listen_port": first.admin_port}, start=False)
    second.start(wait=False)
    assert second.wait_exit(10) == 1
    assert f"could not listen on 127.0.0.1:{first.admin_port}: Address already in use" in \
        second.log()
