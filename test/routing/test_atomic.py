"""
__neki.tx_mode atomic (issue 17): a transaction that wrote on several shards commits with
two-phase commit (PREPARE TRANSACTION on all but the decision shard, the decision row
committed there, COMMIT PREPARED); a failure rolls every shard back; single-shard
transactions keep their plain COMMIT. The rows are compared with the reference server, and
no prepared transaction is left on any shard.
"""
import contextlib

import pytest

try:
    import psycopg
except ImportError:
    psycopg = None

from conftest import wait_until
from test_routing import Store, create_schema, routing_neki, sharded_database, topology
from test_savepoints import ids_on_shards
from test_txn import no_idle_in_transaction


@pytest.fixture(scope="module")
def store(pg_cluster):
    with sharded_database(pg_cluster, "atomic") as db, \
            routing_neki(pg_cluster, db, topology(db), Store) as st:
        create_schema(st)
        st.both("INSERT INTO countries VALUES ('FR', 'France'), ('DE', 'Germany')")
        yield st


def servers(store):
    return store.cluster.shards + ["auth"]


def prepared(store):
    """{server: [gid]} of the prepared transactions neki left on the database."""
    out = {}
    for s in servers(store):
        rows = store.cluster.sql(s, "SELECT gid FROM pg_prepared_xacts WHERE database = %s",
                                 (store.db,))
        if rows:
            out[s] = [r[0] for r in rows]
    return out


def decisions(store):
    """Every decision row: [(server, gid, commit)]."""
    out = []
    for s in servers(store):
        if store.shard_rows(s, "SELECT to_regclass('__neki.tx_decision')") == [(None,)]:
            continue   # (none there yet)
        rows = store.shard_rows(s, "SELECT gid, commit FROM __neki.tx_decision ORDER BY decided")
        out += [(s, g, c) for g, c in rows]
    return out


def atomic_conn(store):
    conn = store.connect()
    conn.execute("SET __neki.tx_mode = 'atomic'")
    return conn


def ins(i, name="x"):
    return f"INSERT INTO customers VALUES ({i}, '{name}', 'FR')"


def rows(store, ids):
    sql = f"SELECT id, name FROM customers WHERE id IN ({', '.join(map(str, ids))}) ORDER BY id"
    return store.run(sql)


def cleanup(store, ids):
    store.both(f"DELETE FROM customers WHERE id IN ({', '.join(map(str, ids))})")


def test_set_atomic_checks_the_shards_and_shows(store):
    with store.connect() as conn:
        assert conn.execute("SET __neki.tx_mode = 'atomic'").statusmessage == "SET"
        assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("atomic",)
        conn.execute("RESET __neki.tx_mode")
        assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("multi",)
    for s in servers(store):       # the decision table exists on every shard now
        assert store.shard_rows(s, "SELECT to_regclass('__neki.tx_decision') IS NOT NULL") == \
            [(True,)]


@pytest.mark.parametrize("shape", ["block", "implicit", "extended"])
def test_atomic_commit_over_three_shards(store, shape):
    ids = ids_on_shards(store, 3, 4000 + 10 * ["block", "implicit", "extended"].index(shape))
    before = len(decisions(store))
    try:
        with atomic_conn(store) as conn:
            if shape == "block":
                conn.execute("BEGIN")
                for i in ids:
                    conn.execute(ins(i))
                assert conn.execute("COMMIT").statusmessage == "COMMIT"
            elif shape == "implicit":
                psycopg.ClientCursor(conn).execute("; ".join(ins(i) for i in ids))
            else:
                with conn.pipeline():
                    for i in ids:
                        conn.execute(ins(i), binary=True)
        assert rows(store, ids) == [(i, "x") for i in ids]
        assert prepared(store) == {}
        after = decisions(store)
        assert len(after) <= before + 1 and any(c is True for _, _, c in after)
        no_idle_in_transaction(store)
    finally:
        cleanup(store, ids)


def test_the_next_decision_deletes_the_finished_ones(store):
    """A finished transaction's decision row goes with the next decision the same worker
    makes on the same shard (in that transaction)."""
    ids = ids_on_shards(store, 2, 4050)
    try:
        with atomic_conn(store) as conn:
            gids = []
            for name in ("one", "two", "three"):
                conn.execute("BEGIN")
                for i in ids:
                    conn.execute(f"INSERT INTO customers VALUES ({i}, '{name}', 'FR') "
                                 "ON CONFLICT (id) DO UPDATE SET name = excluded.name")
                conn.execute("COMMIT")
                gids.append({g for _, g, _ in decisions(store)})
        assert len(gids[2] - gids[1]) == 1 and len(gids[1] - gids[0]) == 1
        assert not (gids[1] - gids[0]) & gids[2]     # the second's row went with the third
        assert rows(store, ids) == [(i, "three") for i in ids]
    finally:
        cleanup(store, ids)


