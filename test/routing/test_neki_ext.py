"""
The __neki functions over the extended query protocol on a sharded database (issue 23):
psycopg with bound parameters and pgjdbc PreparedStatements get the same rows as the simple
protocol; errors of the call (a bad argument, a refused shape) come back as statement errors
and the session goes on. Real Postgres shards, real drivers.
"""
import subprocess
from pathlib import Path
import shutil

import pytest

from test_routing import psycopg, routing_neki, sharded_database, topology, Store

JAR = "/usr/share/java/postgresql.jar"
CLIENTS = Path(__file__).resolve().parent.parent / "clients"


@pytest.fixture(scope="module")
def st(pg_cluster):
    with sharded_database(pg_cluster, "nekiext") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"ignore_startup_parameters": "extra_float_digits"}) as s:
        yield s


def test_psycopg_bound_parameters(st):
    with st.connect(autocommit=True) as conn:
        rev = conn.execute("SELECT * FROM __neki.get_data_topology_revision()").fetchall()
        assert rev[0][0] >= 1
        got = conn.execute("SELECT * FROM __neki.wait_for_data_topology(%s, %s)",
                           (rev[0][0], "10 seconds")).fetchall()
        assert got == rev
        cur = conn.execute("SELECT * FROM __neki.validate_data_topology(%s)", ("{}",))
        assert [d.name for d in cur.description] == ["path", "rule", "message"]
        assert len(cur.fetchall()) > 0
        # NULL and named notation through parameters
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT * FROM __neki.wait_for_data_topology(revision => %s)",
                         (None,))
        assert ei.value.diag.sqlstate == "22023"
        # the session goes on: routed statements, prepared server-side too
        assert conn.execute("SELECT %s::int + 1", (41,)).fetchall() == [(42,)]
        for _ in range(3):
            assert conn.execute("SELECT * FROM __neki.get_data_topology_revision()",
                                prepare=True).fetchall() == rev


def test_psycopg_binary_results(st):
    """Results asked in binary: integers, booleans, floats and text converted; a timestamptz
    column is a clear 0A000."""
    with st.connect(autocommit=True) as conn:
        rev = st.run("SELECT * FROM __neki.get_data_topology_revision()")[0][0]
        cur = conn.cursor(binary=True)
        assert cur.execute("SELECT * FROM __neki.wait_for_data_topology(%s)",
                           (rev,)).fetchall() == [(rev,)]
        rows = cur.execute("SELECT * FROM __neki.list_shards()").fetchall()
        assert rows == st.run("SELECT * FROM __neki.list_shards()")
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("SELECT * FROM __neki.list_topology_revisions()")
        assert ei.value.diag.sqlstate == "0A000"
        assert "binary format" in str(ei.value)
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


def test_psycopg_refused_shapes(st):
    with st.connect(autocommit=True) as conn:
        with pytest.raises(psycopg.Error) as ei:     # a binary interval
            conn.execute("SELECT * FROM __neki.wait_for_data_topology(1, %b)",
                         (__import__("datetime").timedelta(seconds=1),))
        assert ei.value.diag.sqlstate == "0A000"
        assert "text format" in str(ei.value)
        with pytest.raises(psycopg.Error) as ei:     # a second statement in the batch
            with conn.pipeline():
                conn.execute("SELECT * FROM __neki.get_data_topology_revision()")
                conn.execute("SELECT 1")
        assert ei.value.diag.sqlstate == "0A000"
        assert conn.execute("SELECT 1").fetchall() == [(1,)]


@pytest.mark.skipif(shutil.which("java") is None or not Path(JAR).exists(),
                    reason="java and pgjdbc (libpostgresql-jdbc-java) are needed")
@pytest.mark.parametrize("threshold", [5, 1])
def test_pgjdbc_prepared_statements(st, threshold):
    """pgjdbc's default (unnamed statements for the first executions) and prepareThreshold=1
    (a named server-side statement, bound again by later executions)."""
    url = (f"jdbc:postgresql://127.0.0.1:{st.neki.port}/{st.db}?user=postgres"
           f"&sslmode=disable&prepareThreshold={threshold}")
    res = subprocess.run(["java", "-cp", JAR, str(CLIENTS / "jdbc" / "NekiCalls.java"), url],
                         capture_output=True, text=True, timeout=170)
    assert res.returncode == 0, res.stderr[-3000:]
    rev = st.run("SELECT * FROM __neki.get_data_topology_revision()")[0][0]
    n = st.run("SELECT count(*) FROM __neki.list_shards() WHERE uid <> 'x'")[0][0]
    assert res.stdout.split() == [f"revision={rev}"] + [f"wait={rev}"] * 3 + \
        ["metafuncs=true", "describe=wait_for_data_topology:int8:int8:interval",
         f"composed={n}"], res.stdout + res.stderr[-2000:]


