"""
neki's own console rows on a routed database (issue 4, "The console"): SHOW SHARDS (uid,
host, port, state, links) counts the server links every worker holds to each shard, and SHOW
WORKERS (slot, pid, state, clients, links, revision, uptime) gives each worker's real figures;
both follow traffic. Uses test_txn's storefront fixture (its own neki and database).
"""
import os
import time

import pytest

from conftest import wait_until
from test_txn import store  # noqa: F401  (the module-scoped fixture)

try:
    import psycopg
except ImportError:
    psycopg = None


def show(st, what):
    with st.neki.admin_connect(dbname="pgbouncer", user="postgres") as conn:
        cur = conn.execute(f"SHOW {what}")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def shard_servers(st, uid):
    return [r for r in show(st, "SERVERS") if r["database"] == f"{st.db}@{uid}"]


def test_show_shards_links_follow_traffic(store, pg_cluster):
    st = store
    cids = [c for c in range(1, 21)]
    target = st.customer_shard(cids[0])
    mine = [c for c in cids if st.customer_shard(c) == target][:3]
    assert len(mine) == 3
    conns = [st.connect() for _ in mine]
    try:
        for conn, cid in zip(conns, mine):       # three transactions open on one shard
            conn.execute("BEGIN")
            assert conn.execute(f"SELECT id FROM customers WHERE id = {cid}").fetchone() == (cid,)
        rows = {r["uid"]: r for r in show(st, "SHARDS")}
        assert sorted(rows) == sorted(pg_cluster.shards + ["auth"])   # + the authoritative
        for uid, r in rows.items():
            assert r["state"] == "up" and r["port"] == pg_cluster.port(uid)
            assert r["links"] == len(shard_servers(st, uid)), uid
        assert rows[target]["links"] >= 3
        active = [s for s in shard_servers(st, target) if s["state"] == "active"]
        assert len(active) >= 3
        pids = {p for (p,) in pg_cluster.sql(target, "SELECT pid FROM pg_stat_activity "
                                                     "WHERE datname = %s", (st.db,))}
        assert {s["remote_pid"] for s in active} <= pids     # real backends on that shard
    finally:
        for conn in conns:
            conn.close()
    with st.neki.admin_connect(dbname="pgbouncer", user="postgres") as adm:
        adm.execute("RECONNECT")                 # every idle link closes
    wait_until(lambda: all(r["links"] == 0 for r in show(st, "SHARDS")), 5,
               what="no link left to any shard")


def test_show_workers_figures(store):
    st = store
    inst = st.neki
    workers = show(st, "WORKERS")
    assert len(workers) == inst.settings["workers"]
    assert {w["pid"] for w in workers} <= set(inst.children())
    assert {w["state"] for w in workers} == {"running"}
    with inst.admin_connect() as conn:
        rev = conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchone()[0]
    assert rev >= 1 and all(w["revision"] == rev for w in workers)
    started = time.time()
    base = {w["slot"]: w["clients"] for w in workers}
    conns = [st.connect() for _ in range(4)]
    try:
        for conn in conns:
            conn.execute("BEGIN")
            conn.execute("SELECT count(*) FROM customers")      # links on every shard

        def counted():
            now = show(st, "WORKERS")
            links = len(show(st, "SERVERS"))      # every link of this neki
            return (sum(w["clients"] - base[w["slot"]] for w in now) == 4 and
                    sum(w["links"] for w in now) == links and links >= 4)
        wait_until(counted, 5, what="4 more clients and every link counted")
    finally:
        for conn in conns:
            conn.close()
    wait_until(lambda: sum(w["clients"] for w in show(st, "WORKERS")) == sum(base.values()), 5,
               what="the clients gone from SHOW WORKERS")
    for w in show(st, "WORKERS"):
        with open(f"/proc/{w['pid']}/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            up = float(f.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK")
        assert abs(w["uptime"] - up) <= 2 + (time.time() - started), (w, up)
