"""
Global secondary indexes that work (issue 19; src/router/plan_gsi.c, src/exec/route_gsi.c):
the storefront topology with its `orders_by_id` GSI enabled (orders are sharded by
customer_id, the lookup table by id) and a non-unique GSI on orders.status. Every write to
the owner keeps the lookup rows exactly equal to the owner rows (checked on the shards
directly); a unique GSI refuses a duplicate anywhere with 23505; a read with the indexed
column reads the lookup first and goes to the owner rows' shards only; the shapes the router
cannot maintain are refused with their codes. Results are compared with the reference server
holding every row.
"""
import threading

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import SCHEMA, Store, routing_neki, sharded_database, topology

LOOKUPS = [
    "CREATE TABLE orders_by_id (id bigint PRIMARY KEY, customer_id bigint NOT NULL)",
    "CREATE TABLE orders_by_status (status text NOT NULL, customer_id bigint NOT NULL, "
    "id bigint NOT NULL, PRIMARY KEY (status, customer_id, id))",
    # V11: a unique GSI whose lookup primary key is not its columns is disabled
    "CREATE TABLE status_once (status text, customer_id bigint PRIMARY KEY)",
    # members: an owner of one unique GSI (one lookup shard per write)
    "CREATE TABLE members (customer_id bigint PRIMARY KEY, email text NOT NULL)",
    "CREATE TABLE members_by_email (email text PRIMARY KEY, customer_id bigint NOT NULL)",
    # tickets: an owner of one non-unique GSI that only the cost test reads through
    "CREATE TABLE tickets (customer_id bigint, id bigint, queue text NOT NULL, "
    "PRIMARY KEY (customer_id, id))",
    "CREATE INDEX ON tickets (queue)",
    "CREATE TABLE tickets_by_queue (queue text, customer_id bigint, id bigint, "
    "PRIMARY KEY (queue, customer_id, id))",
]


def gsi_topology(db):
    doc = topology(db)
    d = doc["databases"][db]
    tables = d["schemas"]["public"]["tables"]
    tables["orders"]["secondary_indexes"] = [
        {"name": "orders_by_id", "columns": ["id"]},
        {"name": "orders_by_status", "columns": ["status"]}]
    tables["orders_by_status"] = {"shard_group": "customer_data",
                                  "shard_index": "order_by_status"}
    tables["status_once"] = {"shard_group": "authoritative"}
    tables["orders"]["secondary_indexes"].append({"name": "status_once",
                                                  "columns": ["status"]})
    doc["shard_indexes"]["order_by_status"] = {"type": "xxhash", "columns": ["status"]}
    doc["shard_indexes"]["member_by_email"] = {"type": "xxhash", "columns": ["email"]}
    tables["members"] = {"shard_group": "customer_data",
                         "secondary_indexes": [{"name": "members_by_email",
                                                "columns": ["email"]}]}
    tables["members_by_email"] = {"shard_group": "customer_data",
                                  "shard_index": "member_by_email"}
    d["global_secondary_indexes"]["members_by_email"] = {
        "schema": "public", "table": "members_by_email", "owner_table": "members",
        "columns": ["email"], "owner_sk_columns": ["customer_id"], "unique": True,
        "enabled": True}
    doc["shard_indexes"]["ticket_by_queue"] = {"type": "xxhash", "columns": ["queue"]}
    tables["tickets"] = {"shard_group": "customer_data",
                         "secondary_indexes": [{"name": "tickets_by_queue",
                                                "columns": ["queue"]}]}
    tables["tickets_by_queue"] = {"shard_group": "customer_data",
                                  "shard_index": "ticket_by_queue"}
    d["global_secondary_indexes"]["tickets_by_queue"] = {
        "schema": "public", "table": "tickets_by_queue", "owner_table": "tickets",
        "columns": ["queue"], "owner_sk_columns": ["customer_id"],
        "owner_pk_columns": ["customer_id", "id"], "unique": False, "enabled": True}
    d["global_secondary_indexes"]["orders_by_id"]["enabled"] = True
    d["global_secondary_indexes"]["orders_by_status"] = {
        "schema": "public", "table": "orders_by_status", "owner_table": "orders",
        "columns": ["status"], "owner_sk_columns": ["customer_id"],
        "owner_pk_columns": ["customer_id", "id"], "unique": False, "enabled": True}
    d["global_secondary_indexes"]["status_once"] = {
        "schema": "public", "table": "status_once", "owner_table": "orders",
        "columns": ["status"], "owner_sk_columns": ["customer_id"], "unique": True,
        "enabled": True}
    return doc


