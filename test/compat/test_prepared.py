"""Prepared statements in transaction and statement pooling, as pgbouncer 1.21+ runs them
(max_prepared_statements): the scenarios of pgbouncer's own prepared-statement tests, checked
against neki with psycopg, libpq pipelines and exact protocol messages.

Every test runs neki in front of shard-a of the private cluster, in statement mode (the mode
pgbouncer's test configuration uses) unless it says otherwise."""
import struct

import psycopg
import pytest
from psycopg import pq

from compat import admin, start
from conftest import wait_until
from pgwire import Wire, error_fields

PKT_BUF = 4096


def test_shared_statement_on_two_links(pg_cluster, cluster_db, neki):
    """Client 1 prepares, a second client holds that link, client 1's statement is prepared
    again on a second link; client 2 then reuses what link 1 has."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction", workers=1)
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        for q, p in (("SELECT 1", None), ("SELECT %s", (1,))):
            c1.execute(q, p, prepare=True)
            c1.execute(q, p)
            with c2.transaction():
                c2.execute("SELECT 2")
                assert c1.execute(q, p).fetchone() == (1,)
                assert c2.execute(q, p, prepare=True).fetchone() == (1,)


@pytest.mark.parametrize("value,ok", [(-1, False), (3147483648, False), (0, True), (1, True),
                                      (2147483647, True)])
def test_max_prepared_statements_bounds(pg_cluster, cluster_db, neki, value, ok):
    """The console's SET and the ini accept 0 .. 2^31-1; anything else is refused."""
    n = start(neki, pg_cluster, cluster_db)
    if ok:
        admin(n, f"SET max_prepared_statements = '{value}'")
        assert admin(n, "SHOW CONFIG", dicts=True)  # console still fine
        return
    with pytest.raises(psycopg.Error, match="SET failed"):
        admin(n, f"SET max_prepared_statements = '{value}'")
    n.update({"max_prepared_statements": value})
    with pytest.raises(psycopg.Error, match="RELOAD failed"):
        admin(n, "RELOAD")
    n.wait_log(rf"invalid value \"{value}\" for parameter max_prepared_statements")


def _prepare(conn, name, sql):
    res = conn.pgconn.prepare(name, sql)
    assert res.status == pq.ExecStatus.COMMAND_OK, res.error_message
    return res


