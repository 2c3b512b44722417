"""
Bugs the sharded run of Postgres' regression suite found (test/regress/sharded/
DIFFERENCES.md), each compared with the reference server holding every row, or refused:

- CREATE TABLE AS over a sharded table ran on every shard over that shard's rows: a
  reference table made so diverged between its copies, a sharded one kept rows off their
  key range. Now it runs only where each shard's own rows give the right table (a sharded
  copy of a co-located table's rows keeping their shard key, WITH NO DATA, sources that
  are not sharded) and
  is refused (0A000, with a HINT) otherwise.
- An aggregate in a subquery whose arguments name only columns of the enclosing query is
  that query's aggregate (SQL's rule); neki took it for the subquery's own and returned one
  row per shard. Across shards it is now NK013 135; on one shard it is forwarded.
- With standard_conforming_strings off, neki's parser (which reads '...' as a standard
  string) and the shards read literals with backslashes differently. Turning it off (SET,
  SET LOCAL, set_config()) is refused (0A000, with a HINT).
- A user-defined aggregate (CREATE AGGREGATE) over a sharded table was planned as a plain
  function: one row per shard. The catalog now loads aggregates' names, and a call of one
  across shards is NK013 212; on one shard it is forwarded. The catalog holds committed
  aggregates only, so creating or renaming one inside a transaction block is refused.
- GROUP BY <n> past the end of the select list grouped a merged aggregate by the constant
  n (one row) or failed with another error; now Postgres' 42P10 at the item's position.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import SCHEMA, Store, create_schema, routing_neki, sharded_database
from test_routing import topology as storefront

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 3 else "DE") for i in range(1, 41)]


def topology(db):
    doc = storefront(db)
    schema = doc["databases"][db]["schemas"]["public"]
    for t in ("cust_copy", "cust_big", "cust_cols", "cust_none", "cust_bad"):
        schema["tables"][t] = {"shard_group": "customer_data", "shard_index": "customer_by_id"}
    for t in ("cust_summary", "country_copy"):
        schema["reference_tables"][t] = {"shard_groups": ["customer_data"]}
    return doc


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "regfound") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st, SCHEMA)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " +
                ", ".join(f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        yield st


def refused(st, sql):
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
    return e.value.diag


def test_ctas_copy_of_a_colocated_sharded_table(store):
    """Rows of a table sharded the same way, with their shard key: each shard copies its
    own rows, which are the new table's."""
    for sql in ("CREATE TABLE cust_copy AS SELECT * FROM customers",
                "CREATE TABLE cust_big AS SELECT * FROM customers WHERE id > 20",
                "CREATE TABLE cust_cols AS SELECT upper(c.name) AS name, c.id FROM customers c"):
        store.both(sql)
    assert len(store.compare("SELECT * FROM cust_copy")) == 40
    assert len(store.compare("SELECT * FROM cust_big")) == 20
    assert len(store.compare("SELECT * FROM cust_cols")) == 40
    assert store.placement("cust_cols", "id") == store.placement("customers", "id")
    per = store.placement("cust_copy", "id")
    assert per == store.placement("customers", "id")
    assert sum(len(v) for v in per.values()) == 40


def test_ctas_with_no_data_or_unsharded_sources(store):
    store.both("CREATE TABLE cust_none AS SELECT id, name FROM customers ORDER BY id "
               "WITH NO DATA")
    assert store.compare("SELECT * FROM cust_none") == []
    store.both("CREATE TABLE country_copy AS SELECT code, upper(name) AS n FROM countries")
    assert len(store.compare("SELECT * FROM country_copy")) == 2
    for server in store.cluster.shards:
        assert len(store.shard_rows(server, "SELECT * FROM country_copy")) == 2


