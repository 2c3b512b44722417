"""
When neki does not know enough to route, it holds the client or refuses; it never guesses
(issue 15, 1b). Real servers: the session cluster's shards, the storefront topology with its
authority on `auth` (which holds no customer rows), neki started through the fixtures.

- a session logged in before any topology: its statement waits and is routed once one is
  set, or ends at query_wait_timeout; with topology_file and the authoritative shard down,
  the topology is booted from the file and the sessions wait for the catalog.
- neki SIGKILLed under a routed load and started again (no topology_file: the admin finds
  the store on the authoritative shard about a second after start): the clients that come
  in meanwhile wait, so no row lands on the authoritative server's copy of `customers` and
  no count is answered from it.
- the admin process alone SIGKILLed (the master forks it again): the new admin keeps the
  topology and catalog in shared memory until it has loaded newer ones, so positional
  INSERTs and key lookups go on without an error and without a scatter.
- two neki hosts on one cluster: a table created through one is unknown to the other's
  catalog; the other loads it on demand before it routes a value (psycopg's text
  parameter '7' for a bigint key), so the row lands on the shard its typed key names.
"""
import json
import os
import re
import signal
import threading
import time

import pytest

from conftest import wait_until
from test_routing import (SCHEMA, Store, routing_instance, set_topology, sharded_database,
                          topology)

try:
    import psycopg
except ImportError:
    psycopg = None

CUSTOMERS = SCHEMA[:2]			# countries, customers (sharded by id over shard-a..d)


def routed(st):
    """Does a new session of <st> get the router (EXPLAIN (NEKI_PLAN) is its own)?"""
    try:
        with st.connect() as conn:
            conn.execute("EXPLAIN (NEKI_PLAN) SELECT 1")
            return True
    except psycopg.Error:
        return False


def started(inst, doc=None):
    """Start <inst> (and apply <doc>); a Store once a new session is routed."""
    inst.start()
    if doc is not None:
        set_topology(inst, doc)
    st = Store(inst.cluster, inst, inst.db)
    wait_until(lambda: routed(st), 30, what=f"neki routes {inst.db}")
    return st


def instance(cluster, db, **kw):
    inst = routing_instance(cluster, db, **kw)
    inst.cluster, inst.db = cluster, db
    return inst


def shard_of(st, table, key_sql):
    """The one server EXPLAIN (NEKI_PLAN) names for a lookup of <table> by <key_sql>."""
    rows = st.run(f"EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM {table} WHERE {key_sql}")
    found = [s for s in st.cluster.shards if any(s in r[0] for r in rows)]
    assert len(found) == 1, rows
    return found[0]


def count_on(st, server, table):
    return st.shard_rows(server, f"SELECT count(*) FROM {table}")[0][0]


def kill_all(inst):
    """SIGKILL the master and every child at once (nothing gets to clean up)."""
    inst.remember_pids()
    pids = [inst.pid] + inst.children()
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    inst.proc.wait(5)
    wait_until(lambda: not inst.leftovers(), 5, what="the killed neki processes to go")


class Load:
    """Threads that each open a session per statement and run <fn>(conn, i) until stopped;
    every error is kept with the time its session began (time.monotonic())."""

    def __init__(self, st, fn, threads=4):
        self.st, self.fn, self.errors, self.done = st, fn, [], 0
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, args=(k,)) for k in range(threads)]

    def run(self, k):
        i = k
        while not self.stop.is_set():
            began = time.monotonic()
            try:
                with self.st.connect() as conn:
                    self.fn(conn, i)
                with self.lock:
                    self.done += 1
            except psycopg.Error as e:
                with self.lock:
                    self.errors.append((began, f"{type(e).__name__}: {e}"))
            i += len(self.threads)

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads:
            t.join(30)


@pytest.fixture
def hold_db(pg_cluster):
    with sharded_database(pg_cluster, "hold") as db:
        for server in pg_cluster.servers:
            for sql in CUSTOMERS:
                pg_cluster.sql(server, sql, dbname=db)
        yield db


@pytest.fixture
def instances():
    made = []
    yield made
    problems = []
    for inst in made:
        problems += inst.cleanup()
    assert not problems, "\n".join(problems)


def log_on_failure(*insts):
    for inst in insts:
        print(f"--- neki log of port {inst.port} (tail):\n{inst.log()[-15000:]}")


# ---- before any topology ---------------------------------------------------------------------

