"""
Session settings of routed sessions (issue 6): the router models the session's GUCs (spec 3.3)
while its shard links are transaction-pooled. What a session SETs, RESETs or set_config()s
must behave as on one Postgres session (a SET in a transaction that rolls back is undone,
SET LOCAL ends with its transaction, an error in a multi-statement Query or an extended-
protocol batch undoes the SETs before it), on every shard the session reaches later, and must
never reach another session through a pooled link. Every sequence runs through neki and on the
reference server and the answers are compared.

The neki here has one worker and pool_size 1, so consecutive sessions share each shard's link
(what the leak tests need).
"""
import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology

CUSTOMERS = [(i, f"customer {i}", "FR" if i % 2 else "DE") for i in range(1, 41)]
ROLE = "neki_sess_role"


@pytest.fixture(scope="module")
def sess(pg_cluster):
    with sharded_database(pg_cluster, "sess") as db, \
            routing_neki(pg_cluster, db, topology(db), Store,
                         settings={"workers": 1, "default_pool_size": 1}) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        st.both("INSERT INTO customers VALUES " + ", ".join(
            f"({i}, '{n}', '{c}')" for i, n, c in CUSTOMERS))
        for server in pg_cluster.servers:
            pg_cluster.sql(server, f"DROP ROLE IF EXISTS {ROLE}")
            pg_cluster.sql(server, f"CREATE ROLE {ROLE}")
            pg_cluster.sql(server, f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO {ROLE}',
                           dbname=db)
        try:
            yield st
        finally:
            for server in pg_cluster.servers:
                try:
                    pg_cluster.sql(server, f'DROP OWNED BY {ROLE}', dbname=db)
                    pg_cluster.sql(server, f"DROP ROLE IF EXISTS {ROLE}")
                except Exception:
                    pass


def probes(name):
    """What a session sees of setting <name>: SHOW (the router's answer, from one shard) and
    its value on every data shard (a scatter read: DISTINCT gives one row when all agree)."""
    if name == "role":
        return ["SELECT current_user", "SELECT DISTINCT current_user FROM customers"]
    return [f"SHOW {name}", f"SELECT DISTINCT current_setting('{name}') FROM customers"]


def step(conn, sql):
    """One simple Query: its last status (or ERROR <sqlstate>), rows, transaction status."""
    cur = psycopg.ClientCursor(conn)
    try:
        cur.execute(sql)
        rows = cur.fetchall() if cur.description is not None else None
        out = (cur.statusmessage, rows)
    except psycopg.Error as e:
        out = ("ERROR " + (e.diag.sqlstate or ""), None)
    return out + (conn.info.transaction_status.name,)


def script_both(st, steps, probe="work_mem", setup=()):
    """Run <steps> (simple Queries) through neki and on the reference, each followed by the
    probes of <probe> when the step is outside a transaction; the transcripts must match.
    <setup> runs first on both (not compared)."""
    got = []
    for connect in (st.connect, st.ref):
        out = []
        with connect() as conn:
            for sql in setup:
                conn.execute(sql)
            for sql in steps:
                res = step(conn, sql)
                out.append((sql, res))
                if res[2] == "IDLE":
                    for p in probes(probe):
                        out.append((p, step(conn, p)))
        got.append(out)
    for n, r in zip(*got):
        assert n == r, f"neki {n} != reference {r}"


