"""
Figures on the console that move with traffic (issue 4): SHOW STATS / STATS_TOTALS /
STATS_AVERAGES / TOTALS add up every worker's per-database counters from shm, and the admin
logs pgbouncer's `stats:` line every stats_period (log_stats).
"""
import re
import subprocess

import pytest

from conftest import wait_until


def pgbench(port, db, *args, timeout=120):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, db]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def show(inst, what):
    with inst.admin_connect(dbname="pgbouncer", user="admin") as conn:
        cur = conn.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def db_row(inst, what, db):
    rows = [r for r in show(inst, what) if r["database"] == db]
    return rows[0] if rows else None


@pytest.fixture
def stats_neki(pg_cluster, cluster_db, neki):
    port = pg_cluster.port("shard-a")
    return neki(settings={"workers": 2, "admin_users": "admin", "pool_mode": "transaction",
                          "default_pool_size": 4},
                databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}\n")


def test_stats_count_pgbench_transactions(stats_neki, cluster_db, tmp_path):
    """total_xact_count grows by exactly pgbench's transaction count (4 clients spread over
    2 workers), and the same figures appear in STATS_TOTALS and TOTALS."""
    script = tmp_path / "one.sql"
    script.write_text("BEGIN;\nSELECT 1;\nSELECT 2;\nEND;\n")
    clients, txns = 4, 25
    assert db_row(stats_neki, "STATS", cluster_db) is None     # no pool yet: no row
    out = pgbench(stats_neki.port, cluster_db, "-n", "-f", str(script), "-c", str(clients),
                  "-j", "2", "-t", str(txns))
    assert f"number of transactions actually processed: {clients * txns}" in out

    def settled():
        row = db_row(stats_neki, "STATS", cluster_db)
        return row if row and row["total_xact_count"] == clients * txns else None
    row = wait_until(settled, 5, what="the workers' published stats")
    assert row["total_query_count"] == 4 * clients * txns
    assert row["total_received"] > 0 and row["total_sent"] > 0
    assert row["total_server_assignment_count"] >= clients * txns
    assert row["avg_xact_count"] > 0 and row["avg_query_time"] > 0, row
    assert row["total_xact_time"] >= row["total_query_time"] / 4
    totals = db_row(stats_neki, "STATS_TOTALS", cluster_db)
    assert totals["xact_count"] == clients * txns
    assert totals["bytes_received"] == row["total_received"]
    avgs = db_row(stats_neki, "STATS_AVERAGES", cluster_db)
    assert avgs["xact_count"] > 0
    assert [r["database"] for r in show(stats_neki, "STATS")] == sorted([cluster_db,
                                                                        "pgbouncer"])
    # TOTALS adds the console database: one transaction per console session, as pgbouncer
    # counts it (the session's first command), so the SHOW STATS in the same session
    # reads the same console figure
    with stats_neki.admin_connect(dbname="pgbouncer", user="admin") as conn:
        total = dict(conn.execute("SHOW TOTALS").fetchall())
        console = [r for r in conn.execute("SHOW STATS").fetchall() if r[0] == "pgbouncer"]
    assert console[0][2] > 0    # total_xact_count: this test's console sessions so far
    assert total["total_xact_count"] == clients * txns + console[0][2]
    assert total["total_client_bytes"] == row["total_received"]


def test_log_stats_line(pg_cluster, cluster_db, neki):
    """With stats_period = 1 the admin logs pgbouncer's stats line every second, client
    logins/s after binds/s (6 logins in about 2 s: at least 2 a second in some line)."""
    port = pg_cluster.port("shard-a")
    inst = neki(settings={"workers": 2, "stats_period": 1},
                databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}\n")
    for _ in range(6):
        with inst.connect(dbname=cluster_db) as conn:
            for _ in range(4):
                conn.execute("SELECT 1")
    pattern = (r"LOG stats: (\d+) xacts/s, (\d+) queries/s, \d+ client parses/s, "
               r"\d+ server parses/s, \d+ binds/s, (\d+) client logins/s, in (\d+) B/s, "
               r"out \d+ B/s, xact \d+ us, query \d+ us, wait \d+ us$")
    wait_until(lambda: any(int(m.group(2)) > 0 and int(m.group(3)) >= 2
                           for m in re.finditer(pattern, inst.log(), re.M)),
               6, what="a stats line with queries and logins")