def test_held_until_topology_is_published(pg_cluster, hold_db, instances):
    """A session of a sharded database logs in before any topology exists: its statement
    waits and is routed once one is set (not answered by the authoritative server), or ends
    at query_wait_timeout."""
    auth = f"host=127.0.0.1 port={pg_cluster.port('auth')} dbname={hold_db}"
    inst = instance(pg_cluster, hold_db,
                    databases={"quick": f"{auth} topology=yes query_wait_timeout=1"})
    instances.append(inst)
    try:
        inst.start()
        with inst.connect(dbname="quick") as conn:
            t0 = time.monotonic()
            with pytest.raises(psycopg.OperationalError) as ei:
                conn.execute("SELECT count(*) FROM customers")
            assert time.monotonic() - t0 >= 1
        # (libpq reports the FATAL with the connection's end: its text, no diag)
        assert 'query_wait_timeout\nDETAIL:  No data topology has been published for ' \
               'sharded database "quick".' in str(ei.value), str(ei.value)
        got = []
        with inst.connect(dbname=hold_db) as conn:	# logged in: login does not wait
            t = threading.Thread(target=lambda: got.append(
                conn.execute("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM customers "
                             "WHERE id = 7").fetchall()))
            t.start()
            set_topology(inst, topology(hold_db))
            t.join(30)
        assert len(got) == 1 and any("shard-" in r[0] for r in got[0]), got
    except BaseException:
        log_on_failure(inst)
        raise


def test_boot_from_topology_file_waits_for_the_catalog(pg_cluster, hold_db, instances):
    """neki boots its topology from topology_file while the authoritative shard is down;
    the catalog can only be read from that shard, so the sessions wait for it (and end at
    query_wait_timeout), then are routed by it. (The entries' welcome comes from shard-a:
    a login needs its entry's server.)"""
    entry = f"host=127.0.0.1 port={pg_cluster.port('shard-a')} dbname={hold_db} topology=yes"
    inst = instance(pg_cluster, hold_db, databases={
        hold_db: entry, "quick": f"{entry} query_wait_timeout=1"})
    inst.update({"topology_file": inst.dir / "topology.json"})
    instances.append(inst)
    got, errors = [], []

    def insert():
        try:
            with inst.connect(dbname=hold_db) as conn:
                psycopg.ClientCursor(conn).execute("INSERT INTO customers VALUES (7, 'x', NULL)")
                got.append(True)
        except psycopg.Error as e:
            errors.append(str(e))

    try:
        st = started(inst, topology(hold_db))
        inst.stop()
        pg_cluster.stop_server("auth")
        try:
            inst.start()
            inst.wait_log(r"data topology revision 1 loaded from the cache file")
            with inst.connect(dbname="quick") as conn:
                with pytest.raises(psycopg.OperationalError) as ei:
                    conn.execute("SELECT count(*) FROM customers")
            assert 'query_wait_timeout\nDETAIL:  The catalog of sharded database "quick" ' \
                   'has not been loaded from the authoritative shard.' in str(ei.value)
            t = threading.Thread(target=insert)
            t.start()
        finally:
            pg_cluster.start_server("auth")
        t.join(30)
        assert errors == [] and got == [True]
        home = shard_of(st, "customers", "id = 7")
        assert {s: count_on(st, s, "customers") for s in pg_cluster.shards + ["auth"]} == \
            {s: int(s == home) for s in pg_cluster.shards + ["auth"]}
    except BaseException:
        log_on_failure(inst)
        raise


# ---- a whole neki killed and started again --------------------------------------------------

FIRST = 40	# customers written before the kill


def test_restart_under_routed_load_never_serves_passthrough(pg_cluster, hold_db, instances):
    inst = instance(pg_cluster, hold_db)
    instances.append(inst)
    try:
        st = started(inst, topology(hold_db))
        st.run("INSERT INTO customers VALUES " +
               ", ".join(f"({i}, 'c{i}', NULL)" for i in range(1, FIRST + 1)))
        committed = [FIRST]		# rows committed before any read below starts

        def write(conn, i):
            cid = 1000 + i
            psycopg.ClientCursor(conn).execute(
                f"INSERT INTO customers VALUES ({cid}, 'w{cid}', NULL)")
            with lock:
                committed[0] += 1

        def read(conn, i):
            with lock:
                floor = committed[0]
            (n,), = conn.execute("SELECT count(*) FROM customers").fetchall()
            if n < floor:
                seen_low.append((n, floor))

        lock, seen_low = threading.Lock(), []
        with Load(st, write, threads=2) as writers, Load(st, read, threads=2) as readers:
            wait_until(lambda: writers.done >= 10 and readers.done >= 10, 20,
                       what="the load to run")
            kill_all(inst)
            inst.start()		# (its sessions come in at once: the load reconnects)
            up = time.monotonic()
            # past the window in which the admin finds the store (about a second)
            wait_until(lambda: time.monotonic() - up > 2.5 and writers.done >= 30, 30,
                       what="the load to run on the restarted neki")
        # sessions begun while neki was down fail; none begun on the restarted neki may
        refused = [e for began, e in writers.errors + readers.errors if began >= up]
        assert seen_low == [], f"counts answered from a copy that misses rows: {seen_low}"
        assert count_on(st, "auth", "customers") == 0, "rows landed on the authoritative server"
        assert refused == [], refused
        total = sum(count_on(st, s, "customers") for s in pg_cluster.shards)
        assert total >= committed[0]	# (a write cut by the kill may have committed)
    except BaseException:
        log_on_failure(inst)
        raise