TX_SCRIPTS = {
    "rollback undoes": ["BEGIN", "SET work_mem = '3MB'", "SELECT count(*) FROM customers",
                        "SHOW work_mem", "ROLLBACK"],
    "commit keeps": ["BEGIN", "SET work_mem = '3MB'", "COMMIT"],
    "set first in a transaction": ["BEGIN", "SET work_mem = '3MB'", "ROLLBACK",
                                   "SELECT name FROM customers WHERE id = 3"],
    "local ends with the transaction": [
        "SET work_mem = '3MB'", "BEGIN", "SET LOCAL work_mem = '5MB'", "SHOW work_mem",
        "SELECT DISTINCT current_setting('work_mem') FROM customers", "COMMIT"],
    "set then local": ["BEGIN", "SET work_mem = '6MB'", "SET LOCAL work_mem = '7MB'",
                       "SELECT DISTINCT current_setting('work_mem') FROM customers", "COMMIT"],
    "local then set": ["BEGIN", "SET LOCAL work_mem = '7MB'", "SET work_mem = '6MB'",
                       "COMMIT"],
    "local outside a transaction": ["SET LOCAL work_mem = '5MB'"],
    "reset rolled back": ["SET work_mem = '6MB'", "BEGIN", "RESET work_mem",
                          "SELECT count(*) FROM customers", "ROLLBACK"],
    "reset committed": ["SET work_mem = '6MB'", "BEGIN", "RESET work_mem", "COMMIT"],
    "to default": ["SET work_mem = '6MB'", "SET work_mem TO DEFAULT"],
    "reset all": ["SET work_mem = '6MB'", "SET statement_timeout = '9s'", "RESET ALL"],
    "reset all rolled back": ["SET work_mem = '6MB'", "BEGIN", "RESET ALL", "ROLLBACK"],
    "aborted transaction": ["BEGIN", "SET work_mem = '3MB'", "SELECT 1 / 0", "SHOW work_mem",
                            "COMMIT"],
    "error in a multi-statement Query": ["SET work_mem = '8MB'; SELECT 1 / 0"],
    "multi-statement Query": ["SET work_mem = '8MB'; SELECT count(*) FROM customers"],
    "local in a multi-statement Query": [
        "SET LOCAL work_mem = '8MB'; SELECT DISTINCT current_setting('work_mem') "
        "FROM customers"],
    "rollback inside a Query": ["SET work_mem = '8MB'; ROLLBACK; SET statement_timeout = '3s'"],
    "commit inside a Query": ["SET work_mem = '8MB'; COMMIT; SELECT 1 / 0"],
    "begin inside a Query": ["SET work_mem = '8MB'; BEGIN; SET work_mem = '9MB'", "ROLLBACK"],
    "set_config rolled back": ["BEGIN", "SELECT set_config('work_mem', '3MB', false)",
                               "SELECT count(*) FROM customers", "ROLLBACK"],
    "set_config committed": ["BEGIN", "SELECT set_config('work_mem', '3MB', false)", "COMMIT"],
    "set_config outside": ["SELECT set_config('work_mem', '3MB', false)"],
    "set_config local": ["BEGIN", "SELECT set_config('work_mem', '3MB', true)",
                         "SELECT DISTINCT current_setting('work_mem') FROM customers",
                         "COMMIT"],
    "set_config in an aborted Query": ["SELECT set_config('work_mem', '3MB', false); "
                                       "SELECT 1 / 0"],
}


@pytest.mark.parametrize("name", sorted(TX_SCRIPTS))
def test_sets_follow_transactions(sess, name):
    script_both(sess, TX_SCRIPTS[name])


def test_statement_timeout_rolled_back(sess):
    script_both(sess, ["SET statement_timeout = '7s'", "BEGIN",
                       "SET statement_timeout = '8s'", "SELECT count(*) FROM customers",
                       "ROLLBACK"], probe="statement_timeout")


# ---- settings never reach another session through a pooled link ------------------------

_SHARD_KEYS = {}


def shard_keys(st):
    """{shard: a customer id stored there} for every data shard (from EXPLAIN NEKI_PLAN)."""
    if not _SHARD_KEYS:
        for cid, _, _ in CUSTOMERS:
            rows = st.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers "
                          f"WHERE id = {cid}")
            shard = next(s for s in st.cluster.shards if any(s in r[0] for r in rows))
            _SHARD_KEYS.setdefault(shard, cid)
    assert sorted(_SHARD_KEYS) == sorted(st.cluster.shards)
    return _SHARD_KEYS


PER_SHARD = ("SELECT pg_backend_pid(), current_setting('work_mem'), "
             "current_setting('statement_timeout'), current_setting('search_path'), "
             "current_user, current_setting('neki_test.tenant', true) "
             "FROM customers WHERE id = {}")


def per_shard(st, conn):
    """{shard: (backend pid, work_mem, statement_timeout, search_path, current_user, a custom
    setting)} as the session sees them on each data shard."""
    cur = psycopg.ClientCursor(conn)
    out = {}
    for shard, cid in shard_keys(st).items():
        cur.execute(PER_SHARD.format(cid))
        out[shard] = cur.fetchone()
    return out


def last_query(st, shard, pid):
    rows = st.cluster.sql(shard, "SELECT state, query FROM pg_stat_activity WHERE pid = %s",
                          (pid,))
    return rows[0] if rows else None


