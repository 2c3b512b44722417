"""
Transactions, cancel, timeouts and shard failures of routed sessions (issues 6 and 7): the
storefront database of test_routing.py on its own neki (4 data shards + authoritative), every
behaviour compared with the reference server where Postgres defines it.
"""
import os
import socket
import struct
import sys
import threading
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, error_fields, summary  # noqa: E402

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 21)]


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "txn") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"ignore_startup_parameters": "extra_float_digits"}  # (JDBC)
                         ) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " + ", ".join(
            f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        yield st


def two_shards(store, base):
    """Two new customer ids >= base on different shards."""
    a = base
    b = next(i for i in range(base + 1, base + 50) if store.customer_shard(i) != store.customer_shard(a))
    return a, b


def run_both(store, sql):
    """<sql> as one simple Query through neki and on the reference: (status or error
    SQLSTATE, warnings' SQLSTATEs, final transaction status) for each."""
    out = []
    for connect in (store.connect, store.ref):
        with connect() as conn:
            notes = []
            conn.add_notice_handler(lambda d: notes.append(d.sqlstate))
            cur = psycopg.ClientCursor(conn)
            try:
                cur.execute(sql)
                status = cur.statusmessage
            except psycopg.Error as e:
                status = "ERROR " + (e.diag.sqlstate or "")
            out.append((status, notes, conn.info.transaction_status.name))
            if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
    return out


def ids_both(store, ids):
    sql = f"SELECT id, name FROM customers WHERE id IN ({', '.join(map(str, ids))}) ORDER BY id"
    got = store.run(sql)
    with store.ref() as conn:
        want = conn.execute(sql).fetchall()
    assert got == want, (got, want)
    return got


def no_idle_in_transaction(store):
    """Every shard backend of the database is out of its transaction (bounded poll)."""
    def check():
        for server in store.cluster.shards + ["auth"]:
            rows = store.cluster.sql(server, "SELECT count(*) FROM pg_stat_activity WHERE "
                                     "datname = %s AND state LIKE 'idle in transaction%%'",
                                     (store.db,))
            if rows[0][0] != 0:
                return False
        return True
    wait_until(check, 10, what="no shard backend idle in transaction")


def cleanup_ids(store, ids):
    sql = f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})"
    store.run(sql)
    with store.ref() as conn:
        conn.execute(sql)


# ---- the implicit transaction of a multi-statement Query -------------------------------

IMPLICIT_CASES = [
    # an error in statement 3 rolls back 1 and 2 on both shards; 4 does not run
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0; "
    "INSERT INTO customers VALUES ({c}, 'z', 'FR')",
    # success: committed on both shards
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); INSERT INTO customers VALUES ({b}, 'y', 'DE'); "
    "SELECT count(*) FROM customers WHERE id IN ({a}, {b})",
    # COMMIT inside: what came before stays (with Postgres's warning), the rest is rolled back
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); COMMIT; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0",
    # ROLLBACK inside: what came before is gone, what follows is committed
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); ROLLBACK; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE')",
    # BEGIN inside: the statements before it join the block, left open
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE')",
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); COMMIT; "
    "INSERT INTO customers VALUES ({c}, 'z', 'FR')",
    # an error after BEGIN leaves the block aborted
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); BEGIN; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE'); SELECT 1 / 0",
    # a syntax error anywhere: nothing runs (the whole string is parsed first)
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); SELECT (1",
    "INSERT INTO customers VALUES ({a}, 'x', 'FR'); SELECT (1; "
    "INSERT INTO customers VALUES ({b}, 'y', 'DE')",
    "SELECT (1",
    # a shard's error on the second shard
    "UPDATE customers SET name = 'u' WHERE id = 1; "
    "UPDATE customers SET name = NULL WHERE id = 2",
]


