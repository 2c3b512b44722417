"""
The __neki store belongs to neki (issue 23): a client statement of a routed database that
names an object in the __neki schema (neki's topology store on the authoritative shard) is
refused with 42501 whatever the spelling, before any shard sees it; neki's own functions stay
callable; the store is owned by neki's [shards] login role and granted to nobody. Real
Postgres shards, psycopg.
"""
import json
import os

import pytest

from test_routing import (lit, psycopg, routing_instance, routing_neki, sharded_database,
                          topology, Store)

EVASIONS = [
    "SELECT * FROM __neki.data_topology_log",
    'SELECT * FROM "__neki".data_topology_log',
    'SELECT * FROM U&"\\005f_neki".data_topology_log',
    'SELECT * FROM U&"\\005F\\005Fneki"."routers"',
    "SELECT * FROM __NEKI.Data_Topology_Log",
    "INSERT INTO __neki.data_topology_log (revision, topology) VALUES (99, '{}')",
    "UPDATE __neki.routers SET revision = 0",
    "DELETE FROM __neki.data_topology_log",
    "WITH f AS (INSERT INTO __neki.data_topology_log (revision, topology) "
    "VALUES (99, '{}') RETURNING 1) SELECT * FROM f",
    "SELECT (SELECT max(revision) FROM __neki.data_topology_log)",
    "SELECT 1 WHERE EXISTS (SELECT 1 FROM __neki.routers r JOIN pg_class c ON true)",
    "TRUNCATE __neki.data_topology_log",
    "DROP TABLE __neki.routers",
    "DROP SCHEMA __neki CASCADE",
    "ALTER SCHEMA __neki OWNER TO CURRENT_USER",
    "GRANT ALL ON ALL TABLES IN SCHEMA __neki TO PUBLIC",
    "CREATE TABLE __neki.forged (a int)",
    "ALTER TABLE IF EXISTS public.x SET SCHEMA __neki",
    "LOCK TABLE __neki.data_topology_log",
    "COPY __neki.data_topology_log TO STDOUT",
    "EXPLAIN SELECT * FROM __neki.routers",
    "PREPARE p AS SELECT * FROM __neki.routers",
    "SELECT NULL::__neki.routers",
    "SET search_path = __neki, public",
    "SET search_path TO '\"__neki\"'",
    "SELECT set_config('search_path', '__neki', false)",
    "DO $$ BEGIN INSERT INTO __neki.data_topology_log VALUES (99, '{}'); END $$",
    "CREATE FUNCTION forge() RETURNS void LANGUAGE sql AS "
    "'DELETE FROM __neki.data_topology_log'",
]


@pytest.fixture(scope="module")
def st(pg_cluster):
    with sharded_database(pg_cluster, "nstore") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as s:
        yield s


def log_rows(st):
    return st.cluster.sql("auth", "SELECT revision, topology FROM __neki.data_topology_log "
                          "ORDER BY revision", dbname=st.db)


@pytest.mark.parametrize("sql", EVASIONS)
def test_statement_naming_the_store_is_refused(st, sql):
    before = log_rows(st)
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            psycopg.ClientCursor(conn).execute(sql)
    e = ei.value
    assert e.diag.sqlstate == "42501", (sql, e)
    assert e.diag.message_primary == "permission denied for schema __neki"
    assert "neki's own __neki functions" in e.diag.message_detail
    assert log_rows(st) == before


def test_extended_protocol_refused(st):
    """Parse of a statement naming the store fails the same way (psycopg binds $1)."""
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT * FROM \"__neki\".routers WHERE host_id = %s", ["x"])
    assert ei.value.diag.sqlstate == "42501"


def test_later_statement_and_direct_shard_target_refused(st):
    """A multi-statement Query, and __neki.shard set to the authoritative shard (statements
    forwarded unchanged there), are refused alike; the first statement's effect is rolled
    back with the implicit transaction, as Postgres does."""
    before = log_rows(st)
    with st.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT 1; INSERT INTO __neki.data_topology_log (revision, topology)"
                         " VALUES (99, '{}')")
        assert ei.value.diag.sqlstate == "42501"
        conn.execute("SET __neki.shard = 'auth'")
        for sql in ("SELECT * FROM __neki.routers",
                    "INSERT INTO \"__neki\".data_topology_log (revision, topology) "
                    "VALUES (99, '{}')"):
            with pytest.raises(psycopg.Error) as ei:
                conn.execute(sql)
            assert ei.value.diag.sqlstate == "42501", sql
        conn.execute("RESET __neki.shard")
        # the session goes on
        assert conn.execute("SELECT 41 + 1").fetchall() == [(42,)]
    assert log_rows(st) == before


