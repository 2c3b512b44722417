"""target_session_attrs of a [databases] entry (pgbouncer's test_target_session_attrs.py): a
host list of shard-a (127.0.0.1) and a streaming standby of it on 127.0.0.2, same port; neki
keeps only servers that qualify, tries the next host otherwise, and says why."""
import os
import shutil
import subprocess
import time

import psycopg
import pytest

from compat import admin
from conftest import IS_ROOT, make_private_dir, run_as_user, wait_until

PGBIN = "/usr/lib/postgresql/15/bin"


def as_owner(cmd):
    return (["runuser", "-u", run_as_user(), "--"] if IS_ROOT else []) + cmd


def run(cmd, **kw):
    return subprocess.run(as_owner(cmd), capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}, **kw)


@pytest.fixture(scope="module")
def standby(pg_cluster):
    """A hot standby of shard-a on 127.0.0.2, listening on shard-a's port number."""
    d = make_private_dir("neki-standby.")
    data = d / "data"
    port = pg_cluster.port("shard-a")
    res = run([f"{PGBIN}/pg_basebackup", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
               "-D", str(data), "-R", "-X", "stream", "--checkpoint=fast", "--no-sync"])
    assert res.returncode == 0, res.stderr
    with open(data / "postgresql.conf", "a") as f:
        f.write(f"\nlisten_addresses = '127.0.0.2'\nport = {port}\n"
                f"unix_socket_directories = '{d}'\nhot_standby = on\n")
    res = run([f"{PGBIN}/pg_ctl", "-D", str(data), "-l", str(d / "log"), "-w", "-t", "60",
               "start"])
    assert res.returncode == 0, res.stderr + (d / "log").read_text()
    try:
        yield "127.0.0.2"
    finally:
        run([f"{PGBIN}/pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(d, ignore_errors=True)


def on_standby(pg, db, sql):
    with psycopg.connect(host="127.0.0.2", port=pg.port("shard-a"), dbname=db,
                         user="postgres", autocommit=True, connect_timeout=5) as c:
        return c.execute(sql).fetchall()


def wait_replicated(pg, db):
    def there():
        try:
            return on_standby(pg, db, "select 1") == [(1,)]
        except psycopg.OperationalError:
            return False
    wait_until(there, 30, what=f"database {db} on the standby")


def tsa_databases(pg, db, entries):
    port = pg.port("shard-a")
    return "\n".join(f"{name} = host={hosts} port={port} dbname={db} " + extra
                     for name, hosts, extra in entries)


ENTRIES = [
    ("tsa_primary", "127.0.0.2,127.0.0.1", "target_session_attrs=primary"),
    ("tsa_standby", "127.0.0.1,127.0.0.2", "target_session_attrs=standby"),
    ("tsa_read_write", "127.0.0.2,127.0.0.1", "target_session_attrs=read-write"),
    ("tsa_read_only", "127.0.0.1,127.0.0.2", "target_session_attrs=read-only"),
    ("tsa_any", "127.0.0.2,127.0.0.1", "target_session_attrs=any load_balance_hosts=disable"),
    ("tsa_default", "127.0.0.1,127.0.0.2", ""),
    ("tsa_cq", "127.0.0.1", "target_session_attrs=read-only "
     "connect_query='SET default_transaction_read_only = on'"),
    ("tsa_reload", "127.0.0.2,127.0.0.1", "target_session_attrs=any load_balance_hosts=disable"),
]


def start(neki, pg, db, **settings):
    wait_replicated(pg, db)
    return neki(settings={"admin_users": "postgres", "server_login_retry": 1,
                          "client_login_timeout": 5, **settings},
                databases=tsa_databases(pg, db, ENTRIES))


def in_recovery(n, name, **kw):
    with n.connect(name, **kw) as c:
        return c.execute("SELECT pg_is_in_recovery()").fetchone()[0]


@pytest.mark.parametrize("name,expected", [("tsa_primary", False), ("tsa_standby", True),
                                           ("tsa_read_write", False), ("tsa_read_only", True),
                                           ("tsa_any", True)])
def test_selects_a_matching_server(pg_cluster, cluster_db, neki, standby, name, expected):
    n = start(neki, pg_cluster, cluster_db)
    assert in_recovery(n, name) is expected
    assert in_recovery(n, name) is expected
    if name in ("tsa_primary", "tsa_read_write"):   # the standby came first and was refused
        n.wait_log(r"127\.0\.0\.2:\d+ closing because: server does not satisfy "
                   r"target_session_attrs \(age=")


def test_default_any_uses_both_servers(pg_cluster, cluster_db, neki, standby):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect("tsa_default") as c1, n.connect("tsa_default") as c2:
        seen = {c.execute("SELECT pg_is_in_recovery()").fetchone()[0] for c in (c1, c2)}
    assert seen == {False, True}, n.log()


def test_accepted_server_reports_its_parameters(pg_cluster, cluster_db, neki, standby):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect("tsa_primary") as c:
        assert c.info.parameter_status("in_hot_standby") == "off"
        assert c.info.parameter_status("default_transaction_read_only") == "off"
    with n.connect("tsa_cq") as c:   # connect_query ran before the check
        assert c.execute("SELECT pg_is_in_recovery()").fetchone() == (False,)
        assert c.info.parameter_status("default_transaction_read_only") == "on"


def test_no_server_qualifies(pg_cluster, cluster_db, neki):
    """A read-write entry over a primary made read-only: every login is refused; the first
    client waits until client_login_timeout (pgbouncer's "server down"), and so does the next
    one: the cached error of server_login_retry is for logged-in clients, a client waiting
    for its welcome waits for a login of its own (test_compat_pooling.py)."""
    pg_cluster.sql("shard-a", f'ALTER DATABASE "{cluster_db}" SET '
                   "default_transaction_read_only = on")
    port = pg_cluster.port("shard-a")
    n = neki(settings={"server_login_retry": 30, "client_login_timeout": 2, "workers": 1},
             databases=f"rw = host=127.0.0.1 port={port} dbname={cluster_db} "
                       "target_session_attrs=read-write\n"
                       f"ro = host=127.0.0.1 port={port} dbname={cluster_db} "
                       "target_session_attrs=read-only")
    assert in_recovery(n, "ro") is False
    with pytest.raises(psycopg.OperationalError, match=r"client_login_timeout \(server down\)"):
        n.connect("rw")
    n.wait_log(r"closing because: server does not satisfy target_session_attrs \(age=")
    with pytest.raises(psycopg.OperationalError, match=r"client_login_timeout \(server down\)"):
        n.connect("rw")


def test_reload_with_new_attrs_replaces_the_link(pg_cluster, cluster_db, neki, standby):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect("tsa_reload") as c:
        pid, rec = c.execute("SELECT pg_backend_pid(), pg_is_in_recovery()").fetchone()
    assert rec is True
    n.databases = "\n".join(
        ln.replace("target_session_attrs=any", "target_session_attrs=primary")
        if ln.startswith("tsa_reload ") else ln for ln in n.databases.splitlines())
    n.write_ini()
    admin(n, "RELOAD")

    def old_gone():
        return all(r["remote_pid"] != pid for r in admin(n, "SHOW SERVERS", dicts=True))
    try:
        wait_until(old_gone, 10, what="the old link to close")
    except TimeoutError:
        raise AssertionError(f"{admin(n, 'SHOW SERVERS', dicts=True)}\n{n.ini_text()}\n"
                             f"{n.log()}") from None
    with n.connect("tsa_reload") as c:
        pid2, rec = c.execute("SELECT pg_backend_pid(), pg_is_in_recovery()").fetchone()
    assert rec is False and pid2 != pid


def test_prefer_standby_is_refused(pg_cluster, cluster_db, neki):
    n = neki(settings={"admin_users": "postgres"},
             databases=f"x = host=127.0.0.1 port={pg_cluster.port('shard-a')} "
                       "target_session_attrs=primary")
    n.databases = n.databases.replace("=primary", "=prefer-standby")
    n.write_ini()
    with pytest.raises(psycopg.Error, match="RELOAD failed"):
        admin(n, "RELOAD")
    n.wait_log(r'invalid value "prefer-standby" for parameter target_session_attrs')
