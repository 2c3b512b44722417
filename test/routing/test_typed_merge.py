"""
The types of test/merge/test_merge_types.py (arrays, interval, inet/cidr, bit/varbit, time,
timetz) ordered, grouped and aggregated through neki over 4 shards, with psycopg text and
binary cursors, compared with the reference server holding every row (issue 20). The
customers table of the storefront topology carries the typed columns.
"""
import sys
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from test_routing import Store, create_schema, routing_neki, sharded_database, topology

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "merge"))
from test_merge_types import COLUMNS, QUERIES, rows_for_ty  # noqa: E402

TYPES = {"ia": "int4[]", "ta": "text[]", "na": "numeric[]", "iv": "interval", "inn": "inet",
         "cd": "cidr", "bt": "bit(4)", "vb": "varbit", "tm": "time", "ttz": "timetz",
         "iva": "interval[]", "ua": "uuid[]", "ba": "bool[]"}
SCHEMA = ["CREATE TABLE customers (id bigint PRIMARY KEY, g int, " +
          ", ".join(f"{c} {TYPES[c]}" for c in COLUMNS) + ")"]


def lit(v):
    return "NULL" if v is None else "'" + str(v).replace("'", "''") + "'"


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "mtyped") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st, SCHEMA)
        names, rows = rows_for_ty()
        st.both(f"INSERT INTO customers (id, g, {', '.join(names)}) VALUES " +
                ", ".join("(" + ", ".join(lit(v) for v in r) + ")" for r in rows))
        with st.ref() as conn:
            assert conn.execute("SELECT count(*) FROM customers").fetchone() == (len(rows),)
        yield st


if psycopg is not None:
    class RawText(psycopg.adapt.Loader):
        def load(self, data):
            return bytes(data)

    class RawBinary(RawText):
        format = psycopg.pq.Format.BINARY


def fetch(connect, sql, binary):
    with connect() as conn:
        for name in ("time", "timetz"):      # (Python has no 24:00:00): the raw bytes
            conn.adapters.register_loader(name, RawText)
            conn.adapters.register_loader(name, RawBinary)
        with conn.cursor(binary=binary) as cur:
            cur.execute(sql)
            return cur.fetchall()


@pytest.mark.parametrize("binary", [False, True], ids=["text", "binary"])
@pytest.mark.parametrize("kind,sql", QUERIES, ids=[q for _, q in QUERIES])
def test_typed_merge_through_neki(store, kind, sql, binary):
    sql = sql.replace(" ty", " customers")
    got = fetch(store.connect, sql, binary)
    want = fetch(store.ref, sql, binary)
    got, want = [repr(r) for r in got], [repr(r) for r in want]     # (NaN)
    if kind != "ordered":
        got, want = sorted(got), sorted(want)
    assert got == want, sql