def test_look_alikes_and_own_functions_pass(st):
    """Names that only resemble the schema, string literals and catalog reads about it, and
    neki's own functions are not refused."""
    with st.connect(autocommit=True) as conn:
        assert conn.execute("SELECT '__neki.data_topology_log'::text").fetchall() == \
            [("__neki.data_topology_log",)]
        assert conn.execute("SELECT count(*) > 0 FROM pg_catalog.pg_tables "
                            "WHERE schemaname = '__neki'").fetchall() == [(True,)]
        assert conn.execute("SELECT 1 AS __neki_x").fetchall() == [(1,)]
        rev = conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchall()
        assert rev[0][0] >= 1
        shards = conn.execute("SELECT * FROM __neki.list_shards()").fetchall()
        assert len(shards) >= 2


def test_own_function_composed(st):
    """neki's own function inside a larger statement: the call runs in the admin, the rest of
    the statement over its rows (WHERE, aggregates, ORDER BY, LIMIT, aliases, joins, a
    later statement of a Query, a scalar position)."""
    shards = st.run("SELECT * FROM __neki.list_shards()")
    uids = sorted(r[0] for r in shards)
    assert st.run("SELECT count(*) FROM __neki.list_shards() WHERE has_writable_primary") \
        == [(sum(1 for r in shards if r[4]),)]
    assert st.run("SELECT uid FROM __neki.list_shards() ORDER BY uid DESC LIMIT 2") == \
        [(u,) for u in sorted(uids, reverse=True)[:2]]
    assert st.run("SELECT s.uid, s.port > 0 FROM __neki.list_shards() AS s WHERE s.uid = "
                  f"'{uids[0]}'") == [(uids[0], True)]
    assert st.run("SELECT list_shards.uid FROM __neki.list_shards() ORDER BY 1 LIMIT 1") == \
        [(uids[0],)]
    rev = st.run("SELECT * FROM __neki.get_data_topology_revision()")[0][0]
    assert st.run("SELECT __neki.get_data_topology_revision() + 1") == [(rev + 1,)]
    got = st.run("SELECT m.name, s.n FROM __neki.list_metafuncs() m JOIN (SELECT 'list_shards'"
                 " AS name, 7 AS n) s USING (name)")
    assert got == [("list_shards", 7)]
    assert st.run("SELECT count(*) FROM __neki.validate_data_topology('{}') "
                  "WHERE rule <> ''")[0][0] > 0
    with st.connect(autocommit=True) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SELECT 1; SELECT count(*) > 0 FROM __neki.list_metafuncs()")
        assert cur.fetchall() == [(True,)]
        # errors of the call come back as the statement's; the session goes on
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("SELECT count(*) FROM __neki.wait_for_data_topology(-1)")
        assert ei.value.diag.sqlstate == "22023"
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("SELECT * FROM __neki.list_shards() a, __neki.list_shards() b")
        assert ei.value.diag.sqlstate == "0A000"
        cur.execute("SELECT 41 + 1")
        assert cur.fetchall() == [(42,)]


def test_unknown_function_call(st):
    """A call of a function neki does not have is neki's 42883, whole or not; no shard sees
    it."""
    with st.connect() as conn:
        for sql in ("SELECT * FROM __neki.forged_function()",
                    "SELECT __neki.forged_function() + 1"):
            with pytest.raises(psycopg.Error) as ei:
                psycopg.ClientCursor(conn).execute(sql)
            assert ei.value.diag.sqlstate == "42883", sql
            assert "function __neki.forged_function does not exist" in str(ei.value)