SETS = ["SET work_mem = '1MB'", "SET statement_timeout = '4321ms'",
        "SET search_path = public, \"$user\"", f"SET ROLE {ROLE}",
        "SET neki_test.tenant = '42'"]


def test_second_session_does_not_inherit_sets(sess):
    """One worker, pool_size 1: the second session gets the first one's links (the same
    backends), and none of its SETs; the first session, still connected, keeps them on every
    shard. The shards show the reset the first session's links went through."""
    with sess.ref() as ref:
        fresh = per_shard(sess, ref)[sess.cluster.shards[0]][1:]
    assert fresh[:4] == ("4MB", "0", '"$user", public', "postgres")
    with sess.connect() as a:
        for sql in SETS:
            a.execute(sql)
        seen_a = per_shard(sess, a)
        for shard, row in seen_a.items():
            assert row[1:] == ("1MB", "4321ms", 'public, "$user"', ROLE, "42"), shard
        # back in the pool through RESET ROLE; RESET ALL (asynchronously: poll)
        for shard, row in seen_a.items():
            wait_until(lambda: last_query(sess, shard, row[0]) ==
                       ("idle", "RESET ROLE;RESET ALL"), 10, what=f"{shard} reset")
        with sess.connect() as b:
            seen_b = per_shard(sess, b)
            for shard, row in seen_b.items():
                assert row[0] == seen_a[shard][0], "the same backend"
                # a placeholder that RESET ALL left behind reads '' (never A's value)
                assert row[1:5] == fresh[:4] and row[5] in (None, ""), (shard, row)
            assert b.execute("SHOW work_mem").fetchall() == [("4MB",)]
        again = per_shard(sess, a)
        assert {s: r[1:] for s, r in again.items()} == {s: r[1:] for s, r in seen_a.items()}
        assert a.execute("SHOW statement_timeout").fetchall() == [("4321ms",)]
    # a session that leaves goes the same way: the next one starts clean
    with sess.connect() as c:
        for shard, row in per_shard(sess, c).items():
            assert row[1:5] == fresh[:4], shard


def test_session_without_sets_costs_nothing(sess):
    """A session that set nothing gives its links back as they are: no reset runs on them
    (the shard's last statement is the session's own)."""
    with sess.connect() as conn:
        for shard, row in per_shard(sess, conn).items():
            state, query = last_query(sess, shard, row[0])
            assert query == PER_SHARD.format(shard_keys(sess)[shard]), (shard, query)


def test_reported_parameters_need_no_reset(sess):
    """SET of a parameter the server reports (TimeZone, application_name...) is brought to
    each client's value by the varcache diff: no reset; the next session has its own."""
    with sess.connect() as a:
        a.execute("SET TimeZone = 'Asia/Tokyo'")
        a.execute("SET application_name = 'sess-a'")
        pids = per_shard(sess, a)
        assert a.execute("SHOW TimeZone").fetchall() == [("Asia/Tokyo",)]
        with sess.connect() as b:
            assert b.execute("SHOW TimeZone").fetchall() == \
                sess.ref().execute("SHOW TimeZone").fetchall()
            assert b.execute("SELECT DISTINCT current_setting('application_name') "
                             "FROM customers").fetchall() == [("",)]
        for shard, row in pids.items():
            state, query = last_query(sess, shard, row[0])
            assert query != "RESET ROLE;RESET ALL", shard


def test_role_follows_postgres(sess):
    """SET ROLE is a session setting (modelled and replayed; reset when its links go back):
    RESET ALL keeps it, as in Postgres; RESET ROLE, SET ROLE NONE and DISCARD ALL end it."""
    script_both(sess, [f"SET ROLE {ROLE}", "RESET ALL", "BEGIN", "RESET ROLE",
                       "SELECT count(*) FROM customers", "ROLLBACK", "SET ROLE NONE",
                       f"SET ROLE {ROLE}", "DISCARD ALL"], probe="role")


def test_session_authorization_is_refused(sess):
    with sess.connect() as conn:
        for sql in ("SET SESSION AUTHORIZATION postgres",
                    "SELECT set_config('session_authorization', 'postgres', false)"):
            with pytest.raises(psycopg.Error) as ei:
                conn.execute(sql)
            assert ei.value.diag.sqlstate == "NK013" and "[27]" in str(ei.value), sql


