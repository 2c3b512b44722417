"""
The __neki topology API on the admin port (issue 5, "Revisions and the __neki API"):
set/get round trip, expected_revision races, wait_for_data_topology across workers and
hosts, crash safety of the store, booting from the cache file, validation errors and role
checks. Real Postgres shards from the pg_cluster fixture; every wait is a bounded poll.
"""
import json
import os
import signal
import threading

import pytest

from conftest import wait_until

try:
    import psycopg
except ImportError:
    psycopg = None


def topology(db, groups=("shard-a", "shard-b", "shard-c", "shard-d"), table="orders"):
    """A small storefront topology: authority on shard-a, one sharded group over <groups>."""
    n = len(groups)
    bounds = [format(i * 16 // n, "x") for i in range(n)] + [None]
    ranges = []
    for i, uid in enumerate(groups):
        r = {"shard_uid": uid}
        if i > 0:
            r["start"] = bounds[i]
        if i < n - 1:
            r["end"] = bounds[i + 1]
        ranges.append(r)
    return {
        "databases": {db: {"schemas": {"public": {"tables": {
            table: {"shard_group": "customer_data"}}}}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "shard-a"}]},
            {"uid": "customer_data", "default_shard_index": "by_customer",
             "key_ranges": ranges},
        ],
        "shard_indexes": {"by_customer": {"type": "xxhash", "columns": ["customer_id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


def lit(value):
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def set_sql(doc, overwrite=True, options=None):
    opts = "NULL" if options is None else lit(json.dumps(options))
    return (f"SELECT * FROM __neki.set_data_topology({lit(json.dumps(doc))}, "
            f"{'true' if overwrite else 'false'}, {opts})")


def run(inst, sql, user="postgres", port=None):
    with inst.connect(dbname="neki", user=user, port=port or inst.admin_port) as conn:
        cur = conn.execute(sql)
        return cur.fetchall() if cur.description is not None else None


def run_err(inst, sql, user="postgres"):
    with pytest.raises(psycopg.Error) as ei:
        run(inst, sql, user)
    return ei.value


@pytest.fixture
def sharded(pg_cluster, cluster_db, neki):
    """A factory of neki instances whose [shards] point at the test database."""
    def make(settings=None, **kw):
        s = {"workers": 2, "admin_users": "postgres", "stats_users": "viewer"}
        s.update(settings or {})
        return neki(settings=s, shards=pg_cluster.shards_section(dbname=cluster_db), **kw)
    return make


def test_set_get_round_trip(sharded, pg_cluster, cluster_db):
    inst = sharded()
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(0,)]
    doc = topology(cluster_db)
    assert run(inst, set_sql(doc, overwrite=False, options={"comment": "first"})) == [(True, 1)]
    assert run(inst, "SELECT __neki.get_data_topology_revision()") == [(1,)]
    got = json.loads(run(inst, "SELECT * FROM __neki.get_data_topology()")[0][0])
    assert got["shard_groups"][1]["uid"] == "customer_data"
    assert got["databases"] == doc["databases"]
    # stored durably on the authoritative shard before it was published
    rows = pg_cluster.sql("shard-a", "SELECT revision, comment, created_by FROM "
                          "__neki.data_topology_log ORDER BY revision", dbname=cluster_db)
    assert rows == [(1, "first", "postgres")]
    # overwrite=false with an existing topology fails; overwrite=true makes revision 2
    e = run_err(inst, set_sql(doc, overwrite=False))
    assert "already exists" in str(e)
    assert run(inst, set_sql(doc)) == [(True, 2)]
    revs = run(inst, "SELECT revision, comment, created_by FROM __neki.list_topology_revisions()")
    assert revs == [(1, "first", "postgres"), (2, None, "postgres")]


def test_expected_revision_race(sharded, cluster_db):
    """Two sessions set with expected_revision = 1 at once: exactly one wins."""
    inst = sharded()
    doc = topology(cluster_db)
    assert run(inst, set_sql(doc, overwrite=False)) == [(True, 1)]
    conns = [inst.admin_connect() for _ in range(2)]
    barrier = threading.Barrier(2)
    results = [None, None]

    def go(i):
        barrier.wait()
        results[i] = conns[i].execute(
            set_sql(doc, options={"expected_revision": 1, "comment": f"s{i}"})).fetchall()

    threads = [threading.Thread(target=go, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    for c in conns:
        c.close()
    assert sorted(results) == [[(False, 0)], [(True, 2)]]
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(2,)]
    # a stale expected_revision never applies
    assert run(inst, set_sql(doc, options={"expected_revision": 1})) == [(False, 0)]


def test_wait_for_every_worker(sharded, cluster_db):
    inst = sharded(settings={"workers": 4})
    rev = run(inst, set_sql(topology(cluster_db), overwrite=False))[0][1]
    assert run(inst, f"SELECT * FROM __neki.wait_for_data_topology({rev}, '20 seconds')") \
        == [(rev,)]
    workers = run(inst, "SHOW WORKERS")
    assert len(workers) == 4
    assert all(row[5] >= rev for row in workers), workers
    e = run_err(inst, f"SELECT * FROM __neki.wait_for_data_topology({rev + 5}, '300 ms')")
    assert e.diag.sqlstate == "57014"
    assert f"timed out waiting for data topology revision {rev + 5}" in str(e)


def admin_pid(inst):
    import re
    found = re.findall(r"admin \d+ started \(pid (\d+)\)", inst.log())
    return int(found[-1]) if found else None


def test_admin_killed_mid_update(sharded, pg_cluster, cluster_db):
    inst = sharded()
    doc = topology(cluster_db)
    assert run(inst, set_sql(doc, overwrite=False)) == [(True, 1)]
    old = wait_until(lambda: admin_pid(inst), 5, what="admin pid in the log")
    conn = inst.admin_connect()
    conn.pgconn.send_query(set_sql(doc, options={"comment": "killed"}).encode())
    os.kill(old, signal.SIGKILL)
    conn.close()
    wait_until(lambda: admin_pid(inst) not in (None, old), 10, what="a new admin process")

    def stored():
        rows = pg_cluster.sql("shard-a", "SELECT max(revision) FROM __neki.data_topology_log",
                              dbname=cluster_db)
        return rows[0][0]

    def published_is_stored():
        try:
            return run(inst, "SELECT * FROM __neki.get_data_topology_revision()")[0][0] \
                == stored()
        except psycopg.Error:
            return False

    wait_until(published_is_stored, 15, interval=0.1, what="the stored revision published")
    assert stored() in (1, 2)


def test_boot_from_cache_with_authority_down(sharded, pg_cluster, cluster_db):
    inst = sharded(start=False)
    cache = inst.dir / "topology.json"
    inst.update({"topology_file": cache})
    inst.start()
    doc = topology(cluster_db)
    assert run(inst, set_sql(doc, overwrite=False, options={"comment": "cached"})) == [(True, 1)]
    assert json.loads(cache.read_text())["revision"] == 1
    expected = run(inst, "SELECT * FROM __neki.get_data_topology()")[0][0]
    inst.stop()
    pg_cluster.stop_server("shard-a")
    try:
        inst.start()
        assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(1,)]
        assert run(inst, "SELECT * FROM __neki.get_data_topology()")[0][0] == expected
        e = run_err(inst, set_sql(doc))
        assert e.diag.sqlstate == "08006"
    finally:
        pg_cluster.start_server("shard-a")
    # the shard is back: the next set works and lands in the cache file
    def set_again():
        try:
            return run(inst, set_sql(doc, options={"expected_revision": 1})) == [(True, 2)]
        except psycopg.OperationalError:
            return False

    wait_until(set_again, 15, interval=0.2, what="a set after the shard came back")
    wait_until(lambda: json.loads(cache.read_text())["revision"] == 2, 10,
               what="revision 2 in the cache file")


def test_first_topology_from_topology_file(sharded, pg_cluster, cluster_db):
    inst = sharded(start=False)
    first = inst.dir / "first.json"
    first.write_text(json.dumps(topology(cluster_db)))
    os.chmod(first, 0o666)
    inst.update({"topology_file": first})
    inst.start()
    wait_until(lambda: run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(1,)],
               10, interval=0.1, what="the first topology stored and published")
    rows = pg_cluster.sql("shard-a", "SELECT revision, created_by FROM __neki.data_topology_log",
                          dbname=cluster_db)
    assert rows == [(1, "topology_file")]
    assert json.loads(first.read_text())["neki_topology_cache"] == 1


def test_two_instances_share_revisions(sharded, cluster_db):
    a = sharded()
    b = sharded()
    doc = topology(cluster_db)
    assert run(a, set_sql(doc, overwrite=False)) == [(True, 1)]

    def rev(inst):
        return run(inst, "SELECT * FROM __neki.get_data_topology_revision()")[0][0]

    wait_until(lambda: rev(b) == 1, 15, interval=0.1, what="b to discover revision 1")
    assert run(b, set_sql(doc, options={"expected_revision": 1})) == [(True, 2)]
    wait_until(lambda: rev(a) == 2, 10, interval=0.1, what="a to follow revision 2")
    # b waits for a (a fresh host in __neki.routers) and a for b
    assert run(b, "SELECT * FROM __neki.wait_for_data_topology(2, '10 s')") == [(2,)]
    assert run(a, "SELECT * FROM __neki.wait_for_data_topology(2, '10 s')") == [(2,)]


def test_validation_errors(sharded, cluster_db):
    inst = sharded()
    doc = topology(cluster_db)
    doc["databases"][cluster_db]["schemas"]["public"]["tables"]["orders"] = {"shard_gruop": "x"}
    e = run_err(inst, set_sql(doc, overwrite=False))
    assert e.diag.sqlstate == "22023"
    path = f"databases.{cluster_db}.schemas.public.tables.orders.shard_gruop"
    assert path in e.diag.message_primary
    rows = run(inst, f"SELECT path, rule FROM __neki.validate_data_topology("
                     f"{lit(json.dumps(doc))})")
    assert any(r[0] == path for r in rows), rows
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(0,)]
    # a good document validates clean; with a topology in place it needs overwrite
    good = topology(cluster_db)
    assert run(inst, f"SELECT * FROM __neki.validate_data_topology({lit(json.dumps(good))})") \
        == []
    run(inst, set_sql(good, overwrite=False))
    rows = run(inst, f"SELECT rule FROM __neki.validate_data_topology({lit(json.dumps(good))})")
    assert rows == [("write/overwrite-required",)]
    assert run(inst, f"SELECT rule FROM __neki.validate_data_topology("
                     f"{lit(json.dumps(good))}, overwrite => true)") == []
    e = run_err(inst, set_sql(good, options={"comment": "x", "expected_revison": 1}))
    assert 'unrecognized data topology option "expected_revison"' in str(e)
    e = run_err(inst, "SELECT * FROM __neki.no_such_function()")
    assert e.diag.sqlstate == "42883"
    e = run_err(inst, "SELECT * FROM __neki.get_data_topology(")
    assert e.diag.sqlstate == "42601"


def test_enabled_gsi_is_taken(sharded, cluster_db):
    """An enabled GSI validates clean and is applied (neki keeps its lookup rows: see
    test/routing/test_gsi.py); its lookup table sharded off its columns is still V10."""
    inst = sharded()
    doc = topology(cluster_db)
    tables = doc["databases"][cluster_db]["schemas"]["public"]["tables"]
    tables["orders"]["secondary_indexes"] = [{"name": "orders_by_id", "columns": ["id"]}]
    tables["orders_by_id"] = {"shard_group": "authoritative"}
    gsi = {"schema": "public", "table": "orders_by_id", "owner_table": "orders",
           "columns": ["id"], "owner_sk_columns": ["customer_id"], "unique": True,
           "enabled": True}
    doc["databases"][cluster_db]["global_secondary_indexes"] = {"orders_by_id": gsi}
    assert run(inst, f"SELECT path, rule FROM __neki.validate_data_topology("
                     f"{lit(json.dumps(doc))})") == []
    assert run(inst, set_sql(doc, overwrite=False)) == [(True, 1)]
    got = json.loads(run(inst, "SELECT * FROM __neki.get_data_topology()")[0][0])
    assert got["databases"][cluster_db]["global_secondary_indexes"]["orders_by_id"][
        "enabled"] is True


def test_roles(sharded, pg_cluster, cluster_db):
    op = f"op_{os.getpid()}"
    inst = sharded(start=False)
    inst.allow_users(op)            # auth_type trust: listed in auth_file, no neki role
    inst.start()
    doc = topology(cluster_db)
    # stats_users may read, not set
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()", user="viewer") == [(0,)]
    e = run_err(inst, set_sql(doc, overwrite=False), user="viewer")
    assert e.diag.sqlstate == "42501"
    assert str(e).strip() == "permission denied for function set_data_topology"
    # users outside admin_users may do nothing without a role on the authoritative shard
    e = run_err(inst, "SELECT * FROM __neki.get_data_topology_revision()", user=op)
    assert e.diag.sqlstate == "42501"
    assert run(inst, set_sql(doc, overwrite=False)) == [(True, 1)]
    pg_cluster.sql("shard-a", "DO $$BEGIN CREATE ROLE neki_operator; EXCEPTION WHEN "
                              "duplicate_object THEN NULL; END$$")
    pg_cluster.sql("shard-a", f"CREATE ROLE {op} LOGIN IN ROLE neki_operator")
    try:
        assert run(inst, set_sql(doc), user=op) == [(True, 2)]
        assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()", user=op) == [(2,)]
    finally:
        pg_cluster.sql("shard-a", f"DROP ROLE {op}")
    # pgbouncer's console lets only listed users in
    with pytest.raises(psycopg.OperationalError, match="not allowed"):
        inst.admin_connect(dbname="pgbouncer", user="someone")


def test_console_protocol(sharded):
    inst = sharded()
    with inst.admin_connect() as conn:
        e = None
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT * FROM __neki.get_data_topology_revision() WHERE %s", (1,))
        assert "extended query protocol not supported by admin console" in str(ei.value)
    with inst.admin_connect() as conn:
        with pytest.raises(psycopg.Error, match=r"invalid command 'SHOW NOTHING', use SHOW HELP;"):
            conn.execute("SHOW NOTHING")
    with pytest.raises(psycopg.OperationalError, match="no such database: other"):
        inst.admin_connect(dbname="other")


@pytest.mark.parametrize("auth_type", ["plain", "md5", "scram-sha-256"])
def test_console_password_auth(sharded, auth_type):
    inst = sharded(start=False)
    userlist = inst.dir / "userlist.txt"
    userlist.write_text('"postgres" "secret1"\n"viewer" "md5' +
                        __import__("hashlib").md5(b"secret2viewer").hexdigest() + '"\n')
    os.chmod(userlist, 0o644)
    inst.update({"auth_type": auth_type, "auth_file": userlist})
    inst.start()
    with inst.admin_connect(password="secret1") as conn:
        assert conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchall() \
            == [(0,)]
    failed = "SASL authentication failed" if auth_type == "scram-sha-256" else \
        "password authentication failed"
    with pytest.raises(psycopg.OperationalError, match=failed):
        inst.admin_connect(password="wrong")
    with pytest.raises(psycopg.OperationalError, match=failed):
        inst.admin_connect(user="nosuchuser", password="x")
    if auth_type != "scram-sha-256":   # an md5 secret cannot answer SCRAM
        with inst.admin_connect(user="viewer", password="secret2") as conn:
            assert conn.execute("SHOW VERSION").fetchall()[0][0].startswith("PgBouncer")


def test_forward_socket_trusts_neki_uid(sharded):
    """The internal socket (workers forward __neki calls through it) trusts only neki's uid."""
    import subprocess
    from conftest import IS_ROOT, run_as_user
    inst = sharded(settings={"auth_type": "md5", "auth_file": "/nonexistent"})
    psql = ["/usr/lib/postgresql/15/bin/psql", "-X", "-At", "-h", "@neki-admin", "-p",
            str(inst.port), "-d", "neki", "-U", "postgres", "-c",
            "SELECT * FROM __neki.get_data_topology_revision()"]
    as_neki = (["runuser", "-u", run_as_user(), "--"] if IS_ROOT else []) + psql
    res = subprocess.run(as_neki, capture_output=True, text=True, timeout=20)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "0"
    if IS_ROOT:   # another uid is refused
        res = subprocess.run(psql, capture_output=True, text=True, timeout=20)
        assert "forwarded console connections must come from neki" in res.stderr


def test_list_shards_and_show_shards(sharded, pg_cluster, cluster_db):
    inst = sharded()
    rows = run(inst, "SELECT uid, port, dbname, has_writable_primary, revision "
                     "FROM __neki.list_shards()")
    assert rows == [(s, pg_cluster.port(s), cluster_db, True, 0) for s in pg_cluster.shards]
    rows = run(inst, "SELECT * FROM __neki.list_shards()")
    assert [(r[0], r[-1] > 0) for r in rows] == [(s, True) for s in pg_cluster.shards]
    pg_cluster.stop_server("shard-d")
    try:
        rows = run(inst, "SHOW SHARDS")
        assert [(r[0], r[3]) for r in rows] == [("shard-a", "up"), ("shard-b", "up"),
                                                 ("shard-c", "up"), ("shard-d", "down")]
    finally:
        pg_cluster.start_server("shard-d")


def test_force_records_suppressed_findings(sharded, pg_cluster, cluster_db):
    inst = sharded()
    doc = topology(cluster_db, groups=("shard-a", "shard-zz"))
    e = run_err(inst, set_sql(doc, overwrite=False))
    assert e.diag.sqlstate == "42704"
    assert 'key_ranges[1].shard_uid "shard-zz" is not a shard the cluster has created' in str(e)
    assert run(inst, set_sql(doc, overwrite=False, options={"force": True})) == [(True, 1)]
    rows = pg_cluster.sql("shard-a", "SELECT suppressed_findings FROM __neki.data_topology_log",
                          dbname=cluster_db)
    found = json.loads(rows[0][0])
    assert len(found) == 1 and "key-ranges/shard-declared" in found[0]
    # the finding is now pre-existing: later revisions need no force for it
    assert run(inst, set_sql(doc)) == [(True, 2)]
    assert json.loads(pg_cluster.sql("shard-a", "SELECT suppressed_findings FROM "
                                     "__neki.data_topology_log WHERE revision = 2",
                                     dbname=cluster_db)[0][0]) == []


def test_shard_key_type_checked_against_catalog(sharded, pg_cluster, cluster_db):
    """V4: the authoritative shard's catalog says the shard key's type cannot be routed."""
    inst = sharded()
    pg_cluster.sql("shard-a", "CREATE TABLE orders (id int, customer_id point)",
                   dbname=cluster_db)
    e = run_err(inst, set_sql(topology(cluster_db), overwrite=False))
    assert e.diag.sqlstate == "22023"
    assert "tables/shard-key-type" in str(e) or "customer_id" in str(e)
    assert run(inst, "SELECT * FROM __neki.get_data_topology_revision()") == [(0,)]
    pg_cluster.sql("shard-a", "ALTER TABLE orders ALTER customer_id TYPE bigint USING 0",
                   dbname=cluster_db)
    assert run(inst, set_sql(topology(cluster_db), overwrite=False)) == [(True, 1)]
