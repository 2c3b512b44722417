"""pgbouncer's test_copy.py, test_cancel.py and test_sbuf_loopcnt.py scenarios against neki:
COPY in and out over the simple, extended and prepared protocols with errors before and after
CopyDone; cancel requests, also while the pool is full and under a storm of them for one
client; sbuf_loopcnt = 1 with large results and a client that stops reading."""
import select
from concurrent.futures import ThreadPoolExecutor

import psycopg
import pytest
from psycopg import pq

from compat import admin, db_line, start
from conftest import wait_until

S = pq.ExecStatus


@pytest.fixture
def copy_neki(pg_cluster, cluster_db, neki):
    pg_cluster.sql("shard-a", "CREATE TABLE test_copy (i int)", dbname=cluster_db)
    return start(neki, pg_cluster, cluster_db, max_prepared_statements=100)


def _send_copy(pg, how):
    if how == "simple":
        pg.send_query(b"COPY test_copy(i) FROM STDIN")
    elif how == "extended":
        pg.enter_pipeline_mode()
        pg.send_query_params(b"COPY test_copy(i) FROM STDIN", [])
        pg.pipeline_sync()
    else:
        pg.enter_pipeline_mode()
        pg.send_prepare(b"p1", b"COPY test_copy(i) FROM STDIN")
        pg.send_query_prepared(b"p1", [])
        pg.pipeline_sync()
        assert pg.get_result().status == S.COMMAND_OK
        assert pg.get_result() is None


def _finish(pg, how, expect):
    if how != "simple":
        pg.pipeline_sync()
    assert pg.get_result().status == expect
    assert pg.get_result() is None
    if how != "simple":
        assert pg.get_result().status == S.PIPELINE_SYNC
        assert pg.get_result().status == S.PIPELINE_SYNC
        pg.exit_pipeline_mode()


@pytest.mark.parametrize("how", ["simple", "extended", "prepared"])
@pytest.mark.parametrize("case", ["ok", "error_before_done", "error_after_done"])
def test_copy_from_stdin(copy_neki, cluster_db, how, case):
    with copy_neki.connect(cluster_db) as conn:
        pg = conn.pgconn
        _send_copy(pg, how)
        assert pg.get_result().status == S.COPY_IN
        pg.put_copy_data(b"1\n" if case == "ok" else b"\n")
        if case == "error_before_done":
            pg.flush()
            # let the server's error reach the client: libpq still reports COPY_IN
            select.select([pg.socket], [], [], 2)
            assert pg.get_result().status == S.COPY_IN
        pg.put_copy_end()
        _finish(pg, how, S.COMMAND_OK if case == "ok" else S.FATAL_ERROR)
        assert conn.execute("SELECT 1").fetchone() == (1,)


@pytest.mark.parametrize("how", ["simple", "extended", "prepared"])
def test_copy_to_stdout(copy_neki, cluster_db, how):
    with copy_neki.connect(cluster_db) as conn:
        conn.execute("TRUNCATE test_copy")
        conn.execute("INSERT INTO test_copy VALUES (1), (2)")
        pg = conn.pgconn
        q = b"COPY (SELECT i FROM test_copy ORDER BY i) TO STDOUT (FORMAT TEXT)"
        if how == "simple":
            pg.send_query(q)
        elif how == "extended":
            pg.enter_pipeline_mode()
            pg.send_query_params(q, [])
            pg.pipeline_sync()
        else:
            pg.enter_pipeline_mode()
            pg.send_prepare(b"p1", q)
            pg.send_query_prepared(b"p1", [])
            pg.pipeline_sync()
            assert pg.get_result().status == S.COMMAND_OK
            assert pg.get_result() is None
        assert pg.get_result().status == S.COPY_OUT
        assert pg.get_copy_data(0) == (2, b"1\n")
        assert pg.get_copy_data(0) == (2, b"2\n")
        assert pg.get_copy_data(0) == (-1, b"")
        assert pg.get_result().status == S.COMMAND_OK
        assert pg.get_result() is None
        if how != "simple":
            assert pg.get_result().status == S.PIPELINE_SYNC
            pg.exit_pipeline_mode()


def _cancel_running(conn, pool, sql="select pg_sleep(20)"):
    q = pool.submit(conn.execute, sql)
    wait_until(lambda: q.running(), 5)
    return q


def _wait_active(n, db, count):
    wait_until(lambda: sum(1 for r in admin(n, "SHOW SERVERS", dicts=True)
                           if r["database"] == db and r["state"] == "active") >= count, 10,
               what=f"{count} active links")


def test_cancel_session_mode(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, mode="session")
    with n.connect(cluster_db) as c, ThreadPoolExecutor(2) as pool:
        q = _cancel_running(c, pool)
        _wait_active(n, cluster_db, 1)
        c.cancel()
        with pytest.raises(psycopg.errors.QueryCanceled, match="due to user request"):
            q.result(10)


def test_cancel_while_the_pool_is_full(pg_cluster, cluster_db, neki):
    """Five links busy (default_pool_size 5): cancels of all five still get through (a
    CancelRequest needs no pooled link), and the other clients finish."""
    n = start(neki, pg_cluster, cluster_db, mode="session", default_pool_size=5,
              server_idle_timeout=2)
    conns = [n.connect(cluster_db) for _ in range(5)]
    try:
        with ThreadPoolExecutor(10) as pool:
            qs = [_cancel_running(c, pool) for c in conns]
            _wait_active(n, cluster_db, 5)
            for c in conns:
                pool.submit(c.cancel).result(10)
            for q in qs:
                with pytest.raises(psycopg.errors.QueryCanceled, match="due to user request"):
                    q.result(10)
    finally:
        for c in conns:
            c.close()


def test_cancel_storm_does_not_hit_the_next_client(pg_cluster, cluster_db, neki):
    """pgbouncer #717: one link shared by two clients; 100 cancels for client 1 stop only
    client 1's query, never client 2's, which runs on the same link right after."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction", default_pool_size=1,
              workers=1, server_idle_timeout=2)
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2, \
            ThreadPoolExecutor(100) as pool:
        q1 = _cancel_running(c1, pool, "select pg_sleep(5)")
        _wait_active(n, cluster_db, 1)
        q2 = pool.submit(c2.execute, "select pg_sleep(1)")
        wait_until(lambda: any(r["state"] == "waiting" for r in
                               admin(n, "SHOW CLIENTS", dicts=True)), 5)
        for f in [pool.submit(c1.cancel) for _ in range(100)]:
            f.result(20)
        with pytest.raises(psycopg.errors.QueryCanceled, match="due to user request"):
            q1.result(20)
        q2.result(20)
    assert "client disconnected with query in progress" not in n.log()


@pytest.mark.parametrize("stall", [False, True])
def test_sbuf_loopcnt_one(pg_cluster, cluster_db, neki, stall):
    n = start(neki, pg_cluster, cluster_db, sbuf_loopcnt=1)
    stalled = None
    if stall:   # a client that never reads a large result fills its socket buffers
        stalled = n.connect(cluster_db)
        stalled.pgconn.send_query(b"SELECT repeat('x', 8192) FROM generate_series(1, 20000)")
        stalled.pgconn.flush()
    try:
        with n.connect(cluster_db) as c:
            rows = c.execute("SELECT repeat('x', 200) FROM generate_series(1, 5000)").fetchall()
            assert len(rows) == 5000
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert admin(n, "SHOW VERSION")
    finally:
        if stalled is not None:
            stalled.close()
