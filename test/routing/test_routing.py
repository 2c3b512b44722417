"""
Statement routing through neki (issue 6's executor): one storefront database on every server of the session's
cluster, one neki in front of it whose [databases] entry is topology=yes, the storefront
topology (etc/topology-storefront.json, authority on the `auth` server) applied through
the admin port, and the schema created through neki (DDL runs on every shard). The
`reference` server gets the same schema directly: compare() runs one SQL text on both.
"""
import contextlib
import json
import os
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import Neki, wait_until

REPO = Path(__file__).resolve().parent.parent.parent

SCHEMA = [
    "CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL)",
    "CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, "
    "country text REFERENCES countries)",
    "CREATE TABLE orders (customer_id bigint NOT NULL, id bigint NOT NULL, "
    "status text NOT NULL DEFAULT 'new', total numeric(10,2), PRIMARY KEY (customer_id, id))",
    "CREATE TABLE order_items (customer_id bigint NOT NULL, order_id bigint NOT NULL, "
    "line int NOT NULL, sku text NOT NULL, qty int NOT NULL CHECK (qty > 0), "
    "PRIMARY KEY (customer_id, order_id, line))",
    "CREATE TABLE products (sku text PRIMARY KEY, name text NOT NULL, price numeric(10,2))",
]


def topology(db):
    doc = json.loads((REPO / "etc" / "topology-storefront.json").read_text())
    doc["databases"] = {db: doc["databases"]["store"]}
    return doc


def lit(value):
    return "'" + value.replace("'", "''") + "'"


class Store:
    """The routed database: neki instance, cluster, database name and helpers."""

    def __init__(self, cluster, inst, db):
        self.cluster, self.neki, self.db = cluster, inst, db

    def connect(self, **kw):
        return self.neki.connect(dbname=self.db, **kw)

    def ref(self):
        return self.cluster.connect("reference", dbname=self.db)

    def run(self, sql, params=None):
        """Run on neki with client-side binding (simple protocol); rows or None."""
        with self.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else None

    def both(self, sql, params=None):
        """Run <sql> through neki and on the reference server; return (neki, reference)
        as (status, rows) where rows are sorted unless the SQL orders them."""
        out = []
        for connect in (self.connect, self.ref):
            with connect() as conn:
                cur = psycopg.ClientCursor(conn)
                try:
                    cur.execute(sql, params)
                    rows = cur.fetchall() if cur.description is not None else None
                    out.append((cur.statusmessage, rows))
                except psycopg.Error as e:
                    out.append(("ERROR " + (e.diag.sqlstate or ""), None))
        return out

    def compare(self, sql, params=None, ordered=False):
        got, want = self.both(sql, params)
        if not ordered:
            got = (got[0], sorted(got[1], key=repr) if got[1] is not None else None)
            want = (want[0], sorted(want[1], key=repr) if want[1] is not None else None)
        assert got == want, f"{sql}: neki {got} != reference {want}"
        return got[1]

    def shard_rows(self, server, sql):
        return self.cluster.sql(server, sql, dbname=self.db)

    def customer_shard(self, cid):
        """The data shard the router routes customer <cid> to (EXPLAIN (NEKI_PLAN)), cached."""
        cache = self.__dict__.setdefault("_customer_shard", {})
        if cid not in cache:
            rows = self.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                            f"SELECT * FROM customers WHERE id = {cid}")
            found = [s for s in self.cluster.shards if any(s in r[0] for r in rows)]
            assert len(found) == 1, rows
            cache[cid] = found[0]
        return cache[cid]

    def placement(self, table, key):
        """{server: [key values]} of <table> on each data shard, read directly."""
        return {s: [r[0] for r in self.shard_rows(s, f"SELECT {key} FROM {table}")]
                for s in self.cluster.shards}


