"""
COPY through neki on a sharded database (issue 7): COPY FROM STDIN into sharded tables
(rows routed by their shard key; text, CSV with its options, binary; psycopg's copy and
psql's \\copy), into reference and unsharded tables, the spec's rejections (NK013 41,
43-56), a bad row aborting every shard, COPY TO STDOUT over several shards compared with the
reference server, a large COPY whose memory stays flat, and line ends ("\\n", "\\r\\n", old Mac
"\\r", mixed ones, end-of-data markers) giving the rows or the error of one server.

The storefront topology (etc/topology-storefront.json) plus a few tables of our own:
`events` (customer_data, key customer_id), `pairs` (a shard index over two columns),
`tickets` (an identity column) and `currencies` (a reference table with a serial column).
"""
import json
import os
import shutil
import struct
import subprocess
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import create_schema, routing_neki, sharded_database

REPO = Path(__file__).resolve().parent.parent.parent

SCHEMA = [
    "CREATE TABLE countries (code text PRIMARY KEY, name text NOT NULL)",
    "CREATE TABLE currencies (id serial PRIMARY KEY, code text NOT NULL)",
    "CREATE TABLE customers (id bigint PRIMARY KEY, name text, country text)",
    "CREATE TABLE customers_ins (id bigint PRIMARY KEY, name text, country text)",
    "CREATE TABLE orders (customer_id bigint NOT NULL, id bigint NOT NULL, "
    "PRIMARY KEY (customer_id, id))",
    "CREATE TABLE events (customer_id bigint NOT NULL, seq int NOT NULL, payload text)",
    "CREATE TABLE products (sku text PRIMARY KEY, name text NOT NULL, price numeric(10,2))",
    "CREATE TABLE pairs (a bigint, b bigint, v text)",
    "CREATE TABLE tickets (id bigint GENERATED ALWAYS AS IDENTITY, customer_id bigint "
    "NOT NULL, body text)",
    "CREATE TABLE notes (id int, body text)",
    "CREATE TABLE kinds (customer_id bigint NOT NULL, b bool, d date, ts timestamptz, "
    "n numeric, f float8, t text, arr int[], j jsonb, by bytea)",
]

NK = "not implemented: [{}] {}"
SENTENCES = {
    41: "File COPY is unavailable for sharded tables.",
    43: "File COPY is unavailable for reference tables.",
    44: "COPY FROM cannot maintain this table\u2019s secondary index.",
    45: "COPY does not support a multi-column primary shard index.",
    46: "COPY FROM cannot evaluate this reference-table default consistently.",
    47: "COPY TO PROGRAM is unavailable.",
    49: "COPY of a SELECT result is unavailable.",
    50: "COPY FROM with a WHERE clause is unavailable.",
    51: "COPY FROM cannot evaluate this column default on the router.",
    52: "This COPY option is unavailable for sharded COPY.",
    53: "This input encoding is unavailable for sharded COPY.",
    54: "COPY is unavailable in a multi-statement query.",
    55: "COPY is unavailable in the extended query protocol.",
    56: "COPY FROM a materialized view is unavailable.",
}


def topology(db):
    doc = json.loads((REPO / "etc" / "topology-storefront.json").read_text())
    d = doc["databases"]["store"]
    tables = d["schemas"]["public"]["tables"]
    tables["customers_ins"] = {"shard_group": "customer_data", "shard_index": "customer_by_id"}
    tables["events"] = {"shard_group": "customer_data"}
    tables["kinds"] = {"shard_group": "customer_data"}
    tables["tickets"] = {"shard_group": "customer_data"}
    tables["pairs"] = {"shard_group": "customer_data", "shard_index": "by_pair"}
    doc["shard_indexes"]["by_pair"] = {"type": "xxhash", "columns": ["a + b"]}
    doc["databases"] = {db: d}
    return doc


def lit(value):
    return "'" + value.replace("'", "''") + "'"


