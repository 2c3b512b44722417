"""
The extended query protocol's batch on a sharded database (issue 6): outside a transaction
block every Execute up to Sync is one implicit transaction, as in Postgres (committed at
Sync; after an error the rest is skipped and everything since the last Sync is rolled back;
BEGIN turns it into a block; COMMIT / ROLLBACK end it), over one or several shards; and a
Parse of a named statement that exists is 42P05. Every exchange runs through neki and on the
reference server, and the exact message sequences and the rows left must be the same.
"""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology
from test_txn import ids_both, no_idle_in_transaction

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import (Wire, bind, close, error_fields, execute, flush, parse,  # noqa: E402
                    summary, sync)

CLIENTS = Path(__file__).resolve().parent.parent / "clients"
CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 21)]


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "extb") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"ignore_startup_parameters": "extra_float_digits"}  # (JDBC)
                         ) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " + ", ".join(
            f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        yield st


def spread(store, base, n):
    """<n> new customer ids >= base, each on another shard (n <= number of shards)."""
    out, seen = [], set()
    for cid in range(base, base + 200):
        if store.customer_shard(cid) not in seen:
            seen.add(store.customer_shard(cid))
            out.append(cid)
            if len(out) == n:
                return out
    raise AssertionError("not enough shards")


def forget(store, ids):
    sql = f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})"
    store.run(sql)
    with store.ref() as conn:
        conn.execute(sql)


def wire(port, db):
    w = Wire(port)
    w.startup(user="postgres", database=db)
    w.read_until("Z")
    return w


def exchange(w, steps):
    """Send each step's bytes and read up to its end: "Z" (ReadyForQuery) or "C" / "E" (the
    answer a Flush brought); the summaries of everything read."""
    out = []
    for data, until in steps:
        w.raw(data)
        while True:
            typ, body = w.read_msg()

            out += summary([(typ, body)])
            if typ == until or (until == "C" and typ == "E"):
                break
    return out


def both(store, steps):
    """The exchange through neki and on the reference: (neki, reference)."""
    res = []
    for port in (store.neki.port, store.cluster.port("reference")):
        w = wire(port, store.db)
        try:
            res.append(exchange(w, steps))
            if w.query("SELECT 1")[-1] != ("Z", b"I"):
                w.query("ROLLBACK")
        finally:
            w.close()
    return res


INSERT = "INSERT INTO customers VALUES ($1, $2, $3)"


def ins(cid, country="FR"):
    return parse("", INSERT) + bind("", "", [cid, f"batch {cid}", country]) + execute()


def stmt(sql, params=()):
    return parse("", sql) + bind("", "", list(params)) + execute()