@pytest.mark.parametrize("case", range(len(IMPLICIT_CASES)))
def test_multi_statement_query_is_one_implicit_transaction(store, case):
    a, b = two_shards(store, 300)
    c = next(i for i in range(b + 1, b + 50) if store.customer_shard(i) not in
             (store.customer_shard(a), store.customer_shard(b)))
    sql = IMPLICIT_CASES[case].format(a=a, b=b, c=c)
    try:
        got, want = run_both(store, sql)
        assert got == want, f"{sql}: neki {got} != reference {want}"
        ids_both(store, [1, 2, a, b, c])
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b, c])
        store.both("UPDATE customers SET name = 'customer ' || id WHERE id IN (1, 2)")


def test_router_error_rolls_the_implicit_transaction_back(store):
    a, b = two_shards(store, 350)
    try:
        with store.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            with pytest.raises(psycopg.Error) as ei:
                cur.execute(f"INSERT INTO customers VALUES ({a}, 'x', 'FR'); "
                            f"INSERT INTO customers VALUES ({b}, 'y', 'DE'); "
                            f"UPDATE customers SET id = 7 WHERE id = {a}")
            assert ei.value.diag.sqlstate == "NK013"
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert store.run(f"SELECT id FROM customers WHERE id IN ({a}, {b})") == []
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b])


# ---- a Query is parsed whole before any of it runs --------------------------------------

def wire_msg(typ, body):
    """One message as comparable data: an error or notice by severity, SQLSTATE, message
    and position (the rest as pgwire.summary gives it)."""
    if typ in "EN":
        return (typ, {k: v for k, v in error_fields(body).items() if k in "SVCMP"})
    return tuple(summary([(typ, body)]))


def wire_both(store, sql):
    """<sql> as one simple Query on the wire through neki and on the reference: every
    message up to ReadyForQuery, for each."""
    out = []
    for port in (store.neki.port, store.cluster.port("reference")):
        w = Wire(port)
        try:
            w.login(user="postgres", database=store.db)
            msgs = query(w, sql)
            out.append([wire_msg(typ, body) for typ, body in msgs])
            if msgs[-1] != ("Z", b"I"):
                query(w, "ROLLBACK")
        finally:
            w.close()
    return out


INSERT_A = "INSERT INTO customers VALUES ({a}, 'x', 'FR')"
INSERT_B = "INSERT INTO customers VALUES ({b}, 'y', 'DE')"
UPDATE_1 = "UPDATE customers SET name = 'u' WHERE id = 1"

WHOLE_CASES = {
    # a syntax error anywhere: nothing runs, the position is in the whole string
    "error in statement 2": f"{INSERT_A}; SELEC oops; {UPDATE_1}",
    "error in statement 1": f"SELEC 1; {INSERT_A}; {INSERT_B}",
    "error in the last statement": f"{INSERT_A}; {INSERT_B}; UPDATE customers SET name = 'u' "
                                   "WHER id = 1",
    "error inside BEGIN ... COMMIT": f"BEGIN; {INSERT_A}; {INSERT_B}; SELEC 1; COMMIT",
    "error after a COMMIT": f"{INSERT_A}; COMMIT; {INSERT_B}; {UPDATE_1} WHERE",
    "error after multibyte text": "INSERT INTO customers VALUES ({a}, 'é€ü', 'FR'); "
                                  "/* ü */ SELEC 1",
    "error in a PREPARE": f"{INSERT_A}; PREPARE p AS SELEC 1; {INSERT_B}",
    # a runtime error in statement 2: statement 1 ran and is rolled back, 3 does not run
    "runtime error in statement 2": f"{INSERT_A}; SELECT 1 / 0; {INSERT_B}",
    "runtime error in statement 2 of a block": f"BEGIN; {INSERT_A}; SELECT 1 / 0; {INSERT_B}",
    # a shard's error with a position: counted in the whole string, as Postgres does
    "shard error with a position, one statement": "SELECT id, nosuch FROM customers",
    "shard error with a position": f"{INSERT_A};  SELECT nosuch FROM customers; {INSERT_B}",
    "shard error with a position after multibyte text": "/* é€ü */ " + INSERT_A +
        "; SELECT name FROM customers WHERE id = 1 AND nosuch = 2; " + INSERT_B,
}


