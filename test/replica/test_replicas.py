"""
Shards with streaming standbys (issue 22, NEKI-SPEC 3.4, 3.5, 6.6): a cluster of two data
shards, each with one standby made by pg_basebackup -R, behind one neki whose [shards] lists
them with replicas=. Roles and lag as the admin polls them (SHOW SHARDS,
__neki.list_shards()), reads under __neki.target = replica, refused writes, and the results
compared with the reference server holding every row.
"""
import contextlib
import json
import threading
import time

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import Neki, start_cluster, wait_until

TABLE = "CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL)"
POLL = "0.1"    # replica_poll_interval of these tests (seconds)


def topology(db):
    return {
        "databases": {db: {"schemas": {"public": {"tables": {
            "items": {"shard_group": "data", "shard_index": "by_id"}}}}}},
        "shard_groups": [
            {"uid": "authoritative", "key_ranges": [{"shard_uid": "auth"}]},
            {"uid": "data", "default_shard_index": "by_id",
             "key_ranges": [{"shard_uid": "shard-a", "end": "80"},
                            {"shard_uid": "shard-b", "start": "80"}]},
        ],
        "shard_indexes": {"by_id": {"type": "xxhash", "columns": ["id"]}},
        "authoritative_shard_group": "authoritative",
        "default_shard_group": "authoritative",
    }


def lit(value):
    return "'" + value.replace("'", "''") + "'"


class Replicated:
    """The cluster with standbys, its database and a neki routing it."""

    def __init__(self, settings=None):
        if psycopg is None:
            pytest.skip("python3-psycopg is not installed")
        self.cluster = start_cluster(shards=2)
        self.db = "rep"
        self.neki = None
        try:
            for server in self.cluster.servers:
                self.cluster.sql(server, f'CREATE DATABASE "{self.db}"')
            for shard in ("shard-a", "shard-b", "auth"):
                self.cluster.add_replica(shard, f"{shard}-r1")
            self.start_neki(settings)
        except BaseException:
            self.stop()
            raise

    def shards_ini(self):
        c = self.cluster
        lines = []
        for shard in ("shard-a", "shard-b"):
            lines.append(f"{shard} = host=127.0.0.1 port={c.port(shard)} dbname={self.db} "
                         f"replicas=127.0.0.1:{c.port(shard + '-r1')}")
        lines.append(f"auth = host=127.0.0.1 port={c.port('auth')} dbname={self.db} "
                     f"replicas=127.0.0.1:{c.port('auth-r1')}")
        return "\n".join(lines)

    def make_neki(self, settings=None, db_options="", shards=None):
        auth = f"host=127.0.0.1 port={self.cluster.port('auth')} dbname={self.db}"
        return Neki(settings={"workers": 2, "admin_users": "postgres",
                              "pool_mode": "transaction", "replica_poll_interval": POLL,
                              "replica_lag_tolerable_min": "1",
                              "replica_lag_tolerable_max": "3", **(settings or {})},
                    databases={self.db: f"{auth} topology=yes {db_options}".rstrip()},
                    shards=shards or self.shards_ini())

    def start_neki(self, settings=None):
        self.neki = self.make_neki(settings)
        self.neki.start()
        with self.neki.admin_connect() as conn:
            conn.execute("SELECT * FROM __neki.set_data_topology("
                         f"{lit(json.dumps(topology(self.db)))}, true)")

        def routed():
            try:
                with self.connect() as conn:
                    conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
                    return True
            except psycopg.Error:
                return False
        wait_until(routed, 30, what="neki routes the database")
        self.run(TABLE)
        self.cluster.sql("reference", TABLE, dbname=self.db)

    def connect(self, **kw):
        return self.neki.connect(dbname=self.db, **kw)

    def run(self, sql, params=None, **kw):
        with self.connect(**kw) as conn:
            cur = psycopg.ClientCursor(conn)
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else None

    def admin(self, sql):
        with self.neki.admin_connect() as conn:
            return conn.execute(sql).fetchall()

    def shards(self):
        """SHOW SHARDS as {(uid, server): row dict}."""
        with self.neki.admin_connect() as conn:
            cur = conn.execute("SHOW SHARDS")
            names = [d.name for d in cur.description]
            return {(r[0], r[names.index("server")]): dict(zip(names, r))
                    for r in cur.fetchall()}

    def wait_roles(self, want, timeout=20):
        """Bounded poll until SHOW SHARDS gives each (uid, server) the role in <want>."""
        def ok():
            got = self.shards()
            return all(got[k]["role"] == v for k, v in want.items())
        wait_until(ok, timeout, interval=0.05, what=f"roles {want}")

    def stop(self):
        problems = []
        if self.neki is not None:
            problems = self.neki.cleanup()
        self.cluster.stop()
        assert not problems, "\n".join(problems)