def test_transaction_characteristics(sess):
    """SET SESSION CHARACTERISTICS sets the default_transaction_* parameters (each one RESET
    on its own); SET TRANSACTION reaches every shard the transaction touches later."""
    script_both(sess, ["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL "
                       "REPEATABLE READ, READ ONLY", "RESET default_transaction_read_only"],
                probe="default_transaction_isolation")
    script_both(sess, ["SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
                       "SET default_transaction_isolation = 'repeatable read'",
                       "RESET default_transaction_isolation"],
                probe="default_transaction_read_only")
    script_both(sess, ["BEGIN", "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ",
                       "SELECT DISTINCT current_setting('transaction_isolation') "
                       "FROM customers", "COMMIT"], probe="transaction_isolation")


def test_set_and_show_do_not_count_for_tx_mode_single(sess):
    """With __neki.tx_mode single a SET or SHOW before the first data statement does not make
    its shard the transaction's one."""
    keys = shard_keys(sess)
    (s1, k1), (s2, k2) = sorted(keys.items())[:2]
    with sess.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SET __neki.tx_mode = single")
        cur.execute("BEGIN")
        cur.execute("SET work_mem = '3MB'")
        cur.execute("SHOW work_mem")
        assert cur.fetchall() == [("3MB",)]
        cur.execute(f"SELECT current_setting('work_mem') FROM customers WHERE id = {k1}")
        assert cur.fetchall() == [("3MB",)]
        with pytest.raises(psycopg.Error) as ei:
            cur.execute(f"SELECT name FROM customers WHERE id = {k2}")
        assert f'would add shard "{s2}"' in str(ei.value)
        cur.execute("ROLLBACK")
        cur.execute("SHOW work_mem")
        assert cur.fetchall() == [("4MB",)]


@pytest.mark.parametrize("target", ["replica", "RDONLY"])
def test_replica_target_without_standbys_fails_with_nk205(sess, target):
    """A replica (or rdonly) target is accepted at SET and as a startup option, but these
    shards have no standbys: a read fails with NK205 naming the shard and the type (spec
    3.4: no eligible replica, the query fails; never served by the primary), and a write
    is refused as under any non-primary target (25006); primary reads again."""
    kind = "SIDECAR_TYPE_" + target.upper()
    with sess.connect() as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute(f"SET __neki.target = '{target}'")
        cur.execute("SHOW __neki.target")
        assert cur.fetchall() == [(target.lower(),)]
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("SELECT name FROM customers WHERE id = 1")
        assert ei.value.diag.sqlstate == "NK205"
        assert kind in ei.value.diag.message_primary
        with pytest.raises(psycopg.Error) as ei:
            cur.execute("INSERT INTO customers VALUES (999999, 'x', 'FR')")
        assert ei.value.diag.sqlstate == "25006"
        cur.execute("SET __neki.target = 'Primary'")
        cur.execute("SELECT count(*) FROM customers WHERE id = 1")
        cur.execute("SET __neki.replica_recency = require")
        cur.execute("SHOW __neki.replica_recency")
        assert cur.fetchall() == [("require",)]
    with sess.connect(options=f"-c __neki.target={target}") as conn:
        assert conn.execute("SHOW __neki.target").fetchone() == (target.lower(),)
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("SELECT name FROM customers WHERE id = 1")
        assert ei.value.diag.sqlstate == "NK205"


def test_neki_settings_as_startup_options(sess):
    """options=-c __neki.x=v (PGOPTIONS) sets the routed session's __neki settings as a SET
    before its first statement would: tx_mode single holds a transaction to one shard, and
    a bad value refuses the login with the SET's error."""
    keys = shard_keys(sess)
    (s1, k1), (s2, k2) = sorted(keys.items())[:2]
    with sess.connect(options="-c __neki.tx_mode=single -c __neki.fanout=multi") as conn:
        cur = psycopg.ClientCursor(conn)
        cur.execute("SHOW __neki.tx_mode")
        assert cur.fetchall() == [("single",)]
        cur.execute("SHOW __neki.fanout")
        assert cur.fetchall() == [("multi",)]
        cur.execute("BEGIN")
        cur.execute(f"SELECT name FROM customers WHERE id = {k1}")
        with pytest.raises(psycopg.Error) as ei:
            cur.execute(f"SELECT name FROM customers WHERE id = {k2}")
        assert f'would add shard "{s2}"' in str(ei.value)
        cur.execute("ROLLBACK")
    with sess.connect(options=f"-c __neki.shard={s1}") as conn:
        assert conn.execute("SHOW __neki.shard").fetchone() == (s1,)
    with sess.connect(options="-c __neki.tx_mode=atomic") as conn:    # (test_atomic.py)
        assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("atomic",)
    for options, message in (("-c __neki.fanout=wide", 'invalid value for parameter '
                                                       '"__neki.fanout": "wide"'),
                             ("-c __neki.shard=nowhere", 'invalid value for parameter '
                                                         '"__neki.shard": "nowhere"')):
        with pytest.raises(psycopg.OperationalError, match=message):
            sess.connect(options=options)


