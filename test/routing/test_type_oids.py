"""
Authoritative OIDs of user-defined types (issue 23): an enum and a composite type created
through neki (DDL on every shard) get a different OID on shards that had other types first;
RowDescription and ParameterDescription carry the authoritative shard's OIDs whichever shard
answers, and Parse's parameter types (the authoritative OIDs a driver learned) reach each
shard as its own. psycopg's register_enum / CompositeInfo, pgjdbc and node-postgres read
rows from every shard and bind parameters of those types. Real Postgres shards.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_routing import psycopg, routing_neki, sharded_database, topology, Store

JAR = "/usr/share/java/postgresql.jar"
CLIENTS = Path(__file__).resolve().parent.parent / "clients"

# types the two first shards get directly, before the DDL through neki: their OIDs move on
PADDING = {"shard-a": ["CREATE TYPE pad_a AS ENUM ('x')"],
           "shard-b": ["CREATE TYPE pad_b AS (x int)", "CREATE TYPE pad_b2 AS ENUM ('y')"]}
SCHEMA = ["CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
          "CREATE TYPE addr AS (street text, zip int)",
          "CREATE TABLE customers (id bigint PRIMARY KEY, name text NOT NULL, m mood, a addr)"]


def type_oid(st, server, name):
    return st.shard_rows(server, f"SELECT '{name}'::regtype::oid::int")[0][0]


@pytest.fixture(scope="module")
def st(pg_cluster):
    with sharded_database(pg_cluster, "typeoids") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"ignore_startup_parameters": "extra_float_digits"}) as s:
        for server, sqls in PADDING.items():
            for sql in sqls:
                pg_cluster.sql(server, sql, dbname=db)
        for sql in SCHEMA:
            s.run(sql)
        s.ids = {}			# one customer per data shard
        for cid in range(1, 200):
            s.ids.setdefault(s.customer_shard(cid), cid)
            if len(s.ids) == len(pg_cluster.shards):
                break
        for cid in s.ids.values():
            s.run(f"INSERT INTO customers VALUES ({cid}, 'c{cid}', 'happy', ('main st', {cid}))")
        yield s


def test_the_shards_oids_differ(st):
    """The premise: the types' OIDs on the padded shards are not the authoritative ones."""
    for name in ("mood", "addr", "_mood"):
        auth = type_oid(st, "auth", name)
        assert type_oid(st, "shard-a", name) != auth
        assert type_oid(st, "shard-b", name) != auth


def test_row_description_carries_the_authoritative_oids(st):
    want = [type_oid(st, "auth", "mood"), type_oid(st, "auth", "addr")]
    with st.connect(autocommit=True) as conn:
        for server, cid in st.ids.items():
            for prepare in (False, True):
                cur = conn.execute("SELECT m, a FROM customers WHERE id = %s", (cid,),
                                   prepare=prepare)
                assert [d.type_code for d in cur.description] == want, server
            cur = conn.execute(f"SELECT m, a FROM customers WHERE id = {cid}")  # simple
            assert [d.type_code for d in cur.description] == want, server
        cur = conn.execute("SELECT id, m FROM customers ORDER BY id")	# merged
        assert [d.type_code for d in cur.description][1] == want[0]


def test_psycopg_register_enum_and_composite(st):
    from psycopg.types.composite import CompositeInfo, register_composite
    from psycopg.types.enum import EnumInfo, register_enum
    with st.connect(autocommit=True) as conn:
        ei = EnumInfo.fetch(conn, "mood")
        assert ei.oid == type_oid(st, "auth", "mood")
        register_enum(ei, conn)
        ci = CompositeInfo.fetch(conn, "addr")
        assert ci.oid == type_oid(st, "auth", "addr")
        register_composite(ci, conn)
        mood, addr = ei.enum, ci.python_type
        for server, cid in st.ids.items():
            for binary in (False, True):
                row = conn.cursor(binary=binary).execute(
                    "SELECT m, a FROM customers WHERE id = %s", (cid,)).fetchone()
                assert row[0] is mood.happy, (server, binary, row)
                if not binary:	# (a binary record names its fields' types: built-in here)
                    assert row[1] == addr("main st", cid), (server, row)
            # parameters of those types, bound with the authoritative OIDs (text and binary)
            for fmt in ("%s", "%b"):
                for prepare in (False, True):	# unnamed, and kept on the shard links
                    got = conn.execute(f"SELECT id FROM customers WHERE id = %s AND m = {fmt}",
                                       (cid, mood.happy), prepare=prepare).fetchall()
                    assert got == [(cid,)], (server, fmt, prepare)
            got = conn.execute("SELECT id FROM customers WHERE id = %s AND a = %s",
                               (cid, addr("main st", cid))).fetchall()
            assert got == [(cid,)], server
            conn.execute("UPDATE customers SET m = %s WHERE id = %s", (mood.sad, cid))
            assert st.shard_rows(server, f"SELECT m::text FROM customers WHERE id = {cid}") \
                == [("sad",)]
            conn.execute("UPDATE customers SET m = %s WHERE id = %s", (mood.happy, cid))
        rows = conn.execute("SELECT id, m FROM customers ORDER BY id").fetchall()
        assert rows == [(cid, mood.happy) for cid in sorted(st.ids.values())]


