"""The test harness itself: test/harness/cluster and the pytest fixtures in test/conftest.py."""
import os
import signal
import socket
import subprocess
import time

import pytest

from conftest import (CLUSTER_SCRIPT, Cluster, parse_env, pid_alive, port_accepts, start_cluster,
                      tmp_base, wait_until)

psycopg = pytest.importorskip("psycopg")


def pids_with_cwd_in(d):
    """Processes whose working directory is inside d (every postgres process of a server
    runs in its data directory)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            cwd = os.readlink(f"/proc/{p}/cwd")
        except OSError:
            continue
        if (cwd == d or cwd.startswith(d + "/")) and pid_alive(int(p)):
            found.append(int(p))
    return found


def port_free(port):
    """Nothing listens on the port and a new listener can bind it."""
    if port_accepts(port):
        return False
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def check_cluster_works(c):
    assert c.shards == ["shard-a", "shard-b", "shard-c", "shard-d"]
    assert c.servers == c.shards + ["auth", "reference"]
    assert len(set(c.ports.values())) == 6, c.ports
    for name in c.servers:
        port = c.port(name)
        assert c.sql(name, "SHOW port") == [(str(port),)]
        assert c.sql(name, "SHOW fsync") == [("off",)]
        assert c.sql(name, "SHOW max_connections") == [("200",)]
        assert c.sql(name, "SELECT current_setting('server_version_num')::int / 10000") == [(15,)]
        # the unix socket lives in the cluster's own dir
        assert os.path.exists(os.path.join(c.sockdir, f".s.PGSQL.{port}"))
        with c.connect(name, host=c.sockdir) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)


def test_start_stop_twice_leaves_nothing():
    seen_dirs = []
    for _ in range(2):
        c = start_cluster()
        try:
            assert c.dir not in seen_dirs
            seen_dirs.append(c.dir)
            check_cluster_works(c)
            assert len(pids_with_cwd_in(c.dir)) >= 6
            ports = list(c.ports.values())
        finally:
            c.stop()
        assert not os.path.exists(c.dir)
        assert pids_with_cwd_in(c.dir) == []
        for port in ports:
            assert port_free(port), f"port {port} still in use after stop"


def test_stop_after_postmaster_was_killed_cleans_orphans():
    """kill -9 of a postmaster leaves its backends running; stop still removes everything."""
    c = start_cluster(shards=1)
    try:
        conn = c.connect("shard-a")          # a backend that outlives its postmaster
        backend = conn.info.backend_pid
        pidfile = os.path.join(c.dir, "shard-a", "postmaster.pid")
        with open(pidfile) as f:
            postmaster = int(f.readline())
        os.kill(postmaster, signal.SIGKILL)
        wait_until(lambda: not pid_alive(postmaster), 5, what="postmaster to die")
    finally:
        c.stop()
    assert not pid_alive(backend)
    assert pids_with_cwd_in(c.dir) == []
    assert not os.path.exists(c.dir)


def test_start_interrupted_cleans_up():
    """Ctrl-C while `cluster start` runs: nothing is left (dir, servers)."""
    d = os.path.join(tmp_base(), f"neki-cluster-int.{os.getpid()}")
    proc = subprocess.Popen([str(CLUSTER_SCRIPT), "start", "--dir", d],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        # interrupt once servers are being started (a data dir copied)
        wait_until(lambda: os.path.exists(os.path.join(d, "shard-a", "PG_VERSION"))
                   or proc.poll() is not None, 30, what="cluster start to reach the copies")
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode == 0:   # start finished before the signal arrived: stop it normally
        subprocess.run([str(CLUSTER_SCRIPT), "stop", d], check=True)
        pytest.skip("start completed before it could be interrupted")
    assert not os.path.exists(d)
    assert pids_with_cwd_in(d) == []


def test_stop_refuses_a_dir_that_is_not_a_cluster(tmp_path):
    (tmp_path / "keep").write_text("x")
    res = subprocess.run([str(CLUSTER_SCRIPT), "stop", str(tmp_path)], capture_output=True,
                         text=True)
    assert res.returncode != 0
    assert "not a cluster directory" in res.stderr
    assert (tmp_path / "keep").exists()


def test_printed_variables_are_shell_syntax(pg_cluster):
    env_text = subprocess.run([str(CLUSTER_SCRIPT), "env", pg_cluster.dir], check=True,
                              capture_output=True, text=True).stdout
    out = subprocess.run(["bash", "-c", 'eval "$1"; echo "$SHARD_A_PORT|$AUTH_PORT|'
                          '$REFERENCE_PORT|$PGHOST_SOCK|$SHARDS"', "-", env_text],
                         check=True, capture_output=True, text=True).stdout.strip()
    p = pg_cluster.ports
    shards = " ".join(f"{s}:{p[s]}" for s in pg_cluster.shards)
    assert out == f"{p['shard-a']}|{p['auth']}|{p['reference']}|{pg_cluster.sockdir}|{shards}"
    assert Cluster(parse_env(env_text)).ports == pg_cluster.ports


def test_servers_are_independent(pg_cluster, cluster_db):
    pg_cluster.sql("shard-a", "CREATE TABLE only_on_a (id int)", dbname=cluster_db)
    pg_cluster.sql("shard-a", "INSERT INTO only_on_a VALUES (1)", dbname=cluster_db)
    assert pg_cluster.sql("shard-a", "SELECT id FROM only_on_a", dbname=cluster_db) == [(1,)]
    for other in ["shard-b", "auth", "reference"]:
        assert pg_cluster.sql(other, "SELECT to_regclass('only_on_a') IS NULL",
                              dbname=cluster_db) == [(True,)]


@pytest.mark.parametrize("kind", ["test", "md5", "plain"])
@pytest.mark.parametrize("host", ["tcp", "socket"])
def test_password_roles(pg_cluster, kind, host):
    user = getattr(pg_cluster, f"{kind}_user")
    password = getattr(pg_cluster, f"{kind}_password")
    h = "127.0.0.1" if host == "tcp" else pg_cluster.sockdir
    with pg_cluster.connect("shard-b", user=user, password=password, host=h) as conn:
        assert conn.execute("SELECT current_user").fetchone() == (user,)
        # the test roles can create tables in public (PG 15 revoked that by default)
        conn.execute("CREATE TEMP TABLE t (a int)")
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        pg_cluster.connect("shard-b", user=user, password="wrong", host=h)
    with pytest.raises(psycopg.OperationalError, match="no password supplied|password"):
        pg_cluster.connect("shard-b", user=user, host=h, passfile="/dev/null")


def test_password_storage_and_superuser_trust(pg_cluster):
    rows = dict(pg_cluster.sql("auth", "SELECT rolname, left(rolpassword, 14) FROM pg_authid "
                                       "WHERE rolname LIKE 'neki_%'"))
    assert rows["neki_test"] == "SCRAM-SHA-256$"
    assert rows["neki_md5"].startswith("md5")
    # the superuser needs no password, over TCP and the socket
    assert pg_cluster.sql("auth", "SELECT rolsuper FROM pg_roles WHERE rolname = current_user") \
        == [(True,)]
    with pg_cluster.connect("auth", host=pg_cluster.sockdir) as conn:
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)


def test_scram_is_what_the_server_asks_for(pg_cluster):
    rules = pg_cluster.sql("reference", "SELECT type, user_name, auth_method FROM "
                                        "pg_hba_file_rules ORDER BY line_number")
    assert ("host", ["neki_test"], "scram-sha-256") in rules
    assert ("host", ["neki_md5"], "md5") in rules
    assert ("host", ["neki_plain"], "password") in rules
    # first match wins: the password roles come before the trust lines
    trust_at = rules.index(("host", ["all"], "trust"))
    assert rules.index(("host", ["neki_test"], "scram-sha-256")) < trust_at


def test_tls_is_available(pg_cluster):
    if not pg_cluster.ssl:
        pytest.skip("no openssl command: the cluster runs without TLS")
    with pg_cluster.connect("shard-c", sslmode="require") as conn:
        assert conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"
                            ).fetchone() == (True,)


def test_stop_and_restart_one_server(pg_cluster):
    port = pg_cluster.port("shard-d")
    pg_cluster.stop_server("shard-d")
    try:
        assert pg_cluster.status()["shard-d"] == "stopped"
        assert pg_cluster.status()["shard-c"] == "running"
        with pytest.raises(psycopg.OperationalError):
            pg_cluster.connect("shard-d")
    finally:
        pg_cluster.start_server("shard-d")
    assert pg_cluster.sql("shard-d", "SHOW port") == [(str(port),)]