# ---- the extended protocol: a batch up to its Sync is one implicit transaction -----------

def pipeline_both(st, batches, probe="work_mem"):
    """Run <batches> (lists of statements, each list one pipeline batch ending with a Sync;
    a statement may be (sql, params)) through neki and on the reference with the extended
    protocol; then the probes. The outcomes must match."""
    got = []
    for connect in (st.connect, st.ref):
        out = []
        with connect() as conn:
            for batch in batches:
                try:
                    with conn.pipeline() as p:
                        for stmt in batch:
                            sql, params = stmt if isinstance(stmt, tuple) else (stmt, None)
                            conn.execute(sql, params)
                        p.sync()
                    out.append("ok")
                except psycopg.Error as e:
                    out.append("ERROR " + (e.diag.sqlstate or ""))
            for sql in probes(probe):
                out.append(conn.execute(sql).fetchall())
        got.append(out)
    assert got[0] == got[1], f"{batches}: neki {got[0]} != reference {got[1]}"


PIPELINES = {
    "error undoes the batch's SET": [["SET work_mem = '2MB'", "SELECT 1 / 0"]],
    "batch kept": [["SET work_mem = '2MB'", "SELECT count(*) FROM customers"]],
    "error in the next batch": [["SET work_mem = '2MB'"], ["SELECT 1 / 0"]],
    "set_config bound": [[("SELECT set_config('work_mem', %s, false)", ("6MB",)),
                          "SELECT count(*) FROM customers"]],
    "set_config bound undone": [[("SELECT set_config(%s, %s, false)", ("work_mem", "6MB")),
                                 "SELECT 1 / 0"]],
    "reset in an aborted batch": [["SET work_mem = '2MB'"], ["RESET work_mem", "SELECT 1 / 0"]],
    "block across batches": [["BEGIN", "SET work_mem = '2MB'"], ["ROLLBACK"]],
}


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_extended_batches(sess, name):
    pipeline_both(sess, PIPELINES[name])


# ---- a link the session holds (LISTEN) follows the model too ----------------------------

HELD = {
    "set on the held link, rolled back": ["BEGIN", "SET work_mem = '3MB'", "ROLLBACK"],
    "set on a data shard, rolled back": [
        "BEGIN", "SELECT count(*) FROM customers", "SET work_mem = '3MB'", "ROLLBACK"],
    "reset on a data shard, committed": [
        "SET work_mem = '3MB'", "BEGIN", "SELECT count(*) FROM customers",
        "RESET work_mem", "COMMIT"],
    "reset all elsewhere": [
        "SET work_mem = '3MB'", "SET statement_timeout = '5s'", "BEGIN",
        "SELECT count(*) FROM customers", "RESET ALL", "COMMIT"],
    "aborted Query": ["SET work_mem = '3MB'; SELECT 1 / 0"],
    "discard all": ["SET work_mem = '3MB'", "DISCARD ALL", "LISTEN held_again"],
}


@pytest.mark.parametrize("name", sorted(HELD))
def test_held_link_follows_the_model(sess, name):
    """LISTEN makes the session hold its authoritative shard's link (where SHOW runs): what a
    rollback undid, or a RESET on another link removed, is gone from it too."""
    script_both(sess, HELD[name], setup=["LISTEN held"])