def test_ddl_refreshes_the_oids(st):
    """A type created after the first load is mapped too (the catalog refresh after DDL)."""
    st.cluster.sql("shard-c", "CREATE TYPE pad_c AS ENUM ('z')", dbname=st.db)
    st.run("CREATE TYPE level AS ENUM ('low', 'high')")
    st.run("ALTER TABLE customers ADD COLUMN lv level")
    auth = type_oid(st, "auth", "level")
    assert type_oid(st, "shard-c", "level") != auth
    with st.connect(autocommit=True) as conn:
        for server, cid in st.ids.items():
            cur = conn.execute("SELECT lv FROM customers WHERE id = %s", (cid,))
            assert cur.description[0].type_code == auth, server


@pytest.mark.skipif(shutil.which("java") is None or not Path(JAR).exists(),
                    reason="java and pgjdbc (libpostgresql-jdbc-java) are needed")
def test_pgjdbc_reads_and_binds_user_types(st):
    url = (f"jdbc:postgresql://127.0.0.1:{st.neki.port}/{st.db}?user=postgres"
           "&sslmode=disable&prepareThreshold=1")
    ids = [str(c) for c in st.ids.values()]
    res = subprocess.run(["java", "-cp", JAR, str(CLIENTS / "jdbc" / "TypeOids.java"), url]
                         + ids, capture_output=True, text=True, timeout=170)
    assert res.returncode == 0, res.stderr[-3000:]
    want = [f"{c}|mood|addr|happy|(\"main st\",{c})|1" for c in ids]
    assert res.stdout.splitlines() == want, res.stdout + res.stderr[-2000:]


def test_node_postgres_data_type_ids(st):
    import sys
    sys.path.insert(0, str(CLIENTS))
    from test_session import node_pg_path
    path = node_pg_path()
    if path is None:
        pytest.skip("node-postgres (npm pg) is not installed; set NEKI_NODE_PATH")
    res = subprocess.run(["node", str(CLIENTS / "node" / "type_oids.js"), str(st.neki.port),
                          st.db] + [str(c) for c in st.ids.values()],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "NODE_PATH": path})
    assert res.returncode == 0, res.stderr[-3000:]
    want = f"{type_oid(st, 'auth', 'mood')}|{type_oid(st, 'auth', 'addr')}"
    assert res.stdout.split() == [f"{c}|{want}|happy" for c in st.ids.values()], res.stdout


def test_parameter_description_in_a_transaction(st):
    """Inside a transaction a Describe of a statement goes to the transaction's shard: its
    ParameterDescription and RowDescription carry the authoritative OIDs too."""
    import struct
    import sys
    sys.path.insert(0, str(CLIENTS))
    import pgwire as pw
    mood, addr = type_oid(st, "auth", "mood"), type_oid(st, "auth", "addr")
    w = pw.Wire(st.neki.port)
    w.login(database=st.db)
    try:
        for server in ("shard-a", "shard-b"):
            cid = st.ids[server]
            w.query("BEGIN")
            w.query(f"SELECT 1 FROM customers WHERE id = {cid}")	# the transaction's shard
            w.raw(pw.parse("", "SELECT m, a FROM customers WHERE m = $1 AND a = $2::addr") +
                  pw.describe("S") + pw.sync())
            got = dict((t, b) for t, b in w.read_until("Z"))
            (n,) = struct.unpack("!H", got["t"][:2])
            assert list(struct.unpack(f"!{n}I", got["t"][2:2 + 4 * n])) == [mood, addr], server
            assert got["T"].count(struct.pack("!I", mood)) == 1, server
            w.query("COMMIT")
    finally:
        w.close()


def test_a_row_description_larger_than_the_read_buffer(st):
    """A RowDescription longer than pkt_buf (1500 columns) is read whole, then rewritten."""
    want = type_oid(st, "auth", "mood")
    cols = ", ".join(f"m AS column_number_{i:04d}" for i in range(1500))
    with st.connect(autocommit=True) as conn:
        for server in ("shard-a", "shard-b"):
            cur = conn.execute(f"SELECT {cols} FROM customers WHERE id = %s", (st.ids[server],))
            assert {d.type_code for d in cur.description} == {want}, server
            assert cur.fetchone()[1499] == "happy"
