"""
Pool and client limits as pgbouncer's test_limits.py exercises them (pgbcompat.py's test
bed): max_client_conn, pool_size per user / database / global (and a reload of it),
min_pool_size (with a forced user, without clients; without one, once a client comes),
capped by max_user_connections / max_db_connections without evictions,
max_user_client_connections and SHOW USERS, reserve_pool_size, max_db_connections and
max_user_connections, and two databases whose names shared a counter under the old hashed
ids (each has its own pool_size and max_db_client_connections now). The server's
pg_stat_activity is the judge of server connections.

Exact server connection counts are pgbouncer's with one worker (one process holding every
link, as pgbouncer); with several workers the limits are global and hold as caps, but a
worker gives its idle links up for another worker's waiting clients, so how many stay open
after a burst depends on where the clients landed (test_limits_are_global_caps).
"""
import asyncio
import re
import time

import pytest
from psycopg.rows import dict_row

from conftest import wait_until
from pgbcompat import SERVER, bouncer, one_worker_bouncer, pgb_pg  # noqa: F401 (fixtures)

try:
    import psycopg
except ImportError:
    psycopg = None


async def asql(bouncer, query, **kw):
    opts = bouncer._opts(kw)
    async with await psycopg.AsyncConnection.connect(autocommit=True, **opts) as conn:
        await conn.execute(query)


async def asleep(bouncer, seconds, times=1, **kw):
    await asyncio.gather(*[asql(bouncer, f"SELECT pg_sleep({seconds})", **kw)
                           for _ in range(times)])


def run(coro):
    return asyncio.run(coro)


def _users_row(bouncer, name):
    return [u for u in bouncer.admin("SHOW USERS") if u[0] == name][0]


def test_max_client_conn(bouncer):
    bouncer.default_db = "p1"
    bouncer.admin("SET max_client_conn = 5")

    async def scenario():
        held = [await psycopg.AsyncConnection.connect(autocommit=True, **bouncer._opts({}))
                for _ in range(5)]      # the last one allowed
        try:
            with pytest.raises(psycopg.OperationalError, match=r"max_client_conn"):
                await asql(bouncer, "SELECT 1")
        finally:
            for c in held:
                await c.close()
        await asql(bouncer, "SELECT 1")  # a slot came free
    run(scenario())


def test_pool_sizes(one_worker_bouncer):
    bouncer = one_worker_bouncer
    run(asleep(bouncer, 0.5, dbname="p0a", user="poolsize1", times=3))
    assert bouncer.connection_count("p0", users=("poolsize1",)) == 1      # [users] pool_size
    run(asleep(bouncer, 0.5, dbname="p0", user="poolsize1", times=5))
    assert bouncer.connection_count("p0", users=("bouncer",)) == 2        # forced user: db's
    run(asleep(bouncer, 0.5, times=5))
    assert bouncer.connection_count("p0") == 2                           # db pool_size
    bouncer.default_db = "p1"
    run(asleep(bouncer, 0.5, times=10))
    assert bouncer.connection_count("p1") == 5                           # default_pool_size
    bouncer.admin("SET default_pool_size = 7")                           # pgbouncer #248
    run(asleep(bouncer, 0.5, times=10))
    assert bouncer.connection_count("p1") == 7


def test_min_pool_size_with_forced_user_needs_no_client(one_worker_bouncer):
    bouncer = one_worker_bouncer
    text = re.sub(r"^;p0z = (.+)", r"p0z = \g<1>", bouncer.config_text(), flags=re.M)
    bouncer.write_config(text)
    bouncer.admin("RELOAD")
    wait_until(lambda: bouncer.connection_count("p0", users=("pswcheck",)) == 3, 10,
               what="min_pool_size connections of the forced user")
    assert bouncer.connection_count("p0", users=("bouncer",)) == 0
    assert bouncer.connection_count("p0", users=("postgres",)) == 0
    # without a forced user the pool fills once a client uses it

    async def scenario():
        task = asyncio.ensure_future(asleep(bouncer, 2, dbname="p0x"))
        await asyncio.sleep(0.1)
        wait_until(lambda: bouncer.connection_count("p0", users=("postgres",)) == 5, 10,
                   what="p0x's min_pool_size")
        await task
    run(scenario())
    assert bouncer.connection_count("p0", users=("pswcheck",)) == 3


