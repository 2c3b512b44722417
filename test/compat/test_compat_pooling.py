"""Pool-side behaviours checked against pgbouncer 1.25.2 (issue 15, section 3). Every test
runs on the pgbouncer-style bed of pgbcompat.py, so it runs unchanged against the real
pgbouncer too (NEKI_BIN=<path of pgbouncer 1.25.2>):

  - server_check_query runs on a link released after use with server_check_delay = 0, or
    idle longer than server_check_delay; never on a link that has just logged in, and
    fetching the server parameters for a welcome is not a use;
  - a walsender the server refuses fails only its own client, with "login failed";
  - a remembered parameter the server canonicalised takes the server's form after the SET;
  - a pool reset forgets the welcome; the cached login error is for logged-in clients only;
  - one connection attempt per pool at a time.
"""
import re
import sys
import threading
import time
from pathlib import Path

import psycopg
import pytest

from conftest import neki_binary, wait_until
from pgbcompat import bouncer, pgb_pg, start_bouncer  # noqa: F401

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, errors_in  # noqa: E402


@pytest.fixture
def one_process(neki, pgb_pg):
    """The bed with one process: neki with workers = 1 (its links and server_login_retry
    state are a worker's, doc/operations.md), pgbouncer as it is."""
    yield start_bouncer(neki, pgb_pg, "" if "pgbouncer" in neki_binary().name else "workers = 1")


def add_config(bouncer, databases, settings=""):
    """Add [databases] lines and [pgbouncer] settings (the base ini's last section) to the
    ini and RELOAD. One section of each: pgbouncer starts from its defaults again at a
    second [pgbouncer] header."""
    text = bouncer.config_text().replace("[databases]\n", f"[databases]\n{databases}\n", 1)
    bouncer.write_config(text + settings + "\n")
    bouncer.admin("RELOAD")


def db_entry(bouncer, name, **keys):
    """A [databases] line for p0 on the test server as user bouncer (<keys> override)."""
    keys = {"port": bouncer.pg.port("shard-a"), "host": "127.0.0.1", "dbname": "p0",
            "user": "bouncer", **keys}
    return f"{name} = " + " ".join(f"{k}={v}" for k, v in keys.items())


# ---------------------------------------------------------------------------------------------
# server_check_query

@pytest.fixture
def check_seq(pgb_pg):
    """A sequence the check query advances: its value counts the checks that ran."""
    sql = lambda q: pgb_pg.sql("shard-a", q, dbname="p0")
    sql("DROP SEQUENCE IF EXISTS neki_check_seq")
    sql("CREATE SEQUENCE neki_check_seq")
    sql("GRANT USAGE ON SEQUENCE neki_check_seq TO bouncer")
    checks = lambda: sql("SELECT CASE WHEN is_called THEN last_value ELSE 0 END "
                         "FROM neki_check_seq")[0][0]
    yield checks
    sql("DROP SEQUENCE IF EXISTS neki_check_seq")


CHECK = "server_check_query = select nextval('neki_check_seq')"


def pipelined_login_query(bouncer, db, sql="select 1"):
    """A client that sends its startup and a query in one go (so that no janitor round falls
    between its welcome and its query); returns the open Wire and the query's messages."""
    w = Wire(bouncer.port)
    body = b"\0\3\0\0" + b"user\0bouncer\0database\0" + db.encode() + b"\0\0"
    w.raw(len(body + b"1234").to_bytes(4, "big") + body +
          b"Q" + (len(sql) + 5).to_bytes(4, "big") + sql.encode() + b"\0")
    w.read_until("Z")          # the welcome
    return w, w.read_until("Z")


def test_check_query_not_on_a_link_that_just_logged_in(bouncer, check_seq):
    """server_check_delay = 0: the first client's welcome and first query use the link that
    just logged in with no check; the link released after that use is checked before the
    next query."""
    add_config(bouncer, db_entry(bouncer, "chk0", pool_mode="transaction"),
               f"{CHECK}\nserver_check_delay = 0")
    w, msgs = pipelined_login_query(bouncer, "chk0")
    try:
        assert [m[0] for m in msgs] == ["T", "D", "C", "Z"]
        assert check_seq() == 0
        w.query("select 2")
        assert check_seq() == 1
        w.query("select 3")
        assert check_seq() == 2
    finally:
        w.close()