@pytest.mark.parametrize("case", list(WHOLE_CASES))
def test_query_is_parsed_whole_before_it_runs(store, case):
    """As Postgres: a syntax error in any statement of a Query runs none of it (the client
    gets just the error, its position counted in the whole string, then ReadyForQuery);
    a runtime error rolls back what ran before it."""
    a, b = two_shards(store, 450 + 10 * list(WHOLE_CASES).index(case))
    sql = WHOLE_CASES[case].format(a=a, b=b)
    try:
        got, want = wire_both(store, sql)
        assert got == want, f"{sql}: neki {got} != reference {want}"
        assert ids_both(store, [1, a, b]) == [(1, "customer 1")]
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b])
        store.both("UPDATE customers SET name = 'customer ' || id WHERE id = 1")


def test_statement_bodies_keep_their_semicolons(store):
    """A Query whose statements have bodies with semicolons (a SQL-standard function body,
    BEGIN ATOMIC ... END) is split by the grammar, as Postgres: the function is created on
    every shard and the statement after it runs, with the same messages as the reference."""
    sql = ("CREATE FUNCTION neki_atomic_f(bigint) RETURNS bigint LANGUAGE sql "
           "BEGIN ATOMIC SELECT 1; SELECT $1 + 1; END; "
           "SELECT neki_atomic_f(41) AS v; SELECT neki_atomic_f(id) FROM customers WHERE id = 1")
    try:
        got, want = wire_both(store, sql)
        assert got == want, f"neki {got} != reference {want}"
        for server in store.cluster.servers:
            if server != "reference":
                assert store.cluster.sql(server, "SELECT neki_atomic_f(1)",
                                         dbname=store.db) == [(2,)], server
    finally:
        store.both("DROP FUNCTION IF EXISTS neki_atomic_f(bigint)")


def test_write_over_several_shards_is_atomic(store):
    """One INSERT split over two shards, one UPDATE over two shards: a failure on one shard
    rolls the other back (as one Postgres), with or without RETURNING."""
    a, b = two_shards(store, 400)
    try:
        for sql in (f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), ({b}, 'b', 'XX')",
                    f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), ({b}, 'b', 'XX') "
                    "RETURNING id",
                    "UPDATE customers SET name = CASE WHEN id = 2 THEN NULL ELSE 'z' END "
                    "WHERE id IN (1, 2)"):
            got, want = run_both(store, sql)
            assert got == want, f"{sql}: neki {got} != reference {want}"
            ids_both(store, [1, 2, a, b])
        got, want = run_both(store, f"INSERT INTO customers VALUES ({a}, 'a', 'FR'), "
                                    f"({b}, 'b', 'DE')")
        assert got == want
        assert len(ids_both(store, [a, b])) == 2
        no_idle_in_transaction(store)
    finally:
        cleanup_ids(store, [a, b])


# ---- cancel, timeouts, shard failures ---------------------------------------------------

SLOW_SCATTER = "SELECT id FROM customers WHERE pg_sleep(1) IS NOT NULL"   # 5 s a shard


def active_parts(store, servers=None):
    """Shards where a backend of the database runs pg_sleep right now."""
    out = []
    for server in servers or store.cluster.shards:
        rows = store.cluster.sql(server, "SELECT count(*) FROM pg_stat_activity WHERE "
                                 "datname = %s AND state = 'active' AND query LIKE "
                                 "'%%pg_sleep%%' AND pid <> pg_backend_pid()", (store.db,))
        if rows[0][0] > 0:
            out.append(server)
    return out


def wait_all_parts(store):
    try:
        wait_until(lambda: len(active_parts(store)) == len(store.cluster.shards), 20,
                   what="the scatter query running on every shard")
    except TimeoutError:
        acts = {s: store.cluster.sql(s, "SELECT state, query, wait_event FROM pg_stat_activity "
                                     "WHERE datname = %s", (store.db,))
                for s in store.cluster.shards}
        raise AssertionError(f"not on every shard: {acts}\n{store.neki.log()[-6000:]}")


