"""
Router-side sequence values (issue 6, spec 6.1) against a real server:

- seq_reserve_sql(): the statement the router runs on a sequence's home shard to reserve a
  batch returns runs (first, count, increment) that cover exactly the values nextval()
  handed out, for ascending and descending sequences, and stays correct while other
  sessions take values from the same sequence at the same time (no value twice, none lost
  from a run); an exhausted sequence fails with the server's error;
- seq_uuidv7_sql(): the uuidv7() neki creates on servers before PostgreSQL 18 gives RFC 9562
  version 7 / variant 10 values whose timestamp is the server's clock and whose order
  follows creation time; neki creates it on every shard of a topology it is given (and
  leaves a uuidv7() that exists alone).
"""
import json
import subprocess
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

pytestmark = pytest.mark.skipif(psycopg is None, reason="python3-psycopg is not installed")

from conftest import Neki, wait_until

REPO = Path(__file__).resolve().parent.parent.parent
TOOL = REPO / "test" / "unit" / "router_sql"


def router_sql(*args):
    assert TOOL.exists(), "build first: make (test/unit/router_sql)"
    return subprocess.run([str(TOOL), *map(str, args)], capture_output=True, text=True,
                          check=True, timeout=10).stdout


def expand(runs):
    """Every value of the runs, in order."""
    out = []
    for first, count, inc in runs:
        first, count, inc = int(first), int(count), int(inc)
        out += [first + k * inc for k in range(count)]
    return out


def test_reserve_one_run(pg_cluster, cluster_db):
    pg_cluster.sql("shard-a", "CREATE SEQUENCE s CACHE 20", dbname=cluster_db)
    rows = pg_cluster.sql("shard-a", router_sql("reserve", "public", "s", 1000),
                          dbname=cluster_db)
    assert rows == [("1", "1000", "1")]
    rows = pg_cluster.sql("shard-a", router_sql("reserve", "public", "s", 5), dbname=cluster_db)
    assert rows == [("1001", "5", "1")]
    # the second session cached CACHE (20) values on its first nextval(), as Postgres does
    assert pg_cluster.sql("shard-a", "SELECT last_value FROM s", dbname=cluster_db) == [(1020,)]


def test_reserve_descending_and_quoted(pg_cluster, cluster_db):
    pg_cluster.sql("shard-a", 'CREATE SCHEMA "My""S"; CREATE SEQUENCE "My""S"."it\'s" '
                   "INCREMENT BY -3 START WITH -1", dbname=cluster_db)
    rows = pg_cluster.sql("shard-a", router_sql("reserve", 'My"S', "it's", 4),
                          dbname=cluster_db)
    assert rows == [("-1", "4", "-3")]
    assert expand(rows) == [-1, -4, -7, -10]


def test_reserve_exhausted(pg_cluster, cluster_db):
    pg_cluster.sql("shard-a", "CREATE SEQUENCE small MAXVALUE 5", dbname=cluster_db)
    with pytest.raises(psycopg.errors.SequenceGeneratorLimitExceeded) as exc:
        pg_cluster.sql("shard-a", router_sql("reserve", "public", "small", 10),
                       dbname=cluster_db)
    assert 'reached maximum value of sequence "small" (5)' in str(exc.value)