def test_check_query_after_idle_longer_than_the_delay(one_process, check_seq):
    """server_check_delay = 1: a link used again at once is not checked; one idle for longer
    than the delay is, also after its server_reset_query (session mode)."""
    bouncer = one_process
    add_config(bouncer, db_entry(bouncer, "chk1", pool_mode="session"),
               f"{CHECK}\nserver_check_delay = 1\nserver_reset_query = DISCARD ALL")
    bouncer.default_user = "bouncer"
    bouncer.test(dbname="chk1")            # login, use, reset at release
    bouncer.test(dbname="chk1")            # again at once: no check
    assert check_seq() == 0
    time.sleep(1.5)                        # idle longer than server_check_delay
    bouncer.test(dbname="chk1")
    assert check_seq() == 1


# ---------------------------------------------------------------------------------------------
# a replication login the server refuses

def own_role(pg, name):
    """A login role of the test's own on the test server (dropped afterwards)."""
    pg.sql("shard-a", f"DROP ROLE IF EXISTS {name}")
    pg.sql("shard-a", f"CREATE ROLE {name} LOGIN")
    yield name
    pg.sql("shard-a", f"DROP ROLE IF EXISTS {name}")


def allow_user(bouncer, name):
    """List <name> in the pooler's auth_file (RELOAD)."""
    with bouncer.auth_path.open("a") as f:
        f.write(f'"{name}" ""\n')
    bouncer.admin("RELOAD")


@pytest.fixture
def norepl_user(pgb_pg):
    """A login role without REPLICATION."""
    yield from own_role(pgb_pg, "neki_norepl")


def repl_login_errors(bouncer, user, db):
    """Log in for logical replication (and, once welcomed, ask for IDENTIFY_SYSTEM); the
    errors the pooler answers before it closes."""
    w = Wire(bouncer.port)
    try:
        w.startup(user=user, database=db, extra={"replication": "database"})
        msgs = []
        while not msgs or msgs[-1][0] not in "EZ":
            msgs.append(w.read_msg())
        if msgs[-1][0] == "Z":      # a welcome from the cache: the walsender opens now
            w.send(b"Q", b"IDENTIFY_SYSTEM\0")
        msgs += w.read_all()
        return [(e["S"], e["C"], e["M"]) for e in errors_in(msgs)]
    finally:
        w.close()


def test_refused_replication_login(bouncer, norepl_user):
    """The server refuses a walsender: the server's error is logged, both sides close with
    "login failed" and the client gets FATAL 08P01 "login failed"; an ordinary client of the
    same database and user, waiting for its own (slow) login meanwhile, is not failed."""
    allow_user(bouncer, norepl_user)
    add_config(bouncer, db_entry(bouncer, "repl0", user=norepl_user,
                                 connect_query="'select pg_sleep(1)'"))
    done = []
    t = threading.Thread(target=lambda: done.append(
        bouncer.sql_value("select 42", dbname="repl0", user=norepl_user)))
    with bouncer.log_contains(r"S: login failed: FATAL: must be superuser or replication role "
                              r"to start walsender", times=1):
        t.start()
        wait_until(lambda: "repl0/neki_norepl" in bouncer.log(), 10, what="the first login")
        errors = repl_login_errors(bouncer, norepl_user, "repl0")
    t.join(15)
    assert done == [42]
    assert errors == [("FATAL", "08P01", "login failed")]
    # the next one right away is not failed from the cache (server_login_retry): it waits
    # for its own login, which fails the same way
    assert repl_login_errors(bouncer, norepl_user, "repl0") == [("FATAL", "08P01",
                                                                  "login failed")]
    log = bouncer.log()
    assert re.search(r"S-0x[0-9a-f]+: repl0/neki_norepl@\S+ closing because: login failed "
                     r"\(age=", log), log
    assert re.search(r"C-0x[0-9a-f]+: repl0/neki_norepl@\S+ closing because: login failed "
                     r"\(age=", log), log


# ---------------------------------------------------------------------------------------------
# a remembered value the server canonicalised

def test_canonical_value_is_remembered(bouncer):
    """A client asks for DateStyle=ISO; the server keeps "ISO, MDY". After the SET batch the
    client's remembered value takes the server's form, so the SET is sent once, not at every
    link assignment."""
    add_config(bouncer, db_entry(bouncer, "canon0", pool_mode="transaction"), "verbose = 1")
    w = Wire(bouncer.port)
    try:
        with bouncer.log_contains(r"varcache_apply: SET DateStyle='ISO'", times=1), \
                bouncer.log_contains(r"C-0x[0-9a-f]+: canon0/bouncer@\S+ varcache_set_canonical:"
                                     r" setting DateStyle to its canonical version ISO -> "
                                     r"ISO, MDY$", times=1):
            w.login(user="bouncer", database="canon0", extra={"DateStyle": "ISO"})
            for _ in range(3):
                rows = [m for m in w.query("show DateStyle") if m[0] == "D"]
                assert rows[0][1].endswith(b"ISO, MDY")
    finally:
        w.close()