class Store:
    def __init__(self, cluster, inst, db):
        self.cluster, self.neki, self.db = cluster, inst, db

    def connect(self, **kw):
        return self.neki.connect(dbname=self.db, **kw)

    def ref(self):
        return self.cluster.connect("reference", dbname=self.db)

    def run(self, sql):
        with self.connect() as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description is not None else None

    def shard_rows(self, server, sql):
        return self.cluster.sql(server, sql, dbname=self.db)

    def per_shard(self, sql):
        return {s: self.shard_rows(s, sql) for s in self.cluster.shards}

    def copy_in(self, sql, data, conn=None):
        """COPY ... FROM STDIN through neki with psycopg; returns the status message."""
        own = conn is None
        conn = conn or self.connect()
        try:
            with conn.cursor() as cur:
                with cur.copy(sql) as cp:
                    for chunk in [data] if isinstance(data, bytes) else data:
                        cp.write(chunk)
                return cur.statusmessage
        finally:
            if own:
                conn.close()

    def copy_out(self, sql, ref=False):
        """COPY ... TO STDOUT (neki or the reference server): the bytes."""
        with (self.ref() if ref else self.connect()) as conn:
            with conn.cursor() as cur:
                out = bytearray()
                with cur.copy(sql) as cp:
                    for chunk in cp:
                        out += chunk
                return bytes(out), f"COPY {cur.rowcount}"

    def truncate(self, *tables):
        for t in tables:
            self.run(f"TRUNCATE {t}")


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "copy") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st, SCHEMA)
        st.run("CREATE MATERIALIZED VIEW country_mv AS SELECT * FROM countries")
        yield st


def nk_error(store, sql, code):
    with pytest.raises(psycopg.Error) as ei:
        if sql.upper().endswith("FROM STDIN") and ";" not in sql:
            store.copy_in(sql, b"")
        else:
            store.run(sql)
    assert ei.value.diag.sqlstate == "NK013", (sql, str(ei.value))
    assert ei.value.diag.message_primary == NK.format(code, SENTENCES[code]), sql


def placed_like_insert(store, table, twin, key):
    """Every shard holds the same keys in <table> (COPY) as in <twin> (routed INSERT)."""
    got = {s: sorted(r[0] for r in store.shard_rows(s, f"SELECT {key} FROM {table}"))
           for s in store.cluster.shards}
    keys = set(sum(got.values(), []))
    assert sum(len(v) > 0 for v in got.values()) >= 3     # spread over the shards
    for server in store.cluster.shards:
        want = sorted(r[0] for r in store.shard_rows(server, f"SELECT {key} FROM {twin}")
                      if r[0] in keys)
        assert got[server] == want, (server, table)


# ---- COPY FROM into a sharded table ---------------------------------------------------

CUST = [(i, f"name\t{i}" if i % 7 == 0 else f"customer {i}", "FR" if i % 2 else None)
        for i in range(1, 201)]


def text_rows(rows):
    def enc(v):
        if v is None:
            return "\\N"
        return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    return "".join("\t".join(enc(v) for v in r) + "\n" for r in rows).encode()


@pytest.fixture()
def twin(store):
    store.truncate("customers", "customers_ins")
    with store.connect() as conn:
        for i in range(0, len(CUST), 50):
            part = CUST[i:i + 50]
            psycopg.ClientCursor(conn).execute("INSERT INTO customers_ins VALUES " + ", ".join(
                "(%s, %s, %s)" for _ in part), [v for r in part for v in r])
    return store


def test_copy_from_text_routes_every_row(twin):
    data = text_rows(CUST)
    # cut at awkward places: rows spanning CopyData messages, escapes split in two
    chunks = [data[i:i + 37] for i in range(0, len(data), 37)]
    assert twin.copy_in("COPY customers FROM STDIN", chunks) == "COPY 200"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    got = sorted(twin.run("SELECT id, name, country FROM customers"))
    assert got == sorted(CUST)
    # a few rows checked against the router's own plan
    for cid in (1, 77, 150):
        plan = twin.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers "
                        f"WHERE id = {cid}")
        holder = [s for s, rows in twin.per_shard(
            f"SELECT 1 FROM customers WHERE id = {cid}").items() if rows]
        assert len(holder) == 1 and any(holder[0] in r[0] for r in plan), (cid, plan)


def test_copy_from_column_list_and_key_not_first(twin):
    rows = [(f"n{i}", i) for i in range(1, 101)]
    data = "".join(f"{n}\t{i}\n" for n, i in rows).encode()
    assert twin.copy_in("COPY customers (name, id) FROM STDIN", data) == "COPY 100"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    assert twin.run("SELECT count(*) FROM customers WHERE country IS NULL") == [(100,)]


