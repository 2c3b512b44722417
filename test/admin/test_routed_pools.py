"""
SHOW POOLS / CLIENTS and the metrics of a sharded database (issue 6): the pools of the
shards (`<db>@<shard>`) count the routed sessions waiting for one of their links (cl_waiting,
what operators alert on) and those holding one (cl_active); SHOW CLIENTS shows such a session
`waiting`, or `active` with the link it holds, and the database's own row counts it as its
client the same way.
"""
import sys
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "routing"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire  # noqa: E402
from test_routing import (Store, create_schema, psycopg, routing_neki,  # noqa: E402
                          sharded_database, topology)


def show(st, what):
    with st.neki.admin_connect(dbname="pgbouncer") as conn:
        cur = conn.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        return [dict(zip(names, row)) for row in cur.fetchall()]


def pool_row(st, database):
    rows = [r for r in show(st, "POOLS") if r["database"] == database]
    return rows[0] if rows else None


def metric(port, name, database):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    key = f'{name}{{database="{database}",user="postgres"}}'
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


@pytest.fixture(scope="module")
def routed(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    mport = free_port()
    with sharded_database(pg_cluster, "rpools") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"default_pool_size": 1, "metrics_listen_port": mport,
                                   "query_wait_timeout": 30}) as st:
        create_schema(st, reference=False)
        st.run("INSERT INTO customers VALUES (1, 'one', NULL)")
        st.mport = mport
        rows = st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers WHERE id = 1")
        st.shard = next(s for s in pg_cluster.shards if any(s in r[0] for r in rows))
        yield st


def test_show_pools_counts_routed_sessions(routed):
    """pool_size 1: A holds the shard's link in a transaction, B waits for it. The shard
    pool's row says cl_active 1, cl_waiting 1 (and the metrics too), SHOW CLIENTS says B
    waits and A holds the link SHOW SERVERS lists for that pool; after A's COMMIT B runs and
    both rows go back to 0 once B is done."""
    st, pool = routed, f"{routed.db}@{routed.shard}"
    a = st.connect()
    b = Wire(st.neki.port)
    try:
        a.execute("BEGIN")
        a.execute("SELECT name FROM customers WHERE id = 1")
        b.login(database=st.db, extra={"application_name": "waiter"})
        b.send(b"Q", b"SELECT name FROM customers WHERE id = 1\0")
        wait_until(lambda: (pool_row(st, pool) or {}).get("cl_waiting") == 1, 10,
                   what="B counted as waiting")
        row = pool_row(st, pool)
        assert (row["cl_active"], row["sv_active"], row["sv_idle"]) == (1, 1, 0), row
        assert (pool_row(st, st.db)["cl_waiting"], pool_row(st, st.db)["cl_active"]) == (1, 1)
        assert metric(st.mport, "neki_pool_cl_waiting", pool) == 1
        assert metric(st.mport, "neki_pool_cl_active", pool) == 1
        clients = {c["application_name"]: c for c in show(st, "CLIENTS") if c["database"] == st.db}
        servers = {s["ptr"]: s for s in show(st, "SERVERS")}
        assert clients["waiter"]["state"] == "waiting" and clients["waiter"]["link"] == ""
        holder = next(c for n, c in clients.items() if n != "waiter")
        assert holder["state"] == "active"
        assert servers[holder["link"]]["database"] == pool
        sockets = [s for s in show(st, "SOCKETS") if s["application_name"] == "waiter"]
        assert sockets[0]["state"] == "cl_waiting"
        a.execute("COMMIT")
        msgs = b.read_until("Z")
        assert ("D" in [m[0] for m in msgs]) and "E" not in [m[0] for m in msgs], msgs
        wait_until(lambda: (lambda r: (r["cl_active"], r["cl_waiting"]) == (0, 0))(
            pool_row(st, pool)), 10, what="no routed session uses the pool")
        assert pool_row(st, st.db)["cl_waiting"] == 0
    finally:
        a.close()
        b.close()


def worker_clients(st):
    return {r["slot"]: r["clients"] for r in show(st, "WORKERS")}


def on_worker(st, slot, other):
    """A raw connection logged in on worker <slot> (<other>: not on it), found by SHOW
    WORKERS' client counts (bounded tries)."""
    for _ in range(40):
        before = worker_clients(st)
        w = Wire(st.neki.port)
        w.login(database=st.db)
        after = wait_until(lambda: (lambda c: c if sum(c.values()) > sum(before.values())
                                    else None)(worker_clients(st)), 5, what="client counted")
        landed = next(k for k in after if after[k] > before.get(k, 0))
        if (landed == slot) != other:
            return w, landed
        w.close()
        wait_until(lambda: sum(worker_clients(st).values()) == sum(before.values()), 5,
                   what="client gone")
    pytest.skip("could not place a client on the other worker")


def test_routed_waiter_on_another_worker(routed):
    """pool_size is global: when the shard's only link is idle in one worker, a routed
    session waiting in the other is counted in the pool's waiters of every worker, so the
    first worker closes its idle link for it (as for pass-through clients) instead of the
    session waiting until query_wait_timeout."""
    st = routed
    a, slot = on_worker(st, None, True)
    try:
        msgs = a.query("SELECT name FROM customers WHERE id = 1")   # the link: idle there
        assert "E" not in [m[0] for m in msgs], msgs
        b, _ = on_worker(st, slot, True)
        try:
            b.send(b"Q", b"SELECT name FROM customers WHERE id = 1\0")
            msgs = b.read_until("Z")      # Wire's timeout: 10 s (query_wait_timeout 30 s)
            assert "E" not in [m[0] for m in msgs], msgs
        finally:
            b.close()
    finally:
        a.close()