@pytest.mark.parametrize("sql,table", [
    # a reference table from a query over a sharded one: each copy would hold one shard's
    ("CREATE TABLE cust_summary AS SELECT country, count(*) FROM customers GROUP BY country",
     "customers"),
    ("CREATE TABLE cust_summary AS SELECT * FROM customers", "customers"),
    # a sharded table from anything but a copy of a co-located one
    ("CREATE TABLE cust_bad AS SELECT id, count(*) FROM customers GROUP BY id", "cust_bad"),
    ("CREATE TABLE cust_bad AS SELECT * FROM customers LIMIT 5", "cust_bad"),
    ("CREATE TABLE cust_bad AS SELECT id + 1 AS id, name FROM customers", "cust_bad"),
    ("CREATE TABLE cust_bad AS SELECT name FROM customers", "cust_bad"),
    ("CREATE TABLE cust_bad AS SELECT * FROM customers WHERE id IN "
     "(SELECT customer_id FROM orders)", "cust_bad"),
    ("CREATE TABLE cust_bad (id, n) AS SELECT * FROM customers", "cust_bad"),
    ("CREATE TABLE cust_bad AS SELECT * FROM countries", "cust_bad"),
])
def test_ctas_refused(store, sql, table):
    d = refused(store, sql)
    assert d.sqlstate == "0A000", d.message_primary
    assert d.message_primary == f'CREATE TABLE AS over sharded table "{table}" is unavailable'
    assert d.message_hint == "Create the table, then fill it with INSERT INTO ... SELECT."
    # nothing was created anywhere
    name = sql.split()[2]
    for server in store.cluster.shards + ["auth"]:
        assert store.cluster.sql(server, f"SELECT to_regclass('{name}')",
                                 dbname=store.db) == [(None,)]


@pytest.mark.parametrize("sql", [
    "SELECT (SELECT max(c.id)) FROM customers c",
    "SELECT (SELECT max(c.id) FILTER (WHERE c.id < 10)) FROM customers c",
    "SELECT (SELECT max(c.id) FROM countries k WHERE k.code = 'FR') FROM customers c",
    "SELECT (SELECT max((SELECT k.code FROM countries k WHERE k.code = c.country))) "
    "FROM customers c",
    "SELECT (SELECT max(id)) FROM customers",
])
def test_outer_aggregate_across_shards_refused(store, sql):
    assert len(store.both(sql)[1][1]) == 1	# one row on one Postgres
    d = refused(store, sql)
    assert d.sqlstate == "NK013", d.message_primary
    assert d.message_primary == "not implemented: [135] Aggregates over columns of an " \
        "enclosing query are unavailable."


@pytest.mark.parametrize("sql", [
    # on one shard the statement is forwarded: the shard's Postgres applies the rule
    "SELECT (SELECT max(c.id)) FROM customers c WHERE c.id = 7",
    # aggregates of the subquery itself
    "SELECT c.id, (SELECT max(k.code) FROM countries k) FROM customers c",
    "SELECT c.id, (SELECT count(*) FROM countries k WHERE k.code = c.country) FROM customers c",
    "SELECT c.id, (SELECT max(k.name) FROM countries k WHERE k.code = c.country) "
    "FROM customers c",
    "SELECT c.id, (SELECT max(code) FROM countries WHERE code = c.country) FROM customers c",
    "SELECT count(*), max(c.id) FROM customers c",
])
def test_subquery_aggregates_that_are_their_own(store, sql):
    store.compare(sql)


SCS_OFF = 'standard_conforming_strings = off is unavailable on a routed database'


@pytest.mark.parametrize("sql", [
    "SET standard_conforming_strings = off",
    "SET standard_conforming_strings TO 'off'",
    "SET SESSION standard_conforming_strings = false",
    "SET standard_conforming_strings = 'No'",
    "SELECT set_config('standard_conforming_strings', 'off', false)",
])
def test_standard_conforming_strings_off_refused(store, sql):
    with store.connect(autocommit=True) as conn:
        conn.execute("SET standard_conforming_strings = 'on'")	# the same cached shape
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        d = e.value.diag
        assert (d.sqlstate, d.message_primary) == ("0A000", SCS_OFF)
        assert d.message_hint == "Write backslash escapes as E'...' strings."
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)
        # the session goes on, literals read as before
        assert conn.execute(r"SELECT count(*) FROM customers WHERE name <> 'a\b'"
                            ).fetchone() == (40,)