def test_copy_from_csv_options(twin):
    rows = []
    for cid, name, country in CUST:
        name = name.replace("\t", " ")
        if cid % 5 == 0:
            name = f'line one\nline "two"; {cid}'      # newline and quotes inside quotes
        rows.append((cid, name, country))

    def q(v):
        if v is None:
            return "NULL"
        v = str(v)
        return "'" + v.replace("!", "!!").replace("'", "!'") + "'"
    data = "ID;NAME;COUNTRY\n" + "".join(
        f"{q(c) if c % 3 == 0 else c};{q(n)};{q(k) if k else 'NULL'}\n" for c, n, k in rows)
    sql = ("COPY customers FROM STDIN WITH (FORMAT csv, HEADER true, DELIMITER ';', "
           "QUOTE '''', ESCAPE '!', NULL 'NULL')")
    raw = data.encode()
    assert twin.copy_in(sql, [raw[i:i + 53] for i in range(0, len(raw), 53)]) == "COPY 200"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    assert sorted(twin.run("SELECT id, name, country FROM customers")) == sorted(rows)


def test_copy_from_csv_header_match_and_crlf(twin):
    data = "id,name,country\r\n" + "".join(f"{i},\"c, {i}\",FR\r\n" for i in range(1, 61))
    assert twin.copy_in("COPY customers FROM STDIN (FORMAT csv, HEADER match)",
                        data.encode()) == "COPY 60"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    assert twin.run("SELECT name FROM customers WHERE id = 7") == [("c, 7",)]


# Line ends: Postgres takes the first line's ("\n", "\r\n" or "\r"), refuses another one
# later with its own error, and checks the end-of-data marker against it; neki's row splitter
# must give the same rows or the same error (CONTEXT line included) as one server.
LINE_ENDS = [
    ("", b"1\ta\tFR\r2\tb\tDE\r3\tc\t\\N\r"),
    ("", b"1\ta\tFR\r2\tb\tDE"),
    ("", b"1\ta\tFR\r\n2\tb\tDE\r\n"),
    ("", b"1\ta\\\rx\tFR\r2\tb\\\ny\tDE\r"),
    ("", b"1\ta\tFR\n2\tb\tDE\r3\tc\tIT\n"),
    ("", b"1\ta\tFR\r2\tb\tDE\n"),
    ("", b"1\ta\tFR\r\n2\tb\tDE\n"),
    ("", b"1\ta\tFR\r\n2\tb\tDE\r3\tc\tIT\r\n"),
    ("", b"1\ta\tFR\r\n2\tb\tDE\r"),
    ("", b"1\ta\tFR\r\\.\r4\tz\tXX\r"),
    ("", b"1\ta\tFR\r\\.\n"),
    ("", b"1\ta\tFR\n\\."),
    ("", b"1\ta\tFR\n2\tb\tDE\\.\n3\tc\tIT\n"),
    ("", b"1\ta\tFR\n2\tb\n"),
    ("(FORMAT csv)", b'1,"a\rb",FR\r2,c,DE\r'),
    ("(FORMAT csv)", b'1,a,FR\n2,b,DE\r'),
    ("(FORMAT csv)", b'1,a,FR\r2,b,DE\n'),
    ("(FORMAT csv)", b'1,"x\ny",FR\r2,b,DE\r'),
    ("(FORMAT csv)", b'1,"a\rb",FR\n2,"x\ry",DE\r'),
    ("(FORMAT csv)", b'1,a,FR\r\\.\r2,b,DE\r'),
    ("(FORMAT csv)", b'1,a,FR\r\n\\.\n2,b,DE\r\n'),
    ("(FORMAT csv)", b'1,a,FR\n\\.x,y,z\n2,b,DE\n'),
    ("(FORMAT csv)", b'1,"a\r\nb",FR\r\n2,"c\r\nd",\r\nx,y,z\r\n'),
    ("(FORMAT csv, HEADER)", b'id,name,country\r1,a,FR\r2,b,DE\r'),
    ("(FORMAT csv, HEADER)", b'id,name,country\r\n1,a,FR\n'),
]


def copy_outcome(conn, sql, data, step):
    """Rows and tag of COPY <sql> with <data> in CopyData messages of <step> bytes, or the
    error's (SQLSTATE, message, hint, CONTEXT)."""
    conn.execute("TRUNCATE customers")
    try:
        with conn.cursor() as cur:
            with cur.copy(sql) as cp:
                for i in range(0, len(data), step):
                    cp.write(data[i:i + step])
            tag = cur.statusmessage
        return tag, sorted(conn.execute("SELECT id, name, country FROM customers").fetchall())
    except psycopg.Error as e:
        d = e.diag
        return d.sqlstate, d.message_primary, d.message_hint, d.context


