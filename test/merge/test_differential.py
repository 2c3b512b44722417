"""
The differential suite: the queries of differential.txt (templates expanded into 300+ queries)
run through neki in front of the 4 data shards of the harness cluster and on the reference
server holding the same rows. Results must be equal value for value (raw bytes: numeric scale,
float digits, binary encodings), with the same columns (name, type, typmod, format) and the
same CommandComplete tag, in three ways: the simple query protocol (text), the extended
protocol with text results and with binary results. Rows are compared in order where the
query orders them (for ties only the sequence of the sort keys, and the multiset of rows),
as multisets otherwise. Shapes neki cannot merge exactly must be refused (NK013 / 0A000).
"""
import json
import os
import random
import re
import shutil
import struct
from pathlib import Path

import pytest

try:
    import psycopg
    from psycopg import pq
except ImportError:
    psycopg = None

from conftest import Neki, wait_until

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "differential.txt"

SCHEMA = [
    "CREATE TABLE t (id int PRIMARY KEY, g int, x int, n numeric(12,3), f float8, s text, "
    "flag bool, d date, ts timestamp, big int8, c4 char(4), vc varchar(10))",
    "CREATE TABLE o (LIKE t)",
    "CREATE TABLE e (LIKE t)",
    "CREATE TABLE u (t_id int NOT NULL, k int NOT NULL, v int, w text, PRIMARY KEY (t_id, k))",
    "CREATE TABLE r (g int PRIMARY KEY, label text)",
    "CREATE TABLE big (id int PRIMARY KEY, v int)",
    "CREATE TABLE st (id int PRIMARY KEY, g int, v numeric)",
]
BIG_ROWS = 100_000


def expand(template):
    """Every combination of the template's {name=a|b} alternatives ({name} repeats one)."""
    m = re.search(r"\{(\w+)=([^{}]*)\}", template)
    if not m:
        return [template]
    name, alts = m.group(1), m.group(2).split("|")
    out = []
    for alt in alts:
        filled = template[:m.start()] + alt + template[m.end():]
        out += expand(filled.replace("{" + name + "}", alt))
    return out


def load_queries():
    queries = []
    for line in TEMPLATES.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        kind, _, template = line.partition(" | ")
        for sql in expand(template.strip()):
            queries.append((kind.strip(), " ".join(sql.split())))
    return queries


QUERIES = load_queries()