def test_composition_over_the_extended_protocol(st):
    """A __neki call inside a larger statement over the extended protocol (bound parameters
    elsewhere in the statement, prepared or not, named): composed as in a simple Query, the
    same rows; parameters inside the call are a clear 0A000; the session goes on."""
    sql = "SELECT count(*) FROM __neki.list_shards() WHERE uid <> %s"
    want = st.run(sql, ("x",))		# (the simple protocol composes it)
    assert want[0][0] >= 1
    with st.connect(autocommit=True) as conn:
        for _ in range(2):
            for prepare in (False, True):
                assert conn.execute(sql, ("x",), prepare=prepare).fetchall() == want
                assert conn.execute(sql.replace("%s", "'x'"), prepare=prepare).fetchall() \
                    == want
        rows = conn.execute("SELECT uid, port FROM __neki.list_shards() WHERE port > %s "
                            "ORDER BY uid DESC LIMIT %s", (0, 2)).fetchall()
        assert rows == st.run("SELECT uid, port FROM __neki.list_shards() WHERE port > 0 "
                              "ORDER BY uid DESC LIMIT 2")
        cur = conn.cursor(binary=True)
        assert cur.execute(sql, ("x",)).fetchall() == want
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT * FROM __neki.wait_for_data_topology(%s) WHERE true", (1,))
        assert ei.value.diag.sqlstate == "0A000"
        assert "cannot be parameters" in str(ei.value)
        with pytest.raises(psycopg.Error) as ei:	# the call's own error
            conn.execute("SELECT count(*) FROM __neki.validate_data_topology(NULL) "
                         "WHERE path <> %s", ("x",))
        assert ei.value.diag.sqlstate == "22004"
        assert conn.execute("SELECT 1").fetchall() == [(1,)]
        with conn.transaction():
            assert conn.execute(sql, ("x",)).fetchall() == want
            assert conn.execute("SELECT %s::int", (5,)).fetchall() == [(5,)]
    # described before it runs (no shard has the function): a clear 0A000; with its
    # Execute, and with a row limit, it runs
    pw, w = _wire(st)
    text = "SELECT uid FROM __neki.list_shards() WHERE uid <> $1 ORDER BY uid"
    for msgs in (pw.parse("", text) + pw.describe("S") + pw.sync(),
                 pw.parse("", text) + pw.bind("", "", ["x"]) + pw.describe("P") + pw.sync()):
        w.raw(msgs)
        got = w.read_until("Z")
        errs = [pw.error_fields(b) for t, b in got if t == "E"]
        assert [e["C"] for e in errs] == ["0A000"], got
        assert "cannot be described before it runs" in errs[0]["M"]
    uids = [r[0] for r in st.run("SELECT uid FROM __neki.list_shards() ORDER BY uid")]
    w.raw(pw.parse("", text) + pw.bind("", "", ["x"]) + pw.describe("P") + pw.execute("", 1) +
          pw.sync())
    assert pw.summary(w.read_until("Z")) == [("1",), ("2",), ("T",), ("D", [uids[0]]), ("s",),
                                             ("Z", "I")]
    # SQL PREPARE / EXECUTE of such a statement composes it at the EXECUTE
    assert pw.summary(w.query("PREPARE c1(text) AS SELECT count(*) FROM __neki.list_shards() "
                              "WHERE uid <> $1"))[0] == ("C", "PREPARE")
    assert pw.summary(w.query("EXECUTE c1('x')"))[1] == ("D", [str(want[0][0])])
    w.close()


# ---- Describe of a __neki call (drivers that describe before they execute) -------------

def _wire(st):
    import sys
    sys.path.insert(0, str(CLIENTS))
    import pgwire
    w = pgwire.Wire(st.neki.port)
    w.login(database=st.db)
    return pgwire, w


def _columns(body):
    """A RowDescription body as [(name, type oid, typlen, format)]."""
    import struct
    (n,), pos, out = struct.unpack("!H", body[:2]), 2, []
    for _ in range(n):
        end = body.index(b"\0", pos)
        _, _, oid, typlen, _, fmt = struct.unpack("!IHIhih", body[end + 1:end + 19])
        out.append((body[pos:end].decode(), oid, typlen, fmt))
        pos = end + 19
    return out


def _params(body):
    import struct
    (n,) = struct.unpack("!H", body[:2])
    return list(struct.unpack(f"!{n}I", body[2:2 + 4 * n]))


DESCRIBED = ["SELECT * FROM __neki.get_data_topology()",
             "SELECT * FROM __neki.get_data_topology_revision()",
             "SELECT * FROM __neki.wait_for_data_topology(1)",
             "SELECT * FROM __neki.wait_for_ddl(0, 0)",
             "SELECT * FROM __neki.validate_data_topology('{}')",
             "SELECT * FROM __neki.list_shards()",
             "SELECT uid, port FROM __neki.list_shards()",
             "SELECT __neki.list_shards()",
             "SELECT * FROM __neki.list_topology_revisions()",
             "SELECT * FROM __neki.notification_queue_usage()",
             "SELECT * FROM __neki.check_schema()",
             "SELECT * FROM __neki.stat_get_activity()",
             "SELECT * FROM __neki.list_metafuncs()"]