@pytest.mark.parametrize("db,user", [("p0x", "maxedout2"), ("p0y", "puser1")])
def test_min_pool_size_capped_by_limits(one_worker_bouncer, db, user):
    """p0x / p0y want 5 connections; max_user_connections = 2 (maxedout2) or
    max_db_connections = 2 (p0y) caps them at 2, without evicting anything."""
    bouncer = one_worker_bouncer
    with bouncer.log_contains(r"new connection to server \(from", times=2):
        with bouncer.log_contains("closing because: evicted", times=0):
            bouncer.sql("SELECT pg_sleep(2)", dbname=db, user=user)


def test_max_user_client_connections(bouncer):
    async def scenario():
        first = await psycopg.AsyncConnection.connect(autocommit=True,
                                                      **bouncer._opts({"user": "maxedout3"}))
        assert _users_row(bouncer, "maxedout3") == ("maxedout3", "", "", None, 0, 0, 2, 1)
        second = await psycopg.AsyncConnection.connect(
            autocommit=True, **bouncer._opts({"user": "maxedout3"}))   # the last allowed
        assert _users_row(bouncer, "maxedout3")[-1] == 2
        with pytest.raises(psycopg.OperationalError, match=r"max_user_client_connections"):
            await asql(bouncer, "SELECT 1", user="maxedout3")
        await first.close()
        await second.close()
    run(scenario())


def test_show_users_lists_auth_file_users(bouncer):
    """SHOW USERS lists every user neki knows, as pgbouncer: the auth_file's too."""
    names = [u[0] for u in bouncer.admin("SHOW USERS")]
    assert names == sorted(names)
    for name in ("marko", "pgbouncer", "puser1", "maxedout3", "pswcheck_not_in_auth_file"):
        assert name in names
    assert _users_row(bouncer, "marko") == ("marko", "", "", None, 0, 0, 0, 0)
    assert _users_row(bouncer, "poolsize1")[1] == "        1"


def test_reserve_pool(one_worker_bouncer):
    bouncer = one_worker_bouncer
    bouncer.admin("SET reserve_pool_size = 3")
    bouncer.admin("SET reserve_pool_timeout = 2")
    bouncer.admin("SET server_tls_sslmode = disable")

    async def scenario():
        with bouncer.log_contains(r"C-0x[0-9a-f]+: p1/postgres@127\.0\.0\.1:\d+ taking "
                                  r"connection from reserve_pool", times=3):
            task = asyncio.ensure_future(asleep(bouncer, 6, dbname="p1", times=10))
            await asyncio.sleep(0.5)
            # (>=: on a loaded machine the pool may pass 5 on its way to 8 between two polls)
            wait_until(lambda: bouncer.connection_count("p1") >= 5, 10, what="pool_size")
            wait_until(lambda: bouncer.connection_count("p1") == 8, 10,
                       what="the reserve pool after reserve_pool_timeout")
            await task
    run(scenario())


def test_max_db_connections(one_worker_bouncer):
    bouncer = one_worker_bouncer
    users = ["muser1", "muser2", "puser1", "puser2", "postgres"]

    async def scenario():
        await asyncio.gather(*[asleep(bouncer, 0.5, dbname="p2", user=u, times=2)
                               for u in users])
    run(scenario())
    assert bouncer.connection_count("p0", users=users) == 4     # p2: max_db_connections = 4


def test_max_user_connections(one_worker_bouncer):
    bouncer = one_worker_bouncer
    async def scenario():
        await asyncio.gather(*[asleep(bouncer, 0.5, dbname=db, user="maxedout", times=3)
                               for db in ("p7a", "p7b", "p7c")])
    run(scenario())
    assert bouncer.connection_count("p7", users=["maxedout"]) == 3


