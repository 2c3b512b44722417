"""
The admin process reached through the main port (issues 4 and 5): the console databases
`pgbouncer` and `neki` over TCP and the Unix socket with pgbouncer's access rules, and
`SELECT * FROM __neki.<fn>(...)` on a sharded database, forwarded to the admin. psql and
psycopg against real Postgres shards; every wait is a bounded poll.
"""
import json
import os
import subprocess

import pytest

from conftest import IS_ROOT, run_as_user
from test_neki_api import lit, run, set_sql, sharded, topology  # noqa: F401 (fixture)

try:
    import psycopg
except ImportError:
    psycopg = None

PSQL = "/usr/lib/postgresql/15/bin/psql"


def psql(inst, sql, user="postgres", db="pgbouncer", host="127.0.0.1", port=None,
         password=None, as_neki=False):
    """Run psql -At with one -c per statement of <sql> (a string or a list), in one session;
    (returncode, stdout, stderr)."""
    cmd = [PSQL, "-X", "-At", "-v", "ON_ERROR_STOP=1", "-h", str(host), "-p",
           str(port or inst.port), "-d", db, "-U", user]
    for stmt in [sql] if isinstance(sql, str) else sql:
        cmd += ["-c", stmt]
    if as_neki and IS_ROOT:
        cmd = ["runuser", "-u", run_as_user(), "--"] + cmd
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PGCONNECT_TIMEOUT": "10"}
    if password is not None:
        env["PGPASSWORD"] = password
    else:
        env["PGPASSWORD"] = ""
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=30, env=env)
    return res.returncode, res.stdout.strip(), res.stderr.strip()


def with_userlist(sharded, settings, text):
    inst = sharded(settings=settings, start=False)
    userlist = inst.dir / "userlist.txt"
    userlist.write_text(text)
    userlist.chmod(0o644)
    inst.update({"auth_file": userlist})
    inst.start()
    return inst


@pytest.mark.parametrize("db", ["pgbouncer", "neki"])
def test_console_on_main_port_tcp(sharded, db):
    inst = sharded()
    rc, out, err = psql(inst, "SHOW VERSION", db=db)
    assert rc == 0, err
    assert out.startswith("PgBouncer")
    rc, out, err = psql(inst, "SHOW LISTS", db=db)
    assert rc == 0, err
    assert "databases|" in out
    # the asking client is listed once, by the worker that relays it (its TCP address)
    rc, out, err = psql(inst, "SHOW CLIENTS", db=db)
    assert rc == 0, err
    rows = [r for r in out.split("\n") if r.startswith(f"C|postgres|{db}|")]
    assert len(rows) == 1 and rows[0].split("|")[4:6] == ["active", "127.0.0.1"], out
    # the same console commands act: PAUSE / RESUME from the main port
    assert psql(inst, "PAUSE", db=db)[0] == 0
    assert psql(inst, "RESUME", db=db)[0] == 0


def test_console_on_main_port_unix_socket(sharded):
    inst = sharded()
    rc, out, err = psql(inst, "SHOW VERSION", host=inst.sockdir, as_neki=True)
    assert rc == 0, err
    assert out.startswith("PgBouncer")


def test_local_pgbouncer_user_needs_no_password(sharded):
    """User pgbouncer on the Unix socket under neki's uid is admin whatever the auth_type;
    over TCP the same user must authenticate and be listed."""
    inst = with_userlist(sharded, {"auth_type": "md5", "admin_users": "postgres"},
                         '"postgres" "secret1"\n"pgbouncer" "secret3"\n')
    rc, out, err = psql(inst, "SHOW VERSION", user="pgbouncer", host=inst.sockdir, as_neki=True)
    assert rc == 0, err
    assert psql(inst, "PAUSE", user="pgbouncer", host=inst.sockdir, as_neki=True)[0] == 0
    assert psql(inst, "RESUME", user="pgbouncer", host=inst.sockdir, as_neki=True)[0] == 0
    # TCP: authenticated, but not in admin_users / stats_users -> pgbouncer's "not allowed"
    rc, out, err = psql(inst, "SHOW VERSION", user="pgbouncer", password="secret3")
    assert rc != 0 and "not allowed" in err, err
    rc, out, err = psql(inst, "SHOW VERSION", user="pgbouncer", password="wrong")
    assert rc != 0 and "password authentication failed" in err, err
    # an admin user logs in with its password on TCP and on the socket
    rc, out, err = psql(inst, "SHOW VERSION", password="secret1")
    assert rc == 0, err
    rc, out, err = psql(inst, "SHOW VERSION", host=inst.sockdir, password="secret1")
    assert rc == 0, err
    if IS_ROOT:   # another uid on the socket is not the local pgbouncer user
        rc, out, err = psql(inst, "SHOW VERSION", user="pgbouncer", host=inst.sockdir)
        assert rc != 0 and "no password supplied" in err, err   # a password was asked


