"""Parse and Close from a client that holds no link (transaction pooling with
max_prepared_statements), as libpq's PQprepare sends them: Parse + Sync.

neki answers such a batch itself when every statement in it already parsed on a link of the
pool, and when the pool has no room (every link held, none can be opened): a driver blocked
on the answer must not wait behind clients that hold the links mid-transaction (pgbench -M
prepared runs several clients per thread). The statement is then parsed on the link of its
first Bind. With room in the pool the batch goes to a server, so a bad statement fails at its
Parse as on Postgres."""
import time

import psycopg
import pytest

from conftest import wait_until
from pgwire import Wire, bind, close, execute, parse, summary, sync


@pytest.fixture
def one_link(pg_cluster, cluster_db, neki):
    """neki with one link for the database, one worker, transaction pooling."""
    return neki(settings={"pool_mode": "transaction", "default_pool_size": 1, "workers": 1,
                          "max_prepared_statements": 10, "query_wait_timeout": 20,
                          "admin_users": "postgres"},
                databases=f"{cluster_db} = host=127.0.0.1 "
                          f"port={pg_cluster.port('shard-a')} dbname={cluster_db}")


def wire(n, db):
    w = Wire(n.port)
    w.login(user="postgres", database=db)
    return w


def waiting_clients(n, db):
    with n.admin_connect() as a:
        cur = a.execute("SHOW POOLS", prepare=False)
        cols = [d.name for d in cur.description]
        rows = [dict(zip(cols, r)) for r in cur.fetchall()]
    return sum(r["cl_waiting"] for r in rows if r["database"] == db)


def test_known_statement_needs_no_link(one_link, cluster_db):
    n, db = one_link, cluster_db
    with n.connect(dbname=db) as holder:
        holder.pgconn.prepare(b"first", b"select 10 + $1::int")  # parses on the only link
        holder.execute("begin")
        holder.execute("select 1")              # the link is held, in a transaction
        w = wire(n, db)
        # the same text under another name: answered at once, no link taken
        w.raw(parse("mine", "select 10 + $1::int") + sync())
        assert summary(w.read_until("Z")) == [("1",), ("Z", "I")]
        assert waiting_clients(n, db) == 0
        # its Bind needs the link: it waits until the holder commits
        w.raw(bind("", "mine", ["5"]) + execute() + sync())
        wait_until(lambda: waiting_clients(n, db) == 1, 10, what="the Bind to wait")
        holder.execute("commit")
        assert summary(w.read_until("Z")) == [("2",), ("D", ["15"]), ("C", "SELECT 1"),
                                              ("Z", "I")]
        w.close()


def test_full_pool_defers_the_parse_to_first_bind(one_link, cluster_db):
    n, db = one_link, cluster_db
    with n.connect(dbname=db) as holder:
        holder.execute("begin")
        holder.execute("select 1")
        w = wire(n, db)
        # never parsed anywhere, no room in the pool: answered here (with a Close of a
        # name the client never had, as a server answers it)
        w.raw(parse("good", "select 42") + parse("bad", "selec oops") + close("S", "none") +
              sync())
        assert summary(w.read_until("Z")) == [("1",), ("1",), ("3",), ("Z", "I")]
        holder.execute("commit")
    w.raw(bind("", "good") + execute() + sync())
    assert summary(w.read_until("Z")) == [("2",), ("D", ["42"]), ("C", "SELECT 1"),
                                          ("Z", "I")]
    # the bad one fails where it is first used, and the session goes on
    w.raw(bind("", "bad") + execute() + sync())
    assert summary(w.read_until("Z")) == [("E", "42601"), ("Z", "I")]
    assert summary(w.query("select 3")) == [("T",), ("D", ["3"]), ("C", "SELECT 1"),
                                            ("Z", "I")]
    w.close()


def test_parse_with_room_fails_at_parse(one_link, cluster_db):
    n, db = one_link, cluster_db
    w = wire(n, db)
    w.query("select 1")     # a link, idle now: the Parse gets it at once
    w.raw(parse("bad", "selec oops") + sync())
    assert summary(w.read_until("Z")) == [("E", "42601"), ("Z", "I")]
    w.raw(parse("good", "select 4") + sync())
    assert summary(w.read_until("Z")) == [("1",), ("Z", "I")]
    w.raw(bind("", "good") + execute() + sync())
    assert summary(w.read_until("Z")) == [("2",), ("D", ["4"]), ("C", "SELECT 1"),
                                          ("Z", "I")]
    w.close()


def test_psycopg_prepare_while_links_are_held(one_link, cluster_db):
    """A driver's own prepare (psycopg's prepare=True) while another client holds the link:
    the statement is prepared and runs once the link is free."""
    n, db = one_link, cluster_db
    with n.connect(dbname=db) as holder, n.connect(dbname=db) as c:
        holder.execute("begin")
        holder.execute("select 1")
        res = c.pgconn.prepare(b"p1", b"select $1::int * 2")
        assert res.status == psycopg.pq.ExecStatus.COMMAND_OK
        holder.execute("commit")
        res = c.pgconn.exec_prepared(b"p1", [b"21"])
        assert res.status == psycopg.pq.ExecStatus.TUPLES_OK
        assert res.get_value(0, 0) == b"42"


def test_parse_wait_for_a_link_is_bounded(pg_cluster, cluster_db, neki):
    """The pool seems to have room (pool_size 2, one link in use) but no link can come
    (max_db_connections = 1): a Parse batch waits at most a moment for a link (SESS_PARSE_WAIT_US
    plus a janitor period), then neki answers it, as when the pool has no room."""
    n = neki(settings={"pool_mode": "transaction", "default_pool_size": 2,
                       "max_db_connections": 1, "workers": 1, "max_prepared_statements": 10,
                       "query_wait_timeout": 20, "admin_users": "postgres"},
             databases=f"{cluster_db} = host=127.0.0.1 port={pg_cluster.port('shard-a')} "
                       f"dbname={cluster_db}")
    with n.connect(dbname=cluster_db) as holder:
        holder.execute("begin")
        holder.execute("select 1")
        w = wire(n, cluster_db)
        t0 = time.monotonic()
        w.raw(parse("s", "select 5") + sync())
        assert summary(w.read_until("Z")) == [("1",), ("Z", "I")]
        assert time.monotonic() - t0 < 5, "the Parse waited for a link"
        holder.execute("commit")
    w.raw(bind("", "s") + execute() + sync())
    assert summary(w.read_until("Z")) == [("2",), ("D", ["5"]), ("C", "SELECT 1"), ("Z", "I")]
    w.close()