@pytest.mark.parametrize("command", ["DISCARD ALL", "DEALLOCATE ALL"])
@pytest.mark.parametrize("extended", [False, True])
def test_discard_or_deallocate_all_forgets_the_clients_statements(
        pg_cluster, cluster_db, neki, command, extended):
    """DEALLOCATE ALL / DISCARD ALL (simple Query, or an unnamed Parse + Execute as psycopg's
    pipeline sends it) forget that client's statements only; a later use of one of its names is
    'prepared statement did not exist', the other client is undisturbed."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction")
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        _prepare(c1, b"mystmt", b"SELECT 1")
        assert c1.pgconn.exec_prepared(b"mystmt", []).get_value(0, 0) == b"1"
        _prepare(c2, b"mystmt", b"SELECT 2")
        assert c2.pgconn.exec_prepared(b"mystmt", []).get_value(0, 0) == b"2"
        if extended:
            res = c1.pgconn.exec_params(command.encode(), [])
        else:
            res = c1.pgconn.exec_(command.encode())
        assert res.status == pq.ExecStatus.COMMAND_OK, res.error_message
        assert c2.pgconn.exec_prepared(b"mystmt", []).get_value(0, 0) == b"2"
        res = c1.pgconn.exec_prepared(b"mystmt", [])
        assert res.status == pq.ExecStatus.FATAL_ERROR
        # the client is closed (as by pgbouncer): libpq may see the close before the FATAL
        assert (b"prepared statement did not exist" in res.error_message or
                b"server closed the connection unexpectedly" in res.error_message)
    n.wait_log("closing because: prepared statement did not exist")


@pytest.mark.parametrize("factor", [2, 10])
def test_parse_and_bind_larger_than_pkt_buf(pg_cluster, cluster_db, neki, factor):
    long = "1" * PKT_BUF * factor
    databases = (f"{cluster_db} = host=127.0.0.1 port={pg_cluster.port('shard-a')} "
                 f"dbname={cluster_db}\n"
                 f"varcache_change = host=127.0.0.1 port={pg_cluster.port('shard-a')} "
                 f"dbname={cluster_db} client_encoding=SQL_ASCII")
    n = start(neki, pg_cluster, cluster_db, databases=databases)
    for db in (cluster_db, "varcache_change"):
        with n.connect(db, client_encoding="UTF8") as c:
            assert c.execute(f"SELECT '{long}'", prepare=True).fetchone()[0] == long
            assert c.execute("SELECT %s::text", (long,), prepare=True).fetchone()[0] == long


def _server_statements(c):
    return c.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0]


def test_evict_statement_cache(pg_cluster, cluster_db, neki):
    """A link holds at most max_prepared_statements; SET takes effect at the next insert;
    0 turns rewriting off (names go to the server as the client wrote them)."""
    n = start(neki, pg_cluster, cluster_db, workers=1)
    admin(n, "SET max_prepared_statements = 1")
    with n.connect(cluster_db) as c:
        for i in range(5):
            assert c.execute(f"SELECT '{i}'", prepare=True).fetchone()[0] == str(i)
        assert _server_statements(c) == 1
        admin(n, "SET max_prepared_statements = 5")
        for i in range(5, 10):
            assert c.execute(f"SELECT '{i}'", prepare=True).fetchone()[0] == str(i)
        assert _server_statements(c) == 5
        admin(n, "SET max_prepared_statements = 2")
        assert _server_statements(c) == 5
        assert c.execute("SELECT '10'", prepare=True).fetchone()[0] == "10"
        assert _server_statements(c) == 2
        admin(n, "SET max_prepared_statements = 0")
        with pytest.raises(psycopg.errors.InvalidSqlStatementName):
            c.execute("SELECT '10'", prepare=True)
        assert _server_statements(c) == 2


def test_evict_statement_cache_pipeline_failure(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, workers=1)
    admin(n, "SET max_prepared_statements = 1")
    # The pipeline is written with libpq's calls, all of it before any result is
    # read: psycopg's pipeline reads between its commands and raises at execute()
    # when the ErrorResponse (which Postgres flushes at once) is already there, and
    # then does not recover, with Postgres directly as well.
    with n.connect(cluster_db) as conn:
        pg = conn.pgconn
        pg.nonblocking = 0
        pg.enter_pipeline_mode()
        pg.send_prepare(b"s1", b"SELECT 1")
        pg.send_query_prepared(b"s1", [])
        pg.send_prepare(b"s2", b"bad query")
        pg.send_query_prepared(b"s2", [])
        pg.pipeline_sync()
        assert pipeline_results(pg) == [
            "COMMAND_OK", ("TUPLES_OK", b"1"), ("FATAL_ERROR", "42601"),
            "PIPELINE_ABORTED", "PIPELINE_SYNC"]
        pg.send_query_prepared(b"s1", [])
        pg.pipeline_sync()
        assert pipeline_results(pg) == [("TUPLES_OK", b"1"), "PIPELINE_SYNC"]
        pg.exit_pipeline_mode()


def pipeline_results(pg):
    """The results of one pipeline up to its sync: status names, with the first
    value of a row set and the SQLSTATE of an error."""
    from psycopg.pq import ExecStatus, DiagnosticField
    out = []
    while True:
        r = pg.get_result()
        if r is None:
            continue
        st = ExecStatus(r.status)
        if st == ExecStatus.TUPLES_OK:
            out.append((st.name, r.get_value(0, 0)))
        elif st == ExecStatus.FATAL_ERROR:
            out.append((st.name, r.error_field(DiagnosticField.SQLSTATE).decode()))
        else:
            out.append(st.name)
        if st == ExecStatus.PIPELINE_SYNC:
            return out


def test_prepared_statement_pipeline(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c:
        assert c.execute("SELECT 1", prepare=True).fetchone()[0] == 1
    for _ in range(2):
        with n.connect(cluster_db) as conn, conn.pipeline():
            curs = [conn.cursor() for _ in range(4)]
            curs[0].execute("SELECT 2", prepare=True)
            curs[1].execute("SELECT 1", prepare=True)
            curs[2].execute("SELECT 3")
            curs[3].execute("SELECT 1", prepare=True)
            assert [c.fetchall() for c in curs] == [[(2,)], [(1,)], [(3,)], [(1,)]]


def test_prepared_statement_pipeline_stress(pg_cluster, cluster_db, neki):
    """Pipelines of prepared statements over a cache smaller than the client's statements."""
    import random
    from psycopg import sql
    rnd = random.Random(7)
    n = start(neki, pg_cluster, cluster_db)
    admin(n, "SET max_prepared_statements = 20")
    for length in range(1, 8):
        with n.connect(cluster_db) as conn, conn.pipeline():
            curs = [conn.cursor() for _ in range(length)]
            for _ in range(15):
                for i in range(length):
                    q = sql.SQL("SELECT %s, %s::text as {}").format(
                        sql.Identifier(f"s{rnd.randint(1, 30)}"))
                    curs[i].execute(q, (i, str(i).zfill(512)), prepare=True)
                for i in range(length):
                    assert curs[i].fetchall() == [(i, str(i).zfill(512))]