def test_store_owned_by_neki_role_granted_to_none(st):
    """The schema and its tables belong to the [shards] login role; PUBLIC has nothing."""
    rows = st.cluster.sql("auth", "SELECT n.nspowner::regrole::text, n.nspacl IS NULL OR "
                          "NOT EXISTS (SELECT 1 FROM aclexplode(n.nspacl) a WHERE a.grantee = 0)"
                          " FROM pg_namespace n WHERE nspname = '__neki'", dbname=st.db)
    assert rows == [("postgres", True)]
    rows = st.cluster.sql("auth", "SELECT c.relname, c.relowner::regrole::text, "
                          "has_table_privilege('public', c.oid, 'SELECT') FROM pg_class c "
                          "WHERE c.relnamespace = '__neki'::regnamespace AND c.relkind = 'r' "
                          "ORDER BY 1", dbname=st.db)
    assert rows == [("activity", "postgres", False), ("cluster_state", "postgres", False),
                    ("data_topology_log", "postgres", False),
                    ("router_epochs", "postgres", False), ("routers", "postgres", False)]


def test_schema_of_another_role_is_refused(pg_cluster, cluster_db):
    """A __neki schema created first by another role is not used: set_data_topology fails
    with 42501 naming the owner rule, and nothing is stored there."""
    intruder = f"intruder_{os.getpid()}"
    pg_cluster.sql("auth", f"CREATE ROLE {intruder}")
    inst = routing_instance(pg_cluster, cluster_db)
    try:
        pg_cluster.sql("auth", f"CREATE SCHEMA __neki AUTHORIZATION {intruder}",
                       dbname=cluster_db)
        inst.start()
        doc = json.dumps(topology(cluster_db))
        with pytest.raises(psycopg.Error) as ei, inst.admin_connect() as conn:
            conn.execute(f"SELECT * FROM __neki.set_data_topology({lit(doc)}, false)")
        e = ei.value
        assert e.diag.sqlstate == "42501", e
        assert "schema __neki is not owned by role postgres" in str(e)
        assert pg_cluster.sql("auth", "SELECT count(*) FROM pg_class WHERE relnamespace = "
                              "'__neki'::regnamespace", dbname=cluster_db) == [(0,)]
    finally:
        problems = inst.cleanup()
        pg_cluster.sql("auth", "DROP SCHEMA IF EXISTS __neki CASCADE", dbname=cluster_db)
        pg_cluster.sql("auth", f"DROP ROLE {intruder}")
    assert not problems, problems


def test_list_metafuncs(st):
    """list_metafuncs() names every __neki function with its arguments, purpose, group and
    role; each one it lists is neki's (no 42883 when called wrongly: a 42883 naming the
    arguments, or its own answer)."""
    rows = st.run("SELECT * FROM __neki.list_metafuncs()")
    by_name = {r[0]: r[1:] for r in rows}
    assert {"set_data_topology", "wait_for_data_topology", "wait_for_ddl",
            "get_data_topology", "get_data_topology_revision", "validate_data_topology",
            "list_shards", "list_topology_revisions", "notification_queue_usage",
            "list_metafuncs"} <= set(by_name)
    assert by_name["wait_for_ddl"] == (
        "schema_version bigint, cluster_version bigint DEFAULT 0, "
        "timeout interval DEFAULT '60 seconds'",
        "wait until every neki host has the catalog of a schema version", "ddl", "neki_viewer")
    assert by_name["set_data_topology"][3] == "neki_operator"
    assert all(purpose and group for _, purpose, group, _ in by_name.values())


def test_delete_shard(st):
    """delete_shard: a shard the topology uses is refused with its key range named; an
    unused one gets the way to remove it; an unknown one 42704."""
    cases = [("shard-a", "55006", "in use by the data topology"),
             ("nope", "42704", "is not declared in [shards]")]
    for uid, state, text in cases:
        with pytest.raises(psycopg.Error) as ei:
            st.run(f"SELECT * FROM __neki.delete_shard('{uid}')")
        assert ei.value.diag.sqlstate == state, uid
        assert text in str(ei.value)
    with pytest.raises(psycopg.Error) as ei:
        st.run("SELECT * FROM __neki.delete_shard('shard-a')")
    assert "key_ranges" in ei.value.diag.message_detail