def test_standard_conforming_strings_local_off_refused(store):
    with store.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            conn.execute("SET LOCAL standard_conforming_strings = 0")
        assert e.value.diag.message_primary == SCS_OFF
        conn.rollback()
        conn.execute("SET standard_conforming_strings = on")
        assert conn.execute("SHOW standard_conforming_strings").fetchone() == ("on",)


def test_user_defined_aggregate(store):
    """A user-defined aggregate has no combine: across shards the router reads the table
    first and one shard runs the aggregate over its rows (212 before)."""
    sql = "CREATE AGGREGATE total_of(int8) (SFUNC = int8pl, STYPE = int8, INITCOND = '0')"
    store.both(sql)
    for q in ("SELECT total_of(id) FROM customers",
              "SELECT country, total_of(id) FROM customers GROUP BY country",
              "SELECT (SELECT total_of(c.id)) FROM customers c"):
        assert len(store.both(q)[1][1]) >= 1	# rows on one Postgres
        store.compare(q)
    # on one shard: forwarded, the shard's Postgres aggregates
    assert store.compare("SELECT total_of(id) FROM customers WHERE id = 7") == [(7,)]
    # built-in aggregates as before
    assert store.compare("SELECT sum(id), count(*) FROM customers") == [(820, 40)]
    store.both("DROP AGGREGATE total_of(int8)")
    got, want = store.both("SELECT total_of(id) FROM customers")
    assert got[0] == want[0] == "ERROR 42883"


@pytest.mark.parametrize("sql", [
    "CREATE AGGREGATE total_in_tx(int8) (SFUNC = int8pl, STYPE = int8)",
    "CREATE OR REPLACE AGGREGATE total_in_tx(int8) (SFUNC = int8pl, STYPE = int8)",
    "ALTER AGGREGATE total_kept(int8) RENAME TO total_renamed",
    "ALTER AGGREGATE total_kept(int8) SET SCHEMA public",
])
def test_aggregate_ddl_in_a_transaction_refused(store, sql):
    store.run("CREATE AGGREGATE total_kept(int8) (SFUNC = int8pl, STYPE = int8)")
    with store.connect() as conn:
        conn.execute("BEGIN")
        with pytest.raises(psycopg.Error) as e:
            conn.execute(sql)
        d = e.value.diag
        assert d.sqlstate == "0A000"
        assert d.message_primary.endswith("AGGREGATE inside a transaction block is unavailable")
        assert d.message_hint == "Run it outside a transaction block."
        conn.rollback()
    # outside a transaction block it runs (and is known at once)
    if sql.startswith("CREATE"):
        store.run(sql)	# (one row: the router knows it for an aggregate)
        assert store.run("SELECT total_in_tx(id) FROM customers") == [(820,)]
        store.run("DROP AGGREGATE total_in_tx(int8)")
    store.run("DROP AGGREGATE total_kept(int8)")


def errors(store, sql):
    """(sqlstate, message, position) of <sql> through neki and on the reference."""
    out = []
    for connect in (store.connect, store.ref):
        with connect() as conn:
            with pytest.raises(psycopg.Error) as e:
                conn.execute(sql)
            d = e.value.diag
            out.append((d.sqlstate, d.message_primary, d.statement_position))
    return out


@pytest.mark.parametrize("sql", [
    "SELECT count(*) FROM customers GROUP BY 2",
    "SELECT name, count(*) FROM customers GROUP BY 3",
    "SELECT avg(id) FROM customers GROUP BY 0",
    "SELECT 'é', max(id) FROM customers GROUP BY 1, 5",
])
def test_group_by_position_out_of_range(store, sql):
    got, want = errors(store, sql)
    assert got == want
    assert want[0] == "42P10"


@pytest.mark.parametrize("sql", [
    "SELECT country, count(*) FROM customers GROUP BY 1",
    "SELECT c.country, count(*) FROM customers c GROUP BY 1 ORDER BY 1",
    "SELECT count(*), country FROM customers GROUP BY 2",
])
def test_group_by_positions_in_range(store, sql):
    store.compare(sql)