def test_single_shard_transaction_keeps_its_plain_commit(store):
    a, = ids_on_shards(store, 1, 4100)
    before = len(decisions(store))
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            conn.execute(ins(a))
            conn.execute(f"SELECT * FROM customers WHERE id = {a}")
            conn.execute("COMMIT")
        assert rows(store, [a]) == [(a, "x")]
        assert len(decisions(store)) == before
    finally:
        cleanup(store, [a])


def test_a_cursor_with_hold_is_refused_before_any_prepare(store):
    """Postgres cannot PREPARE a transaction that declared a cursor WITH HOLD: the router
    refuses its atomic COMMIT (0A000) before any PREPARE and rolls every shard back."""
    ids = sorted(ids_on_shards(store, 2, 4200), key=store.customer_shard)
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            for i in ids:
                conn.execute(ins(i))
            conn.execute("DECLARE c CURSOR WITH HOLD FOR SELECT * FROM customers "
                         f"WHERE id = {ids[-1]}")
            with pytest.raises(psycopg.Error) as ei:
                conn.execute("COMMIT")
            assert ei.value.diag.sqlstate == "0A000", ei.value
            assert "rolled back on every shard" in (ei.value.diag.message_detail or "")
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            with pytest.raises(psycopg.Error) as ei:
                conn.execute("FETCH c")
            assert ei.value.diag.sqlstate == "34000"
        assert rows(store, ids) == []
        assert prepared(store) == {}
        no_idle_in_transaction(store)
    finally:
        cleanup(store, ids)


def test_rollback_and_savepoints_in_atomic_mode(store):
    ids = ids_on_shards(store, 3, 4300)
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            conn.execute(ins(ids[0]))
            conn.execute("SAVEPOINT s")
            conn.execute(ins(ids[1]))
            conn.execute("ROLLBACK TO s")
            conn.execute(ins(ids[2]))
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            conn.execute(f"UPDATE customers SET name = 'u' WHERE id IN ({ids[0]}, {ids[2]})")
            conn.execute("ROLLBACK")
        assert rows(store, ids) == [(ids[0], "x"), (ids[2], "x")]
        assert prepared(store) == {}
    finally:
        cleanup(store, ids)


def test_set_atomic_reports_a_shard_without_prepared_transactions(store):
    """A shard with max_prepared_transactions = 0 fails the SET (55000, the shard named, a
    HINT); the session keeps its mode. (The shard is restarted with the setting, then back.)"""
    victim = store.cluster.shards[-1]
    store.cluster.sql(victim, "ALTER SYSTEM SET max_prepared_transactions = 0")
    store.cluster.stop_server(victim)
    store.cluster.start_server(victim)
    try:
        seen = []

        def refused():
            try:
                with store.connect() as conn:
                    conn.execute("SET __neki.tx_mode = 'atomic'")
                seen.append("SET")
                return None
            except psycopg.Error as e:
                if e.diag.sqlstate == "55000":
                    return e
                seen.append(repr(e))   # (the pool's retry of the restarted shard)
                return None
        try:
            e = wait_until(refused, 20, what="the SET to be refused")
        except TimeoutError:
            raise AssertionError(seen[-3:])
        assert e.diag.sqlstate == "55000", e
        assert "max_prepared_transactions is 0" in e.diag.message_primary
        assert victim in (e.diag.message_detail or ""), e.diag.message_detail
        assert "max_prepared_transactions above 0" in (e.diag.message_hint or "")
        with store.connect() as conn:
            with pytest.raises(psycopg.Error):
                conn.execute("SET __neki.tx_mode = 'atomic'")
            assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("multi",)
            cur = conn.execute("SELECT * FROM __neki.list_shards()")
            assert cur.description[-1].name == "max_prepared_transactions"
            mpx = {r[0]: r[-1] for r in cur.fetchall()}
        assert mpx[victim] == 0, mpx       # (the listing reports it too)
        assert all(v > 0 for s, v in mpx.items() if s != victim), mpx
        startup_atomic_is_checked_at_commit(store, victim, store.connect(options=STARTUP_ATOMIC))
        with routing_neki(store.cluster, store.db, topology(store.db), Store,
                          db_options="tx_mode=atomic") as ini:      # ([databases] tx_mode)
            startup_atomic_is_checked_at_commit(store, victim, ini.connect())
    finally:
        store.cluster.sql(victim, "ALTER SYSTEM RESET max_prepared_transactions")
        store.cluster.stop_server(victim)
        store.cluster.start_server(victim)


