"""
__neki.gsi_build (issue 19; src/admin/gsibuild.c): a GSI declared on an owner that already
has rows is built online. The storefront's `orders_by_id` (unique, lookup sharded by id)
starts disabled; the build makes it write-only (maintained, not read), waits for the routers
and the older transactions, fills the lookup table from the owner shards in primary-key order,
verifies (a pass that writes nothing, no duplicate, no orphan) and enables it. Checked on the
shards directly: the lookup table equals the owner rows exactly, also when clients insert,
update and delete owners through neki during the build; duplicates put the index back to
disabled with 23505; the write-only state is maintained but not read, and a build resumes
from it. Also: wait_for_data_topology returns only once no statement planned with an older
revision still runs (what the build's first wait relies on).
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

from conftest import wait_until
from test_routing import SCHEMA, Store, lit, routing_neki, set_topology, sharded_database, \
    topology

LOOKUP = "CREATE TABLE orders_by_id (id bigint PRIMARY KEY, customer_id bigint NOT NULL)"


def gsi_state(st, **flags):
    """The storefront topology with orders_by_id's flags set to <flags>."""
    doc = topology(st.db)
    g = doc["databases"][st.db]["global_secondary_indexes"]["orders_by_id"]
    g.update(flags)
    return doc


@contextlib.contextmanager
def building_store(cluster, prefix):
    """The storefront (its orders_by_id declared disabled) with its schema and lookup table,
    for __neki.gsi_build (test/fault/test_gsi_recovery.py builds under a stopped shard)."""
    if psycopg is None:
        pytest.skip("python3-psycopg is not installed")
    with sharded_database(cluster, prefix) as db, \
            routing_neki(cluster, db, topology(db), Store) as st:
        for sql in SCHEMA + [LOOKUP]:
            st.run(sql)
        yield st


@pytest.fixture(scope="module")
def gb(pg_cluster):
    with building_store(pg_cluster, "gsib") as st:
        yield st


@pytest.fixture
def st(gb):
    """Owners and lookup rows empty, the index disabled."""
    set_topology(gb.neki, gsi_state(gb, enabled=False))
    for s in gb.cluster.shards:
        gb.shard_rows(s, "TRUNCATE orders, orders_by_id")
    return gb


def everywhere(st, sql):
    return sorted(r for s in st.cluster.shards for r in st.shard_rows(s, sql))


def assert_exact(st):
    """The lookup table holds one row per owner row, nothing else."""
    owners = everywhere(st, "SELECT id, customer_id FROM orders")
    assert everywhere(st, "SELECT id, customer_id FROM orders_by_id") == owners
    return owners


def load(st, n, start=1):
    rows = ", ".join(f"({i % 97 + 1}, {i}, 'new', {i}.25)" for i in range(start, start + n))
    st.run(f"INSERT INTO orders VALUES {rows}")


def build(st, *args, port="admin"):
    """__neki.gsi_build(<args>) on the admin port (or the main port): its one row as a dict."""
    call = "SELECT * FROM __neki.gsi_build(" + ", ".join(args or ["'orders_by_id'"]) + ")"
    connect = st.neki.admin_connect if port == "admin" else st.connect
    with connect() as conn:
        cur = conn.execute(call)
        return dict(zip([d.name for d in cur.description], cur.fetchone()))


def declared(st):
    with st.neki.admin_connect() as conn:
        doc = json.loads(conn.execute(
            "SELECT * FROM __neki.get_data_topology()").fetchone()[0])
    return doc["databases"][st.db]["global_secondary_indexes"]["orders_by_id"]


def plan(st, sql):
    return "\n".join(r[0] for r in st.run("EXPLAIN (NEKI_PLAN, FORMAT TEXT) " + sql))


def test_build_fills_verifies_and_enables(st):
    load(st, 2500)
    assert everywhere(st, "SELECT id FROM orders_by_id") == []
    out = build(st)
    assert out["gsi_name"] == "orders_by_id"
    assert (out["rows_written"], out["rows_verified"], out["passes"]) == (2500, 2500, 2)
    assert out["revision"] > 0
    assert len(assert_exact(st)) == 2500
    g = declared(st)
    assert g["enabled"] is True and "write_only" not in g
    # the index works: reads go through it, writes keep it
    assert "Secondary Index: orders_by_id" in plan(st, "SELECT * FROM orders WHERE id = 201")
    assert st.run("SELECT customer_id, id FROM orders WHERE id = 201") == [(201 % 97 + 1, 201)]
    st.run("INSERT INTO orders VALUES (5, 90001, 'new', 1)")
    st.run("DELETE FROM orders WHERE id = 17")
    assert len(assert_exact(st)) == 2500
    with pytest.raises(psycopg.errors.UniqueViolation):
        st.run("INSERT INTO orders VALUES (6, 90001, 'new', 1)")


