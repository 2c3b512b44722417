"""
Identity/serial columns and nextval() on a sharded database (spec 6.1, issue 6): the router
reserves batches of sequence values on the sequence's home shard (the authoritative one
here), fills omitted identity/serial columns and nextval('seq') calls, and routes each row by
its filled shard key. One database on every server of the session's cluster, a topology with
4 data shards + authoritative, the schema created through neki (DDL on every shard). Also
pgbench with a custom script on a table sharded by aid.
"""
import re
import subprocess
import threading

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import create_schema, routing_neki, sharded_database

BATCH = 50          # sequence_batch: small, so the tests cross several reservations

SCHEMA = [
    "CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "payload text NOT NULL)",
    "CREATE TABLE items (owner bigint NOT NULL, id bigserial, note text, "
    "PRIMARY KEY (owner, id))",
    "CREATE TABLE kinds (id serial PRIMARY KEY, name text NOT NULL)",
    "CREATE SEQUENCE ticket",
    "CREATE SEQUENCE tiny MAXVALUE 2",
    "CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int NOT NULL, "
    "filler char(84))",
]


def topology(db):
    seqs = ["events_id_seq", "items_id_seq", "kinds_id_seq", "ticket", "tiny"]
    quarter = [("shard-a", None, "40"), ("shard-b", "40", "80"), ("shard-c", "80", "c0"),
               ("shard-d", "c0", None)]
    ranges = []
    for uid, start, end in quarter:
        r = {"shard_uid": uid}
        if start:
            r["start"] = start
        if end:
            r["end"] = end
        ranges.append(r)
    return {
        "databases": {db: {"schemas": {"public": {
            "tables": {
                "events": {"shard_group": "data", "shard_index": "by_id"},
                "items": {"shard_group": "data", "shard_index": "by_owner"},
                "pgbench_accounts": {"shard_group": "data", "shard_index": "by_aid"},
            },
            "reference_tables": {"kinds": {"shard_groups": ["data"]}},
            "sequences": {s: {"shard_group": "authoritative"} for s in seqs},
        }}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "data", "default_shard_index": "by_id", "key_ranges": ranges},
        ],
        "shard_indexes": {
            "by_id": {"type": "xxhash", "columns": ["id"]},
            "by_owner": {"type": "xxhash", "columns": ["owner"]},
            "by_aid": {"type": "xxhash", "columns": ["aid"]},
        },
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


def lit(value):
    return "'" + value.replace("'", "''") + "'"


class Db:
    def __init__(self, cluster, inst, name):
        self.cluster, self.neki, self.name = cluster, inst, name

    def connect(self, **kw):
        return self.neki.connect(dbname=self.name, **kw)

    def run(self, sql):
        """Simple protocol through neki; rows or None."""
        with self.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql)
            return cur.fetchall() if cur.description is not None else None

    def on(self, server, sql):
        return self.cluster.sql(server, sql, dbname=self.name)

    def placement(self, table, col):
        return {s: sorted(r[0] for r in self.on(s, f"SELECT {col} FROM {table}"))
                for s in self.cluster.shards}

    def shard_of(self, table, col, value):
        """The shard neki routes <table>.<col> = <value> to (EXPLAIN (NEKI_PLAN))."""
        plan = "\n".join(r[0] for r in self.run(
            f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM {table} WHERE {col} = {value}"))
        found = [s for s in self.cluster.shards if s in plan]
        assert len(found) == 1, plan
        return found[0]

    def check_placement(self, table, col):
        """Every row of <table> sits on the shard its <col> routes to; returns all values."""
        everything = []
        for server, values in self.placement(table, col).items():
            for v in values:
                assert self.shard_of(table, col, v) == server, (table, v, server)
            everything += values
        return everything


@pytest.fixture(scope="module")
def seqdb(pg_cluster):
    with sharded_database(pg_cluster, "seq") as db, \
            routing_neki(pg_cluster, db, topology(db), Db,
                         settings={"sequence_batch": BATCH, "default_pool_size": 30}) as d:
        create_schema(d, SCHEMA, reference=False)
        yield d


def test_identity_shard_key_filled_and_routed(seqdb):
    """A filled shard key: each row routes by its new id; RETURNING in input order."""
    words = [f"w{i}" for i in range(12)]
    with seqdb.connect() as conn:                   # one session: one worker's batches
        cur = psycopg.ClientCursor(conn)
        rows = cur.execute("INSERT INTO events (payload) VALUES "
                           + ", ".join(f"('{w}')" for w in words)
                           + " RETURNING payload, id").fetchall()
        one = cur.execute("INSERT INTO events (payload) VALUES ('single') "
                          "RETURNING id").fetchall()
    assert [r[0] for r in rows] == words            # input order, as Postgres
    ids = [r[1] for r in rows]
    assert len(set(ids)) == 12 and ids == sorted(ids)
    assert one[0][0] > max(ids)
    # positional VALUES stopping before the identity column is not possible here (it is
    # first); the column list form above covers it. Every row on its shard:
    stored = seqdb.check_placement("events", "id")
    assert sorted(stored) == sorted(ids + [one[0][0]])
    assert sum(1 for v in seqdb.placement("events", "id").values() if v) >= 3
    # the values came from the home shard's sequence, in batches of at least BATCH
    last = seqdb.on("auth", "SELECT last_value FROM events_id_seq")[0][0]
    assert last >= max(stored) and last >= BATCH
    assert seqdb.run("SELECT count(*) FROM events WHERE id = %d" % ids[3]) == [(1,)]


def test_serial_column_filled_key_given(seqdb):
    """bigserial not in the key: filled by the router, rows routed by their owner."""
    rows = seqdb.run("INSERT INTO items (owner, note) VALUES (1, 'a'), (2, 'b'), (3, 'c'), "
                     "(4, 'd'), (1, 'e') RETURNING owner, id, note")
    assert [(r[0], r[2]) for r in rows] == [(1, "a"), (2, "b"), (3, "c"), (4, "d"), (1, "e")]
    ids = [r[1] for r in rows]
    assert len(set(ids)) == 5
    owners = seqdb.check_placement("items", "owner")
    assert sorted(owners) == [1, 1, 2, 3, 4]
    # positional VALUES (owner only): id filled too
    got = seqdb.run("INSERT INTO items VALUES (7) RETURNING id")
    assert got[0][0] not in ids
    # DEFAULT in the listed column: the router's value too, never the shard's own sequence
    got = seqdb.run("INSERT INTO items (owner, id, note) VALUES (31, DEFAULT, 'd'), "
                    "(32, 5000000, 'e'), (33, default, 'f') RETURNING id")
    assert got[1][0] == 5000000 and len({r[0] for r in got} | set(ids)) == 8
    for server in seqdb.cluster.shards:
        assert seqdb.on(server, "SELECT is_called FROM items_id_seq") == [(False,)]


def test_nextval_in_values_and_select(seqdb):
    """nextval() in a SELECT without tables and in VALUES cells; within one session (one
    worker) the values ascend; across workers they are unique, not ordered (spec 6.1)."""
    with seqdb.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        a = cur.execute("SELECT nextval('ticket')").fetchall()
        assert cur.description[0].name == "nextval"
        b = cur.execute("SELECT pg_catalog.nextval('public.ticket') AS n").fetchall()
        assert cur.description[0].name == "n"
        rows = cur.execute("INSERT INTO items (owner, id, note) VALUES "
                           "(11, nextval('ticket'), 'x'), (12, nextval('ticket'), 'y') "
                           "RETURNING owner, id").fetchall()
    assert [r[0] for r in rows] == [11, 12]
    assert a[0][0] < b[0][0] < rows[0][1] < rows[1][1]
    other = seqdb.run("SELECT nextval('ticket')")       # maybe the other worker
    assert other[0][0] not in (a[0][0], b[0][0], rows[0][1], rows[1][1])
    seqdb.check_placement("items", "owner")
    # nextval() is the router's; the shards' copies of the sequence are never used
    for server in seqdb.cluster.shards:
        assert seqdb.on(server, "SELECT is_called FROM ticket") == [(False,)]
    assert seqdb.on("auth", "SELECT last_value FROM ticket")[0][0] >= rows[1][1]


def test_prepare_execute_and_multi_statement(seqdb):
    """SQL-level PREPARE/EXECUTE and a multi-statement Query (one implicit transaction)."""
    with seqdb.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("PREPARE ins(text) AS INSERT INTO events (payload) VALUES ($1) "
                    "RETURNING id, payload")
        a = cur.execute("EXECUTE ins('p1')").fetchall()
        b = cur.execute("EXECUTE ins('p2')").fetchall()
        assert [a[0][1], b[0][1]] == ["p1", "p2"] and a[0][0] < b[0][0]
        conn.pgconn.send_query(b"INSERT INTO events (payload) VALUES ('m1'); "
                               b"INSERT INTO items (owner, note) VALUES (41, 'm2') RETURNING id")
        results = []
        while (res := conn.pgconn.get_result()) is not None:
            results.append(res)
        assert [r.status for r in results] == [psycopg.pq.ExecStatus.COMMAND_OK,
                                               psycopg.pq.ExecStatus.TUPLES_OK]
    assert seqdb.run("SELECT count(*) FROM events WHERE payload IN ('p1', 'p2', 'm1')") == \
        [(3,)]
    seqdb.check_placement("events", "id")


def test_currval_and_lastval_are_the_sessions(seqdb):
    """currval()/lastval() answer from the session's own values (fills included), as
    Postgres; before any, 55000 with Postgres's message."""
    with seqdb.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        for sql, msg in (("SELECT currval('ticket')",
                          'currval of sequence "ticket" is not yet defined in this session'),
                         ("SELECT lastval()", "lastval is not yet defined in this session")):
            with pytest.raises(psycopg.Error) as ei:
                cur.execute(sql)
            assert ei.value.diag.sqlstate == "55000"
            assert ei.value.diag.message_primary == msg
        ids = [r[0] for r in cur.execute("INSERT INTO events (payload) VALUES ('cv1'), "
                                         "('cv2') RETURNING id").fetchall()]
        assert cur.execute("SELECT currval('events_id_seq')").fetchall() == [(ids[1],)]
        assert cur.description[0].name == "currval"
        assert cur.execute("SELECT lastval()").fetchall() == [(ids[1],)]
        t = cur.execute("SELECT nextval('ticket')").fetchall()[0][0]
        assert cur.execute("SELECT currval('ticket'), lastval(), "
                           "currval('public.events_id_seq')").fetchall() == [(t, t, ids[1])]
        # a row can carry the id just drawn
        cur.execute("INSERT INTO items (owner, id, note) VALUES (51, currval('ticket'), 'c')")
        assert seqdb.run("SELECT id FROM items WHERE owner = 51") == [(t,)]


def test_reference_table_serial_same_on_every_copy(seqdb):
    rows = seqdb.run("INSERT INTO kinds (name) VALUES ('x'), ('y') RETURNING id, name")
    assert [r[1] for r in rows] == ["x", "y"]
    for server in seqdb.cluster.shards:
        assert seqdb.on(server, "SELECT id, name FROM kinds ORDER BY id") == rows


def test_exhausted_sequence_reports_the_servers_error(seqdb):
    with seqdb.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            psycopg.ClientCursor(conn).execute("SELECT nextval('tiny')")
        assert ei.value.diag.sqlstate == "2200H"
        assert "tiny" in ei.value.diag.message_primary
        # the session goes on
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_in_transaction_and_rollback(seqdb):
    with seqdb.connect(autocommit=False) as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("INSERT INTO events (payload) VALUES ('tx1') RETURNING id")
        first = cur.fetchone()[0]
        conn.rollback()
        cur.execute("INSERT INTO events (payload) VALUES ('tx2') RETURNING id")
        second = cur.fetchone()[0]
        conn.commit()
    assert second != first              # a rolled-back value is not handed out again
    assert seqdb.run("SELECT payload FROM events WHERE id = %d" % second) == [("tx2",)]
    assert seqdb.run("SELECT payload FROM events WHERE id = %d" % first) == []


def test_extended_protocol_fills(seqdb):
    """psycopg server-side binding (Parse/Bind/Execute): the Parse text is rewritten."""
    with seqdb.connect() as conn:
        ids = []
        for i in range(5):
            row = conn.execute("INSERT INTO events (payload) VALUES (%s) RETURNING id, payload",
                               (f"ext{i}",)).fetchone()
            assert row[1] == f"ext{i}"
            ids.append(row[0])
        n = conn.execute("SELECT nextval('ticket') + %s", (0,)).fetchone()[0]
        assert n > 0
        row = conn.execute("INSERT INTO items (owner, note) VALUES (%s, %s) RETURNING id",
                           (21, "p"), prepare=True).fetchone()
        assert row[0] > 0
        # a multi-row INSERT whose filled key spreads the rows over several shards
        words = list("abcdefghijkl")
        rows = conn.execute("INSERT INTO events (payload) VALUES "
                            + ", ".join(["(%s)"] * len(words)) + " RETURNING id, payload",
                            tuple(words)).fetchall()
        assert [r[1] for r in rows] == words        # input order
        ids += [r[0] for r in rows]
    assert len(set(ids)) == 5 + len(words)
    assert len({seqdb.shard_of("events", "id", i) for i in ids}) > 1
    for i in ids:
        server = seqdb.shard_of("events", "id", i)
        assert seqdb.on(server, f"SELECT payload FROM events WHERE id = {i}") != []


def test_identity_unique_under_20_concurrent_clients(seqdb):
    """20 clients insert at once (simple and extended protocol, single and multi-row):
    every id is distinct across the 4 shards and every row sits on its id's shard."""
    clients, per = 20, 15
    before = sum(len(v) for v in seqdb.placement("events", "id").values())
    got, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(clients)

    def client(k):
        try:
            mine = []
            with seqdb.connect() as conn:
                start.wait(timeout=30)
                for i in range(per):
                    if i % 3 == 0:
                        rows = conn.execute("INSERT INTO events (payload) VALUES (%s) "
                                            "RETURNING id", (f"c{k}.{i}",)).fetchall()
                    elif i % 3 == 1:
                        rows = psycopg.ClientCursor(conn).execute(
                            f"INSERT INTO events (payload) VALUES ('c{k}.{i}') "
                            "RETURNING id").fetchall()
                    else:
                        rows = psycopg.ClientCursor(conn).execute(
                            f"INSERT INTO events (payload) VALUES ('c{k}.{i}a'), "
                            f"('c{k}.{i}b') RETURNING id").fetchall()
                    mine += [r[0] for r in rows]
            with lock:
                got.extend(mine)
        except Exception as e:          # reported by the main thread
            with lock:
                errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    expected = clients * (per + per // 3)
    assert len(got) == expected and len(set(got)) == expected
    placed = seqdb.placement("events", "id")
    stored = sum(placed.values(), [])
    assert len(stored) == len(set(stored)) == before + expected
    assert set(got) <= set(stored)
    for server, ids in placed.items():          # a sample per shard, routed by neki
        for i in [x for x in ids if x in set(got)][:3]:
            assert seqdb.shard_of("events", "id", i) == server


# ---- pgbench with a sharded custom script ------------------------------------------------

ACCOUNTS = 2000

SCRIPT = """\\set aid random(1, {n})
SELECT abalance FROM pgbench_accounts WHERE aid = :aid;
UPDATE pgbench_accounts SET abalance = abalance + 1 WHERE aid = :aid;
"""


def pgbench(port, db, *args):
    cmd = ["pgbench", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", *args, db]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{cmd}\n{res.stdout}\n{res.stderr}"
    return res.stdout


def test_pgbench_sharded_script(seqdb, tmp_path):
    for lo in range(1, ACCOUNTS + 1, 1000):
        seqdb.run("INSERT INTO pgbench_accounts (aid, bid, abalance) VALUES "
                  + ", ".join(f"({a}, 1, 0)" for a in range(lo, lo + 1000)))
    counts = {s: seqdb.on(s, "SELECT count(*) FROM pgbench_accounts")[0][0]
              for s in seqdb.cluster.shards}
    assert sum(counts.values()) == ACCOUNTS and all(counts.values()), counts
    script = tmp_path / "sharded.sql"
    script.write_text(SCRIPT.format(n=ACCOUNTS))
    total = 0
    for mode in ("simple", "extended", "prepared"):
        out = pgbench(seqdb.neki.port, seqdb.name, "-n", "-M", mode, "-f", str(script),
                      "-c", "8", "-j", "2", "-t", "50")
        done = int(re.search(r"number of transactions actually processed: (\d+)",
                             out).group(1))
        failed = re.search(r"number of failed transactions: (\d+)", out)
        assert done == 8 * 50 and (failed is None or int(failed.group(1)) == 0), out
        total += done
    # per-shard rows add up and every UPDATE landed exactly once
    counts = {s: seqdb.on(s, "SELECT count(*), coalesce(sum(abalance), 0) "
                             "FROM pgbench_accounts")[0] for s in seqdb.cluster.shards}
    assert sum(c for c, _ in counts.values()) == ACCOUNTS
    assert sum(b for _, b in counts.values()) == total
    assert seqdb.run("SELECT count(*) FROM pgbench_accounts") == [(ACCOUNTS,)]



def test_refusals(seqdb):
    """Shapes the router cannot fill are refused before reaching a shard."""
    cases = [("INSERT INTO events DEFAULT VALUES", "NK013", "[120]"),
             ("UPDATE items SET id = nextval('ticket') WHERE owner = 1", "NK013", "[147]"),
             ("SELECT * FROM items WHERE id = nextval('ticket')", "NK013", "[146]"),
             ("EXPLAIN (NEKI_PLAN, ANALYZE) INSERT INTO events (payload) VALUES ('x')",
              "0A000", "sequence values")]
    with seqdb.connect() as conn:
        for sql, state, text in cases:
            with pytest.raises(psycopg.Error) as ei:
                psycopg.ClientCursor(conn).execute(sql)
            assert ei.value.diag.sqlstate == state and text in str(ei.value), sql
        assert conn.execute("SELECT 1").fetchone() == (1,)
        # (INSERT ... SELECT takes values per source row: test/routing/test_insert_select.py)
        cur = psycopg.ClientCursor(conn)
        cur.execute("INSERT INTO events (payload) SELECT 'sel' || g FROM generate_series(1, 3) g "
                    "RETURNING id, payload")
        rows = cur.fetchall()
        assert [r[1] for r in rows] == ["sel1", "sel2", "sel3"] and len({r[0] for r in rows}) == 3