def _ready(msgs):
    return [t for t, _ in msgs]


def _wire(n, db):
    w = Wire(n.port)
    w.login(database=db)
    return w


def _parse(name, sql):
    return name + b"\0" + sql + b"\0" + b"\0\0"


def test_describe_or_bind_of_unknown_statement_closes_the_client(pg_cluster, cluster_db,
                                                                   neki):
    n = start(neki, pg_cluster, cluster_db)
    for msg in (b"D", b"B"):
        w = _wire(n, cluster_db)
        if msg == b"D":
            w.send(b"D", b"Sdoesnotexist\0")
        else:
            w.send(b"B", b"\0doesnotexist\0\0\0\0\0\0\0")
        w.send(b"S", b"")
        msgs = w.read_all()
        errs = [error_fields(b) for t, b in msgs if t == "E"]
        assert errs and errs[0]["M"] == "prepared statement did not exist", msgs
        assert errs[0]["S"] == "FATAL" and "Z" not in _ready(msgs)
    with n.connect(cluster_db) as c:   # the pooler is fine
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_close_prepared_statement(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    w = _wire(n, cluster_db)
    w.send(b"P", _parse(b"test", b"SELECT 1"))
    w.send(b"S", b"")
    assert _ready(w.read_until("Z")) == ["1", "Z"]
    for _ in range(2):     # closing a name twice (or an unknown one) is no error
        w.send(b"C", b"Stest\0")
        w.send(b"S", b"")
        assert _ready(w.read_until("Z")) == ["3", "Z"]
    w.send(b"D", b"Stest\0")
    w.send(b"S", b"")
    errs = [error_fields(b) for t, b in w.read_all() if t == "E"]
    assert errs and errs[0]["M"] == "prepared statement did not exist"


@pytest.mark.parametrize("cache,second", [(100, b"SELECT 1"), (1, b"SELECT 2")])
def test_close_batched_with_parse(pg_cluster, cluster_db, neki, cache, second):
    """Parse b (a query the link already has, or one that evicts a) then Close a in one
    batch: the client gets ParseComplete, CloseComplete, ReadyForQuery in that order."""
    n = start(neki, pg_cluster, cluster_db)
    admin(n, f"SET max_prepared_statements = {cache}")
    w = _wire(n, cluster_db)
    w.send(b"P", _parse(b"a", b"SELECT 1"))
    w.send(b"S", b"")
    assert _ready(w.read_until("Z")) == ["1", "Z"]
    w.send(b"P", _parse(b"b", second))
    w.send(b"C", b"Sa\0")
    w.send(b"S", b"")
    assert _ready(w.read_until("Z")) == ["1", "3", "Z"]
    msgs = w.query("SELECT 2")
    assert _ready(msgs) == ["T", "D", "C", "Z"]


def test_statement_name_longer_than_pkt_buf(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    name = b"a" * PKT_BUF * 4
    with n.connect(cluster_db) as c:
        _prepare(c, name, b"SELECT $1::text")
        assert c.pgconn.describe_prepared(name).status == pq.ExecStatus.COMMAND_OK
        assert c.pgconn.exec_prepared(name, [b"abc"]).get_value(0, 0) == b"abc"
    w = _wire(n, cluster_db)
    for msg, answer in ((b"P" + struct.pack("!I", 4 + len(_parse(name, b"SELECT 1"))) +
                         _parse(name, b"SELECT 1"), ["1", "Z"]),
                        (b"C" + struct.pack("!I", 4 + 2 + len(name)) + b"S" + name + b"\0",
                         ["3", "Z"])):
        w.raw(msg + b"S\0\0\0\4")
        assert _ready(w.read_until("Z")) == answer
    w.send(b"D", b"S" + name + b"\0")
    w.send(b"S", b"")
    msgs = w.read_all()
    assert error_fields(msgs[0][1])["M"] == "prepared statement did not exist"


def test_pipeline_error_clears_the_queue(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c:
        c.execute("SELECT 1", prepare=True)
    with n.connect(cluster_db) as conn, conn.pipeline() as p, conn.cursor() as cur:
        cur.execute("SELECT aaaa")
        with pytest.raises(psycopg.errors.UndefinedColumn, match='column "aaaa" does not exist'):
            p.sync()
        cur.execute("SELECT 1", prepare=True)
        assert cur.fetchall() == [(1,)]
    with n.connect(cluster_db) as conn, conn.pipeline() as p, conn.cursor() as cur:
        # the rest of the batch is skipped after the error; psycopg reports it at the next
        # execute or at the sync, depending on when it arrives
        cur.execute("SELECT aaaa")
        raised = []
        for step in (lambda: cur.execute("SELECT 123"), p.sync):
            try:
                step()
            except psycopg.Error as e:
                raised.append(type(e))
        assert psycopg.errors.UndefinedColumn in raised
        cur.execute("SELECT 1", prepare=True)
        assert cur.fetchall() == [(1,)]


def test_failed_prepare_is_not_remembered(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c:
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT * FROM doesnotexistyet", prepare=True)
        c.execute("CREATE TABLE doesnotexistyet (a int)")
        c.execute("SELECT * FROM doesnotexistyet", prepare=True)
        c.execute("DROP TABLE doesnotexistyet")
    with n.connect(cluster_db) as conn, conn.pipeline() as p, conn.cursor() as cur:
        cur.execute("SELECT 1", prepare=True)
        raised = []     # psycopg reports the failed Parse wherever its answer has arrived
        for step in (lambda: cur.execute("SELECT * FROM doesnotexistyet", prepare=True),
                     lambda: cur.execute("SELECT 2", prepare=True), p.sync):
            try:
                step()
            except psycopg.Error as e:
                raised.append(type(e))
        assert psycopg.errors.UndefinedTable in raised
        cur.execute("SELECT 1", prepare=True)
        p.sync()
        cur.execute("SELECT 2", prepare=True)
        p.sync()
        cur.execute("CREATE TABLE doesnotexistyet (a int)")
        cur.execute("SELECT * FROM doesnotexistyet", prepare=True)
        p.sync()
        cur.execute("DROP TABLE doesnotexistyet")


def test_name_reuse_closes_the_client(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c:
        _prepare(c, b"test", b"SELECT 1")
        res = c.pgconn.prepare(b"test", b"SELECT 1")
        assert res.status == pq.ExecStatus.FATAL_ERROR
        assert c.pgconn.status == pq.ConnStatus.BAD
    n.wait_log("prepared statement 'test' was already prepared")


def test_pipeline_with_half_pkt_buf_prepares(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db)
    with n.connect(cluster_db) as c:
        pg = c.pgconn
        pg.enter_pipeline_mode()
        pg.send_prepare(b"p1", f"SELECT 'a{'1' * (PKT_BUF // 2)}'".encode())
        pg.send_prepare(b"p2", f"SELECT 'b{'2' * (PKT_BUF // 2)}'".encode())
        pg.pipeline_sync()
        assert pg.get_result().status == pq.ExecStatus.COMMAND_OK
        assert pg.get_result() is None
        assert pg.get_result().status == pq.ExecStatus.COMMAND_OK
        assert pg.get_result() is None
        assert pg.get_result().status == pq.ExecStatus.PIPELINE_SYNC
        pg.exit_pipeline_mode()
        # a Parse exactly pkt_buf long after a small Flush
        name = b"p" * (PKT_BUF - (1 + 4 + len(b"SELECT 1") + 1 + 2) - 1)
        pg.enter_pipeline_mode()
        pg.send_flush_request()
        pg.send_prepare(name, b"SELECT 1")
        pg.pipeline_sync()
        assert pg.get_result().status == pq.ExecStatus.COMMAND_OK
        assert pg.get_result() is None
        assert pg.get_result().status == pq.ExecStatus.PIPELINE_SYNC
        pg.exit_pipeline_mode()


def test_link_kept_while_requests_are_in_flight(pg_cluster, cluster_db, neki):
    """Transaction mode: a Sync's ReadyForQuery does not release the link while the client
    has sent more on it (pgbouncer #714)."""
    n = start(neki, pg_cluster, cluster_db, mode="transaction", workers=1,
              default_pool_size=2)
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        pg = c1.pgconn
        pg.enter_pipeline_mode()
        pg.send_prepare(b"", b"SELECT $1::text")
        pg.send_query_prepared(b"", [b"a"])
        pg.pipeline_sync()
        pg.send_prepare(b"", b"SELECT $1::text")
        pg.flush()
        with c2.transaction():
            c2.execute("SELECT 1")
            pg.send_query_prepared(b"", [b"b"])
            pg.pipeline_sync()
            got = []
            for _ in range(10):
                r = pg.get_result()
                got.append(None if r is None else r.status)
                if len([g for g in got if g == pq.ExecStatus.PIPELINE_SYNC]) == 2:
                    break
            S = pq.ExecStatus
            assert got == [S.COMMAND_OK, None, S.TUPLES_OK, None, S.PIPELINE_SYNC,
                           S.COMMAND_OK, None, S.TUPLES_OK, None, S.PIPELINE_SYNC]


def _stats(n, db):
    return next((r for r in admin(n, "SHOW STATS", dicts=True) if r["database"] == db), None)


def test_prepared_statement_counters(pg_cluster, cluster_db, neki):
    n = start(neki, pg_cluster, cluster_db, mode="transaction", workers=1)
    admin(n, "SET max_prepared_statements = 0")
    with n.connect(cluster_db) as c:
        for _ in range(2):
            with c.transaction():
                for _ in range(3):
                    c.execute("SELECT 1")
    admin(n, "SET max_prepared_statements = 10")
    with n.connect(cluster_db) as c1, n.connect(cluster_db) as c2:
        c1.execute("SELECT 1", prepare=True)
        c1.execute("SELECT 1")
        c1.execute("SELECT 1")
        with c2.transaction():
            c2.execute("SELECT 2")
            c1.execute("SELECT 1")
            c2.execute("SELECT 1", prepare=True)

    def counted():
        s = _stats(n, cluster_db)
        return s is not None and (s["total_client_parse_count"], s["total_server_parse_count"],
                                  s["total_bind_count"]) == (2, 2, 5)
    try:
        wait_until(counted, 5, what="parse/bind counters")
    except TimeoutError:
        raise AssertionError(f"SHOW STATS: {_stats(n, cluster_db)}") from None