@contextlib.contextmanager
def replicated(settings=None):
    """A Replicated set-up, its neki log printed when the body fails, stopped after."""
    r = Replicated(settings)
    try:
        yield r
    except BaseException:
        print(f"--- neki log (tail):\n{r.neki.log()[-20000:]}")
        raise
    finally:
        r.stop()


@pytest.fixture(scope="module")
def rep():
    with replicated() as r:
        yield r


ROLES = {("shard-a", 0): "primary", ("shard-a", 1): "standby",
         ("shard-b", 0): "primary", ("shard-b", 1): "standby",
         ("auth", 0): "primary", ("auth", 1): "standby"}


def test_show_shards_lists_every_server_with_its_role(rep):
    rep.wait_roles(ROLES)
    rows = rep.shards()
    assert sorted(rows) == sorted(ROLES)
    c = rep.cluster
    for (uid, server), r in rows.items():
        name = uid if server == 0 else uid + "-r1"
        assert r["port"] == c.port(name)
        assert r["kind"] == ("primary" if server == 0 else "replica")
        assert r["primary"] is (server == 0)
        assert r["state"] == ("up" if server == 0 else "read-only")
    # an idle primary: its standby has replayed everything, lag about one poll
    wait_until(lambda: all(r["lag_ms"] is not None and r["lag_ms"] < 2000
                           for r in rep.shards().values()), 10, what="known lags")


def test_list_shards_lists_every_server(rep):
    rep.wait_roles(ROLES)
    with rep.neki.admin_connect() as conn:
        cur = conn.execute("SELECT * FROM __neki.list_shards()")
        names = [d.name for d in cur.description]
        got = [dict(zip(names, r)) for r in cur.fetchall()]
    rows = sorted((r["uid"], r["server"], r["kind"], r["role"], r["state"],
                   r["has_writable_primary"], r["lag_ms"] is not None) for r in got)
    assert rows == [("auth", 0, "primary", "primary", "up", True, True),
                    ("auth", 1, "replica", "standby", "read-only", True, True),
                    ("shard-a", 0, "primary", "primary", "up", True, True),
                    ("shard-a", 1, "replica", "standby", "read-only", True, True),
                    ("shard-b", 0, "primary", "primary", "up", True, True),
                    ("shard-b", 1, "replica", "standby", "read-only", True, True)]


def test_a_standby_that_stops_replaying_falls_behind(rep):
    """Lag is measured against the primary's position over time: a standby whose replay is
    paused while its primary writes shows a growing lag; resumed, it catches up."""
    rep.wait_roles(ROLES)
    c = rep.cluster
    c.sql("shard-a-r1", "SELECT pg_wal_replay_pause()")
    try:
        c.sql("shard-a", "CREATE TABLE IF NOT EXISTS lagprobe (x int)", dbname=rep.db)
        c.sql("shard-a", "INSERT INTO lagprobe VALUES (1)", dbname=rep.db)
        wait_until(lambda: (rep.shards()[("shard-a", 1)]["lag_ms"] or 0) > 500, 10,
                   what="shard-a's standby to fall behind")
        assert rep.shards()[("shard-b", 1)]["lag_ms"] < 500
    finally:
        c.sql("shard-a-r1", "SELECT pg_wal_replay_resume()")
        c.sql("shard-a", "DROP TABLE IF EXISTS lagprobe", dbname=rep.db)
    wait_until(lambda: rep.shards()[("shard-a", 1)]["lag_ms"] < 500, 10,
               what="shard-a's standby to catch up")


# ---- __neki.target ---------------------------------------------------------------------