def test_copy_from_line_ends_as_one_server(store):
    """Text and CSV input with "\n", "\r\n" or old Mac "\r" line ends, mixed ones, quoted
    ones and end-of-data markers: the rows, or the error with its CONTEXT line, equal the
    reference server's; also with the input cut into 1-byte CopyData messages."""
    with store.connect(autocommit=True) as nconn, store.ref() as rconn:
        rconn.autocommit = True
        for opts, data in LINE_ENDS:
            sql = f"COPY customers FROM STDIN {opts}"
            want = copy_outcome(rconn, sql, data, len(data))
            for step in (len(data), 1):
                got = copy_outcome(nconn, sql, data, step)
                assert got == want, (opts, data, step)
    store.truncate("customers")


def test_copy_from_cr_line_ends_routes_every_row(twin):
    """200 rows with old Mac line ends, cut at awkward places: every row on its shard."""
    data = text_rows(CUST).replace(b"\n", b"\r")
    chunks = [data[i:i + 41] for i in range(0, len(data), 41)]
    assert twin.copy_in("COPY customers FROM STDIN", chunks) == "COPY 200"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    assert sorted(twin.run("SELECT id, name, country FROM customers")) == sorted(CUST)


def binary_copy(rows, types):
    out = bytearray(b"PGCOPY\n\xff\r\n\x00" + struct.pack("!ii", 0, 0))
    for r in rows:
        out += struct.pack("!h", len(r))
        for v, t in zip(r, types):
            if v is None:
                out += struct.pack("!i", -1)
                continue
            b = struct.pack("!q", v) if t == "int8" else v.encode()
            out += struct.pack("!i", len(b)) + b
    return bytes(out + struct.pack("!h", -1))


def test_copy_from_binary(twin):
    data = binary_copy(CUST, ["int8", "text", "text"])
    chunks = [data[i:i + 29] for i in range(0, len(data), 29)]
    assert twin.copy_in("COPY customers FROM STDIN (FORMAT binary)", chunks) == "COPY 200"
    placed_like_insert(twin, "customers", "customers_ins", "id")
    assert sorted(twin.run("SELECT id, name, country FROM customers")) == sorted(CUST)


def test_copy_from_psycopg_write_row_and_expression_key(store):
    store.truncate("products")
    rows = [(f"SKU-{i}" if i % 2 else f"sku-{i}", f"product {i}", f"{i}.50") for i in range(80)]
    with store.connect() as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY products (sku, name, price) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
            assert cur.statusmessage == "COPY 80"
    # by_lower_sku: the row sits where a lookup by the same sku routes
    for sku, _, _ in rows[:10]:
        assert store.run(f"SELECT name FROM products WHERE sku = {lit(sku)}") != []
    counts = store.per_shard("SELECT count(*) FROM products")
    assert sum(c[0][0] for c in counts.values()) == 80


def test_copy_from_psql_copy(twin):
    psql = shutil.which("psql")
    if psql is None:
        pytest.skip("psql is not installed")
    path = Path(twin.neki.dir if hasattr(twin.neki, "dir") else "/tmp") / f"cust_{os.getpid()}.csv"
    path.write_text("".join(f"{i},psql {i},DE\n" for i in range(1, 151)))
    try:
        env = dict(os.environ, PGCONNECT_TIMEOUT="10")
        out = subprocess.run(
            [psql, "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(twin.neki.port),
             "-U", "postgres", "-d", twin.db, "-c",
             f"\\copy customers FROM '{path}' WITH (FORMAT csv)"],
            capture_output=True, text=True, timeout=60, env=env)
    finally:
        path.unlink()
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "COPY 150"
    assert twin.run("SELECT count(*) FROM customers") == [(150,)]
    assert sorted(sum((r for r in twin.per_shard("SELECT id FROM customers").values()),
                      [])) == [(i,) for i in range(1, 151)]
    for server in twin.cluster.shards:
        got = {r[0] for r in twin.shard_rows(server, "SELECT id FROM customers")}
        want = {r[0] for r in twin.shard_rows(server, "SELECT id FROM customers_ins")}
        assert got == want & set(range(1, 151))


