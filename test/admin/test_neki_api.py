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