@contextlib.contextmanager
def sharded_database(cluster, prefix):
    """A database <prefix>_<pid> on every server of <cluster> (the reference too), dropped
    after."""
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    db = f"{prefix}_{os.getpid()}"
    for server in cluster.servers:
        cluster.sql(server, f'CREATE DATABASE "{db}"')
    try:
        yield db
    finally:
        for server in cluster.servers:
            try:
                cluster.sql(server, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            except Exception:
                pass


def routing_instance(cluster, db, settings=None, db_options="", databases=None):
    """A neki (not started) routing <db> (topology=yes, authority on `auth`), with the
    [databases] entries <databases> besides."""
    auth = f"host=127.0.0.1 port={cluster.port('auth')} dbname={db}"
    return Neki(settings={"workers": 2, "admin_users": "postgres", "pool_mode": "transaction",
                          **(settings or {})},
                databases={db: f"{auth} topology=yes {db_options}".rstrip(),
                           **(databases or {})},
                shards=cluster.shards_section(dbname=db) + f"\nauth = {auth}")


def set_topology(inst, topo_doc):
    """Apply <topo_doc> through the admin port (it answers once the new revision's catalog
    is loaded)."""
    with inst.admin_connect() as conn:
        conn.execute("SELECT * FROM __neki.set_data_topology("
                     f"{lit(json.dumps(topo_doc))}, true)")


@contextlib.contextmanager
def routing_neki(cluster, db, topo_doc, store_cls, settings=None, db_options="",
                 databases=None):
    """routing_instance() started with <topo_doc> applied; yields store_cls(cluster, neki,
    db) once a new session there is routed."""
    inst = routing_instance(cluster, db, settings, db_options, databases)
    try:
        inst.start()
        set_topology(inst, topo_doc)
        st = store_cls(cluster, inst, db)

        def routed():
            # EXPLAIN (NEKI_PLAN) is the router's (a SET __neki.x would also succeed on a
            # pass-through session: Postgres takes it as a placeholder variable)
            try:
                with st.connect() as conn:
                    conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
                    return True
            except psycopg.Error:
                return False
        wait_until(routed, 30, what=f"neki routes {db}")
        yield st
    except BaseException:
        print(f"--- neki log (tail):\n{inst.log()[-20000:]}")	# in pytest's report
        raise
    finally:
        problems = inst.cleanup()
        assert not problems, "\n".join(problems)


def create_schema(st, schema=SCHEMA, reference=True):
    """Run the DDL of <schema> through neki (every shard) and, with <reference>, directly on
    the reference server."""
    for sql in schema:
        st.run(sql)
        if reference:
            with st.ref() as conn:
                conn.execute(sql)


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "store") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st)
        yield st


# ---- tests ----------------------------------------------------------------------------

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 41)]