def test_copy_from_in_a_transaction(twin):
    with twin.connect(autocommit=False) as conn:
        conn.execute("INSERT INTO customers VALUES (1000, 'before', NULL)")
        twin.copy_in("COPY customers FROM STDIN", text_rows(CUST[:40]), conn=conn)
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (41,)
        conn.rollback()
    assert twin.run("SELECT count(*) FROM customers") == [(0,)]
    with twin.connect(autocommit=False) as conn:
        twin.copy_in("COPY customers FROM STDIN", text_rows(CUST[:40]), conn=conn)
        conn.commit()
    assert twin.run("SELECT count(*) FROM customers") == [(40,)]


def test_copy_from_reference_and_unsharded(store):
    store.truncate("countries", "notes")
    data = b"FR\tFrance\nDE\tGermany\nIT\tItaly\n"
    assert store.copy_in("COPY countries FROM STDIN", [data[:9], data[9:]]) == "COPY 3"
    for server in store.cluster.shards:
        assert sorted(store.shard_rows(server, "SELECT code FROM countries")) == \
            [("DE",), ("FR",), ("IT",)]
    assert store.copy_in("COPY notes FROM STDIN (FORMAT csv)", b"1,a\n2,b\n") == "COPY 2"
    assert store.cluster.sql("auth", "SELECT count(*) FROM notes", dbname=store.db) == [(2,)]
    # a failing copy leaves every copy as it was
    with pytest.raises(psycopg.Error) as ei:
        store.copy_in("COPY countries FROM STDIN", b"ES\tSpain\nFR\tdup\n")
    assert ei.value.diag.sqlstate == "23505"
    for server in store.cluster.shards:
        assert store.shard_rows(server, "SELECT count(*) FROM countries") == [(3,)]


# ---- bad rows ---------------------------------------------------------------------------

def test_bad_row_aborts_every_shard(twin):
    rows = text_rows(CUST[:120]) + b"121\tok\tFR\nxyz\tbad key\tFR\n" + text_rows(CUST[130:])
    with pytest.raises(psycopg.Error) as ei:
        twin.copy_in("COPY customers FROM STDIN", rows)
    e = ei.value.diag
    assert e.sqlstate == "22P02"
    assert e.message_primary == 'invalid input syntax for type bigint: "xyz"'
    assert e.context == 'COPY customers, line 122, column id: "xyz"'
    for server in twin.cluster.shards:
        assert twin.shard_rows(server, "SELECT count(*) FROM customers") == [(0,)]
    # NULL and missing keys
    with pytest.raises(psycopg.Error) as ei:
        twin.copy_in("COPY customers FROM STDIN", b"1\ta\tFR\n\\N\tb\tFR\n")
    assert ei.value.diag.sqlstate == "23502"
    assert ei.value.diag.message_primary == \
        'null value in column "id" of relation "customers" violates not-null constraint'
    assert ei.value.diag.context == 'COPY customers, line 2: "\\N\tb\tFR"'
    with pytest.raises(psycopg.Error) as ei:
        twin.copy_in("COPY customers (name, id) FROM STDIN", b"a\t1\nb\n")
    assert ei.value.diag.sqlstate == "22P04"
    assert twin.run("SELECT count(*) FROM customers") == [(0,)]
    # the connection goes on
    with twin.connect() as conn:
        twin.copy_in("COPY customers FROM STDIN", text_rows(CUST[:3]), conn=conn)
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (3,)


def test_shard_rejecting_a_row_aborts_every_shard(twin):
    # row 150 duplicates row 3's key: the shard holding it fails the COPY, the others abort
    rows = CUST[:149] + [(3, "dup", "FR")] + CUST[150:]
    with pytest.raises(psycopg.Error) as ei:
        twin.copy_in("COPY customers FROM STDIN", text_rows(rows))
    e = ei.value.diag
    assert e.sqlstate == "23505"
    assert e.context is not None and e.context.startswith("COPY customers, line 150"), e.context
    assert "Raised on shard" in (e.message_detail or "")
    for server in twin.cluster.shards:
        assert twin.shard_rows(server, "SELECT count(*) FROM customers") == [(0,)]
    # inside a transaction block: the transaction is aborted
    with twin.connect(autocommit=False) as conn:
        with pytest.raises(psycopg.Error):
            twin.copy_in("COPY customers FROM STDIN", text_rows(rows), conn=conn)
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.rollback()
    assert twin.run("SELECT count(*) FROM customers") == [(0,)]