def key_on(rep, shard, start=1):
    """An id whose row lives on <shard> (EXPLAIN (NEKI_PLAN) names the shard)."""
    for i in range(start, start + 200):
        plan = rep.run(f"EXPLAIN (NEKI_PLAN) SELECT * FROM items WHERE id = {i}")
        if shard in " ".join(str(r[0]) for r in plan):
            return i
    raise AssertionError(f"no id on {shard}")


def both(rep, sql):
    """(rows through neki under target replica, rows on the reference), sorted."""
    return (sorted(rep.run(sql, options="-c __neki.target=replica")),
            sorted(rep.cluster.sql("reference", sql, dbname=rep.db)))


def insert_both(rep, rows):
    vals = ", ".join(f"({i}, '{v}')" for i, v in rows)
    rep.run(f"INSERT INTO items VALUES {vals}")
    rep.cluster.sql("reference", f"INSERT INTO items VALUES {vals}", dbname=rep.db)


def replayed(rep):
    for name in ("shard-a-r1", "shard-b-r1", "auth-r1"):
        rep.cluster.wait_replayed(name)


def test_replica_reads_return_the_rows_within_the_lag_bound(rep):
    rep.wait_roles(ROLES)
    insert_both(rep, [(i, f"v{i}") for i in range(1, 41)])
    replayed(rep)
    for sql in ("SELECT id, v FROM items", "SELECT id, v FROM items WHERE id IN (3, 17, 40)",
                "SELECT count(*), min(id), max(id) FROM items"):
        got, want = both(rep, sql)
        assert got == want, sql


def test_reads_go_to_the_standby_and_writes_are_refused(rep):
    rep.wait_roles(ROLES)
    a = key_on(rep, "shard-a", 100)
    sql = f"SELECT inet_server_port(), pg_is_in_recovery() FROM items WHERE id = {a}"
    insert_both(rep, [(a, "x")])
    replayed(rep)
    c = rep.cluster
    assert rep.run(sql) == [(c.port("shard-a"), False)]
    with rep.connect() as conn:
        conn.execute("SET __neki.target = 'REPLICA'")
        assert conn.execute("SHOW __neki.target").fetchall() == [("replica",)]
        assert conn.execute(sql).fetchall() == [(c.port("shard-a-r1"), True)]
        # a transaction stays on the servers it started on
        conn.execute("BEGIN")
        for _ in range(3):
            assert conn.execute(sql).fetchall() == [(c.port("shard-a-r1"), True)]
        conn.execute("COMMIT")
        for write in (f"INSERT INTO items VALUES ({a + 1000}, 'w')",
                      f"UPDATE items SET v = 'w' WHERE id = {a}",
                      f"DELETE FROM items WHERE id = {a}",
                      "CREATE TABLE nope (x int)"):
            with pytest.raises(psycopg.Error) as e:
                conn.execute(write)
            assert e.value.diag.sqlstate == "25006", write
            assert "while __neki.target is replica" in e.value.diag.message_primary
            assert "SET __neki.target = primary" in e.value.diag.message_hint
        conn.execute("SET __neki.target = 'primary'")
        assert conn.execute(sql).fetchall() == [(c.port("shard-a"), False)]
    # startup options
    assert rep.run(sql, options="-c __neki.target=replica") == [(c.port("shard-a-r1"), True)]
    with pytest.raises(psycopg.Error) as e:
        rep.run(f"INSERT INTO items VALUES ({a + 1000}, 'w')",
                options="-c __neki.target=rdonly")
    assert e.value.diag.sqlstate == "25006"


def test_rdonly_target_without_rdonly_standbys_fails_with_nk205(rep):
    rep.wait_roles(ROLES)
    with pytest.raises(psycopg.Error) as e:
        rep.run("SELECT * FROM items WHERE id = 1", options="-c __neki.target=rdonly")
    assert e.value.diag.sqlstate == "NK205"
    assert "with type SIDECAR_TYPE_RDONLY" in e.value.diag.message_primary