def topology(db, shards):
    bounds = [None, "40", "80", "c0", None]
    ranges = []
    for i, uid in enumerate(shards[:4]):
        rng = {"shard_uid": uid}
        if bounds[i]:
            rng["start"] = bounds[i]
        if bounds[i + 1]:
            rng["end"] = bounds[i + 1]
        ranges.append(rng)
    tables = {name: {"shard_group": "g", "shard_index": "by_id"}
              for name in ("t", "o", "e", "big", "st")}
    tables["u"] = {"shard_group": "g", "shard_index": "by_tid"}
    return {
        "databases": {db: {"schemas": {"public": {
            "tables": tables,
            "reference_tables": {"r": {"shard_groups": ["g"]}},
        }}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "g", "default_shard_index": "by_id", "key_ranges": ranges},
        ],
        "shard_indexes": {"by_id": {"type": "xxhash", "columns": ["id"]},
                          "by_tid": {"type": "xxhash", "columns": ["t_id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


def sql_lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return "'" + str(v).replace("'", "''") + "'"


def rows_for_t(n=240, seed=11):
    rnd = random.Random(seed)
    words = ["apple", "Apple", "banana", "éclair", "zeta", "Zeta", "a b", "a-b", "", "ab",
             "ß", "Ärger", "under_score", "10", "9"]
    floats = ["0.25", "-0.5", "NaN", "Infinity", "-Infinity", "-0", "1e300", "2.5e-10",
              "123.125", "7"]
    rows = []
    for i in range(1, n + 1):
        rows.append((
            i, rnd.randint(0, 7), None if i % 11 == 0 else rnd.randint(-50, 50),
            None if i % 13 == 0 else f"{rnd.randint(-99999, 99999) / 1000:.3f}",
            None if i % 17 == 0 else rnd.choice(floats),
            None if i % 9 == 0 else rnd.choice(words) + ("" if i % 3 else str(i % 5)),
            None if i % 14 == 0 else rnd.random() < 0.6,
            None if i % 15 == 0 else
            f"{rnd.choice([1999, 2000, 2024])}-0{rnd.randint(1, 9)}-1{rnd.randint(0, 9)}",
            None if i % 16 == 0 else
            f"2024-03-{rnd.randint(10, 28)} {rnd.randint(0, 23)}:{rnd.randint(10, 59)}:"
            f"0{rnd.randint(0, 9)}.{rnd.randint(0, 999999):06d}",
            rnd.choice([-(2 ** 62), 2 ** 62, 0, 1, -1, rnd.randint(-10 ** 12, 10 ** 12)]),
            rnd.choice(["x", "x  ", "y", None]),
            rnd.choice(["a", "B", "c", None]),
        ))
    return rows


def inserts(table, rows, chunk=2000):
    for i in range(0, len(rows), chunk):
        yield f"INSERT INTO {table} VALUES " + ", ".join(
            "(" + ", ".join(sql_lit(v) for v in row) + ")" for row in rows[i:i + chunk])


def data_statements():
    t = rows_for_t()
    o = rows_for_t(5, seed=3)
    u = [(i, k, (i * k) % 11 - 2, f"w{(i + k) % 6}") for i in range(1, 241, 3)
         for k in range(1, 1 + i % 4)]
    r = [(g, ["zero", "one", "two", "three", "four", "five", "six", "seven"][g])
         for g in range(0, 8) if g != 6]
    for table, rows in (("t", t), ("o", o), ("u", u), ("r", r), ("st", rows_for_st())):
        yield from inserts(table, rows)


def rows_for_st(groups=3000, seed=5):
    """Small groups of numeric values of one scale (0-4 digits) and magnitude each: many
    stddev results whose square root lies near half a unit of the last digit."""
    rnd, rows = random.Random(seed), []
    for g in range(groups):
        scale = rnd.randint(0, 4)
        mag = rnd.choice([1, 10, 1000, 10 ** 6, 10 ** 12])
        for _ in range(rnd.randint(1, 6)):
            rows.append((len(rows) + 1, g, f"{rnd.uniform(-mag, mag):.{scale}f}"))
    return rows


BIG_REF = (f"INSERT INTO big SELECT i, (i * 7919) % 1000 FROM generate_series(1, {BIG_ROWS}) i")


def big_copy(conn):
    """big's rows through neki (COPY FROM routes each by its key), as BIG_REF makes them."""
    data = "".join(f"{i}\t{(i * 7919) % 1000}\n" for i in range(1, BIG_ROWS + 1))
    with conn.cursor().copy("COPY big FROM STDIN") as cp:
        cp.write(data)


@pytest.fixture(scope="module")
def diff(pg_cluster):
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    db = f"diff_{os.getpid()}"
    for server in pg_cluster.servers:
        pg_cluster.sql(server, f'CREATE DATABASE "{db}"')
    auth = f"auth = host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"
    inst = Neki(settings={"workers": 1, "admin_users": "postgres", "pool_mode": "transaction",
                          "ignore_startup_parameters": "extra_float_digits"},
                databases={db: f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db} "
                               "topology=yes"},
                shards=pg_cluster.shards_section(dbname=db) + "\n" + auth)
    try:
        inst.start()
        with inst.admin_connect() as conn:
            doc = json.dumps(topology(db, pg_cluster.shards)).replace("'", "''")
            conn.execute(f"SELECT * FROM __neki.set_data_topology('{doc}', true)")

        def routed():
            # EXPLAIN (NEKI_PLAN) is the router's: a pass-through session (before the
            # topology is switched to) takes SET __neki.x as a Postgres placeholder variable
            try:
                with inst.connect(dbname=db) as conn:
                    conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
                    return True
            except psycopg.Error:
                return False
        wait_until(routed, 30, what="neki routes the database")
        with inst.connect(dbname=db) as conn, \
                pg_cluster.connect("reference", dbname=db) as ref:
            for sql in SCHEMA:
                psycopg.ClientCursor(conn).execute(sql)
                ref.execute(sql)
            for sql in data_statements():
                psycopg.ClientCursor(conn).execute(sql)
                ref.execute(sql)
            big_copy(conn)
            ref.execute(BIG_REF)
        neki = inst.connect(dbname=db)
        ref = pg_cluster.connect("reference", dbname=db)
        try:
            yield neki, ref, inst, db
        finally:
            neki.close()
            ref.close()
    finally:
        problems = inst.cleanup()
        for server in pg_cluster.servers:
            try:
                pg_cluster.sql(server, f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
            except Exception:
                pass
        assert not problems, "\n".join(problems)


MODES = ("simple", "text", "binary")


def raw(conn, sql, mode):
    """(columns, rows, tag) of <sql> with raw values, or ("ERROR", sqlstate, message)."""
    pg = conn.pgconn
    if mode == "simple":
        res = pg.exec_(sql.encode())
    else:
        res = pg.exec_params(sql.encode(), [], result_format=1 if mode == "binary" else 0)
    if res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK):
        state = res.error_field(pq.DiagnosticField.SQLSTATE)
        return ("ERROR", state.decode() if state else None,
                (res.error_message or b"").decode(errors="replace"))
    cols = [(res.fname(i), res.ftype(i), res.fmod(i), res.fformat(i))
            for i in range(res.nfields)]
    rows = [tuple(res.get_value(r, c) for c in range(res.nfields)) for r in range(res.ntuples)]
    return cols, rows, res.command_status


def sets_key(row):
    out = []
    for v in row:
        if v is not None and v[:1] == b"{":
            v = tuple(sorted(v[1:-1].split(b",")))
        elif v is not None and b"," in v:
            v = tuple(sorted(v.split(b",")))
        out.append(v)
    return tuple(out)


def json_split(body):
    """Top-level pieces of a JSON array or object body (the text between its brackets), each
    with the whitespace that follows its comma."""
    pieces, depth, start, i, quoted = [], 0, 0, 0, False
    while i < len(body):
        ch = body[i:i + 1]
        if quoted:
            if ch == b"\\":
                i += 1
            elif ch == b'"':
                quoted = False
        elif ch == b'"':
            quoted = True
        elif ch in (b"[", b"{"):
            depth += 1
        elif ch in (b"]", b"}"):
            depth -= 1
        elif ch == b"," and depth == 0:
            pieces.append(body[start:i])
            start = i + 1
        i += 1
    pieces.append(body[start:])
    return pieces


def elements_key(v, structured):
    """A json_agg / jsonb_agg / json_object_agg / xmlagg value as the multiset of its elements;
    json_agg's separators are checked: ", " and "\n " before a non-null element of an array
    or composite type (<structured>: the reference shows one)."""
    if v is None:
        return None
    if v[:2] in (b"\x01[", b"\x01{"):    # jsonb in binary: version 1, then the text
        v = v[1:]
    if v[:1] == b"<":
        return ("xml", tuple(sorted(re.findall(rb"<e>.*?</e>|<e/>", v))))
    if v[:2] == b"{ ":
        return ("object", tuple(sorted(p.strip() for p in json_split(v[2:-2]))))
    if v[:1] != b"[":
        return v
    pieces = json_split(v[1:-1])
    for p in pieces[1:]:
        want = b" \n " if structured and p.strip() != b"null" else b" "
        assert p.startswith(want) and not p[len(want):].startswith(b" "), v
    return ("array", tuple(sorted(p.strip() for p in pieces)))


def compare(kind, sql, got, want):
    assert got[0] != "ERROR", f"{sql}: neki refused: {got}"
    assert want[0] != "ERROR", f"{sql}: the reference failed: {want}"
    assert got[0] == want[0], f"{sql}: columns {got[0]} != {want[0]}"
    assert got[2] == want[2], f"{sql}: tag {got[2]} != {want[2]}"
    g, w = got[1], want[1]
    if kind == "ordered":
        assert g == w, f"{sql}: first difference at row " + \
            str(next((i for i, (a, b) in enumerate(zip(g, w)) if a != b), min(len(g), len(w))))
    elif kind.startswith("keys="):
        n = int(kind[5:])
        assert [r[:n] for r in g] == [r[:n] for r in w], f"{sql}: sort keys out of order"
        assert sorted(g, key=repr) == sorted(w, key=repr), f"{sql}: rows differ"
    elif kind == "sets":
        assert sorted(map(sets_key, g), key=repr) == sorted(map(sets_key, w), key=repr), sql
    elif kind == "json":
        ncols = len(w[0]) if w else 0
        structured = [any(r[c] is not None and b", \n " in r[c] for r in w) for c in range(ncols)]

        def key(row):
            return tuple(elements_key(v, structured[c]) for c, v in enumerate(row))
        assert sorted(map(key, g), key=repr) == sorted(map(key, w), key=repr), \
            f"{sql}: elements differ"
    else:
        assert sorted(g, key=repr) == sorted(w, key=repr), f"{sql}: rows differ"


def test_templates_give_enough_queries():
    assert len(QUERIES) >= 300, len(QUERIES)
    assert len(set(q for _, q in QUERIES)) == len(QUERIES), "duplicate queries"


@pytest.mark.parametrize("mode", MODES)
def test_results_equal_the_reference(diff, mode):
    """Every query in one test per mode (one connection each way: fast); all mismatches are
    reported together."""
    neki, ref, _, _ = diff
    failures = []
    for kind, sql in QUERIES:
        got = raw(neki, sql, mode)
        if kind == "textonly":
            kind = "refused" if mode == "binary" else "ordered"
        if kind == "refused":
            if got[0] != "ERROR" or got[1] not in ("NK013", "0A000"):
                failures.append(f"{sql}: not refused: {str(got)[:200]}")
            continue
        try:
            compare(kind, sql, got, raw(ref, sql, mode))
        except AssertionError as e:
            failures.append(str(e)[:400])
    assert not failures, f"{len(failures)} of {len(QUERIES)} differ ({mode}):\n" + \
        "\n".join(failures)


STATS = "SELECT g, stddev(v), stddev_pop(v), variance(v), var_pop(v) FROM st GROUP BY g ORDER BY g"
# The same square root rounded twice (sqrt() at its own scale, then at the division's): what
# a combine that is not careful would print.
NAIVE = ("SELECT count(*) FROM (SELECT g, stddev(v) AS s, round(sqrt(variance(v)), "
         "scale(variance(v))) AS naive FROM st GROUP BY g) q WHERE s <> naive")


@pytest.mark.parametrize("mode", MODES)
def test_stddev_and_variance_equal_one_server(diff, mode):
    """3000 groups of numeric values spread over the shards: stddev and variance through neki
    (numeric partials, the final query doing Postgres' arithmetic) equal the reference's byte
    for byte, also where rounding the square root twice would be off by one in the last
    digit (the data has such groups)."""
    neki, ref, _, _ = diff
    assert ref.execute(NAIVE).fetchone()[0] > 5
    compare("ordered", STATS, raw(neki, STATS, mode), raw(ref, STATS, mode))


# Invalid aggregate queries fail with Postgres' own error: the shards check every call (its
# carrier, the expression, HAVING kept as `HAVING (...) OR true`, a hidden column for a
# column that is not a GROUP BY item).
INVALID = [
    "SELECT g, count(*) FROM t GROUP BY g HAVING x > 1",
    "SELECT g, x + count(*) FROM t GROUP BY g",
    "SELECT count(*) FROM t HAVING max(x) > x",
    "SELECT sum(DISTINCT s) FROM t",
    "SELECT avg(DISTINCT flag), count(*) FROM t",
    "SELECT g, string_agg(DISTINCT s, ',' ORDER BY id) FROM t GROUP BY g",
    "SELECT g FROM t GROUP BY g HAVING sum(DISTINCT s) > 0",
    "SELECT stddev(s) FROM t",
    "SELECT bit_and(n) FROM t",
]


def primary(conn, sql, mode):
    pg = conn.pgconn
    res = pg.exec_(sql.encode()) if mode == "simple" else \
        pg.exec_params(sql.encode(), [], result_format=1 if mode == "binary" else 0)
    assert res.status not in (pq.ExecStatus.TUPLES_OK, pq.ExecStatus.COMMAND_OK), sql
    return tuple(res.error_field(f) for f in (pq.DiagnosticField.SQLSTATE,
                                              pq.DiagnosticField.MESSAGE_PRIMARY,
                                              pq.DiagnosticField.MESSAGE_HINT))


@pytest.mark.parametrize("mode", MODES)
def test_invalid_aggregates_fail_as_on_one_server(diff, mode):
    neki, ref, _, _ = diff
    for sql in INVALID:
        assert primary(neki, sql, mode) == primary(ref, sql, mode), sql


PARAM_QUERIES = [
    ("SELECT id, n FROM t WHERE x > %s ORDER BY n DESC NULLS LAST, id LIMIT %s OFFSET %s",
     (0, 5, 2)),
    ("SELECT id, s FROM t ORDER BY s, id LIMIT %s", (12,)),
    ("SELECT g, count(*), sum(x), avg(n), min(s) FROM t WHERE x > %s GROUP BY g ORDER BY g",
     (-20,)),
    ("SELECT g, count(*) FROM t GROUP BY g HAVING count(*) > %s ORDER BY g", (25,)),
    ("SELECT avg(x) + %s FROM t", (1,)),
    ("SELECT DISTINCT flag FROM t WHERE g = %s ORDER BY flag", (3,)),
    ("SELECT g FROM t WHERE x < %s UNION SELECT x FROM o ORDER BY 1 LIMIT %s", (0, 4)),
    ("SELECT t.*, x AS k FROM t ORDER BY 13 DESC NULLS LAST, 1 LIMIT %s", (3,)),
]


@pytest.mark.parametrize("binary", [False, True])
def test_extended_protocol_with_parameters(diff, binary):
    """psycopg server-side binding (Parse/Bind/Describe/Execute): parameters in WHERE,
    LIMIT and OFFSET, text and binary results, named prepared statements; column
    descriptions equal the reference's (no hidden columns)."""
    neki, ref, _, _ = diff
    for sql, params in PARAM_QUERIES:
        for prepare in (False, True):
            got = neki.cursor(binary=binary)
            want = ref.cursor(binary=binary)
            got.execute(sql, params, prepare=prepare)
            want.execute(sql, params, prepare=prepare)
            assert [(d.name, d.type_code) for d in got.description] == \
                [(d.name, d.type_code) for d in want.description], sql
            rows = got.fetchall()
            assert rows == want.fetchall(), sql
            assert got.statusmessage == want.statusmessage, sql


def test_describe_statement_and_portal(diff):
    """Describe of a merged statement and of its portal: the client's columns only."""
    neki, ref, _, _ = diff
    sql = b"SELECT g, avg(n) AS a FROM t GROUP BY g ORDER BY max(x) DESC, g LIMIT $1"
    for conn in (neki, ref):
        conn.pgconn.prepare(b"dstmt", sql)
    got, want = (c.pgconn.describe_prepared(b"dstmt") for c in (neki, ref))
    assert (got.nfields, got.nparams) == (want.nfields, want.nparams) == (2, 1)
    assert [(got.fname(i), got.ftype(i)) for i in range(2)] == \
        [(want.fname(i), want.ftype(i)) for i in range(2)]
    res = neki.pgconn.exec_prepared(b"dstmt", [b"3"], result_format=1)
    assert res.status == pq.ExecStatus.TUPLES_OK, res.error_message
    assert (res.nfields, res.ntuples, res.fformat(0), res.fformat(1)) == (2, 3, 1, 1)
    for conn in (neki, ref):
        conn.pgconn.exec_(b"DEALLOCATE dstmt")


def run_client(args, env=None):
    import subprocess
    res = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


def test_jdbc_merged_selects(diff, pg_cluster):
    jar = "/usr/share/java/postgresql.jar"
    if not os.path.exists(jar) or not shutil.which("java"):
        pytest.skip("java or the PostgreSQL JDBC driver is not installed")
    _, _, inst, db = diff
    src = str(HERE / "clients" / "MergedQueries.java")
    opts = "?user=postgres&prepareThreshold=2&sslmode=disable"
    got = run_client(["java", "-cp", jar, src,
                      f"jdbc:postgresql://127.0.0.1:{inst.port}/{db}{opts}"])
    want = run_client(["java", "-cp", jar, src,
                       f"jdbc:postgresql://127.0.0.1:{pg_cluster.port('reference')}/{db}{opts}"])
    assert got.count("Q") == 21 and got == want


def test_node_postgres_merged_selects(diff, pg_cluster):
    path = next((p for p in (os.environ.get("NEKI_NODE_PATH"), "/tmp/nodepg/node_modules",
                             "/usr/lib/node_modules", "/usr/share/nodejs")
                 if p and os.path.isdir(os.path.join(p, "pg"))), None)
    if path is None or not shutil.which("node"):
        pytest.skip("node-postgres (npm pg) is not installed; set NEKI_NODE_PATH")
    _, _, inst, db = diff
    src = str(HERE / "clients" / "merged_queries.js")
    env = {**os.environ, "NODE_PATH": path}
    got = run_client(["node", src, str(inst.port), db], env)
    want = run_client(["node", src, str(pg_cluster.port("reference")), db], env)
    assert len(got.splitlines()) == 14 and got == want


def rss_kb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def datarow_values(body):
    n, at, out = struct.unpack("!h", body[:2])[0], 2, []
    for _ in range(n):
        ln = struct.unpack("!i", body[at:at + 4])[0]
        out.append(None if ln < 0 else body[at + 4:at + 4 + ln])
        at += 4 + max(ln, 0)
    return out


def read_result(sock):
    """DataRow values up to ReadyForQuery (an ErrorResponse fails)."""
    rows, data = [], b""
    while True:
        chunk = sock.recv(1 << 20)
        assert chunk, "neki closed the connection"
        data += chunk
        pos = 0
        while pos + 5 <= len(data):
            kind, ln = data[pos:pos + 1], struct.unpack("!i", data[pos + 1:pos + 5])[0]
            if pos + 1 + ln > len(data):
                break
            assert kind != b"E", data[pos:pos + 300]
            if kind == b"D":
                rows.append(datarow_values(data[pos + 5:pos + 1 + ln]))
            if kind == b"Z":
                return rows
            pos += 1 + ln
        data = data[pos:]


def test_merged_order_by_memory_is_bounded(diff):
    """A 100k-row merged ORDER BY read by a client that does not read for a while: the shards
    are read together and held (the merge keeps a bounded queue per shard, and stops while
    the client's queue is long), so the workers' memory does not grow with the result; the
    result is complete and ordered once the client reads."""
    import socket
    import time
    _, _, inst, db = diff
    pids = inst.children()
    sock = socket.create_connection(("127.0.0.1", inst.port))
    # (a small window, far below the result; not below loopback's 64 kB segments, where
    # every window waits for a delayed ACK: 45 s to read what takes 0.2 s otherwise)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    sock.settimeout(60)
    try:
        body = b"user\0postgres\0database\0" + db.encode() + b"\0\0"
        sock.sendall(struct.pack("!ii", len(body) + 8, 196608) + body)
        buf = b""
        while not buf.endswith(b"Z\0\0\0\x05I"):
            buf += sock.recv(65536)
        base = {p: rss_kb(p) for p in pids}
        sql = b"SELECT id, v, repeat('x', 40) FROM big ORDER BY v, id\0"
        sock.sendall(b"Q" + struct.pack("!i", len(sql) + 4) + sql)
        grown, deadline = 0, time.monotonic() + 3
        while time.monotonic() < deadline:      # not reading: what does neki keep?
            grown = max(grown, max(rss_kb(p) - base[p] for p in pids))
            time.sleep(0.05)
        rows = read_result(sock)
    finally:
        sock.close()
    keys = [(int(r[1]), int(r[0])) for r in rows]
    assert len(keys) == BIG_ROWS and keys == sorted(keys)
    assert grown < 8 * 1024, f"a worker grew by {grown} kB while the client did not read"