@pytest.fixture(scope="module")
def gs(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    with sharded_database(pg_cluster, "gsi") as db, \
            routing_neki(pg_cluster, db, gsi_topology(db), Store) as st:
        for sql in SCHEMA + LOOKUPS:
            st.run(sql)
        with st.ref() as conn:
            for sql in SCHEMA:
                conn.execute(sql)
        yield st


@pytest.fixture
def st(gs):
    """The owner and lookup tables empty, here and on the reference."""
    for s in gs.cluster.shards:
        gs.shard_rows(s, "TRUNCATE orders, orders_by_id, orders_by_status")
    with gs.ref() as conn:
        conn.execute("TRUNCATE orders")
    return gs


def everywhere(st, sql):
    """The rows of <sql> run directly on every data shard, sorted."""
    return sorted(r for s in st.cluster.shards for r in st.shard_rows(s, sql))


def assert_lookups_match(st):
    """Each lookup table holds exactly one row per owner row: nothing missing, no orphan."""
    owners = everywhere(st, "SELECT id, customer_id, status FROM orders")
    assert everywhere(st, "SELECT id, customer_id FROM orders_by_id") == \
        sorted((i, c) for i, c, _ in owners)
    assert everywhere(st, "SELECT status, customer_id, id FROM orders_by_status") == \
        sorted((s, c, i) for i, c, s in owners)
    return owners


def both_run(st, sql, params=None):
    """<sql> through neki (server-side binding when <params>) and on the reference."""
    got = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            try:
                cur = conn.execute(sql, params) if params is not None else \
                    psycopg.ClientCursor(conn).execute(sql)
                rows = sorted(cur.fetchall()) if cur.description else None
                got.append((cur.statusmessage, rows))
            except psycopg.Error as e:
                got.append((f"ERROR {e.diag.sqlstate} {e.diag.message_primary}", None))
    assert got[0] == got[1], f"{sql}: neki {got[0]} != reference {got[1]}"
    return got[0]


def load(st, n=20):
    for i in range(1, n + 1):
        both_run(st, f"INSERT INTO orders VALUES ({i}, {i * 10}, "
                     f"'{'paid' if i % 2 else 'new'}', {i}.5), ({i}, {i * 10 + 1}, 'new', 1)")
    return assert_lookups_match(st)


def race(clients, work):
    """Run work(k) for k in range(clients) in threads at once; (errors' SQLSTATEs, count of
    statements done) as work() reports them through its two lists."""
    errors, done = [], []
    threads = [threading.Thread(target=work, args=(k, errors, done)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors, done


def neki_error(st, sql, params=None):
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            if params is None:
                psycopg.ClientCursor(conn).execute(sql)
            else:
                conn.execute(sql, params)
    return e.value


# ---- writes ---------------------------------------------------------------------------

def test_insert_writes_lookup_rows(st):
    owners = load(st)
    assert len(owners) == 40
    # several rows of several shards in one INSERT, and bound parameters (extended protocol)
    both_run(st, "INSERT INTO orders VALUES (101, 5001, 'new', 1), (102, 5002, 'paid', 2), "
                 "(103, 5003, 'new', 3)")
    both_run(st, "INSERT INTO orders (id, customer_id, status) VALUES (%s, %s, %s)",
             (6001, 104, "held"))
    both_run(st, "INSERT INTO orders (id, customer_id, status, total) VALUES (%s, %s, %s, %s)",
             (6002, 105, "new", 2.5))
    assert len(assert_lookups_match(st)) == 45


def test_unique_gsi_refuses_a_duplicate_on_any_shard(st):
    load(st, 4)
    # customer 33 lives on another shard than customer 1; id 10 is taken by customer 1
    for sql, params in (("INSERT INTO orders VALUES (33, 10, 'new', 1)", None),
                        ("INSERT INTO orders VALUES (%s, %s, 'new', 1)", (7, 20)),
                        ("INSERT INTO orders VALUES (8, 900, 'new', 1), (9, 900, 'new', 1)",
                         None)):
        e = neki_error(st, sql, params)
        assert e.diag.sqlstate == "23505", e
        assert "already exists" in (e.diag.message_detail or ""), e
    assert len(assert_lookups_match(st)) == 8


def test_a_failed_transaction_keeps_no_lookup_row(st):
    with st.connect() as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO orders VALUES (1, 10, 'new', 1)")
        conn.execute("INSERT INTO orders VALUES (%s, %s, 'new', 1)", (2, 20))
        conn.execute("ROLLBACK")
    # a Query whose later statement fails: its implicit transaction rolls back whole
    e = neki_error(st, "INSERT INTO orders VALUES (3, 30, 'new', 1); SELECT 1/0")
    assert e.diag.sqlstate == "22012"
    assert assert_lookups_match(st) == []
    with st.connect() as conn:
        with conn.transaction():
            conn.execute("INSERT INTO orders VALUES (4, 40, 'new', 1)")
            conn.execute("DELETE FROM orders WHERE id = 40")
            conn.execute("INSERT INTO orders VALUES (5, 40, 'new', 1)")
    assert assert_lookups_match(st) == [(40, 5, "new")]


def test_delete_removes_lookup_rows(st):
    load(st)
    assert both_run(st, "DELETE FROM orders WHERE customer_id = 3")[0] == "DELETE 2"
    assert both_run(st, "DELETE FROM orders WHERE id = 41")[0] == "DELETE 1"
    assert both_run(st, "DELETE FROM orders WHERE id = %s", (51,))[0] == "DELETE 1"
    assert both_run(st, "DELETE FROM orders o WHERE o.status = 'paid' AND total > 10")[0] == \
        "DELETE 5"
    assert both_run(st, "DELETE FROM orders WHERE id = 99999")[0] == "DELETE 0"
    assert len(assert_lookups_match(st)) == 31
    assert both_run(st, "DELETE FROM orders")[0] == "DELETE 31"
    assert assert_lookups_match(st) == []


def test_insert_shapes(st):
    """Defaults, expressions, INSERT ... SELECT on the rows' own shards, ON CONFLICT with a
    target, RETURNING with constants: each writes exactly its rows' lookup rows."""
    load(st, 4)
    for sql in ("INSERT INTO orders (customer_id, id) VALUES (5, 500)",
                "INSERT INTO orders VALUES (6, 600 + 1, 'n' || 'ew', 1)",
                "INSERT INTO orders SELECT customer_id, id + 1000, status, total FROM orders "
                "WHERE total < 3",
                "INSERT INTO orders VALUES (1, 10, 'x', 1), (7, 700, 'new', 1) "
                "ON CONFLICT (customer_id, id) DO NOTHING",
                "INSERT INTO orders AS o VALUES (1, 10, 'x', 9), (8, 800, 'new', 1) "
                "ON CONFLICT (customer_id, id) DO UPDATE SET total = excluded.total",
                "INSERT INTO orders VALUES (9, 900, 'new', 1) RETURNING id, status"):
        both_run(st, sql)
    both_run(st, "INSERT INTO orders VALUES (%s, %s, %s, %s) ON CONFLICT ON CONSTRAINT "
                 "orders_pkey DO NOTHING", (10, 1000, "new", 2))
    with st.ref() as conn:
        want = sorted(conn.execute("SELECT id, customer_id, status FROM orders").fetchall())
    assert assert_lookups_match(st) == want
    # a duplicate of the unique GSI in an INSERT ... SELECT or an upsert: 23505, nothing kept
    for sql in ("INSERT INTO orders SELECT customer_id, id - 10, status, total FROM orders "
                "WHERE customer_id = 2 AND id = 20",
                "INSERT INTO orders VALUES (11, 10, 'new', 1) ON CONFLICT (customer_id, id) "
                "DO NOTHING"):
        e = neki_error(st, sql)
        assert e.diag.sqlstate == "23505", (sql, e)
    assert assert_lookups_match(st) == want


def test_refused_shapes(st):
    load(st, 2)
    cases = [
        ("DELETE FROM orders WHERE id = 10 RETURNING id", "NK013", "104"),
        ("UPDATE orders SET customer_id = 12 WHERE id = 10", "NK013", "145"),
        ("UPDATE orders SET id = 12 WHERE id = 10 RETURNING id", "NK013", "104"),
        ("UPDATE orders o SET status = 'x' FROM customers c WHERE c.id = o.customer_id",
         "0A000", "reading other tables"),
        ("UPDATE orders SET status = 'x' WHERE id IN (SELECT id FROM orders_by_id)",
         "0A000", '"orders_by_id" is the lookup table of global secondary index'),
        ("SELECT * FROM orders_by_id", "0A000", "cannot be read or written through"),
        ("INSERT INTO orders_by_status VALUES ('x', 1, 2)", "0A000", "is the lookup table"),
        ("TRUNCATE orders_by_id", "0A000", 'must also truncate "orders", the owner'),
        ("INSERT INTO orders VALUES (1, 10, 'new', 1) ON CONFLICT (customer_id, id) "
         "DO UPDATE SET status = 'x'", "NK013", "145"),
        ("INSERT INTO orders VALUES (1, 10, 'new', 1) ON CONFLICT DO NOTHING", "0A000",
         "without a conflict target"),
        ("INSERT INTO orders (customer_id, id) VALUES (1, 77) RETURNING id", "NK306",
         '"status"'),
        ("INSERT INTO orders VALUES (1, 10 + 5, 'new', 1) RETURNING id", "0A000",
         "not a constant"),
        ("INSERT INTO orders SELECT * FROM orders RETURNING id", "0A000",
         "INSERT ... SELECT ... RETURNING"),
        ("INSERT INTO orders VALUES (1, NULL, 'new', 1) RETURNING id", "23502", '"id"'),
        ("INSERT INTO orders VALUES (1, NULL, 'new', 1)", "23502", '"id"'),
        ("MERGE INTO orders o USING orders s ON o.customer_id = s.customer_id "
         "WHEN MATCHED THEN DELETE", "NK013", "104"),
        ("WITH d AS (DELETE FROM orders WHERE id = 10 RETURNING 1) SELECT count(*) FROM d",
         "NK013", "104"),
        ("TRUNCATE orders", "0A000", 'must also truncate "orders_by_id"'),
        ("TRUNCATE orders, orders_by_id", "0A000", 'must also truncate "orders_by_status"'),
        ("EXPLAIN ANALYZE INSERT INTO orders VALUES (1, 12, 'new', 1)", "0A000",
         "EXPLAIN ANALYZE of a write"),
    ]
    for sql, state, text in cases:
        e = neki_error(st, sql)
        assert e.diag.sqlstate == state, (sql, e)
        assert text in str(e) or text in (e.diag.message_detail or ""), (sql, str(e))
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders_by_id FROM STDIN", [(1, 2)])
    assert e.value.diag.sqlstate == "0A000" and "lookup table" in str(e.value)
    # a plain EXPLAIN reads no row: it may name one
    assert st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders_by_id WHERE id = 10")
    # an UPDATE of the other columns keeps its lookup rows
    assert both_run(st, "UPDATE orders SET total = 7 WHERE id = 10")[0] == "UPDATE 1"
    assert len(assert_lookups_match(st)) == 4
    # TRUNCATE of the owner with its lookup tables: both empty on every shard
    assert st.run("TRUNCATE orders, orders_by_id, orders_by_status") is None
    assert assert_lookups_match(st) == []


def test_insert_select_the_router_runs_writes_lookup_rows(st):
    """INSERT ... SELECT whose rows move to other shards (the router reads the source and
    writes each row where it belongs) RETURNING the lookup columns of the rows it wrote,
    then their lookup rows: over both protocols, with ON CONFLICT DO NOTHING (a skipped
    row gets none), a duplicate id failing it whole, a rolled-back block keeping none."""
    load(st, 6)
    assert both_run(st, "INSERT INTO orders SELECT customer_id + 100, id + 5000, status, "
                        "total FROM orders")[0] == "INSERT 0 12"
    assert both_run(st, "INSERT INTO orders SELECT customer_id + %s, id + %s, status, total "
                        "FROM orders WHERE customer_id = %s", (300, 9000, 2))[0] == "INSERT 0 2"
    assert both_run(st, "DELETE FROM orders WHERE id = 5040")[0] == "DELETE 1"
    assert both_run(st, "INSERT INTO orders SELECT customer_id + 100, id + 5000, 'again', "
                        "total FROM orders WHERE customer_id IN (1, 2, 3, 4) "
                        "ON CONFLICT (customer_id, id) DO NOTHING")[0] == "INSERT 0 1"
    assert len(assert_lookups_match(st)) == 12 + 12 + 2
    e = neki_error(st, "INSERT INTO orders SELECT customer_id + 700, id, status, total "
                       "FROM orders WHERE customer_id = 4")
    assert e.diag.sqlstate == "23505" and "already exists" in (e.diag.message_detail or "")
    with st.connect() as conn:
        conn.execute("BEGIN")
        cur = conn.execute("INSERT INTO orders SELECT customer_id + 800, id + 80000, status, "
                           "total FROM orders WHERE customer_id < 100")
        assert cur.statusmessage == "INSERT 0 12"
        conn.execute("ROLLBACK")
    owners = assert_lookups_match(st)
    assert len(owners) == 26 and (5040, 104, "again") in owners


def test_update_moves_lookup_rows(st):
    """An UPDATE of indexed columns (any number of rows, either GSI, by the shard key or
    scattered, bound values too) deletes the old lookup rows and writes the new ones; a
    duplicate of the unique GSI fails whole with 23505."""
    load(st, 6)
    for sql, params in (("UPDATE orders SET id = id + 1000 WHERE customer_id = 3", None),
                        ("UPDATE orders o SET status = 'shipped', total = o.total + 1 "
                         "WHERE status = 'paid' AND total > 2", None),
                        ("UPDATE orders SET status = %s WHERE id = %s", ("held", 21)),
                        ("UPDATE orders SET id = %s, status = 'moved' WHERE id = %s",
                         (9001, 41)),
                        ("UPDATE orders SET status = status WHERE customer_id = 2", None),
                        ("UPDATE orders SET id = 5 WHERE false", None)):
        both_run(st, sql, params)
    with st.ref() as conn:
        want = sorted(conn.execute("SELECT id, customer_id, status FROM orders").fetchall())
    assert assert_lookups_match(st) == want
    for sql in ("UPDATE orders SET id = 10 WHERE id = 11",       # (10: customer 1's, same shard)
                "UPDATE orders SET id = 10 WHERE id = 51"):      # (another shard's owner)
        e = neki_error(st, sql)
        assert e.diag.sqlstate == "23505", (sql, e)
    assert assert_lookups_match(st) == want


def test_updates_racing_keep_the_lookups_exact(st):
    """Clients updating indexed columns at once, each its own customer's orders (status
    moves through the non-unique GSI, ids renumbered through the unique one), all of them
    through the same lookup shards: the lookups equal the owners afterwards. (Unique ids
    that two clients swap at once would wait on each other across two lookup shards, where
    no Postgres sees the cycle: doc/router.md says so; the insert race covers the
    conflicts.)"""
    load(st, 6)

    def client(k, errors, done):
        cid = k + 1
        with st.connect(autocommit=True) as conn:
            for n in range(15):
                try:
                    if n % 2:
                        conn.execute("UPDATE orders SET status = %s WHERE customer_id = %s",
                                     (f"s{n}", cid))
                    else:
                        conn.execute("UPDATE orders SET id = id + 1000 WHERE customer_id = %s",
                                     (cid,))
                    done.append(1)
                except psycopg.Error as e:
                    errors.append(e.diag.sqlstate)
    errors, done = race(6, client)
    assert errors == [] and len(done) == 90, errors
    owners = assert_lookups_match(st)
    assert len(owners) == 12 and {s for _, _, s in owners} == {"s13"}


def copy_rows(conn, sql, rows=None, data=None):
    """COPY FROM STDIN through <conn>: <rows> written as rows, or the bytes <data>; the
    status line."""
    with conn.cursor() as cur:
        with cur.copy(sql) as cp:
            if data is not None:
                cp.write(data)
            for row in rows or ():
                cp.write_row(row)
        return cur.statusmessage


def both_copy(st, sql, rows=None, data=None):
    """The same COPY through neki and on the reference: the same status or error."""
    got = []
    for connect in (st.connect, st.ref):
        with connect() as conn:
            try:
                got.append(copy_rows(conn, sql, rows, data))
            except psycopg.Error as e:
                got.append(f"ERROR {e.diag.sqlstate}")
    assert got[0] == got[1], f"{sql}: neki {got[0]} != reference {got[1]}"
    return got[0]


def test_copy_from_writes_lookup_rows(st):
    """COPY FROM into the owner writes each row's lookup rows in its transaction, in text,
    CSV (quoted values, a column list in another order) and binary format; more rows than
    one lookup step holds."""
    assert both_copy(st, "COPY orders FROM STDIN",
                     [(c, c * 10 + k, "new" if k else "paid", k) for c in range(1, 9)
                      for k in range(3)]) == "COPY 24"
    assert both_copy(st, "COPY orders (status, id, customer_id) FROM STDIN (FORMAT csv)",
                     data=b'"a,b",501,51\n"say ""hi""",502,52\nnew,503,53\n') == "COPY 3"
    with st.connect() as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY orders (customer_id, id, status) FROM STDIN "
                          "(FORMAT binary)") as cp:
                cp.set_types(["int8", "int8", "text"])
                for k in range(5):
                    cp.write_row((60 + k, 600 + k, f"bin{k}"))
    with st.ref() as conn:
        conn.execute("INSERT INTO orders (customer_id, id, status) "
                     "SELECT 60 + k, 600 + k, 'bin' || k FROM generate_series(0, 4) k")
    # 2500 rows: the lookup INSERTs go in steps of 1000 rows
    assert both_copy(st, "COPY orders (customer_id, id, status) FROM STDIN (FORMAT csv)",
                     data="".join(f"{1000 + k % 40},{10000 + k},s{k % 7}\n"
                                  for k in range(2500)).encode()) == "COPY 2500"
    owners = assert_lookups_match(st)
    assert len(owners) == 24 + 3 + 5 + 2500
    assert both_run(st, "SELECT customer_id, id, status FROM orders WHERE id IN "
                        "(11, 501, 502, 603, 12345)")[1] == \
        [(1, 11, "new"), (51, 501, "a,b"), (52, 502, 'say "hi"'), (63, 603, "bin3"),
         (1025, 12345, "s0")]


def test_copy_from_duplicate_fails_whole(st):
    """A unique GSI's duplicate in a COPY, against a row on another shard or inside the
    COPY itself, fails it with 23505 and keeps none of its rows (nor their lookup rows);
    in a transaction block the block fails and its earlier rows go with it."""
    load(st, 4)
    for rows in ([(33, 100, "new", 1), (34, 10, "new", 1)],      # id 10: customer 1's
                 [(35, 700, "new", 1), (36, 700, "new", 1)]):    # twice in the COPY
        with st.connect() as conn:     # (the reference has no unique id)
            with pytest.raises(psycopg.Error) as e:
                copy_rows(conn, "COPY orders FROM STDIN", rows)
        assert e.value.diag.sqlstate == "23505", e.value
    with st.connect() as conn:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO orders VALUES (40, 800, 'new', 1)")
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders FROM STDIN", [(41, 801, "x", 1), (42, 20, "x", 1)])
        assert e.value.diag.sqlstate == "23505"
        assert "already exists" in (e.value.diag.message_detail or "")
        conn.execute("ROLLBACK")
        conn.execute("BEGIN")
        assert copy_rows(conn, "COPY orders FROM STDIN", [(43, 900, "x", 1)]) == "COPY 1"
        conn.execute("ROLLBACK")
    assert len(assert_lookups_match(st)) == 8
    with st.connect() as conn:
        with conn.transaction():
            assert copy_rows(conn, "COPY orders FROM STDIN", [(44, 901, "x", 1)]) == "COPY 1"
            conn.execute("DELETE FROM orders WHERE id = 901")
            assert copy_rows(conn, "COPY orders FROM STDIN", [(45, 901, "y", 1)]) == "COPY 1"
    assert (901, 45, "y") in assert_lookups_match(st)


def test_copy_from_under_atomic_commit(st):
    """Under __neki.tx_mode atomic the COPY's owner rows and lookup rows on several shards
    commit with two-phase commit: all of them, and a failed one leaves no prepared
    transaction behind."""
    with st.connect(autocommit=True) as conn:
        conn.execute("SET __neki.tx_mode = 'atomic'")
        assert copy_rows(conn, "COPY orders FROM STDIN",
                         [(c, 70 + c, "new", 1) for c in range(1, 13)]) == "COPY 12"
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders FROM STDIN", [(20, 900, "new", 1), (21, 71, "x", 1)])
        assert e.value.diag.sqlstate == "23505"
    assert len(assert_lookups_match(st)) == 12
    assert everywhere(st, "SELECT gid FROM pg_prepared_xacts") == []


def test_copy_from_refusals(st):
    """A COPY whose input lacks a lookup column (status would come from its default) is
    NK013 44 naming the column; a NULL indexed value is refused as an INSERT's is; a bad
    row fails the COPY with nothing kept."""
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders (customer_id, id) FROM STDIN", [(1, 10)])
    assert e.value.diag.sqlstate == "NK013" and "secondary index" in str(e.value)
    assert '"status"' in (e.value.diag.message_detail or "")
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders FROM STDIN", data=b"1\t10\t\\N\t1\n")
    assert e.value.diag.sqlstate == "23502"
    with st.connect() as conn:
        with pytest.raises(psycopg.Error) as e:
            copy_rows(conn, "COPY orders FROM STDIN", data=b"1\t10\tnew\t1\n2\t20\n")
    assert e.value.diag.sqlstate == "22P04"
    assert assert_lookups_match(st) == []


def test_copy_race_keeps_lookups_exact(st):
    """Clients COPY batches of owners with ids from a small domain at once: every COPY
    commits whole or not at all, the ids end distinct and the lookups equal the owners."""
    def client(k, errors, done):
        with st.connect(autocommit=True) as conn:
            for n in range(6):
                rows = [(k * 100 + n * 10 + j, (k * 7 + n * 5 + j * 3) % 40, "new", 1)
                        for j in range(4)]
                try:
                    copy_rows(conn, "COPY orders FROM STDIN", rows)
                    done.append(len(rows))
                except psycopg.Error as e:
                    errors.append(e.diag.sqlstate)
    errors, done = race(5, client)
    assert errors and done and set(errors) <= {"23505", "40P01"}, errors
    owners = assert_lookups_match(st)
    assert len(owners) == sum(done) and len({i for i, _, _ in owners}) == len(owners)


def test_uniqueness_race(st):
    """Clients insert owners on every shard with ids from a small domain at once: the ids
    end distinct, the lookups equal the owners, every refusal was 23505."""
    def client(k, errors, done):
        with st.connect(autocommit=True) as conn:
            for n in range(25):
                try:
                    conn.execute("INSERT INTO orders VALUES (%s, %s, 'new', 1)",
                                 (k * 1000 + n, (k * 7 + n * 3) % 30))
                    done.append(1)
                except psycopg.Error as e:
                    errors.append(e.diag.sqlstate)
    errors, done = race(6, client)
    owners = assert_lookups_match(st)
    ids = [i for i, _, _ in owners]
    assert len(ids) == len(set(ids)) == len(done) == 30
    assert set(errors) == {"23505"} and len(errors) == 150 - 30


def test_uniqueness_race_under_atomic_commit(st):
    """Under __neki.tx_mode atomic, clients insert members (one unique GSI: the owner's shard
    and one lookup shard, which prepares with its lookup INSERT) with emails from a small
    domain, over the simple and the extended protocol: the emails end distinct, the lookup
    equals the owners, every refusal was 23505, and no transaction stays prepared."""
    for s in st.cluster.shards:
        st.shard_rows(s, "TRUNCATE members, members_by_email")

    def client(k, errors, done):
        with st.connect(autocommit=True) as conn:
            conn.execute("SET __neki.tx_mode = 'atomic'")
            for n in range(20):
                cid, email = k * 1000 + n, f"m{(k * 7 + n * 3) % 25}"
                try:
                    if k % 2:
                        conn.execute("INSERT INTO members VALUES (%s, %s)", (cid, email))
                    else:
                        psycopg.ClientCursor(conn).execute(
                            f"INSERT INTO members VALUES ({cid}, '{email}')")
                    done.append(1)
                except psycopg.Error as e:
                    errors.append(e.diag.sqlstate)
    errors, done = race(6, client)
    owners = everywhere(st, "SELECT email, customer_id FROM members")
    assert everywhere(st, "SELECT email, customer_id FROM members_by_email") == owners
    assert len({e for e, _ in owners}) == len(owners) == len(done) == 25
    assert set(errors) == {"23505"} and len(errors) == 120 - 25
    assert everywhere(st, "SELECT gid FROM pg_prepared_xacts") == []


def shard_of_plan(st, sql):
    """The one shard EXPLAIN (NEKI_PLAN) routes <sql> to."""
    text = "\n".join(r[0] for r in st.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) {sql}"))
    line = next(l for l in text.splitlines() if "Shards:" in l)
    found = [s for s in st.cluster.shards if s in line]
    assert len(found) == 1, text
    return found[0]


def member_apart(st):
    """A member (customer id, email) whose row and lookup row live on different shards, and
    those two shards."""
    for cid in range(7000, 7100):
        email = f"apart{cid}"
        owner = shard_of_plan(st, f"INSERT INTO members VALUES ({cid}, '{email}')")
        lookup = shard_of_plan(st, f"INSERT INTO members_by_email VALUES ('{email}', {cid})")
        if owner != lookup:
            return cid, email, owner, lookup
    raise AssertionError("no member apart from its lookup row")


@pytest.mark.parametrize("extended", [False, True], ids=["simple", "extended"])
def test_lookup_row_goes_beside_the_owner_row(st, extended):
    """A one-row INSERT of given values sends its lookup row in the same round as its owner
    row, the lookup shard prepared with it under atomic commit: while another transaction
    holds the owner row's key, the lookup shard has prepared already. When the owner row then
    fails (the key was taken), that prepared lookup row is rolled back: the client gets the
    owner's 23505 and its session goes on, nothing stays prepared, no lookup row is left."""
    for s in st.cluster.shards:
        st.shard_rows(s, "TRUNCATE members, members_by_email")
    cid, email, owner, lookup = member_apart(st)
    result = []

    def insert(conn):
        try:
            if extended:
                conn.execute("INSERT INTO members VALUES (%s, %s)", (cid, email))
            else:
                psycopg.ClientCursor(conn).execute(f"INSERT INTO members VALUES ({cid}, '{email}')")
            result.append("ok")
        except psycopg.Error as e:
            result.append((e.diag.sqlstate, e.diag.message_primary))

    def prepared(server):
        return st.shard_rows(server, "SELECT gid FROM pg_prepared_xacts "
                                     "WHERE database = current_database()")

    with st.connect(autocommit=True) as conn:
        conn.execute("SET __neki.tx_mode = 'atomic'")
        conn.execute("SELECT count(*) FROM members").fetchall()	# (links to every shard)
        holder = st.cluster.connect(owner, dbname=st.db, autocommit=False)
        try:
            holder.execute("INSERT INTO members VALUES (%s, 'held')", (cid,))
            t = threading.Thread(target=insert, args=(conn,))
            t.start()
            wait_until(lambda: len(prepared(lookup)) == 1, 20,
                       what="the lookup shard to prepare while the owner row waits")
            assert not result
        finally:
            holder.commit()
            holder.close()
        t.join(30)
        assert result == [("23505",
                           'duplicate key value violates unique constraint "members_pkey"')]
        wait_until(lambda: not prepared(lookup), 20, what="the lookup row rolled back")
        assert everywhere(st, "SELECT email FROM members_by_email") == []
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
    assert everywhere(st, "SELECT gid FROM pg_prepared_xacts") == []


def test_a_trigger_that_changes_the_row_is_followed(st):
    """A BEFORE INSERT trigger on the owner may store another value than the one given: the
    catalog says so, and the lookup row is then written from the row stored (the statement
    RETURNING it first), never from the VALUES; without the trigger, beside it again."""
    for s in st.cluster.shards:
        st.shard_rows(s, "TRUNCATE members, members_by_email")
    explain = "EXPLAIN (NEKI_PLAN, FORMAT TEXT) INSERT INTO members VALUES (1, 'a')"
    beside = 'Lookup Rows Written Beside: INSERT INTO "public"."members_by_email" ' \
             '("email", "customer_id") VALUES ($2, $1)'
    assert beside in "\n".join(r[0] for r in st.run(explain))
    st.run("CREATE FUNCTION lower_email() RETURNS trigger LANGUAGE plpgsql AS "
           "$$BEGIN NEW.email := lower(NEW.email); RETURN NEW; END$$")
    st.run("CREATE TRIGGER members_lower BEFORE INSERT ON members FOR EACH ROW "
           "EXECUTE FUNCTION lower_email()")
    try:
        assert "Written Beside" not in "\n".join(r[0] for r in st.run(explain))
        with st.connect(autocommit=True) as conn:
            for tx_mode in ("multi", "atomic"):
                conn.execute(f"SET __neki.tx_mode = '{tx_mode}'")
                for k in range(8):
                    cid = 100 * (tx_mode == "atomic") + k
                    if k % 2:
                        conn.execute("INSERT INTO members VALUES (%s, %s)", (cid, f"MiXeD{cid}"))
                    else:
                        psycopg.ClientCursor(conn).execute(
                            f"INSERT INTO members VALUES ({cid}, 'MiXeD{cid}')")
    finally:
        st.run("DROP TRIGGER members_lower ON members")
        st.run("DROP FUNCTION lower_email()")
    owners = everywhere(st, "SELECT email, customer_id FROM members")
    assert len(owners) == 16 and all(e == e.lower() for e, _ in owners), owners
    assert everywhere(st, "SELECT email, customer_id FROM members_by_email") == owners
    assert beside in "\n".join(r[0] for r in st.run(explain))


# ---- reads ----------------------------------------------------------------------------

def test_read_through_the_lookup(st):
    load(st)
    for sql in ("SELECT * FROM orders WHERE id = 71",
                "SELECT * FROM orders WHERE id IN (11, 71, 191, 5)",
                "SELECT * FROM orders WHERE id IN (11, NULL, 71)",
                "SELECT * FROM orders WHERE id = ANY (ARRAY[NULL, 191])",
                "SELECT count(*), sum(total) FROM orders WHERE id = 30",
                "SELECT status, count(*) FROM orders WHERE status = 'paid' GROUP BY status",
                "SELECT id FROM orders WHERE id = 9999",
                "SELECT id FROM orders WHERE id = 71 AND total > 100",
                "SELECT * FROM orders WHERE id = 71 FOR UPDATE"):
        both_run(st, sql)
    both_run(st, "SELECT customer_id, status FROM orders WHERE id = %s", (131,))
    # several reads and writes in one Query, each with its own steps
    both_run(st, "SELECT customer_id FROM orders WHERE id = 10; INSERT INTO orders VALUES "
                 "(77, 7700, 'new', 1); SELECT customer_id FROM orders WHERE id IN (21, 7700)")
    with st.connect() as conn:
        for i in (10, 21, 7700, 31):
            assert conn.execute("SELECT customer_id FROM orders WHERE id = %s",
                                (i,)).fetchall() == [(i // 10 if i < 1000 else 77,)]
    both_run(st, "SELECT customer_id FROM orders WHERE status = %s ORDER BY 1", ("paid",))


def test_covering_read_runs_on_the_lookup(st):
    """A read of only the unique GSI's columns (id, customer_id) is answered by the lookup
    table alone, one round trip, EXPLAIN saying so; with another column, a star or a
    locking clause the lookup is read first and the owner after. The answers equal the
    reference's; a lookup row placed behind the router's back with no owner row is what a
    covered read sees, and only it."""
    load(st)
    for sql in ("SELECT customer_id FROM orders WHERE id = 31",
                "SELECT id, customer_id FROM orders WHERE id IN (11, 41, 999)",
                "SELECT count(*) FROM orders WHERE id IN (11, 21, 31, NULL)",
                "SELECT o.customer_id + 1 AS c FROM orders o WHERE o.id = 51 ORDER BY 1",
                "SELECT customer_id FROM public.orders WHERE id = 61 AND customer_id > 0",
                "SELECT orders.id FROM ONLY orders WHERE id = ANY (ARRAY[71, 81])"):
        both_run(st, sql)
        plan = "\n".join(r[0] for r in st.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) {sql}"))
        assert 'Covered By Lookup: SELECT' in plan and '"public"."orders_by_id"' in plan, plan
    both_run(st, "SELECT customer_id FROM orders WHERE id = %s", (131,))
    for sql in ("SELECT customer_id, status FROM orders WHERE id = 31",
                "SELECT * FROM orders WHERE id = 31",
                "SELECT customer_id FROM orders WHERE id = 31 FOR SHARE"):
        both_run(st, sql)
        plan = "\n".join(r[0] for r in st.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) {sql}"))
        assert "Covered By Lookup" not in plan and "Lookup First" in plan, plan
    for s in st.cluster.shards:     # (on every shard: the lookup's one holds it)
        st.shard_rows(s, "INSERT INTO orders_by_id VALUES (424242, 7)")
    try:
        assert st.run("SELECT customer_id FROM orders WHERE id = 424242") == [(7,)]
        assert st.run("SELECT customer_id, status FROM orders WHERE id = 424242") == []
    finally:
        for s in st.cluster.shards:
            st.shard_rows(s, "DELETE FROM orders_by_id WHERE id = 424242")


def test_read_goes_only_to_the_owner_shards(st):
    """A row placed behind the router's back (no lookup row) on a shard holding none of the
    owners found is not seen by a read routed through the lookup, which a scatter finds: the
    read went to the owner rows' shards only."""
    load(st, 4)     # customers 1 and 3 have a 'paid' order (ids 10 and 30)
    owners = {st.customer_shard(1), st.customer_shard(3)}
    stray = [s for s in st.cluster.shards if s not in owners][0]
    st.shard_rows(stray, "INSERT INTO orders VALUES (1, 10, 'paid', 0)")
    try:
        assert st.run("SELECT customer_id, status FROM orders WHERE id = 10") == [(1, "paid")]
        assert st.run("SELECT count(*) FROM orders WHERE id + 0 = 10") == [(2,)]
    finally:
        st.shard_rows(stray, "DELETE FROM orders WHERE total = 0")


def test_a_non_unique_gsi_is_used_while_it_costs_less(st):
    """A read through a non-unique GSI costs a lookup round, then the owner shards of its
    keys; it is used while its lookups lead to fewer shards than the scatter reaches (spec
    3.3). A queue every customer has sends each lookup to every shard: after that, reads
    plan as the scatter (EXPLAIN says why), measuring again every 16th read; reads of a
    queue of one customer bring the lookup back, and then go to that customer's shard only
    (a row placed behind the router's back elsewhere is not seen). The rows equal the
    reference's throughout."""
    for s in st.cluster.shards:
        st.shard_rows(s, "TRUNCATE tickets, tickets_by_queue")
    with st.ref() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS tickets (customer_id bigint, id bigint, "
                     "queue text NOT NULL, PRIMARY KEY (customer_id, id))")
        conn.execute("TRUNCATE tickets")
    rows = ", ".join(f"({c}, {c * 10 + k}, '{'open' if k else 'vip' if c == 5 else 'done'}')"
                     for c in range(1, 25) for k in range(2))
    both_run(st, f"INSERT INTO tickets VALUES {rows}")
    explain = "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM tickets WHERE queue = 'x'"
    not_used = "Secondary Index Not Used: tickets_by_queue"

    def plan():
        return "\n".join(r[0] for r in st.run(explain))

    with st.connect() as conn:
        for n in range(40):
            if not_used in plan():
                break
            both_run(st, "SELECT customer_id, id FROM tickets WHERE queue = 'open'")
        text = plan()
        assert not_used in text and "Lookup First" not in text, text
        both_run(st, "SELECT count(*) FROM tickets WHERE queue = 'open'")
        for n in range(60):
            if "Secondary Index: tickets_by_queue" in plan():
                break
            assert conn.execute("SELECT id FROM tickets WHERE queue = 'vip'").fetchall() \
                == [(50,)]
        assert "Lookup First" in plan()
    stray = next(s for s in st.cluster.shards if s != st.customer_shard(5))
    st.shard_rows(stray, "INSERT INTO tickets VALUES (5, 999, 'vip')")
    try:
        assert st.run("SELECT count(*) FROM tickets WHERE queue = 'vip'") == [(1,)]
    finally:
        st.shard_rows(stray, "DELETE FROM tickets WHERE id = 999")


def test_a_gsi_whose_lookup_key_differs_is_disabled(st):
    """V11: status_once's lookup primary key is not (status): it is disabled (no lookup
    rows written, no read through it: statuses repeat freely), and the log says why."""
    load(st, 3)
    assert st.shard_rows("auth", "SELECT count(*) FROM status_once") == [(0,)]
    text = "\n".join(r[0] for r in st.run(
        "EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders WHERE status = 'new'"))
    assert "status_once" not in text and "orders_by_status" in text, text
    st.neki.wait_log(r'global_secondary_indexes\.status_once: unique global secondary '
                     r'index "status_once" is disabled')


def test_explain_shows_the_lookup(st):
    rows = [r[0] for r in st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM orders WHERE id = 5")]
    text = "\n".join(rows)
    assert "Secondary Index: orders_by_id" in text, text
    assert 'SELECT "customer_id" FROM "public"."orders_by_id" WHERE "id" IN (E\'5\')' \
        in text, text
    rows = [r[0] for r in st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) INSERT INTO orders VALUES "
                                 "(1, 5, 'new', 1) RETURNING id")]
    text = "\n".join(rows)
    assert 'INSERT INTO "public"."orders_by_id" ("id", "customer_id") VALUES ' \
        "(E'5', E'1')" in text, text
    rows = [r[0] for r in st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) DELETE FROM orders o "
                                 "WHERE id = 5")]
    text = "\n".join(rows)
    assert 'Lookup Rows Deleted After: RETURNING "o"."id", "o"."customer_id", "o"."status"' \
        in text, text