def test_a_standby_behind_the_lag_bound_is_not_read(rep):
    """replica_lag_tolerable_max (3 s here): a standby further behind is no candidate, the
    read fails (no fallback to the primary); another shard's reads go on; with
    replica_recency require the bound is replica_lag_tolerable_min (1 s)."""
    rep.wait_roles(ROLES)
    c = rep.cluster
    a, b = key_on(rep, "shard-a", 300), key_on(rep, "shard-b", 300)
    insert_both(rep, [(a, "a"), (b, "b")])
    replayed(rep)
    opts = "-c __neki.target=replica"
    c.sql("shard-a-r1", "SELECT pg_wal_replay_pause()")
    try:
        rep.run(f"UPDATE items SET v = 'a2' WHERE id = {a}")
        wait_until(lambda: (rep.shards()[("shard-a", 1)]["lag_ms"] or 0) > 1200, 10,
                   what="shard-a's standby behind the preferred tier")
        # within the max bound: still read (the old row), unless recency is required
        assert rep.run(f"SELECT v FROM items WHERE id = {a}", options=opts) == [("a",)]
        with pytest.raises(psycopg.Error) as e:
            rep.run(f"SELECT v FROM items WHERE id = {a}",
                    options=opts + " -c __neki.replica_recency=require")
        assert e.value.diag.sqlstate == "NK205"
        assert "shard-a with type SIDECAR_TYPE_REPLICA" in e.value.diag.message_primary
        wait_until(lambda: (rep.shards()[("shard-a", 1)]["lag_ms"] or 0) > 3200, 10,
                   what="shard-a's standby beyond the bound")
        with pytest.raises(psycopg.Error) as e:
            rep.run(f"SELECT v FROM items WHERE id = {a}", options=opts)
        assert e.value.diag.sqlstate == "NK205"
        assert rep.run(f"SELECT v FROM items WHERE id = {b}", options=opts) == [("b",)]
    finally:
        c.sql("shard-a-r1", "SELECT pg_wal_replay_resume()")
    wait_until(lambda: (rep.shards()[("shard-a", 1)]["lag_ms"] or 9999) < 1000, 10,
               what="shard-a's standby to catch up")
    assert rep.run(f"SELECT v FROM items WHERE id = {a}", options=opts) == [("a2",)]
    rep.cluster.sql("reference", f"UPDATE items SET v = 'a2' WHERE id = {a}", dbname=rep.db)


def test_database_target_key_starts_sessions_on_replicas(rep):
    """[databases] target=replica: the sessions' first __neki.target."""
    other = rep.make_neki(db_options="target=replica")
    try:
        other.start()
        a = key_on(rep, "shard-a", 500)

        def served():
            try:
                with other.connect(dbname=rep.db) as conn:
                    return conn.execute(f"SELECT pg_is_in_recovery() FROM items WHERE id = {a}"
                                        ).fetchall()
            except psycopg.Error:
                return None
        wait_until(lambda: served() is not None, 30, what="the second neki to serve")
        with other.connect(dbname=rep.db) as conn:
            assert conn.execute("SHOW __neki.target").fetchall() == [("replica",)]
            with pytest.raises(psycopg.Error) as e:
                conn.execute(f"INSERT INTO items VALUES ({a}, 'x')")
            assert e.value.diag.sqlstate == "25006"
    finally:
        problems = other.cleanup()
        assert not problems, problems


def test_replica_reads_under_a_write_load_stay_within_the_lag_bound(rep):
    """While a writer inserts rows stamped with the clock on both shards, every read under
    __neki.target = replica returns a newest stamp at most replica_lag_tolerable_max (3 s)
    behind the clock of the read, and the rows it sees are rows the writer committed."""
    rep.wait_roles(ROLES)
    replayed(rep)       # (the standbys have the table)
    stop, acked = threading.Event(), []

    def write():
        with rep.connect() as conn:
            i = 100000
            while not stop.is_set():
                conn.execute(f"INSERT INTO items VALUES ({i}, '{time.time():.6f}')")
                acked.append(i)
                i += 1
    w = threading.Thread(target=write, daemon=True)
    w.start()
    try:
        wait_until(lambda: len(acked) > 20, 10, what="writes")
        worst = 0.0
        with rep.connect(options="-c __neki.target=replica") as conn:
            for _ in range(40):
                t = time.time()
                rows = conn.execute("SELECT id, v::float8 FROM items WHERE id >= 100000"
                                    ).fetchall()
                assert rows, "the standbys have none of the writer's rows"
                # (the row being acknowledged may be visible before the writer noted it)
                assert {r[0] for r in rows} <= set(acked) | {acked[-1] + 1}
                worst = max(worst, t - max(r[1] for r in rows))
                stop.wait(0.05)
        assert worst < 3.0, worst
    finally:
        stop.set()
        w.join(10)