def wait_no_parts(store):
    wait_until(lambda: active_parts(store) == [], 20, what="no shard part left running")


def wire_login(store):
    w = Wire(store.neki.port)
    w.startup(user="postgres", database=store.db)
    msgs = w.read_until("Z")
    key = [body for typ, body in msgs if typ == "K"]
    assert key, msgs
    return w, key[0]


def send_cancel(store, key):
    s = socket.create_connection(("127.0.0.1", store.neki.port), timeout=5)
    try:
        s.sendall(struct.pack("!II", 16, 80877102) + key)
    finally:
        s.close()


def query(w, sql):
    w.send(b"Q", sql.encode() + b"\0")
    return w.read_until("Z")


def test_cancel_reaches_every_shard_part_once(store):
    """A CancelRequest (landing on either worker) cancels the scatter query on every shard;
    the client gets one 57014; the session goes on; in a transaction block it is aborted."""
    w, key = wire_login(store)
    try:
        for in_tx in (False, False, False, True):
            if in_tx:
                query(w, "BEGIN")
            start = time.monotonic()
            w.send(b"Q", SLOW_SCATTER.encode() + b"\0")
            wait_all_parts(store)
            send_cancel(store, key)
            msgs = w.read_until("Z")
            errors = [error_fields(body) for typ, body in msgs if typ == "E"]
            assert [e["C"] for e in errors] == ["57014"], errors
            assert errors[0]["M"] == "canceling statement due to user request"
            assert time.monotonic() - start < 4, "the shards were not cancelled"
            assert msgs[-1] == ("Z", b"E" if in_tx else b"I")
            wait_no_parts(store)
            if in_tx:
                assert query(w, "ROLLBACK")[-1] == ("Z", b"I")
            msgs = query(w, "SELECT name FROM customers WHERE id = 3")
            assert [typ for typ, _ in msgs] == ["T", "D", "C", "Z"], msgs
    finally:
        w.close()


def test_client_disconnect_mid_scatter_releases_every_link(store):
    w, _ = wire_login(store)
    msgs = query(w, "SELECT count(*) FROM customers")
    assert [typ for typ, _ in msgs] == ["T", "D", "C", "Z"], msgs
    w.send(b"Q", SLOW_SCATTER.encode() + b"\0")
    try:
        wait_all_parts(store)
    except AssertionError as e:
        w.sock.settimeout(1)
        try:
            got = w.read_until("Z")
        except Exception as r:
            got = repr(r)
        raise AssertionError(f"{e}\nthe client got: {got}")
    start = time.monotonic()
    w.close()
    wait_no_parts(store)
    assert time.monotonic() - start < 4, "the shard parts were not stopped"

    def released():
        with store.neki.admin_connect() as conn:
            cur = conn.execute("SHOW POOLS")
            cols = [d.name for d in cur.description]
            rows = [dict(zip(cols, r)) for r in cur.fetchall()]
        mine = [r for r in rows if r["database"].startswith(store.db + "@")]
        return mine and all(r["sv_active"] == 0 and r["cl_active"] == 0 for r in mine)
    wait_until(released, 20, what="every shard link released")
    assert store.run("SELECT count(*) FROM customers") == [(len(CUSTOMERS),)]