def test_client_copy_fail_aborts(twin):
    with twin.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            with conn.cursor() as cur:
                with cur.copy("COPY customers FROM STDIN") as cp:
                    cp.write(text_rows(CUST[:50]))
                    raise RuntimeError("stop")
        assert "stop" in str(ei.value) or isinstance(ei.value, psycopg.errors.QueryCanceled)
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (0,)


def test_shard_lost_mid_copy_aborts_every_shard(twin):
    victim = twin.cluster.shards[0]
    with twin.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            with conn.cursor() as cur:
                with cur.copy("COPY customers FROM STDIN") as cp:
                    cp.write(text_rows(CUST[:100]))

                    def copying():
                        return twin.shard_rows(victim, "SELECT count(*) FROM pg_stat_activity "
                                                       "WHERE query LIKE 'COPY customers%'")[0][0]
                    wait_until(lambda: copying() == 1, 10, what="the shard's COPY")
                    twin.shard_rows(victim, "SELECT pg_terminate_backend(pid) FROM "
                                            "pg_stat_activity WHERE query LIKE 'COPY customers%'")
                    wait_until(lambda: copying() == 0, 10, what="the backend's end")
                    cp.write(text_rows(CUST[100:]))
        assert ei.value.diag.sqlstate in ("57P01", "08006"), str(ei.value)
        assert victim in (ei.value.diag.message_detail or "") + str(ei.value)
        # the session goes on: a new link to that shard
        twin.copy_in("COPY customers FROM STDIN", text_rows(CUST[:20]), conn=conn)
        assert conn.execute("SELECT count(*) FROM customers").fetchone() == (20,)
    for server in twin.cluster.shards:
        ids = [r[0] for r in twin.shard_rows(server, "SELECT id FROM customers")]
        assert all(i <= 20 for i in ids), server


# ---- rejections --------------------------------------------------------------------------

def test_copy_rejections(store):
    nk_error(store, "COPY customers FROM '/tmp/neki-none.csv'", 41)
    nk_error(store, "COPY customers TO '/tmp/neki-none.csv'", 41)
    nk_error(store, "COPY countries FROM '/tmp/neki-none.csv'", 43)
    nk_error(store, "COPY pairs FROM STDIN", 45)
    nk_error(store, "COPY currencies (code) FROM STDIN", 46)
    nk_error(store, "COPY customers TO PROGRAM 'cat'", 47)
    nk_error(store, "COPY (SELECT * FROM customers) TO STDOUT", 49)
    nk_error(store, "COPY customers FROM STDIN WHERE id > 1", 50)
    nk_error(store, "COPY tickets (customer_id, body) FROM STDIN", 51)
    nk_error(store, "COPY customers FROM STDIN (ON_ERROR ignore)", 52)
    nk_error(store, "COPY customers FROM STDIN (ENCODING 'LATIN1')", 53)
    nk_error(store, "SELECT 1; COPY customers FROM STDIN", 54)
    nk_error(store, "COPY country_mv FROM STDIN", 56)
    with store.connect() as conn:
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("COPY customers TO STDOUT", prepare=True)
        assert ei.value.diag.message_primary == NK.format(55, SENTENCES[55])
    # a shard's CONTEXT reaches the client, a syntax error's cursor position is no CONTEXT
    with pytest.raises(psycopg.errors.SyntaxError) as ei:
        store.run("SELECT FROM FROM customers")
    assert ei.value.diag.context is None
    # the key missing from the column list
    with pytest.raises(psycopg.Error) as ei:
        store.copy_in("COPY customers (name) FROM STDIN", b"")
    assert ei.value.diag.sqlstate == "NK306"
    assert ei.value.diag.message_primary == ('shard-key column "id" of primary index 0 is '
                                             'required but missing from COPY')


# ---- COPY TO -----------------------------------------------------------------------------

def multiset_lines(data, header=False):
    lines = data.split(b"\n")
    head = lines[:1] if header else []
    return head, sorted(lines[1:] if header else lines)


def binary_tuples(data):
    assert data[:11] == b"PGCOPY\n\xff\r\n\x00"
    ext = struct.unpack("!i", data[15:19])[0]
    pos, rows = 19 + ext, []
    while True:
        (n,) = struct.unpack("!h", data[pos:pos + 2])
        if n == -1:
            assert pos + 2 == len(data)
            return sorted(rows)
        start = pos
        pos += 2
        for _ in range(n):
            (ln,) = struct.unpack("!i", data[pos:pos + 4])
            pos += 4 + max(ln, 0)
        rows.append(data[start:pos])


