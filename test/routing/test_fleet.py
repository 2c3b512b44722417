"""
Several neki hosts on one cluster (issue 23): three neki instances route one sharded
database over the same shards and share the store on the authoritative shard. DDL through
one host reaches every host's catalog (schema versions on the store, NOTIFY neki_catalog),
the accepting host's NOTICE names __neki.wait_for_ddl(schema_version, cluster_version),
which returns once every live host has the new catalog; a setval() through one host makes
every host drop its reserved sequence values. Real Postgres shards, psycopg.
"""
import re
import threading
import time

import pytest

from conftest import wait_until
from test_routing import psycopg, routing_instance, routing_neki, sharded_database

BATCH = 1000        # sequence_batch: a host holding a stale batch would hand out 1000 values

QUARTERS = [("shard-a", None, "40"), ("shard-b", "40", "80"), ("shard-c", "80", "c0"),
            ("shard-d", "c0", None)]


def quarter_ranges():
    """The key ranges of QUARTERS."""
    ranges = []
    for uid, start, end in QUARTERS:
        r = {"shard_uid": uid}
        if start:
            r["start"] = start
        if end:
            r["end"] = end
        ranges.append(r)
    return ranges


def topology(db):
    ranges = quarter_ranges()
    return {
        "databases": {db: {"schemas": {"public": {
            "tables": {"moved": {"shard_group": "data"}},
            "sequences": {"ticket": {"shard_group": "authoritative"}},
        }}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "data", "default_shard_index": "by_customer", "key_ranges": ranges},
        ],
        "shard_indexes": {"by_customer": {"type": "xxhash", "columns": ["customer_id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


class Host:
    """One neki host of the fleet."""

    def __init__(self, cluster, inst, db):
        self.cluster, self.neki, self.db = cluster, inst, db

    def connect(self, **kw):
        return self.neki.connect(dbname=self.db, **kw)

    def run(self, sql):
        with self.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql)
            return cur.fetchall() if cur.description is not None else None

    def routed(self):
        try:
            self.run("EXPLAIN (NEKI_PLAN) SELECT 1")
            return True
        except psycopg.Error:
            return False


@pytest.fixture(scope="module")
def fleet(pg_cluster):
    """Hosts A (which set the topology), B and C (which found the store themselves)."""
    settings = {"sequence_batch": BATCH}
    with sharded_database(pg_cluster, "fleet") as db, \
            routing_neki(pg_cluster, db, topology(db), Host, settings=settings) as a:
        others = [routing_instance(pg_cluster, db, settings) for _ in range(2)]
        try:
            for inst in others:
                inst.start()
            hosts = [a] + [Host(pg_cluster, inst, db) for inst in others]
            for h in hosts[1:]:
                wait_until(h.routed, 30, what="the other hosts route")
            yield hosts
        finally:
            problems = [p for inst in others for p in inst.cleanup()]
            assert not problems, problems


def ddl_with_notice(host, sql):
    """Run DDL on <host>; return the (schema_version, cluster_version) its NOTICE names."""
    notices = []
    with host.connect(autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        psycopg.ClientCursor(conn).execute(sql)
    found = [re.search(r"__neki\.wait_for_ddl\((\d+), (\d+)\)", n) for n in notices]
    found = [m for m in found if m]
    assert len(found) == 1, notices
    assert any(n.startswith("DDL is committed and the change is visible on this router")
               for n in notices), notices
    return int(found[0].group(1)), int(found[0].group(2))


def shard_of(host, cid):
    rows = host.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM moved WHERE "
                    f"customer_id = {cid}")
    found = [s for s, _, _ in QUARTERS if any(s in r[0] for r in rows)]
    assert len(found) == 1, rows
    return found[0]


def test_ddl_on_one_host_reaches_every_host(fleet):
    a, b, c = fleet
    s1, _ = ddl_with_notice(a, "CREATE TABLE moved (customer_id bigint NOT NULL, "
                               "id bigint NOT NULL, note text)")
    assert a.run(f"SELECT * FROM __neki.wait_for_ddl({s1}, 0, '20 seconds')") == [(s1,)]
    # B and C route by the table's column order as they know it now
    for host, cid in ((b, 1), (c, 2)):
        host.run(f"INSERT INTO moved VALUES ({cid}, 100, 'before')")
    # the same name, the shard key now in the second column
    ddl_with_notice(a, "DROP TABLE moved")
    s3, cv = ddl_with_notice(a, "CREATE TABLE moved (id bigint NOT NULL, "
                                "customer_id bigint NOT NULL, note text)")
    assert s3 > s1 and cv >= 1
    t0 = time.monotonic()
    assert a.run(f"SELECT * FROM __neki.wait_for_ddl({s3}, {cv}, '20 seconds')") == [(s3,)]
    assert time.monotonic() - t0 < 20
    # every host's registry row carries it
    rows = a.cluster.sql("auth", "SELECT count(*) FROM __neki.routers WHERE schema_version "
                         f">= {s3} AND heartbeat > now() - interval '10 seconds'", dbname=a.db)
    assert rows[0][0] >= 3

    # writes by key on B and C at once, with no column list: routed by the new layout
    errors = []

    def writer(host, base):
        try:
            with host.connect(autocommit=True) as conn:
                cur = psycopg.ClientCursor(conn)
                for i in range(20):
                    cur.execute(f"INSERT INTO moved VALUES ({base + i}, {base * 7 + i}, "
                                "'after')")
        except Exception as e:          # reported below
            errors.append(e)
    threads = [threading.Thread(target=writer, args=(h, base))
               for h, base in ((b, 1000), (c, 2000))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    want = {(base + i, base * 7 + i) for base in (1000, 2000) for i in range(20)}
    placed = {}
    for shard, _, _ in QUARTERS:
        for ident, cid in a.cluster.sql(shard, "SELECT id, customer_id FROM moved",
                                        dbname=a.db):
            placed[(ident, cid)] = shard
    assert set(placed) == want
    for (ident, cid), shard in placed.items():
        assert shard == shard_of(a, cid), (ident, cid, shard)


def test_wait_for_ddl_times_out_on_a_future_version(fleet):
    a = fleet[0]
    with pytest.raises(psycopg.Error) as ei:
        a.run("SELECT * FROM __neki.wait_for_ddl(999999, 0, '300 ms')")
    assert ei.value.diag.sqlstate == "57014"
    assert "timed out waiting for schema version 999999" in str(ei.value)


def test_setval_through_one_host_reaches_every_host(fleet):
    a, b, c = fleet
    s, cv = ddl_with_notice(a, "CREATE SEQUENCE ticket")
    a.run(f"SELECT * FROM __neki.wait_for_ddl({s}, {cv}, '20 seconds')")
    conns = {h: h.connect(autocommit=True) for h in (b, c)}
    try:
        for conn in conns.values():     # each host reserves a batch of BATCH values
            assert conn.execute("SELECT nextval('ticket')").fetchall()[0][0] <= 2 * BATCH
        a.run("SELECT setval('ticket', 50000)")
        for host, conn in conns.items():
            calls = []

            def past():
                calls.append(conn.execute("SELECT nextval('ticket')").fetchall()[0][0])
                return calls[-1] > 50000
            wait_until(past, 10, interval=0.05, what="the setval reaching another host")
            # a stale batch would give hundreds of values below it first
            assert len(calls) < 40, calls[:5]
    finally:
        for conn in conns.values():
            conn.close()


def test_stat_get_activity_lists_every_host(fleet):
    """stat_get_activity() through host A lists the client sessions of B and C too, each with
    its host id; it is composable like the other functions."""
    a, b, c = fleet
    conns = [h.connect(autocommit=True, application_name=f"act_{i}")
             for i, h in enumerate((b, c))]
    try:
        for conn in conns:      # each session is routed once (a server link it used)
            conn.execute("SELECT 1").fetchall()
        rows = a.run("SELECT host_id, database, application_name, state FROM "
                     "__neki.stat_get_activity() WHERE application_name LIKE 'act_%' "
                     "ORDER BY application_name")
        assert [r[2] for r in rows] == ["act_0", "act_1"], rows
        assert all(r[1] == a.db for r in rows)
        hosts = {r[0] for r in rows}
        assert len(hosts) == 2 and all(h.endswith((f":{b.neki.port}", f":{c.neki.port}"))
                                       for h in hosts), hosts
        # the caller's own session is there too
        mine = a.run("SELECT count(*) FROM __neki.stat_get_activity() WHERE host_id LIKE "
                     f"'%:{a.neki.port}'")
        assert mine[0][0] >= 1
    finally:
        for conn in conns:
            conn.close()


def test_type_created_through_one_host_has_the_authoritative_oid_on_every_host(fleet):
    """Authoritative OIDs follow DDL through another host: the enum created through A (its
    OIDs moved on a padded shard) reads with the authoritative OID through B and C."""
    a = fleet[0]
    a.cluster.sql("shard-a", "CREATE TYPE fleet_pad AS ENUM ('x')", dbname=a.db)
    ddl_with_notice(a, "CREATE TYPE fleet_mood AS ENUM ('sad', 'happy')")
    s, cv = ddl_with_notice(a, "ALTER TABLE moved ADD COLUMN m fleet_mood")
    assert a.run(f"SELECT * FROM __neki.wait_for_ddl({s}, {cv}, '20 seconds')") == [(s,)]
    oid = {srv: a.cluster.sql(srv, "SELECT 'fleet_mood'::regtype::oid::int", dbname=a.db)[0][0]
           for srv in ("auth", "shard-a")}
    assert oid["shard-a"] != oid["auth"]
    cid = next(c for c in range(5000, 5500) if shard_of(a, c) == "shard-a")
    a.run(f"INSERT INTO moved VALUES (1, {cid}, 'typed', 'happy')")
    for host in fleet:
        with host.connect(autocommit=True) as conn:
            cur = conn.execute("SELECT m FROM moved WHERE customer_id = %s", (cid,))
            assert cur.description[0].type_code == oid["auth"]
            assert cur.fetchall() == [("happy",)]