# (steps, ids used) with a..d on four different shards; 'XX' breaks the countries key
BATCHES = {
    # the second Execute fails on another shard: the first is rolled back with it
    "error rolls back": lambda a, b, c, d: [(ins(a) + ins(b, "XX") + sync(), "Z")],
    "error skips the rest": lambda a, b, c, d: [
        (ins(a) + ins(b) + stmt("SELECT 1 / (id - id) FROM customers WHERE id = 1") + ins(c)
         + sync(), "Z")],
    "committed together": lambda a, b, c, d: [(ins(a) + ins(b) + ins(c) + ins(d) + sync(), "Z")],
    "two batches": lambda a, b, c, d: [(ins(a) + ins(b) + sync(), "Z"),
                                       (ins(c) + ins(d, "XX") + sync(), "Z")],
    "after a failed batch": lambda a, b, c, d: [(ins(a) + ins(b, "XX") + sync(), "Z"),
                                                (ins(c) + sync(), "Z"), (ins(d) + sync(), "Z")],
    # BEGIN makes the statements before it part of a block, left open at Sync
    "begin inside": lambda a, b, c, d: [(ins(a) + stmt("BEGIN") + ins(b) + sync(), "Z"),
                                        (ins(c) + stmt("COMMIT") + sync(), "Z")],
    "begin inside, rolled back": lambda a, b, c, d: [
        (ins(a) + stmt("BEGIN") + ins(b) + sync(), "Z"), (stmt("ROLLBACK") + sync(), "Z")],
    "begin inside, then an error": lambda a, b, c, d: [
        (ins(a) + stmt("BEGIN") + ins(b) + ins(c, "XX") + sync(), "Z"),
        (ins(d) + sync(), "Z"), (stmt("ROLLBACK") + sync(), "Z")],
    # COMMIT / ROLLBACK end the implicit transaction (with Postgres's warning)
    "commit inside": lambda a, b, c, d: [
        (ins(a) + ins(b) + stmt("COMMIT") + ins(c) + ins(d, "XX") + sync(), "Z")],
    "rollback inside": lambda a, b, c, d: [
        (ins(a) + ins(b) + stmt("ROLLBACK") + ins(c) + ins(d) + sync(), "Z")],
    # a batch whose Sync comes later (the client read the first results after a Flush)
    "flush, then an error": lambda a, b, c, d: [(ins(a) + flush(), "C"),
                                                (ins(b, "XX") + sync(), "Z")],
    "flush, then commit": lambda a, b, c, d: [(ins(a) + flush(), "C"), (ins(b) + sync(), "Z")],
    # one Execute over several shards: all or nothing
    "one update over two shards": lambda a, b, c, d: [
        (ins(a) + sync(), "Z"), (ins(b) + sync(), "Z"),
        (stmt("UPDATE customers SET name = CASE WHEN id = $2 THEN NULL ELSE 'z' END "
              "WHERE id IN ($1, $2)", [a, b]) + sync(), "Z")],
    "one insert over two shards": lambda a, b, c, d: [
        (stmt("INSERT INTO customers VALUES ($1, 'x', 'FR'), ($2, 'y', 'XX')", [a, b]) + sync(),
         "Z")],
    # a simple Query in the middle of a batch runs in its transaction and ends it
    "query inside": lambda a, b, c, d: [
        (ins(a) + b"Q" + (len(f"SELECT {b}") + 5).to_bytes(4, "big") + f"SELECT {b}".encode()
         + b"\0", "Z"), (ins(c) + ins(d, "XX") + sync(), "Z")],
}


@pytest.mark.parametrize("case", list(BATCHES))
def test_batch_is_one_implicit_transaction(store, case):
    ids = spread(store, 1000 + 50 * list(BATCHES).index(case), 4)
    try:
        got, want = both(store, BATCHES[case](*ids))
        assert got == want, f"{case}: neki {got} != reference {want}"
        ids_both(store, ids)
        no_idle_in_transaction(store)
    finally:
        forget(store, ids)


def test_one_statement_batch_commits_on_its_own(store):
    """Bind/Execute/Sync of one statement (libpq, pgbench): committed at once, the next batch
    sees it; a later batch's failure does not undo it."""
    a, b = spread(store, 1900, 2)
    try:
        got, want = both(store, [(ins(a) + sync(), "Z"), (ins(b, "XX") + sync(), "Z"),
                                 (stmt("SELECT name FROM customers WHERE id = $1", [a]) + sync(),
                                  "Z")])
        assert got == want
        assert ids_both(store, [a, b]) == [(a, f"batch {a}")]
        no_idle_in_transaction(store)
    finally:
        forget(store, [a, b])


def test_parse_of_an_existing_name_is_42P05(store):
    """A named statement is never replaced (42P05 after the syntax check; one namespace with
    SQL PREPARE); the unnamed statement is."""
    steps = [
        (parse("s1", "SELECT 1") + sync(), "Z"),
        (parse("s1", "SELECT 2") + bind("", "s1") + execute() + sync(), "Z"),
        (parse("s1", "SELECT 1") + sync(), "Z"),
        (parse("s1", "SELEC 2") + sync(), "Z"),
        (bind("", "s1") + execute() + sync(), "Z"),
        (parse("", "SELECT 3") + parse("", "SELECT 4") + bind("", "") + execute() + sync(), "Z"),
        (b"Q" + (len("PREPARE p1 AS SELECT 5") + 5).to_bytes(4, "big") +
         b"PREPARE p1 AS SELECT 5\0", "Z"),
        (parse("p1", "SELECT 6") + sync(), "Z"),
        (close("S", "s1") + parse("s1", "SELECT 7") + bind("", "s1") + execute() + sync(), "Z"),
    ]
    got, want = both(store, steps)
    assert got == want
    assert [m for m in got if m[0] == "E"] == [("E", "42P05"), ("E", "42P05"), ("E", "42601"),
                                               ("E", "42P05")]