def test_reserve_concurrent(pg_cluster, cluster_db):
    """6 reserving sessions and 2 sessions calling nextval() directly, all at once."""
    pg_cluster.sql("shard-a", "CREATE SEQUENCE hot", dbname=cluster_db)
    reserve = router_sql("reserve", "public", "hot", 300)
    got, errors = [], []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def reserver():
        try:
            with pg_cluster.connect("shard-a", dbname=cluster_db) as conn:
                start.wait(timeout=30)
                for _ in range(10):
                    vals = expand(conn.execute(reserve).fetchall())
                    assert len(vals) == 300
                    with lock:
                        got.extend(vals)
        except Exception as e:  # reported below
            errors.append(e)

    def direct():
        try:
            with pg_cluster.connect("shard-a", dbname=cluster_db) as conn:
                start.wait(timeout=30)
                for _ in range(1500):
                    v = conn.execute("SELECT nextval('hot')").fetchone()[0]
                    with lock:
                        got.append(v)
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=reserver) for _ in range(6)]
    threads += [threading.Thread(target=direct) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert len(got) == 6 * 10 * 300 + 2 * 1500
    assert len(set(got)) == len(got), "a value was handed out twice"
    # every value the sequence gave is accounted for: nothing lost inside a run
    assert sorted(got) == list(range(1, len(got) + 1))


def uuid_time_us(u):
    """Microseconds since the epoch encoded in a uuidv7 (48 bits ms + 12 bits fraction)."""
    b = u.bytes
    ms = int.from_bytes(b[0:6], "big")
    frac = ((b[6] & 0x0F) << 8) | b[7]
    return ms * 1000 + frac * 1000 // 4096


def test_uuidv7(pg_cluster, cluster_db):
    assert pg_cluster.sql("shard-a", "SELECT count(*) FROM pg_proc WHERE proname = 'uuidv7'",
                          dbname=cluster_db) == [(0,)], "the server has its own uuidv7()"
    pg_cluster.sql("shard-a", router_sql("uuidv7"), dbname=cluster_db)
    rows = pg_cluster.sql("shard-a", "SELECT uuidv7(), clock_timestamp() "
                          "FROM generate_series(1, 3000)", dbname=cluster_db)
    values = [r[0] for r in rows]
    assert len(set(values)) == len(values)
    for u, ts in rows:
        assert u.version == 7
        assert u.variant == uuid.RFC_4122
        clock_us = int(ts.timestamp() * 1_000_000)
        # uuidv7() reads the clock before clock_timestamp() of the same row (a busy machine
        # may run other processes in between)
        assert 0 <= clock_us - uuid_time_us(u) < 1_000_000, (u, ts)
    # creation order: the time bits never go backwards, and they advance
    times = [uuid_time_us(u) for u in values]
    assert times == sorted(times)
    assert times[-1] > times[0]
    # so uuid order (compared as Postgres compares, bytewise) follows time
    ordered = pg_cluster.sql("shard-a", "SELECT array_agg(u ORDER BY u) = array_agg(u ORDER BY "
                             "n) FROM (SELECT n, uuidv7() AS u, pg_sleep(0.001) FROM "
                             "generate_series(1, 20) n) x", dbname=cluster_db)
    assert ordered == [(True,)]
    now = datetime.now(timezone.utc).timestamp() * 1_000_000
    assert abs(now - times[-1]) < 60_000_000


def test_rewritten_insert_shapes(pg_cluster, cluster_db):
    """The statement forms plan_rewrite() produces (test/unit/check_router_plan.c asserts the
    texts) run on a real server: OVERRIDING SYSTEM VALUE with serial, BY DEFAULT and ALWAYS
    identity columns, the values kept, and a replaced nextval() keeps its column name."""
    pg_cluster.sql("shard-a", "CREATE TABLE orders (customer_id bigint, id bigserial, "
                   "status text); CREATE TABLE customers (id bigint GENERATED ALWAYS AS "
                   "IDENTITY, name text, email text); CREATE TABLE countries (code text, "
                   "name text, id bigint GENERATED BY DEFAULT AS IDENTITY)", dbname=cluster_db)
    rows = pg_cluster.sql("shard-a", 'INSERT INTO orders (customer_id, status, "id") '
                          "OVERRIDING SYSTEM VALUE VALUES (1, 'a', 501), (1, 'c', 503) "
                          "RETURNING id", dbname=cluster_db)
    assert rows == [(501,), (503,)]
    rows = pg_cluster.sql("shard-a", 'INSERT INTO customers (name, email, "id") OVERRIDING '
                          "SYSTEM VALUE VALUES ('a', 'x', 1) RETURNING id", dbname=cluster_db)
    assert rows == [(1,)]
    rows = pg_cluster.sql("shard-a", 'insert into public.orders as o ("customer_id", "id") '
                          "OVERRIDING SYSTEM VALUE VALUES (42, 7) RETURNING o.id",
                          dbname=cluster_db)
    assert rows == [(7,)]
    pg_cluster.sql("shard-a", 'INSERT INTO countries ("code", "name", "id") OVERRIDING SYSTEM '
                   "VALUE VALUES ('fr', 'France', 7)", dbname=cluster_db)
    with pg_cluster.connect("shard-a", dbname=cluster_db) as conn:
        cur = conn.execute("SELECT (SELECT 900::int8 AS nextval), (SELECT 901::int8 AS "
                           "nextval) + 1")
        assert [d.name for d in cur.description] == ["nextval", "?column?"]
        assert cur.fetchall() == [(900, 902)]
    # the shard's own sequences were never drawn from
    assert pg_cluster.sql("shard-a", "SELECT last_value, is_called FROM orders_id_seq",
                          dbname=cluster_db) == [(1, False)]


def test_neki_creates_uuidv7_on_every_shard(pg_cluster, cluster_db):
    db = cluster_db
    mine = "00000000-0000-7000-8000-000000000001"
    pg_cluster.sql("shard-b", "CREATE FUNCTION public.uuidv7() RETURNS uuid LANGUAGE sql "
                   f"AS $$ SELECT '{mine}'::uuid $$", dbname=db)
    doc = json.loads((REPO / "etc" / "topology-storefront.json").read_text())
    doc["databases"] = {db: doc["databases"]["store"]}
    shards = sorted({r.get("shard_uid")
                     for g in doc["shard_groups"] for r in g["key_ranges"]} - {None})
    assert shards, doc["shard_groups"][0]
    auth = f"auth = host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db}"
    inst = Neki(settings={"workers": 1, "admin_users": "postgres"},
                databases={db: f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={db} "
                               "topology=yes"},
                shards=pg_cluster.shards_section(dbname=db) + "\n" + auth)
    try:
        inst.start()
        text = json.dumps(doc).replace("'", "''")
        with inst.admin_connect() as conn:
            conn.execute(f"SELECT * FROM __neki.set_data_topology('{text}', true)")

        def created():
            return all(pg_cluster.sql(s, "SELECT count(*) FROM pg_proc WHERE proname = "
                                      "'uuidv7'", dbname=db) == [(1,)] for s in shards)
        wait_until(created, 15, what="uuidv7() on every shard")
        for s in shards:
            u = pg_cluster.sql(s, "SELECT uuidv7()", dbname=db)[0][0]
            if s == "shard-b":
                assert str(u) == mine          # the existing function is left alone
            else:
                assert u.version == 7
    finally:
        problems = inst.cleanup()
        assert not problems, "\n".join(problems)
