"""
Portals, row-limited Execute and SQL cursors on a sharded database (issues 6 and 7): the
storefront topology with `items` (12,000 rows over the 4 data shards, key customer_id) and
`big` (100,000 rows). Every scenario runs through neki and on the reference server (all
rows unsharded) and the exact message sequences are compared: PortalSuspended, the command
tags, ErrorResponses with SQLSTATE, message and HINT; rows byte for byte where the query
orders them, as a multiset where it does not (concatenation over shards).
"""
import os
import random
import struct
import sys
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import SCHEMA, Store, create_schema, routing_neki, sharded_database, topology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, error_fields  # noqa: E402

CLIENTS = Path(__file__).resolve().parent.parent / "clients"

TABLES = [
    "CREATE TABLE items (customer_id bigint NOT NULL, id bigint NOT NULL, grp int NOT NULL, "
    "v numeric(12,2), note text, PRIMARY KEY (customer_id, id))",
    "CREATE TABLE big (customer_id bigint NOT NULL, id bigint NOT NULL, pad text)",
]
NITEMS = 12000
NBIG = 100000


def portals_topology(db):
    doc = topology(db)
    tables = doc["databases"][db]["schemas"]["public"]["tables"]
    tables["items"] = {"shard_group": "customer_data"}
    tables["big"] = {"shard_group": "customer_data"}
    return doc


def item_rows():
    for i in range(1, NITEMS + 1):
        note = None if i % 11 == 0 else f"note {i % 97}"
        yield f"{i % 300 + 1}\t{i}\t{i % 13}\t{(i * 37) % 1000}.{i % 100:02d}\t" \
              f"{note if note is not None else chr(92) + 'N'}\n"


def big_rows():
    for i in range(1, NBIG + 1):
        yield f"{i % 1000 + 1}\t{i}\t{'x' * 120}{i}\n"   # ~13 MB in all


def copy_rows(conn, sql, rows, batch=2000):
    buf = []
    with conn.cursor() as cur:
        with cur.copy(sql) as cp:
            for line in rows:
                buf.append(line)
                if len(buf) == batch:
                    cp.write("".join(buf).encode())
                    buf = []
            if buf:
                cp.write("".join(buf).encode())


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "portals") as db, \
            routing_neki(pg_cluster, db, portals_topology(db), Store,
                         settings={"ignore_startup_parameters": "extra_float_digits"}
                         ) as st:
        create_schema(st, SCHEMA + TABLES)
        for connect in (st.connect, st.ref):
            with connect() as conn:
                copy_rows(conn, "COPY items FROM STDIN", item_rows())
                copy_rows(conn, "COPY big FROM STDIN", big_rows())
        for server in pg_cluster.shards + ["reference"]:
            pg_cluster.sql(server, "ANALYZE", dbname=db)
        yield st


# ---- a raw protocol client ------------------------------------------------------------

def z(s):
    return s.encode() + b"\0"


def parse(name, sql, oids=()):
    return b"P", z(name) + z(sql) + struct.pack("!H", len(oids)) + \
        b"".join(struct.pack("!I", o) for o in oids)