def test_lists_gathered_from_workers(stats_neki, cluster_db):
    """SHOW CLIENTS / SERVERS / POOLS / SOCKETS / LISTS / DATABASES list the workers' real
    sessions and links (every worker answers through its shm list area), with pgbouncer's
    global, consecutive ids; the console session itself is a client too."""
    inst, db = stats_neki, cluster_db
    first = inst.connect(dbname=db)
    first.execute("SELECT 1")                  # the pool logs in one link
    conns = [inst.connect(dbname=db, application_name=f"c{i}") for i in range(6)]
    try:
        clients = [r for r in show(inst, "CLIENTS") if r["database"] == db]
        ids = sorted(r["id"] for r in clients)
        assert len(ids) == 7
        # one counter for clients and servers: between the 6 later logins only the
        # links a worker's first login opened (for the server's parameters) took ids
        link_ids = {r["id"] for r in show(inst, "SERVERS") if r["database"] == db}
        span = set(range(ids[1], ids[-1] + 1))
        assert span - set(ids[1:]) <= link_ids and len(span) <= 6 + inst.settings["workers"]
        assert {r["state"] for r in clients} == {"idle"}
        assert sorted(r["application_name"] for r in clients)[1:] == [f"c{i}" for i in range(6)]
        assert any(r["database"] == "pgbouncer" and r["user"] == "admin"
                   for r in show(inst, "CLIENTS"))
        servers = [r for r in show(inst, "SERVERS") if r["database"] == db]
        assert servers and all(r["state"] in ("idle", "used") and r["remote_pid"] > 0
                               for r in servers)
        assert sum(r["clients"] for r in show(inst, "WORKERS")) >= 7

        conns[0].execute("BEGIN")              # holds its link until COMMIT
        conns[0].execute("SELECT 1")
        clients = {r["id"]: r for r in show(inst, "CLIENTS")}
        held = clients[ids[1]]
        assert held["state"] == "active" and held["link"]
        servers = {r["ptr"]: r for r in show(inst, "SERVERS") if r["database"] == db}
        assert servers[held["link"]]["state"] == "active"
        pool = [r for r in show(inst, "POOLS") if r["database"] == db]
        assert len(pool) == 1 and pool[0]["cl_active"] == 7 and pool[0]["cl_waiting"] == 0
        assert pool[0]["sv_active"] == 1
        assert pool[0]["sv_active"] + pool[0]["sv_idle"] + pool[0]["sv_used"] == len(servers)
        assert pool[0]["pool_mode"] == "transaction"
        sockets = show(inst, "SOCKETS")
        assert {r["state"] for r in sockets if r["database"] == db} >= {"cl_active",
                                                                       "sv_active"}
        lists = {r["list"]: r["items"] for r in show(inst, "LISTS")}
        assert lists["used_clients"] >= 8 and lists["used_servers"] == len(servers)
        assert lists["pools"] == 2                  # the database's and the admin's
        dbrow = [r for r in show(inst, "DATABASES") if r["name"] == db][0]
        assert dbrow["current_client_connections"] == 7
        assert dbrow["current_connections"] == len(servers)
        conns[0].execute("COMMIT")
    finally:
        for c in conns + [first]:
            c.close()


def test_metrics_endpoint(pg_cluster, cluster_db, neki):
    """metrics_listen_port serves OpenMetrics text: per-database stats counters, pools,
    workers and shards, ending with # EOF."""
    import urllib.request
    from conftest import free_port
    port, mport = pg_cluster.port("shard-a"), free_port()
    inst = neki(settings={"workers": 2, "metrics_listen_port": mport},
                databases=f"{cluster_db} = host=127.0.0.1 port={port} dbname={cluster_db}\n",
                shards=f"s1 = host=127.0.0.1 port={port}\n")
    with inst.connect(dbname=cluster_db) as conn:
        for _ in range(5):
            conn.execute("SELECT 1")

        def scrape():
            with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5) as r:
                assert r.headers["Content-Type"].startswith("application/openmetrics-text")
                return r.read().decode()

        def samples(text):
            out = {}
            for line in text.splitlines():
                if line and not line.startswith("#"):
                    name, value = line.rsplit(" ", 1)
                    out[name] = float(value)
            return out

        key = f'neki_stats_query_count_total{{database="{cluster_db}"}}'
        text = wait_until(lambda: (lambda t: t if samples(t).get(key) == 5 else None)(scrape()),
                          5, what="the published stats in the metrics")
        assert text.endswith("# EOF\n")
        assert "# TYPE neki_stats_query_count counter" in text
        s = samples(text)
        assert s[f'neki_pool_cl_active{{database="{cluster_db}",user="postgres"}}'] == 1
        assert sum(v for k, v in s.items() if k.startswith("neki_worker_up{")) == 2
        assert s['neki_shard_configured{shard="s1"}'] == 1


def mem(inst):
    return {r["name"]: r for r in show(inst, "MEM")}


def test_show_mem_follows_traffic(stats_neki, cluster_db):
    """SHOW MEM: pgbouncer's columns, one row per object cache summed over the workers;
    used and memtotal move with the clients, links, pools and prepared statements."""
    before = mem(stats_neki)
    assert list(before) == ["client_cache", "server_cache", "pool_cache", "iobuf_cache",
                            "server_prepared_statement_cache"]
    for r in before.values():
        assert r["size"] > 0 and r["free"] == 0
    assert before["server_cache"]["used"] == 0 and before["pool_cache"]["used"] == 0
    conns = [stats_neki.connect(dbname=cluster_db) for _ in range(4)]
    try:
        for i, c in enumerate(conns):
            c.execute("BEGIN")          # hold a link each (transaction mode)
            c.execute(f"select {i} + %s", (1,), prepare=True)   # a named Parse per client
        now = mem(stats_neki)
        assert now["client_cache"]["used"] >= before["client_cache"]["used"] + 4
        assert now["server_cache"]["used"] == 4
        assert 1 <= now["pool_cache"]["used"] <= 2                  # one per worker used
        assert now["server_prepared_statement_cache"]["used"] >= 4
        assert now["iobuf_cache"]["used"] >= 8                      # clients and links
        for name, r in now.items():
            if name != "iobuf_cache":
                assert r["memtotal"] >= r["size"] * r["used"], name
        assert now["iobuf_cache"]["memtotal"] > before["iobuf_cache"]["memtotal"]
    finally:
        for c in conns:
            c.close()
    wait_until(lambda: mem(stats_neki)["client_cache"]["used"] ==
               before["client_cache"]["used"], 5, what="the clients gone from SHOW MEM")
    assert mem(stats_neki)["server_prepared_statement_cache"]["used"] == 0