def test_rdonly_standbys_serve_the_rdonly_target_only(rep):
    """A standby listed by rdonly= serves __neki.target = rdonly, not replica."""
    rep.wait_roles(ROLES)
    replayed(rep)
    c = rep.cluster
    shards = rep.shards_ini().replace(f"replicas=127.0.0.1:{c.port('shard-b-r1')}",
                                      f"rdonly=127.0.0.1:{c.port('shard-b-r1')}")
    other = rep.make_neki(shards=shards)
    try:
        other.start()
        b = key_on(rep, "shard-b", 700)
        insert_both(rep, [(b, "r")])
        replayed(rep)
        sql = f"SELECT inet_server_port() FROM items WHERE id = {b}"

        def read(target):
            try:
                with other.connect(dbname=rep.db, options=f"-c __neki.target={target}") as conn:
                    return conn.execute(sql).fetchall()
            except psycopg.Error as e:
                return e.diag.sqlstate
        wait_until(lambda: read("rdonly") == [(c.port("shard-b-r1"),)], 30,
                   what="the rdonly standby to serve")
        assert read("replica") == "NK205"
        with other.admin_connect() as conn:
            rows = conn.execute("SHOW SHARDS").fetchall()
        kinds = {(r[0], r[5]): r[6] for r in rows}
        assert kinds[("shard-b", 1)] == "rdonly" and kinds[("shard-a", 1)] == "replica"
    finally:
        problems = other.cleanup()
        assert not problems, problems


def test_a_standby_given_as_a_unix_socket_directory(rep):
    """replicas=/dir:port: the standby is reached over its Unix socket (by the workers'
    pools and the admin's poller alike)."""
    rep.wait_roles(ROLES)
    c = rep.cluster
    shards = rep.shards_ini().replace(f"replicas=127.0.0.1:{c.port('shard-a-r1')}",
                                      f"replicas={c.sockdir}:{c.port('shard-a-r1')}")
    other = rep.make_neki(shards=shards)
    try:
        other.start()
        a = key_on(rep, "shard-a", 900)
        insert_both(rep, [(a, "u")])
        replayed(rep)
        sql = (f"SELECT inet_server_port(), pg_is_in_recovery(), v FROM items "
               f"WHERE id = {a}")

        def read():
            try:
                with other.connect(dbname=rep.db, options="-c __neki.target=replica") as conn:
                    return conn.execute(sql).fetchall()
            except psycopg.Error as e:
                return e.diag.sqlstate
        wait_until(lambda: read() == [(None, True, "u")], 30,
                   what="the standby to serve over its socket")
        with other.admin_connect() as conn:
            rows = conn.execute("SHOW SHARDS").fetchall()
        r = [r for r in rows if r[0] == "shard-a" and r[5] == 1][0]
        assert (r[1], r[7]) == (c.sockdir, "standby")
    finally:
        problems = other.cleanup()
        assert not problems, problems


def test_metrics_show_the_primary_and_the_lag_of_each_server(rep):
    import urllib.request
    from conftest import free_port
    rep.wait_roles(ROLES)
    mport = free_port()
    other = rep.make_neki(settings={"metrics_listen_port": mport})
    try:
        other.start()

        def samples():
            try:	# (the admin process opens the metrics port once it runs: polled)
                with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics",
                                            timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                return {}
            return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
                    for ln in text.splitlines() if ln and not ln.startswith("#")}
        key = 'neki_shard_server_lag_seconds{shard="shard-a",server="1"}'
        s = wait_until(lambda: (lambda s: s if key in s else None)(samples()), 10,
                       what="the standbys' lag in the metrics")
        for shard in ("shard-a", "shard-b", "auth"):
            assert s[f'neki_shard_server_primary{{shard="{shard}",server="0"}}'] == 1
            assert s[f'neki_shard_server_primary{{shard="{shard}",server="1"}}'] == 0
        assert 0 <= s[key] < 3
    finally:
        problems = other.cleanup()
        assert not problems, problems