STARTUP_ATOMIC = "-c __neki.tx_mode=atomic"


def startup_atomic_is_checked_at_commit(store, victim, session):
    """The startup option (or the [databases] key tx_mode) takes atomic mode without SET's
    check (<session> starts); the check runs at the first COMMIT needing the two-phase commit, on its participants: the
    shard without prepared transactions fails it with SET's error (55000, the shard named,
    the HINT), before anything is prepared, the transaction rolled back on every shard."""
    ids = ids_on_shards(store, len(store.cluster.shards), 4700)
    assert victim in {store.customer_shard(i) for i in ids}
    with session as conn:
        assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("atomic",)
        conn.execute("BEGIN")
        for i in ids:
            conn.execute(ins(i))
        with pytest.raises(psycopg.Error) as ei:
            conn.execute("COMMIT")
        e = ei.value
        assert e.diag.sqlstate == "55000", e
        assert "max_prepared_transactions is 0" in e.diag.message_primary
        assert victim in (e.diag.message_detail or ""), e.diag.message_detail
        assert "rolled back on every shard" in (e.diag.message_detail or "")
        assert "max_prepared_transactions above 0" in (e.diag.message_hint or "")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert rows(store, ids) == []
    assert prepared(store) == {}
    no_idle_in_transaction(store)


@pytest.mark.parametrize("source", ["options", "ini"])
def test_startup_atomic_commits_after_its_check(store, source):
    """A session whose atomic mode came from the startup option or the [databases] key
    tx_mode commits over several shards with two-phase commit (its check at the first such
    COMMIT passes), again on the next; the key's other values are the session's first too."""
    ids = ids_on_shards(store, 3, 4750)
    more = ids_on_shards(store, 3, 4780)
    before = gids(store)
    with contextlib.ExitStack() as stack:
        if source == "ini":
            ini = stack.enter_context(routing_neki(store.cluster, store.db, topology(store.db),
                                                   Store, db_options="tx_mode=atomic"))
            with ini.connect(options="-c __neki.tx_mode=multi") as conn:    # (options win)
                assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("multi",)
            session = ini.connect()
        else:
            session = store.connect(options=STARTUP_ATOMIC)
        commit_twice(store, session, ids, more, before)
    if source == "ini":
        with routing_neki(store.cluster, store.db, topology(store.db), Store,
                          db_options="tx_mode=single") as single, single.connect() as conn:
            assert conn.execute("SHOW __neki.tx_mode").fetchone() == ("single",)


def commit_twice(store, session, ids, more, before):
    try:
        with session as conn:
            for batch in (ids, more):
                conn.execute("BEGIN")
                for i in batch:
                    conn.execute(ins(i))
                assert conn.execute("COMMIT").statusmessage == "COMMIT"
        assert rows(store, ids + more) == [(i, "x") for i in sorted(ids + more)]
        assert gids(store) - before, "no decision row: not committed atomically"
        assert prepared(store) == {}
    finally:
        cleanup(store, ids + more)


def gids(store):
    return {g for _, g, _ in decisions(store)}


def participants(store, gid):
    """The shards of atomic transaction <gid>: its decision shard and the prepared ones."""
    for s in servers(store):
        rows = store.shard_rows(s, "SELECT participants FROM __neki.tx_decision "
                                f"WHERE gid = '{gid}'")
        if rows:
            return {gid.rsplit(":", 1)[1]} | set(filter(None, rows[0][0].split(",")))
    raise AssertionError("no decision row for " + gid)


@pytest.mark.parametrize("shape", ["block", "implicit"])
def test_read_only_participants_commit_plainly(store, shape):
    """A shard that only ran SELECTs (and assigned no xid) gets a plain COMMIT: a read on
    one shard and a write on another is no two-phase commit (no decision row); reads on
    two shards neither; reads on one and writes on two prepare only the writers."""
    a, b, c = ids_on_shards(store, 3, 4400 + 10 * ["block", "implicit"].index(shape))
    store.run(ins(a, "a"))
    try:
        with atomic_conn(store) as conn:
            cur = psycopg.ClientCursor(conn)
            for stmts, writers in (
                    ([f"SELECT name FROM customers WHERE id = {a}", ins(b)], None),
                    ([f"SELECT name FROM customers WHERE id = {a}",
                      f"SELECT name FROM customers WHERE id = {b}"], None),
                    ([f"SELECT name FROM customers WHERE id = {a}",
                      f"UPDATE customers SET name = 'y' WHERE id = {b}", ins(c)],
                     {store.customer_shard(b), store.customer_shard(c)})):
                before = gids(store)
                if shape == "block":
                    cur.execute("BEGIN")
                    for s in stmts:
                        cur.execute(s)
                    assert cur.execute("COMMIT").statusmessage == "COMMIT"
                else:
                    cur.execute("; ".join(stmts))
                new = gids(store) - before
                if writers is None:
                    assert new == set(), stmts
                else:
                    assert len(new) == 1, stmts
                    assert participants(store, new.pop()) == writers
        assert rows(store, [a, b, c]) == [(a, "a"), (b, "y"), (c, "x")]
        assert prepared(store) == {}
        no_idle_in_transaction(store)
    finally:
        cleanup(store, [a, b, c])