def test_console_access_rules_on_main_port(sharded):
    inst = sharded(settings={"admin_users": "postgres", "stats_users": "viewer"})
    rc, out, err = psql(inst, "SHOW STATS", user="viewer")
    assert rc == 0, err
    rc, out, err = psql(inst, "PAUSE", user="viewer")
    assert rc != 0 and "admin access needed" in err, err
    rc, out, err = psql(inst, "SHOW VERSION", user="someone")
    assert rc != 0 and "not allowed" in err, err
    # psycopg (extended protocol) gets the console's clear error, as on the admin port
    with psycopg.connect(host="127.0.0.1", port=inst.port, dbname="pgbouncer",
                         user="postgres", autocommit=True) as conn:
        with pytest.raises(psycopg.Error,
                           match="extended query protocol not supported by admin console"):
            conn.execute("SHOW VERSION WHERE %s", (1,))


@pytest.fixture
def shop(sharded, pg_cluster, cluster_db):
    """A neki whose [databases] entry `shop` is sharded (topology=yes)."""
    port = pg_cluster.ports[pg_cluster.shards[0]]

    def make(settings=None):
        s = {"admin_users": "postgres", "stats_users": "viewer", "pool_mode": "transaction"}
        s.update(settings or {})
        return sharded(settings=s, databases={
            "shop": f"host=127.0.0.1 port={port} dbname={cluster_db} topology=yes"})
    return make


def test_neki_call_on_sharded_database(shop, cluster_db):
    inst = shop()
    with inst.connect(dbname="shop") as conn:
        assert conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchall() \
            == [(0,)]
    # psql (simple protocol) sets and reads a topology through the main port
    doc = topology(cluster_db)
    rc, out, err = psql(inst, set_sql(doc, overwrite=False), db="shop")
    assert rc == 0, err
    rev = int(out.split("|")[1])
    assert out == f"t|{rev}"
    rc, out, err = psql(inst, "SELECT * FROM __neki.get_data_topology()", db="shop")
    assert rc == 0, err
    assert json.loads(out)["shard_indexes"] == doc["shard_indexes"]
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(rev,)]
    # inside a transaction block: answered at once, the transaction goes on
    rc, out, err = psql(inst, ["BEGIN", "SELECT 1", "SELECT * FROM "
                               "__neki.get_data_topology_revision()", "SELECT 2", "COMMIT"],
                        db="shop")
    assert rc == 0, err
    assert out.split("\n") == ["BEGIN", "1", str(rev), "2", "COMMIT"]
    # errors come back as statement errors; the session stays usable
    rc, out, err = psql(inst, "SELECT * FROM __neki.no_such_function()", db="shop")
    assert rc != 0 and "__neki.no_such_function" in err, err
    # the extended protocol (parameters) is answered too (test_neki_ext.py), a call inside
    # another statement composed there as in a simple Query; the session goes on
    with inst.connect(dbname="shop", autocommit=True) as conn:
        assert conn.execute("SELECT * FROM __neki.wait_for_data_topology(%s)",
                            (rev,)).fetchall() == [(rev,)]
        assert conn.execute("SELECT count(*) > 0 FROM __neki.list_shards() WHERE port > %s",
                            (0,)).fetchall() == [(True,)]
        # in a simple-protocol Query too (test_neki_store.py)
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT count(*) > 0 FROM __neki.list_shards() WHERE port > 0")
        assert cur.fetchall() == [(True,)]
        assert conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchall() \
            == [(rev,)]


def test_neki_call_role_checks_on_main_port(shop, pg_cluster, cluster_db):
    """The admin port's role rules: stats_users read, only admin_users set."""
    viewer = f"viewer_{os.getpid()}"
    inst = shop(settings={"stats_users": viewer})
    pg_cluster.sql("shard-a", f"CREATE ROLE {viewer} LOGIN")
    try:
        rc, out, err = psql(inst, set_sql(topology(cluster_db), overwrite=False), user=viewer,
                            db="shop")
        assert rc != 0 and "permission denied for function set_data_topology" in err, err
        rc, out, err = psql(inst, "SELECT * FROM __neki.get_data_topology_revision()",
                            user=viewer, db="shop")
        assert rc == 0 and out == "0", err
    finally:
        pg_cluster.sql("shard-a", f"DROP ROLE {viewer}")


def test_neki_call_not_forwarded_on_plain_database(neki, pg_cluster, cluster_db):
    """A pass-through database sends __neki text to its server like any other statement."""
    port = pg_cluster.ports[pg_cluster.shards[0]]
    inst = neki(databases={"plain": f"host=127.0.0.1 port={port} dbname={cluster_db}"})
    rc, out, err = psql(inst, "SELECT * FROM __neki.get_data_topology_revision()", db="plain")
    assert rc != 0 and 'schema "__neki" does not exist' in err, err