def test_shard_failure_mid_scatter(store):
    """pg_ctl stop -m immediate on one shard during a scatter query: an error naming the
    shard, the session and other sessions keep working on the other shards, no crash."""
    cluster = store.cluster
    victim = store.customer_shard(1)
    other = next(c for c, _, _ in CUSTOMERS if store.customer_shard(c) != victim)
    pids = set(store.neki.children())
    conn, spare = store.connect(), store.connect()
    failure = []

    def scatter():
        try:
            conn.execute(SLOW_SCATTER).fetchall()
        except psycopg.Error as e:
            failure.append(e)
    t = threading.Thread(target=scatter)
    try:
        t.start()
        wait_all_parts(store)
        cluster.stop_server(victim, "immediate")
        t.join(10)
        assert not t.is_alive()
        assert failure, "the scatter query did not fail"
        e = failure[0]
        assert e.diag.sqlstate == "08006", e
        assert victim in (e.diag.message_detail or ""), e.diag.message_detail
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        for c in (conn, spare):
            assert c.execute(f"SELECT id FROM customers WHERE id = {other}").fetchall() == \
                [(other,)]
        with store.connect() as fresh:
            assert fresh.execute(f"SELECT name FROM customers WHERE id = {other}").fetchall()
        assert store.neki.alive() and set(store.neki.children()) == pids
    finally:
        t.join(10)
        conn.close()
        spare.close()
        if cluster.status().get(victim) != "running":
            cluster.start_server(victim)

    def scatter_works():
        try:
            return store.run("SELECT count(*) FROM customers") == [(len(CUSTOMERS),)]
        except psycopg.Error:
            return False
    wait_until(scatter_works, 30, interval=0.2, what="scatter through neki after the restart")


@pytest.fixture(scope="module")
def strict(store):
    """A second neki on the same database: one link per shard, short timeouts."""
    with routing_neki(store.cluster, store.db, topology(store.db), Store,
                      settings={"query_timeout": 2, "idle_transaction_timeout": 3,
                                "query_wait_timeout": 1},
                      db_options="pool_size=1") as st:
        yield st


def test_query_timeout_cancels_every_part(strict):
    with strict.connect() as conn:
        start = time.monotonic()
        with pytest.raises(psycopg.OperationalError) as ei:
            conn.execute(SLOW_SCATTER).fetchall()
        assert "query timeout" in str(ei.value)
        # the statement would take 5 s: ending sooner shows the timeout stopped it (2 s,
        # checked once a second; a loaded machine adds to that)
        assert time.monotonic() - start < 5.0
    wait_no_parts(strict)
    assert strict.run("SELECT name FROM customers WHERE id = 4") == [("customer 4",)]


def test_idle_transaction_timeout(strict):
    conn = strict.connect()
    try:
        conn.execute("BEGIN")
        conn.execute("UPDATE customers SET name = 'idle' WHERE id = 5")
        start = time.monotonic()
        no_idle_in_transaction(strict)      # the shard's link is closed (no client traffic)
        assert time.monotonic() - start >= 2.9
        with pytest.raises(psycopg.OperationalError) as ei:
            conn.execute("SELECT 1")
        assert "idle transaction timeout" in str(ei.value)
    finally:
        conn.close()
    assert strict.run("SELECT name FROM customers WHERE id = 5") == [("customer 5",)]
    no_idle_in_transaction(strict)


def test_query_wait_timeout(strict):
    """pool_size=1: a second client waiting for the held shard link gets query_wait_timeout
    (FATAL, as pgbouncer); the holder is not disturbed."""
    holder = strict.connect()
    try:
        holder.execute("BEGIN")
        holder.execute("SELECT name FROM customers WHERE id = 6")
        with strict.connect() as waiter:
            with pytest.raises(psycopg.OperationalError) as ei:
                waiter.execute("SELECT name FROM customers WHERE id = 6")
            assert "query_wait_timeout" in str(ei.value)
        assert holder.execute("SELECT name FROM customers WHERE id = 6").fetchall() == \
            [("customer 6",)]
        holder.execute("COMMIT")
    finally:
        holder.close()


# ---- PREPARE / EXECUTE / DEALLOCATE, LISTEN / NOTIFY ------------------------------------

