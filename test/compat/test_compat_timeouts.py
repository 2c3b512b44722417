"""
Timeouts as pgbouncer's test_timeouts.py exercises them (pgbcompat.py's test bed):
server_lifetime (global and per database), server_idle_timeout, query_timeout,
idle_transaction_timeout (counted from the end of the last query: pgbouncer issue #125),
transaction_timeout, client_idle_timeout, the [users] overrides of each (a user's value
wins over the global one), server_login_retry with the server coming back, and
server_connect_timeout. Each closes with pgbouncer's log line and client message.
"""
import threading
import time

import pytest

from conftest import wait_until
from pgbcompat import bouncer, pgb_pg  # noqa: F401 (fixtures)

try:
    import psycopg
except ImportError:
    psycopg = None

GONE = r"server closed the connection unexpectedly|Software caused connection abort"


def _user_config(bouncer, user_line, extra=""):
    pg = f"host=127.0.0.1 port={bouncer.pg.port('shard-a')}"
    return bouncer.config_block(f"postgres = {pg}", "pool_mode = session\n" + extra,
                                users=user_line)


def test_server_lifetime(bouncer):
    bouncer.admin("SET server_lifetime = 1")
    bouncer.test()
    assert bouncer.connection_count() == 1
    wait_until(lambda: bouncer.connection_count() == 0, 10, what="server_lifetime")
    bouncer.test()


def test_server_lifetime_of_the_database(bouncer):
    bouncer.test(dbname="p9")          # p9: server_lifetime = 2
    assert bouncer.connection_count() == 1
    wait_until(lambda: bouncer.connection_count() == 0, 10, what="p9's server_lifetime")


def test_server_idle_timeout(bouncer):
    bouncer.admin("SET server_idle_timeout = 1")
    bouncer.test()
    assert bouncer.connection_count() == 1
    wait_until(lambda: bouncer.connection_count() == 0, 10, what="server_idle_timeout")


def test_query_timeout(bouncer):
    bouncer.admin("SET query_timeout = 1")
    with bouncer.log_contains(r"query timeout"):
        with pytest.raises(psycopg.OperationalError, match=GONE):
            bouncer.sql("SELECT pg_sleep(5)")


@pytest.mark.parametrize("user_value,global_value,closed", [
    (1, None, True), (1, 100000, True), (10, None, False)])
def test_user_query_timeout(bouncer, user_value, global_value, closed):
    extra = f"query_timeout = {global_value}" if global_value else ""
    cfg = _user_config(bouncer, f"puser1 = pool_mode=statement query_timeout={user_value}",
                       extra)
    with bouncer.run_with_config(cfg):
        if closed:
            with bouncer.log_contains(r"query timeout"):
                with pytest.raises(psycopg.OperationalError, match=GONE):
                    bouncer.sql("SELECT pg_sleep(3)", user="puser1", dbname="postgres")
        else:
            bouncer.sql("SELECT pg_sleep(2)", user="puser1", dbname="postgres")


def _idle_in_transaction(bouncer, seconds, **kw):
    with bouncer.conn(autocommit=False, **kw) as c:
        c.execute("SELECT 1")
        time.sleep(seconds)
        c.execute("SELECT 1")


def test_idle_transaction_timeout(bouncer):
    bouncer.admin("SET pool_mode = transaction")
    bouncer.admin("SET idle_transaction_timeout = 1")
    with bouncer.log_contains(r"closing because: idle transaction timeout"):
        with pytest.raises(psycopg.OperationalError, match=GONE):
            _idle_in_transaction(bouncer, 3)
    # pgbouncer #125: idle counts from the end of the last query, not from its start
    with bouncer.conn(autocommit=False) as c:
        c.execute("SELECT pg_sleep(2)").fetchone()
        time.sleep(0.5)
        c.execute("SELECT 1")


@pytest.mark.parametrize("user_value,global_value,closed", [
    (1, None, True), (1, 100000, True), (6, None, False)])