def test_copy_to_matches_reference(store):
    store.truncate("kinds")
    with store.ref() as conn:
        conn.execute("TRUNCATE kinds")
    rows = "".join(
        f"{i}\t{'t' if i % 2 else 'f'}\t2024-01-{i % 28 + 1:02d}\t2024-03-01 10:00:{i % 60:02d}+00"
        f"\t{i}.25\t{i / 3}\tx{i}\\ty\t{{{i},{i + 1}}}\t{{\"k\": {i}}}\t\\\\x{i:04x}\n"
        for i in range(1, 301)).encode()
    assert store.copy_in("COPY kinds FROM STDIN", rows) == "COPY 300"
    with store.ref() as conn:
        with conn.cursor() as cur:
            with cur.copy("COPY kinds FROM STDIN") as cp:
                cp.write(rows)
    for opts, header in (("", False), ("(FORMAT csv)", False), ("(FORMAT csv, HEADER)", True),
                         ("(FORMAT text, HEADER)", True), ("(FORMAT csv, DELIMITER '|')", False)):
        got, tag = store.copy_out(f"COPY kinds TO STDOUT {opts}")
        want, rtag = store.copy_out(f"COPY kinds TO STDOUT {opts}", ref=True)
        assert tag == rtag == "COPY 300"
        assert multiset_lines(got, header) == multiset_lines(want, header), opts
    got, tag = store.copy_out("COPY kinds TO STDOUT (FORMAT binary)")
    want, _ = store.copy_out("COPY kinds TO STDOUT (FORMAT binary)", ref=True)
    assert tag == "COPY 300"
    assert binary_tuples(got) == binary_tuples(want)
    got, _ = store.copy_out("COPY kinds (customer_id, t) TO STDOUT (FORMAT csv, HEADER)")
    assert got.split(b"\n")[0] == b"customer_id,t" and got.count(b"customer_id") == 1


def test_copy_to_empty_shards_and_reference(store):
    store.truncate("kinds", "countries")
    with store.ref() as conn:
        conn.execute("TRUNCATE kinds")
    for opts in ("(FORMAT binary)", "(FORMAT csv, HEADER)", ""):
        got, tag = store.copy_out(f"COPY kinds TO STDOUT {opts}")
        want, _ = store.copy_out(f"COPY kinds TO STDOUT {opts}", ref=True)
        assert tag == "COPY 0" and got == want, opts
    store.copy_in("COPY countries FROM STDIN", b"FR\tFrance\n")
    got, tag = store.copy_out("COPY countries TO STDOUT")
    assert (got, tag) == (b"FR\tFrance\n", "COPY 1")


# ---- volume and memory -------------------------------------------------------------------

def rss_kb(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def stream_rows(n, start=0):
    batch = 20000
    for i in range(start, start + n, batch):
        yield "".join(f"{k}\t{k % 97}\tpayload number {k}\n"
                      for k in range(i, min(i + batch, start + n))).encode()


def test_copy_large_input_memory_stays_flat(store):
    store.truncate("events")
    pids = store.neki.children()
    # warm up (pools, buffers), then a small and a large COPY: RSS must not follow the size
    assert store.copy_in("COPY events FROM STDIN", list(stream_rows(50000))) == "COPY 50000"
    before = {p: rss_kb(p) for p in pids}
    t0 = time.monotonic()
    assert store.copy_in("COPY events FROM STDIN",
                         stream_rows(1000000, 50000)) == "COPY 1000000"
    elapsed = time.monotonic() - t0
    after = {p: rss_kb(p) for p in pids}
    growth = max(after[p] - before[p] for p in pids)
    if "asan" not in str(store.neki.binary if hasattr(store.neki, "binary") else
                         os.environ.get("NEKI_BIN", "")):
        assert growth < 50 * 1024, (before, after)      # (ASan's quarantine holds frees)
    counts = store.per_shard("SELECT count(*) FROM events")
    assert sum(c[0][0] for c in counts.values()) == 1050000
    assert all(c[0][0] > 150000 for c in counts.values()), counts
    print(f"1,000,000 rows in {elapsed:.1f} s, worker RSS growth {growth} kB")