def test_sql_prepare_execute_routes_by_the_arguments(store):
    sqls = ["PREPARE q(bigint) AS SELECT id, name FROM customers WHERE id = $1",
            "EXECUTE q(3)", "EXECUTE q(17)", "EXECUTE q('12')",
            "PREPARE u AS SELECT name, $2::text AS tag FROM customers WHERE id = $1",
            "EXECUTE u(4, 'a;b $1')", "EXECUTE u(1)", "EXECUTE nope(1)",
            "PREPARE q AS SELECT 1", "PREPARE bad AS EXECUTE q(1)", "DEALLOCATE q",
            "EXECUTE q(3)", "DEALLOCATE PREPARE u", "DEALLOCATE u", "DEALLOCATE ALL"]
    out = []
    for connect in (store.connect, store.ref):
        with connect() as conn:
            cur = psycopg.ClientCursor(conn)
            res = []
            for sql in sqls:
                try:
                    cur.execute(sql)
                    res.append((cur.statusmessage,
                                cur.fetchall() if cur.description is not None else None))
                except psycopg.Error as e:
                    res.append(("ERROR " + e.diag.sqlstate, None))
            out.append(res)
    assert out[0] == out[1], list(zip(sqls, out[0], out[1]))
    # a write lands on the shard its argument names
    with store.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("PREPARE ins(bigint, text) AS INSERT INTO customers VALUES ($1, $2, 'FR') "
                    "RETURNING id")
        try:
            for cid in (501, 502, 503, 504):
                cur.execute(f"EXECUTE ins({cid}, 'prepared {cid}')")
                assert cur.statusmessage == "INSERT 0 1" and cur.fetchall() == [(cid,)]
                assert store.shard_rows(store.customer_shard(cid), "SELECT name FROM customers "
                                        f"WHERE id = {cid}") == [(f"prepared {cid}",)]
        finally:
            cur.execute("DELETE FROM customers WHERE id BETWEEN 501 AND 504")


def test_prepare_and_deallocate_over_the_extended_protocol(store):
    """PREPARE and DEALLOCATE [ALL] sent with the extended protocol (psycopg sends its own
    DEALLOCATE that way after DDL or when its cache is full) answer as Postgres: one
    namespace with the protocol's named statements, so DEALLOCATE drops those too."""
    from psycopg import pq

    def outcome(res):
        if res.status == pq.ExecStatus.FATAL_ERROR:
            return "ERROR " + res.error_field(pq.DiagnosticField.SQLSTATE).decode()
        rows = [res.get_value(i, 0) for i in range(res.ntuples)]
        return (res.command_status or b"").decode(), rows

    def steps(pg):
        res = []
        ext = [b"PREPARE p1 AS SELECT name FROM customers WHERE id = 3",
               b"PREPARE p1 AS SELECT 2", b"DEALLOCATE p1", b"DEALLOCATE p1"]
        res += [outcome(pg.exec_params(sql, None)) for sql in ext]
        res.append(outcome(pg.prepare(b"n1", b"SELECT name FROM customers WHERE id = $1")))
        res.append(outcome(pg.exec_prepared(b"n1", [b"5"])))
        ext = [b"PREPARE n1 AS SELECT 1", b"DEALLOCATE n1", b"DEALLOCATE n1",
               b"PREPARE p2 AS SELECT 1"]
        res += [outcome(pg.exec_params(sql, None)) for sql in ext]
        res.append(outcome(pg.prepare(b"n2", b"SELECT 2")))
        res.append(outcome(pg.exec_params(b"DEALLOCATE ALL", None)))
        res.append(outcome(pg.exec_prepared(b"n2", [])))
        res.append(outcome(pg.exec_params(b"DEALLOCATE p2", None)))
        res.append(outcome(pg.prepare(b"n2", b"SELECT 3")))
        res.append(outcome(pg.exec_prepared(b"n2", [])))
        return res
    with store.connect() as conn, store.ref() as ref:
        got, want = steps(conn.pgconn), steps(ref.pgconn)
    assert got == want


def test_sql_execute_needs_the_simple_protocol(store):
    with store.connect() as conn:
        psycopg.ClientCursor(conn).execute("PREPARE x AS SELECT 1")
        res = conn.pgconn.exec_params(b"EXECUTE x", None)
        assert res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) == b"0A000"