@pytest.fixture(scope="module")
def loaded(store):
    """Countries, customers, orders and items loaded through neki and on the reference."""
    sqls = ["INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')"]
    sqls.append("INSERT INTO customers VALUES " + ", ".join(
        f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
    for i, _, _ in CUSTOMERS:
        sqls.append(f"INSERT INTO orders VALUES ({i}, {i * 10}, 'paid', {i}.50), "
                    f"({i}, {i * 10 + 1}, 'new', {i * 2})")
        sqls.append(f"INSERT INTO order_items VALUES ({i}, {i * 10}, 1, 'SKU-{i}', 2)")
    for sql in sqls:
        got, want = store.both(sql)
        assert got == want, sql
    return store


def test_single_shard_reads_match_reference(loaded):
    for cid in (1, 7, 23, 40):
        loaded.compare(f"SELECT * FROM customers WHERE id = {cid}")
        loaded.compare(f"SELECT * FROM orders WHERE customer_id = {cid} ORDER BY id",
                       ordered=True)
        loaded.compare(f"SELECT o.id, i.sku, i.qty FROM orders o JOIN order_items i "
                       f"ON i.customer_id = o.customer_id AND i.order_id = o.id "
                       f"WHERE o.customer_id = {cid}")
        loaded.compare(f"SELECT c.name, k.name FROM customers c JOIN countries k "
                       f"ON k.code = c.country WHERE c.id = {cid}")
    loaded.compare("SELECT * FROM customers WHERE id = 999")


def test_shard_set_and_scatter_concatenate(loaded):
    loaded.compare("SELECT id, name FROM customers WHERE id IN (1, 2, 3, 17, 33)")
    loaded.compare("SELECT * FROM orders WHERE customer_id = ANY(ARRAY[4, 5, 6])")
    loaded.compare("SELECT id FROM customers")
    loaded.compare("SELECT customer_id, id FROM orders WHERE status = 'paid'")


def exact(store, sql, ordered=False):
    """compare() on the repr of every value: numeric scale and float digits must match."""
    got, want = store.both(sql)
    got = (got[0], [repr(r) for r in got[1]] if got[1] is not None else None)
    want = (want[0], [repr(r) for r in want[1]] if want[1] is not None else None)
    if not ordered:
        got = (got[0], sorted(got[1]) if got[1] is not None else None)
        want = (want[0], sorted(want[1]) if want[1] is not None else None)
    assert got == want, f"{sql}: neki {got} != reference {want}"
    assert got[1] is not None, sql
    return got[1]


def test_cross_shard_aggregates_merge_exactly(loaded):
    exact(loaded, "SELECT count(*) FROM customers")
    exact(loaded, "SELECT count(*), count(total), sum(total), min(total), max(total), "
                  "avg(total) FROM orders")
    exact(loaded, "SELECT avg(qty), sum(qty), avg(customer_id) FROM order_items")
    exact(loaded, "SELECT sum(total) / count(*) AS mean, max(id) - min(id) FROM orders")
    # every shard empty: one row of NULLs and a zero count
    exact(loaded, "SELECT count(*), sum(total), avg(total), max(total) FROM orders "
                  "WHERE status = 'none'")
    exact(loaded, "SELECT status, count(*) FROM orders WHERE status = 'none' GROUP BY status")


def test_cross_shard_group_by_having(loaded):
    exact(loaded, "SELECT status, count(*), sum(total), avg(total) FROM orders GROUP BY status")
    exact(loaded, "SELECT c.country, count(*) FROM customers c GROUP BY c.country "
                  "HAVING count(*) > 1 ORDER BY c.country", ordered=True)
    exact(loaded, "SELECT customer_id % 3 AS k, sum(total) FROM orders GROUP BY 1 "
                  "HAVING sum(total) > 100 ORDER BY 1 DESC", ordered=True)


def test_cross_shard_order_limit_distinct(loaded):
    exact(loaded, "SELECT id, name FROM customers ORDER BY id", ordered=True)
    exact(loaded, "SELECT customer_id, id, total FROM orders ORDER BY total DESC, id",
          ordered=True)
    exact(loaded, "SELECT name FROM customers ORDER BY id DESC LIMIT 5", ordered=True)
    exact(loaded, "SELECT id FROM customers ORDER BY id LIMIT 4 OFFSET 7", ordered=True)
    exact(loaded, "SELECT id FROM customers ORDER BY id OFFSET 37", ordered=True)
    exact(loaded, "SELECT DISTINCT status FROM orders")
    # sort keys not in the select list: added to the shard query, stripped from the output
    exact(loaded, "SELECT name FROM customers ORDER BY country DESC, id", ordered=True)
    exact(loaded, "SELECT status FROM orders ORDER BY total DESC, customer_id, id LIMIT 6",
          ordered=True)
    exact(loaded, "SELECT DISTINCT country FROM customers ORDER BY country DESC", ordered=True)
    # NULLs first and last, both directions
    loaded.both("UPDATE orders SET total = NULL WHERE customer_id IN (3, 8, 21) AND id % 10 = 1")
    try:
        for order in ("total", "total DESC", "total NULLS FIRST", "total DESC NULLS LAST"):
            exact(loaded, f"SELECT total, customer_id, id FROM orders ORDER BY {order}, "
                          "customer_id, id", ordered=True)
        exact(loaded, "SELECT count(total), count(*), min(total) FROM orders")
    finally:
        loaded.both("UPDATE orders SET total = customer_id * 2 WHERE id % 10 = 1")


def test_cross_shard_merges_of_one_shape_with_other_values(loaded):
    # a merged statement's spec is kept by its normalised text: the same shape with other
    # literals (LIMIT, HAVING, expressions, the WHERE) reuses it and still answers as the
    # reference; positions in BY lists, typed literals and comments are kept apart
    for k, m in ((5, 3), (11, 7), (0, 1), (30, 40)):
        loaded.compare(f"SELECT id, name FROM customers WHERE id > {k} "
                       f"ORDER BY country DESC, id LIMIT {m}", ordered=True)
        loaded.compare(f"SELECT country, count(*), sum(id) * {m} FROM customers "
                       f"WHERE id > {k} GROUP BY country HAVING count(*) > {m} ORDER BY 1")
        loaded.compare(f"SELECT country, 'x{k}' AS tag, min(name) FROM customers "
                       f"GROUP BY country ORDER BY 1 LIMIT {m}", ordered=True)
    for order in ("2, 1", "1, 2", "country, 1", "country, 2", "country, 2 DESC"):
        loaded.compare(f"SELECT id % 3, id, country FROM customers "
                       f"ORDER BY {order}, 2 LIMIT 6", ordered=True)
    for k in (1, 2):
        loaded.compare(f"SELECT date '2020-01-01' + {k} AS d, count(*) FROM customers "
                       f"GROUP BY 1")
        loaded.compare(f"/* hint {k} */ SELECT max(id) FROM customers WHERE id < {k * 10}")


def test_cross_shard_merge_in_a_transaction(loaded):
    """The merge (and its final combine query for avg) sees the transaction's own writes."""
    want = loaded.run("SELECT avg(total), count(*) FROM orders")
    with loaded.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN")
        cur.execute("UPDATE orders SET total = total + 1 WHERE customer_id IN (1, 2, 3, 4)")
        cur.execute("SELECT avg(total), count(*) FROM orders")
        inside = cur.fetchall()
        cur.execute("SELECT avg(total) FROM orders WHERE customer_id IN (1, 2, 3, 4)")
        part = cur.fetchall()
        cur.execute("ROLLBACK")
    assert inside[0][1] == want[0][1] and inside[0][0] > want[0][0], (inside, want)
    assert part[0][0] > 0
    assert loaded.run("SELECT avg(total), count(*) FROM orders") == want


def test_cross_shard_union(loaded):
    exact(loaded, "SELECT country FROM customers UNION SELECT status FROM orders")
    exact(loaded, "SELECT id FROM customers WHERE id < 5 UNION ALL "
                  "SELECT customer_id FROM orders WHERE customer_id < 5")


def test_cross_shard_merge_refusals(loaded):
    with pytest.raises(psycopg.Error) as ei:
        loaded.run("SELECT id FROM customers INTERSECT SELECT customer_id FROM orders")
    assert ei.value.diag.sqlstate == "NK013", ei.value
    assert "124" in str(ei.value) or "124" in (ei.value.diag.message_detail or ""), ei.value
    # on one shard the same shapes are fine
    loaded.compare("SELECT count(*), max(total) FROM orders WHERE customer_id = 3")


def test_cross_shard_shard_error_names_the_shard(loaded):
    with pytest.raises(psycopg.Error) as ei:
        loaded.run("SELECT 1 / (id - 17) FROM customers ORDER BY 1")
    assert ei.value.diag.sqlstate == "22012"
    assert "shard" in (ei.value.diag.message_detail or ""), ei.value.diag.message_detail
    # the session is usable afterwards
    exact(loaded, "SELECT count(*) FROM customers")


def test_placement_follows_the_routing_value(loaded):
    rows = loaded.placement("customers", "id")
    assert sorted(sum(rows.values(), [])) == [c[0] for c in CUSTOMERS]
    assert sum(1 for v in rows.values() if v) >= 3     # spread over the shards
    for server, ids in rows.items():
        for cid in ids:
            plan = loaded.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                              f"SELECT * FROM customers WHERE id = {cid}")
            assert any(server in r[0] for r in plan), (cid, server, plan)
        # co-located: orders and items of those customers on the same shard
        orders = loaded.shard_rows(server, "SELECT DISTINCT customer_id FROM orders")
        assert sorted(r[0] for r in orders) == sorted(ids)
        items = loaded.shard_rows(server, "SELECT DISTINCT customer_id FROM order_items")
        assert sorted(r[0] for r in items) == sorted(ids)
    # reference table: a copy on every shard
    for server in loaded.cluster.shards:
        assert loaded.shard_rows(server, "SELECT count(*) FROM countries") == [(2,)]


def test_escape_string_literals_route_by_their_value(loaded):
    # E'' without a backslash normalises like '': every INSERT after the first reuses the
    # cached model, and each still goes where its own value routes (and reads find it)
    ids = list(range(501, 531))
    with loaded.connect() as conn:
        for i in ids:
            conn.execute(f"INSERT INTO customers VALUES (E'{i}'::int, E'e {i}', 'FR')")
    try:
        rows = loaded.placement("customers", "id")
        for i in ids:
            assert [s for s, v in rows.items() if i in v] == [loaded.customer_shard(i)], i
        with loaded.connect() as conn:
            for i in ids:
                assert conn.execute(f"SELECT name FROM customers WHERE id = E'{i}'::int"
                                    ).fetchall() == [(f"e {i}",)], i
    finally:
        loaded.run(f"DELETE FROM customers WHERE id BETWEEN {ids[0]} AND {ids[-1]}")


def test_writes_and_multi_row_insert_split(loaded):
    loaded.compare("UPDATE orders SET status = 'shipped' WHERE customer_id = 5 AND id = 50")
    loaded.compare("SELECT status FROM orders WHERE customer_id = 5")
    loaded.compare("INSERT INTO customers VALUES (101, 'a', 'FR'), (102, 'b', 'DE'), "
                   "(103, 'c', 'FR'), (104, 'd', 'DE') RETURNING id, name", ordered=True)
    loaded.compare("UPDATE customers SET name = name || '!' WHERE id IN (101, 102, 103)")
    loaded.compare("DELETE FROM customers WHERE id IN (101, 102, 103, 104)")
    loaded.compare("SELECT id FROM customers WHERE id IN (101, 102, 103, 104)")


def test_multi_row_insert_of_many_rows_is_split(loaded):
    """10,000 VALUES rows over 4 shards (the executor once had a 4,096-row limit), RETURNING
    in input order, every row on its shard."""
    rows = ", ".join(f"({i}, 'bulk {i}', 'FR')" for i in range(20000, 30000))
    loaded.compare(f"INSERT INTO customers VALUES {rows} RETURNING id", ordered=True)
    loaded.compare("SELECT count(*), sum(id) FROM customers WHERE id BETWEEN 20000 AND 29999")
    placed = loaded.placement("customers", "id")
    assert sum(len([i for i in ids if 20000 <= i < 30000]) for ids in placed.values()) == 10000
    assert len([s for s, ids in placed.items() if any(20000 <= i < 30000 for i in ids)]) == 4
    loaded.compare("DELETE FROM customers WHERE id BETWEEN 20000 AND 29999")


def test_reference_table_write_reaches_every_copy(loaded):
    loaded.compare("INSERT INTO countries VALUES ('IT', 'Italy')")
    for server in loaded.cluster.shards:
        assert loaded.shard_rows(server, "SELECT name FROM countries WHERE code = 'IT'") == \
            [("Italy",)]
    loaded.compare("DELETE FROM countries WHERE code = 'IT'")
    for server in loaded.cluster.shards:
        assert loaded.shard_rows(server, "SELECT count(*) FROM countries") == [(2,)]


def test_transaction_over_two_shards_commit_and_rollback(loaded):
    a, b = 1, 2
    servers = {s for s, ids in loaded.placement("customers", "id").items()
               if a in ids or b in ids}
    assert len(servers) == 2
    with loaded.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN")
        cur.execute(f"UPDATE customers SET name = 'tx' WHERE id = {a}")
        cur.execute(f"UPDATE customers SET name = 'tx' WHERE id = {b}")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        cur.execute("ROLLBACK")
        cur.execute(f"SELECT name FROM customers WHERE id IN ({a}, {b})")
        assert sorted(cur.fetchall()) == [("customer 1",), ("customer 2",)]
        cur.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        cur.execute(f"UPDATE customers SET name = 'tx' WHERE id = {a}")
        cur.execute(f"UPDATE customers SET name = 'tx' WHERE id = {b}")
        cur.execute("COMMIT")
        assert cur.statusmessage == "COMMIT"
    assert loaded.run(f"SELECT name FROM customers WHERE id IN ({a}, {b})") == \
        [("tx",), ("tx",)]
    loaded.run(f"UPDATE customers SET name = 'customer ' || id WHERE id IN ({a}, {b})")


def test_error_mid_transaction_aborts_every_shard(loaded):
    with loaded.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("BEGIN")
        cur.execute("UPDATE customers SET name = 'lost' WHERE id = 3")
        with pytest.raises(psycopg.errors.CheckViolation):
            cur.execute("INSERT INTO order_items VALUES (4, 40, 9, 'x', 0)")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            cur.execute("SELECT 1")
        cur.execute("COMMIT")
        assert cur.statusmessage == "ROLLBACK"
    assert loaded.run("SELECT name FROM customers WHERE id = 3") == [("customer 3",)]


def test_ddl_runs_on_every_shard(store):
    store.run("CREATE TABLE currencies (code text PRIMARY KEY, name text)")
    for server in store.cluster.shards + ["auth"]:
        assert store.shard_rows(server, "SELECT to_regclass('currencies') IS NOT NULL") == \
            [(True,)]
    store.run("INSERT INTO currencies VALUES ('EUR', 'Euro')")
    assert store.run("SELECT name FROM currencies WHERE code = 'EUR'") == [("Euro",)]
    # a failure names the shards that applied it
    store.cluster.sql("shard-b", "CREATE TABLE clash (x int)", dbname=store.db)
    with pytest.raises(psycopg.Error) as ei:
        store.run("CREATE TABLE clash (x int)")
    assert ei.value.diag.sqlstate == "42P07"
    assert "Applied on shards" in (ei.value.diag.message_detail or "")
    store.run("DROP TABLE currencies")


def test_ddl_is_in_the_catalog_of_every_session_once_it_returns(store):
    """A positional INSERT into a sharded table needs the key column's position from the
    catalog: the DDL's ReadyForQuery waits for the refresh, so another session already
    connected plans with the new table at once (it got NK306 before), whether the DDL came
    by the simple or the extended protocol (psycopg then sends DEALLOCATE ALL by the
    extended protocol, which the router answers)."""
    for i in range(4):
        with store.connect() as ddl, store.connect() as other:
            sql = "CREATE TABLE orders_by_id (id bigint PRIMARY KEY, customer_id bigint)"
            if i % 2:
                ddl.execute(sql, prepare=True)
            else:
                psycopg.ClientCursor(ddl).execute(sql)
            try:
                cur = psycopg.ClientCursor(other)
                cur.execute("INSERT INTO orders_by_id VALUES (1, 10), (2, 20), (3, 30)")
                assert cur.statusmessage == "INSERT 0 3"
                cur.execute("SELECT count(*) FROM orders_by_id")
                assert cur.fetchall() == [(3,)]
            finally:
                psycopg.ClientCursor(ddl).execute("DROP TABLE orders_by_id")


def test_neki_settings_and_explain(store):
    with store.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SHOW __neki.fanout")
        assert cur.fetchall() == [("scatter",)]
        cur.execute("SET __neki.fanout = single")
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("SELECT id FROM customers")
        assert "__neki.fanout" in str(ei.value)
        cur.execute("RESET __neki.fanout")
        cur.execute("SET application_name = 'routed'")
        cur.execute("SHOW application_name")
        assert cur.fetchall() == [("routed",)]
        cur.execute("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers WHERE id = 5")
        text = "\n".join(r[0] for r in cur.fetchall())
        assert "EqualUnique" in text and "shard-" in text


def test_extended_protocol_routes_by_bound_value(loaded):
    """psycopg server-side binding: Parse/Bind/Describe/Execute/Sync, text and binary
    parameters, named (prepared) statements; the bound value picks the shard."""
    with loaded.connect() as conn, loaded.ref() as ref:
        for cid in (2, 9, 31):
            for mark in ("%t", "%b"):
                sql = f"SELECT id, name, country FROM customers WHERE id = {mark}"
                assert conn.execute(sql, (cid,)).fetchall() == \
                    ref.execute(sql, (cid,)).fetchall()
            sql = "SELECT id, total FROM orders WHERE customer_id = %s ORDER BY id"
            assert conn.execute(sql, (cid,), prepare=True).fetchall() == \
                ref.execute(sql, (cid,)).fetchall()
        with pytest.raises(psycopg.Error) as ei:       # as Neki: one array parameter
            conn.execute("SELECT id FROM customers WHERE id = ANY(%s)", ([1, 5, 12],))
        assert ei.value.diag.sqlstate == "NK013" and "[115]" in str(ei.value)
        sql = "SELECT id FROM customers WHERE id IN (%s, %s, %s)"
        assert sorted(conn.execute(sql, (1, 5, 39)).fetchall()) == \
            sorted(ref.execute(sql, (1, 5, 39)).fetchall())
        cur = conn.execute("UPDATE orders SET status = %s WHERE customer_id = %s AND id = %s",
                           ("held", 6, 60))
        assert cur.rowcount == 1
        # the row sits on the shard the parameter names
        where = [s for s, ids in loaded.placement("customers", "id").items() if 6 in ids]
        assert loaded.shard_rows(where[0], "SELECT status FROM orders WHERE id = 60") == \
            [("held",)]
        with pytest.raises(psycopg.errors.UndefinedColumn):
            conn.execute("SELECT nope FROM customers WHERE id = %s", (1,))
        assert conn.execute("SELECT name FROM customers WHERE id = %s", (1,)).fetchone() == \
            ("customer 1",)
    loaded.run("UPDATE orders SET status = 'paid' WHERE customer_id = 6 AND id = 60")


def test_extended_protocol_transaction(loaded):
    """psycopg's own transactions (BEGIN by psycopg, parameterised statements, commit)."""
    with loaded.connect(autocommit=False) as conn:
        for cid in (7, 8):
            conn.execute("UPDATE customers SET name = %s WHERE id = %s", ("ext", cid))
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        assert conn.execute("SELECT name FROM customers WHERE id = %s", (7,)).fetchone() == \
            ("customer 7",)
        conn.rollback()
        for cid in (7, 8):
            conn.execute("UPDATE customers SET name = %s WHERE id = %s", ("ext", cid))
        conn.commit()
    assert loaded.run("SELECT name FROM customers WHERE id IN (7, 8)") == [("ext",), ("ext",)]
    loaded.run("UPDATE customers SET name = 'customer ' || id WHERE id IN (7, 8)")


def test_extended_protocol_multi_row_insert_split(loaded):
    """A parameterised multi-row INSERT over several shards (Parse/Bind/Execute): each shard
    gets its rows with the same parameter numbers, RETURNING rows come back in input order;
    text and binary parameters, most referenced by one shard only (text with a backslash,
    binary int8), one (in RETURNING) by every shard."""
    ids = [201, 202, 203, 204, 205, 206]
    rows = "(%s, %s, %s)"
    with loaded.connect() as conn:
        for mark in ("%t", "%b"):
            sql = ("INSERT INTO customers VALUES " + ", ".join(
                rows.replace("%s", mark) for _ in ids) + f" RETURNING id, name, {mark}::text")
            params = []
            for i in ids:
                params += [i, f"ext\\{i}", "FR"]
            got = conn.execute(sql, params + ["tag"]).fetchall()
            assert got == [(i, f"ext\\{i}", "tag") for i in ids]
            where = loaded.placement("customers", "id")
            assert sum(1 for v in where.values() if set(v) & set(ids)) >= 2
            for server, placed in where.items():
                for cid in set(placed) & set(ids):
                    plan = loaded.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) "
                                      f"SELECT * FROM customers WHERE id = {cid}")
                    assert any(server in r[0] for r in plan)
            assert conn.execute("DELETE FROM customers WHERE id = ANY(ARRAY[%s, %s, %s, "
                                "%s, %s, %s]::bigint[])", ids).rowcount == len(ids)


