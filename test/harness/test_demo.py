"""`make demo` / `make demo-stop`: test/harness/demo starts the cluster and neki, says what
works, and stops everything."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, neki_binary, pid_alive, port_accepts

DEMO = REPO / "test" / "harness" / "demo"


def demo(cmd, state, **kw):
    env = dict(os.environ, NEKI_DEMO_STATE=str(state))
    return subprocess.run([str(DEMO), cmd], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=180, **kw)


def test_demo_start_status_stop(tmp_path):
    if not neki_binary().exists():
        pytest.skip("neki is not built")
    state = tmp_path / "demo.env"
    started = demo("start", state)
    try:
        out = started.stdout
        assert started.returncode == 0, started.stdout + started.stderr
        env = dict(line.split("=", 1) for line in state.read_text().splitlines() if "=" in line)
        port, admin = int(env["LISTEN_PORT"]), int(env["ADMIN_PORT"])
        pid = int(re.search(r"neki is running \(pid (\d+)\)", out).group(1))
        assert pid_alive(pid)
        assert port_accepts(port) and port_accepts(admin)
        assert f"psql -h 127.0.0.1 -p {port} -U postgres demo" in out
        # it says honestly whether queries go through
        assert ("queries through neki work" in out) != ("does not serve queries yet" in out)
        assert "the admin console answers" in out
        # the storefront is applied and loaded: a routed read through neki, and the row sits
        # on the shard EXPLAIN (NEKI_PLAN) names
        assert "storefront topology applied (revision 1), sample rows loaded" in out, out
        psql = ["/usr/lib/postgresql/15/bin/psql", "-X", "-At", "-h", "127.0.0.1", "-U",
                "postgres", "-d", "demo"]
        q = subprocess.run(psql + ["-p", str(port), "-c",
                                   "SELECT name FROM customers WHERE id = 3",
                                   "-c", "EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                                   "SELECT name FROM customers WHERE id = 3"],
                           capture_output=True, text=True, timeout=30)
        assert q.returncode == 0, q.stderr
        lines = q.stdout.splitlines()
        assert lines[0] == "Linus"
        shard = [l.split(": ")[1] for l in lines if "Shards:" in l][0]
        var = shard.upper().replace("-", "_") + "_PORT"
        direct = subprocess.run(psql + ["-p", env[var], "-c", "SELECT id FROM customers"],
                                capture_output=True, text=True, timeout=30)
        assert "3" in direct.stdout.split()
        # the demo's GSI orders_by_id works: an order read by id goes through its lookup
        # row to its customer's shard, and every order has its lookup row
        q = subprocess.run(psql + ["-p", str(port), "-c",
                                   "SELECT customer_id, status FROM orders WHERE id = 201",
                                   "-c", "EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                                   "SELECT * FROM orders WHERE id = 201",
                                   "-c", "SELECT count(*) FROM orders"],
                           capture_output=True, text=True, timeout=30)
        assert q.returncode == 0, q.stderr
        lines = q.stdout.splitlines()
        assert lines[0] == "2|paid" and lines[-1] == "9", lines
        assert "Secondary Index: orders_by_id" in q.stdout, q.stdout
        lookups = sum(int(subprocess.run(
            psql + ["-p", env[s.upper().replace("-", "_") + "_PORT"], "-c",
                    "SELECT count(*) FROM orders_by_id"],
            capture_output=True, text=True, timeout=30).stdout.strip() or 0)
            for s in ("shard-a", "shard-b", "shard-c", "shard-d"))
        assert lookups == 9
        again = demo("start", state)
        assert again.returncode == 0 and "already running" in again.stdout
        status = demo("status", state)
        assert f"neki running, pid {pid}" in status.stdout
        assert status.stdout.count(" running") >= 7
        cluster_dir = env["NEKI_CLUSTER_DIR"]
    finally:
        stopped = demo("stop", state)
    assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    assert not pid_alive(pid)
    assert not os.path.exists(cluster_dir)
    assert not state.exists()
    assert demo("stop", state).stdout.strip() == "demo: not running"
