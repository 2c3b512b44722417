"""
Extended-protocol answers of a routed session that Postgres defines precisely, compared
message by message with the reference server (test_portals.py's Pair): the result formats
a Describe of a portal reports (the portal's Bind's, whether an Execute follows in the batch
or not; text for a Describe of a statement), and errors Postgres raises at Bind (a
parameter that does not parse as its type, text or binary, the shard key or another one):
the ErrorResponse answers the Bind, the rest of the batch is skipped up to Sync.
"""
import struct

import pytest

from test_portals import (SYNC, Pair, bind, describe, execute, parse, portals_topology,
                          query)
from test_routing import SCHEMA, Store, create_schema, routing_neki, sharded_database

TABLES = ["CREATE TABLE items (customer_id bigint NOT NULL, id bigint NOT NULL, grp int NOT "
          "NULL, v numeric(12,2), note text, PRIMARY KEY (customer_id, id))"]
ITEMS = ", ".join(f"({i % 30 + 1}, {i}, {i % 7}, {i * 3}.{i % 100:02d}, "
                  f"{'NULL' if i % 11 == 0 else repr('note ' + str(i))})"
                  for i in range(1, 301))


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "rproto") as db, \
            routing_neki(pg_cluster, db, portals_topology(db), Store) as st:
        create_schema(st, SCHEMA + TABLES)
        for connect in (st.connect, st.ref):
            with connect() as conn:
                conn.execute("INSERT INTO items VALUES " + ITEMS)
        yield st


# one shard (the key bound), several shards concatenated, merged (ORDER BY / LIMIT)
SINGLE = "SELECT id, grp, v, note FROM items WHERE customer_id = $1 ORDER BY id"
CONCAT = "SELECT id, grp, v, note FROM items WHERE id % 50 = $1::bigint"
MERGED = "SELECT id, grp, v, note FROM items WHERE grp < 5 AND $1::int > 0 " \
         "ORDER BY v DESC, id LIMIT 20"
FORMATS = [(1,), (1, 0, 1, 0), (0, 1, 0, 1), ()]


@pytest.mark.parametrize("sql,ordered", [(SINGLE, True), (CONCAT, False), (MERGED, True)])
@pytest.mark.parametrize("rfmt", FORMATS)
def test_describe_portal_reports_the_bind_result_formats(store, sql, ordered, rfmt):
    with Pair(store) as pw:
        # Describe P alone, then followed by its Execute; Describe S: text (zero) formats
        pw.batch(parse("", sql), bind("", "", ["7"], rfmt), describe("P", ""), SYNC)
        pw.batch(parse("", sql), bind("", "", ["7"], rfmt), describe("P", ""),
                 execute("", 0), SYNC, ordered=ordered)
        pw.batch(parse("s", sql), bind("p", "s", ["7"], rfmt), describe("S", "s"),
                 describe("P", "p"), SYNC)
        # in a block: described before, between and after row-limited Executes
        pw.batch(query("BEGIN"))
        pw.batch(bind("q", "s", ["7"], rfmt), describe("P", "q"), describe("P", "q"),
                 execute("q", 2), describe("P", "q"), SYNC, ordered=ordered, complete=False)
        pw.batch(describe("P", "q"), execute("q", 0), describe("P", "q"), SYNC,
                 ordered=ordered, complete=False)
        pw.batch(query("COMMIT"))


# ---- errors at Bind ---------------------------------------------------------------------

def binary_bind(portal, stmt, params, pfmt):
    """Bind with parameters already encoded (bytes), <pfmt> their format codes."""
    body = portal.encode() + b"\0" + stmt.encode() + b"\0"
    body += struct.pack("!H", len(pfmt)) + b"".join(struct.pack("!H", f) for f in pfmt)
    body += struct.pack("!H", len(params))
    for p in params:
        body += struct.pack("!i", -1) if p is None else struct.pack("!I", len(p)) + p
    return b"B", body + struct.pack("!H", 0)


KEY = "SELECT id, note FROM items WHERE customer_id = $1 ORDER BY id"
OTHER = "SELECT id, note FROM items WHERE customer_id = 7 AND grp = $1 ORDER BY id"
SCATTER = "SELECT id, note FROM items WHERE grp = $1"
INSERT = "INSERT INTO items VALUES ($1, $2, 1, 1, 'x')"
BIND_ERRORS = [
    # text: does not parse as its type (22P02), out of range (22003)
    (KEY, [b"abc"], (0,)), (KEY, [b"99999999999999999999"], (0,)), (OTHER, [b"abc"], (0,)),
    (SCATTER, [b"x1"], (0,)), (INSERT, [b"7", b"abc"], (0,)), (INSERT, [b"abc", b"1"], (0,)),
    # binary: too short (08P01), too long (22P03)
    (KEY, [b"\0\0\7"], (1,)), (KEY, [b"\0" * 7 + b"\7\0"], (1,)), (OTHER, [b"\0\7"], (1,)),
    (SCATTER, [b"\0\0\0\0\7"], (1,)),
]


@pytest.mark.parametrize("sql,params,pfmt", BIND_ERRORS)
def test_a_bind_error_answers_the_bind(store, sql, params, pfmt):
    good = [struct.pack("!q", 7) if pfmt == (1,) and sql == KEY else
            struct.pack("!i", 3) if pfmt == (1,) else b"7"] * len(params)
    with Pair(store) as pw:
        for tail in ([], [describe("P", "")], [execute("", 0)],
                     [describe("P", ""), execute("", 0)]):
            pw.batch(parse("", sql), binary_bind("", "", params, pfmt), *tail, SYNC)
        # named, then the next messages are skipped up to Sync; the session goes on
        pw.batch(parse("s", sql), binary_bind("p", "s", params, pfmt), execute("p", 0),
                 parse("t", "SELECT 1"), binary_bind("", "s", good, pfmt), SYNC)
        pw.batch(binary_bind("p", "s", good, pfmt), execute("p", 0), SYNC, ordered=False)
        # in a block: the Bind aborts it (an Execute of the failed portal there is left
        # out: Postgres keeps it, undefined, and answers EmptyQueryResponse; neki 25P02)
        pw.batch(query("BEGIN"))
        pw.batch(binary_bind("q", "s", params, pfmt), execute("q", 0), SYNC)
        pw.batch(binary_bind("r", "s", good, pfmt), execute("r", 0), SYNC)
        pw.batch(query("ROLLBACK"))
