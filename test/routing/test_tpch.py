"""
The 22 TPC-H queries (tpch.py: a small generated data set, every table sharded by its
natural key over the 4 data shards, nation and region reference tables) through neki and on
the reference server holding every row (issue 20): each returns the same rows, in the same
order, with the same column names; EXPLAIN (NEKI_PLAN) plans each. A query neki does not
serve yet is listed in NOT_YET with the refusal it gets: a new refusal, a changed one, or
one that went away fails, so the list stays the truth.
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

import tpch
from test_routing import Store, create_schema, routing_neki, sharded_database

# query -> (sqlstate, start of the message) of a query neki refuses today
NOT_YET = {}


@pytest.fixture(scope="module")
def st(pg_cluster):
    with sharded_database(pg_cluster, "tpch") as db, \
            routing_neki(pg_cluster, db, tpch.topology(db), Store) as store:
        create_schema(store, tpch.SCHEMA)
        data = tpch.rows(sf=1.0)
        with store.connect() as conn, store.ref() as ref:
            for table in tpch.TABLES:
                for lo in range(0, len(data[table]), 500):
                    sql = tpch.insert_sql(table, data[table][lo:lo + 500])
                    conn.execute(sql)
                    ref.execute(sql)
            for table in tpch.TABLES:
                ref.execute(f"ANALYZE {table}")
        yield store


def run(connect, sql):
    with connect() as conn:
        cur = psycopg.ClientCursor(conn)
        try:
            cur.execute(sql)
        except psycopg.Error as e:
            return ("ERROR", e.diag.sqlstate, e.diag.message_primary)
        return ([d.name for d in cur.description], cur.fetchall())


def test_data_is_loaded(st):
    for table in tpch.TABLES:
        got, want = run(st.connect, f"SELECT count(*) FROM {table}"), \
            run(st.ref, f"SELECT count(*) FROM {table}")
        assert got == want and want[1][0][0] > 0, table


@pytest.mark.parametrize("q", sorted(tpch.QUERIES))
def test_query_equals_the_reference(st, q):
    sql = tpch.QUERIES[q]
    got, want = run(st.connect, sql), run(st.ref, sql)
    assert want[0] != "ERROR", want
    if q in NOT_YET:
        assert got[0] == "ERROR" and (got[1], got[2][:len(NOT_YET[q][1])]) == NOT_YET[q], \
            f"Q{q}: {got[:3] if got[0] == 'ERROR' else 'now served: take it off NOT_YET'}"
        return
    assert got == want, f"Q{q}:\n neki      {got}\n reference {want}"


@pytest.mark.parametrize("q", sorted(tpch.QUERIES))
def test_query_is_planned(st, q):
    with st.connect() as conn:
        plan = "\n".join(r[0] for r in psycopg.ClientCursor(conn).execute(
            "EXPLAIN (NEKI_PLAN, FORMAT TEXT) " + tpch.QUERIES[q]).fetchall())
    assert "Route" in plan or "Router Evaluation" in plan, plan
