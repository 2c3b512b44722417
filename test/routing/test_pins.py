"""
Shard links a routed session holds across its transactions (issue 6): LISTEN / UNLISTEN /
NOTIFY on a sharded database (the notify shard is the authoritative one), session advisory
locks routed by key through the database's default shard group, and setval() managed by
the router. One database on every server of the session's cluster, a topology whose
database default group is sharded over 4 data shards (so advisory-lock keys spread over
them), the schema created through neki and on the reference server, which is the oracle
for every Postgres behaviour compared here (lock results, warnings, sequence values).
"""
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import create_schema, lit, routing_neki, sharded_database

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "clients"))
from pgwire import Wire, error_fields  # noqa: E402

SCHEMA = [
    "CREATE TABLE events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
    "payload text NOT NULL)",
    "CREATE TABLE kinds (id serial PRIMARY KEY, name text NOT NULL)",
    "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)",
    "CREATE SEQUENCE ticket",
    "CREATE SEQUENCE countdown INCREMENT BY -2 MINVALUE -1000000 MAXVALUE 0 START 0",
]
BATCH = 20


def topology(db):
    quarter = [("shard-a", None, "40"), ("shard-b", "40", "80"), ("shard-c", "80", "c0"),
               ("shard-d", "c0", None)]
    ranges = []
    for uid, start, end in quarter:
        r = {"shard_uid": uid}
        if start:
            r["start"] = start
        if end:
            r["end"] = end
        ranges.append(r)
    seqs = ["events_id_seq", "kinds_id_seq", "ticket", "countdown"]
    return {
        "databases": {db: {"default_shard_group": "data", "schemas": {"public": {
            "tables": {"events": {}, "notes": {"shard_group": "authoritative"}},
            "reference_tables": {"kinds": {"shard_groups": ["data"]}},
            "sequences": {s: {"shard_group": "authoritative"} for s in seqs},
        }}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "data", "default_shard_index": "by_id", "key_ranges": ranges},
        ],
        "shard_indexes": {"by_id": {"type": "xxhash", "columns": ["id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


class Db:
    def __init__(self, cluster, inst, name):
        self.cluster, self.neki, self.name = cluster, inst, name

    def connect(self, **kw):
        kw.setdefault("autocommit", True)
        return self.neki.connect(dbname=self.name, **kw)

    def ref(self, **kw):
        return self.cluster.connect("reference", dbname=self.name, **kw)

    def direct(self, server, **kw):
        return self.cluster.connect(server, dbname=self.name, **kw)

    def run(self, sql):
        with self.connect() as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql)
            return cur.fetchall() if cur.description is not None else None

    def on(self, server, sql, params=None):
        return self.cluster.sql(server, sql, params, dbname=self.name)

    def wire(self):
        """A raw protocol client logged in to the database (its BackendKeyData pid kept)."""
        w = Wire(self.neki.port)
        w.startup(database=self.name)
        msgs = w.read_until("Z")
        w.key_pid = next(int.from_bytes(b[:4], "big") for t, b in msgs if t == "K")
        return w

    def lock_shard(self, key):
        """The shard neki routes advisory-lock key <key> to (EXPLAIN (NEKI_PLAN))."""
        plan = "\n".join(r[0] for r in self.run(
            f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT pg_advisory_lock({key})"))
        found = [s for s in self.cluster.shards if s in plan]
        assert len(found) == 1, plan
        return found[0]


@pytest.fixture(scope="module")
def pins(pg_cluster):
    with sharded_database(pg_cluster, "pins") as db, \
            routing_neki(pg_cluster, db, topology(db), Db,
                         settings={"sequence_batch": BATCH, "default_pool_size": 20}) as d:
        create_schema(d, SCHEMA)
        yield d


# ---- helpers ---------------------------------------------------------------------------

def query(w, sql):
    """Send a simple Query on raw client <w>; its messages up to ReadyForQuery."""
    w.send(b"Q", sql.encode() + b"\0")
    return w.read_until("Z")


def notification(body):
    pid = int.from_bytes(body[:4], "big")
    channel, payload = body[4:].split(b"\0")[:2]
    return pid, channel.decode(), payload.decode()


def wait_msgs(w, n, timeout=10):
    """Read <n> messages from raw client <w> without sending anything (bounded)."""
    w.sock.settimeout(timeout)
    try:
        return [w.read_msg() for _ in range(n)]
    finally:
        w.sock.settimeout(10)


def nothing_pending(w, wait=0.3):
    """No byte arrived on <w> (checked after the caller made sure something would have)."""
    if w.buf:
        return False
    return not select.select([w.sock], [], [], wait)[0]


def notify_direct(pins, channel, payload):
    pins.on("auth", f"NOTIFY {channel}, {lit(payload)}")


def server_state(pins, pid):
    """SHOW SERVERS' state of the link whose backend is <pid> (active: held by a client,
    idle: in the pool), None when there is none."""
    with pins.neki.admin_connect() as adm:
        cur = adm.execute("SHOW SERVERS", prepare=False)
        names = [d.name for d in cur.description]
        for r in cur.fetchall():
            if r[names.index("remote_pid")] == pid:
                return r[names.index("state")]
    return None


def backend_pids(pins, server):
    return {r[0] for r in pins.on(server, "SELECT pid FROM pg_stat_activity "
                                          "WHERE datname = current_database()")}


# ---- LISTEN / NOTIFY -------------------------------------------------------------------

def test_listen_receives_from_neki_and_direct(pins):
    """psycopg's notifies(): NOTIFY through another neki session, pg_notify() in a SELECT
    (inside a transaction on a data shard), and NOTIFY on the authoritative shard directly
    all reach a neki listener, in order."""
    got = []
    with pins.connect() as listener, pins.connect() as other:
        listener.execute("LISTEN jobs")

        def reader():
            for n in listener.notifies():
                got.append((n.channel, n.payload))
                if len(got) == 3:
                    return
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        other.execute("NOTIFY jobs, 'one'")
        with other.transaction():
            other.execute("SELECT * FROM events WHERE id = 3")
            other.execute("SELECT pg_notify('jobs', 'two')")
        notify_direct(pins, "jobs", "three")
        t.join(15)
        assert got == [("jobs", "one"), ("jobs", "two"), ("jobs", "three")]


def test_listen_idle_delivery_and_own_pid(pins):
    """Raw protocol: a NotificationResponse reaches an idle listener without any query of
    its own; its own NOTIFY comes after the command's CommandComplete and before
    ReadyForQuery with its BackendKeyData pid, as Postgres."""
    w = pins.wire()
    try:
        msgs = query(w, "LISTEN c1")
        assert [t for t, _ in msgs] == ["C", "Z"]
        notify_direct(pins, "c1", "from outside")
        (t, body), = wait_msgs(w, 1)
        assert t == "A"
        pid, channel, payload = notification(body)
        assert (channel, payload) == ("c1", "from outside") and pid != w.key_pid
        msgs = query(w, "NOTIFY c1, 'mine'")
        assert [t for t, _ in msgs] == ["C", "A", "Z"]
        assert notification(msgs[1][1]) == (w.key_pid, "c1", "mine")
        assert msgs[-1][1] == b"I"
    finally:
        w.close()


def test_no_notification_inside_a_transaction(pins):
    """Inside a transaction block (here on a data shard) notifications wait; COMMIT gets
    them before its ReadyForQuery; never in the middle of another statement's result."""
    w = pins.wire()
    try:
        query(w, "LISTEN c2")
        query(w, "BEGIN")
        query(w, "SELECT * FROM events WHERE id = 5")
        notify_direct(pins, "c2", "a")
        notify_direct(pins, "c2", "b")
        msgs = query(w, "SELECT count(*) FROM events WHERE id = 5")
        assert [t for t, _ in msgs] == ["T", "D", "C", "Z"] and msgs[-1][1] == b"T"
        assert nothing_pending(w)
        msgs = query(w, "COMMIT")
        assert [t for t, _ in msgs] == ["C", "A", "A", "Z"]
        assert [notification(b)[1:] for t, b in msgs if t == "A"] == [("c2", "a"), ("c2", "b")]
        # a notification arriving while a statement runs on a data shard's link waits for
        # its answer to end (as Postgres, which sends it before ReadyForQuery)
        query(w, "INSERT INTO events (id, payload) OVERRIDING SYSTEM VALUE VALUES (5, 'five') "
                 "ON CONFLICT DO NOTHING")
        w.send(b"Q", b"WITH s AS MATERIALIZED (SELECT pg_sleep(0.5)) SELECT g FROM s, events, "
                     b"generate_series(1, 500) g WHERE events.id = 5\0")
        notify_direct(pins, "c2", "during")
        msgs = w.read_until("Z")
        types = [t for t, _ in msgs]
        assert types[0] == "T" and "A" not in types[:types.index("C")]
        assert types.count("D") == 500
        if "A" not in types:            # the statement was over before the NOTIFY
            msgs += wait_msgs(w, 1)
        assert [notification(b)[1:] for t, b in msgs if t == "A"] == [("c2", "during")]
    finally:
        w.close()


def test_many_notifications_held_in_a_transaction(pins):
    """Over 1 MB of notifications arriving during a transaction: none is lost (the link is
    paused, then read again when the transaction uses it: its injected BEGIN's answer does
    not swallow them) and COMMIT gets all of them, in order."""
    w = pins.wire()
    try:
        query(w, "LISTEN big")
        query(w, "BEGIN")
        query(w, "SELECT * FROM events WHERE id = 5")
        pins.on("auth", "SELECT pg_notify('big', i || repeat('x', 7000)) "
                        "FROM generate_series(1, 200) i")
        msgs = query(w, "SELECT pg_listening_channels()")       # joins the notify shard
        assert "A" not in [t for t, _ in msgs]
        msgs = query(w, "COMMIT")
        got = [notification(b)[2] for t, b in msgs if t == "A"]
        assert [int(p[:-7000]) for p in got] == list(range(1, 201))
        assert msgs[-1] == ("Z", b"I")
    finally:
        w.close()


def sequence_on(connect, direct_notify):
    """Run the LISTEN-in-transactions scenario on a connection from <connect>; the
    notifications it got (channel, payload)."""
    got = []
    with connect() as conn:
        conn.add_notify_handler(lambda n: got.append((n.channel, n.payload)))
        with conn.transaction(force_rollback=True):
            conn.execute("LISTEN rb")
        direct_notify("rb", "after rollback")
        conn.execute("SELECT 1")
        with conn.transaction():
            conn.execute("LISTEN cm")
            direct_notify("cm", "before commit")
        direct_notify("cm", "after commit")
        wait_until(lambda: conn.execute("SELECT 1") and ("cm", "after commit") in got, 10,
                   what="notifications")
        chans = sorted(r[0] for r in conn.execute("SELECT pg_listening_channels()"))
    return got, chans


def test_listen_in_transactions_as_postgres(pins):
    """LISTEN takes effect at COMMIT, not after ROLLBACK: the same scenario through neki
    and on the reference server gets the same notifications and channels."""
    def on_auth(channel, payload):
        notify_direct(pins, channel, payload)

    def on_ref(channel, payload):
        with pins.ref() as c:
            c.execute(f"NOTIFY {channel}, {lit(payload)}")
    got = sequence_on(pins.connect, on_auth)
    want = sequence_on(pins.ref, on_ref)
    assert got == want
    assert ("rb", "after rollback") not in got[0] and got[1] == ["cm"]


def test_listen_in_one_query_and_tx_mode_single(pins):
    """LISTEN in a Query of several statements (its implicit transaction) and in a
    transaction block of one Query; a transaction held to one shard by __neki.tx_mode =
    single cannot add the notify shard."""
    w = pins.wire()
    try:
        msgs = query(w, "LISTEN m1; LISTEN m2")
        assert [t for t, _ in msgs] == ["C", "C", "Z"]
        msgs = query(w, "BEGIN; LISTEN m3; COMMIT")
        assert msgs[-1] == ("Z", b"I")
        msgs = query(w, "SELECT pg_listening_channels() ORDER BY 1")
        assert [b[6:].decode() for t, b in msgs if t == "D"] == ["m1", "m2", "m3"]
        query(w, "SET __neki.tx_mode = single")
        query(w, "BEGIN")
        query(w, "SELECT * FROM events WHERE id = 11")
        msgs = query(w, "LISTEN m4")
        err = error_fields(next(b for t, b in msgs if t == "E"))
        assert (err["C"], err["M"]) == ("0A000", 'statement would add shard "auth" to the '
                                        "transaction, but __neki.tx_mode is single")
        query(w, "ROLLBACK")
    finally:
        w.close()


def test_unlisten(pins):
    """UNLISTEN name stops one channel, UNLISTEN * all; pg_listening_channels() follows;
    the listening link is held by the session (active in SHOW SERVERS while it is idle) and
    after UNLISTEN * it is the pool's again."""
    with pins.connect() as conn, pins.connect() as other:
        got = []
        conn.add_notify_handler(lambda n: got.append((n.channel, n.payload)))
        assert other.execute("SELECT pg_listening_channels()").fetchall() == []
        conn.execute("UNLISTEN nothing")                # listening nowhere: fine
        conn.execute("LISTEN u1")
        conn.execute("LISTEN u2")
        conn.execute("UNLISTEN u1")
        assert [r[0] for r in conn.execute("SELECT pg_listening_channels()")] == ["u2"]
        assert other.execute("SELECT pg_listening_channels()").fetchall() == []
        notify_direct(pins, "u1", "x")
        notify_direct(pins, "u2", "y")
        wait_until(lambda: conn.execute("SELECT 1") and got, 10, what="notification")
        assert got == [("u2", "y")]
        held = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == held
        assert server_state(pins, held) == "active"
        conn.execute("UNLISTEN *")
        assert conn.execute("SELECT pg_listening_channels()").fetchall() == []
        assert server_state(pins, held) == "idle"


def test_held_link_follows_session_sets(pins):
    """A SET the session ran on another shard's link meanwhile (inside a transaction on a
    data shard) reaches the held listening link before its next statement; so SHOW, which
    runs there, answers as the reference does."""
    with pins.connect() as conn, pins.ref() as ref:
        for c in (conn, ref):
            c.execute("LISTEN sets")
            with c.transaction():
                c.execute("SELECT * FROM events WHERE id = 7")
                c.execute("SET work_mem = '7MB'")
        held = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        assert conn.execute("SHOW work_mem").fetchall() == ref.execute("SHOW work_mem") \
            .fetchall() == [("7MB",)]
        assert conn.execute("SELECT pg_backend_pid()").fetchone()[0] == held


def test_disconnect_closes_the_listening_link(pins):
    """The held link ends with the session: its backend leaves pg_stat_activity of the
    authoritative shard."""
    conn = pins.connect()
    conn.execute("LISTEN bye")
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    assert pid in backend_pids(pins, "auth")
    conn.close()
    wait_until(lambda: pid not in backend_pids(pins, "auth"), 10, what="the backend gone")


def test_psql_shows_notifications(pins):
    out = subprocess.run(
        ["psql", "-X", "-h", "127.0.0.1", "-p", str(pins.neki.port), "-U", "postgres",
         "-d", pins.name, "-c", "LISTEN ps", "-c", "NOTIFY ps, 'hello'",
         "-c", "SELECT pg_listening_channels()"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert out.returncode == 0, out.stdout
    assert 'Asynchronous notification "ps" with payload "hello" received from server ' \
           'process with PID' in out.stdout
    assert " ps\n" in out.stdout


def test_notification_queue_usage(pins):
    """pg_notification_queue_usage(): the notify shard's value, with the spec's NOTICE;
    __neki.notification_queue_usage() gives the per-shard breakdown."""
    notices = []
    with pins.connect() as conn:
        conn.add_notice_handler(lambda n: notices.append(
            (n.severity, n.sqlstate, n.message_primary, n.message_hint)))
        got = conn.execute("SELECT pg_notification_queue_usage()").fetchone()[0]
    want = pins.on("auth", "SELECT pg_notification_queue_usage()")[0][0]
    assert got == want
    assert notices == [
        ("NOTICE", "00000", "pg_notification_queue_usage() reports the fullest queue across this "
         "database's notify shard group",
         "For the per-shard breakdown, query __neki.notification_queue_usage().")]
    rows = pins.run("SELECT * FROM __neki.notification_queue_usage()")
    assert rows == [("auth", want)]


def test_listeners_wait_for_pool_slots_like_session_links(pg_cluster):
    """Each listening session holds one link of the authoritative shard's pool, counted in
    its pool_size like a session-mode link: with pool_size 2, two listeners leave a third
    session's statement on that shard waiting (SHOW POOLS maxwait of <db>@auth; statements
    on data shards go on) until one listener stops listening."""
    with sharded_database(pg_cluster, "pinpool") as db, \
            routing_neki(pg_cluster, db, topology(db), Db,
                         settings={"default_pool_size": 2, "workers": 1}) as d:
        create_schema(d, SCHEMA[:1], reference=False)
        a, b, c = d.connect(), d.connect(), d.connect()
        try:
            a.execute("LISTEN p")
            b.execute("LISTEN p")
            result = {}

            def third():
                result["pid"] = c.execute("SELECT pg_backend_pid()").fetchone()[0]
            t = threading.Thread(target=third, daemon=True)
            t.start()

            def waiting():
                with d.neki.admin_connect() as adm:
                    cur = adm.execute("SHOW POOLS", prepare=False)
                    names = [x.name for x in cur.description]
                    return any(r[names.index("database")] == f"{db}@auth" and
                               (r[names.index("maxwait")] or r[names.index("maxwait_us")]) and
                               r[names.index("sv_active")] == 2 for r in cur.fetchall())
            wait_until(waiting, 10, what="the third session to wait for a link")
            assert "pid" not in result
            with d.connect() as other:     # data shards have their own pools
                assert other.execute("SELECT count(*) FROM events WHERE id = 1").fetchone() \
                    == (0,)
            a.execute("UNLISTEN *")
            t.join(10)
            assert "pid" in result
        finally:
            for conn in (a, b, c):
                conn.close()


# ---- advisory locks --------------------------------------------------------------------

def two_keys(pins, base):
    """Two advisory-lock keys >= base that route to different shards."""
    a = base
    sa = pins.lock_shard(a)
    b = next(k for k in range(base + 1, base + 60) if pins.lock_shard(k) != sa)
    return a, b


def advisory_rows(pins, server, pid=None):
    sql = ("SELECT objid, pid, granted FROM pg_locks WHERE locktype = 'advisory' "
           "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
    rows = pins.on(server, sql)
    return [r for r in rows if pid is None or r[1] == pid]


def test_lock_contention_meets_on_the_key_shard(pins):
    """Two sessions locking one key meet on its shard whatever their statements touch: the
    second waits (seen in pg_locks on that shard) until the first unlocks."""
    key = 4101
    shard = pins.lock_shard(key)
    other_shard_id = next(i for i in range(1, 80) if pins.lock_shard(i) != shard)
    with pins.connect() as s1, pins.connect() as s2:
        with s1.transaction():          # a transaction on another shard first
            s1.execute(f"SELECT * FROM events WHERE id = {other_shard_id}")
            s1.execute(f"SELECT pg_advisory_lock({key})")
        assert [r[2] for r in advisory_rows(pins, shard)] == [True]
        done = threading.Event()

        def second():       # a binary parameter routes as the literal does
            s2.execute("SELECT pg_advisory_lock(%b)", (key,))
            done.set()
        t = threading.Thread(target=second, daemon=True)
        t.start()
        wait_until(lambda: sorted(r[2] for r in advisory_rows(pins, shard)) == [False, True],
                   10, what="the second session waiting on the key's shard")
        assert not done.is_set()
        assert s1.execute(f"SELECT pg_advisory_unlock({key})").fetchone() == (True,)
        t.join(10)
        assert done.is_set()
        assert [r[2] for r in advisory_rows(pins, shard)] == [True]
        assert s2.execute("SELECT pg_advisory_unlock(%s)", (key,)).fetchone() == (True,)
        assert advisory_rows(pins, shard) == []


def lock_script(conns, steps):
    """Run (session, sql) steps; each step's rows and the WARNINGs it raised."""
    out = []
    notes = [[], []]
    for i, conn in enumerate(conns):
        conn.add_notice_handler(lambda n, i=i: notes[i].append((n.severity, n.sqlstate,
                                                                 n.message_primary)))
    for who, sql in steps:
        before = len(notes[who])
        try:
            cur = conns[who].execute(sql)
            rows = cur.fetchall() if cur.description is not None else cur.statusmessage
        except psycopg.Error as e:
            rows = ("ERROR", e.diag.sqlstate, e.diag.message_primary)
        out.append((who, sql, rows, notes[who][before:]))
    return out


LOCK_STEPS = [
    (0, "SELECT pg_try_advisory_lock({k1})"), (1, "SELECT pg_try_advisory_lock({k1})"),
    (0, "SELECT pg_try_advisory_lock({k1})"), (0, "SELECT pg_advisory_unlock({k1})"),
    (1, "SELECT pg_try_advisory_lock({k1})"), (0, "SELECT pg_advisory_unlock({k1})"),
    (1, "SELECT pg_try_advisory_lock({k1})"), (0, "SELECT pg_advisory_unlock({k1})"),
    (1, "SELECT pg_try_advisory_lock_shared({k1})"),
    (1, "SELECT pg_advisory_unlock({k1}), pg_advisory_unlock({k1})"),
    (0, "SELECT pg_try_advisory_lock_shared({k2})"),
    (1, "SELECT pg_try_advisory_lock_shared({k2})"), (1, "SELECT pg_try_advisory_lock({k2})"),
    (0, "SELECT pg_advisory_unlock_shared({k2})"), (1, "SELECT pg_advisory_unlock({k2})"),
    (0, "SELECT pg_try_advisory_lock(3, 4)"), (1, "SELECT pg_try_advisory_lock(3, 4)"),
    (1, "SELECT pg_try_advisory_lock(12884901892)"),      # 3 * 2^32 + 4: another lock
    (0, "BEGIN"), (0, "SELECT pg_try_advisory_xact_lock({k3})"),
    (1, "SELECT pg_try_advisory_xact_lock({k3})"), (0, "COMMIT"),
    (1, "SELECT pg_try_advisory_xact_lock({k3})"),
    (0, "SELECT pg_advisory_unlock_all()"), (1, "SELECT pg_try_advisory_lock(3, 4)"),
    (1, "SELECT pg_advisory_unlock_all()"), (0, "SELECT pg_advisory_unlock(3, 4)"),
]


def test_lock_results_match_reference(pins):
    """try-locks, stacking, shared locks, both key forms, transaction-level locks and the
    WARNING of an unlock that holds nothing: as on the reference server (the keys route to
    one shard, as (3, 4) does: 3 * 2^32 + 4)."""
    shard = pins.lock_shard(12884901892)
    k1, k2, k3 = [k for k in range(7000, 7400) if pins.lock_shard(k) == shard][:3]
    steps = [(who, sql.format(k1=k1, k2=k2, k3=k3)) for who, sql in LOCK_STEPS]
    with pins.connect() as a, pins.connect() as b:
        got = lock_script([a, b], steps)
    with pins.ref() as a, pins.ref() as b:
        want = lock_script([a, b], steps)
    assert got == want
    assert ("WARNING", "01000", "you don't own a lock of type ExclusiveLock") in \
        [n for step in got for n in step[3]]
    for server in pins.cluster.shards + ["auth"]:
        assert advisory_rows(pins, server) == []


def test_session_locks_on_two_shards_are_sixty(pins):
    """60 with the spec's sentence for a session lock on a second shard (also in one
    statement); once unlocked the other shard is fine; transaction-level locks are not
    bound; a non-constant key is 11."""
    sixty = ("NK013", "not implemented: [60] A session cannot hold session advisory locks on "
             "multiple shards.")
    a, b = two_keys(pins, 8100)
    with pins.connect() as conn:
        def err(sql):
            with pytest.raises(psycopg.Error) as e:
                conn.execute(sql)
            return e.value.diag.sqlstate, e.value.diag.message_primary
        conn.execute(f"SELECT pg_advisory_lock({a})")
        assert err(f"SELECT pg_advisory_lock({b})") == sixty
        assert err(f"SELECT pg_try_advisory_lock_shared({b})") == sixty
        with conn.transaction():
            assert conn.execute(f"SELECT pg_try_advisory_xact_lock({b})").fetchone() == (True,)
        assert conn.execute(f"SELECT pg_advisory_unlock({b})").fetchone() == (False,)
        conn.execute(f"SELECT pg_advisory_unlock({a})")
        conn.execute(f"SELECT pg_advisory_lock({b})")     # the session holds none on a now
        assert err(f"SELECT pg_advisory_lock({a})") == sixty
        conn.execute("SELECT pg_advisory_unlock_all()")
        assert err(f"SELECT pg_advisory_lock({a}), pg_advisory_lock({b})") == sixty
        assert err("SELECT pg_advisory_lock(id) FROM events") == (
            "NK013", "not implemented: [11] This shard index cannot route advisory locks.")
        assert err("SELECT pg_advisory_lock(1) FROM events") == (
            "NK013", "not implemented: [62] Advisory locks are unavailable in this evaluation "
            "context.")
    assert advisory_rows(pins, pins.lock_shard(a)) == []


def test_lock_holds_the_link_until_unlock_all(pins):
    """A session lock holds the session's link to the key's shard across its transactions
    (active in SHOW SERVERS while the session is idle); pg_advisory_unlock_all() gives it
    back to the pool; a stacked lock needs as many unlocks, as Postgres."""
    key = 9001
    shard = pins.lock_shard(key)
    on_shard = next(i for i in range(1, 80) if pins.lock_shard(i) == shard)
    with pins.connect() as conn:
        conn.execute(f"SELECT pg_advisory_lock({key})")
        conn.execute(f"SELECT pg_advisory_lock({key})")
        pid = conn.execute("SELECT pg_backend_pid(), count(*) FROM events "
                           f"WHERE id = {on_shard}").fetchone()[0]   # the same link
        assert [r[1] for r in advisory_rows(pins, shard)] == [pid]
        assert server_state(pins, pid) == "active"
        with conn.transaction():
            conn.execute("INSERT INTO events (payload) VALUES ('x')")
            assert conn.execute("SELECT pg_backend_pid(), count(*) FROM events "
                                f"WHERE id = {on_shard}").fetchone()[0] == pid
        assert server_state(pins, pid) == "active"
        assert conn.execute(f"SELECT pg_advisory_unlock({key})").fetchone() == (True,)
        assert server_state(pins, pid) == "active"      # stacked: still one
        assert [r[1] for r in advisory_rows(pins, shard)] == [pid]
        conn.execute("SELECT pg_advisory_unlock_all()")
        assert advisory_rows(pins, shard) == []
        assert server_state(pins, pid) == "idle"


def test_disconnect_and_discard_all_release_locks(pins):
    """Closing the session ends its locks with its link; DISCARD ALL releases the locks and
    the LISTEN of its held links and gives them back."""
    key = 9201
    shard = pins.lock_shard(key)
    conn = pins.connect()
    conn.execute(f"SELECT pg_advisory_lock({key})")
    assert len(advisory_rows(pins, shard)) == 1
    conn.close()
    wait_until(lambda: advisory_rows(pins, shard) == [], 10, what="the lock gone")
    with pins.connect() as conn:
        conn.execute(f"SELECT pg_advisory_lock({key})")
        conn.execute("LISTEN d")
        pid = advisory_rows(pins, shard)[0][1]
        lpid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        with conn.transaction():
            with pytest.raises(psycopg.Error) as e:
                conn.execute("DISCARD ALL")
            assert e.value.diag.sqlstate == "25001"
        conn.execute("DISCARD ALL")
        assert advisory_rows(pins, shard) == []
        assert conn.execute("SELECT pg_listening_channels()").fetchall() == []
        assert server_state(pins, pid) == "idle" and server_state(pins, lpid) == "idle"


# ---- setval ----------------------------------------------------------------------------

def worker_conns(pins, n=2, attempts=1000):
    """One open neki connection on each of the <n> workers (the BackendKeyData pid names
    the worker). The workers share the listening socket and whichever wakes first accepts,
    so one of them may take many in a row: each extra connection is closed at once (kept,
    they would reach max_client_conn), and a run of them is followed by a short pause."""
    found = {}
    for k in range(attempts):
        if len(found) == n:
            break
        conn = pins.connect()
        worker = conn.info.backend_pid >> 20
        if worker in found:
            conn.close()
            if k % 50 == 49:
                time.sleep(0.01)
        else:
            found[worker] = conn
    assert len(found) == n, "could not reach every worker"
    return [found[k] for k in sorted(found)]


DRAWS = {
    "events_id_seq": "INSERT INTO events (payload) VALUES ('s') RETURNING id",
    "kinds_id_seq": "INSERT INTO kinds (name) VALUES ('k') RETURNING id",
    "notes_id_seq": "INSERT INTO notes (body) VALUES ('n') RETURNING id",
    "ticket": "SELECT nextval('ticket')",
    "countdown": "SELECT nextval('countdown')",
}


@pytest.mark.parametrize("seq", sorted(DRAWS))
def test_setval_next_value_on_every_worker(pins, seq):
    """After setval() through either worker, the next value drawn through any worker (an
    identity fill on a sharded table, a serial fill of a reference table, nextval(), an
    unsharded table's own default) is the one the reference gives after the same setval:
    n + increment, or n itself with is_called false. Each worker held reserved values."""
    draw = DRAWS[seq]
    conns = worker_conns(pins)
    try:
        for c in conns:                     # each worker reserves a batch
            c.execute(draw)
        inc = -2 if seq == "countdown" else 1
        sign = -1 if seq == "countdown" else 1
        with pins.ref() as ref:
            for i, (setter, drawer) in enumerate([(0, 1), (1, 0), (0, 0), (1, 1)]):
                n = sign * (1000 + 100 * i)
                called = i != 2
                sql = f"SELECT setval('{seq}', {n}, {str(called).lower()})"
                assert conns[setter].execute(sql).fetchall() == ref.execute(sql).fetchall()
                got = conns[drawer].execute(draw).fetchall()
                want = ref.execute(draw).fetchall()
                assert got == want, (seq, setter, drawer)
                assert want == [(n + inc if called else n,)]
    finally:
        for c in conns:
            c.close()


@pytest.mark.parametrize("ddl, draw", [
    ("ALTER SEQUENCE ticket RESTART WITH 7000", DRAWS["ticket"]),
    ("TRUNCATE kinds RESTART IDENTITY", DRAWS["kinds_id_seq"]),
    ("ALTER TABLE events ALTER COLUMN id RESTART WITH 900", DRAWS["events_id_seq"]),
])
def test_sequence_ddl_drops_reserved_values(pins, ddl, draw):
    """DDL that restarts a sequence is followed like setval(): the next value drawn through
    the other worker is the reference's."""
    conns = worker_conns(pins)
    try:
        for c in conns:
            c.execute(draw)
        with pins.ref() as ref:
            ref.execute(ddl)
            conns[0].execute(ddl)
            assert conns[1].execute(draw).fetchall() == ref.execute(draw).fetchall()
    finally:
        for c in conns:
            c.close()


def seq_script(conn):
    """setval() and currval() / lastval() in one session, as one Postgres defines them."""
    steps = [
        "SELECT setval('ticket', 42)", "SELECT currval('ticket')", "SELECT lastval()",
        "SELECT nextval('ticket')", "SELECT setval('ticket', 100)", "SELECT lastval()",
        "SELECT currval('ticket')", "SELECT setval('ticket', 7, false)",
        "SELECT currval('ticket')", "SELECT nextval('ticket')", "SELECT lastval()",
        "SELECT setval('countdown', -50)", "SELECT lastval()", "SELECT currval('countdown')",
        "BEGIN", "SELECT setval('ticket', 300)", "ROLLBACK", "SELECT nextval('ticket')",
        "SELECT setval('ticket', 0)", "SELECT setval('ticket', 9, NULL)",
        "SELECT setval('ticket', NULL)", "SELECT nextval('ticket')",
        "DISCARD SEQUENCES", "SELECT currval('ticket')", "SELECT lastval()",
        "SELECT setval('public.ticket'::regclass, 20, 'off')", "SELECT nextval('ticket')",
        "DISCARD ALL", "SELECT currval('ticket')",
    ]
    out = []
    for sql in steps:
        try:
            cur = conn.execute(sql)
            out.append(cur.fetchall() if cur.description is not None else cur.statusmessage)
        except psycopg.Error as e:
            out.append((e.diag.sqlstate, e.diag.message_primary))
    cur = conn.execute("SELECT setval('ticket', %s, %s)", (500, False))    # parameters
    out.append(cur.fetchall())
    out.append(conn.execute("SELECT nextval('ticket')").fetchall())
    return out


def test_setval_currval_lastval_as_postgres(pins):
    with pins.connect() as conn:
        got = seq_script(conn)
    with pins.ref() as conn:
        want = seq_script(conn)
    assert got == want
    assert got[-1] == [(500,)]


def test_setval_refusals(pins):
    with pins.connect() as conn:
        def err(sql):
            with pytest.raises(psycopg.Error) as e:
                conn.execute(sql)
            return e.value.diag.sqlstate, e.value.diag.message_primary
        assert err("SELECT setval('ticket', (SELECT max(id) FROM events))") == (
            "0A000", "setval() on a sharded database needs a constant value")
        assert err("SELECT setval('events_id_seq', id) FROM events") == (
            "NK013", "not implemented: [101] Per-row router-only expression evaluation is "
            "unavailable here.")
        assert err("SELECT setval('ticket', 5), nextval('ticket')")[0] == "0A000"
        conn.execute("SET __neki.shard = 'auth'")
        assert err("SELECT setval('ticket', 5)") == (
            "0A000", "setval() is unavailable while __neki.shard is set")