@pytest.mark.parametrize("steps", [
    ["SET TimeZone = 'Asia/Tokyo'", "RESET ALL"],
    ["SET TimeZone = 'Asia/Tokyo'", "DISCARD ALL"],
    ["SET TimeZone = 'Asia/Tokyo'", "BEGIN", "SET TimeZone = 'Europe/Rome'", "ROLLBACK"],
    ["SET TimeZone = 'Asia/Tokyo'", "SET TimeZone TO DEFAULT"],
])
def test_reported_parameters_follow_postgres(sess, steps):
    """A reported parameter reads as on Postgres after RESET ALL, DISCARD ALL, ROLLBACK, and
    the client is told the value (ParameterStatus) as Postgres tells it."""
    got = []
    for connect in (sess.connect, sess.ref):
        with connect() as conn:
            out = [step(conn, sql) for sql in steps]
            out.append(step(conn, "SHOW TimeZone"))
            out.append(step(conn, "SELECT DISTINCT current_setting('TimeZone') FROM customers"))
            out.append(conn.info.parameter_status("TimeZone"))
        got.append(out)
    assert got[0] == got[1]


@pytest.mark.parametrize("reset", ["RESET ALL", "DISCARD ALL", "RESET application_name",
                                   "SET TimeZone TO DEFAULT",
                                   "BEGIN; RESET ALL; SELECT count(*) FROM customers; COMMIT"])
def test_reset_goes_back_to_the_login_values(sess, reset):
    """A client's startup values (application_name, options -c TimeZone=...) are its defaults:
    RESET brings them back, as on Postgres, not the pooled link's own defaults."""
    kw = {"application_name": "startup-app", "options": "-c TimeZone=Asia/Tokyo"}
    got = []
    for connect in (sess.connect, sess.ref):
        with connect(**kw) if connect == sess.connect else \
                psycopg.connect(sess.cluster.dsn("reference", dbname=sess.db), autocommit=True,
                                **kw) as conn:
            out = [step(conn, "SET application_name = 'changed'"),
                   step(conn, "SET TimeZone = 'Europe/Rome'"), step(conn, reset)]
            for name in ("application_name", "TimeZone"):
                out.append(step(conn, f"SHOW {name}"))
                out.append(step(conn, f"SELECT DISTINCT current_setting('{name}') "
                                      "FROM customers"))
                out.append(conn.info.parameter_status(name))
        got.append(out)
    assert got[0] == got[1]


def shard_pools_idle(st):
    """No link of the database's shard pools is in use or being reset (SHOW POOLS)."""
    with st.neki.admin_connect(dbname="pgbouncer") as conn:
        cur = conn.execute("SHOW POOLS")
        names = [d.name for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    return all(r["cl_active"] == 0 and r["sv_active"] == 0 and r["sv_tested"] == 0
               for r in rows if r["database"].startswith(st.db + "@"))


@pytest.mark.parametrize("sql", ["SET TimeZone = 'Asia/Tokyo'", "RESET TimeZone",
                                 "SET work_mem = '1MB'", "RESET ALL", "DISCARD ALL",
                                 "SELECT set_config('work_mem', '2MB', false)",
                                 "SET work_mem = '3MB'; SELECT count(*) FROM customers"])
def test_idle_session_holds_no_link(sess, sql):
    """Whatever the session set, once it is idle outside a transaction its links are back in
    their pools (reset first when needed), so other sessions are never kept waiting."""
    with sess.connect() as conn:
        conn.execute("SET TimeZone = 'Europe/Rome'")
        psycopg.ClientCursor(conn).execute(sql)
        wait_until(lambda: shard_pools_idle(sess), 10, what="the session's links given back")


def test_set_config_refusals(sess):
    """set_config() with arguments the router cannot read, or where its settings model cannot
    follow the statement, is refused (nothing ran); the session's settings are unchanged."""
    cases = [
        ("SELECT set_config('work_mem', current_setting('work_mem'), false)",
         "set_config() on a sharded database needs constant arguments"),
        ("SELECT set_config('work_mem', name, false) FROM customers",
         "set_config() on a sharded database needs constant arguments"),
        ("INSERT INTO products (sku, name) SELECT 'x' || id, set_config('work_mem', '1MB', "
         "false) FROM customers WHERE id IN (1, 2, 3)",
         "set_config() in an INSERT ... SELECT the router runs across shards is not supported"),
    ]
    with sess.connect() as conn:
        for sql, message in cases:
            with pytest.raises(psycopg.Error) as ei:
                conn.execute(sql)
            assert ei.value.diag.sqlstate == "0A000" and ei.value.diag.message_primary == \
                message, sql
        assert conn.execute("SHOW work_mem").fetchall() == [("4MB",)]
        assert conn.execute("SELECT count(*) FROM products").fetchone() == (0,)