@pytest.mark.parametrize("fail", [False, True])
def test_psycopg_pipeline_is_one_transaction(store, fail):
    """psycopg's pipeline mode (many Parse/Bind/Execute, one Sync) in autocommit over four
    shards: committed together, or with one failing row nothing stays."""
    ids = spread(store, 2000 + 100 * fail, 4)
    rows = [(cid, f"pipe {cid}", "XX" if fail and cid == ids[2] else "FR") for cid in ids]
    outcome = []
    try:
        for connect in (store.connect, store.ref):
            with connect() as conn:
                try:
                    with conn.pipeline():
                        for row in rows:
                            conn.execute("INSERT INTO customers VALUES (%s, %s, %s)", row)
                    outcome.append("ok")
                except psycopg.Error as e:
                    outcome.append(e.diag.sqlstate)
                assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert outcome[0] == outcome[1] == ("23503" if fail else "ok")
        assert len(ids_both(store, ids)) == (0 if fail else 4)
        no_idle_in_transaction(store)
    finally:
        forget(store, ids)


@pytest.mark.parametrize("mode", ["autocommit", "tx"])
def test_jdbc_execute_batch_with_a_failing_row(store, mode):
    """pgjdbc's executeBatch over several shards with one failing row: what the reference
    answers (in autocommit the whole batch is one implicit transaction)."""
    jar = "/usr/share/java/postgresql.jar"
    if shutil.which("java") is None or not Path(jar).exists():
        pytest.skip("java or libpostgresql-jdbc-java is not installed")
    ids = spread(store, 2300 + 100 * (mode == "tx"), 4)
    args = [f"{cid}:{'XX' if cid == ids[2] else 'FR'}" for cid in ids]
    out = []
    try:
        for port in (store.neki.port, store.cluster.port("reference")):
            url = (f"jdbc:postgresql://127.0.0.1:{port}/{store.db}?user=postgres"
                   "&sslmode=disable")
            res = subprocess.run(["java", "-cp", jar, str(CLIENTS / "jdbc" / "BatchTx.java"),
                                  url] + (["tx"] if mode == "tx" else []) + args,
                                 capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr[-3000:]
            out.append(res.stdout)
            forget(store, ids)
        assert out[0] == out[1]
        assert out[0].startswith("error 23503") and out[0].strip().endswith("rows"), out[0]
        no_idle_in_transaction(store)
    finally:
        forget(store, ids)


# ---- named statements kept prepared on the shard links ---------------------------------

def db_stats(store):
    with store.neki.admin_connect() as conn:
        cur = conn.execute("SHOW STATS")
        cols = [d.name for d in cur.description]
        for row in cur.fetchall():
            row = dict(zip(cols, row))
            if row["database"] == store.db:
                return row
    return {"total_client_parse_count": 0, "total_server_parse_count": 0,
            "total_bind_count": 0}


def settled_stats(store):
    """The prepared-statement counters of SHOW STATS of the database once they did not change
    for 1.5 s (the workers publish them once a second: what earlier tests did is in them)."""
    import time
    seen = {"row": None, "since": 0.0}

    def still():
        row, now = db_stats(store), time.monotonic()
        row = {k: row[k] for k in ("total_client_parse_count", "total_server_parse_count",
                                   "total_bind_count")}
        if row != seen["row"]:
            seen["row"], seen["since"] = row, now
        return now - seen["since"] >= 1.5
    wait_until(still, 20, interval=0.25, what="the stats to settle")
    return seen["row"]


def stats_delta(store, before, want_binds):
    """SHOW STATS of the database once its bind count grew by <want_binds> (the workers
    publish once a second): the deltas of the three prepared-statement counters."""
    out = {}

    def grown():
        now = db_stats(store)
        out.update({k: now[k] - before[k] for k in ("total_client_parse_count",
                                                     "total_server_parse_count",
                                                     "total_bind_count")})
        return out["total_bind_count"] >= want_binds
    wait_until(grown, 10, interval=0.2, what="the stats of the binds")
    return out


def run_named(store, port, names, rounds):
    """Parse each (name, sql) of <names> once, then <rounds> times Bind/Execute/Sync of each
    with a customer id from 1..20: the summaries of every answer."""
    w = wire(port, store.db)
    try:
        steps = [(b"".join(parse(n, q) for n, q in names) + sync(), "Z")]
        for i in range(rounds):
            for k, (n, _) in enumerate(names):
                steps.append((bind("", n, [1 + (i * 7 + k * 3) % 20]) + execute() + sync(), "Z"))
        return exchange(w, steps)
    finally:
        w.close()


def test_named_statement_is_parsed_once_per_shard_link(store):
    """A named statement bound again and again: each shard link gets its Parse once (pgbouncer's
    max_prepared_statements mechanism, prepared.c), the answers are the reference's."""
    names = [("byid", "SELECT id, name, country FROM customers WHERE id = $1")]
    before = settled_stats(store)
    got = run_named(store, store.neki.port, names, 40)
    assert got == run_named(store, store.cluster.port("reference"), names, 40)
    delta = stats_delta(store, before, 40)
    assert delta["total_client_parse_count"] == 1 and delta["total_bind_count"] == 40, delta
    assert 1 <= delta["total_server_parse_count"] <= 12, delta      # 4 shards, a few links


@pytest.fixture(scope="module")
def small(store):
    """A second neki on the same database: one link per shard, room for 2 statements a link
    (one worker: a routed session waiting for a shard link another worker holds idle is not
    counted among the pool's waiters, so that link is not shed)."""
    with routing_neki(store.cluster, store.db, topology(store.db), Store,
                      settings={"max_prepared_statements": 2, "workers": 1},
                      db_options="pool_size=1") as st:
        def catalog_loaded():      # (the admin loads it from the authoritative shard)
            try:
                return st.run("SELECT id FROM customers WHERE id = 1") == [(1,)]
            except psycopg.Error:
                return False
        wait_until(catalog_loaded, 30, interval=0.1, what="the catalog of the second neki")
        yield st


def test_statements_beyond_max_prepared_statements_are_evicted(small):
    """Three named statements, room for two a link: the least recently used is closed on the
    shard (its CloseComplete never reaches the client) and parsed again when it comes back."""
    names = [(f"q{k}", f"SELECT name, {k} AS k FROM customers WHERE id = $1") for k in range(3)]
    before = settled_stats(small)
    got = run_named(small, small.neki.port, names, 8)
    assert got == run_named(small, small.cluster.port("reference"), names, 8)
    delta = stats_delta(small, before, 24)
    assert delta["total_server_parse_count"] > 4, delta


def test_a_statement_the_shard_refused_is_parsed_again(small):
    """The shard's Parse fails (the table does not exist yet): nothing is kept, so once the
    table exists the same statement works."""
    w = wire(small.neki.port, small.db)
    try:
        q = [(parse("late", "SELECT v FROM late_table WHERE id = $1") + sync(), "Z")]
        run = [(bind("", "late", [1]) + execute() + sync(), "Z")]
        got = exchange(w, q + run + run)
        assert [m for m in got if m[0] == "E"] == [("E", "42P01")] * 2, got
        small.run("CREATE TABLE late_table (id bigint, v text)")
        small.run("INSERT INTO late_table VALUES (1, 'here')")
        assert exchange(w, run) == [("2",), ("D", ["here"]), ("C", "SELECT 1"), ("Z", "I")]
    finally:
        w.close()
        small.run("DROP TABLE IF EXISTS late_table")


def test_result_type_change_then_reprepare(small):
    """DDL changes a kept statement's columns: the shard's 0A000 "cached plan must not change
    result type" reaches the client as from Postgres, and the client's Close + Parse of the
    same text (what pgjdbc does) works again (the stale link is not reused)."""
    create = "CREATE TABLE wide (id bigint PRIMARY KEY, a text)"
    small.run(create)
    with small.ref() as conn:
        conn.execute(create)
    try:
        steps = [(parse("w", "SELECT * FROM wide WHERE id = $1") + sync(), "Z"),
                 (bind("", "w", [1]) + execute() + sync(), "Z")]
        again = [(bind("", "w", [1]) + execute() + sync(), "Z")]
        redo = [(close("S", "w") + parse("w", "SELECT * FROM wide WHERE id = $1") +
                 bind("", "w", [1]) + execute() + sync(), "Z")]
        res = []
        for port, run in ((small.neki.port, small.run), (small.cluster.port("reference"), None)):
            w = wire(port, small.db)
            try:
                out = exchange(w, steps)
                alter = "ALTER TABLE wide ADD COLUMN b int"
                if run is not None:
                    run(alter)
                else:
                    with small.ref() as conn:
                        conn.execute(alter)
                out += exchange(w, again) + exchange(w, redo)
                res.append(out)
            finally:
                w.close()
        # (Postgres raises it at Bind, where it revalidates the plan; neki answered that Bind
        # itself: its error comes after BindComplete)
        res = [[m for m in out if m != ("2",)] for out in res]
        assert res[0] == res[1], res
        assert ("E", "0A000") in res[0]
    finally:
        small.run("DROP TABLE IF EXISTS wide")
        with small.ref() as conn:
            conn.execute("DROP TABLE IF EXISTS wide")


# ---- simple Query texts of one statement (no scanner split) -----------------------------

@pytest.mark.parametrize("sql", ["", "   ", "-- only a comment", "/* c */ ", "SELECT 1",
                                 "  SELECT name FROM customers WHERE id = 3  -- trailing\n",
                                 "SELECT (1", "SELECT 'unterminated", "SELEC 1",
                                 "SELECT nope FROM customers WHERE id = 3",
                                 "SELECT 1; SELECT 2", "SELECT ';' AS semi", "SELECT 'é' +",
                                 "SELECT 1;", " SELECT name FROM customers WHERE id = 3 ; ",
                                 "SELECT 'abc;", "SELECT 'a' 'b';", ";", "SELECT 1 -- c;",
                                 "SELECT $$x;$$", "SELECT 1 /* a /* b */ ;", "SELEC 1;"])
def test_simple_query_texts_answer_as_postgres(store, sql):
    """A Query of one statement (no ';' but a final one) is planned without the scanner's
    split: its answers (EmptyQuery, syntax errors and their cursor position, the shard's own
    errors) stay Postgres's."""
    res = []
    for port in (store.neki.port, store.cluster.port("reference")):
        w = wire(port, store.db)
        try:
            msgs = w.query(sql)
            res.append([(t, error_fields(b).get("C"), error_fields(b).get("P")) if t == "E"
                        else summary([(t, b)])[0] for t, b in msgs if t != "S"])
        finally:
            w.close()
    assert res[0] == res[1], res


def test_parse_syntax_error_has_its_position(store):
    res = []
    for port in (store.neki.port, store.cluster.port("reference")):
        w = wire(port, store.db)
        try:
            w.raw(parse("", "SELECT 'é' +") + sync())
            res.append([(t, error_fields(b).get("C"), error_fields(b).get("P"))
                        for t, b in w.read_until("Z") if t == "E"])
        finally:
            w.close()
    assert res[0] == res[1] == [("E", "42601", "13")], res


def test_the_session_own_answers_are_not_held(store):
    """What the session layer answers itself to a routed client (a FunctionCall refused in
    the middle of a batch, a __neki call after a Query) leaves at once although the router
    holds its own output until ReadyForQuery."""
    from pgwire import message
    w = wire(store.neki.port, store.db)
    try:
        w.query("SELECT 1")
        w.raw(parse("", "SELECT 1") + message(b"F", b"\0\0\0\1\0\0\0\0\0\0"))
        assert summary(w.read_until("Z")) == [("1",), ("E", "0A000"), ("Z", "I")]
        msgs = w.query("SELECT * FROM __neki.get_data_topology_revision()")
        assert [t for t, _ in msgs] == ["T", "D", "C", "Z"], msgs
    finally:
        w.close()


# ---- SHOW STATS of a routed database -----------------------------------------------------

def test_routed_stats_count_queries_and_transactions(store):
    """Every ReadyForQuery of a routed session is a query of SHOW STATS and every ended
    transaction a transaction, with their times, as a server's are on pass-through: 5
    transactions of BEGIN, a SELECT and an UPDATE by key (extended protocol), COMMIT."""
    keys = ("total_xact_count", "total_query_count", "total_xact_time", "total_query_time")
    settled_stats(store)
    before = db_stats(store)
    with store.connect() as conn:
        for cid in range(1, 6):
            with conn.transaction():
                conn.execute("SELECT name FROM customers WHERE id = %s", (cid,)).fetchall()
                conn.execute("UPDATE customers SET name = name WHERE id = %s", (cid,))
    got = {}

    def counted():
        now = db_stats(store)
        got.update({k: now[k] - before[k] for k in keys})
        return got["total_xact_count"] >= 5 and got["total_query_count"] >= 20
    try:
        wait_until(counted, 10, interval=0.2, what="the stats of the transactions")
    except TimeoutError:
        raise AssertionError(f"SHOW STATS deltas: {got}") from None
    assert got["total_xact_count"] == 5 and got["total_query_count"] == 20, got
    assert got["total_xact_time"] >= got["total_query_time"] > 0, got