def test_user_idle_transaction_timeout(bouncer, user_value, global_value, closed):
    extra = f"idle_transaction_timeout = {global_value}" if global_value else ""
    cfg = _user_config(bouncer, f"puser1 = pool_mode=transaction "
                                f"idle_transaction_timeout={user_value}", extra)
    with bouncer.run_with_config(cfg):
        if closed:
            with bouncer.log_contains(r"idle transaction timeout"):
                with pytest.raises(psycopg.OperationalError, match=GONE):
                    _idle_in_transaction(bouncer, 3, dbname="postgres", user="puser1")
        else:
            _idle_in_transaction(bouncer, 2, dbname="postgres", user="puser1")


def test_transaction_timeout(bouncer):
    bouncer.admin("SET pool_mode = transaction")
    bouncer.admin("SET transaction_timeout = 2")
    with bouncer.log_contains(r"closing because: transaction timeout"):
        with pytest.raises(psycopg.OperationalError, match=GONE):
            with bouncer.conn(autocommit=False) as c:
                c.execute("")
                time.sleep(3)
                c.execute("")


def test_transaction_timeout_of_a_user(bouncer):
    cfg = _user_config(bouncer, "puser1 = pool_mode=transaction transaction_timeout=2")
    with bouncer.run_with_config(cfg):
        with bouncer.log_contains(r"transaction timeout"):
            with pytest.raises(psycopg.OperationalError, match=GONE):
                with bouncer.conn(autocommit=False, dbname="postgres", user="puser1") as c:
                    c.execute("")
                    time.sleep(3)
                    c.execute("")
        # a transaction that ends in time is left alone
        with bouncer.conn(autocommit=False, dbname="postgres", user="puser1") as c:
            c.execute("SELECT 1")
            c.commit()


def test_client_idle_timeout(bouncer):
    bouncer.admin("SET client_idle_timeout = 1")
    with bouncer.conn() as c:
        c.execute("SELECT 1")
        with bouncer.log_contains(r"client_idle_timeout"):
            time.sleep(2.5)
            with pytest.raises(psycopg.OperationalError, match=GONE):
                c.execute("SELECT 1")


@pytest.mark.parametrize("user_value,global_value,closed", [
    (1, None, True), (1, 1000000, True), (6, None, False)])
def test_user_client_idle_timeout(bouncer, user_value, global_value, closed):
    extra = f"client_idle_timeout = {global_value}" if global_value else ""
    cfg = _user_config(bouncer, f"puser1 = pool_mode=transaction "
                                f"client_idle_timeout={user_value}", extra)
    with bouncer.run_with_config(cfg):
        with bouncer.conn(dbname="postgres", user="puser1") as c:
            c.execute("SELECT 1")
            if closed:
                with bouncer.log_contains(r"client_idle_timeout"):
                    time.sleep(2.5)
                    with pytest.raises(psycopg.OperationalError, match=GONE):
                        c.execute("SELECT 1")
            else:
                time.sleep(2)
                c.execute("SELECT 1")


def test_server_login_retry_while_the_server_restarts(bouncer):
    """The server is down when the client comes; the client waits, and is served once the
    server is back (server_login_retry = 1 s between attempts)."""
    bouncer.admin("SET query_timeout = 10")
    bouncer.admin("SET server_login_retry = 1")
    bouncer.admin("SET server_tls_sslmode = disable")
    bouncer.pg.stop_server("shard-a")
    started = threading.Event()

    def restart():
        time.sleep(1)
        bouncer.pg.start_server("shard-a")
        started.set()

    t = threading.Thread(target=restart)
    try:
        with bouncer.log_contains("connect failed"):
            t.start()
            bouncer.test(connect_timeout=15)
    finally:
        t.join(30)
        if not started.is_set():
            bouncer.pg.start_server("shard-a")


def test_server_connect_timeout(bouncer):
    """A server that accepts but never answers the startup: the link is closed after
    server_connect_timeout ("connect timeout") and the waiting client gets query_timeout."""
    import socket
    silent = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    port = silent.getsockname()[1]
    try:
        cfg = bouncer.config_block(f"silent = host=127.0.0.1 port={port} dbname=postgres",
                                   "query_timeout = 3\nserver_connect_timeout = 1\n"
                                   "server_tls_sslmode = disable")
        with bouncer.run_with_config(cfg):
            with bouncer.log_contains(r"closing because: connect timeout"):
                with pytest.raises(psycopg.OperationalError, match="query_timeout"):
                    bouncer.test(dbname="silent")
    finally:
        silent.close()