def test_limits_are_global_caps(bouncer):
    """With two workers the same bursts never open more than the limits allow."""
    # The first logins of a pool, before any server of it logged in (in any worker), wait
    # for a link to learn the server's parameters, and the bursts hold the links: under
    # load that wait can pass test.ini's 5 s. The caps are the point here.
    bouncer.admin("SET client_login_timeout = 30")
    run(asleep(bouncer, 0.5, dbname="p0", user="poolsize1", times=5))
    assert bouncer.connection_count("p0", users=("bouncer",)) <= 2
    users = ["muser1", "muser2", "puser1", "puser2", "postgres"]

    async def scenario():
        await asyncio.gather(*[asleep(bouncer, 0.5, dbname="p2", user=u, times=2)
                               for u in users])
    run(scenario())
    assert 1 <= bouncer.connection_count("p0", users=users) <= 4


def _on_worker(bouncer, worker, seconds=20, **kw):
    """A session of <kw> that landed on <worker> (by the slot its BackendKeyData encodes:
    pid = (slot + 1) << 20 | counter); connects until one does, within a deadline."""
    deadline = time.monotonic() + seconds
    while True:
        assert time.monotonic() < deadline, f"no session on worker {worker}"
        c = bouncer.conn(**kw)
        if (c.info.backend_pid >> 20) - 1 == worker:
            return c
        c.close()


def _takes_the_one_link(bouncer, first, second):
    """<first> (worker 0) and <second> (worker 1): sessions of two pools that share a limit of
    one server link. Each statement in turn gets it at once, where a client of the other
    worker's pool left it idle: the worker holding it evicts it for that client (pgbouncer's
    one process evicts it for its own)."""
    bouncer.admin("SET query_wait_timeout = 10")
    c0 = _on_worker(bouncer, 0, **first)
    c1 = _on_worker(bouncer, 1, **second)
    try:
        with bouncer.log_contains("evicted for a client waiting in another worker"):
            for _ in range(2):
                for c in (c0, c1):
                    t0 = time.monotonic()
                    assert c.execute("SELECT 1").fetchone() == (1,)
                    assert time.monotonic() - t0 < 3, "waited for the other worker's link"
    finally:
        c0.close()
        c1.close()


def test_db_limit_evicts_across_workers(bouncer):
    """max_db_connections = 1, two users on two workers (test_limits_are_global_caps' burst
    once waited out its connect timeout this way)."""
    entry = f"port={bouncer.pg.port(SERVER)} host=127.0.0.1 dbname=p0 max_db_connections=1"
    bouncer.write_config(bouncer.config_text().replace(
        "[users]\n", f"onelink = {entry}\n\n[users]\n", 1))
    bouncer.admin("RELOAD")
    _takes_the_one_link(bouncer, dict(dbname="onelink", user="puser1"),
                        dict(dbname="onelink", user="puser2"))
    assert bouncer.connection_count("p0", users=["puser1", "puser2"]) <= 1


def test_user_limit_evicts_across_workers(bouncer):
    """max_user_connections = 1, one user on two databases on two workers."""
    bouncer.write_config(bouncer.config_text().replace(
        "[users]\n", "[users]\npuser1 = max_user_connections=1\n", 1))
    bouncer.admin("RELOAD")
    _takes_the_one_link(bouncer, dict(dbname="p0a", user="puser1"),
                        dict(dbname="p2", user="puser1"))
    assert bouncer.connection_count("p0", users=["puser1"]) <= 1


# Two database names that shared both their pool counter (user postgres) and their
# max_db_client_connections counter when spool.c hashed names into buckets (before the shm
# name registry): spool_hash2(db, user) % 256 and spool_hash2(db, NULL) % 63.
COLLIDING = ("cky", "cpd")


def _old_spool_hash2(a, b=None):
    """spool.c's old FNV-1a of <a>, a 0xff separator and <b>."""
    h, mask, prime = 14695981039346656037, (1 << 64) - 1, 1099511628211
    for c in a.encode() + b"\xff" + (b or "").encode():
        h = ((h ^ c) * prime) & mask
    return h