def test_a_select_that_writes_through_a_function_is_prepared(store):
    """A SELECT calling a function that writes assigns an xid on its shard: that shard is
    asked before the PREPAREs and takes part in the two-phase commit; when the other
    shard's commit fails (a deferred unique constraint), the function's write is rolled
    back with it."""
    a, b = ids_on_shards(store, 2, 4500)
    store.run(ins(a))
    store.run("CREATE FUNCTION atomic_note(c bigint, l int) RETURNS bigint LANGUAGE plpgsql "
              "AS $$BEGIN INSERT INTO order_items VALUES (c, 1, l, 'fn', 1); RETURN c; END$$")
    store.run("ALTER TABLE order_items ADD CONSTRAINT atomic_one_sku UNIQUE (customer_id, sku) "
              "DEFERRABLE INITIALLY DEFERRED")
    note = f"SELECT atomic_note(id, 60) FROM customers WHERE id = {a}"
    try:
        with atomic_conn(store) as conn:
            before = gids(store)
            conn.execute("BEGIN")
            conn.execute(note)
            conn.execute(ins(b))
            conn.execute("COMMIT")
            new = gids(store) - before
            assert len(new) == 1
            assert participants(store, new.pop()) == {store.customer_shard(a),
                                                      store.customer_shard(b)}
            conn.execute(f"DELETE FROM order_items WHERE customer_id = {a}")
            conn.execute("BEGIN")
            conn.execute(note)
            conn.execute(f"INSERT INTO order_items VALUES ({b}, 1, 61, 'B', 1), "
                         f"({b}, 1, 62, 'B', 1)")
            with pytest.raises(psycopg.errors.UniqueViolation) as ei:
                conn.execute("COMMIT")
            assert "rolled back on every shard" in (ei.value.diag.message_detail or "")
        assert store.run("SELECT customer_id, line FROM order_items WHERE customer_id IN "
                         f"({a}, {b})") == []
        assert prepared(store) == {}
        no_idle_in_transaction(store)
    finally:
        store.run(f"DELETE FROM order_items WHERE customer_id IN ({a}, {b})")
        store.run("ALTER TABLE order_items DROP CONSTRAINT atomic_one_sku")
        store.run("DROP FUNCTION atomic_note(bigint, int)")
        cleanup(store, [a, b])


def test_a_reader_lost_before_the_commit_rolls_every_shard_back(store):
    """The backend of the shard that only read is terminated before the COMMIT: nothing is
    committed anywhere (the session's transaction is aborted when the loss is seen first,
    else the round asking the reader whether it wrote fails and rolls every shard back with
    a DETAIL saying so), nothing is prepared."""
    a, b, c = ids_on_shards(store, 3, 4600)
    reader = store.customer_shard(a)
    store.run(ins(a, "a"))
    try:
        with atomic_conn(store) as conn:
            conn.execute("BEGIN")
            conn.execute(f"SELECT name FROM customers WHERE id = {a}")
            conn.execute(ins(b))
            conn.execute(ins(c))
            pids = store.cluster.sql(reader, "SELECT pid FROM pg_stat_activity WHERE "
                                     "datname = %s AND state = 'idle in transaction'",
                                     (store.db,))
            assert len(pids) == 1, pids
            store.cluster.sql(reader, "SELECT pg_terminate_backend(%s)", (pids[0][0],))
            wait_until(lambda: not store.cluster.sql(
                reader, "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (pids[0][0],)),
                10, what="the reader's backend gone")
            try:    # (the loss seen first: the transaction is aborted, COMMIT rolls back)
                assert conn.execute("COMMIT").statusmessage == "ROLLBACK"
            except psycopg.Error as e:     # (seen by the round asking the reader)
                assert "rolled back on every shard" in (e.diag.message_detail or ""), e
        assert rows(store, [a, b, c]) == [(a, "a")]
        assert prepared(store) == {}
        no_idle_in_transaction(store)
    finally:
        cleanup(store, [a, b, c])