def bind(portal, stmt, params=(), rfmt=()):
    body = z(portal) + z(stmt) + struct.pack("!HH", 0, len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!I", len(p)) + p.encode()
    return b"B", body + struct.pack("!H", len(rfmt)) + \
        b"".join(struct.pack("!H", f) for f in rfmt)


def execute(portal, n=0):
    return b"E", z(portal) + struct.pack("!I", n)


def describe(kind, name):
    return b"D", kind.encode() + z(name)


def close(kind, name):
    return b"C", kind.encode() + z(name)


SYNC = (b"S", b"")
FLUSH = (b"H", b"")


def query(sql):
    return b"Q", z(sql)


def compact(msgs):
    """The messages as comparable tuples: rows keep their bytes, errors their SQLSTATE,
    message and HINT, everything else its type (and tag / status)."""
    out = []
    for typ, body in msgs:
        if typ in "EN":
            f = error_fields(body)
            out.append((typ, f.get("C"), f.get("M"), f.get("H")))
        elif typ == "C":
            out.append(("C", body.rstrip(b"\0").decode()))
        elif typ == "Z":
            out.append(("Z", body.decode()))
        elif typ == "D":
            out.append(("D", body))
        elif typ == "T":
            ncols = struct.unpack("!H", body[:2])[0]
            names, pos = [], 2
            for _ in range(ncols):
                end = body.index(b"\0", pos)
                names.append(body[pos:end].decode())
                fmt = struct.unpack("!h", body[end + 17:end + 19])[0]
                names.append(fmt)
                pos = end + 19
            out.append(("T", tuple(names)))
        elif typ == "S":
            continue        # ParameterStatus
        else:
            out.append((typ,))
    return out


class Pair:
    """One raw connection to neki and one to the reference server, fed the same batches."""

    def __init__(self, store):
        self.wires = [Wire(store.neki.port), Wire(store.cluster.port("reference"))]
        for w in self.wires:
            w.login(database=store.db)

    def close(self):
        for w in self.wires:
            w.close()

    def batch(self, *msgs, ordered=True, unique=True, complete=True):
        got = []
        for w in self.wires:
            for m in msgs:
                w.send(*m)
            last = msgs[-1][0]
            if last in (b"S", b"Q"):
                got.append(compact(w.read_until("Z")))
            else:           # Flush: up to the end of the last Execute's answer
                out = []
                while not out or out[-1][0] not in "sCEI":
                    out.append(w.read_msg())
                got.append(compact(out))
        neki, ref = got
        if not ordered:
            # concatenation over shards: the same messages, rows in another order (so an
            # Execute of n rows may give other rows than the reference's, never one twice)
            assert [m if m[0] != "D" else ("D",) for m in neki] == \
                [m if m[0] != "D" else ("D",) for m in ref], _diff(neki, ref)
            rows = [m for m in neki if m[0] == "D"]
            assert not unique or len(set(rows)) == len(rows), "a row came twice"
            if complete and not any(m[0] == "s" for m in ref):
                assert sorted(rows) == sorted(m for m in ref if m[0] == "D")
        else:
            assert neki == ref, _diff(neki, ref)
        return neki

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"first difference at message {i}: neki {x} != reference {y}"
    return f"neki {len(a)} messages, reference {len(b)}: {a[-3:]} / {b[-3:]}"


def types(msgs):
    return "".join(m[0] if m[0] != "C" else "C" for m in msgs)


# queries: single shard, concatenation over shards, merged (ORDER BY / LIMIT / aggregates)
SINGLE = "SELECT id, grp, v, note FROM items WHERE customer_id = 7 ORDER BY id"
CONCAT = "SELECT id, grp FROM items WHERE id % 500 = 3"
MERGED = "SELECT id, v, note FROM items WHERE grp < 5 ORDER BY v DESC, id LIMIT 300 OFFSET 7"
AGG = "SELECT grp, count(*), sum(v), min(note), avg(v) FROM items GROUP BY grp ORDER BY grp"
HAVING = "SELECT grp, count(*) FROM items GROUP BY grp HAVING count(*) > $1 ORDER BY grp DESC"
QUERIES = [(SINGLE, True), (CONCAT, False), (MERGED, True), (AGG, True)]


# ---- protocol portals -----------------------------------------------------------------

@pytest.mark.parametrize("sql,ordered", QUERIES)
def test_execute_with_a_row_limit_outside_a_block(store, sql, ordered):
    with Pair(store) as pw:
        for n in (1, 7, 100):
            pw.batch(parse("", sql), bind("", ""), describe("P", ""),
                     *[execute("", n)] * 4, SYNC, ordered=ordered)
        # Sync ended the implicit transaction: the unnamed portal is gone
        pw.batch(execute("", 5), SYNC)
        # to the end: the last Execute's tag counts its own rows, then "SELECT 0"
        pw.batch(parse("s", sql), bind("p", "s"), *[execute("p", 1000)] * 14,
                 execute("p", 0), SYNC, ordered=ordered)
        pw.batch(query("SELECT 1"))


def test_execute_exactly_the_rows_there_are(store):
    with Pair(store) as pw:
        for sql in (SINGLE, MERGED, AGG):
            rows = [m for m in pw.batch(parse("", sql), bind("", ""), execute("", 0), SYNC)
                    if m[0] == "D"]
            got = pw.batch(parse("", sql), bind("", ""), execute("", len(rows)),
                           execute("", len(rows)), SYNC)
            assert types(got) == "12" + "D" * len(rows) + "sCZ", got


def test_row_limit_with_flush_and_no_sync(store):
    """node-postgres' pg-cursor: Execute with a row limit and Flush, Sync only at the end."""
    with Pair(store) as pw:
        for sql, ordered in QUERIES:
            pw.batch(parse("", sql), bind("", ""), describe("P", ""), execute("", 5), FLUSH,
                     ordered=ordered, complete=False)
            for _ in range(3):
                pw.batch(execute("", 5), FLUSH, ordered=ordered, complete=False)
            pw.batch(close("P", ""), SYNC)
            pw.batch(query("SELECT 1"))


def test_named_portals_interleaved_in_a_block(store):
    with Pair(store) as pw:
        pw.batch(query("BEGIN"))
        pw.batch(parse("s1", SINGLE), parse("s2", MERGED), parse("s4", AGG),
                 bind("p1", "s1"), bind("p2", "s2"), bind("p4", "s4"),
                 execute("p1", 3), execute("p2", 5), describe("P", "p1"),
                 describe("P", "p2"), execute("p4", 2), execute("p1", 2),
                 execute("p2", 5), SYNC)
        # inside a block the portals live across Sync; Describe of a portal that ran
        pw.batch(execute("p2", 4), describe("P", "p4"), execute("p4", 3), execute("p1", 0),
                 describe("P", "p1"), execute("p1", 5), execute("p4", 0), SYNC)
        # Close: gone (another Close of it is fine, as Postgres)
        pw.batch(close("P", "p1"), close("P", "p1"), close("P", "nope"), execute("p2", 3),
                 SYNC)
        # a name in use: 42P03 (the namespace of cursors), then the block is aborted
        pw.batch(bind("p2", "s1"), SYNC)
        pw.batch(execute("p2", 1), SYNC)
        pw.batch(query("ROLLBACK"))
        pw.batch(execute("p2", 1), SYNC)
        pw.batch(bind("p2", "s1"), execute("p2", 2), SYNC)


def outputs(msgs):
    """The rows each Execute of a batch gave, in order: a list of lists."""
    out, cur = [], []
    for m in msgs:
        if m[0] == "D":
            cur.append(m)
        elif m[0] in ("s", "C", "E"):
            out.append(cur)
            cur = []
    return out


def test_concatenation_portals_in_a_block(store):
    with store.ref() as conn:
        want = sorted(conn.execute(CONCAT).fetchall())
    with Pair(store) as pw:
        pw.batch(query("BEGIN"))
        one = pw.batch(parse("c", CONCAT), bind("a", "c"), bind("b", "c"), describe("P", "a"),
                       execute("a", 5), execute("b", 30), execute("a", 5), SYNC,
                       ordered=False, unique=False, complete=False)
        two = pw.batch(execute("a", 100), execute("a", 1), execute("b", 1), SYNC,
                       ordered=False, unique=False, complete=False)
        a = outputs(one)[0] + outputs(one)[2] + outputs(two)[0]
        b = outputs(one)[1] + outputs(two)[2]
        for rows in (a, b):
            assert len(rows) == len(want) == len(set(rows)), (len(rows), len(want))
        pw.batch(query("COMMIT"))
        pw.batch(execute("a", 1), SYNC)
        pw.batch(parse("", CONCAT), bind("", "", (), (1,)), describe("P", ""),
                 execute("", 10), execute("", 10), execute("", 10), SYNC, ordered=False)


def test_portal_errors_and_lifetimes(store):
    with Pair(store) as pw:
        pw.batch(execute("nope", 0), SYNC)
        pw.batch(describe("P", "nope"), SYNC)
        pw.batch(parse("s", MERGED), bind("x", "s"), SYNC)
        pw.batch(execute("x", 1), SYNC)         # outside a block: dropped at Sync
        pw.batch(query("BEGIN"))
        pw.batch(bind("x", "s"), execute("x", 2), SYNC)
        pw.batch(query("COMMIT"))
        pw.batch(execute("x", 1), SYNC)         # COMMIT dropped it
        # the unnamed portal is replaced by the next unnamed Bind (a suspended one too)
        pw.batch(query("BEGIN"))
        pw.batch(parse("", MERGED), bind("", ""), execute("", 3), parse("", SINGLE),
                 bind("", ""), execute("", 2), execute("", 2), SYNC)
        pw.batch(query("ROLLBACK"))
        # Describe P then Flush: the description comes without an Execute
        pw.batch(parse("", AGG), bind("", ""), describe("P", ""), SYNC)
        # an error while a portal is suspended: the rest of the batch is skipped
        pw.batch(parse("", MERGED), bind("", ""), execute("", 2),
                 parse("", "SELECT 1 / (id - id) FROM items WHERE customer_id = 7"),
                 bind("", ""), execute("", 0), execute("", 1), SYNC)


def test_parameters_of_a_portal_fetched_in_parts(store):
    with Pair(store) as pw:
        sql = "SELECT id, v FROM items WHERE grp = $1 AND id > $2 ORDER BY id LIMIT $3"
        pw.batch(parse("q", sql, (23, 20, 20)), bind("", "q", ("3", "100", "40")),
                 describe("P", ""), execute("", 15), execute("", 15), execute("", 15), SYNC)
        pw.batch(parse("h", HAVING, (20,)), bind("", "h", ("900",), (1,)),
                 describe("P", ""), execute("", 4), execute("", 4), execute("", 20), SYNC)
        pw.batch(parse("b", MERGED), bind("", "b", (), (1,)), describe("P", ""),
                 execute("", 100), execute("", 300), SYNC)


def test_reexecute_of_a_portal_that_completed(store):
    with Pair(store) as pw:
        pw.batch(query("BEGIN"))
        pw.batch(parse("s", SINGLE), bind("a", "s"), execute("a", 0), execute("a", 0),
                 parse("m", MERGED), bind("b", "m"), execute("b", 0), execute("b", 5), SYNC)
        pw.batch(describe("P", "a"), describe("P", "b"), SYNC)     # (they ran already)
        pw.batch(parse("i", "INSERT INTO items VALUES (7, 900001, 1, 1, 'x') RETURNING id"),
                 bind("c", "i"), execute("c", 0), execute("c", 0), SYNC)
        pw.batch(parse("u", "UPDATE items SET note = 'y' WHERE customer_id = 7 AND id = 900001"),
                 bind("d", "u"), execute("d", 0), execute("d", 0), SYNC)
        # the block is aborted: a Describe of what returns rows is refused
        pw.batch(describe("P", "d"), describe("S", "u"), close("P", "d"), SYNC)
        pw.batch(describe("S", "s"), SYNC)
        pw.batch(describe("P", "a"), SYNC)
        pw.batch(query("ROLLBACK"))


def test_row_limit_on_statements_without_rows_and_names_reused(store):
    with Pair(store) as pw:
        pw.batch(query("BEGIN"))
        # a portal that completed under its shard-side name: Close frees the name there too
        pw.batch(parse("s5", SINGLE), bind("z", "s5"), execute("z", 1000), close("P", "z"),
                 SYNC)
        pw.batch(query("DECLARE z CURSOR FOR SELECT 1; FETCH z; CLOSE z"))
        pw.batch(bind("z", "s5"), execute("z", 1), close("P", "z"), SYNC)
        # a row limit on a statement without rows over several shards changes nothing
        pw.batch(parse("u2", "UPDATE items SET note = note WHERE id < 50"), bind("", "u2"),
                 execute("", 5), SYNC)
        pw.batch(query("ROLLBACK"))
    # RETURNING rows of a write over several shards are not fetched in parts
    w = Wire(store.neki.port)
    w.login(database=store.db)
    try:
        for m in (parse("r2", "UPDATE items SET note = note WHERE id < 5 RETURNING id"),
                  bind("", "r2"), execute("", 2), SYNC):
            w.send(*m)
        got = compact(w.read_until("Z"))
        assert got == [("1",), ("2",), ("E", "0A000", "only a SELECT over several shards can "
                                      "be fetched in parts (Execute with a row limit)", None),
                       ("Z", "I")], got
    finally:
        w.close()


# ---- SQL cursors ----------------------------------------------------------------------

def test_cursor_on_one_shard_is_the_shards(store):
    with Pair(store) as pw:
        pw.batch(query(f"BEGIN; DECLARE c SCROLL CURSOR FOR {SINGLE}; FETCH 2 c; "
                       "FETCH BACKWARD 1 c; MOVE 3 IN c; FETCH ABSOLUTE 2 FROM c; "
                       "FETCH RELATIVE -1 c; FETCH LAST c; FETCH ALL c; FETCH PRIOR c"))
        pw.batch(query("FETCH FORWARD 3 FROM c; MOVE BACKWARD ALL IN c; FETCH c"))
        pw.batch(query("CLOSE c"))
        pw.batch(query("FETCH c"))
        pw.batch(query("ROLLBACK"))
        pw.batch(query(f"BEGIN; DECLARE c NO SCROLL CURSOR FOR {SINGLE}; FETCH 2 c; "
                       "FETCH BACKWARD 1 c"))
        pw.batch(query("ROLLBACK"))


@pytest.mark.parametrize("sql", [MERGED, AGG, "SELECT * FROM items WHERE id < 400 "
                                 "ORDER BY note NULLS FIRST, id DESC"])
def test_cursor_over_several_shards_moves_forward(store, sql):
    with Pair(store) as pw:
        pw.batch(query(f"BEGIN; DECLARE m NO SCROLL CURSOR FOR {sql}; FETCH 5 m; "
                       "FETCH FORWARD 3 FROM m; MOVE 10 IN m; FETCH NEXT m; FETCH 0 m"))
        pw.batch(query("FETCH ABSOLUTE 30 m; FETCH RELATIVE 4 m; MOVE 2 m; FETCH 250 m"))
        pw.batch(query("FETCH ALL m; FETCH m; MOVE ALL m; FETCH m"))
        pw.batch(query("CLOSE m; COMMIT"))
        # backward on a NO SCROLL one: Postgres' error and HINT, the block is aborted
        for bad in ("FETCH BACKWARD 1 m", "FETCH PRIOR m", "FETCH RELATIVE 0 m",
                    "FETCH FIRST m", "MOVE LAST m", "FETCH -2 m", "MOVE BACKWARD ALL m"):
            pw.batch(query(f"BEGIN; DECLARE m NO SCROLL CURSOR FOR {sql}; FETCH 2 m; {bad}"))
            pw.batch(query("FETCH 1 m"))
            pw.batch(query("ROLLBACK"))
        pw.batch(query(f"BEGIN; DECLARE m NO SCROLL CURSOR FOR {sql}; FETCH FIRST m; "
                       "FETCH 0 m; FETCH RELATIVE 0 m; FETCH ABSOLUTE 1 m; ROLLBACK"))


def test_cursor_over_several_shards_concatenates(store):
    with Pair(store) as pw:
        got = pw.batch(query(f"BEGIN; DECLARE c CURSOR FOR {CONCAT}; FETCH 4 c; FETCH 7 c; "
                             "MOVE 3 c; FETCH ALL c; FETCH c; CLOSE c; COMMIT"),
                       ordered=False, complete=False)
        assert types(got).count("D") == 24 - 3


def test_default_cursor_over_several_shards_scans_forward_only(store):
    """Postgres makes a cursor without SCROLL / NO SCROLL scrollable when its plan can go
    backward; the router's merge over several shards cannot, so it is NO SCROLL (as
    Postgres for a plan that cannot scan backward)."""
    with store.connect() as conn:
        conn.execute("BEGIN")
        conn.execute(f"DECLARE m CURSOR FOR {MERGED}")
        assert len(conn.execute("FETCH 3 FROM m").fetchall()) == 3
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("FETCH BACKWARD 1 FROM m")
        assert ei.value.diag.sqlstate == "55000"
        assert ei.value.diag.message_primary == "cursor can only scan forward"
        assert ei.value.diag.message_hint == \
            "Declare it with SCROLL option to enable backward scan."


def test_scroll_cursor_over_several_shards_walks_like_postgres(store):
    rnd = random.Random(7)
    moves = ["NEXT", "PRIOR", "FIRST", "LAST", "ALL", "BACKWARD ALL", "FORWARD ALL"]
    with Pair(store) as pw:
        pw.batch(query(f"BEGIN; DECLARE s SCROLL CURSOR FOR {MERGED}"))
        for i in range(120):
            pick = rnd.random()
            if pick < 0.2:
                how = rnd.choice(moves)
            elif pick < 0.45:
                how = f"ABSOLUTE {rnd.randint(-320, 320)}"
            elif pick < 0.7:
                how = f"RELATIVE {rnd.randint(-40, 40)}"
            elif pick < 0.85:
                how = f"FORWARD {rnd.randint(0, 60)}"
            else:
                how = f"BACKWARD {rnd.randint(0, 60)}"
            verb = "MOVE" if rnd.random() < 0.3 else "FETCH"
            pw.batch(query(f"{verb} {how} FROM s"))
        pw.batch(query("CLOSE s; COMMIT"))


def test_binary_cursors_and_cursors_over_the_extended_protocol(store):
    with Pair(store) as pw:
        for sql in (MERGED, SINGLE, AGG):
            pw.batch(query(f"BEGIN; DECLARE b BINARY CURSOR FOR {sql}; FETCH 3 b; FETCH 2 b; "
                           "CLOSE b; COMMIT"))
        # what psycopg sends: every statement with Describe P; Describe P of the cursor
        for sql, ncols in ((MERGED, 3), (SINGLE, 4)):
            pw.batch(query("BEGIN"))
            pw.batch(parse("", f"DECLARE x CURSOR FOR {sql}"), bind("", ""),
                     describe("P", ""), execute("", 0), SYNC)
            pw.batch(describe("P", "x"), SYNC)
            for rfmt in ((1,), (1,) * ncols, (1,)):
                pw.batch(parse("", "FETCH FORWARD 4 FROM x"), bind("", "", (), rfmt),
                         describe("P", ""), execute("", 0), SYNC)
            pw.batch(parse("", "MOVE 2 IN x"), bind("", ""), describe("P", ""),
                     execute("", 0), parse("", "CLOSE x"), bind("", ""), describe("P", ""),
                     execute("", 0), SYNC)
            pw.batch(query("COMMIT"))
    # the rows of a cursor over several shards keep the formats of its first FETCH
    w = Wire(store.neki.port)
    w.login(database=store.db)
    try:
        w.query(f"BEGIN; DECLARE x CURSOR FOR {MERGED}; FETCH 1 FROM x")
        for m in (parse("", "FETCH 1 FROM x"), bind("", "", (), (1,)), execute("", 0), SYNC):
            w.send(*m)
        got = compact(w.read_until("Z"))
        assert got[2] == ("E", "0A000", 'cannot change the result format of cursor "x" over '
                          "several shards", None), got
    finally:
        w.close()


def test_cursor_errors_and_namespace(store):
    with Pair(store) as pw:
        pw.batch(query(f"DECLARE c CURSOR FOR {MERGED}"))       # 25P01 outside a block
        pw.batch(query(f"DECLARE c NO SCROLL CURSOR WITHOUT HOLD FOR {SINGLE}"))
        pw.batch(query("FETCH 1 FROM nope"))
        pw.batch(query("MOVE 1 IN nope"))
        pw.batch(query("CLOSE nope"))
        pw.batch(query("CLOSE ALL"))
        # a multi-statement Query is a block for DECLARE, as in Postgres
        pw.batch(query(f"DECLARE c CURSOR FOR {MERGED}; FETCH 2 c"))
        pw.batch(query("FETCH 1 c"))                           # gone with it
        pw.batch(query(f"BEGIN; DECLARE c CURSOR FOR {MERGED}; DECLARE c CURSOR FOR SELECT 1"))
        pw.batch(query("ROLLBACK"))
        # a cursor and a protocol portal share the namespace
        pw.batch(query(f"BEGIN; DECLARE c CURSOR FOR {MERGED}"))
        pw.batch(parse("s1", SINGLE), bind("c", "s1"), SYNC)
        pw.batch(query("ROLLBACK"))
        pw.batch(query("BEGIN"))
        pw.batch(parse("s2", SINGLE), bind("p", "s2"), execute("p", 2), SYNC)
        pw.batch(query(f"DECLARE p CURSOR FOR {MERGED}"))
        pw.batch(query("ROLLBACK"))
        pw.batch(query("BEGIN"))
        pw.batch(parse("s3", SINGLE), bind("p", "s3"), execute("p", 2), SYNC)
        pw.batch(query("FETCH 2 FROM p; MOVE 1 IN p; FETCH ALL FROM p; CLOSE p"))
        pw.batch(query(f"DECLARE a CURSOR FOR {MERGED}; DECLARE b CURSOR FOR {SINGLE}"))
        pw.batch(bind("q", "s3"), SYNC)
        pw.batch(query("CLOSE ALL"))
        pw.batch(execute("q", 1), SYNC)
        pw.batch(query("ROLLBACK"))
        # an error in a FETCH aborts the block
        pw.batch(query("BEGIN; DECLARE e CURSOR FOR SELECT 1 / (id % 997) FROM items "
                       "WHERE grp = 1 ORDER BY id; FETCH 100 e"))
        pw.batch(query("FETCH 100 e"))
        pw.batch(query("ROLLBACK"))
        # Execute of a cursor over the protocol
        pw.batch(query(f"BEGIN; DECLARE c CURSOR FOR {MERGED}"))
        pw.batch(describe("P", "c"), execute("c", 4), execute("c", 0), SYNC)
        pw.batch(query("FETCH 1 c; ROLLBACK"))


def test_with_hold_cursors(store):
    with Pair(store) as pw:
        # outside a block: declared in its own transaction, kept after it
        pw.batch(query(f"DECLARE h CURSOR WITH HOLD FOR {MERGED}"))
        pw.batch(query("FETCH 5 h"))
        pw.batch(query("BEGIN; FETCH 2 h; COMMIT"))
        pw.batch(query("BEGIN; FETCH 2 h; ROLLBACK"))     # (its position is not undone)
        pw.batch(query("FETCH 3 h; SELECT 1 / 0"))
        pw.batch(query("FETCH 3 h"))
        pw.batch(query(f"DECLARE s CURSOR WITH HOLD FOR {SINGLE}"))
        pw.batch(query("FETCH 2 s; FETCH ALL h; CLOSE h; FETCH 1 s"))
        # declared in a block: COMMIT keeps it, ROLLBACK drops it
        pw.batch(query(f"BEGIN; DECLARE k SCROLL CURSOR WITH HOLD FOR {AGG}; FETCH 2 k; "
                       "COMMIT"))
        pw.batch(query("FETCH ALL k; FETCH BACKWARD 3 k; FETCH ABSOLUTE 1 k"))
        pw.batch(query(f"BEGIN; DECLARE r CURSOR WITH HOLD FOR {MERGED}; ROLLBACK"))
        pw.batch(query("FETCH r"))
        pw.batch(query("CLOSE ALL"))
        pw.batch(query("FETCH s"))
        pw.batch(query(f"DECLARE d CURSOR WITH HOLD FOR {MERGED}; DECLARE e CURSOR WITH HOLD "
                       f"FOR {SINGLE}"))
        before = shard_pools(store)
        pw.batch(query("DISCARD ALL"))
        pw.batch(query("FETCH d"))
        # the links that held them are closed (their cursors with them), not pooled
        after = shard_pools(store)
        assert all(v[0] == 0 for v in after.values()), after
        assert sum(v[1] for v in after.values()) == sum(v[1] for v in before.values()) - 4


def shard_pools(store):
    """{pool: (sv_active, sv_active + sv_idle + sv_used)} of the shards' pools."""
    with store.neki.admin_connect() as conn:
        cur = conn.execute("SHOW POOLS")
        cols = [d.name for d in cur.description]
        out = {}
        for row in cur.fetchall():
            r = dict(zip(cols, row))
            if r["database"].startswith(store.db + "@shard-"):
                out[r["database"]] = (r["sv_active"],
                                      r["sv_active"] + r["sv_idle"] + r["sv_used"])
        return out


def test_with_hold_cursor_pins_its_links(store):
    shards = [f"{store.db}@{s}" for s in store.cluster.shards]
    w = Wire(store.neki.port)
    w.login(database=store.db)
    try:
        w.query(f"DECLARE h CURSOR WITH HOLD FOR {MERGED}")
        pools = shard_pools(store)
        assert all(pools[s][0] == 1 for s in shards), pools      # held by the session
        w.query("SELECT count(*) FROM items")                     # (other statements use
        assert all(shard_pools(store)[s][0] == 1 for s in shards)  # the same links)
        w.query("CLOSE h")
        wait_until(lambda: all(v[0] == 0 for v in shard_pools(store).values()), 10,
                   what="the links back in the pools")
        w.query(f"DECLARE one CURSOR WITH HOLD FOR {SINGLE}")
        assert sorted(v[0] for v in shard_pools(store).values()) == [0, 0, 0, 1]
        before = shard_pools(store)
    finally:
        w.close()
    # the client left with a WITH HOLD cursor open: its link is closed, not pooled with it
    wait_until(lambda: all(v[0] == 0 for v in shard_pools(store).values()), 10,
               what="the pinned link closed")
    after = shard_pools(store)
    assert sum(v[1] for v in after.values()) == sum(v[1] for v in before.values()) - 1
    with store.connect() as conn:    # every pooled link is clean: the name is free again
        conn.execute(f"DECLARE one CURSOR WITH HOLD FOR {SINGLE}")
        assert len(conn.execute("FETCH ALL FROM one").fetchall()) == 40
        conn.execute("CLOSE one")


# ---- drivers --------------------------------------------------------------------------

PSYCOPG_QUERIES = [
    ("SELECT * FROM items ORDER BY customer_id, id", None),        # 12,000 rows
    ("SELECT customer_id, id, v FROM items WHERE grp = %s ORDER BY v DESC, id", (4,)),
    ("SELECT * FROM items WHERE customer_id = %s ORDER BY id", (42,)),
    (AGG, None),
    ("SELECT grp, count(*) FROM items GROUP BY grp HAVING count(*) > %s ORDER BY 1", (900,)),
    ("SELECT note, count(*) FROM items GROUP BY note ORDER BY note NULLS FIRST LIMIT 50",
     None),
]


def named_fetch(conn, sql, params, binary, itersize, **kw):
    rows = []
    with conn.cursor("nc", binary=binary, **kw) as cur:
        cur.itersize = itersize
        cur.execute(sql, params)
        for row in cur:
            rows.append(row)
    return rows


@pytest.mark.parametrize("binary", [False, True])
def test_psycopg_named_cursors_match_the_reference(store, binary):
    with store.connect() as conn, store.ref() as ref:
        for sql, params in PSYCOPG_QUERIES:
            for c in (conn, ref):
                c.autocommit = False
            got = named_fetch(conn, sql, params, binary, 333)
            want = named_fetch(ref, sql, params, binary, 333)
            assert got == want, sql
            if sql.startswith("SELECT * FROM items ORDER BY"):
                assert len(got) == NITEMS
            conn.rollback()
            ref.rollback()
        # fetchmany / fetchone / fetchall on one cursor, in one transaction
        out = []
        for c in (conn, ref):
            with c.cursor("parts", binary=binary) as cur:
                cur.execute(MERGED)
                out.append((cur.fetchone(), cur.fetchmany(17), cur.fetchmany(0),
                            cur.fetchall(), cur.fetchone(), cur.rownumber))
            c.rollback()
        assert out[0] == out[1]


def test_psycopg_scrollable_and_with_hold_cursors(store):
    with store.connect() as conn, store.ref() as ref:
        got = []
        for c in (conn, ref):
            c.autocommit = False
            with c.cursor("sc", scrollable=True) as cur:
                cur.execute("SELECT id, v FROM items WHERE grp < 3 ORDER BY v, id")
                part = [cur.fetchmany(5)]
                cur.scroll(-3)
                part.append(cur.fetchmany(2))
                cur.scroll(100, mode="absolute")
                part.append(cur.fetchone())
                cur.scroll(-50)
                part.append(cur.fetchmany(3))
                cur.scroll(0, mode="absolute")
                part.append(cur.fetchmany(2))
                got.append(part)
            c.rollback()
        assert got[0] == got[1]
        # NO SCROLL (Django's .iterator()): scroll() back is Postgres' 55000
        conn.autocommit = False
        with conn.cursor("ns", scrollable=False) as cur:
            cur.execute(MERGED)
            cur.fetchmany(5)
            with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
                cur.scroll(-1)
        conn.rollback()
        # WITH HOLD in autocommit (Django's .iterator() there): outside any transaction
        for c in (conn, ref):
            c.autocommit = True
        got = [named_fetch(c, "SELECT * FROM items ORDER BY v DESC, customer_id, id", None,
                           False, 1000, withhold=True, scrollable=False) for c in (conn, ref)]
        assert got[0] == got[1] and len(got[0]) == NITEMS
        assert conn.execute("SELECT count(*) FROM items").fetchone() == (NITEMS,)


def test_jdbc_fetch_size_matches_the_reference(store):
    import shutil
    import subprocess
    jar = "/usr/share/java/postgresql.jar"
    if shutil.which("java") is None or not Path(jar).exists():
        pytest.skip("java or libpostgresql-jdbc-java is not installed")
    outs = []
    for port in (store.neki.port, store.cluster.port("reference")):
        for threshold in (5, 1):     # unnamed statements, then named + binary results
            url = (f"jdbc:postgresql://127.0.0.1:{port}/{store.db}?user=postgres"
                   f"&prepareThreshold={threshold}&sslmode=disable")
            res = subprocess.run(["java", "-cp", jar, str(CLIENTS / "jdbc" / "FetchSize.java"),
                                  url], capture_output=True, text=True, timeout=300)
            assert res.returncode == 0, res.stderr[-3000:]
            outs.append(res.stdout)
    assert outs[0] == outs[2] and outs[1] == outs[3]
    assert "Q4 fetch 1: 12000" in outs[0]


# ---- memory ---------------------------------------------------------------------------

def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def client_queue(store, w):
    """Bytes neki queues for client <w> once that stopped changing (SHOW SOCKETS)."""
    port = w.sock.getsockname()[1]
    seen = []

    def queued():
        with store.neki.admin_connect() as conn:
            cur = conn.execute("SHOW SOCKETS")
            cols = [d.name for d in cur.description]
            for row in cur.fetchall():
                r = dict(zip(cols, row))
                if r["type"] == "C" and r["port"] == port:
                    return r["send_remain"]
        return None

    def stable():
        seen.append(queued())
        return len(seen) >= 10 and len(set(seen[-10:])) == 1
    wait_until(stable, 30, interval=0.05, what="the client's queue to stop changing")
    return seen[-1]


def test_memory_stays_bounded_while_a_merged_cursor_is_read_slowly(store):
    """100,000 rows (13 MB) merged from 4 shards through a cursor, read by a client that
    takes its time: the router pulls a chunk per shard at a time and waits while the
    client's queue is long, so the workers' memory does not follow the result."""
    pids = store.neki.children()
    w = Wire(store.neki.port, timeout=120)
    w.login(database=store.db)
    try:
        w.query("BEGIN")
        w.query("DECLARE c NO SCROLL CURSOR FOR SELECT * FROM big ORDER BY id DESC")
        for _ in range(3):      # warm up: links, buffers
            assert types(compact(w.query("FETCH 1000 FROM c"))).count("D") == 1000
        before = {p: rss_kb(p) for p in pids}
        peak, n, last = 0, 0, None
        w.send(*query("FETCH ALL FROM c"))
        for _ in range(10):
            assert w.read_msg()[0] in "TD"
        # the client stops reading: what the router queues for it stays small
        queued = client_queue(store, w)
        assert queued < 2 * 1024 * 1024, f"{queued} bytes queued for the client"
        peak = max(rss_kb(p) - before[p] for p in pids)
        n = 9
        while True:
            typ, body = w.read_msg()
            if typ == "D":
                n += 1
                last = body
                if n % 5000 == 0:
                    peak = max(peak, max(rss_kb(p) - before[p] for p in pids))
            elif typ == "C":
                assert body == b"FETCH %d\0" % (NBIG - 3000)
            elif typ == "Z":
                break
        assert n == NBIG - 3000
        assert last.endswith(b"x1")        # the last row is id 1
        # FETCH 100 after FETCH 100 on a second cursor (psycopg's itersize)
        got = compact(w.query("DECLARE d NO SCROLL CURSOR FOR SELECT id FROM big "
                              "ORDER BY pad, id"))
        assert types(got) == "CZ", got
        got = 0
        for _ in range(300):
            got += types(compact(w.query("FETCH 100 FROM d"))).count("D")
        assert got == 30000
        peak = max(peak, max(rss_kb(p) - before[p] for p in pids))
        w.query("COMMIT")
    finally:
        w.close()
    if "asan" not in os.environ.get("NEKI_BIN", ""):
        assert peak < 12 * 1024, f"worker RSS grew by {peak} kB"     # (ASan keeps frees)
    print(f"worker RSS growth while reading 13 MB slowly: {peak} kB")


def test_scroll_cursor_over_several_shards_has_a_memory_bound(store):
    """A SCROLL cursor over several shards keeps the rows it let out (to go back over them)
    up to 64 MB on the router; past that a fetch is refused, the block aborted."""
    with store.connect() as conn:
        conn.execute("BEGIN")
        conn.execute("DECLARE s SCROLL CURSOR FOR SELECT id, repeat(pad, 16) FROM big "
                     "ORDER BY id")
        assert len(conn.execute("FETCH 1000 FROM s").fetchall()) == 1000
        assert conn.execute("FETCH BACKWARD 2 FROM s").fetchall()[1][0] == 998
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("MOVE FORWARD ALL IN s")
        assert ei.value.diag.sqlstate == "54000"
        assert ei.value.diag.message_primary == \
            'scrollable cursor "s" over several shards needs more than 64 MB on the router'
        assert ei.value.diag.message_hint == "Declare it NO SCROLL to read it forward only."
        conn.execute("ROLLBACK")
        # NO SCROLL reads all of it
        conn.execute("BEGIN")
        conn.execute("DECLARE s NO SCROLL CURSOR FOR SELECT id, repeat(pad, 16) FROM big "
                     "ORDER BY id")
        assert conn.execute("MOVE FORWARD ALL IN s").statusmessage == f"MOVE {NBIG}"
        conn.execute("ROLLBACK")