def writer(st, stop, k, errors, progress):
    """Insert, update and delete owners through neki (an id moves by DELETE and INSERT: the
    primary key is not assignable)."""
    n = 0
    with st.connect(autocommit=True) as conn:
        while not stop.is_set():
            base = 1000000 * (k + 1) + n * 3
            old = n * 7 % 2500 + 1
            victim = 1 + (k * 800 + n * 5) % 2500
            try:
                conn.execute(f"INSERT INTO orders VALUES ({k + 1}, {base}, 'new', 1), "
                             f"({k + 50}, {base + 1}, 'new', 2), ({k + 20}, {base + 2}, 'x', 3)")
                conn.execute(f"UPDATE orders SET total = total + 1, status = 'paid' "
                             f"WHERE id = {old} AND customer_id = {old % 97 + 1}")
                conn.execute(f"DELETE FROM orders WHERE id = {base + 2} AND customer_id = {k + 20}")
                with conn.transaction():
                    conn.execute(f"DELETE FROM orders WHERE id = {base + 1} "
                                 f"AND customer_id = {k + 50}")
                    conn.execute(f"INSERT INTO orders VALUES ({k + 60}, {base + 1}, 'moved', 2)")
                conn.execute(f"DELETE FROM orders WHERE id = {victim} "
                             f"AND customer_id = {victim % 97 + 1}")
            except psycopg.Error as e:
                errors.append(f"{e.diag.sqlstate} {e.diag.message_primary}")
            n += 1
            progress.append(n)


def test_build_under_a_write_load_misses_nothing(st):
    load(st, 2500)
    stop, errors, progress = threading.Event(), [], []
    threads = [threading.Thread(target=writer, args=(st, stop, k, errors, progress))
               for k in range(3)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(progress) > 10, 30, what="the writers run")
        out = build(st)
        mark = len(progress)
        # the writers go on against the enabled index
        wait_until(lambda: len(progress) > mark + 10, 30, what="the writers go on")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert errors == []
    assert out["passes"] >= 2
    owners = assert_exact(st)
    assert any(i > 1000000 for i, _ in owners)
    assert declared(st)["enabled"] is True


def test_build_with_duplicates_disables_the_index_again(st):
    load(st, 300)
    # the same id on two shards, written while the index is disabled (nothing checks it)
    a = st.customer_shard(1)
    other = next(c for c in range(2, 97) if st.customer_shard(c) != a)
    st.run(f"INSERT INTO orders VALUES (1, 77777, 'new', 1), ({other}, 77777, 'new', 2)")
    with pytest.raises(psycopg.errors.UniqueViolation) as e:
        build(st)
    assert "orders_by_id" in e.value.diag.message_primary
    assert "77777" in e.value.diag.message_detail
    g = declared(st)
    assert g["enabled"] is False and "write_only" not in g
    # nothing reads through it: the scatter finds both rows
    assert sorted(st.run("SELECT customer_id FROM orders WHERE id = 77777")) == \
        sorted([(1,), (other,)])


def test_duplicates_on_one_shard_are_found(st):
    # two owner rows of one customer with one id: one lookup row could name both
    st.run("ALTER TABLE orders DROP CONSTRAINT orders_pkey")
    try:
        st.run("ALTER TABLE orders ADD PRIMARY KEY (customer_id, id, status)")
        st.run("INSERT INTO orders VALUES (3, 555, 'new', 1), (3, 555, 'paid', 1)")
        with pytest.raises(psycopg.errors.UniqueViolation) as e:
            build(st)
        assert "555" in e.value.diag.message_detail
        assert declared(st)["enabled"] is False
    finally:
        for s in st.cluster.shards:
            st.shard_rows(s, "TRUNCATE orders")
        st.run("ALTER TABLE orders DROP CONSTRAINT orders_pkey")
        st.run("ALTER TABLE orders ADD PRIMARY KEY (customer_id, id)")