def test_notify_reaches_listeners_of_the_authoritative_shard(store):
    got = []
    with store.cluster.connect("auth", dbname=store.db) as listener:
        listener.add_notify_handler(lambda n: got.append((n.channel, n.payload)))
        listener.execute("LISTEN neki_chan")
        with store.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute("NOTIFY neki_chan, 'one'")
            cur.execute("BEGIN")
            cur.execute("UPDATE customers SET name = name WHERE id = 2")
            cur.execute("NOTIFY neki_chan, 'two'")
            cur.execute("COMMIT")
            cur.execute("BEGIN; NOTIFY neki_chan, 'never'; ROLLBACK")
            cur.execute("UNLISTEN *")       # (LISTEN through neki: test_pins.py)
            assert cur.statusmessage == "UNLISTEN"

        def two():
            listener.execute("SELECT 1")
            return len(got) >= 2
        wait_until(two, 10, interval=0.1, what="the notifications")
        assert got == [("neki_chan", "one"), ("neki_chan", "two")]


# ---- client drivers: JDBC and node-postgres route by the bound value -------------------

CLIENTS = Path(__file__).resolve().parent.parent / "clients"


def decoys(store, ids):
    """A row with each id on a shard it does not route to: reading from the wrong shard
    would see it."""
    for cid in ids:
        home = store.customer_shard(cid)
        wrong = next(s for s in store.cluster.shards if s != home)
        store.cluster.sql(wrong, f"INSERT INTO customers VALUES ({cid}, 'decoy', 'FR')",
                          dbname=store.db)


def check_driver_output(store, out, ids, prefix):
    lines = [line.split("|") for line in out.strip().splitlines()]
    assert [line[0] for line in lines] == [str(i) for i in ids], out
    for cid, first, second, count in lines:
        assert (first, second, count) == (f"{prefix} {cid}", f"{prefix} upd {cid}", "1"), out
        home = store.customer_shard(int(cid))
        assert store.shard_rows(home, f"SELECT name FROM customers WHERE id = {cid}") == \
            [(f"{prefix} upd {cid}",)]


def drop_ids_everywhere(store, ids):
    for server in store.cluster.shards:
        store.cluster.sql(server, "DELETE FROM customers WHERE id IN "
                          f"({', '.join(map(str, ids))})", dbname=store.db)


def test_jdbc_parameters_route_by_the_bound_value(store):
    import shutil
    import subprocess
    jar = "/usr/share/java/postgresql.jar"
    if shutil.which("java") is None or not Path(jar).exists():
        pytest.skip("java or libpostgresql-jdbc-java is not installed")
    ids = [601, 602, 603, 604, 605, 606]
    decoys(store, ids)
    try:
        url = (f"jdbc:postgresql://127.0.0.1:{store.neki.port}/{store.db}?user=postgres"
               "&prepareThreshold=1&sslmode=disable")
        res = subprocess.run(["java", "-cp", jar, str(CLIENTS / "jdbc" / "ShardedRoute.java"),
                              url] + [str(i) for i in ids],
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr[-3000:]
        check_driver_output(store, res.stdout, ids, "jdbc")
    finally:
        drop_ids_everywhere(store, ids)


def test_node_postgres_parameters_route_by_the_bound_value(store):
    import subprocess
    from test_session import node_pg_path
    path = node_pg_path()
    if path is None:
        pytest.skip("node-postgres (npm pg) is not installed; set NEKI_NODE_PATH")
    ids = [701, 702, 703, 704, 705, 706]
    decoys(store, ids)
    try:
        res = subprocess.run(["node", str(CLIENTS / "node" / "sharded_route.js"),
                              str(store.neki.port), store.db] + [str(i) for i in ids],
                             capture_output=True, text=True, timeout=120,
                             env={**os.environ, "NODE_PATH": path})
        assert res.returncode == 0, res.stderr[-3000:]
        check_driver_output(store, res.stdout, ids, "node")
    finally:
        drop_ids_everywhere(store, ids)
