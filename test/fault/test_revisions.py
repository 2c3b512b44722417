"""
Topology revisions applied over and over while a routed load runs (issue 21, faults):

- pgbench (simple and prepared protocol) runs single-shard transactions on a sharded table
  while a loop applies revisions (two documents in turn, one declaring a table more): no
  transaction fails and every UPDATE is counted once on the shards.
- A revision that moves nothing costs the shards no login: the admin's per-revision work
  (uuidv7() on every shard, the V4 catalog check on the authoritative shard) runs over
  connections it keeps, and only on the pairs a revision adds; before, each apply started a
  backend on every shard and one more on the authoritative shard, which the data path paid
  for in CPU (test/bench/revisions has the figures).
"""
import json

import pytest

from conftest import wait_until
from faultlib import DATA_SHARDS, ledger_neki, ledger_topology, pgbench, pgbench_result, psycopg
from test_routing import set_topology

ROWS = 200
SCRIPT = ("\\set id random(1, %d)\n"
          "BEGIN;\n"
          "UPDATE ledger SET who = who + 1 WHERE id = :id;\n"
          "SELECT note FROM ledger WHERE id = :id;\n"
          "COMMIT;\n" % ROWS)


@pytest.fixture(scope="module")
def ledger(pg_cluster):
    with ledger_neki(pg_cluster, "revs") as st:
        st.run("INSERT INTO ledger SELECT g, 0, 'n' FROM generate_series(1, %d) g" % ROWS)
        yield st


def total_who(st):
    return sum(st.cluster.sql(s, "SELECT coalesce(sum(who), 0) FROM ledger",
                              dbname=st.db)[0][0] for s in DATA_SHARDS)


def test_revisions_under_routed_pgbench(ledger):
    st = ledger
    before = total_who(st)
    docs = [ledger_topology(st.db), ledger_topology(st.db, extra_tables=("ledger_archive",))]
    runs = [pgbench(st.neki.port, st.db, SCRIPT, clients=2, count=250, extra=("-M", mode))
            for mode in ("simple", "prepared")]
    applied = []
    try:
        with st.neki.admin_connect() as conn:
            admin = psycopg.ClientCursor(conn)
            while any(p.poll() is None for p in runs) or len(applied) < 10:
                doc = docs[len(applied) % 2]
                rev = admin.execute("SELECT revision FROM __neki.set_data_topology(%s, true)",
                                    (json.dumps(doc),)).fetchone()[0]
                applied.append(rev)
                assert len(applied) < 2000, "pgbench does not end"
    finally:
        results = [pgbench_result(p) for p in runs]
    for rc, done, failed, out in results:
        assert rc == 0 and done == 500 and failed == 0, out
    assert applied == sorted(applied) and len(set(applied)) == len(applied), applied
    assert total_who(st) - before == 1000      # every committed UPDATE, once
    assert "ERROR" not in st.neki.log(), st.neki.log()[-3000:]


def session_counters(st):
    """{server: connection} reading pg_stat_database of the test database, uncached."""
    out = {}
    for s in (*DATA_SHARDS, "auth"):
        c = st.cluster.connect(s, dbname=st.db)
        c.execute("SET stats_fetch_consistency = none")
        out[s] = c
    return out


def sessions(conn, db):
    return conn.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s",
                        (db,)).fetchone()[0]


def test_revision_that_moves_nothing_costs_no_login(ledger):
    st = ledger
    counters = session_counters(st)
    try:
        set_topology(st.neki, ledger_topology(st.db))   # the pairs of this document are done
        before = {s: sessions(c, st.db) for s, c in counters.items()}
        for _ in range(5):
            set_topology(st.neki, ledger_topology(st.db))
        # one session of our own on each server, then wait until it is counted: any
        # session an apply started ended before it
        for s in counters:
            st.cluster.sql(s, "SELECT 1", dbname=st.db)
        for s, c in counters.items():
            wait_until(lambda: sessions(c, st.db) >= before[s] + 1, 10,
                       what=f"the probe session on {s} to be counted")
        started = {s: sessions(c, st.db) - before[s] - 1 for s, c in counters.items()}
        assert started == {s: 0 for s in counters}, started
    finally:
        for c in counters.values():
            c.close()