def test_write_only_is_maintained_not_read_and_a_build_resumes(st):
    load(st, 400)
    set_topology(st.neki, gsi_state(st, enabled=True, write_only=True))
    st.run("INSERT INTO orders VALUES (4, 60001, 'new', 1), (9, 60002, 'new', 1)")
    st.run("DELETE FROM orders WHERE id = 60002")
    assert everywhere(st, "SELECT id, customer_id FROM orders_by_id") == [(60001, 4)]
    assert "Secondary Index" not in plan(st, "SELECT * FROM orders WHERE id = 60001")
    with pytest.raises(psycopg.errors.FeatureNotSupported):
        st.run("SELECT * FROM orders_by_id")
    # resumed (from the main port): the lookup rows written meanwhile stay, the rest is filled
    out = build(st, "'orders_by_id'", f"{lit(st.db)}", "'30 s'", port="main")
    assert (out["rows_written"], out["rows_verified"]) == (400, 401)
    assert len(assert_exact(st)) == 401
    assert "Secondary Index: orders_by_id" in plan(st, "SELECT * FROM orders WHERE id = 60001")


def test_build_refusals(st):
    with st.neki.admin_connect() as conn:
        with pytest.raises(psycopg.errors.UndefinedObject):
            conn.execute("SELECT * FROM __neki.gsi_build('no_such_index')")
        rows = conn.execute("SELECT rule FROM __neki.validate_data_topology("
                            f"{lit(json.dumps(gsi_state(st, write_only=True)))}, true)"
                            ).fetchall()
        assert ("gsi/write-only",) in rows
        names = [r[0] for r in conn.execute("SELECT name FROM __neki.list_metafuncs()")]
        assert "gsi_build" in names
    set_topology(st.neki, gsi_state(st, enabled=True))
    with st.neki.admin_connect() as conn:
        with pytest.raises(psycopg.errors.ObjectNotInPrerequisiteState):
            conn.execute("SELECT * FROM __neki.gsi_build('orders_by_id')")


def test_wait_for_topology_waits_for_statements_planned_before(st):
    """A revision counts as switched to only once no statement planned with an older one
    still runs on that router."""
    load(st, 10)
    ended = []

    def slow():
        with st.connect() as conn:
            conn.execute("SELECT pg_sleep(2), id FROM orders WHERE customer_id = 2")
        ended.append(time.monotonic())

    t = threading.Thread(target=slow)
    t.start()
    try:
        wait_until(lambda: any("pg_sleep" in (r[0] or "") for s in st.cluster.shards
                               for r in st.shard_rows(s, "SELECT query FROM pg_stat_activity "
                                                      "WHERE state = 'active'")),
                   10, what="the slow statement runs")
        set_topology(st.neki, gsi_state(st, enabled=False, ignore_null=True))
        with st.neki.admin_connect() as conn:
            rev = conn.execute(
                "SELECT * FROM __neki.get_data_topology_revision()").fetchone()[0]
            conn.execute(f"SELECT * FROM __neki.wait_for_data_topology({rev}, '20 s')")
            waited = time.monotonic()
    finally:
        t.join(30)
    assert ended and ended[0] <= waited


def status(st):
    """__neki.gsi_build_status() as dicts: the running build first, then the last one."""
    with st.neki.admin_connect() as conn:
        cur = conn.execute("SELECT * FROM __neki.gsi_build_status()")
        return [dict(zip([d.name for d in cur.description], r)) for r in cur.fetchall()]


def test_an_older_transaction_is_waited_for_and_a_timeout_leaves_it_write_only(st):
    load(st, 50)
    shard = st.customer_shard(2)
    old = st.cluster.connect(shard, dbname=st.db, autocommit=False)
    try:
        old.execute("SELECT * FROM orders WHERE customer_id = 2")   # (a transaction begins)
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            build(st, "'orders_by_id'", "timeout => '1 s'")
        assert shard in e.value.diag.message_detail
        assert "resumes" in e.value.diag.message_hint
        assert declared(st).get("write_only") is True
        ended = status(st)[-1]
        assert ended["state"] == "failed, write-only" and "timed out" in ended["error"]
        # again, while the transaction stays open: the build waits for it, as its status says
        result = {}
        t = threading.Thread(target=lambda: result.update(row=build(st)))
        t.start()
        try:
            wait_until(lambda: (status(st)[0]["state"], status(st)[0]["shard_uid"]) ==
                       ("waiting for older transactions", shard), 30, what="the build waits")
        finally:
            old.rollback()
            t.join(60)
    finally:
        old.close()
    assert result["row"]["rows_written"] == 50
    assert len(assert_exact(st)) == 50
    ended = status(st)
    assert len(ended) == 1 and ended[0]["state"] == "enabled" and ended[0]["error"] is None
    assert (ended[0]["rows_written"], ended[0]["rows_scanned"], ended[0]["pass"]) == (50, 50, 2)