def _add_colliding(bouncer, params):
    """Add COLLIDING as two databases on the server's p0, each with <params>; RELOAD."""
    a, b = COLLIDING
    assert _old_spool_hash2(a, "postgres") % 256 == _old_spool_hash2(b, "postgres") % 256
    assert _old_spool_hash2(a) % 63 == _old_spool_hash2(b) % 63
    entry = f"port={bouncer.pg.port(SERVER)} host=127.0.0.1 dbname=p0 {params}"
    text = bouncer.config_text().replace("[users]\n", f"{a} = {entry}\n{b} = {entry}\n\n"
                                         "[users]\n", 1)
    bouncer.write_config(text)
    bouncer.admin("RELOAD")
    return a, b


def test_colliding_names_have_their_own_pool_size(bouncer):
    """pool_size = 1 each: a transaction on each database at once both run (with a shared
    counter the second one waited into query_wait_timeout)."""
    a, b = _add_colliding(bouncer, "pool_mode=transaction pool_size=1")
    bouncer.admin("SET query_wait_timeout = 3")
    ca = bouncer.conn(dbname=a, autocommit=False)
    cb = bouncer.conn(dbname=b, autocommit=False)
    try:
        assert ca.execute("SELECT 1").fetchone() == (1,)     # holds a's one link
        assert cb.execute("SELECT 2").fetchone() == (2,)     # b's own link, no wait
        ca.commit()
        cb.commit()
    finally:
        ca.close()
        cb.close()


def test_colliding_names_have_their_own_client_limit(bouncer):
    """max_db_client_connections = 1 each: one client on each database, and still not two
    on one (with a shared counter the client of the second database was refused)."""
    a, b = _add_colliding(bouncer, "max_db_client_connections=1")
    ca = bouncer.conn(dbname=a)
    try:
        assert bouncer.sql_value("SELECT 1", dbname=b) == 1
        with pytest.raises(psycopg.OperationalError, match=r"max_db_client_connections"):
            bouncer.test(dbname=a)
    finally:
        ca.close()


def _db_row(bouncer, name):
    return next(r for r in bouncer.admin("SHOW DATABASES", row_factory=dict_row)
                if r["name"] == name)


def _entries_with_zero_limits(bouncer):
    """[databases] pz and [users] bouncer with per-entry limits 0 ("use the global one")."""
    entry = f"port={bouncer.pg.port(SERVER)} host=127.0.0.1 dbname=p0 pool_mode=session"
    text = bouncer.config_text().replace(
        "[users]\n", f"pz = {entry} max_db_connections=0 max_db_client_connections=0\n\n"
        "[users]\nbouncer = max_user_connections=0 max_user_client_connections=0\n", 1)
    bouncer.write_config(text)
    bouncer.admin("RELOAD")


def test_zero_per_entry_limits_mean_the_global_ones(bouncer):
    """An entry's limit of 0 (or less) is pgbouncer's "use the global value": shown and
    enforced so, in SHOW DATABASES' every row (the admin database's too) and SHOW USERS."""
    _entries_with_zero_limits(bouncer)
    bouncer.admin("SET max_db_connections = 7")
    bouncer.admin("SET max_db_client_connections = 2")
    for name in ("pz", "pgbouncer"):
        row = _db_row(bouncer, name)
        assert (row["max_connections"], row["max_client_connections"]) == (7, 2), row
    # (2, not 1: a console session may overlap the one before it, which is still closing)
    with bouncer.conn(dbname="pz", user="postgres"), bouncer.conn(dbname="pz", user="postgres"):
        with pytest.raises(psycopg.OperationalError,
                           match=r"client connections exceeded \(max_db_client_connections\)"):
            bouncer.test(dbname="pz", user="postgres")
    bouncer.admin("SET max_db_client_connections = 0")
    bouncer.admin("SET max_user_connections = 11")
    bouncer.admin("SET max_user_client_connections = 1")
    assert _users_row(bouncer, "bouncer")[4::2] == (11, 1)
    with bouncer.conn(dbname="p3x", user="bouncer"):
        with pytest.raises(psycopg.OperationalError,
                           match=r"client connections exceeded \(max_user_client_connections\)"):
            bouncer.test(dbname="p3x", user="bouncer")


