"""
set_data_topology answers once the catalog of the new revision's databases is loaded: the
router reads a shard-key value with the key column's type, so a write by key right after
the apply must not meet an unknown type (42704) and must land on the shard its key names.
The tables exist on the shards before the database joins the topology (created directly),
so only the catalog load stands between the apply and the first write.
"""
import pytest

from test_routing import (SCHEMA, Store, lit, routing_instance, set_topology, sharded_database,
                          topology)

try:
    import psycopg
except ImportError:
    psycopg = None


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_write_by_key_right_after_set_data_topology(pg_cluster, protocol):
    with sharded_database(pg_cluster, f"catnew_{protocol}") as db:
        for server in pg_cluster.servers:
            for sql in SCHEMA[:2]:		# countries, customers
                pg_cluster.sql(server, sql, dbname=db)
        inst = routing_instance(pg_cluster, db)
        try:
            inst.start()
            set_topology(inst, topology(db))
            st = Store(pg_cluster, inst, db)
            with st.connect(autocommit=True) as conn:
                for cid in range(1, 21):
                    if protocol == "simple":
                        psycopg.ClientCursor(conn).execute(
                            f"INSERT INTO customers VALUES ({cid}, {lit(str(cid))})")
                    else:
                        conn.execute("INSERT INTO customers VALUES (%s, %s)", (cid, str(cid)),
                                     prepare=True)
            placed = st.placement("customers", "id")
            assert sorted(k for keys in placed.values() for k in keys) == list(range(1, 21))
            for cid in (1, 7, 20):
                assert cid in placed[st.customer_shard(cid)]
        except BaseException:
            print(f"--- neki log (tail):\n{inst.log()[-20000:]}")
            raise
        finally:
            problems = inst.cleanup()
            assert not problems, "\n".join(problems)


def test_database_named_in_the_topology_is_sharded_without_topology_yes(pg_cluster):
    """A [databases] entry the topology's `databases` names is a sharded database (DESIGN.md
    5) though it does not say topology=yes: its sessions are routed once the topology is
    published, so DDL through it reaches every shard, not only the entry's server."""
    with sharded_database(pg_cluster, "named") as db:
        inst = routing_instance(pg_cluster, db)
        inst.databases = {db: f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"}
        inst.write_ini()
        try:
            inst.start()
            set_topology(inst, topology(db))
            st = Store(pg_cluster, inst, db)
            with st.connect() as conn:
                conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")     # the router answers
                conn.execute(SCHEMA[0])                          # countries: DDL
            for server in pg_cluster.shards + ["auth"]:
                assert pg_cluster.sql(server, "SELECT to_regclass('countries') IS NOT NULL",
                                      dbname=db) == [(True,)], server
        finally:
            problems = inst.cleanup()
            assert not problems, "\n".join(problems)