def test_commit_failure_names_the_committed_shards(loaded):
    """COMMIT goes to the shards in uid order; when one fails (a deferred constraint), the
    client is told which shards committed and the later ones are rolled back."""
    shard_of = {cid: s for s, ids in loaded.placement("customers", "id").items() for cid in ids}
    pairs = [(a, b) for a in shard_of for b in shard_of if shard_of[a] < shard_of[b]]
    a, b = pairs[0]
    later = sorted({s for s in shard_of.values() if s > shard_of[b]})
    c = next((x for x in shard_of if later and shard_of[x] == later[0]), None)
    loaded.run("ALTER TABLE order_items ADD CONSTRAINT one_sku UNIQUE (customer_id, sku) "
               "DEFERRABLE INITIALLY DEFERRED")
    try:
        with loaded.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute("BEGIN")
            cur.execute(f"INSERT INTO order_items VALUES ({a}, 1, 50, 'A', 1)")
            cur.execute(f"INSERT INTO order_items VALUES ({b}, 1, 50, 'B', 1), "
                        f"({b}, 1, 51, 'B', 1)")
            if c is not None:
                cur.execute(f"INSERT INTO order_items VALUES ({c}, 1, 50, 'C', 1)")
            with pytest.raises(psycopg.errors.UniqueViolation) as ei:
                cur.execute("COMMIT")
            assert ei.value.diag.message_detail.endswith(
                f"The transaction was committed on shard {shard_of[a]}.")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert loaded.run(f"SELECT sku FROM order_items WHERE customer_id = {a} "
                          "AND line = 50") == [("A",)]
        assert loaded.run(f"SELECT sku FROM order_items WHERE customer_id = {b} "
                          "AND line >= 50") == []
        if c is not None:
            assert loaded.run(f"SELECT sku FROM order_items WHERE customer_id = {c} "
                              "AND line = 50") == []
    finally:
        loaded.run(f"DELETE FROM order_items WHERE customer_id = {a} AND line = 50")
        loaded.run("ALTER TABLE order_items DROP CONSTRAINT one_sku")


def test_reference_write_failure_names_the_committed_copies(loaded):
    loaded.cluster.sql("shard-c", "INSERT INTO countries VALUES ('XX', 'only here')",
                       dbname=loaded.db)
    try:
        with pytest.raises(psycopg.errors.UniqueViolation) as ei:
            loaded.run("INSERT INTO countries VALUES ('XX', 'Nowhere')")
        assert ei.value.diag.message_detail.endswith(
            "Committed on shards shard-a, shard-b.")
        assert loaded.shard_rows("shard-a", "SELECT name FROM countries WHERE code = 'XX'") \
            == [("Nowhere",)]
        assert loaded.shard_rows("shard-d", "SELECT name FROM countries WHERE code = 'XX'") \
            == []
    finally:
        loaded.run("DELETE FROM countries WHERE code = 'XX'")