# ---- the admin process alone killed ---------------------------------------------------------

def admin_pid(inst):
    found = re.findall(r"admin \d+ started \(pid (\d+)\)", inst.log())
    return int(found[-1]) if found else None


def lookup_loop(st, protocol, shards, problems, stop):
    """Positional INSERTs and key lookups on one session until <stop>: every error, and
    every lookup not planned on its key's one shard, into <problems>."""
    i = 0
    with st.connect() as conn:
        cur = psycopg.ClientCursor(conn) if protocol == "simple" else conn.cursor()
        while not stop.is_set():
            cid = 5000 + i
            try:
                cur.execute("INSERT INTO customers VALUES (%s, %s, NULL)", (cid, f"a{cid}"))
                key = list(shards)[i % len(shards)]
                rows = cur.execute("EXPLAIN (NEKI_PLAN, FORMAT TEXT) SELECT * FROM "
                                   "customers WHERE id = %s", (key,)).fetchall()
                named = [s for s in st.cluster.shards if any(s in r[0] for r in rows)]
                if named != [shards[key]]:
                    problems.append(f"lookup of {key} planned on {named}")
            except psycopg.Error as e:
                problems.append(f"{type(e).__name__}: {e}")
            i += 1


@pytest.mark.parametrize("protocol,auth_down", [("simple", False), ("extended", False),
                                                ("simple", True)])
def test_admin_restart_keeps_catalog_and_topology(pg_cluster, hold_db, instances, protocol,
                                                  auth_down):
    """The admin process SIGKILLed during positional INSERTs and key lookups (with the
    authoritative shard down too: the new admin cannot load anything)."""
    inst = instance(pg_cluster, hold_db)
    instances.append(inst)
    try:
        st = started(inst, topology(hold_db))
        shards = {cid: shard_of(st, "customers", f"id = {cid}") for cid in (7, 42, 1000)}
        loaded = r"published catalog version \d+ \(1 database\)"
        if auth_down:
            loaded = r"could not load the catalog of database"
        before = len(re.findall(loaded, inst.log()))
        problems, stop = [], threading.Event()
        t = threading.Thread(target=lookup_loop, args=(st, protocol, shards, problems, stop))
        t.start()
        try:
            time.sleep(0.2)	# (the loop runs before the kill: it must see it)
            if auth_down:
                pg_cluster.stop_server("auth")
            old = admin_pid(inst)
            os.kill(old, signal.SIGKILL)
            wait_until(lambda: admin_pid(inst) not in (None, old), 10, what="a new admin")
            # the new admin has loaded the catalog of the database (or failed to), and the
            # loop ran on meanwhile
            wait_until(lambda: len(re.findall(loaded, inst.log())) > before, 15,
                       what="the new admin's catalog")
            time.sleep(0.3)
        finally:
            stop.set()
            t.join(30)
            if pg_cluster.status().get("auth") != "running":
                pg_cluster.start_server("auth")
        assert problems == []
        assert not re.search(r"published catalog version \d+ \(0 databases\)",
                             inst.log().split(f"(pid {old})")[-1])
    except BaseException:
        log_on_failure(inst)
        raise


# ---- two hosts: a table created through the other one ---------------------------------------

NOTES = ("CREATE TABLE notes (customer_id bigint NOT NULL, id bigint NOT NULL, body text, "
         "PRIMARY KEY (customer_id, id))")


def with_notes(doc):
    doc = json.loads(json.dumps(doc))
    for d in doc["databases"].values():
        d["schemas"]["public"]["tables"]["notes"] = {"shard_group": "customer_data"}
    return doc


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_table_created_through_another_host(pg_cluster, hold_db, instances, protocol):
    one, two = instance(pg_cluster, hold_db), instance(pg_cluster, hold_db)
    instances += [one, two]
    try:
        st1 = started(one, with_notes(topology(hold_db)))
        st2 = started(two)		# follows the store on the authoritative shard
        st1.run(NOTES)			# DDL on every shard, through host one
        with st2.connect() as conn:	# host two has never seen the table
            if protocol == "simple":
                psycopg.ClientCursor(conn).execute(
                    "INSERT INTO notes VALUES (%s, %s, %s)", ("7", "1", "seven"))
            else:	# psycopg: str parameters in text format, type left to the server
                conn.execute("INSERT INTO notes VALUES (%s, %s, %s)", ("7", "1", "seven"))
        assert st1.run("SELECT body FROM notes WHERE customer_id = 7") == [("seven",)]
        home = shard_of(st1, "notes", "customer_id = 7")
        placed = {s: count_on(st1, s, "notes") for s in pg_cluster.servers if s != "reference"}
        assert placed == {s: int(s == home) for s in placed}, placed
    except BaseException:
        log_on_failure(one, two)
        raise