def test_admin_database_row_shows_the_global_settings(bouncer):
    """pgbouncer's admin row: pool_size 2, statement mode, forced user pgbouncer, the global
    server_lifetime and limits; the rows sorted by name; pool_mode NULL unless set."""
    bouncer.admin("SET max_db_connections = 5")
    bouncer.admin("SET max_db_client_connections = 6")
    rows = bouncer.admin("SHOW DATABASES", row_factory=dict_row)
    assert [r["name"] for r in rows] == sorted(r["name"] for r in rows)
    admin = _db_row(bouncer, "pgbouncer")
    assert (admin["pool_size"], admin["pool_mode"], admin["force_user"],
            admin["server_lifetime"], admin["max_connections"],
            admin["max_client_connections"]) == (2, "statement", "pgbouncer", 120, 5, 6)
    assert _db_row(bouncer, "p0")["pool_mode"] is None
    assert _db_row(bouncer, "p3")["pool_mode"] == "session"


def test_console_logins_count_toward_the_database_limit(bouncer):
    """Console sessions count toward the admin database's max_db_client_connections and are
    refused past it, unless the login user is in admin_users (the local pgbouncer user's
    login user is pgbouncer)."""
    bouncer.admin("SET max_db_client_connections = 2")
    with bouncer.admin_conn() as first:
        wait_until(lambda: _in_use(first, "pgbouncer") == (2, 1), 5,
                   what="the console session of the SET gone")
        with bouncer.admin_conn():
            assert _in_use(first, "pgbouncer") == (2, 2)
            with pytest.raises(psycopg.OperationalError, match=r"client connections "
                               r"exceeded \(max_db_client_connections\)"):
                bouncer.admin("SHOW VERSION")
            first.execute("SET admin_users = 'pgbouncer'")
            assert bouncer.admin_value("SHOW VERSION").startswith("PgBouncer")
            first.execute("SET admin_users = 'postgres'")
            wait_until(lambda: _in_use(first, "pgbouncer") == (2, 2), 5,
                       what="the exempt console session gone")
            with bouncer.log_contains(r"closing because: client connections exceeded "
                                      r"\(max_db_client_connections\)"):
                with pytest.raises(psycopg.OperationalError, match="max_db_client_conn"):
                    bouncer.admin("SHOW VERSION")
        wait_until(lambda: _console_answers(bouncer), 5, what="the units given back")


def _console_answers(bouncer):
    try:
        return bouncer.admin_value("SHOW VERSION").startswith("PgBouncer")
    except psycopg.OperationalError:
        return False


def _in_use(conn, name):
    row = next(r for r in conn.execute("SHOW DATABASES").fetchall() if r[0] == name)
    return row[13], row[14]     # max_client_connections, current_client_connections


def test_console_logins_count_toward_the_user_limit(bouncer):
    """A console login counts toward its user's max_user_client_connections (the local
    pgbouncer user does not), refused past it unless the user is in admin_users."""
    bouncer.admin("SET stats_users = 'marko'")
    bouncer.admin("SET admin_users = 'postgres'")
    bouncer.admin("SET max_user_client_connections = 1")
    tcp = {"host": "127.0.0.1", "dbname": "pgbouncer"}
    with bouncer.admin_conn(), bouncer.admin_conn():    # not counted per user
        with psycopg.connect(autocommit=True, **bouncer._opts(dict(tcp, user="marko"))):
            with pytest.raises(psycopg.OperationalError, match=r"client connections "
                               r"exceeded \(max_user_client_connections\)"):
                psycopg.connect(**bouncer._opts(dict(tcp, user="marko")))
        with psycopg.connect(autocommit=True, **bouncer._opts(dict(tcp, user="postgres"))):
            with psycopg.connect(autocommit=True,
                                 **bouncer._opts(dict(tcp, user="postgres"))) as c:
                assert c.execute("SHOW VERSION").fetchone()[0].startswith("PgBouncer")


def test_console_is_not_refused_by_max_client_conn(bouncer):
    """pgbouncer counts console sessions in max_client_conn but never refuses one for it."""
    bouncer.admin("SET max_client_conn = 2")
    with bouncer.conn(dbname="p3"), bouncer.conn(dbname="p3"):
        with pytest.raises(psycopg.OperationalError, match=r"max_client_conn"):
            bouncer.test(dbname="p3")
        assert bouncer.admin_value("SHOW VERSION").startswith("PgBouncer")