# ---------------------------------------------------------------------------------------------
# a pool reset forgets its welcome; the cached login error is for logged-in clients only

@pytest.fixture
def welcome_user(pgb_pg):
    yield from own_role(pgb_pg, "neki_welcome")


def welcome_params(bouncer, db, user):
    """Log in with the raw client; the ParameterStatus values of the welcome."""
    w = Wire(bouncer.port)
    try:
        msgs = w.login(user=user, database=db)
    finally:
        w.close()
    return dict(body.decode().split("\0")[:2] for typ, body in msgs if typ == "S")


def test_reconnect_forgets_the_welcome(bouncer, welcome_user):
    """After RECONNECT the next client waits for a fresh login and gets that login's
    parameters, not those cached from before."""
    allow_user(bouncer, welcome_user)
    add_config(bouncer, db_entry(bouncer, "wel0", user=welcome_user))
    assert welcome_params(bouncer, "wel0", welcome_user)["DateStyle"] == "ISO, MDY"
    bouncer.pg.sql("shard-a", f"ALTER ROLE {welcome_user} SET DateStyle = 'German, DMY'")
    assert welcome_params(bouncer, "wel0", welcome_user)["DateStyle"] == "ISO, MDY"
    bouncer.admin("RECONNECT")
    assert welcome_params(bouncer, "wel0", welcome_user)["DateStyle"] == "German, DMY"


def login_error(bouncer, db, user):
    """Log in with the raw client: (SQLSTATE, message) of the FATAL it gets, None when it
    gets a welcome."""
    w = Wire(bouncer.port)
    try:
        w.startup(user=user, database=db)
        for typ, body in w.read_all():
            if typ == "Z":
                return None
            if typ == "E":
                e = errors_in([(typ, body)])[0]
                return e["C"], e["M"]
    finally:
        w.close()


def test_changed_dbname_gives_the_login_error(one_process, welcome_user):
    """The entry's dbname changes to a database that does not exist: a client that logs in
    afterwards waits for a login with the new settings and gets its real error, and so does
    the next one (after server_login_retry), instead of a welcome from the cache; a client
    logged in before, asking for a link, gets the cached error at once."""
    bouncer = one_process
    allow_user(bouncer, welcome_user)
    add_config(bouncer, db_entry(bouncer, "wel1", user=welcome_user, pool_mode="transaction"))
    before = bouncer.conn(dbname="wel1", user=welcome_user)
    assert before.execute("select 1").fetchone() == (1,)
    missing = ('3D000', 'database "neki_no_such_db" does not exist')
    try:
        entry = db_entry(bouncer, "wel1", user=welcome_user, pool_mode="transaction")
        bouncer.write_config(bouncer.config_text().replace(entry, db_entry(
            bouncer, "wel1", user=welcome_user, pool_mode="transaction",
            dbname="neki_no_such_db")))
        bouncer.admin("RELOAD")
        assert login_error(bouncer, "wel1", welcome_user) == missing
        assert login_error(bouncer, "wel1", welcome_user) == missing
        with pytest.raises(psycopg.OperationalError,
                           match=r"server login has been failing, cached error: database "
                                 r'"neki_no_such_db" does not exist \(server_login_retry\)'):
            before.execute("select 1")
    finally:
        before.close()


# ---------------------------------------------------------------------------------------------
# one connection attempt per pool at a time

def test_one_connection_attempt_at_a_time(bouncer):
    """Clients arrive together at a pool whose first host does not resolve
    (load_balance_hosts = disable): one attempt is made, it fails once, and the next host
    serves them all; not one failed lookup per waiting client (nor per worker)."""
    add_config(bouncer, db_entry(bouncer, "once0", host="neki-no-such-host.invalid,127.0.0.1",
                                 load_balance_hosts="disable"))
    got = []

    def client():
        with bouncer.conn(dbname="once0", connect_timeout=20) as c:
            got.append(c.execute("select 1").fetchone()[0])

    with bouncer.log_contains(r"closing because: server DNS lookup failed", times=1):
        threads = [threading.Thread(target=client) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert got == [1] * 6