def test_describe_statement_matches_the_calls_columns(st):
    """Describe of a __neki statement gives the RowDescription the call itself returns (the
    simple-protocol Query of the same text, answered by the admin), without running it."""
    pw, w = _wire(st)
    for sql in DESCRIBED:
        real = [b for t, b in w.query(sql) if t == "T"]
        assert len(real) == 1, sql
        w.raw(pw.parse("d1", sql) + pw.describe("S", "d1") + pw.close("S", "d1") + pw.sync())
        got = w.read_until("Z")
        assert [t for t, _ in got] == ["1", "t", "T", "3", "Z"], (sql, got)
        assert _params(got[1][1]) == []
        assert _columns(got[2][1]) == _columns(real[0]), sql
    w.close()


def test_every_function_is_described(st):
    """Each function list_metafuncs names has a description (a new one without would answer
    NoData); delete_shard alone returns no rows."""
    pw, w = _wire(st)
    names = [r[0] for r in st.run("SELECT name FROM __neki.list_metafuncs()")]
    assert len(names) >= 14
    for name in names:
        w.raw(pw.parse("", f"SELECT * FROM __neki.{name}()") + pw.describe("S") + pw.sync())
        got = [t for t, _ in w.read_until("Z")]
        assert got == ["1", "t", "n" if name == "delete_shard" else "T", "Z"], (name, got)
    w.close()


def test_describe_parameters_and_portal(st):
    pw, w = _wire(st)
    rev = st.run("SELECT * FROM __neki.get_data_topology_revision()")[0][0]
    cases = [("SELECT * FROM __neki.wait_for_data_topology($1, $2)", (), [20, 1186]),
             ("SELECT * FROM __neki.wait_for_ddl(timeout => $1, schema_version => $2)", (),
              [1186, 20]),
             ("SELECT * FROM __neki.wait_for_data_topology($1)", (25,), [25]),	# declared
             ("SELECT * FROM __neki.set_data_topology($1, $2)", (), [25, 16])]
    for sql, oids, want in cases:
        w.raw(pw.parse("", sql, oids) + pw.describe("S") + pw.sync())
        got = w.read_until("Z")
        assert [t for t, _ in got] == ["1", "t", "T", "Z"], (sql, got)
        assert _params(got[1][1]) == want, sql
    # delete_shard returns no rows: NoData
    w.raw(pw.parse("", "SELECT * FROM __neki.delete_shard($1)") + pw.describe("S") + pw.sync())
    assert [t for t, _ in w.read_until("Z")] == ["1", "t", "n", "Z"]
    # the portal, not executed: its columns in the Bind's formats (one code for all)
    sql = "SELECT * FROM __neki.wait_for_data_topology($1)"
    w.raw(pw.parse("", sql) + pw.bind("", "", [str(rev)], result_formats=(1,)) +
          pw.describe("P") + pw.sync())
    got = w.read_until("Z")
    assert [t for t, _ in got] == ["1", "2", "T", "Z"], got
    assert _columns(got[2][1]) == [("wait_for_data_topology", 20, 8, 1)]
    # described, then executed: one RowDescription, then the rows
    w.raw(pw.parse("", sql) + pw.describe("S") + pw.bind("", "", [str(rev)]) +
          pw.describe("P") + pw.execute() + pw.sync())
    got = w.read_until("Z")
    assert [t for t, _ in got] == ["1", "t", "T", "2", "T", "D", "C", "Z"], got
    assert pw.summary(got)[5] == ("D", [str(rev)])
    # after a message the router answers (pgjdbc closes its last statement first): the
    # replies are not held behind the router's
    w.raw(pw.close("S", "S_9") + pw.parse("", sql) + pw.describe("S") + pw.sync())
    assert [t for t, _ in w.read_until("Z")] == ["3", "1", "t", "T", "Z"]
    # an unknown column is the call's error, and the session goes on
    w.raw(pw.parse("", "SELECT nope FROM __neki.list_shards()") + pw.describe("S") + pw.sync())
    got = w.read_until("Z")
    assert pw.summary(got)[-2:] == [("E", "42703"), ("Z", "I")], got
    assert pw.summary(w.query("SELECT 1"))[-3:] == [("D", ["1"]), ("C", "SELECT 1"), ("Z", "I")]
    w.close()


def test_libpq_describe_prepared(st):
    """libpq's PQdescribePrepared (what drivers that describe first use) on a __neki call."""
    with st.connect(autocommit=True) as conn:
        pg = conn.pgconn
        pg.prepare(b"nx", b"SELECT * FROM __neki.wait_for_data_topology($1, $2)")
        res = pg.describe_prepared(b"nx")
        assert res.status == psycopg.pq.ExecStatus.COMMAND_OK, res.error_message
        assert [res.param_type(i) for i in range(res.nparams)] == [20, 1186]
        assert [(res.fname(0), res.ftype(0))] == [(b"wait_for_data_topology", 20)]
        rev = st.run("SELECT * FROM __neki.get_data_topology_revision()")[0][0]
        res = pg.exec_prepared(b"nx", [str(rev).encode(), b"5 seconds"])
        assert res.get_value(0, 0) == str(rev).encode()
